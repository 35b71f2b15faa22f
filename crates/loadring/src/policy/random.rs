//! `random`: every eligible endpoint equally likely.
//!
//! A draw lands on an endpoint uniformly; an ineligible one (unhealthy,
//! excluded, weight 0) is rejected and the draw repeated a few times, which
//! keeps the choice exactly uniform over the eligible endpoints. When most
//! endpoints are ineligible the draws give up and one pass counts the
//! eligible endpoints and draws among them directly: still uniform, `O(n)`.
//! Weights are ignored except that weight 0 is never picked (use `wr` for
//! weights). `seed=N` makes the sequence reproducible on a single thread.
//!
//! **Cost.** One draw and one eligibility check per pick; the slow path
//! (most endpoints ineligible) is the `O(n)` pass above.

use std::sync::Arc;

use crate::error::{BuildError, PickError};
use crate::inflight::pool::Pool;
use crate::policy::{check_pool, first_choice_then_rotation, none_eligible, Order, Picker};
use crate::request::Request;
use crate::util::rng::{Rng, Seed};

/// Rejected draws before counting the eligible endpoints instead.
const DRAWS: usize = 4;
/// This policy's generator stream (see [`Rng::new`]).
const STREAM: u64 = 1;

/// Uniform random choice (`random`).
#[derive(Debug)]
pub(crate) struct Random {
    pool: Pool,
    rng: Rng,
}

impl Random {
    pub(crate) fn new(pool: Pool, seed: Seed) -> Result<Self, BuildError> {
        check_pool(&pool)?;
        Ok(Random {
            pool,
            rng: Rng::new(seed, STREAM),
        })
    }

    #[cold]
    fn count_and_draw(&self, req: &Request<'_>) -> Result<usize, PickError> {
        let eligible = self.pool.eligible_count(req);
        if eligible == 0 {
            return Err(none_eligible(&self.pool));
        }
        let mut r = self.rng.below(eligible as u64) as usize;
        for i in 0..self.pool.len() {
            if self.pool.eligible(i, req) {
                if r == 0 {
                    return Ok(self.pool.take(i));
                }
                r -= 1;
            }
        }
        // Health changed between the two passes: take any eligible one.
        match (0..self.pool.len()).find(|&i| self.pool.eligible(i, req)) {
            Some(i) => Ok(self.pool.take(i)),
            None => Err(none_eligible(&self.pool)),
        }
    }
}

impl Picker for Random {
    fn pool(&self) -> &Pool {
        &self.pool
    }

    /// The endpoint `pick` would choose, then the others in pool order after it.
    fn candidates(self: Arc<Self>, req: &Request<'_>) -> Result<Order, PickError> {
        first_choice_then_rotation(&*self, req)
    }

    #[inline]
    fn pick(&self, req: &Request<'_>) -> Result<usize, PickError> {
        let n = self.pool.len() as u64;
        for _ in 0..DRAWS {
            let i = self.rng.below(n) as usize;
            if self.pool.eligible(i, req) {
                return Ok(self.pool.take(i));
            }
        }
        self.count_and_draw(req)
    }
}
