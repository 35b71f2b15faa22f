//! `rr`: round robin over the endpoints in the order given.
//!
//! One atomic counter: pick `c` is endpoint `c mod n`, so the first pick is
//! the first endpoint and any `n` consecutive picks visit every endpoint once.
//! Weights are ignored except that weight 0 is never picked (use `wrr` or
//! `swrr` to honour weights).
//!
//! An ineligible endpoint (unhealthy, excluded by the request, or of weight
//! 0) is skipped: the pick goes to the next eligible endpoint in order, and
//! the counter is advanced past it, so that the next pick continues after
//! the endpoint actually chosen. With `m` eligible endpoints, any `m`
//! consecutive picks of one thread then visit each of them once (brpc's and
//! nginx's round robin behave the same way). Under concurrent picks the
//! advance is approximate (an endpoint may be chosen twice in a row around a
//! skip) but never picks an ineligible endpoint.
//!
//! Cost: one `fetch_add` and one division when the endpoint is eligible;
//! `O(n)` only while skipping. The counter belongs to the membership
//! snapshot: after an update that changes the endpoints, picks start again
//! from the first endpoint (as do `wrr`'s and `swrr`'s sequences, and the
//! random policies' seeded streams).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use crate::error::{BuildError, PickError};
use crate::inflight::pool::Pool;
use crate::policy::{check_pool, first_choice_then_rotation, none_eligible, Order, Picker};
use crate::request::Request;

/// Round robin (`rr`).
#[derive(Debug)]
pub(crate) struct RoundRobin {
    pool: Pool,
    /// Picks made so far, plus the positions skipped.
    next: AtomicU64,
}

impl RoundRobin {
    pub(crate) fn new(pool: Pool) -> Result<Self, BuildError> {
        check_pool(&pool)?;
        Ok(RoundRobin {
            pool,
            next: AtomicU64::new(0),
        })
    }

    #[cold]
    fn skip(&self, i: usize, req: &Request<'_>) -> Result<usize, PickError> {
        let n = self.pool.len();
        let mut j = i;
        for step in 1..n {
            j += 1;
            if j == n {
                j = 0;
            }
            if self.pool.eligible(j, req) {
                self.next.fetch_add(step as u64, Relaxed);
                return Ok(self.pool.take(j));
            }
        }
        Err(none_eligible(&self.pool))
    }
}

impl Picker for RoundRobin {
    fn pool(&self) -> &Pool {
        &self.pool
    }

    /// The endpoint `pick` would choose, then the others in pool order after it.
    fn candidates(self: Arc<Self>, req: &Request<'_>) -> Result<Order, PickError> {
        first_choice_then_rotation(&*self, req)
    }

    #[inline]
    fn pick(&self, req: &Request<'_>) -> Result<usize, PickError> {
        let c = self.next.fetch_add(1, Relaxed);
        let i = (c % self.pool.len() as u64) as usize;
        if self.pool.eligible(i, req) {
            Ok(self.pool.take(i))
        } else {
            self.skip(i, req)
        }
    }
}
