//! A backend's response body. Over HTTP/1.1 it is read from the
//! connection by whoever polls it (the request's task), the rest of the
//! request written meanwhile when the answer came first, and the
//! connection goes back to the worker's pool when the body has ended
//! cleanly and the connection can carry another exchange; dropped before,
//! or broken, the connection is closed (the rest of the answer would still
//! be on the wire).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::{CONTENT_LENGTH, HOST};
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;

use super::connection::Conn;
use super::decode::{Decoder, Framing, Step};
use super::error::UpstreamError;
use super::pool;
use super::request::RequestWriter;
use super::upgraded::Upgraded;

/// The body of a backend's response.
#[derive(Debug)]
pub(crate) struct UpstreamBody {
    inner: Inner,
}

#[derive(Debug)]
enum Inner {
    H1(H1Body),
    /// HTTP/2: the shared connection is hyper's.
    H2(Incoming),
}

/// Where an HTTP/1.1 connection goes back to.
#[derive(Debug, Clone)]
pub(crate) struct Home {
    pub(crate) pool: usize,
    pub(crate) keepalive: usize,
    pub(crate) addr: Arc<str>,
    pub(crate) idle_timeout: Duration,
}

#[derive(Debug)]
struct H1Body {
    /// `None` once given back or closed.
    conn: Option<Conn>,
    decoder: Decoder,
    /// What is left to write of the request.
    writer: Option<Box<RequestWriter>>,
    /// The answer lets the connection carry another exchange.
    reusable: bool,
    upgrade: bool,
    home: Home,
    /// An error met, given at the next poll (see [`H1Body::fail`]).
    failed: Option<UpstreamError>,
}

impl UpstreamBody {
    /// The body of an HTTP/1.1 answer on `conn`; `keep_alive` when the
    /// answer lets the connection carry another exchange.
    /// `writer`: what is left to write of the request.
    pub(crate) fn h1(
        conn: Conn,
        framing: Framing,
        writer: Option<Box<RequestWriter>>,
        keep_alive: bool,
        home: Home,
    ) -> Self {
        let mut body = H1Body {
            conn: Some(conn),
            decoder: Decoder::new(framing),
            writer,
            reusable: keep_alive && !matches!(framing, Framing::Eof | Framing::Upgrade),
            upgrade: framing == Framing::Upgrade,
            home,
            failed: None,
        };
        // A body with nothing in it (a 204, an answer to HEAD) may never be
        // polled.
        if !body.upgrade && body.decoder.is_done() {
            body.finish();
        }
        UpstreamBody {
            inner: Inner::H1(body),
        }
    }

    pub(crate) fn h2(incoming: Incoming) -> Self {
        UpstreamBody {
            inner: Inner::H2(incoming),
        }
    }

    /// After `101 Switching Protocols` over HTTP/1.1: the connection, now
    /// the tunnel's.
    pub(crate) fn into_upgraded(self) -> Option<Upgraded> {
        match self.inner {
            Inner::H1(mut h1) if h1.upgrade => h1.conn.take().map(|conn| Upgraded { conn }),
            _ => None,
        }
    }
}

impl H1Body {
    /// The body has ended: the connection goes back to the pool when the
    /// whole exchange is over and left nothing behind, else it is closed.
    fn finish(&mut self) {
        let Some(conn) = self.conn.take() else {
            return;
        };
        if self.reusable && self.writer.is_none() && conn.buf.is_empty() {
            let home = &self.home;
            pool::give_back(
                home.pool,
                &home.addr,
                conn,
                home.keepalive,
                home.idle_timeout,
            );
        }
    }

    /// Closes the connection; the error comes at the next poll. The data
    /// given before it may still sit in the client connection's write
    /// buffer: a poll that is not ready lets hyper flush it (the client
    /// gets what came, then the cut), where an error at once would make it
    /// drop the connection with that data unsent.
    fn fail(
        &mut self,
        error: UpstreamError,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, UpstreamError>>> {
        self.conn = None;
        self.failed = Some(error);
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    fn poll_frame(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, UpstreamError>>> {
        if let Some(error) = self.failed.take() {
            return Poll::Ready(Some(Err(error)));
        }
        let Some(conn) = self.conn.as_mut() else {
            return Poll::Ready(None);
        };
        if let Some(writer) = self.writer.as_mut() {
            match writer.poll_write(&mut conn.stream, cx) {
                Poll::Ready(Ok(())) => self.writer = None,
                Poll::Ready(Err(e)) => {
                    // The answer may still come whole; the connection's
                    // state is unknown past it.
                    tracing::debug!("writing the rest of the request: {e}");
                    self.writer = None;
                    self.reusable = false;
                }
                Poll::Pending => {}
            }
        }
        loop {
            let step = match self.decoder.step(&mut conn.buf) {
                Ok(step) => step,
                Err(e) => return self.fail(e, cx),
            };
            match step {
                Step::Data(data) => {
                    self.decoder.end_if_buffered(&mut conn.buf);
                    if self.decoder.is_done() {
                        self.finish();
                    }
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                Step::Trailers(mut trailers) => {
                    self.finish();
                    // A trailer that frames, carries or routes the message
                    // is not the content's (RFC 9110 6.5.1), and HTTP/2
                    // forbids connection-specific fields in any section
                    // (RFC 9113 8.2.2: an HTTP/2 client's answer, whole, was
                    // reset for one): they go, as from a head, for clients
                    // of either protocol alike.
                    crate::hop_by_hop::strip_hop_by_hop(&mut trailers);
                    trailers.remove(CONTENT_LENGTH);
                    trailers.remove(HOST);
                    if trailers.is_empty() {
                        return Poll::Ready(None);
                    }
                    return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
                }
                Step::End => {
                    self.finish();
                    return Poll::Ready(None);
                }
                Step::More => match conn.poll_fill(cx) {
                    Poll::Ready(Ok(0)) => {
                        return match self.decoder.at_eof() {
                            Ok(_) => {
                                self.reusable = false;
                                self.finish();
                                Poll::Ready(None)
                            }
                            Err(e) => self.fail(e, cx),
                        };
                    }
                    Poll::Ready(Ok(_)) => {}
                    Poll::Ready(Err(e)) => return self.fail(e.into(), cx),
                    Poll::Pending => return Poll::Pending,
                },
            }
        }
    }
}

impl Body for UpstreamBody {
    type Data = Bytes;
    type Error = UpstreamError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, UpstreamError>>> {
        match &mut self.inner {
            Inner::H1(h1) => h1.poll_frame(cx),
            Inner::H2(incoming) => match Pin::new(incoming).poll_frame(cx) {
                Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(UpstreamError::H2(e)))),
                Poll::Ready(Some(Ok(frame))) => Poll::Ready(Some(Ok(frame))),
                Poll::Ready(None) => Poll::Ready(None),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.inner {
            Inner::H1(h1) => h1.decoder.is_done(),
            Inner::H2(incoming) => incoming.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.inner {
            Inner::H1(h1) => h1
                .decoder
                .remaining()
                .map_or_else(SizeHint::new, SizeHint::with_exact),
            Inner::H2(incoming) => incoming.size_hint(),
        }
    }
}
