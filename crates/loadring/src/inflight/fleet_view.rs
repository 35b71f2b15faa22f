//! A bounded pick's view of the loads: the fleet view of `fleet.rs` for the
//! endpoints with a fresh report, the local count for the others.

use std::cell::Cell;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use crate::inflight::fleet::{micros, with_offset};
use crate::inflight::pool::Pool;

/// The loads a bounded pick sees: the fleet view of every endpoint with a
/// fresh report, the local count of the others (see the module's doc).
pub(crate) struct FleetView<'a> {
    pool: &'a Pool,
    /// Whether any endpoint of the balancer has reported: if not, this is
    /// the pool itself.
    on: bool,
    at: Option<Duration>,
    /// `now` in µs, read at the first report met.
    now: Cell<Option<u64>>,
    max_age: u64,
}

impl<'a> FleetView<'a> {
    /// The view of `pool` at `at` (the request's time; `None`: the process
    /// clock).
    #[inline]
    pub(crate) fn new(pool: &'a Pool, at: Option<Duration>) -> Self {
        let fleet = pool.fleet();
        let on = fleet.has_reports();
        FleetView {
            pool,
            on,
            at,
            now: Cell::new(None),
            max_age: if on { fleet.max_age.load(Relaxed) } else { 0 },
        }
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

    /// The offset of endpoint `i`'s fresh report, if it has one.
    #[inline]
    fn offset(&self, i: usize) -> Option<i64> {
        if !self.on {
            return None;
        }
        self.pool
            .report(i)
            .fresh_offset(|| self.now(), self.max_age)
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

    /// The loads summed over the pool (`O(n)` once a report exists).
    #[inline]
    pub(crate) fn total_load(&self) -> u64 {
        if !self.on {
            return self.pool.total_load();
        }
        (0..self.pool.len()).map(|i| self.load(i)).sum()
    }

    /// Reserves a slot on endpoint `i` if its load in this view stays within
    /// `cap`: one compare-and-swap on the in-flight count, against the cap
    /// less the report's offset, so concurrent picks never take the view's
    /// load past `cap`.
    #[inline]
    pub(crate) fn try_reserve(&self, i: usize, cap: u64) -> bool {
        let Some(offset) = self.offset(i) else {
            return self.pool.try_reserve(i, cap);
        };
        if cap == 0 {
            return false;
        }
        // max(0, local + offset) < cap  <=>  local < cap - offset, for cap >= 1.
        let local_cap = i128::from(cap) - i128::from(offset);
        local_cap > 0
            && self
                .pool
                .try_reserve(i, u64::try_from(local_cap).unwrap_or(u64::MAX))
    }
}
