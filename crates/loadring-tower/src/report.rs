//! Endpoints' own load reports, read from their responses by a hook and
//! given to the balancer with each request's outcome.

use std::sync::Arc;

use loadring::orca::{self, OrcaError};
use loadring::LoadReport;

use crate::completion::{Complete, Guard};

/// A completion that first asks `hook` for the endpoint's load report in
/// the response, then completes as `inner` does; the guard gives the report
/// to the balancer when it is released. Made by
/// [`LoadRing::load_report`](crate::LoadRing::load_report).
#[derive(Debug, Clone)]
pub struct WithReport<C, H> {
    inner: C,
    hook: H,
}

impl<C, H> WithReport<C, H> {
    pub(crate) fn new(inner: C, hook: H) -> Self {
        WithReport { inner, hook }
    }
}

/// Reads an endpoint's load report from its response: any
/// `Fn(&R) -> Option<LoadReport>`, or [`OrcaReport`].
pub trait ReadReport<R> {
    /// The report in `response`, if it has one that can be read.
    fn read(&self, response: &R) -> Option<LoadReport>;
}

impl<R, F> ReadReport<R> for F
where
    F: Fn(&R) -> Option<LoadReport>,
{
    fn read(&self, response: &R) -> Option<LoadReport> {
        self(response)
    }
}

impl<R, S, C, H> Complete<R, S> for WithReport<C, H>
where
    C: Complete<R, S>,
    H: ReadReport<R>,
{
    type Output = C::Output;

    fn complete(&self, guard: Guard<S>, response: R) -> Self::Output {
        let report = self.hook.read(&response);
        self.inner.complete(guard.with_report(report), response)
    }
}

/// Reads ORCA's `endpoint-load-metrics` header (TEXT or JSON, see
/// [`loadring::orca`]) of HTTP responses for one named metric: the hook
/// [`orca_report`] makes.
#[derive(Debug, Clone)]
pub struct OrcaReport {
    metric: Arc<str>,
}

impl<B> ReadReport<http::Response<B>> for OrcaReport {
    fn read(&self, response: &http::Response<B>) -> Option<LoadReport> {
        let mut values = response.headers().get_all(orca::HEADER).iter();
        let value = values.next()?;
        if values.next().is_some() {
            // Two reports in one response: neither can be trusted.
            return None;
        }
        let count = orca::in_service(value.to_str().ok()?, &self.metric).ok()?;
        Some(LoadReport::new(count))
    }
}

/// A hook for [`LoadRing::load_report`](crate::LoadRing::load_report) that
/// reads ORCA's `endpoint-load-metrics` header (TEXT or JSON, see
/// [`loadring::orca`]) for the named metric `metric` (`in_flight`, or
/// `num_requests_running` for vLLM). A response without the header, or
/// with one that cannot be read, gives no report: the balancer keeps its own
/// count for that endpoint.
///
/// ```
/// use loadring_tower::ReadReport;
///
/// let hook = loadring_tower::orca_report("in_flight")?;
/// let response = http::Response::builder()
///     .header("endpoint-load-metrics", "TEXT named_metrics.in_flight=7")
///     .body(())?;
/// assert_eq!(hook.read(&response).map(|r| r.in_service()), Some(7));
/// let malformed = http::Response::builder()
///     .header("endpoint-load-metrics", "TEXT named_metrics.in_flight=-7")
///     .body(())?;
/// assert_eq!(hook.read(&malformed), None);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// `metric` is not a metric name ([`orca::check_metric`]).
pub fn orca_report(metric: &str) -> Result<OrcaReport, OrcaError> {
    orca::check_metric(metric)?;
    Ok(OrcaReport {
        metric: metric.into(),
    })
}
