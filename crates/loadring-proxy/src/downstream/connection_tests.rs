//! [`H1Connection`] alone, over an in-memory pipe: a client of raw bytes
//! on one end, the connection on the other, and a scripted [`Handler`] in
//! place of the gateway that records what reached it.
//!
//! Expected bytes come from RFC 9112 and RFC 9110, not from running the
//! code. Nothing sleeps: every wait is for an event, bounded by [`GUARD`]
//! only so that a hang fails with a message; timeouts run on paused time
//! (`start_paused`), moved on by `tokio::time::advance`.
//!
//! Every final answer read here is checked to carry exactly one `Date`
//! field (RFC 9110 6.6.1).

use std::collections::VecDeque;
use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Response, StatusCode, Version};
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, DuplexStream, ReadBuf};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::{Ending, H1Connection};
use crate::body::BoxError;
use crate::connect::answer_head::Answered;
use crate::connect::request_head::RequestHead;
use crate::downstream::{ClientBody, Handler, PendingSwitch, Switched};
use crate::drain::Graceful;
use crate::proxy_body::{empty_body, text_body, ProxyBody};

#[path = "../../tests/wire.rs"]
mod wire;
use wire::{lossy, Answer, Wire};

/// How long any one wait may take before the test fails.
const GUARD: Duration = Duration::from_secs(10);
/// The header timeout of the tests that are not about it: never reached.
const NO_TIMEOUT: Duration = Duration::from_secs(3600);
/// The header timeout of the paused-time tests.
const TIMEOUT: Duration = Duration::from_secs(10);
const MS: Duration = Duration::from_millis(1);
const PEER: SocketAddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 40_000));

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

// ---------------------------------------------------------------------------
// The fake gateway.
// ---------------------------------------------------------------------------

/// A request as the handler got it.
#[derive(Debug)]
struct Seen {
    method: String,
    uri: String,
    version: Version,
    headers: HeaderMap,
    /// It carried a [`PendingSwitch`].
    switch: bool,
}

/// A request body as the handler read it whole: its data and trailers,
/// or the error its read ended with.
type ReadBody = Result<(Bytes, Option<HeaderMap>), String>;

/// One scripted answer.
struct Reply {
    status: u16,
    fields: Vec<(&'static str, &'static str)>,
    body: Option<ProxyBody>,
    /// Read the request's body whole before answering (and record it);
    /// else the body is dropped at once.
    read_body: bool,
    /// Answer with the request's body itself (streamed back as it comes).
    echo: bool,
    /// Answer only once this is told (or dropped).
    gate: Option<oneshot::Receiver<()>>,
    /// Never answer; the flag is set when the answer is dropped.
    never: Option<Arc<AtomicBool>>,
    /// Take the request's [`PendingSwitch`] receiver (see `State::switches`).
    take_switch: bool,
}

impl Reply {
    fn new(status: u16, body: ProxyBody) -> Self {
        Reply {
            status,
            fields: Vec::new(),
            body: Some(body),
            read_body: false,
            echo: false,
            gate: None,
            never: None,
            take_switch: false,
        }
    }

    fn text(status: u16, text: &'static str) -> Self {
        Reply::new(status, text_body(text))
    }

    /// A body whose length is unknown, of these frames.
    fn stream(status: u16, frames: Vec<Result<Frame<Bytes>, BoxError>>) -> Self {
        Reply::new(status, streamed(frames))
    }

    fn field(mut self, name: &'static str, value: &'static str) -> Self {
        self.fields.push((name, value));
        self
    }

    fn reading(mut self) -> Self {
        self.read_body = true;
        self
    }

    fn gated(mut self, gate: oneshot::Receiver<()>) -> Self {
        self.gate = Some(gate);
        self
    }

    fn never(dropped: Arc<AtomicBool>) -> Self {
        Reply {
            never: Some(dropped),
            ..Reply::new(200, empty_body())
        }
    }

    fn echo() -> Self {
        Reply {
            echo: true,
            body: None,
            ..Reply::new(200, empty_body())
        }
    }

    /// `101` to a WebSocket upgrade, its connection taken.
    fn switch() -> Self {
        Reply {
            take_switch: true,
            ..Reply::new(101, empty_body())
                .field("connection", "upgrade")
                .field("upgrade", "websocket")
        }
    }
}

/// A body of `frames`, its length unknown (StreamBody says none).
fn streamed(frames: Vec<Result<Frame<Bytes>, BoxError>>) -> ProxyBody {
    StreamBody::new(futures_util::stream::iter(frames)).boxed_unsync()
}

fn data(bytes: &'static [u8]) -> Result<Frame<Bytes>, BoxError> {
    Ok(Frame::data(Bytes::from_static(bytes)))
}

#[derive(Default)]
struct State {
    /// Answers to give, in order; once spent, each request is answered
    /// `200` with its method and target as text.
    script: Mutex<VecDeque<Reply>>,
    seen: Mutex<Vec<Seen>>,
    /// Each body read whole (by a `reading` reply), in order.
    bodies: Mutex<Vec<ReadBody>>,
    /// Each switched connection to come, taken by a `switch` reply.
    switches: Mutex<Vec<oneshot::Receiver<Switched>>>,
}

impl State {
    fn targets(&self) -> Vec<String> {
        lock(&self.seen)
            .iter()
            .map(|s| format!("{} {}", s.method, s.uri))
            .collect()
    }

    fn bodies(&self) -> Vec<ReadBody> {
        lock(&self.bodies).clone()
    }
}

struct Fake(Arc<State>);

/// Sets its flag when dropped.
struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

impl Handler for Fake {
    type Answer = Pin<Box<dyn Future<Output = Answered<ProxyBody>> + Send>>;

    fn answer(&self, parts: Box<RequestHead>, body: ClientBody, peer: SocketAddr) -> Self::Answer {
        assert_eq!(peer, PEER);
        let pending = parts.extensions.get::<PendingSwitch>().cloned();
        lock(&self.0.seen).push(Seen {
            method: parts.method.to_string(),
            uri: parts.uri.to_string(),
            version: parts.version,
            headers: parts.fields.clone().into_map().expect("fields a map takes"),
            switch: pending.is_some(),
        });
        let reply = lock(&self.0.script).pop_front().unwrap_or_else(|| {
            Reply::new(200, text_body(format!("{} {}", parts.method, parts.uri)))
        });
        if reply.take_switch {
            let receiver = pending
                .expect("a request that asks to switch carries a PendingSwitch")
                .take()
                .expect("the first taker has the connection");
            lock(&self.0.switches).push(receiver);
        }
        let state = self.0.clone();
        let Reply {
            status,
            fields,
            body: answer_body,
            read_body,
            echo,
            gate,
            never,
            take_switch: _,
        } = reply;
        let mut body = Some(body);
        if !read_body && !echo {
            // Answered without the body: its reader goes now.
            body = None;
        }
        Box::pin(async move {
            let answer_body = if echo {
                body.take()
                    .expect("the body to echo")
                    .map_err(BoxError::from)
                    .boxed_unsync()
            } else {
                answer_body.expect("a scripted body")
            };
            if read_body {
                let read = match body.take().expect("the body to read").collect().await {
                    Ok(collected) => {
                        let trailers = collected.trailers().cloned();
                        Ok((collected.to_bytes(), trailers))
                    }
                    Err(e) => Err(e.to_string()),
                };
                lock(&state.bodies).push(read);
            }
            if let Some(dropped) = never {
                let _flag = DropFlag(dropped);
                std::future::pending::<()>().await;
            }
            if let Some(gate) = gate {
                let _ = gate.await;
            }
            let mut response = Response::new(answer_body);
            *response.status_mut() = StatusCode::from_u16(status).unwrap();
            for (name, value) in fields {
                response.headers_mut().append(
                    HeaderName::from_static(name),
                    HeaderValue::from_static(value),
                );
            }
            response.into()
        })
    }
}

// ---------------------------------------------------------------------------
// The client: raw bytes out, answers parsed from the bytes that come back.
// ---------------------------------------------------------------------------

/// The client's end of a connection (the raw client of the server's
/// integration tests too).
type Client = Wire<DuplexStream>;

impl Client {
    /// Closes the client's sending side (the connection reads its end).
    async fn shut(&mut self) {
        self.io.shutdown().await.expect("the client shuts its side");
    }

    /// The next answer, which must be final, to a request of `method`.
    async fn final_answer_to(&mut self, method: &str) -> Answer {
        let answer = self.answer_to(method).await;
        assert!(answer.status >= 200, "an interim answer: {}", answer.head);
        answer
    }

    /// The next final answer to a GET.
    async fn answer(&mut self) -> Answer {
        self.final_answer_to("GET").await
    }

    /// Nothing came (yet) and the connection has not closed: a read
    /// would wait.
    fn nothing_yet(&mut self) {
        assert!(self.buf.is_empty(), "bytes came: {:?}", lossy(&self.buf));
        let mut chunk = [0u8; 1024];
        let mut read = ReadBuf::new(&mut chunk);
        match Pin::new(&mut self.io).poll_read(&mut Context::from_waker(Waker::noop()), &mut read) {
            Poll::Pending => {}
            Poll::Ready(Ok(())) if read.filled().is_empty() => panic!("the connection closed"),
            Poll::Ready(Ok(())) => panic!("bytes came: {:?}", lossy(read.filled())),
            Poll::Ready(Err(e)) => panic!("reading: {e}"),
        }
    }
}

// ---------------------------------------------------------------------------
// Serving.
// ---------------------------------------------------------------------------

type Task = JoinHandle<Ending<DuplexStream>>;

/// A connection answering from `script`, not yet polled, and its client.
fn open(
    script: Vec<Reply>,
    header_timeout: Duration,
) -> (Client, Arc<State>, H1Connection<DuplexStream>) {
    let (client, server) = tokio::io::duplex(64 * 1024);
    let state = Arc::new(State::default());
    lock(&state.script).extend(script);
    let conn = H1Connection::new(server, Arc::new(Fake(state.clone())), PEER, header_timeout);
    (Wire::new(client, GUARD), state, conn)
}

/// A connection answering from `script` on a task of its own.
fn serve_for(script: Vec<Reply>, header_timeout: Duration) -> (Client, Arc<State>, Task) {
    let (client, state, conn) = open(script, header_timeout);
    (client, state, tokio::spawn(conn))
}

fn serve(script: Vec<Reply>) -> (Client, Arc<State>, Task) {
    serve_for(script, NO_TIMEOUT)
}

/// Lets every task run until none has more to do now.
async fn settle() {
    for _ in 0..64 {
        tokio::task::yield_now().await;
    }
}

/// How the connection's task ended.
async fn ended(task: Task) -> Ending<DuplexStream> {
    tokio::time::timeout(GUARD, task)
        .await
        .expect("the connection ends in time")
        .expect("the connection's task does not panic")
}

/// The connection's task ended with `Ok(None)`: closed.
async fn ended_closed(task: Task) {
    match ended(task).await {
        Ok(None) => {}
        Ok(Some((_, bytes))) => panic!("handed on as HTTP/2: {:?}", lossy(&bytes)),
        Err(e) => panic!("failed: {e}"),
    }
}

/// A lingering close: the connection, done answering, reads on (and
/// does not end) until its client closes, then ends closed.
async fn lingers_until_its_client_closes(client: &mut Client, task: Task) {
    settle().await;
    assert!(!task.is_finished(), "ended before its client closed");
    client.shut().await;
    ended_closed(task).await;
}

/// `work` run while `conn` is polled along; `conn` must not end.
async fn alongside<T>(
    conn: Pin<&mut H1Connection<DuplexStream>>,
    work: impl Future<Output = T>,
) -> T {
    tokio::select! {
        biased;
        out = work => out,
        ending = conn => panic!("the connection ended: {:?}", ending.map(|o| o.map(|(_, b)| b))),
    }
}

fn poll_once(conn: Pin<&mut H1Connection<DuplexStream>>) -> Poll<Ending<DuplexStream>> {
    conn.poll(&mut Context::from_waker(Waker::noop()))
}

fn get(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nhost: a.example\r\n\r\n")
}

// ---------------------------------------------------------------------------
// 1. Pipelining.
// ---------------------------------------------------------------------------

/// RFC 9112 9.3.2: a server MUST answer pipelined requests in the order
/// they came.
#[tokio::test]
async fn two_pipelined_requests_are_answered_in_order() {
    let (mut client, state, _task) =
        serve(vec![Reply::text(200, "first"), Reply::text(201, "second")]);
    client.send(format!("{}{}", get("/a"), get("/b"))).await;
    let first = client.answer().await;
    assert_eq!(first.status_line(), "HTTP/1.1 200 OK");
    assert_eq!(first.field("content-length"), Some("5"));
    assert_eq!(first.text(), "first");
    let second = client.answer().await;
    assert_eq!(second.status_line(), "HTTP/1.1 201 Created");
    assert_eq!(second.text(), "second");
    assert_eq!(state.targets(), ["GET /a", "GET /b"]);
    let seen = lock(&state.seen);
    for seen in seen.iter() {
        assert_eq!(seen.version, Version::HTTP_11);
        assert_eq!(seen.headers["host"], "a.example");
        assert!(!seen.switch);
    }
}

/// A request with a body, then one without, in one write: each gets its
/// own bytes.
#[tokio::test]
async fn a_pipelined_request_after_a_body_is_read_as_the_next_request() {
    let (mut client, state, _task) = serve(vec![Reply::text(200, "got it").reading()]);
    client
        .send(format!(
            "POST /up HTTP/1.1\r\nhost: a\r\ncontent-length: 5\r\n\r\nhello{}",
            get("/next")
        ))
        .await;
    assert_eq!(client.answer().await.text(), "got it");
    assert_eq!(client.answer().await.text(), "GET /next");
    assert_eq!(state.targets(), ["POST /up", "GET /next"]);
    assert_eq!(state.bodies(), [Ok((Bytes::from_static(b"hello"), None))]);
}

/// RFC 9112 2.2: a server SHOULD ignore at least one empty line before
/// the request line.
#[tokio::test]
async fn empty_lines_before_a_request_line_are_skipped() {
    let (mut client, state, _task) = serve(vec![]);
    client.send(format!("\r\n\n\r\n{}", get("/a"))).await;
    assert_eq!(client.answer().await.text(), "GET /a");
    client.send(format!("\r\n{}", get("/b"))).await;
    assert_eq!(client.answer().await.text(), "GET /b");
    assert_eq!(state.targets(), ["GET /a", "GET /b"]);
}

/// Empty lines before a request line are skipped as they come: they do
/// not count against the head's limit (64 KiB).
#[tokio::test]
async fn empty_lines_before_a_request_do_not_count_against_the_heads_limit() {
    let (mut client, state, _task) = serve(vec![]);
    client.send("\r\n".repeat(33 * 1024)).await;
    client.send(get("/after")).await;
    assert_eq!(client.answer().await.text(), "GET /after");
    assert_eq!(state.targets(), ["GET /after"]);
}

/// A head is read wherever its writes split it: at every byte, and
/// with bare LF line ends (RFC 9112 2.2: a recipient MAY take a bare LF
/// as a line's end).
#[tokio::test]
async fn a_head_split_anywhere_is_read_whole() {
    for text in [
        "GET /x HTTP/1.1\r\nhost: a\r\nx-y: 1\r\n\r\n",
        "GET /x HTTP/1.1\nhost: a\nx-y: 1\n\n",
    ] {
        for at in 1..text.len() {
            let (mut client, state, _task) = serve(vec![]);
            client.send(&text[..at]).await;
            settle().await;
            assert!(state.targets().is_empty(), "{text:?} at {at}: read early");
            client.nothing_yet();
            client.send(&text[at..]).await;
            let answer = client.answer().await;
            assert_eq!(answer.text(), "GET /x", "{text:?} at {at}");
            let seen = lock(&state.seen);
            assert_eq!(seen.len(), 1);
            assert_eq!(seen[0].headers["x-y"], "1", "{text:?} at {at}");
        }
    }
}

/// A head sent a byte at a time is read once whole.
#[tokio::test]
async fn a_head_sent_a_byte_at_a_time_is_read() {
    let text = get("/slow");
    let (mut client, state, _task) = serve(vec![]);
    for byte in text.as_bytes() {
        client.send([*byte]).await;
        settle().await;
    }
    assert_eq!(client.answer().await.text(), "GET /slow");
    assert_eq!(state.targets(), ["GET /slow"]);
}

// ---------------------------------------------------------------------------
// 2. Keep-alive.
// ---------------------------------------------------------------------------

/// RFC 9112 9.3: HTTP/1.1 persists by default.
#[tokio::test]
async fn an_http_1_1_connection_stays_open_after_an_answer() {
    let (mut client, state, task) = serve(vec![]);
    client.send(get("/1")).await;
    let first = client.answer().await;
    assert_eq!(first.field("connection"), None, "{}", first.head);
    settle().await;
    assert!(!task.is_finished());
    client.nothing_yet();
    client.send(get("/2")).await;
    assert_eq!(client.answer().await.text(), "GET /2");
    assert_eq!(state.targets(), ["GET /1", "GET /2"]);
    // Its client's close ends it.
    client.shut().await;
    ended_closed(task).await;
    client.closed().await;
}

/// RFC 9112 9.6: a server that receives `close` MUST close after its
/// answer, and SHOULD say `close` in it; what was pipelined after it is
/// not answered.
#[tokio::test]
async fn connection_close_is_answered_close_and_the_connection_closed() {
    let (mut client, state, task) = serve(vec![]);
    client
        .send(format!(
            "GET /1 HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n{}",
            get("/2")
        ))
        .await;
    let answer = client.answer().await;
    assert_eq!(answer.text(), "GET /1");
    assert_eq!(answer.field("connection"), Some("close"));
    client.closed().await;
    ended_closed(task).await;
    assert_eq!(state.targets(), ["GET /1"]);
}

/// `close` after a body read whole: nothing is left to read, so the
/// connection ends with its answer, without waiting for its client.
#[tokio::test]
async fn connection_close_after_a_body_read_whole_ends_the_connection_at_once() {
    let (mut client, state, task) = serve(vec![Reply::text(200, "stored").reading()]);
    client
        .send("POST /up HTTP/1.1\r\nhost: a\r\nconnection: close\r\ncontent-length: 5\r\n\r\nhello")
        .await;
    let answer = client.answer_to("POST").await;
    assert_eq!(answer.text(), "stored");
    assert_eq!(answer.field("connection"), Some("close"));
    client.closed().await;
    ended_closed(task).await;
    assert_eq!(state.bodies(), [Ok((Bytes::from_static(b"hello"), None))]);
}

/// RFC 9112 9.3: an HTTP/1.0 request without `keep-alive` is the last.
#[tokio::test]
async fn an_http_1_0_request_without_keep_alive_closes_the_connection() {
    let (mut client, state, task) = serve(vec![]);
    client
        .send(format!("GET /1 HTTP/1.0\r\nhost: a\r\n\r\n{}", get("/2")))
        .await;
    let answer = client.answer().await;
    assert_eq!(answer.status_line(), "HTTP/1.1 200 OK");
    assert_eq!(answer.text(), "GET /1");
    assert_eq!(answer.field("content-length"), Some("6"));
    assert_eq!(answer.field("connection"), Some("close"));
    client.closed().await;
    ended_closed(task).await;
    assert_eq!(state.targets(), ["GET /1"]);
    assert_eq!(lock(&state.seen)[0].version, Version::HTTP_10);
}

/// RFC 9112 9.3 (and RFC 9112 C.2.2): an HTTP/1.0 client asks to persist
/// with `keep-alive`, and is told it is kept with `keep-alive`.
#[tokio::test]
async fn an_http_1_0_request_with_keep_alive_is_answered_keep_alive_and_kept() {
    let (mut client, state, task) = serve(vec![]);
    let request =
        |path: &str| format!("GET {path} HTTP/1.0\r\nhost: a\r\nconnection: keep-alive\r\n\r\n");
    client.send(request("/1")).await;
    let first = client.answer().await;
    assert_eq!(first.text(), "GET /1");
    assert_eq!(first.field("connection"), Some("keep-alive"));
    settle().await;
    assert!(!task.is_finished());
    client.send(request("/2")).await;
    let second = client.answer().await;
    assert_eq!(second.text(), "GET /2");
    assert_eq!(second.field("connection"), Some("keep-alive"));
    assert_eq!(state.targets(), ["GET /1", "GET /2"]);
}

// ---------------------------------------------------------------------------
// 3. Framing of an answer without a length.
// ---------------------------------------------------------------------------

/// RFC 9112 6.1, 7.1: an answer of unknown length to HTTP/1.1 is chunked.
#[tokio::test]
async fn an_answer_without_a_length_to_http_1_1_is_chunked() {
    let (mut client, state, task) = serve(vec![Reply::stream(200, vec![data(b"hello")])]);
    client.send(get("/")).await;
    let answer = client.answer().await;
    assert!(
        answer
            .head
            .split("\r\n")
            .any(|l| l == "transfer-encoding: chunked"),
        "{}",
        answer.head
    );
    assert_eq!(answer.field("content-length"), None);
    assert_eq!(answer.field("connection"), None);
    assert_eq!(lossy(&answer.wire), "5\r\nhello\r\n0\r\n\r\n");
    // Kept alive: the chunked body has its end.
    client.send(get("/2")).await;
    assert_eq!(client.answer().await.text(), "GET /2");
    assert_eq!(state.targets(), ["GET /", "GET /2"]);
    assert!(!task.is_finished());
}

/// An empty data frame in a streamed answer writes nothing: a chunk of
/// size 0 is the last chunk (RFC 9112 7.1).
#[tokio::test]
async fn an_empty_frame_of_a_streamed_answer_is_not_a_last_chunk() {
    let (mut client, _state, _task) = serve(vec![Reply::stream(
        200,
        vec![data(b""), data(b"hello"), data(b""), data(b"!")],
    )]);
    client.send(get("/")).await;
    let answer = client.answer().await;
    assert_eq!(lossy(&answer.wire), "5\r\nhello\r\n1\r\n!\r\n0\r\n\r\n");
}

/// RFC 9112 6.1: no chunked coding to an HTTP/1.0 client; without a
/// length the body ends with the connection (RFC 9112 6.3, rule 8),
/// even one that asked to keep it.
#[tokio::test]
async fn an_answer_without_a_length_to_http_1_0_is_raw_then_the_close() {
    for fields in ["", "connection: keep-alive\r\n"] {
        let (mut client, _state, task) = serve(vec![Reply::stream(200, vec![data(b"hello")])]);
        client
            .send(format!("GET / HTTP/1.0\r\nhost: a\r\n{fields}\r\n"))
            .await;
        let answer = client.answer().await;
        assert_eq!(answer.field("transfer-encoding"), None, "{fields:?}");
        assert_eq!(answer.field("content-length"), None, "{fields:?}");
        assert_eq!(answer.field("connection"), Some("close"), "{fields:?}");
        // Read to the close by the client.
        assert_eq!(lossy(&answer.wire), "hello", "{fields:?}");
        ended_closed(task).await;
    }
}

/// A streamed answer's bytes go out as they come: what was gathered is
/// written when the body has nothing ready, not at its end.
#[tokio::test]
async fn a_streamed_answer_is_written_as_its_frames_come() {
    let (mut sender, body) = http_body_util::channel::Channel::<Bytes, BoxError>::new(1);
    let (mut client, _state, _task) = serve(vec![Reply::new(200, body.boxed_unsync())]);
    client.send(get("/")).await;
    sender
        .send_data(Bytes::from_static(b"hello"))
        .await
        .unwrap();
    let head = client.head().await;
    assert!(
        head.contains("\r\ntransfer-encoding: chunked\r\n"),
        "{head}"
    );
    assert_eq!(client.take(10).await, b"5\r\nhello\r\n");
    settle().await;
    client.nothing_yet();
    sender
        .send_data(Bytes::from_static(b"world!"))
        .await
        .unwrap();
    assert_eq!(client.take(11).await, b"6\r\nworld!\r\n");
    let mut trailers = HeaderMap::new();
    trailers.insert("x-sum", HeaderValue::from_static("11"));
    sender.send_trailers(trailers).await.unwrap();
    drop(sender);
    // No `TE: trailers` in the request: the trailers are left out.
    assert_eq!(client.take(5).await, b"0\r\n\r\n");
    client.send(get("/2")).await;
    assert_eq!(client.answer().await.text(), "GET /2");
}

/// RFC 9110 6.5.1, 10.1.4: trailers go to a client that said
/// `TE: trailers`, after the last chunk.
#[tokio::test]
async fn trailers_go_to_a_client_that_takes_them() {
    let frames = || {
        let mut trailers = HeaderMap::new();
        trailers.insert("x-sum", HeaderValue::from_static("5"));
        vec![data(b"hello"), Ok(Frame::trailers(trailers))]
    };
    let (mut client, _state, _task) = serve(vec![
        Reply::stream(200, frames()),
        Reply::stream(200, frames()),
    ]);
    client
        .send("GET /1 HTTP/1.1\r\nhost: a\r\nte: trailers\r\n\r\n")
        .await;
    let answer = client.answer().await;
    assert_eq!(lossy(&answer.wire), "5\r\nhello\r\n0\r\nx-sum: 5\r\n\r\n");
    client.send(get("/2")).await;
    let answer = client.answer().await;
    assert_eq!(lossy(&answer.wire), "5\r\nhello\r\n0\r\n\r\n");
}

/// A large streamed answer reaches the client whole, in order.
#[tokio::test]
async fn a_large_streamed_answer_arrives_whole() {
    let big: Vec<u8> = (0..40_000u32).map(|i| (i % 251) as u8).collect();
    let big = Bytes::from(big);
    let frames = vec![
        Ok(Frame::data(big.clone())),
        data(b"small"),
        Ok(Frame::data(big.clone())),
    ];
    let (mut client, _state, _task) = serve(vec![Reply::stream(200, frames)]);
    client.send(get("/")).await;
    let answer = client.answer().await;
    let mut want = big.to_vec();
    want.extend_from_slice(b"small");
    want.extend_from_slice(&big);
    assert_eq!(answer.body.len(), want.len());
    assert!(answer.body == want, "the body's bytes differ");
    client.send(get("/2")).await;
    assert_eq!(client.answer().await.text(), "GET /2");
}

/// An answer shorter than its Content-Length is cut: the client must see
/// it incomplete (RFC 9112 8), so the connection closes.
#[tokio::test]
async fn an_answer_shorter_than_its_length_closes_the_connection() {
    let (mut client, state, task) = serve(vec![
        Reply::stream(200, vec![data(b"hello")]).field("content-length", "10")
    ]);
    client.send(format!("{}{}", get("/"), get("/2"))).await;
    let head = client.head().await;
    assert!(head.contains("\r\ncontent-length: 10\r\n"), "{head}");
    assert_eq!(client.take(5).await, b"hello");
    client.closed().await;
    ended_closed(task).await;
    assert_eq!(state.targets(), ["GET /"]);
}

/// An answer longer than its Content-Length: what fits goes, then the
/// close (the rest would be read as the next answer).
#[tokio::test]
async fn an_answer_longer_than_its_length_is_cut_at_it_and_the_connection_closed() {
    let (mut client, state, task) =
        serve(vec![
            Reply::stream(200, vec![data(b"he"), data(b"llo")]).field("content-length", "3")
        ]);
    client.send(format!("{}{}", get("/"), get("/2"))).await;
    let answer = client.answer().await;
    assert_eq!(answer.field("content-length"), Some("3"));
    assert_eq!(answer.text(), "hel");
    client.closed().await;
    ended_closed(task).await;
    assert_eq!(state.targets(), ["GET /"]);
}

/// An answer whose body fails midway is cut: no last chunk, and the
/// connection closes (RFC 9112 8: the client sees it incomplete).
#[tokio::test]
async fn an_answer_body_that_fails_is_cut_and_the_connection_closed() {
    let (mut client, state, task) = serve(vec![Reply::stream(
        200,
        vec![data(b"hello"), Err(BoxError::from("backend gone"))],
    )]);
    client.send(format!("{}{}", get("/"), get("/2"))).await;
    let head = client.head().await;
    assert!(
        head.contains("\r\ntransfer-encoding: chunked\r\n"),
        "{head}"
    );
    assert_eq!(client.take(10).await, b"5\r\nhello\r\n");
    client.closed().await;
    ended_closed(task).await;
    assert_eq!(state.targets(), ["GET /"]);
}

// ---------------------------------------------------------------------------
// 4. HEAD, and answers without a body.
// ---------------------------------------------------------------------------

/// RFC 9110 9.3.2: an answer to HEAD has no content (RFC 9112 6.3: it
/// ends at its head, whatever its fields say); the next request's answer
/// follows the head at once.
#[tokio::test]
async fn an_answer_to_head_has_no_body_and_the_next_request_is_answered() {
    let (mut client, state, _task) = serve(vec![
        Reply::text(200, "hello"),
        Reply::stream(200, vec![data(b"streamed")]),
    ]);
    client
        .send(format!(
            "HEAD /1 HTTP/1.1\r\nhost: a\r\n\r\nHEAD /2 HTTP/1.1\r\nhost: a\r\n\r\n{}",
            get("/3")
        ))
        .await;
    let first = client.final_answer_to("HEAD").await;
    assert_eq!(first.field("content-length"), Some("5"));
    assert_eq!(first.field("transfer-encoding"), None);
    let second = client.final_answer_to("HEAD").await;
    assert_eq!(second.field("connection"), None);
    // No body bytes came: the next ones are the third answer's head.
    let third = client.answer().await;
    assert_eq!(third.status_line(), "HTTP/1.1 200 OK");
    assert_eq!(third.text(), "GET /3");
    assert_eq!(state.targets(), ["HEAD /1", "HEAD /2", "GET /3"]);
}

/// RFC 9110 15.3.5, 15.4.5: 204 and 304 have no content; the connection
/// carries the next request.
#[tokio::test]
async fn answers_204_and_304_have_no_body() {
    let (mut client, _state, _task) = serve(vec![
        Reply::text(204, "ignored"),
        Reply::stream(304, vec![data(b"ignored")]),
    ]);
    client
        .send(format!("{}{}{}", get("/1"), get("/2"), get("/3")))
        .await;
    let first = client.answer().await;
    assert_eq!(first.status_line(), "HTTP/1.1 204 No Content");
    assert_eq!(first.field("content-length"), None);
    let second = client.answer().await;
    assert_eq!(second.status_line(), "HTTP/1.1 304 Not Modified");
    assert_eq!(second.field("transfer-encoding"), None);
    assert_eq!(client.answer().await.text(), "GET /3");
}

// ---------------------------------------------------------------------------
// 5. Expect: 100-continue.
// ---------------------------------------------------------------------------

const EXPECTING: &str =
    "POST /up HTTP/1.1\r\nhost: a\r\ncontent-length: 5\r\nexpect: 100-continue\r\n\r\n";

/// RFC 9110 10.1.1: a server that will read the content of a request
/// that expects `100-continue` sends `100 Continue` first.
#[tokio::test]
async fn expect_100_continue_gets_100_continue_when_the_body_is_read() {
    let (mut client, state, _task) = serve(vec![Reply::text(200, "stored").reading()]);
    client.send(EXPECTING).await;
    assert_eq!(client.take(25).await, b"HTTP/1.1 100 Continue\r\n\r\n");
    settle().await;
    client.nothing_yet();
    client.send("hello").await;
    let answer = client.answer().await;
    assert_eq!(answer.text(), "stored");
    assert_eq!(answer.field("connection"), None);
    assert_eq!(state.bodies(), [Ok((Bytes::from_static(b"hello"), None))]);
    // The body was read whole: the connection carries the next request.
    client.send(get("/2")).await;
    assert_eq!(client.answer().await.text(), "GET /2");
}

/// RFC 9110 10.1.1: a server MAY omit `100 Continue` when it already has
/// some of the content; the connection does.
#[tokio::test]
async fn no_100_continue_to_a_client_that_sent_its_body_with_its_head() {
    let (mut client, state, _task) = serve(vec![Reply::text(200, "stored").reading()]);
    client.send(format!("{EXPECTING}hello")).await;
    let answer = client.answer_to("POST").await;
    assert_eq!(answer.status, 200, "{}", answer.head);
    assert_eq!(answer.text(), "stored");
    assert_eq!(state.bodies(), [Ok((Bytes::from_static(b"hello"), None))]);
}

/// RFC 9110 10.1.1: a server that answers before reading the content
/// need not send `100 Continue`, and SHOULD say whether it closes: the
/// client may never send the body, so the connection closes.
#[tokio::test]
async fn expect_100_continue_unread_is_answered_close_without_100() {
    let (mut client, state, task) = serve(vec![Reply::text(417, "no")]);
    client.send(EXPECTING).await;
    let answer = client.answer_to("POST").await;
    assert_eq!(answer.status_line(), "HTTP/1.1 417 Expectation Failed");
    assert_eq!(answer.field("connection"), Some("close"));
    assert_eq!(answer.text(), "no");
    client.closed().await;
    assert!(state.bodies().is_empty());
    lingers_until_its_client_closes(&mut client, task).await;
}

// ---------------------------------------------------------------------------
// 6. Request bodies nobody read.
// ---------------------------------------------------------------------------

/// A short body the answer did not need is read past: the connection
/// carries the next request (as nginx's discard).
#[tokio::test]
async fn a_short_unread_body_is_read_past_and_the_next_request_answered() {
    let (mut client, state, task) = serve(vec![Reply::text(404, "not here")]);
    client
        .send("POST /up HTTP/1.1\r\nhost: a\r\ncontent-length: 5\r\n\r\nhello")
        .await;
    let answer = client.answer_to("POST").await;
    assert_eq!(answer.status_line(), "HTTP/1.1 404 Not Found");
    assert_eq!(answer.field("connection"), None);
    client.send(get("/next")).await;
    assert_eq!(client.answer().await.text(), "GET /next");
    assert_eq!(state.targets(), ["POST /up", "GET /next"]);
    assert!(!task.is_finished());
}

/// The body may come after the answer: it is still read past, the
/// request after it answered. Chunked too.
#[tokio::test]
async fn an_unread_body_sent_after_the_answer_is_read_past() {
    for (head, body) in [
        (
            "POST /up HTTP/1.1\r\nhost: a\r\ncontent-length: 65536\r\n\r\n",
            vec![b'x'; 65_536],
        ),
        (
            "POST /up HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\n",
            b"5\r\nhello\r\n3;ext=1\r\nabc\r\n0\r\nx-t: 1\r\n\r\n".to_vec(),
        ),
    ] {
        let (mut client, state, _task) = serve(vec![Reply::text(404, "no")]);
        client.send(head).await;
        let answer = client.answer_to("POST").await;
        assert_eq!(answer.field("connection"), None, "{head:?}");
        client.send(body).await;
        client.send(get("/next")).await;
        assert_eq!(client.answer().await.text(), "GET /next", "{head:?}");
        assert_eq!(state.targets(), ["POST /up", "GET /next"]);
    }
}

/// A body longer than the connection reads past (64 KiB) closes it:
/// the answer says so (RFC 9112 9.6), then the close.
#[tokio::test]
async fn an_unread_body_over_64_kib_closes_the_connection() {
    let (mut client, state, task) = serve(vec![Reply::text(413, "too long")]);
    client
        .send("POST /up HTTP/1.1\r\nhost: a\r\ncontent-length: 65537\r\n\r\nxxxxx")
        .await;
    let answer = client.answer_to("POST").await;
    assert_eq!(answer.status, 413);
    assert_eq!(answer.field("connection"), Some("close"));
    assert_eq!(answer.text(), "too long");
    client.closed().await;
    assert_eq!(state.targets(), ["POST /up"]);
    lingers_until_its_client_closes(&mut client, task).await;
}

/// A chunked body found longer than 64 KiB while read past closes the
/// connection after its answer.
#[tokio::test]
async fn an_unread_chunked_body_found_over_64_kib_closes_the_connection() {
    let (mut client, state, task) = serve(vec![Reply::text(404, "no")]);
    client
        .send("POST /up HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\n")
        .await;
    let answer = client.answer_to("POST").await;
    // Its length was unknown when answered.
    assert_eq!(answer.field("connection"), None);
    let mut body = b"10001\r\n".to_vec();
    body.resize(body.len() + 0x10001, b'x');
    body.extend_from_slice(b"\r\n0\r\n\r\n");
    // The connection stops reading past 64 KiB: the rest may not be taken.
    let _ = tokio::time::timeout(GUARD, client.io.write_all(&body)).await;
    client.closed().await;
    lingers_until_its_client_closes(&mut client, task).await;
    assert_eq!(state.targets(), ["POST /up"]);
}

// ---------------------------------------------------------------------------
// 7. A broken request body.
// ---------------------------------------------------------------------------

/// RFC 9112 7.1: a chunk size is hex digits; a body that breaks its
/// framing is an error for its reader, and the connection cannot carry
/// another request (its framing is lost).
#[tokio::test]
async fn a_bad_chunk_size_fails_the_body_read_and_closes_the_connection() {
    let (mut client, state, task) = serve(vec![Reply::text(400, "bad body").reading()]);
    client
        .send(format!(
            "POST /up HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n{}",
            get("/next")
        ))
        .await;
    let answer = client.answer_to("POST").await;
    assert_eq!(answer.status, 400);
    assert_eq!(answer.field("connection"), Some("close"));
    assert_eq!(answer.text(), "bad body");
    client.closed().await;
    let bodies = state.bodies();
    assert_eq!(bodies.len(), 1);
    let error = bodies[0].as_ref().expect_err("the body's read fails");
    assert!(error.contains("invalid chunk size"), "{error}");
    assert_eq!(state.targets(), ["POST /up"]);
    client.shut().await;
    ended_closed(task).await;
}

/// A client that closes in the middle of its body has left: RFC 9112 8
/// lets a server answer an incomplete request (MAY); the connection
/// does not, it drops the request and ends, writing nothing.
#[tokio::test]
async fn a_body_cut_by_the_clients_close_ends_the_connection_without_an_answer() {
    let (mut client, state, task) = serve(vec![Reply::text(400, "cut").reading()]);
    client
        .send("POST /up HTTP/1.1\r\nhost: a\r\ncontent-length: 10\r\n\r\nhello")
        .await;
    settle().await;
    assert_eq!(state.targets(), ["POST /up"]);
    assert!(!task.is_finished());
    client.shut().await;
    ended_closed(task).await;
    client.closed().await;
    // Its reader was told of the cut, if it looked again before it went.
    let bodies = state.bodies();
    assert!(bodies.iter().all(Result::is_err), "{bodies:?}");
}

/// A chunked request body with trailers reaches its reader whole.
#[tokio::test]
async fn a_chunked_body_with_trailers_is_read_whole() {
    let (mut client, state, _task) = serve(vec![Reply::text(200, "ok").reading()]);
    client
        .send(format!(
            "POST /up HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n6;x=y\r\n world\r\n0\r\nx-sum: 11\r\n\r\n{}",
            get("/next")
        ))
        .await;
    assert_eq!(client.answer_to("POST").await.text(), "ok");
    assert_eq!(client.answer().await.text(), "GET /next");
    let bodies = state.bodies();
    let (data, trailers) = bodies[0].as_ref().expect("read whole");
    assert_eq!(&data[..], b"hello world");
    assert_eq!(trailers.as_ref().expect("trailers")["x-sum"], "11");
}

/// An answer may stream the request's body back while it is still
/// coming: the connection reads it on for its reader as it writes.
#[tokio::test]
async fn an_answer_may_stream_the_request_body_as_it_comes() {
    let (mut client, _state, _task) = serve(vec![Reply::echo()]);
    client
        .send("POST /echo HTTP/1.1\r\nhost: a\r\ncontent-length: 10\r\n\r\n")
        .await;
    let head = client.head().await;
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(head.contains("\r\ncontent-length: 10\r\n"), "{head}");
    client.send("hello").await;
    assert_eq!(client.take(5).await, b"hello");
    client.send("world").await;
    assert_eq!(client.take(5).await, b"world");
    client.send(get("/next")).await;
    assert_eq!(client.answer().await.text(), "GET /next");
}

/// A body longer than what is read past (64 KiB) still being read by
/// the answer is no reason to close: the connection is kept.
#[tokio::test]
async fn a_long_body_streamed_back_keeps_the_connection() {
    let (mut client, _state, _task) = serve(vec![Reply::echo()]);
    client
        .send("POST /echo HTTP/1.1\r\nhost: a\r\ncontent-length: 70000\r\n\r\n")
        .await;
    let head = client.head().await;
    assert!(head.contains("\r\ncontent-length: 70000\r\n"), "{head}");
    assert!(!head.contains("connection"), "{head}");
    assert!(client.buf.is_empty());
    let body: Vec<u8> = (0..70_000u32).map(|i| (i % 251) as u8).collect();
    let mut echoed = vec![0u8; body.len()];
    {
        let (mut reader, mut writer) = tokio::io::split(&mut client.io);
        let (sent, read) = tokio::time::timeout(
            GUARD,
            futures_util::future::join(writer.write_all(&body), reader.read_exact(&mut echoed)),
        )
        .await
        .expect("the body goes and comes back in time");
        sent.unwrap();
        read.unwrap();
    }
    assert!(echoed == body, "the echoed bytes differ");
    client.send(get("/next")).await;
    assert_eq!(client.answer().await.text(), "GET /next");
}

/// An answer that streams the request's body back, to a client that
/// waits for `100 Continue`: a `100` may come before the final answer's
/// head, never after it (RFC 9110 15.2: 1xx answers precede the final
/// one; RFC 9112 6.3: after a head with a Content-Length its body is
/// that many bytes), so the body's bytes follow the head unmixed.
#[tokio::test]
async fn no_100_continue_after_the_final_answers_head() {
    let (mut client, _state, _task) = serve(vec![Reply::echo()]);
    client.send(EXPECTING).await;
    let mut head = client.head().await;
    if head.starts_with("HTTP/1.1 100 ") {
        head = client.head().await;
    }
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(head.contains("\r\ncontent-length: 5\r\n"), "{head}");
    client.send("hello").await;
    assert_eq!(lossy(&client.take(5).await), "hello");
    client.send(get("/next")).await;
    assert_eq!(client.answer().await.text(), "GET /next");
}

// ---------------------------------------------------------------------------
// 8. A client that leaves.
// ---------------------------------------------------------------------------

/// A client gone while its answer is pending: the answer is dropped (the
/// request abandoned) and the connection ends.
#[tokio::test]
async fn a_client_that_closes_while_its_answer_is_pending_drops_the_answer() {
    for whole in [false, true] {
        let dropped = Arc::new(AtomicBool::new(false));
        let (mut client, state, task) = serve(vec![Reply::never(dropped.clone())]);
        client.send(get("/wait")).await;
        settle().await;
        assert_eq!(state.targets(), ["GET /wait"]);
        assert!(!dropped.load(Ordering::SeqCst));
        assert!(!task.is_finished());
        if whole {
            drop(client);
            ended_closed(task).await;
        } else {
            client.shut().await;
            ended_closed(task).await;
            client.closed().await;
        }
        assert!(dropped.load(Ordering::SeqCst), "whole: {whole}");
    }
}

/// The same once its whole body was read: the client's close is still
/// watched for while the answer is pending.
#[tokio::test]
async fn a_client_that_closes_after_its_body_while_its_answer_is_pending_drops_the_answer() {
    let dropped = Arc::new(AtomicBool::new(false));
    let mut reply = Reply::never(dropped.clone());
    reply.read_body = true;
    let (mut client, state, task) = serve(vec![reply]);
    client
        .send("POST /up HTTP/1.1\r\nhost: a\r\ncontent-length: 5\r\n\r\nhello")
        .await;
    settle().await;
    assert_eq!(state.bodies(), [Ok((Bytes::from_static(b"hello"), None))]);
    assert!(!dropped.load(Ordering::SeqCst));
    assert!(!task.is_finished());
    client.shut().await;
    ended_closed(task).await;
    client.closed().await;
    assert!(dropped.load(Ordering::SeqCst));
}

/// A client gone while its streamed answer is written: the connection
/// ends (the answer's body dropped).
#[tokio::test]
async fn a_client_that_closes_during_a_streamed_answer_ends_the_connection() {
    let (mut sender, body) = http_body_util::channel::Channel::<Bytes, BoxError>::new(1);
    let (mut client, _state, task) = serve(vec![Reply::new(200, body.boxed_unsync())]);
    client.send(get("/")).await;
    sender
        .send_data(Bytes::from_static(b"hello"))
        .await
        .unwrap();
    client.head().await;
    assert_eq!(client.take(10).await, b"5\r\nhello\r\n");
    client.shut().await;
    ended_closed(task).await;
    assert!(sender.send_data(Bytes::from_static(b"more")).await.is_err());
}

// ---------------------------------------------------------------------------
// 9. HTTP/2's preface.
// ---------------------------------------------------------------------------

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// RFC 9113 3.3: a client with prior knowledge starts with the preface;
/// the connection is handed on with the bytes read, preface included.
#[tokio::test]
async fn a_connection_that_starts_with_http_2s_preface_is_handed_on() {
    // 18: the first write is a whole HTTP/1-looking head.
    for at in [1, 5, 16, 18, 20, PREFACE.len() - 1] {
        let (mut client, state, task) = serve(vec![]);
        client.send(&PREFACE[..at]).await;
        settle().await;
        assert!(!task.is_finished(), "at {at}");
        client.nothing_yet();
        let mut rest = PREFACE[at..].to_vec();
        rest.extend_from_slice(b"\x00\x00\x00\x04\x00");
        client.send(&rest).await;
        let (mut io, bytes) = ended(task)
            .await
            .expect("no failure")
            .expect("handed on as HTTP/2");
        let mut want = PREFACE.to_vec();
        want.extend_from_slice(b"\x00\x00\x00\x04\x00");
        assert_eq!(lossy(&bytes), lossy(&want), "at {at}");
        assert!(state.targets().is_empty(), "at {at}");
        // Nothing was written, and the connection is whole.
        client.nothing_yet();
        client.send(b"more").await;
        let mut more = [0u8; 4];
        io.read_exact(&mut more).await.unwrap();
        assert_eq!(&more, b"more");
        io.write_all(b"back").await.unwrap();
        assert_eq!(client.take(4).await, b"back");
    }
}

/// The preface is looked for at a connection's start only: after a
/// request, `PRI * HTTP/2.0` is an HTTP/1 head of another major version
/// (RFC 9110 15.6.6: 505).
#[tokio::test]
async fn the_preface_after_a_request_is_not_http_2() {
    let (mut client, state, task) = serve(vec![]);
    client.send(get("/")).await;
    client.answer().await;
    client.send(PREFACE).await;
    let answer = client.answer().await;
    assert_eq!(
        answer.status_line(),
        "HTTP/1.1 505 HTTP Version Not Supported"
    );
    assert_eq!(answer.field("connection"), Some("close"));
    client.closed().await;
    client.shut().await;
    ended_closed(task).await;
    assert_eq!(state.targets(), ["GET /"]);
}

// ---------------------------------------------------------------------------
// 10. Graceful stop.
// ---------------------------------------------------------------------------

/// An idle connection told to stop ends at its next poll, having
/// written nothing.
#[tokio::test]
async fn a_graceful_stop_ends_an_idle_connection_at_once() {
    let (mut client, state, conn) = open(vec![], NO_TIMEOUT);
    let mut conn = Box::pin(conn);
    assert!(poll_once(conn.as_mut()).is_pending());
    conn.as_mut().graceful_shutdown();
    match poll_once(conn.as_mut()) {
        Poll::Ready(Ok(None)) => {}
        other => panic!(
            "not ended at once: {:?}",
            other.map(|r| r.map(|o| o.is_some()))
        ),
    }
    drop(conn);
    client.closed().await;
    assert!(state.targets().is_empty());
}

/// A connection's Debug names it, nothing of its state.
#[tokio::test]
async fn a_connection_debugs_as_its_name() {
    let (_client, _state, conn) = open(vec![], NO_TIMEOUT);
    assert_eq!(format!("{conn:?}"), "H1Connection { .. }");
}

/// Stopped before its first poll: it ends at its first.
#[tokio::test]
async fn a_graceful_stop_before_the_first_poll_ends_the_connection_at_it() {
    let (_client, _state, conn) = open(vec![], NO_TIMEOUT);
    let mut conn = Box::pin(conn);
    conn.as_mut().graceful_shutdown();
    assert!(matches!(poll_once(conn.as_mut()), Poll::Ready(Ok(None))));
}

/// A kept-alive connection, idle after an answer, ends at once too.
#[tokio::test]
async fn a_graceful_stop_ends_a_kept_alive_idle_connection_at_once() {
    let (mut client, state, conn) = open(vec![], NO_TIMEOUT);
    let mut conn = Box::pin(conn);
    client.send(get("/1")).await;
    let answer = alongside(conn.as_mut(), client.answer()).await;
    assert_eq!(answer.field("connection"), None);
    assert!(poll_once(conn.as_mut()).is_pending());
    conn.as_mut().graceful_shutdown();
    assert!(matches!(poll_once(conn.as_mut()), Poll::Ready(Ok(None))));
    drop(conn);
    client.closed().await;
    assert_eq!(state.targets(), ["GET /1"]);
}

/// A connection stopped with a request in flight answers it, saying
/// `close` (RFC 9112 9.6), and ends; what was pipelined is not taken.
#[tokio::test]
async fn a_graceful_stop_lets_the_request_in_flight_finish_then_closes() {
    let (release, gate) = oneshot::channel();
    let (mut client, state, conn) = open(vec![Reply::text(200, "last").gated(gate)], NO_TIMEOUT);
    let mut conn = Box::pin(conn);
    client.send(format!("{}{}", get("/1"), get("/2"))).await;
    for _ in 0..8 {
        assert!(poll_once(conn.as_mut()).is_pending());
        tokio::task::yield_now().await;
    }
    assert_eq!(state.targets(), ["GET /1"]);
    conn.as_mut().graceful_shutdown();
    assert!(
        poll_once(conn.as_mut()).is_pending(),
        "the request in flight is waited for"
    );
    release.send(()).unwrap();
    let (ending, answer) =
        tokio::join!(tokio::time::timeout(GUARD, conn.as_mut()), client.answer());
    assert!(matches!(ending, Ok(Ok(None))), "the connection ends");
    assert_eq!(answer.text(), "last");
    assert_eq!(answer.field("connection"), Some("close"));
    client.closed().await;
    assert_eq!(state.targets(), ["GET /1"]);
}

// ---------------------------------------------------------------------------
// 11. The header timeout.
// ---------------------------------------------------------------------------

/// A connection that says nothing ends after the header timeout, not
/// before, with nothing written.
#[tokio::test(start_paused = true)]
async fn a_silent_connection_ends_after_the_header_timeout() {
    let (mut client, state, task) = serve_for(vec![], TIMEOUT);
    settle().await;
    tokio::time::advance(TIMEOUT - MS).await;
    settle().await;
    assert!(!task.is_finished(), "ended before its timeout");
    tokio::time::advance(MS).await;
    settle().await;
    assert!(task.is_finished(), "not ended at its timeout");
    ended_closed(task).await;
    client.closed().await;
    assert!(state.targets().is_empty());
}

/// The timeout is on the whole head: bytes that come do not restart it.
#[tokio::test(start_paused = true)]
async fn a_half_head_ends_after_the_header_timeout_without_an_answer() {
    let (mut client, state, task) = serve_for(vec![], TIMEOUT);
    client.send("GET / HTTP/1.1\r\n").await;
    settle().await;
    tokio::time::advance(TIMEOUT - MS).await;
    client.send("host: a\r\n").await;
    settle().await;
    assert!(!task.is_finished(), "ended before its timeout");
    tokio::time::advance(MS).await;
    settle().await;
    assert!(task.is_finished(), "not ended at its timeout");
    ended_closed(task).await;
    client.closed().await;
    assert!(state.targets().is_empty());
}

/// A head whole in time is answered; the wait for the next head has a
/// timeout of its own, from the answer on.
#[tokio::test(start_paused = true)]
async fn a_head_whole_in_time_is_answered_and_the_next_wait_is_timed_anew() {
    let (mut client, state, task) = serve_for(vec![], TIMEOUT);
    settle().await;
    tokio::time::advance(TIMEOUT - MS).await;
    client.send(get("/in-time")).await;
    assert_eq!(client.answer().await.text(), "GET /in-time");
    settle().await;
    tokio::time::advance(TIMEOUT - MS).await;
    settle().await;
    assert!(!task.is_finished(), "the next wait ended early");
    client.nothing_yet();
    tokio::time::advance(MS).await;
    settle().await;
    assert!(task.is_finished(), "the next wait did not end");
    ended_closed(task).await;
    client.closed().await;
    assert_eq!(state.targets(), ["GET /in-time"]);
}

/// The header timeout is not the answer's: a slow answer is waited for.
#[tokio::test(start_paused = true)]
async fn a_slow_answer_is_not_cut_by_the_header_timeout() {
    let (release, gate) = oneshot::channel();
    let (mut client, _state, task) = serve_for(vec![Reply::text(200, "late").gated(gate)], TIMEOUT);
    client.send(get("/")).await;
    settle().await;
    tokio::time::advance(TIMEOUT * 3).await;
    settle().await;
    assert!(!task.is_finished());
    release.send(()).unwrap();
    assert_eq!(client.answer().await.text(), "late");
}

/// An unread body still coming after the answer is read past within
/// the header timeout; a client slower than that has its connection
/// closed.
#[tokio::test(start_paused = true)]
async fn an_unread_body_too_slow_to_read_past_closes_the_connection() {
    let (mut client, state, task) = serve_for(vec![Reply::text(404, "no")], TIMEOUT);
    client
        .send("POST /up HTTP/1.1\r\nhost: a\r\ncontent-length: 5\r\n\r\nhe")
        .await;
    let answer = client.answer_to("POST").await;
    assert_eq!(answer.field("connection"), None);
    settle().await;
    tokio::time::advance(TIMEOUT - MS).await;
    settle().await;
    client.nothing_yet();
    tokio::time::advance(MS).await;
    settle().await;
    client.closed().await;
    client.shut().await;
    ended_closed(task).await;
    assert_eq!(state.targets(), ["POST /up"]);
}

// ---------------------------------------------------------------------------
// 12. Refused heads.
// ---------------------------------------------------------------------------

/// RFC 9112 6.1: a request with both Content-Length and Transfer-Encoding
/// MAY be rejected, and the connection MUST close after the answer. The
/// connection reads on until the client closes (a lingering close).
#[tokio::test]
async fn a_refused_head_is_answered_400_close_and_lingers_until_the_client_closes() {
    let (mut client, state, task) = serve(vec![]);
    client
        .send("POST / HTTP/1.1\r\nhost: a\r\ncontent-length: 5\r\ntransfer-encoding: chunked\r\n\r\nhello")
        .await;
    let answer = client.answer_to("POST").await;
    assert_eq!(answer.status_line(), "HTTP/1.1 400 Bad Request");
    assert_eq!(answer.field("connection"), Some("close"));
    assert_eq!(
        answer.field("content-type"),
        Some("text/plain; charset=utf-8")
    );
    let why = "both Content-Length and Transfer-Encoding\n";
    assert_eq!(answer.text(), why);
    assert_eq!(
        answer.field("content-length"),
        Some(&*why.len().to_string())
    );
    assert_eq!(
        answer.names(),
        ["content-type", "content-length", "connection"],
        "{}",
        answer.head
    );
    client.closed().await;
    assert!(state.targets().is_empty());
    settle().await;
    assert!(!task.is_finished(), "ended before its client closed");
    client.send("more bytes the client had on the way").await;
    lingers_until_its_client_closes(&mut client, task).await;
}

/// The lingering read takes 64 KiB at most: a client that goes on
/// sending past that has its connection end.
#[tokio::test]
async fn a_lingering_close_reads_64_kib_at_most() {
    let (mut client, _state, task) = serve(vec![]);
    client
        .send("GET / HTTP/1.1\r\nhost: a\r\ncontent-length: x\r\n\r\n")
        .await;
    let answer = client.answer().await;
    assert_eq!(answer.status, 400);
    assert_eq!(answer.text(), "invalid Content-Length\n");
    client.closed().await;
    let _ = tokio::time::timeout(GUARD, client.io.write_all(&[b'x'; 70 * 1024])).await;
    ended_closed(task).await;
}

/// The lingering read lasts the header timeout at most.
#[tokio::test(start_paused = true)]
async fn a_lingering_close_lasts_the_header_timeout_at_most() {
    let (mut client, _state, task) = serve_for(vec![], TIMEOUT);
    client.send("GET / HTTP/9.0\r\nhost: a\r\n\r\n").await;
    let answer = client.answer().await;
    assert_eq!(
        answer.status_line(),
        "HTTP/1.1 505 HTTP Version Not Supported"
    );
    assert_eq!(answer.field("connection"), Some("close"));
    client.closed().await;
    settle().await;
    tokio::time::advance(TIMEOUT - MS).await;
    settle().await;
    assert!(!task.is_finished(), "the linger ended early");
    tokio::time::advance(MS).await;
    settle().await;
    assert!(task.is_finished(), "the linger did not end");
    ended_closed(task).await;
}

/// RFC 6585 5: a head over the limit (64 KiB) that never ends is
/// refused 431 as soon as it is over, not waited for.
#[tokio::test]
async fn a_head_over_64_kib_is_refused_431() {
    let (mut client, state, task) = serve(vec![]);
    let mut head = b"GET / HTTP/1.1\r\nhost: a\r\nx-big: ".to_vec();
    head.resize(66 * 1024, b'a');
    client.send(&head).await;
    let answer = client.answer().await;
    assert_eq!(
        answer.status_line(),
        "HTTP/1.1 431 Request Header Fields Too Large"
    );
    assert_eq!(answer.field("connection"), Some("close"));
    client.closed().await;
    assert!(state.targets().is_empty());
    client.shut().await;
    ended_closed(task).await;
}

// ---------------------------------------------------------------------------
// 13. Switching protocols.
// ---------------------------------------------------------------------------

const UPGRADE: &str =
    "GET /chat HTTP/1.1\r\nhost: a\r\nconnection: upgrade\r\nupgrade: websocket\r\n\r\n";

/// RFC 9110 7.8, 15.2.2: after `101` the connection is the new
/// protocol's, from the empty line ending the answer's head on; the
/// bytes the client sent after its request's head are the new
/// protocol's first.
#[tokio::test]
async fn a_101_hands_the_connection_to_the_tunnel_with_the_bytes_read_past_the_head() {
    let (mut client, state, task) = serve(vec![Reply::switch()]);
    client.send(format!("{UPGRADE}EARLY")).await;
    let head = client.head().await;
    assert!(
        head.starts_with("HTTP/1.1 101 Switching Protocols\r\n"),
        "{head}"
    );
    let answer_fields: Vec<String> = head
        .strip_suffix("\r\n\r\n")
        .unwrap()
        .split("\r\n")
        .skip(1)
        .map(str::to_ascii_lowercase)
        .collect();
    assert!(
        answer_fields.contains(&"connection: upgrade".to_string()),
        "{head}"
    );
    assert!(
        answer_fields.contains(&"upgrade: websocket".to_string()),
        "{head}"
    );
    assert!(
        !answer_fields
            .iter()
            .any(|f| f.starts_with("content-length:")
                || f.starts_with("transfer-encoding:")
                || f == "connection: close"),
        "{head}"
    );
    {
        let seen = lock(&state.seen);
        assert_eq!(seen.len(), 1);
        assert!(seen[0].switch, "the request carries a PendingSwitch");
    }
    let receiver = lock(&state.switches).pop().expect("taken by the handler");
    let mut switched = tokio::time::timeout(GUARD, receiver)
        .await
        .expect("switched in time")
        .expect("the connection comes");
    ended_closed(task).await;
    let mut early = [0u8; 5];
    switched.read_exact(&mut early).await.unwrap();
    assert_eq!(&early, b"EARLY");
    client.send("LATER").await;
    let mut later = [0u8; 5];
    switched.read_exact(&mut later).await.unwrap();
    assert_eq!(&later, b"LATER");
    switched.write_all(b"PONG").await.unwrap();
    switched.flush().await.unwrap();
    // Nothing between the 101's head and the tunnel's bytes.
    assert_eq!(client.take(4).await, b"PONG");
}

/// A `101`'s body, if the answer has one, is not written: the bytes
/// after its head are the tunnel's.
#[tokio::test]
async fn a_101s_body_is_not_written() {
    let mut reply = Reply::switch();
    reply.body = Some(text_body("not for the client"));
    let (mut client, state, _task) = serve(vec![reply]);
    client.send(UPGRADE).await;
    client.head().await;
    let receiver = lock(&state.switches).pop().unwrap();
    let mut switched = tokio::time::timeout(GUARD, receiver)
        .await
        .unwrap()
        .unwrap();
    switched.write_all(b"tunnel").await.unwrap();
    assert_eq!(client.take(6).await, b"tunnel");
}

/// An upgrade declined (a final answer, not `101`): the connection stays
/// HTTP/1.1 (RFC 9110 7.8: the server MAY ignore Upgrade), and the
/// switch to come never comes.
#[tokio::test]
async fn an_upgrade_declined_keeps_the_connection_http_1_1() {
    let mut declined = Reply::text(200, "plain");
    declined.take_switch = true;
    let (mut client, state, _task) = serve(vec![declined]);
    client.send(format!("{UPGRADE}{}", get("/next"))).await;
    let answer = client.answer().await;
    assert_eq!(answer.text(), "plain");
    assert_eq!(answer.field("connection"), None);
    assert_eq!(client.answer().await.text(), "GET /next");
    let receiver = lock(&state.switches).pop().unwrap();
    assert!(receiver.await.is_err(), "no connection comes");
    let seen = lock(&state.seen);
    assert!(seen[0].switch);
    assert!(!seen[1].switch);
}

/// A `101` to a request that did not ask to switch has nowhere to
/// switch to: the connection closes after it.
#[tokio::test]
async fn a_101_to_a_request_that_did_not_ask_closes_the_connection() {
    let mut reply = Reply::switch();
    reply.take_switch = false;
    let (mut client, state, task) = serve(vec![reply]);
    client.send(format!("{}{}", get("/"), get("/next"))).await;
    let head = client.head().await;
    assert!(head.starts_with("HTTP/1.1 101 "), "{head}");
    client.closed().await;
    ended_closed(task).await;
    assert_eq!(state.targets(), ["GET /"]);
    assert!(!lock(&state.seen)[0].switch);
}

// ---------------------------------------------------------------------------
// 14. Date.
// ---------------------------------------------------------------------------

/// RFC 9110 6.6.1: one Date on a final answer; the answer's own is kept,
/// not doubled.
#[tokio::test]
async fn a_final_answer_has_one_date_its_own_if_it_has_one() {
    let own = "Sun, 06 Nov 1994 08:49:37 GMT";
    let (mut client, _state, _task) = serve(vec![
        Reply::text(200, "dated").field("date", "Sun, 06 Nov 1994 08:49:37 GMT"),
        Reply::stream(500, vec![data(b"x")]),
    ]);
    client
        .send(format!("{}{}{}", get("/1"), get("/2"), get("/3")))
        .await;
    // Client::answer_to checks there is exactly one on each.
    assert_eq!(client.answer().await.field("date"), Some(own));
    assert_ne!(client.answer().await.field("date"), Some(own));
    assert_ne!(client.answer().await.field("date"), Some(own));
}
