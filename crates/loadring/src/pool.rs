//! The endpoints one policy instance chooses among, with their shared state.

use std::sync::atomic::{AtomicI64, Ordering::Relaxed};
use std::sync::Arc;

use crate::endpoint::Endpoint;
use crate::load::Member;
use crate::request::Request;

/// The endpoints a policy picks from, in the policy's own index order.
///
/// A locality policy builds its inner policies over sub-pools (one zone's
/// endpoints); `whole` says whether this pool is the balancer's entire
/// membership, whose total load is kept in one counter.
#[derive(Debug, Clone)]
pub(crate) struct Pool {
    endpoints: Vec<Endpoint>,
    members: Vec<Arc<Member>>,
    weight_sum: u64,
    whole: bool,
    total: Arc<AtomicI64>,
}

impl Pool {
    pub(crate) fn new(
        endpoints: Vec<Endpoint>,
        members: Vec<Arc<Member>>,
        whole: bool,
        total: Arc<AtomicI64>,
    ) -> Self {
        debug_assert_eq!(endpoints.len(), members.len());
        let weight_sum = endpoints.iter().map(|e| u64::from(e.weight())).sum();
        Pool {
            endpoints,
            members,
            weight_sum,
            whole,
            total,
        }
    }

    /// The sub-pool of the endpoints at `indices` (never the whole membership,
    /// even if it happens to hold all of it: its total is summed on demand).
    pub(crate) fn subset(&self, indices: &[usize]) -> Pool {
        let endpoints = indices.iter().map(|&i| self.endpoints[i].clone()).collect();
        let members = indices.iter().map(|&i| self.members[i].clone()).collect();
        Pool::new(endpoints, members, false, self.total.clone())
    }

    pub(crate) fn len(&self) -> usize {
        self.endpoints.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.endpoints.is_empty()
    }

    pub(crate) fn endpoints(&self) -> &[Endpoint] {
        &self.endpoints
    }

    pub(crate) fn endpoint(&self, i: usize) -> &Endpoint {
        &self.endpoints[i]
    }

    #[inline]
    pub(crate) fn member(&self, i: usize) -> &Arc<Member> {
        &self.members[i]
    }

    #[inline]
    pub(crate) fn weight(&self, i: usize) -> u32 {
        self.endpoints[i].weight()
    }

    pub(crate) fn weight_sum(&self) -> u64 {
        self.weight_sum
    }

    #[inline]
    pub(crate) fn load(&self, i: usize) -> u64 {
        self.members[i].load()
    }

    /// In-flight requests on the endpoints of this pool.
    #[inline]
    pub(crate) fn total_load(&self) -> u64 {
        if self.whole {
            // Transiently negative while a removal and a reservation race.
            self.total.load(Relaxed).max(0) as u64
        } else {
            self.members.iter().map(|m| m.load()).sum()
        }
    }

    /// Healthy, not excluded by the request, and of non-zero weight.
    #[inline]
    pub(crate) fn eligible(&self, i: usize, req: &Request<'_>) -> bool {
        let m = &self.members[i];
        self.endpoints[i].weight() > 0
            && m.is_healthy()
            && (req.excluded.is_empty() || !req.excludes(m.addr()))
    }

    /// Number of eligible endpoints for `req`.
    pub(crate) fn eligible_count(&self, req: &Request<'_>) -> usize {
        (0..self.len()).filter(|&i| self.eligible(i, req)).count()
    }

    /// Reserves a slot on endpoint `i` unconditionally.
    #[inline]
    pub(crate) fn take(&self, i: usize) -> &Arc<Member> {
        let m = &self.members[i];
        m.reserve();
        m
    }

    /// The eligible endpoint with the fewest requests in flight (the first
    /// such in pool order on ties), or `None`.
    pub(crate) fn least_loaded(&self, req: &Request<'_>) -> Option<usize> {
        (0..self.len())
            .filter(|&i| self.eligible(i, req))
            .min_by_key(|&i| self.load(i))
    }
}
