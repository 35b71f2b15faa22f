//! `p2c`: the power of d choices on the requests in flight.
//!
//! A pick samples `choices` distinct eligible endpoints uniformly at random
//! (Mitzenmacher's "power of two choices"; `choices=` 2..=8, default 2) and
//! takes the one with the lowest `(in_flight + 1) / weight`, i.e. the one
//! that would be least loaded relative to its weight after taking this
//! request. The ratios are compared by cross-multiplication in `u128`, so
//! there are no floats and no overflow whatever the weights (`u32::MAX`) and
//! loads. On equal ratios the endpoint sampled first wins, which makes the
//! choice among idle endpoints of equal weight uniform.
//!
//! Loads are the in-flight counters the [`Pick`](crate::Pick) guards hold,
//! read without synchronization: two concurrent picks may both see the same
//! endpoint as the lighter one, which the next picks correct.
//!
//! Sampling redraws ineligible and already-sampled endpoints, within a budget
//! of `4 * choices` draws. If the budget runs out (most endpoints ineligible,
//! or fewer eligible endpoints than `choices`), the pick compares every
//! eligible endpoint instead (`O(n)`) — exactly what distinct sampling gives
//! when there are no more eligible endpoints than choices. `seed=N` makes the
//! draws reproducible on a single thread.
//!
//! Cost: one atomic operation on the shared generator per pick (the samples
//! are drawn from a local stream it seeds), `choices` eligibility checks and
//! load reads; `O(choices)` whatever the number of endpoints.
//!
//! Slow path: when the sampling budget runs out, the `O(n)` comparison of
//! every eligible endpoint above.

use std::sync::Arc;

use crate::error::{BuildError, ParseError, PickError};
use crate::params::Params;
use crate::policy::{check_pool, first_choice_then_rotation, none_eligible, Order, Picker};
use crate::pool::Pool;
use crate::request::Request;
use crate::rng::{Rng, Seed};

/// The largest `choices=`.
const MAX_CHOICES: usize = 8;
/// This policy's generator stream (see [`Rng::new`]).
const STREAM: u64 = 3;

/// Parameters of `p2c`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct P2cParams {
    pub(crate) choices: u8,
    pub(crate) seed: Seed,
}

impl P2cParams {
    pub(crate) fn parse(params: &mut Params<'_>) -> Result<Self, ParseError> {
        let choices = params.take_u64("choices", 2, MAX_CHOICES as u64, 2)? as u8;
        let seed = Seed::parse(params)?;
        Ok(P2cParams { choices, seed })
    }
}

/// Power of d choices (`p2c`).
#[derive(Debug)]
pub(crate) struct P2c {
    pool: Pool,
    choices: usize,
    rng: Rng,
}

impl P2c {
    pub(crate) fn new(pool: Pool, params: P2cParams) -> Result<Self, BuildError> {
        check_pool(&pool)?;
        Ok(P2c {
            pool,
            choices: usize::from(params.choices),
            rng: Rng::new(params.seed, STREAM),
        })
    }

    /// Whether `a` would be less loaded than `b` relative to weight:
    /// `(load_a + 1) / w_a < (load_b + 1) / w_b`. Both weights are non-zero
    /// (eligible endpoints).
    #[inline]
    fn lighter(&self, a: usize, b: usize) -> bool {
        let la = u128::from(self.pool.load(a)) + 1;
        let lb = u128::from(self.pool.load(b)) + 1;
        la * u128::from(self.pool.weight(b)) < lb * u128::from(self.pool.weight(a))
    }

    #[cold]
    fn lightest_of_all(&self, req: &Request<'_>) -> Result<usize, PickError> {
        let mut best: Option<usize> = None;
        for i in (0..self.pool.len()).filter(|&i| self.pool.eligible(i, req)) {
            if best.is_none_or(|b| self.lighter(i, b)) {
                best = Some(i);
            }
        }
        match best {
            Some(i) => Ok(self.pool.take(i)),
            None => Err(none_eligible(&self.pool)),
        }
    }
}

impl Picker for P2c {
    fn pool(&self) -> &Pool {
        &self.pool
    }

    /// The endpoint `pick` would choose, then the others in pool order after it.
    fn candidates(self: Arc<Self>, req: &Request<'_>) -> Result<Order, PickError> {
        first_choice_then_rotation(&*self, req)
    }

    #[inline]
    fn pick(&self, req: &Request<'_>) -> Result<usize, PickError> {
        if self.pool.len() <= self.choices {
            // Distinct sampling would sample them all.
            return self.lightest_of_all(req);
        }
        let n = self.pool.len() as u64;
        let mut sampled = [usize::MAX; MAX_CHOICES];
        let mut count = 0;
        let mut best = usize::MAX;
        let mut draws = self.rng.draws();
        for _ in 0..4 * self.choices {
            let i = draws.below(n) as usize;
            if sampled[..count].contains(&i) || !self.pool.eligible(i, req) {
                continue;
            }
            sampled[count] = i;
            count += 1;
            if best == usize::MAX || self.lighter(i, best) {
                best = i;
            }
            if count == self.choices {
                return Ok(self.pool.take(best));
            }
        }
        self.lightest_of_all(req)
    }
}
