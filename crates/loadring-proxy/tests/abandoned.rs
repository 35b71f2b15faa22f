//! Requests whose client left: how many the gateway keeps working on.
//! An HTTP/2 client opens a stream, waits until the backend holds its
//! request, and resets it; an HTTP/1.1 client sends a request and closes
//! its connection. Repeated, either would leave one request per round
//! open at the backend, so the proxy's limit on abandoned requests
//! (`max_abandoned`) bounds them. The backend here holds every request
//! until the proxy closes its connection (or the test lets it answer) and
//! counts those it holds.

use crate::common;
use crate::running::{self, Running};

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;

use common::{eventually, metric_sum, WAIT};
use http::Request;
use loadring_proxy::{ClientLimits, ClusterConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A backend that reads a request's head, counts it as held, and answers
/// only once released: until then a request is let go only when the proxy
/// closes its connection.
struct HoldingBackend {
    addr: SocketAddr,
    held: Arc<AtomicU64>,
    received: Arc<AtomicU64>,
    release: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Drop for HoldingBackend {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn holding_backend() -> HoldingBackend {
    backend_holding(b"").await
}

/// A holding backend that sends `first` (the start of an answer) as soon as
/// it has a request, then holds the rest.
async fn backend_holding(first: &'static [u8]) -> HoldingBackend {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let held = Arc::new(AtomicU64::new(0));
    let received = Arc::new(AtomicU64::new(0));
    let (release, released) = watch::channel(false);
    let (h, r) = (held.clone(), received.clone());
    let task = tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let (held, received, mut released) = (h.clone(), r.clone(), released.clone());
            tokio::spawn(async move {
                if !common::read_head(&mut stream).await {
                    return;
                }
                // Counted before the answer goes: a client that read it may
                // look at the count at once.
                received.fetch_add(1, SeqCst);
                if stream.write_all(first).await.is_err() {
                    return;
                }
                held.fetch_add(1, SeqCst);
                let closed = async {
                    let mut buf = [0u8; 4096];
                    while let Ok(n) = stream.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                    }
                };
                let answer = tokio::select! {
                    () = closed => false,
                    released = released.wait_for(|r| *r) => released.is_ok(),
                };
                if answer {
                    let _ = stream
                        .write_all(
                            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
                        )
                        .await;
                }
                held.fetch_sub(1, SeqCst);
            });
        }
    });
    HoldingBackend {
        addr,
        held,
        received,
        release,
        task,
    }
}

/// A proxy in front of `backend` (no retries), with `max_abandoned`.
async fn proxy(backend: SocketAddr, max_abandoned: usize) -> Running {
    let mut c = ClusterConfig::new("held", "rr".parse().unwrap());
    c.endpoints = vec![backend.to_string().parse().unwrap()];
    c.retries = 0;
    let clients = ClientLimits {
        max_abandoned: Some(max_abandoned),
        ..ClientLimits::default()
    };
    running::serve(running::config(vec![c], vec![], clients), 2).await
}

/// Reads from `tcp` until what came ends with `end`: what came.
async fn read_until(tcp: &mut TcpStream, end: &[u8]) -> Vec<u8> {
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    while !seen.ends_with(end) {
        let n = tokio::time::timeout(WAIT, tcp.read(&mut buf))
            .await
            .unwrap()
            .unwrap();
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    seen
}

/// Waits until `what` holds of the backend's counts, or fails with them.
async fn until(
    backend: &HoldingBackend,
    what: &str,
    check: impl Fn(u64, u64) -> bool + Send + Sync + 'static,
) {
    let (held, received) = (backend.held.clone(), backend.received.clone());
    let check = Arc::new(check);
    assert!(
        eventually(WAIT, || {
            let (held, received, check) = (held.clone(), received.clone(), check.clone());
            async move { check(held.load(SeqCst), received.load(SeqCst)) }
        })
        .await,
        "{what}: the backend holds {} requests of {} received",
        backend.held.load(SeqCst),
        backend.received.load(SeqCst)
    );
}

/// An HTTP/2 client that opens a stream, waits until the backend holds its
/// request and resets it, `rounds` times on one connection.
async fn reset_streams(running: &Running, backend: &HoldingBackend, rounds: u64) {
    resetting_streams(running, backend, rounds).await.1.abort();
}

/// [`reset_streams`], giving back the client's handle and its connection's
/// task (which ends with the last handle).
async fn resetting_streams(
    running: &Running,
    backend: &HoldingBackend,
    rounds: u64,
) -> (
    h2::client::SendRequest<bytes::Bytes>,
    JoinHandle<Result<(), h2::Error>>,
) {
    let tcp = TcpStream::connect(running.addr).await.unwrap();
    let (mut h2, connection) = h2::client::handshake(tcp).await.unwrap();
    let connection = tokio::spawn(connection);
    let first = backend.received.load(SeqCst);
    for round in 1..=rounds {
        h2 = h2.ready().await.unwrap();
        let request = Request::get(format!("http://held/{round}"))
            .body(())
            .unwrap();
        let (response, mut stream) = h2.send_request(request, true).unwrap();
        until(
            backend,
            "the request reached the backend",
            move |_, received| received >= first + round,
        )
        .await;
        stream.send_reset(h2::Reason::CANCEL);
        drop(response);
    }
    (h2, connection)
}

/// An HTTP/1.1 client that sends a request, waits until the backend holds
/// it and closes its connection, `rounds` times.
async fn close_connections(running: &Running, backend: &HoldingBackend, rounds: u64) {
    let first = backend.received.load(SeqCst);
    for round in 1..=rounds {
        let mut tcp = TcpStream::connect(running.addr).await.unwrap();
        tcp.write_all(format!("GET /{round} HTTP/1.1\r\nhost: held\r\n\r\n").as_bytes())
            .await
            .unwrap();
        until(
            backend,
            "the request reached the backend",
            move |_, received| received >= first + round,
        )
        .await;
        drop(tcp);
    }
}

/// 100 streams reset by one client, with room for 5 abandoned requests:
/// 5 go on at the backend, the 95 others are cancelled (their connections
/// to the backend closed) and counted; before the limit, each of the 100
/// would have held a connection to the backend until it answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_reset_by_their_client_go_on_up_to_the_limit() {
    let backend = holding_backend().await;
    let running = proxy(backend.addr, 5).await;
    reset_streams(&running, &backend, 100).await;
    until(&backend, "the limit", |held, _| held == 5).await;
    let text = running.metrics().await;
    assert_eq!(
        metric_sum(&text, "loadring_abandoned_cancelled_total"),
        95.0,
        "{text}"
    );
    assert_eq!(metric_sum(&text, "loadring_abandoned"), 5.0, "{text}");
    assert_eq!(metric_sum(&text, "loadring_in_flight"), 5.0, "{text}");
}

/// A client that resets every request it makes once the backend has it
/// (HTTP/2 rapid reset) is cut off at the 100th: the 99 before it leave
/// the connection open (each next request reaches the backend), the
/// 100th closes it, counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_resets_every_request_is_closed_at_the_hundredth() {
    let backend = holding_backend().await;
    let running = proxy(backend.addr, 0).await;
    let (_h2, connection) = resetting_streams(&running, &backend, 100).await;
    let ended = tokio::time::timeout(WAIT, connection).await;
    assert!(
        ended.is_ok(),
        "the connection is still open after 100 resets"
    );
    let text = running.metrics().await;
    assert_eq!(
        metric_sum(&text, "loadring_client_reset_floods_total"),
        1.0,
        "{text}"
    );
    // The proxy serves on: a new connection may ask again.
    reset_streams(&running, &backend, 1).await;
}

/// The same with HTTP/1.1 clients that close their connections; and the
/// places come back when the backend answers: a request abandoned then
/// goes on again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_connections_go_on_up_to_the_limit_and_places_come_back() {
    let backend = holding_backend().await;
    let running = proxy(backend.addr, 3).await;
    close_connections(&running, &backend, 10).await;
    until(&backend, "the limit", |held, _| held == 3).await;
    let text = running.metrics().await;
    assert_eq!(
        metric_sum(&text, "loadring_abandoned_cancelled_total"),
        7.0,
        "{text}"
    );
    backend.release.send_replace(true);
    until(&backend, "answered", |held, _| held == 0).await;
    let running_ref = &running;
    assert!(
        eventually(WAIT, || async move {
            let text = running_ref.metrics().await;
            metric_sum(&text, "loadring_abandoned") == 0.0
                && metric_sum(&text, "loadring_in_flight") == 0.0
        })
        .await,
        "{}",
        running.metrics().await
    );
    backend.release.send_replace(false);
    close_connections(&running, &backend, 1).await;
    // Once the proxy has seen the client leave, the request goes on in a
    // place given back, and is not cancelled.
    assert!(
        eventually(WAIT, || async move {
            let text = running_ref.metrics().await;
            metric_sum(&text, "loadring_abandoned") == 1.0
        })
        .await,
        "{}",
        running.metrics().await
    );
    let text = running.metrics().await;
    assert_eq!(
        metric_sum(&text, "loadring_abandoned_cancelled_total"),
        7.0,
        "{text}"
    );
    assert_eq!(backend.held.load(SeqCst), 1);
}

/// `max_abandoned = 0`: every request whose client leaves is cancelled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limit_of_zero_cancels_every_abandoned_request() {
    let backend = holding_backend().await;
    let running = proxy(backend.addr, 0).await;
    reset_streams(&running, &backend, 4).await;
    close_connections(&running, &backend, 4).await;
    until(&backend, "all cancelled", |held, received| {
        held == 0 && received == 8
    })
    .await;
    let text = running.metrics().await;
    assert_eq!(
        metric_sum(&text, "loadring_abandoned_cancelled_total"),
        8.0,
        "{text}"
    );
    assert_eq!(metric_sum(&text, "loadring_in_flight"), 0.0, "{text}");
}

/// A client that leaves in the middle of the body: the rest is read in a
/// place for abandoned requests, or the connection to the backend closed
/// when there is none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_left_unread_goes_on_up_to_the_limit() {
    let backend = backend_holding(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc").await;
    let running = proxy(backend.addr, 2).await;
    let first = backend.received.load(SeqCst);
    for round in 1..=6u64 {
        let mut tcp = TcpStream::connect(running.addr).await.unwrap();
        tcp.write_all(format!("GET /{round} HTTP/1.1\r\nhost: held\r\n\r\n").as_bytes())
            .await
            .unwrap();
        // The head and the start of the body reached the client.
        let seen = read_until(&mut tcp, b"abc").await;
        assert!(
            seen.starts_with(b"HTTP/1.1 200"),
            "{}",
            String::from_utf8_lossy(&seen)
        );
        assert_eq!(backend.received.load(SeqCst), first + round);
        drop(tcp);
    }
    until(&backend, "the limit", |held, _| held == 2).await;
    let text = running.metrics().await;
    assert_eq!(
        metric_sum(&text, "loadring_abandoned_cancelled_total"),
        4.0,
        "{text}"
    );
    assert_eq!(metric_sum(&text, "loadring_in_flight"), 2.0, "{text}");
}

/// What one HTTP/2 connection can hold open at once: 200 streams (the
/// proxy's `SETTINGS_MAX_CONCURRENT_STREAMS`), each a request that may
/// hold a connection to a backend.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_connection_may_open_200_streams_at_once() {
    let backend = holding_backend().await;
    backend.release.send_replace(true);
    let running = proxy(backend.addr, 0).await;
    let tcp = TcpStream::connect(running.addr).await.unwrap();
    let (h2, connection) = h2::client::handshake(tcp).await.unwrap();
    let connection = tokio::spawn(connection);
    let mut h2 = h2.ready().await.unwrap();
    let request = Request::get("http://held/").body(()).unwrap();
    let (response, _) = h2.send_request(request, true).unwrap();
    let response = tokio::time::timeout(WAIT, response).await.unwrap().unwrap();
    assert_eq!(response.status(), 200);
    // The server's SETTINGS came before its answer.
    assert_eq!(h2.current_max_send_streams(), 200);
    drop(h2);
    connection.abort();
}

/// Sends a request for `/` to `proxy` on a new connection, reads until the
/// answer's head has come, and closes the connection.
async fn ask_and_leave(proxy: SocketAddr) {
    let mut tcp = TcpStream::connect(proxy).await.unwrap();
    tcp.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tokio::time::timeout(WAIT, tcp.read(&mut buf))
            .await
            .expect("the answer's head in time")
            .unwrap();
        assert!(n > 0, "closed before the head");
        seen.extend_from_slice(&buf[..n]);
    }
    assert!(seen.starts_with(b"HTTP/1.1 200"));
}

/// Waits until nothing is in flight or abandoned any more.
async fn all_released(running: &Running) {
    let released = eventually(WAIT, || async {
        let text = running.metrics().await;
        metric_sum(&text, "loadring_in_flight") == 0.0
            && metric_sum(&text, "loadring_abandoned") == 0.0
    })
    .await;
    assert!(released, "{}", running.metrics().await);
}

/// A client that asks for a gigabyte and leaves once the head has come:
/// the rest is read up to a mebibyte, then the connection to the backend
/// is closed and the slot released. Before, the proxy read the whole
/// gigabyte from the backend for nobody, for every such request: a
/// request of a few bytes cost the backend and the proxy the whole answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_answer_whose_client_left_is_cut_after_a_mebibyte() {
    let backend = common::endless_backend().await;
    let running = proxy(backend.addr, 16).await;
    ask_and_leave(running.addr).await;
    assert!(
        backend.cut_off().await,
        "the backend's connection is still open: the whole answer is being read"
    );
    all_released(&running).await;
}

/// A backend that answers with a chunked body of one byte every 20 ms,
/// without end; it counts the answers whose connection the proxy closed.
async fn trickling_backend() -> (SocketAddr, Arc<AtomicU64>, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let closed = Arc::new(AtomicU64::new(0));
    let counted = closed.clone();
    let task = tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let closed = counted.clone();
            tokio::spawn(async move {
                if !common::read_head(&mut stream).await {
                    return;
                }
                let head = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";
                if stream.write_all(head).await.is_err() {
                    return;
                }
                let mut ticks = tokio::time::interval(std::time::Duration::from_millis(20));
                loop {
                    ticks.tick().await;
                    if stream.write_all(b"1\r\nx\r\n").await.is_err() {
                        closed.fetch_add(1, SeqCst);
                        return;
                    }
                }
            });
        }
    });
    (addr, closed, task)
}

/// A client that leaves an endless stream of small pieces (events, a
/// feed), each well within the backend timeout: the rest is read for the
/// timeout in all, then the connection to the backend is closed and the
/// slot released. Before, each pause was bounded and the whole was not:
/// the proxy read the stream, and held its slot and a place for abandoned
/// requests, for as long as the backend sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_stream_whose_client_left_is_cut_at_the_timeout() {
    let (backend, closed, task) = trickling_backend().await;
    let mut c = ClusterConfig::new("held", "rr".parse().unwrap());
    c.endpoints = vec![backend.to_string().parse().unwrap()];
    c.timeout = std::time::Duration::from_millis(500);
    // One failure would eject it: the cut is no verdict on a backend that
    // was sending.
    c.health.eject_after = 1;
    let running =
        running::serve(running::config(vec![c], vec![], ClientLimits::default()), 2).await;
    ask_and_leave(running.addr).await;
    assert!(
        eventually(WAIT, || async { closed.load(SeqCst) == 1 }).await,
        "the backend's stream is still being read"
    );
    all_released(&running).await;
    let text = running.metrics().await;
    assert_eq!(
        metric_sum(&text, "loadring_endpoint_healthy"),
        1.0,
        "{text}"
    );
    task.abort();
}

/// A failed answer (a 500) whose client left after its head is read to its
/// end and then counted as the failure it is: with one failure enough to
/// eject it, the endpoint is ejected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_answer_read_to_its_end_for_nobody_is_still_a_failure() {
    let backend =
        backend_holding(b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 10\r\n\r\nabc")
            .await;
    let mut c = ClusterConfig::new("held", "rr".parse().unwrap());
    c.endpoints = vec![backend.addr.to_string().parse().unwrap()];
    c.retries = 0;
    c.health.eject_after = 1;
    let running =
        running::serve(running::config(vec![c], vec![], ClientLimits::default()), 2).await;
    let mut tcp = TcpStream::connect(running.addr).await.unwrap();
    tcp.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    read_until(&mut tcp, b"abc").await;
    drop(tcp);
    assert_eq!(
        metric_sum(&running.metrics().await, "loadring_endpoint_healthy"),
        1.0,
        "not judged before its end"
    );
    backend.release.send_replace(true);
    let ejected = eventually(WAIT, || async {
        metric_sum(&running.metrics().await, "loadring_endpoint_healthy") == 0.0
    })
    .await;
    assert!(ejected, "{}", running.metrics().await);
}
