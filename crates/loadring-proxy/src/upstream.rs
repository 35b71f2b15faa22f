//! One backend as the proxy sees it: where to connect, the verdict of its
//! active health checks, and what it has served. Passive ejection is not
//! here: it is the balancer's lifecycle (`eject_after=`), fed by each
//! request's outcome.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};

use http::uri::Authority;
use loadring::{Endpoint, Id};

use crate::endpoint_counters::EndpointCounters;
use crate::error::{ConfigError, ConfigErrorKind};

/// The value the balancer carries for each endpoint. Kept across reloads by
/// identity (address and tag), so its check verdict survives them as the
/// balancer's in-flight counters do.
#[derive(Debug)]
pub struct Upstream {
    /// Shared: every request's metrics series names it.
    addr: Arc<str>,
    tag: Option<String>,
    authority: Authority,
    /// The verdict of active checks (healthy until they say otherwise).
    checked_up: AtomicBool,
    /// Consecutive passing checks while down, failing checks while up (one
    /// writer: the cluster's check task).
    check_streak: AtomicU32,
    /// Counted on the request path: plain atomics on a value the pick
    /// already holds, so no lock and no lookup.
    attempts: AtomicU64,
    spills: AtomicU64,
    failures: AtomicU64,
    /// Its metrics series, resolved on the first count.
    counters: OnceLock<EndpointCounters>,
}

/// What an upstream has served since it joined (kept across reloads, as its
/// check verdict is).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Served {
    /// Attempts sent to it (retries included).
    pub attempts: u64,
    /// First attempts it took because the key's owner was at its cap.
    pub spills: u64,
    /// Attempts that failed: no response, a timeout, or a 5xx.
    pub failures: u64,
}

impl Upstream {
    /// The upstream for an endpoint whose address is `host:port`.
    ///
    /// # Errors
    /// The address is not `host:port`.
    pub fn new(endpoint: &Endpoint) -> Result<Self, ConfigError> {
        crate::config::check_backend_addr(endpoint)
            .map_err(|e| ConfigError::new(ConfigErrorKind::Value, e.to_string()))?;
        let authority = endpoint.addr().parse().map_err(|_| {
            ConfigError::new(
                ConfigErrorKind::Value,
                format!("endpoint `{}`: not host:port", endpoint.addr()),
            )
        })?;
        Ok(Upstream {
            addr: endpoint.addr().into(),
            tag: endpoint.tag().map(str::to_string),
            authority,
            checked_up: AtomicBool::new(true),
            check_streak: AtomicU32::new(0),
            attempts: AtomicU64::new(0),
            spills: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            counters: OnceLock::new(),
        })
    }

    /// `host:port`.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// `host:port`, shared.
    pub fn shared_addr(&self) -> &Arc<str> {
        &self.addr
    }

    /// Its metrics series, made by `resolve` on the first call.
    pub fn counters(&self, resolve: impl FnOnce() -> EndpointCounters) -> &EndpointCounters {
        self.counters.get_or_init(resolve)
    }

    /// The endpoint's identity in the balancer.
    pub fn id(&self) -> Id<'_> {
        Id::new(&self.addr, self.tag.as_deref())
    }

    /// The authority requests to it carry in their URI.
    pub fn authority(&self) -> &Authority {
        &self.authority
    }

    /// Whether active checks pass (always, without checks).
    pub fn checked_up(&self) -> bool {
        self.checked_up.load(Relaxed)
    }

    /// Counts an attempt reserved on this upstream; `spilled` when a
    /// bounded pick sent it here because the key's owner was at its cap.
    pub fn count_attempt(&self, spilled: bool) {
        self.attempts.fetch_add(1, Relaxed);
        if spilled {
            self.spills.fetch_add(1, Relaxed);
        }
    }

    /// What it has served so far.
    pub fn served(&self) -> Served {
        Served {
            attempts: self.attempts.load(Relaxed),
            spills: self.spills.load(Relaxed),
            failures: self.failures.load(Relaxed),
        }
    }

    /// Counts a failed attempt (no response, a timeout, or a 5xx).
    pub fn count_failure(&self) {
        self.failures.fetch_add(1, Relaxed);
    }

    /// Counts an active check; the verdict flips after `rise` passing checks
    /// in a row while down, `fall` failing ones while up. Returns whether
    /// it flipped.
    pub fn checked(&self, passed: bool, rise: u32, fall: u32) -> bool {
        if passed == self.checked_up.load(Relaxed) {
            self.check_streak.store(0, Relaxed);
            return false;
        }
        let streak = self.check_streak.fetch_add(1, Relaxed) + 1;
        let needed = if passed { rise } else { fall };
        if streak >= needed {
            self.checked_up.store(passed, Relaxed);
            self.check_streak.store(0, Relaxed);
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upstream() -> Upstream {
        Upstream::new(&Endpoint::new("127.0.0.1:1").unwrap()).unwrap()
    }

    #[test]
    fn rise_and_fall_need_streaks() {
        let u = upstream();
        assert!(!u.checked(false, 2, 3));
        assert!(!u.checked(false, 2, 3));
        assert!(!u.checked(true, 2, 3), "a pass resets the streak");
        assert!(!u.checked(false, 2, 3));
        assert!(!u.checked(false, 2, 3));
        assert!(u.checked(false, 2, 3), "third failure in a row");
        assert!(!u.checked_up());
        assert!(!u.checked(true, 2, 3));
        assert!(u.checked(true, 2, 3));
        assert!(u.checked_up());
    }

    #[test]
    fn served_counts_attempts_spills_and_failures() {
        let u = upstream();
        u.count_attempt(false);
        u.count_attempt(true);
        u.count_attempt(true);
        u.count_failure();
        assert_eq!(
            u.served(),
            Served {
                attempts: 3,
                spills: 2,
                failures: 1
            }
        );
    }

    #[test]
    fn addresses_must_be_host_and_port() {
        assert!(Upstream::new(&Endpoint::new("localhost").unwrap()).is_err());
        assert!(Upstream::new(&Endpoint::new("a:b").unwrap()).is_err());
        assert!(Upstream::new(&Endpoint::new("backend.internal:8080").unwrap()).is_ok());
    }
}
