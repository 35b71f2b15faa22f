//! A backend's response body that gives its connection back to the pool
//! when it ends.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;

use super::Held;

/// The body of a response; its connection goes back to the worker's pool
/// at its end, and is closed if the body is dropped before (the rest of
/// the answer would still be on the wire).
#[derive(Debug)]
pub(crate) struct UpstreamBody {
    inner: Incoming,
    held: Option<Held>,
}

impl UpstreamBody {
    pub(crate) fn new(inner: Incoming, held: Held) -> Self {
        let mut body = UpstreamBody {
            inner,
            held: Some(held),
        };
        // A body with nothing in it (a 204, an answer to HEAD) may never
        // be polled.
        if body.inner.is_end_stream() {
            body.ended();
        }
        body
    }

    fn ended(&mut self) {
        if let Some(held) = self.held.take() {
            held.give_back();
        }
    }
}

impl Body for UpstreamBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(None) => this.ended(),
            Poll::Ready(Some(Ok(_))) if this.inner.is_end_stream() => this.ended(),
            // A broken body leaves the connection unusable.
            Poll::Ready(Some(Err(_))) => drop(this.held.take()),
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
