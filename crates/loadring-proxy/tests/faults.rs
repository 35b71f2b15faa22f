//! The gateway under faults, in-process over real sockets on 127.0.0.1:
//! backends that stall, close keep-alive connections early, send malformed
//! framing, broken or hostile heads and bodies, or work on after the client
//! left; clients that send odd requests. Every wait is bounded.

use crate::common;
use crate::running::{self, Running};

use std::convert::Infallible;
use std::future::Future as _;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use common::{eventually, get, metric_sum, request, STEP};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use loadring_proxy::{ClientLimits, ClusterConfig, DemoBackend, KeySpec, RouteConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

fn cluster(name: &str, policy: &str, key: &[&str], backends: &[SocketAddr]) -> ClusterConfig {
    let mut c = ClusterConfig::new(name, policy.parse().unwrap());
    c.endpoints = backends
        .iter()
        .map(|b| b.to_string().parse().unwrap())
        .collect();
    c.key = KeySpec::parse(key).unwrap();
    c
}

async fn start_with(clusters: Vec<ClusterConfig>, routes: Vec<RouteConfig>) -> Running {
    start_limited(clusters, routes, ClientLimits::default()).await
}

async fn start_limited(
    clusters: Vec<ClusterConfig>,
    routes: Vec<RouteConfig>,
    clients: ClientLimits,
) -> Running {
    running::serve(running::config(clusters, routes, clients), 1).await
}

async fn start(cluster: ClusterConfig) -> Running {
    start_with(vec![cluster], vec![]).await
}

/// Sends `text` on a new connection and reads until the proxy closes it.
async fn raw_exchange(addr: SocketAddr, text: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(text.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(STEP, stream.read_to_end(&mut raw))
        .await
        .expect("the proxy answers and closes in time")
        .unwrap();
    String::from_utf8_lossy(&raw).into_owned()
}

/// A backend of raw bytes: each connection reads one request head, then
/// writes `reply` and keeps the connection open (until the test ends), or
/// records that the proxy closed it.
struct RawBackend {
    addr: SocketAddr,
    /// Connections the proxy closed after the reply.
    closed_by_proxy: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl Drop for RawBackend {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn raw_backend(reply: &'static str) -> RawBackend {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let closed_by_proxy = Arc::new(AtomicU64::new(0));
    let closed = closed_by_proxy.clone();
    let task = tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let closed = closed.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if stream.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                if stream.write_all(reply.as_bytes()).await.is_err() {
                    return;
                }
                let mut rest = [0u8; 64];
                if let Ok(0) = stream.read(&mut rest).await {
                    closed.fetch_add(1, SeqCst);
                }
            });
        }
    });
    RawBackend {
        addr,
        closed_by_proxy,
        task,
    }
}

/// A proxy without retries in front of a raw backend answering `reply`.
async fn behind_raw_backend(reply: &'static str) -> (RawBackend, Running) {
    let backend = raw_backend(reply).await;
    let mut c = cluster("default", "rr", &[], &[backend.addr]);
    c.retries = 0;
    let proxy = start(c).await;
    (backend, proxy)
}

/// A GET through `proxy` is a 502, the proxy closes its connection to
/// `backend` (whose state after such an answer is unknown), and the slot
/// is released.
async fn answered_502_and_closed(proxy: &Running, backend: &RawBackend) -> common::Reply {
    let reply = request(proxy.addr, "GET", "/", &[], "").await.unwrap();
    assert_eq!(reply.status, 502, "{reply:?}");
    assert!(
        eventually(STEP, || async { backend.closed_by_proxy.load(SeqCst) == 1 }).await,
        "the proxy closes that connection"
    );
    slot_released(proxy, "502").await;
    reply
}

/// Item 3: a backend that sends its headers, 10 of 100 bytes, then
/// nothing. With `timeout` 300 ms the client's connection is closed (the
/// body truncated) and the slot released, instead of both being held for
/// as long as the backend keeps the connection open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_stalls_is_cut_after_the_timeout_and_the_slot_released() {
    let backend = raw_backend("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789").await;
    let mut c = cluster("default", "rr", &[], &[backend.addr]);
    c.timeout = Duration::from_millis(300);
    let proxy = start(c).await;
    let reply = raw_exchange(
        proxy.addr,
        "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await;
    let (head, body) = reply.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{reply}");
    assert_eq!(
        body, "0123456789",
        "the body is cut where the backend stopped"
    );
    let balancer = proxy.gateway.clusters()[0].balancer();
    assert!(
        eventually(STEP, || async { balancer.total_in_flight() == 0 }).await,
        "the slot is released"
    );
}

/// A backend that reads the request and never answers: with `timeout`
/// 300 ms the client gets 504, its upstream connection is closed and the
/// slot released. On both kinds of runtime: a worker's (current-thread)
/// times requests on its own timer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_that_never_answers_gets_504_after_the_timeout() {
    never_answered().await;
}

#[tokio::test]
async fn a_backend_that_never_answers_gets_504_on_a_current_thread_runtime() {
    never_answered().await;
}

async fn never_answered() {
    let backend = raw_backend("").await;
    let mut c = cluster("default", "rr", &[], &[backend.addr]);
    c.timeout = Duration::from_millis(300);
    let proxy = start(c).await;
    let reply = tokio::time::timeout(
        STEP,
        raw_exchange(
            proxy.addr,
            "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        ),
    )
    .await
    .expect("an answer from the proxy");
    assert!(reply.starts_with("HTTP/1.1 504"), "{reply}");
    assert!(
        eventually(STEP, || async { backend.closed_by_proxy.load(SeqCst) == 1 }).await,
        "the upstream connection is closed"
    );
    let balancer = proxy.gateway.clusters()[0].balancer();
    assert!(
        eventually(STEP, || async { balancer.total_in_flight() == 0 }).await,
        "the slot is released"
    );
}

/// A backend that closes its connection in the middle of a body (10 of
/// 100 bytes): the client gets what came, its connection is closed (the
/// body truncated), the slot is released as a failure, and the next
/// request goes on a new upstream connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_cut_by_the_backend_is_cut_for_the_client_and_the_slot_released() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicU64::new(0));
    let count = accepted.clone();
    let backend = tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            count.fetch_add(1, SeqCst);
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                if stream.read(&mut byte).await.unwrap_or(0) == 0 {
                    break;
                }
                head.push(byte[0]);
            }
            let reply = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789";
            let _ = stream.write_all(reply.as_bytes()).await;
            // Dropped: closed mid-body.
        }
    });
    let mut c = cluster("default", "rr", &[], &[addr]);
    c.retries = 0;
    let proxy = start(c).await;
    let balancer = proxy.gateway.clusters()[0].balancer();
    for round in 1..=2u64 {
        let reply = raw_exchange(
            proxy.addr,
            "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .await;
        let (head, body) = reply.split_once("\r\n\r\n").expect(&reply);
        assert!(head.starts_with("HTTP/1.1 200"), "{reply}");
        assert_eq!(
            body, "0123456789",
            "the body is cut where the backend cut it"
        );
        assert!(
            eventually(STEP, || async { balancer.total_in_flight() == 0 }).await,
            "round {round}: the slot is released"
        );
        assert_eq!(accepted.load(SeqCst), round, "a new connection each time");
    }
    backend.abort();
}

/// A connection that ends (a clean EOF, then hyper closes it) when it has
/// waited `idle` for a request after answering one: a keep-alive timeout,
/// as nginx's `keepalive_timeout`. A new connection waits for its first
/// request as long as it takes.
struct KeepAliveTimeout {
    stream: TcpStream,
    idle: Duration,
    /// An answer was written since the last request bytes were read.
    answered: bool,
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl tokio::io::AsyncRead for KeepAliveTimeout {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        let before = buf.filled().len();
        match Pin::new(&mut this.stream).poll_read(cx, buf) {
            Poll::Ready(result) => {
                if buf.filled().len() > before {
                    this.answered = false;
                    this.timer = None;
                }
                Poll::Ready(result)
            }
            Poll::Pending if this.answered => {
                let idle = this.idle;
                let timer = this
                    .timer
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(idle)));
                if timer.as_mut().poll(cx).is_ready() {
                    // EOF: hyper closes an idle connection without a word.
                    return Poll::Ready(Ok(()));
                }
                Poll::Pending
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl tokio::io::AsyncWrite for KeepAliveTimeout {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.answered = true;
        self.timer = None;
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// A hyper backend whose keep-alive connections close after `idle` without
/// a request ([`KeepAliveTimeout`]). Answers `ok LEN` after reading the
/// body.
/// Returns its address, its connection and request counters, its task.
async fn short_keep_alive_backend(
    idle: Duration,
) -> (SocketAddr, Arc<AtomicU64>, Arc<AtomicU64>, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let connections = Arc::new(AtomicU64::new(0));
    let counted = connections.clone();
    let served = Arc::new(AtomicU64::new(0));
    let requests = served.clone();
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            counted.fetch_add(1, SeqCst);
            let served = served.clone();
            let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
                let served = served.clone();
                async move {
                    served.fetch_add(1, SeqCst);
                    let body = request.into_body().collect().await.map(|b| b.to_bytes());
                    let len = body.map_or(0, |b| b.len());
                    Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from(format!(
                        "ok {len}"
                    )))))
                }
            });
            let io = KeepAliveTimeout {
                stream,
                idle,
                answered: false,
                timer: None,
            };
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(io), service)
                    .await;
            });
        }
    });
    (addr, connections, requests, task)
}

/// Item 4: a backend that closes idle keep-alive connections after 3 ms.
/// 20,000 requests, half GET and half POST with a body, from 8 clients on
/// keep-alive connections pausing 0-5 ms between requests (so that the
/// proxy's idle upstream connections expire as they are reused): every one
/// gets 200. The requests sent again on a new connection are counted in
/// `loadring_reused_connection_retries_total`, not as retries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_keep_alive_connections_lose_no_request_get_or_post() {
    let (backend, connections, served, _task) =
        short_keep_alive_backend(Duration::from_millis(3)).await;
    let proxy = start(cluster("default", "rr", &[], &[backend])).await;
    let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .pool_timer(TokioTimer::new())
        .build_http::<Full<Bytes>>();
    let clients = 8;
    let per_client = 2_500;
    let failures = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for c in 0..clients {
        let client = client.clone();
        let failures = failures.clone();
        let uri: hyper::Uri = format!("http://{}/", proxy.addr).parse().unwrap();
        tasks.push(tokio::spawn(async move {
            for i in 0..per_client {
                let pause = (i * 7 + c) % 6;
                if pause > 0 {
                    tokio::time::sleep(Duration::from_millis(pause as u64)).await;
                }
                let post = i % 2 == 1;
                let request = hyper::Request::builder()
                    .method(if post { "POST" } else { "GET" })
                    .uri(uri.clone())
                    .body(Full::new(if post {
                        Bytes::from_static(b"a body of 19 bytes.")
                    } else {
                        Bytes::new()
                    }))
                    .unwrap();
                let failed = match tokio::time::timeout(STEP, client.request(request)).await {
                    Ok(Ok(response)) => {
                        let status = response.status();
                        let body = response.into_body().collect().await.map(|b| b.to_bytes());
                        let want: &[u8] = if post { b"ok 19" } else { b"ok 0" };
                        match body {
                            Ok(b) if status == 200 && b == want => None,
                            other => Some(format!("{status} {other:?}")),
                        }
                    }
                    Ok(Err(e)) => Some(format!("{e:?}")),
                    Err(_) => Some("timed out".to_string()),
                };
                if let Some(why) = failed {
                    if failures.fetch_add(1, SeqCst) == 0 {
                        eprintln!(
                            "first failure ({}): {why}",
                            if post { "POST" } else { "GET" }
                        );
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let text = proxy.metrics().await;
    let resent = metric_sum(&text, "loadring_reused_connection_retries_total");
    assert_eq!(
        failures.load(SeqCst),
        0,
        "of {} requests ({resent} sent again, {} backend connections, served {})",
        clients * per_client,
        connections.load(SeqCst),
        served.load(SeqCst)
    );
    assert_eq!(metric_sum(&text, "loadring_retries_total"), 0.0, "{text}");
    // The experiment did meet stale connections.
    assert!(resent > 0.0, "{text}");
}

/// A backend that works `work` on each request and finishes it even when
/// the connection is gone (as most servers do: they notice only when they
/// write the answer). Counts the requests in service.
struct WorkingBackend {
    addr: SocketAddr,
    in_service: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl Drop for WorkingBackend {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct InService(Arc<AtomicU64>);

impl Drop for InService {
    fn drop(&mut self) {
        self.0.fetch_sub(1, SeqCst);
    }
}

async fn working_backend(work: Duration) -> WorkingBackend {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let in_service = Arc::new(AtomicU64::new(0));
    let counter = in_service.clone();
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let counter = counter.clone();
            let service = hyper::service::service_fn(move |_: hyper::Request<Incoming>| {
                let counter = counter.clone();
                async move {
                    counter.fetch_add(1, SeqCst);
                    let serving = InService(counter);
                    // The work runs on its own: a closed connection does not stop it.
                    let done = tokio::spawn(async move {
                        tokio::time::sleep(work).await;
                        drop(serving);
                    });
                    let _ = done.await;
                    Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from_static(
                        b"done",
                    ))))
                }
            });
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    WorkingBackend {
        addr,
        in_service,
        task,
    }
}

/// Item 5: a hot key under bounded load, 4 backends taking 200 ms that
/// finish their work even when the proxy has gone, clients that leave
/// after 50 ms. The proxy counts the backends' work as long as it lasts:
/// sampled every 10 ms, no backend has more requests in service than the
/// proxy counts in flight on it (up to the 2 worker threads' worth of
/// requests ending between the two readings), so bounded load caps what
/// the backends really do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounded_load_counts_requests_whose_client_left() {
    let worst = clients_leave_after_50ms(false).await;
    assert!(
        worst <= 2,
        "a backend served {worst} requests more than the proxy counted on it"
    );
}

/// `--abort-on-close`: the slot is released when the client leaves, the
/// backend's work goes on uncounted (the trade-off it documents).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_on_close_releases_the_slot_when_the_client_leaves() {
    let worst = clients_leave_after_50ms(true).await;
    assert!(worst > 2, "the backends did no more than counted: {worst}");
}

/// The experiment of item 5: the most requests a backend served beyond
/// what the proxy counted on it, over samples every 10 ms.
async fn clients_leave_after_50ms(abort_on_close: bool) -> i64 {
    let b = [
        working_backend(Duration::from_millis(200)).await,
        working_backend(Duration::from_millis(200)).await,
        working_backend(Duration::from_millis(200)).await,
        working_backend(Duration::from_millis(200)).await,
    ];
    let addrs: Vec<SocketAddr> = b.iter().map(|b| b.addr).collect();
    let mut c = cluster(
        "default",
        "c_murmurhash_bl:load_factor=1.25",
        &["header:x-user"],
        &addrs,
    );
    c.abort_on_close = abort_on_close;
    let proxy = start(c).await;
    let addr = proxy.addr;
    let mut clients = Vec::new();
    for _ in 0..12 {
        clients.push(tokio::spawn(async move {
            for _ in 0..12 {
                let mut stream = TcpStream::connect(addr).await.unwrap();
                stream
                    .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nx-user: hot\r\n\r\n")
                    .await
                    .unwrap();
                let mut buf = [0u8; 64];
                // The client gives up after 50 ms.
                let _ =
                    tokio::time::timeout(Duration::from_millis(50), stream.read(&mut buf)).await;
            }
        }));
    }
    let balancer = proxy.gateway.clusters()[0].balancer();
    let mut worst = 0i64;
    let mut samples = 0;
    let mut busiest = 0;
    while clients.iter().any(|c| !c.is_finished()) {
        // The backends first: a request they count was reserved before.
        let serving: Vec<u64> = b.iter().map(|b| b.in_service.load(SeqCst)).collect();
        let loads = balancer.loads();
        let counted: Vec<u64> = addrs
            .iter()
            .map(|a| {
                loads
                    .iter()
                    .find(|(e, _)| e.addr() == a.to_string())
                    .map_or(0, |(_, load)| *load)
            })
            .collect();
        for (s, c) in serving.iter().zip(&counted) {
            worst = worst.max(*s as i64 - *c as i64);
        }
        busiest = busiest.max(*serving.iter().max().unwrap());
        samples += 1;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(samples > 10, "{samples} samples");
    assert!(busiest > 4, "the experiment loaded the backends: {busiest}");
    assert!(
        eventually(STEP, || async {
            balancer.total_in_flight() == 0 && b.iter().all(|b| b.in_service.load(SeqCst) == 0)
        })
        .await,
        "every slot is released once the backends are done"
    );
    worst
}

/// Item 9: a response with both Content-Length and Transfer-Encoding is
/// malformed: 502, that upstream connection closed, a failure counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_with_both_lengths_is_a_502_and_its_connection_closed() {
    let body = "a".repeat(65);
    let reply: &'static str = Box::leak(
        format!(
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n41\r\n{body}\r\n0\r\n\r\n"
        )
        .into_boxed_str(),
    );
    let (backend, proxy) = behind_raw_backend(reply).await;
    let told = answered_502_and_closed(&proxy, &backend).await;
    assert_eq!(
        told.body, "malformed response from the backend\n",
        "the client is told an answer came, unfit to pass on"
    );
    let text = proxy.metrics().await;
    let failed = format!(
        "loadring_requests_total{{endpoint=\"{}\",code=\"502\"}}",
        backend.addr
    );
    assert_eq!(common::metric(&text, &failed), Some(1.0), "{text}");
}

/// A transfer coding other than `chunked` (`gzip, chunked`) cannot go on:
/// the gateway frames each body again, and the backend or the client
/// would get the coded bytes as plain ones. A request with one is answered
/// 501 without a backend seeing it; a response with one is a 502, its
/// connection closed. `chunked` alone goes through both ways.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transfer_codings_other_than_chunked_are_refused_both_ways() {
    let b = DemoBackend::start("127.0.0.1:0").await.unwrap();
    let proxy = start(cluster("default", "rr", &[], &[b.addr()])).await;
    let post = |coding: &str| {
        format!(
            "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: {coding}\r\nConnection: close\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
        )
    };
    for coding in ["gzip, chunked", "chunked, chunked"] {
        let reply = raw_exchange(proxy.addr, &post(coding)).await;
        assert!(reply.starts_with("HTTP/1.1 501"), "{coding}: {reply}");
    }
    assert_eq!(b.requests(), 0, "no backend saw the refused requests");
    let reply = raw_exchange(proxy.addr, &post("Chunked")).await;
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert_eq!(b.requests(), 1);

    let (backend, proxy) = behind_raw_backend(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\nxx\r\n0\r\n\r\n",
    )
    .await;
    answered_502_and_closed(&proxy, &backend).await;
}

/// A backend's `Content-Length` said twice with one value (`2, 2`, or two
/// fields) is taken as that value (RFC 9110 8.6) and passed on once: a
/// client may refuse a list. Two different values are a 502.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_length_said_twice_reaches_the_client_once() {
    for (reply, want) in [
        (
            "HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nok",
            Some("2"),
        ),
        (
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 02\r\n\r\nok",
            Some("2"),
        ),
        ("HTTP/1.1 200 OK\r\nContent-Length: 2, 3\r\n\r\nok", None),
    ] {
        let (_backend, proxy) = behind_raw_backend(reply).await;
        let answer = raw_exchange(
            proxy.addr,
            "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
        )
        .await;
        let head = answer
            .split("\r\n\r\n")
            .next()
            .unwrap()
            .to_ascii_lowercase();
        let lengths: Vec<&str> = head
            .lines()
            .filter_map(|l| l.strip_prefix("content-length:"))
            .map(str::trim)
            .collect();
        match want {
            Some(n) => {
                assert!(answer.starts_with("HTTP/1.1 200"), "{reply:?}: {answer}");
                assert_eq!(lengths, [n], "{reply:?}: {answer}");
                assert!(answer.ends_with("\r\n\r\nok"), "{reply:?}: {answer}");
            }
            None => assert!(answer.starts_with("HTTP/1.1 502"), "{reply:?}: {answer}"),
        }
    }
}

/// A backend that switches protocols on a request that asked for no
/// upgrade (RFC 9110 15.2.2) gets its attempt failed: the client gets a
/// 502 at once rather than a 101 and a connection that goes nowhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_switch_nothing_asked_for_is_a_502() {
    let (backend, proxy) = behind_raw_backend(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: foo\r\nConnection: upgrade\r\n\r\n",
    )
    .await;
    answered_502_and_closed(&proxy, &backend).await;
}

/// A backend that answers one request `200` and hands its head over.
struct HeadCapturingBackend {
    addr: SocketAddr,
    head: tokio::sync::oneshot::Receiver<String>,
    task: JoinHandle<()>,
}

impl Drop for HeadCapturingBackend {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl HeadCapturingBackend {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (head_tx, head) = tokio::sync::oneshot::channel::<String>();
        let task = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                assert_eq!(stream.read(&mut byte).await.unwrap(), 1, "a whole head");
                head.push(byte[0]);
            }
            stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                .await
                .unwrap();
            let _ = head_tx.send(String::from_utf8(head).unwrap());
            // Kept open until the test ends, as a pooled connection is.
            std::future::pending::<()>().await;
        });
        HeadCapturingBackend { addr, head, task }
    }

    /// The lines of the head it got whose field is `name` (lower case).
    async fn fields(&mut self, name: &str) -> Vec<String> {
        let head = tokio::time::timeout(STEP, &mut self.head)
            .await
            .unwrap()
            .unwrap();
        head.lines()
            .filter(|l| l.to_ascii_lowercase().starts_with(&format!("{name}:")))
            .map(str::to_string)
            .collect()
    }
}

/// An HTTP/2 client sends each cookie in a field of its own (browsers do,
/// for header compression); an HTTP/1.1 backend gets them as one `Cookie`
/// field, joined by `; ` in order (RFC 9113 8.2.3), where it would
/// otherwise read only the first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_2_clients_cookies_reach_an_http_1_1_backend_as_one_field() {
    let mut backend = HeadCapturingBackend::start().await;
    let proxy = start(cluster("default", "rr", &[], &[backend.addr])).await;
    let stream = TcpStream::connect(proxy.addr).await.unwrap();
    let (mut h2, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(connection);
    let mut ask = hyper::Request::new(Full::new(Bytes::new()));
    *ask.uri_mut() = format!("http://{}/", proxy.addr).parse().unwrap();
    for cookie in ["a=1", "b=2; c=3", "d=4"] {
        ask.headers_mut().append("cookie", cookie.parse().unwrap());
    }
    assert_eq!(h2.send_request(ask).await.unwrap().status(), 200);
    assert_eq!(
        backend.fields("cookie").await,
        ["cookie: a=1; b=2; c=3; d=4"]
    );
}

/// A request whose target has an authority (the absolute form) is routed
/// by it, and the backend is sent that host, not a `Host` field that says
/// otherwise (RFC 9112 3.2.2): what is routed is what is forwarded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_absolute_targets_authority_is_the_host_forwarded() {
    let mut backend = HeadCapturingBackend::start().await;
    let proxy = start(cluster("default", "rr", &[], &[backend.addr])).await;
    let answer = raw_exchange(
        proxy.addr,
        "GET http://routed.example:8080/x HTTP/1.1\r\nHost: other.example\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(backend.fields("host").await, ["host: routed.example:8080"]);
}

/// Item 10: CONNECT is answered 501 by the proxy; no backend sees it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_is_refused_without_contacting_a_backend() {
    let b = DemoBackend::start("127.0.0.1:0").await.unwrap();
    let proxy = start(cluster("default", "rr", &[], &[b.addr()])).await;
    let target = b.addr().to_string();
    let reply = raw_exchange(
        proxy.addr,
        &format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\nConnection: close\r\n\r\n"),
    )
    .await;
    assert!(reply.starts_with("HTTP/1.1 501"), "{reply}");
    assert_eq!(b.requests(), 0);
    assert_eq!(b.connections(), 0);
}

/// Item 8: one Host, required in HTTP/1.1; IPv6 literals and ports
/// normalised before routing; dot segments resolved before routing, and
/// what is routed is what is forwarded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_and_path_are_checked_and_normalised_before_routing() {
    let [v6, api, other] = [
        DemoBackend::start("127.0.0.1:0").await.unwrap(),
        DemoBackend::start("127.0.0.1:0").await.unwrap(),
        DemoBackend::start("127.0.0.1:0").await.unwrap(),
    ];
    let route = |host: Option<&str>, prefix: &str, cluster: &str| RouteConfig {
        host: host.map(str::to_string),
        path_prefix: prefix.into(),
        cluster: cluster.into(),
    };
    let proxy = start_with(
        vec![
            cluster("v6", "rr", &[], &[v6.addr()]),
            cluster("api", "rr", &[], &[api.addr()]),
            cluster("other", "rr", &[], &[other.addr()]),
        ],
        vec![
            route(Some("[::1]"), "/", "v6"),
            route(None, "/api/", "api"),
            route(None, "/", "other"),
        ],
    )
    .await;
    let addr = proxy.addr;
    let status = |reply: &str| reply.split(' ').nth(1).unwrap_or("").to_string();

    let two_hosts = raw_exchange(
        addr,
        "GET /api/x HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(status(&two_hosts), "400", "{two_hosts}");
    let no_host = raw_exchange(addr, "GET /api/x HTTP/1.1\r\nConnection: close\r\n\r\n").await;
    assert_eq!(status(&no_host), "400", "{no_host}");
    // HTTP/1.0 needs no Host.
    let old = raw_exchange(addr, "GET /api/x HTTP/1.0\r\n\r\n").await;
    assert_eq!(status(&old), "200", "{old}");
    assert_eq!(api.requests(), 1);

    for host in ["[::1]", "[::1]:8080", "[0:0:0::1]"] {
        let reply = get(addr, "/api/x", &[("host", host)]).await;
        assert_eq!(reply.backend(), v6.addr().to_string(), "Host: {host}");
    }

    let reply = get(addr, "/api/../internal/secret?q=1", &[]).await;
    assert_eq!(reply.backend(), other.addr().to_string());
    assert_eq!(reply.header("x-echo-uri"), Some("/internal/secret?q=1"));
    let reply = get(addr, "/api/%2e%2E/internal", &[]).await;
    assert_eq!(reply.backend(), other.addr().to_string());
    let reply = get(addr, "/x/../api/./v1", &[]).await;
    assert_eq!(reply.backend(), api.addr().to_string());
    assert_eq!(reply.header("x-echo-uri"), Some("/api/v1"));
    assert_eq!(get(addr, "/../etc/passwd", &[]).await.status, 400);
    assert_eq!(api.requests(), 2);
}

/// Reads until the proxy closes the connection (or resets it); what came.
async fn read_until_closed(stream: &mut TcpStream) -> String {
    let mut raw = Vec::new();
    let _ = tokio::time::timeout(STEP, stream.read_to_end(&mut raw))
        .await
        .expect("the proxy closes the connection in time");
    String::from_utf8_lossy(&raw).into_owned()
}

/// Item 12: slow clients. With at most 6 client connections and a 500 ms
/// header timeout: 6 connections that send half a request head hold every
/// place; a 7th is refused at once (503) instead of waiting; the slow ones
/// are closed when their time is up, and then a normal request is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_are_cut_and_connections_over_the_limit_refused_at_once() {
    slow_clients_are_cut().await;
}

/// The same on a current-thread runtime, as the proxy's workers run: the
/// header timeout is then the workers' own timer's.
#[tokio::test]
async fn slow_clients_are_cut_on_a_current_thread_runtime() {
    slow_clients_are_cut().await;
}

/// A demo backend behind a proxy with these client limits.
async fn demo_behind_limits(
    header_timeout: Duration,
    max_connections: usize,
) -> (DemoBackend, Running) {
    demo_with_limits(ClientLimits {
        header_timeout,
        max_connections: Some(max_connections),
        ..ClientLimits::default()
    })
    .await
}

/// An HTTP/2 client of `addr` (prior knowledge), its connection driven
/// on a task of its own: how that ended, once it has.
async fn h2_client(
    addr: SocketAddr,
) -> (
    hyper::client::conn::http2::SendRequest<Full<Bytes>>,
    JoinHandle<hyper::Result<()>>,
) {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (h2, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .unwrap();
    (h2, tokio::spawn(connection))
}

/// Whether a plain request is served again (places freed), soon.
async fn serves_again(addr: SocketAddr) -> bool {
    eventually(STEP, || async {
        request(addr, "GET", "/", &[], "")
            .await
            .is_ok_and(|r| r.status == 200)
    })
    .await
}

async fn slow_clients_are_cut() {
    let (b, proxy) = demo_behind_limits(Duration::from_millis(500), 6).await;
    let mut slow = Vec::new();
    for _ in 0..6 {
        let mut s = TcpStream::connect(proxy.addr).await.unwrap();
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            .await
            .unwrap();
        slow.push(s);
    }
    // The 7th: answered 503 and closed, long before any header timeout
    // frees a place (the slow ones are still open: checked below).
    let mut extra = TcpStream::connect(proxy.addr).await.unwrap();
    let refused = read_until_closed(&mut extra).await;
    assert!(refused.starts_with("HTTP/1.1 503"), "{refused:?}");
    // Each slow connection is closed by the proxy (hyper answers 408 or
    // just closes), with nothing forwarded.
    for s in &mut slow {
        let text = read_until_closed(s).await;
        assert!(
            text.is_empty() || text.starts_with("HTTP/1.1 408"),
            "{text:?}"
        );
    }
    assert_eq!(b.requests(), 0);
    assert!(
        serves_again(proxy.addr).await,
        "their places are free again"
    );
}

/// An endless backend behind a proxy with a 300 ms send timeout, whose
/// requests left by their clients are cancelled, not read to their end.
async fn endless_behind_a_send_timeout() -> (common::EndlessBackend, Running) {
    let backend = common::endless_backend().await;
    let limits = ClientLimits {
        send_timeout: Duration::from_millis(300),
        max_abandoned: Some(0),
        ..ClientLimits::default()
    };
    let proxy = start_limited(
        vec![cluster("default", "rr", &[], &[backend.addr])],
        vec![],
        limits,
    )
    .await;
    (backend, proxy)
}

/// A client that asks for a large answer and reads none of it (the slow
/// read attack) is cut off once nothing could be sent to it for the send
/// timeout: its request's connection to the backend is closed and its slot
/// released, where before both were held for as long as the client
/// stayed. What it was sent stops short of the answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_reads_nothing_is_cut_at_the_send_timeout() {
    let (backend, proxy) = endless_behind_a_send_timeout().await;
    let mut client = TcpStream::connect(proxy.addr).await.unwrap();
    client
        .write_all(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    assert!(
        backend.cut_off().await,
        "the backend's connection is still open"
    );
    proxy.wait_in_flight(0.0).await;
    // The client finds its answer cut short.
    let mut received: u64 = 0;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match tokio::time::timeout(common::WAIT, client.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => received += n as u64,
            Err(_) => panic!("the client's connection is still open"),
        }
    }
    assert!(received > 0 && received < 1 << 30, "received {received}");
}

/// An HTTP/2 client (h2's own, which lets the test hold a stream's window
/// shut) on a proxy with a 300 ms send timeout in front of an endless
/// backend; the proxy, the backend and the client's connection task.
async fn shut_window_client() -> (
    Running,
    common::EndlessBackend,
    h2::client::SendRequest<Bytes>,
    JoinHandle<Result<(), h2::Error>>,
) {
    let (backend, proxy) = endless_behind_a_send_timeout().await;
    let tcp = TcpStream::connect(proxy.addr).await.unwrap();
    // Room on the connection for what one stream's window lets through
    // many times over: a stream held back is held back by its own window.
    let (h2, connection) = h2::client::Builder::new()
        .initial_connection_window_size(64 << 20)
        .handshake(tcp)
        .await
        .unwrap();
    let connection = tokio::spawn(connection);
    (proxy, backend, h2, connection)
}

/// Asks `h2` for a large answer and waits for its head.
async fn ask_big(h2: &mut h2::client::SendRequest<Bytes>) -> h2::RecvStream {
    let request = http::Request::get("http://x/big").body(()).unwrap();
    let (response, _) = h2.send_request(request, true).unwrap();
    let response = tokio::time::timeout(common::WAIT, response)
        .await
        .expect("no answer's head")
        .unwrap();
    assert_eq!(response.status(), 200);
    response.into_body()
}

/// Reads `body` until `bytes` more came, giving each back to the window.
async fn take(body: &mut h2::RecvStream, bytes: usize) {
    let mut taken = 0;
    while taken < bytes {
        let data = tokio::time::timeout(common::WAIT, body.data())
            .await
            .expect("the answer stopped")
            .expect("the answer ended")
            .unwrap();
        taken += data.len();
        body.flow_control().release_capacity(data.len()).unwrap();
    }
}

/// An HTTP/2 client that keeps one stream's window shut (it never gives
/// back what that stream received) while it reads another on the same
/// connection: the shut stream's request is cut at the send timeout, its
/// connection to the backend closed and its slot released; the other
/// stream goes on, and so does the connection. When the client at last
/// opens the window, the stream is reset rather than ended as if whole.
/// Before, hyper stopped asking the shut stream's answer for more, and its
/// request held its backend for as long as the client liked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_stream_whose_window_stays_shut_is_cut_at_the_send_timeout() {
    let (proxy, backend, mut h2, connection) = shut_window_client().await;
    let mut shut = ask_big(&mut h2).await;
    let mut read = ask_big(&mut h2).await;
    let reading = tokio::spawn(async move {
        // Read on until told to stop: the answer is 1 GiB.
        loop {
            take(&mut read, 1 << 20).await;
        }
    });
    assert!(
        backend.cut_off().await,
        "the shut stream's backend connection is still open"
    );
    proxy.wait_in_flight(1.0).await;
    assert!(!reading.is_finished(), "the other stream stopped");
    assert!(!connection.is_finished(), "the connection is closed");
    // The window opened at last: what was held comes, then a reset.
    let mut received = 0;
    let ended = loop {
        match tokio::time::timeout(common::WAIT, shut.data()).await {
            Ok(Some(Ok(data))) => {
                received += data.len();
                shut.flow_control().release_capacity(data.len()).unwrap();
            }
            Ok(Some(Err(e))) => break Some(e),
            Ok(None) => break None,
            Err(_) => panic!("the shut stream neither went on nor ended"),
        }
    };
    let reset = ended.expect("the cut answer ended as if whole");
    assert_eq!(reset.reason(), Some(h2::Reason::INTERNAL_ERROR), "{reset}");
    assert!(received < 1 << 30, "received {received}");
    assert_eq!(backend.ended.load(SeqCst), 1, "one backend connection cut");
    assert!(!connection.is_finished(), "the connection is closed");
    reading.abort();
}

/// An HTTP/2 client that takes nothing at all (its connection's window
/// shut): its answer is cut at the send timeout, and its connection,
/// which then serves nothing, is closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_connection_that_takes_nothing_is_closed_at_the_send_timeout() {
    let (proxy, backend, mut h2, connection) = shut_window_client().await;
    let shut = ask_big(&mut h2).await;
    assert!(
        backend.cut_off().await,
        "the backend's connection is still open"
    );
    let closed = tokio::time::timeout(common::WAIT, connection)
        .await
        .expect("the client's connection is still open");
    assert!(closed.is_ok(), "{closed:?}");
    proxy.wait_in_flight(0.0).await;
    drop(shut);
}

/// A demo backend behind a proxy with `limits`.
async fn demo_with_limits(limits: ClientLimits) -> (DemoBackend, Running) {
    let b = DemoBackend::start("127.0.0.1:0").await.unwrap();
    let proxy = start_limited(
        vec![cluster("default", "rr", &[], &[b.addr()])],
        vec![],
        limits,
    )
    .await;
    (b, proxy)
}

/// The admin listener has the clients' limits: with a 300 ms header
/// timeout, connections that send nothing take every one of its
/// `MAX_ADMIN_CONNECTIONS` places, one more is refused at once (503), the
/// silent ones are closed when their time is up, and then the admin
/// answers again. Before, it took every connection and kept each for as
/// long as the client liked: a flood of them took the descriptors the
/// clients' connections need.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_connections_have_a_limit_and_the_header_timeout() {
    let (_b, proxy) = demo_with_limits(ClientLimits {
        header_timeout: Duration::from_millis(300),
        ..ClientLimits::default()
    })
    .await;
    let mut silent = Vec::new();
    for _ in 0..loadring_proxy::MAX_ADMIN_CONNECTIONS {
        silent.push(TcpStream::connect(proxy.admin).await.unwrap());
    }
    let mut extra = TcpStream::connect(proxy.admin).await.unwrap();
    let refused = read_until_closed(&mut extra).await;
    assert!(refused.starts_with("HTTP/1.1 503"), "{refused:?}");
    for s in &mut silent {
        let text = read_until_closed(s).await;
        assert!(
            text.is_empty() || text.starts_with("HTTP/1.1 408"),
            "{text:?}"
        );
    }
    assert_eq!(get(proxy.admin, "/status", &[]).await.status, 200);
}

/// An admin client that asks and asks and reads none of the answers is
/// cut at the send timeout, as a client of the proxy's is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_client_that_reads_nothing_is_cut_at_the_send_timeout() {
    let (_b, proxy) = demo_with_limits(ClientLimits {
        send_timeout: Duration::from_millis(300),
        ..ClientLimits::default()
    })
    .await;
    let client = TcpStream::connect(proxy.admin).await.unwrap();
    let ask = b"GET /status HTTP/1.1\r\nHost: admin\r\n\r\n";
    // Requests pipelined until neither side's buffers take more; then, once
    // the proxy has closed the connection, a write fails (reset).
    let cut = eventually(common::WAIT, || {
        let client = &client;
        async move {
            loop {
                match client.try_write(ask) {
                    Ok(_) => continue,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
                    Err(_) => return true,
                }
            }
        }
    })
    .await;
    assert!(cut, "the admin still holds a client that reads nothing");
}

/// A cluster over the demo backend `b` whose bodies stream to it (a retry
/// buffer of 16 bytes) with a backend timeout of `timeout`.
fn streaming_cluster(b: &DemoBackend, timeout: Duration) -> ClusterConfig {
    let mut c = cluster("default", "rr", &[], &[b.addr()]);
    c.retry_buffer = 16;
    c.timeout = timeout;
    c
}

/// A client that uploads a body slowly but steadily, for longer than the
/// backend timeout in all: the backend gets all of it and answers, and
/// nothing is counted against it. Before, the timeout ran from the start of
/// the attempt, so such a client got 504 and the endpoint was blamed (a
/// failure towards its ejection) for the client's pace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_steady_upload_longer_than_the_timeout_is_answered() {
    let b = DemoBackend::start("127.0.0.1:0").await.unwrap();
    let timeout = Duration::from_secs(1);
    let proxy = start(streaming_cluster(&b, timeout)).await;
    let (pieces, piece) = (25u64, [b'u'; 100]);
    let mut client = TcpStream::connect(proxy.addr).await.unwrap();
    let head = format!(
        "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        pieces * 100
    );
    client.write_all(head.as_bytes()).await.unwrap();
    // A tenth of the timeout apart: the whole takes at least 2.4 timeouts.
    let mut pace = tokio::time::interval(timeout / 10);
    for _ in 0..pieces {
        pace.tick().await;
        client.write_all(&piece).await.unwrap();
    }
    let answer = read_until_closed(&mut client).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        answer.ends_with(&"u".repeat(2500)),
        "the whole body reached the backend: {answer}"
    );
    let metrics = proxy.metrics().await;
    assert_eq!(
        metric_sum(&metrics, "loadring_requests_total"),
        1.0,
        "{metrics}"
    );
    assert!(!metrics.contains("code=\"504\""), "{metrics}");
}

/// A client that stops in the middle of a streamed body: answered 408 once
/// it has sent nothing for the backend timeout, and the endpoint is not
/// blamed (the attempt counted as 408, the endpoint healthy).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_the_client_stops_is_a_408_not_the_backends_failure() {
    let b = DemoBackend::start("127.0.0.1:0").await.unwrap();
    let proxy = start(streaming_cluster(&b, Duration::from_millis(300))).await;
    let mut client = TcpStream::connect(proxy.addr).await.unwrap();
    // More than the retry buffer, so the body streams; then nothing.
    client
        .write_all(b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n")
        .await
        .unwrap();
    client.write_all(&[b'u'; 100]).await.unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tokio::time::timeout(common::WAIT, client.read(&mut buf))
            .await
            .expect("an answer in time")
            .unwrap();
        assert!(n > 0, "closed without an answer");
        seen.extend_from_slice(&buf[..n]);
    }
    let answer = String::from_utf8_lossy(&seen);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    let metrics = proxy.metrics().await;
    assert!(metrics.contains("code=\"408\"} 1"), "{metrics}");
    assert!(!metrics.contains("code=\"504\""), "{metrics}");
    assert_eq!(
        metric_sum(&metrics, "loadring_endpoint_healthy"),
        1.0,
        "{metrics}"
    );
}

/// A health path that answers 200 with a body without end (a large file, a
/// stream): the check reads the start of it, passes on the status, and
/// closes the connection, each time. Before, each check read the body
/// into memory until its deadline, then failed: the endpoint was marked
/// unhealthy, and the proxy held what it had read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_health_check_answered_with_an_endless_body_passes_without_reading_it_all() {
    let backend = common::endless_backend().await;
    let mut c = cluster("default", "rr", &[], &[backend.addr]);
    c.health.path = Some("/health".into());
    c.health.interval = Duration::from_millis(100);
    c.health.fall = 1;
    c.health.rise = 1;
    let proxy = start(c).await;
    // Several checks, each cut short by the proxy.
    assert!(
        eventually(common::WAIT, || async { backend.ended.load(SeqCst) >= 3 }).await,
        "the checks read the whole answer"
    );
    let healthy = format!("loadring_endpoint_healthy{{endpoint=\"{}\"}}", backend.addr);
    assert_eq!(
        common::metric(&proxy.metrics().await, &healthy),
        Some(1.0),
        "{}",
        proxy.metrics().await
    );
}

/// Clients that connect and ask for nothing (silent, only the start of
/// HTTP/2's preface, or HTTP/2 with no stream) hold places of the
/// connection limit until the header timeout closes them; then their
/// places are free. An HTTP/2 client that made a request and then waits is
/// told to go away too, once a whole period has passed without a stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_that_ask_for_nothing_are_closed_at_the_header_timeout() {
    // Long enough for the places to be seen taken on a busy machine.
    let (b, proxy) = demo_behind_limits(Duration::from_secs(1), 5).await;

    // An HTTP/2 client that asks once, then waits.
    let (mut h2, h2_connection) = h2_client(proxy.addr).await;
    let mut ask = hyper::Request::new(Full::new(Bytes::new()));
    *ask.uri_mut() = format!("http://{}/", proxy.addr).parse().unwrap();
    assert_eq!(h2.send_request(ask).await.unwrap().status(), 200);

    let preface: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";
    let mut idle = Vec::new();
    for first in [&b""[..], b"P", b"PRI * HTTP/2.0", preface] {
        let mut s = TcpStream::connect(proxy.addr).await.unwrap();
        s.write_all(first).await.unwrap();
        idle.push(s);
    }
    // Every place is taken (4 idle, and the HTTP/2 client's): refused at once.
    let mut extra = TcpStream::connect(proxy.addr).await.unwrap();
    assert!(read_until_closed(&mut extra)
        .await
        .starts_with("HTTP/1.1 503"));
    for s in &mut idle {
        // Closed by the proxy: the read ends (an HTTP/2 client may have
        // had the server's settings first).
        read_until_closed(s).await;
    }
    assert_eq!(
        b.requests(),
        1,
        "only the HTTP/2 client's request was forwarded"
    );
    assert!(
        serves_again(proxy.addr).await,
        "the idle ones' places are free again"
    );
    // The waiting HTTP/2 client was told to go away: its connection ends.
    let ended = tokio::time::timeout(STEP, h2_connection).await;
    assert!(matches!(ended, Ok(Ok(Ok(())))), "{ended:?}");
}

/// An HTTP/2 connection with a stream open is not idle, however long it
/// opens no other: an answer its backend takes three periods to begin, then
/// one dripped over four, keep it open and serving (an idle connection is
/// told to go away after two). A gRPC stream is such a stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_2_connection_with_a_stream_open_is_not_idle() {
    let period = Duration::from_millis(200);
    let (b, proxy) = demo_behind_limits(period, 4).await;
    let (mut h2, h2_connection) = h2_client(proxy.addr).await;
    let ask = |target: &str| {
        let mut ask = hyper::Request::new(Full::new(Bytes::new()));
        *ask.uri_mut() = format!("http://{}{target}", proxy.addr).parse().unwrap();
        ask
    };
    // Waits for its head: the backend sleeps three periods.
    let waited = h2.send_request(ask("/?delay=600")).await.unwrap();
    assert_eq!(waited.status(), 200);
    waited.into_body().collect().await.unwrap();
    // Its body comes in eight lines a tenth of a second apart.
    let dripped = h2.send_request(ask("/?drip=8")).await.unwrap();
    assert_eq!(dripped.status(), 200);
    let lines = dripped.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(lines.iter().filter(|&&c| c == b'\n').count(), 8);
    // Still serving new streams.
    let after = h2.send_request(ask("/")).await.unwrap();
    assert_eq!(after.status(), 200);
    after.into_body().collect().await.unwrap();
    assert_eq!(b.requests(), 3);
    // Nothing open now: the connection goes.
    let ended = tokio::time::timeout(STEP, h2_connection).await;
    assert!(matches!(ended, Ok(Ok(Ok(())))), "{ended:?}");
}

/// Item 6: an endpoint removed and added back while 5 of its requests still
/// run keeps counting them (it used to show 0), and they are released when
/// they end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_added_back_keeps_counting_its_requests() {
    let b = [
        DemoBackend::start("127.0.0.1:0").await.unwrap(),
        DemoBackend::start("127.0.0.1:0").await.unwrap(),
    ];
    let proxy = start(cluster("default", "rr", &[], &[b[0].addr()])).await;
    let addr = proxy.addr;
    let slow: Vec<_> = (0..5)
        .map(|_| tokio::spawn(async move { get(addr, "/?delay=1500", &[]).await }))
        .collect();
    assert!(eventually(STEP, || async { b[0].in_flight() == 5 }).await);
    let cluster = &proxy.gateway.clusters()[0];
    let endpoint = |a: SocketAddr| a.to_string().parse().unwrap();
    let load_of = |a: SocketAddr| {
        cluster
            .balancer()
            .loads()
            .into_iter()
            .find(|(e, _)| e.addr() == a.to_string())
            .map(|(_, l)| l)
    };
    assert_eq!(load_of(b[0].addr()), Some(5));
    cluster.set_endpoints(vec![endpoint(b[1].addr())]).unwrap();
    assert_eq!(load_of(b[0].addr()), None, "removed");
    cluster
        .set_endpoints(vec![endpoint(b[0].addr()), endpoint(b[1].addr())])
        .unwrap();
    assert_eq!(load_of(b[0].addr()), Some(5), "back, with its 5 requests");
    for s in slow {
        assert_eq!(s.await.unwrap().status, 200);
    }
    assert!(eventually(STEP, || async { load_of(b[0].addr()) == Some(0) }).await);
}

// Hostile and broken backend answers, as the proxy reads them: what the
// client gets (the answer forwarded, a 502, or a body cut short), that the
// connection to the backend carries nothing after a framing error, and
// that the slot is released. nginx and HAProxy are the peers compared in
// the comments; RFC 9110 and RFC 9112 the rules.

/// What a [`broken_backend`] does once it has answered a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Then {
    /// Waits for another request on the connection (answered the same
    /// way): the proxy closing it is counted.
    KeepOpen,
    /// Closes the connection: what ends an answer without a length.
    Close,
}

/// A backend answering every request head it reads with the same raw
/// bytes, on connections it keeps for more requests or closes ([`Then`]).
struct BrokenBackend {
    addr: SocketAddr,
    /// Connections accepted.
    accepted: Arc<AtomicU64>,
    /// Request heads read, over all its connections: more than `accepted`
    /// once a connection carried a second request.
    requests: Arc<AtomicU64>,
    /// Connections the proxy closed (or reset), seen reading or writing.
    closed_by_proxy: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl Drop for BrokenBackend {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Reads one request head off `stream`, a byte at a time (nothing of what
/// follows is taken): false when the peer closed or reset first.
async fn read_one_head(stream: &mut TcpStream) -> bool {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte).await {
            Ok(1) => head.push(byte[0]),
            _ => return false,
        }
    }
    true
}

async fn broken_backend(reply: impl Into<Vec<u8>>, then: Then) -> BrokenBackend {
    let reply: Arc<Vec<u8>> = Arc::new(reply.into());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let [accepted, requests, closed_by_proxy] = [(); 3].map(|()| Arc::new(AtomicU64::new(0)));
    let counters = (accepted.clone(), requests.clone(), closed_by_proxy.clone());
    let task = tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let (accepted, requests, closed) = counters.clone();
            let reply = reply.clone();
            accepted.fetch_add(1, SeqCst);
            tokio::spawn(async move {
                loop {
                    if !read_one_head(&mut stream).await {
                        closed.fetch_add(1, SeqCst);
                        return;
                    }
                    requests.fetch_add(1, SeqCst);
                    if stream.write_all(&reply).await.is_err() {
                        closed.fetch_add(1, SeqCst);
                        return;
                    }
                    if then == Then::Close {
                        return;
                    }
                }
            });
        }
    });
    BrokenBackend {
        addr,
        accepted,
        requests,
        closed_by_proxy,
        task,
    }
}

/// Panics raised outside the tests' own code (in the proxy, or in a
/// library it drives: hyper's debug assertions included) since the test
/// binary started, counted by a panic hook set once that hands each panic
/// on to the hook before it. A forwarding that panics is answered 502 like
/// a refused answer, and a body that panics is cut like a broken one: the
/// count tells them apart.
fn proxy_panics() -> u64 {
    static PANICS: AtomicU64 = AtomicU64::new(0);
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let before = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let in_tests = info
                .location()
                .is_some_and(|at| at.file().replace('\\', "/").contains("tests/"));
            if !in_tests {
                PANICS.fetch_add(1, SeqCst);
            }
            before(info);
        }));
    });
    PANICS.load(SeqCst)
}

/// Nothing outside the tests panicked since `proxy_panics()` said `before`.
fn no_panic_since(before: u64) {
    assert_eq!(proxy_panics(), before, "a panic outside the tests' code");
}

/// A proxy without retries in front of a [`broken_backend`].
async fn behind_broken(reply: impl Into<Vec<u8>>, then: Then) -> (BrokenBackend, Running) {
    behind_broken_limited(reply, then, ClientLimits::default()).await
}

/// [`behind_broken`], the proxy's clients held to `clients`.
async fn behind_broken_limited(
    reply: impl Into<Vec<u8>>,
    then: Then,
    clients: ClientLimits,
) -> (BrokenBackend, Running) {
    let backend = broken_backend(reply, then).await;
    let mut c = cluster("default", "rr", &[], &[backend.addr]);
    c.retries = 0;
    let proxy = start_limited(vec![c], vec![], clients).await;
    (backend, proxy)
}

/// Until no request is in flight on `proxy`: the slot was released.
async fn slot_released(proxy: &Running, what: &str) {
    let balancer = proxy.gateway.clusters()[0].balancer();
    assert!(
        eventually(STEP, || async { balancer.total_in_flight() == 0 }).await,
        "{what}: the slot is still held"
    );
}

/// A `method` request through `proxy` (its own connection, closed after):
/// the answer, once the slot is released.
async fn through(proxy: &Running, method: &str, what: &str) -> common::Reply {
    let reply = request(proxy.addr, method, "/", &[], "")
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    slot_released(proxy, what).await;
    reply
}

/// A GET through `proxy` is a 502 of the proxy's (not of a panic), the
/// connection to `backend` is closed having carried that one request,
/// and the slot is released.
async fn refused_502(proxy: &Running, backend: &BrokenBackend, what: &str) {
    let reply = through(proxy, "GET", what).await;
    assert_eq!(reply.status, 502, "{what}: {reply:?}");
    assert!(
        [
            "no response from the backend",
            "malformed response from the backend"
        ]
        .contains(&reply.body.trim_end()),
        "{what}: {reply:?}"
    );
    assert!(
        eventually(STEP, || async { backend.closed_by_proxy.load(SeqCst) == 1 }).await,
        "{what}: the connection to the backend is not closed"
    );
    assert_eq!(backend.requests.load(SeqCst), 1, "{what}: reused");
}

/// A second `method` through `proxy` went on the connection of the first
/// (`kept`) or on a new one, the first closed by the proxy.
async fn second_request_reuses(
    proxy: &Running,
    backend: &BrokenBackend,
    method: &str,
    kept: bool,
    what: &str,
) -> common::Reply {
    let reply = through(proxy, method, what).await;
    assert_eq!(backend.requests.load(SeqCst), 2, "{what}");
    if kept {
        assert_eq!(backend.accepted.load(SeqCst), 1, "{what}: not kept");
    } else {
        assert_eq!(backend.accepted.load(SeqCst), 2, "{what}: kept");
        assert!(
            eventually(STEP, || async { backend.closed_by_proxy.load(SeqCst) >= 1 }).await,
            "{what}: the first connection is not closed"
        );
    }
    reply
}

/// `start` then a reason phrase (or a field) padded to `len` bytes, CRLF.
fn line_of(start: &str, len: usize) -> String {
    let mut line = start.to_string();
    line.push_str(&"r".repeat(len.saturating_sub(start.len() + 2)));
    line.push_str("\r\n");
    line
}

/// Status lines that are not HTTP/1.x's `HTTP-version SP 3DIGIT SP reason`
/// (RFC 9112 4; a code is 100..=599 valid, RFC 9110 15, and three digits
/// whatever it says): a 502 each, as nginx ("upstream sent no valid
/// HTTP/1.0 header") and HAProxy answer, and hyper's client refuses them.
/// A status line over the head's limit (64 KiB) too. A NUL or a bare CR is
/// invalid anywhere in a head (RFC 9112 2.2, RFC 9110 5.5), and so is
/// whitespace before the status line, which is no empty line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_lines_that_are_not_http_1_are_502s() {
    let panics = proxy_panics();
    let long = line_of("HTTP/1.1 200 ", 65 * 1024) + "content-length: 2\r\n\r\nok";
    let cases: Vec<(&str, String)> = vec![
        (
            "two digits",
            "HTTP/1.1 99 X\r\ncontent-length: 2\r\n\r\nok".into(),
        ),
        (
            "code 099",
            "HTTP/1.1 099 X\r\ncontent-length: 2\r\n\r\nok".into(),
        ),
        (
            "four digits",
            "HTTP/1.1 1000 X\r\ncontent-length: 2\r\n\r\nok".into(),
        ),
        (
            "letters",
            "HTTP/1.1 abc\r\ncontent-length: 2\r\n\r\nok".into(),
        ),
        (
            "HTTP/2.0",
            "HTTP/2.0 200 OK\r\ncontent-length: 2\r\n\r\nok".into(),
        ),
        (
            "HTTP/1.2",
            "HTTP/1.2 200 OK\r\ncontent-length: 2\r\n\r\nok".into(),
        ),
        ("ICY", "ICY 200 OK\r\ncontent-length: 2\r\n\r\nok".into()),
        (
            "NUL in the reason",
            "HTTP/1.1 200 O\0K\r\ncontent-length: 2\r\n\r\nok".into(),
        ),
        (
            "NUL first",
            "\0HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok".into(),
        ),
        (
            "bare CR in the reason",
            "HTTP/1.1 200 O\rK\r\ncontent-length: 2\r\n\r\nok".into(),
        ),
        (
            "a space first",
            " HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok".into(),
        ),
        (
            "a tab first",
            "\tHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok".into(),
        ),
        ("a status line over 64 KiB", long),
    ];
    for (what, reply) in cases {
        let (backend, proxy) = behind_broken(reply, Then::KeepOpen).await;
        refused_502(&proxy, &backend, what).await;
    }
    no_panic_since(panics);
}

/// What RFC 9112 lets a recipient accept is forwarded, and the connection
/// kept: no reason phrase (`HTTP/1.1 200`: hyper and nginx take it), lines
/// ended by a bare LF (2.2: "a recipient MAY recognize a single LF as a
/// line terminator"), empty lines before the status line (as HAProxy and
/// hyper skip them), and a reason of over 8 KiB within the head's 64 KiB
/// (nginx's 4 or 8 KiB `proxy_buffer_size` would give 502; HAProxy's 16 KiB
/// buffer takes it). The reason itself never reaches the client (a client
/// SHOULD ignore it, RFC 9112 4): it gets the code's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_lines_a_recipient_may_accept_are_forwarded() {
    let panics = proxy_panics();
    let long_reason = line_of("HTTP/1.1 200 ", 8 * 1024 + 1) + "content-length: 2\r\n\r\nok";
    let cases: Vec<(&str, String)> = vec![
        (
            "no reason",
            "HTTP/1.1 200\r\ncontent-length: 2\r\n\r\nok".into(),
        ),
        (
            "an empty reason",
            "HTTP/1.1 200 \r\ncontent-length: 2\r\n\r\nok".into(),
        ),
        (
            "bare LFs",
            "HTTP/1.1 200 OK\ncontent-length: 2\n\nok".into(),
        ),
        (
            "mixed line ends",
            "HTTP/1.1 200 OK\r\ncontent-length: 2\n\r\nok".into(),
        ),
        (
            "empty lines first",
            "\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok".into(),
        ),
        (
            "bare LF empty lines first",
            "\n\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok".into(),
        ),
        ("a reason of 8 KiB", long_reason),
    ];
    for (what, reply) in cases {
        let (backend, proxy) = behind_broken(reply, Then::KeepOpen).await;
        for round in 1..=2 {
            let reply = if round == 1 {
                through(&proxy, "GET", what).await
            } else {
                second_request_reuses(&proxy, &backend, "GET", true, what).await
            };
            assert_eq!(
                (reply.status, reply.body.as_str()),
                (200, "ok"),
                "{what}: {reply:?}"
            );
        }
    }
    no_panic_since(panics);
}

/// Header sections a proxy must not pass on, each a 502 with its
/// connection closed:
/// - obs-fold (RFC 9112 5.2: a proxy MUST either replace it with SP or
///   answer 502; nginx and HAProxy answer 502), and whitespace before the
///   first field (RFC 9112 2.2: reject, or consume the line unread);
/// - whitespace between a field name and its colon (RFC 9112 5.1): a
///   proxy may not pass it on, and `Content-Length : 2` is how two parsers
///   come to frame one answer differently; nginx ("upstream sent invalid
///   header") and HAProxy refuse it;
/// - a NUL, a bare CR or another control byte in a field (RFC 9110 5.5:
///   reject, or replace with SP);
/// - more fields than 100 (hyper's limit) or a head over 64 KiB: 10,000
///   fields, or one field of 1 MiB (nginx: 4 or 8 KiB, "upstream sent too
///   big header"; HAProxy: its 16 KiB buffer);
/// - a `Content-Length` that is not 1*DIGIT (`+5`, `0x10`, `-1`, past
///   u64), or says two values (RFC 9112 6.3, rule 5: the proxy MUST close
///   the connection and answer 502);
/// - a `Transfer-Encoding` that is not `chunked` once (`chunked, chunked`,
///   in one field or two: RFC 9112 7 forbids applying chunked twice);
/// - an interim answer with a body (RFC 9110 15.2: a 1xx ends at its
///   header section, so the body is read as the next status line).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_sections_a_proxy_must_not_pass_on_are_502s() {
    let panics = proxy_panics();
    let many: String = (0..10_000).map(|i| format!("x-h-{i}: v\r\n")).collect();
    let huge = line_of("x-huge: ", 1 << 20);
    let ok = |fields: &str| format!("HTTP/1.1 200 OK\r\n{fields}content-length: 2\r\n\r\nok");
    let length = |value: &str| format!("HTTP/1.1 200 OK\r\ncontent-length: {value}\r\n\r\nok");
    let cases: Vec<(&str, String)> = vec![
        ("obs-fold", ok("x-a: 1\r\n  folded\r\n")),
        ("obs-fold by a tab", ok("x-a: 1\r\n\tfolded\r\n")),
        ("obs-fold of a length", length("2\r\n 2")),
        ("whitespace before the first field", ok(" x-a: 1\r\n")),
        ("a space before the colon", ok("x-a : 1\r\n")),
        ("a tab before the colon", ok("x-a\t: 1\r\n")),
        (
            "a space before a length's colon",
            "HTTP/1.1 200 OK\r\ncontent-length : 2\r\n\r\nok".into(),
        ),
        ("NUL in a value", ok("x-a: a\0b\r\n")),
        ("NUL in a name", ok("x-\0a: 1\r\n")),
        ("bare CR in a value", ok("x-a: a\rb\r\n")),
        ("bare CR ending a value", ok("x-a: ab\r\r\n")),
        ("a control byte in a value", ok("x-a: a\x01b\r\n")),
        ("DEL in a value", ok("x-a: a\x7fb\r\n")),
        ("10,000 fields", ok(&many)),
        ("a field of 1 MiB", ok(&huge)),
        ("Content-Length: +5", length("+2")),
        ("Content-Length: 0x10", length("0x2")),
        ("Content-Length: -1", length("-1")),
        ("Content-Length past u64", length("18446744073709551616")),
        ("Content-Length: 2 2", length("2 2")),
        ("Content-Length: 2, 3", length("2, 3")),
        (
            "Content-Length twice, two values",
            "HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\nok".into(),
        ),
        (
            "chunked, chunked",
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked, chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"
                .into(),
        ),
        (
            "chunked in two fields",
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ntransfer-encoding: chunked\r\n\r\n\
             2\r\nok\r\n0\r\n\r\n"
                .into(),
        ),
        (
            "a 100 with a body",
            "HTTP/1.1 100 Continue\r\ncontent-length: 5\r\n\r\nhelloHTTP/1.1 200 OK\r\n\
             content-length: 2\r\n\r\nok"
                .into(),
        ),
    ];
    for (what, reply) in cases {
        let (backend, proxy) = behind_broken(reply, Then::KeepOpen).await;
        refused_502(&proxy, &backend, what).await;
    }
    no_panic_since(panics);
}

/// A chunked body's data, and whether its last chunk came.
fn dechunked(mut body: &str) -> (String, bool) {
    let mut data = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size, 16) else {
            break;
        };
        if n == 0 {
            return (data, true);
        }
        data.push_str(&rest[..n.min(rest.len())]);
        match rest.get(n + 2..) {
            Some(next) => body = next,
            None => break,
        }
    }
    (data, false)
}

/// A GET through `proxy` (HTTP/1.1, its own connection): the head and the
/// body as sent, once the proxy closed the connection.
async fn raw_get(proxy: &Running, what: &str) -> (String, String) {
    let raw = raw_exchange(
        proxy.addr,
        "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await;
    let (head, body) = raw
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("{what}: {raw:?}"));
    (head.to_ascii_lowercase(), body.to_string())
}

/// A GET through `proxy` is answered 200 and chunked, and the body stops
/// after `data` without its last chunk (the client sees it cut, never
/// whole); the slot is released.
async fn cut_short(proxy: &Running, data: &str, what: &str) {
    let (head, body) = raw_get(proxy, what).await;
    assert!(head.starts_with("http/1.1 200"), "{what}: {head}");
    assert!(
        head.contains("transfer-encoding: chunked"),
        "{what}: {head}"
    );
    assert_eq!(
        dechunked(&body),
        (data.to_string(), false),
        "{what}: {body:?}"
    );
    slot_released(proxy, what).await;
}

/// Chunked bodies RFC 9112 7.1 allows are forwarded whole, and the
/// connection kept: extensions (ignored, as nginx and HAProxy do), spaces
/// before them or before the line's end (HAProxy takes both), sizes with
/// leading zeros (20 digits of them: the value is what is bounded), many
/// chunks of a byte. Trailers (7.1.2) reach an HTTP/2 client; an HTTP/1.1
/// client gets the body without them (the proxy drops `Trailer`, and hyper
/// sends none unasked), as nginx sends it by default. Zero-size chunks after
/// the last one are bytes after the answer: the body is whole, and the
/// connection is not kept (what follows an answer is never read as the
/// next one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunked_bodies_rfc_9112_allows_are_forwarded_whole() {
    let panics = proxy_panics();
    let ok =
        |chunks: &str| format!("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n{chunks}");
    let bytes: String = (0..10_000)
        .map(|i| format!("1\r\n{}\r\n", i % 10))
        .collect();
    let ten_thousand: String = (0..10_000)
        .map(|i| char::from(b'0' + (i % 10) as u8))
        .collect();
    let cases: Vec<(&str, String, &str, bool)> = vec![
        (
            "an extension",
            ok("5;ext=1\r\nhello\r\n0\r\n\r\n"),
            "hello",
            true,
        ),
        (
            "extensions after spaces, quoted",
            ok("5 \t;a=\"x; y\" ; b\r\nhello\r\n0;last\r\n\r\n"),
            "hello",
            true,
        ),
        (
            "spaces before the CRLF",
            ok("5  \r\nhello\r\n0\r\n\r\n"),
            "hello",
            true,
        ),
        (
            "leading zeros",
            ok("0005\r\nhello\r\n000\r\n\r\n"),
            "hello",
            true,
        ),
        (
            "20 digits",
            ok("00000000000000000005\r\nhello\r\n0\r\n\r\n"),
            "hello",
            true,
        ),
        (
            "trailers",
            ok("5\r\nhello\r\n0\r\nx-sum: 5\r\n\r\n"),
            "hello",
            true,
        ),
        (
            "10,000 chunks of a byte",
            ok(&(bytes + "0\r\n\r\n")),
            &ten_thousand,
            true,
        ),
        (
            "zero-size chunks after the last",
            ok("5\r\nhello\r\n0\r\n\r\n0\r\n\r\n0\r\n\r\n"),
            "hello",
            false,
        ),
    ];
    for (what, reply, data, kept) in cases {
        let (backend, proxy) = behind_broken(reply, Then::KeepOpen).await;
        let (head, body) = raw_get(&proxy, what).await;
        assert!(head.starts_with("http/1.1 200"), "{what}: {head}");
        assert_eq!(dechunked(&body), (data.to_string(), true), "{what}");
        assert!(body.ends_with("\r\n0\r\n\r\n"), "{what}: trailers sent");
        slot_released(&proxy, what).await;
        let reply = second_request_reuses(&proxy, &backend, "GET", kept, what).await;
        assert_eq!(reply.body, data, "{what}");
    }
    // The trailers reach an HTTP/2 client, but for those that frame, carry
    // or route the message (RFC 9110 6.5.1; the connection's HTTP/2 forbids
    // anywhere, RFC 9113 8.2.2: before, the client's answer, whole, was
    // reset (CANCEL) for one of them), as they would an HTTP/1.1 client.
    for (trailers, want) in [
        ("x-sum: 5\r\n", Some("5")),
        (
            "transfer-encoding: chunked\r\nx-sum: 5\r\nconnection: close\r\nte: trailers\r\n\
             content-length: 5\r\nkeep-alive: 1\r\nupgrade: h2c\r\n",
            Some("5"),
        ),
        (
            "host: elsewhere.example\r\nx-sum: 5\r\ntrailer: x-sum\r\n",
            Some("5"),
        ),
        (
            "transfer-encoding: chunked\r\nconnection: x-sum\r\nx-sum: 5\r\n",
            None,
        ),
    ] {
        let (_backend, proxy) = behind_broken(
            ok(&format!("5\r\nhello\r\n0\r\n{trailers}\r\n")),
            Then::KeepOpen,
        )
        .await;
        let (mut h2, _connection) = h2_client(proxy.addr).await;
        let mut ask = hyper::Request::new(Full::new(Bytes::new()));
        *ask.uri_mut() = format!("http://{}/", proxy.addr).parse().unwrap();
        let answer = tokio::time::timeout(STEP, h2.send_request(ask))
            .await
            .unwrap()
            .unwrap();
        let body = tokio::time::timeout(STEP, answer.into_body().collect())
            .await
            .unwrap()
            .unwrap_or_else(|e| panic!("{trailers:?}: {e:?}"));
        let got = body.trailers().cloned().unwrap_or_default();
        let names: Vec<&str> = got.keys().map(|k| k.as_str()).collect();
        assert_eq!(names, Vec::from_iter(want.map(|_| "x-sum")), "{trailers:?}");
        assert_eq!(
            got.get("x-sum").map(|v| v.to_str().unwrap()),
            want,
            "{trailers:?}"
        );
        assert_eq!(body.to_bytes(), "hello", "{trailers:?}");
        slot_released(&proxy, trailers).await;
    }
    no_panic_since(panics);
}

/// A chunked body that breaks its coding after the head went out cannot be
/// a 502 any more: the client gets the data before the break, then its
/// connection closed without the last chunk, so it sees the answer cut
/// (nginx: "upstream sent invalid chunked response", the client's
/// connection closed). The connection to the backend is closed, and the
/// slot released. Sizes that are not 1*HEXDIG (RFC 9112 7.1: signed,
/// spaced before, `0x`, past 64 bits), a chunk's data not followed by
/// CRLF, a size line ended by a bare LF, invalid trailers, and a body the
/// backend cuts in the middle of a chunk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunked_bodies_that_break_their_coding_are_cut_for_the_client() {
    let panics = proxy_panics();
    let ok =
        |chunks: &str| format!("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n{chunks}");
    let cases: Vec<(&str, String, Then, &str)> = vec![
        (
            "a size of 17 hex digits",
            ok("5\r\nhello\r\n10000000000000000\r\n"),
            Then::KeepOpen,
            "hello",
        ),
        (
            "a size past 64 bits",
            ok("5\r\nhello\r\nfffffffffffffffff0\r\nx\r\n"),
            Then::KeepOpen,
            "hello",
        ),
        (
            "a negative size",
            ok("5\r\nhello\r\n-5\r\nworld\r\n"),
            Then::KeepOpen,
            "hello",
        ),
        (
            "a size after a space",
            ok("5\r\nhello\r\n 5\r\nworld\r\n"),
            Then::KeepOpen,
            "hello",
        ),
        (
            "a size with a sign",
            ok("5\r\nhello\r\n+5\r\nworld\r\n"),
            Then::KeepOpen,
            "hello",
        ),
        (
            "a size in 0x",
            ok("5\r\nhello\r\n0x5\r\nworld\r\n"),
            Then::KeepOpen,
            "hello",
        ),
        (
            "the first size invalid",
            ok("-5\r\nhello\r\n"),
            Then::KeepOpen,
            "",
        ),
        (
            "no CRLF after the data",
            ok("5\r\nhelloXY5\r\nworld\r\n"),
            Then::KeepOpen,
            "hello",
        ),
        (
            "a bare LF after the data",
            ok("5\r\nhello\n0\r\n\r\n"),
            Then::KeepOpen,
            "hello",
        ),
        (
            "a bare LF after the size",
            ok("5\r\nhello\r\n5\nworld\r\n"),
            Then::KeepOpen,
            "hello",
        ),
        (
            "invalid trailers",
            ok("5\r\nhello\r\n0\r\nbad trailer\r\n\r\n"),
            Then::KeepOpen,
            "hello",
        ),
        (
            "cut in a chunk",
            ok("5\r\nhello\r\n5\r\nwor"),
            Then::Close,
            "hellowor",
        ),
        (
            "cut in a size line",
            ok("5\r\nhello\r\n5"),
            Then::Close,
            "hello",
        ),
        (
            "cut before the last chunk",
            ok("5\r\nhello\r\n"),
            Then::Close,
            "hello",
        ),
        (
            "cut in the trailers",
            ok("5\r\nhello\r\n0\r\nx-a: 1\r\n"),
            Then::Close,
            "hello",
        ),
    ];
    for (what, reply, then, data) in cases {
        let (backend, proxy) = behind_broken(reply, then).await;
        cut_short(&proxy, data, what).await;
        if then == Then::KeepOpen {
            assert!(
                eventually(STEP, || async { backend.closed_by_proxy.load(SeqCst) == 1 }).await,
                "{what}: the connection to the backend is not closed"
            );
        }
        assert_eq!(backend.requests.load(SeqCst), 1, "{what}");
    }
    no_panic_since(panics);
}

/// Interim answers (1xx but 101) are read past, not forwarded (nginx does
/// not forward them either; HAProxy does), and at most 16 of them for a
/// request: a backend sending them without end would hold the request
/// until its timeout, a head at a time. 16 and the final answer: the
/// answer, the connection kept. 17, or a flood of 10,000: a 502, the
/// connection closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interim_answers_are_read_past_up_to_16() {
    let panics = proxy_panics();
    let interim = |n: usize| {
        let mut reply = "HTTP/1.1 100 Continue\r\n\r\n".to_string();
        reply.push_str(
            &"HTTP/1.1 103 Early Hints\r\nlink: </a.css>; rel=preload\r\n\r\n".repeat(n - 1),
        );
        reply + "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"
    };
    let (backend, proxy) = behind_broken(interim(16), Then::KeepOpen).await;
    for kept in [None, Some(true)] {
        let reply = match kept {
            None => through(&proxy, "GET", "16 interim").await,
            Some(kept) => second_request_reuses(&proxy, &backend, "GET", kept, "16 interim").await,
        };
        assert_eq!(
            (reply.status, reply.body.as_str()),
            (200, "ok"),
            "{reply:?}"
        );
        assert!(reply.header("link").is_none(), "{reply:?}");
    }
    for (what, reply) in [
        ("17 interim", interim(17)),
        ("10,000 interim", interim(10_000)),
    ] {
        let (backend, proxy) = behind_broken(reply, Then::KeepOpen).await;
        refused_502(&proxy, &backend, what).await;
    }
    no_panic_since(panics);
}

/// Answers without a body (RFC 9112 6.3, rule 1: to HEAD, 204, 304) end at
/// their head whatever their fields say, and a body sent anyway is never
/// read as the next answer: the connection is not kept when bytes follow
/// the head. A 204 must have no `Content-Length` nor `Transfer-Encoding`
/// (RFC 9110 8.6, RFC 9112 6.1): one that says a length or a coding frames
/// its 204s wrong, and its body may come after the head, so its connection
/// is not kept either (`Content-Length: 0`, which servers send, is kept).
/// A `Content-Length` that is not 1*DIGIT, or says two values, is a 502
/// here too (RFC 9110 8.6: a sender MUST NOT forward it; nginx and HAProxy
/// refuse it on every answer); one value said twice is passed on once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_without_a_body_end_at_their_head() {
    let panics = proxy_panics();
    // (method, answer, status, Content-Length passed on, kept)
    type Case = (&'static str, &'static str, u16, Option<&'static str>, bool);
    let cases: &[Case] = &[
        (
            "HEAD",
            "HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n",
            200,
            Some("5"),
            true,
        ),
        (
            "HEAD",
            "HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello",
            200,
            Some("5"),
            false,
        ),
        (
            "HEAD",
            "HTTP/1.1 200 OK\r\ncontent-length: 5, 5\r\n\r\n",
            200,
            Some("5"),
            true,
        ),
        (
            "HEAD",
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
            200,
            None,
            false,
        ),
        ("GET", "HTTP/1.1 204 No Content\r\n\r\n", 204, None, true),
        (
            "GET",
            "HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n",
            204,
            None,
            true,
        ),
        (
            "GET",
            "HTTP/1.1 204 No Content\r\ncontent-length: 5\r\n\r\n",
            204,
            None,
            false,
        ),
        (
            "GET",
            "HTTP/1.1 204 No Content\r\ncontent-length: 5\r\n\r\nhello",
            204,
            None,
            false,
        ),
        (
            "GET",
            "HTTP/1.1 204 No Content\r\ntransfer-encoding: chunked\r\n\r\n",
            204,
            None,
            false,
        ),
        (
            "GET",
            "HTTP/1.1 304 Not Modified\r\ncontent-length: 5\r\n\r\n",
            304,
            None,
            true,
        ),
        (
            "GET",
            "HTTP/1.1 304 Not Modified\r\ncontent-length: 5\r\n\r\nhello",
            304,
            None,
            false,
        ),
    ];
    for &(method, answer, status, length, kept) in cases {
        let what = format!("{method} {answer:?}");
        let (backend, proxy) = behind_broken(answer, Then::KeepOpen).await;
        for round in 1..=2 {
            let reply = if round == 1 {
                through(&proxy, method, &what).await
            } else {
                second_request_reuses(&proxy, &backend, method, kept, &what).await
            };
            assert_eq!(reply.status, status, "{what}: {reply:?}");
            assert_eq!(reply.body, "", "{what}: {reply:?}");
            let lengths: Vec<&str> = reply
                .headers
                .iter()
                .filter(|(k, _)| k == "content-length")
                .map(|(_, v)| v.as_str())
                .collect();
            assert_eq!(lengths, Vec::from_iter(length), "{what}: {reply:?}");
        }
    }
    for (method, answer) in [
        ("HEAD", "HTTP/1.1 200 OK\r\ncontent-length: abc\r\n\r\n"),
        ("HEAD", "HTTP/1.1 200 OK\r\ncontent-length: 5, 6\r\n\r\n"),
        (
            "GET",
            "HTTP/1.1 304 Not Modified\r\ncontent-length: -1\r\n\r\n",
        ),
        (
            "GET",
            "HTTP/1.1 204 No Content\r\ncontent-length: 1, 2\r\n\r\n",
        ),
    ] {
        let what = format!("{method} {answer:?}");
        let (backend, proxy) = behind_broken(answer, Then::KeepOpen).await;
        let reply = through(&proxy, method, &what).await;
        assert_eq!(reply.status, 502, "{what}: {reply:?}");
        assert!(
            eventually(STEP, || async { backend.closed_by_proxy.load(SeqCst) == 1 }).await,
            "{what}: the connection to the backend is not closed"
        );
    }
    no_panic_since(panics);
}

/// An answer with neither a length nor chunked is read until the backend
/// closes (RFC 9112 6.3, rule 8), whole, and its connection is not kept
/// (it is closed). A `Content-Length` said in a list form (`2,`, an empty
/// field beside it) is passed on as the one number it says, as `2, 2` is
/// (RFC 9110 8.6: a sender MUST NOT forward one that is not 1*DIGIT). An
/// HTTP/1.0 answer with a `Transfer-Encoding` is framed as if faulty (RFC
/// 9112 6.1: HTTP/1.0 has no transfer codings, the body may have been
/// decoded on the way): a 502, as hyper's client refuses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_read_to_the_close_and_lengths_in_other_forms() {
    let panics = proxy_panics();
    for answer in [
        "HTTP/1.1 200 OK\r\n\r\nall of it",
        "HTTP/1.0 200 OK\r\n\r\nall of it",
        "HTTP/1.0 200 OK\r\nconnection: keep-alive\r\n\r\nall of it",
    ] {
        let (backend, proxy) = behind_broken(answer, Then::Close).await;
        for round in 1..=2 {
            let reply = through(&proxy, "GET", answer).await;
            assert_eq!(
                (reply.status, reply.body.as_str()),
                (200, "all of it"),
                "{answer:?}"
            );
            assert_eq!(backend.accepted.load(SeqCst), round, "{answer:?}");
        }
    }
    for answer in [
        "HTTP/1.1 200 OK\r\ncontent-length: 2,\r\n\r\nok",
        "HTTP/1.1 200 OK\r\ncontent-length: , 2\r\n\r\nok",
        "HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: \r\n\r\nok",
    ] {
        let (backend, proxy) = behind_broken(answer, Then::KeepOpen).await;
        let (head, body) = raw_get(&proxy, answer).await;
        assert!(head.starts_with("http/1.1 200"), "{answer:?}: {head}");
        let lengths: Vec<&str> = head
            .lines()
            .filter_map(|l| l.strip_prefix("content-length:"))
            .map(str::trim)
            .collect();
        assert_eq!(lengths, ["2"], "{answer:?}: {head}");
        assert_eq!(body, "ok", "{answer:?}");
        second_request_reuses(&proxy, &backend, "GET", true, answer).await;
    }
    for answer in [
        "HTTP/1.0 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
        "HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ntransfer-encoding: chunked\r\n\r\n\
         2\r\nok\r\n0\r\n\r\n",
    ] {
        let (backend, proxy) = behind_broken(answer, Then::KeepOpen).await;
        refused_502(&proxy, &backend, answer).await;
    }
    no_panic_since(panics);
}

/// A backend that answers one request twice, in one write or two: the
/// second answer is bytes after the first, never the answer to the next
/// request. The client gets the first; the connection is not kept (bytes
/// left after an answer, or found on it when it is next taken, close it);
/// the next request goes on a new connection and gets its own answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_answer_to_one_request_never_answers_the_next() {
    let panics = proxy_panics();
    let one = "HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\none";
    let two = "HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\nforged";
    let (backend, proxy) = behind_broken(format!("{one}{two}"), Then::KeepOpen).await;
    let first = through(&proxy, "GET", "two answers").await;
    assert_eq!(first.body, "one");
    let second = second_request_reuses(&proxy, &backend, "GET", false, "two answers").await;
    assert_eq!(second.body, "one");

    // The second answer written after the first, on its own: the proxy may
    // have given the connection back by then; it is found with bytes on
    // it when taken, and closed.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (babble, mut babbled) = tokio::sync::mpsc::unbounded_channel::<()>();
    let (go, told) = tokio::sync::mpsc::unbounded_channel::<()>();
    let [accepted, closed] = [(); 2].map(|()| Arc::new(AtomicU64::new(0)));
    let (a, c) = (accepted.clone(), closed.clone());
    let backend = tokio::spawn(async move {
        // The first connection babbles when told.
        let mut told = Some(told);
        while let Ok((mut stream, _)) = listener.accept().await {
            a.fetch_add(1, SeqCst);
            let (babble, c, go) = (babble.clone(), c.clone(), told.take());
            tokio::spawn(async move {
                while read_one_head(&mut stream).await {
                    if stream.write_all(one.as_bytes()).await.is_err() {
                        break;
                    }
                    if let Some(mut go) = go {
                        // Idle in the pool now: the stray answer.
                        go.recv().await;
                        stream.write_all(two.as_bytes()).await.unwrap();
                        let _ = babble.send(());
                        while read_one_head(&mut stream).await {}
                        c.fetch_add(1, SeqCst);
                        return;
                    }
                }
            });
        }
    });
    let mut c = cluster("default", "rr", &[], &[addr]);
    c.retries = 0;
    let proxy = start(c).await;
    assert_eq!(through(&proxy, "GET", "idle babble").await.body, "one");
    go.send(()).unwrap();
    tokio::time::timeout(STEP, babbled.recv())
        .await
        .unwrap()
        .unwrap();
    let next = through(&proxy, "GET", "idle babble").await;
    assert_eq!((next.status, next.body.as_str()), (200, "one"), "{next:?}");
    assert_eq!(
        accepted.load(SeqCst),
        2,
        "the babbling connection was reused"
    );
    assert!(
        eventually(STEP, || async { closed.load(SeqCst) == 1 }).await,
        "the babbling connection is not closed"
    );
    backend.abort();
    no_panic_since(panics);
}

/// A backend that answers before it has read the request's body (a 413
/// while the client uploads, RFC 9110 15.5.14): the answer reaches the
/// client as it came, whether the backend then closes its connection (as
/// nginx does after a 413) or keeps it open reading nothing; the connection
/// is never kept (half a request went on it), the request is not sent
/// again, and the slot is released. The client's upload, never finished,
/// holds nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_before_the_upload_ends_reaches_the_client() {
    answer_before_the_upload_ends(256 * 1024, ClientLimits::default()).await;
}

/// The same with a short upload, which the proxy reads whole before the
/// answer goes out, and a header timeout longer than the test waits: the
/// slot is released once the answer is written, not when the wait for the
/// rest of the body (to read past it) ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_before_a_short_upload_ends_releases_its_slot_once_written() {
    let clients = ClientLimits {
        header_timeout: 6 * STEP,
        ..ClientLimits::default()
    };
    answer_before_the_upload_ends(1024, clients).await;
}

/// A 413 answered while the client's upload of 10 MB has sent only `sent`
/// bytes, through a proxy whose clients are held to `clients`.
async fn answer_before_the_upload_ends(sent: usize, clients: ClientLimits) {
    let panics = proxy_panics();
    let answer =
        "HTTP/1.1 413 Content Too Large\r\nconnection: close\r\ncontent-length: 7\r\n\r\ntoo big";
    for then in [Then::Close, Then::KeepOpen] {
        let what = format!("{then:?}, {sent} bytes sent");
        let (backend, proxy) = behind_broken_limited(answer, then, clients).await;
        let stream = TcpStream::connect(proxy.addr).await.unwrap();
        let (mut reading, mut writing) = stream.into_split();
        // 10 MB announced, `sent` bytes sent, and then nothing: the client
        // waits for its answer with its upload unfinished.
        let uploading = tokio::spawn(async move {
            let head = "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n";
            writing.write_all(head.as_bytes()).await?;
            writing.write_all(&vec![b'u'; sent]).await?;
            std::future::pending::<()>().await;
            Ok::<_, std::io::Error>(writing)
        });
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        let text = loop {
            let text = String::from_utf8_lossy(&seen).into_owned();
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                if body.len() >= 7 || !head.contains("content-length: 7") {
                    break text;
                }
            }
            let n = tokio::time::timeout(STEP, reading.read(&mut buf))
                .await
                .expect("the answer in time")
                .unwrap_or(0);
            if n == 0 {
                break String::from_utf8_lossy(&seen).into_owned();
            }
            seen.extend_from_slice(&buf[..n]);
        };
        assert!(text.starts_with("HTTP/1.1 413"), "{what}: {text:?}");
        assert!(text.ends_with("\r\n\r\ntoo big"), "{what}: {text:?}");
        slot_released(&proxy, &what).await;
        if then == Then::KeepOpen {
            assert!(
                eventually(STEP, || async { backend.closed_by_proxy.load(SeqCst) == 1 }).await,
                "{what}: the connection to the backend is not closed"
            );
        }
        assert_eq!(backend.requests.load(SeqCst), 1, "{what}: sent again");
        assert_eq!(backend.accepted.load(SeqCst), 1, "{what}: sent again");
        uploading.abort();
    }
    no_panic_since(panics);
}
