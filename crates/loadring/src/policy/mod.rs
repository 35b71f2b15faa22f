//! The policy trait every load-balancing policy implements, one file per family.

use std::sync::Arc;

use crate::describe::Layout;
use crate::error::Result;
use crate::load::Member;
use crate::request::Request;

/// One built policy over one [`Pool`](crate::pool::Pool) of endpoints.
///
/// Built once per membership snapshot, then shared by every picking thread:
/// `pick` takes `&self`, never locks on the hot path and never allocates.
pub(crate) trait Policy: Send + Sync + std::fmt::Debug {
    /// Chooses an endpoint for `req` and reserves one in-flight slot on it.
    fn pick(&self, req: &Request<'_>) -> Result<&Arc<Member>>;

    /// The endpoint a hashing policy would choose with no load at all (the
    /// key's natural owner, skipping unhealthy and excluded endpoints), without
    /// reserving anything. `None` for policies that do not place by hash.
    fn natural(&self, _req: &Request<'_>) -> Option<Result<&Arc<Member>>> {
        None
    }

    /// The cap the next pick would apply to `member`, for bounded policies.
    fn cap(&self, _member: &Member) -> Option<u64> {
        None
    }

    /// How a hashing policy divides the hash space, for `describe`.
    fn layout(&self) -> Option<Layout> {
        None
    }
}
