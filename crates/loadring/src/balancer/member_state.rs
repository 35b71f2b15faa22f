//! Every member's state at one instant, read in one pass (for dashboards
//! and status pages, which would otherwise look each member up by identity).

use crate::endpoint::Endpoint;
use crate::policy::lifecycle::LifecycleView;

/// One member of a balancer at one instant ([`Balancer::states`](crate::Balancer::states)).
#[derive(Debug, Clone, PartialEq)]
pub struct MemberState {
    /// The endpoint.
    pub endpoint: Endpoint,
    /// Requests in flight on it.
    pub in_flight: u64,
    /// Its health mark.
    pub healthy: bool,
    /// The cap the next bounded pick would apply to it; `None` for
    /// unbounded policies.
    pub cap: Option<u64>,
    /// Its ejection and slow start.
    pub lifecycle: LifecycleView,
}
