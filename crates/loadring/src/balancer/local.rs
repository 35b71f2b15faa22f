//! `LocalBalancer`: one thread's handle on a balancer, picking at the cost
//! of a lookup and the in-flight counter.
//!
//! [`Balancer::pick`] reads the shared snapshot through an atomic pointer
//! (arc-swap's protection of the read: a store and a compare-and-swap on the
//! thread's debt slot) and gives back a guard that owns a reference count on
//! the backend (one atomic increment, one decrement at drop). Both are the
//! price of a guard that can go anywhere: to another thread, into a future.
//! A thread that picks and releases on its own pays them for nothing.
//!
//! The local handle keeps the snapshot it last used and checks, per pick,
//! one counter the balancer bumps on every membership change (a plain load);
//! its guards borrow the handle and point into that snapshot, which the
//! handle keeps while they live (see `balancer/local_pick.rs`). What is left of a
//! pick is the policy's lookup and the in-flight count. Policies
//! that read loads to decide (bounded, p2c, `la`...) count in the backend's
//! shared counter (an atomic read-modify-write to reserve, one to release);
//! plain hashing policies, which never read a load to place a key, count in
//! a slot of the backend that the handle holds alone (a plain load and store
//! each way), and a backend's load adds its slots when asked. A balancer
//! has four such slots: a fifth handle alive at once counts in the shared
//! counter.
//!
//! Its limits: guards stay on the thread ([`LocalPick`] is neither `Send`
//! nor `Sync`) and cannot outlive the handle, a handle that stops picking
//! keeps the last snapshot it saw (its ring or table and the backends) alive
//! until it picks again or is dropped (and an earlier one while a guard of
//! it lives), and only four handles at a time get a slot of their own.

use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering::Acquire, Ordering::Relaxed};
use std::sync::Arc;

use crate::balancer::local_pick::{Cached, Kept, LocalPick, SHARED};
use crate::balancer::route::Route;
use crate::balancer::{pick_index, Balancer};
use crate::error::PickError;
use crate::inflight::member::SLOTS;
use crate::request::Request;

/// One of a balancer's counter slots, held by one local handle until it is
/// dropped (after its guards, which borrow it).
pub(crate) struct SlotClaim {
    claimed: Arc<AtomicU32>,
    slot: usize,
}

impl SlotClaim {
    /// Claims a free slot in the bit set `claimed`, if any.
    fn claim(claimed: &Arc<AtomicU32>) -> Option<SlotClaim> {
        let mut current = claimed.load(Relaxed);
        loop {
            let slot = (!current).trailing_zeros() as usize;
            if slot >= SLOTS {
                return None;
            }
            // Acquire: the previous holder's last writes to this slot (its
            // releases) happen before ours.
            match claimed.compare_exchange_weak(current, current | 1 << slot, Acquire, Relaxed) {
                Ok(_) => {
                    return Some(SlotClaim {
                        claimed: claimed.clone(),
                        slot,
                    })
                }
                Err(now) => current = now,
            }
        }
    }
}

impl Drop for SlotClaim {
    fn drop(&mut self) {
        // Release: this holder's writes to the slot happen before the next
        // holder's.
        self.claimed
            .fetch_and(!(1 << self.slot), std::sync::atomic::Ordering::Release);
    }
}

/// One thread's handle on a [`Balancer`], made by [`Balancer::local`]: picks
/// that cost the policy's lookup and the in-flight count, nothing more. For
/// plain hashing policies the count goes to a counter slot the handle holds
/// alone in each backend (no atomic read-modify-write); a balancer has four
/// slots, and a handle made while four others are alive counts in the
/// shared counters instead (one atomic add to reserve, one to release), as
/// the picks of other policies always do.
///
/// It sees membership changes at its next pick, like [`Balancer::pick`].
/// Its guards ([`LocalPick`]) borrow the handle and stay on the thread that
/// picked; use [`Balancer::pick`] for a guard that moves into a future or to
/// another thread, or outlives the handle. A handle keeps the last snapshot
/// it picked from (the ring or table and the backends of that membership)
/// alive until its next pick or its drop, and an earlier one while a guard
/// of it lives: keep handles on threads that pick, not in idle places.
///
/// ```
/// use loadring::{Balancer, Endpoint, Request};
///
/// let endpoints = ["10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80"].map(|a| Endpoint::new(a).unwrap());
/// let balancer = Balancer::new("c_murmurhash_bl".parse()?, endpoints)?;
/// std::thread::scope(|s| {
///     for worker in 0..2 {
///         let balancer = &balancer;
///         s.spawn(move || {
///             let local = balancer.local();
///             for i in 0..100 {
///                 let key = format!("user:{worker}:{i}");
///                 let pick = local.pick(&Request::key(&key)).unwrap();
///                 assert_eq!(pick.in_flight(), 1);
///                 // ... send the request to pick.addr() ...
///             } // each guard releases its slot here
///         });
///     }
/// });
/// assert_eq!(balancer.total_in_flight(), 0);
/// # Ok::<(), loadring::Error>(())
/// ```
pub struct LocalBalancer<'b, T = ()> {
    balancer: &'b Balancer<T>,
    kept: Kept<T>,
    /// Dropped after `kept`, with the handle: its guards, which count in the
    /// slot, cannot outlive the handle.
    slot: Option<SlotClaim>,
}

impl<T> fmt::Debug for LocalBalancer<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalBalancer")
            .field("balancer", self.balancer)
            .finish_non_exhaustive()
    }
}

impl<'b, T> LocalBalancer<'b, T> {
    pub(crate) fn new(balancer: &'b Balancer<T>) -> Self {
        let slot = SlotClaim::claim(balancer.slots());
        let number = slot.as_ref().map_or(SHARED, |claim| claim.slot as u32);
        LocalBalancer {
            balancer,
            kept: Kept::new(Self::fresh(balancer, number)),
            slot,
        }
    }

    fn fresh(balancer: &Balancer<T>, slot: u32) -> Cached<T> {
        // The generation is read first: a change published in between makes
        // the next pick look again, never miss it.
        let generation = balancer.generation().load(Acquire);
        Cached::new(generation, balancer.snapshot_arc(), slot)
    }

    /// This handle's counter slot, or [`SHARED`].
    fn slot_number(&self) -> u32 {
        self.slot.as_ref().map_or(SHARED, |claim| claim.slot as u32)
    }

    /// The balancer this handle picks from.
    pub fn balancer(&self) -> &'b Balancer<T> {
        self.balancer
    }

    /// Earlier snapshots this handle keeps for the guards of theirs still
    /// alive. For the crate's tests (how long a snapshot is kept is the
    /// soundness argument of `balancer/local_pick.rs`).
    #[doc(hidden)]
    pub fn kept_snapshots(&self) -> usize {
        self.kept.retired()
    }

    /// The in-flight counter slot this handle holds, if it holds one (at
    /// most [`LOCAL_SLOTS`](crate::LOCAL_SLOTS) handles of a balancer do at
    /// a time). For the crate's tests.
    #[doc(hidden)]
    pub fn counter_slot(&self) -> Option<u32> {
        self.slot.as_ref().map(|claim| claim.slot as u32)
    }

    /// Picks an endpoint for `req` and holds one in-flight slot on it until
    /// the returned guard is dropped, as [`Balancer::pick`] does.
    ///
    /// # Errors
    /// As [`Balancer::pick`].
    #[inline]
    pub fn pick(&self, req: &Request<'_>) -> Result<LocalPick<'_, T>, PickError> {
        let generation = self.balancer.generation().load(Acquire);
        let fresh = || Self::fresh(self.balancer, self.slot_number());
        self.kept.pick(generation, fresh, |cached| {
            if let Some(engine) = &cached.engine {
                if let Some(picked) = engine.pick_local(req, cached.slot) {
                    return picked;
                }
            }
            Self::pick_shared(cached, req)
        })
    }

    /// A pick counted in the backend's shared counter.
    #[inline(never)]
    fn pick_shared(cached: &Cached<T>, req: &Request<'_>) -> Result<(usize, u32), PickError> {
        let index = pick_index(cached.engine.as_ref(), cached.members.len(), req)?;
        Ok((index, SHARED))
    }

    /// Where a hashing policy places `req` with no load, reserving nothing,
    /// as [`Balancer::route`] does.
    ///
    /// # Errors
    /// As [`Balancer::route`].
    #[inline]
    pub fn route(&self, req: &Request<'_>) -> Result<Option<Route<T>>, PickError> {
        let generation = self.balancer.generation().load(Acquire);
        let cached = self.kept.current(generation, || {
            Self::fresh(self.balancer, self.slot_number())
        });
        match cached.snapshot.route_index(req)? {
            Some(index) => Ok(Some(Route::local(cached, index))),
            None => Ok(None),
        }
    }
}
