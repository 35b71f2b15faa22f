//! `Balancer`: an immutable snapshot behind an atomic pointer, picked lock-free.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicI64;
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;

use crate::describe::Layout;
use crate::endpoint::{dedup, Endpoint};
use crate::error::{Error, Result};
use crate::load::{Member, Pick};
use crate::policy::Policy;
use crate::pool::Pool;
use crate::request::Request;
use crate::spec::PolicySpec;

/// A load balancer: one policy over a changing set of endpoints.
///
/// Picks read an immutable snapshot (endpoints, built ring or table) through
/// an atomic pointer: they take no lock and allocate nothing. `update` builds
/// the next snapshot off to the side and swaps it in; picks in progress finish
/// on the snapshot they started with. In-flight counters and health belong to
/// the backend (address and tag), so they survive updates that keep it.
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
/// # When nothing can be picked
/// Unhealthy endpoints (see [`Balancer::set_healthy`]) and those a request
/// excludes are skipped by walking on (clockwise, for hashing policies). When
/// every endpoint is unhealthy or excluded, `pick` returns
/// [`Error::NoEligibleEndpoint`]: retrying on an endpoint the caller chose to
/// avoid is a decision left to the caller, who can pick again without the
/// exclusion.
///
/// # Bounded load under concurrency
/// Single-threaded, a bounded pick never takes an endpoint past its cap
/// `ceil(F * (total + 1) * w / W)`, except in the fallback: when unhealthy or
/// excluded endpoints leave no eligible endpoint below its cap, the pick goes
/// to the least-loaded eligible one. Under `T` threads each reservation is a
/// compare-and-swap against the cap computed from the total its pick read, so
/// no reservation exceeds that cap; the total read may lag behind picks and
/// releases of other threads. With at most `G` guards alive at once and at
/// least `n` eligible endpoints, no endpoint holds more than
/// `max(cap(G + T), (G + T) / n) + T` requests (the stress tests check it).
#[derive(Debug)]
pub struct Balancer {
    spec: PolicySpec,
    snapshot: ArcSwap<Snapshot>,
    total: Arc<AtomicI64>,
    /// Whether members count their reservations in `total` (bounded policies).
    tallied: bool,
    /// Serializes writers; readers never touch it.
    writer: Mutex<()>,
}

#[derive(Debug)]
struct Snapshot {
    endpoints: Vec<Endpoint>,
    members: Vec<Arc<Member>>,
    /// `None` while there are no endpoints.
    policy: Option<Box<dyn Policy>>,
}

impl Balancer {
    /// A balancer running `spec` over `endpoints` (possibly none yet).
    ///
    /// # Errors
    /// Conflicting endpoints, every weight 0, or a policy that cannot be built
    /// over them (a ring too large, ...).
    pub fn new(spec: PolicySpec, endpoints: impl IntoIterator<Item = Endpoint>) -> Result<Self> {
        let total = Arc::new(AtomicI64::new(0));
        let tallied = spec.load_factor().is_some();
        let endpoints = dedup(endpoints)?;
        let members: Vec<Arc<Member>> = endpoints
            .iter()
            .map(|e| new_member(e, tallied, &total))
            .collect();
        let snapshot = build(&spec, endpoints, members, tallied, &total)?;
        Ok(Balancer {
            spec,
            snapshot: ArcSwap::from_pointee(snapshot),
            total,
            tallied,
            writer: Mutex::new(()),
        })
    }

    /// The policy specification.
    pub fn spec(&self) -> &PolicySpec {
        &self.spec
    }

    /// Replaces the membership. Returns `Ok(false)` without rebuilding when it
    /// is unchanged (same endpoints in the same order).
    ///
    /// Backends that stay keep their in-flight counters and health; removed
    /// ones leave the total at once, and their outstanding guards release
    /// harmlessly.
    ///
    /// # Errors
    /// As [`Balancer::new`]; the balancer then keeps its current membership.
    pub fn update(&self, endpoints: impl IntoIterator<Item = Endpoint>) -> Result<bool> {
        let endpoints = dedup(endpoints)?;
        // A poisoned lock only means another writer panicked; the snapshot it
        // guards is replaced whole, so it is never half-written.
        let _writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let current = self.snapshot.load_full();
        if current.endpoints == endpoints {
            return Ok(false);
        }
        // Maps, not scans: a membership of n endpoints is matched in O(n).
        let by_identity: HashMap<(&str, Option<&str>), &Arc<Member>> = current
            .members
            .iter()
            .map(|m| ((m.addr(), m.tag()), m))
            .collect();
        let members: Vec<Arc<Member>> = endpoints
            .iter()
            .map(|e| match by_identity.get(&(e.addr(), e.tag())) {
                Some(&m) => m.clone(),
                None => new_member(e, self.tallied, &self.total),
            })
            .collect();
        let next = build(&self.spec, endpoints, members, self.tallied, &self.total)?;
        let kept: HashSet<*const Member> = next.members.iter().map(Arc::as_ptr).collect();
        for old in &current.members {
            if !kept.contains(&Arc::as_ptr(old)) {
                old.retire();
            }
        }
        self.snapshot.store(Arc::new(next));
        Ok(true)
    }

    /// Picks an endpoint for `req` and holds one in-flight slot on it until
    /// the returned guard is dropped.
    ///
    /// # Errors
    /// No endpoints; every endpoint unhealthy or excluded; a hashing policy
    /// given no key or code, or a code beyond its hash range.
    #[inline]
    pub fn pick(&self, req: &Request<'_>) -> Result<Pick> {
        let snapshot = self.snapshot.load();
        let policy = snapshot.policy.as_ref().ok_or(Error::NoEndpoints)?;
        policy.pick(req).map(|m| Pick::new(m.clone()))
    }

    /// The address a hashing policy would choose for `req` with no load (the
    /// key's natural owner), without reserving anything; `Ok(None)` for
    /// policies that do not place by hash.
    ///
    /// # Errors
    /// As [`Balancer::pick`].
    pub fn natural_owner(&self, req: &Request<'_>) -> Result<Option<String>> {
        let snapshot = self.snapshot.load();
        let policy = snapshot.policy.as_ref().ok_or(Error::NoEndpoints)?;
        policy
            .natural(req)
            .transpose()
            .map(|m| m.map(|m| m.addr().to_string()))
    }

    /// Marks every endpoint at `addr` healthy or not. Nothing is rebuilt:
    /// picks skip unhealthy endpoints.
    ///
    /// # Errors
    /// `addr` is not a member.
    pub fn set_healthy(&self, addr: &str, healthy: bool) -> Result<()> {
        let snapshot = self.snapshot.load();
        let mut found = false;
        for m in snapshot.members.iter().filter(|m| m.addr() == addr) {
            m.set_healthy(healthy);
            found = true;
        }
        if found {
            Ok(())
        } else {
            Err(Error::UnknownEndpoint(addr.to_string()))
        }
    }

    /// The current endpoints, in order.
    pub fn endpoints(&self) -> Vec<Endpoint> {
        self.snapshot.load().endpoints.clone()
    }

    /// Each current endpoint's requests in flight, in order.
    pub fn loads(&self) -> Vec<(Endpoint, u64)> {
        let snapshot = self.snapshot.load();
        snapshot
            .endpoints
            .iter()
            .cloned()
            .zip(snapshot.members.iter().map(|m| m.load()))
            .collect()
    }

    /// Requests in flight on the current members.
    pub fn total_in_flight(&self) -> u64 {
        if self.tallied {
            self.total.load(std::sync::atomic::Ordering::Relaxed).max(0) as u64
        } else {
            self.snapshot.load().members.iter().map(|m| m.load()).sum()
        }
    }

    /// The cap the next bounded pick would apply to the endpoint at `addr`;
    /// `Ok(None)` for unbounded policies.
    ///
    /// # Errors
    /// `addr` is not a member.
    pub fn cap(&self, addr: &str) -> Result<Option<u64>> {
        let snapshot = self.snapshot.load();
        let member = snapshot
            .members
            .iter()
            .find(|m| m.addr() == addr)
            .ok_or_else(|| Error::UnknownEndpoint(addr.into()))?;
        Ok(snapshot.policy.as_ref().and_then(|p| p.cap(member)))
    }

    /// How the hash space is divided (hashing policies only).
    ///
    /// # Errors
    /// No endpoints.
    pub fn layout(&self) -> Result<Option<Layout>> {
        let snapshot = self.snapshot.load();
        Ok(snapshot.policy.as_ref().ok_or(Error::NoEndpoints)?.layout())
    }
}

fn new_member(endpoint: &Endpoint, tallied: bool, total: &Arc<AtomicI64>) -> Arc<Member> {
    Arc::new(if tallied {
        Member::new(endpoint, total.clone())
    } else {
        Member::untallied(endpoint)
    })
}

fn build(
    spec: &PolicySpec,
    endpoints: Vec<Endpoint>,
    members: Vec<Arc<Member>>,
    tallied: bool,
    total: &Arc<AtomicI64>,
) -> Result<Snapshot> {
    if endpoints.is_empty() {
        return Ok(Snapshot {
            endpoints,
            members,
            policy: None,
        });
    }
    if endpoints.iter().all(|e| e.weight() == 0) {
        return Err(Error::AllWeightsZero);
    }
    // Without a running total the pool sums its members when asked, as a
    // sub-pool does.
    let pool = Pool::new(endpoints.clone(), members.clone(), tallied, total.clone());
    let policy = spec.build(pool)?;
    Ok(Snapshot {
        endpoints,
        members,
        policy: Some(policy),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoints(addrs: &[&str]) -> Vec<Endpoint> {
        addrs.iter().map(|a| Endpoint::new(*a).unwrap()).collect()
    }

    /// Plain balancers keep no running total and sum their members instead:
    /// both ways must count the same guards, current members only.
    #[test]
    fn totals_count_current_members_with_or_without_a_running_total() {
        for spec in ["c_murmurhash", "c_murmurhash_bl"] {
            let b =
                Balancer::new(spec.parse().unwrap(), endpoints(&["a:1", "b:1", "c:1"])).unwrap();
            let picks: Vec<Pick> = (0..30)
                .map(|i| b.pick(&Request::key(&format!("key{i}"))).unwrap())
                .collect();
            assert_eq!(b.total_in_flight(), 30, "{spec}");
            let on_c = picks.iter().filter(|p| p.addr() == "c:1").count() as u64;
            assert!(on_c > 0, "{spec}: the test needs a guard on c");
            assert!(b.update(endpoints(&["b:1", "a:1"])).unwrap());
            assert_eq!(b.total_in_flight(), 30 - on_c, "{spec}: c left");
            let loads: u64 = b.loads().iter().map(|(_, l)| l).sum();
            assert_eq!(loads, 30 - on_c, "{spec}");
            assert!(b.update(endpoints(&["a:1", "b:1", "c:1"])).unwrap());
            assert_eq!(b.total_in_flight(), 30 - on_c, "{spec}: c is back, empty");
            drop(picks);
            assert_eq!(b.total_in_flight(), 0, "{spec}");
            assert!(b.loads().iter().all(|(_, l)| *l == 0), "{spec}");
        }
    }
}
