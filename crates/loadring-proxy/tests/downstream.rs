//! The gateway's own HTTP/1.1 server (src/downstream/), end to end: a
//! real proxy on 127.0.0.1 in front of a real backend (the demo backend, or
//! one of raw bytes written here), a client of raw bytes on a `TcpStream`.
//! Each test asserts on the bytes the client gets back (status, framing,
//! the connection's close) and on what the backend received.
//!
//! Nothing races a sleep: every wait is for an event (an answer read to
//! its end, the connection's close, a count reached), bounded by [`STEP`]
//! or [`WAIT`] only so that a hang fails with a message.
//!
//! Every answer read here is checked to carry exactly one `Date` field
//! (RFC 9110 6.6.1) when it is final.

use crate::common::{self, eventually, metric_sum, STEP, WAIT};
use crate::running::{self, Running};
use crate::wire::{lossy, Answer, Wire};

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use loadring_proxy::{ClusterConfig, DemoBackend};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

// ---------------------------------------------------------------------------
// The client: raw bytes out, answers parsed from the bytes that come back.
// ---------------------------------------------------------------------------

/// A client connection to the proxy, with what was read and not yet parsed.
type Conn = Wire<TcpStream>;

impl Conn {
    async fn open(addr: SocketAddr) -> Conn {
        let stream = tokio::time::timeout(STEP, TcpStream::connect(addr))
            .await
            .expect("connected to the proxy in time")
            .expect("the proxy accepts");
        // Each write its own segment (the byte-at-a-time test).
        stream.set_nodelay(true).unwrap();
        Wire::new(stream, STEP)
    }

    /// The next answer, interim ones included, to a GET.
    async fn answer(&mut self) -> Answer {
        self.answer_to("GET").await
    }

    /// The next final answer to a GET; no interim answer may come first.
    async fn final_answer(&mut self) -> Answer {
        let answer = self.answer().await;
        assert!(answer.status >= 200, "an interim answer: {}", answer.head);
        answer
    }
}

/// A GET of `path` on HTTP/1.1 (kept alive), as bytes.
fn get(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n")
}

// ---------------------------------------------------------------------------
// Backends and proxies.
// ---------------------------------------------------------------------------

fn cluster(backend: SocketAddr) -> ClusterConfig {
    let mut c = ClusterConfig::new("default", "rr".parse().unwrap());
    c.endpoints = vec![backend.to_string().parse().unwrap()];
    c
}

/// The demo backend (it echoes a request's body, else says its address)
/// behind a proxy with `retries` (0: bodies streamed to the backend as
/// they come; more: read ahead into the retry buffer first).
async fn demo(retries: u32) -> (DemoBackend, Running) {
    let b = DemoBackend::start("127.0.0.1:0").await.unwrap();
    let mut c = cluster(b.addr());
    c.retries = retries;
    let proxy = running::start(c).await;
    (b, proxy)
}

/// A backend of raw bytes: each request head it reads (a byte at a time:
/// nothing after it is taken) is answered with `reply`; the connection is
/// then closed (`close`) or read on for the next head.
struct ScriptedBackend {
    addr: SocketAddr,
    /// Request heads read, over all connections.
    heads: Arc<AtomicU64>,
    /// Those heads, as they came.
    seen: Arc<Mutex<Vec<String>>>,
    task: JoinHandle<()>,
}

impl Drop for ScriptedBackend {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Reads one request head off `stream`: `None` when it closed first.
async fn read_one_head(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte).await {
            Ok(1) => head.push(byte[0]),
            _ => return None,
        }
    }
    Some(lossy(&head))
}

async fn scripted_backend(reply: &'static [u8], close: bool) -> ScriptedBackend {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let heads = Arc::new(AtomicU64::new(0));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (counted, kept) = (heads.clone(), seen.clone());
    let task = tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let (heads, seen) = (counted.clone(), kept.clone());
            tokio::spawn(async move {
                while let Some(head) = read_one_head(&mut stream).await {
                    seen.lock().unwrap().push(head);
                    heads.fetch_add(1, SeqCst);
                    if stream.write_all(reply).await.is_err() {
                        return;
                    }
                    if close {
                        let _ = stream.shutdown().await;
                        return;
                    }
                }
            });
        }
    });
    ScriptedBackend {
        addr,
        heads,
        seen,
        task,
    }
}

/// A proxy without retries in front of a [`scripted_backend`].
async fn behind_scripted(reply: &'static [u8], close: bool) -> (ScriptedBackend, Running) {
    let backend = scripted_backend(reply, close).await;
    let mut c = cluster(backend.addr);
    c.retries = 0;
    let proxy = running::start(c).await;
    (backend, proxy)
}

/// A backend that reads a request head and holds it: it answers only once
/// released, and notes when the proxy closes the connection first (what
/// follows the head, a body, is read and dropped meanwhile).
struct HoldingBackend {
    addr: SocketAddr,
    /// Request heads read.
    held: Arc<AtomicU64>,
    /// Connections the proxy closed before the release.
    closed_by_proxy: Arc<AtomicU64>,
    release: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Drop for HoldingBackend {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn holding_backend() -> HoldingBackend {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let held = Arc::new(AtomicU64::new(0));
    let closed_by_proxy = Arc::new(AtomicU64::new(0));
    let (release, released) = watch::channel(false);
    let (h, c) = (held.clone(), closed_by_proxy.clone());
    let task = tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let (held, closed, mut released) = (h.clone(), c.clone(), released.clone());
            tokio::spawn(async move {
                if read_one_head(&mut stream).await.is_none() {
                    return;
                }
                held.fetch_add(1, SeqCst);
                let (mut reading, mut writing) = stream.split();
                let gone = async {
                    let mut buf = [0u8; 4096];
                    while let Ok(n) = reading.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                    }
                };
                let answer = tokio::select! {
                    () = gone => false,
                    released = released.wait_for(|r| *r) => released.is_ok(),
                };
                if !answer {
                    closed.fetch_add(1, SeqCst);
                    return;
                }
                let _ = writing
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                    .await;
                // Kept open, as a backend's connection is.
                std::future::pending::<()>().await;
            });
        }
    });
    HoldingBackend {
        addr,
        held,
        closed_by_proxy,
        release,
        task,
    }
}

/// Until `count` is `n`; fails naming `what` if it is not in time.
async fn until_count(count: &AtomicU64, n: u64, what: &str) {
    assert!(
        eventually(WAIT, || async { count.load(SeqCst) == n }).await,
        "{what}: {} instead of {n}",
        count.load(SeqCst)
    );
}

/// Until the metric `name`, over all its series, is `n`.
async fn until_metric(proxy: &Running, name: &str, n: f64) {
    let reached = eventually(WAIT, || async {
        metric_sum(&proxy.metrics().await, name) == n
    })
    .await;
    assert!(reached, "{name}: not {n}\n{}", proxy.metrics().await);
}

// ---------------------------------------------------------------------------
// 1. Pipelining.
// ---------------------------------------------------------------------------

/// Sends `n` GETs (`/1` … `/n`, the last with `Connection: close`) in
/// one write; their answers come in order on the connection, one each,
/// and then the close.
async fn pipelined_gets(n: usize) {
    let (b, proxy) = demo(1).await;
    let mut conn = Conn::open(proxy.addr).await;
    let mut all = String::new();
    for i in 1..=n {
        let close = if i == n { "Connection: close\r\n" } else { "" };
        all.push_str(&format!("GET /{i} HTTP/1.1\r\nHost: x\r\n{close}\r\n"));
    }
    conn.send(&all).await;
    for i in 1..=n {
        let answer = conn.final_answer().await;
        assert_eq!(answer.status, 200, "{i}: {}", answer.head);
        assert_eq!(
            answer.field("x-echo-uri"),
            Some(format!("/{i}").as_str()),
            "answer {i} in order: {}",
            answer.head
        );
        assert_eq!(answer.text(), format!("{}\n", b.addr()), "{i}");
    }
    conn.closed().await;
    assert_eq!(
        b.requests(),
        n as u64,
        "each request reached the backend once"
    );
}

/// RFC 9112 9.3.2: a server MAY process pipelined requests in parallel but
/// MUST send the responses in the order the requests were received.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_pipelined_gets_are_answered_in_order_on_one_connection() {
    pipelined_gets(2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_pipelined_gets_are_answered_in_order_on_one_connection() {
    pipelined_gets(10).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_pipelined_gets_are_answered_in_order_on_one_connection() {
    pipelined_gets(100).await;
}

/// RFC 9112 9.6: a server that receives `close` MUST NOT process any
/// further request received on that connection: what was pipelined after
/// it is never forwarded nor answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_pipelined_after_connection_close_is_answered() {
    let (b, proxy) = demo(1).await;
    let mut conn = Conn::open(proxy.addr).await;
    conn.send(
        "GET /1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n\
         GET /2 HTTP/1.1\r\nHost: x\r\n\r\n",
    )
    .await;
    let answer = conn.final_answer().await;
    assert_eq!(answer.field("x-echo-uri"), Some("/1"), "{}", answer.head);
    assert_eq!(answer.field("connection"), Some("close"), "{}", answer.head);
    conn.closed().await;
    assert_eq!(b.requests(), 1, "the request after close was forwarded");
}

/// Requests with bodies pipelined with one without, in one write: each
/// body goes with its own request (none is read as the next request).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_requests_with_bodies_each_get_their_own_body() {
    for retries in [0, 1] {
        let (b, proxy) = demo(retries).await;
        let mut conn = Conn::open(proxy.addr).await;
        conn.send(
            "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello\
             POST /b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n\
             GET /c HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .await;
        let a = conn.final_answer().await;
        assert_eq!((a.status, a.text().as_str()), (200, "hello"), "{retries}");
        assert_eq!(a.field("x-echo-uri"), Some("/a"));
        let bb = conn.final_answer().await;
        assert_eq!((bb.status, bb.text().as_str()), (200, "abc"), "{retries}");
        assert_eq!(bb.field("x-echo-uri"), Some("/b"));
        let c = conn.final_answer().await;
        assert_eq!(c.text(), format!("{}\n", b.addr()), "{retries}");
        assert_eq!(c.field("x-echo-uri"), Some("/c"));
        conn.closed().await;
        assert_eq!(b.requests(), 3, "{retries}");
    }
}

// ---------------------------------------------------------------------------
// 2. Keep-alive.
// ---------------------------------------------------------------------------

/// RFC 9112 9.3: HTTP/1.1 persists by default.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_1_1_connection_is_kept_alive_by_default() {
    let (b, proxy) = demo(1).await;
    let mut conn = Conn::open(proxy.addr).await;
    for i in 1..=3 {
        conn.send(get(&format!("/{i}"))).await;
        let answer = conn.final_answer().await;
        assert_eq!(answer.status, 200, "{}", answer.head);
        assert_eq!(answer.field("connection"), None, "{}", answer.head);
        assert_eq!(answer.field("x-echo-uri"), Some(format!("/{i}").as_str()));
    }
    assert_eq!(b.requests(), 3);
}

/// RFC 9112 9.6: a server that receives `close` MUST initiate a close of
/// the connection after it sends the response, and SHOULD send `close`
/// in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_close_is_answered_connection_close_and_the_connection_closed() {
    let (b, proxy) = demo(1).await;
    let mut conn = Conn::open(proxy.addr).await;
    conn.send("GET /c HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await;
    let answer = conn.final_answer().await;
    assert_eq!(answer.status, 200, "{}", answer.head);
    assert_eq!(answer.field("connection"), Some("close"), "{}", answer.head);
    assert_eq!(answer.text(), format!("{}\n", b.addr()));
    conn.closed().await;
    assert_eq!(b.requests(), 1);
}

/// RFC 9112 9.3: an HTTP/1.0 connection persists only with `keep-alive`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_1_0_request_without_keep_alive_is_answered_and_the_connection_closed() {
    let (b, proxy) = demo(1).await;
    let mut conn = Conn::open(proxy.addr).await;
    conn.send("GET /old HTTP/1.0\r\nHost: x\r\n\r\n").await;
    let answer = conn.final_answer().await;
    assert_eq!(answer.status, 200, "{}", answer.head);
    assert_eq!(answer.field("connection"), Some("close"), "{}", answer.head);
    assert_eq!(answer.field("transfer-encoding"), None, "{}", answer.head);
    assert_eq!(answer.text(), format!("{}\n", b.addr()));
    conn.closed().await;
    assert_eq!(b.requests(), 1);
}

/// RFC 9112 9.3 and appendix C.2.2: an HTTP/1.0 client that sends
/// `keep-alive` is answered `keep-alive` and may send its next request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_1_0_request_with_keep_alive_is_answered_keep_alive_and_the_connection_kept() {
    let (b, proxy) = demo(1).await;
    let mut conn = Conn::open(proxy.addr).await;
    for i in 1..=2 {
        conn.send(format!(
            "GET /{i} HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\n\r\n"
        ))
        .await;
        let answer = conn.final_answer().await;
        assert_eq!(answer.status, 200, "{}", answer.head);
        assert_eq!(
            answer.field("connection"),
            Some("keep-alive"),
            "{}",
            answer.head
        );
        assert!(answer.field("content-length").is_some(), "{}", answer.head);
        assert_eq!(answer.field("x-echo-uri"), Some(format!("/{i}").as_str()));
    }
    // And the last request, without keep-alive, closes it.
    conn.send("GET /3 HTTP/1.0\r\nHost: x\r\n\r\n").await;
    assert_eq!(conn.final_answer().await.status, 200);
    conn.closed().await;
    assert_eq!(b.requests(), 3);
}

// ---------------------------------------------------------------------------
// 3. Heads refused: smuggling, versions, sizes.
// ---------------------------------------------------------------------------

/// Each of `cases` (what is sent on a fresh connection) is answered
/// `status` by the proxy, which then closes the connection, and nothing of
/// any reaches the backend (not even a connection).
async fn refused(cases: &[&[u8]], status: u16) {
    refused_then(cases, status, true).await;
}

/// [`refused`], the connection closed after (`closes`) or not necessarily.
async fn refused_then(cases: &[&[u8]], status: u16, closes: bool) {
    let (b, proxy) = demo(1).await;
    for &case in cases {
        // Named by its start (some are 70 kB).
        let what = lossy(&case[..case.len().min(160)]);
        let mut conn = Conn::open(proxy.addr).await;
        conn.send(case).await;
        let answer = conn.answer().await;
        assert_eq!(answer.status, status, "{what:?}: {}", answer.head);
        if closes {
            assert_eq!(
                answer.field("connection"),
                Some("close"),
                "{what:?}: {}",
                answer.head
            );
            conn.closed().await;
        }
        assert_eq!(b.requests(), 0, "{what:?} reached the backend");
        assert_eq!(b.connections(), 0, "{what:?}: the backend was contacted");
    }
    // The proxy still serves.
    assert_eq!(common::get(proxy.addr, "/", &[]).await.status, 200);
    assert_eq!(b.requests(), 1);
}

/// RFC 9112 6.3: a request with both Content-Length and Transfer-Encoding
/// ought to be handled as an error (the classic smuggling vector), as
/// nginx refuses it; RFC 9110 8.6: differing lengths are unrecoverable.
/// A smuggled request follows each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_length_said_two_ways_is_400_and_nothing_reaches_the_backend() {
    refused(
        &[
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n\
              0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n\
              0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n\
              helloGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 6\r\n\r\n\
              helloGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n",
        ],
        400,
    )
    .await;
}

/// RFC 9110 8.6: Content-Length = 1*DIGIT; anything else is invalid
/// (RFC 9112 6.3: 400 and close).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_content_length_that_is_not_digits_is_400_and_nothing_reaches_the_backend() {
    refused(
        &[
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +5\r\n\r\nhello",
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\nhello",
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0x5\r\n\r\nhello",
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5 5\r\n\r\nhello",
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length:\r\n\r\nhello",
        ],
        400,
    )
    .await;
}

/// RFC 9112 6.1: a server MUST NOT take an HTTP/1.0 request's
/// Transfer-Encoding as framing, and SHOULD treat it as faulty (400,
/// close).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transfer_encoding_on_http_1_0_is_400_and_nothing_reaches_the_backend() {
    refused(
        &[
            b"POST / HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\
            0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n",
        ],
        400,
    )
    .await;
}

/// RFC 9112 6.3: a request whose final transfer coding is not chunked has
/// no reliable length: 400 and close.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transfer_coding_that_does_not_end_in_chunked_is_400_and_nothing_reaches_the_backend() {
    refused(
        &[
            b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\nhello",
            b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n",
        ],
        400,
    )
    .await;
}

/// RFC 9112 6.1: a coding the server does not understand is 501.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gzip_then_chunked_is_501_and_nothing_reaches_the_backend() {
    refused(
        &[b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"],
        501,
    )
    .await;
}

/// RFC 9112 5.1: a server MUST reject with 400 a field line with
/// whitespace between its name and the colon.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whitespace_before_a_fields_colon_is_400_and_nothing_reaches_the_backend() {
    refused(
        &[
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length : 5\r\n\r\nhello",
            b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding\t: chunked\r\n\r\n0\r\n\r\n",
        ],
        400,
    )
    .await;
}

/// RFC 9112 5.2: a server MUST reject obs-fold with 400 (or replace it;
/// the gateway rejects).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_obs_fold_line_is_400_and_nothing_reaches_the_backend() {
    refused(
        &[
            b"GET / HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n b\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip,\r\n chunked\r\n\r\n0\r\n\r\n",
        ],
        400,
    )
    .await;
}

/// RFC 9110 5.5: a field value with a NUL or a bare CR MUST be rejected
/// (or the character replaced; the gateway rejects).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nul_or_a_bare_cr_in_a_field_is_400_and_nothing_reaches_the_backend() {
    refused(
        &[
            b"GET / HTTP/1.1\r\nHost: x\r\nX-A: a\0b\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: x\r\nX-A: a\rb\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: x\r\nX-A: a\rContent-Length: 5\r\n\r\nhello",
        ],
        400,
    )
    .await;
}

/// RFC 9112 3.2: a server MUST answer 400 to an HTTP/1.1 request without
/// a Host field or with more than one. (The framing is sound, so the
/// connection may stay open.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_host_or_two_hosts_is_400_and_nothing_reaches_the_backend() {
    refused_then(
        &[
            b"GET / HTTP/1.1\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n\r\n",
        ],
        400,
        false,
    )
    .await;
}

/// RFC 9112 3.2.3: the authority form is for CONNECT alone; on GET it is
/// an invalid request target (400).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_authority_form_target_on_get_is_400_and_nothing_reaches_the_backend() {
    refused(
        &[b"GET host.example:80 HTTP/1.1\r\nHost: host.example:80\r\n\r\n"],
        400,
    )
    .await;
}

/// RFC 9110 15.6.6: 505 for a major version the server does not support
/// (`HTTP/2.0` as a request line is not HTTP/2's preface).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_major_version_is_505_and_nothing_reaches_the_backend() {
    refused(
        &[
            b"GET / HTTP/2.0\r\nHost: x\r\n\r\n",
            b"GET / HTTP/3.0\r\nHost: x\r\n\r\n",
            b"GET / HTTP/0.9\r\nHost: x\r\n\r\n",
        ],
        505,
    )
    .await;
}

/// RFC 9110 2.5: a server SHOULD process a request of a higher minor
/// version (`HTTP/1.2`) as the highest it is conformant to within that
/// major version, 1.1, and answer in HTTP/1.1, as nginx does (505 is for
/// major versions: RFC 9110 15.6.6).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_1_2_is_served_as_http_1_1() {
    let (b, proxy) = demo(1).await;
    let mut conn = Conn::open(proxy.addr).await;
    for i in 1..=2 {
        conn.send(format!("GET /{i} HTTP/1.2\r\nHost: x\r\n\r\n"))
            .await;
        let answer = conn.final_answer().await;
        assert_eq!(answer.status, 200, "{}", answer.head);
        assert_eq!(answer.field("connection"), None, "kept: {}", answer.head);
        assert_eq!(answer.field("x-echo-uri"), Some(format!("/{i}").as_str()));
    }
    assert_eq!(b.requests(), 2);
}

/// RFC 6585 5: 431 for header fields too large: more than 100 fields.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_than_100_header_fields_is_431_and_nothing_reaches_the_backend() {
    let mut text = String::from("GET / HTTP/1.1\r\nHost: x\r\n");
    for i in 1..=100 {
        text.push_str(&format!("X-F{i}: {i}\r\n"));
    }
    text.push_str("\r\n");
    refused(&[text.as_bytes()], 431).await;
}

/// 100 fields in all are read and passed on, every one. (Not to the demo
/// backend: hyper's server takes 100 fields too, and the gateway adds its
/// own, `X-Forwarded-For`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_of_100_fields_is_forwarded_whole() {
    let (backend, proxy) =
        behind_scripted(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok", false).await;
    let mut text = String::from("GET / HTTP/1.1\r\nHost: x\r\n");
    for i in 1..100 {
        text.push_str(&format!("X-F{i}: {i}\r\n"));
    }
    text.push_str("\r\n");
    let mut conn = Conn::open(proxy.addr).await;
    conn.send(&text).await;
    let answer = conn.final_answer().await;
    assert_eq!((answer.status, answer.text().as_str()), (200, "ok"));
    let seen = backend.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    for i in 1..100 {
        assert!(
            seen[0]
                .to_ascii_lowercase()
                .contains(&format!("\r\nx-f{i}: {i}\r\n")),
            "x-f{i}: {}",
            seen[0]
        );
    }
}

/// RFC 6585 5: 431 for a head over the gateway's 64 KiB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_70_kib_header_value_is_431_and_nothing_reaches_the_backend() {
    let text = format!(
        "GET / HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "a".repeat(70 * 1024)
    );
    refused(&[text.as_bytes()], 431).await;
}

/// RFC 9112 2.2: a server SHOULD ignore at least one empty line before a
/// request line, and MAY take a bare LF as a line's end (nginx does
/// both); the request is forwarded with proper CRLFs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_lines_before_a_request_and_bare_lf_line_ends_are_read() {
    let (b, proxy) = demo(1).await;
    let mut conn = Conn::open(proxy.addr).await;
    conn.send("\r\n\r\nGET /after-empty HTTP/1.1\r\nHost: x\r\n\r\n")
        .await;
    let answer = conn.final_answer().await;
    assert_eq!(
        answer.field("x-echo-uri"),
        Some("/after-empty"),
        "{}",
        answer.head
    );
    conn.send("GET /lf HTTP/1.1\nHost: x\nX-A: b\n\n").await;
    let answer = conn.final_answer().await;
    assert_eq!(answer.field("x-echo-uri"), Some("/lf"), "{}", answer.head);
    assert_eq!(b.requests(), 2);
}

/// RFC 9112 3: a server that receives a request-target longer than any
/// URI it wishes to parse MUST answer 414 (URI Too Long), as nginx does
/// for a request line over its buffers. A target of 60 000 bytes is
/// read; one of 70 000, whose request line alone is over the 64 KiB a
/// head may take, is refused, and nothing reaches the backend.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_target_over_64_kib_is_414_and_nothing_reaches_the_backend() {
    let (b, proxy) = demo(1).await;
    let mut conn = Conn::open(proxy.addr).await;
    conn.send(format!(
        "GET /{} HTTP/1.1\r\nHost: x\r\n\r\n",
        "a".repeat(60_000)
    ))
    .await;
    assert_eq!(conn.final_answer().await.status, 200);
    assert_eq!(b.requests(), 1);
    drop((b, proxy));
    let long = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(70_000));
    refused(&[long.as_bytes()], 414).await;
}

// ---------------------------------------------------------------------------
// 4. Request bodies.
// ---------------------------------------------------------------------------

/// RFC 9112 6.2: a Content-Length body is that many bytes; it reaches the
/// backend whole (the demo backend echoes it), read ahead or streamed, and
/// the connection carries the next request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_content_length_body_reaches_the_backend_whole_and_the_connection_is_reused() {
    let big: String = (0..200 * 1024)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    for retries in [0, 1] {
        let (b, proxy) = demo(retries).await;
        let mut conn = Conn::open(proxy.addr).await;
        for body in ["hello world", big.as_str()] {
            conn.send(format!(
                "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            ))
            .await;
            let answer = conn.final_answer().await;
            assert_eq!(answer.status, 200, "{retries}: {}", answer.head);
            assert_eq!(answer.field("x-echo-method"), Some("POST"));
            assert!(
                answer.text() == body,
                "{retries}: {} bytes back",
                answer.body.len()
            );
        }
        conn.send(get("/next")).await;
        let answer = conn.final_answer().await;
        assert_eq!(answer.field("x-echo-uri"), Some("/next"), "{retries}");
        assert_eq!(answer.text(), format!("{}\n", b.addr()), "{retries}");
        assert_eq!(b.requests(), 3, "{retries}");
    }
}

/// RFC 9112 7.1: chunked, with extensions (ignored: 7.1.1) and trailers
/// (7.1.2), split over many chunks, one of a byte; the body reaches the
/// backend whole and the connection carries the next request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunked_body_with_extensions_and_trailers_reaches_the_backend_whole() {
    for retries in [0, 1] {
        let (b, proxy) = demo(retries).await;
        let mut conn = Conn::open(proxy.addr).await;
        conn.send(
            "POST /chunks HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\
             5;a=b\r\nhello\r\n\
             1;x;y=\"q\"\r\n \r\n\
             00005\r\nworld\r\n\
             A\r\n0123456789\r\n\
             0;end=1\r\nX-Trailer: t\r\nX-Other: u\r\n\r\n",
        )
        .await;
        let answer = conn.final_answer().await;
        assert_eq!(answer.status, 200, "{retries}: {}", answer.head);
        assert_eq!(answer.text(), "hello world0123456789", "{retries}");
        conn.send(get("/next")).await;
        let answer = conn.final_answer().await;
        assert_eq!(answer.field("x-echo-uri"), Some("/next"), "{retries}");
        assert_eq!(b.requests(), 2, "{retries}");
    }
}

/// RFC 9112 7.1: a chunk size is hex digits; `zz` is a broken body, and
/// so are a negative size, one past 64 bits and chunk data not followed by
/// CRLF. The client gets an error answer and the connection is closed
/// (what follows cannot be found): the request pipelined after is never
/// answered, nor forwarded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunked_body_with_a_bad_chunk_size_is_an_error_and_the_connection_closed() {
    for retries in [0, 1] {
        let (b, proxy) = demo(retries).await;
        for body in [
            "zz\r\nhello\r\n0\r\n\r\n",
            "-5\r\nhello\r\n0\r\n\r\n",
            "1ffffffffffffffff\r\nhello\r\n0\r\n\r\n",
            "5\r\nhelloXX0\r\n\r\n",
        ] {
            let mut conn = Conn::open(proxy.addr).await;
            conn.send(format!(
                "POST /bad HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\
                 {body}GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
            ))
            .await;
            let answer = conn.final_answer().await;
            assert!(
                (400..600).contains(&answer.status),
                "{retries} {body:?}: {}",
                answer.head
            );
            assert_ne!(answer.field("x-echo-uri"), Some("/smuggled"));
            conn.closed().await;
            proxy.wait_in_flight(0.0).await;
        }
        assert!(
            b.requests() <= 4,
            "{retries}: only the broken requests may have been forwarded"
        );
    }
}

// ---------------------------------------------------------------------------
// 5. Expect: 100-continue.
// ---------------------------------------------------------------------------

/// RFC 9110 10.1.1: a client that sends `Expect: 100-continue` waits for
/// `100 Continue` before the body; it gets it, then the final answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expect_100_continue_gets_100_continue_before_the_body_then_the_answer() {
    for retries in [0, 1] {
        let (b, proxy) = demo(retries).await;
        let mut conn = Conn::open(proxy.addr).await;
        conn.send(
            "POST /ask HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n",
        )
        .await;
        let interim = conn.head().await;
        assert_eq!(interim, "HTTP/1.1 100 Continue\r\n\r\n", "{retries}");
        conn.send("hello").await;
        let answer = conn.final_answer().await;
        assert_eq!(answer.status, 200, "{retries}: {}", answer.head);
        assert_eq!(answer.text(), "hello", "{retries}");
        // The connection goes on.
        conn.send(get("/next")).await;
        assert_eq!(conn.final_answer().await.field("x-echo-uri"), Some("/next"));
        assert_eq!(b.requests(), 2, "{retries}");
    }
}

/// RFC 9110 10.1.1: a server MUST ignore `100-continue` in an HTTP/1.0
/// request, and RFC 9110 15.2: MUST NOT send a 1xx answer to an HTTP/1.0
/// client. The body is sent once the backend is reading it: the first
/// answer is the final one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_1_0_client_never_gets_100_continue() {
    let (b, proxy) = demo(0).await;
    let mut conn = Conn::open(proxy.addr).await;
    conn.send("POST /old HTTP/1.0\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
        .await;
    assert!(
        eventually(WAIT, || async { b.in_flight() == 1 }).await,
        "the backend has the request"
    );
    conn.send("hello").await;
    let answer = conn.final_answer().await;
    assert_eq!((answer.status, answer.text().as_str()), (200, "hello"));
    conn.closed().await;
}

/// RFC 9110 10.1.1: a server that answers before reading the whole
/// request content SHOULD indicate whether it will close the connection or
/// read on. The gateway reads an unread body past when it is short and
/// already coming (then the connection carries the next request); when
/// it will not (the client still waits for `100 Continue`; a body longer
/// than it discards), it closes the connection after the answer, and the
/// answer must say so: otherwise the client takes the connection for
/// persistent and loses the next request it sends on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_before_an_unread_body_says_the_connection_closes() {
    let (b, proxy) = demo(1).await;
    // A short body, already sent: read past, the connection kept.
    let mut conn = Conn::open(proxy.addr).await;
    conn.send(
        "POST /../x HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello\
         GET /next HTTP/1.1\r\nHost: x\r\n\r\n",
    )
    .await;
    let answer = conn.final_answer().await;
    assert_eq!(answer.status, 400, "{}", answer.head);
    let answer = conn.final_answer().await;
    assert_eq!(answer.field("x-echo-uri"), Some("/next"), "{}", answer.head);
    // The gateway's own 400 (a target that leaves the root) comes before
    // the body, and the connection is closed after it.
    let big = "b".repeat(100_000);
    let mut unsaid = Vec::new();
    for (what, request) in [
        (
            "100-continue",
            "POST /../x HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\
             Expect: 100-continue\r\n\r\n"
                .to_string(),
        ),
        (
            "100 kB body",
            format!(
                "POST /../x HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{big}",
                big.len()
            ),
        ),
    ] {
        let mut conn = Conn::open(proxy.addr).await;
        conn.send(request).await;
        let answer = conn.final_answer().await;
        assert_eq!(answer.status, 400, "{what}: {}", answer.head);
        conn.closed().await;
        if answer.field("connection") != Some("close") {
            unsaid.push(format!("{what}: {}", answer.head));
        }
    }
    assert!(
        unsaid.is_empty(),
        "the connection closed after answers that did not say so:\n{}",
        unsaid.join("\n")
    );
    assert_eq!(b.requests(), 1);
}

// ---------------------------------------------------------------------------
// 6. A client that leaves with its request in flight.
// ---------------------------------------------------------------------------

/// The client closes while the backend holds its request: the request goes
/// on abandoned (counted in flight, as bounded load must see it) until the
/// backend answers; then nothing is in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_leaves_mid_request_is_no_longer_in_flight_once_the_backend_answers() {
    let backend = holding_backend().await;
    let mut c = cluster(backend.addr);
    c.retries = 0;
    let proxy = running::start(c).await;
    let mut conn = Conn::open(proxy.addr).await;
    conn.send(get("/held")).await;
    until_count(&backend.held, 1, "the backend holds the request").await;
    proxy.wait_in_flight(1.0).await;
    drop(conn);
    until_metric(&proxy, "loadring_abandoned", 1.0).await;
    backend.release.send(true).unwrap();
    proxy.wait_in_flight(0.0).await;
    until_metric(&proxy, "loadring_abandoned", 0.0).await;
    assert_eq!(backend.closed_by_proxy.load(SeqCst), 0);
}

/// With `abort_on_close`, the client's close cancels its request at once:
/// the connection to the backend is closed, nothing in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_leaves_mid_request_frees_its_slot_at_once_with_abort_on_close() {
    let backend = holding_backend().await;
    let mut c = cluster(backend.addr);
    c.retries = 0;
    c.abort_on_close = true;
    let proxy = running::start(c).await;
    let mut conn = Conn::open(proxy.addr).await;
    conn.send(get("/held")).await;
    until_count(&backend.held, 1, "the backend holds the request").await;
    proxy.wait_in_flight(1.0).await;
    drop(conn);
    proxy.wait_in_flight(0.0).await;
    until_count(
        &backend.closed_by_proxy,
        1,
        "the proxy closes the backend's connection",
    )
    .await;
}

/// A client that closes halfway through its upload (streamed to the
/// backend): the request cannot be finished, so its backend connection is
/// closed and nothing stays in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_leaves_mid_upload_is_no_longer_in_flight() {
    let backend = holding_backend().await;
    let mut c = cluster(backend.addr);
    c.retries = 0;
    let proxy = running::start(c).await;
    let mut conn = Conn::open(proxy.addr).await;
    conn.send("POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n0123456789")
        .await;
    until_count(&backend.held, 1, "the backend has the head").await;
    proxy.wait_in_flight(1.0).await;
    drop(conn);
    proxy.wait_in_flight(0.0).await;
    until_count(
        &backend.closed_by_proxy,
        1,
        "the proxy closes the backend's connection (half a request went on it)",
    )
    .await;
}

// ---------------------------------------------------------------------------
// 7. A head a byte at a time.
// ---------------------------------------------------------------------------

/// A head (and body) that comes a byte per write is read as one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_sent_a_byte_at_a_time_is_answered_normally() {
    let (b, proxy) = demo(1).await;
    let mut conn = Conn::open(proxy.addr).await;
    let request = b"GET /slow?x=1 HTTP/1.1\r\nHost: x\r\nX-A: b\r\n\r\n\
                    POST /slower HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello";
    for byte in request {
        conn.send([*byte]).await;
    }
    let first = conn.final_answer().await;
    assert_eq!(first.status, 200, "{}", first.head);
    assert_eq!(first.field("x-echo-uri"), Some("/slow?x=1"));
    let second = conn.final_answer().await;
    assert_eq!((second.status, second.text().as_str()), (200, "hello"));
    assert_eq!(second.field("x-echo-uri"), Some("/slower"));
    assert_eq!(b.requests(), 2);
}

// ---------------------------------------------------------------------------
// 8. h2c with prior knowledge on the same listener.
// ---------------------------------------------------------------------------

/// RFC 9113 3.3: a client with prior knowledge sends the preface at once;
/// the listener that reads HTTP/1.1 hands it to the HTTP/2 server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2c_with_prior_knowledge_is_served_on_the_same_listener() {
    let (b, proxy) = demo(1).await;
    let tcp = TcpStream::connect(proxy.addr).await.unwrap();
    let (client, connection) = tokio::time::timeout(STEP, h2::client::handshake(tcp))
        .await
        .expect("the HTTP/2 handshake in time")
        .expect("the HTTP/2 handshake passes");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let mut client = tokio::time::timeout(STEP, client.ready())
        .await
        .expect("ready in time")
        .unwrap();
    let request = http::Request::builder()
        .method("GET")
        .uri(format!("http://{}/h2", proxy.addr))
        .body(())
        .unwrap();
    let (response, _) = client.send_request(request, true).unwrap();
    let response = tokio::time::timeout(STEP, response)
        .await
        .expect("the answer in time")
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-echo-uri"], "/h2");
    assert_eq!(response.headers().get_all("date").iter().count(), 1);
    let mut body = response.into_body();
    let mut data = Vec::new();
    while let Some(chunk) = tokio::time::timeout(STEP, body.data())
        .await
        .expect("the body in time")
    {
        let chunk: Bytes = chunk.unwrap();
        body.flow_control().release_capacity(chunk.len()).unwrap();
        data.extend_from_slice(&chunk);
    }
    assert_eq!(lossy(&data), format!("{}\n", b.addr()));
    // HTTP/1.1 on the same listener still.
    let mut conn = Conn::open(proxy.addr).await;
    conn.send(get("/h1")).await;
    assert_eq!(conn.final_answer().await.field("x-echo-uri"), Some("/h1"));
    assert_eq!(b.requests(), 2);
}

// ---------------------------------------------------------------------------
// 9. An answer without a length.
// ---------------------------------------------------------------------------

const UNTIL_CLOSE: &[u8] = b"HTTP/1.1 200 OK\r\n\r\nhello";

/// RFC 9112 6.3 rule 8: a backend's answer with no length ends at its
/// close; to an HTTP/1.1 client the gateway frames it chunked (RFC 9112
/// 7), and its connection stays usable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_without_a_length_reaches_an_http_1_1_client_chunked() {
    let (backend, proxy) = behind_scripted(UNTIL_CLOSE, true).await;
    let mut conn = Conn::open(proxy.addr).await;
    for round in 1..=2 {
        conn.send(get("/")).await;
        let answer = conn.final_answer().await;
        assert_eq!(answer.status, 200, "{}", answer.head);
        assert_eq!(
            answer.field("transfer-encoding"),
            Some("chunked"),
            "{}",
            answer.head
        );
        assert_eq!(answer.field("content-length"), None, "{}", answer.head);
        assert_eq!(answer.field("connection"), None, "{}", answer.head);
        assert_eq!(lossy(&answer.wire), "5\r\nhello\r\n0\r\n\r\n");
        assert_eq!(backend.heads.load(SeqCst), round);
    }
}

/// RFC 9112 6.1: no Transfer-Encoding to an HTTP/1.0 client: the answer's
/// bytes as they came, then the close that ends them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_without_a_length_reaches_an_http_1_0_client_as_it_came_then_the_close() {
    let (backend, proxy) = behind_scripted(UNTIL_CLOSE, true).await;
    for keep_alive in ["", "Connection: keep-alive\r\n"] {
        let mut conn = Conn::open(proxy.addr).await;
        conn.send(format!("GET / HTTP/1.0\r\nHost: x\r\n{keep_alive}\r\n"))
            .await;
        let answer = conn.final_answer().await;
        assert_eq!(answer.status, 200, "{}", answer.head);
        assert_eq!(answer.field("transfer-encoding"), None, "{}", answer.head);
        assert_eq!(answer.field("content-length"), None, "{}", answer.head);
        assert_eq!(
            answer.field("connection"),
            Some("close"),
            "{keep_alive:?}: {}",
            answer.head
        );
        // Read to the close by `final_answer`: the close came.
        assert_eq!(lossy(&answer.wire), "hello", "{keep_alive:?}");
    }
    assert_eq!(backend.heads.load(SeqCst), 2);
}

// ---------------------------------------------------------------------------
// 10. One Date field on every answer.
// ---------------------------------------------------------------------------

/// RFC 9110 6.6.1: an origin server with a clock MUST send Date on 2xx,
/// 3xx and 4xx answers; a proxy forwarding an answer without one MUST add
/// one; a field that is not a list is said once (RFC 9110 5.3). Every kind
/// of answer the gateway writes has exactly one (checked by
/// [`Conn::answer_to`]): the backend's, its own, refusals, HEAD's, 204,
/// and one forwarded that already had a Date.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_has_exactly_one_date_field() {
    let (b, proxy) = demo(1).await;
    let mut conn = Conn::open(proxy.addr).await;
    for (method, target, status) in [
        ("GET", "/", 200),
        ("HEAD", "/", 200),
        ("GET", "/?status=204", 204),
        ("GET", "/?status=304", 304),
        ("GET", "/?status=404", 404),
        ("GET", "/?status=503", 503),
        // The gateway's own answer: a target that leaves the root.
        ("GET", "/../etc/passwd", 400),
    ] {
        conn.send(format!("{method} {target} HTTP/1.1\r\nHost: x\r\n\r\n"))
            .await;
        let answer = conn.answer_to(method).await;
        assert_eq!(answer.status, status, "{method} {target}: {}", answer.head);
    }
    // A refusal of the head.
    let mut bad = Conn::open(proxy.addr).await;
    bad.send("GET / HTTP/2.0\r\nHost: x\r\n\r\n").await;
    assert_eq!(bad.final_answer().await.status, 505);
    // HTTP/1.0.
    let mut old = Conn::open(proxy.addr).await;
    old.send("GET / HTTP/1.0\r\n\r\n").await;
    assert_eq!(old.final_answer().await.status, 200);
    assert_eq!(b.requests(), 7);
    // A backend that is not there (its port refuses): the gateway's 502.
    let nowhere = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap();
    let mut c = cluster(nowhere);
    c.retries = 0;
    let proxy = running::start(c).await;
    let mut gone = Conn::open(proxy.addr).await;
    gone.send(get("/")).await;
    assert_eq!(gone.final_answer().await.status, 502);
    // A backend's answer with its own Date.
    let (_dated, proxy) = behind_scripted(
        b"HTTP/1.1 200 OK\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\ncontent-length: 2\r\n\r\nok",
        false,
    )
    .await;
    let mut conn = Conn::open(proxy.addr).await;
    conn.send(get("/")).await;
    let answer = conn.final_answer().await;
    assert_eq!((answer.status, answer.text().as_str()), (200, "ok"));
    // And one without a length (the gateway frames it).
    let (_undated, proxy) = behind_scripted(UNTIL_CLOSE, true).await;
    let mut conn = Conn::open(proxy.addr).await;
    conn.send(get("/")).await;
    assert_eq!(conn.final_answer().await.text(), "hello");
}
