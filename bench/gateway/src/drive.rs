//! `drive`: sends a key file's requests to a proxy and checks every answer.
//!
//! `scripts/build-pgo.sh` trains a profile-guided build with it. It needs
//! nothing outside this repository (wrk and h2load are Debian packages, and a
//! build should need only cargo). It is not a benchmark: it reports
//! counts, not times.
//!
//! Each of `--connections` connections sends requests one after another
//! (HTTP/1.1 keep-alive), or `--streams` at once (HTTP/2 with prior
//! knowledge). The keys are taken in file order, wrapping around, until
//! `--requests` have been sent. The key goes in the `X-Key` header, or in
//! the path as `/k/KEY` (`--key-in path`). Any answer other than 200, or a
//! connection that fails, makes the whole drive fail.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

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
    H2c,
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
        other => return Err(format!("--protocol: http1 or h2c, not {other:?}")),
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
    let next = Arc::new(AtomicUsize::new(0));
    let answered = Arc::new(AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..plan.connections {
        let stream = TcpStream::connect(&plan.to)
            .await
            .map_err(|e| format!("{}: {e}", plan.to))?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        let io = TokioIo::new(stream);
        match plan.protocol {
            Protocol::Http1 => {
                let (sender, connection) = hyper::client::conn::http1::handshake(io)
                    .await
                    .map_err(|e| e.to_string())?;
                tokio::spawn(connection);
                tasks.spawn(send_all(
                    Sender::Http1(sender),
                    plan.clone(),
                    next.clone(),
                    answered.clone(),
                ));
            }
            Protocol::H2c => {
                let (sender, connection) =
                    hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                        .await
                        .map_err(|e| e.to_string())?;
                tokio::spawn(connection);
                for _ in 0..plan.streams {
                    tasks.spawn(send_all(
                        Sender::H2(sender.clone()),
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

    type Seen = Arc<Mutex<HashMap<String, u64>>>;

    /// A server that answers `status` and records each request's key
    /// (`X-Key`, or the path after `/k/`), with its HTTP version.
    async fn server(status: StatusCode) -> (String, Seen) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let seen: Seen = Arc::default();
        let record = seen.clone();
        tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                let record = record.clone();
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
                    let _ = auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
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
            "h2c",
            "--key-in",
            "path",
        ]))
        .unwrap();
        assert_eq!(plan.to, "127.0.0.1:9");
        assert_eq!(*plan.keys, ["x", "y"]);
        assert_eq!((plan.requests, plan.connections, plan.streams), (7, 2, 5));
        assert_eq!((plan.protocol, plan.key_in), (Protocol::H2c, KeyIn::Path));
        let plain = plan_of(&flags(&["--to", "h:1", "--keys", keys])).unwrap();
        assert_eq!(
            (plain.protocol, plain.key_in),
            (Protocol::Http1, KeyIn::Header)
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
}
