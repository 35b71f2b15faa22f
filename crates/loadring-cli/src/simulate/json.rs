//! `--json`: the run parameters and one object per policy (fields documented
//! in docs/simulate.md). Everything but `wall_seconds` and `ns_per_pick` is a
//! function of the flags and the seed.

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

use super::args::{Change, Config};
use super::engine::{Outcome, Setup, MIN_MEAN};

#[derive(Serialize)]
struct Report<'a> {
    seed: u64,
    requests: usize,
    keys: usize,
    workload: String,
    rate: f64,
    service: String,
    /// The zones requests come from (`--zones`), `[]` without.
    zones: &'a [String],
    endpoints: Vec<String>,
    events: Vec<EventJson>,
    virtual_seconds: f64,
    warmup_seconds: f64,
    min_mean_in_flight: f64,
    offered_in_flight_per_endpoint: f64,
    wall_seconds: f64,
    policies: Vec<PolicyJson<'a>>,
}

#[derive(Serialize)]
struct EventJson {
    at_seconds: f64,
    change: &'static str,
    endpoint: String,
}

#[derive(Serialize)]
struct PolicyJson<'a> {
    policy: &'a str,
    max_over_mean: Option<f64>,
    cap_violations: Option<u64>,
    locality: Option<f64>,
    churn: Option<f64>,
    ideal_churn: Option<f64>,
    requests_per_endpoint: PerEndpoint<'a>,
    ns_per_pick: f64,
}

/// `{"addr": count, ...}` in endpoint order (not sorted by name).
struct PerEndpoint<'a> {
    addrs: &'a [String],
    counts: &'a [u64],
}

impl Serialize for PerEndpoint<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.addrs.len()))?;
        for (addr, count) in self.addrs.iter().zip(self.counts) {
            map.serialize_entry(addr, count)?;
        }
        map.end()
    }
}

pub fn render(config: &Config, setup: &Setup<'_>, outcomes: &[Outcome], wall: f64) -> String {
    let report = Report {
        seed: config.seed,
        requests: config.requests,
        keys: config.keys,
        workload: config.workload.to_string(),
        rate: config.rate,
        service: config.service.to_string(),
        zones: &config.zones,
        endpoints: config.endpoints.iter().map(|e| e.to_string()).collect(),
        events: config
            .events
            .iter()
            .map(|e| EventJson {
                at_seconds: e.at as f64 / 1e9,
                change: match e.change {
                    Change::Remove(_) => "remove",
                    Change::Add(_) => "add",
                },
                endpoint: match &e.change {
                    Change::Remove(addr) => addr.clone(),
                    Change::Add(endpoint) => endpoint.to_string(),
                },
            })
            .collect(),
        virtual_seconds: setup.trace.end() as f64 / 1e9,
        warmup_seconds: setup.warmup as f64 / 1e9,
        min_mean_in_flight: MIN_MEAN,
        offered_in_flight_per_endpoint: config.rate * config.service.mean_ns()
            / 1e9
            / config.endpoints.len() as f64,
        wall_seconds: wall,
        policies: outcomes
            .iter()
            .map(|o| PolicyJson {
                policy: &o.name,
                max_over_mean: o.max_over_mean,
                cap_violations: o.cap_violations,
                locality: o.locality,
                churn: o.churn,
                ideal_churn: o.ideal_churn,
                requests_per_endpoint: PerEndpoint {
                    addrs: &setup.addrs,
                    counts: &o.requests,
                },
                ns_per_pick: o.ns_per_pick,
            })
            .collect(),
    };
    // Plain data: serializing it cannot fail.
    let mut text = serde_json::to_string_pretty(&report).expect("plain data serializes");
    text.push('\n');
    text
}
