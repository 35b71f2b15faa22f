//! Time for the policies that learn from latency (`la`, `p2c:load=peak_ewma`)
//! and for the endpoint lifecycle (slow start, outlier ejection).
//!
//! The core reads no clock of its own choosing: a time is a [`Duration`]
//! since an arbitrary epoch, given by the caller on the request
//! ([`Request::at`](crate::Request::at)) and on the outcome
//! ([`Outcome::at`](crate::Outcome::at)). A simulator or a test passes its
//! virtual time there and gets the same picks on every run, with no sleeps.
//! Without a time, [`now`] is used: the monotonic clock measured from the
//! first time this process asked. Mixing the two in one balancer mixes two
//! epochs, so a caller gives times everywhere or nowhere.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The process's monotonic time since the first call: what a request or an
/// outcome without an explicit time is taken to happen at.
pub fn now() -> Duration {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed()
}

/// `time` in whole nanoseconds, saturating (584 years).
#[inline]
pub(crate) fn nanos(time: Duration) -> u64 {
    u64::try_from(time.as_nanos()).unwrap_or(u64::MAX)
}
