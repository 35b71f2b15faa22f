//! A request written to a backend's connection: its head, then its body
//! framed by its length (`Content-Length` as given, or the body's known
//! size) or chunked (with its trailers) when the length is unknown.
//!
//! The head and a small first chunk of the body go out in one write: one
//! system call, one TCP segment, as a backend reading the head expects.

use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use http::{HeaderMap, Method};
use http_body::Body;
use tokio::io::AsyncWrite;

use super::connection::Stream;
use super::error::UpstreamError;
use super::fields::put_field;
use super::head_fields::Fields;
use super::known_names::is_named;
use super::request_head::RequestHead;
use crate::request_body::Outgoing;

/// A body chunk up to this size is copied next to its framing (and the
/// first one next to the head) rather than written as a piece of its own.
pub(super) const COPY_UP_TO: usize = 8 * 1024;

/// The most pieces handed to one vectored write.
const MAX_SLICES: usize = 16;

#[derive(Debug, Clone, Copy)]
enum Framing {
    None,
    Length { declared: u64, sent: u64 },
    Chunked,
}

/// What is left to write of one request.
#[derive(Debug)]
pub(crate) struct RequestWriter {
    /// The head (and a small first body chunk) not yet written: kept
    /// unfrozen, so that a request without a body allocates nothing else.
    head: BytesMut,
    /// Bytes ready to go after the head, in order.
    queue: VecDeque<Bytes>,
    /// The body, until its end has been read.
    body: Option<Outgoing>,
    framing: Framing,
    /// The first body chunk, copied next to the head: put back in the body
    /// if nothing was written.
    first: Option<Bytes>,
    wrote: bool,
    unflushed: bool,
}

impl RequestWriter {
    /// The request's head encoded, its body to follow.
    pub(crate) fn new(parts: &RequestHead, mut body: Outgoing) -> Self {
        let mut head = BytesMut::with_capacity(256 + 32 * parts.fields.len());
        let target = match (&parts.method, parts.uri.path_and_query()) {
            (&Method::CONNECT, _) => parts.uri.authority().map_or("/", |a| a.as_str()),
            (_, Some(pq)) => pq.as_str(),
            (_, None) => "/",
        };
        head.put_slice(parts.method.as_str().as_bytes());
        head.put_u8(b' ');
        head.put_slice(target.as_bytes());
        head.put_slice(b" HTTP/1.1\r\n");
        let said = write_fields(&mut head, &parts.fields);
        let framing = framing(&parts.method, said, &body, &mut head);
        head.put_slice(b"\r\n");
        let mut writer = RequestWriter {
            head: BytesMut::new(),
            queue: VecDeque::new(),
            body: None,
            framing,
            first: None,
            wrote: false,
            unflushed: false,
        };
        if matches!(framing, Framing::None) {
            writer.head = head;
            return writer;
        }
        // A chunk already read from the client goes with the head.
        if let Some(chunk) = body.pop_small(COPY_UP_TO) {
            match writer.frame_data(&chunk, &mut head) {
                Ok(()) => writer.first = Some(chunk),
                // Over its length: the error comes when it is read again.
                Err(_) => body.put_back(chunk),
            }
        }
        writer.head = head;
        writer.body = Some(body);
        writer
    }

    /// Whether any byte of the request went out.
    pub(crate) fn wrote_anything(&self) -> bool {
        self.wrote
    }

    /// Whether all of it went out.
    pub(crate) fn is_done(&self) -> bool {
        self.head.is_empty() && self.queue.is_empty() && self.body.is_none() && !self.unflushed
    }

    /// The body of a request nothing of which was written, as it was.
    pub(crate) fn into_unsent_body(self) -> Outgoing {
        let mut body = self.body.unwrap_or_else(Outgoing::empty);
        if let Some(first) = self.first {
            body.put_back(first);
        }
        body
    }

    /// Writes what it can: ready once the whole request went out.
    ///
    /// # Errors
    /// The socket failed, the client's body failed, or the body did not
    /// match its `Content-Length`.
    pub(crate) fn poll_write(
        &mut self,
        stream: &mut Stream,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), UpstreamError>> {
        loop {
            if !self.head.is_empty() || !self.queue.is_empty() {
                let n = ready!(self.poll_queue(stream, cx))?;
                if n == 0 {
                    return Poll::Ready(Err(io::Error::from(io::ErrorKind::WriteZero).into()));
                }
                self.wrote = true;
                self.unflushed = true;
                self.first = None;
                self.advance(n);
                continue;
            }
            if let Some(body) = self.body.as_mut() {
                let frame = ready!(Pin::new(body).poll_frame(cx));
                let mut out = BytesMut::new();
                match frame {
                    Some(Ok(frame)) => match frame.into_data() {
                        Ok(data) if data.is_empty() => {}
                        Ok(data) if data.len() > COPY_UP_TO => {
                            self.prefix(data.len(), &mut out)?;
                            if !out.is_empty() {
                                self.queue.push_back(out.split().freeze());
                            }
                            self.queue.push_back(data);
                            if matches!(self.framing, Framing::Chunked) {
                                self.queue.push_back(Bytes::from_static(b"\r\n"));
                            }
                        }
                        Ok(data) => self.frame_data(&data, &mut out)?,
                        Err(frame) => {
                            if let (Ok(trailers), Framing::Chunked) =
                                (frame.into_trailers(), self.framing)
                            {
                                self.end(Some(&trailers), &mut out)?;
                            }
                        }
                    },
                    Some(Err(e)) => {
                        self.body = None;
                        return Poll::Ready(Err(UpstreamError::RequestBody(e)));
                    }
                    None => self.end(None, &mut out)?,
                }
                if !out.is_empty() {
                    self.queue.push_back(out.freeze());
                }
                continue;
            }
            if self.unflushed {
                ready!(Pin::new(&mut *stream).poll_flush(cx))?;
                self.unflushed = false;
            }
            return Poll::Ready(Ok(()));
        }
    }

    /// One write of the front pieces: what is left of the head, then the
    /// queue's.
    fn poll_queue(&self, stream: &mut Stream, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        let head = (!self.head.is_empty()).then_some(&self.head[..]);
        let mut pieces = head.into_iter().chain(self.queue.iter().map(|b| &b[..]));
        let pieces_left = usize::from(head.is_some()) + self.queue.len();
        if pieces_left == 1 || !stream.is_write_vectored() {
            let first = pieces.next().unwrap_or_default();
            return Pin::new(stream).poll_write(cx, first);
        }
        let mut slices = [IoSlice::new(&[]); MAX_SLICES];
        let mut n = 0;
        for (slot, piece) in slices.iter_mut().zip(pieces) {
            *slot = IoSlice::new(piece);
            n += 1;
        }
        Pin::new(stream).poll_write_vectored(cx, &slices[..n])
    }

    fn advance(&mut self, mut n: usize) {
        let from_head = n.min(self.head.len());
        self.head.advance(from_head);
        n -= from_head;
        while n > 0 {
            let Some(front) = self.queue.front_mut() else {
                return;
            };
            if n < front.len() {
                let _ = front.split_to(n);
                return;
            }
            n -= front.len();
            self.queue.pop_front();
        }
    }

    /// `data` (not empty) framed into `out`.
    fn frame_data(&mut self, data: &[u8], out: &mut BytesMut) -> Result<(), UpstreamError> {
        self.prefix(data.len(), out)?;
        out.put_slice(data);
        if matches!(self.framing, Framing::Chunked) {
            out.put_slice(b"\r\n");
        }
        Ok(())
    }

    /// What goes before `len` bytes of data: a chunk's size line when
    /// chunked; with a length, the count checked against it.
    fn prefix(&mut self, len: usize, out: &mut BytesMut) -> Result<(), UpstreamError> {
        match &mut self.framing {
            Framing::Chunked => {
                crate::numerals::put_hex(out, len as u64);
                out.put_slice(b"\r\n");
            }
            Framing::Length { declared, sent } => {
                let total = *sent + len as u64;
                if total > *declared {
                    return Err(UpstreamError::RequestBodyLength {
                        declared: *declared,
                        sent: total,
                    });
                }
                *sent = total;
            }
            Framing::None => {}
        }
        Ok(())
    }

    /// The body's end: the last chunk and the trailers, or the length's
    /// check.
    fn end(
        &mut self,
        trailers: Option<&HeaderMap>,
        out: &mut BytesMut,
    ) -> Result<(), UpstreamError> {
        self.body = None;
        match self.framing {
            Framing::None => {}
            Framing::Length { declared, sent } => {
                if sent != declared {
                    return Err(UpstreamError::RequestBodyLength { declared, sent });
                }
            }
            Framing::Chunked => {
                out.put_slice(b"0\r\n");
                for (name, value) in trailers.into_iter().flatten() {
                    put_field(out, name.as_str().as_bytes(), value.as_bytes());
                }
                out.put_slice(b"\r\n");
            }
        }
        Ok(())
    }
}

/// What the fields said of the body's framing, seen while they were
/// written (no lookup by name).
#[derive(Debug, Clone, Copy, Default)]
struct Said {
    /// The first `Content-Length`, when it is a number.
    content_length: Option<Option<u64>>,
    transfer_encoding: bool,
}

/// `name: value` lines, names in lower case.
fn write_fields(out: &mut BytesMut, fields: &Fields) -> Said {
    let mut said = Said::default();
    fields.for_each(|name, value| {
        if is_named(name, b"content-length") {
            said.content_length.get_or_insert_with(|| length(value));
        } else if is_named(name, b"transfer-encoding") {
            said.transfer_encoding = true;
        }
        put_field(out, name, value);
    });
    said
}

/// A `Content-Length` value's number (spaces around it allowed).
fn length(value: &[u8]) -> Option<u64> {
    std::str::from_utf8(value).ok()?.trim().parse().ok()
}

/// How the body is framed, its header added to `head` when the request
/// has none.
fn framing(method: &Method, said: Said, body: &Outgoing, head: &mut BytesMut) -> Framing {
    if let Some(declared) = said.content_length.flatten() {
        return if declared == 0 && body.is_end_stream() {
            Framing::None
        } else {
            Framing::Length { declared, sent: 0 }
        };
    }
    if said.transfer_encoding {
        return Framing::Chunked;
    }
    if body.is_end_stream() {
        // A body that is empty, said so where one is expected (as clients do).
        if matches!(*method, Method::POST | Method::PUT | Method::PATCH) {
            head.put_slice(b"content-length: 0\r\n");
        }
        return Framing::None;
    }
    match body.size_hint().exact() {
        Some(n) => {
            head.put_slice(b"content-length: ");
            crate::numerals::put_decimal(head, n);
            head.put_slice(b"\r\n");
            Framing::Length {
                declared: n,
                sent: 0,
            }
        }
        None => {
            head.put_slice(b"transfer-encoding: chunked\r\n");
            Framing::Chunked
        }
    }
}
