//! The HTTP/1.1 exchange against scripted backends: a listener on
//! 127.0.0.1 that reads what the proxy wrote and answers exact bytes, so
//! that each framing rule and each hostile answer is one case.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response};
use http_body::Body as _;
use http_body_util::BodyExt;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use super::connection::Stream;
use super::pool::idle_count;
use super::*;
use crate::config::BackendProtocol;

const WAIT: Duration = Duration::from_secs(10);

/// One step of a scripted backend, on each connection it accepts.
#[derive(Debug, Clone)]
enum Act {
    /// Reads a request, head and body; sends it on as text.
    Read,
    /// Reads a request's head only; sends it on as text.
    ReadHead,
    Write(Vec<u8>),
    /// Closes the connection.
    Close,
    /// Reads until the proxy closes the connection, then says "closed".
    Hold,
    /// Keeps the connection open, reading nothing.
    Park,
    /// Reads this many bytes of a body (after [`Act::ReadHead`]); sends
    /// on their count and digest ([`digest`]).
    ReadBody(usize),
}

/// FNV-1a of `bytes`: a body of megabytes told apart from another in a
/// word.
fn digest(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn write(bytes: &[u8]) -> Act {
    Act::Write(bytes.to_vec())
}

/// A backend playing `script` on each connection; what it read (and
/// "closed" when the proxy closed a held connection) comes on the channel.
async fn scripted(script: Vec<Act>) -> (Arc<str>, mpsc::UnboundedReceiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (tell, told) = mpsc::unbounded_channel();
    let script = Arc::new(script);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(play(stream, script.clone(), tell.clone()));
        }
    });
    (addr.into(), told)
}

async fn play(mut stream: TcpStream, script: Arc<Vec<Act>>, tell: mpsc::UnboundedSender<String>) {
    let mut buf = Vec::new();
    for act in script.iter() {
        match act {
            Act::Read | Act::ReadHead => {
                let Some(request) =
                    read_request(&mut stream, &mut buf, matches!(act, Act::Read)).await
                else {
                    return;
                };
                let _ = tell.send(request);
            }
            Act::Write(bytes) => {
                if stream.write_all(bytes).await.is_err() {
                    return;
                }
            }
            Act::Close => return,
            Act::Hold => {
                let mut sink = [0u8; 4096];
                while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
                let _ = tell.send("closed".into());
                return;
            }
            Act::Park => std::future::pending::<()>().await,
            Act::ReadBody(len) => {
                let mut chunk = [0u8; 64 * 1024];
                while buf.len() < *len {
                    match stream.read(&mut chunk).await {
                        Ok(n) if n > 0 => buf.extend_from_slice(&chunk[..n]),
                        _ => return,
                    }
                }
                let body: Vec<u8> = buf.drain(..len).collect();
                let _ = tell.send(format!("{} bytes, {:x}", body.len(), digest(&body)));
            }
        }
    }
}

/// One request off `buf` (reading more as needed): its head, and its
/// body when `body` (by its Content-Length, or chunked to the end of its
/// trailers).
async fn read_request(stream: &mut TcpStream, buf: &mut Vec<u8>, body: bool) -> Option<String> {
    let find = |buf: &[u8], what: &[u8], from: usize| {
        buf.get(from..)?
            .windows(what.len())
            .position(|w| w == what)
            .map(|p| p + from)
    };
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(end) = find(buf, b"\r\n\r\n", 0) {
            break end + 4;
        }
        let n = stream.read(&mut chunk).await.ok().filter(|&n| n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_lowercase();
    let end = if !body {
        head_end
    } else if let Some(len) = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .and_then(|l| l.trim().parse::<usize>().ok())
    {
        while buf.len() < head_end + len {
            let n = stream.read(&mut chunk).await.ok().filter(|&n| n > 0)?;
            buf.extend_from_slice(&chunk[..n]);
        }
        head_end + len
    } else if head.contains("transfer-encoding: chunked") {
        // Each search starts where the last one could not match: a body
        // of megabytes is scanned once, not once per read.
        let mut from = head_end - 2;
        loop {
            match find(buf, b"\r\n0\r\n", from) {
                Some(last) => match find(buf, b"\r\n\r\n", last + 3) {
                    Some(end) => break end + 4,
                    None => from = last,
                },
                None => from = from.max(buf.len().saturating_sub(4)),
            }
            let n = stream.read(&mut chunk).await.ok().filter(|&n| n > 0)?;
            buf.extend_from_slice(&chunk[..n]);
        }
    } else {
        head_end
    };
    let request = String::from_utf8_lossy(&buf[..end]).into_owned();
    buf.drain(..end);
    Some(request)
}

fn upstream() -> Upstream {
    Upstream::with(WAIT, BackendProtocol::Http1, None)
}

fn request(method: &str, body: Outgoing) -> Request<Outgoing> {
    Request::builder()
        .method(method)
        .uri("/p?q=1")
        .header("host", "test")
        .body(body)
        .unwrap()
}

fn get() -> Request<Outgoing> {
    request("GET", Outgoing::empty())
}

/// `request` with its head as an HTTP/1.1 client would send it, read
/// raw (names upper-cased): what the gateway forwards most.
fn raw(request: Request<Outgoing>) -> OutgoingRequest {
    let (parts, body) = request.into_parts();
    let mut text = format!("{} {} HTTP/1.1\r\n", parts.method, parts.uri);
    for (name, value) in &parts.headers {
        let name = name.as_str().to_ascii_uppercase();
        text.push_str(&format!("{name}: {}\r\n", value.to_str().unwrap()));
    }
    text.push_str("\r\n");
    OutgoingRequest {
        head: Box::new(super::request_head::read(&text)),
        body,
    }
}

async fn send(
    upstream: &Upstream,
    addr: &Arc<str>,
    request: impl Into<OutgoingRequest>,
) -> Result<Response<UpstreamBody>, Failure> {
    let request = request.into();
    let connection = upstream.checkout(addr, false).await.unwrap();
    let answered = tokio::time::timeout(WAIT, connection.send(request))
        .await
        .expect("an answer or an error in time")?;
    Ok(answered
        .into_response()
        .expect("a head the http crate takes"))
}

/// The body's bytes and trailers, or its error.
async fn read(response: Response<UpstreamBody>) -> Result<(String, Option<HeaderMap>), String> {
    let collected = tokio::time::timeout(WAIT, response.into_body().collect())
        .await
        .expect("the body's end in time")
        .map_err(|e| e.to_string())?;
    let trailers = collected.trailers().cloned();
    let bytes = collected.to_bytes();
    Ok((String::from_utf8_lossy(&bytes).into_owned(), trailers))
}

/// Until the backend says it saw the proxy close the connection.
async fn closed(told: &mut mpsc::UnboundedReceiver<String>) -> bool {
    tokio::time::timeout(WAIT, async {
        while let Some(said) = told.recv().await {
            if said == "closed" {
                return true;
            }
        }
        false
    })
    .await
    .unwrap_or(false)
}

#[tokio::test]
async fn answers_are_framed_and_their_connection_kept_only_when_reusable() {
    // (request method, answer, then, body, trailer x-sum, kept)
    type Case = (
        &'static str,
        &'static [u8],
        Act,
        &'static str,
        Option<&'static str>,
        bool,
    );
    let cases: &[Case] = &[
        ("GET", b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello", Act::Hold, "hello", None, true),
        (
            "GET",
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3;ext=1;q=\"a\"\r\nabc\r\n2\r\nde\r\n0\r\nx-sum: 5\r\n\r\n",
            Act::Hold,
            "abcde",
            Some("5"),
            true,
        ),
        ("GET", b"HTTP/1.1 200 OK\r\n\r\nall of it", Act::Close, "all of it", None, false),
        ("HEAD", b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n", Act::Hold, "", None, true),
        ("GET", b"HTTP/1.1 204 No Content\r\n\r\n", Act::Hold, "", None, true),
        ("GET", b"HTTP/1.1 304 Not Modified\r\ncontent-length: 9\r\n\r\n", Act::Hold, "", None, true),
        (
            "GET",
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok",
            Act::Hold,
            "ok",
            None,
            true,
        ),
        (
            "GET",
            b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok",
            Act::Hold,
            "ok",
            None,
            false,
        ),
        ("GET", b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\nok", Act::Hold, "ok", None, false),
        (
            "GET",
            b"HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ncontent-length: 2\r\n\r\nok",
            Act::Hold,
            "ok",
            None,
            true,
        ),
        (
            "GET",
            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nokGARBAGE",
            Act::Hold,
            "ok",
            None,
            false,
        ),
    ];
    for (method, answer, then, want_body, want_sum, kept) in cases {
        let what = String::from_utf8_lossy(answer);
        let (addr, mut told) = scripted(vec![Act::Read, write(answer), then.clone()]).await;
        let upstream = upstream();
        let response = send(&upstream, &addr, request(method, Outgoing::empty()))
            .await
            .unwrap_or_else(|e| panic!("{what:?}: {}", e.error()));
        let (body, trailers) = read(response).await.unwrap();
        assert_eq!(body, *want_body, "{what:?}");
        let sum = trailers.as_ref().and_then(|t| t.get("x-sum"));
        assert_eq!(sum.map(|v| v.to_str().unwrap()), *want_sum, "{what:?}");
        assert_eq!(idle_count(upstream.pool) == 1, *kept, "{what:?}: kept?");
        if !kept && matches!(then, Act::Hold) {
            assert!(closed(&mut told).await, "{what:?}: not closed");
        }
    }
}

/// A kept connection carries the next exchange: after an answer to HEAD
/// (its Content-Length not read as a body) and after a chunked answer.
/// An answer written a byte at a time (an interim one first, a chunked
/// body with trailers after) is read as the same answer, and the next one
/// on the connection after it.
#[tokio::test]
async fn an_answer_a_byte_at_a_time_is_read_whole() {
    let answer: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nX-A: 1\r\n\
                          Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX-Sum: 3\r\n\r\n";
    let mut script = vec![Act::Read];
    script.extend(answer.iter().map(|&b| write(&[b])));
    script.extend([
        Act::Read,
        write(b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\nnext"),
        Act::Hold,
    ]);
    let (addr, _told) = scripted(script).await;
    let upstream = upstream();
    let response = send(&upstream, &addr, get()).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-a"], "1");
    let (body, trailers) = read(response).await.unwrap();
    assert_eq!(body, "abc");
    assert_eq!(trailers.expect("trailers")["x-sum"], "3");
    let next = send(&upstream, &addr, get()).await.unwrap();
    assert_eq!(read(next).await.unwrap().0, "next");
    assert_eq!(idle_count(upstream.pool), 1, "one connection for both");
}

/// An interim answer longer than a first read (so a parse finds it
/// partial), with the final answer whole behind it in the same write: once
/// the interim one is taken off, the final head is looked for from its own
/// start, not from where the interim one was cut, and found in the bytes
/// already held.
#[tokio::test]
async fn a_final_answer_behind_a_long_interim_one_is_read_from_the_same_bytes() {
    let pad = "p".repeat(8 * 1024);
    let answer = format!(
        "HTTP/1.1 103 Early Hints\r\nX-Pad: {pad}\r\n\r\n\
         HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"
    );
    let (addr, _told) = scripted(vec![Act::Read, write(answer.as_bytes()), Act::Hold]).await;
    let response = send(&upstream(), &addr, get()).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers().get("x-pad"),
        None,
        "the interim fields stay"
    );
    assert_eq!(read(response).await.unwrap().0, "ok");
}

#[tokio::test]
async fn a_kept_connection_carries_the_next_exchange() {
    let (addr, mut told) = scripted(vec![
        Act::Read,
        write(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n"),
        Act::Read,
        write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n"),
        Act::Read,
        write(b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nend"),
        Act::Hold,
    ])
    .await;
    let upstream = upstream();
    let head = send(&upstream, &addr, request("HEAD", Outgoing::empty())).await;
    assert_eq!(read(head.unwrap()).await.unwrap().0, "");
    assert_eq!(
        read(send(&upstream, &addr, get()).await.unwrap())
            .await
            .unwrap()
            .0,
        "hi"
    );
    let third = send(&upstream, &addr, get()).await.unwrap();
    assert_eq!(read(third).await.unwrap().0, "end");
    for method in ["HEAD", "GET", "GET"] {
        let read = told.recv().await.unwrap();
        assert!(read.starts_with(&format!("{method} /p")), "{read}");
    }
    assert_eq!(idle_count(upstream.pool), 1, "one connection for all three");
}

#[tokio::test]
async fn hostile_answers_are_clear_errors_and_close_the_connection() {
    let long_head = {
        let mut head = b"HTTP/1.1 200 OK\r\nx-a: ".to_vec();
        head.resize(head.len() + response::MAX_HEAD + 1, b'a');
        head
    };
    let many_fields = {
        let mut head = b"HTTP/1.1 200 OK\r\n".to_vec();
        for i in 0..=response::MAX_HEADERS {
            head.extend_from_slice(format!("x-{i}: 1\r\n").as_bytes());
        }
        head.extend_from_slice(b"\r\n");
        head
    };
    // (answer, then, the error's text)
    let cases: Vec<(Vec<u8>, Act, &str)> = vec![
        (
            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\nok".to_vec(),
            Act::Hold,
            "invalid response framing: two different Content-Length values",
        ),
        (
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\n\r\nxx".to_vec(),
            Act::Hold,
            "invalid response framing: Transfer-Encoding other than chunked alone",
        ),
        (
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n2\r\nxx\r\n0\r\n\r\n"
                .to_vec(),
            Act::Hold,
            "invalid response framing: Transfer-Encoding other than chunked alone",
        ),
        (
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nxyz\r\n".to_vec(),
            Act::Hold,
            "invalid chunked body: invalid chunk size",
        ),
        (
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nffffffffffffffffff\r\n".to_vec(),
            Act::Hold,
            "invalid chunked body: chunk size overflow",
        ),
        (
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nhiX".to_vec(),
            Act::Hold,
            "invalid chunked body: no CRLF after a chunk's data",
        ),
        (
            long_head,
            Act::Hold,
            "the response head is over 65536 bytes",
        ),
        (
            many_fields,
            Act::Hold,
            "the response has more than 100 header fields",
        ),
        (
            b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc".to_vec(),
            Act::Close,
            "the backend closed the connection in the middle of the response body",
        ),
        (
            b"HTTP/1.1 200 OK\r\ncontent-le".to_vec(),
            Act::Close,
            "the backend closed the connection in the middle of the response head",
        ),
        (
            b"SSH-2.0-OpenSSH_9\r\n\r\n".to_vec(),
            Act::Hold,
            "invalid response head",
        ),
        (
            b"HTTP/1.1 100 Continue\r\n\r\n".repeat(17),
            Act::Hold,
            "invalid response head: more than 16 interim (1xx) answers",
        ),
    ];
    for (answer, then, want) in cases {
        let what = String::from_utf8_lossy(&answer[..answer.len().min(60)]).into_owned();
        let (addr, mut told) = scripted(vec![Act::Read, Act::Write(answer), then.clone()]).await;
        let upstream = upstream();
        let error = match send(&upstream, &addr, get()).await {
            Ok(response) => read(response).await.expect_err(&what),
            Err(failure) => {
                assert!(
                    matches!(failure, Failure::Sent { stale: false, .. }),
                    "{what:?}"
                );
                failure.error().to_string()
            }
        };
        assert!(error.starts_with(want), "{what:?}: {error}");
        assert_eq!(idle_count(upstream.pool), 0, "{what:?}: kept");
        if matches!(then, Act::Hold) {
            assert!(closed(&mut told).await, "{what:?}: not closed");
        }
    }
}

/// A backend that answers before it has read the body (and never reads
/// it): the answer comes through, the connection is not kept.
#[tokio::test]
async fn an_answer_before_the_body_is_read_comes_through() {
    let (addr, mut told) = scripted(vec![
        Act::ReadHead,
        write(b"HTTP/1.1 413 Content Too Large\r\ncontent-length: 4\r\n\r\nbig!"),
        Act::Park,
    ])
    .await;
    // Far more than the socket buffers hold: the write cannot finish.
    let piece = Bytes::from(vec![b'x'; 64 * 1024]);
    let body = Outgoing::from_chunks(vec![piece; 512], None);
    let upstream = upstream();
    let response = send(&upstream, &addr, request("POST", body)).await.unwrap();
    assert_eq!(response.status(), 413);
    assert_eq!(read(response).await.unwrap().0, "big!");
    assert_eq!(
        idle_count(upstream.pool),
        0,
        "half a request on it: not kept"
    );
    let head = told.recv().await.unwrap();
    assert!(head.contains("content-length: 33554432\r\n"), "{head}");
}

/// What a backend that reads `request` whole and answers `200` read of
/// it, and the idle connections after the answer.
async fn as_read(request: OutgoingRequest) -> (String, usize) {
    let (addr, mut told) = scripted(vec![
        Act::Read,
        write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"),
        Act::Hold,
    ])
    .await;
    let upstream = upstream();
    let response = send(&upstream, &addr, request).await.unwrap();
    read(response).await.unwrap();
    let request = tokio::time::timeout(WAIT, told.recv()).await.unwrap();
    (
        request.expect("the backend read a request"),
        idle_count(upstream.pool),
    )
}

/// Requests as the backend reads them: the head as given, the body framed
/// by its length or chunked with its trailers.
#[tokio::test]
async fn requests_are_written_as_framed() {
    let mut trailers = HeaderMap::new();
    trailers.insert("x-sum", HeaderValue::from_static("5"));
    let chunks = || vec![Bytes::from_static(b"ab"), Bytes::from_static(b"cde")];
    let chunked = || {
        let mut r = request(
            "POST",
            Outgoing::from_chunks(chunks(), Some(trailers.clone())),
        );
        r.headers_mut()
            .insert("transfer-encoding", HeaderValue::from_static("chunked"));
        r
    };
    let declared = || {
        let mut r = request("PUT", Outgoing::from_chunks(chunks(), None));
        r.headers_mut()
            .insert("content-length", HeaderValue::from_static("5"));
        r
    };
    let cases = || -> Vec<(Request<Outgoing>, &str)> {
        vec![
            (get(), "GET /p?q=1 HTTP/1.1\r\nhost: test\r\n\r\n"),
            (
                request("POST", Outgoing::empty()),
                "POST /p?q=1 HTTP/1.1\r\nhost: test\r\ncontent-length: 0\r\n\r\n",
            ),
            (
                request("POST", Outgoing::from_chunks(chunks(), None)),
                "POST /p?q=1 HTTP/1.1\r\nhost: test\r\ncontent-length: 5\r\n\r\nabcde",
            ),
            (
                declared(),
                "PUT /p?q=1 HTTP/1.1\r\nhost: test\r\ncontent-length: 5\r\n\r\nabcde",
            ),
            (
                chunked(),
                "POST /p?q=1 HTTP/1.1\r\nhost: test\r\ntransfer-encoding: chunked\r\n\r\n\
             2\r\nab\r\n3\r\ncde\r\n0\r\nx-sum: 5\r\n\r\n",
            ),
        ]
    };
    for (request, want) in cases() {
        let (got, idle) = as_read(request.into()).await;
        assert_eq!(got, want);
        assert_eq!(idle, 1, "{want:?}");
    }
    // Read raw from a client: written the same, names in lower case.
    for (request, want) in cases() {
        let (got, idle) = as_read(raw(request)).await;
        assert_eq!(got, want, "raw");
        assert_eq!(idle, 1, "raw {want:?}");
    }
}

/// A reused connection the backend closes after reading the request,
/// before any byte of an answer: written, stale (sent again on a new
/// connection by the caller). On a new connection it is not stale.
#[tokio::test]
async fn a_reused_connection_closed_before_an_answer_is_stale() {
    let (addr, _told) = scripted(vec![
        Act::Read,
        write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"),
        Act::Read,
        Act::Close,
    ])
    .await;
    let upstream = upstream();
    read(send(&upstream, &addr, get()).await.unwrap())
        .await
        .unwrap();
    assert_eq!(idle_count(upstream.pool), 1);
    let mut failure = send(&upstream, &addr, get()).await.unwrap_err();
    assert!(
        matches!(failure, Failure::Sent { stale: true, .. }),
        "{failure:?}"
    );
    assert!(failure.closed_before_a_response());
    assert_written_head_back(&mut failure);
    let (addr, _told) = scripted(vec![Act::Read, Act::Close]).await;
    let mut failure = send(&upstream, &addr, get()).await.unwrap_err();
    assert!(
        matches!(failure, Failure::Sent { stale: false, .. }),
        "{failure:?}"
    );
    assert_written_head_back(&mut failure);
}

/// A written request comes back with its head as it was (a resend makes
/// no copy ahead), once.
fn assert_written_head_back(failure: &mut Failure) {
    let head = failure.take_head().expect("the written request's head");
    assert_eq!(head.method, http::Method::GET);
    assert_eq!(head.uri, "/p?q=1");
    assert_eq!(head.fields.get(&HOST).unwrap().as_bytes(), b"test");
    assert!(failure.take_head().is_none());
}

/// A connection reset before anything was written gives the request back
/// whole, its body's first chunk (sent with the head) put back.
#[tokio::test]
async fn a_request_never_written_comes_back_whole() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: Arc<str> = listener.local_addr().unwrap().to_string().into();
    let upstream = upstream();
    let connection = upstream.checkout(&addr, true).await.unwrap();
    let (backend, _) = listener.accept().await.unwrap();
    // A reset (RST), not a close: the next write fails at once.
    socket2::SockRef::from(&backend)
        .set_linger(Some(Duration::ZERO))
        .unwrap();
    drop(backend);
    match &connection.conn {
        Sender::H1(conn) => match &conn.stream {
            Stream::Tcp(tcp) => tokio::time::timeout(WAIT, tcp.readable())
                .await
                .unwrap()
                .unwrap(),
            Stream::Tls(_) => unreachable!(),
        },
        Sender::H2(_) => unreachable!(),
    }
    let body = Outgoing::from_chunks(vec![Bytes::from_static(b"hello")], None);
    let failure = connection
        .send(raw(request("POST", body)))
        .await
        .unwrap_err();
    let Failure::Unsent {
        request: Some(request),
        ..
    } = failure
    else {
        panic!("{failure:?}");
    };
    assert_eq!(request.head.fields.get(&HOST).unwrap().as_bytes(), b"test");
    let body = request.body.collect().await.unwrap().to_bytes();
    assert_eq!(body, "hello");
}

/// A large body is read in pieces that grow past the first read's 4 KiB
/// (fewer reads), and the connection goes back to the pool with a small
/// buffer again.
#[tokio::test]
async fn a_large_body_is_read_in_growing_pieces_and_the_buffer_shrinks_after() {
    const LEN: usize = 4 << 20;
    let mut answer = format!("HTTP/1.1 200 OK\r\ncontent-length: {LEN}\r\n\r\n").into_bytes();
    answer.resize(answer.len() + LEN, b'x');
    let (addr, _told) = scripted(vec![Act::Read, Act::Write(answer), Act::Hold]).await;
    let upstream = upstream();
    let mut body = send(&upstream, &addr, get()).await.unwrap().into_body();
    let (mut total, mut largest) = (0, 0);
    while let Some(frame) = tokio::time::timeout(WAIT, body.frame()).await.unwrap() {
        let data = frame.unwrap().into_data().unwrap();
        total += data.len();
        largest = largest.max(data.len());
    }
    assert_eq!(total, LEN);
    assert!(largest > 4096, "pieces of at most {largest} bytes");
    let conn = pool::take(upstream.pool, &addr).expect("kept");
    assert!(conn.buf.capacity() <= 8192, "{}", conn.buf.capacity());
}

/// Pieces of a body around the sizes the writer treats apart: empty ones
/// (written as nothing), ones copied next to their framing (up to
/// [`request::COPY_UP_TO`] bytes) and ones written as they are, one far
/// larger than a socket's send buffer, so that writes go out in part.
fn pieces_of_every_size() -> Vec<Bytes> {
    use super::request::COPY_UP_TO;
    let sizes = [0, 1, COPY_UP_TO, COPY_UP_TO + 1, 3, (5 << 20) + 3, 0, 2];
    sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| Bytes::from(vec![b'a' + i as u8; n]))
        .collect()
}

/// The first byte at which two long texts differ.
fn first_difference(a: &str, b: &str) -> Option<usize> {
    a.bytes()
        .zip(b.bytes())
        .position(|(x, y)| x != y)
        .or((a.len() != b.len()).then_some(a.len().min(b.len())))
}

/// A body of megabytes in pieces of every size reaches the backend byte
/// for byte, chunked (an empty piece is no chunk: a zero-size chunk
/// would end the body) and by its length, through writes that the socket
/// takes in part.
#[tokio::test]
async fn large_bodies_arrive_byte_for_byte_through_partial_writes() {
    let pieces = pieces_of_every_size();
    let length: usize = pieces.iter().map(Bytes::len).sum();
    let data: String = pieces
        .iter()
        .map(|p| String::from_utf8(p.to_vec()).unwrap())
        .collect();
    let mut chunked_body = String::new();
    for piece in pieces.iter().filter(|p| !p.is_empty()) {
        chunked_body.push_str(&format!("{:x}\r\n", piece.len()));
        chunked_body.push_str(std::str::from_utf8(piece).unwrap());
        chunked_body.push_str("\r\n");
    }
    chunked_body.push_str("0\r\nx-sum: 5\r\n\r\n");
    let mut trailers = HeaderMap::new();
    trailers.insert("x-sum", HeaderValue::from_static("5"));
    let chunked = {
        let mut r = request(
            "POST",
            Outgoing::from_chunks(pieces.clone(), Some(trailers)),
        );
        r.headers_mut()
            .insert("transfer-encoding", HeaderValue::from_static("chunked"));
        r
    };
    let declared = {
        let mut r = request("PUT", Outgoing::from_chunks(pieces.clone(), None));
        r.headers_mut().insert("content-length", length.into());
        r
    };
    let cases = [
        (
            chunked,
            format!(
                "POST /p?q=1 HTTP/1.1\r\nhost: test\r\ntransfer-encoding: chunked\r\n\r\n{chunked_body}"
            ),
        ),
        (
            declared,
            format!("PUT /p?q=1 HTTP/1.1\r\nhost: test\r\ncontent-length: {length}\r\n\r\n{data}"),
        ),
    ];
    for (request, want) in cases {
        let (got, idle) = as_read(request.into()).await;
        assert!(
            got == want,
            "{} bytes read, {} sent; first difference at byte {:?}",
            got.len(),
            want.len(),
            first_difference(&got, &want)
        );
        assert_eq!(idle, 1);
    }
}

/// An answer whose head comes while the body is still being written:
/// the rest of the body goes out while the answer's body is read, the
/// answer ends after the backend has read it all, and the connection,
/// done with both, is kept.
#[tokio::test]
async fn the_body_goes_on_after_an_early_answer() {
    let pieces = pieces_of_every_size();
    let length: usize = pieces.iter().map(Bytes::len).sum();
    let all: Vec<u8> = pieces.iter().flat_map(|p| p.iter().copied()).collect();
    let (addr, mut told) = scripted(vec![
        Act::ReadHead,
        write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n"),
        Act::ReadBody(length),
        write(b"ok"),
        Act::Hold,
    ])
    .await;
    let mut request = request("PUT", Outgoing::from_chunks(pieces, None));
    request
        .headers_mut()
        .insert("content-length", length.into());
    let upstream = upstream();
    let response = send(&upstream, &addr, request).await.unwrap();
    assert_eq!(read(response).await.unwrap().0, "ok");
    let head = told.recv().await.unwrap();
    assert!(head.starts_with("PUT /p?q=1 HTTP/1.1\r\n"), "{head}");
    let body = told.recv().await.unwrap();
    assert_eq!(body, format!("{length} bytes, {:x}", digest(&all)));
    assert_eq!(idle_count(upstream.pool), 1, "both done: kept");
}

/// A body longer or shorter than its `Content-Length` fails its request
/// instead of going out framed wrong: `content-length: 0` with bytes
/// after it (which the backend would take for the next request), or a
/// length that the body never reaches (the backend would wait for the
/// rest).
#[tokio::test]
async fn a_body_that_belies_its_length_fails_the_request() {
    let cases = [
        ("0", vec![Bytes::from_static(b"ab")], (0, 2)),
        ("5", vec![], (5, 0)),
        ("5", vec![Bytes::from_static(b"abc")], (5, 3)),
    ];
    for (declared, chunks, (want_declared, want_sent)) in cases {
        let (addr, _told) = scripted(vec![
            Act::ReadHead,
            write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"),
            Act::Hold,
        ])
        .await;
        let mut request = request("PUT", Outgoing::from_chunks(chunks, None));
        request
            .headers_mut()
            .insert("content-length", HeaderValue::from_static(declared));
        let upstream = upstream();
        let failure = send(&upstream, &addr, request)
            .await
            .expect_err("the request fails");
        assert!(
            matches!(
                failure.error().downcast_ref::<UpstreamError>(),
                Some(UpstreamError::RequestBodyLength { declared, sent })
                    if (*declared, *sent) == (want_declared, want_sent)
            ),
            "content-length {declared}: {failure:?}"
        );
    }
}

/// What an answer's body says of itself before it is read (hyper frames
/// the client's response from it): its exact size when known, its end
/// when it has none. A body with nothing in it gives its connection back
/// at once, as it may never be polled.
#[tokio::test]
async fn a_body_tells_its_size_and_an_empty_one_frees_its_connection_at_once() {
    let cases: [(&[u8], Option<u64>, bool); 3] = [
        (
            b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello",
            Some(5),
            false,
        ),
        (
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
            None,
            false,
        ),
        (b"HTTP/1.1 204 No Content\r\n\r\n", Some(0), true),
    ];
    for (answer, size, empty) in cases {
        let (addr, _told) = scripted(vec![Act::Read, write(answer), Act::Hold]).await;
        let upstream = upstream();
        let response = send(&upstream, &addr, get()).await.unwrap();
        let text = String::from_utf8_lossy(answer);
        assert_eq!(response.body().size_hint().exact(), size, "{text}");
        assert_eq!(response.body().is_end_stream(), empty, "{text}");
        if empty {
            assert_eq!(idle_count(upstream.pool), 1, "given back unread: {text}");
        }
        read(response).await.unwrap();
        assert_eq!(idle_count(upstream.pool), 1, "{text}");
    }
}

/// Bytes on a connection before any of the request went out answer
/// nothing asked on it (a stray answer that came after the pool looked
/// at the connection): the request comes back whole, unsent, to go on a
/// new connection, rather than be given that answer.
#[tokio::test]
async fn bytes_before_the_request_are_no_answer_to_it() {
    let (addr, _told) = scripted(vec![
        write(b"HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\nforged"),
        Act::Read,
        write(b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\nmine"),
        Act::Hold,
    ])
    .await;
    let upstream = upstream();
    let connection = upstream.checkout(&addr, true).await.unwrap();
    match &connection.conn {
        Sender::H1(conn) => match &conn.stream {
            Stream::Tcp(tcp) => tokio::time::timeout(WAIT, tcp.readable())
                .await
                .unwrap()
                .unwrap(),
            Stream::Tls(_) => unreachable!(),
        },
        Sender::H2(_) => unreachable!(),
    }
    let body = Outgoing::from_chunks(vec![Bytes::from_static(b"hello")], None);
    let failure = tokio::time::timeout(WAIT, connection.send(request("POST", body).into()))
        .await
        .unwrap()
        .unwrap_err();
    let Failure::Unsent {
        request: Some(request),
        error: UpstreamError::Unsolicited,
    } = failure
    else {
        panic!("{failure:?}");
    };
    assert_eq!(request.head.fields.get(&HOST).unwrap().as_bytes(), b"test");
    let body = request.body.collect().await.unwrap().to_bytes();
    assert_eq!(body, "hello");
    assert_eq!(idle_count(upstream.pool), 0);
}
