//! `simulate --scenario slow-backend|failing-backend`: a latency model in
//! which one endpoint goes bad for a while, to compare how policies notice.
//!
//! The model (fixed, so runs compare across versions; `--seed` changes the
//! draws, `--policy` the policies):
//!
//! - 10 endpoints `10.0.0.1:80` ... `10.0.0.10:80`, each with 4 workers and
//!   a FIFO queue in front of them, so latency grows with load: a request's
//!   latency is its wait in the queue plus its service time.
//! - Service times: 2.5 ms + an exponential draw of mean 2.5 ms (mean 5 ms);
//!   each endpoint serves 800 requests/s at most, 8,000 for all.
//! - Arrivals: Poisson at 4,000 requests/s (half the capacity) for 10 s of
//!   virtual time: 40,000 requests.
//! - `slow-backend`: `10.0.0.1:80` serves 10× slower (every service time
//!   ×10) from 3 s to 6 s, so it can serve only 80 requests/s, a fifth of
//!   its fair share.
//! - `failing-backend`: from 3 s to 6 s, `10.0.0.1:80` fails half the
//!   requests it serves (a coin flip per request, at its usual speed).
//!
//! Every pick is a real `Balancer::pick` at the request's arrival time
//! (`Request::at`), and every completion a real `Pick::finish` with its
//! latency and completion time (`Outcome::at`), so the latency-aware
//! policies and the lifecycle learn exactly as they would in a proxy.
//! Each policy runs twice: in the scenario, and in the same run without the
//! bad period (the baseline of the p99 ratio).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use loadring::{Balancer, Endpoint, Outcome as PickOutcome, Pick, PolicySpec, Request};
use rand_pcg::rand_core::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use std::time::Duration;

use super::policy::Policy;
use crate::CliError;

/// Endpoints, workers per endpoint.
pub const ENDPOINTS: usize = 10;
pub const WORKERS: usize = 4;
/// Service time: a fixed part plus an exponential part of this mean (ns).
const SERVICE_FIXED: u64 = 2_500_000;
const SERVICE_EXP_MEAN: f64 = 2_500_000.0;
/// Arrivals per second.
pub const RATE: f64 = 4_000.0;
/// Virtual time of a run, and the bad period (ns).
pub const RUN: u64 = 10_000_000_000;
pub const BAD_FROM: u64 = 3_000_000_000;
pub const BAD_TO: u64 = 6_000_000_000;
/// How much slower the slow endpoint serves.
pub const SLOWDOWN: u64 = 10;
/// The share of requests the failing endpoint fails.
pub const FAILURE_RATE: f64 = 0.5;
/// The bad endpoint's index.
pub const BAD: usize = 0;
/// Windows of the share timeline (ns): 40 windows of 250 ms.
pub const WINDOW: u64 = 250_000_000;
/// Within this fraction of the fair share counts as back.
const BACK_WITHIN: f64 = 0.10;

/// The policies compared when no `--policy` is given.
pub const DEFAULT_POLICIES: &[&str] = &[
    "rr",
    "p2c",
    "p2c:load=peak_ewma decay=250ms",
    "la",
    "rr:eject_after=3 eject_for=1s",
];

/// Which endpoint misbehaves and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    SlowBackend,
    FailingBackend,
}

impl Kind {
    pub const NAMES: &'static str = "slow-backend, failing-backend";

    /// A scenario by name, in any case (as policy names and `--workload`'s
    /// kinds are).
    pub fn parse(text: &str) -> Option<Kind> {
        match text.to_ascii_lowercase().as_str() {
            "slow-backend" => Some(Kind::SlowBackend),
            "failing-backend" => Some(Kind::FailingBackend),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::SlowBackend => "slow-backend",
            Kind::FailingBackend => "failing-backend",
        }
    }

    pub fn story(self) -> String {
        match self {
            Kind::SlowBackend => format!(
                "{} serves {SLOWDOWN}x slower from {} s to {} s",
                addr(BAD),
                BAD_FROM / 1_000_000_000,
                BAD_TO / 1_000_000_000
            ),
            Kind::FailingBackend => format!(
                "{} fails {:.0}% of its requests from {} s to {} s",
                addr(BAD),
                FAILURE_RATE * 100.0,
                BAD_FROM / 1_000_000_000,
                BAD_TO / 1_000_000_000
            ),
        }
    }
}

/// A validated scenario run.
#[derive(Debug)]
pub struct Config {
    pub kind: Kind,
    pub policies: Vec<Policy>,
    pub seed: u64,
    pub json: bool,
    pub plot: Option<(std::path::PathBuf, super::plot_format::PlotFormat)>,
}

pub fn addr(i: usize) -> String {
    format!("10.0.0.{}:80", i + 1)
}

/// What one run of one policy measured.
#[derive(Debug, Clone)]
pub struct Run {
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub requests: usize,
    /// Requests placed on the bad endpoint during the bad period, and all
    /// requests placed then.
    pub on_bad: usize,
    pub during: usize,
    pub errors: usize,
    /// The bad endpoint's share of the requests placed in each window.
    pub share: Vec<f64>,
    /// Seconds from the end of the bad period to the start of the first
    /// window in which the bad endpoint's share is within 10% of fair.
    pub back_after_s: Option<f64>,
}

/// A policy's two runs.
#[derive(Debug)]
pub struct Result {
    pub name: String,
    pub scenario: Run,
    pub baseline: Run,
}

impl Result {
    pub fn p99_ratio(&self) -> f64 {
        self.scenario.p99_ms / self.baseline.p99_ms
    }
}

/// One request's arrival, service draw and coin flip, shared by all
/// policies so that they see the same load.
#[derive(Debug, Clone, Copy)]
struct Arrival {
    at: u64,
    service: u64,
    coin: f64,
}

fn uniform(rng: &mut Pcg64) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

fn exponential(rng: &mut Pcg64, mean: f64) -> f64 {
    -mean * (1.0 - uniform(rng)).ln()
}

fn trace(seed: u64) -> Vec<Arrival> {
    let mut rng = Pcg64::seed_from_u64(seed);
    let mut at = 0.0;
    let mut arrivals = Vec::new();
    loop {
        at += exponential(&mut rng, 1e9 / RATE);
        if at >= RUN as f64 {
            return arrivals;
        }
        let service = SERVICE_FIXED + exponential(&mut rng, SERVICE_EXP_MEAN).round() as u64;
        arrivals.push(Arrival {
            at: at.round() as u64,
            service,
            coin: uniform(&mut rng),
        });
    }
}

pub fn run_all(config: &Config) -> std::result::Result<Vec<Result>, CliError> {
    let arrivals = trace(config.seed);
    config
        .policies
        .iter()
        .map(|policy| {
            Ok(Result {
                name: policy.name.clone(),
                scenario: simulate(policy.spec.clone(), &arrivals, Some(config.kind))?,
                baseline: simulate(policy.spec.clone(), &arrivals, None)?,
            })
        })
        .collect()
}

/// A request in the system.
struct Open {
    arrival: Arrival,
    endpoint: usize,
    pick: Pick,
}

/// The discrete-event loop: arrivals in order, completions from a heap.
fn simulate(
    spec: PolicySpec,
    arrivals: &[Arrival],
    bad: Option<Kind>,
) -> std::result::Result<Run, CliError> {
    let endpoints: Vec<Endpoint> = (0..ENDPOINTS)
        .map(|i| Endpoint::new(addr(i)).map_err(|e| CliError(e.to_string())))
        .collect::<std::result::Result<_, _>>()?;
    let balancer =
        Balancer::new(spec, endpoints).map_err(|e| CliError(format!("simulate: {e}")))?;
    let mut open: Vec<Option<Open>> = Vec::with_capacity(arrivals.len());
    let mut queues: Vec<VecDeque<usize>> = vec![VecDeque::new(); ENDPOINTS];
    let mut busy = [0usize; ENDPOINTS];
    let mut done: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
    let mut latencies: Vec<u64> = Vec::with_capacity(arrivals.len());
    let windows = RUN.div_ceil(WINDOW) as usize;
    let mut placed = vec![[0usize; 2]; windows];
    let (mut on_bad, mut during, mut errors) = (0, 0, 0);
    let in_bad = |t: u64| bad.is_some() && (BAD_FROM..BAD_TO).contains(&t);

    // Starts request `id` on its endpoint at `now`.
    let start = |id: usize, now: u64, open: &[Option<Open>], done: &mut BinaryHeap<_>| {
        let Some(o) = &open[id] else { return };
        let slow = o.endpoint == BAD && bad == Some(Kind::SlowBackend) && in_bad(now);
        let service = if slow {
            o.arrival.service * SLOWDOWN
        } else {
            o.arrival.service
        };
        done.push(Reverse((now + service, id)));
    };

    let mut next = 0;
    loop {
        let arrival = arrivals.get(next);
        let completion = done.peek().map(|Reverse((t, _))| *t);
        match (arrival, completion) {
            (None, None) => break,
            (Some(a), Some(c)) if c <= a.at => {}
            (Some(a), _) => {
                let pick = balancer
                    .pick(&Request::new().at(Duration::from_nanos(a.at)))
                    .map_err(|e| CliError(format!("simulate: {e}")))?;
                let endpoint = addr_index(pick.addr());
                let id = open.len();
                open.push(Some(Open {
                    arrival: *a,
                    endpoint,
                    pick,
                }));
                let window = (a.at / WINDOW) as usize;
                placed[window][0] += 1;
                if endpoint == BAD {
                    placed[window][1] += 1;
                }
                if in_bad(a.at) {
                    during += 1;
                    if endpoint == BAD {
                        on_bad += 1;
                    }
                }
                if busy[endpoint] < WORKERS {
                    busy[endpoint] += 1;
                    start(id, a.at, &open, &mut done);
                } else {
                    queues[endpoint].push_back(id);
                }
                next += 1;
                continue;
            }
            (None, Some(_)) => {}
        }
        // The next event is a completion.
        let Some(Reverse((now, id))) = done.pop() else {
            break;
        };
        let Some(o) = open[id].take() else { continue };
        let latency = now - o.arrival.at;
        latencies.push(latency);
        let fails = o.endpoint == BAD
            && bad == Some(Kind::FailingBackend)
            && in_bad(now)
            && o.arrival.coin < FAILURE_RATE;
        let lat = Duration::from_nanos(latency);
        let outcome = if fails {
            errors += 1;
            PickOutcome::failure(lat)
        } else {
            PickOutcome::success(lat)
        };
        o.pick.finish(outcome.at(Duration::from_nanos(now)));
        match queues[o.endpoint].pop_front() {
            Some(queued) => start(queued, now, &open, &mut done),
            None => busy[o.endpoint] -= 1,
        }
    }

    latencies.sort_unstable();
    let quantile = |q: f64| {
        let i = ((latencies.len() as f64 * q).ceil() as usize).clamp(1, latencies.len()) - 1;
        latencies[i] as f64 / 1e6
    };
    let fair = 1.0 / ENDPOINTS as f64;
    let share: Vec<f64> = placed
        .iter()
        .map(|[all, bad]| {
            if *all == 0 {
                0.0
            } else {
                *bad as f64 / *all as f64
            }
        })
        .collect();
    let first_after = (BAD_TO / WINDOW) as usize;
    let back_after_s = share[first_after..]
        .iter()
        .position(|s| (s - fair).abs() <= BACK_WITHIN * fair)
        .map(|k| (k as u64 * WINDOW) as f64 / 1e9);
    Ok(Run {
        p50_ms: quantile(0.50),
        p99_ms: quantile(0.99),
        p999_ms: quantile(0.999),
        requests: latencies.len(),
        on_bad,
        during,
        errors,
        share,
        back_after_s,
    })
}

/// The index of `10.0.0.N:80`.
fn addr_index(addr: &str) -> usize {
    addr.strip_prefix("10.0.0.")
        .and_then(|rest| rest.strip_suffix(":80"))
        .and_then(|n| n.parse::<usize>().ok())
        .map_or(0, |n| n - 1)
}

#[cfg(test)]
mod tests {
    use super::Kind;

    #[test]
    fn scenario_names_are_read_in_any_case() {
        for (text, kind) in [
            ("slow-backend", Kind::SlowBackend),
            ("SLOW-BACKEND", Kind::SlowBackend),
            ("Failing-Backend", Kind::FailingBackend),
        ] {
            assert_eq!(Kind::parse(text), Some(kind), "{text}");
        }
        assert_eq!(Kind::parse("slow_backend"), None);
        assert_eq!(Kind::parse(""), None);
    }
}
