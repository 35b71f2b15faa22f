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
//!
//! `load=peak_ewma` compares `estimate * (in_flight + 1) / weight` instead,
//! the estimate being each endpoint's peak-EWMA latency (`peak_ewma.rs`,
//! `decay=` default 10s, `default_rtt=` default 30ms) fed by
//! [`Pick::finish`](crate::Pick::finish); `load=in_flight` (the default) is
//! the comparison above.

use std::sync::Arc;
use std::time::Duration;

use crate::clock::nanos;
use crate::endpoint::Endpoint;
use crate::error::{BuildError, ParseError, ParseErrorKind, PickError};
use crate::inflight::pool::Pool;
use crate::policy::peak_ewma::{PeakEwma, PeakEwmaConfig};
use crate::policy::{
    check_pool, first_choice_then_rotation, none_eligible, Observer, Order, Picker, Policy,
};
use crate::request::Request;
use crate::util::duration::take_duration;
use crate::util::params::Params;
use crate::util::rng::{Rng, Seed};

/// The largest `choices=`.
const MAX_CHOICES: usize = 8;
/// This policy's generator stream (see [`Rng::new`]).
const STREAM: u64 = 3;

/// Parameters of `p2c`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct P2cParams {
    pub(crate) choices: u8,
    pub(crate) seed: Seed,
    /// `None`: in flight; `Some`: peak EWMA latency times in flight + 1.
    pub(crate) peak_ewma: Option<PeakEwmaConfig>,
}

impl P2cParams {
    pub(crate) fn parse(params: &mut Params<'_>) -> Result<Self, ParseError> {
        let choices = params.take_u64("choices", 2, MAX_CHOICES as u64, 2)? as u8;
        let seed = Seed::parse(params)?;
        let load = params.take_choice("load", &["in_flight", "peak_ewma"], "in_flight")?;
        let decay = take_duration(
            params,
            "decay",
            Duration::from_millis(1),
            Duration::from_secs(3600),
        )?;
        let default_rtt = take_duration(
            params,
            "default_rtt",
            Duration::from_millis(1),
            Duration::from_secs(60),
        )?;
        let peak_ewma = match load {
            "peak_ewma" => Some(PeakEwmaConfig {
                decay: decay.unwrap_or(PeakEwmaConfig::DEFAULT_DECAY),
                default_rtt: default_rtt.unwrap_or(PeakEwmaConfig::DEFAULT_RTT),
            }),
            _ => {
                if let Some(key) = [("decay", decay), ("default_rtt", default_rtt)]
                    .iter()
                    .find_map(|(k, v)| v.is_some().then_some(*k))
                {
                    return Err(ParseError::new(
                        ParseErrorKind::Conflict,
                        format!("{}: {key} applies to load=peak_ewma only", params.policy()),
                    )
                    .with_policy(params.policy())
                    .with_key(key)
                    .with_accepted("load=peak_ewma"));
                }
                None
            }
        };
        Ok(P2cParams {
            choices,
            seed,
            peak_ewma,
        })
    }
}

/// The `p2c` family: builds [`P2c`] pickers, and keeps a peak-EWMA estimate
/// per endpoint under `load=peak_ewma`.
#[derive(Debug)]
pub(crate) struct P2cPolicy(pub(crate) P2cParams);

impl Policy for P2cPolicy {
    fn name(&self) -> &str {
        "p2c"
    }

    fn build(&self, pool: Pool) -> Result<Arc<dyn Picker>, BuildError> {
        Ok(Arc::new(P2c::new(pool, self.0)?))
    }

    fn observer(&self, _endpoint: &Endpoint) -> Option<Arc<dyn Observer>> {
        let config = self.0.peak_ewma?;
        Some(Arc::new(PeakEwma::new(config)))
    }
}

/// Power of d choices (`p2c`).
#[derive(Debug)]
pub(crate) struct P2c {
    pool: Pool,
    choices: usize,
    rng: Rng,
    peak_ewma: bool,
}

impl P2c {
    pub(crate) fn new(pool: Pool, params: P2cParams) -> Result<Self, BuildError> {
        check_pool(&pool)?;
        Ok(P2c {
            pool,
            choices: usize::from(params.choices),
            rng: Rng::new(params.seed, STREAM),
            peak_ewma: params.peak_ewma.is_some(),
        })
    }

    /// Whether `a` would be less loaded than `b` relative to weight:
    /// `(load_a + 1) / w_a < (load_b + 1) / w_b`. Both weights are non-zero
    /// (eligible endpoints).
    ///
    /// Under `load=peak_ewma`, each load is multiplied by the endpoint's
    /// latency estimate at `now` (nanoseconds); an endpoint without one
    /// (never observed) counts as `default_rtt` would have it.
    #[inline]
    fn lighter(&self, a: usize, b: usize, now: u64) -> bool {
        let la = u128::from(self.pool.load(a)) + 1;
        let lb = u128::from(self.pool.load(b)) + 1;
        if self.peak_ewma {
            let cost = |i: usize, load: u128| {
                let rtt = self
                    .pool
                    .observer::<PeakEwma>(i)
                    .map_or(1.0, |e| e.estimate(now));
                rtt * load as f64
            };
            return cost(a, la) * f64::from(self.pool.weight(b))
                < cost(b, lb) * f64::from(self.pool.weight(a));
        }
        la * u128::from(self.pool.weight(b)) < lb * u128::from(self.pool.weight(a))
    }

    /// The time the estimates are read at: only peak EWMA reads a clock.
    #[inline]
    fn now(&self, req: &Request<'_>) -> u64 {
        if self.peak_ewma {
            nanos(req.now())
        } else {
            0
        }
    }

    #[cold]
    fn lightest_of_all(&self, req: &Request<'_>) -> Result<usize, PickError> {
        let now = self.now(req);
        let mut best: Option<usize> = None;
        for i in (0..self.pool.len()).filter(|&i| self.pool.eligible(i, req)) {
            if best.is_none_or(|b| self.lighter(i, b, now)) {
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
        let now = self.now(req);
        for _ in 0..4 * self.choices {
            let i = draws.below(n) as usize;
            if sampled[..count].contains(&i) || !self.pool.eligible(i, req) {
                continue;
            }
            sampled[count] = i;
            count += 1;
            if best == usize::MAX || self.lighter(i, best, now) {
                best = i;
            }
            if count == self.choices {
                return Ok(self.pool.take(best));
            }
        }
        self.lightest_of_all(req)
    }
}
