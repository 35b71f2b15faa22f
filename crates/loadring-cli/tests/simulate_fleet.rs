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

/// `--load-report`: 100,000 requests at 20,000/s for 10 ms each (20 in
/// flight per backend), fleets of 1, 4 and 16 balancers.
fn reports(delay: &str) -> Value {
    let out = loadring(&[
        "simulate",
        "--requests",
        "100000",
        "--keys",
        "5000",
        "--rate",
        "20000",
        "--no-events",
        "-p",
        "c_murmurhash_bl",
        "--balancers",
        "16",
        "--load-report",
        "--report-delay",
        delay,
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

/// One balancer hears every response of every backend, so each report is
/// exactly its own count: with reports only its cap's rounding changes
/// (down, to no less than the fair share), so no pick passes the cap it
/// has without reports and its worst instant is no higher; the busiest
/// backend stays near the factor. With many balancers, reports change the
/// placements and lower the worst instant.
#[test]
fn one_balancers_reports_are_its_own_count() {
    let doc = reports("0ms");
    assert_eq!(doc["report_delay_ns"], 0);
    let rows = doc["fleet"].as_array().expect("fleet rows");
    let ks: Vec<u64> = rows
        .iter()
        .map(|r| r["balancers"].as_u64().unwrap())
        .collect();
    assert_eq!(ks, [1, 4, 16], "K = 1, 4, 16 up to --balancers");
    let one = &rows[0];
    assert_eq!(f(&one["with_reports"], "over_cap"), 0.0, "{one}");
    assert_eq!(f(&one["without_reports"], "over_cap"), 0.0, "{one}");
    assert!(
        f(&one["with_reports"], "max_over_mean") <= f(&one["without_reports"], "max_over_mean"),
        "{one}"
    );
    let sixteen = &rows[2];
    assert_ne!(
        sixteen["without_reports"], sixteen["with_reports"],
        "{sixteen}"
    );
    assert!(
        f(&sixteen["with_reports"], "max_over_mean")
            < f(&sixteen["without_reports"], "max_over_mean"),
        "{sixteen}"
    );
    for r in rows {
        for side in ["without_reports", "with_reports"] {
            let s = &r[side];
            let (locality, spills) = (f(s, "locality"), f(s, "spills"));
            assert!((0.0..=1.0).contains(&locality), "{r}");
            assert!((locality + spills - 1.0).abs() < 1e-9, "{r}");
        }
    }
}

/// The busiest backend's time-averaged load over its fair share: at least
/// 1 by definition (the shares sum to the total), the factor for one
/// balancer holding a hot key's owner at its cap, and lower with reports
/// than without at K = 16, where each balancer's own cap is coarse.
#[test]
fn the_busiest_backend_is_measured_over_time() {
    let doc = reports("0ms");
    let rows = doc["fleet"].as_array().expect("fleet rows");
    for r in rows {
        for side in ["without_reports", "with_reports"] {
            let busiest = f(&r[side], "busiest_over_mean");
            assert!(busiest >= 1.0, "{r}");
            assert!(busiest <= f(&r[side], "max_over_mean"), "{r}");
        }
    }
    let one = f(&rows[0]["with_reports"], "busiest_over_mean");
    assert!(
        (1.2..=1.3).contains(&one),
        "one balancer holds the owner near 1.25: {one}"
    );
    let sixteen = &rows[2];
    assert!(
        f(&sixteen["with_reports"], "busiest_over_mean")
            < f(&sixteen["without_reports"], "busiest_over_mean"),
        "{sixteen}"
    );
}

/// The delay holds each response (and its report) on its way: the runs
/// with a delay differ from those without, with and without reports.
#[test]
fn the_report_delay_changes_the_runs() {
    let now = reports("0ms");
    let late = reports("10ms");
    assert_eq!(late["report_delay_ns"], 10_000_000);
    let (now, late) = (&now["fleet"][2], &late["fleet"][2]);
    assert_ne!(now["with_reports"], late["with_reports"]);
    assert_ne!(now["without_reports"], late["without_reports"]);
}

#[test]
fn the_load_report_table_shows_both_sides() {
    let out = loadring(&[
        "simulate",
        "--requests",
        "20000",
        "--no-events",
        "-p",
        "c_murmurhash_bl",
        "--balancers",
        "4",
        "--load-report",
    ]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("without reports") && text.contains("with reports"),
        "{text}"
    );
    assert!(text.contains("0ms on its way"), "{text}");
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("c_murmurhash_bl"))
        .collect();
    assert_eq!(rows.len(), 2, "K = 1 and 4: {text}");
}

#[test]
fn bad_load_report_flags_are_one_line_errors() {
    let delay = "accepted a whole number of us, ms or s from 0 to 10s (e.g. 0ms, 1ms, 10ms)";
    for (args, why) in [
        (
            &["--load-report"][..],
            "--load-report models a fleet of balancers: give --balancers K too".to_string(),
        ),
        (
            &["--balancers", "2", "--report-delay", "1ms"][..],
            "--report-delay 1ms: the delay of load reports applies with --load-report".into(),
        ),
        (
            &["--balancers", "2", "--load-report", "--report-delay", "5"][..],
            format!("--report-delay 5: {delay}"),
        ),
        (
            &[
                "--balancers",
                "2",
                "--load-report",
                "--report-delay",
                "1.5ms",
            ][..],
            format!("--report-delay 1.5ms: {delay}"),
        ),
        (
            &[
                "--balancers",
                "2",
                "--load-report",
                "--report-delay",
                "-1ms",
            ][..],
            format!("--report-delay -1ms: {delay}"),
        ),
        (
            &["--balancers", "2", "--load-report", "--report-delay", "11s"][..],
            format!("--report-delay 11s: {delay}"),
        ),
        (
            &["--balancers", "2", "--load-report", "--report-delay", "ms"][..],
            format!("--report-delay ms: {delay}"),
        ),
        (
            &[
                "--balancers",
                "2",
                "--load-report",
                "--report-delay",
                "99999999999999999999s",
            ][..],
            format!("--report-delay 99999999999999999999s: {delay}"),
        ),
    ] {
        let mut all = vec!["simulate", "--requests", "1000"];
        all.extend_from_slice(args);
        let out = loadring(&all);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert_eq!(stderr.trim_end(), format!("error: {why}"), "{args:?}");
    }
    let help = loadring(&["simulate", "--help"]);
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("--load-report") && help.contains("--report-delay <DUR>"),
        "{help}"
    );
}
