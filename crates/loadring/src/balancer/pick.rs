//! `Pick`: the guard of [`Balancer::pick`](crate::Balancer::pick), holding
//! one in-flight slot on its backend until dropped or finished.

use std::ops::Deref;
use std::sync::Arc;

use crate::balancer::backend::Backend;
use crate::inflight::outcome::Outcome;

/// A picked endpoint, holding one in-flight slot until dropped.
///
/// It dereferences to the [`Backend`] picked: its endpoint, the caller's
/// value for it ([`Backend::value`]: a connection pool, a client, an
/// address) with no lookup, its load. Dropping the guard
/// releases the slot exactly once, also when the holder panics or a future
/// holding it is cancelled. A guard whose endpoint was removed from the
/// balancer in the meantime releases harmlessly. [`Pick::finish`] reports how
/// the request went before releasing, for policies that learn from it.
///
/// ```
/// use loadring::{Balancer, Endpoint, PolicySpec, Request};
///
/// let balancer = Balancer::new("c_murmurhash_bl".parse()?, [Endpoint::new("10.0.0.1:80")?])?;
/// let pick = balancer.pick(&Request::key("user:42"))?;
/// assert_eq!(pick.addr(), "10.0.0.1:80");
/// assert_eq!(pick.in_flight(), 1);
/// assert_eq!(balancer.total_in_flight(), 1);
/// drop(pick);
/// assert_eq!(balancer.total_in_flight(), 0);
/// # Ok::<(), loadring::Error>(())
/// ```
#[derive(Debug)]
#[must_use = "the slot is released as soon as the guard is dropped"]
pub struct Pick<T = ()> {
    backend: Arc<Backend<T>>,
    spilled: bool,
}

impl<T> Pick<T> {
    /// Wraps a backend whose slot the caller has just reserved.
    #[inline]
    pub(crate) fn new(backend: Arc<Backend<T>>) -> Self {
        Pick {
            backend,
            spilled: false,
        }
    }

    /// Marks the pick as spilled when `spilled`.
    #[inline]
    pub(crate) fn spilled_if(mut self, spilled: bool) -> Self {
        self.spilled = spilled;
        self
    }

    /// Whether this bounded pick left the request's owner (the endpoint an
    /// unbounded pick of the same request would take, past unhealthy and
    /// excluded ones) because the owner was at its cap: loadring's
    /// `load_factor=`, HAProxy's `balance=`, Envoy's `hash_balance_factor=`.
    /// Always `false` for unbounded policies and for guards reserved from
    /// [`Balancer::candidates`](crate::Balancer::candidates), which the
    /// caller chose. Known from the pick itself: no second walk.
    ///
    /// ```
    /// use loadring::{Balancer, Endpoint, Request};
    ///
    /// let endpoints = ["a:80", "b:80", "c:80"].map(|a| Endpoint::new(a).unwrap());
    /// // A cap of 1 in flight per endpoint while 1 is in flight in all.
    /// let b = Balancer::new("c_murmurhash:load_factor=1.01".parse()?, endpoints)?;
    /// let first = b.pick(&Request::key("hot"))?;
    /// assert!(!first.spilled(), "the owner had room");
    /// let second = b.pick(&Request::key("hot"))?;
    /// assert!(second.spilled(), "the owner was at its cap");
    /// assert_ne!(second.addr(), first.addr());
    /// # Ok::<(), loadring::Error>(())
    /// ```
    #[inline]
    pub fn spilled(&self) -> bool {
        self.spilled
    }

    /// Reports how the request went, then releases the slot. Policies that
    /// learn from outcomes (see
    /// [`Policy::observer`](crate::policy::Policy::observer)) see it; for the
    /// others this is the same as dropping the guard.
    pub fn finish(self, outcome: Outcome) {
        let member = &self.backend.member;
        if let Some(report) = outcome.report() {
            // This guard's slot is released right after: one event.
            member.apply_report(report, 1);
        }
        if let Some(observer) = member.observer() {
            observer.observe(&outcome);
        }
    }
}

impl<T> Deref for Pick<T> {
    type Target = Backend<T>;

    #[inline]
    fn deref(&self) -> &Backend<T> {
        &self.backend
    }
}

impl<T> Drop for Pick<T> {
    #[inline]
    fn drop(&mut self) {
        self.backend.member.release();
    }
}
