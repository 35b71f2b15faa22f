//! TLS on the gateway's listener (h1 and h2 by ALPN, the pair reloaded on
//! SIGHUP, bad files refused at start, garbage costing one connection) and
//! towards backends (verified against a CA, refused with a wrong one).
//! Certificates are made per test with rcgen; everything on 127.0.0.1.

use crate::common;
use crate::running::{self, Running};

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use bytes::Bytes;
use common::{eventually, WAIT};
use http_body_util::{BodyExt, Empty, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use loadring_proxy::{ClusterConfig, DemoBackend, KeySpec, Naming, Proxy, ProxyConfig, TlsFiles};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls_pki_types::pem::PemObject;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio_rustls::rustls::{self, ClientConfig, RootCertStore};
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// A CA of the test's own, and the files it writes.
pub(crate) struct Pki {
    dir: tempfile::TempDir,
    ca: CertifiedIssuer<'static, KeyPair>,
}

impl Pki {
    pub(crate) fn new() -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        Pki {
            dir: tempfile::tempdir().unwrap(),
            ca,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The CA's certificate, written to `ca.pem`.
    fn ca_file(&self) -> PathBuf {
        let path = self.path("ca.pem");
        std::fs::write(&path, self.ca.pem()).unwrap();
        path
    }

    /// A leaf for `localhost` and 127.0.0.1 signed by the CA, written to
    /// `NAME.crt` and `NAME.key`; its DER.
    pub(crate) fn leaf(&self, name: &str) -> (TlsFiles, CertificateDer<'static>) {
        let key = KeyPair::generate().unwrap();
        let params =
            CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
        let cert = params.signed_by(&key, &self.ca).unwrap();
        let files = TlsFiles {
            cert: self.path(&format!("{name}.crt")),
            key: self.path(&format!("{name}.key")),
        };
        std::fs::write(&files.cert, cert.pem()).unwrap();
        std::fs::write(&files.key, key.serialize_pem()).unwrap();
        (files, cert.der().clone())
    }

    pub(crate) fn client(&self, alpn: &[u8]) -> TlsConnector {
        let mut roots = RootCertStore::empty();
        roots.add(self.ca.der().clone()).unwrap();
        let mut config =
            ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth();
        config.alpn_protocols = vec![alpn.to_vec()];
        TlsConnector::from(Arc::new(config))
    }
}

type Tls = tokio_rustls::client::TlsStream<TcpStream>;

async fn tls_connect(pki: &Pki, addr: SocketAddr, alpn: &[u8]) -> Tls {
    let tcp = TcpStream::connect(addr).await.unwrap();
    tokio::time::timeout(
        WAIT,
        pki.client(alpn)
            .connect(ServerName::try_from("localhost").unwrap(), tcp),
    )
    .await
    .expect("handshake in time")
    .expect("the handshake succeeds")
}

fn peer_cert(stream: &Tls) -> CertificateDer<'static> {
    stream.get_ref().1.peer_certificates().unwrap()[0].clone()
}

fn proxy_config(cluster: ClusterConfig, tls: Option<TlsFiles>) -> ProxyConfig {
    let mut config = running::config(vec![cluster], vec![], Default::default());
    config.tls = tls;
    config
}

fn cluster(endpoints: &[String]) -> ClusterConfig {
    let mut c = ClusterConfig::new("default", "c_murmurhash".parse().unwrap());
    c.endpoints = endpoints.iter().map(|e| e.parse().unwrap()).collect();
    c.key = KeySpec::parse(&["header:x-user"]).unwrap();
    c
}

/// The proxy serving (until the second is dropped) on the first.
async fn serve(config: ProxyConfig) -> (SocketAddr, Running) {
    let proxy = running::serve(config, 1).await;
    (proxy.addr, proxy)
}

/// A proxy serving TLS with `files` in front of one plain backend.
async fn over_one_backend(files: TlsFiles) -> (SocketAddr, Running, DemoBackend) {
    let backend = DemoBackend::start("127.0.0.1:0").await.unwrap();
    let (addr, proxy) = serve(proxy_config(
        cluster(&[backend.addr().to_string()]),
        Some(files),
    ))
    .await;
    (addr, proxy, backend)
}

fn placement(endpoints: &[String], keys: &[String]) -> HashMap<String, String> {
    let balancer = loadring::Balancer::new(
        "c_murmurhash".parse().unwrap(),
        endpoints.iter().map(|e| e.parse().unwrap()),
    )
    .unwrap();
    keys.iter()
        .map(|k| {
            let pick = balancer.pick(&loadring::Request::key(k)).unwrap();
            (k.clone(), pick.addr().to_string())
        })
        .collect()
}

fn get(user: &str) -> http::Request<Empty<Bytes>> {
    http::Request::get("/")
        .header("host", "localhost")
        .header("x-user", user)
        .body(Empty::new())
        .unwrap()
}

fn backend_of(response: &http::Response<hyper::body::Incoming>) -> String {
    response.headers()["x-backend"]
        .to_str()
        .unwrap()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h1_and_h2_through_tls_place_keys_like_the_library() {
    let pki = Pki::new();
    let (files, _) = pki.leaf("proxy");
    let backends = [
        DemoBackend::start("127.0.0.1:0").await.unwrap(),
        DemoBackend::start("127.0.0.1:0").await.unwrap(),
        DemoBackend::start("127.0.0.1:0").await.unwrap(),
    ];
    let endpoints: Vec<String> = backends.iter().map(|b| b.addr().to_string()).collect();
    let (addr, _stop) = serve(proxy_config(cluster(&endpoints), Some(files))).await;
    let keys: Vec<String> = (0..200).map(|i| format!("user-{i}")).collect();
    let want = placement(&endpoints, &keys);

    // HTTP/1.1, one kept-alive TLS connection.
    let stream = tls_connect(&pki, addr, b"http/1.1").await;
    assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    let (mut h1, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(connection);
    for key in &keys {
        h1.ready().await.unwrap();
        let response = tokio::time::timeout(WAIT, h1.send_request(get(key)))
            .await
            .expect("in time")
            .unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(backend_of(&response), want[key], "h1 key {key}");
        response.into_body().collect().await.unwrap();
    }

    // HTTP/2 by ALPN, every key a stream of one connection, all at once.
    let stream = tls_connect(&pki, addr, b"h2").await;
    assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (h2, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(connection);
    let calls = keys.iter().map(|key| {
        let mut h2 = h2.clone();
        let key = key.clone();
        async move {
            let mut request = get(&key);
            *request.uri_mut() = "https://localhost/".parse().unwrap();
            request.headers_mut().remove("host");
            let response = h2.send_request(request).await.unwrap();
            (key, response.status(), backend_of(&response))
        }
    });
    let done = tokio::time::timeout(WAIT, futures_util::future::join_all(calls))
        .await
        .expect("in time");
    for (key, status, backend) in done {
        assert_eq!(status, 200);
        assert_eq!(backend, want[&key], "h2 key {key}");
    }
}

async fn bind_error(pki: &Pki, files: TlsFiles) -> String {
    let backend = format!("127.0.0.1:{}", common::free_port());
    let config = proxy_config(cluster(&[backend]), Some(files));
    let _ = pki;
    Proxy::bind_as(config, Naming::Flags)
        .await
        .expect_err("refused at start")
        .to_string()
}

#[tokio::test]
async fn bad_certificate_or_key_files_are_refused_at_start() {
    let pki = Pki::new();
    let (good, _) = pki.leaf("good");
    let (other, _) = pki.leaf("other");
    let garbage = pki.path("garbage.pem");
    std::fs::write(&garbage, "this is not PEM\n").unwrap();
    let cases = [
        (
            "missing cert",
            TlsFiles {
                cert: pki.path("missing.crt"),
                key: good.key.clone(),
            },
        ),
        (
            "non-PEM cert",
            TlsFiles {
                cert: garbage.clone(),
                key: good.key.clone(),
            },
        ),
        (
            "non-PEM key",
            TlsFiles {
                cert: good.cert.clone(),
                key: garbage.clone(),
            },
        ),
        (
            "key of another certificate",
            TlsFiles {
                cert: good.cert.clone(),
                key: other.key.clone(),
            },
        ),
    ];
    for (what, files) in cases {
        let error = bind_error(&pki, files).await;
        assert!(error.starts_with("--tls-cert: "), "{what}: {error}");
        assert!(!error.contains('\n'), "{what}: one line: {error}");
        if what == "key of another certificate" {
            assert!(
                error.ends_with("do not go together: the key is not the certificate's"),
                "{error}"
            );
        }
    }
    // The pair itself starts.
    let backend = format!("127.0.0.1:{}", common::free_port());
    assert!(Proxy::bind(proxy_config(cluster(&[backend]), Some(good)))
        .await
        .is_ok());
}

async fn status_over(stream: Tls) -> (u16, Tls) {
    let (mut h1, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    let driving = tokio::spawn(connection.without_shutdown());
    let response = h1.send_request(get("k")).await.unwrap();
    let status = response.status().as_u16();
    response.into_body().collect().await.unwrap();
    drop(h1);
    let parts = driving.await.unwrap().unwrap();
    (status, parts.io.into_inner())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sighup_swaps_the_certificate_for_new_connections() {
    let pki = Pki::new();
    let (files, first) = pki.leaf("proxy");
    let (addr, _proxy, _backend) = over_one_backend(files.clone()).await;
    // Served once: the SIGHUP handler is installed by then.
    let open = tls_connect(&pki, addr, b"http/1.1").await;
    assert_eq!(peer_cert(&open), first);
    let (status, open) = status_over(open).await;
    assert_eq!(status, 200);

    let (next, second) = pki.leaf("next");
    std::fs::copy(&next.cert, &files.cert).unwrap();
    std::fs::copy(&next.key, &files.key).unwrap();
    let sent = std::process::Command::new("kill")
        .args(["-HUP", &std::process::id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let swapped = eventually(WAIT, || async {
        peer_cert(&tls_connect(&pki, addr, b"http/1.1").await) == second
    })
    .await;
    assert!(swapped, "new connections get the new certificate");
    // The connection opened before keeps its session and is served.
    assert_eq!(peer_cert(&open), first);
    assert_eq!(status_over(open).await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_on_the_tls_port_costs_that_connection_only() {
    let pki = Pki::new();
    let (files, _) = pki.leaf("proxy");
    let (addr, _proxy, backend) = over_one_backend(files).await;
    for garbage in [
        &b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"[..],
        &[0x16, 0x03, 0x01, 0xff, 0xff, 0, 0, 0, 0][..],
    ] {
        let mut plain = TcpStream::connect(addr).await.unwrap();
        plain.write_all(garbage).await.unwrap();
        let mut rest = Vec::new();
        // Closed by the proxy (an alert at most): the read ends.
        let read = tokio::time::timeout(WAIT, plain.read_to_end(&mut rest)).await;
        assert!(read.is_ok(), "the proxy closes that connection");
        assert!(!String::from_utf8_lossy(&rest).contains("HTTP/1.1 200"));
    }
    let (status, _) = status_over(tls_connect(&pki, addr, b"http/1.1").await).await;
    assert_eq!(status, 200, "other clients are served");
    assert_eq!(backend.requests(), 1);
}

/// A client that completes its handshake and then asks for nothing (over
/// `http/1.1` or `h2`) is closed at the header timeout, as on a plain port.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_client_that_asks_for_nothing_is_closed() {
    let pki = Pki::new();
    let (files, _) = pki.leaf("proxy");
    let backend = DemoBackend::start("127.0.0.1:0").await.unwrap();
    let mut config = proxy_config(cluster(&[backend.addr().to_string()]), Some(files));
    config.clients.header_timeout = std::time::Duration::from_millis(300);
    let (addr, _proxy) = serve(config).await;
    for alpn in [&b"http/1.1"[..], b"h2"] {
        let mut silent = tls_connect(&pki, addr, alpn).await;
        let mut rest = Vec::new();
        // Closed by the proxy: the read ends, with an error or without.
        let read = tokio::time::timeout(WAIT, silent.read_to_end(&mut rest)).await;
        assert!(
            read.is_ok(),
            "{}: the proxy closes it",
            String::from_utf8_lossy(alpn)
        );
    }
    assert_eq!(backend.requests(), 0);
}

/// Under TLS too, a client that asks for a large answer and reads none of
/// it is cut off at the send timeout: the limit is on the socket beneath.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_client_that_reads_nothing_is_cut_at_the_send_timeout() {
    let pki = Pki::new();
    let (files, _) = pki.leaf("proxy");
    let backend = common::endless_backend().await;
    let mut config = proxy_config(cluster(&[backend.addr.to_string()]), Some(files));
    config.clients.send_timeout = std::time::Duration::from_millis(300);
    config.clients.max_abandoned = Some(0);
    let (addr, _proxy) = serve(config).await;
    let mut client = tls_connect(&pki, addr, b"http/1.1").await;
    client
        .write_all(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    assert!(
        backend.cut_off().await,
        "the backend's connection is still open"
    );
    drop(client);
}

/// An HTTPS backend with `files`: answers `secure` and counts requests.
async fn tls_backend(files: &TlsFiles) -> (SocketAddr, Arc<AtomicU64>) {
    let certs = CertificateDer::pem_file_iter(&files.cert)
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(&files.key).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .unwrap();
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let served = Arc::new(AtomicU64::new(0));
    let count = served.clone();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let (acceptor, count) = (acceptor.clone(), count.clone());
            tokio::spawn(async move {
                let Ok(stream) = acceptor.accept(tcp).await else {
                    return;
                };
                let sni = stream.get_ref().1.server_name().unwrap_or("").to_string();
                let service = hyper::service::service_fn(move |_req| {
                    count.fetch_add(1, Relaxed);
                    let sni = sni.clone();
                    async move {
                        Ok::<_, std::convert::Infallible>(
                            http::Response::builder()
                                .header("x-sni", sni)
                                .body(Full::new(Bytes::from_static(b"secure")))
                                .unwrap(),
                        )
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (addr, served)
}

async fn plain_get(addr: SocketAddr) -> (u16, Option<String>, String) {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut h1, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(connection);
    let response = tokio::time::timeout(WAIT, h1.send_request(get("k")))
        .await
        .expect("in time")
        .unwrap();
    let status = response.status().as_u16();
    let sni = response
        .headers()
        .get("x-sni")
        .map(|v| v.to_str().unwrap().to_string());
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, sni, String::from_utf8_lossy(&body).into_owned())
}

fn tls_cluster(port: u16, ca: &Path) -> ClusterConfig {
    let mut c = cluster(&[format!("localhost:{port}")]);
    c.backend_tls = true;
    c.backend_ca = Some(ca.to_path_buf());
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_tls_is_verified_and_refused_with_a_wrong_ca() {
    let pki = Pki::new();
    let (files, _) = pki.leaf("backend");
    let (backend, served) = tls_backend(&files).await;

    let (addr, _stop) = serve(proxy_config(
        tls_cluster(backend.port(), &pki.ca_file()),
        None,
    ))
    .await;
    let (status, sni, body) = plain_get(addr).await;
    assert_eq!((status, body.as_str()), (200, "secure"));
    assert_eq!(
        sni.as_deref(),
        Some("localhost"),
        "SNI is the endpoint's host"
    );
    assert_eq!(served.load(Relaxed), 1);

    let stranger = Pki::new();
    let (addr, _stop) = serve(proxy_config(
        tls_cluster(backend.port(), &stranger.ca_file()),
        None,
    ))
    .await;
    let (status, _, _) = plain_get(addr).await;
    assert_eq!(
        status, 502,
        "a certificate that fails verification is never accepted"
    );
    assert_eq!(served.load(Relaxed), 1, "nothing reached the backend");
}

/// `openssl s_client` against `addr` with one protocol version flag: its
/// exit status and output.
fn s_client(addr: SocketAddr, version: &str) -> (bool, String) {
    let out = std::process::Command::new("openssl")
        .args(["s_client", "-connect", &addr.to_string(), version])
        .args(["-servername", "localhost"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("openssl: {e} (install it: apt-get install -y openssl)"));
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_1_2_and_1_3_only() {
    let pki = Pki::new();
    let (files, _) = pki.leaf("proxy");
    let (addr, _proxy, _backend) = over_one_backend(files).await;
    for (version, accepted) in [
        ("-tls1_3", true),
        ("-tls1_2", true),
        ("-tls1_1", false),
        ("-tls1", false),
    ] {
        let (ok, text) = tokio::task::spawn_blocking(move || s_client(addr, version))
            .await
            .unwrap();
        assert_eq!(ok, accepted, "{version}: {text}");
        if accepted {
            assert!(text.contains("Cipher is"), "{version}: {text}");
        }
    }
}
