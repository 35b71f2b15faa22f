//! Static dispatch to the built-in pickers a pick meets most.
//!
//! A [`Picker`] is a trait object, so every pick through it is an indirect
//! call the compiler cannot inline: the key hash, the lookup and the
//! reservation stay separate functions. The most used hashing policies
//! (brpc's and the other rings, Maglev) are recognised once, when a
//! snapshot is built, and called by their concrete type from then on; every
//! other policy (wrapped by the endpoint lifecycle, a locality policy, a
//! policy from outside the crate) goes through the trait object as before.
//!
//! The variants are placements, not families: a new family whose scheme
//! builds one of these placements (a `RingPlacement`, a `MaglevTable`) is
//! called by type with no change here, and any other goes through `Other`.
//!
//! They also pick for a local handle, plain ones with the reservation in
//! the handle's own counter (see `inflight/member.rs`).

use std::any::Any;
use std::sync::Arc;

use crate::error::PickError;
use crate::placement::envoy::maglev::MaglevTable;
use crate::placement::hashing::{Hashing, RingPlacement};
use crate::policy::Picker;
use crate::request::Request;

/// One picker, by concrete type where it is a hot built-in one.
#[derive(Debug, Clone)]
pub(crate) enum Engine {
    /// A 32-bit ring (brpc, libketama, nginx).
    Ring(Arc<Hashing<RingPlacement<u32>>>),
    /// A 64-bit ring (Envoy's `ring_hash`).
    Ring64(Arc<Hashing<RingPlacement<u64>>>),
    /// Envoy's Maglev table.
    Maglev(Arc<Hashing<MaglevTable>>),
    /// Any other picker.
    Other(Arc<dyn Picker>),
}

impl Engine {
    pub(crate) fn new(picker: Arc<dyn Picker>) -> Self {
        let any: Arc<dyn Any + Send + Sync> = picker.clone();
        let any = match any.downcast() {
            Ok(ring) => return Engine::Ring(ring),
            Err(any) => any,
        };
        let any = match any.downcast() {
            Ok(ring) => return Engine::Ring64(ring),
            Err(any) => any,
        };
        match any.downcast() {
            Ok(maglev) => Engine::Maglev(maglev),
            Err(_) => Engine::Other(picker),
        }
    }

    /// The variant's name, for tests.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Engine::Ring(_) => "ring",
            Engine::Ring64(_) => "ring64",
            Engine::Maglev(_) => "maglev",
            Engine::Other(_) => "other",
        }
    }

    /// The picker, whatever its type.
    pub(crate) fn picker(&self) -> &dyn Picker {
        match self {
            Engine::Ring(ring) => &**ring,
            Engine::Ring64(ring) => &**ring,
            Engine::Maglev(maglev) => &**maglev,
            Engine::Other(picker) => &**picker,
        }
    }

    /// The picker, shared.
    pub(crate) fn shared(&self) -> Arc<dyn Picker> {
        match self {
            Engine::Ring(ring) => ring.clone(),
            Engine::Ring64(ring) => ring.clone(),
            Engine::Maglev(maglev) => maglev.clone(),
            Engine::Other(picker) => picker.clone(),
        }
    }

    #[inline]
    pub(crate) fn pick(&self, req: &Request<'_>) -> Result<usize, PickError> {
        match self {
            Engine::Ring(ring) => ring.pick(req),
            Engine::Ring64(ring) => ring.pick(req),
            Engine::Maglev(maglev) => maglev.pick(req),
            Engine::Other(picker) => picker.pick(req),
        }
    }

    /// A pick, and whether it spilled (see [`Picker::pick_spilling`]).
    #[inline]
    pub(crate) fn pick_spilling(&self, req: &Request<'_>) -> Result<(usize, bool), PickError> {
        match self {
            Engine::Ring(ring) => ring.pick_spilling(req),
            Engine::Ring64(ring) => ring.pick_spilling(req),
            Engine::Maglev(maglev) => maglev.pick_spilling(req),
            Engine::Other(picker) => picker.pick_spilling(req),
        }
    }

    /// A pick for a local handle holding counter `slot` (see
    /// [`Hashing::pick_local`]): the index and the slot its reservation is
    /// counted in; `None` for a policy not called by type.
    #[inline(always)]
    pub(crate) fn pick_local(
        &self,
        req: &Request<'_>,
        slot: u32,
    ) -> Option<Result<(usize, u32), PickError>> {
        match self {
            Engine::Ring(ring) => Some(ring.pick_local(req, slot)),
            Engine::Ring64(ring) => Some(ring.pick_local(req, slot)),
            Engine::Maglev(maglev) => Some(maglev.pick_local(req, slot)),
            Engine::Other(_) => None,
        }
    }

    #[inline]
    pub(crate) fn route(&self, req: &Request<'_>) -> Option<Result<usize, PickError>> {
        match self {
            Engine::Ring(ring) => ring.route(req),
            Engine::Ring64(ring) => ring.route(req),
            Engine::Maglev(maglev) => maglev.route(req),
            Engine::Other(picker) => picker.route(req),
        }
    }
}
