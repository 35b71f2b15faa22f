//! `Balancer`: an immutable snapshot behind an atomic pointer, picked lock-free.

pub(crate) mod backend;
pub(crate) mod engine;
pub(crate) mod local;
pub(crate) mod local_pick;
pub(crate) mod member_state;
pub(crate) mod pick;
pub(crate) mod route;

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::ops::Deref;
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering::Relaxed, Ordering::Release};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use arc_swap::ArcSwap;

use crate::balancer::backend::Backend;
use crate::balancer::engine::Engine;
use crate::balancer::local::LocalBalancer;
use crate::balancer::pick::Pick;
use crate::balancer::route::Route;
use crate::describe::Layout;
use crate::endpoint::{dedup, Endpoint, Id};
use crate::error::{BuildError, PickError, UnknownEndpoint};
use crate::inflight::fleet::{FleetState, LoadReport};
use crate::inflight::member::Member;
use crate::inflight::pool::Pool;
use crate::policy::{Change, Order, Picker, Policy};
use crate::request::Request;
use crate::spec::PolicySpec;

/// A load balancer: one policy over a changing set of endpoints, each
/// carrying a value of the caller's type `T` (a connection pool, a client, a
/// socket address; `()` when the address is all the caller needs).
///
/// Picks read an immutable snapshot (endpoints, built ring or table) through
/// an atomic pointer: they take no lock and allocate nothing. Membership
/// changes ([`update`](Balancer::update), [`insert`](Balancer::insert),
/// [`remove`](Balancer::remove), [`set_weight`](Balancer::set_weight)) build
/// the next snapshot off to the side and swap it in; picks in progress finish
/// on the snapshot they started with. In-flight counters and health belong to
/// the backend (address and tag), so they survive changes that keep it.
///
/// Bounded policies also keep a running total of the requests in flight,
/// which their cap needs on every pick; other policies skip that shared
/// counter (one contended atomic add less per pick and per release) and
/// [`Balancer::total_in_flight`] sums the members instead.
///
/// ```
/// use loadring::{Balancer, Endpoint, Request};
///
/// let endpoints = ["10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80"]
///     .map(|a| a.parse::<Endpoint>())
///     .into_iter()
///     .collect::<Result<Vec<_>, _>>()?;
/// let balancer = Balancer::new("c_murmurhash_bl:load_factor=1.25".parse()?, endpoints)?;
///
/// // Hold a guard while the request is in flight; dropping it releases the slot.
/// let first = balancer.pick(&Request::key("viral"))?;
/// let second = balancer.pick(&Request::key("viral"))?;
/// // The cap is ceil(1.25 * 2 / 3) = 1: the second request spills to the next endpoint.
/// assert_ne!(first.addr(), second.addr());
/// drop((first, second));
/// assert_eq!(balancer.total_in_flight(), 0);
/// # Ok::<(), loadring::Error>(())
/// ```
///
/// # Backends of your own type
/// ```
/// use std::net::SocketAddr;
/// use loadring::{Balancer, Endpoint, Request};
///
/// let backends = ["10.0.0.1:80", "10.0.0.2:80"].map(|a| {
///     let addr: SocketAddr = a.parse().unwrap();
///     (Endpoint::new(a).unwrap(), addr)
/// });
/// let balancer = Balancer::with_backends("c_murmurhash".parse()?, backends)?;
/// let pick = balancer.pick(&Request::key("user:42"))?;
/// let addr: &SocketAddr = pick.value(); // no lookup from address to value
/// assert_eq!(addr.to_string(), pick.addr());
/// # Ok::<(), loadring::Error>(())
/// ```
///
/// # When nothing can be picked
/// Unhealthy endpoints (see [`Balancer::set_healthy`]) and those a request
/// excludes are skipped by walking on (clockwise, for hashing policies). When
/// every endpoint is unhealthy or excluded, `pick` returns
/// a [`PickError`] of kind [`NoEligibleEndpoint`](crate::PickErrorKind::NoEligibleEndpoint): retrying on an endpoint the caller
/// chose to avoid is a decision left to the caller, who can pick again
/// without the exclusion.
///
/// # Bounded load under concurrency
/// Single-threaded, a bounded pick never takes an endpoint past its cap
/// `ceil(F * (total + 1) * w / W)` while any eligible endpoint is below its
/// own cap: the walk takes the first such endpoint on the ring, and an
/// endpoint the ring gives no point (a weight too small for the scheme's
/// arithmetic) is still found by the fallback. Only when unhealthy or
/// excluded endpoints leave no eligible endpoint below its cap does the pick
/// go over one: to the eligible endpoint with the least load for its cap. Under `T` threads each reservation is a
/// compare-and-swap against the cap computed from the total its pick read, so
/// no reservation exceeds that cap; the total read may lag behind picks and
/// releases of other threads. With at most `G` guards alive at once and at
/// least `n` eligible endpoints, no endpoint holds more than
/// `max(cap(G + T), (G + T) / n) + T` requests (the stress tests check it).
///
/// Envoy's rule (`ring_hash:hash_balance_factor=F`, `maglev:...`) reads the
/// same two counters: `T` is the pool's running total, read once by a pick
/// whose owner holds more than one request, and an endpoint's `in_flight` is
/// its own counter at the moment of the compare-and-swap that reserves it,
/// which succeeds only while `in_flight <= slots` for that `T`. Its
/// [`Balancer::cap`] is `slots + 1`, the most in flight such a pick leaves,
/// and the bound above holds with it. Envoy itself reads its counters
/// without reserving (two workers may take the same last slot).
pub struct Balancer<T = ()> {
    policy: Arc<dyn Policy>,
    spec: Option<PolicySpec>,
    snapshot: ArcSwap<Snapshot<T>>,
    total: Arc<AtomicI64>,
    /// Whether members count their reservations in `total` (bounded policies).
    tallied: bool,
    /// Serializes writers; readers never touch it.
    writer: Mutex<()>,
    /// Bumped after every snapshot published, so that a [`LocalBalancer`]
    /// sees a change with one load.
    generation: AtomicU64,
    /// The members' counter slots held by local handles, one bit each.
    slots: Arc<AtomicU32>,
    /// Members marked unhealthy (kept by the members; read by picks).
    unhealthy: Arc<AtomicU64>,
    /// What the members share about load reports (see `fleet.rs`).
    fleet: Arc<FleetState>,
    /// Removed members that requests in flight still hold: an endpoint
    /// added back takes its member again, and so keeps counting them.
    retired: Mutex<Vec<Weak<Member>>>,
}

/// Picks with `engine` over `members` backends and reserves: the index of
/// the backend.
#[inline]
pub(crate) fn pick_index(
    engine: Option<&Engine>,
    members: usize,
    req: &Request<'_>,
) -> Result<usize, PickError> {
    let i = engine.ok_or(PickError::no_endpoints())?.pick(req)?;
    within(i, members)
}

/// `i`, if it names one of `members` backends.
#[inline]
fn within(i: usize, members: usize) -> Result<usize, PickError> {
    if i < members {
        Ok(i)
    } else {
        // Only a policy from outside the crate can name an index beyond its
        // pool; it reserved nothing there.
        Err(PickError::no_eligible_endpoint(members))
    }
}

/// One membership, immutable: what every pick reads.
pub(crate) struct Snapshot<T> {
    pub(crate) endpoints: Vec<Endpoint>,
    pub(crate) backends: Vec<Arc<Backend<T>>>,
    /// The picker, by concrete type where it is a hot built-in one; `None`
    /// while there are no endpoints.
    engine: Option<Engine>,
    /// The indices of `endpoints` in the order of their identities, sorted
    /// on the first lookup by identity (picks never need it): a lookup is a
    /// binary search, so marking every member costs O(n log n), not O(n²).
    by_id: OnceLock<Arc<[usize]>>,
}

impl<T> Snapshot<T> {
    fn new(
        endpoints: Vec<Endpoint>,
        backends: Vec<Arc<Backend<T>>>,
        picker: Option<Arc<dyn Picker>>,
    ) -> Self {
        Snapshot {
            endpoints,
            backends,
            engine: picker.map(Engine::new),
            by_id: OnceLock::new(),
        }
    }

    /// The same membership with new values for the same endpoints.
    fn with_backends(&self, backends: Vec<Arc<Backend<T>>>) -> Self {
        Snapshot {
            endpoints: self.endpoints.clone(),
            backends,
            engine: self.engine.clone(),
            // The same endpoints in the same order: the same index.
            by_id: self.by_id.clone(),
        }
    }

    /// The index of the member with this identity, if there is one.
    fn index_of(&self, id: Id<'_>) -> Option<usize> {
        let by_id = self.by_id.get_or_init(|| {
            let mut order: Vec<usize> = (0..self.endpoints.len()).collect();
            // Identities are unique within a membership: unstable is exact.
            order.sort_unstable_by(|&a, &b| {
                compared();
                self.endpoints[a].id().cmp(&self.endpoints[b].id())
            });
            order.into()
        });
        by_id
            .binary_search_by(|&i| {
                compared();
                self.endpoints[i].id().cmp(&id)
            })
            .ok()
            .map(|k| by_id[k])
    }

    /// Picks and reserves: the index of the backend, and whether the pick
    /// spilled.
    #[inline]
    pub(crate) fn pick_index_spilling(
        &self,
        req: &Request<'_>,
    ) -> Result<(usize, bool), PickError> {
        let engine = self.engine.as_ref().ok_or(PickError::no_endpoints())?;
        let (i, spilled) = engine.pick_spilling(req)?;
        Ok((within(i, self.backends.len())?, spilled))
    }

    /// The engine, `None` while there are no endpoints.
    pub(crate) fn engine(&self) -> Option<&Engine> {
        self.engine.as_ref()
    }

    /// The index a hashing policy routes to; `None` for other policies.
    #[inline]
    pub(crate) fn route_index(&self, req: &Request<'_>) -> Result<Option<usize>, PickError> {
        let engine = self.engine.as_ref().ok_or(PickError::no_endpoints())?;
        match engine.route(req) {
            None => Ok(None),
            Some(found) => within(found?, self.backends.len()).map(Some),
        }
    }
}

impl<T> fmt::Debug for Balancer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let snapshot = self.snapshot.load();
        f.debug_struct("Balancer")
            .field("policy", &self.policy.name())
            .field("endpoints", &snapshot.endpoints)
            .finish_non_exhaustive()
    }
}

impl Balancer<()> {
    /// A balancer running `spec` over `endpoints` (possibly none yet).
    ///
    /// # Errors
    /// Conflicting endpoints, every weight 0, or a policy that cannot be built
    /// over them (a ring too large, ...).
    pub fn new(
        spec: PolicySpec,
        endpoints: impl IntoIterator<Item = Endpoint>,
    ) -> Result<Self, BuildError> {
        Balancer::with_backends(spec, endpoints.into_iter().map(|e| (e, ())))
    }

    /// Replaces the membership. Returns `Ok(false)` without rebuilding when it
    /// is unchanged (same endpoints in the same order).
    ///
    /// Backends that stay keep their in-flight counters and health; removed
    /// ones leave the total at once, and their outstanding guards release
    /// harmlessly. One added back while guards taken on it are still held
    /// counts them again (it starts healthy, as a new one does).
    ///
    /// # Errors
    /// As [`Balancer::new`]; the balancer then keeps its current membership.
    pub fn update(
        &self,
        endpoints: impl IntoIterator<Item = Endpoint>,
    ) -> Result<bool, BuildError> {
        self.update_backends(endpoints.into_iter().map(|e| (e, ())))
    }
}

impl<T> Balancer<T> {
    /// A balancer running `spec` over endpoints that carry the caller's values.
    ///
    /// # Errors
    /// As [`Balancer::new`].
    pub fn with_backends(
        spec: PolicySpec,
        backends: impl IntoIterator<Item = (Endpoint, T)>,
    ) -> Result<Self, BuildError> {
        let policy = spec.policy().clone();
        let mut balancer = Balancer::with_policy(policy, backends)?;
        if let Some(max_age) = spec.report_max_age() {
            balancer.fleet.set_max_age(max_age);
        }
        balancer
            .fleet
            .share
            .store(spec.report_share(), std::sync::atomic::Ordering::Relaxed);
        balancer.spec = Some(spec);
        Ok(balancer)
    }

    /// A balancer running a policy of any origin, the built-in ones (see
    /// [`PolicySpec::policy`]) or one written outside this crate (see
    /// [`policy`](crate::policy)).
    ///
    /// # Errors
    /// As [`Balancer::new`].
    pub fn with_policy(
        policy: Arc<dyn Policy>,
        backends: impl IntoIterator<Item = (Endpoint, T)>,
    ) -> Result<Self, BuildError> {
        let total = Arc::new(AtomicI64::new(0));
        let tallied = policy.load_factor().is_some() || policy.hash_balance_factor().is_some();
        let balancer = Balancer {
            policy,
            spec: None,
            snapshot: ArcSwap::from_pointee(Snapshot::new(Vec::new(), Vec::new(), None)),
            total,
            tallied,
            writer: Mutex::new(()),
            generation: AtomicU64::new(0),
            slots: Arc::new(AtomicU32::new(0)),
            unhealthy: Arc::new(AtomicU64::new(0)),
            fleet: Arc::default(),
            retired: Mutex::new(Vec::new()),
        };
        let backends = dedup(backends)?;
        let backends = backends
            .into_iter()
            .map(|(e, value)| balancer.new_backend(e, value))
            .collect();
        let snapshot = balancer.build(backends, None)?;
        balancer.snapshot.store(Arc::new(snapshot));
        Ok(balancer)
    }

    /// The policy specification, if the balancer was made from one.
    pub fn spec(&self) -> Option<&PolicySpec> {
        self.spec.as_ref()
    }

    /// The policy the balancer runs.
    pub fn policy(&self) -> &Arc<dyn Policy> {
        &self.policy
    }

    fn new_backend(&self, endpoint: Endpoint, value: T) -> Arc<Backend<T>> {
        let retired = self.retired_member(&endpoint);
        self.new_backend_or_rejoin(endpoint, value, retired)
    }

    /// A new backend for `endpoint`, on `retired` (the removed member of its
    /// identity that requests still hold) if there is one.
    fn new_backend_or_rejoin(
        &self,
        endpoint: Endpoint,
        value: T,
        retired: Option<Arc<Member>>,
    ) -> Arc<Backend<T>> {
        if let Some(member) = retired {
            // Made a member again when the snapshot is published.
            return Arc::new(Backend {
                member,
                endpoint,
                value,
            });
        }
        let member = Member::new(
            &endpoint,
            self.tallied.then(|| self.total.clone()),
            self.policy.observer(&endpoint),
            self.unhealthy.clone(),
            self.fleet.clone(),
        );
        Arc::new(Backend {
            member: Arc::new(member),
            endpoint,
            value,
        })
    }

    /// The removed member of `endpoint`'s identity, if requests reserved on
    /// it are still running.
    fn retired_member(&self, endpoint: &Endpoint) -> Option<Arc<Member>> {
        let retired = self.retired.lock().unwrap_or_else(|e| e.into_inner());
        retired.iter().filter_map(Weak::upgrade).find(|m| {
            Self::may_rejoin(m) && m.addr() == endpoint.addr() && m.tag() == endpoint.tag()
        })
    }

    /// The removed members that requests reserved on them still hold, in
    /// the list's order, for a whole membership to look up in a map built
    /// once (each identity's first, as [`Balancer::retired_member`] finds
    /// it) rather than scan the list per endpoint. Called under the
    /// writer's lock: only `publish` changes the list.
    fn retired_members(&self) -> Vec<Arc<Member>> {
        let retired = self.retired.lock().unwrap_or_else(|e| e.into_inner());
        retired
            .iter()
            .filter_map(Weak::upgrade)
            .filter(Self::may_rejoin)
            .collect()
    }

    /// Whether a member on the retired list can be made a member again.
    fn may_rejoin(member: &Arc<Member>) -> bool {
        member.is_retired() && member.load() > 0
    }

    /// The snapshot over `backends`; with `incremental`, the previous
    /// snapshot's picker and the one change that leads to `backends`.
    fn build(
        &self,
        backends: Vec<Arc<Backend<T>>>,
        incremental: Option<(&dyn Picker, Change)>,
    ) -> Result<Snapshot<T>, BuildError> {
        let endpoints: Vec<Endpoint> = backends.iter().map(|b| b.endpoint.clone()).collect();
        if endpoints.is_empty() {
            return Ok(Snapshot::new(endpoints, backends, None));
        }
        if endpoints.iter().all(|e| e.weight() == 0) {
            return Err(BuildError::all_weights_zero());
        }
        let members = backends.iter().map(|b| b.member.clone()).collect();
        // Without a running total the pool sums its members when asked, as a
        // sub-pool does.
        let pool = Pool::new(
            endpoints.clone(),
            members,
            self.tallied,
            self.total.clone(),
            self.unhealthy.clone(),
            self.fleet.clone(),
        );
        let rebuilt =
            incremental.and_then(|(previous, change)| self.policy.rebuild(previous, &pool, change));
        let picker = match rebuilt {
            Some(picker) => picker?,
            None => self.policy.build(pool)?,
        };
        Ok(Snapshot::new(endpoints, backends, Some(picker)))
    }

    /// Publishes `next`, retiring the backends of `current` it does not keep.
    fn publish(&self, current: &Snapshot<T>, next: Snapshot<T>) {
        let kept: HashSet<*const Member> = next
            .backends
            .iter()
            .map(|b| Arc::as_ptr(&b.member))
            .collect();
        let mut retired = self.retired.lock().unwrap_or_else(|e| e.into_inner());
        // Membership changes only here, under the writer's lock.
        for new in &next.backends {
            if new.member.is_retired() {
                new.member.rejoin();
            }
        }
        for old in &current.backends {
            if !kept.contains(&Arc::as_ptr(&old.member)) {
                old.member.retire();
                retired.push(Arc::downgrade(&old.member));
            }
        }
        // Forget members no request holds any more, and those back in.
        retired.retain(|m| m.upgrade().is_some_and(|m| m.is_retired() && m.load() > 0));
        drop(retired);
        self.snapshot.store(Arc::new(next));
        self.generation.fetch_add(1, Release);
    }

    /// The generation of the published snapshot (see [`LocalBalancer`]).
    pub(crate) fn generation(&self) -> &AtomicU64 {
        &self.generation
    }

    /// The counter slots held by local handles.
    pub(crate) fn slots(&self) -> &Arc<AtomicU32> {
        &self.slots
    }

    /// The published snapshot, owned.
    pub(crate) fn snapshot_arc(&self) -> Arc<Snapshot<T>> {
        self.snapshot.load_full()
    }

    /// How picks reach the policy's picker: `"ring"`, `"ring64"` or
    /// `"maglev"` when called by its concrete type (see
    /// `balancer/engine.rs`), `"other"` through the trait object; `None`
    /// without endpoints. For the crate's tests.
    #[doc(hidden)]
    pub fn dispatch(&self) -> Option<&'static str> {
        self.snapshot.load().engine.as_ref().map(Engine::kind)
    }

    /// How many local handles hold a counter slot now. For the crate's tests.
    #[doc(hidden)]
    pub fn local_slots_held(&self) -> u32 {
        self.slots.load(Relaxed).count_ones()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ()> {
        // A poisoned lock only means another writer panicked; the snapshot it
        // guards is replaced whole, so it is never half-written.
        self.writer.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Replaces the membership and the values. Returns `Ok(false)` when the
    /// endpoints are unchanged (same endpoints in the same order): nothing is
    /// rebuilt, but the new values replace the old ones.
    ///
    /// # Errors
    /// As [`Balancer::new`]; the balancer then keeps its current membership.
    pub fn update_backends(
        &self,
        backends: impl IntoIterator<Item = (Endpoint, T)>,
    ) -> Result<bool, BuildError> {
        let backends = dedup(backends)?;
        let _writer = self.lock();
        let current = self.snapshot.load_full();
        let same = current.endpoints.len() == backends.len()
            && current
                .endpoints
                .iter()
                .zip(&backends)
                .all(|(a, (b, _))| a == b);
        // Values of a zero-sized type carry nothing to replace: an unchanged
        // membership is then a true no-op (the `Balancer<()>` of `update`).
        if same && std::mem::size_of::<T>() == 0 {
            return Ok(false);
        }
        // Maps, not scans: a membership of n endpoints is matched in O(n).
        let by_identity: HashMap<Id<'_>, &Arc<Member>> = current
            .backends
            .iter()
            .map(|b| (b.endpoint.id(), &b.member))
            .collect();
        let retired = self.retired_members();
        let mut retired_by_identity: HashMap<Id<'_>, &Arc<Member>> =
            HashMap::with_capacity(retired.len());
        for member in &retired {
            retired_by_identity
                .entry(Id::new(member.addr(), member.tag()))
                .or_insert(member);
        }
        let next: Vec<Arc<Backend<T>>> = backends
            .into_iter()
            .map(|(endpoint, value)| match by_identity.get(&endpoint.id()) {
                Some(&member) => Arc::new(Backend {
                    member: member.clone(),
                    endpoint,
                    value,
                }),
                None => {
                    // Its requests may have finished since the list was read.
                    let rejoining = retired_by_identity
                        .get(&endpoint.id())
                        .filter(|m| m.load() > 0)
                        .map(|&m| m.clone());
                    self.new_backend_or_rejoin(endpoint, value, rejoining)
                }
            })
            .collect();
        let next = if same {
            current.with_backends(next)
        } else {
            self.build(next, None)?
        };
        self.publish(&current, next);
        Ok(!same)
    }

    /// Adds one endpoint with its value, or replaces the value (and the
    /// attributes) of the member with the same identity. Returns `Ok(true)`
    /// when the membership changed.
    ///
    /// Policies whose placement of an endpoint depends on nothing but that
    /// endpoint (brpc's rings) merge its points into the current ring instead
    /// of rebuilding it; the result is the same as a full build.
    ///
    /// # Errors
    /// As [`Balancer::new`]; the balancer then keeps its current membership.
    pub fn insert(&self, endpoint: Endpoint, value: T) -> Result<bool, BuildError> {
        let _writer = self.lock();
        let current = self.snapshot.load_full();
        let at = current
            .endpoints
            .iter()
            .position(|e| e.same_backend(&endpoint));
        let mut backends = current.backends.clone();
        let (next, changed) = match at {
            Some(i) => {
                let same = current.endpoints[i] == endpoint;
                let reweighted = !same
                    && current.endpoints[i].clone().with_weight(endpoint.weight()) == endpoint;
                backends[i] = Arc::new(Backend {
                    member: current.backends[i].member.clone(),
                    endpoint,
                    value,
                });
                if same {
                    (current.with_backends(backends), false)
                } else {
                    let change = reweighted.then_some(Change::Reweighted(i));
                    (self.build_after(&current, backends, change)?, true)
                }
            }
            None => {
                backends.push(self.new_backend(endpoint, value));
                let change = Change::Inserted(backends.len() - 1);
                (self.build_after(&current, backends, Some(change))?, true)
            }
        };
        self.publish(&current, next);
        Ok(changed)
    }

    /// Removes the member with this identity; its in-flight requests leave
    /// the total at once, and its guards release harmlessly.
    ///
    /// # Errors
    /// No member has this identity; or the members left all have weight 0.
    pub fn remove<'a>(&self, id: impl Into<Id<'a>>) -> Result<(), crate::Error> {
        let id = id.into();
        let _writer = self.lock();
        let current = self.snapshot.load_full();
        let i = Self::position(&current, id)?;
        let mut backends = current.backends.clone();
        backends.remove(i);
        let next = self.build_after(&current, backends, Some(Change::Removed(i)))?;
        self.publish(&current, next);
        Ok(())
    }

    fn build_after(
        &self,
        current: &Snapshot<T>,
        backends: Vec<Arc<Backend<T>>>,
        change: Option<Change>,
    ) -> Result<Snapshot<T>, BuildError> {
        let incremental = match (&current.engine, change) {
            (Some(engine), Some(change)) if !backends.is_empty() => Some((engine.picker(), change)),
            _ => None,
        };
        self.build(backends, incremental)
    }

    /// The index of the member with this identity, in O(log n) (see
    /// `Snapshot::by_id`): callers mark or look up every member one by one.
    fn position(snapshot: &Snapshot<T>, id: Id<'_>) -> Result<usize, UnknownEndpoint> {
        snapshot
            .index_of(id)
            .ok_or_else(|| UnknownEndpoint::new(id.to_string()))
    }

    /// Picks an endpoint for `req` and holds one in-flight slot on it until
    /// the returned guard is dropped.
    ///
    /// # Errors
    /// No endpoints; every endpoint unhealthy or excluded; a hashing policy
    /// given no key or code, or a code beyond its hash range.
    #[inline]
    pub fn pick(&self, req: &Request<'_>) -> Result<Pick<T>, PickError> {
        let snapshot = self.snapshot.load();
        let (i, spilled) = snapshot.pick_index_spilling(req)?;
        Ok(Pick::new(snapshot.backends[i].clone()).spilled_if(spilled))
    }

    /// A handle for one thread whose picks cost the policy's lookup and the
    /// in-flight counter, nothing more: no shared reference counts, no
    /// protection of the snapshot per pick. Its guards stay on the thread.
    /// See [`LocalBalancer`] for when to use it.
    pub fn local(&self) -> LocalBalancer<'_, T> {
        LocalBalancer::new(self)
    }

    /// The policy's order of preference for `req`, lazily: for hashing
    /// policies the clockwise walk from the key (its owner first, then the
    /// ring successors), for the others their next choice and then the rest.
    /// Each eligible endpoint comes once; the caller reserves a candidate
    /// ([`Candidate::try_reserve`], [`Candidate::reserve`]) or passes it over.
    ///
    /// Retries use it: the endpoint after the one that failed is the next
    /// candidate. The candidates are those of the membership when this was
    /// called, so a retry loop may span a membership change.
    ///
    /// ```
    /// use loadring::{Balancer, Endpoint, Request};
    ///
    /// let endpoints = ["a:80", "b:80", "c:80"].map(|a| Endpoint::new(a).unwrap());
    /// let balancer = Balancer::new("c_murmurhash".parse()?, endpoints)?;
    /// let req = Request::key("user:42");
    /// let mut candidates = balancer.candidates(&req)?;
    /// let first = candidates.next().unwrap();
    /// assert_eq!(first.addr(), balancer.pick(&req)?.addr(), "the first candidate is the pick");
    /// let retry = candidates.next().unwrap().reserve(); // the ring successor
    /// assert_ne!(retry.addr(), first.addr());
    /// # Ok::<(), loadring::Error>(())
    /// ```
    ///
    /// # Errors
    /// No endpoints; a hashing policy given no key or code, or a code beyond
    /// its hash range.
    pub fn candidates<'r>(&self, req: &Request<'r>) -> Result<Candidates<'r, T>, PickError> {
        let snapshot = self.snapshot.load_full();
        let picker = snapshot
            .engine
            .as_ref()
            .ok_or(PickError::no_endpoints())?
            .shared();
        let order = picker.clone().candidates(req)?;
        Ok(Candidates {
            seen: vec![0; snapshot.backends.len().div_ceil(64)],
            snapshot,
            picker,
            order,
            req: *req,
        })
    }

    /// The endpoint a hashing policy places `req` on with no load (the key's
    /// owner, walking past unhealthy and excluded endpoints), without
    /// reserving anything and without allocating; `Ok(None)` for policies
    /// that do not place by hash. For callers that only need placement: a
    /// cache client sharding keys, `loadring place`.
    ///
    /// # Errors
    /// As [`Balancer::pick`].
    #[inline]
    pub fn route(&self, req: &Request<'_>) -> Result<Option<Route<T>>, PickError> {
        let snapshot = self.snapshot.load();
        match snapshot.route_index(req)? {
            Some(i) => Ok(Some(Route::shared(snapshot, i))),
            None => Ok(None),
        }
    }

    /// Marks the member with this identity healthy or not. Nothing is
    /// rebuilt: picks skip unhealthy endpoints.
    ///
    /// Like every lookup by identity, it finds the member by a binary
    /// search, in O(log n) (the first one after a membership change sorts
    /// the members once), so marking each of n members costs O(n log n).
    ///
    /// # Errors
    /// No member has this identity.
    pub fn set_healthy<'a>(
        &self,
        id: impl Into<Id<'a>>,
        healthy: bool,
    ) -> Result<(), UnknownEndpoint> {
        let snapshot = self.snapshot.load();
        let i = Self::position(&snapshot, id.into())?;
        snapshot.backends[i].member.set_healthy(healthy);
        Ok(())
    }

    /// Tells the balancer the load the member with this identity reports:
    /// its requests in service as it counts them, across every balancer.
    /// Bounded policies then count its load as the report plus this
    /// balancer's picks on it since, minus those completed since, until the
    /// report is older than the policy's `report_max_age=` (see
    /// [`LoadReport`] and the README's "Many balancers, one cap"). A report
    /// that comes with a response goes with its outcome instead
    /// ([`Outcome::with_report`](crate::Outcome::with_report)).
    ///
    /// ```
    /// use loadring::{Balancer, Endpoint, LoadReport, Request};
    ///
    /// let balancer = Balancer::new("c_murmurhash_bl".parse()?, [Endpoint::new("e0")?, Endpoint::new("e1")?])?;
    /// balancer.report_load("e0", LoadReport::new(30))?;
    /// let pick = balancer.pick(&Request::key("k"))?;
    /// let loads = balancer.reported_loads();
    /// assert_eq!(loads[1].1, None, "e1 never reported");
    /// // e0: 30 reported, plus our pick if it landed there.
    /// assert_eq!(loads[0].1, Some(30 + u64::from(pick.addr() == "e0")));
    /// assert!(balancer.report_load("nope", LoadReport::new(1)).is_err());
    /// # Ok::<(), loadring::Error>(())
    /// ```
    ///
    /// # Errors
    /// No member has this identity.
    pub fn report_load<'a>(
        &self,
        id: impl Into<Id<'a>>,
        report: LoadReport,
    ) -> Result<(), UnknownEndpoint> {
        let snapshot = self.snapshot.load();
        let i = Self::position(&snapshot, id.into())?;
        snapshot.backends[i].member.apply_report(&report, 0);
        Ok(())
    }

    /// Each current endpoint's load as the bounded policies count it now,
    /// in order: the last report plus this balancer's picks on it since,
    /// minus those completed since; `None` where the endpoint never reported
    /// or its last report is older than `report_max_age=` (its local count,
    /// [`Balancer::loads`], is used then). Ages are measured on the process
    /// clock.
    pub fn reported_loads(&self) -> Vec<(Endpoint, Option<u64>)> {
        self.reported_loads_at(crate::clock::now())
    }

    /// [`Balancer::reported_loads`] at time `now`, on the clock of the
    /// requests' [`Request::at`] (virtual time in a simulation).
    pub fn reported_loads_at(&self, now: Duration) -> Vec<(Endpoint, Option<u64>)> {
        let snapshot = self.snapshot.load();
        let now = crate::inflight::fleet::micros(now);
        let max_age = crate::inflight::fleet::micros(self.fleet.max_age());
        snapshot
            .backends
            .iter()
            .map(|b| {
                let offset = b.member.report().fresh_offset(|| now, max_age);
                let load = offset.map(|o| crate::inflight::fleet::with_offset(b.member.load(), o));
                (b.endpoint.clone(), load)
            })
            .collect()
    }

    /// Whether the member with this identity is marked healthy.
    ///
    /// # Errors
    /// No member has this identity.
    pub fn is_healthy<'a>(&self, id: impl Into<Id<'a>>) -> Result<bool, UnknownEndpoint> {
        let snapshot = self.snapshot.load();
        let i = Self::position(&snapshot, id.into())?;
        Ok(snapshot.backends[i].member.is_healthy())
    }

    /// The current endpoints, in order.
    pub fn endpoints(&self) -> Vec<Endpoint> {
        self.snapshot.load().endpoints.clone()
    }

    /// Each current endpoint's requests in flight, in order.
    pub fn loads(&self) -> Vec<(Endpoint, u64)> {
        let snapshot = self.snapshot.load();
        snapshot
            .backends
            .iter()
            .map(|b| (b.endpoint.clone(), b.member.load()))
            .collect()
    }

    /// Requests in flight on the current members.
    pub fn total_in_flight(&self) -> u64 {
        if self.tallied {
            self.total.load(Relaxed).max(0) as u64
        } else {
            self.snapshot
                .load()
                .backends
                .iter()
                .map(|b| b.member.load())
                .sum()
        }
    }

    /// The cap the next bounded pick would apply to the member with this
    /// identity: the most requests in flight a bounded pick leaves on it
    /// (under Envoy's `hash_balance_factor`, which admits while
    /// `in_flight <= slots`, that is `slots + 1`); `Ok(None)` for unbounded
    /// policies.
    ///
    /// # Errors
    /// No member has this identity.
    pub fn cap<'a>(&self, id: impl Into<Id<'a>>) -> Result<Option<u64>, UnknownEndpoint> {
        let snapshot = self.snapshot.load();
        let i = Self::position(&snapshot, id.into())?;
        Ok(snapshot.engine.as_ref().and_then(|e| e.picker().cap(i)))
    }

    /// The lifecycle of the member with this identity at time `at`
    /// ([`clock::now`](crate::clock::now) for a balancer that is not given
    /// times): the time left of an outlier ejection and the slow-start ramp
    /// (both `None` when the policy has no lifecycle keys, or the endpoint is
    /// in plain service).
    ///
    /// ```
    /// use loadring::{Balancer, Endpoint};
    ///
    /// let b: Balancer<()> = Balancer::new("rr:slow_start=10s".parse()?, [
    ///     Endpoint::new("10.0.0.1:80")?,
    /// ])?;
    /// b.insert(Endpoint::new("10.0.0.2:80")?, ())?;
    /// // Present from the start: in service. Added later: ramping.
    /// let now = loadring::clock::now();
    /// assert_eq!(b.lifecycle("10.0.0.1:80", now)?.slow_start, None);
    /// assert!(b.lifecycle("10.0.0.2:80", now)?.slow_start.is_some());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// No member has this identity.
    pub fn lifecycle<'a>(
        &self,
        id: impl Into<Id<'a>>,
        at: std::time::Duration,
    ) -> Result<crate::policy::lifecycle::LifecycleView, UnknownEndpoint> {
        let snapshot = self.snapshot.load();
        let i = Self::position(&snapshot, id.into())?;
        Ok(lifecycle_of(
            &snapshot.backends[i].member,
            crate::clock::nanos(at),
        ))
    }

    /// Every member's endpoint, load, health mark, cap and lifecycle at
    /// time `at` (as [`Balancer::lifecycle`]), in order, from one snapshot
    /// in one pass: what a status page shows, without a lookup per member.
    ///
    /// ```
    /// use loadring::{Balancer, Endpoint};
    ///
    /// let b: Balancer<()> = Balancer::new("c_murmurhash_bl".parse()?, [
    ///     Endpoint::new("10.0.0.1:80")?,
    ///     Endpoint::new("10.0.0.2:80")?,
    /// ])?;
    /// let held = b.pick(&loadring::Request::key(b"user42"))?;
    /// let states = b.states(loadring::clock::now());
    /// assert_eq!(states.iter().map(|s| s.in_flight).sum::<u64>(), 1);
    /// assert!(states.iter().all(|s| s.healthy && s.cap.is_some()));
    /// # drop(held);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn states(&self, at: std::time::Duration) -> Vec<self::member_state::MemberState> {
        let snapshot = self.snapshot.load();
        let now = crate::clock::nanos(at);
        let picker = snapshot.engine.as_ref().map(|e| e.picker());
        snapshot
            .backends
            .iter()
            .enumerate()
            .map(|(i, b)| self::member_state::MemberState {
                endpoint: b.endpoint.clone(),
                in_flight: b.member.load(),
                healthy: b.member.is_healthy(),
                cap: picker.and_then(|p| p.cap(i)),
                lifecycle: lifecycle_of(&b.member, now),
            })
            .collect()
    }

    /// How the hash space is divided (hashing policies only).
    ///
    /// # Errors
    /// No endpoints.
    pub fn layout(&self) -> Result<Option<Layout>, PickError> {
        let snapshot = self.snapshot.load();
        Ok(snapshot
            .engine
            .as_ref()
            .ok_or(PickError::no_endpoints())?
            .picker()
            .layout())
    }
}

impl<T: Clone> Balancer<T> {
    /// Changes the weight of the member with this identity (its value is
    /// cloned into the new membership).
    ///
    /// # Errors
    /// No member has this identity; or every weight would be 0.
    pub fn set_weight<'a>(&self, id: impl Into<Id<'a>>, weight: u32) -> Result<(), crate::Error> {
        let id = id.into();
        let _writer = self.lock();
        let current = self.snapshot.load_full();
        let i = Self::position(&current, id)?;
        if current.endpoints[i].weight() == weight {
            return Ok(());
        }
        let mut backends = current.backends.clone();
        let old = &current.backends[i];
        let endpoint = old.endpoint.clone().with_weight(weight);
        backends[i] = Arc::new(Backend {
            member: old.member.clone(),
            endpoint,
            value: old.value.clone(),
        });
        let next = self.build_after(&current, backends, Some(Change::Reweighted(i)))?;
        self.publish(&current, next);
        Ok(())
    }
}

/// The candidates of one request, in the policy's order of preference (see
/// [`Balancer::candidates`]). Owns what it needs, so a retry loop can hold it
/// across `.await`s.
pub struct Candidates<'r, T> {
    snapshot: Arc<Snapshot<T>>,
    picker: Arc<dyn Picker>,
    order: Order,
    req: Request<'r>,
    /// One bit per pool index already yielded or passed.
    seen: Vec<u64>,
}

impl<T> fmt::Debug for Candidates<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Candidates").finish_non_exhaustive()
    }
}

impl<T> Iterator for Candidates<'_, T> {
    type Item = Candidate<T>;

    fn next(&mut self) -> Option<Candidate<T>> {
        let pool = self.picker.pool();
        for i in self.order.by_ref() {
            if i >= self.snapshot.backends.len() {
                continue;
            }
            let (word, bit) = (i / 64, 1u64 << (i % 64));
            if self.seen[word] & bit != 0 {
                continue;
            }
            self.seen[word] |= bit;
            if pool.eligible(i, &self.req) {
                return Some(Candidate {
                    backend: self.snapshot.backends[i].clone(),
                    picker: self.picker.clone(),
                    index: i,
                });
            }
        }
        None
    }
}

/// One endpoint a request may go to; nothing is reserved until
/// [`Candidate::try_reserve`] or [`Candidate::reserve`]. It dereferences to
/// the [`Backend`] it offers.
pub struct Candidate<T> {
    backend: Arc<Backend<T>>,
    picker: Arc<dyn Picker>,
    index: usize,
}

impl<T> fmt::Debug for Candidate<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Candidate")
            .field("endpoint", &self.backend.endpoint)
            .finish_non_exhaustive()
    }
}

impl<T> Deref for Candidate<T> {
    type Target = Backend<T>;

    #[inline]
    fn deref(&self) -> &Backend<T> {
        &self.backend
    }
}

impl<T> Candidate<T> {
    /// Reserves a slot if the policy admits one more request here (a bounded
    /// policy checks the endpoint's cap); `None` otherwise.
    pub fn try_reserve(&self) -> Option<Pick<T>> {
        self.picker
            .try_reserve(self.index)
            .then(|| Pick::new(self.backend.clone()))
    }

    /// Reserves a slot whatever the load.
    pub fn reserve(&self) -> Pick<T> {
        self.backend.member.reserve();
        Pick::new(self.backend.clone())
    }
}

/// A member's lifecycle at `now` (ns): its [`LifecycleState`](crate::policy::lifecycle::LifecycleState)
/// if the policy gave it one, under whatever states wrap it.
fn lifecycle_of(member: &Member, now: u64) -> crate::policy::lifecycle::LifecycleView {
    member
        .find_observer::<crate::policy::lifecycle::LifecycleState>()
        .map_or_else(Default::default, |state| state.view(now))
}

/// Counts one comparison of identities by a lookup (the crate's tests read
/// the count, to see that marking n members stays near n log n of them).
#[inline(always)]
fn compared() {
    #[cfg(test)]
    tests::COMPARED.with(|c| c.set(c.get() + 1));
}

#[cfg(test)]
mod tests;
