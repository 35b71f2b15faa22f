//! The per-endpoint state a policy keeps to learn from outcomes.
//!
//! It sits below the policies and the members that hold it: a member keeps
//! its endpoint's observer and a pick's guard feeds it, whatever the policy.

use std::any::Any;
use std::fmt;

use crate::inflight::outcome::Outcome;
use crate::request::Request;

/// Per-endpoint state that learns from the outcome of each request (see
/// [`Policy::observer`](crate::policy::Policy::observer)).
pub trait Observer: Send + Sync + fmt::Debug + Any {
    /// Records the outcome of one request served by this endpoint.
    fn observe(&self, outcome: &Outcome);

    /// Whether the endpoint may take `req` now, as far as this state knows
    /// (an ejected outlier may not): [`Pool::eligible`](crate::policy::Pool::eligible) asks it after health.
    /// The default always admits.
    fn admits(&self, _req: &Request<'_>) -> bool {
        true
    }

    /// The state this one wraps, if any (the endpoint lifecycle wraps the
    /// state of the policy it runs): [`Pool::observer`](crate::policy::Pool::observer) looks through it.
    fn wrapped(&self) -> Option<&dyn Observer> {
        None
    }
}
