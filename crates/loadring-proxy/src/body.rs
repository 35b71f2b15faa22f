//! The response body as it goes back to the client, holding the request's
//! in-flight slot until the body is sent or the client is gone.

use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use loadring::{Outcome, Pick};

use crate::cluster::Backend;

/// A backend's response body with the balancer's guard inside: hyper drops
/// it once the last byte is written to the client or the client connection
/// is gone, and only then is the slot released. So `loadring_in_flight` and
/// bounded load count requests for their whole life, slow downloads
/// included.
#[derive(Debug)]
pub struct GuardedBody<B> {
    inner: B,
    pick: Option<Pick<Backend>>,
    started: Instant,
    /// The response status says the request succeeded.
    succeeded: bool,
    ended: bool,
    broken: bool,
}

impl<B: Body> GuardedBody<B> {
    /// Wraps `inner`, holding `pick` until dropped; `started` is when the
    /// attempt began, `succeeded` whether its status was a success.
    pub fn new(inner: B, pick: Pick<Backend>, started: Instant, succeeded: bool) -> Self {
        GuardedBody {
            // A body with nothing in it (a 204, an answer to HEAD) is never
            // polled: it has ended already.
            ended: inner.is_end_stream(),
            inner,
            pick: Some(pick),
            started,
            succeeded,
            broken: false,
        }
    }
}

impl<B: Body<Data = Bytes> + Unpin> Body for GuardedBody<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let frame = ready!(Pin::new(&mut self.inner).poll_frame(cx));
        match &frame {
            None => self.ended = true,
            Some(Err(_)) => self.broken = true,
            // hyper stops polling once the body says it has ended (a body of
            // known length, its last bytes just read): no `None` will come.
            Some(Ok(_)) => self.ended = self.inner.is_end_stream(),
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl<B> Drop for GuardedBody<B> {
    fn drop(&mut self) {
        let Some(pick) = self.pick.take() else { return };
        let latency = self.started.elapsed();
        if self.broken || (self.ended && !self.succeeded) {
            pick.finish(Outcome::failure(latency));
        } else if self.ended {
            pick.finish(Outcome::success(latency));
        }
        // Otherwise the client went away (or the body was empty and never
        // polled): the slot is released with no verdict on the backend.
    }
}
