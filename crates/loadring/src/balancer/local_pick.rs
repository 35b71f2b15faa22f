//! `LocalPick`: the guard of a local handle, and the snapshots it points into.
//!
//! A guard of [`Balancer::pick`](crate::Balancer::pick) owns a reference
//! count on its backend, so that it can go anywhere. A guard of a
//! [`LocalBalancer`](crate::LocalBalancer) stays on its thread and cannot
//! outlive its handle, so it need not own anything: it points into the
//! snapshot the handle picked it from. Measured, a reference count taken
//! and given back per pick (even a non-atomic one) was 1.5 to 2.5 ns of a
//! 16 to 20 ns pick and release: the count's increment and decrement form a
//! chain through one memory word from each pick to the next.
//!
//! This module is the only place of the crate with `unsafe` code: it makes
//! those pointers and follows them. Why they stay valid:
//!
//! 1. A `LocalPick<'h>` borrows its handle for `'h`, so it is dropped before
//!    the handle (and its [`Kept`] snapshots) can be.
//! 2. [`Kept`] lets go of a snapshot it no longer picks from only when every
//!    guard made from it has been dropped: each snapshot counts the guards
//!    made from it and the guards dropped (two plain counters that only
//!    grow). A snapshot replaced while guards of it live waits in [`Kept`]'s
//!    retired list and is let go at a later replacement once its counts
//!    agree, or with the handle.
//! 3. A snapshot owns its backends and their counters (`Arc`s), so a pointer
//!    to one lives as long as the snapshot.
//!
//! A guard leaked with `mem::forget` keeps its snapshot in the retired list
//! until the handle is dropped: memory, never a dangling pointer.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::marker::PhantomData;
use std::ops::Deref;
use std::ptr::NonNull;
use std::rc::Rc;
use std::sync::Arc;

use crate::balancer::backend::Backend;
use crate::balancer::engine::Engine;
use crate::balancer::Snapshot;
use crate::error::PickError;
use crate::inflight::member::Member;
pub(crate) use crate::inflight::member::SHARED;
use crate::inflight::outcome::Outcome;

/// A snapshot as a local handle keeps it: what a pick reads, one step away.
pub(crate) struct Cached<T> {
    /// The balancer generation it was current at.
    pub(crate) generation: u64,
    pub(crate) snapshot: Arc<Snapshot<T>>,
    /// The snapshot's in-flight counters, by backend index.
    pub(crate) members: Box<[Arc<Member>]>,
    /// The snapshot's engine.
    pub(crate) engine: Option<Engine>,
    /// The handle's counter slot, or [`SHARED`] if it holds none.
    pub(crate) slot: u32,
    /// Guards made from this snapshot.
    made: Cell<u64>,
    /// Guards made from this snapshot and dropped since.
    dropped: Cell<u64>,
}

impl<T> Cached<T> {
    pub(crate) fn new(generation: u64, snapshot: Arc<Snapshot<T>>, slot: u32) -> Self {
        let members = snapshot.backends.iter().map(|b| b.member.clone()).collect();
        let engine = snapshot.engine().cloned();
        Cached {
            generation,
            snapshot,
            members,
            engine,
            slot,
            made: Cell::new(0),
            dropped: Cell::new(0),
        }
    }

    fn guards_alive(&self) -> bool {
        self.made.get() != self.dropped.get()
    }
}

/// The snapshots of one local handle: the one it picks from, and those it
/// replaced while guards of theirs were alive.
pub(crate) struct Kept<T> {
    current: RefCell<Rc<Cached<T>>>,
    retired: RefCell<Vec<Rc<Cached<T>>>>,
}

impl<T> Kept<T> {
    pub(crate) fn new(first: Cached<T>) -> Self {
        Kept {
            current: RefCell::new(Rc::new(first)),
            retired: RefCell::new(Vec::new()),
        }
    }

    /// The current snapshot, shared (for a [`Route`](crate::Route)), after
    /// [`Kept::renew`] if it is older than `generation`.
    #[inline]
    pub(crate) fn current(
        &self,
        generation: u64,
        fresh: impl FnOnce() -> Cached<T>,
    ) -> Rc<Cached<T>> {
        self.renew(generation, fresh);
        self.current.borrow().clone()
    }

    /// Replaces the current snapshot with `fresh()` if it is older than
    /// `generation`.
    #[inline(always)]
    fn renew(&self, generation: u64, fresh: impl FnOnce() -> Cached<T>) {
        if self.current.borrow().generation != generation {
            self.replace(fresh());
        }
    }

    #[cold]
    #[inline(never)]
    fn replace(&self, fresh: Cached<T>) {
        let old = std::mem::replace(&mut *self.current.borrow_mut(), Rc::new(fresh));
        let mut retired = self.retired.borrow_mut();
        retired.retain(|cached| cached.guards_alive());
        if old.guards_alive() {
            retired.push(old);
        }
    }

    /// Snapshots kept for guards of earlier memberships.
    pub(crate) fn retired(&self) -> usize {
        self.retired.borrow().len()
    }

    /// A guard from the current snapshot (renewed first if older than
    /// `generation`): `choose` picks a backend of it and reserves its
    /// in-flight slot, in the handle's counter slot it returns or in the
    /// shared counter ([`SHARED`]).
    #[inline(always)]
    pub(crate) fn pick<'h>(
        &'h self,
        generation: u64,
        fresh: impl FnOnce() -> Cached<T>,
        choose: impl FnOnce(&Cached<T>) -> Result<(usize, u32), PickError>,
    ) -> Result<LocalPick<'h, T>, PickError> {
        self.renew(generation, fresh);
        let current = self.current.borrow();
        let cached: &Cached<T> = &current;
        let (index, slot) = choose(cached)?;
        cached.made.set(cached.made.get() + 1);
        Ok(LocalPick {
            member: NonNull::from(&*cached.members[index]),
            cached: NonNull::from(cached),
            index,
            slot,
            handle: PhantomData,
        })
    }
}

/// An endpoint picked through a [`LocalBalancer`](crate::LocalBalancer),
/// holding one in-flight slot until dropped, like [`Pick`](crate::Pick), but
/// bound to the handle that picked it: it cannot outlive the handle (`'h`)
/// nor leave its thread (it is neither `Send` nor `Sync`), and it costs no
/// reference count. It dereferences to the [`Backend`] picked.
///
/// ```compile_fail
/// use loadring::{Balancer, Endpoint, Request};
///
/// let balancer = Balancer::new("maglev".parse().unwrap(), [Endpoint::new("a:1").unwrap()]).unwrap();
/// let pick = {
///     let local = balancer.local();
///     local.pick(&Request::key("k")).unwrap()
/// }; // error: the guard borrows the handle dropped here
/// ```
#[must_use = "the slot is released as soon as the guard is dropped"]
pub struct LocalPick<'h, T = ()> {
    /// The snapshot the guard was made from, kept by the handle (see the
    /// module's doc).
    cached: NonNull<Cached<T>>,
    /// The backend's counters, owned by that snapshot.
    member: NonNull<Member>,
    index: usize,
    /// The handle's counter slot the reservation is in, or [`SHARED`].
    slot: u32,
    handle: PhantomData<&'h Kept<T>>,
}

impl<T> LocalPick<'_, T> {
    #[inline]
    fn cached(&self) -> &Cached<T> {
        // SAFETY: the snapshot is kept by the handle this guard borrows until
        // the guard is dropped (module doc, points 1 and 2).
        #[allow(unsafe_code)]
        unsafe {
            self.cached.as_ref()
        }
    }

    #[inline]
    fn member(&self) -> &Member {
        // SAFETY: the member is owned by the snapshot, alive as long as this
        // guard (module doc, point 3).
        #[allow(unsafe_code)]
        unsafe {
            self.member.as_ref()
        }
    }

    /// The handle's counter slot the reservation is counted in, `None` if
    /// it is in the shared counter. For the crate's tests.
    #[doc(hidden)]
    pub fn counter_slot(&self) -> Option<u32> {
        (self.slot != SHARED).then_some(self.slot)
    }

    /// Reports how the request went, then releases the slot (see
    /// [`Pick::finish`](crate::Pick::finish)).
    pub fn finish(self, outcome: Outcome) {
        if let Some(report) = outcome.report() {
            // This guard's slot is released right after: one event.
            self.member().apply_report(report, 1);
        }
        if let Some(observer) = self.member().observer() {
            observer.observe(&outcome);
        }
    }
}

impl<T> Deref for LocalPick<'_, T> {
    type Target = Backend<T>;

    #[inline]
    fn deref(&self) -> &Backend<T> {
        &self.cached().snapshot.backends[self.index]
    }
}

impl<T> Drop for LocalPick<'_, T> {
    #[inline]
    fn drop(&mut self) {
        match self.slot {
            SHARED => self.member().release(),
            slot => self.member().release_in_slot(slot as usize),
        }
        let cached = self.cached();
        cached.dropped.set(cached.dropped.get() + 1);
    }
}

impl<T> fmt::Debug for LocalPick<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalPick")
            .field("endpoint", self.endpoint())
            .field("in_flight", &self.in_flight())
            .finish()
    }
}
