//! Consistent hashing over any placement (ring or table), plain or bounded.

use std::fmt;
use std::sync::Arc;

use crate::describe::Layout;
use crate::error::{BuildError, PickError};
use crate::inflight::fleet_view::FleetView;
use crate::inflight::member::SHARED;
use crate::inflight::pool::Pool;
use crate::placement::envoy::bound::{HashBalance, Indices, VisitOrder};
use crate::placement::ring::{Point, Ring};
use crate::policy::{none_eligible, Change, Order, Picker, Policy};
use crate::request::{Hash, Request};
use crate::util::bounded::LoadFactor;

/// A consistent-hashing family with its parameters: how it places
/// endpoints on its ring or table.
pub(crate) trait Scheme: Send + Sync + fmt::Debug + 'static {
    /// What it builds.
    type Placement: Placement;

    /// The family's name.
    fn name(&self) -> &'static str;

    /// Places every endpoint of `pool`.
    fn place(&self, pool: &Pool) -> Result<Self::Placement, BuildError>;

    /// How many entries [`Scheme::place`] would make over `pool` (an upper
    /// bound is fine), without making them.
    fn size(&self, pool: &Pool) -> u64;

    /// Places the endpoints of `pool`, which differs from the pool of
    /// `previous` by `change`, reusing `previous`; `None` when the scheme
    /// cannot (its placement of every endpoint depends on the others).
    fn replace(
        &self,
        _previous: &Self::Placement,
        _pool: &Pool,
        _change: Change,
    ) -> Option<Result<Self::Placement, BuildError>> {
        None
    }
}

/// The load bound of a hashing policy: loadring's cap (a load factor, or
/// the scheme's own rule such as HAProxy's) or Envoy's
/// `hash_balance_factor`; one or the other, never both.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Bound {
    Factor(LoadFactor),
    Envoy(HashBalance),
}

/// A hashing policy: a scheme and its load bound, if any.
#[derive(Debug)]
pub(crate) struct HashingPolicy<S> {
    scheme: S,
    bound: Option<Bound>,
}

impl<S: Scheme> HashingPolicy<S> {
    pub(crate) fn new(scheme: S, factor: Option<LoadFactor>) -> Self {
        HashingPolicy {
            scheme,
            bound: factor.map(Bound::Factor),
        }
    }

    /// The scheme bounded by Envoy's own rule (see `placement/envoy/bound.rs`).
    pub(crate) fn envoy(scheme: S, rule: HashBalance) -> Self {
        HashingPolicy {
            scheme,
            bound: Some(Bound::Envoy(rule)),
        }
    }

    fn picker(
        &self,
        placement: S::Placement,
        pool: Pool,
    ) -> Result<Hashing<S::Placement>, BuildError> {
        Hashing::new(placement, pool, self.bound)
    }
}

impl<S: Scheme> Policy for HashingPolicy<S> {
    fn name(&self) -> &str {
        self.scheme.name()
    }

    fn build(&self, pool: Pool) -> Result<Arc<dyn Picker>, BuildError> {
        let placement = self.scheme.place(&pool)?;
        Ok(Arc::new(self.picker(placement, pool)?))
    }

    fn build_size(&self, pool: &Pool) -> u64 {
        self.scheme.size(pool)
    }

    fn needs_key(&self) -> bool {
        true
    }

    fn load_factor(&self) -> Option<LoadFactor> {
        match self.bound? {
            Bound::Factor(factor) => Some(factor),
            Bound::Envoy(_) => None,
        }
    }

    fn hash_balance_factor(&self) -> Option<u32> {
        match self.bound? {
            Bound::Envoy(rule) => Some(rule.percent()),
            Bound::Factor(_) => None,
        }
    }

    fn rebuild(
        &self,
        previous: &dyn Picker,
        pool: &Pool,
        change: Change,
    ) -> Option<Result<Arc<dyn Picker>, BuildError>> {
        let previous: &dyn std::any::Any = previous;
        let previous = previous.downcast_ref::<Hashing<S::Placement>>()?;
        let placement = self.scheme.replace(&previous.placement, pool, change)?;
        Some(placement.and_then(|placement| {
            Ok(Arc::new(self.picker(placement, pool.clone())?) as Arc<dyn Picker>)
        }))
    }
}

/// What a consistent-hashing scheme contributes: entries in walk order
/// (ring points or table slots), each owned by one endpoint of the pool.
pub(crate) trait Placement: Send + Sync + std::fmt::Debug + 'static {
    /// The policy name, for errors.
    fn name(&self) -> &'static str;
    /// Number of entries; 0 only when every endpoint has weight 0.
    fn entries(&self) -> usize;
    /// The entry a code lands on (`code <= max_code()`, `entries() > 0`).
    fn start(&self, code: u64) -> usize;
    /// The pool index owning `entry`.
    fn owner(&self, entry: usize) -> usize;
    /// The largest request code.
    fn max_code(&self) -> u64;
    /// The code of a key, with the scheme's own hash.
    fn key_code(&self, key: &[u8]) -> u64;
    /// Each endpoint's share of the hash space.
    fn shares(&self, endpoints: usize) -> Vec<f64>;
    /// What an entry is called in `describe` ("points", "slots").
    fn entry_label(&self) -> &'static str;
    /// Whether an endpoint's part of the entries grows with its weight;
    /// `false` for schemes that give every endpoint of weight >= 1 as many
    /// (weight 0 still drains it). `describe`'s fair shares follow it.
    fn weighs(&self) -> bool {
        true
    }

    /// The entry a code lands on given the endpoints' health, for schemes
    /// whose lookup itself leaves unhealthy endpoints out (HAProxy takes the
    /// closest node among the servers that are up). By default the plain
    /// lookup: the walk then skips unhealthy endpoints.
    #[inline]
    fn start_among_healthy(&self, code: u64, _pool: &Pool) -> usize {
        self.start(code)
    }

    /// The scheme's own bounded-load cap of endpoint `owner` with `total`
    /// requests in flight (HAProxy's `hash-balance-factor` slots), or `None`
    /// for the generic cap of [`LoadFactor::cap`]. A scheme with its own rule
    /// also gives [`Placement::own_cap_floor`].
    fn own_cap(
        &self,
        _factor: LoadFactor,
        _total: u64,
        _owner: usize,
        _pool: &Pool,
    ) -> Option<u64> {
        None
    }

    /// For a scheme with its own cap rule, a cap that [`Placement::own_cap`]
    /// never goes below whatever the total (an endpoint below it needs no
    /// look at the total); `None` for the generic cap.
    fn own_cap_floor(&self) -> Option<u64> {
        None
    }
}

/// Each endpoint's share of a table whose slots are equally likely (the
/// modulo tables of HAProxy's map and twemproxy's modula).
pub(crate) fn slot_shares(slots: &[u32], endpoints: usize) -> Vec<f64> {
    let mut shares = vec![0.0; endpoints];
    for &owner in slots {
        shares[owner as usize] += 1.0 / slots.len() as f64;
    }
    shares
}

/// A ring placement: a sorted [`Ring`] plus the key hash of its scheme.
#[derive(Debug)]
pub(crate) struct RingPlacement<P: Point> {
    pub(crate) name: &'static str,
    pub(crate) ring: Ring<P>,
    pub(crate) key_hash: RingKeyHash,
    /// See [`Placement::weighs`].
    pub(crate) weighs: bool,
}

/// The key hash of a ring. The defaults of brpc (`c_murmurhash`) and Envoy
/// (`ring_hash`) are named so that a pick calls them directly and the
/// compiler inlines them; the other schemes' go through a function pointer.
#[derive(Clone, Copy, Debug)]
pub(crate) enum RingKeyHash {
    /// MurmurHash3 x86_32, seed 0.
    Murmur3,
    /// XXH64, seed 0.
    XxHash64,
    /// Any other hash.
    Other(fn(&[u8]) -> u64),
}

impl RingKeyHash {
    #[inline]
    pub(crate) fn code(self, key: &[u8]) -> u64 {
        match self {
            RingKeyHash::Murmur3 => u64::from(crate::hash::murmur3_x86_32(key, 0)),
            RingKeyHash::XxHash64 => crate::hash::xxhash64(key, 0),
            RingKeyHash::Other(hash) => hash(key),
        }
    }
}

impl<P: Point> Placement for RingPlacement<P> {
    fn name(&self) -> &'static str {
        self.name
    }
    fn entries(&self) -> usize {
        self.ring.len()
    }
    #[inline]
    fn start(&self, code: u64) -> usize {
        self.ring.locate(P::from_u64(code))
    }
    #[inline]
    fn owner(&self, entry: usize) -> usize {
        self.ring.owner(entry)
    }
    fn max_code(&self) -> u64 {
        if P::BITS == 32 {
            u64::from(u32::MAX)
        } else {
            u64::MAX
        }
    }
    #[inline]
    fn key_code(&self, key: &[u8]) -> u64 {
        self.key_hash.code(key)
    }
    fn shares(&self, endpoints: usize) -> Vec<f64> {
        self.ring.shares(endpoints)
    }
    fn entry_label(&self) -> &'static str {
        "points"
    }
    fn weighs(&self) -> bool {
        self.weighs
    }
}

/// A hashing policy: the placement, its pool, and an optional load bound.
#[derive(Debug)]
pub(crate) struct Hashing<T: Placement> {
    placement: T,
    pool: Pool,
    bound: Option<Bound>,
    /// All weights equal: one cap serves every endpoint of a pick.
    uniform: bool,
    /// Bounded: each endpoint's cap at total 0, the least cap it can have.
    floors: Vec<u64>,
    /// The placement caps loads with a rule of its own (HAProxy's), not
    /// loadring's cap.
    own_rule: bool,
}

impl<T: Placement> Hashing<T> {
    pub(crate) fn new(placement: T, pool: Pool, bound: Option<Bound>) -> Result<Self, BuildError> {
        if placement.entries() == 0 {
            return Err(BuildError::all_weights_zero());
        }
        let own_floor = placement.own_cap_floor();
        let own_rule = matches!(bound, Some(Bound::Factor(_))) && own_floor.is_some();
        let uniform = !own_rule
            && pool
                .endpoints()
                .windows(2)
                .all(|w| w[0].weight() == w[1].weight());
        let sum = pool.weight_sum();
        // Caps grow with the total: the cap at total 0 is the least (of
        // the fleet's cap, never above the local one: see FleetView::cap).
        let floors = match bound {
            Some(Bound::Factor(_)) if own_rule => vec![own_floor.unwrap_or(0); pool.len()],
            Some(Bound::Factor(factor)) => (0..pool.len())
                .map(|i| factor.fleet_cap(0, pool.weight(i), sum))
                .collect(),
            Some(Bound::Envoy(rule)) => (0..pool.len())
                .map(|i| rule.cap(0, pool.weight(i), sum))
                .collect(),
            None => Vec::new(),
        };
        Ok(Hashing {
            placement,
            pool,
            bound,
            uniform,
            floors,
            own_rule,
        })
    }

    #[inline(always)]
    fn start(&self, req: &Request<'_>) -> Result<usize, PickError> {
        Ok(self.code_and_start(req)?.1)
    }

    /// The request's code and its entry: Envoy's rule needs both, and a key
    /// is hashed once.
    #[inline(always)]
    fn code_and_start(&self, req: &Request<'_>) -> Result<(u64, usize), PickError> {
        let code = self.code(req)?;
        Ok((code, self.placement.start_among_healthy(code, &self.pool)))
    }

    /// The request's code: its key's hash, or the code it carries.
    #[inline(always)]
    fn code(&self, req: &Request<'_>) -> Result<u64, PickError> {
        Ok(match req.hash {
            Hash::Key(key) => self.placement.key_code(key),
            Hash::Code(code) if code <= self.placement.max_code() => code,
            Hash::Code(code) => {
                return Err(PickError::code_out_of_range(
                    code,
                    self.placement.name(),
                    self.placement.max_code(),
                ))
            }
            Hash::None => return Err(PickError::missing_key(self.placement.name())),
        })
    }

    /// The key's owner for Envoy's rule: the entry's endpoint, else the first
    /// eligible one clockwise (a plain pick's choice); `None` when no
    /// endpoint with an entry is eligible.
    fn envoy_owner(&self, start: usize, req: &Request<'_>) -> Option<usize> {
        let owner = self.placement.owner(start);
        if self.pool.eligible(owner, req) {
            Some(owner)
        } else {
            self.first_eligible(start, req)
        }
    }

    /// Envoy's bounded pick past the fast path. Out of line: most picks end
    /// at the owner.
    #[inline(never)]
    fn pick_envoy(
        &self,
        start: usize,
        code: u64,
        req: &Request<'_>,
        rule: HashBalance,
    ) -> Result<(usize, bool), PickError> {
        let view = FleetView::new(&self.pool, req.at);
        let owner = self.envoy_owner(start, req);
        let i = rule.pick(&view, owner, code, req)?;
        Ok((i, owner.is_some_and(|owner| owner != i)))
    }

    /// The cap of endpoint `owner` with `total` in flight: the scheme's own
    /// rule if it has one.
    #[inline]
    fn cap_at(&self, view: &FleetView<'_>, factor: LoadFactor, total: u64, owner: usize) -> u64 {
        self.placement
            .own_cap(factor, total, owner, &self.pool)
            .unwrap_or_else(|| view.cap(factor, total, owner))
    }

    /// Reserves a slot on `i` under `cap`, [`Hashing::cap_at`]'s: the
    /// scheme's own rule alone, or loadring's cap, which reported loads
    /// only tighten (see [`FleetView::try_reserve_bounded`]).
    #[inline]
    fn try_reserve_under(
        &self,
        view: &FleetView<'_>,
        factor: LoadFactor,
        i: usize,
        cap: u64,
    ) -> bool {
        if self.own_rule {
            return view.try_reserve(i, cap);
        }
        view.try_reserve_bounded(i, cap, factor)
    }

    /// The owners met walking clockwise from `start` over every entry once,
    /// each run of consecutive entries of one endpoint reported once (the
    /// walk's answer for an entry depends only on its owner, so a run needs
    /// one look, not one per entry; a run longer than [`LONGEST_RUN`] again
    /// every [`LONGEST_RUN`] entries).
    #[inline]
    fn walk(&self, start: usize) -> Walk<'_, T> {
        Walk {
            placement: &self.placement,
            entry: start,
            left: self.placement.entries(),
            last: usize::MAX,
        }
    }

    /// The first eligible entry's owner, clockwise from `start`.
    ///
    /// When nothing is eligible the walk would visit every entry (millions
    /// on the largest rings) to find nothing: after as many runs as could
    /// hold every endpoint twice, it counts the eligible endpoints once
    /// (`O(n)`) and stops if there are none.
    fn first_eligible(&self, start: usize, req: &Request<'_>) -> Option<usize> {
        let budget = self.walk_budget();
        for (run, owner) in self.walk(start).enumerate() {
            if self.pool.eligible(owner, req) {
                return Some(owner);
            }
            if run == budget && self.pool.eligible_count(req) == 0 {
                return None;
            }
        }
        None
    }

    /// Runs of entries walked before checking that anything is eligible.
    fn walk_budget(&self) -> usize {
        2 * self.pool.len() + 16
    }

    /// The bounded walk: the first eligible entry whose endpoint is below its
    /// cap, reserved by compare-and-swap; else the least-loaded eligible one.
    /// Also whether that left the key's owner (the walk's first eligible
    /// endpoint). Out of line: the pick that ends at the key's owner stays
    /// small.
    #[inline(never)]
    fn pick_bounded(
        &self,
        start: usize,
        req: &Request<'_>,
        factor: LoadFactor,
    ) -> Result<(usize, bool), PickError> {
        let mut owner_of_key = None;
        let i = self.walk_bounded(start, req, factor, &mut owner_of_key)?;
        Ok((i, owner_of_key.is_some_and(|owner| owner != i)))
    }

    /// [`Hashing::pick_bounded`]'s walk, noting the first eligible endpoint
    /// met in `owner_of_key`.
    fn walk_bounded(
        &self,
        start: usize,
        req: &Request<'_>,
        factor: LoadFactor,
        owner_of_key: &mut Option<usize>,
    ) -> Result<usize, PickError> {
        let view = FleetView::new(&self.pool, req.at);
        // The total and the uniform cap, read at the first endpoint that needs
        // them: most picks never do.
        let mut at_total: Option<(u64, u64)> = None;
        let budget = self.walk_budget();
        for (run, owner) in self.walk(start).enumerate() {
            if run == budget && self.pool.eligible_count(req) == 0 {
                return Err(none_eligible(&self.pool));
            }
            if self.pool.eligible(owner, req) {
                owner_of_key.get_or_insert(owner);
                // Caps grow with the total, so an endpoint below its cap
                // at total 0 is below its cap whatever the total: the
                // shared total (a cache line every picking thread writes)
                // need not be read.
                let floor = self.floors[owner];
                if view.try_reserve(owner, floor) {
                    return Ok(owner);
                }
                let (total, uniform_cap) = *at_total.get_or_insert_with(|| {
                    let total = view.total_load();
                    (total, view.cap(factor, total, 0))
                });
                let cap = if self.uniform {
                    uniform_cap
                } else {
                    self.cap_at(&view, factor, total, owner)
                };
                if cap > floor && self.try_reserve_under(&view, factor, owner, cap) {
                    return Ok(owner);
                }
            }
        }
        self.fallback(&view, req, factor)
    }

    /// When the bounded walk finds no eligible endpoint with room: the
    /// eligible endpoints the walk cannot reach are those without an entry
    /// (a weight too small for the scheme's arithmetic), so every eligible
    /// endpoint is looked at once: the first with room under its own cap,
    /// else the one with the least load relative to its cap (a heavy
    /// endpoint has room for more than a light one). The plain pick's
    /// fallback, the least loaded, is in [`Hashing::locate`].
    #[cold]
    fn fallback(
        &self,
        view: &FleetView<'_>,
        req: &Request<'_>,
        factor: LoadFactor,
    ) -> Result<usize, PickError> {
        let total = view.total_load();
        let mut lightest: Option<(usize, u128, u128)> = None;
        for i in (0..self.pool.len()).filter(|&i| self.pool.eligible(i, req)) {
            let cap = self.cap_at(view, factor, total, i);
            if self.try_reserve_under(view, factor, i, cap) {
                return Ok(i);
            }
            let (load, cap) = (u128::from(view.load(i)), u128::from(cap.max(1)));
            if lightest.is_none_or(|(_, l, c)| load * c < l * cap) {
                lightest = Some((i, load, cap));
            }
        }
        match lightest {
            Some((i, _, _)) => Ok(self.pool.take(i)),
            None => Err(none_eligible(&self.pool)),
        }
    }

    /// Where a plain pick goes, without reserving: the key's owner, else the
    /// first eligible endpoint clockwise, else the least-loaded eligible one
    /// (an eligible endpoint without an entry is found there). Most picks end
    /// at the owner, with nothing of the walk set up.
    #[inline]
    fn locate(&self, req: &Request<'_>) -> Result<usize, PickError> {
        let start = self.start(req)?;
        let owner = self.placement.owner(start);
        if self.pool.eligible(owner, req) {
            return Ok(owner);
        }
        self.locate_past(start, req)
    }

    /// A pick by a local handle holding counter `slot` (or [`SHARED`], also
    /// [`Picker::pick`]'s): the index and where its reservation is counted.
    /// A plain policy reserves in the slot (see [`Pool::reserve_in_slot`]);
    /// a bounded one in the shared counter, whose compare-and-swap against
    /// the cap sees every reservation. Most picks end at the key's own
    /// entry: its owner is eligible and (bounded) below the least cap it can
    /// have, one look and one reservation with nothing of the walk set up;
    /// inlined, so that this case costs no call in the handle's pick.
    #[inline(always)]
    pub(crate) fn pick_local(
        &self,
        req: &Request<'_>,
        slot: u32,
    ) -> Result<(usize, u32), PickError> {
        self.pick_in(req, slot).map(|(i, slot, _)| (i, slot))
    }

    /// [`Hashing::pick_local`], and whether the pick spilled (see
    /// [`Picker::pick_spilling`]).
    #[inline(always)]
    fn pick_in(&self, req: &Request<'_>, slot: u32) -> Result<(usize, u32, bool), PickError> {
        let (code, start) = self.code_and_start(req)?;
        let owner = self.placement.owner(start);
        let eligible = self.pool.eligible(owner, req);
        match self.bound {
            Some(Bound::Envoy(rule)) => {
                // In flight at most 1 is within every endpoint's slots (>= 1).
                if eligible
                    && FleetView::new(&self.pool, req.at).try_reserve(owner, self.floors[owner])
                {
                    return Ok((owner, SHARED, false));
                }
                let (i, spilled) = self.pick_envoy(start, code, req, rule)?;
                Ok((i, SHARED, spilled))
            }
            None => {
                let found = if eligible {
                    owner
                } else {
                    self.locate_past(start, req)?
                };
                if slot == SHARED {
                    Ok((self.pool.take(found), SHARED, false))
                } else {
                    self.pool.reserve_in_slot(found, slot as usize);
                    Ok((found, slot, false))
                }
            }
            Some(Bound::Factor(factor)) => {
                if eligible
                    && FleetView::new(&self.pool, req.at).try_reserve(owner, self.floors[owner])
                {
                    return Ok((owner, SHARED, false));
                }
                let (i, spilled) = self.pick_bounded(start, req, factor)?;
                Ok((i, SHARED, spilled))
            }
        }
    }

    /// Where a plain pick goes when the key's owner is not eligible: the
    /// first eligible endpoint clockwise from `start`, else the least-loaded
    /// eligible one. Out of line: most picks end at the owner.
    #[inline(never)]
    fn locate_past(&self, start: usize, req: &Request<'_>) -> Result<usize, PickError> {
        self.first_eligible(start, req)
            .or_else(|| self.pool.least_loaded(req))
            .ok_or_else(|| none_eligible(&self.pool))
    }

    /// The cap the next pick applies to endpoint `i`, in `view`.
    fn cap_of(&self, view: &FleetView<'_>, factor: LoadFactor, i: usize) -> u64 {
        self.cap_at(view, factor, view.total_load(), i)
    }

    /// Envoy's rule: the most in flight the next pick may leave on `i`
    /// (`slots + 1`: Envoy admits while `in_flight <= slots`).
    fn envoy_cap(&self, view: &FleetView<'_>, rule: HashBalance, i: usize) -> u64 {
        let total = view.total_load();
        rule.cap(total, self.pool.weight(i), self.pool.weight_sum())
    }
}

impl<T: Placement> Picker for Hashing<T> {
    fn pool(&self) -> &Pool {
        &self.pool
    }

    /// The local handle's pick, counted in the shared counter.
    #[inline]
    fn pick(&self, req: &Request<'_>) -> Result<usize, PickError> {
        self.pick_local(req, SHARED).map(|(i, _)| i)
    }

    #[inline]
    fn pick_spilling(&self, req: &Request<'_>) -> Result<(usize, bool), PickError> {
        self.pick_in(req, SHARED)
            .map(|(i, _, spilled)| (i, spilled))
    }

    /// The clockwise walk from the request's entry, each endpoint at its
    /// first entry; endpoints without an entry (a weight too small for the
    /// scheme's arithmetic) come last, in pool order. Under Envoy's rule,
    /// the owner and then Envoy's visiting order of the request's hash.
    fn candidates(self: Arc<Self>, req: &Request<'_>) -> Result<Order, PickError> {
        let (code, start) = self.code_and_start(req)?;
        if let Some(Bound::Envoy(_)) = self.bound {
            let owner = self.envoy_owner(start, req);
            let mut indices = Indices::new(self.pool.len());
            let order: Vec<usize> = VisitOrder::new(code, indices.as_mut()).collect();
            return Ok(Box::new(owner.into_iter().chain(order)));
        }
        let len = self.pool.len();
        let walk = OwnedWalk {
            left: self.placement.entries(),
            entry: start,
            last: usize::MAX,
            hashing: self,
        };
        Ok(Box::new(walk.chain(0..len)))
    }

    /// Reserves under the cap of the fleet view on the process clock (a
    /// candidate carries no request time).
    fn try_reserve(&self, i: usize) -> bool {
        let view = FleetView::new(&self.pool, None);
        match self.bound {
            Some(Bound::Envoy(rule)) => view.try_reserve(i, self.envoy_cap(&view, rule, i)),
            Some(Bound::Factor(factor)) => view.try_reserve(i, self.cap_of(&view, factor, i)),
            None => {
                self.pool.reserve(i);
                true
            }
        }
    }

    #[inline]
    fn route(&self, req: &Request<'_>) -> Option<Result<usize, PickError>> {
        Some(self.locate(req))
    }

    fn cap(&self, i: usize) -> Option<u64> {
        let view = FleetView::new(&self.pool, None);
        match self.bound? {
            Bound::Envoy(rule) => Some(self.envoy_cap(&view, rule, i)),
            Bound::Factor(factor) => Some(self.cap_of(&view, factor, i)),
        }
    }

    fn layout(&self) -> Option<Layout> {
        Some(
            Layout::new(
                self.pool.endpoints(),
                self.placement.shares(self.pool.len()),
                self.placement.entries(),
                self.placement.entry_label(),
            )
            .weighing(self.placement.weighs()),
        )
    }
}

/// The clockwise walk of [`Picker::candidates`], owning its policy.
struct OwnedWalk<T: Placement> {
    hashing: Arc<Hashing<T>>,
    entry: usize,
    left: usize,
    last: usize,
}

impl<T: Placement> Iterator for OwnedWalk<T> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        let mut walk = Walk {
            placement: &self.hashing.placement,
            entry: self.entry,
            left: self.left,
            last: self.last,
        };
        let found = walk.next();
        (self.entry, self.left, self.last) = (walk.entry, walk.left, walk.last);
        found
    }
}

/// The clockwise walk of [`Hashing::walk`].
struct Walk<'a, T> {
    placement: &'a T,
    entry: usize,
    left: usize,
    last: usize,
}

/// A run of one endpoint's entries longer than this is reported again every
/// this many entries, so that a walk over a ring of few endpoints still
/// comes back to its caller (who checks its budget) every so often.
const LONGEST_RUN: usize = 64;

impl<T: Placement> Iterator for Walk<'_, T> {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        let mut run = 0;
        while self.left > 0 {
            let owner = self.placement.owner(self.entry);
            self.left -= 1;
            self.entry += 1;
            if self.entry == self.placement.entries() {
                self.entry = 0;
            }
            run += 1;
            if owner != self.last || run == LONGEST_RUN {
                self.last = owner;
                return Some(owner);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

    use super::*;
    use crate::policy::test_pool;

    /// A ring whose entries belong to `owners` only (others have none).
    fn ring_over(owners: &[u32], points_each: u32) -> RingPlacement<u32> {
        let entries = owners
            .iter()
            .flat_map(|&o| (0..points_each).map(move |k| (k * 1000 + o, o)))
            .collect();
        let rank: Vec<u32> = (0..8).collect();
        RingPlacement {
            name: "test",
            ring: Ring::build(entries, &rank),
            key_hash: RingKeyHash::Other(|_| 0),
            weighs: true,
        }
    }

    /// An endpoint without an entry is reachable, and the fallback goes by
    /// room under each endpoint's own cap, not by count: the heavy `c`
    /// (weight 100, no entry) takes the spill, the light `a` and `b` (cap 1)
    /// never go above their cap.
    #[test]
    fn the_fallback_fills_endpoints_by_room_under_their_own_cap() {
        let pool = test_pool(&[1, 1, 100]);
        let factor = LoadFactor::new(3, 2).unwrap();
        let hashing = Hashing::new(
            ring_over(&[0, 1], 4),
            pool.clone(),
            Some(Bound::Factor(factor)),
        )
        .unwrap();
        let req = Request::code(0);
        let picks: Vec<usize> = (0..4).map(|_| hashing.pick(&req).unwrap()).collect();
        let loads: Vec<u64> = (0..3).map(|i| pool.load(i)).collect();
        assert_eq!(loads, [1, 1, 2], "picks {picks:?}");
        // total 4: caps ceil(1.5 * 5 * w / 102) = 1, 1, 8
        assert_eq!(
            (0..3).map(|i| hashing.cap(i).unwrap()).collect::<Vec<_>>(),
            [1, 1, 8]
        );
    }

    /// With the endpoints that have entries unhealthy, the one without any is
    /// still picked, plain or bounded, and comes last among the candidates.
    #[test]
    fn an_eligible_endpoint_without_entries_is_pickable() {
        for bound in [None, Some(LoadFactor::DEFAULT)] {
            let pool = test_pool(&[1000, 1000, 1]);
            let hashing = Arc::new(
                Hashing::new(
                    ring_over(&[0, 1], 4),
                    pool.clone(),
                    bound.map(Bound::Factor),
                )
                .unwrap(),
            );
            pool.member(0).set_healthy(false);
            pool.member(1).set_healthy(false);
            assert_eq!(hashing.pick(&Request::code(7)), Ok(2), "{bound:?}");
            assert_eq!(hashing.route(&Request::code(7)), Some(Ok(2)), "{bound:?}");
            let order: Vec<usize> = hashing
                .clone()
                .candidates(&Request::code(7))
                .unwrap()
                .collect();
            assert_eq!(order.last(), Some(&2), "{bound:?}: {order:?}");
        }
    }

    /// A placement that counts the entries looked at (calls to `owner`).
    #[derive(Debug)]
    struct Counted<T> {
        inner: T,
        looked: AtomicUsize,
    }

    impl<T: Placement> Placement for Counted<T> {
        fn name(&self) -> &'static str {
            self.inner.name()
        }
        fn entries(&self) -> usize {
            self.inner.entries()
        }
        fn start(&self, code: u64) -> usize {
            self.inner.start(code)
        }
        fn owner(&self, entry: usize) -> usize {
            self.looked.fetch_add(1, Relaxed);
            self.inner.owner(entry)
        }
        fn max_code(&self) -> u64 {
            self.inner.max_code()
        }
        fn key_code(&self, key: &[u8]) -> u64 {
            self.inner.key_code(key)
        }
        fn shares(&self, endpoints: usize) -> Vec<f64> {
            self.inner.shares(endpoints)
        }
        fn entry_label(&self) -> &'static str {
            self.inner.entry_label()
        }
        fn weighs(&self) -> bool {
            self.inner.weighs()
        }
        fn start_among_healthy(&self, code: u64, pool: &Pool) -> usize {
            self.inner.start_among_healthy(code, pool)
        }
        fn own_cap(
            &self,
            factor: LoadFactor,
            total: u64,
            owner: usize,
            pool: &Pool,
        ) -> Option<u64> {
            self.inner.own_cap(factor, total, owner, pool)
        }
        fn own_cap_floor(&self) -> Option<u64> {
            self.inner.own_cap_floor()
        }
    }

    /// Nothing eligible on a ring of four million points of one endpoint:
    /// the walk gives up after about a thousand entries, where walking every
    /// entry looks at four million. Counted, not timed.
    #[test]
    fn a_walk_over_nothing_eligible_stops_early() {
        const POINTS: usize = 4_000_000;
        for bound in [None, Some(LoadFactor::DEFAULT)] {
            let pool = test_pool(&[1]);
            let placement = Counted {
                inner: ring_over(&[0], POINTS as u32),
                looked: Default::default(),
            };
            let hashing = Hashing::new(placement, pool.clone(), bound.map(Bound::Factor)).unwrap();
            pool.member(0).set_healthy(false);
            let walked = hashing.walk(0).take(hashing.walk_budget() + 1).count();
            assert_eq!(
                walked,
                hashing.walk_budget() + 1,
                "runs are cut every {LONGEST_RUN} entries"
            );
            for code in 0..100 {
                hashing.placement.looked.store(0, Relaxed);
                assert_eq!(
                    hashing.pick(&Request::code(code)),
                    Err(PickError::no_eligible_endpoint(1))
                );
                let looked = hashing.placement.looked.load(Relaxed);
                assert!(
                    looked > 0 && looked < 2_000,
                    "{bound:?}: code {code} looked at {looked} of {POINTS} entries"
                );
            }
        }
    }
}
