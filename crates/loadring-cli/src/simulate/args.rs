//! The command line of `simulate` and its validation into a [`Config`].

use std::path::PathBuf;

use loadring::{Balancer, Endpoint, PolicySpec};

use super::plot_format::{plot_target, PlotFormat};
use super::policy::Policy;
use super::scenario;
use super::workload::{Service, Workload};
use crate::echo::echo;
use crate::CliError;

/// The policies compared when no `--policy` is given.
pub const DEFAULT_POLICIES: &[&str] = &[
    "c_murmurhash",
    "c_murmurhash_bl",
    "maglev",
    "maglev:load_factor=1.25",
    "maglev:hash_balance_factor=125",
    "ring_hash",
    "p2c",
    "rr",
];

/// `loadring simulate --help`: the model and the metrics in brief
/// (docs/simulate.md has the rest).
pub const LONG_ABOUT: &str = "\
Replay one seeded workload against several policies in virtual time: load, locality and churn side by side.

Requests arrive as a Poisson process (--rate), each for a key drawn from --workload, and are placed
by the real loadring::Balancer: each holds its pick guard for a service time (--service), then
releases it. The default run is the story of a viral key: 10 endpoints, 1,000,000 requests,
zipf:1.1 over 100,000 keys with key-0 getting 10% of all requests, ~20 requests in flight per
endpoint, and the last endpoint removed halfway.

Per policy (table, or --json with these field names):
  max_over_mean          the worst in-flight of a picked endpoint over the mean in-flight per endpoint
                         at that moment (weight-adjusted), over picks after the first 5% of virtual
                         time while that mean is >= 4 (null if none qualified)
  cap_violations         picks after which the endpoint held more than the policy's bounded-load cap
                         (null for unbounded policies)
  locality               share of requests served by the key's natural owner at that moment
                         (null for policies that do not place by hash)
  churn                  share of keys whose natural owner changed at a membership event (mean over
                         events; null without events or for non-hashing policies)
  ideal_churn            the least share any placement must move at those events
  requests_per_endpoint  requests served by each endpoint
  ns_per_pick            wall time inside Balancer::pick per request (varies run to run)
The same flags and --seed give the same results, wall times aside. See docs/simulate.md.

--scenario slow-backend|failing-backend runs a latency model instead: 10 endpoints with 4 workers
and a queue each, one of them 10x slow (or failing half its requests) from 3 s to 6 s; per policy
p50/p99/p99.9 latency against the same run without the bad period, requests on the bad endpoint,
errors, and the time it takes to get its fair share back.";

/// The flags of `loadring simulate`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// A policy to compare (repeatable); default: c_murmurhash, c_murmurhash_bl,
    /// maglev, maglev:load_factor=1.25, maglev:hash_balance_factor=125,
    /// ring_hash, p2c, rr.
    #[arg(long, short = 'p', value_name = "SPEC")]
    policy: Vec<String>,
    /// An endpoint: `ADDR[ weight=W][ tag=T][ zone=Z][ hash_key=K]` (repeatable).
    #[arg(long = "endpoint", short = 'e', value_name = "ENDPOINT")]
    endpoint: Vec<String>,
    /// A file with one endpoint per line (blank lines and lines starting with `#` ignored).
    #[arg(long, value_name = "FILE")]
    endpoints: Option<PathBuf>,
    /// Without -e/--endpoints: this many endpoints, 10.0.0.1:80 ... 10.0.0.N:80.
    #[arg(
        long,
        short = 'n',
        value_name = "N",
        default_value = "10",
        allow_hyphen_values = true,
        conflicts_with_all = ["endpoint", "endpoints"]
    )]
    backends: String,
    /// Number of requests.
    #[arg(
        long,
        value_name = "N",
        default_value = "1000000",
        allow_hyphen_values = true
    )]
    requests: String,
    /// Number of distinct keys (key-0 ... key-{N-1}).
    #[arg(
        long,
        value_name = "N",
        default_value = "100000",
        allow_hyphen_values = true
    )]
    keys: String,
    /// Key popularity: `zipf:S` (S > 0), `uniform`, or `hot:P[:S]` (key-0 gets
    /// a fraction P of all requests, the rest zipf:S over the other keys, S 1.1
    /// by default).
    #[arg(long, value_name = "WORKLOAD", default_value = "hot:0.1")]
    workload: String,
    /// Arrivals per second of virtual time (Poisson), at most 1e9 (virtual
    /// time counts nanoseconds), and enough for the run to fit 2^64 ns.
    #[arg(
        long,
        value_name = "PER_SECOND",
        default_value = "20000",
        allow_hyphen_values = true
    )]
    rate: String,
    /// Service time per request: `exp:MS` (exponential, mean MS milliseconds)
    /// or `fixed:MS`; at least 1 ns (MS >= 0.000001).
    #[arg(long, value_name = "DIST", default_value = "exp:10")]
    service: String,
    /// Remove the endpoint at ADDR at time T (repeatable). T is seconds of
    /// virtual time (`12.5`, `12.5s`, `800ms`) or a share of the run (`50%`).
    /// Without --remove/--add: the last endpoint is removed at 50%.
    #[arg(long, value_name = "ADDR@T")]
    remove: Vec<String>,
    /// Add an endpoint at time T (repeatable), e.g. `--add '10.0.0.11:80 weight=2@75%'`.
    #[arg(long, value_name = "ENDPOINT@T")]
    add: Vec<String>,
    /// Keep the membership fixed (no default removal).
    #[arg(long, conflicts_with_all = ["remove", "add"])]
    no_events: bool,
    /// Seed of the workload: the same seed gives the same requests and results.
    #[arg(
        long,
        value_name = "N",
        default_value = "1",
        allow_hyphen_values = true
    )]
    seed: String,
    /// Requests come from N zones, `zone-1` ... `zone-N`, each request from
    /// one drawn uniformly (keys, arrivals and service times stay those of
    /// the run without zones); endpoints without `zone=` are spread over the
    /// same zones round robin, in the order given (`--add` continues the
    /// count). Needed by the locality policies (zone_first, local_first).
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    zones: Option<String>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
    /// Also draw the run: FILE.svg or FILE.png.
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// Instead of the key workload, a latency scenario: `slow-backend` (one
    /// endpoint 10x slower for 3 s) or `failing-backend` (one endpoint fails
    /// half its requests for 3 s). Its model is fixed; --policy, --seed,
    /// --json and --plot apply. See docs/simulate.md.
    #[arg(long, value_name = "NAME", conflicts_with_all = [
        "endpoint", "endpoints", "backends", "requests", "keys", "workload", "rate",
        "service", "remove", "add", "no_events", "zones", "balancers", "load_report",
        "report_delay",
    ])]
    scenario: Option<String>,
    /// A fleet: K balancers over the same membership, each seeing 1/K of the
    /// requests and only its own in-flight counts; compares bounded-load
    /// policies at 1, 2, 4, ... K balancers (see docs/simulate.md).
    #[arg(long, value_name = "K", allow_hyphen_values = true)]
    balancers: Option<String>,
    /// With --balancers: every backend reports its requests in service on
    /// each response and the bounded policies count them (the fleet view:
    /// report + own picks since - own completions since); prints K = 1, 4,
    /// 16, ... K with and without reports side by side.
    #[arg(long)]
    load_report: bool,
    /// With --load-report: how long a response, and the report it carries,
    /// takes to reach its balancer: 0ms (default), 1ms, 10ms, ... (a whole
    /// number of us, ms or s, at most 10s). The same delay applies to the
    /// runs without reports.
    #[arg(long, value_name = "DUR", allow_hyphen_values = true)]
    report_delay: Option<String>,
}

/// A membership change at a virtual time.
#[derive(Clone, Debug)]
pub struct Event {
    /// Nanoseconds of virtual time.
    pub at: u64,
    pub change: Change,
}

#[derive(Clone, Debug)]
pub enum Change {
    Remove(String),
    Add(Endpoint),
}

impl Change {
    /// `members` after the change: an address removed, or an endpoint added
    /// at the end.
    pub fn apply(&self, members: &mut Vec<Endpoint>) {
        match self {
            Change::Remove(addr) => members.retain(|e| e.addr() != addr),
            Change::Add(e) => members.push(e.clone()),
        }
    }

    pub fn addr(&self) -> &str {
        match self {
            Change::Remove(addr) => addr,
            Change::Add(e) => e.addr(),
        }
    }
}

/// A validated run.
#[derive(Debug)]
pub struct Config {
    pub policies: Vec<Policy>,
    pub endpoints: Vec<Endpoint>,
    pub requests: usize,
    pub keys: usize,
    pub workload: Workload,
    pub rate: f64,
    pub service: Service,
    /// In time order.
    pub events: Vec<Event>,
    pub seed: u64,
    /// The zones requests come from (`--zones`), none without it.
    pub zones: Vec<String>,
    pub json: bool,
    pub plot: Option<(PathBuf, PlotFormat)>,
    /// `--balancers K`: the fleet comparison instead of the usual report.
    pub balancers: Option<usize>,
    /// `--load-report`: the fleet with and without load reports, and the
    /// delay (ns) of a response on its way to its balancer.
    pub load_report: Option<u64>,
}

/// Guards against runs that would exhaust memory: the trace is kept whole
/// (24 bytes a request), and each hashing policy keeps its keys' owners.
const MAX_REQUESTS: u64 = 20_000_000;
const MAX_KEYS: u64 = 10_000_000;
const MAX_BACKENDS: u32 = 10_000;
const MAX_ZONES: u32 = 1_000;
/// Virtual time is u64 nanoseconds: arrivals closer than 1 ns would all land
/// on the same instant.
const MAX_RATE: f64 = 1e9;
/// The largest exponential draw, in means: `-ln(2^-53)`, since a uniform
/// draw has 53 bits (workload.rs). A run is accepted only if it fits the
/// virtual clock even if every draw were this large, so no time is clamped.
const MAX_EXP_DRAW: f64 = 36.8;

impl Args {
    /// Checks every flag; the first problem comes back as one line.
    pub fn config(&self) -> Result<Config, CliError> {
        let seed: u64 = whole("--seed", &self.seed, 0, u64::MAX)?;
        let zones = match &self.zones {
            Some(text) => (1..=whole("--zones", text, 1, MAX_ZONES)?)
                .map(|i| format!("zone-{i}"))
                .collect(),
            None => Vec::new(),
        };
        let policies = self.policies(DEFAULT_POLICIES, seed, !zones.is_empty())?;
        let mut endpoints = self.endpoints()?;
        let requests = whole("--requests", &self.requests, 1, MAX_REQUESTS)?;
        let keys = whole("--keys", &self.keys, 1, MAX_KEYS)?;
        let workload: Workload = self.workload.parse().map_err(CliError)?;
        if let (Workload::Hot { p, .. }, 1) = (workload, keys) {
            if p < 1.0 {
                // key-0 would get every request, not the share asked for.
                return Err(CliError(format!(
                    "--workload {}: the hot key's share leaves requests for other keys: \
                     give --keys 2 or more (or hot:1 for the one key)",
                    echo(&self.workload)
                )));
            }
        }
        let rate = match self.rate.trim().parse::<f64>() {
            Ok(rate) if rate.is_finite() && rate > 0.0 => rate,
            _ => {
                return Err(CliError(format!(
                    "--rate {}: the arrival rate must be a number of requests per second > 0",
                    echo(&self.rate)
                )))
            }
        };
        let service: Service = self.service.parse().map_err(CliError)?;
        check_clock(&self.rate, rate, requests, service)?;
        let duration = requests as f64 / rate;
        let mut events = self.events(&endpoints, duration)?;
        if !zones.is_empty() {
            spread_over_zones(&mut endpoints, &mut events, &zones)?;
        }
        let default_removal = self.remove.is_empty() && self.add.is_empty();
        check_memberships(&policies, &endpoints, &events, default_removal)?;
        let plot = self.plot.as_ref().map(|p| plot_target(p)).transpose()?;
        let balancers = self
            .balancers
            .as_deref()
            .map(|k| whole("--balancers", k, 1u32, 1024).map(|k| k as usize))
            .transpose()?;
        if balancers.is_some() && plot.is_some() {
            return Err(CliError(
                "--plot draws one balancer's run: drop it with --balancers".into(),
            ));
        }
        let load_report = self.load_report(balancers.is_some())?;
        Ok(Config {
            policies,
            endpoints,
            requests: requests as usize,
            keys: keys as usize,
            workload,
            rate,
            service,
            events,
            seed,
            zones,
            json: self.json,
            plot,
            balancers,
            load_report,
        })
    }

    /// `--load-report` and `--report-delay`: the delay in ns if reports are on.
    fn load_report(&self, fleet: bool) -> Result<Option<u64>, CliError> {
        if let (Some(delay), false) = (&self.report_delay, self.load_report) {
            return Err(CliError(format!(
                "--report-delay {}: the delay of load reports applies with --load-report",
                echo(delay)
            )));
        }
        if !self.load_report {
            return Ok(None);
        }
        if !fleet {
            return Err(CliError(
                "--load-report models a fleet of balancers: give --balancers K too".into(),
            ));
        }
        self.report_delay
            .as_deref()
            .map_or(Ok(0), report_delay)
            .map(Some)
    }

    /// `--scenario`, validated, or `None` for the key workload.
    pub fn scenario(&self) -> Result<Option<scenario::Config>, CliError> {
        let Some(name) = &self.scenario else {
            return Ok(None);
        };
        let kind = scenario::Kind::parse(name.trim()).ok_or_else(|| {
            CliError(format!(
                "--scenario {}: unknown scenario (accepted: {})",
                echo(name),
                scenario::Kind::NAMES
            ))
        })?;
        let seed: u64 = whole("--seed", &self.seed, 0, u64::MAX)?;
        let policies = self.policies(scenario::DEFAULT_POLICIES, seed, false)?;
        if let Some(hashing) = policies.iter().find(|p| p.spec.is_hashing()) {
            return Err(CliError(format!(
                "--policy {}: a scenario's requests have no key for a hashing policy to place: \
                 accepted policies that need none (e.g. {})",
                echo(&hashing.name),
                scenario::DEFAULT_POLICIES.join(", ")
            )));
        }
        Ok(Some(scenario::Config {
            kind,
            policies,
            seed,
            json: self.json,
            plot: self.plot.as_ref().map(|p| plot_target(p)).transpose()?,
        }))
    }

    fn policies(&self, defaults: &[&str], seed: u64, zoned: bool) -> Result<Vec<Policy>, CliError> {
        let texts: Vec<&str> = if self.policy.is_empty() {
            // A library built without some family still runs the others.
            defaults
                .iter()
                .copied()
                .filter(|p| p.parse::<PolicySpec>().is_ok())
                .collect()
        } else {
            self.policy.iter().map(|t| t.trim()).collect()
        };
        let mut policies: Vec<Policy> = Vec::with_capacity(texts.len());
        for text in texts {
            let spec: PolicySpec = text
                .parse()
                .map_err(|e| CliError(format!("--policy {}: {e}", echo(text))))?;
            if policies.iter().any(|p| p.name == text) {
                return Err(CliError(format!("--policy {} is given twice", echo(text))));
            }
            if spec.inner().is_some() && !zoned {
                return Err(CliError(format!(
                    "--policy {}: a locality policy routes by the request's zone, \
                     and simulated requests have none: give --zones N",
                    echo(text)
                )));
            }
            policies.push(Policy {
                name: text.to_string(),
                spec: seeded(text, seed).unwrap_or(spec),
            });
        }
        Ok(policies)
    }

    fn endpoints(&self) -> Result<Vec<Endpoint>, CliError> {
        let mut endpoints = crate::endpoints::read(&self.endpoint, self.endpoints.as_deref())?;
        if let Some(path) = &self.endpoints {
            if endpoints.is_empty() {
                return Err(CliError(format!(
                    "--endpoints {}: no endpoints in the file (one ENDPOINT per line)",
                    path.display()
                )));
            }
        }
        if endpoints.is_empty() {
            let backends = whole("--backends", &self.backends, 1, MAX_BACKENDS).map_err(|e| {
                // Only 0 leaves nothing to simulate; past the most, the
                // range says it all.
                if self.backends.trim().parse::<u64>() == Ok(0) {
                    CliError(format!(
                        "{}: no endpoints to simulate (or give -e ENDPOINT)",
                        e.0
                    ))
                } else {
                    e
                }
            })?;
            for i in 1..=backends {
                let addr = format!("10.0.{}.{}:80", i / 256, i % 256);
                // Generated addresses are valid endpoint names.
                endpoints.push(Endpoint::new(addr).expect("a generated address"));
            }
        }
        let mut seen = std::collections::HashSet::with_capacity(endpoints.len());
        for e in &endpoints {
            if !seen.insert(e.addr()) {
                return Err(CliError(format!(
                    "endpoint {} is given twice (the simulation tells endpoints apart by address)",
                    echo(e.addr())
                )));
            }
        }
        if endpoints.iter().all(|e| e.weight() == 0) {
            return Err(CliError(
                "every endpoint has weight 0: at least one needs weight >= 1".into(),
            ));
        }
        Ok(endpoints)
    }

    /// Parses `--remove`/`--add` and replays them over the membership, so an
    /// event naming an endpoint that is not (or already) there at its time is
    /// rejected before anything runs. Ties: removals first, then additions,
    /// each in command-line order.
    fn events(&self, initial: &[Endpoint], duration: f64) -> Result<Vec<Event>, CliError> {
        let mut events = Vec::new();
        if self.remove.is_empty() && self.add.is_empty() {
            if !self.no_events && initial.len() > 1 {
                let last = initial.last().expect("endpoints are not empty");
                events.push(Event {
                    at: (duration * 0.5 * 1e9).round() as u64,
                    change: Change::Remove(last.addr().to_string()),
                });
            }
            return Ok(events);
        }
        for text in &self.remove {
            let (addr, at) = split_event("--remove", text, duration)?;
            events.push(Event {
                at,
                change: Change::Remove(addr.trim().to_string()),
            });
        }
        for text in &self.add {
            let (endpoint, at) = split_event("--add", text, duration)?;
            let endpoint = endpoint
                .parse::<Endpoint>()
                .map_err(|e| CliError(format!("--add {}: {e}", echo(text))))?;
            events.push(Event {
                at,
                change: Change::Add(endpoint),
            });
        }
        // Stable: equal times keep removals before additions, in flag order.
        events.sort_by_key(|e| e.at);
        let mut members: Vec<&Endpoint> = initial.iter().collect();
        for event in &events {
            let at = event.at as f64 / 1e9;
            match &event.change {
                Change::Remove(addr) => {
                    let Some(i) = members.iter().position(|m| m.addr() == addr) else {
                        let addr = echo(addr);
                        return Err(CliError(format!(
                            "--remove {addr}@{at}s: {addr} is not an endpoint at that time (endpoints then: {})",
                            first_few(members.iter().map(|m| m.addr()))
                        )));
                    };
                    members.remove(i);
                    if members.iter().all(|m| m.weight() == 0) {
                        return Err(CliError(format!(
                            "--remove {}@{at}s would leave no endpoint with weight >= 1",
                            echo(addr)
                        )));
                    }
                }
                Change::Add(endpoint) => {
                    if members.iter().any(|m| m.addr() == endpoint.addr()) {
                        let addr = echo(endpoint.addr());
                        return Err(CliError(format!(
                            "--add {addr}@{at}s: {addr} is already an endpoint at that time"
                        )));
                    }
                    members.push(endpoint);
                }
            }
        }
        Ok(events)
    }
}

/// Builds each policy over every membership the events make, so that one a
/// policy refuses (a ring past its size, a weight out of its range, a
/// membership of weight 0 only) stops the run before it starts rather than
/// in its middle, naming the event.
fn check_memberships(
    policies: &[Policy],
    initial: &[Endpoint],
    events: &[Event],
    default_removal: bool,
) -> Result<(), CliError> {
    if events.is_empty() {
        // The run's own first build says what is wrong with `initial`.
        return Ok(());
    }
    for policy in policies {
        let name = echo(&policy.name);
        let mut members = initial.to_vec();
        let balancer = Balancer::new(policy.spec.clone(), members.clone())
            .map_err(|e| CliError(format!("--policy {name}: {e}")))?;
        for event in events {
            event.change.apply(&mut members);
            balancer.update(members.clone()).map_err(|e| {
                let at = event.at as f64 / 1e9;
                let event = match (&event.change, default_removal) {
                    (Change::Remove(addr), true) => format!(
                        "the default removal of {} at {at}s (--no-events keeps every endpoint)",
                        echo(addr)
                    ),
                    (Change::Remove(addr), false) => format!("--remove {}@{at}s", echo(addr)),
                    (Change::Add(added), _) => format!("--add {}@{at}s", echo(added.addr())),
                };
                CliError(format!("--policy {name}: {event}: {e}"))
            })?;
        }
    }
    Ok(())
}

/// `text` with `seed=SEED` added, if the policy takes a seed and has none
/// (randomized policies such as `p2c`); `None` otherwise.
fn seeded(text: &str, seed: u64) -> Option<PolicySpec> {
    let with_seed = if text.contains(':') {
        format!("{text} seed={seed}")
    } else {
        format!("{text}:seed={seed}")
    };
    with_seed.parse().ok()
}

/// The endpoints an error lists: the first [`LISTED`], then how many more.
fn first_few<'a>(addrs: impl ExactSizeIterator<Item = &'a str>) -> String {
    let count = addrs.len();
    let shown: Vec<String> = addrs.take(LISTED).map(echo).collect();
    match count.checked_sub(LISTED) {
        Some(more) if more > 0 => format!("{} and {more} more", shown.join(", ")),
        _ => shown.join(", "),
    }
}

/// The most endpoints an error lists by name.
const LISTED: usize = 5;

/// Splits `WHAT@T` at its last `@` and turns T into nanoseconds of virtual time.
fn split_event<'a>(flag: &str, text: &'a str, duration: f64) -> Result<(&'a str, u64), CliError> {
    let (what, time) = text.rsplit_once('@').ok_or_else(|| {
        CliError(format!(
            "{flag} {}: expected WHAT@T, e.g. 10.0.0.3:80@50% or 10.0.0.3:80@12.5s",
            echo(text)
        ))
    })?;
    if what.trim().is_empty() {
        return Err(CliError(format!(
            "{flag} {}: no endpoint before `@`",
            echo(text)
        )));
    }
    let seconds = parse_time(time, duration).map_err(|why| {
        CliError(format!(
            "{flag} {}: {why} (accepted: seconds 0..={duration} as `12.5` or `12.5s`, `800ms`, or a share of the run `0%`..=`100%`)",
            echo(text)
        ))
    })?;
    Ok((what, (seconds * 1e9).round() as u64))
}

fn parse_time(text: &str, duration: f64) -> Result<f64, String> {
    let text = text.trim();
    let (number, scale) = if let Some(p) = text.strip_suffix('%') {
        (p, duration / 100.0)
    } else if let Some(ms) = text.strip_suffix("ms") {
        (ms, 1e-3)
    } else if let Some(s) = text.strip_suffix('s') {
        (s, 1.0)
    } else {
        (text, 1.0)
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{}` is not a time", echo(text)))?;
    let seconds = value * scale;
    if !(seconds.is_finite() && seconds >= 0.0 && seconds <= duration * (1.0 + 1e-12)) {
        return Err(format!("`{}` is outside the run", echo(text)));
    }
    Ok(seconds.min(duration))
}

/// A whole number of `flag` in `min..=max`, as one line if it is not.
fn whole<T>(flag: &str, text: &str, min: T, max: T) -> Result<T, CliError>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display + Copy,
{
    match text.trim().parse::<T>() {
        Ok(n) if min <= n && n <= max => Ok(n),
        _ => Err(CliError(format!(
            "{flag} {}: accepted {}{min}..={max}",
            echo(text),
            if flag == "--seed" {
                "a whole number "
            } else {
                ""
            }
        ))),
    }
}

/// The longest `--report-delay`, in ns: 10 s.
const MAX_REPORT_DELAY: u64 = 10_000_000_000;

/// `--report-delay DUR`: a whole number of us, ms or s (or `0`), in ns.
fn report_delay(text: &str) -> Result<u64, CliError> {
    let bad = || {
        CliError(format!(
            "--report-delay {}: accepted a whole number of us, ms or s from 0 to 10s \
             (e.g. 0ms, 1ms, 10ms)",
            echo(text)
        ))
    };
    let t = text.trim();
    if t == "0" {
        return Ok(0);
    }
    let (digits, unit) = [("us", 1_000u64), ("ms", 1_000_000), ("s", 1_000_000_000)]
        .into_iter()
        .find_map(|(suffix, ns)| t.strip_suffix(suffix).map(|d| (d, ns)))
        .ok_or_else(bad)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .filter(|&ns| ns <= MAX_REPORT_DELAY)
        .ok_or_else(bad)
}

/// Refuses runs that the virtual clock (u64 nanoseconds) might not hold,
/// instead of clamping their times: arrivals closer than its resolution, or
/// a run that could end past 2^64 ns even in its worst case.
fn check_clock(text: &str, rate: f64, requests: u64, service: Service) -> Result<(), CliError> {
    if rate > MAX_RATE {
        return Err(CliError(format!(
            "--rate {}: arrivals less than 1 ns apart: accepted a rate up to {MAX_RATE} per second \
             (virtual time counts nanoseconds)",
            echo(text)
        )));
    }
    let clock = u64::MAX as f64;
    let longest_service = match service {
        Service::Exp { .. } => MAX_EXP_DRAW * service.mean_ns(),
        Service::Fixed { .. } => service.mean_ns(),
    };
    let longest_run = MAX_EXP_DRAW * requests as f64 * 1e9 / rate + longest_service;
    if longest_run > clock {
        let least = MAX_EXP_DRAW * requests as f64 * 1e9 / (clock - longest_service);
        return Err(CliError(format!(
            "--rate {}: {requests} requests at this rate may not fit the virtual clock \
             (2^64 ns, about 584 years, for the longest run the draws allow): \
             accepted a rate of at least {least:.3e} per second",
            echo(text)
        )));
    }
    Ok(())
}

/// Gives the endpoints without a zone (the initial ones, then those `--add`
/// brings) the zones round robin, in the order given.
fn spread_over_zones(
    endpoints: &mut [Endpoint],
    events: &mut [Event],
    zones: &[String],
) -> Result<(), CliError> {
    let added = events.iter_mut().filter_map(|e| match &mut e.change {
        Change::Add(endpoint) => Some(endpoint),
        Change::Remove(_) => None,
    });
    for (i, endpoint) in endpoints.iter_mut().chain(added).enumerate() {
        if endpoint.zone().is_none() {
            *endpoint = endpoint
                .clone()
                .with_zone(zones[i % zones.len()].clone())
                .map_err(|e| CliError(format!("--zones: {e}")))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_in_seconds_milliseconds_and_percent() {
        assert_eq!(parse_time("12.5", 50.0), Ok(12.5));
        assert_eq!(parse_time("12.5s", 50.0), Ok(12.5));
        assert_eq!(parse_time("800ms", 50.0), Ok(0.8));
        assert_eq!(parse_time("50%", 50.0), Ok(25.0));
        assert_eq!(parse_time("100%", 50.0), Ok(50.0));
        assert!(parse_time("51s", 50.0).is_err());
        assert!(parse_time("-1", 50.0).is_err());
        assert!(parse_time("101%", 50.0).is_err());
        assert!(parse_time("soon", 50.0).is_err());
    }

    #[test]
    fn every_default_policy_exists() {
        for text in DEFAULT_POLICIES {
            assert!(text.parse::<PolicySpec>().is_ok(), "{text}");
        }
    }

    #[test]
    fn only_policies_that_take_a_seed_get_one() {
        // Hashing and deterministic policies take no seed: they run as written.
        assert_eq!(seeded("c_murmurhash", 7), None);
        assert_eq!(seeded("c_murmurhash:replicas=10", 7), None);
        assert_eq!(seeded("rr", 7), None);
        // A randomized policy gets the run's seed, unless it has its own.
        assert_eq!(
            seeded("p2c", 7).map(|s| s.as_str().to_string()),
            Some("p2c:seed=7".to_string())
        );
        assert_eq!(
            seeded("p2c:choices=3", 7).map(|s| s.as_str().to_string()),
            Some("p2c:choices=3 seed=7".to_string())
        );
        assert_eq!(seeded("p2c:seed=3", 7), None);
    }

    #[test]
    fn events_split_at_the_last_at_sign() {
        let (what, at) = split_event("--add", "web@1 weight=2@1.5s", 10.0).unwrap();
        assert_eq!((what, at), ("web@1 weight=2", 1_500_000_000));
        assert!(split_event("--add", "web", 10.0).is_err());
        assert!(split_event("--add", "@3s", 10.0).is_err());
    }
}
