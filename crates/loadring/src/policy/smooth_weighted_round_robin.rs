//! `swrr`: nginx's smooth weighted round robin.
//!
//! nginx (`ngx_http_upstream_get_peer`) keeps a current weight per endpoint;
//! each pick adds every endpoint's weight to its current weight, takes the
//! endpoint with the largest current weight (the first on ties) and subtracts
//! the total weight from it. Weights 5, 1, 1 (a, b, c) give
//! `a a b a c a a`, then the same again: heavy endpoints are spread out
//! instead of picked in bursts (compare `wrr`'s `a a a a a b c`).
//!
//! The sequence depends on the whole history (it is not a simple function of
//! the pick number), so it cannot be computed directly like `wrr`'s. Its
//! period is the sum of the weights divided by their gcd:
//!
//! * equal weights (weight 0 aside) make nginx's sequence plain round robin:
//!   every endpoint of weight >= 1 once, in pool order, again and again
//!   (ties go to the first endpoint, and each pick puts the winner last).
//!   Those pools run `rr`'s rule, one `fetch_add` a pick whatever their size,
//!   without building or storing a period;
//! * up to [`TABLE_LIMIT`] picks ([`SUBSET_TABLE_LIMIT`] per endpoint for one
//!   zone of a locality policy; and `period * n` at most
//!   [`TABLE_WORK_LIMIT`], the cost of computing it) one period is computed at
//!   build and a pick is one `fetch_add` on a counter plus a table read,
//!   without a lock;
//! * beyond that (weights too large or too varied) nginx's algorithm runs
//!   as is, `O(n)` per pick, on state behind a mutex: the only lock taken by
//!   any pick in this crate, and unavoidable here because each pick needs the
//!   complete result of the previous one. At 100,000 endpoints that is
//!   about 2 ms a pick, and every pick waits for the one before.
//!
//! **Ineligible endpoints** (unhealthy, excluded, weight 0). With a table,
//! the pick is the next eligible element of the sequence and the counter is
//! advanced to it, so that the next pick continues after it: one thread sees
//! the period's sequence with the ineligible endpoints left out. A short
//! forward scan finds it in the common case, else one `O(n log period)` pass
//! over each endpoint's positions. Without a table, nginx's own rule: an
//! ineligible endpoint sits the pick out (neither gains weight nor counts in
//! the total). Both keep the eligible endpoints' shares proportional to their
//! weights. Round robin (equal weights) skips the same way: an ineligible
//! endpoint's turn goes to the next eligible one in pool order, `O(n)` in
//! the worst case (one eligible endpoint among many).
//!
//! **Cost.** Build: `O(n)` for equal weights, `O(period * n)` (at most
//! [`TABLE_WORK_LIMIT`] steps) with a table. Pick: `O(1)` without a lock
//! for equal weights and with a table, plus the skip above when endpoints
//! are ineligible; otherwise (the slow path) `O(n)` under a mutex, so picks
//! of all threads are serialized.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use crate::error::{BuildError, PickError};
use crate::inflight::pool::Pool;
use crate::policy::{
    check_pool, first_choice_then_rotation, none_eligible, weight_units, Order, Picker,
};
use crate::request::Request;

/// Periods up to this many picks are precomputed (2 bytes a pick).
pub(crate) const TABLE_LIMIT: u64 = 1 << 16;
/// Periods up to this many picks per endpoint are precomputed for a
/// sub-pool (at most [`TABLE_LIMIT`] in all): the
/// instance a locality policy (`zone_first`, `local_first`) builds over one
/// zone. A balancer holds one such instance per zone, and tables of
/// [`TABLE_LIMIT`] positions each made its memory and build time grow with
/// the zones, not the endpoints: 2,000 endpoints in zones of two, weights
/// 65535 and 1, took 258 MB. Longer periods of a zone run nginx's
/// algorithm live, as the whole pool's do beyond [`TABLE_LIMIT`] (the same
/// sequence while every endpoint is eligible).
pub(crate) const SUBSET_TABLE_LIMIT: u64 = 256;
/// ... when computing them takes at most this many steps (about 10 ms).
pub(crate) const TABLE_WORK_LIMIT: u64 = 1 << 24;
/// Elements scanned forward before searching every endpoint's positions.
const SCAN: u64 = 8;

/// Smooth weighted round robin (`swrr`).
#[derive(Debug)]
pub(crate) struct SmoothWeightedRoundRobin {
    pool: Pool,
    state: State,
}

#[derive(Debug)]
enum State {
    /// Equal weights: round robin, this many picks made so far plus the
    /// positions skipped.
    Cycle(AtomicU64),
    Table(Table),
    /// nginx's current weights.
    Live(Mutex<Vec<i128>>),
}

#[derive(Debug)]
struct Table {
    /// Picks made so far, plus the positions skipped.
    next: AtomicU64,
    /// One period of the sequence.
    sequence: Box<[u16]>,
    /// Endpoint `i`'s positions in the period, ascending, are
    /// `positions[first[i]..first[i + 1]]`.
    positions: Box<[u16]>,
    first: Box<[u32]>,
}

impl SmoothWeightedRoundRobin {
    pub(crate) fn new(pool: Pool) -> Result<Self, BuildError> {
        let limit = crate::policy::period_table_limit(&pool, TABLE_LIMIT, SUBSET_TABLE_LIMIT);
        Self::with_table_limit(pool, limit)
    }

    /// As `new`, precomputing the period only up to `limit` positions (tests
    /// compare the table with nginx's algorithm).
    pub(crate) fn with_table_limit(pool: Pool, limit: u64) -> Result<Self, BuildError> {
        check_pool(&pool)?;
        let units = weight_units(&pool);
        let period: u64 = units.iter().sum();
        let n = pool.len() as u64;
        let equal = units.iter().all(|&u| u <= 1);
        let state = if equal {
            State::Cycle(AtomicU64::new(0))
        } else if period <= limit.min(TABLE_LIMIT)
            && period.saturating_mul(n) <= TABLE_WORK_LIMIT
            && n <= 1 << 16
        {
            State::Table(Table::new(&units, period))
        } else {
            State::Live(Mutex::new(vec![0; pool.len()]))
        };
        Ok(SmoothWeightedRoundRobin { pool, state })
    }

    /// Round robin, skipping ineligible endpoints as `rr` does: the
    /// counter moves past the endpoint chosen.
    fn pick_cycle(&self, next: &AtomicU64, req: &Request<'_>) -> Result<usize, PickError> {
        let n = self.pool.len();
        let first = (next.fetch_add(1, Relaxed) % n as u64) as usize;
        for step in 0..n {
            let i = (first + step) % n;
            if self.pool.eligible(i, req) {
                if step > 0 {
                    next.fetch_add(step as u64, Relaxed);
                }
                return Ok(self.pool.take(i));
            }
        }
        Err(none_eligible(&self.pool))
    }

    /// nginx's step over the eligible endpoints, under the lock.
    fn pick_live(&self, current: &Mutex<Vec<i128>>, req: &Request<'_>) -> Result<usize, PickError> {
        // Poisoning cannot leave the weights half-updated: nothing in the
        // step panics, and any state is a valid starting point anyway.
        let mut current = current.lock().unwrap_or_else(|e| e.into_inner());
        let mut total = 0i128;
        let (mut best, mut best_value) = (usize::MAX, i128::MIN);
        for (i, cur) in current.iter_mut().enumerate() {
            if !self.pool.eligible(i, req) {
                continue;
            }
            let w = i128::from(self.pool.weight(i));
            *cur += w;
            total += w;
            if *cur > best_value {
                (best, best_value) = (i, *cur);
            }
        }
        if best == usize::MAX {
            return Err(none_eligible(&self.pool));
        }
        current[best] -= total;
        Ok(self.pool.take(best))
    }
}

impl Table {
    /// Runs nginx's algorithm for one period (weights in units).
    fn new(units: &[u64], period: u64) -> Self {
        let total = period as i64;
        let mut current = vec![0i64; units.len()];
        let mut sequence = Vec::with_capacity(period as usize);
        for _ in 0..period {
            // The largest current weight is positive (they sum to `total`
            // after the additions), so weight 0, stuck at 0, never wins.
            let (mut best, mut best_value) = (0, i64::MIN);
            for (i, (cur, &w)) in current.iter_mut().zip(units).enumerate() {
                *cur += w as i64;
                if *cur > best_value {
                    (best, best_value) = (i, *cur);
                }
            }
            current[best] -= total;
            sequence.push(best as u16);
        }
        let mut first = vec![0u32; units.len() + 1];
        for &i in &sequence {
            first[usize::from(i) + 1] += 1;
        }
        for i in 0..units.len() {
            first[i + 1] += first[i];
        }
        let mut fill = first.clone();
        let mut positions = vec![0u16; sequence.len()];
        for (pos, &i) in sequence.iter().enumerate() {
            positions[fill[usize::from(i)] as usize] = pos as u16;
            fill[usize::from(i)] += 1;
        }
        Table {
            next: AtomicU64::new(0),
            sequence: sequence.into_boxed_slice(),
            positions: positions.into_boxed_slice(),
            first: first.into_boxed_slice(),
        }
    }

    /// The element at `pos`, else the next eligible one (see the module docs).
    #[inline]
    fn pick(&self, pool: &Pool, req: &Request<'_>) -> Result<usize, PickError> {
        let period = self.sequence.len() as u64;
        let pos = self.next.fetch_add(1, Relaxed) % period;
        let i = usize::from(self.sequence[pos as usize]);
        if pool.eligible(i, req) {
            Ok(pool.take(i))
        } else {
            self.skip(pool, pos, req)
        }
    }

    #[cold]
    fn skip(&self, pool: &Pool, pos: u64, req: &Request<'_>) -> Result<usize, PickError> {
        let period = self.sequence.len() as u64;
        for step in 1..=SCAN.min(period - 1) {
            let i = usize::from(self.sequence[((pos + step) % period) as usize]);
            if pool.eligible(i, req) {
                self.next.fetch_add(step, Relaxed);
                return Ok(pool.take(i));
            }
        }
        // The nearest next position of any eligible endpoint.
        let mut best: Option<(u64, usize)> = None;
        for i in (0..pool.len()).filter(|&i| pool.eligible(i, req)) {
            let mine = &self.positions[self.first[i] as usize..self.first[i + 1] as usize];
            let after = mine.partition_point(|&p| u64::from(p) <= pos);
            let next = match mine.get(after) {
                Some(&p) => u64::from(p),
                None => u64::from(mine[0]) + period,
            };
            if best.is_none_or(|(distance, _)| next - pos < distance) {
                best = Some((next - pos, i));
            }
        }
        match best {
            Some((distance, i)) => {
                self.next.fetch_add(distance, Relaxed);
                Ok(pool.take(i))
            }
            None => Err(none_eligible(pool)),
        }
    }
}

impl Picker for SmoothWeightedRoundRobin {
    fn pool(&self) -> &Pool {
        &self.pool
    }

    /// The endpoint `pick` would choose, then the others in pool order after it.
    fn candidates(self: Arc<Self>, req: &Request<'_>) -> Result<Order, PickError> {
        first_choice_then_rotation(&*self, req)
    }

    #[inline]
    fn pick(&self, req: &Request<'_>) -> Result<usize, PickError> {
        match &self.state {
            State::Cycle(next) => self.pick_cycle(next, req),
            State::Table(table) => table.pick(&self.pool, req),
            State::Live(current) => self.pick_live(current, req),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zones_table_is_256_picks_per_endpoint_of_the_zone() {
        // A zone of 100, 101, 102 (period 303, within 3 x 256) is tabled; a
        // zone of 600 and 1 (601, past 2 x 256) runs live.
        let whole = test_pool(&[100, 101, 102, 1]);
        let three = SmoothWeightedRoundRobin::new(whole.subset(&[0, 1, 2])).unwrap();
        assert!(matches!(three.state, State::Table(_)), "{:?}", three.state);
        let two = SmoothWeightedRoundRobin::new(test_pool(&[600, 1, 1]).subset(&[0, 1])).unwrap();
        assert!(!matches!(two.state, State::Table(_)), "{:?}", two.state);
        let whole = SmoothWeightedRoundRobin::new(test_pool(&[600, 1])).unwrap();
        assert!(matches!(whole.state, State::Table(_)), "{:?}", whole.state);
    }
    use crate::policy::{test_picks, test_pool};
    use proptest::prelude::*;

    /// nginx's `ngx_http_upstream_get_peer`, literally: unavailable peers
    /// are skipped before they gain weight.
    fn nginx(weights: &[u64], available: &[bool], count: usize) -> Vec<usize> {
        nginx_then(weights, available, 0, count)
    }

    fn both(weights: &[u32]) -> [SmoothWeightedRoundRobin; 2] {
        let table = SmoothWeightedRoundRobin::new(test_pool(weights)).unwrap();
        let live = live(weights);
        assert!(matches!(table.state, State::Table(_) | State::Cycle(_)));
        [table, live]
    }

    /// nginx's algorithm as is, whatever the weights.
    fn live(weights: &[u32]) -> SmoothWeightedRoundRobin {
        let mut live = SmoothWeightedRoundRobin::new(test_pool(weights)).unwrap();
        live.state = State::Live(Mutex::new(vec![0; weights.len()]));
        live
    }

    #[test]
    fn nginx_five_one_one() {
        for swrr in both(&[5, 1, 1]) {
            let picks = test_picks(&swrr, &swrr.pool.clone(), 14);
            // a a b a c a a, twice
            assert_eq!(picks, [0, 0, 1, 0, 2, 0, 0].repeat(2));
        }
    }

    #[test]
    fn huge_weights_run_nginx_live() {
        let swrr = SmoothWeightedRoundRobin::new(test_pool(&[u32::MAX, u32::MAX - 1, 0])).unwrap();
        assert!(matches!(swrr.state, State::Live(_)));
        // Nearly equal weights alternate, the heavier first.
        assert_eq!(test_picks(&swrr, &swrr.pool.clone(), 6), [0, 1, 0, 1, 0, 1]);
        let equal = SmoothWeightedRoundRobin::new(test_pool(&[u32::MAX; 3])).unwrap();
        assert!(
            matches!(equal.state, State::Cycle(_)),
            "equal weights are round robin"
        );
        assert_eq!(
            test_picks(&equal, &equal.pool.clone(), 6),
            [0, 1, 2, 0, 1, 2]
        );
    }

    #[test]
    fn a_table_skips_to_the_next_eligible_element() {
        let swrr = SmoothWeightedRoundRobin::new(test_pool(&[5, 1, 1])).unwrap();
        swrr.pool.member(0).set_healthy(false);
        // a a b a c a a without a: b c, again and again.
        assert_eq!(test_picks(&swrr, &swrr.pool.clone(), 6), [1, 2, 1, 2, 1, 2]);
        // 200:1:1 puts b and c about 100 positions apart: beyond the scan.
        let far = SmoothWeightedRoundRobin::new(test_pool(&[200, 1, 1])).unwrap();
        far.pool.member(0).set_healthy(false);
        assert_eq!(test_picks(&far, &far.pool.clone(), 4), [1, 2, 1, 2]);
    }

    /// 100,000 endpoints of equal weight: nginx's algorithm would take
    /// `O(n)` under a lock per pick (about 2 ms); round robin gives the same
    /// sequence, 0, 1, ..., n - 1 and again, in `O(1)`.
    #[test]
    fn equal_weights_are_round_robin_at_any_size() {
        let n = 100_000;
        let swrr = SmoothWeightedRoundRobin::new(test_pool(&vec![7; n])).unwrap();
        assert!(
            !matches!(swrr.state, State::Live(_)),
            "not nginx's slow path"
        );
        for k in 0..n + 3 {
            let i = swrr.pick(&Request::new()).unwrap();
            assert_eq!(i, k % n, "pick {k}");
            swrr.pool.release(i);
        }
    }

    proptest! {
        /// Equal weights, nginx's algorithm against round robin, over whole
        /// periods and with endpoints of weight 0 or unavailable.
        #[test]
        fn equal_weights_match_nginx(weight in 1u32..=u32::MAX,
                                     present in proptest::collection::vec(any::<bool>(), 1..40),
                                     up in proptest::collection::vec(any::<bool>(), 40)) {
            prop_assume!(present.iter().any(|&p| p));
            let weights: Vec<u32> = present.iter().map(|&p| if p { weight } else { 0 }).collect();
            let fast = SmoothWeightedRoundRobin::new(test_pool(&weights)).unwrap();
            prop_assert!(matches!(fast.state, State::Cycle(_)));
            let slow = live(&weights);
            let count = 2 * weights.len() + 1;
            let want = test_picks(&slow, &slow.pool.clone(), count);
            prop_assert_eq!(test_picks(&fast, &fast.pool.clone(), count), want.clone());
            // Unavailable endpoints: the same sequence without them, as the table gives.
            let available: Vec<bool> = (0..weights.len()).map(|i| up[i] && present[i]).collect();
            if available.iter().any(|&a| a) {
                let fresh = SmoothWeightedRoundRobin::new(test_pool(&weights)).unwrap();
                for (i, &a) in available.iter().enumerate() {
                    fresh.pool.member(i).set_healthy(a);
                }
                let kept: Vec<usize> = want.iter().copied().filter(|&i| available[i]).collect();
                prop_assert_eq!(test_picks(&fresh, &fresh.pool.clone(), kept.len()), kept);
            }
        }
    }

    proptest! {
        #[test]
        fn matches_nginx(weights in proptest::collection::vec(0u32..12, 1..9),
                         up in proptest::collection::vec(any::<bool>(), 9)) {
            prop_assume!(weights.iter().any(|&w| w > 0));
            let wide: Vec<u64> = weights.iter().map(|&w| u64::from(w)).collect();
            let available: Vec<bool> = (0..weights.len()).map(|i| up[i] && weights[i] > 0).collect();
            let all = vec![true; weights.len()];
            let period: u64 = wide.iter().sum();
            let [table, live] = both(&weights);
            let full = nginx(&wide, &all, 2 * period as usize);
            // The period: the sums divided by their gcd, one or more times over.
            prop_assert_eq!(test_picks(&table, &table.pool.clone(), full.len()), full.clone());
            prop_assert_eq!(test_picks(&live, &live.pool.clone(), full.len()), full.clone());
            if available.iter().any(|&a| a) {
                for (i, &a) in available.iter().enumerate() {
                    table.pool.member(i).set_healthy(a);
                    live.pool.member(i).set_healthy(a);
                }
                // The table skips to the next eligible element: the sequence
                // without the ineligible endpoints.
                let kept: Vec<usize> = full.iter().copied().filter(|&i| available[i]).collect();
                prop_assert_eq!(test_picks(&table, &table.pool.clone(), kept.len()), kept);
                // Live: nginx's own rule, continuing from its state.
                let after = nginx_then(&wide, &available, full.len(), 50);
                prop_assert_eq!(test_picks(&live, &live.pool.clone(), 50), after);
            }
        }
    }

    /// The last `more` of `count + more` picks, everyone being available for
    /// the first `count` and only `available` afterwards.
    fn nginx_then(weights: &[u64], available: &[bool], count: usize, more: usize) -> Vec<usize> {
        let mut current = vec![0i128; weights.len()];
        let mut out = Vec::new();
        for k in 0..count + more {
            let mut total = 0;
            let mut best: Option<usize> = None;
            for i in 0..weights.len() {
                if k >= count && !available[i] {
                    continue;
                }
                current[i] += i128::from(weights[i]);
                total += i128::from(weights[i]);
                if best.is_none_or(|b| current[i] > current[b]) {
                    best = Some(i);
                }
            }
            let best = best.unwrap();
            current[best] -= total;
            if k >= count {
                out.push(best);
            }
        }
        out
    }
}
