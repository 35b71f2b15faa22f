//! The discrete-event loop: one policy, the whole trace, in virtual time.
//!
//! Every placement is a real [`Balancer::pick`] at the request's virtual
//! time; the returned guard sits in a heap of departures until its request's
//! service time is over, and finishing it (a success after its service time)
//! releases the slot. The loop allocates nothing per request: the key is a
//! slice of a buffer formatted once, the heap is reused, and the metrics are
//! plain counters. Membership events call [`Balancer::update`] at their time.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::time::{Duration, Instant};

use loadring::{Balancer, Endpoint, LoadFactor, Outcome as PickOutcome, Pick, PolicySpec, Request};

use super::args::{Change, Event};
use super::policy::Policy;
use super::timeline::Timeline;
use super::workload::{Arrival, Trace};
use crate::CliError;

/// Picks in the first 5% of virtual time are warm-up for `max_over_mean`.
pub const WARMUP_SHARE: f64 = 0.05;
/// `max_over_mean` only counts picks while the mean in flight per endpoint is
/// at least this (below it, one request more is already a large ratio).
pub const MIN_MEAN: f64 = 4.0;
/// A timed pick longer than this was interrupted by the scheduler (a pick
/// takes well under a microsecond here): left out of `ns_per_pick`.
const PREEMPTED: Duration = Duration::from_micros(50);
/// Windows of the in-flight timeline.
pub const WINDOWS: usize = 240;

/// What the runs of all policies share: the trace, the membership story, and
/// every endpoint that is ever a member, numbered by first appearance.
#[derive(Debug)]
pub struct Setup<'a> {
    pub trace: &'a Trace,
    pub initial: &'a [Endpoint],
    pub events: &'a [Event],
    /// Address of endpoint `i` (initial ones first, then added ones).
    pub addrs: Vec<String>,
    index: HashMap<String, usize>,
    /// Warm-up end, nanoseconds of virtual time.
    pub warmup: u64,
    /// The least share of keys any placement must move, per event.
    pub ideal_churn: Vec<f64>,
    /// What reading the clock around a pick costs, subtracted from `ns_per_pick`.
    clock_cost: Duration,
}

impl<'a> Setup<'a> {
    pub fn new(trace: &'a Trace, initial: &'a [Endpoint], events: &'a [Event]) -> Self {
        let mut addrs: Vec<String> = Vec::new();
        let mut index = HashMap::new();
        let all = initial
            .iter()
            .map(Endpoint::addr)
            .chain(events.iter().map(|e| e.change.addr()));
        for addr in all {
            if !index.contains_key(addr) {
                index.insert(addr.to_string(), addrs.len());
                addrs.push(addr.to_string());
            }
        }
        let mut weights = vec![0u64; addrs.len()];
        for e in initial {
            weights[index[e.addr()]] = u64::from(e.weight());
        }
        let mut ideal_churn = Vec::with_capacity(events.len());
        for event in events {
            let before = weights.clone();
            let i = index[event.change.addr()];
            weights[i] = match &event.change {
                Change::Remove(_) => 0,
                Change::Add(e) => u64::from(e.weight()),
            };
            ideal_churn.push(total_variation(&before, &weights));
        }
        Setup {
            trace,
            initial,
            events,
            addrs,
            index,
            warmup: (trace.end() as f64 * WARMUP_SHARE) as u64,
            ideal_churn,
            clock_cost: clock_cost(),
        }
    }

    /// The mean ideal churn over the events (`None` without events).
    pub fn mean_ideal_churn(&self) -> Option<f64> {
        mean(&self.ideal_churn)
    }
}

/// The least share of keys that must change owner when each endpoint's share
/// goes from `w_e / W` to `w'_e / W'`: half the L1 distance of the shares,
/// summed in integers over the common denominator `W * W'` (so 1 of 10
/// removed is exactly 0.1).
fn total_variation(before: &[u64], after: &[u64]) -> f64 {
    let (wb, wa) = (
        before.iter().map(|&w| u128::from(w)).sum::<u128>(),
        after.iter().map(|&w| u128::from(w)).sum::<u128>(),
    );
    if wb == 0 || wa == 0 {
        return 1.0;
    }
    let distance: u128 = before
        .iter()
        .zip(after)
        .map(|(&b, &a)| (u128::from(b) * wa).abs_diff(u128::from(a) * wb))
        .sum();
    distance as f64 / (2 * wb * wa) as f64
}

fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// The clock's own cost in an `Instant::now()` .. `elapsed()` pair: the
/// cheapest of several batches, so that a batch interrupted by the scheduler
/// does not count.
fn clock_cost() -> Duration {
    const BATCH: u32 = 1000;
    (0..20)
        .map(|_| {
            let mut total = Duration::ZERO;
            for _ in 0..BATCH {
                let t = Instant::now();
                total += t.elapsed();
            }
            total / BATCH
        })
        .min()
        .unwrap_or(Duration::ZERO)
}

/// One policy's run.
#[derive(Debug)]
pub struct Outcome {
    /// The policy as the user wrote it.
    pub name: String,
    pub spec: PolicySpec,
    /// `None` when no pick qualified (the load never reached [`MIN_MEAN`]).
    pub max_over_mean: Option<f64>,
    pub cap_violations: Option<u64>,
    pub locality: Option<f64>,
    pub churn: Option<f64>,
    pub ideal_churn: Option<f64>,
    /// The share of keys this placement had to move at the events, given
    /// how many keys each endpoint owned before and after (mean over events):
    /// `churn` above it means keys also moved between endpoints that stayed.
    pub necessary_churn: Option<f64>,
    /// The natural owner of `key-0` at the start (hashing policies only).
    pub key0_owner: Option<usize>,
    /// Requests placed on endpoint `i` of [`Setup::addrs`].
    pub requests: Vec<u64>,
    pub ns_per_pick: f64,
    /// `windows x endpoints` time-averaged in flight.
    pub timeline: Vec<f32>,
    /// Per window, the mean in flight per member endpoint.
    pub means: Vec<f32>,
    pub window_ns: u64,
}

/// A request in service: its guard is finished (released) when it leaves.
pub(super) struct Departure {
    pub(super) at: u64,
    /// Arrival order, so that equal times leave in a fixed order.
    pub(super) seq: usize,
    pub(super) endpoint: usize,
    /// Its service time (ns), reported as its latency.
    pub(super) service: u64,
    pub(super) pick: Pick,
}

impl PartialEq for Departure {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Departure {}
impl PartialOrd for Departure {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Departure {
    /// Reversed: the heap's top is the earliest departure.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// The membership as the loop sees it: who is in, with which weight.
struct Membership {
    current: Vec<Endpoint>,
    weight: Vec<u64>,
    weight_sum: u64,
    /// Members with weight >= 1 (the ones a mean is taken over).
    count: usize,
}

impl Membership {
    fn new(setup: &Setup<'_>) -> Self {
        let mut m = Membership {
            current: setup.initial.to_vec(),
            weight: vec![0; setup.addrs.len()],
            weight_sum: 0,
            count: 0,
        };
        m.reweigh(setup);
        m
    }

    fn reweigh(&mut self, setup: &Setup<'_>) {
        self.weight.iter_mut().for_each(|w| *w = 0);
        for e in &self.current {
            self.weight[setup.index[e.addr()]] = u64::from(e.weight());
        }
        self.weight_sum = self.weight.iter().sum();
        self.count = self.weight.iter().filter(|&&w| w > 0).count();
    }

    fn apply(&mut self, change: &Change, setup: &Setup<'_>) {
        change.apply(&mut self.current);
        self.reweigh(setup);
    }
}

/// Runs `policy` over the whole trace. `progress` is told how many requests
/// were placed since it was last called.
pub fn simulate(
    policy: &Policy,
    setup: &Setup<'_>,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Outcome, CliError> {
    let mut run = Run::new(policy, setup)?;
    let mut unreported = 0u64;
    for (seq, arrival) in setup.trace.arrivals.iter().enumerate() {
        run.settle(arrival.at)?;
        run.place(seq, arrival)?;
        unreported += 1;
        if unreported == 1 << 16 {
            progress(unreported);
            unreported = 0;
        }
    }
    run.settle(u64::MAX)?;
    progress(unreported);
    Ok(run.finish())
}

/// The load bound a run checks every pick against.
#[derive(Clone, Copy, Debug)]
enum Bound {
    /// loadring's cap, `ceil(F * (total + 1) * w / W)`.
    Cap(LoadFactor),
    /// Envoy's `hash_balance_factor=F`: admitted while the endpoint holds at
    /// most `max(ceil(ceil((total + 1) * F / 100) * w / W), 1)` (in `f64`, as
    /// Envoy), so one more than that after the pick.
    Envoy(u32),
}

impl Bound {
    fn of(spec: &PolicySpec) -> Option<Bound> {
        match (spec.load_factor(), spec.hash_balance_factor()) {
            (Some(factor), _) => Some(Bound::Cap(factor)),
            (None, Some(f)) => Some(Bound::Envoy(f)),
            (None, None) => None,
        }
    }

    /// The most an endpoint of weight `weight` may hold after a pick made
    /// with `total` in flight before it.
    fn cap(self, total: u64, weight: u64, weight_sum: u64) -> u64 {
        match self {
            Bound::Cap(factor) => factor.cap(total, weight as u32, weight_sum),
            Bound::Envoy(f) => {
                let slots = ((total + 1) * u64::from(f)).div_ceil(100);
                let share = weight as f64 / weight_sum as f64;
                ((slots as f64 * share).ceil() as u64).max(1) + 1
            }
        }
    }
}

/// The state of one policy's run.
struct Run<'a, 's> {
    name: &'a str,
    spec: &'a PolicySpec,
    setup: &'s Setup<'s>,
    balancer: Balancer,
    hashing: bool,
    bound: Option<Bound>,
    members: Membership,
    /// Each key's natural owner under the current membership (hashing only).
    natural: Vec<u32>,
    /// Requests in service, earliest departure on top.
    heap: BinaryHeap<Departure>,
    next_event: usize,
    timeline: Timeline,
    // What the metrics are made of.
    churn: Vec<f64>,
    necessary: Vec<f64>,
    key0_owner: Option<usize>,
    requests: Vec<u64>,
    local: u64,
    violations: u64,
    max_over_mean: Option<f64>,
    pick_time: Duration,
    timed: u64,
}

impl<'a, 's> Run<'a, 's> {
    fn new(policy: &'a Policy, setup: &'s Setup<'s>) -> Result<Self, CliError> {
        let (name, spec) = (policy.name.as_str(), &policy.spec);
        let balancer = Balancer::new(spec.clone(), setup.initial.to_vec())
            .map_err(|e| CliError(format!("--policy {name}: {e}")))?;
        // A locality policy's natural owner and cap depend on the request's
        // zone: its locality, churn and cap violations are not measured.
        let locality = spec.inner().is_some();
        let hashing = spec.is_hashing() && !locality;
        let natural = if hashing {
            natural_owners(&balancer, setup).map_err(|e| CliError(format!("{name}: {e}")))?
        } else {
            Vec::new()
        };
        let members = Membership::new(setup);
        let timeline = Timeline::new(
            setup.addrs.len(),
            WINDOWS,
            setup.trace.end(),
            members.weight.iter().map(|&w| w > 0).collect(),
        );
        Ok(Run {
            key0_owner: natural.first().map(|&i| i as usize),
            name,
            spec,
            setup,
            balancer,
            hashing,
            bound: Bound::of(spec).filter(|_| !locality),
            members,
            natural,
            // Room for the steady state; the heap grows on its own if needed.
            heap: BinaryHeap::with_capacity(4096),
            next_event: 0,
            timeline,
            churn: Vec::with_capacity(setup.events.len()),
            necessary: Vec::with_capacity(setup.events.len()),
            requests: vec![0; setup.addrs.len()],
            local: 0,
            violations: 0,
            max_over_mean: None,
            pick_time: Duration::ZERO,
            timed: 0,
        })
    }

    fn fail(&self, what: String) -> CliError {
        CliError(format!("{}: {what}", self.name))
    }

    /// Departures and membership events due at or before `until`, in time
    /// order; a departure at the same time as an event goes first.
    fn settle(&mut self, until: u64) -> Result<(), CliError> {
        loop {
            let departure = self.heap.peek().map(|d| d.at).filter(|&t| t <= until);
            let event = self
                .setup
                .events
                .get(self.next_event)
                .filter(|e| e.at <= until);
            match (departure, event) {
                (Some(t), e) if e.is_none_or(|e| t <= e.at) => {
                    // The heap is not empty: peek just saw a departure.
                    let d = self.heap.pop().expect("peeked");
                    self.timeline.change(d.at, d.endpoint, false);
                    // The outcome, in virtual time, for the policies that
                    // learn from latency (`la`, `p2c:load=peak_ewma`, the
                    // lifecycle keys); then the slot is released.
                    let latency = Duration::from_nanos(d.service);
                    d.pick
                        .finish(PickOutcome::success(latency).at(Duration::from_nanos(d.at)));
                }
                (_, Some(event)) => {
                    self.apply(event)?;
                    self.next_event += 1;
                }
                _ => return Ok(()),
            }
        }
    }

    fn apply(&mut self, event: &Event) -> Result<(), CliError> {
        let setup = self.setup;
        self.timeline.advance(event.at);
        self.members.apply(&event.change, setup);
        self.balancer
            .update(self.members.current.clone())
            .map_err(|e| self.fail(format!("at {}s: {e}", event.at as f64 / 1e9)))?;
        let i = setup.index[event.change.addr()];
        self.timeline.set_member(i, self.members.weight[i] > 0);
        if self.hashing {
            let next = natural_owners(&self.balancer, setup).map_err(|e| self.fail(e))?;
            let moved = self
                .natural
                .iter()
                .zip(&next)
                .filter(|(a, b)| a != b)
                .count();
            let keys = setup.trace.keys.len() as f64;
            self.churn.push(moved as f64 / keys);
            let owned = |owners: &[u32]| {
                let mut n = vec![0u64; setup.addrs.len()];
                owners.iter().for_each(|&o| n[o as usize] += 1);
                n
            };
            let (before, after) = (owned(&self.natural), owned(&next));
            let must: u64 = before.iter().zip(&after).map(|(b, a)| b.abs_diff(*a)).sum();
            self.necessary.push(must as f64 / 2.0 / keys);
            self.natural = next;
        }
        Ok(())
    }

    /// One request: a real pick, its metrics, and its guard into the heap.
    #[inline]
    fn place(&mut self, seq: usize, arrival: &Arrival) -> Result<(), CliError> {
        let key = arrival.key as usize;
        // Virtual time, for the policies and lifecycle keys that keep time.
        let mut request =
            Request::key(self.setup.trace.keys.get(key)).at(Duration::from_nanos(arrival.at));
        if let Some(zone) = self.setup.trace.zone(seq) {
            request = request.in_zone(zone);
        }
        let total_before = self.balancer.total_in_flight();
        let started = Instant::now();
        let pick = self.balancer.pick(&request);
        let took = started.elapsed();
        let pick = pick.map_err(|e| self.fail(format!("request {} (key-{key}): {e}", seq + 1)))?;
        if took < PREEMPTED {
            self.pick_time += took;
            self.timed += 1;
        }
        let Some(&e) = self.setup.index.get(pick.addr()) else {
            return Err(self.fail(format!("picked {}, which is not an endpoint", pick.addr())));
        };
        let load = pick.in_flight();
        let members = &self.members;
        self.requests[e] += 1;
        if self.hashing && self.natural[key] as usize == e {
            self.local += 1;
        }
        if let Some(bound) = self.bound {
            // The cap this pick was bound by: the exact formula on the load
            // before the pick (`LoadFactor::cap`, or Envoy's slots + 1).
            let cap = bound.cap(total_before, members.weight[e], members.weight_sum);
            if load > cap {
                self.violations += 1;
            }
        }
        if arrival.at >= self.setup.warmup {
            let total = self.balancer.total_in_flight() as f64;
            if total / members.count as f64 >= MIN_MEAN {
                let fair = total * members.weight[e] as f64 / members.weight_sum as f64;
                let ratio = load as f64 / fair;
                self.max_over_mean = Some(self.max_over_mean.map_or(ratio, |m| m.max(ratio)));
            }
        }
        self.timeline.change(arrival.at, e, true);
        self.heap.push(Departure {
            at: arrival.at.saturating_add(arrival.service),
            seq,
            endpoint: e,
            service: arrival.service,
            pick,
        });
        Ok(())
    }

    fn finish(self) -> Outcome {
        debug_assert_eq!(
            self.balancer.total_in_flight(),
            0,
            "every guard was dropped"
        );
        let placed = self.setup.trace.arrivals.len() as f64;
        let per_pick = self.pick_time.as_nanos() as f64 / self.timed.max(1) as f64
            - self.setup.clock_cost.as_nanos() as f64;
        let (timeline, means, window_ns) = self.timeline.finish();
        Outcome {
            name: self.name.to_string(),
            spec: self.spec.clone(),
            max_over_mean: self.max_over_mean,
            cap_violations: self.bound.map(|_| self.violations),
            locality: self.hashing.then(|| self.local as f64 / placed),
            churn: if self.hashing {
                mean(&self.churn)
            } else {
                None
            },
            ideal_churn: self.setup.mean_ideal_churn(),
            key0_owner: self.key0_owner,
            necessary_churn: if self.hashing {
                mean(&self.necessary)
            } else {
                None
            },
            requests: self.requests,
            ns_per_pick: per_pick.max(0.0),
            timeline,
            means,
            window_ns,
        }
    }
}

/// Each key's natural owner (an index into [`Setup::addrs`]) under the
/// balancer's current membership.
fn natural_owners(balancer: &Balancer, setup: &Setup<'_>) -> Result<Vec<u32>, String> {
    let keys = &setup.trace.keys;
    (0..keys.len())
        .map(|k| {
            let owner = balancer
                .route(&Request::key(keys.get(k)))
                .map_err(|e| format!("natural owner of key-{k}: {e}"))?
                .ok_or_else(|| format!("no natural owner for key-{k}"))?;
            let owner = owner.addr();
            setup
                .index
                .get(owner)
                .map(|&i| i as u32)
                .ok_or_else(|| format!("natural owner {owner} is not an endpoint"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simulate::workload::{Service, Workload};

    fn endpoints(n: usize) -> Vec<Endpoint> {
        (1..=n)
            .map(|i| Endpoint::new(format!("10.0.0.{i}:80")).unwrap())
            .collect()
    }

    #[test]
    fn ideal_churn_is_the_share_that_must_move() {
        assert_eq!(total_variation(&[1, 1, 1, 1], &[1, 1, 1, 0]), 0.25);
        assert_eq!(
            total_variation(&[1; 10], &[1, 1, 1, 1, 1, 1, 1, 1, 1, 0]),
            0.1
        );
        // Adding an endpoint of weight 2 to two of weight 1: it must get half.
        assert_eq!(total_variation(&[1, 1, 0], &[1, 1, 2]), 0.5);
        // 3 -> 2 of weights (2, 1, 1) removing the first: shares .5 .25 .25 -> 0 .5 .5.
        assert_eq!(total_variation(&[2, 1, 1], &[0, 1, 1]), 0.5);
        assert_eq!(total_variation(&[1, 1], &[1, 1]), 0.0);
    }

    #[test]
    fn the_cap_formula_agrees_with_the_balancer() {
        // The engine checks caps with the exact formula over its own view of
        // the membership; the library's `cap(addr)` must say the same.
        let weighted: Vec<Endpoint> = [1u32, 2, 3, 1]
            .iter()
            .enumerate()
            .map(|(i, &w)| {
                Endpoint::new(format!("10.0.0.{}:80", i + 1))
                    .unwrap()
                    .with_weight(w)
            })
            .collect();
        for text in [
            "c_murmurhash:load_factor=1.3",
            "ring_hash:hash_balance_factor=130",
            "maglev:hash_balance_factor=100",
        ] {
            caps_agree(text.parse().unwrap(), &weighted);
        }
    }

    fn caps_agree(spec: PolicySpec, weighted: &[Endpoint]) {
        let bound = Bound::of(&spec).unwrap();
        let trace = Trace::generate(
            10,
            10,
            Workload::Uniform,
            1.0,
            Service::Fixed { ms: 1.0 },
            1,
        );
        let events = [Event {
            at: 1,
            change: Change::Remove("10.0.0.2:80".into()),
        }];
        let setup = Setup::new(&trace, weighted, &events);
        let mut members = Membership::new(&setup);
        let balancer = Balancer::new(spec, weighted.to_vec()).unwrap();
        let mut held = Vec::new();
        for round in 0..2 {
            for k in 0..37 {
                held.push(
                    balancer
                        .pick(&Request::key(&format!("k{round}-{k}")))
                        .unwrap(),
                );
                let total = balancer.total_in_flight();
                for e in &members.current {
                    let i = setup.index[e.addr()];
                    let want = bound.cap(total, members.weight[i], members.weight_sum);
                    assert_eq!(balancer.cap(e.addr()).unwrap(), Some(want), "{}", e.addr());
                }
            }
            members.apply(&events[0].change, &setup);
            balancer.update(members.current.clone()).unwrap();
        }
        drop(held);
        assert_eq!(balancer.total_in_flight(), 0);
    }

    #[test]
    fn departures_leave_earliest_first_then_in_arrival_order() {
        let balancer = Balancer::new("c_murmurhash".parse().unwrap(), endpoints(1)).unwrap();
        let mut heap = BinaryHeap::new();
        for (seq, at) in [(0, 30), (1, 10), (2, 20), (3, 10)] {
            heap.push(Departure {
                at,
                seq,
                endpoint: 0,
                service: 0,
                pick: balancer.pick(&Request::key("k")).unwrap(),
            });
        }
        let order: Vec<(u64, usize)> =
            std::iter::from_fn(|| heap.pop().map(|d| (d.at, d.seq))).collect();
        assert_eq!(order, vec![(10, 1), (10, 3), (20, 2), (30, 0)]);
        assert_eq!(balancer.total_in_flight(), 0, "popped guards released");
    }

    fn run(spec: &str, n: usize, events: &[Event]) -> (Outcome, Setup<'static>) {
        let trace = Box::leak(Box::new(Trace::generate(
            20_000,
            2_000,
            Workload::Hot { p: 0.2, s: 1.1 },
            2_000.0,
            Service::Exp { ms: 20.0 },
            11,
        )));
        let initial = Box::leak(endpoints(n).into_boxed_slice());
        let events = Box::leak(events.to_vec().into_boxed_slice());
        let setup = Setup::new(trace, initial, events);
        let policy = Policy {
            name: spec.to_string(),
            spec: spec.parse().unwrap(),
        };
        let outcome = simulate(&policy, &setup, &|_| {}).unwrap();
        (outcome, setup)
    }

    #[test]
    fn every_request_is_placed_and_counted() {
        let (out, setup) = run("c_murmurhash", 5, &[]);
        assert_eq!(out.requests.iter().sum::<u64>(), 20_000);
        assert_eq!(setup.addrs.len(), 5);
        assert_eq!(
            out.locality,
            Some(1.0),
            "a plain ring always serves the owner"
        );
        assert_eq!(out.cap_violations, None);
        assert_eq!((out.churn, out.ideal_churn), (None, None));
        assert!(out.max_over_mean.unwrap() > 1.0);
        assert_eq!(out.timeline.len(), WINDOWS * 5);
    }

    #[test]
    fn bounded_runs_respect_the_cap() {
        let (out, _) = run("c_murmurhash_bl", 5, &[]);
        assert_eq!(out.cap_violations, Some(0));
        assert!(out.locality.unwrap() < 1.0, "the viral key spills over");
        // load <= cap = ceil(1.25 * (total + 1) / 5) and the mean (total + 1) / 5
        // is at least 4, so the ratio is at most 1.25 + 1 / 4.
        let m = out.max_over_mean.unwrap();
        assert!(m > 1.0 && m <= 1.5, "{m}");
    }

    #[test]
    fn the_timeline_follows_littles_law() {
        // 2,000 requests/s x 20 ms = 40 in flight, over 3 endpoints.
        let (out, _) = run("c_murmurhash", 3, &[]);
        let middle = &out.means[WINDOWS / 10..WINDOWS * 9 / 10];
        let mean = middle.iter().map(|&m| f64::from(m)).sum::<f64>() / middle.len() as f64;
        assert!((mean - 40.0 / 3.0).abs() < 1.5, "{mean}");
        let row = &out.timeline[3 * (WINDOWS / 2)..3 * (WINDOWS / 2 + 1)];
        let total: f32 = row.iter().sum();
        assert!((total - 40.0).abs() < 15.0, "{row:?}");
    }

    #[test]
    fn removing_an_endpoint_moves_its_keys_only() {
        let events = [Event {
            at: 5_000_000_000,
            change: Change::Remove("10.0.0.4:80".into()),
        }];
        let (out, setup) = run("c_murmurhash", 4, &events);
        assert_eq!(setup.ideal_churn, vec![0.25]);
        let churn = out.churn.unwrap();
        assert!((churn - 0.25).abs() < 0.08, "{churn}");
        // A ring moves the removed endpoint's keys and nothing else.
        assert_eq!(out.necessary_churn, Some(churn));
        assert_eq!(out.locality, Some(1.0));
    }

    #[test]
    fn an_added_endpoint_gets_an_index_and_requests() {
        let events = [Event {
            at: 2_000_000_000,
            change: Change::Add(Endpoint::new("10.0.0.9:80").unwrap()),
        }];
        let (out, setup) = run("c_murmurhash_bl", 3, &events);
        assert_eq!(setup.addrs.last().map(String::as_str), Some("10.0.0.9:80"));
        assert!(out.requests[3] > 0);
        assert_eq!(setup.ideal_churn, vec![0.25]);
        assert_eq!(out.cap_violations, Some(0));
    }
}
