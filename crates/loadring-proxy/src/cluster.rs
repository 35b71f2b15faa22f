//! A cluster: one balancer over one set of upstreams, and how a request's
//! key (or its absence) becomes a reserved endpoint.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use loadring::{
    Balancer, Candidate, Endpoint, Layout, Pick, PickError, PickErrorKind, PolicySpec, Request,
};

use crate::config::ClusterConfig;
use crate::error::{ConfigError, ConfigErrorKind};
use crate::key::{KeySpec, KeyStyle, RequestKey};
use crate::upstream::{Served, Upstream};

/// The balancer's value for each endpoint.
pub type Backend = Arc<Upstream>;

/// A reserved endpoint for one attempt.
#[derive(Debug)]
pub struct Selected {
    /// The guard: one in-flight slot until dropped.
    pub pick: Pick<Backend>,
    /// A bounded pick that left the key's owner (the owner was at its cap).
    pub spilled: bool,
}

/// Why no endpoint was reserved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectError {
    /// Every endpoint is unhealthy or already tried, or there are none.
    #[error("no eligible endpoint")]
    NoEligibleEndpoint,
    /// The balancer refused the request (a code out of range...).
    #[error("{0}")]
    Refused(String),
}

impl From<PickError> for SelectError {
    fn from(e: PickError) -> Self {
        match e.kind() {
            PickErrorKind::NoEndpoints | PickErrorKind::NoEligibleEndpoint => {
                SelectError::NoEligibleEndpoint
            }
            _ => SelectError::Refused(e.to_string()),
        }
    }
}

/// One policy over one set of endpoints, and the request settings that go
/// with it.
#[derive(Debug)]
pub struct Cluster {
    config: ClusterConfig,
    balancer: Balancer<Backend>,
    style: KeyStyle,
    hashing: bool,
    /// Round-robin position for keyless requests under a hashing policy.
    keyless_turn: AtomicU64,
    /// Upstreams by identity, reused across reloads so their check verdicts
    /// survive (the balancer keeps in-flight counts by identity).
    upstreams: Mutex<HashMap<(String, Option<String>), Backend>>,
    /// How the hash space is shared out, computed once per membership (the
    /// admin page reads it; requests never do).
    layout: Mutex<Option<Arc<Layout>>>,
    /// TLS towards the backends (`backend_tls`).
    backend_tls: Option<Arc<tokio_rustls::rustls::ClientConfig>>,
    /// Membership updates begun (tests watch one held in progress).
    updates_begun: AtomicU64,
    /// Taken by each membership update, one at a time; tests hold it to
    /// keep one in progress (nothing else takes it).
    update_gate: Mutex<()>,
}

impl Cluster {
    /// Builds the cluster over the configured endpoints (the file read now).
    ///
    /// # Errors
    /// A bad endpoint or file, or a policy that cannot be built over them.
    pub fn new(config: ClusterConfig) -> Result<Self, ConfigError> {
        Cluster::new_as(config, crate::config::Naming::Keys)
    }

    /// [`Cluster::new`], its errors naming settings as `naming` says.
    ///
    /// # Errors
    /// As [`Cluster::new`]; an unreadable `backend_ca`.
    pub fn new_as(
        config: ClusterConfig,
        naming: crate::config::Naming,
    ) -> Result<Self, ConfigError> {
        let backend_tls = if config.backend_tls {
            let h2 = config.backend_protocol == crate::config::BackendProtocol::H2c;
            Some(
                crate::tls::client_config(config.backend_ca.as_deref(), h2).map_err(|e| {
                    let flag = if config.backend_ca.is_some() {
                        naming.name("backend_ca")
                    } else {
                        naming.name("backend_tls")
                    };
                    ConfigError::new(ConfigErrorKind::Tls, format!("{flag}: {e}"))
                        .with_setting(flag)
                })?,
            )
        } else {
            None
        };
        let endpoints = config
            .read_endpoints()
            .map_err(|e| e.prefixed("endpoints file "))?;
        let spec = config.policy.clone();
        let cluster = Cluster {
            style: KeyStyle::for_policy(&spec),
            hashing: spec.is_hashing(),
            balancer: Balancer::with_backends(config.balancer_policy()?, std::iter::empty())
                .map_err(|e| {
                    ConfigError::new(ConfigErrorKind::Policy, format!("--policy: {e}"))
                        .with_setting("--policy")
                })?,
            config,
            keyless_turn: AtomicU64::new(0),
            upstreams: Mutex::new(HashMap::new()),
            layout: Mutex::new(None),
            backend_tls,
            updates_begun: AtomicU64::new(0),
            update_gate: Mutex::new(()),
        };
        // A cluster that discovers its members may start with none: they
        // come from the source (Proxy::bind waits for its first membership).
        if !(endpoints.is_empty() && cluster.config.discover.is_some()) {
            cluster.set_endpoints(endpoints)?;
        }
        Ok(cluster)
    }

    /// The TLS settings towards its backends, when it speaks TLS to them.
    pub(crate) fn backend_tls(&self) -> Option<&Arc<tokio_rustls::rustls::ClientConfig>> {
        self.backend_tls.as_ref()
    }

    /// The cluster's name.
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// Its configuration.
    pub fn config(&self) -> &ClusterConfig {
        &self.config
    }

    /// The balancer (for loads, health marks and status).
    pub fn balancer(&self) -> &Balancer<Backend> {
        &self.balancer
    }

    /// The policy.
    pub fn policy(&self) -> &PolicySpec {
        &self.config.policy
    }

    /// The key sources.
    pub fn key(&self) -> &KeySpec {
        &self.config.key
    }

    /// How the key is computed for this policy.
    pub fn key_style(&self) -> KeyStyle {
        self.style
    }

    /// Whether the policy places requests by key.
    pub fn is_hashing(&self) -> bool {
        self.hashing
    }

    /// Replaces the membership (the inline endpoints stay first). Endpoints
    /// that stay keep their in-flight counts, health marks, check verdicts
    /// and lifecycle (an ejection runs on);
    /// nothing is rebuilt when nothing changed. Returns whether it changed.
    ///
    /// # Errors
    /// A bad address, or a membership the policy cannot be built over; the
    /// current one is then kept.
    pub fn set_endpoints(&self, endpoints: Vec<Endpoint>) -> Result<bool, ConfigError> {
        if endpoints.is_empty() {
            return Err(ConfigError::new(ConfigErrorKind::Missing, "no endpoints"));
        }
        self.updates_begun.fetch_add(1, Relaxed);
        let _one_at_a_time = self.update_gate.lock().unwrap_or_else(|e| e.into_inner());
        let mut upstreams = self.upstreams.lock().unwrap_or_else(|e| e.into_inner());
        let mut next = HashMap::new();
        let mut backends = Vec::with_capacity(endpoints.len());
        for endpoint in endpoints {
            let id = (
                endpoint.addr().to_string(),
                endpoint.tag().map(str::to_string),
            );
            let upstream = match upstreams.get(&id) {
                Some(u) => u.clone(),
                None => Arc::new(Upstream::new(&endpoint)?),
            };
            next.insert(id, upstream.clone());
            backends.push((endpoint, upstream));
        }
        let marks: Vec<(Backend, bool)> = backends
            .iter()
            .map(|(_, u)| (u.clone(), u.checked_up()))
            .collect();
        let changed = self
            .balancer
            .update_backends(backends)
            .map_err(|e| ConfigError::new(ConfigErrorKind::Policy, e.to_string()))?;
        *upstreams = next;
        if changed {
            *self.layout.lock().unwrap_or_else(|e| e.into_inner()) =
                self.balancer.layout().ok().flatten().map(Arc::new);
        }
        drop(upstreams);
        // A new member starts healthy in the balancer; one that stayed keeps
        // its mark. Either way the mark follows the active checks' verdict.
        // Each mark finds its member in O(log n) (the balancer's index by
        // identity): O(n log n) for the whole membership.
        for (u, healthy) in marks {
            let _ = self.balancer.set_healthy(u.id(), healthy);
        }
        Ok(changed)
    }

    /// Holds back membership updates until the returned guard is dropped:
    /// one begun meanwhile waits (for tests of what a slow update must not
    /// block; only updates take this lock).
    #[doc(hidden)]
    pub fn hold_updates(&self) -> impl Drop + '_ {
        self.update_gate.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Membership updates begun so far, applied or waiting.
    #[doc(hidden)]
    pub fn updates_begun(&self) -> u64 {
        self.updates_begun.load(Relaxed)
    }

    /// Brings the balancer's mark for `upstream` in line with its active
    /// checks' verdict (a health mark, never a rebuild).
    pub fn apply_health(&self, upstream: &Upstream) {
        let healthy = upstream.checked_up();
        if self.balancer.is_healthy(upstream.id()) != Ok(healthy) {
            // Gone in a reload meanwhile: nothing to mark.
            let _ = self.balancer.set_healthy(upstream.id(), healthy);
            if healthy {
                tracing::info!(
                    cluster = self.name(),
                    endpoint = upstream.addr(),
                    "endpoint healthy again"
                );
            } else {
                tracing::warn!(
                    cluster = self.name(),
                    endpoint = upstream.addr(),
                    "endpoint marked unhealthy"
                );
            }
        }
    }

    /// Reserves an endpoint for one attempt, excluding the addresses already
    /// tried: the policy's pick for a key (for hashing policies, the owner,
    /// or its ring successors once tried or at their cap), round robin for a
    /// keyless request under a hashing policy, the policy's own choice for
    /// the others.
    ///
    /// # Errors
    /// No eligible endpoint left; or the balancer refused the request.
    pub fn select(
        &self,
        key: Option<&RequestKey>,
        tried: &[&str],
    ) -> Result<Selected, SelectError> {
        let selected = self.reserve(key, tried)?;
        selected.pick.value().count_attempt(selected.spilled);
        Ok(selected)
    }

    /// How a hashing policy shares out the hash space over the current
    /// membership (as `describe` reports it); `None` for other policies.
    pub fn layout(&self) -> Option<Arc<Layout>> {
        self.layout
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn reserve(&self, key: Option<&RequestKey>, tried: &[&str]) -> Result<Selected, SelectError> {
        if !self.hashing {
            let pick = self.balancer.pick(&Request::new().excluding(tried))?;
            return Ok(Selected {
                pick,
                spilled: false,
            });
        }
        let Some(key) = key else {
            return self.select_keyless(tried);
        };
        let request = key.request().excluding(tried);
        let pick = self.balancer.pick(&request)?;
        // Spills are counted on first attempts: a retry leaves the owner on
        // purpose. The pick knows whether it spilled: no second walk.
        let spilled = tried.is_empty() && pick.spilled();
        Ok(Selected { pick, spilled })
    }

    /// Weighted round robin over the eligible endpoints for a request with no
    /// key, as nginx and HAProxy serve them under a hash policy. It reserves
    /// through the hashing balancer's own candidates, so these requests
    /// count in the loads that bounded picks see, and respect the caps: an
    /// endpoint at its cap passes its turn to the next; when all are at
    /// their cap the least loaded takes it.
    fn select_keyless(&self, tried: &[&str]) -> Result<Selected, SelectError> {
        // Code 0 is in every policy's range; its walk visits every eligible
        // endpoint once, whatever its order.
        let probe = Request::code(0).excluding(tried);
        let mut candidates: Vec<Candidate<Backend>> = self.balancer.candidates(&probe)?.collect();
        if candidates.is_empty() {
            return Err(SelectError::NoEligibleEndpoint);
        }
        // A stable order: the walk's order depends on the ring.
        candidates
            .sort_by(|a, b| (a.addr(), a.endpoint().tag()).cmp(&(b.addr(), b.endpoint().tag())));
        let weights: Vec<u64> = candidates
            .iter()
            .map(|c| u64::from(c.endpoint().weight()))
            .collect();
        let total: u64 = weights.iter().sum();
        let turn = self.keyless_turn.fetch_add(1, Relaxed);
        let start = if total == 0 {
            (turn % candidates.len() as u64) as usize
        } else {
            let mut slot = turn % total;
            weights
                .iter()
                .position(|&w| {
                    if slot < w {
                        true
                    } else {
                        slot -= w;
                        false
                    }
                })
                .unwrap_or(0)
        };
        let n = candidates.len();
        for i in 0..n {
            if let Some(pick) = candidates[(start + i) % n].try_reserve() {
                return Ok(Selected {
                    pick,
                    spilled: false,
                });
            }
        }
        let least = candidates
            .iter()
            .min_by_key(|c| c.in_flight())
            .ok_or(SelectError::NoEligibleEndpoint)?;
        Ok(Selected {
            pick: least.reserve(),
            spilled: false,
        })
    }
}

impl Cluster {
    /// The upstream of each of `endpoints`, in order (`None` for one that
    /// is not a current member): one lock for all, for the admin listener.
    pub fn upstreams_of<'a>(
        &self,
        endpoints: impl Iterator<Item = &'a Endpoint>,
    ) -> Vec<Option<Backend>> {
        let upstreams = self.upstreams.lock().unwrap_or_else(|e| e.into_inner());
        endpoints
            .map(|e| {
                upstreams
                    .get(&(e.addr().to_string(), e.tag().map(str::to_string)))
                    .cloned()
            })
            .collect()
    }

    /// What the current endpoints have served, summed.
    pub fn served(&self) -> Served {
        let upstreams = self.upstreams.lock().unwrap_or_else(|e| e.into_inner());
        upstreams.values().fold(Served::default(), |sum, u| {
            let s = u.served();
            Served {
                attempts: sum.attempts + s.attempts,
                spills: sum.spills + s.spills,
                failures: sum.failures + s.failures,
            }
        })
    }

    /// The current upstreams (for health checks).
    pub fn upstreams(&self) -> Vec<Backend> {
        let upstreams = self.upstreams.lock().unwrap_or_else(|e| e.into_inner());
        upstreams.values().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(i: usize) -> Endpoint {
        format!("127.0.{}.{}:{}", i / 60_000, i % 60_000 / 250, i % 250 + 1)
            .parse()
            .unwrap()
    }

    fn cluster(endpoints: Vec<Endpoint>) -> Cluster {
        let mut config = ClusterConfig::new("c", "rr".parse().unwrap());
        config.endpoints = endpoints;
        Cluster::new(config).unwrap()
    }

    /// The upstream of the member at `addr`.
    fn upstream(c: &Cluster, addr: &str) -> Backend {
        let e: Endpoint = addr.parse().unwrap();
        c.upstreams_of(std::iter::once(&e))[0].clone().unwrap()
    }

    /// Marks survive a membership update: an endpoint the checks found down
    /// stays unhealthy, a new one starts healthy, and a mark set by hand
    /// follows the checks' verdict again.
    #[test]
    fn health_marks_survive_set_endpoints() {
        let c = cluster((0..3).map(endpoint).collect());
        let names: Vec<String> = (0..4).map(|i| endpoint(i).addr().to_string()).collect();
        let [a, b, d, new] = [0, 1, 2, 3].map(|i| names[i].as_str());
        let down = upstream(&c, a);
        assert!(down.checked(false, 1, 1), "one failed check flips it");
        c.apply_health(&down);
        assert_eq!(c.balancer().is_healthy(a), Ok(false));
        // Marked by hand, not by the checks (which still say up).
        c.balancer().set_healthy(b, false).unwrap();

        let changed = c
            .set_endpoints(vec![endpoint(3), endpoint(2), endpoint(1), endpoint(0)])
            .unwrap();
        assert!(changed);
        assert_eq!(c.balancer().is_healthy(a), Ok(false), "still down");
        assert_eq!(c.balancer().is_healthy(b), Ok(true), "the checks' verdict");
        assert_eq!(c.balancer().is_healthy(d), Ok(true));
        assert_eq!(c.balancer().is_healthy(new), Ok(true), "new");
        assert!(Arc::ptr_eq(&upstream(&c, a), &down), "the same upstream");

        // Unchanged: nothing rebuilt, the marks re-applied all the same.
        c.balancer().set_healthy(d, false).unwrap();
        assert!(!c
            .set_endpoints(vec![endpoint(3), endpoint(2), endpoint(1), endpoint(0)])
            .unwrap());
        assert_eq!(c.balancer().is_healthy(a), Ok(false));
        assert_eq!(c.balancer().is_healthy(d), Ok(true));

        // Gone and back: a new upstream, checked up, healthy again.
        c.set_endpoints(vec![endpoint(1)]).unwrap();
        assert!(c.balancer().is_healthy(a).is_err(), "gone");
        c.set_endpoints(vec![endpoint(0), endpoint(1)]).unwrap();
        assert_eq!(c.balancer().is_healthy(a), Ok(true));
        assert!(!Arc::ptr_eq(&upstream(&c, a), &down));
    }

    /// Many endpoints, reordered, some gone and some new: every member's
    /// mark is its own upstream's verdict (each is looked up by identity;
    /// the balancer's lookups are counted in `loadring`'s own tests).
    #[test]
    fn set_endpoints_marks_each_of_many_members() {
        let n = 20_000;
        let c = cluster((0..n).map(endpoint).collect());
        let down = |i: usize| i % 7 == 3;
        for i in (0..n).filter(|&i| down(i)) {
            let u = upstream(&c, endpoint(i).addr());
            assert!(u.checked(false, 1, 1));
        }
        // The checks' verdicts reach the balancer with the next membership,
        // here the same endpoints reversed, half of them gone, and new ones.
        let next: Vec<usize> = (0..n + n / 4)
            .rev()
            .filter(|i| i % 2 == 0 || *i >= n)
            .collect();
        assert!(c
            .set_endpoints(next.iter().map(|&i| endpoint(i)).collect())
            .unwrap());
        let states = c.balancer().states(loadring::clock::now());
        assert_eq!(states.len(), next.len());
        for (state, &i) in states.iter().zip(&next) {
            assert_eq!(state.endpoint, endpoint(i));
            assert_eq!(state.healthy, i >= n || !down(i), "{}", state.endpoint);
        }
        assert_eq!(c.upstreams().len(), next.len());
    }
}
