//! `loadring simulate --scenario`: the latency model as a user runs it (the
//! built binary, seeded). The targets of the latency-aware policies are
//! checked on the real output.

use std::process::{Command, Output};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_loadring");

fn loadring(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .output()
        .expect("the loadring binary runs")
}

fn scenario_json(name: &str, extra: &[&str]) -> Value {
    let mut args = vec!["simulate", "--scenario", name, "--json"];
    args.extend_from_slice(extra);
    let out = loadring(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON object")
}

fn policy<'a>(report: &'a Value, spec: &str) -> &'a Value {
    report["policies"]
        .as_array()
        .expect("policies is an array")
        .iter()
        .find(|p| p["policy"] == spec)
        .unwrap_or_else(|| panic!("no policy {spec} in {report}"))
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("{v} is not a number"))
}

const PEAK_EWMA: &str = "p2c:load=peak_ewma decay=250ms";

/// The targets, on the default seed: `la` and peak-EWMA `p2c` keep
/// their p99 within 1.5x of the run without a slow endpoint and are back
/// within 10% of a fair share within 2 s of the recovery; rr's p99 is the
/// slow endpoint's (its queue grows by 320 requests a second, so its p99 is
/// hundreds of times the baseline), and in-flight p2c sends it several
/// times what peak EWMA does.
#[test]
fn slow_backend_meets_the_targets() {
    let report = scenario_json("slow-backend", &[]);
    for spec in ["la", PEAK_EWMA] {
        let p = policy(&report, spec);
        let ratio = f(&p["p99_ratio"]);
        assert!(ratio <= 1.5, "{spec}: p99 {ratio}x the baseline");
        let back = f(&p["back_after_seconds"]);
        assert!(back <= 2.0, "{spec}: back after {back} s");
    }
    let rr = policy(&report, "rr");
    assert!(f(&rr["p99_ratio"]) > 10.0, "{rr}");
    // rr places exactly its share on the bad endpoint: a tenth, ± rounding
    // of the arrivals in the bad period.
    let (on_bad, during) = (f(&rr["on_bad"]), f(&rr["during_bad"]));
    assert!(
        (on_bad - during / 10.0).abs() <= 1.0,
        "{on_bad} of {during}"
    );
    let p2c = policy(&report, "p2c");
    let ewma = policy(&report, PEAK_EWMA);
    assert!(f(&p2c["on_bad"]) > 3.0 * f(&ewma["on_bad"]), "{p2c} {ewma}");
    assert!(
        f(&p2c["p999_ms"]) > 2.0 * f(&ewma["p999_ms"]),
        "{p2c} {ewma}"
    );
}

/// Half the bad endpoint's requests fail while it is bad: rr, which keeps
/// sending it a tenth, gets about half of those as errors; ejection after 3
/// consecutive failures and `la` (which counts an error as a 500 ms
/// response) cut the errors tenfold.
#[test]
fn failing_backend_errors_fall_with_ejection_and_la() {
    let report = scenario_json("failing-backend", &[]);
    let rr = policy(&report, "rr");
    let (errors, on_bad) = (f(&rr["errors"]), f(&rr["on_bad"]));
    assert!(
        (errors - on_bad / 2.0).abs() < on_bad * 0.05,
        "{errors} errors of {on_bad}"
    );
    for spec in ["rr:eject_after=3 eject_for=1s", "la"] {
        let p = policy(&report, spec);
        assert!(f(&p["errors"]) * 10.0 < errors, "{spec}: {p}");
        assert!(f(&p["back_after_seconds"]) <= 2.0, "{spec}: {p}");
    }
    assert_eq!(f(&policy(&report, "rr")["p99_ratio"]), 1.0, "fast failures");
}

#[test]
fn a_seeded_scenario_is_identical_twice_and_the_seed_matters() {
    let a = scenario_json("slow-backend", &["--seed", "7"]);
    let b = scenario_json("slow-backend", &["--seed", "7"]);
    assert_eq!(a, b);
    let c = scenario_json("slow-backend", &["--seed", "8"]);
    assert_ne!(a["policies"], c["policies"]);
}

#[test]
fn every_scenario_field_is_documented() {
    let report = scenario_json("failing-backend", &["-p", "la"]);
    let mut top: Vec<&str> = report
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    top.sort_unstable();
    assert_eq!(
        top,
        [
            "bad_endpoint",
            "bad_from_seconds",
            "bad_to_seconds",
            "endpoints",
            "policies",
            "rate",
            "scenario",
            "seed",
            "virtual_seconds",
            "window_seconds",
            "workers_per_endpoint",
        ]
    );
    let mut fields: Vec<&str> = report["policies"][0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    fields.sort_unstable();
    assert_eq!(
        fields,
        [
            "back_after_seconds",
            "bad_share_per_window",
            "baseline_p99_ms",
            "during_bad",
            "errors",
            "on_bad",
            "p50_ms",
            "p999_ms",
            "p99_ms",
            "p99_ratio",
            "policy",
            "requests",
        ]
    );
    // 40 windows of 250 ms over 10 s.
    assert_eq!(
        report["policies"][0]["bad_share_per_window"]
            .as_array()
            .unwrap()
            .len(),
        40
    );
    let docs = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/simulate.md"
    ))
    .unwrap();
    for field in top.iter().chain(&fields) {
        assert!(
            docs.contains(&format!("`{field}`")),
            "{field} is not in docs/simulate.md"
        );
    }
}

#[test]
fn the_table_has_a_row_per_policy_and_the_plot_is_written() {
    let dir = std::env::temp_dir().join(format!("loadring-scenario-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let svg = dir.join("slow.svg");
    let out = loadring(&[
        "simulate",
        "--scenario",
        "slow-backend",
        "-p",
        "rr",
        "-p",
        "la",
        "--plot",
        svg.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("scenario slow-backend, seed 1:"), "{text}");
    assert!(text.contains("10.0.0.1:80 serves 10x slower from 3 s to 6 s"));
    assert_eq!(
        text.lines().filter(|l| l.starts_with("rr ")).count(),
        1,
        "{text}"
    );
    assert_eq!(
        text.lines().filter(|l| l.starts_with("la ")).count(),
        1,
        "{text}"
    );
    let plot = std::fs::read_to_string(&svg).unwrap();
    assert!(plot.starts_with("<svg"));
    assert!(plot.contains("share of requests placed on 10.0.0.1:80"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_scenario_flags_give_one_line_and_exit_2() {
    for (args, want) in [
        (
            vec!["simulate", "--scenario", "slow"],
            "--scenario slow: unknown scenario (accepted: slow-backend, failing-backend)",
        ),
        (
            vec!["simulate", "--scenario", "slow-backend", "--rate", "10"],
            "cannot be used with",
        ),
        (
            vec![
                "simulate",
                "--scenario",
                "slow-backend",
                "-p",
                "la:window=1ms",
            ],
            "window=1ms is out of range",
        ),
        (
            vec![
                "simulate",
                "--scenario",
                "slow-backend",
                "-p",
                "c_murmurhash_bl",
            ],
            "--policy c_murmurhash_bl: a scenario's requests have no key for a hashing policy \
             to place: accepted policies that need none (e.g. rr, p2c,",
        ),
    ] {
        let out = loadring(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert!(stderr.contains(want), "{args:?}: {stderr} lacks {want:?}");
        if !want.contains("cannot be used") {
            assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        }
    }
}
