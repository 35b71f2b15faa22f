//! When a request's in-flight slot is released: on the response, or when an
//! HTTP response's body ends.

use std::fmt;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};

use http_body::{Body, Frame, SizeHint};
use loadring::{Endpoint, LoadReport, Outcome, Pick};
use pin_project_lite::pin_project;

/// One request's in-flight slot on its endpoint (a [`Pick`]) and, for
/// policies that learn from outcomes, the time the request started.
///
/// Dropping it releases the slot; [`Guard::success`] and [`Guard::failure`]
/// also report the outcome to the policy.
pub struct Guard<S> {
    pick: Pick<S>,
    started: Option<Instant>,
    /// The endpoint's own load report from its response, given to the
    /// balancer with the outcome.
    report: Option<LoadReport>,
}

impl<S> fmt::Debug for Guard<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guard")
            .field("endpoint", self.pick.endpoint())
            .finish_non_exhaustive()
    }
}

impl<S> Guard<S> {
    pub(crate) fn new(pick: Pick<S>, started: Option<Instant>) -> Self {
        Guard {
            pick,
            started,
            report: None,
        }
    }

    /// Gives `report` (the endpoint's own count of its requests in service,
    /// read from its response) to the balancer when the slot is released
    /// with [`Guard::success`] or [`Guard::failure`].
    #[must_use]
    pub fn with_report(mut self, report: Option<LoadReport>) -> Self {
        self.report = report;
        self
    }

    fn finish(self, success: bool) {
        let latency = self.started.map(|t| t.elapsed());
        let outcome = |latency| {
            if success {
                Outcome::success(latency)
            } else {
                Outcome::failure(latency)
            }
        };
        match (latency, self.report) {
            (Some(latency), None) => self.pick.finish(outcome(latency)),
            (Some(latency), Some(report)) => self.pick.finish(outcome(latency).with_report(report)),
            // Without a policy that learns from latency, a report still
            // needs an outcome to ride on; its latency is never read.
            (None, Some(report)) => self
                .pick
                .finish(outcome(Duration::ZERO).with_report(report)),
            (None, None) => drop(self.pick),
        }
    }

    /// The endpoint the request went to.
    pub fn endpoint(&self) -> &Endpoint {
        self.pick.endpoint()
    }

    /// Requests in flight on that endpoint, this one included.
    pub fn in_flight(&self) -> u64 {
        self.pick.in_flight()
    }

    /// Releases the slot, reporting a success to policies that learn from
    /// outcomes.
    pub fn success(self) {
        self.finish(true);
    }

    /// Releases the slot, reporting a failure to policies that learn from
    /// outcomes.
    pub fn failure(self) {
        self.finish(false);
    }
}

/// What the response future does with the guard when the endpoint answers.
///
/// Implemented by [`OnResponse`] (release at once, any response type) and
/// [`OnBodyEnd`] (HTTP: keep it in the response body until the body ends).
pub trait Complete<R, S> {
    /// The response the service returns.
    type Output;

    /// Turns the endpoint's response into the service's, taking the guard.
    fn complete(&self, guard: Guard<S>, response: R) -> Self::Output;
}

/// Releases the slot as soon as the endpoint's response arrives (the
/// default). Right for unary RPCs whose response is complete when it
/// arrives; for streamed HTTP bodies see [`OnBodyEnd`].
#[derive(Debug, Clone, Copy, Default)]
pub struct OnResponse;

impl<R, S> Complete<R, S> for OnResponse {
    type Output = R;

    fn complete(&self, guard: Guard<S>, response: R) -> R {
        guard.success();
        response
    }
}

/// Keeps the slot until the HTTP response's body has ended (its last frame
/// read, an error, or the body dropped), as tower's `CompleteOnResponse`
/// counterpart for bodies does; the response also carries [`Served`] in its
/// extensions, which [`RetryNext`](crate::RetryNext) reads to retry a `5xx`
/// on the next candidate.
#[derive(Debug, Clone, Copy, Default)]
pub struct OnBodyEnd;

impl<B, S> Complete<http::Response<B>, S> for OnBodyEnd {
    type Output = http::Response<GuardedBody<B, S>>;

    fn complete(&self, guard: Guard<S>, response: http::Response<B>) -> Self::Output {
        let (mut parts, body) = response.into_parts();
        parts.extensions.insert(Served(guard.endpoint().clone()));
        http::Response::from_parts(parts, GuardedBody::new(body, guard))
    }
}

/// The endpoint that served an HTTP response, in the response's extensions
/// (with [`OnBodyEnd`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served(pub Endpoint);

pin_project! {
    /// An HTTP body that holds its request's in-flight slot until it ends:
    /// its last frame, an error, or being dropped.
    pub struct GuardedBody<B, S> {
        #[pin]
        inner: B,
        guard: Option<Guard<S>>,
    }
}

impl<B, S> GuardedBody<B, S> {
    /// `inner`, holding `guard` until it ends.
    pub fn new(inner: B, guard: Guard<S>) -> Self {
        GuardedBody {
            inner,
            guard: Some(guard),
        }
    }

    /// Whether the slot is still held.
    pub fn is_holding(&self) -> bool {
        self.guard.is_some()
    }
}

impl<B: fmt::Debug, S> fmt::Debug for GuardedBody<B, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GuardedBody")
            .field("inner", &self.inner)
            .field("guard", &self.guard)
            .finish()
    }
}

impl<B: Body, S> Body for GuardedBody<B, S> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let mut this = self.project();
        let frame = ready!(this.inner.as_mut().poll_frame(cx));
        match &frame {
            None => {
                if let Some(g) = this.guard.take() {
                    g.success();
                }
            }
            Some(Err(_)) => {
                if let Some(g) = this.guard.take() {
                    g.failure();
                }
            }
            Some(Ok(_)) => {
                if this.inner.is_end_stream() {
                    if let Some(g) = this.guard.take() {
                        g.success();
                    }
                }
            }
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
