//! One HTTP/1.1 exchange, driven by the request's own task: the request
//! written while the answer is watched for (a backend may answer before
//! it has read the whole request, and then it may never read the rest),
//! until the response head is in.

use std::future::poll_fn;
use std::task::Poll;

use http::header::{HeaderValue, CONTENT_LENGTH};
use http::{Method, StatusCode};

use super::connection::Conn;
use super::decode::Framing;
use super::error::UpstreamError;
use super::fields::worth_parsing;
use super::outgoing::OutgoingRequest;
use super::raw_head::RawHead;
use super::request::RequestWriter;
use super::request_head::RequestHead;
use super::response::{body_and_reuse, parse_head};

/// The most interim (1xx) answers read before the final one: a backend
/// sending them without end would keep the request busy until its timeout.
const MAX_INTERIM: u32 = 16;

/// A response head, and what is left to write of the request.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) head: Box<RawHead>,
    pub(crate) framing: Framing,
    /// Whether the connection may carry another exchange after this one.
    pub(crate) keep_alive: bool,
    /// The request's rest when the answer came first (written while the
    /// body is read); `None` once it all went out.
    pub(crate) writer: Option<Box<RequestWriter>>,
}

/// Why no response head came.
#[derive(Debug)]
pub(crate) enum ExchangeError {
    /// Nothing of the request was written: here it is, whole.
    Unsent(UpstreamError, Box<OutgoingRequest>),
    /// The request was written, maybe in part; `answered` when any byte
    /// of an answer came. `head` is the request's head, kept until an
    /// answer came so that a resend need not copy it ahead.
    Sent {
        error: UpstreamError,
        answered: bool,
        head: Option<Box<RequestHead>>,
    },
}

/// The answer that no response head came after (part of) the request went
/// out.
fn sent(
    error: UpstreamError,
    answered: bool,
    parts: &mut Option<Box<RequestHead>>,
) -> Poll<Result<Answer, ExchangeError>> {
    Poll::Ready(Err(ExchangeError::Sent {
        error,
        answered,
        head: parts.take(),
    }))
}

/// Writes `request` on `conn` and reads the response head, skipping
/// interim (1xx) answers but `101 Switching Protocols`.
///
/// # Errors
/// See [`ExchangeError`]. The connection must be closed then.
pub(crate) async fn exchange(
    conn: &mut Conn,
    request: OutgoingRequest,
) -> Result<Answer, ExchangeError> {
    let OutgoingRequest { head: parts, body } = request;
    let to_head = parts.method == Method::HEAD;
    let mut writer = Some(RequestWriter::new(&parts, body));
    // Kept until an answer comes: whole (with the body) while nothing of it
    // was written, the head alone for a resend after that.
    let mut parts = Some(parts);
    let mut answered = false;
    let mut interim = 0;
    let mut write_failed: Option<UpstreamError> = None;
    // The bytes held when a parse last found the head partial
    // (`worth_parsing`).
    let mut scanned: Option<usize> = None;
    poll_fn(|cx| {
        loop {
            match worth_parsing(&conn.buf, scanned).then(|| parse_head(&mut conn.buf)) {
                Some(Err(error)) => return sent(error, answered, &mut parts),
                Some(Ok(Some(mut head))) => {
                    scanned = None;
                    if head.status.is_informational()
                        && head.status != StatusCode::SWITCHING_PROTOCOLS
                    {
                        interim += 1;
                        if interim > MAX_INTERIM {
                            let why = format!("more than {MAX_INTERIM} interim (1xx) answers");
                            return sent(UpstreamError::InvalidHead(why), answered, &mut parts);
                        }
                        continue;
                    }
                    let read = match body_and_reuse(to_head, &head) {
                        Ok(read) => read,
                        Err(error) => return sent(error, answered, &mut parts),
                    };
                    if let Some(n) = read.normalized_length {
                        head.fields.set(CONTENT_LENGTH, HeaderValue::from(n));
                    }
                    let writer = writer.take().filter(|w| !w.is_done()).map(Box::new);
                    return Poll::Ready(Ok(Answer {
                        head,
                        framing: read.framing,
                        keep_alive: read.keep_alive,
                        writer,
                    }));
                }
                Some(Ok(None)) | None => {
                    scanned = (!conn.buf.is_empty()).then_some(conn.buf.len());
                }
            }
            let error = match conn.poll_fill(cx) {
                Poll::Ready(Ok(0)) if answered => {
                    UpstreamError::Closed("in the middle of the response head")
                }
                Poll::Ready(Ok(0)) => UpstreamError::Closed("before a response"),
                // Bytes before any of the request went out answer nothing
                // asked: a stray answer that came on an idle connection
                // after the pool looked at it (a second answer to the last
                // request, a body after a 204, a `408` sent before closing
                // it). Read as this request's answer, they would give it
                // another's; the request goes back whole instead, to be sent
                // on a new connection.
                Poll::Ready(Ok(_))
                    if !writer.as_ref().is_some_and(RequestWriter::wrote_anything) =>
                {
                    UpstreamError::Unsolicited
                }
                Poll::Ready(Ok(_)) => {
                    answered = true;
                    continue;
                }
                Poll::Ready(Err(e)) => e.into(),
                Poll::Pending => break,
            };
            // Closed (or reset), or spoken to, before a byte of the request
            // went out: the request is still whole.
            if !writer.as_ref().is_some_and(RequestWriter::wrote_anything) {
                if let (Some(parts), Some(w)) = (parts.take(), writer.take()) {
                    let request = OutgoingRequest {
                        head: parts,
                        body: w.into_unsent_body(),
                    };
                    return Poll::Ready(Err(ExchangeError::Unsent(error, Box::new(request))));
                }
            }
            return sent(write_failed.take().unwrap_or(error), answered, &mut parts);
        }
        if write_failed.is_some() {
            return Poll::Pending;
        }
        let Some(w) = writer.as_mut() else {
            return Poll::Pending;
        };
        match w.poll_write(&mut conn.stream, cx) {
            Poll::Ready(Err(error)) if !w.wrote_anything() => {
                let body = writer.take().map(RequestWriter::into_unsent_body);
                if let (Some(parts), Some(body)) = (parts.take(), body) {
                    let request = OutgoingRequest { head: parts, body };
                    return Poll::Ready(Err(ExchangeError::Unsent(error, Box::new(request))));
                }
                return sent(error, answered, &mut parts);
            }
            Poll::Ready(Err(error)) => {
                if matches!(error, UpstreamError::Io(_)) {
                    // The backend may have answered and closed before
                    // reading the rest: its answer is still to be read.
                    write_failed = Some(error);
                } else {
                    return sent(error, answered, &mut parts);
                }
            }
            Poll::Ready(Ok(())) | Poll::Pending => {}
        }
        Poll::Pending
    })
    .await
}
