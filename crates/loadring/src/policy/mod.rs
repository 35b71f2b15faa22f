//! The policy trait every load-balancing policy implements, one file per family.

use std::sync::Arc;

use crate::describe::Layout;
use crate::error::{Error, Result};
use crate::load::Member;
use crate::pool::Pool;
use crate::request::Request;

pub(crate) mod locality;
pub(crate) mod p2c;
pub(crate) mod random;
pub(crate) mod round_robin;
pub(crate) mod smooth_weighted_round_robin;
pub(crate) mod weighted_random;
pub(crate) mod weighted_round_robin;

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

/// The checks every policy makes on the pool it is built over: some
/// endpoint, and some endpoint that can ever be picked.
pub(crate) fn check_pool(pool: &Pool) -> Result<()> {
    if pool.is_empty() {
        Err(Error::NoEndpoints)
    } else if pool.weight_sum() == 0 {
        Err(Error::AllWeightsZero)
    } else {
        Ok(())
    }
}

/// The error of a pick that found every endpoint of `pool` ineligible.
#[cold]
pub(crate) fn none_eligible(pool: &Pool) -> Error {
    Error::NoEligibleEndpoint {
        members: pool.len(),
    }
}

/// Each endpoint's weight divided by the gcd of all weights (LVS's step):
/// the round robins' sequences depend only on these, and their periods are
/// as short as they can be. Weight 0 stays 0.
pub(crate) fn weight_units(pool: &Pool) -> Vec<u64> {
    fn gcd(mut a: u64, mut b: u64) -> u64 {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    }
    let weights = pool.endpoints().iter().map(|e| u64::from(e.weight()));
    let step = weights.clone().fold(0, gcd).max(1);
    weights.map(|w| w / step).collect()
}

/// A whole pool of endpoints `e0, e1, ...` with the given weights.
#[cfg(test)]
pub(crate) fn test_pool(weights: &[u32]) -> Pool {
    use crate::endpoint::Endpoint;
    use std::sync::atomic::AtomicI64;

    let total = Arc::new(AtomicI64::new(0));
    let endpoints: Vec<Endpoint> = weights
        .iter()
        .enumerate()
        .map(|(i, &w)| Endpoint::new(format!("e{i}")).unwrap().with_weight(w))
        .collect();
    let members = endpoints
        .iter()
        .map(|e| Arc::new(Member::new(e, total.clone())))
        .collect();
    Pool::new(endpoints, members, true, total)
}

/// Picks `count` times with guards released at once; the pool indices.
#[cfg(test)]
pub(crate) fn test_picks(policy: &dyn Policy, pool: &Pool, count: usize) -> Vec<usize> {
    (0..count)
        .map(|_| {
            let m = policy.pick(&Request::new()).unwrap();
            let i = (0..pool.len())
                .find(|&i| Arc::ptr_eq(pool.member(i), m))
                .unwrap();
            drop(crate::load::Pick::new(m.clone()));
            i
        })
        .collect()
}
