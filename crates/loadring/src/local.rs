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
//! its guards hold the snapshot by a non-atomic reference count. What is
//! left of a pick is the policy's lookup and the in-flight count. Policies
//! that read loads to decide (bounded, p2c, `la`...) count in the backend's
//! shared counter (an atomic read-modify-write to reserve, one to release);
//! plain hashing policies, which never read a load to place a key, count in
//! a slot of the backend that the handle holds alone (a plain load and store
//! each way), and a backend's load adds its slots when asked. A balancer
//! has four such slots: a fifth handle alive at once counts in the shared
//! counter.
//!
//! Its limits: guards stay on the thread ([`LocalPick`] is neither `Send`
//! nor `Sync`), a handle that stops picking keeps the last snapshot it saw
//! (its ring or table and the backends) alive until it picks again or is
//! dropped, and only four handles at a time get a slot of their own.

use std::cell::RefCell;
use std::fmt;
use std::rc::Rc;
use std::sync::atomic::{AtomicU32, Ordering::Acquire, Ordering::Relaxed};
use std::sync::Arc;

use crate::balancer::{pick_index, Balancer, Snapshot};
use crate::endpoint::Endpoint;
use crate::engine::Engine;
use crate::error::PickError;
use crate::load::{Backend, Member, Outcome, SLOTS};
use crate::request::Request;
use crate::route::Route;

/// A snapshot and the balancer generation it was current at.
pub(crate) struct Cached<T> {
    generation: u64,
    pub(crate) snapshot: Arc<Snapshot<T>>,
    /// The snapshot's in-flight counters, by backend index, one step from
    /// the guard: a release follows two pointers to the counter instead of
    /// five (snapshot, backends, backend, member).
    members: Box<[Arc<Member>]>,
    /// The snapshot's engine, one step nearer too.
    engine: Option<Engine>,
    /// The counter slot of the handle that made this, if it holds one; kept
    /// while any guard of the handle lives.
    slot: Option<Rc<SlotClaim>>,
}

/// One of a balancer's counter slots, held by one local handle (and its
/// guards) until the last of them is dropped.
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
/// Its guards ([`LocalPick`]) stay on the thread that picked; use
/// [`Balancer::pick`] for a guard that moves into a future or to another
/// thread. A handle keeps the last snapshot it picked from (the ring or
/// table and the backends of that membership) alive until its next pick or
/// its drop: keep handles on threads that pick, not in idle places.
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
    cached: RefCell<Rc<Cached<T>>>,
    slot: Option<Rc<SlotClaim>>,
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
        let slot = SlotClaim::claim(balancer.slots()).map(Rc::new);
        let cached = RefCell::new(Rc::new(Self::fresh(balancer, &slot)));
        LocalBalancer {
            balancer,
            cached,
            slot,
        }
    }

    fn fresh(balancer: &Balancer<T>, slot: &Option<Rc<SlotClaim>>) -> Cached<T> {
        // The generation is read first: a change published in between makes
        // the next pick look again, never miss it.
        let generation = balancer.generation().load(Acquire);
        let snapshot = balancer.snapshot_arc();
        let members = snapshot.backends.iter().map(|b| b.member.clone()).collect();
        let engine = snapshot.engine().cloned();
        Cached {
            generation,
            snapshot,
            members,
            engine,
            slot: slot.clone(),
        }
    }

    /// The current snapshot: the cached one unless the membership changed.
    #[inline]
    fn current(&self) -> Rc<Cached<T>> {
        let generation = self.balancer.generation().load(Acquire);
        {
            let cached = self.cached.borrow();
            if cached.generation == generation {
                return cached.clone();
            }
        }
        self.refresh()
    }

    #[cold]
    fn refresh(&self) -> Rc<Cached<T>> {
        let fresh = Rc::new(Self::fresh(self.balancer, &self.slot));
        *self.cached.borrow_mut() = fresh.clone();
        fresh
    }

    /// The balancer this handle picks from.
    pub fn balancer(&self) -> &'b Balancer<T> {
        self.balancer
    }

    /// Picks an endpoint for `req` and holds one in-flight slot on it until
    /// the returned guard is dropped, as [`Balancer::pick`] does.
    ///
    /// # Errors
    /// As [`Balancer::pick`].
    #[inline]
    pub fn pick(&self, req: &Request<'_>) -> Result<LocalPick<T>, PickError> {
        let cached = self.current();
        if let (Some(engine), Some(claim)) = (&cached.engine, &cached.slot) {
            if let Some(picked) = engine.pick_in_slot(req, claim.slot) {
                return Ok(LocalPick {
                    index: picked?,
                    slot: Some(claim.slot),
                    snapshot: cached,
                });
            }
        }
        let index = pick_index(cached.engine.as_ref(), cached.members.len(), req)?;
        Ok(LocalPick {
            snapshot: cached,
            index,
            slot: None,
        })
    }

    /// Where a hashing policy places `req` with no load, reserving nothing,
    /// as [`Balancer::route`] does.
    ///
    /// # Errors
    /// As [`Balancer::route`].
    #[inline]
    pub fn route(&self, req: &Request<'_>) -> Result<Option<Route<T>>, PickError> {
        let cached = self.current();
        match cached.snapshot.route_index(req)? {
            Some(index) => Ok(Some(Route::local(cached, index))),
            None => Ok(None),
        }
    }
}

/// An endpoint picked through a [`LocalBalancer`], holding one in-flight slot
/// until dropped, like [`Pick`](crate::Pick) but bound to the thread that
/// picked (it is neither `Send` nor `Sync`).
#[must_use = "the slot is released as soon as the guard is dropped"]
pub struct LocalPick<T = ()> {
    snapshot: Rc<Cached<T>>,
    index: usize,
    /// The handle's counter slot the reservation is in (a plain hashing
    /// policy), or `None`: the backend's shared counter. Kept here, not
    /// read from the claim, so that a release follows one pointer less.
    slot: Option<usize>,
}

impl<T> LocalPick<T> {
    #[inline]
    fn backend_entry(&self) -> &Backend<T> {
        &self.snapshot.snapshot.backends[self.index]
    }

    /// The caller's value for the picked endpoint.
    pub fn backend(&self) -> &T {
        &self.backend_entry().value
    }

    /// The picked endpoint.
    pub fn endpoint(&self) -> &Endpoint {
        &self.backend_entry().endpoint
    }

    /// The address of the picked endpoint.
    pub fn addr(&self) -> &str {
        self.backend_entry().endpoint.addr()
    }

    /// The tag of the picked endpoint, if it has one.
    pub fn tag(&self) -> Option<&str> {
        self.backend_entry().endpoint.tag()
    }

    /// Requests in flight on the picked endpoint, this one included.
    pub fn in_flight(&self) -> u64 {
        self.backend_entry().member.load()
    }

    /// Reports how the request went, then releases the slot (see
    /// [`Pick::finish`](crate::Pick::finish)).
    pub fn finish(self, outcome: Outcome) {
        if let Some(observer) = self.backend_entry().member.observer() {
            observer.observe(&outcome);
        }
    }
}

impl<T> Drop for LocalPick<T> {
    #[inline]
    fn drop(&mut self) {
        let member = &self.snapshot.members[self.index];
        match self.slot {
            Some(slot) => member.release_in_slot(slot),
            None => member.release(),
        }
    }
}

impl<T> fmt::Debug for LocalPick<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalPick")
            .field("endpoint", self.endpoint())
            .field("in_flight", &self.in_flight())
            .finish()
    }
}
