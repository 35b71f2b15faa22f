//! Envoy's own bounded load: `ring_hash:hash_balance_factor=F` and
//! `maglev:hash_balance_factor=F` (Envoy's
//! `consistent_hashing_lb_config.hash_balance_factor`).
//!
//! It differs from loadring's cap (`load_factor=`, see [`LoadFactor`]) in
//! three ways, each Envoy's:
//!
//! 1. **Slots.** With `T` requests in flight on the pool (the one being
//!    placed excluded), `total = ceil((T + 1) * F / 100)` in integers, and
//!    endpoint `i` gets `slots_i = max(ceil(total * w_i), 1)` computed in
//!    `f64`, `w_i = weight_i / sum of weights`. An endpoint is *acceptable*
//!    while `in_flight_i <= slots_i`: it may end a pick with `slots_i + 1`.
//! 2. **Spills.** When the key's owner is not acceptable, the endpoints are
//!    visited in a pseudo-random order seeded by the request's hash, not
//!    along the ring: indices `0..n` in pool order, shuffled by Fisher-Yates
//!    with draws of `std::mt19937` seeded with the hash's low 32 bits, a draw
//!    in `[0, k)` being `next() / floor(2^32 / k)` redrawn while `>= k`. The
//!    first acceptable endpoint wins.
//! 3. **No failure for load.** When none is acceptable, the least overloaded
//!    (smallest `in_flight / slots`) wins: the owner first, a later endpoint
//!    only when strictly smaller.
//!
//! [`LoadFactor`]: crate::LoadFactor

use crate::echo::Echo;
use crate::error::{ParseError, ParseErrorKind, PickError};
use crate::inflight::fleet_view::FleetView;
use crate::policy::none_eligible;
use crate::request::Request;
use crate::util::mt19937::Mt19937;
use crate::util::whole::read_whole;

/// Envoy's least `hash_balance_factor` (its API: `gte: 100`).
pub(crate) const MIN_PERCENT: u32 = 100;
/// Our greatest: a factor of 1000, as `balance=`. Envoy has no upper bound
/// but computes `(T + 1) * F + 99` in 32 bits; with `F <= 100000` and fewer
/// than 2^36 requests in flight, `total` stays below 2^53, so every step
/// here is exact in `u64` and its `f64` views are Envoy's own values.
pub(crate) const MAX_PERCENT: u32 = 100_000;

/// Pools up to this size shuffle their indices on the stack.
const STACK_INDICES: usize = 128;

/// `hash_balance_factor=F`: an integer percent in `100..=100000`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HashBalance {
    percent: u32,
}

impl HashBalance {
    /// Parses the value of `hash_balance_factor=` of policy `policy`.
    pub(crate) fn parse(policy: &str, text: &str) -> Result<Self, ParseError> {
        let key = "hash_balance_factor";
        let accepted = format!("an integer percent from {MIN_PERCENT} to {MAX_PERCENT}");
        let bad = || {
            ParseError::new(
                ParseErrorKind::Value,
                format!(
                    "{policy}: {key}={}: expected {accepted} (Envoy's hash_balance_factor), \
                 e.g. {key}=150",
                    Echo(text)
                ),
            )
            .with_policy(policy)
            .with_key(key)
            .with_value(text)
            .with_accepted(accepted.clone())
        };
        let percent =
            read_whole(text, MIN_PERCENT.into(), MAX_PERCENT.into()).map_err(|_| bad())?;
        Ok(HashBalance {
            percent: percent as u32,
        })
    }

    /// The percent `F`.
    pub(crate) fn percent(self) -> u32 {
        self.percent
    }

    /// Envoy's `total_slots`: `ceil((in_flight + 1) * F / 100)`.
    #[inline]
    pub(crate) fn total_slots(self, in_flight: u64) -> u64 {
        let top = (u128::from(in_flight) + 1) * u128::from(self.percent);
        u64::try_from(top.div_ceil(100)).unwrap_or(u64::MAX)
    }

    /// The slots of an endpoint of weight `weight` among members of total
    /// weight `weight_sum` holding `in_flight` requests: Envoy's
    /// `max(ceil(total_slots * w), 1)`, in `f64` as Envoy computes it.
    #[inline]
    pub(crate) fn slots(self, in_flight: u64, weight: u32, weight_sum: u64) -> u64 {
        if weight_sum == 0 {
            return 1;
        }
        let w = f64::from(weight) / weight_sum as f64;
        let slots = (self.total_slots(in_flight) as f64 * w).ceil();
        // `as` saturates; the slots of a weight-0 endpoint are 0 before the max.
        (slots as u64).max(1)
    }

    /// The cap a bounded pick enforces, in loadring's sense (the most in
    /// flight a pick leaves on the endpoint): Envoy admits while
    /// `in_flight <= slots`, so `slots + 1`.
    #[inline]
    pub(crate) fn cap(self, in_flight: u64, weight: u32, weight_sum: u64) -> u64 {
        self.slots(in_flight, weight, weight_sum).saturating_add(1)
    }

    /// The pick: `owner` (the key's owner, `None` if no endpoint with an
    /// entry is eligible) if acceptable, else the first acceptable endpoint
    /// of the visiting order of `code`, else the least overloaded. Each
    /// acceptable endpoint is reserved by compare-and-swap against its
    /// slots (see [`Pool::try_reserve`]), so concurrent picks never take an
    /// endpoint past `slots + 1` for the total they read; the least
    /// overloaded is reserved whatever its load.
    pub(crate) fn pick(
        self,
        view: &FleetView<'_>,
        owner: Option<usize>,
        code: u64,
        req: &Request<'_>,
    ) -> Result<usize, PickError> {
        let pool = view.pool();
        let total = view.total_load();
        let weight_sum = pool.weight_sum();
        let slots = |i: usize| self.slots(total, pool.weight(i), weight_sum);
        // (index, in flight, slots) of the least overloaded so far.
        let mut least: Option<(usize, u64, u64)> = None;
        if let Some(owner) = owner {
            let s = slots(owner);
            if view.try_reserve(owner, s.saturating_add(1)) {
                return Ok(owner);
            }
            least = Some((owner, view.load(owner), s));
        }
        let mut buffer = Indices::new(pool.len());
        for i in VisitOrder::new(code, buffer.as_mut()) {
            if Some(i) == owner || !pool.eligible(i, req) {
                continue;
            }
            let s = slots(i);
            if view.try_reserve(i, s.saturating_add(1)) {
                return Ok(i);
            }
            let load = view.load(i);
            // load / s < least's, exactly (Envoy compares the f64 quotients,
            // which order alike).
            let lighter = least.is_none_or(|(_, l, ls)| {
                u128::from(load) * u128::from(ls) < u128::from(l) * u128::from(s)
            });
            if lighter {
                least = Some((i, load, s));
            }
        }
        match least {
            Some((i, _, _)) => {
                pool.reserve(i);
                Ok(i)
            }
            None => Err(none_eligible(pool)),
        }
    }
}

/// The pool indices a visiting order shuffles: on the stack for pools of
/// up to [`STACK_INDICES`] endpoints.
// Large on purpose: a spill of a small pool allocates nothing.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Indices {
    Stack([u32; STACK_INDICES], usize),
    Heap(Vec<u32>),
}

impl Indices {
    /// `0..n`.
    pub(crate) fn new(n: usize) -> Self {
        if n <= STACK_INDICES {
            let mut a = [0u32; STACK_INDICES];
            for (i, slot) in a.iter_mut().enumerate().take(n) {
                *slot = i as u32;
            }
            Indices::Stack(a, n)
        } else {
            Indices::Heap((0..n as u32).collect())
        }
    }

    pub(crate) fn as_mut(&mut self) -> &mut [u32] {
        match self {
            Indices::Stack(a, n) => &mut a[..*n],
            Indices::Heap(v) => v,
        }
    }
}

/// Envoy's visiting order of a spill: the indices handed in (`0..n`),
/// shuffled by Fisher-Yates one position at a time as they are visited.
pub(crate) struct VisitOrder<'a> {
    mt: Mt19937,
    index: &'a mut [u32],
    i: usize,
}

impl<'a> VisitOrder<'a> {
    /// The order of the request hash `code` over `index` (`0..n`).
    pub(crate) fn new(code: u64, index: &'a mut [u32]) -> Self {
        VisitOrder {
            // `std::mt19937(uint64_t)` keeps the seed modulo 2^32.
            mt: Mt19937::new(code as u32),
            index,
            i: 0,
        }
    }

    /// A draw in `[0, k)`, Envoy's way (`k >= 1`).
    fn below(&mut self, k: u64) -> u64 {
        let step = (1u64 << 32) / k;
        loop {
            let x = u64::from(self.mt.next_u32()) / step;
            if x < k {
                return x;
            }
        }
    }
}

impl Iterator for VisitOrder<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        let n = self.index.len();
        if self.i >= n {
            return None;
        }
        let i = self.i;
        let j = self.below((n - i) as u64) as usize;
        self.index.swap(i, i + j);
        self.i += 1;
        Some(self.index[i] as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::test_pool;

    fn f(text: &str) -> HashBalance {
        HashBalance::parse("ring_hash", text).unwrap()
    }

    #[test]
    fn slots_round_as_envoy() {
        // T = 2, F = 125: total = ceil(3 * 1.25) = 4; equal thirds: ceil(4/3) = 2.
        assert_eq!(f("125").total_slots(2), 4);
        assert_eq!(f("125").slots(2, 1, 3), 2);
        // T = 0, F = 100: total 1, a quarter of it rounds up to 1.
        assert_eq!(f("100").slots(0, 1, 4), 1);
        // T = 9, F = 150: total 15; weights 3 of 12: ceil(3.75) = 4.
        assert_eq!(f("150").slots(9, 3, 12), 4);
        assert_eq!(f("150").cap(9, 3, 12), 5, "admitted while in flight <= 4");
        // Weight 0 still has one slot (Envoy's max(..., 1)).
        assert_eq!(f("150").slots(9, 0, 12), 1);
        // No overflow at the extremes.
        let top = f("100000");
        assert_eq!(top.total_slots(u64::MAX), u64::MAX);
        assert_eq!(top.cap(u64::MAX, 1, 1), u64::MAX);
    }

    /// The f64 steps are Envoy's, not exact arithmetic: 9/14 in f64 times 42
    /// is 27.000000000000004, so Envoy (and we) give 28 slots where the
    /// exact product is 27. (Computed with Python's floats, IEEE doubles.)
    #[test]
    fn the_f64_products_are_envoys() {
        assert_eq!(f("100").total_slots(41), 42);
        assert_eq!(f("100").slots(41, 9, 14), 28);
        assert_eq!(
            f("100").slots(84, 3, 17),
            16,
            "85 * (3/17) = 15.000000000000002"
        );
        assert_eq!(f("100").slots(9, 1, 10), 1, "10 * 0.1 is exactly 1");
    }

    #[test]
    fn bad_values_name_the_key_and_the_range() {
        for bad in ["99", "1.5", "abc", "", "-150", "100001", "+150", "12345678"] {
            let err = HashBalance::parse("maglev", bad).unwrap_err().to_string();
            assert_eq!(
                err,
                format!(
                    "maglev: hash_balance_factor={bad}: expected an integer percent from 100 \
                     to 100000 (Envoy's hash_balance_factor), e.g. hash_balance_factor=150"
                )
            );
        }
        assert_eq!(f("100").percent(), 100);
        assert_eq!(f("100000").percent(), 100_000);
        assert_eq!(f("0000150").percent(), 150);
    }

    /// The order by hand: seed 5489's first outputs are 3499211612,
    /// 581869302, 3890346734 (see `util/mt19937.rs`). Four hosts: k = 4, step
    /// 2^30: 3499211612 / 2^30 = 3 (swap 0 and 3); k = 3, step 1431655765:
    /// 581869302 / step = 0; k = 2, step 2^31: 3890346734 / 2^31 = 1 (swap
    /// 2 and 3); k = 1: 0.
    #[test]
    fn the_visiting_order_of_a_known_seed() {
        let mut index = [0, 1, 2, 3];
        let order: Vec<usize> = VisitOrder::new(5489, &mut index).collect();
        assert_eq!(order, [3, 1, 0, 2]);
        // Only the low 32 bits seed.
        let mut index = [0, 1, 2, 3];
        let high: Vec<usize> = VisitOrder::new((7 << 32) | 5489, &mut index).collect();
        assert_eq!(high, order);
    }

    /// A draw at or above `k * floor(2^32 / k)` is drawn again: with k = 3
    /// the step is 1431655765 and 4294967295 / step = 3.
    #[test]
    fn draws_past_the_last_whole_step_are_redrawn() {
        let mut index = [0u32; 3];
        let mut order = VisitOrder::new(0, &mut index);
        // Seed 0's first output is 2357136044: 2357136044 / 1431655765 = 1.
        assert_eq!(order.below(3), 1);
        let step = (1u64 << 32) / 3;
        assert_eq!(u64::from(u32::MAX) / step, 3, "such draws exist");
        // Every draw lands in range whatever k.
        for k in 1..=40 {
            assert!(order.below(k) < k);
        }
    }

    /// Nobody is acceptable only when requests sit on endpoints the pick
    /// cannot take (unhealthy here; in Envoy, hosts outside the healthy set
    /// still count in the cluster's active requests). Four equal endpoints,
    /// F = 100, loads 10, 9, 9 and 1 on the unhealthy e3: T = 29, total 30,
    /// slots 8 each, so none of e0..e2 is acceptable.
    #[test]
    fn with_nobody_acceptable_the_least_overloaded_wins_owner_first() {
        let pool = test_pool(&[1, 1, 1, 1]);
        for (i, n) in [(0, 10), (1, 9), (2, 9), (3, 1)] {
            (0..n).for_each(|_| pool.reserve(i));
        }
        pool.member(3).set_healthy(false);
        let req = Request::new();
        let rule = f("100");
        assert_eq!(rule.slots(29, 1, 4), 8);
        // Seed 5489 visits 3, 1, 0, 2 (see above): e1 first, and e2's equal
        // factor is not strictly smaller.
        assert_eq!(
            rule.pick(&FleetView::new(&pool, None), Some(0), 5489, &req),
            Ok(1)
        );
        pool.release(1);
        // Seed 0 visits 2, 0, 3, 1 (outputs 2357136044, 2546248239,
        // 3071714933: draws 2, 1, 1): e2 first.
        assert_eq!(
            rule.pick(&FleetView::new(&pool, None), Some(0), 0, &req),
            Ok(2)
        );
        pool.release(2);
        // An owner as light as the lightest keeps the request.
        assert_eq!(
            rule.pick(&FleetView::new(&pool, None), Some(1), 0, &req),
            Ok(1)
        );
        pool.release(1);
        // Without an eligible owner, the visit alone decides.
        assert_eq!(
            rule.pick(&FleetView::new(&pool, None), None, 5489, &req),
            Ok(1)
        );
        pool.release(1);
        let loads: Vec<u64> = (0..4).map(|i| pool.load(i)).collect();
        assert_eq!(loads, [10, 9, 9, 1], "every pick above reserved once");
        for i in 0..3 {
            pool.member(i).set_healthy(false);
        }
        assert!(
            rule.pick(&FleetView::new(&pool, None), None, 5489, &req)
                .is_err(),
            "none eligible"
        );
    }

    #[test]
    fn indices_spill_to_the_heap_past_the_stack() {
        for n in [0, 1, STACK_INDICES, STACK_INDICES + 1] {
            let mut indices = Indices::new(n);
            let want: Vec<u32> = (0..n as u32).collect();
            assert_eq!(indices.as_mut(), &want[..]);
            let mut seen: Vec<usize> = VisitOrder::new(99, indices.as_mut()).collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..n).collect::<Vec<_>>(), "a permutation");
        }
    }
}
