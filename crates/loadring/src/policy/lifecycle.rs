//! The endpoint lifecycle, on every policy: slow start for new endpoints,
//! outlier ejection, and the panic threshold (Envoy's three). Spec parsing
//! wraps a family's policy in [`Lifecycle`] when any of its keys is given:
//!
//! | key | default | meaning |
//! |---|---|---|
//! | `slow_start=DUR` | off | a new endpoint's share ramps up over DUR |
//! | `slow_start_aggression=X` | 1 | Envoy's aggression, a decimal in (0, 100] |
//! | `slow_start_min_weight=PCT` | 10 | the ramp starts at PCT% of the share |
//! | `eject_after=N` | off | eject after N consecutive failures |
//! | `eject_for=DUR` | 30s | base ejection time |
//! | `max_eject_for=DUR` | 300s | longest ejection |
//! | `max_ejection_percent=PCT` | 10 | at most PCT% of the current members ejected (at least one) |
//! | `panic_below=PCT` | off | below PCT% in service, ignore health and ejection |
//!
//! Durations are written `500ms`, `10s`, `1m` (see `util/duration.rs`).
//!
//! **Ejection** is a per-endpoint state, like health: nothing is rebuilt.
//! The lifecycle's [`Observer`] counts consecutive failures reported by
//! [`Pick::finish`](crate::Pick::finish); the `eject_after`-th ejects the
//! endpoint until `now + eject_for × m`, where the multiplier `m` is 1 on a
//! first ejection, grows by one with each ejection and shrinks by one for
//! each `eject_for` spent back in service, capped at `max_eject_for`
//! (Envoy's rule, with `eject_for` as its interval). While ejected an
//! endpoint is not [`Pool::eligible`], so every policy skips it as it skips
//! an unhealthy one: hashing policies walk on to the successor on the ring,
//! and keys come back when the ejection ends. Outcomes of requests that
//! complete while their endpoint is ejected are not counted.
//!
//! **The ejection budget** is `max_ejection_percent` of the balancer's
//! current members, but always one: an ejection is refused when that many
//! are already ejected (as Envoy does). Under a locality wrapper, which
//! builds the policy per zone and over all endpoints, the zones share the
//! budget of the whole membership. Envoy checks the bound only when it
//! ejects; here it holds over the current membership at every moment, also
//! across membership changes, so that no pick sees more endpoints ejected
//! than the budget allows:
//!
//! - An endpoint removed from the membership and added back starts
//!   un-ejected, its failure count and its record of past ejections
//!   forgotten, as Envoy forgets the detector state of a host removed from
//!   the cluster. This holds whether or not requests reserved on it before
//!   its removal still run (the balancer then keeps the endpoint's state,
//!   for its count of requests in flight): it would otherwise come back
//!   with its ejection, outside the budget of the membership it joins, and
//!   all the endpoints of a membership could be out at once. Outcomes of
//!   those requests that complete after its return count as its own.
//! - A membership that leaves more of its endpoints ejected than its budget
//!   allows (a smaller one than the last) returns those with the least time
//!   left to service at once, keeping the others ejected; a returned
//!   endpoint keeps its record (its next ejection is longer).
//!
//! One lock per policy orders the ejections and the membership changes:
//! an ejection is counted over the new membership or seen by its build.
//! One window is left: between the build of a new membership and its
//! publication (the end of the same `update`), the endpoints that stay are
//! counted over the new membership, so under concurrent failures a pick on
//! the old one may see more of its endpoints ejected than its budget allows.
//!
//! **Panic** (`panic_below=PCT`): before each pick the lifecycle counts the
//! endpoints in service (weight above zero, healthy, not ejected); when
//! fewer than PCT% of the endpoints of non-zero weight are, health and
//! ejection are ignored for that pick (Envoy's panic threshold: spread the
//! load over everything rather than crush the few). Request exclusions still
//! apply. The count is `O(n)` per pick.
//!
//! **Slow start** (`slow_start=DUR`): an endpoint added to a running
//! balancer takes, during DUR from its first pick, the fraction
//! `f = max(min_weight%, time_factor^(1 / aggression))` of the picks that
//! choose it, with `time_factor = max(t, 1ms) / DUR` (Envoy's formula; its
//! documentation writes the floor as 1 s). The others are given to the
//! policy's next choice (the pick is made again with that endpoint
//! excluded). Which picks it keeps is deterministic: it keeps one each time
//! the running sum of `f` crosses a whole number. Endpoints present at the
//! balancer's first build are not new (if all are, none is newer than the
//! others). Slow start is refused on hashing policies, whose keys it would
//! move (Envoy applies it to round robin and least request only).

use std::any::Any;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crate::clock::nanos;
use crate::describe::Layout;
use crate::echo::Echo;
use crate::endpoint::{Endpoint, Id};
use crate::error::{BuildError, ParseError, ParseErrorKind, PickError};
use crate::inflight::outcome::Outcome;
use crate::inflight::pool::Pool;
use crate::policy::{Change, Observer, Order, Picker, Policy};
use crate::request::Request;
use crate::util::bounded::LoadFactor;
use crate::util::duration::take_duration;
use crate::util::params::Params;

type Result<T> = std::result::Result<T, ParseError>;

/// The keys every family accepts for the lifecycle.
pub(crate) const KEYS: &[&str] = &[
    "slow_start",
    "slow_start_aggression",
    "slow_start_min_weight",
    "eject_after",
    "eject_for",
    "max_eject_for",
    "max_ejection_percent",
    "panic_below",
];

/// How many times one pick may turn away an endpoint in slow start.
const MAX_SLOW_START_REDRAWS: usize = 4;
/// `added_at` of an endpoint not picked yet.
const UNSEEN: u64 = u64::MAX;
/// `added_at` of an endpoint out of slow start (or never in it).
const ESTABLISHED: u64 = u64::MAX - 1;
/// 1.0 in the slow-start credit's fixed point.
const ONE: u64 = 1 << 32;

/// Slow start: `slow_start=`, `slow_start_aggression=`, `slow_start_min_weight=`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct SlowStart {
    pub(crate) window: Duration,
    pub(crate) aggression: f64,
    pub(crate) min_weight_percent: u8,
}

impl SlowStart {
    /// The share kept `elapsed` after the endpoint's first pick (1 after the window).
    pub(crate) fn factor(&self, elapsed: Duration) -> f64 {
        if elapsed >= self.window {
            return 1.0;
        }
        let time_factor =
            elapsed.max(Duration::from_millis(1)).as_secs_f64() / self.window.as_secs_f64();
        let ramp = if self.aggression == 1.0 {
            time_factor
        } else {
            time_factor.powf(1.0 / self.aggression)
        };
        ramp.max(f64::from(self.min_weight_percent) / 100.0)
            .min(1.0)
    }
}

/// Outlier ejection: `eject_after=`, `eject_for=`, `max_eject_for=`,
/// `max_ejection_percent=`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ejection {
    pub(crate) after: u32,
    pub(crate) base: Duration,
    pub(crate) max: Duration,
    pub(crate) max_percent: u8,
}

/// The lifecycle parameters of a family.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct LifecycleParams {
    pub(crate) slow_start: Option<SlowStart>,
    pub(crate) ejection: Option<Ejection>,
    pub(crate) panic_below: Option<u8>,
}

impl LifecycleParams {
    /// The lifecycle keys of `params` (taken out of it), `None` if there are none.
    pub(crate) fn parse(params: &mut Params<'_>) -> Result<Option<Self>> {
        let mut own = params.split_off(KEYS);
        if !KEYS.iter().any(|k| own.has(k)) {
            return Ok(None);
        }
        let p = &mut own;
        let window = take_duration(
            p,
            "slow_start",
            Duration::from_millis(1),
            Duration::from_secs(3600),
        )?;
        // A decimal, `DIGITS[.DIGITS]`, as the README says: not the `1e2`,
        // `.5`, `5.`, `+1` or `1e-300` that `f64`'s parser also reads.
        let decimal = |v: &str| {
            let (int, frac) = v.split_once('.').unwrap_or((v, "0"));
            !int.is_empty()
                && !frac.is_empty()
                && int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
        };
        let aggression = match p.take("slow_start_aggression") {
            None => None,
            Some(v) => Some(
                Some(v)
                    .filter(|v| decimal(v))
                    .and_then(|v| v.parse::<f64>().ok())
                    .filter(|a| a.is_finite() && *a > 0.0 && *a <= 100.0)
                    .ok_or_else(|| {
                        p.error(
                            "slow_start_aggression",
                            v,
                            "a decimal number in (0, 100]",
                            |a| format!("slow_start_aggression={}: accepted {a}", Echo(v)),
                        )
                    })?,
            ),
        };
        let min_weight = p.take_opt_u64("slow_start_min_weight", 0, 100)?;
        let after = p.take_opt_u64("eject_after", 1, 1_000)?;
        let base = take_duration(
            p,
            "eject_for",
            Duration::from_millis(1),
            Duration::from_secs(3600),
        )?;
        let max = take_duration(
            p,
            "max_eject_for",
            Duration::from_millis(1),
            Duration::from_secs(24 * 3600),
        )?;
        let max_percent = p.take_opt_u64("max_ejection_percent", 0, 100)?;
        let panic_below = p.take_opt_u64("panic_below", 1, 100)?;

        let needs = |p: &Params<'_>, key: &'static str, given: bool, on: &'static str| {
            if given {
                Err(p.error(key, "", on, |on| format!("{key} needs {on}")))
            } else {
                Ok(())
            }
        };
        if window.is_none() {
            needs(
                p,
                "slow_start_aggression",
                aggression.is_some(),
                "slow_start=DUR",
            )?;
            needs(
                p,
                "slow_start_min_weight",
                min_weight.is_some(),
                "slow_start=DUR",
            )?;
        }
        if after.is_none() {
            needs(p, "eject_for", base.is_some(), "eject_after=N")?;
            needs(p, "max_eject_for", max.is_some(), "eject_after=N")?;
            needs(
                p,
                "max_ejection_percent",
                max_percent.is_some(),
                "eject_after=N",
            )?;
        }
        let slow_start = window.map(|window| SlowStart {
            window,
            aggression: aggression.unwrap_or(1.0),
            min_weight_percent: min_weight.unwrap_or(10) as u8,
        });
        let ejection = match after {
            None => None,
            Some(after) => {
                let base = base.unwrap_or(Duration::from_secs(30));
                let max = max.unwrap_or(Duration::from_secs(300).max(base));
                if max < base {
                    return Err(p.error(
                        "max_eject_for",
                        &crate::util::duration::show(max),
                        format!("at least eject_for ({})", crate::util::duration::show(base)),
                        |a| {
                            format!(
                                "max_eject_for={} is shorter than eject_for: accepted {a}",
                                crate::util::duration::show(max)
                            )
                        },
                    ));
                }
                Some(Ejection {
                    after: after as u32,
                    base,
                    max,
                    max_percent: max_percent.unwrap_or(10) as u8,
                })
            }
        };
        Ok(Some(LifecycleParams {
            slow_start,
            ejection,
            panic_below: panic_below.map(|p| p as u8),
        }))
    }
}

/// Wraps `policy` in the lifecycle its parameters ask for, if any.
pub(crate) fn wrap(policy: Arc<dyn Policy>, params: &mut Params<'_>) -> Result<Arc<dyn Policy>> {
    let name = params.policy().to_ascii_lowercase();
    let Some(lifecycle) = LifecycleParams::parse(params)? else {
        return Ok(policy);
    };
    if lifecycle.slow_start.is_some() && policy.needs_key() {
        return Err(ParseError::new(
            ParseErrorKind::Conflict,
            format!(
                "{name}: slow_start does not apply to hashing policies (it would move keys): \
             accepted on rr, wrr, swrr, random, wr, p2c, la"
            ),
        )
        .with_policy(&name)
        .with_key("slow_start")
        .with_accepted("rr, wrr, swrr, random, wr, p2c, la"));
    }
    Ok(Arc::new(Lifecycle {
        inner: policy,
        params: lifecycle,
        ejecting: Arc::default(),
    }))
}

/// The endpoints of one membership, for the ejection budget: every
/// endpoint's state points to the peers of the latest membership it is in
/// (weakly: the picker holds them).
#[derive(Debug)]
struct Peers {
    pool: Pool,
}

/// How many of `members` endpoints may be ejected at once: `max_percent`
/// of them, but always one.
fn budget(members: usize, ejection: &Ejection) -> usize {
    (members * usize::from(ejection.max_percent) / 100).max(1)
}

/// A policy with the endpoint lifecycle around it.
#[derive(Debug)]
pub(crate) struct Lifecycle {
    inner: Arc<dyn Policy>,
    params: LifecycleParams,
    /// Serializes the ejections of its endpoints and the membership
    /// changes (shared with every endpoint's state): two ejections at once
    /// cannot both take the last place in the budget, and an ejection is
    /// counted either over the membership being built, or before it, where
    /// the build sees it.
    ejecting: Arc<Mutex<()>>,
}

impl Lifecycle {
    /// Wraps the picker built over `pool` (which reads `panic`). When
    /// `pool` is the membership (not a zone's part of it), makes it its
    /// endpoints' peers and brings their ejections within its budget: those
    /// that come back are un-ejected, and if more are ejected than the
    /// budget allows, those with the least time left are returned.
    fn wrap_picker(
        &self,
        inner: Arc<dyn Picker>,
        pool: Pool,
        panic: Arc<AtomicBool>,
    ) -> Arc<dyn Picker> {
        let peers = Arc::new(Peers { pool: pool.clone() });
        if let Some(ejection) = &self.params.ejection {
            if !pool.is_part() {
                let _serial = self.ejecting.lock().unwrap_or_else(|e| e.into_inner());
                let mut ejected = Vec::new();
                for i in 0..pool.len() {
                    let Some(state) = pool.observer::<LifecycleState>(i) else {
                        continue;
                    };
                    *state.peers.lock().unwrap_or_else(|e| e.into_inner()) = Arc::downgrade(&peers);
                    if pool.is_rejoining(i) {
                        state.forget_ejections();
                    }
                    // No clock here: every ejection not cleared counts,
                    // ended or not. Ended ones have the least time left:
                    // they are the first returned, which changes nothing.
                    let until = state.ejected_until.load(Relaxed);
                    if until != 0 {
                        ejected.push((until, state));
                    }
                }
                let allowed = budget(pool.len(), ejection);
                if ejected.len() > allowed {
                    // Most time left first; ties in pool order.
                    ejected.sort_by_key(|&(until, _)| std::cmp::Reverse(until));
                    for (_, state) in &ejected[allowed..] {
                        state.ejected_until.store(0, Relaxed);
                    }
                }
            }
        }
        Arc::new(LifecyclePicker {
            pool,
            inner,
            panic,
            params: self.params,
            _peers: peers,
        })
    }
}

impl Policy for Lifecycle {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn build(&self, pool: Pool) -> std::result::Result<Arc<dyn Picker>, BuildError> {
        if self.params.slow_start.is_some() {
            let states: Vec<&LifecycleState> = (0..pool.len())
                .filter_map(|i| pool.observer::<LifecycleState>(i))
                .collect();
            if states.iter().all(|s| s.added_at.load(Relaxed) == UNSEEN) {
                // A first build: nobody is newer than the others.
                for s in states {
                    s.added_at.store(ESTABLISHED, Relaxed);
                }
            }
        }
        let panic = Arc::new(AtomicBool::new(false));
        let pool = pool.with_panic(panic.clone());
        let inner = self.inner.build(pool.clone())?;
        Ok(self.wrap_picker(inner, pool, panic))
    }

    fn build_size(&self, pool: &Pool) -> u64 {
        self.inner.build_size(pool)
    }

    fn needs_key(&self) -> bool {
        self.inner.needs_key()
    }

    fn load_factor(&self) -> Option<LoadFactor> {
        self.inner.load_factor()
    }

    fn hash_balance_factor(&self) -> Option<u32> {
        self.inner.hash_balance_factor()
    }

    fn rebuild(
        &self,
        previous: &dyn Picker,
        pool: &Pool,
        change: Change,
    ) -> Option<std::result::Result<Arc<dyn Picker>, BuildError>> {
        let previous = (previous as &dyn Any).downcast_ref::<LifecyclePicker>()?;
        let panic = previous.panic.clone();
        let pool = pool.clone().with_panic(panic.clone());
        let rebuilt = self.inner.rebuild(&*previous.inner, &pool, change)?;
        Some(rebuilt.map(|inner| self.wrap_picker(inner, pool, panic)))
    }

    fn observer(&self, endpoint: &Endpoint) -> Option<Arc<dyn Observer>> {
        Some(Arc::new(LifecycleState {
            inner: self.inner.observer(endpoint),
            params: self.params,
            ejecting: self.ejecting.clone(),
            peers: Mutex::new(Weak::new()),
            failures: AtomicU32::new(0),
            ejected_until: AtomicU64::new(0),
            history: Mutex::new(History::default()),
            added_at: AtomicU64::new(UNSEEN),
            credit: AtomicU64::new(0),
        }))
    }
}

/// Past ejections of one endpoint.
#[derive(Debug, Default)]
struct History {
    multiplier: u32,
    /// When the last ejection ended (ns).
    returned_at: u64,
}

/// One endpoint's lifecycle at an instant, for dashboards
/// ([`Balancer::lifecycle`](crate::Balancer::lifecycle)).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LifecycleView {
    /// Time left of an outlier ejection, if one runs.
    pub ejected_for: Option<Duration>,
    /// While the endpoint is in slow start: the fraction of the picks that
    /// choose it which it keeps now (it ramps up to 1 over the window; not
    /// picked yet, it would keep the ramp's floor).
    pub slow_start: Option<f64>,
}

/// One endpoint's lifecycle (its [`Observer`]), wrapping the policy's own state.
#[derive(Debug)]
pub(crate) struct LifecycleState {
    inner: Option<Arc<dyn Observer>>,
    params: LifecycleParams,
    /// The policy's lock on ejections and membership changes.
    ejecting: Arc<Mutex<()>>,
    /// The endpoints of the latest membership this one is in.
    peers: Mutex<Weak<Peers>>,
    failures: AtomicU32,
    /// Ejected until this time (ns); 0 when in service.
    ejected_until: AtomicU64,
    history: Mutex<History>,
    /// The time of its first pick (ns), or [`UNSEEN`], or [`ESTABLISHED`].
    added_at: AtomicU64,
    /// Slow start: the running sum of the shares kept, in 32.32 fixed point.
    credit: AtomicU64,
}

impl LifecycleState {
    /// Whether the endpoint is ejected at `now` (ns).
    fn ejected_at(&self, now: u64) -> bool {
        let until = self.ejected_until.load(Relaxed);
        until != 0 && now < until
    }

    /// Its ejection and slow start at `now` (ns).
    pub(crate) fn view(&self, now: u64) -> LifecycleView {
        let until = self.ejected_until.load(Relaxed);
        let ejected_for = (until != 0 && now < until).then(|| Duration::from_nanos(until - now));
        let slow_start = self.params.slow_start.and_then(|ramp| {
            let added = self.added_at.load(Relaxed);
            let elapsed = match added {
                ESTABLISHED => return None,
                UNSEEN => Duration::ZERO,
                at => Duration::from_nanos(now.saturating_sub(at)),
            };
            let factor = ramp.factor(elapsed);
            (factor < 1.0).then_some(factor)
        });
        LifecycleView {
            ejected_for,
            slow_start,
        }
    }

    /// Forgets its ejection, failure count and record: the endpoint comes
    /// back into the membership (see the module documentation).
    fn forget_ejections(&self) {
        self.ejected_until.store(0, Relaxed);
        self.failures.store(0, Relaxed);
        *self.history.lock().unwrap_or_else(|e| e.into_inner()) = History::default();
    }

    /// Ejects the endpoint at `now` if the budget allows; whether it did.
    fn try_eject(&self, now: u64, ejection: &Ejection) -> bool {
        // Taken before the peers are read: a membership change either
        // comes first (the peers are the new membership) or after (it
        // sees this ejection).
        let serial = self.ejecting.lock().unwrap_or_else(|e| e.into_inner());
        let peers = self
            .peers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .upgrade();
        // No membership holds this endpoint any more: it takes no picks anyway.
        let Some(peers) = peers else {
            return false;
        };
        let pool = &peers.pool;
        let ejected = (0..pool.len())
            .filter(|&i| {
                pool.observer::<LifecycleState>(i)
                    .is_some_and(|s| s.ejected_at(now))
            })
            .count();
        if ejected >= budget(pool.len(), ejection) {
            return false;
        }
        let mut history = self.history.lock().unwrap_or_else(|e| e.into_inner());
        let base = nanos(ejection.base).max(1);
        let quiet_periods = now.saturating_sub(history.returned_at) / base;
        history.multiplier = history
            .multiplier
            .saturating_sub(u32::try_from(quiet_periods).unwrap_or(u32::MAX))
            .saturating_add(1);
        let length = ejection
            .base
            .saturating_mul(history.multiplier)
            .min(ejection.max);
        let until = now.saturating_add(nanos(length)).max(1);
        history.returned_at = until;
        self.ejected_until.store(until, Relaxed);
        drop(serial);
        true
    }

    /// Slow start: whether this pick at `now` keeps the endpoint.
    fn keeps(&self, now: u64, slow_start: &SlowStart) -> bool {
        // A time at the end of the clock (`Request::at(Duration::MAX)`
        // saturates to u64::MAX ns) must not store a sentinel: it is taken
        // as the last time before them.
        let now = now.min(ESTABLISHED - 1);
        let mut added = self.added_at.load(Relaxed);
        if added == ESTABLISHED {
            return true;
        }
        if added == UNSEEN {
            added = match self
                .added_at
                .compare_exchange(UNSEEN, now, Relaxed, Relaxed)
            {
                Ok(_) => now,
                Err(current) => current,
            };
            if added == ESTABLISHED {
                return true;
            }
        }
        let factor = slow_start.factor(Duration::from_nanos(now.saturating_sub(added)));
        if factor >= 1.0 {
            self.added_at.store(ESTABLISHED, Relaxed);
            return true;
        }
        // Rounded up, so that f = 1/k keeps exactly every k-th pick.
        let share = (factor * ONE as f64).ceil() as u64;
        let before = self
            .credit
            .fetch_update(Relaxed, Relaxed, |c| {
                let c = c + share;
                Some(if c >= ONE { c - ONE } else { c })
            })
            .unwrap_or_default();
        before + share >= ONE
    }
}

impl Observer for LifecycleState {
    fn observe(&self, outcome: &Outcome) {
        if let Some(inner) = &self.inner {
            inner.observe(outcome);
        }
        let Some(ejection) = &self.params.ejection else {
            return;
        };
        if outcome.is_success() {
            // No clock and no write for most successes: the count is 0
            // already, also while ejected (reset by the ejection, failures
            // not counted since).
            if self.failures.load(Relaxed) != 0 {
                self.failures.store(0, Relaxed);
            }
            return;
        }
        let now = nanos(outcome.completed_at());
        if self.ejected_at(now) {
            return;
        }
        // Saturating: while the ejection budget is spent the count keeps
        // growing, and 2^32 failures would wrap it (and overflow `+ 1`).
        let failures = self
            .failures
            .fetch_update(Relaxed, Relaxed, |f| Some(f.saturating_add(1)))
            .unwrap_or(u32::MAX)
            .saturating_add(1);
        if failures >= ejection.after && self.try_eject(now, ejection) {
            self.failures.store(0, Relaxed);
        }
    }

    #[inline]
    fn admits(&self, req: &Request<'_>) -> bool {
        let until = self.ejected_until.load(Relaxed);
        until == 0 || nanos(req.now()) >= until
    }

    fn wrapped(&self) -> Option<&dyn Observer> {
        self.inner.as_deref()
    }
}

/// A picker with the lifecycle around it.
#[derive(Debug)]
struct LifecyclePicker {
    /// The inner picker's pool, which reads `panic`.
    pool: Pool,
    inner: Arc<dyn Picker>,
    panic: Arc<AtomicBool>,
    params: LifecycleParams,
    /// Kept alive for the endpoints' ejection budget.
    _peers: Arc<Peers>,
}

impl LifecyclePicker {
    /// Sets the panic flag for this pick (see the module documentation).
    fn check_panic(&self, req: &Request<'_>) {
        let Some(percent) = self.params.panic_below else {
            return;
        };
        let pool = &self.pool;
        let weighted = (0..pool.len()).filter(|&i| pool.weight(i) > 0).count();
        let in_service = (0..pool.len()).filter(|&i| pool.in_service(i, req)).count();
        let panic = in_service * 100 < usize::from(percent) * weighted;
        if self.panic.load(Relaxed) != panic {
            self.panic.store(panic, Relaxed);
        }
    }

    fn state(&self, i: usize) -> Option<&LifecycleState> {
        self.pool.observer::<LifecycleState>(i)
    }

    /// Slow start's redraws: the endpoints turned away so far are excluded
    /// from the next pick (on top of the request's own exclusions).
    fn slow_start_pick(
        &self,
        req: &Request<'_>,
        mut i: usize,
        slow_start: &SlowStart,
    ) -> std::result::Result<usize, PickError> {
        let now = nanos(req.now());
        let mut turned_away: Vec<Id<'_>> = Vec::new();
        for _ in 0..MAX_SLOW_START_REDRAWS {
            if self.state(i).is_none_or(|s| s.keeps(now, slow_start)) {
                return Ok(i);
            }
            if turned_away.is_empty() {
                turned_away.extend_from_slice(req.excluded_ids);
            }
            turned_away.push(self.pool.endpoint(i).id());
            let retry = req.excluding_ids(&turned_away);
            match self.inner.pick(&retry) {
                Ok(j) => {
                    self.pool.release(i);
                    i = j;
                }
                // Nobody else: the warming endpoint serves after all.
                Err(_) => return Ok(i),
            }
        }
        Ok(i)
    }
}

impl Picker for LifecyclePicker {
    fn pool(&self) -> &Pool {
        &self.pool
    }

    fn pick(&self, req: &Request<'_>) -> std::result::Result<usize, PickError> {
        self.check_panic(req);
        let i = self.inner.pick(req)?;
        match &self.params.slow_start {
            Some(slow_start) => self.slow_start_pick(req, i, slow_start),
            None => Ok(i),
        }
    }

    fn pick_spilling(&self, req: &Request<'_>) -> std::result::Result<(usize, bool), PickError> {
        self.check_panic(req);
        let (i, spilled) = self.inner.pick_spilling(req)?;
        match &self.params.slow_start {
            // A redraw is slow start's choice, not a spill.
            Some(slow_start) => self
                .slow_start_pick(req, i, slow_start)
                .map(|j| (j, spilled && j == i)),
            None => Ok((i, spilled)),
        }
    }

    fn candidates(self: Arc<Self>, req: &Request<'_>) -> std::result::Result<Order, PickError> {
        self.check_panic(req);
        self.inner.clone().candidates(req)
    }

    fn try_reserve(&self, index: usize) -> bool {
        self.inner.try_reserve(index)
    }

    fn route(&self, req: &Request<'_>) -> Option<std::result::Result<usize, PickError>> {
        self.check_panic(req);
        self.inner.route(req)
    }

    fn cap(&self, index: usize) -> Option<u64> {
        self.inner.cap(index)
    }

    fn layout(&self) -> Option<Layout> {
        self.inner.layout()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_aggression_is_a_decimal() {
        let parse = |v: &str| {
            format!("rr:slow_start=10s slow_start_aggression={v}").parse::<crate::PolicySpec>()
        };
        for v in ["1", "2", "0.5", "1.25", "100", "100.0", "0.000001"] {
            assert!(parse(v).is_ok(), "{v}");
        }
        for v in [
            "1e2", "1E2", "1e-300", ".5", "5.", "+1", "-1", "0", "0.0", "100.5", "inf", "NaN",
            "1.2.3", "0x10",
        ] {
            let err = parse(v).unwrap_err();
            assert_eq!(err.key(), Some("slow_start_aggression"), "{v}");
            assert_eq!(err.value(), Some(v), "{v}");
            assert_eq!(
                err.to_string(),
                format!("rr: slow_start_aggression={v}: accepted a decimal number in (0, 100]")
            );
        }
    }

    fn curve(aggression: f64, min_weight_percent: u8) -> SlowStart {
        SlowStart {
            window: Duration::from_secs(10),
            aggression,
            min_weight_percent,
        }
    }

    #[test]
    fn the_factor_follows_envoys_formula() {
        let ms = Duration::from_millis;
        let linear = curve(1.0, 10);
        assert_eq!(linear.factor(ms(0)), 0.1, "1 ms / 10 s is under the floor");
        assert_eq!(linear.factor(ms(5_000)), 0.5);
        assert_eq!(linear.factor(ms(9_000)), 0.9);
        assert_eq!(linear.factor(ms(10_000)), 1.0);
        assert_eq!(linear.factor(ms(60_000)), 1.0);
        // No floor: max(t, 1 ms) / window.
        assert_eq!(curve(1.0, 0).factor(ms(0)), 0.0001);
        // Aggression 2: square root; 0.5: square.
        assert_eq!(curve(2.0, 10).factor(ms(2_500)), 0.5);
        assert_eq!(curve(0.5, 10).factor(ms(5_000)), 0.25);
        assert_eq!(
            curve(0.5, 10).factor(ms(1_000)),
            0.1,
            "0.01 is under the floor"
        );
    }

    fn warming() -> LifecycleState {
        LifecycleState {
            inner: None,
            params: LifecycleParams {
                slow_start: None,
                ejection: None,
                panic_below: None,
            },
            ejecting: Arc::default(),
            peers: Mutex::new(Weak::new()),
            failures: AtomicU32::new(0),
            ejected_until: AtomicU64::new(0),
            history: Mutex::new(History::default()),
            // Its window started at time 0.
            added_at: AtomicU64::new(0),
            credit: AtomicU64::new(0),
        }
    }

    /// While the ejection budget is spent, failures keep counting: the
    /// count saturates instead of overflowing.
    #[test]
    fn the_failure_count_saturates() {
        let state = LifecycleState {
            params: LifecycleParams {
                slow_start: None,
                ejection: Some(Ejection {
                    after: 3,
                    base: Duration::from_secs(1),
                    max: Duration::from_secs(1),
                    max_percent: 10,
                }),
                panic_below: None,
            },
            // No build holds it: every ejection is refused.
            failures: AtomicU32::new(u32::MAX - 1),
            ..warming()
        };
        for _ in 0..3 {
            state.observe(&Outcome::failure(Duration::ZERO).at(Duration::ZERO));
            assert_eq!(state.failures.load(Relaxed), u32::MAX);
        }
        state.observe(&Outcome::success(Duration::ZERO));
        assert_eq!(state.failures.load(Relaxed), 0);
    }

    /// A pick at the end of the clock starts the window there, and stores
    /// neither "not picked yet" nor "out of slow start".
    #[test]
    fn a_pick_at_the_end_of_the_clock_stores_no_sentinel() {
        let ramp = curve(1.0, 10);
        for now in [u64::MAX, u64::MAX - 1] {
            let state = LifecycleState {
                added_at: AtomicU64::new(UNSEEN),
                ..warming()
            };
            state.keeps(now, &ramp);
            assert_eq!(state.added_at.load(Relaxed), ESTABLISHED - 1, "{now}");
        }
    }

    proptest::proptest! {
        /// At a fixed point of the ramp with share f, an endpoint keeps
        /// k picks out of the first n it is offered, where k is n·f rounded
        /// down or, by the rounding up of f, one more.
        #[test]
        fn slow_start_keeps_its_share_of_the_offers(
            millis in 0u64..10_000,
            offers in 1usize..2_000,
        ) {
            let ramp = curve(1.0, 10);
            let state = warming();
            let now = millis * 1_000_000;
            let f = ramp.factor(Duration::from_millis(millis));
            let kept = (0..offers).filter(|_| state.keeps(now, &ramp)).count();
            let floor = (offers as f64 * f).floor() as usize;
            proptest::prop_assert!(kept == floor || kept == floor + 1, "{} of {} at {}", kept, offers, f);
        }
    }
}
