//! `wrr`: LVS's interleaved weighted round robin, as a pure function of a
//! pick counter.
//!
//! LVS (`ip_vs_wrr.c`) keeps a current weight `cw`, starting at the largest
//! weight and stepping down by the gcd of the weights; at each level it goes
//! through the endpoints in order and returns those whose weight is at least
//! `cw`; after the lowest level it starts again from the top. Weights 3, 2, 7
//! give `2 2 2 2 0 2 0 1 2 0 1 2`, then the same again.
//!
//! Counting weights in units of their gcd, level `c` (from `max` down to 1)
//! lists the endpoints of at least `c` units in index order. Levels between
//! two consecutive distinct weights list the same endpoints, so the period
//! (the sum of the units) splits into at most `n` *segments* of identical
//! levels. Pick number `k` is the element at position `k mod period`:
//!
//! * when the period is small (at most [`TABLE_LIMIT`], or
//!   [`SUBSET_TABLE_LIMIT`] per endpoint for one zone of a locality policy), it is read
//!   from a table of one period computed at build: one division and one load;
//! * otherwise (weights up to `u32::MAX` make periods of up to `n * 2^32`)
//!   the position is decoded into its segment (binary search), level and
//!   rank, and the rank-th endpoint of the level is found with a wavelet
//!   matrix over the endpoints sorted by weight: `O(log n)`, no loop over
//!   weights, `n log n` bits of memory.
//!
//! Either way a pick is one `fetch_add` on a counter, without a lock.
//!
//! **Ineligible endpoints** (unhealthy, excluded, weight 0) are skipped as
//! LVS skips an unavailable server: the pick is the next eligible element
//! of the sequence, and the counter is advanced to it, so that the next pick
//! continues after it. The sequence of one thread is then exactly LVS's over
//! the eligible endpoints. The next eligible element is found in `O(n)`
//! whatever the weights: the rest of the current level, else the first
//! lower level (wrapping to the top) that lists an eligible endpoint is the
//! highest level not above the largest eligible weight. Under concurrent
//! picks the advance is approximate, never the choice of an ineligible
//! endpoint.
//!
//! **Cost.** Build: `O(period * n)` up to the table limit, else `O(n log n)`
//! for the wavelet matrix. Pick: `O(1)` with a table, `O(log n)` without;
//! the slow path (the pick's endpoint ineligible) is the `O(n)` search for
//! the next eligible element above.

use std::cmp::Reverse;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use crate::error::{BuildError, PickError};
use crate::inflight::pool::Pool;
use crate::policy::{
    check_pool, first_choice_then_rotation, none_eligible, weight_units, Order as Preference,
    Picker,
};
use crate::request::Request;
use crate::util::wavelet::Wavelet;

/// Periods up to this many picks are precomputed (2 bytes a pick).
pub(crate) const TABLE_LIMIT: u64 = 1 << 16;
/// Periods up to this many picks per endpoint are precomputed for a
/// sub-pool (at most [`TABLE_LIMIT`] in all): the
/// instance a locality policy (`zone_first`, `local_first`) builds over one
/// zone. A balancer holds one such instance per zone, and tables of
/// [`TABLE_LIMIT`] positions each made its memory and build time grow with
/// the zones, not the endpoints: 2,000 endpoints in zones of two, weights
/// 65535 and 1, took 130 MB. Longer periods of a zone are decoded
/// directly, as the whole pool's are beyond [`TABLE_LIMIT`]: the same
/// sequence.
pub(crate) const SUBSET_TABLE_LIMIT: u64 = 256;

/// Interleaved weighted round robin (`wrr`).
#[derive(Debug)]
pub(crate) struct WeightedRoundRobin {
    pool: Pool,
    /// Picks made so far, plus the positions skipped.
    next: AtomicU64,
    /// Each endpoint's weight divided by the gcd of all weights.
    units: Vec<u64>,
    /// Runs of levels listing the same endpoints, from the top level down.
    segments: Vec<Segment>,
    /// Positions in one period: the sum of the units.
    period: u64,
    order: Order,
}

/// Levels `bottom + 1 ..= top` (in units), each listing the `active`
/// heaviest endpoints in index order; the first of them is at `start`.
#[derive(Debug, Clone, Copy)]
struct Segment {
    start: u64,
    top: u64,
    bottom: u64,
    active: u64,
}

/// How the endpoint at a position is found.
#[derive(Debug)]
enum Order {
    /// One whole period.
    Table(Box<[u16]>),
    /// Endpoint indices by descending weight (then index), for rank queries.
    Direct(Wavelet),
}

impl WeightedRoundRobin {
    pub(crate) fn new(pool: Pool) -> Result<Self, BuildError> {
        let limit = crate::policy::period_table_limit(&pool, TABLE_LIMIT, SUBSET_TABLE_LIMIT);
        Self::with_table_limit(pool, limit)
    }

    /// As `new`, precomputing the period only up to `limit` positions (tests
    /// compare both ways of finding an element).
    pub(crate) fn with_table_limit(pool: Pool, limit: u64) -> Result<Self, BuildError> {
        check_pool(&pool)?;
        let units = weight_units(&pool);
        let mut by_weight: Vec<u32> = (0..pool.len() as u32)
            .filter(|&i| units[i as usize] > 0)
            .collect();
        by_weight.sort_unstable_by_key(|&i| (Reverse(units[i as usize]), i));

        let mut segments = Vec::new();
        let mut start = 0u64;
        let mut k = 0;
        while k < by_weight.len() {
            let top = units[by_weight[k] as usize];
            let mut end = k;
            while end < by_weight.len() && units[by_weight[end] as usize] == top {
                end += 1;
            }
            let bottom = by_weight.get(end).map_or(0, |&i| units[i as usize]);
            segments.push(Segment {
                start,
                top,
                bottom,
                active: end as u64,
            });
            start += (top - bottom) * end as u64;
            k = end;
        }
        let period = start;

        let order = if period <= limit && pool.len() <= 1 << 16 {
            let mut table = Vec::with_capacity(period as usize);
            let mut level: Vec<u16> = Vec::with_capacity(by_weight.len());
            for seg in &segments {
                level.extend(
                    by_weight[level.len()..seg.active as usize]
                        .iter()
                        .map(|&i| i as u16),
                );
                level.sort_unstable();
                for _ in 0..seg.top - seg.bottom {
                    table.extend_from_slice(&level);
                }
            }
            Order::Table(table.into_boxed_slice())
        } else {
            Order::Direct(Wavelet::new(&by_weight))
        };
        Ok(WeightedRoundRobin {
            pool,
            next: AtomicU64::new(0),
            units,
            segments,
            period,
            order,
        })
    }

    /// The level (in units) of a position and its rank within the level.
    #[inline]
    fn locate(&self, pos: u64) -> (&Segment, u64, u64) {
        // The first segment starts at 0, so the partition point is >= 1.
        let s = self.segments.partition_point(|seg| seg.start <= pos) - 1;
        let seg = &self.segments[s];
        let offset = pos - seg.start;
        (seg, seg.top - offset / seg.active, offset % seg.active)
    }

    /// The endpoint at `pos` (`pos < period`).
    #[inline]
    fn index_at(&self, pos: u64) -> usize {
        match &self.order {
            Order::Table(table) => usize::from(table[pos as usize]),
            Order::Direct(wavelet) => {
                let (seg, _, rank) = self.locate(pos);
                wavelet.kth_smallest(seg.active as usize, rank as usize) as usize
            }
        }
    }

    /// The position of endpoint `i` on level `level`, which lists it.
    fn position(&self, level: u64, i: usize) -> u64 {
        let s = self.segments.partition_point(|seg| seg.bottom >= level);
        let seg = &self.segments[s];
        let rank = self.units[..i].iter().filter(|&&u| u >= level).count() as u64;
        seg.start + (seg.top - level) * seg.active + rank
    }

    /// The next eligible element after `pos` (holding ineligible `i`).
    #[cold]
    fn skip(&self, pos: u64, i: usize, req: &Request<'_>) -> Result<usize, PickError> {
        let (_, level, _) = self.locate(pos);
        let n = self.pool.len();
        let mut max_eligible = 0;
        let mut on_this_level = None;
        for m in (0..n).filter(|&m| self.pool.eligible(m, req)) {
            max_eligible = max_eligible.max(self.units[m]);
            if on_this_level.is_none() && m > i && self.units[m] >= level {
                on_this_level = Some(m);
            }
        }
        if max_eligible == 0 {
            return Err(none_eligible(&self.pool));
        }
        let (level, m) = match on_this_level {
            Some(m) => (level, m),
            None => {
                // The next level down (or the top, after the last level),
                // unless no eligible endpoint is that heavy: then the
                // highest level that lists the heaviest eligible one.
                let level = if level > 1 {
                    (level - 1).min(max_eligible)
                } else {
                    max_eligible
                };
                match (0..n).find(|&m| self.units[m] >= level && self.pool.eligible(m, req)) {
                    Some(m) => (level, m),
                    // Health changed since the first pass.
                    None => return Err(none_eligible(&self.pool)),
                }
            }
        };
        let target = self.position(level, m);
        self.next
            .fetch_add((target + self.period - pos) % self.period, Relaxed);
        Ok(self.pool.take(m))
    }

    #[cfg(test)]
    pub(crate) fn is_table(&self) -> bool {
        matches!(self.order, Order::Table(_))
    }

    #[cfg(test)]
    pub(crate) fn period(&self) -> u64 {
        self.period
    }

    #[cfg(test)]
    pub(crate) fn element(&self, pos: u64) -> usize {
        self.index_at(pos)
    }
}

impl Picker for WeightedRoundRobin {
    fn pool(&self) -> &Pool {
        &self.pool
    }

    /// The endpoint `pick` would choose, then the others in pool order after it.
    fn candidates(self: Arc<Self>, req: &Request<'_>) -> Result<Preference, PickError> {
        first_choice_then_rotation(&*self, req)
    }

    #[inline]
    fn pick(&self, req: &Request<'_>) -> Result<usize, PickError> {
        let pos = self.next.fetch_add(1, Relaxed) % self.period;
        let i = self.index_at(pos);
        if self.pool.eligible(i, req) {
            Ok(self.pool.take(i))
        } else {
            self.skip(pos, i, req)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zones_table_is_256_picks_per_endpoint_of_the_zone() {
        // Weights 100, 101, 102 and a fourth endpoint out of the zone: the
        // zone's period is 303 picks, over 256 but within 3 x 256.
        let whole = crate::policy::test_pool(&[100, 101, 102, 1]);
        let three = WeightedRoundRobin::new(whole.subset(&[0, 1, 2])).unwrap();
        assert_eq!(three.period(), 303);
        assert!(three.is_table());
        // Two endpoints of 600 and 1: 601 picks, past 2 x 256.
        let two = WeightedRoundRobin::new(crate::policy::test_pool(&[600, 1, 1]).subset(&[0, 1]));
        let two = two.unwrap();
        assert_eq!(two.period(), 601);
        assert!(!two.is_table());
        // The whole pool keeps its own limit.
        assert!(WeightedRoundRobin::new(crate::policy::test_pool(&[300, 1]))
            .unwrap()
            .is_table());
    }
    use crate::policy::{test_picks, test_pool};
    use proptest::prelude::*;

    /// Seed 004's LVS pseudo-code, literally, skipping unavailable servers
    /// the way `ip_vs_wrr.c` does.
    fn lvs(weights: &[u64], available: &[bool], count: usize) -> Vec<usize> {
        fn gcd(a: u64, b: u64) -> u64 {
            if b == 0 {
                a
            } else {
                gcd(b, a % b)
            }
        }
        let n = weights.len() as i64;
        let g = weights.iter().fold(0, |a, &w| gcd(a, w)) as i64;
        let max = *weights.iter().max().unwrap() as i64;
        let (mut i, mut cw) = (-1i64, 0i64);
        let mut out = Vec::new();
        while out.len() < count {
            i = (i + 1) % n;
            if i == 0 {
                cw -= g;
                if cw <= 0 {
                    cw = max;
                }
            }
            if weights[i as usize] as i64 >= cw && available[i as usize] {
                out.push(i as usize);
            }
        }
        out
    }

    fn both(weights: &[u32]) -> [WeightedRoundRobin; 2] {
        let table = WeightedRoundRobin::new(test_pool(weights)).unwrap();
        let direct = WeightedRoundRobin::with_table_limit(test_pool(weights), 0).unwrap();
        assert!(table.is_table() && !direct.is_table());
        [table, direct]
    }

    #[test]
    fn the_seed_sequence_both_ways() {
        for wrr in both(&[3, 2, 7]) {
            assert_eq!(wrr.period(), 12);
            let got: Vec<usize> = (0..24).map(|p| wrr.element(p % 12)).collect();
            assert_eq!(got, [2, 2, 2, 2, 0, 2, 0, 1, 2, 0, 1, 2].repeat(2));
            let picks = test_picks(&wrr, &wrr.pool.clone(), 24);
            assert_eq!(picks, [2, 2, 2, 2, 0, 2, 0, 1, 2, 0, 1, 2].repeat(2));
        }
    }

    #[test]
    fn an_unhealthy_endpoint_leaves_lvs_sequence_without_it() {
        for wrr in both(&[3, 2, 7]) {
            wrr.pool.member(2).set_healthy(false);
            let picks = test_picks(&wrr, &wrr.pool.clone(), 10);
            assert_eq!(picks, [0, 0, 1, 0, 1].repeat(2));
        }
    }

    #[test]
    fn huge_weights_are_computed_directly() {
        let max = u64::from(u32::MAX);
        let wrr = WeightedRoundRobin::new(test_pool(&[u32::MAX, u32::MAX - 1, 1])).unwrap();
        assert!(!wrr.is_table());
        let period = max + (max - 1) + 1;
        assert_eq!(wrr.period(), period);
        // Level MAX lists endpoint 0, level MAX-1 lists 0 and 1, ... level 2
        // lists 0 and 1, level 1 lists all three.
        let first: Vec<usize> = (0..5).map(|p| wrr.element(p)).collect();
        assert_eq!(first, [0, 0, 1, 0, 1]);
        let last: Vec<usize> = (period - 5..period).map(|p| wrr.element(p)).collect();
        assert_eq!(last, [0, 1, 0, 1, 2]);
        // Equal huge weights reduce by their gcd to plain round robin.
        let equal = WeightedRoundRobin::new(test_pool(&[u32::MAX; 3])).unwrap();
        assert_eq!(equal.period(), 3);
        assert_eq!(
            test_picks(&equal, &equal.pool.clone(), 6),
            [0, 1, 2, 0, 1, 2]
        );
    }

    #[test]
    fn skipping_over_huge_levels_is_immediate() {
        // Endpoint 0 alone fills the top 2^32 - 3 levels; while it is down
        // the picks go straight to the last levels.
        let wrr = WeightedRoundRobin::new(test_pool(&[u32::MAX, 2, 1])).unwrap();
        wrr.pool.member(0).set_healthy(false);
        assert_eq!(test_picks(&wrr, &wrr.pool.clone(), 6), [1, 1, 2, 1, 1, 2]);
    }

    proptest! {
        #[test]
        fn matches_lvs(weights in proptest::collection::vec(0u32..12, 1..9),
                       up in proptest::collection::vec(any::<bool>(), 9)) {
            prop_assume!(weights.iter().any(|&w| w > 0));
            let wide: Vec<u64> = weights.iter().map(|&w| u64::from(w)).collect();
            let available: Vec<bool> = (0..weights.len()).map(|i| up[i] && weights[i] > 0).collect();
            let all = vec![true; weights.len()];
            for wrr in both(&weights) {
                let period = wrr.period() as usize;
                let seq: Vec<usize> = (0..period as u64).map(|p| wrr.element(p)).collect();
                prop_assert_eq!(&seq, &lvs(&wide, &all, period));
                if available.iter().any(|&a| a) {
                    for (i, &a) in available.iter().enumerate() {
                        wrr.pool.member(i).set_healthy(a);
                    }
                    let picks = test_picks(&wrr, &wrr.pool.clone(), 2 * period);
                    prop_assert_eq!(picks, lvs(&wide, &available, 2 * period));
                }
            }
        }
    }
}
