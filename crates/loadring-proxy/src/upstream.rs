//! One backend as the proxy sees it: where to connect, and the health
//! evidence (active checks, consecutive failed requests) that decides its
//! mark in the balancer.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use http::uri::Authority;
use loadring::{Endpoint, Id};

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

    /// Counts a request that got a response below 500.
    pub fn request_succeeded(&self) {
        self.evidence().failures = 0;
    }

    /// Counts a failed request (no response, or a 5xx); returns `true` when
    /// this failure ejects the endpoint (the `eject_after`-th in a row).
    pub fn request_failed(&self, eject_after: u32, eject_for: std::time::Duration) -> bool {
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
    use std::time::Duration;

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
    fn addresses_must_be_host_and_port() {
        assert!(Upstream::new(&Endpoint::new("localhost").unwrap()).is_err());
        assert!(Upstream::new(&Endpoint::new("a:b").unwrap()).is_err());
        assert!(Upstream::new(&Endpoint::new("backend.internal:8080").unwrap()).is_ok());
    }
}
