//! In-flight accounting: one counter per backend and the guard that releases it.
//!
//! A backend's counter and its removal flag share one atomic word, so that a
//! release racing with the backend's removal from the membership is counted
//! out of the member total exactly once: either by the release (it saw the
//! backend still a member) or by the removal (its count included the slot).
//!
//! The member total is one counter shared by every picking thread, so keeping
//! it costs each pick and each release an atomic add on a contended cache
//! line. Only bounded policies read it on every pick; members of other
//! balancers keep no total (it is summed over the members when asked).
//!
//! A plain hashing policy never reads a load to place a request, so a
//! [`LocalBalancer`](crate::LocalBalancer) (a handle on one thread, whose
//! guards stay on that thread) counts its picks in a slot of its own in each
//! backend: only that handle writes its slot, with a plain load and store,
//! no atomic read-modify-write. A backend's load is its shared count plus
//! its slots. The slots sit in the backend's first cache line, next to the
//! shared count (whose word also holds the health mark); a balancer has
//! [`SLOTS`] of them, claimed by the handles alive at a time (handles beyond
//! that count in the shared counter).

use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::Arc;

use crate::endpoint::Endpoint;
use crate::inflight::fleet::{FleetState, LoadReport, ReportCell};
use crate::inflight::observer::Observer;

const REMOVED: u64 = 1 << 63;
/// Marked unhealthy (see [`Member::set_healthy`]).
const UNHEALTHY: u64 = 1 << 62;
const COUNT: u64 = UNHEALTHY - 1;

/// Slots per backend for the counts of local handles.
pub const SLOTS: usize = 4;

/// A guard's slot number when it counts in the backend's shared counter.
pub(crate) const SHARED: u32 = u32::MAX;

/// The shared state of one backend: identity, in-flight count, health.
///
/// What a pick reads and writes (the counter, health, observer, total) comes
/// first, in one cache line of its own: two threads picking different
/// backends never write to the same line.
#[derive(Debug)]
#[repr(C, align(64))]
pub(crate) struct Member {
    /// Low 62 bits: requests in flight. Bit 62: marked unhealthy. Top bit:
    /// no longer a member.
    word: AtomicU64,
    /// In-flight requests summed over the current members of the balancer,
    /// if the balancer keeps that sum.
    total: Option<Arc<AtomicI64>>,
    /// What the policy learns from outcomes, if it learns anything.
    observer: Option<Arc<dyn Observer>>,
    /// Requests in flight reserved through local handles, one slot per
    /// handle, each written by its handle only (see the module's doc).
    /// 32 bits: a handle holding 2^32 guards on one backend would need
    /// hundreds of gigabytes of guards.
    slots: [AtomicU32; SLOTS],
    /// The backend's last load report (see `inflight/fleet.rs`).
    report: ReportCell,
    /// What the balancer's members share about reports.
    fleet: Arc<FleetState>,
    /// Members of the balancer marked unhealthy, this one included while
    /// it is (see [`Member::set_healthy`]).
    unhealthy: Arc<AtomicU64>,
    addr: Box<str>,
    tag: Option<Box<str>>,
}

impl Member {
    /// A member whose reservations are also counted in `total`, if given.
    pub(crate) fn new(
        endpoint: &Endpoint,
        total: Option<Arc<AtomicI64>>,
        observer: Option<Arc<dyn Observer>>,
        unhealthy: Arc<AtomicU64>,
        fleet: Arc<FleetState>,
    ) -> Self {
        Member {
            addr: endpoint.addr().into(),
            tag: endpoint.tag().map(Into::into),
            word: AtomicU64::new(0),
            slots: Default::default(),
            report: ReportCell::default(),
            fleet,
            unhealthy,
            total,
            observer,
        }
    }

    /// A member of a balancer that keeps no running total.
    #[cfg(test)]
    pub(crate) fn untallied(endpoint: &Endpoint) -> Self {
        Member::new(endpoint, None, None, Arc::default(), Arc::default())
    }

    /// The backend's last load report.
    #[inline]
    pub(crate) fn report(&self) -> &ReportCell {
        &self.report
    }

    /// Records the backend's `report`, arriving while `finishing` of this
    /// balancer's requests on it are completing with it (their slots not yet
    /// released, but the report already leaves them out).
    pub(crate) fn apply_report(&self, report: &LoadReport, finishing: u64) {
        let offsets = &self.fleet.offsets;
        let base = self.load();
        let local = base.saturating_sub(finishing);
        let at = report.reported_at();
        self.report
            .publish_base(report.in_service(), local, base, at, offsets);
        // A removal that raced with this report may have missed it: the
        // balancer's sum counts members only (`retire` takes the flag first,
        // then the report; this reads the flag after counting the report).
        if self.word.load(SeqCst) & REMOVED != 0 {
            self.report.uncount(None, offsets);
        }
        self.fleet.counted_report(at);
        self.fleet.set_reported();
    }

    pub(crate) fn observer(&self) -> Option<&Arc<dyn Observer>> {
        self.observer.as_ref()
    }

    /// The observer of type `O` of this member, looking through observers
    /// that wrap others (the endpoint lifecycle's).
    pub(crate) fn find_observer<O: Observer>(&self) -> Option<&O> {
        let mut observer: &dyn Observer = &**self.observer()?;
        loop {
            let any: &dyn std::any::Any = observer;
            if let Some(found) = any.downcast_ref() {
                return Some(found);
            }
            observer = observer.wrapped()?;
        }
    }

    pub(crate) fn addr(&self) -> &str {
        &self.addr
    }

    pub(crate) fn tag(&self) -> Option<&str> {
        self.tag.as_deref()
    }

    /// Requests in flight on this backend: the shared count plus the slots
    /// of local handles.
    #[inline]
    pub(crate) fn load(&self) -> u64 {
        let slots: u64 = self.slots.iter().map(|s| u64::from(s.load(Relaxed))).sum();
        (self.word.load(Relaxed) & COUNT) + slots
    }

    /// Takes one slot in the local handle's counter `slot`, whatever the
    /// load. Only the handle holding `slot` calls this (a load and a store,
    /// no read-modify-write), and only for members of balancers without a
    /// running total.
    #[inline]
    pub(crate) fn reserve_in_slot(&self, slot: usize) {
        debug_assert!(self.total.is_none(), "a tallied member counts in the total");
        let counter = &self.slots[slot];
        counter.store(counter.load(Relaxed).wrapping_add(1), Relaxed);
    }

    /// Gives back what [`Member::reserve_in_slot`] took in `slot`.
    #[inline]
    pub(crate) fn release_in_slot(&self, slot: usize) {
        let counter = &self.slots[slot];
        let count = counter.load(Relaxed);
        debug_assert!(count > 0, "release without a reservation in this slot");
        counter.store(count.saturating_sub(1), Relaxed);
    }

    #[inline]
    pub(crate) fn is_healthy(&self) -> bool {
        self.word.load(Relaxed) & UNHEALTHY == 0
    }

    /// Whether the policy's per-endpoint state admits `req` (not ejected).
    #[inline]
    pub(crate) fn admits(&self, req: &crate::request::Request<'_>) -> bool {
        self.observer.as_ref().is_none_or(|o| o.admits(req))
    }

    /// Marks the backend healthy or not. The balancer's count of unhealthy
    /// members follows each change of a current member exactly once (the
    /// mark shares the word of the removal flag: a change racing with the
    /// removal is counted either here or by [`Member::retire`]), so that a
    /// pick can tell from that one count that every member is healthy.
    pub(crate) fn set_healthy(&self, healthy: bool) {
        let prev = if healthy {
            self.word.fetch_and(!UNHEALTHY, Relaxed)
        } else {
            self.word.fetch_or(UNHEALTHY, Relaxed)
        };
        let was_healthy = prev & UNHEALTHY == 0;
        if prev & REMOVED == 0 && was_healthy != healthy {
            if healthy {
                self.unhealthy.fetch_sub(1, Relaxed);
            } else {
                self.unhealthy.fetch_add(1, Relaxed);
            }
        }
    }

    /// Takes one slot whatever the load.
    #[inline]
    pub(crate) fn reserve(&self) {
        let prev = self.word.fetch_add(1, Relaxed);
        self.count_in_total(prev, 1);
    }

    /// Adds `delta` to the total if there is one and the backend was still a
    /// member when its word read `prev`.
    #[inline]
    fn count_in_total(&self, prev: u64, delta: i64) {
        if let Some(total) = &self.total {
            if prev & REMOVED == 0 {
                total.fetch_add(delta, Relaxed);
            }
        }
    }

    /// Takes one slot if the load stays within `cap` (compare-and-swap, so
    /// concurrent reservations never take the load past the cap they were
    /// checked against).
    #[inline]
    pub(crate) fn try_reserve(&self, cap: u64) -> bool {
        let mut cur = self.word.load(Relaxed);
        loop {
            if cur & COUNT >= cap {
                return false;
            }
            match self
                .word
                .compare_exchange_weak(cur, cur + 1, Relaxed, Relaxed)
            {
                Ok(_) => {
                    self.count_in_total(cur, 1);
                    return true;
                }
                Err(now) => cur = now,
            }
        }
    }

    #[inline]
    pub(crate) fn release(&self) {
        let prev = self.word.fetch_sub(1, Relaxed);
        debug_assert!(prev & COUNT > 0, "release without a reservation");
        self.count_in_total(prev, -1);
    }

    /// Whether [`Member::retire`] took it out of the membership.
    pub(crate) fn is_retired(&self) -> bool {
        self.word.load(Relaxed) & REMOVED != 0
    }

    /// Makes a retired backend a member again (the same endpoint added back
    /// while requests reserved on it are still running): its load, those
    /// requests, counts in the total again, and it starts healthy, as a new
    /// member does. A release racing with it is counted once, by whichever
    /// of the two the word orders first.
    pub(crate) fn rejoin(&self) {
        let prev = self.word.fetch_and(!(REMOVED | UNHEALTHY), Relaxed);
        if prev & REMOVED == 0 {
            return;
        }
        if let Some(total) = &self.total {
            total.fetch_add((prev & COUNT) as i64, Relaxed);
        }
    }

    /// Marks the backend as no longer a member: its load leaves the total now,
    /// and its outstanding guards will release without touching the total.
    pub(crate) fn retire(&self) {
        let prev = self.word.fetch_or(REMOVED, SeqCst);
        if prev & REMOVED != 0 {
            return;
        }
        // Its report leaves the balancer's sum of offsets with it.
        self.report.uncount(None, &self.fleet.offsets);
        if prev & UNHEALTHY != 0 {
            self.unhealthy.fetch_sub(1, Relaxed);
        }
        self.count_in_total(prev, -((prev & COUNT) as i64));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(total: &Arc<AtomicI64>) -> Member {
        Member::new(
            &Endpoint::new("a").unwrap(),
            Some(total.clone()),
            None,
            Arc::default(),
            Arc::default(),
        )
    }

    #[test]
    fn reserve_and_release_move_the_total() {
        let total = Arc::new(AtomicI64::new(0));
        let m = member(&total);
        m.reserve();
        assert!(m.try_reserve(2));
        assert!(!m.try_reserve(2), "the cap is 2");
        assert_eq!((m.load(), total.load(Relaxed)), (2, 2));
        m.release();
        m.release();
        assert_eq!((m.load(), total.load(Relaxed)), (0, 0));
    }

    #[test]
    fn retired_members_leave_the_total_once() {
        let total = Arc::new(AtomicI64::new(0));
        let m = member(&total);
        m.reserve();
        m.reserve();
        m.retire();
        assert_eq!(
            total.load(Relaxed),
            0,
            "removal takes its load out of the total"
        );
        m.release();
        m.reserve();
        m.release();
        m.release();
        assert_eq!(
            (m.load(), total.load(Relaxed)),
            (0, 0),
            "late releases do not count twice"
        );
    }

    #[test]
    fn untallied_members_count_only_themselves() {
        let m = Member::untallied(&Endpoint::new("a").unwrap());
        m.reserve();
        assert!(m.try_reserve(2));
        assert!(!m.try_reserve(2), "the cap is 2");
        m.retire();
        m.release();
        assert_eq!(m.load(), 1);
        m.release();
        assert_eq!(m.load(), 0);
    }

    /// Threads racing for the last slot under a cap of 1: the
    /// compare-and-swap lets exactly one in, so no thread ever sees a load
    /// of 2 (a check-then-add would let two in now and then).
    #[test]
    fn racing_reservations_never_pass_the_cap() {
        let member = Arc::new(Member::untallied(&Endpoint::new("a").unwrap()));
        let over = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (member, over) = (member.clone(), over.clone());
                std::thread::spawn(move || {
                    for _ in 0..200_000 {
                        if member.try_reserve(1) {
                            if member.load() > 1 {
                                over.fetch_add(1, Relaxed);
                            }
                            member.release();
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(over.load(Relaxed), 0, "a reservation went past the cap");
        assert_eq!(member.load(), 0);
    }

    /// The balancer's count of unhealthy members follows every change of a
    /// current member once, and a member leaves it when it is removed.
    #[test]
    fn unhealthy_count_follows_marks_and_removal() {
        let unhealthy = Arc::new(AtomicU64::new(0));
        let endpoint = Endpoint::new("a").unwrap();
        let a = Member::new(&endpoint, None, None, unhealthy.clone(), Arc::default());
        let b = Member::new(&endpoint, None, None, unhealthy.clone(), Arc::default());
        a.set_healthy(false);
        a.set_healthy(false);
        assert_eq!(unhealthy.load(Relaxed), 1, "marked twice, counted once");
        b.set_healthy(true);
        assert_eq!(unhealthy.load(Relaxed), 1, "already healthy");
        b.set_healthy(false);
        assert_eq!(unhealthy.load(Relaxed), 2);
        a.reserve();
        assert!(!a.is_healthy() && a.load() == 1, "the mark is not a load");
        a.set_healthy(true);
        assert!(a.is_healthy());
        assert_eq!((unhealthy.load(Relaxed), a.load()), (1, 1));
        b.retire();
        assert_eq!(unhealthy.load(Relaxed), 0, "removed while unhealthy");
        b.set_healthy(true);
        b.set_healthy(false);
        b.retire();
        assert_eq!(
            unhealthy.load(Relaxed),
            0,
            "a removed member counts no more"
        );
    }

    /// Marks and removal racing from several threads leave the count exact.
    #[test]
    fn unhealthy_count_survives_races_with_removal() {
        for _ in 0..200 {
            let unhealthy = Arc::new(AtomicU64::new(0));
            let endpoint = Endpoint::new("a").unwrap();
            let member = Arc::new(Member::new(
                &endpoint,
                None,
                None,
                unhealthy.clone(),
                Arc::default(),
            ));
            std::thread::scope(|s| {
                for t in 0..2 {
                    let member = &member;
                    s.spawn(move || {
                        for i in 0..200 {
                            member.set_healthy((i + t) % 2 == 0);
                        }
                    });
                }
                s.spawn(|| member.retire());
            });
            assert_eq!(unhealthy.load(Relaxed), 0, "the member was removed");
        }
    }
}
