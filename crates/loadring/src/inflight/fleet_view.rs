//! A bounded pick's view of the loads: the fleet view of `fleet.rs` for the
//! endpoints with a fresh report, the local count for the others.

use std::cell::Cell;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use crate::inflight::fleet::{micros, with_offset};
use crate::inflight::pool::Pool;
use crate::util::bounded::LoadFactor;

/// Picks without a time of their own read the process clock once in this
/// many (per thread) to see whether a report has expired: reading it on
/// every pick would cost a bounded pick a quarter of its time.
const CLOCK_EVERY: u32 = 64;

thread_local! {
    static UNTIL_CLOCK: Cell<u32> = const { Cell::new(0) };
}

/// The loads a bounded pick sees: the fleet view of every endpoint with a
/// fresh report, the local count of the others (see `fleet.rs`).
pub(crate) struct FleetView<'a> {
    pool: &'a Pool,
    /// Whether any endpoint of the balancer has reported: if not, this is
    /// the pool itself.
    on: bool,
    /// The pool is the balancer's whole membership: its running total and
    /// the balancer's sum of offsets describe it, and a report is fresh
    /// while it is counted in that sum (until the sweep after its expiry).
    whole: bool,
    at: Option<Duration>,
    /// `now` in µs (a subset's picks), read at the first report met.
    now: Cell<Option<u64>>,
    max_age: u64,
    /// `report_rule=share` (see [`FleetView::share_cap`]).
    share: bool,
    /// Whether the loads include reports: then loadring's cap is the
    /// fleet's ([`FleetView::cap`]) and a pick keeps to its own cap too
    /// ([`FleetView::try_reserve_bounded`]).
    reported: bool,
}

impl<'a> FleetView<'a> {
    /// The view of `pool` at `at` (the request's time; `None`: the process
    /// clock). First takes the expired reports out of the sum if one has
    /// expired.
    #[inline]
    pub(crate) fn new(pool: &'a Pool, at: Option<Duration>) -> Self {
        let fleet = pool.fleet();
        let on = fleet.has_reports();
        let mut view = FleetView {
            pool,
            on,
            whole: pool.is_whole(),
            at,
            now: Cell::new(None),
            max_age: if on { fleet.max_age.load(Relaxed) } else { 0 },
            share: on && fleet.share.load(Relaxed),
            reported: on,
        };
        if on && view.whole {
            view.sweep_if_due();
            // For the whole membership, while one is counted in the sum; for a
            // subset, once any has come (its freshness is per endpoint, and
            // checking every member would cost the pick `O(n)`).
            view.reported = fleet.counts_reports();
        }
        view
    }

    /// Sweeps if the earliest counted report has expired at the request's
    /// time, or, for a request without one, at the process clock read once
    /// in [`CLOCK_EVERY`] picks of this thread.
    #[inline]
    fn sweep_if_due(&self) {
        let now = match self.at {
            Some(at) => micros(at),
            None => {
                let left = UNTIL_CLOCK.with(|c| {
                    let left = c.get();
                    c.set(left.checked_sub(1).unwrap_or(CLOCK_EVERY - 1));
                    left
                });
                if left != 0 {
                    return;
                }
                micros(crate::clock::now())
            }
        };
        if self.pool.fleet().sweep_due_at(now) {
            self.sweep(now);
        }
    }

    /// Takes every report older than the age out of the sum (`O(n)`, once
    /// per expiry of the oldest report counted: with reports coming more
    /// often than the age, about once per age).
    #[cold]
    fn sweep(&self, now: u64) {
        let fleet = self.pool.fleet();
        if !fleet.claim_sweep(now) {
            return;
        }
        let next = (0..self.pool.len())
            .filter_map(|i| {
                self.pool
                    .report(i)
                    .expire(now, self.max_age, &fleet.offsets)
            })
            .min()
            .unwrap_or(u64::MAX);
        fleet.swept(next);
    }

    pub(crate) fn pool(&self) -> &'a Pool {
        self.pool
    }

    fn now(&self) -> u64 {
        if let Some(now) = self.now.get() {
            return now;
        }
        let now = micros(self.at.unwrap_or_else(crate::clock::now));
        self.now.set(Some(now));
        now
    }

    /// The offset of endpoint `i`'s fresh report, if it has one: counted in
    /// the sum for the whole membership, dated within the age for a subset.
    #[inline]
    fn offset(&self, i: usize) -> Option<i64> {
        if !self.on {
            return None;
        }
        let (offset, counted, at) = self.pool.report(i).read_view()?;
        let fresh = if self.whole {
            counted
        } else {
            self.now().saturating_sub(at) <= self.max_age
        };
        fresh.then_some(offset)
    }

    /// loadring's cap of endpoint `i` (by its weight among the pool's) at
    /// `total` in flight: rounded up
    /// ([`LoadFactor::cap`]) while the balancer counts only its own
    /// requests, rounded down to no less than the fair share
    /// ([`LoadFactor::fleet_cap`]) while the loads include reports: there
    /// the rounding would be the whole fleet's margin.
    #[inline]
    pub(crate) fn cap(&self, factor: LoadFactor, total: u64, i: usize) -> u64 {
        let (weight, weight_sum) = (self.pool.weight(i), self.pool.weight_sum());
        if self.reported {
            factor.fleet_cap(total, weight, weight_sum)
        } else {
            factor.cap(total, weight, weight_sum)
        }
    }

    /// Endpoint `i`'s load: the fleet view, else requests in flight here.
    #[inline]
    pub(crate) fn load(&self, i: usize) -> u64 {
        let local = self.pool.load(i);
        match self.offset(i) {
            Some(offset) => with_offset(local, offset),
            None => local,
        }
    }

    /// The loads summed over the pool. For the whole membership, `O(1)`:
    /// this balancer's running total plus the balancer's sum of the fresh
    /// reports' offsets (each at least 0). A subset sums its members.
    #[inline]
    pub(crate) fn total_load(&self) -> u64 {
        let local = self.pool.total_load();
        if !self.on {
            return local;
        }
        if self.whole {
            return with_offset(local, self.pool.fleet().offsets.load(Relaxed));
        }
        (0..self.pool.len()).map(|i| self.load(i)).sum()
    }

    /// With `report_rule=share`, the local count endpoint `i` may reach
    /// under `cap`; `None` where the rule is the view's (no fresh report,
    /// or this balancer holds the view's whole load: one balancer).
    ///
    /// The rule: between two reports of a backend, a balancer sees only its
    /// own picks, so it extrapolates the fleet's from them. With a share `s`
    /// of the fleet's load (its in flight over the view's total), each of
    /// its picks on the endpoint stands for `1/s` picks of the fleet and
    /// each of its completions for `1/s` completions, counting the ones the
    /// report came with: the load is `reported' + (local - base) / s`, with
    /// `reported' = reported + completing` and `base` its in flight then,
    /// those included. Below `cap` it admits about `completing + s (cap -
    /// reported')` picks per report: the slots its own completions freed,
    /// plus its share of the room (less its share of any excess). The
    /// fraction is drawn once per report, so that over the fleet the
    /// expected picks match the room. Assumes balancers alike (traffic
    /// spread evenly over them, as an L4 balancer or DNS does).
    #[inline]
    fn share_cap(&self, i: usize, cap: u64) -> Option<u64> {
        let report = self.pool.report(i).read()?;
        let local = self.pool.total_load();
        let total = self.total_load();
        if local >= total {
            return None;
        }
        let s = local.max(1) as f64 / total as f64;
        let reported = report.base as f64 + report.offset as f64;
        let limit = report.base as f64 + s * (cap as f64 - reported) - report.draw;
        // local < ceil(limit) <=> reported' + (local - base + draw) / s < cap.
        Some(if limit <= 0.0 {
            0
        } else {
            limit.ceil().min(u64::MAX as f64) as u64
        })
    }

    /// Reserves a slot on endpoint `i` if its load in this view stays within
    /// `cap`: one compare-and-swap on the in-flight count, against the cap
    /// less the report's offset, so concurrent picks never take the view's
    /// load past `cap` (with `report_rule=share`, against the local count
    /// [`FleetView::share_cap`] allows).
    #[inline]
    pub(crate) fn try_reserve(&self, i: usize, cap: u64) -> bool {
        self.try_reserve_within(i, cap, u64::MAX)
    }

    /// Reserves a slot on endpoint `i` under loadring's cap `cap` (from
    /// [`FleetView::cap`]). While the
    /// loads include reports, also within the cap its own
    /// requests alone give it (rounded up, on its own total): a report only
    /// ever tightens what one balancer sends. A report that shows room
    /// which other balancers are filling at the same moment would
    /// otherwise let each of them send more than its own cap, and the
    /// fleet's worst instant would be worse than without reports.
    #[inline]
    pub(crate) fn try_reserve_bounded(&self, i: usize, cap: u64, factor: LoadFactor) -> bool {
        if !self.reported {
            return self.pool.try_reserve(i, cap);
        }
        let own = factor.cap(
            self.pool.total_load(),
            self.pool.weight(i),
            self.pool.weight_sum(),
        );
        self.try_reserve_within(i, cap, own)
    }

    /// [`FleetView::try_reserve`] with the local count also kept below `own`.
    #[inline]
    fn try_reserve_within(&self, i: usize, cap: u64, own: u64) -> bool {
        let Some(offset) = self.offset(i) else {
            return self.pool.try_reserve(i, cap.min(own));
        };
        if cap == 0 {
            return false;
        }
        if self.share {
            if let Some(allowed) = self.share_cap(i, cap) {
                let allowed = allowed.min(own);
                return allowed > 0 && self.pool.try_reserve(i, allowed);
            }
        }
        // max(0, local + offset) < cap  <=>  local < cap - offset, for cap >= 1.
        let local_cap = i128::from(cap) - i128::from(offset);
        local_cap > 0
            && self
                .pool
                .try_reserve(i, u64::try_from(local_cap).unwrap_or(u64::MAX).min(own))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoint::Endpoint;
    use crate::inflight::fleet::LoadReport;

    /// Two endpoints; this balancer holds 4 on e1, reported at 36 (the
    /// other balancers' load), and 2 on e0, one of them completing with a
    /// report of 9: 5 of a view's 45 in flight, s = 1/9.
    fn pool() -> Pool {
        let pool = Pool::for_test(vec![
            Endpoint::new("e0").unwrap(),
            Endpoint::new("e1").unwrap(),
        ]);
        pool.fleet().share.store(true, Relaxed);
        for _ in 0..4 {
            pool.reserve(1);
        }
        pool.reserve(0);
        pool.reserve(0);
        let at = Duration::from_millis(1);
        pool.member(1).apply_report(&LoadReport::new(36).at(at), 0);
        pool.member(0).apply_report(&LoadReport::new(9).at(at), 1);
        pool.release(0);
        pool
    }

    /// The rule's words: the load is `reported' + (local - base + draw) / s`
    /// with `reported' = 9 + 1`, `base` = 2; a pick is admitted while it is
    /// below the cap, i.e. while `local < ceil(base + s (cap - reported') - draw)`.
    #[test]
    fn a_share_of_the_room_and_the_slot_its_completion_freed() {
        let pool = pool();
        let view = FleetView::new(&pool, Some(Duration::from_millis(1)));
        assert_eq!(view.total_load(), 45);
        let draw = pool.report(0).read().unwrap().draw;
        for cap in [1u64, 10, 11, 12, 29, 100] {
            let limit = 2.0 + (5.0 / 45.0) * (cap as f64 - 10.0) - draw;
            let want = if limit <= 0.0 { 0 } else { limit.ceil() as u64 };
            assert_eq!(view.share_cap(0, cap), Some(want), "cap {cap}, draw {draw}");
        }
        // At the cap of the report (room 0) it reuses at most its own slot.
        assert!(view.share_cap(0, 10).unwrap() <= 2);
        // e1: no completion came with its report; room 29 - 36 < 0.
        let e1 = view.share_cap(1, 29).unwrap();
        assert!(e1 <= 4, "over the cap: less than it holds ({e1})");
    }

    /// One balancer holding the whole view: the view's rule, exactly.
    #[test]
    fn the_whole_load_keeps_the_views_rule() {
        let pool = Pool::for_test(vec![Endpoint::new("e0").unwrap()]);
        pool.fleet().share.store(true, Relaxed);
        pool.reserve(0);
        pool.reserve(0);
        pool.member(0)
            .apply_report(&LoadReport::new(1).at(Duration::ZERO), 1);
        pool.release(0);
        let view = FleetView::new(&pool, Some(Duration::ZERO));
        assert_eq!(view.share_cap(0, 5), None);
        assert!(view.try_reserve(0, 2));
        assert!(!view.try_reserve(0, 2), "1 + 1 = the cap of 2");
    }
}
