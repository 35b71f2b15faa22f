//! `loadring simulate --balancers K`: K balancers, each blind to the
//! others' requests, over one membership. One balancer holds its cap on
//! every pick; a fleet exceeds the single-balancer cap and its peak load
//! grows with K, but stays near the sum of the K caps.

use std::process::{Command, Output};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_loadring");

fn loadring(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .output()
        .expect("the loadring binary runs")
}

/// 100,000 requests at 10,000/s for 10 ms each: 10 in flight per backend.
fn fleet(k: &str) -> Vec<Value> {
    let out = loadring(&[
        "simulate",
        "--requests",
        "100000",
        "--keys",
        "5000",
        "--rate",
        "10000",
        "--service",
        "exp:10",
        "--no-events",
        "-p",
        "c_murmurhash_bl",
        "--balancers",
        k,
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    doc["fleet"].as_array().expect("fleet rows").clone()
}

fn f(row: &Value, field: &str) -> f64 {
    row[field]
        .as_f64()
        .unwrap_or_else(|| panic!("{field} in {row}"))
}

#[test]
fn bounded_load_loosens_as_the_fleet_grows() {
    let rows = fleet("8");
    let ks: Vec<u64> = rows
        .iter()
        .map(|r| r["balancers"].as_u64().unwrap())
        .collect();
    assert_eq!(ks, [1, 2, 4, 8]);
    let one = &rows[0];
    assert_eq!(f(one, "over_cap"), 0.0, "one balancer keeps its cap: {one}");
    assert!(f(one, "worst_over_cap") <= 1.0);
    let eight = &rows[3];
    assert!(
        f(eight, "over_cap") > 0.01,
        "eight blind balancers exceed one's cap: {eight}"
    );
    assert!(
        f(eight, "max_over_mean") > f(one, "max_over_mean") + 0.1,
        "the peak grows with K: {one} {eight}"
    );
    for r in &rows {
        // The sum of the K caps holds up to the staleness of the others'
        // shares (capped on their totals when they picked).
        assert!(f(r, "worst_over_fleet_cap") < 1.25, "{r}");
        let (c, k, mean) = (1.25, f(r, "balancers"), f(r, "mean_in_flight_per_backend"));
        let bound = f(r, "bound_over_mean");
        assert!(
            bound >= c && bound <= c + k * (c / 10.0 + 1.0) / mean + 1e-9,
            "{r}"
        );
    }
}

#[test]
fn bad_fleets_are_one_line_errors() {
    for (args, why) in [
        (
            &["--balancers", "0"][..],
            "--balancers 0: accepted 1..=1024",
        ),
        (&["--balancers", "x"][..], "--balancers x"),
        (
            &["--balancers", "2", "-p", "rr"][..],
            "--balancers compares policies bounded by loadring's cap",
        ),
        (
            &["--balancers", "2", "-p", "maglev:hash_balance_factor=125"][..],
            "(Envoy's hash_balance_factor is not modelled)",
        ),
        (
            &["--balancers", "2", "--plot", "f.svg"][..],
            "--plot draws one balancer's run",
        ),
    ] {
        let mut all = vec!["simulate", "--requests", "1000"];
        all.extend_from_slice(args);
        let out = loadring(&all);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with("error: ") && stderr.contains(why),
            "{args:?}: {stderr}"
        );
    }
}
