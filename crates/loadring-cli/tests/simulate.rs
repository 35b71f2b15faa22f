//! `loadring simulate` as a user runs it: the built binary, small seeded runs.

use std::process::{Command, Output};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_loadring");

/// A small run: 40,000 requests at 4,000/s for 10 ms each (40 in flight).
const SMALL: &[&str] = &[
    "simulate",
    "--requests",
    "40000",
    "--keys",
    "2000",
    "--rate",
    "4000",
    "--service",
    "exp:10",
];

fn loadring(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .output()
        .expect("the loadring binary runs")
}

fn small(extra: &[&str]) -> Output {
    let args: Vec<&str> = SMALL.iter().chain(extra).copied().collect();
    loadring(&args)
}

fn small_json(extra: &[&str]) -> Value {
    let mut args = vec!["--json"];
    args.extend_from_slice(extra);
    let out = small(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "nothing on stderr in a pipe (no progress bar): {}",
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

/// The report without its wall-clock fields.
fn deterministic(mut report: Value) -> Value {
    report
        .as_object_mut()
        .expect("an object")
        .remove("wall_seconds")
        .expect("wall_seconds is reported");
    for p in report["policies"].as_array_mut().expect("policies") {
        let ns = p
            .as_object_mut()
            .expect("a policy object")
            .remove("ns_per_pick")
            .expect("ns_per_pick is reported");
        assert!(f(&ns) >= 0.0);
    }
    report
}

#[test]
fn a_seeded_run_is_identical_twice() {
    let args = [
        "-n",
        "5",
        "--workload",
        "hot:0.2",
        "--seed",
        "42",
        "-p",
        "c_murmurhash",
        "-p",
        "c_murmurhash_bl",
        "-p",
        "c_md5:load_factor=1.5",
        "-p",
        "p2c",
        "-p",
        "random",
    ];
    let first = deterministic(small_json(&args));
    let second = deterministic(small_json(&args));
    assert_eq!(first, second);
    let mut other_seed = args;
    other_seed[5] = "43";
    assert_ne!(
        first["policies"],
        deterministic(small_json(&other_seed))["policies"]
    );
}

#[test]
fn randomized_policies_follow_the_seed() {
    let p2c = |seed: &str| {
        let report = small_json(&["-n", "5", "--seed", seed, "-p", "p2c"]);
        deterministic(report)["policies"][0]["requests_per_endpoint"].clone()
    };
    assert_eq!(p2c("5"), p2c("5"));
    assert_ne!(p2c("5"), p2c("6"));
    // Shown as written, though it runs with seed=5.
    let report = small_json(&["-n", "5", "--seed", "5", "-p", "p2c"]);
    assert_eq!(report["policies"][0]["policy"], "p2c");
    assert_eq!(report["policies"][0]["locality"], Value::Null);
    assert_eq!(report["policies"][0]["churn"], Value::Null);
    assert_eq!(f(&report["policies"][0]["ideal_churn"]), 0.2);
}

#[test]
fn every_policy_object_has_exactly_the_documented_fields() {
    let report = small_json(&["-n", "4", "-p", "c_murmurhash", "-p", "c_murmurhash_bl"]);
    for p in report["policies"].as_array().unwrap() {
        let mut keys: Vec<&str> = p.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "cap_violations",
                "churn",
                "ideal_churn",
                "locality",
                "max_over_mean",
                "ns_per_pick",
                "policy",
                "requests_per_endpoint"
            ]
        );
        let per_endpoint = p["requests_per_endpoint"].as_object().unwrap();
        let addrs: Vec<&str> = per_endpoint.keys().map(String::as_str).collect();
        assert_eq!(
            addrs,
            ["10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80", "10.0.0.4:80"]
        );
        let total: u64 = per_endpoint.values().map(|v| v.as_u64().unwrap()).sum();
        assert_eq!(total, 40_000);
    }
    for key in [
        "seed",
        "requests",
        "keys",
        "workload",
        "rate",
        "service",
        "endpoints",
        "events",
        "virtual_seconds",
        "warmup_seconds",
        "wall_seconds",
    ] {
        assert!(report.get(key).is_some(), "run parameter {key} missing");
    }
    assert_eq!(report["requests"], 40_000);
    assert_eq!(report["events"][0]["change"], "remove");
    assert_eq!(report["events"][0]["endpoint"], "10.0.0.4:80");
}

#[test]
fn bounded_load_caps_the_hot_key_and_the_plain_ring_does_not() {
    let report = small_json(&[
        "-n",
        "5",
        "--workload",
        "hot:0.3",
        "-p",
        "c_murmurhash",
        "-p",
        "c_murmurhash_bl",
        "-p",
        "c_md5:load_factor=1.25",
    ]);
    let plain = policy(&report, "c_murmurhash");
    assert_eq!(plain["cap_violations"], Value::Null, "unbounded: no cap");
    assert_eq!(f(&plain["locality"]), 1.0, "a plain ring serves the owner");
    for spec in ["c_murmurhash_bl", "c_md5:load_factor=1.25"] {
        let bounded = policy(&report, spec);
        assert_eq!(bounded["cap_violations"], 0, "{spec}");
        // load <= ceil(1.25 * (total + 1) / 5) with a mean of at least 4.
        assert!(f(&bounded["max_over_mean"]) <= 1.5, "{spec}: {bounded}");
        assert!(
            f(&plain["max_over_mean"]) >= 1.75 * f(&bounded["max_over_mean"]),
            "the hot key's owner: {plain} vs {bounded}"
        );
        let locality = f(&bounded["locality"]);
        assert!(locality < 1.0 && locality > 0.5, "{spec}: {locality}");
    }
}

/// Envoy's rule in the simulator: its own caps (slots + 1) checked at every
/// pick, the hot key spilled.
#[test]
fn envoys_rule_is_checked_against_its_own_cap() {
    let specs = [
        "maglev:hash_balance_factor=125",
        "ring_hash:hash_balance_factor=100",
    ];
    let report = small_json(&[
        "-n",
        "5",
        "--workload",
        "hot:0.3",
        "-p",
        specs[0],
        "-p",
        specs[1],
        "-p",
        "maglev",
    ]);
    let plain = policy(&report, "maglev");
    for spec in specs {
        let bounded = policy(&report, spec);
        assert_eq!(bounded["cap_violations"], 0, "{spec}");
        // load <= ceil(F * (total + 1) / 100 / 5) + 1 with a mean of at
        // least 4: at most 7 / 4 of the mean at F = 125.
        assert!(f(&bounded["max_over_mean"]) <= 1.75, "{spec}: {bounded}");
        assert!(
            f(&plain["max_over_mean"]) > f(&bounded["max_over_mean"]),
            "{plain} vs {bounded}"
        );
        let locality = f(&bounded["locality"]);
        assert!(locality < 1.0 && locality > 0.5, "{spec}: {locality}");
    }
}

#[test]
fn removing_one_of_ten_moves_about_a_tenth_of_the_keys() {
    let report = small_json(&["-n", "10", "-p", "c_murmurhash", "-p", "c_murmurhash_bl"]);
    for spec in ["c_murmurhash", "c_murmurhash_bl"] {
        let p = policy(&report, spec);
        assert_eq!(f(&p["ideal_churn"]), 0.1);
        let churn = f(&p["churn"]);
        assert!((0.05..=0.15).contains(&churn), "{spec}: churn {churn}");
    }
    // Bounded load changes where requests go, not who owns a key.
    assert_eq!(
        policy(&report, "c_murmurhash")["churn"],
        policy(&report, "c_murmurhash_bl")["churn"]
    );
    let removed = &policy(&report, "c_murmurhash")["requests_per_endpoint"]["10.0.0.10:80"];
    assert!(removed.as_u64().unwrap() > 0, "served until its removal");
}

#[test]
fn added_endpoints_take_requests_and_events_can_be_turned_off() {
    let report = small_json(&[
        "-n",
        "3",
        "-p",
        "c_murmurhash",
        "--add",
        "10.0.0.9:80 weight=2@2.5s",
    ]);
    let p = policy(&report, "c_murmurhash");
    assert!(p["requests_per_endpoint"]["10.0.0.9:80"].as_u64().unwrap() > 0);
    assert_eq!(f(&p["ideal_churn"]), 0.4, "weight 2 of 5 must move to it");
    assert_eq!(report["events"][0]["endpoint"], "10.0.0.9:80 weight=2");

    let fixed = small_json(&["-n", "3", "-p", "c_murmurhash", "--no-events"]);
    let p = policy(&fixed, "c_murmurhash");
    assert_eq!(p["churn"], Value::Null);
    assert_eq!(p["ideal_churn"], Value::Null);
    assert_eq!(fixed["events"], Value::Array(vec![]));
}

#[test]
fn the_table_has_a_row_and_a_verdict_per_policy() {
    let out = small(&["-n", "5", "-p", "c_murmurhash", "-p", "c_murmurhash_bl"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("loadring simulate: 40,000 requests, 5 endpoints, seed 1\n"));
    assert!(text.contains("10.0.0.5:80 removed at 5.0s"), "{text}");
    let header = text
        .lines()
        .find(|l| l.starts_with("policy "))
        .expect("a header");
    for column in [
        "peak/mean",
        "cap viol.",
        "locality",
        "churn",
        "ideal",
        "ns/pick",
    ] {
        assert!(header.contains(column), "{header}");
    }
    let verdicts: Vec<&str> = text
        .lines()
        .skip_while(|l| *l != "verdict")
        .skip(1)
        .take(2)
        .collect();
    assert!(verdicts[0].starts_with("c_murmurhash "), "{verdicts:?}");
    assert!(verdicts[0].contains("hot spot"), "{verdicts:?}");
    assert!(verdicts[1].starts_with("c_murmurhash_bl "), "{verdicts:?}");
    assert!(verdicts[1].contains("never over its cap"), "{verdicts:?}");
}

#[test]
fn plots_are_written_as_svg_and_png() {
    let dir = std::env::temp_dir().join(format!("loadring-simulate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let svg = dir.join("run.svg");
    let png = dir.join("run.png");
    for path in [&svg, &png] {
        let out = loadring(&[
            "simulate",
            "-n",
            "4",
            "--requests",
            "5000",
            "--rate",
            "1000",
            "-p",
            "c_murmurhash",
            "-p",
            "c_murmurhash_bl",
            "--json",
            "--plot",
            path.to_str().unwrap(),
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // With --json, stderr stays empty in a pipe (docs/simulate.md).
        assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    }
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("<svg"));
    assert!(text.contains("c_murmurhash_bl: in flight per endpoint"));
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    assert!(
        bytes.len() > 20_000,
        "a real picture: {} bytes",
        bytes.len()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Runs with a bad flag: one `error:` line on stderr, nothing on stdout, exit 2.
fn rejects(args: &[&str], want: &str) {
    let mut all = vec!["simulate"];
    all.extend_from_slice(args);
    // Only the flag under test is wrong (the default policies may not all
    // exist on every branch; a run that wrongly starts stays short).
    if !args.contains(&"-p") {
        all.extend(["-p", "c_murmurhash"]);
    }
    if !args.contains(&"--requests") {
        all.extend(["--requests", "1000"]);
    }
    if !args.iter().any(|a| a.starts_with("--rate")) {
        all.extend(["--rate", "100"]); // 10 s of virtual time
    }
    let out = loadring(&all);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(out.stdout.is_empty(), "{args:?}");
    assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
    assert!(stderr.contains(want), "{args:?}: {stderr} lacks {want:?}");
}

#[test]
fn bad_flags_give_one_line_and_exit_2() {
    rejects(
        &["--workload", "pareto"],
        "--workload pareto: unknown workload",
    );
    rejects(
        &["--workload", "zipf:0"],
        "zipf exponent `0` must be a number > 0",
    );
    rejects(&["--workload", "zipf:-1.5"], "zipf exponent `-1.5`");
    rejects(&["--workload", "hot:0.1:0"], "zipf exponent `0`");
    rejects(&["--workload", "hot:2"], "hot share `2` must be in (0, 1]");
    rejects(&["--rate", "0"], "--rate 0: the arrival rate must be");
    rejects(&["--rate=-3"], "--rate -3");
    rejects(&["--rate", "inf"], "--rate inf");
    rejects(&["--service", "exp:0"], "--service exp:0");
    rejects(&["--service", "uniform:3"], "unknown distribution");
    rejects(&["--backends", "0"], "no endpoints to simulate");
    // Past the most, the range alone: nothing about missing endpoints.
    rejects(
        &["--backends", "10001"],
        "error: --backends 10001: accepted 1..=10000\n",
    );
    rejects(&["--requests", "0"], "--requests 0: accepted 1..=");
    rejects(&["--keys", "0"], "--keys 0: accepted 1..=");
    rejects(
        &["-p", "c_murmurhash:replicas=0"],
        "--policy c_murmurhash:replicas=0",
    );
    rejects(&["-p", "nope"], "unknown policy `nope`");
    rejects(
        &["-n", "3", "--remove", "10.0.0.7:80@50%"],
        "10.0.0.7:80 is not an endpoint at that time",
    );
    rejects(
        &[
            "-n",
            "3",
            "--remove",
            "10.0.0.3:80@1s",
            "--remove",
            "10.0.0.3:80@2s",
        ],
        "--remove 10.0.0.3:80@2s: 10.0.0.3:80 is not an endpoint at that time",
    );
    rejects(
        &["-n", "3", "--add", "10.0.0.2:80@1s"],
        "10.0.0.2:80 is already an endpoint",
    );
    rejects(&["-n", "3", "--remove", "10.0.0.3:80"], "expected WHAT@T");
    rejects(
        &["-n", "3", "--remove", "10.0.0.3:80@99s"],
        "outside the run",
    );
    rejects(
        &["-n", "1", "--remove", "10.0.0.1:80@1s"],
        "would leave no endpoint",
    );
    // A membership the policy refuses stops the run before it starts,
    // naming the event (the requests make a run that would reach it late).
    rejects(
        &[
            "-p",
            "c_murmurhash_bl",
            "--requests",
            "20000000",
            "--rate",
            "1000000",
            "-n",
            "3",
            "--add",
            "10.0.0.11:80 weight=4294967295@99%",
        ],
        "--policy c_murmurhash_bl: --add 10.0.0.11:80@19.8s: c_murmurhash: replicas=100 times a total weight of",
    );
    rejects(
        &["-e", "a weight=0", "-e", "b"],
        "--policy c_murmurhash: the default removal of b at 5s (--no-events keeps every endpoint): \
         every endpoint has weight 0",
    );
    rejects(
        &["-n", "20", "--remove", "10.0.0.99:80@50%"],
        "(endpoints then: 10.0.0.1:80, 10.0.0.2:80, 10.0.0.3:80, 10.0.0.4:80, 10.0.0.5:80 and 15 more)",
    );
    rejects(
        &["--keys", "1"],
        "--workload hot:0.1: the hot key's share leaves requests for other keys: give --keys 2",
    );
    rejects(&["--plot", "run.jpg"], "must end in .svg or .png");
    rejects(&["-e", "a", "-e", "a"], "endpoint a is given twice");
    let empty = std::env::temp_dir().join(format!("loadring-empty-{}.txt", std::process::id()));
    std::fs::write(&empty, "# nothing here\n\n").unwrap();
    rejects(
        &["--endpoints", empty.to_str().unwrap()],
        "no endpoints in the file",
    );
    std::fs::remove_file(&empty).unwrap();
}

#[test]
fn a_light_load_leaves_the_peak_unmeasured() {
    // 100 requests/s x 10 ms = 1 in flight in all: never 4 per endpoint.
    let out = loadring(&[
        "simulate",
        "--requests",
        "2000",
        "--rate",
        "100",
        "-n",
        "5",
        "-p",
        "c_murmurhash",
        "--json",
    ]);
    assert!(out.status.success());
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["policies"][0]["max_over_mean"], Value::Null);
    assert_eq!(f(&report["policies"][0]["locality"]), 1.0);
}

/// The plot's file is checked before the run (which may take minutes), with
/// a plain message: no report on stdout, no `ImageError(IoError(Os ...))`.
#[test]
fn an_unwritable_plot_is_refused_before_the_run() {
    rejects(
        &["--plot", "/nonexistent-loadring-dir/run.png"],
        "--plot /nonexistent-loadring-dir/run.png: cannot write the plot there: No such file or directory",
    );
    let dir = std::env::temp_dir().join(format!("loadring-plot-dir-{}.svg", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let shown = dir.display().to_string();
    rejects(
        &["--plot", dir.to_str().unwrap()],
        &format!("--plot {shown}: is a directory"),
    );
    std::fs::remove_dir_all(&dir).unwrap();
    // A writable path is not left behind by the check when the run fails.
    let file = std::env::temp_dir().join(format!("loadring-plot-{}.svg", std::process::id()));
    rejects(
        &["--plot", file.to_str().unwrap(), "--keys", "0"],
        "--keys 0",
    );
    assert!(!file.exists());
}

/// Virtual time is u64 nanoseconds: a run that may not fit is refused, not
/// clamped; so are arrivals or service times below its resolution.
#[test]
fn runs_that_do_not_fit_the_virtual_clock_are_refused() {
    // 1000 requests a billion seconds apart: 1e21 ns, past 2^64 (1.8e19).
    rejects(
        &["--rate", "1e-9"],
        "--rate 1e-9: 1000 requests at this rate may not fit the virtual clock",
    );
    rejects(
        &["--rate", "2e9"],
        "--rate 2e9: arrivals less than 1 ns apart: accepted a rate up to 1000000000 per second",
    );
    rejects(
        &["--service", "exp:1e-7"],
        "--service exp:1e-7: `1e-7` is not a duration of at least 1 ns",
    );
    rejects(
        &["--service", "exp:180000000001"],
        "--service exp:180000000001: `180000000001` is too long (accepted",
    );
}

/// Negative numbers are values of the flag, and bad ones get one line
/// (not clap's usage block).
#[test]
fn negative_and_malformed_numbers_are_one_line() {
    rejects(
        &["--rate", "-5"],
        "--rate -5: the arrival rate must be a number of requests per second > 0",
    );
    rejects(
        &["--seed", "-1"],
        "--seed -1: accepted a whole number 0..=18446744073709551615",
    );
    rejects(
        &["--requests", "-1"],
        "--requests -1: accepted 1..=20000000",
    );
    rejects(&["--keys", "many"], "--keys many: accepted 1..=10000000");
    rejects(&["--backends", "-3"], "--backends -3:");
}

/// A number of a thousand digits is echoed cut, on one short line.
#[test]
fn absurdly_long_numbers_are_echoed_cut() {
    let long = "9".repeat(1000);
    let out = loadring(&["simulate", "--rate", &long, "-p", "c_murmurhash"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.len() < 300, "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "error: --rate {}... (1000 characters)",
            "9".repeat(40)
        )),
        "{stderr}"
    );
}

/// Locality policies route by the request's zone: without zones they would
/// silently equal their inner policy, so they need --zones.
#[test]
fn locality_policies_need_request_zones() {
    rejects(
        &["-p", "zone_first over rr"],
        "--policy zone_first over rr: a locality policy routes by the request's zone, \
         and simulated requests have none: give --zones N",
    );
    // One zone: every endpoint and every request in it, so zone_first over
    // rr is rr, exactly.
    let one = small_json(&[
        "-n",
        "4",
        "--zones",
        "1",
        "-p",
        "zone_first over rr",
        "-p",
        "rr",
    ]);
    assert_eq!(
        policy(&one, "zone_first over rr")["requests_per_endpoint"],
        policy(&one, "rr")["requests_per_endpoint"]
    );
    // Two zones, requests from each half the time: the lone endpoint of
    // zone-2 serves half the requests (rr alone: a third), zone-1's two
    // endpoints a quarter each.
    let two = small_json(&[
        "-e",
        "a zone=zone-1",
        "-e",
        "b zone=zone-1",
        "-e",
        "c zone=zone-2",
        "--zones",
        "2",
        "--no-events",
        "-p",
        "zone_first over rr",
    ]);
    let counts = &policy(&two, "zone_first over rr")["requests_per_endpoint"];
    let share = |e: &str| f(&counts[e]) / 40_000.0;
    assert!((share("c") - 0.5).abs() < 0.01, "{counts}");
    assert!((share("a") - 0.25).abs() < 0.01, "{counts}");
    assert!((f(&counts["a"]) - f(&counts["b"])).abs() <= 1.0, "{counts}");
    // Zones leave the keys, arrivals and service times of the run unchanged.
    let plain = small_json(&["-n", "4", "-p", "c_murmurhash"]);
    let zoned = small_json(&["-n", "4", "--zones", "2", "-p", "c_murmurhash"]);
    assert_eq!(
        policy(&plain, "c_murmurhash")["requests_per_endpoint"],
        policy(&zoned, "c_murmurhash")["requests_per_endpoint"]
    );
    rejects(&["--zones", "0"], "--zones 0: accepted 1..=");
}
