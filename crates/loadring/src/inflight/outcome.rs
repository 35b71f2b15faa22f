//! How a request went, as the caller reports it to the policy that learns
//! from it.

use std::time::Duration;

use crate::inflight::fleet::LoadReport;

/// How a request went, reported with [`Pick::finish`](crate::Pick::finish).
///
/// ```
/// use std::time::Duration;
/// use loadring::Outcome;
///
/// let ok = Outcome::success(Duration::from_millis(12));
/// assert!(ok.is_success());
/// assert_eq!(ok.latency(), Duration::from_millis(12));
/// assert!(!Outcome::failure(Duration::ZERO).is_success());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    success: bool,
    latency: Duration,
    /// When the request completed, if the caller says (see [`Outcome::at`]).
    at: Option<Duration>,
    /// The backend's load report that came with the response.
    report: Option<LoadReport>,
}

impl Outcome {
    /// The request succeeded after `latency`.
    pub fn success(latency: Duration) -> Self {
        Outcome {
            success: true,
            latency,
            at: None,
            report: None,
        }
    }

    /// The request failed (an error, a timeout, a refused connection) after
    /// `latency`.
    pub fn failure(latency: Duration) -> Self {
        Outcome {
            success: false,
            latency,
            at: None,
            report: None,
        }
    }

    /// Whether the request succeeded.
    pub fn is_success(&self) -> bool {
        self.success
    }

    /// How long the request took.
    pub fn latency(&self) -> Duration {
        self.latency
    }

    /// The request completed at time `at`, on the same clock as the
    /// request's [`Request::at`](crate::Request::at) (virtual time in a
    /// simulation or a test). Without it, the process clock at
    /// [`Pick::finish`](crate::Pick::finish) is used.
    #[must_use]
    pub fn at(mut self, at: Duration) -> Self {
        self.at = Some(at);
        self
    }

    /// The backend's load report that came with the response: applied by
    /// [`Pick::finish`](crate::Pick::finish) as one event with the completion (the report was
    /// made as the response went out, so it already leaves this request
    /// out). See [`LoadReport`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use loadring::{Balancer, Endpoint, LoadReport, Outcome, Request};
    ///
    /// let balancer = Balancer::new("c_murmurhash_bl".parse()?, [Endpoint::new("e0")?])?;
    /// let pick = balancer.pick(&Request::key("k"))?;
    /// pick.finish(Outcome::success(Duration::from_millis(2)).with_report(LoadReport::new(7)));
    /// // 7 in service on e0 as e0 counts them, none of ours left.
    /// assert_eq!(balancer.reported_loads()[0].1, Some(7));
    /// # Ok::<(), loadring::Error>(())
    /// ```
    #[must_use]
    pub fn with_report(mut self, report: LoadReport) -> Self {
        self.report = Some(report);
        self
    }

    /// The load report given with [`Outcome::with_report`], if any.
    pub fn report(&self) -> Option<&LoadReport> {
        self.report.as_ref()
    }

    /// When the request completed: the time given with [`Outcome::at`],
    /// else the process clock now.
    pub fn completed_at(&self) -> Duration {
        self.at.unwrap_or_else(crate::clock::now)
    }
}
