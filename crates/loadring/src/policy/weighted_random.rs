//! `wr`: weighted random, each endpoint chosen with probability `w / W`.
//!
//! The prefix sums of the weights are laid out once per membership; a pick
//! draws `r` in `0..W` and binary-searches the first prefix sum above it, so
//! an endpoint of weight `w` owns exactly `w` of the `W` values and weight 0
//! owns none. Sums are `u64`: `u32::MAX` weights on millions of endpoints do
//! not overflow.
//!
//! An ineligible endpoint is rejected and the draw repeated a few times,
//! which keeps the choice exactly proportional to weight among the eligible
//! endpoints; when most of the weight is ineligible, one pass sums the
//! eligible weights and draws among them directly (`O(n)`). `seed=N` makes
//! the sequence reproducible on a single thread.
//!
//! **Cost.** One draw and a binary search (`O(log n)`) per pick; the slow
//! path (most of the weight ineligible) is the `O(n)` pass above.

use std::sync::Arc;

use crate::error::{BuildError, PickError};
use crate::inflight::pool::Pool;
use crate::policy::{check_pool, first_choice_then_rotation, none_eligible, Order, Picker};
use crate::request::Request;
use crate::util::rng::{Rng, Seed};

/// Rejected draws before summing the eligible weights instead.
const DRAWS: usize = 4;
/// This policy's generator stream (see [`Rng::new`]).
const STREAM: u64 = 2;

/// Weighted random choice (`wr`).
#[derive(Debug)]
pub(crate) struct WeightedRandom {
    pool: Pool,
    /// `ends[i]`: the sum of the weights of endpoints `0..=i`.
    ends: Vec<u64>,
    rng: Rng,
}

impl WeightedRandom {
    pub(crate) fn new(pool: Pool, seed: Seed) -> Result<Self, BuildError> {
        check_pool(&pool)?;
        let ends = pool
            .endpoints()
            .iter()
            .scan(0u64, |sum, e| {
                *sum += u64::from(e.weight());
                Some(*sum)
            })
            .collect();
        Ok(WeightedRandom {
            pool,
            ends,
            rng: Rng::new(seed, STREAM),
        })
    }

    #[cold]
    fn sum_and_draw(&self, req: &Request<'_>) -> Result<usize, PickError> {
        let n = self.pool.len();
        let eligible: u64 = (0..n)
            .filter(|&i| self.pool.eligible(i, req))
            .map(|i| u64::from(self.pool.weight(i)))
            .sum();
        if eligible == 0 {
            return Err(none_eligible(&self.pool));
        }
        let mut r = self.rng.below(eligible);
        let mut last = None;
        for i in (0..n).filter(|&i| self.pool.eligible(i, req)) {
            let w = u64::from(self.pool.weight(i));
            if r < w {
                return Ok(self.pool.take(i));
            }
            r -= w;
            last = Some(i);
        }
        // Health changed between the two passes.
        match last {
            Some(i) => Ok(self.pool.take(i)),
            None => Err(none_eligible(&self.pool)),
        }
    }
}

impl Picker for WeightedRandom {
    fn pool(&self) -> &Pool {
        &self.pool
    }

    /// The endpoint `pick` would choose, then the others in pool order after it.
    fn candidates(self: Arc<Self>, req: &Request<'_>) -> Result<Order, PickError> {
        first_choice_then_rotation(&*self, req)
    }

    #[inline]
    fn pick(&self, req: &Request<'_>) -> Result<usize, PickError> {
        let total = self.pool.weight_sum();
        for _ in 0..DRAWS {
            let r = self.rng.below(total);
            let i = self.ends.partition_point(|&end| end <= r);
            if self.pool.eligible(i, req) {
                return Ok(self.pool.take(i));
            }
        }
        self.sum_and_draw(req)
    }
}
