//! The request body on its way to a backend: read whole first when it is
//! small, so that an attempt that failed can send it again.
//!
//! A streamed body can be sent only once: after a connect failure it is
//! gone with the failed request. So a body of at most the cluster's
//! `retry_buffer` bytes (its `Content-Length`, or for a chunked body what
//! arrives before the limit) is read into memory before the first attempt,
//! as nginx's request buffering does, and each attempt sends a copy (the
//! chunks are reference-counted, not copied). A bigger body, or any body
//! when no retry is allowed, streams as it arrives and is sent once: the
//! chunks read while looking for its end go first, then the rest.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::downstream::{BodyError, ClientBody};
use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;

use crate::upload::Upload;

/// A request body, as the attempts will send it.
#[derive(Debug)]
pub(crate) enum RequestBody {
    /// No body: every attempt sends none.
    Empty,
    /// Read whole: every attempt sends these chunks and trailers.
    Buffered(Buffered),
    /// Streams to the first attempt only: what was read, then the rest of
    /// the client's body.
    Streamed(Buffered, Box<Rest>),
    /// A streamed body already handed to an attempt.
    Spent,
}

/// The client's body past what was read ahead, streamed to one attempt,
/// its progress followed for the backend's timeout (upload.rs). Boxed: the
/// rarer case, kept out of the size of every request's body, which moves
/// with the request.
#[derive(Debug)]
pub(crate) struct Rest {
    body: ClientBody,
    upload: Upload,
}

impl Rest {
    fn new(body: ClientBody) -> Box<Self> {
        Box::new(Rest {
            body,
            upload: Upload::new(),
        })
    }
}

/// Why a body could not be read ahead.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// The client went away or sent a malformed body.
    Client(BodyError),
    /// The client sent nothing for this long.
    Stalled(Duration),
}

/// Chunks (and trailers) read from the client.
#[derive(Debug, Clone, Default)]
pub(crate) struct Buffered {
    chunks: VecDeque<Bytes>,
    trailers: Option<HeaderMap>,
}

impl Buffered {
    /// The bytes of the chunks (a handful: at most a limit's worth).
    fn len(&self) -> u64 {
        self.chunks.iter().map(|c| c.len() as u64).sum()
    }
}

impl RequestBody {
    /// Reads `body` whole if it has at most `limit` bytes; stops at the
    /// first chunk past the limit (or at once, when the body's announced
    /// length is over it) and streams the rest. `limit` 0: never read ahead.
    /// The client may pause at most `idle` between two pieces of the body.
    ///
    /// # Errors
    /// Reading from the client failed (it went away, or sent a malformed
    /// body), or it sent nothing for `idle`.
    pub(crate) async fn read(
        mut body: ClientBody,
        limit: u64,
        idle: Duration,
    ) -> Result<Self, ReadError> {
        if body.is_end_stream() {
            return Ok(RequestBody::Empty);
        }
        let mut read = Buffered::default();
        let mut len = 0;
        if limit == 0 || body.size_hint().lower() > limit {
            return Ok(RequestBody::Streamed(read, Rest::new(body)));
        }
        loop {
            let frame = match tokio::time::timeout(idle, body.frame()).await {
                Err(_) => return Err(ReadError::Stalled(idle)),
                Ok(None) => break,
                Ok(Some(frame)) => frame.map_err(ReadError::Client)?,
            };
            match frame.into_data() {
                Ok(data) => {
                    len += data.len() as u64;
                    read.chunks.push_back(data);
                    if len > limit {
                        return Ok(RequestBody::Streamed(read, Rest::new(body)));
                    }
                }
                Err(frame) => {
                    if let Ok(trailers) = frame.into_trailers() {
                        read.trailers = Some(trailers);
                    }
                }
            }
        }
        Ok(RequestBody::Buffered(read))
    }

    /// A streamed body's progress (upload.rs), shared with the attempt
    /// that sends it.
    pub(crate) fn upload(&self) -> Option<Upload> {
        match self {
            RequestBody::Streamed(_, rest) => Some(rest.upload.clone()),
            _ => None,
        }
    }

    /// Whether every attempt can send the whole body.
    pub(crate) fn is_replayable(&self) -> bool {
        matches!(self, RequestBody::Empty | RequestBody::Buffered(_))
    }

    /// The body of the next attempt: a copy of a buffered body; a streamed
    /// one the first time only, then `None`.
    pub(crate) fn next_attempt(&mut self) -> Option<Outgoing> {
        match self {
            RequestBody::Empty => Some(Outgoing::new(Buffered::default(), None)),
            RequestBody::Buffered(read) => Some(Outgoing::new(read.clone(), None)),
            RequestBody::Streamed(..) | RequestBody::Spent => {
                match std::mem::replace(self, RequestBody::Spent) {
                    RequestBody::Streamed(read, rest) => Some(Outgoing::new(read, Some(rest))),
                    _ => None,
                }
            }
        }
    }
}

/// One attempt's body: chunks already read, then the client's stream if
/// it was not read to its end.
#[derive(Debug)]
pub(crate) struct Outgoing {
    read: Buffered,
    /// A streamed body's rest: each piece passed on steps its upload.
    rest: Option<Box<Rest>>,
}

impl Outgoing {
    /// No body (the active checks' requests).
    pub(crate) fn empty() -> Self {
        Outgoing::new(Buffered::default(), None)
    }

    fn new(read: Buffered, rest: Option<Box<Rest>>) -> Self {
        Outgoing { read, rest }
    }

    /// A body of these chunks and trailers, read whole.
    #[cfg(test)]
    pub(crate) fn from_chunks(chunks: Vec<Bytes>, trailers: Option<HeaderMap>) -> Self {
        Outgoing::new(
            Buffered {
                chunks: chunks.into(),
                trailers,
            },
            None,
        )
    }

    /// The first chunk already read from the client, when it has 1 to
    /// `max` bytes: taken without waiting, to go out with the head.
    pub(crate) fn pop_small(&mut self, max: usize) -> Option<Bytes> {
        let first = self.read.chunks.front()?;
        if first.is_empty() || first.len() > max {
            return None;
        }
        self.read.chunks.pop_front()
    }

    /// Puts `chunk` (taken by [`Outgoing::pop_small`]) back in front.
    pub(crate) fn put_back(&mut self, chunk: Bytes) {
        self.read.chunks.push_front(chunk);
    }
}

impl Body for Outgoing {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = &mut *self;
        if let Some(chunk) = this.read.chunks.pop_front() {
            if let Some(rest) = &this.rest {
                rest.upload.step();
            }
            return Poll::Ready(Some(Ok(Frame::data(chunk))));
        }
        match &mut this.rest {
            Some(rest) => {
                let polled = Pin::new(&mut rest.body).poll_frame(cx);
                rest.upload.looked(&polled);
                polled
            }
            None => Poll::Ready(this.read.trailers.take().map(|t| Ok(Frame::trailers(t)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.read.chunks.is_empty()
            && self.read.trailers.is_none()
            && self
                .rest
                .as_ref()
                .is_none_or(|rest| rest.body.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        match &self.rest {
            None => SizeHint::with_exact(self.read.len()),
            Some(rest) => {
                let rest = rest.body.size_hint();
                let mut hint = SizeHint::new();
                let read = self.read.len();
                hint.set_lower(rest.lower().saturating_add(read));
                if let Some(upper) = rest.upper() {
                    hint.set_upper(upper.saturating_add(read));
                }
                hint
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buffered(chunks: &[&'static str], trailers: Option<HeaderMap>) -> Buffered {
        Buffered {
            chunks: chunks
                .iter()
                .map(|c| Bytes::from_static(c.as_bytes()))
                .collect(),
            trailers,
        }
    }

    /// The chunks in order, then the trailers; before each frame the size
    /// hint is exactly the bytes still to come, and the body has ended only
    /// once the trailers are sent.
    #[tokio::test]
    async fn a_buffered_body_sends_its_chunks_then_its_trailers() {
        let mut trailers = HeaderMap::new();
        trailers.insert("x-sum", http::HeaderValue::from_static("5"));
        let mut body = Outgoing::new(buffered(&["ab", "cde"], Some(trailers.clone())), None);
        let mut seen = Vec::new();
        loop {
            let left = body
                .size_hint()
                .exact()
                .map_or("?".into(), |n| n.to_string());
            let ended = if body.is_end_stream() { ", ended" } else { "" };
            seen.push(format!("{left} left{ended}"));
            let Some(frame) = body.frame().await else {
                break;
            };
            let frame = frame.unwrap();
            match frame.data_ref() {
                Some(data) => seen.push(format!("data {}", String::from_utf8_lossy(data))),
                None => {
                    assert_eq!(frame.trailers_ref(), Some(&trailers));
                    seen.push("trailers".into());
                }
            }
        }
        assert_eq!(
            seen,
            [
                "5 left",
                "data ab",
                "3 left",
                "data cde",
                "0 left",
                "trailers",
                "0 left, ended"
            ]
        );
    }

    #[tokio::test]
    async fn an_empty_body_has_ended_before_its_first_frame() {
        let mut body = Outgoing::new(Buffered::default(), None);
        assert!(body.is_end_stream());
        assert_eq!(body.size_hint().exact(), Some(0));
        assert!(body.frame().await.is_none());
    }

    #[test]
    fn only_a_streamed_body_is_sent_once() {
        let mut empty = RequestBody::Empty;
        let mut whole = RequestBody::Buffered(buffered(&["x"], None));
        for body in [&mut empty, &mut whole] {
            assert!(body.is_replayable());
            assert!(body.next_attempt().is_some());
            assert!(body.next_attempt().is_some(), "again");
        }
        let mut spent = RequestBody::Spent;
        assert!(!spent.is_replayable());
        assert!(spent.next_attempt().is_none());
    }
}
