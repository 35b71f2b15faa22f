//! One backend as the proxy sees it: where to connect, and the health
//! evidence (active checks, consecutive failed requests) that decides its
//! mark in the balancer.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use http::uri::Authority;
use loadring::{Endpoint, Id};

use crate::endpoint_counters::EndpointCounters;

/// The value the balancer carries for each endpoint. Kept across reloads by
/// identity (address and tag), so its health evidence survives them as the
/// balancer's in-flight counters do.
#[derive(Debug)]
pub struct Upstream {
    /// Shared: every request's metrics series names it.
    addr: Arc<str>,
    tag: Option<String>,
    authority: Authority,
    health: Mutex<Evidence>,
    /// Counted on the request path: plain atomics on a value the pick
    /// already holds, so no lock and no lookup.
    attempts: AtomicU64,
    spills: AtomicU64,
    failures: AtomicU64,
    /// Its metrics series, resolved on the first count.
    counters: OnceLock<EndpointCounters>,
}

/// What an upstream has served since it joined (kept across reloads, as its
/// health evidence is).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Served {
    /// Attempts sent to it (retries included).
    pub attempts: u64,
    /// First attempts it took because the key's owner was at its cap.
    pub spills: u64,
    /// Attempts that failed: no response, a timeout, or a 5xx.
    pub failures: u64,
}

/// An upstream's health as its evidence says at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthView {
    /// The verdict of active checks.
    pub checked_up: bool,
    /// Time left of a passive ejection, if one runs.
    pub ejected_for: Option<Duration>,
}

#[derive(Debug)]
struct Evidence {
    /// The verdict of active checks (healthy until they say otherwise).
    checked_up: bool,
    /// Consecutive passing checks while down, failing checks while up.
    check_streak: u32,
    /// Consecutive failed requests.
    failures: u32,
    /// Ejected by passive checking until then.
    ejected_until: Option<Instant>,
}

impl Upstream {
    /// The upstream for an endpoint whose address is `host:port`.
    ///
    /// # Errors
    /// The address is not `host:port`.
    pub fn new(endpoint: &Endpoint) -> Result<Self, String> {
        crate::config::check_backend_addr(endpoint.addr())?;
        let authority = endpoint
            .addr()
            .parse()
            .map_err(|_| format!("endpoint `{}`: not host:port", endpoint.addr()))?;
        Ok(Upstream {
            addr: endpoint.addr().into(),
            tag: endpoint.tag().map(str::to_string),
            authority,
            health: Mutex::new(Evidence {
                checked_up: true,
                check_streak: 0,
                failures: 0,
                ejected_until: None,
            }),
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

    fn evidence(&self) -> std::sync::MutexGuard<'_, Evidence> {
        // Evidence is a few counters updated whole: a panic elsewhere leaves
        // nothing half-written.
        self.health.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether active checks pass and no ejection is running at `now`.
    pub fn healthy(&self, now: Instant) -> bool {
        let e = self.evidence();
        e.checked_up && e.ejected_until.is_none_or(|until| now >= until)
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

    /// Its health evidence at `now`.
    pub fn health_at(&self, now: Instant) -> HealthView {
        let e = self.evidence();
        HealthView {
            checked_up: e.checked_up,
            ejected_for: e
                .ejected_until
                .and_then(|until| until.checked_duration_since(now))
                .filter(|left| !left.is_zero()),
        }
    }

    /// Counts a request that got a response below 500.
    pub fn request_succeeded(&self) {
        self.evidence().failures = 0;
    }

    /// Counts a failed request (no response, or a 5xx); returns `true` when
    /// this failure ejects the endpoint (the `eject_after`-th in a row).
    pub fn request_failed(&self, eject_after: u32, eject_for: Duration) -> bool {
        self.failures.fetch_add(1, Relaxed);
        let mut e = self.evidence();
        e.failures = e.failures.saturating_add(1);
        if eject_after > 0 && e.failures >= eject_after {
            e.failures = 0;
            e.ejected_until = Some(Instant::now() + eject_for);
            true
        } else {
            false
        }
    }

    /// Ends an ejection that has run its time (returns whether one did).
    pub fn end_ejection(&self, now: Instant) -> bool {
        let mut e = self.evidence();
        match e.ejected_until {
            Some(until) if now >= until => {
                e.ejected_until = None;
                true
            }
            _ => false,
        }
    }

    /// Counts an active check; the verdict flips after `rise` passing checks
    /// in a row while down, `fall` failing ones while up. Returns whether
    /// it flipped.
    pub fn checked(&self, passed: bool, rise: u32, fall: u32) -> bool {
        let mut e = self.evidence();
        if passed == e.checked_up {
            e.check_streak = 0;
            return false;
        }
        e.check_streak += 1;
        let needed = if passed { rise } else { fall };
        if e.check_streak >= needed {
            e.checked_up = passed;
            e.check_streak = 0;
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
        let now = Instant::now();
        assert!(!u.checked(false, 2, 3));
        assert!(!u.checked(false, 2, 3));
        assert!(!u.checked(true, 2, 3), "a pass resets the streak");
        assert!(!u.checked(false, 2, 3));
        assert!(!u.checked(false, 2, 3));
        assert!(u.checked(false, 2, 3), "third failure in a row");
        assert!(!u.healthy(now));
        assert!(!u.checked(true, 2, 3));
        assert!(u.checked(true, 2, 3));
        assert!(u.healthy(now));
    }

    #[test]
    fn ejection_after_consecutive_failures_only() {
        let u = upstream();
        let long = Duration::from_secs(60);
        assert!(!u.request_failed(3, long));
        assert!(!u.request_failed(3, long));
        u.request_succeeded();
        assert!(!u.request_failed(3, long));
        assert!(!u.request_failed(3, long));
        assert!(u.request_failed(3, long));
        assert!(!u.healthy(Instant::now()));
        assert!(!u.end_ejection(Instant::now()));
        assert!(u.end_ejection(Instant::now() + long));
        assert!(u.healthy(Instant::now()));
        assert!(!upstream().request_failed(0, long), "0 disables ejection");
    }

    #[test]
    fn served_counts_attempts_spills_and_failures() {
        let u = upstream();
        u.count_attempt(false);
        u.count_attempt(true);
        u.count_attempt(true);
        u.request_failed(0, Duration::ZERO);
        u.request_succeeded();
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
    fn health_view_tells_the_ejection_time_left() {
        let u = upstream();
        let now = Instant::now();
        assert_eq!(
            u.health_at(now),
            HealthView {
                checked_up: true,
                ejected_for: None
            }
        );
        let eject_for = Duration::from_secs(30);
        // The ejection starts between these two instants, however slowly
        // the machine runs: no allowance for elapsed time is needed.
        let before = Instant::now();
        assert!(u.request_failed(1, eject_for));
        let now = Instant::now();
        let left = u.health_at(now).ejected_for.expect("ejected");
        assert!(
            left <= eject_for && left >= eject_for - (now - before),
            "{left:?} left of {eject_for:?}"
        );
        assert_eq!(u.health_at(now + Duration::from_secs(31)).ejected_for, None);
        u.checked(false, 1, 1);
        assert!(!u.health_at(now).checked_up);
    }

    #[test]
    fn addresses_must_be_host_and_port() {
        assert!(Upstream::new(&Endpoint::new("localhost").unwrap()).is_err());
        assert!(Upstream::new(&Endpoint::new("a:b").unwrap()).is_err());
        assert!(Upstream::new(&Endpoint::new("backend.internal:8080").unwrap()).is_ok());
    }
}
