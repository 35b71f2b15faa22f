//! The gateway's own upstream layer, over real sockets on 127.0.0.1:
//! pooled connections reused, connections a backend closed under a
//! request, retries after a refused connect or a backend dying on a
//! written request (bodies buffered or streamed), and no request lost while
//! the membership changes under traffic. Every wait is on an event,
//! bounded.

use crate::common;
use crate::running::{self, Running};

use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;

use common::{eventually, free_port, get, metric_sum, request, request_raw, WAIT};
use loadring_proxy::{ClusterConfig, DemoBackend, KeySpec};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

impl Running {
    /// A metric, its series summed.
    async fn metric(&self, name: &str) -> f64 {
        metric_sum(&get(self.admin, "/metrics", &[]).await.body, name)
    }
}

async fn start(cluster: ClusterConfig) -> Running {
    start_workers(cluster, 1).await
}

/// The proxy with `workers` threads serving clients (this runtime's task
/// the first).
async fn start_workers(cluster: ClusterConfig, workers: usize) -> Running {
    running::serve(
        running::config(vec![cluster], vec![], Default::default()),
        workers,
    )
    .await
}

fn cluster(policy: &str, endpoints: &[String]) -> ClusterConfig {
    let mut c = ClusterConfig::new("default", policy.parse().unwrap());
    c.endpoints = endpoints.iter().map(|e| e.parse().unwrap()).collect();
    c.key = KeySpec::parse(&["header:x-user"]).unwrap();
    // Failures here are the point: no endpoint is ejected for them.
    c.health.eject_after = 0;
    c
}

/// What a raw backend does on each connection.
#[derive(Debug, Clone, Copy)]
enum Raw {
    /// Answers the first request (200, keep-alive, the method and body
    /// echoed), then closes the connection when the next request has
    /// arrived, without answering it: a backend closing an idle keep-alive
    /// connection at the instant a request is sent on it.
    FirstOnly,
    /// Reads the request, then closes the connection without answering:
    /// a backend that died on it.
    Dies,
}

/// A backend on raw sockets: its connections and the requests it read
/// whole, counted.
struct RawBackend {
    addr: String,
    accepted: Arc<AtomicU64>,
    requests: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl Drop for RawBackend {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Reads one request (head, then a `Content-Length` body): method and body.
async fn read_request(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<(String, String)> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            let length: usize = head
                .lines()
                .filter_map(|l| l.split_once(':'))
                .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
                .and_then(|(_, v)| v.trim().parse().ok())
                .unwrap_or(0);
            while buf.len() < end + 4 + length {
                let mut more = [0; 4096];
                let n = stream.read(&mut more).await.ok()?;
                if n == 0 {
                    return None;
                }
                buf.extend_from_slice(&more[..n]);
            }
            let body = String::from_utf8_lossy(&buf[end + 4..end + 4 + length]).to_string();
            buf.drain(..end + 4 + length);
            let method = head.split(' ').next().unwrap_or("").to_string();
            return Some((method, body));
        }
        let mut more = [0; 4096];
        let n = stream.read(&mut more).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&more[..n]);
    }
}

async fn raw_backend(mode: Raw) -> RawBackend {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let accepted = Arc::new(AtomicU64::new(0));
    let requests = Arc::new(AtomicU64::new(0));
    let (a, r, me) = (accepted.clone(), requests.clone(), addr.clone());
    let task = tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                continue;
            };
            a.fetch_add(1, SeqCst);
            let (r, me) = (r.clone(), me.clone());
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let Some((method, body)) = read_request(&mut stream, &mut buf).await else {
                    return;
                };
                r.fetch_add(1, SeqCst);
                if let Raw::Dies = mode {
                    return;
                }
                let text = format!("{method} {body}");
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nx-backend: {me}\r\ncontent-length: {}\r\n\r\n{text}",
                    text.len()
                );
                if stream.write_all(answer.as_bytes()).await.is_err() {
                    return;
                }
                if read_request(&mut stream, &mut buf).await.is_some() {
                    r.fetch_add(1, SeqCst);
                }
                // Dropped: closed, the second request unanswered.
            });
        }
    });
    RawBackend {
        addr,
        accepted,
        requests,
        task,
    }
}

/// Sequential requests to one backend all travel on one upstream
/// connection: the pool gives it back after each response and takes it
/// again (one worker thread: one pool).
#[tokio::test(flavor = "current_thread")]
async fn sequential_requests_reuse_one_pooled_connection() {
    let backend = DemoBackend::start("127.0.0.1:0").await.unwrap();
    let proxy = start(cluster("c_murmurhash", &[backend.addr().to_string()])).await;
    for i in 0..50 {
        let user = format!("user{i}");
        let reply = if i % 2 == 0 {
            get(proxy.addr, "/", &[("x-user", &user)]).await
        } else {
            request(proxy.addr, "POST", "/p", &[("x-user", &user)], &user)
                .await
                .unwrap()
        };
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
    assert_eq!(backend.requests(), 50);
    assert_eq!(backend.connections(), 1, "one connection, reused 49 times");
}

/// Concurrent clients share the pooled connections of the proxy's two
/// worker threads (each its own runtime and listener): 32 clients of 40
/// requests each open at most one upstream connection per client and
/// worker (a connection in use is not handed out twice; an idle one is
/// taken again rather than a new one opened), not one per request.
#[tokio::test(flavor = "current_thread")]
async fn concurrent_requests_reuse_pooled_connections() {
    let backend = DemoBackend::start("127.0.0.1:0").await.unwrap();
    let c = cluster("c_murmurhash", &[backend.addr().to_string()]);
    let proxy = Arc::new(start_workers(c, 2).await);
    let (clients, each) = (32, 40);
    let mut tasks = Vec::new();
    for c in 0..clients {
        let proxy = proxy.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..each {
                let user = format!("user{c}-{i}");
                let reply = get(proxy.addr, "/", &[("x-user", &user)]).await;
                assert_eq!(reply.status, 200, "{}", reply.body);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(backend.requests(), clients * each);
    let opened = backend.connections();
    assert!(
        opened <= clients * 2,
        "{opened} connections for {clients} clients on 2 workers"
    );
}

/// A backend that closes each keep-alive connection when the next request
/// arrives on it (the request unread): every request still gets its
/// answer, GET and POST alike, sent again once on a new connection, and
/// counted as such.
#[tokio::test(flavor = "current_thread")]
async fn a_backend_closing_reused_connections_loses_no_request() {
    let backend = raw_backend(Raw::FirstOnly).await;
    let proxy = start(cluster("c_murmurhash", std::slice::from_ref(&backend.addr))).await;
    let n = 20;
    for i in 0..n {
        let user = format!("user{i}");
        let (method, body) = if i % 2 == 0 {
            ("GET", String::new())
        } else {
            ("POST", format!("payload {i}"))
        };
        let reply = request(proxy.addr, method, "/", &[("x-user", &user)], &body)
            .await
            .unwrap();
        assert_eq!(reply.status, 200, "request {i}: {}", reply.body);
        assert_eq!(reply.body, format!("{method} {body}"), "request {i}");
    }
    // Each request after the first met the closed connection, then a new one.
    assert_eq!(backend.accepted.load(SeqCst), n);
    assert_eq!(backend.requests.load(SeqCst), 2 * n - 1);
    assert_eq!(
        proxy
            .metric("loadring_reused_connection_retries_total")
            .await,
        (n - 1) as f64
    );
    assert_eq!(proxy.metric("loadring_retries_total").await, 0.0);
}

/// A key (`x-user`) whose first attempt goes to the endpoint `first` (it
/// counts the requests it reads, or refuses them): the first whose request
/// moves `seen`.
async fn a_key_on(proxy: &Running, seen: impl Fn() -> f64) -> String {
    for i in 0..64 {
        let user = format!("user{i}");
        let before = seen();
        let reply = get(proxy.addr, "/", &[("x-user", &user)]).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        if seen() > before {
            return user;
        }
    }
    panic!("no key of 64 goes to that endpoint first");
}

/// A refused connect is retried on the next candidate, whatever the
/// method; with no retry left it is a 502.
#[tokio::test(flavor = "current_thread")]
async fn a_refused_connect_goes_to_the_next_candidate() {
    let alive = DemoBackend::start("127.0.0.1:0").await.unwrap();
    let dead = format!("127.0.0.1:{}", free_port());
    let mut c = cluster("c_murmurhash", &[dead.clone(), alive.addr().to_string()]);
    c.retries = 1;
    let proxy = start(c).await;
    let retries = "loadring_retries_total";
    // The refused attempts are the retried ones.
    let metrics_now = || {
        let admin = proxy.admin;
        async move { metric_sum(&get(admin, "/metrics", &[]).await.body, retries) }
    };
    let mut on_dead = None;
    for i in 0..64 {
        let user = format!("user{i}");
        let before = metrics_now().await;
        let reply = get(proxy.addr, "/", &[("x-user", &user)]).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        assert_eq!(reply.backend(), alive.addr().to_string());
        if metrics_now().await > before {
            on_dead = Some(user);
            break;
        }
    }
    let on_dead = on_dead.expect("a key of the dead endpoint");
    let (before, served) = (metrics_now().await, alive.requests());
    let reply = request(proxy.addr, "POST", "/", &[("x-user", &on_dead)], "post")
        .await
        .unwrap();
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body, "post", "the body, sent to the next candidate");
    assert_eq!(metrics_now().await, before + 1.0);
    assert_eq!(alive.requests(), served + 1);

    let mut c = cluster("c_murmurhash", &[dead, alive.addr().to_string()]);
    c.retries = 0;
    let strict = start(c).await;
    let reply = get(strict.addr, "/", &[("x-user", &on_dead)]).await;
    assert_eq!(reply.status, 502, "no retry left: {}", reply.body);
}

/// A backend that read the request and died: an idempotent request with a
/// buffered body goes to the next candidate, its body whole; one whose
/// body streamed (over `retry_buffer`) cannot be sent again, nor can a
/// POST (the backend may have acted on it): 502.
#[tokio::test(flavor = "current_thread")]
async fn a_written_request_is_sent_again_only_with_its_body_in_hand() {
    let dying = raw_backend(Raw::Dies).await;
    let alive = DemoBackend::start("127.0.0.1:0").await.unwrap();
    let mut c = cluster(
        "c_murmurhash",
        &[dying.addr.clone(), alive.addr().to_string()],
    );
    c.retries = 1;
    c.retry_buffer = 64;
    let proxy = start(c).await;
    let on_dying = a_key_on(&proxy, || dying.requests.load(SeqCst) as f64).await;

    let small = "s".repeat(64);
    let big = "b".repeat(65);
    let put = |body: &str| {
        format!(
            "PUT /object HTTP/1.1\r\nx-user: {on_dying}\r\nContent-Length: {}\r\n",
            body.len()
        )
    };
    let (read, served) = (dying.requests.load(SeqCst), alive.requests());
    let reply = request_raw(proxy.addr, &put(&small), &small).await.unwrap();
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(
        reply.body, small,
        "the buffered body, whole, on the next candidate"
    );
    assert_eq!(
        dying.requests.load(SeqCst),
        read + 1,
        "written to the dying one first"
    );
    assert_eq!(alive.requests(), served + 1);

    let reply = request_raw(proxy.addr, &put(&big), &big).await.unwrap();
    assert_eq!(reply.status, 502, "streamed, sent once: {}", reply.body);
    assert_eq!(dying.requests.load(SeqCst), read + 2);
    assert_eq!(alive.requests(), served + 1, "not sent again");

    let reply = request(proxy.addr, "POST", "/", &[("x-user", &on_dying)], "x")
        .await
        .unwrap();
    assert_eq!(reply.status, 502, "POST, written: {}", reply.body);
    assert_eq!(dying.requests.load(SeqCst), read + 3);
    assert_eq!(alive.requests(), served + 1, "not sent again");
}

/// Writes `endpoints` to `path` whole (a new file renamed over it: the
/// watcher never reads half of one).
fn write_endpoints(path: &std::path::Path, endpoints: &[String]) {
    let next = path.with_extension("next");
    std::fs::write(&next, endpoints.join("\n") + "\n").unwrap();
    std::fs::rename(&next, path).unwrap();
}

/// Four backends in an endpoints file, followed by a cluster of `policy`
/// keyed on `x-user`.
struct FileFleet {
    backends: Vec<DemoBackend>,
    all: Vec<String>,
    /// Holds the endpoints file.
    _dir: tempfile::TempDir,
    file: std::path::PathBuf,
    cluster: ClusterConfig,
}

async fn four_backends_in_a_file(policy: &str) -> FileFleet {
    let mut backends = Vec::new();
    for _ in 0..4 {
        backends.push(DemoBackend::start("127.0.0.1:0").await.unwrap());
    }
    let all: Vec<String> = backends.iter().map(|b| b.addr().to_string()).collect();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("endpoints");
    write_endpoints(&file, &all);
    let mut cluster = ClusterConfig::new("default", policy.parse().unwrap());
    cluster.endpoints_file = Some(file.clone());
    cluster.key = KeySpec::parse(&["header:x-user"]).unwrap();
    FileFleet {
        backends,
        all,
        _dir: dir,
        file,
        cluster,
    }
}

/// 2,000 requests from 8 clients while the endpoints file changes 20
/// times (an endpoint removed, then added back, in turn): every request is
/// answered by a backend, none is lost or failed, and each change takes
/// effect. Clients wait for the changes (at most 100 requests per
/// membership), so the changes land among the requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_request_is_lost_while_the_membership_changes() {
    let FileFleet {
        backends,
        all,
        _dir,
        file,
        cluster: c,
    } = four_backends_in_a_file("c_murmurhash").await;
    let proxy = Arc::new(start(c).await);

    const REQUESTS: u64 = 2000;
    const CHANGES: u64 = 20;
    let issued = Arc::new(AtomicU64::new(0));
    let (applied_tx, applied) = watch::channel(0u64);
    let (issued_tx, mut issued_rx) = watch::channel(0u64);
    let issued_tx = Arc::new(issued_tx);
    let mut clients = Vec::new();
    for _ in 0..8 {
        let (proxy, issued, issued_tx, mut applied) = (
            proxy.clone(),
            issued.clone(),
            issued_tx.clone(),
            applied.clone(),
        );
        clients.push(tokio::spawn(async move {
            let mut failures = Vec::new();
            loop {
                let i = issued.fetch_add(1, SeqCst);
                if i >= REQUESTS {
                    return failures;
                }
                issued_tx.send_replace(i + 1);
                let need = (i / 100).min(CHANGES);
                let waited = tokio::time::timeout(WAIT, applied.wait_for(|a| *a >= need))
                    .await
                    .is_ok_and(|w| w.is_ok());
                assert!(waited, "change {need} never took effect");
                let user = format!("user{}", i % 997);
                let reply = get(proxy.addr, "/", &[("x-user", &user)]).await;
                if reply.status != 200 || reply.backend().is_empty() {
                    failures.push(format!("request {i}: {} {}", reply.status, reply.body));
                }
            }
        }));
    }
    let gateway = proxy.gateway.clone();
    for change in 1..=CHANGES {
        let waited = tokio::time::timeout(WAIT, issued_rx.wait_for(|i| *i >= change * 95))
            .await
            .is_ok_and(|w| w.is_ok());
        assert!(waited, "requests stopped before change {change}");
        // Odd changes remove an endpoint (a different one each time), even
        // ones add it back.
        let out = &all[((change - 1) / 2 % 4) as usize];
        let members: Vec<String> = if change % 2 == 1 {
            all.iter().filter(|e| *e != out).cloned().collect()
        } else {
            all.clone()
        };
        write_endpoints(&file, &members);
        let want = members.len();
        let cluster = gateway.clusters()[0].clone();
        assert!(
            eventually(WAIT, || {
                let cluster = cluster.clone();
                async move { cluster.balancer().endpoints().len() == want }
            })
            .await,
            "change {change} never applied"
        );
        applied_tx.send_replace(change);
    }
    let mut failures = Vec::new();
    for client in clients {
        failures.extend(client.await.unwrap());
    }
    assert_eq!(failures, Vec::<String>::new());
    let served: u64 = backends.iter().map(DemoBackend::requests).sum();
    assert_eq!(served, REQUESTS, "each request reached one backend once");
}

/// A membership update held in progress (as a long table build would be)
/// stops no request: the proxy serves on one thread (a current-thread
/// runtime that also runs its membership task), and 20 requests are
/// answered while the update waits; it lands once let go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_are_answered_while_a_membership_update_is_in_progress() {
    use loadring_proxy::{Naming, Proxy};
    // The backends and the folder live as long as the test.
    let FileFleet {
        backends: _backends,
        all,
        _dir,
        file,
        cluster: c,
    } = four_backends_in_a_file("maglev").await;
    let config = running::config(vec![c], vec![], Default::default());
    let (bound_tx, bound) = tokio::sync::oneshot::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let proxy = Proxy::bind_workers(config, Naming::Keys, 1).await.unwrap();
            let _ = bound_tx.send((proxy.local_addr().unwrap(), proxy.gateway().clone()));
            proxy
                .serve(async {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
        });
    });
    let (addr, gateway) = bound.await.unwrap();
    let cluster = gateway.clusters()[0].clone();
    assert_eq!(get(addr, "/", &[("x-user", "first")]).await.status, 200);
    let begun = cluster.updates_begun();
    let held = cluster.hold_updates();
    write_endpoints(&file, &all[..3]);
    assert!(
        eventually(WAIT, || {
            let cluster = cluster.clone();
            async move { cluster.updates_begun() > begun }
        })
        .await,
        "the update began"
    );
    let mut answered = 0;
    for i in 0..20 {
        let user = format!("user{i}");
        let reply =
            tokio::time::timeout(WAIT, request(addr, "GET", "/", &[("x-user", &user)], "")).await;
        if matches!(reply, Ok(Ok(r)) if r.status == 200) {
            answered += 1;
        } else {
            break;
        }
    }
    assert_eq!(answered, 20, "requests answered while the update waits");
    assert_eq!(cluster.balancer().endpoints().len(), 4, "still held");
    drop(held);
    assert!(
        eventually(WAIT, || {
            let cluster = cluster.clone();
            async move { cluster.balancer().endpoints().len() == 3 }
        })
        .await,
        "the update landed once let go"
    );
    let _ = stop.send(());
    tokio::task::spawn_blocking(move || serving.join().unwrap())
        .await
        .unwrap();
}
