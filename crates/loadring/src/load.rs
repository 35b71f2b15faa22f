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

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use crate::endpoint::Endpoint;

const REMOVED: u64 = 1 << 63;
const COUNT: u64 = REMOVED - 1;

/// The shared state of one backend: identity, in-flight count, health.
#[derive(Debug)]
pub(crate) struct Member {
    addr: Box<str>,
    tag: Option<Box<str>>,
    /// Low 63 bits: requests in flight. Top bit: no longer a member.
    word: AtomicU64,
    healthy: AtomicBool,
    /// In-flight requests summed over the current members of the balancer,
    /// if the balancer keeps that sum.
    total: Option<Arc<AtomicI64>>,
}

impl Member {
    /// A member whose reservations are counted in `total` too.
    pub(crate) fn new(endpoint: &Endpoint, total: Arc<AtomicI64>) -> Self {
        Member {
            total: Some(total),
            ..Member::untallied(endpoint)
        }
    }

    /// A member of a balancer that keeps no running total.
    pub(crate) fn untallied(endpoint: &Endpoint) -> Self {
        Member {
            addr: endpoint.addr().into(),
            tag: endpoint.tag().map(Into::into),
            word: AtomicU64::new(0),
            healthy: AtomicBool::new(true),
            total: None,
        }
    }

    pub(crate) fn addr(&self) -> &str {
        &self.addr
    }

    pub(crate) fn tag(&self) -> Option<&str> {
        self.tag.as_deref()
    }

    /// Requests in flight on this backend.
    #[inline]
    pub(crate) fn load(&self) -> u64 {
        self.word.load(Relaxed) & COUNT
    }

    #[inline]
    pub(crate) fn is_healthy(&self) -> bool {
        self.healthy.load(Relaxed)
    }

    pub(crate) fn set_healthy(&self, healthy: bool) {
        self.healthy.store(healthy, Relaxed);
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
    fn release(&self) {
        let prev = self.word.fetch_sub(1, Relaxed);
        debug_assert!(prev & COUNT > 0, "release without a reservation");
        self.count_in_total(prev, -1);
    }

    /// Marks the backend as no longer a member: its load leaves the total now,
    /// and its outstanding guards will release without touching the total.
    pub(crate) fn retire(&self) {
        let prev = self.word.fetch_or(REMOVED, Relaxed);
        self.count_in_total(prev, -((prev & COUNT) as i64));
    }
}

/// A picked endpoint, holding one in-flight slot until dropped.
///
/// Dropping the guard releases the slot exactly once, also when the holder
/// panics or a future holding it is cancelled. A guard whose endpoint was
/// removed from the balancer in the meantime releases harmlessly.
///
/// ```
/// use loadring::{Balancer, Endpoint, PolicySpec, Request};
///
/// let balancer = Balancer::new("c_murmurhash_bl".parse()?, [Endpoint::new("10.0.0.1:80")?])?;
/// let pick = balancer.pick(&Request::key("user:42"))?;
/// assert_eq!(pick.addr(), "10.0.0.1:80");
/// assert_eq!(balancer.total_in_flight(), 1);
/// drop(pick);
/// assert_eq!(balancer.total_in_flight(), 0);
/// # Ok::<(), loadring::Error>(())
/// ```
#[derive(Debug)]
#[must_use = "the slot is released as soon as the guard is dropped"]
pub struct Pick {
    member: Arc<Member>,
}

impl Pick {
    /// Wraps a member whose slot the caller has just reserved.
    pub(crate) fn new(member: Arc<Member>) -> Self {
        Pick { member }
    }

    /// The address of the picked endpoint.
    pub fn addr(&self) -> &str {
        self.member.addr()
    }

    /// The tag of the picked endpoint, if it has one.
    pub fn tag(&self) -> Option<&str> {
        self.member.tag()
    }

    /// Requests in flight on the picked endpoint, this one included.
    pub fn in_flight(&self) -> u64 {
        self.member.load()
    }
}

impl Drop for Pick {
    fn drop(&mut self) {
        self.member.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(total: &Arc<AtomicI64>) -> Member {
        Member::new(&Endpoint::new("a").unwrap(), total.clone())
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
}
