//! The endpoints one picker chooses among, with their shared state.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use crate::endpoint::Endpoint;
use crate::inflight::fleet::FleetState;
use crate::inflight::member::Member;
use crate::request::Request;

/// The endpoints a [`Picker`](crate::policy::Picker) chooses among, by index,
/// with what it needs to know of each: weight, health, requests in flight.
///
/// Indices are the balancer's order of endpoints (for the pickers a locality
/// policy builds per zone, the zone's endpoints in that order). A pool is
/// cheap to clone: the counters are shared.
#[derive(Debug, Clone)]
pub struct Pool {
    endpoints: Vec<Endpoint>,
    members: Vec<Arc<Member>>,
    weight_sum: u64,
    /// No endpoint has weight 0 and none has per-endpoint policy state
    /// (an observer that may eject it): while every member is healthy and a
    /// request excludes nothing, every endpoint is eligible.
    plain: bool,
    /// No endpoint has weight 0: eligibility need not look at weights.
    all_weighted: bool,
    /// Members of the balancer marked unhealthy (shared with the members).
    unhealthy: Arc<AtomicU64>,
    whole: bool,
    total: Arc<AtomicI64>,
    /// Set while the endpoint lifecycle is in panic (too few endpoints
    /// healthy): health and ejection are then ignored (see `policy/lifecycle.rs`).
    panic: Option<Arc<AtomicBool>>,
    /// What the balancer's members share about load reports (see
    /// `inflight/fleet.rs`).
    fleet: Arc<FleetState>,
    /// A part of the membership ([`Pool::subset`]: a zone's endpoints),
    /// not the membership itself.
    part: bool,
}

impl Pool {
    pub(crate) fn new(
        endpoints: Vec<Endpoint>,
        members: Vec<Arc<Member>>,
        whole: bool,
        total: Arc<AtomicI64>,
        unhealthy: Arc<AtomicU64>,
        fleet: Arc<FleetState>,
    ) -> Self {
        debug_assert_eq!(endpoints.len(), members.len());
        let weight_sum = endpoints.iter().map(|e| u64::from(e.weight())).sum();
        let all_weighted = endpoints.iter().all(|e| e.weight() > 0);
        let plain = all_weighted && members.iter().all(|m| m.observer().is_none());
        Pool {
            endpoints,
            members,
            weight_sum,
            plain,
            all_weighted,
            unhealthy,
            whole,
            total,
            panic: None,
            fleet,
            part: false,
        }
    }

    /// A whole pool over `endpoints`, with members of its own (for tests).
    #[cfg(test)]
    pub(crate) fn for_test(endpoints: Vec<Endpoint>) -> Pool {
        let total = Arc::new(AtomicI64::new(0));
        let unhealthy = Arc::new(AtomicU64::new(0));
        let fleet = Arc::new(FleetState::default());
        let members = endpoints
            .iter()
            .map(|e| {
                let total = Some(total.clone());
                Arc::new(Member::new(
                    e,
                    total,
                    None,
                    unhealthy.clone(),
                    fleet.clone(),
                ))
            })
            .collect();
        Pool::new(endpoints, members, true, total, unhealthy, fleet)
    }

    /// This pool, ignoring health and ejection while `panic` is set.
    pub(crate) fn with_panic(mut self, panic: Arc<AtomicBool>) -> Pool {
        self.panic = Some(panic);
        self
    }

    /// The sub-pool of the endpoints at `indices` (never the whole membership,
    /// even if it happens to hold all of it: its total is summed on demand).
    pub(crate) fn subset(&self, indices: &[usize]) -> Pool {
        let endpoints = indices.iter().map(|&i| self.endpoints[i].clone()).collect();
        let members = indices.iter().map(|&i| self.members[i].clone()).collect();
        let mut pool = Pool::new(
            endpoints,
            members,
            false,
            self.total.clone(),
            self.unhealthy.clone(),
            self.fleet.clone(),
        );
        pool.panic = self.panic.clone();
        pool.part = true;
        pool
    }

    /// Whether this pool is a part of the membership (a zone's endpoints,
    /// see [`Pool::subset`]) rather than the membership itself.
    pub(crate) fn is_part(&self) -> bool {
        self.part
    }

    /// Whether endpoint `i` comes back: removed earlier while requests
    /// reserved on it still ran, it is a member again once the snapshot
    /// built over this pool is published (until then it is retired).
    pub(crate) fn is_rejoining(&self, i: usize) -> bool {
        self.members[i].is_retired()
    }

    /// Number of endpoints.
    pub fn len(&self) -> usize {
        self.endpoints.len()
    }

    /// Whether the pool has no endpoints.
    pub fn is_empty(&self) -> bool {
        self.endpoints.is_empty()
    }

    /// The endpoints, in index order.
    pub fn endpoints(&self) -> &[Endpoint] {
        &self.endpoints
    }

    /// Endpoint `i`.
    pub fn endpoint(&self, i: usize) -> &Endpoint {
        &self.endpoints[i]
    }

    /// The weight of endpoint `i`.
    #[inline]
    pub fn weight(&self, i: usize) -> u32 {
        self.endpoints[i].weight()
    }

    /// The sum of all weights.
    pub fn weight_sum(&self) -> u64 {
        self.weight_sum
    }

    /// How many endpoints have a weight above 0: those a ring gives points.
    pub(crate) fn weighted_len(&self) -> usize {
        self.endpoints.iter().filter(|e| e.weight() > 0).count()
    }

    /// Requests in flight on endpoint `i`.
    #[inline]
    pub fn load(&self, i: usize) -> u64 {
        self.members[i].load()
    }

    /// In-flight requests on the endpoints of this pool.
    #[inline]
    pub fn total_load(&self) -> u64 {
        if self.whole {
            // Transiently negative while a removal and a reservation race.
            self.total.load(Relaxed).max(0) as u64
        } else {
            self.members.iter().map(|m| m.load()).sum()
        }
    }

    /// Whether this pool is the balancer's whole membership (its total is
    /// the running one).
    #[inline]
    pub(crate) fn is_whole(&self) -> bool {
        self.whole
    }

    /// What the balancer's members share about load reports.
    #[inline]
    pub(crate) fn fleet(&self) -> &FleetState {
        &self.fleet
    }

    /// Endpoint `i`'s last load report.
    #[inline]
    pub(crate) fn report(&self, i: usize) -> &crate::inflight::fleet::ReportCell {
        self.members[i].report()
    }

    /// Healthy, admitted by the policy's per-endpoint state (not an ejected
    /// outlier, see [`Observer::admits`](crate::policy::Observer::admits)),
    /// not excluded by the request, and of non-zero weight. In panic (see
    /// the lifecycle's `panic_below=`) health and admission are ignored.
    #[inline(always)]
    pub fn eligible(&self, i: usize, req: &Request<'_>) -> bool {
        // The common case, decided without reading the endpoint's own state
        // (a cache line of its own per endpoint).
        if self.plain
            && i < self.members.len()
            && !req.excludes_any()
            && self.unhealthy.load(Relaxed) == 0
        {
            return true;
        }
        let m = &self.members[i];
        (self.all_weighted || self.endpoints[i].weight() > 0)
            && ((m.is_healthy() && m.admits(req)) || self.panicking())
            && !req.excludes(m.addr(), m.tag())
    }

    /// Healthy and admitted, whatever the request and the panic: what the
    /// panic threshold counts.
    pub(crate) fn in_service(&self, i: usize, req: &Request<'_>) -> bool {
        let m = &self.members[i];
        self.endpoints[i].weight() > 0 && m.is_healthy() && m.admits(req)
    }

    /// Whether health and ejection are ignored right now.
    #[inline]
    fn panicking(&self) -> bool {
        self.panic.as_ref().is_some_and(|p| p.load(Relaxed))
    }

    #[cfg(test)]
    pub(crate) fn member(&self, i: usize) -> &Arc<Member> {
        &self.members[i]
    }

    /// Number of eligible endpoints for `req`.
    pub fn eligible_count(&self, req: &Request<'_>) -> usize {
        (0..self.len()).filter(|&i| self.eligible(i, req)).count()
    }

    /// Reserves one in-flight slot on endpoint `i`, whatever its load.
    #[inline]
    pub fn reserve(&self, i: usize) {
        self.members[i].reserve();
    }

    /// Reserves one in-flight slot on endpoint `i` in the counter of the
    /// local handle holding `slot` (no atomic read-modify-write; see
    /// `inflight/member.rs`). Not for a pool with a running total.
    #[inline]
    pub(crate) fn reserve_in_slot(&self, i: usize, slot: usize) {
        self.members[i].reserve_in_slot(slot);
    }

    /// Reserves one in-flight slot on endpoint `i` if its load stays within
    /// `cap`, atomically (concurrent reservations never take the load past
    /// the cap they were checked against).
    #[inline]
    pub fn try_reserve(&self, i: usize, cap: u64) -> bool {
        self.members[i].try_reserve(cap)
    }

    /// Reserves a slot on endpoint `i` and returns `i`: a pick's last step.
    #[inline]
    pub(crate) fn take(&self, i: usize) -> usize {
        self.reserve(i);
        i
    }

    /// Gives back a slot reserved by a pick that will not be handed out.
    #[inline]
    pub(crate) fn release(&self, i: usize) {
        self.members[i].release();
    }

    /// The per-endpoint state of type `O` the policy attached to endpoint `i`
    /// (see [`Policy::observer`](crate::policy::Policy::observer)).
    /// An observer wrapping others (the endpoint lifecycle's) is looked
    /// through, so a policy finds its own state under the lifecycle's.
    pub fn observer<O: crate::inflight::observer::Observer>(&self, i: usize) -> Option<&O> {
        self.members[i].find_observer()
    }

    /// The eligible endpoint with the fewest requests in flight (the first
    /// such in pool order on ties), or `None`.
    pub fn least_loaded(&self, req: &Request<'_>) -> Option<usize> {
        (0..self.len())
            .filter(|&i| self.eligible(i, req))
            .min_by_key(|&i| self.load(i))
    }
}
