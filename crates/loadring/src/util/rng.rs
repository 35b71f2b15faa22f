//! A lock-free, seedable random generator for the randomized policies.
//!
//! SplitMix64 (Steele, Lea, Flood): the state is a counter advanced by the
//! odd "golden gamma" and each output is the counter's value passed through
//! a bijective mixer. The library thereby needs no `rand` dependency;
//! SplitMix64 passes BigCrush, which is far more than a load balancer's coin
//! flips ask for.
//!
//! Unseeded (the default), each thread draws from its own counter, a plain
//! thread-local: picks on different threads share no cache line. A `seed=`
//! asks for a replay, which needs one stream: the counter is then shared and
//! advanced by one `fetch_add` per draw (lock-free, but a cache line every
//! picking thread writes), and a given seed replays the same numbers on a
//! single thread.

use std::cell::Cell;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::error::ParseError;
use crate::util::params::Params;

/// The SplitMix64 increment: odd, so the counter visits all 2^64 states.
const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// A policy's `seed=` parameter: `None` draws a fresh seed at every build.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Seed(pub(crate) Option<u64>);

impl Seed {
    /// Parses `seed=N` (any `u64`).
    pub(crate) fn parse(params: &mut Params<'_>) -> Result<Self, ParseError> {
        Ok(Seed(params.take_opt_u64("seed", 0, u64::MAX)?))
    }
}

/// A SplitMix64 stream: per thread, or shared when seeded.
#[derive(Debug)]
pub(crate) struct Rng {
    /// The shared counter of a seeded stream; `None`: the thread's own.
    shared: Option<AtomicU64>,
}

thread_local! {
    /// The counter of this thread's unseeded stream, seeded at its first use.
    static THREAD_STATE: Cell<u64> = Cell::new(fresh_seed());
}

impl Rng {
    /// A generator seeded by `seed`, or from the process's hash randomness
    /// when there is none (no I/O, different at every build).
    ///
    /// `stream` separates generators built from the same seed (say
    /// `local_first:seed=1 over random:seed=1`): their counters start at
    /// unrelated points, instead of producing the same numbers in lock-step.
    pub(crate) fn new(seed: Seed, stream: u64) -> Self {
        Rng {
            shared: seed.0.map(|seed| AtomicU64::new(mix(seed ^ mix(stream)))),
        }
    }

    /// The next 64 random bits.
    #[inline]
    pub(crate) fn next_u64(&self) -> u64 {
        let state = match &self.shared {
            Some(shared) => shared.fetch_add(GAMMA, Relaxed).wrapping_add(GAMMA),
            None => THREAD_STATE.with(|state| {
                let next = state.get().wrapping_add(GAMMA);
                state.set(next);
                next
            }),
        };
        mix(state)
    }

    /// A local SplitMix64 stream starting from the next shared output: the
    /// numbers of one pick, drawn without further atomic operations.
    #[inline]
    pub(crate) fn draws(&self) -> Draws {
        Draws {
            state: self.next_u64(),
        }
    }

    /// A number in `0..n` (`n > 0`), by Lemire's multiply-shift: one
    /// multiplication, no division. Its bias is below `n / 2^64` (under
    /// 10^-9 for any pool of endpoints or total weight below 2^34).
    #[inline]
    pub(crate) fn below(&self, n: u64) -> u64 {
        debug_assert!(n > 0);
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// Numbers drawn locally from one shared draw, for picks that need several:
/// one atomic operation per pick instead of one per number.
#[derive(Debug)]
pub(crate) struct Draws {
    state: u64,
}

impl Draws {
    /// A number in `0..n` (`n > 0`), as [`Rng::below`].
    #[inline]
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        self.state = self.state.wrapping_add(GAMMA);
        ((u128::from(mix(self.state)) * u128::from(n)) >> 64) as u64
    }
}

/// SplitMix64's output function (Stafford's "Mix13").
#[inline]
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// 64 bits from std's per-process random SipHash keys: `RandomState::new`
/// also changes its keys at every call, so two builds differ.
fn fresh_seed() -> u64 {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(GAMMA);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_matches_the_reference_outputs() {
        // The first outputs of the reference SplitMix64 seeded with 1234567
        // (Vigna's splitmix64.c; also the test vector of many ports).
        let rng = Rng {
            shared: Some(AtomicU64::new(1_234_567)),
        };
        let got: Vec<u64> = (0..3).map(|_| rng.next_u64()).collect();
        assert_eq!(
            got,
            [
                6_457_827_717_110_365_317,
                3_203_168_211_198_807_973,
                9_817_491_932_198_370_423
            ]
        );
    }

    #[test]
    fn a_seed_replays_and_streams_differ() {
        let a = Rng::new(Seed(Some(7)), 1);
        let b = Rng::new(Seed(Some(7)), 1);
        let c = Rng::new(Seed(Some(7)), 2);
        let xs: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        let zs: Vec<u64> = (0..8).map(|_| c.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs, zs);
        let fresh1 = Rng::new(Seed(None), 1).next_u64();
        let fresh2 = Rng::new(Seed(None), 1).next_u64();
        assert_ne!(fresh1, fresh2, "unseeded generators differ");
    }

    /// Unseeded, threads draw from streams of their own (no shared counter),
    /// seeded apart: two threads do not see the same numbers, as they would
    /// if every thread's stream started from one seed.
    #[test]
    fn unseeded_threads_draw_their_own_streams() {
        let rng = Rng::new(Seed(None), 0);
        assert!(rng.shared.is_none(), "no shared counter");
        let draws = |rng: &Rng| (0..64).map(|_| rng.next_u64()).collect::<Vec<_>>();
        let (a, b) = std::thread::scope(|s| {
            let a = s.spawn(|| draws(&rng));
            let b = s.spawn(|| draws(&rng));
            (a.join().unwrap(), b.join().unwrap())
        });
        let a: std::collections::HashSet<u64> = a.into_iter().collect();
        assert!(b.iter().all(|x| !a.contains(x)), "the streams overlap");
        // Each thread's own stream is SplitMix64: consecutive states differ by
        // the gamma, so outputs never repeat within a thread.
        assert_eq!(a.len(), 64);
    }

    #[test]
    fn local_draws_replay_and_stay_in_range() {
        let (a, b) = (Rng::new(Seed(Some(5)), 0), Rng::new(Seed(Some(5)), 0));
        let (mut x, mut y) = (a.draws(), b.draws());
        for n in 1..200u64 {
            let v = x.below(n);
            assert!(v < n);
            assert_eq!(v, y.below(n));
        }
        assert_ne!(
            a.draws().below(1 << 40),
            Rng::new(Seed(Some(6)), 0).draws().below(1 << 40)
        );
    }

    #[test]
    fn below_stays_in_range() {
        let rng = Rng::new(Seed(Some(3)), 0);
        for n in [1u64, 2, 3, 7, 1 << 40, u64::MAX] {
            for _ in 0..1000 {
                assert!(rng.below(n) < n);
            }
        }
        assert_eq!(rng.below(1), 0);
    }
}
