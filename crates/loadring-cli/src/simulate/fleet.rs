//! `loadring simulate --balancers K`: a fleet of K gateways in front of the
//! same backends. Each balancer has the same membership and policy, sees
//! 1/K of the requests (each request goes to one balancer drawn at random,
//! as an L4 load balancer or DNS spreads clients) and counts only its own
//! requests in flight: bounded load caps each balancer's share, not the
//! backend's total. This measures what is left of the guarantee.
//!
//! Per policy (bounded-load ones only) and per fleet size, in virtual time
//! over the same trace:
//! - `max/mean`: the peak of a backend's total in flight (all balancers)
//!   over the fair share of the total;
//! - `over cap`: the share of picks that left their backend above the cap a
//!   single balancer would enforce on the same total (`ceil(c (T+1) w/W)`);
//! - `worst/cap`: the largest total in flight over that cap;
//! - `worst/Kcap`: the largest total in flight over the sum of K caps,
//!   `c (T+1+K) w/W + K` on the total `T` before the pick (see `bound`);
//! - `bound`: what the K local caps guarantee at the run's mean load, over
//!   the fair share: a backend holds at most the sum of the K caps,
//!   `sum_i ceil(c (T_i+1) w/W) <= c (T+K) w/W + K`, so about `c + K/mean`:
//!   the multiplicative slack `c` stays, the rounding slack of one request
//!   per balancer adds up over the K balancers.
//!
//! All three measured columns count picks after the warm-up once the mean
//! in flight per backend is at least 4 (as `max/mean` in the usual report).
//!
//! Membership events apply to every balancer at the same instant (the
//! fleet shares membership, e.g. through `loadring proxy --discover`).
//!
//! `--load-report` (issue 29): every response carries its backend's count
//! of requests in service (all balancers) as it leaves the backend, applied
//! with the response by its balancer (`Outcome::with_report`), so bounded
//! policies count the fleet view: the report plus their own picks since,
//! minus their own completions since. `--report-delay D`: a response, and its
//! report, reaches the balancer D after the backend finished (the balancer
//! holds the request until then, in the runs without reports too). Each
//! fleet size runs without and with reports; `locality` is the share of
//! requests served by their key's natural owner (spills: the rest).

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::fmt::Write as _;
use std::time::Duration;

use loadring::{Balancer, Endpoint, LoadReport, Outcome, Pick, Request};

use super::args::Config;
use super::engine::{Departure, Setup, MIN_MEAN};
use super::policy::Policy;
use crate::CliError;

/// One policy at one fleet size.
#[derive(Debug, Clone)]
pub struct Row {
    pub policy: String,
    pub load_factor: f64,
    pub balancers: usize,
    pub max_over_mean: Option<f64>,
    pub over_cap: f64,
    pub worst_over_cap: f64,
    pub worst_over_fleet_cap: f64,
    pub bound: Option<f64>,
    pub mean_in_flight: f64,
    /// Share of requests served by their key's natural owner.
    pub locality: f64,
    /// The busiest backend's time-averaged total in flight over its fair
    /// share of the time-averaged total (see [`Busiest`]).
    pub busiest: Option<f64>,
}

/// The busiest backend's time-averaged concurrency over its fair share,
/// after the warm-up: what issue 29's live test measures (there, requests
/// served at a fixed service time). Each backend's load is integrated over
/// time as it changes; its fair share integrates the total in flight times
/// its weight share, over each stretch of unchanged membership. The figure
/// is the largest ratio of the two integrals: 1 when every backend carries
/// its share on average, `c` for a hot key's owner held at the cap.
struct Busiest {
    from: Option<u64>,
    since: Vec<u64>,
    load: Vec<f64>,
    fair: Vec<f64>,
    /// The integral of the total at the start of the membership's stretch.
    stretch_from: f64,
}

impl Busiest {
    fn new(n: usize) -> Self {
        Busiest {
            from: None,
            since: vec![0; n],
            load: vec![0.0; n],
            fair: vec![0.0; n],
            stretch_from: 0.0,
        }
    }

    /// The measure starts at `at` (the first pick after the warm-up).
    fn start(&mut self, at: u64) {
        if self.from.is_none() {
            self.from = Some(at);
            self.since.fill(at);
        }
    }

    /// Backend `e`, holding `load` until `at`, is about to change.
    fn change(&mut self, e: usize, load: u64, at: u64) {
        if self.from.is_some() {
            self.load[e] += load as f64 * at.saturating_sub(self.since[e]) as f64;
            self.since[e] = at;
        }
    }

    /// A stretch of membership with `weight` ends where the integral of
    /// the total is `load_time`.
    fn end_stretch(&mut self, weight: &[u64], weight_sum: u64, load_time: f64) {
        let stretch = load_time - self.stretch_from;
        if weight_sum > 0 {
            for (fair, &w) in self.fair.iter_mut().zip(weight) {
                *fair += stretch * w as f64 / weight_sum as f64;
            }
        }
        self.stretch_from = load_time;
    }

    /// The figure at the end, `at`.
    fn ratio(
        mut self,
        load: &[u64],
        at: u64,
        weight: &[u64],
        weight_sum: u64,
        load_time: f64,
    ) -> Option<f64> {
        self.from?;
        for (e, &l) in load.iter().enumerate() {
            self.change(e, l, at);
        }
        self.end_stretch(weight, weight_sum, load_time);
        // The backends' integrals add up to the total's, integrated apart.
        let sum: f64 = self.load.iter().sum();
        debug_assert!(
            (sum - load_time).abs() <= 1e-9 * load_time.max(1.0),
            "backends {sum}, total {load_time}"
        );
        self.load
            .iter()
            .zip(&self.fair)
            .filter(|(_, &fair)| fair > 0.0)
            .map(|(load, fair)| load / fair)
            .max_by(f64::total_cmp)
    }
}

/// How responses reach the balancers.
#[derive(Debug, Clone, Copy, Default)]
pub struct Mode {
    /// Responses carry their backend's requests in service.
    pub reports: bool,
    /// Nanoseconds from the backend to the balancer.
    pub delay: u64,
}

/// A response on its way to its balancer, which still holds the request.
struct Response {
    at: u64,
    seq: usize,
    service: u64,
    /// The backend's requests in service as the response left it.
    report: Option<u64>,
    pick: Pick,
}

impl Response {
    /// The balancer learns of the completion, and of the report with it.
    fn arrive(self) {
        let at = Duration::from_nanos(self.at);
        let outcome = Outcome::success(Duration::from_nanos(self.service)).at(at);
        match self.report {
            Some(n) => self
                .pick
                .finish(outcome.with_report(LoadReport::new(n).at(at))),
            None => self.pick.finish(outcome),
        }
    }
}

impl PartialEq for Response {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Response {}
impl PartialOrd for Response {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Response {
    /// Reversed: the heap's top is the earliest arrival.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// The fleet sizes compared: 1, 2, 4, ... up to `k`, and `k`.
pub fn sizes(k: usize) -> Vec<usize> {
    let mut sizes = Vec::new();
    let mut s = 1;
    while s < k {
        sizes.push(s);
        s *= 2;
    }
    sizes.push(k);
    sizes
}

/// splitmix64: which balancer request `seq` reaches.
fn balancer_of(seq: usize, seed: u64, k: usize) -> usize {
    let mut z = (seq as u64 ^ seed.rotate_left(17)).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    ((z ^ (z >> 31)) % k as u64) as usize
}

/// The fleet sizes of `--load-report`: 1, 4, 16, ... up to `k`, and `k`.
pub fn report_sizes(k: usize) -> Vec<usize> {
    let mut sizes = Vec::new();
    let mut s = 1;
    while s < k {
        sizes.push(s);
        s *= 4;
    }
    sizes.push(k);
    sizes
}

/// Runs one bounded policy with `k` balancers.
pub fn simulate(
    policy: &Policy,
    setup: &Setup<'_>,
    k: usize,
    seed: u64,
    mode: Mode,
) -> Result<Row, CliError> {
    let name = policy.name.as_str();
    let factor = policy
        .spec
        .load_factor()
        .ok_or_else(|| CliError(format!("--balancers: policy {name} has no load bound")))?;
    let fail = |e: String| CliError(format!("{name} (--balancers {k}): {e}"));
    let index: HashMap<&str, usize> = setup
        .addrs
        .iter()
        .enumerate()
        .map(|(i, a)| (a.as_str(), i))
        .collect();
    let mut current: Vec<Endpoint> = setup.initial.to_vec();
    let weights = |current: &[Endpoint]| {
        let mut w = vec![0u64; setup.addrs.len()];
        for e in current {
            w[index[e.addr()]] = u64::from(e.weight());
        }
        w
    };
    let mut weight = weights(&current);
    let mut weight_sum: u64 = weight.iter().sum();
    let fleet: Vec<Balancer> = (0..k)
        .map(|_| Balancer::new(policy.spec.clone(), current.clone()))
        .collect::<Result<_, _>>()
        .map_err(|e| fail(e.to_string()))?;
    let mut heap: BinaryHeap<Departure> = BinaryHeap::new();
    let mut responses: BinaryHeap<Response> = BinaryHeap::new();
    let mut local = 0u64;
    let mut load = vec![0u64; setup.addrs.len()];
    let mut total = 0u64;
    let mut next_event = 0;
    let (mut over, mut measured, mut worst, mut peak) = (0u64, 0u64, 0f64, None::<f64>);
    let mut worst_fleet = 0f64;
    let mut busiest = Busiest::new(setup.addrs.len());
    let c = factor.as_f64();
    let (mut load_time, mut last_at, mut measured_from) = (0f64, 0u64, None::<u64>);
    for (seq, arrival) in setup.trace.arrivals.iter().enumerate() {
        loop {
            let departure = heap.peek().map(|d| d.at).filter(|&t| t <= arrival.at);
            let response = responses.peek().map(|r| r.at).filter(|&t| t <= arrival.at);
            let event = setup.events.get(next_event).filter(|e| e.at <= arrival.at);
            // Equal times: the backend finishes, then the balancer hears of
            // it, then the membership changes.
            let first = [departure, response, event.map(|e| e.at)]
                .into_iter()
                .enumerate()
                .filter_map(|(i, t)| t.map(|t| (t, i)))
                .min();
            match first {
                Some((_, 0)) => {
                    let d = heap.pop().expect("peeked");
                    if measured_from.is_some() {
                        load_time += total as f64 * (d.at - last_at) as f64;
                    }
                    last_at = d.at;
                    busiest.change(d.endpoint, load[d.endpoint], d.at);
                    load[d.endpoint] -= 1;
                    total -= 1;
                    let response = Response {
                        at: d.at.saturating_add(mode.delay),
                        seq: d.seq,
                        service: d.service,
                        report: mode.reports.then_some(load[d.endpoint]),
                        pick: d.pick,
                    };
                    if mode.delay == 0 {
                        response.arrive();
                    } else {
                        responses.push(response);
                    }
                }
                Some((_, 1)) => responses.pop().expect("peeked").arrive(),
                Some((_, _)) => {
                    let event = event.expect("an event is due");
                    if measured_from.is_some() {
                        load_time += total as f64 * (event.at - last_at) as f64;
                    }
                    last_at = event.at;
                    busiest.end_stretch(&weight, weight_sum, load_time);
                    event.change.apply(&mut current);
                    for b in &fleet {
                        b.update(current.clone()).map_err(|e| fail(e.to_string()))?;
                    }
                    weight = weights(&current);
                    weight_sum = weight.iter().sum();
                    next_event += 1;
                }
                None => break,
            }
        }
        if measured_from.is_some() {
            load_time += total as f64 * (arrival.at - last_at) as f64;
        }
        last_at = arrival.at;
        // Virtual time: the age of a report is measured on it.
        let mut request = Request::key(setup.trace.keys.get(arrival.key as usize))
            .at(Duration::from_nanos(arrival.at));
        if let Some(zone) = setup.trace.zone(seq) {
            request = request.in_zone(zone);
        }
        let b = balancer_of(seq, seed, k);
        let natural = fleet[b]
            .route(&request)
            .map_err(|e| fail(format!("request {}: {e}", seq + 1)))?
            .map(|route| route.addr().to_string());
        let pick = fleet[b]
            .pick(&request)
            .map_err(|e| fail(format!("request {}: {e}", seq + 1)))?;
        if natural.as_deref() == Some(pick.addr()) {
            local += 1;
        }
        let e = *index
            .get(pick.addr())
            .ok_or_else(|| fail(format!("picked {}, not an endpoint", pick.addr())))?;
        let cap = factor.cap(total, weight[e] as u32, weight_sum);
        if arrival.at >= setup.warmup {
            busiest.start(arrival.at);
        }
        busiest.change(e, load[e], arrival.at);
        load[e] += 1;
        total += 1;
        if arrival.at >= setup.warmup {
            measured_from.get_or_insert(arrival.at);
            let members = weight.iter().filter(|&&w| w > 0).count() as f64;
            if total as f64 / members >= MIN_MEAN {
                measured += 1;
                if load[e] > cap {
                    over += 1;
                }
                worst = worst.max(load[e] as f64 / cap.max(1) as f64);
                // The sum of K caps, c (T+1 + K) s + K, on the total before the pick.
                let s = weight[e] as f64 / weight_sum as f64;
                let fleet_cap = c * ((total - 1) as f64 + 1.0 + k as f64) * s + k as f64;
                worst_fleet = worst_fleet.max(load[e] as f64 / fleet_cap);
                let fair = total as f64 * weight[e] as f64 / weight_sum as f64;
                let ratio = load[e] as f64 / fair;
                peak = Some(peak.map_or(ratio, |p: f64| p.max(ratio)));
            }
        }
        heap.push(Departure {
            at: arrival.at.saturating_add(arrival.service),
            seq,
            endpoint: e,
            service: arrival.service,
            pick,
        });
    }
    let span = measured_from.map_or(0, |from| last_at.saturating_sub(from));
    let busiest = busiest.ratio(&load, last_at, &weight, weight_sum, load_time);
    let mean_total = if span > 0 {
        load_time / span as f64
    } else {
        0.0
    };
    // The guarantee at the mean load T, for the heaviest member's share
    // s = w/W: the K caps sum to at most c (T + K) s + K, whatever the split
    // of T over the balancers; over the fair share T s: c + K (c s + 1) / (T s).
    let (w, ws) = (weight.iter().copied().max().unwrap_or(0), weight_sum.max(1));
    let share = w as f64 / ws as f64;
    let fair = mean_total * share;
    let bound_total = c * (mean_total + k as f64) * share + k as f64;
    Ok(Row {
        policy: name.to_string(),
        load_factor: factor.as_f64(),
        balancers: k,
        max_over_mean: peak,
        over_cap: over as f64 / measured.max(1) as f64,
        worst_over_cap: worst,
        worst_over_fleet_cap: worst_fleet,
        bound: (fair > 0.0).then(|| bound_total / fair),
        mean_in_flight: fair,
        locality: local as f64 / setup.trace.arrivals.len().max(1) as f64,
        busiest,
    })
}

/// The policies bounded by loadring's cap among `--policy`.
fn bounded(config: &Config) -> Result<Vec<&Policy>, CliError> {
    let bounded: Vec<&Policy> = config
        .policies
        .iter()
        .filter(|p| p.spec.load_factor().is_some())
        .collect();
    if bounded.is_empty() {
        return Err(CliError(
            "--balancers compares policies bounded by loadring's cap (Envoy's \
             hash_balance_factor is not modelled): give one (e.g. -p c_murmurhash_bl, \
             -p 'maglev:load_factor=1.25')"
                .into(),
        ));
    }
    Ok(bounded)
}

/// Every bounded policy at every fleet size, in order.
pub fn run_all(config: &Config, setup: &Setup<'_>, k: usize) -> Result<Vec<Row>, CliError> {
    let bounded = bounded(config)?;
    let mut rows = Vec::new();
    for policy in bounded {
        for size in sizes(k) {
            rows.push(simulate(policy, setup, size, config.seed, Mode::default())?);
        }
    }
    Ok(rows)
}

/// Every bounded policy at fleet sizes 1, 4, 16, ... `k`, without and with
/// load reports (responses `delay` ns on their way).
pub fn run_reports(
    config: &Config,
    setup: &Setup<'_>,
    k: usize,
    delay: u64,
) -> Result<Vec<(Row, Row)>, CliError> {
    let mut rows = Vec::new();
    for policy in bounded(config)? {
        for size in report_sizes(k) {
            let run = |reports| simulate(policy, setup, size, config.seed, Mode { reports, delay });
            rows.push((run(false)?, run(true)?));
        }
    }
    Ok(rows)
}

/// The side-by-side table of `--load-report`.
pub fn render_reports(
    config: &Config,
    setup: &Setup<'_>,
    delay: u64,
    rows: &[(Row, Row)],
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} requests over {} endpoints, each request to one of K balancers at random; \
         with reports, each response carries its backend's requests in service \
         (all balancers), {} on its way to the balancer.",
        super::workload::thousands(setup.trace.arrivals.len() as u64),
        config.endpoints.len(),
        show_delay(delay),
    );
    let _ = writeln!(
        out,
        "Loads are totals per backend (all balancers); over cap: picks that left their backend \
         above the cap one balancer would enforce on that total.\n"
    );
    let _ = writeln!(
        out,
        "{:<26} {:>3} {:>10} | {:^40} | {:^40}",
        "", "", "", "without reports", "with reports"
    );
    let _ = writeln!(
        out,
        "{:<26} {:>3} {:>10} | {:>9} {:>9} {:>9} {:>9} | {:>9} {:>9} {:>9} {:>9}",
        "policy",
        "K",
        "mean/bknd",
        "max/mean",
        "busiest",
        "locality",
        "over cap",
        "max/mean",
        "busiest",
        "locality",
        "over cap"
    );
    for (without, with) in rows {
        let _ = writeln!(
            out,
            "{:<26} {:>3} {:>10.1} | {:>9} {:>9} {:>9.3} {:>8.2}% | {:>9} {:>9} {:>9.3} {:>8.2}%",
            without.policy,
            without.balancers,
            without.mean_in_flight,
            opt(without.max_over_mean, 2),
            opt(without.busiest, 3),
            without.locality,
            without.over_cap * 100.0,
            opt(with.max_over_mean, 2),
            opt(with.busiest, 3),
            with.locality,
            with.over_cap * 100.0,
        );
    }
    let _ = writeln!(
        out,
        "\nmax/mean: the peak at any pick of a backend's total in flight over its fair share then;\n\
         busiest: the busiest backend's time-averaged total in flight over its fair share of the time-averaged total;\n\
         locality: requests served by their key's natural owner; spills: the rest (1 - locality)."
    );
    out
}

/// `delay` ns as the flag spells it.
fn show_delay(delay: u64) -> String {
    match delay {
        0 => "0ms".into(),
        d if d % 1_000_000 == 0 => format!("{}ms", d / 1_000_000),
        d => format!("{}us", d / 1_000),
    }
}

/// The rows of `--load-report` as JSON.
pub fn json_reports(delay: u64, rows: &[(Row, Row)]) -> String {
    let side = |r: &Row| {
        serde_json::json!({
            "max_over_mean": r.max_over_mean,
            "busiest_over_mean": r.busiest,
            "locality": r.locality,
            "spills": 1.0 - r.locality,
            "over_cap": r.over_cap,
            "worst_over_cap": r.worst_over_cap,
        })
    };
    let rows: Vec<serde_json::Value> = rows
        .iter()
        .map(|(without, with)| {
            serde_json::json!({
                "policy": without.policy,
                "load_factor": without.load_factor,
                "balancers": without.balancers,
                "mean_in_flight_per_backend": without.mean_in_flight,
                "without_reports": side(without),
                "with_reports": side(with),
            })
        })
        .collect();
    let value = serde_json::json!({ "report_delay_ns": delay, "fleet": rows });
    let mut text = serde_json::to_string_pretty(&value).unwrap_or_default();
    text.push('\n');
    text
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.digits$}"))
}

/// The table.
pub fn render(config: &Config, setup: &Setup<'_>, rows: &[Row]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} requests over {} endpoints, each request to one of K balancers at random; \
         each balancer counts only its own requests in flight.",
        super::workload::thousands(setup.trace.arrivals.len() as u64),
        config.endpoints.len()
    );
    let _ = writeln!(
        out,
        "Loads are totals per backend (all balancers); cap = what one balancer would enforce on that total.\n"
    );
    let _ = writeln!(
        out,
        "{:<26} {:>3} {:>10} {:>9} {:>9} {:>10} {:>11} {:>11}",
        "policy", "K", "mean/bknd", "max/mean", "over cap", "worst/cap", "worst/Kcap", "bound@mean"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{:<26} {:>3} {:>10.1} {:>9} {:>8.2}% {:>10.2} {:>11.2} {:>11}",
            r.policy,
            r.balancers,
            r.mean_in_flight,
            opt(r.max_over_mean, 2),
            r.over_cap * 100.0,
            r.worst_over_cap,
            r.worst_over_fleet_cap,
            opt(r.bound, 2),
        );
    }
    let _ = writeln!(
        out,
        "\nKcap: the sum of the K balancers' caps, c (T+1+K) w/W + K: what K blind balancers allow a backend\n\
         (a few % more at times: another balancer's share was capped on its own total when it picked).\n\
         bound@mean: Kcap at the mean load over the fair share, about c + K/mean (c for one balancer);\n\
         max/mean peaks come at totals below the mean, where the bound is looser."
    );
    out
}

/// The rows as JSON.
pub fn json(rows: &[Row]) -> String {
    let rows: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            serde_json::json!({
                "policy": r.policy,
                "load_factor": r.load_factor,
                "balancers": r.balancers,
                "mean_in_flight_per_backend": r.mean_in_flight,
                "max_over_mean": r.max_over_mean,
                "over_cap": r.over_cap,
                "worst_over_cap": r.worst_over_cap,
                "worst_over_fleet_cap": r.worst_over_fleet_cap,
                "bound_over_mean": r.bound,
            })
        })
        .collect();
    let mut text =
        serde_json::to_string_pretty(&serde_json::json!({ "fleet": rows })).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two backends: e0 holds 2 for 10 ns then 1 for 10 ns, e1 holds 0
    /// then 1: integrals 30 and 10 over a total of 40, fair shares 20 each.
    #[test]
    fn the_busiest_backend_is_the_largest_ratio_of_integrals() {
        let mut b = Busiest::new(2);
        b.start(0);
        b.change(0, 0, 0);
        b.change(0, 1, 0);
        b.change(0, 2, 10);
        b.change(1, 0, 10);
        let ratio = b.ratio(&[1, 1], 20, &[1, 1], 2, 40.0);
        assert_eq!(ratio, Some(1.5));
        // Weights 3:1 over the same loads: e1's fair share is 10.
        let mut b = Busiest::new(2);
        b.start(0);
        b.change(0, 2, 10);
        b.change(1, 0, 10);
        assert_eq!(b.ratio(&[1, 1], 20, &[3, 1], 4, 40.0), Some(1.0));
        assert_eq!(
            Busiest::new(1).ratio(&[3], 5, &[1], 1, 0.0),
            None,
            "never started"
        );
    }

    #[test]
    fn report_sizes_quadruple_up_to_k() {
        assert_eq!(report_sizes(1), [1]);
        assert_eq!(report_sizes(16), [1, 4, 16]);
        assert_eq!(report_sizes(20), [1, 4, 16, 20]);
    }

    #[test]
    fn sizes_double_up_to_k() {
        assert_eq!(sizes(1), [1]);
        assert_eq!(sizes(8), [1, 2, 4, 8]);
        assert_eq!(sizes(6), [1, 2, 4, 6]);
    }

    #[test]
    fn requests_spread_evenly_over_the_balancers() {
        let mut n = [0usize; 4];
        for seq in 0..40_000 {
            n[balancer_of(seq, 1, 4)] += 1;
        }
        assert!(n.iter().all(|&c| (9_500..10_500).contains(&c)), "{n:?}");
    }
}
