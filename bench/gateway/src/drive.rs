//! `drive`: sends a key file's requests to a proxy and checks every answer.
//!
//! `scripts/build-pgo.sh` trains a profile-guided build with it. It needs
//! nothing outside this repository (wrk and h2load are Debian packages, and a
//! build should need only cargo). It is not a benchmark: it reports
//! counts, not times.
//!
//! Each of `--connections` connections sends requests one after another
//! (HTTP/1.1 keep-alive), or `--streams` at once (HTTP/2: `h2c` with prior
//! knowledge in cleartext, `h2` over TLS). With `--tls-ca FILE` the
//! connections are TLS, the proxy's certificate checked against FILE's
//! (`loadring-gatebench cert` makes a pair), ALPN `http/1.1` or `h2` as
//! the protocol says. The keys are taken in file order, wrapping around, until
//! `--requests` have been sent. The key goes in the `X-Key` header, or in
//! the path as `/k/KEY` (`--key-in path`). Any answer other than 200, or a
//! connection that fails, makes the whole drive fail.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{self, ClientConfig, RootCertStore};
use tokio_rustls::TlsConnector;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpStream;

use crate::Flags;

/// How a request carries its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyIn {
    Header,
    Path,
}

/// The wire protocol towards the proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Http1,
    /// HTTP/2 in cleartext, with prior knowledge.
    H2c,
    /// HTTP/2 over TLS (ALPN `h2`).
    H2,
}

/// What to send.
#[derive(Debug, Clone)]
pub struct Plan {
    pub to: String,
    pub keys: Arc<Vec<String>>,
    pub requests: usize,
    pub connections: usize,
    pub streams: usize,
    pub protocol: Protocol,
    pub key_in: KeyIn,
    /// TLS, trusting the certificates in this PEM file.
    pub tls_ca: Option<String>,
}

/// What came back.
#[derive(Debug, Default)]
pub struct Outcome {
    pub answered: u64,
}

pub fn main(flags: &Flags) -> Result<(), String> {
    let plan = plan_of(flags)?;
    let runtime = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    let outcome = runtime.block_on(drive(plan))?;
    println!("{} requests answered 200", outcome.answered);
    Ok(())
}

fn plan_of(flags: &Flags) -> Result<Plan, String> {
    let to = flags.required("to")?.to_string();
    let path = flags.required("keys")?;
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let keys: Vec<String> = text.lines().map(str::to_string).collect();
    let protocol = match flags.get("protocol").unwrap_or("http1") {
        "http1" => Protocol::Http1,
        "h2c" => Protocol::H2c,
        "h2" => Protocol::H2,
        other => return Err(format!("--protocol: http1, h2c or h2, not {other:?}")),
    };
    let key_in = match flags.get("key-in").unwrap_or("header") {
        "header" => KeyIn::Header,
        "path" => KeyIn::Path,
        other => return Err(format!("--key-in: header or path, not {other:?}")),
    };
    Ok(Plan {
        to,
        keys: Arc::new(keys),
        requests: flags.number("requests", 50_000)?,
        connections: flags.number("connections", 64)?,
        streams: flags.number("streams", 8)?,
        protocol,
        key_in,
        tls_ca: flags.get("tls-ca").map(str::to_string),
    })
}

/// Sends the plan's requests; fails on the first answer that is not 200.
pub async fn drive(plan: Plan) -> Result<Outcome, String> {
    if plan.keys.is_empty() || plan.keys.iter().any(|k| !is_token(k)) {
        return Err(
            "--keys: a file of one key a line, each 1+ letters, digits, '-', '_' or '.'".into(),
        );
    }
    if plan.connections == 0 || plan.streams == 0 {
        return Err("--connections and --streams: 1 or more".into());
    }
    let tls = match (&plan.tls_ca, plan.protocol) {
        (Some(_), Protocol::H2c) => {
            return Err(
                "--tls-ca: not with --protocol h2c (cleartext); h2 is HTTP/2 over TLS".into(),
            )
        }
        (None, Protocol::H2) => return Err("--protocol h2: HTTP/2 over TLS needs --tls-ca".into()),
        (Some(ca), protocol) => Some(Tls::new(ca, &plan.to, protocol)?),
        (None, _) => None,
    };
    let next = Arc::new(AtomicUsize::new(0));
    let answered = Arc::new(AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..plan.connections {
        let stream = TcpStream::connect(&plan.to)
            .await
            .map_err(|e| format!("{}: {e}", plan.to))?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        let sender = match &tls {
            None => handshake(TokioIo::new(stream), plan.protocol).await?,
            Some(tls) => handshake(TokioIo::new(tls.connect(stream).await?), plan.protocol).await?,
        };
        match sender {
            Sender::Http1(_) => {
                tasks.spawn(send_all(
                    sender,
                    plan.clone(),
                    next.clone(),
                    answered.clone(),
                ));
            }
            Sender::H2(streams) => {
                for _ in 0..plan.streams {
                    let sender = Sender::H2(streams.clone());
                    tasks.spawn(send_all(
                        sender,
                        plan.clone(),
                        next.clone(),
                        answered.clone(),
                    ));
                }
            }
        }
    }
    while let Some(done) = tasks.join_next().await {
        // On the first failure the set is dropped, which aborts the others.
        done.map_err(|e| e.to_string())??;
    }
    Ok(Outcome {
        answered: answered.load(Relaxed),
    })
}

/// The client side of TLS towards the proxy.
struct Tls {
    connector: TlsConnector,
    name: ServerName<'static>,
    /// The ALPN protocol the proxy must choose.
    alpn: &'static [u8],
}

impl Tls {
    /// Trusting the certificates of the PEM file `ca`, for the host of `to`.
    fn new(ca: &str, to: &str, protocol: Protocol) -> Result<Self, String> {
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_file_iter(ca).map_err(|e| format!("--tls-ca {ca}: {e}"))? {
            let cert = cert.map_err(|e| format!("--tls-ca {ca}: {e}"))?;
            roots.add(cert).map_err(|e| format!("--tls-ca {ca}: {e}"))?;
        }
        if roots.is_empty() {
            return Err(format!("--tls-ca {ca}: no certificate in it"));
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let alpn: &'static [u8] = if protocol == Protocol::H2 {
            b"h2"
        } else {
            b"http/1.1"
        };
        config.alpn_protocols = vec![alpn.to_vec()];
        let host = to.rsplit_once(':').map_or(to, |(host, _)| host);
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let name = ServerName::try_from(host.to_string())
            .map_err(|e| format!("--to {to}: {host:?} is no TLS server name: {e}"))?;
        Ok(Tls {
            connector: TlsConnector::from(Arc::new(config)),
            name,
            alpn,
        })
    }

    async fn connect(
        &self,
        stream: TcpStream,
    ) -> Result<tokio_rustls::client::TlsStream<TcpStream>, String> {
        let stream = self
            .connector
            .connect(self.name.clone(), stream)
            .await
            .map_err(|e| format!("TLS handshake with {:?}: {e}", self.name))?;
        let chosen = stream.get_ref().1.alpn_protocol();
        if chosen != Some(self.alpn) {
            return Err(format!(
                "the proxy chose ALPN {:?}, not {:?}",
                chosen.map(String::from_utf8_lossy),
                String::from_utf8_lossy(self.alpn)
            ));
        }
        Ok(stream)
    }
}

/// The sender of one connection (for HTTP/2, of all its streams).
async fn handshake<I>(io: I, protocol: Protocol) -> Result<Sender, String>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    Ok(match protocol {
        Protocol::Http1 => {
            let (sender, connection) = hyper::client::conn::http1::handshake(io)
                .await
                .map_err(|e| e.to_string())?;
            tokio::spawn(connection);
            Sender::Http1(sender)
        }
        Protocol::H2c | Protocol::H2 => {
            let (sender, connection) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                    .await
                    .map_err(|e| e.to_string())?;
            tokio::spawn(connection);
            Sender::H2(sender)
        }
    })
}

enum Sender {
    Http1(hyper::client::conn::http1::SendRequest<Empty<Bytes>>),
    H2(hyper::client::conn::http2::SendRequest<Empty<Bytes>>),
}

async fn send_all(
    mut sender: Sender,
    plan: Plan,
    next: Arc<AtomicUsize>,
    answered: Arc<AtomicU64>,
) -> Result<(), String> {
    loop {
        let n = next.fetch_add(1, Relaxed);
        if n >= plan.requests {
            return Ok(());
        }
        let request = request_for(&plan, &plan.keys[n % plan.keys.len()])?;
        let response = match &mut sender {
            Sender::Http1(s) => {
                s.ready().await.map_err(|e| e.to_string())?;
                s.send_request(request).await
            }
            Sender::H2(s) => {
                s.ready().await.map_err(|e| e.to_string())?;
                s.send_request(request).await
            }
        }
        .map_err(|e| format!("request {n}: {e}"))?;
        let status = response.status();
        response
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("request {n}'s body: {e}"))?;
        if status != StatusCode::OK {
            return Err(format!("request {n}: answered {status}"));
        }
        answered.fetch_add(1, Relaxed);
    }
}

fn request_for(plan: &Plan, key: &str) -> Result<Request<Empty<Bytes>>, String> {
    let path = match plan.key_in {
        KeyIn::Header => "/".to_string(),
        KeyIn::Path => format!("/k/{key}"),
    };
    let builder = match plan.protocol {
        // HTTP/1.1 sends the origin form and a Host header.
        Protocol::Http1 => Request::get(path).header(http::header::HOST, &plan.to),
        // HTTP/2 takes the authority from the URI.
        Protocol::H2c => Request::get(format!("http://{}{path}", plan.to)),
        Protocol::H2 => Request::get(format!("https://{}{path}", plan.to)),
    };
    let builder = match plan.key_in {
        KeyIn::Header => builder.header("x-key", key),
        KeyIn::Path => builder,
    };
    builder.body(Empty::new()).map_err(|e| e.to_string())
}

fn is_token(key: &str) -> bool {
    !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::sync::Mutex;

    use http_body_util::Full;
    use hyper::body::Incoming;
    use hyper::service::service_fn;
    use hyper_util::server::conn::auto;
    use tokio::net::TcpListener;
    use tokio_rustls::TlsAcceptor;

    type Seen = Arc<Mutex<HashMap<String, u64>>>;

    /// A server that answers `status` and records each request's key
    /// (`X-Key`, or the path after `/k/`), with its HTTP version.
    async fn server(status: StatusCode) -> (String, Seen) {
        server_with(status, None).await
    }

    /// `server` over TLS with the certificate `cert::write` made in `dir`,
    /// offering the ALPN protocols `alpn`.
    async fn tls_server(dir: &std::path::Path, alpn: &[&[u8]]) -> (String, Seen) {
        use rustls_pki_types::PrivateKeyDer;
        let certs = CertificateDer::pem_file_iter(dir.join("gateway.crt"))
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let key = PrivateKeyDer::from_pem_file(dir.join("gateway.key")).unwrap();
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        server_with(StatusCode::OK, Some(TlsAcceptor::from(Arc::new(config)))).await
    }

    async fn server_with(status: StatusCode, tls: Option<TlsAcceptor>) -> (String, Seen) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let seen: Seen = Arc::default();
        let record = seen.clone();
        tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                let (record, tls) = (record.clone(), tls.clone());
                tokio::spawn(async move {
                    let service = service_fn(move |request: Request<Incoming>| {
                        let key = match request.headers().get("x-key") {
                            Some(v) => v.to_str().unwrap().to_string(),
                            None => request.uri().path().trim_start_matches("/k/").to_string(),
                        };
                        let entry = format!("{:?} {key}", request.version());
                        *record.lock().unwrap().entry(entry).or_default() += 1;
                        async move {
                            let mut answer = http::Response::new(Full::new(Bytes::from("ok")));
                            *answer.status_mut() = status;
                            Ok::<_, std::convert::Infallible>(answer)
                        }
                    });
                    let builder = auto::Builder::new(TokioExecutor::new());
                    let _ = match tls {
                        None => {
                            builder
                                .serve_connection(TokioIo::new(stream), service)
                                .await
                        }
                        Some(tls) => {
                            let Ok(stream) = tls.accept(stream).await else {
                                return;
                            };
                            builder
                                .serve_connection(TokioIo::new(stream), service)
                                .await
                        }
                    };
                });
            }
        });
        (addr, seen)
    }

    fn plan(to: &str, protocol: Protocol, key_in: KeyIn, requests: usize) -> Plan {
        Plan {
            to: to.to_string(),
            keys: Arc::new(vec!["a".into(), "b".into(), "c".into()]),
            requests,
            connections: 4,
            streams: 3,
            protocol,
            key_in,
            tls_ca: None,
        }
    }

    #[tokio::test]
    async fn every_request_is_sent_once_with_its_key_where_asked() {
        // Keys in file order, wrapping: 100 requests over a, b, c = 34, 33, 33.
        let cases = [
            (
                Protocol::Http1,
                KeyIn::Header,
                100,
                "HTTP/1.1",
                [34, 33, 33],
            ),
            (Protocol::Http1, KeyIn::Path, 32, "HTTP/1.1", [11, 11, 10]),
            (Protocol::H2c, KeyIn::Path, 31, "HTTP/2.0", [11, 10, 10]),
            (Protocol::H2c, KeyIn::Header, 3, "HTTP/2.0", [1, 1, 1]),
        ];
        for (protocol, key_in, requests, version, counts) in cases {
            let (to, seen) = server(StatusCode::OK).await;
            let outcome = drive(plan(&to, protocol, key_in, requests)).await.unwrap();
            assert_eq!(outcome.answered, requests as u64);
            let expected: HashMap<String, u64> = ["a", "b", "c"]
                .iter()
                .zip(counts)
                .map(|(key, n)| (format!("{version} {key}"), n))
                .collect();
            assert_eq!(*seen.lock().unwrap(), expected, "{protocol:?} {key_in:?}");
        }
    }

    #[tokio::test]
    async fn an_answer_other_than_200_fails_the_drive() {
        let (to, _) = server(StatusCode::BAD_GATEWAY).await;
        let error = drive(plan(&to, Protocol::Http1, KeyIn::Header, 10))
            .await
            .unwrap_err();
        assert!(error.contains("502"), "{error}");
    }

    #[tokio::test]
    async fn a_refused_connection_fails_the_drive() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let to = listener.local_addr().unwrap().to_string();
        drop(listener);
        let error = drive(plan(&to, Protocol::Http1, KeyIn::Header, 10))
            .await
            .unwrap_err();
        assert!(error.starts_with(&to), "{error}");
    }

    #[tokio::test]
    async fn no_connections_or_no_streams_is_refused() {
        for (connections, streams) in [(0, 3), (4, 0)] {
            let mut bad = plan("127.0.0.1:1", Protocol::H2c, KeyIn::Path, 1);
            bad.connections = connections;
            bad.streams = streams;
            let error = drive(bad).await.unwrap_err();
            assert!(error.starts_with("--connections"), "{error}");
        }
    }

    fn flags(pairs: &[&str]) -> Flags {
        Flags::parse(&pairs.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn the_command_line_names_the_plan() {
        let keys = std::env::temp_dir().join(format!("drive-keys-{}", std::process::id()));
        std::fs::write(&keys, "x\ny\n").unwrap();
        let keys = keys.to_str().unwrap();
        let plan = plan_of(&flags(&[
            "--to",
            "127.0.0.1:9",
            "--keys",
            keys,
            "--requests",
            "7",
            "--connections",
            "2",
            "--streams",
            "5",
            "--protocol",
            "h2",
            "--key-in",
            "path",
            "--tls-ca",
            "ca.pem",
        ]))
        .unwrap();
        assert_eq!(plan.to, "127.0.0.1:9");
        assert_eq!(*plan.keys, ["x", "y"]);
        assert_eq!((plan.requests, plan.connections, plan.streams), (7, 2, 5));
        assert_eq!((plan.protocol, plan.key_in), (Protocol::H2, KeyIn::Path));
        assert_eq!(plan.tls_ca.as_deref(), Some("ca.pem"));
        let plain = plan_of(&flags(&["--to", "h:1", "--keys", keys])).unwrap();
        assert_eq!(
            (plain.protocol, plain.key_in, plain.tls_ca),
            (Protocol::Http1, KeyIn::Header, None)
        );
        for (flag, value) in [("--protocol", "h3"), ("--key-in", "cookie")] {
            let error = plan_of(&flags(&["--to", "h:1", "--keys", keys, flag, value])).unwrap_err();
            assert!(error.starts_with(flag) && error.contains(value), "{error}");
        }
        let error = plan_of(&flags(&["--to", "h:1", "--keys", "/nonexistent/keys"])).unwrap_err();
        assert!(error.starts_with("/nonexistent/keys"), "{error}");
        std::fs::remove_file(keys).unwrap();
    }

    #[tokio::test]
    async fn keys_that_a_header_or_path_cannot_carry_are_refused() {
        let mut bad = plan("127.0.0.1:1", Protocol::Http1, KeyIn::Header, 1);
        bad.keys = Arc::new(vec!["a b".into()]);
        assert!(drive(bad).await.unwrap_err().starts_with("--keys"));
    }

    /// A directory of this process's own for `cert::write`.
    fn cert_dir(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("drive-{name}-{}", std::process::id()));
        crate::cert::write(&dir).unwrap();
        dir
    }

    #[tokio::test]
    async fn over_tls_http1_and_h2_send_every_request_with_the_alpn_asked() {
        let dir = cert_dir("tls");
        let ca = dir.join("ca.pem").to_str().unwrap().to_string();
        for (protocol, key_in, version) in [
            (Protocol::Http1, KeyIn::Header, "HTTP/1.1"),
            (Protocol::H2, KeyIn::Path, "HTTP/2.0"),
        ] {
            let (to, seen) = tls_server(&dir, &[b"h2", b"http/1.1"]).await;
            let mut tls = plan(&to, protocol, key_in, 30);
            tls.tls_ca = Some(ca.clone());
            assert_eq!(drive(tls).await.unwrap().answered, 30);
            let expected: HashMap<String, u64> = ["a", "b", "c"]
                .iter()
                .map(|key| (format!("{version} {key}"), 10))
                .collect();
            assert_eq!(*seen.lock().unwrap(), expected, "{protocol:?}");
        }
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[tokio::test]
    async fn a_certificate_of_another_ca_or_no_h2_from_the_proxy_fails_the_drive() {
        let (served, other) = (cert_dir("served"), cert_dir("other"));
        // A server without ALPN chooses nothing (one whose list has no h2
        // refuses the handshake, as rustls does).
        let both: &[&[u8]] = &[b"h2", b"http/1.1"];
        let cases = [
            (
                both,
                Protocol::Http1,
                KeyIn::Header,
                &other,
                "TLS handshake",
            ),
            (
                &[],
                Protocol::H2,
                KeyIn::Path,
                &served,
                "the proxy chose ALPN None",
            ),
        ];
        for (alpn, protocol, key_in, ca, expected) in cases {
            let (to, seen) = tls_server(&served, alpn).await;
            let mut tls = plan(&to, protocol, key_in, 5);
            tls.tls_ca = Some(ca.join("ca.pem").to_str().unwrap().to_string());
            let error = drive(tls).await.unwrap_err();
            assert!(error.starts_with(expected), "{protocol:?}: {error}");
            assert!(seen.lock().unwrap().is_empty());
        }
        std::fs::remove_dir_all(served).unwrap();
        std::fs::remove_dir_all(other).unwrap();
    }

    #[tokio::test]
    async fn tls_settings_that_do_not_fit_are_refused() {
        let dir = cert_dir("settings");
        let ca = dir.join("ca.pem").to_str().unwrap().to_string();
        let key = dir.join("gateway.key").to_str().unwrap().to_string();
        let cases = [
            (
                Protocol::H2c,
                Some(ca.as_str()),
                "--tls-ca: not with --protocol h2c",
            ),
            (
                Protocol::H2,
                None,
                "--protocol h2: HTTP/2 over TLS needs --tls-ca",
            ),
            (Protocol::Http1, Some(key.as_str()), "--tls-ca"),
            (
                Protocol::Http1,
                Some("/nonexistent/ca.pem"),
                "--tls-ca /nonexistent/ca.pem",
            ),
        ];
        for (protocol, tls_ca, expected) in cases {
            let mut bad = plan("127.0.0.1:1", protocol, KeyIn::Path, 1);
            bad.tls_ca = tls_ca.map(str::to_string);
            let error = drive(bad).await.unwrap_err();
            assert!(
                error.starts_with(expected),
                "{protocol:?} {tls_ca:?}: {error}"
            );
        }
        std::fs::remove_dir_all(dir).unwrap();
    }
}
