//! The response body as it goes back to the client, holding the request's
//! in-flight slot as long as the backend works on the request.

use std::future::Future as _;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use loadring::{LoadReport, Outcome, Pick};
use tokio::time::Sleep;

use crate::abandoned::Abandoning;
use crate::cluster::Backend;

/// Any error a body sent to the client or to a backend can end with.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The backend paused its response body for longer than the idle timeout.
#[derive(Debug, thiserror::Error)]
#[error("the backend sent nothing of its response body for {0:?}")]
pub struct BodyStalled(pub Duration);

/// The most of a response whose client left that is read: past it, its
/// connection to the backend is closed rather than the rest read.
pub(crate) const MAX_DRAINED_BYTES: u64 = 1 << 20;

/// What becomes of the backend's response when the client leaves first.
#[derive(Debug, Clone)]
pub enum OnClientGone {
    /// Read the rest of the response and release the slot when the backend
    /// is done, as HAProxy does without `option abortonclose`: bounded load
    /// counts the work the backend is really doing. That takes one of the
    /// proxy's places for abandoned requests; with none free, as `Abort`.
    /// The rest is read for at most the idle timeout in all and at most
    /// [`MAX_DRAINED_BYTES`]; past either, as `Abort`: a large answer or an
    /// endless stream (events, a download) would otherwise cost the backend
    /// and the proxy all of it for a client that asked and left at once.
    Drain(Abandoning),
    /// Close the upstream connection at once and release the slot
    /// (`--abort-on-close`).
    Abort,
}

/// A backend's response body with the balancer's guard inside: hyper drops
/// it once the last byte is written to the client or the client connection
/// is gone. Each pause of the backend is bounded by `idle`: past it the
/// body ends with [`BodyStalled`] (hyper then closes the client's
/// connection, the body truncated) and the slot is released with a failure.
/// A client that leaves early leaves the rest to [`OnClientGone`].
///
/// `B` is the backend's body as the upstream layer hands it over.
#[derive(Debug)]
pub struct GuardedBody<B: BackendBody = Incoming> {
    inner: Option<B>,
    pick: Option<Pick<Backend>>,
    started: Instant,
    /// The response status says the request succeeded.
    succeeded: bool,
    ended: bool,
    broken: bool,
    idle: Duration,
    /// Armed when the backend is waited for, not while the client is.
    stall: Option<Pin<Box<Sleep>>>,
    on_client_gone: OnClientGone,
    /// The backend's load report from the response headers, given to the
    /// balancer with the outcome.
    report: Option<LoadReport>,
    /// A gRPC call whose status is still to come in the trailers.
    grpc: Option<crate::grpc::Tally>,
}

/// The outcome, with the backend's report when there is one.
fn outcome(succeeded: bool, latency: Duration, report: Option<LoadReport>) -> Outcome {
    let outcome = if succeeded {
        Outcome::success(latency)
    } else {
        Outcome::failure(latency)
    };
    match report {
        Some(report) => outcome.with_report(report),
        None => outcome,
    }
}

/// What a backend's response body must be to be guarded: any error it
/// ends with goes to the client's side as a [`BoxError`].
pub trait BackendBody: Body<Data = Bytes, Error: Into<BoxError>> + Unpin + Send + 'static {}

impl<B: Body<Data = Bytes, Error: Into<BoxError>> + Unpin + Send + 'static> BackendBody for B {}

impl<B: BackendBody> GuardedBody<B> {
    /// Wraps `inner`, holding `pick` until the backend is done with it;
    /// `started` is when the attempt began, `succeeded` whether its status
    /// was a success, `idle` the longest pause allowed in the body.
    // Inlined: each call would move the whole body in and out.
    #[inline(always)]
    pub fn new(
        inner: B,
        pick: Pick<Backend>,
        started: Instant,
        succeeded: bool,
        idle: Duration,
        on_client_gone: OnClientGone,
    ) -> Self {
        GuardedBody {
            // A body with nothing in it (a 204, an answer to HEAD) is never
            // polled: it has ended already.
            ended: inner.is_end_stream(),
            inner: Some(inner),
            pick: Some(pick),
            started,
            succeeded,
            broken: false,
            idle,
            stall: None,
            on_client_gone,
            report: None,
            grpc: None,
        }
    }

    /// Gives `report` (the backend's, from the response headers) to the
    /// balancer with the outcome.
    // Inlined: each call would move the whole body in and out.
    #[inline(always)]
    pub fn with_report(mut self, report: Option<LoadReport>) -> Self {
        self.report = report;
        self
    }

    /// A gRPC call: its status, when the trailers bring it, is counted in
    /// `tally` and decides the outcome (UNAVAILABLE and DEADLINE_EXCEEDED
    /// are failures).
    // Inlined: each call would move the whole body in and out.
    #[inline(always)]
    pub fn with_grpc(mut self, tally: Option<crate::grpc::Tally>) -> Self {
        self.grpc = tally;
        self
    }
}

impl<B: BackendBody> Body for GuardedBody<B> {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        let Some(inner) = this.inner.as_mut() else {
            return Poll::Ready(None);
        };
        match Pin::new(&mut *inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                this.stall = None;
                match &frame {
                    None => this.ended = true,
                    Some(Err(_)) => this.broken = true,
                    // hyper stops polling once the body says it has ended (a
                    // body of known length, its last bytes just read): no
                    // `None` will come.
                    Some(Ok(f)) => {
                        if let Some(trailers) = f.trailers_ref() {
                            if let Some(status) = crate::grpc::status(trailers) {
                                if let Some(tally) = this.grpc.take() {
                                    tally.count(status);
                                    this.succeeded &= !crate::grpc::is_failure(status);
                                }
                            }
                        }
                        this.ended = inner.is_end_stream();
                    }
                }
                Poll::Ready(frame.map(|f| f.map_err(Into::into)))
            }
            Poll::Pending => {
                // The clock starts when the backend is waited for: time the
                // client took to take the previous bytes is not the backend's.
                let idle = this.idle;
                let stall = this
                    .stall
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(idle)));
                if stall.as_mut().poll(cx).is_ready() {
                    this.broken = true;
                    this.stall = None;
                    // Dropping the body closes the upstream connection.
                    this.inner = None;
                    return Poll::Ready(Some(Err(Box::new(BodyStalled(idle)))));
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.inner
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), Body::size_hint)
    }
}

impl<B: BackendBody> Drop for GuardedBody<B> {
    fn drop(&mut self) {
        let Some(pick) = self.pick.take() else { return };
        let latency = self.started.elapsed();
        let report = self.report.take();
        if self.broken || (self.ended && !self.succeeded) {
            pick.finish(outcome(false, latency, report));
            return;
        }
        if self.ended {
            pick.finish(outcome(true, latency, report));
            return;
        }
        // The client went away before the end of the body.
        let inner = self.inner.take();
        let runtime = tokio::runtime::Handle::try_current();
        if let (OnClientGone::Drain(abandoning), Some(inner), Ok(runtime)) =
            (&self.on_client_gone, inner, runtime)
        {
            if let Some(place) = abandoning.place() {
                let (started, succeeded, idle) = (self.started, self.succeeded, self.idle);
                runtime.spawn(async move {
                    drain(inner, pick, started, succeeded, idle, report).await;
                    drop(place);
                });
                return;
            }
        }
        // Aborted: the slot is released with no verdict on the backend.
        drop(pick);
    }
}

/// Reads what is left of a response nobody will see, for at most `idle`
/// and [`MAX_DRAINED_BYTES`], and releases the slot when the backend is
/// done: with its verdict when it ended, or failed (it sent nothing for
/// `idle`); with none when the rest was cut (its connection closed).
async fn drain<B: BackendBody>(
    mut inner: B,
    pick: Pick<Backend>,
    started: Instant,
    succeeded: bool,
    idle: Duration,
    report: Option<LoadReport>,
) {
    let until = tokio::time::Instant::now() + idle;
    let mut drained: u64 = 0;
    let mut heard = false;
    let ended = loop {
        match tokio::time::timeout_at(until, inner.frame()).await {
            Ok(None) => break Some(true),
            Ok(Some(Ok(frame))) => {
                if inner.is_end_stream() {
                    break Some(true);
                }
                heard = true;
                drained += frame.data_ref().map_or(0, |data| data.len() as u64);
                if drained > MAX_DRAINED_BYTES {
                    break None;
                }
            }
            Ok(Some(Err(_))) => break Some(false),
            // Nothing at all for `idle`: the backend stalled. Otherwise it
            // was sending, only too long for a client that is gone.
            Err(_) => break (!heard).then_some(false),
        }
    };
    match ended {
        Some(ended) => pick.finish(outcome(ended && succeeded, started.elapsed(), report)),
        // Cut: dropping the body closes the upstream connection.
        None => {
            drop(inner);
            drop(pick);
        }
    }
}
