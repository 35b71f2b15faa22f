//! The table and the JSON of `simulate --scenario` (fields documented in
//! docs/simulate.md). Everything is a function of the policies and the seed.

use serde::Serialize;

use super::scenario::{
    self, Config, Result, BAD_FROM, BAD_TO, ENDPOINTS, RATE, RUN, WINDOW, WORKERS,
};
use super::workload::thousands;

/// The run's model in one paragraph.
fn header(config: &Config, results: &[Result]) -> String {
    let requests = results.first().map_or(0, |r| r.scenario.requests);
    format!(
        "scenario {}, seed {}: {ENDPOINTS} endpoints x {WORKERS} workers (FIFO queue), \
         service 2.5 ms + exp(mean 2.5 ms), {} req/s for {} s ({} requests)\n{}\n",
        config.kind.name(),
        config.seed,
        thousands(RATE as u64),
        RUN / 1_000_000_000,
        thousands(requests as u64),
        config.kind.story(),
    )
}

pub fn render(config: &Config, results: &[Result]) -> String {
    let mut out = header(config, results);
    let width = results
        .iter()
        .map(|r| r.name.len())
        .max()
        .unwrap_or(6)
        .max(6);
    out.push_str(&format!(
        "\n{:<width$}  {:>7}  {:>7}  {:>8}  {:>8}  {:>8}  {:>13}  {:>6}  {:>10}\n",
        "policy",
        "p50 ms",
        "p99 ms",
        "p999 ms",
        "base p99",
        "p99/base",
        "on bad (%)",
        "errors",
        "back after"
    ));
    for r in results {
        let s = &r.scenario;
        let share = 100.0 * s.on_bad as f64 / s.during.max(1) as f64;
        let back = s
            .back_after_s
            .map_or_else(|| "never".to_string(), |t| format!("{t:.2} s"));
        out.push_str(&format!(
            "{:<width$}  {:>7.2}  {:>7.2}  {:>8.2}  {:>8.2}  {:>8.2}  {:>6} ({:>4.1})  {:>6}  {:>10}\n",
            r.name,
            s.p50_ms,
            s.p99_ms,
            s.p999_ms,
            r.baseline.p99_ms,
            r.p99_ratio(),
            s.on_bad,
            share,
            s.errors,
            back,
        ));
    }
    out.push_str(&format!(
        "\non bad: requests placed on {} from {} s to {} s (fair share {:.0}%); back after: from {} s to the \
         first {} ms window where its share is within 10% of fair.\n",
        scenario::addr(scenario::BAD),
        BAD_FROM / 1_000_000_000,
        BAD_TO / 1_000_000_000,
        100.0 / ENDPOINTS as f64,
        BAD_TO / 1_000_000_000,
        WINDOW / 1_000_000,
    ));
    out
}

#[derive(Serialize)]
struct Report<'a> {
    scenario: &'static str,
    seed: u64,
    endpoints: usize,
    workers_per_endpoint: usize,
    rate: f64,
    virtual_seconds: f64,
    bad_endpoint: String,
    bad_from_seconds: f64,
    bad_to_seconds: f64,
    window_seconds: f64,
    policies: Vec<PolicyJson<'a>>,
}

#[derive(Serialize)]
struct PolicyJson<'a> {
    policy: &'a str,
    requests: usize,
    p50_ms: f64,
    p99_ms: f64,
    p999_ms: f64,
    baseline_p99_ms: f64,
    p99_ratio: f64,
    on_bad: usize,
    during_bad: usize,
    errors: usize,
    back_after_seconds: Option<f64>,
    bad_share_per_window: &'a [f64],
}

pub fn render_json(config: &Config, results: &[Result]) -> String {
    let report = Report {
        scenario: config.kind.name(),
        seed: config.seed,
        endpoints: ENDPOINTS,
        workers_per_endpoint: WORKERS,
        rate: RATE,
        virtual_seconds: RUN as f64 / 1e9,
        bad_endpoint: scenario::addr(scenario::BAD),
        bad_from_seconds: BAD_FROM as f64 / 1e9,
        bad_to_seconds: BAD_TO as f64 / 1e9,
        window_seconds: WINDOW as f64 / 1e9,
        policies: results
            .iter()
            .map(|r| PolicyJson {
                policy: &r.name,
                requests: r.scenario.requests,
                p50_ms: r.scenario.p50_ms,
                p99_ms: r.scenario.p99_ms,
                p999_ms: r.scenario.p999_ms,
                baseline_p99_ms: r.baseline.p99_ms,
                p99_ratio: r.p99_ratio(),
                on_bad: r.scenario.on_bad,
                during_bad: r.scenario.during,
                errors: r.scenario.errors,
                back_after_seconds: r.scenario.back_after_s,
                bad_share_per_window: &r.scenario.share,
            })
            .collect(),
    };
    let mut text =
        serde_json::to_string_pretty(&report).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    text.push('\n');
    text
}
