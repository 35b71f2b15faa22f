//! The classic policies and locality through the public API: exact
//! sequences, seeded distributions, loads, zones, eligibility, weights, specs.
//!
//! Expected sequences come from the issue and the seeds (LVS's and nginx's
//! published examples) or from reasoning written next to them, never from
//! running the code under test.

use std::collections::HashMap;

use loadring::{
    Balancer, BuildErrorKind, Endpoint, Pick, PickErrorKind, PolicySpec, Request, POLICY_NAMES,
};

fn endpoints(lines: &[&str]) -> Vec<Endpoint> {
    lines.iter().map(|l| l.parse().unwrap()).collect()
}

fn balancer(spec: &str, lines: &[&str]) -> Balancer {
    Balancer::new(spec.parse().unwrap(), endpoints(lines)).unwrap()
}

/// `count` picks for `req`, each guard dropped before the next pick.
fn sequence(b: &Balancer, req: &Request<'_>, count: usize) -> Vec<String> {
    (0..count)
        .map(|_| b.pick(req).unwrap().addr().to_string())
        .collect()
}

/// How many of `count` picks (guards dropped at once) went to each address.
fn counts(b: &Balancer, req: &Request<'_>, count: usize) -> HashMap<String, usize> {
    let mut seen = HashMap::new();
    for _ in 0..count {
        *seen
            .entry(b.pick(req).unwrap().addr().to_string())
            .or_default() += 1;
    }
    seen
}

/// Asserts every `(addr, expected share)` within `tolerance` relative error.
fn assert_shares(seen: &HashMap<String, usize>, want: &[(&str, f64)], tolerance: f64) {
    let total: usize = seen.values().sum();
    for &(addr, share) in want {
        let got = *seen.get(addr).unwrap_or(&0) as f64 / total as f64;
        if share == 0.0 {
            assert_eq!(got, 0.0, "{addr} must never be picked: {seen:?}");
        } else {
            let deviation = (got - share).abs() / share;
            assert!(
                deviation <= tolerance,
                "{addr}: share {got:.4}, want {share:.4} (off by {:.2}%): {seen:?}",
                deviation * 100.0
            );
        }
    }
}

fn strings(addrs: &[&str]) -> Vec<String> {
    addrs.iter().map(|a| a.to_string()).collect()
}

/// `times` rounds of `addrs`.
fn cycle(addrs: &[&str], times: usize) -> Vec<String> {
    strings(&addrs.repeat(times))
}

// ---------------------------------------------------------------- sequences

#[test]
fn rr_starts_at_the_first_endpoint_and_cycles() {
    let b = balancer("rr", &["a", "b", "c", "d"]);
    let want = cycle(&["a", "b", "c", "d"], 3);
    assert_eq!(sequence(&b, &Request::new(), 12), want);
}

#[test]
fn rr_visits_each_eligible_endpoint_once_per_round() {
    let b = balancer("rr", &["a", "b", "c", "d", "e weight=0"]);
    b.set_healthy("b", false).unwrap();
    // b unhealthy and e of weight 0: rounds of the three others, in order.
    assert_eq!(sequence(&b, &Request::new(), 9), cycle(&["a", "c", "d"], 3));
    let tried = ["c"];
    assert_eq!(
        sequence(&b, &Request::new().excluding(&tried), 4),
        strings(&["a", "d", "a", "d"])
    );
}

#[test]
fn wrr_is_lvs_interleaved_weighted_round_robin() {
    // Seed 004 / issue 4: weights 3, 2, 7 give 2 2 2 2 0 2 0 1 2 0 1 2.
    let b = balancer("wrr", &["s0 weight=3", "s1 weight=2", "s2 weight=7"]);
    let round = [
        "s2", "s2", "s2", "s2", "s0", "s2", "s0", "s1", "s2", "s0", "s1", "s2",
    ];
    assert_eq!(sequence(&b, &Request::new(), 36), cycle(&round, 3));
}

#[test]
fn wrr_steps_by_the_gcd_of_the_weights() {
    // Weights 30, 20, 70 step down by 10: the same sequence as 3, 2, 7.
    let b = balancer("wrr", &["s0 weight=30", "s1 weight=20", "s2 weight=70"]);
    let round = [
        "s2", "s2", "s2", "s2", "s0", "s2", "s0", "s1", "s2", "s0", "s1", "s2",
    ];
    assert_eq!(sequence(&b, &Request::new(), 24), cycle(&round, 2));
}

#[test]
fn swrr_is_nginx_smooth_weighted_round_robin() {
    // nginx: weights 5, 1, 1 give a a b a c a a.
    let b = balancer("swrr", &["a weight=5", "b weight=1", "c weight=1"]);
    let round = ["a", "a", "b", "a", "c", "a", "a"];
    assert_eq!(sequence(&b, &Request::new(), 21), cycle(&round, 3));
}

#[test]
fn sequences_restart_from_the_first_endpoint_after_an_update() {
    let b = balancer("rr", &["a", "b", "c"]);
    let _ = sequence(&b, &Request::new(), 2);
    b.update(endpoints(&["a", "b", "c", "d"])).unwrap();
    assert_eq!(
        sequence(&b, &Request::new(), 5),
        strings(&["a", "b", "c", "d", "a"])
    );
}

// ------------------------------------------------------------ distributions

#[test]
fn random_is_uniform_over_eligible_endpoints() {
    let names: Vec<String> = (0..10).map(|i| format!("e{i}")).collect();
    let lines: Vec<&str> = names.iter().map(String::as_str).collect();
    let b = balancer("random:seed=42", &lines);
    b.set_healthy("e3", false).unwrap();
    let seen = counts(&b, &Request::new(), 200_000);
    let mut want: Vec<(&str, f64)> = lines.iter().map(|&a| (a, 1.0 / 9.0)).collect();
    want[3].1 = 0.0;
    assert_shares(&seen, &want, 0.03);
}

#[test]
fn wr_is_proportional_to_weight() {
    let b = balancer(
        "wr:seed=7",
        &[
            "a weight=1",
            "b weight=2",
            "c weight=3",
            "d weight=4",
            "z weight=0",
        ],
    );
    let seen = counts(&b, &Request::new(), 200_000);
    assert_shares(
        &seen,
        &[("a", 0.1), ("b", 0.2), ("c", 0.3), ("d", 0.4), ("z", 0.0)],
        0.03,
    );
    // With d unhealthy the others keep their proportions: 1/6, 2/6, 3/6.
    b.set_healthy("d", false).unwrap();
    let seen = counts(&b, &Request::new(), 200_000);
    assert_shares(
        &seen,
        &[("a", 1.0 / 6.0), ("b", 2.0 / 6.0), ("c", 0.5), ("d", 0.0)],
        0.03,
    );
}

#[test]
fn p2c_without_load_is_uniform_over_equal_weights() {
    let names: Vec<String> = (0..8).map(|i| format!("e{i}")).collect();
    let lines: Vec<&str> = names.iter().map(String::as_str).collect();
    let b = balancer("p2c:seed=1", &lines);
    let seen = counts(&b, &Request::new(), 200_000);
    let want: Vec<(&str, f64)> = lines.iter().map(|&a| (a, 1.0 / 8.0)).collect();
    assert_shares(&seen, &want, 0.03);
}

#[test]
fn p2c_without_load_prefers_the_heavier_of_two_samples() {
    // Two distinct endpoints sampled uniformly: each of the 6 pairs of
    // {w1, w2, w3, w4} is equally likely and the heavier one wins, so
    // w4 wins 3 pairs of 6, w3 2, w2 1 and w1 none.
    let b = balancer(
        "p2c:seed=3",
        &["w1 weight=1", "w2 weight=2", "w3 weight=3", "w4 weight=4"],
    );
    let seen = counts(&b, &Request::new(), 120_000);
    assert_shares(
        &seen,
        &[
            ("w1", 0.0),
            ("w2", 1.0 / 6.0),
            ("w3", 2.0 / 6.0),
            ("w4", 0.5),
        ],
        0.03,
    );
}

#[test]
fn p2c_held_loads_follow_the_weights() {
    let b = balancer(
        "p2c:seed=9 choices=2",
        &["a weight=1", "b weight=2", "c weight=3"],
    );
    let held: Vec<Pick> = (0..60_000)
        .map(|_| b.pick(&Request::new()).unwrap())
        .collect();
    // Lower (in_flight + 1) / weight wins, so loads grow as 1 : 2 : 3.
    for (endpoint, load) in b.loads() {
        let want = 10_000.0 * f64::from(endpoint.weight());
        let deviation = (load as f64 - want).abs() / want;
        assert!(
            deviation < 0.02,
            "{}: {load} in flight, want {want}",
            endpoint.addr()
        );
    }
    drop(held);
    assert_eq!(b.total_in_flight(), 0);
}

#[test]
fn p2c_keeps_equal_endpoints_within_a_few_requests() {
    let names: Vec<String> = (0..16).map(|i| format!("e{i}")).collect();
    let lines: Vec<&str> = names.iter().map(String::as_str).collect();
    let b = balancer("p2c:seed=5", &lines);
    let _held: Vec<Pick> = (0..16_000)
        .map(|_| b.pick(&Request::new()).unwrap())
        .collect();
    let loads: Vec<u64> = b.loads().into_iter().map(|(_, l)| l).collect();
    let (min, max) = (loads.iter().min().unwrap(), loads.iter().max().unwrap());
    // Random choice would spread about +-4 standard deviations (+-120);
    // two choices keep the gap to a handful.
    assert!(max - min <= 6, "{loads:?}");
}

#[test]
fn p2c_prefers_the_less_loaded_endpoint() {
    let b = balancer("p2c", &["x", "y"]);
    b.set_healthy("y", false).unwrap();
    let on_x: Vec<Pick> = (0..10).map(|_| b.pick(&Request::new()).unwrap()).collect();
    assert!(on_x.iter().all(|p| p.addr() == "x"));
    b.set_healthy("y", true).unwrap();
    // y is lighter until it has as many requests in flight as x.
    let on_y: Vec<Pick> = (0..10).map(|_| b.pick(&Request::new()).unwrap()).collect();
    assert!(on_y.iter().all(|p| p.addr() == "y"), "{on_y:?}");
    drop(on_x);
    // x is now empty: it wins until it catches up.
    let again: Vec<Pick> = (0..10).map(|_| b.pick(&Request::new()).unwrap()).collect();
    assert!(again.iter().all(|p| p.addr() == "x"), "{again:?}");
}

#[test]
fn p2c_with_more_choices_finds_the_idle_endpoint() {
    // 8 endpoints, 7 of them busy: 8 choices among 8 is every endpoint.
    let lines = ["e0", "e1", "e2", "e3", "e4", "e5", "e6", "idle"];
    let b = balancer("p2c:choices=8 seed=2", &lines);
    b.set_healthy("idle", false).unwrap();
    let _busy: Vec<Pick> = (0..70).map(|_| b.pick(&Request::new()).unwrap()).collect();
    b.set_healthy("idle", true).unwrap();
    for _ in 0..5 {
        let p = b.pick(&Request::new()).unwrap();
        assert_eq!(p.addr(), "idle");
    }
}

#[test]
fn seeds_replay_and_differ() {
    for policy in ["random", "wr", "p2c", "local_first"] {
        let lines = ["a zone=z", "b weight=2 zone=z", "c weight=3", "d weight=4"];
        let run = |seed: u64| {
            let b = balancer(&format!("{policy}:seed={seed}"), &lines);
            sequence(&b, &Request::new().in_zone("z"), 64)
        };
        assert_eq!(run(11), run(11), "{policy}: same seed, same picks");
        assert_ne!(run(11), run(12), "{policy}: another seed, other picks");
    }
}

// -------------------------------------------------------------------- zones

const ZONED: [&str; 5] = [
    "a1 zone=a",
    "a2 zone=a",
    "a3 zone=a",
    "b1 zone=b",
    "b2 zone=b",
];

#[test]
fn zone_first_stays_in_the_zone_above_the_threshold() {
    let b = balancer("zone_first:min_endpoints=2", &ZONED);
    let from_a = Request::new().in_zone("a");
    // rr inside zone a.
    assert_eq!(sequence(&b, &from_a, 6), cycle(&["a1", "a2", "a3"], 2));
    b.set_healthy("a1", false).unwrap();
    assert_eq!(sequence(&b, &from_a, 4), cycle(&["a2", "a3"], 2));
    // One healthy endpoint left, below min_endpoints=2: all endpoints serve.
    b.set_healthy("a2", false).unwrap();
    let seen = counts(&b, &from_a, 30);
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert_eq!((seen["a3"], seen["b1"], seen["b2"]), (10, 10, 10));
    // Back above the threshold: back home.
    b.set_healthy("a1", true).unwrap();
    assert!(sequence(&b, &from_a, 10).iter().all(|a| a.starts_with('a')));
}

#[test]
fn zone_first_counts_excluded_endpoints_out() {
    let b = balancer("zone_first", &ZONED);
    let tried = ["a1", "a2", "a3"];
    let retry = Request::new().in_zone("a").excluding(&tried);
    assert!(sequence(&b, &retry, 10).iter().all(|a| a.starts_with('b')));
}

#[test]
fn requests_without_a_known_zone_use_every_endpoint() {
    for spec in ["zone_first", "local_first:local_share=100"] {
        let b = balancer(spec, &ZONED);
        let every = strings(&["a1", "a2", "a3", "b1", "b2"]);
        assert_eq!(sequence(&b, &Request::new(), 5), every, "{spec}: no zone");
        assert_eq!(
            sequence(&b, &Request::new().in_zone("c"), 5),
            every,
            "{spec}: unknown zone"
        );
    }
}

#[test]
fn local_first_shares() {
    let from_b = Request::new().in_zone("b");
    let always = balancer("local_first:local_share=100", &ZONED);
    assert_eq!(
        sequence(&always, &from_b, 4),
        strings(&["b1", "b2", "b1", "b2"])
    );
    let never = balancer("local_first:local_share=0", &ZONED);
    assert_eq!(
        sequence(&never, &from_b, 5),
        strings(&["a1", "a2", "a3", "b1", "b2"])
    );
    // 80% local, plus rr over all endpoints (2 of 5 in zone b) for the rest:
    // 0.8 + 0.2 * 2/5 = 0.88 of the picks stay in zone b.
    let mostly = balancer("local_first:local_share=80 seed=4", &ZONED);
    let seen = counts(&mostly, &from_b, 100_000);
    let local = (seen.get("b1").unwrap_or(&0) + seen.get("b2").unwrap_or(&0)) as f64 / 100_000.0;
    assert!((local - 0.88).abs() < 0.01, "{local}: {seen:?}");
    // A zone without eligible endpoints sends everything elsewhere.
    always.set_healthy("b1", false).unwrap();
    always.set_healthy("b2", false).unwrap();
    assert!(sequence(&always, &from_b, 6)
        .iter()
        .all(|a| a.starts_with('a')));
}

#[test]
fn locality_nests() {
    let b = balancer(
        "local_first:local_share=100 over zone_first:min_endpoints=2 over wrr",
        &["a1 zone=a weight=2", "a2 zone=a", "b1 zone=b"],
    );
    // Zone a's instance is zone_first over wrr on a's endpoints: wrr 2, 1.
    assert_eq!(
        sequence(&b, &Request::new().in_zone("a"), 6),
        cycle(&["a1", "a1", "a2"], 2)
    );
}

#[test]
fn zone_first_over_a_ring_places_keys_on_the_zone_ring() {
    let zoned = balancer("zone_first over c_murmurhash", &ZONED);
    let zone_a = balancer("c_murmurhash", &["a1", "a2", "a3"]);
    for i in 0..1000 {
        let key = format!("key-{i}");
        let want = zone_a.pick(&Request::key(&key)).unwrap().addr().to_string();
        let req = Request::key(&key).in_zone("a");
        assert_eq!(zoned.pick(&req).unwrap().addr(), want, "{key}");
        assert_eq!(
            zoned
                .route(&req)
                .map(|e| e.map(|e| e.addr().to_string()))
                .unwrap(),
            Some(want)
        );
    }
    // The layout is the inner ring's over every endpoint.
    let everyone = balancer("c_murmurhash", &ZONED);
    assert_eq!(zoned.layout().unwrap(), everyone.layout().unwrap());
    // No key: the inner policy's error.
    assert!(matches!(
        zoned.pick(&Request::new().in_zone("a")),
        Err(e) if e.kind() == PickErrorKind::MissingKey
    ));
}

#[test]
fn zone_first_over_a_bounded_ring_caps_within_the_zone() {
    let b = balancer("zone_first over c_murmurhash_bl:load_factor=1.25", &ZONED);
    assert_eq!(b.cap("a1").unwrap(), Some(1), "ceil(1.25 * 1 / 3)");
    let hot = Request::key("hot").in_zone("a");
    let held: Vec<Pick> = (0..30).map(|_| b.pick(&hot).unwrap()).collect();
    assert!(held.iter().all(|p| p.addr().starts_with('a')));
    // Each reservation was capped at ceil(1.25 * (t + 1) / 3) <= 13 for the
    // zone's t <= 29 requests in flight.
    for (endpoint, load) in b.loads() {
        assert!(load <= 13, "{}: {load}", endpoint.addr());
    }
    assert_eq!(b.cap("a1").unwrap(), Some(13), "ceil(1.25 * 31 / 3)");
    assert_eq!(
        b.cap("b1").unwrap(),
        Some(1),
        "zone b is idle: ceil(1.25 / 2)"
    );
}

// ------------------------------------------------------ eligibility, weights

/// Every policy, alone and wrapped.
fn every_spec() -> Vec<String> {
    let mut specs: Vec<String> = POLICY_NAMES.iter().map(|s| s.to_string()).collect();
    specs.extend(
        [
            "zone_first over c_murmurhash_bl",
            "zone_first:min_endpoints=2 over p2c",
            "local_first:local_share=70 over swrr",
            "local_first over zone_first over wr",
        ]
        .map(String::from),
    );
    specs
}

#[test]
fn every_policy_skips_unhealthy_excluded_and_weightless_endpoints() {
    let lines = [
        "e0 zone=z1",
        "e1 zone=z1 weight=0",
        "e2 zone=z1",
        "e3 zone=z2",
        "e4 zone=z2",
        "e5 zone=z2 weight=3",
    ];
    let tried = ["e3"];
    for spec in every_spec() {
        let b = balancer(&spec, &lines);
        b.set_healthy("e0", false).unwrap();
        let mut seen = HashMap::new();
        for i in 0..3000 {
            let key = format!("k{i}");
            for zone in ["z1", "z2"] {
                let req = Request::key(&key).excluding(&tried).in_zone(zone);
                let pick = b.pick(&req).unwrap_or_else(|e| panic!("{spec}: {e}"));
                *seen.entry(pick.addr().to_string()).or_insert(0) += 1;
            }
        }
        for never in ["e0", "e1", "e3"] {
            assert!(!seen.contains_key(never), "{spec} picked {never}: {seen:?}");
        }
        if !spec.contains("first") {
            for eligible in ["e2", "e4", "e5"] {
                assert!(
                    seen.contains_key(eligible),
                    "{spec} never picked {eligible}: {seen:?}"
                );
            }
        }
        for e in ["e2", "e4", "e5"] {
            b.set_healthy(e, false).unwrap();
        }
        let err = b.pick(&Request::key("k").excluding(&tried).in_zone("z1"));
        assert!(
            matches!(err, Err(e) if e.kind() == PickErrorKind::NoEligibleEndpoint),
            "{spec}: {err:?}"
        );
        assert_eq!(b.total_in_flight(), 0, "{spec}");
    }
}

#[test]
fn every_policy_rejects_all_zero_weights() {
    for spec in every_spec() {
        let err = Balancer::new(
            spec.parse().unwrap(),
            endpoints(&["a weight=0", "b weight=0"]),
        );
        assert!(
            matches!(&err, Err(e) if e.kind() == BuildErrorKind::AllWeightsZero),
            "{spec}: {err:?}"
        );
    }
}

#[test]
fn a_zone_of_weightless_endpoints_is_no_zone() {
    let b = balancer(
        "zone_first",
        &["a1 zone=a weight=0", "b1 zone=b", "b2 zone=b"],
    );
    assert_eq!(
        sequence(&b, &Request::new().in_zone("a"), 4),
        strings(&["b1", "b2", "b1", "b2"])
    );
}

#[test]
fn huge_weights_do_not_overflow() {
    let max = u32::MAX;
    let lines = [
        format!("big1 weight={max}"),
        format!("big2 weight={max}"),
        "tiny weight=1".to_string(),
        format!("big3 weight={}", max - 1),
    ];
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    for spec in [
        "rr",
        "random",
        "wrr",
        "swrr",
        "wr",
        "p2c",
        "zone_first over wrr",
    ] {
        let b = balancer(spec, &lines);
        let seen = counts(&b, &Request::new(), 2000);
        let weighted = !matches!(spec, "rr" | "random");
        // Weighted policies pick the weight-1 endpoint about once per 2^34
        // picks (p2c: never, it loses every comparison).
        assert_eq!(seen.contains_key("tiny"), !weighted, "{spec}: {seen:?}");
        for big in ["big1", "big2", "big3"] {
            assert!(seen.contains_key(big), "{spec}: {seen:?}");
        }
    }
}

#[test]
fn held_guards_count_for_every_policy() {
    for spec in every_spec() {
        let b = balancer(&spec, &["a zone=z", "b zone=z", "c"]);
        let req = Request::key("k").in_zone("z");
        let held: Vec<Pick> = (0..9).map(|_| b.pick(&req).unwrap()).collect();
        assert_eq!(b.total_in_flight(), 9, "{spec}");
        drop(held);
        assert_eq!(b.total_in_flight(), 0, "{spec}");
    }
}

// -------------------------------------------------------------------- specs

#[test]
fn specs_parse_and_keep_their_text() {
    let spec: PolicySpec = "  Local_First:local_share=80 OVER zone_first over RR  "
        .parse()
        .unwrap();
    assert_eq!(spec.name(), "local_first");
    // Names and values as written; `over` and the spaces canonical, as
    // the inner policies' texts always had them.
    assert_eq!(
        spec.as_str(),
        "Local_First:local_share=80 over zone_first over RR"
    );
    let inner = spec.inner().unwrap();
    assert_eq!(inner.name(), "zone_first");
    assert_eq!(inner.as_str(), "zone_first over RR");
    assert_eq!(inner.inner().unwrap().name(), "rr");
    assert!(!spec.is_hashing());

    let bare: PolicySpec = "zone_first".parse().unwrap();
    assert_eq!(bare.inner().unwrap().name(), "rr", "rr by default");

    let bounded: PolicySpec = "zone_first over c_murmurhash_bl".parse().unwrap();
    assert!(bounded.is_hashing());
    assert_eq!(
        bounded.load_factor().map(|f| f.to_string()),
        Some("1.25".into())
    );
    for plain in [
        "rr",
        "random:seed=0",
        "wrr",
        "swrr",
        "wr:seed=18446744073709551615",
        "p2c:choices=8",
    ] {
        let spec: PolicySpec = plain.parse().unwrap();
        assert!(!spec.is_hashing() && spec.inner().is_none() && spec.load_factor().is_none());
    }
}

#[test]
fn bad_specs_name_their_culprit() {
    let cases = [
        ("p2c:choices=1", "p2c: choices=1 is out of range: accepted 2..=8"),
        ("p2c:choices=9", "p2c: choices=9 is out of range: accepted 2..=8"),
        ("p2c:choices=two", "choices=two is not a whole number"),
        ("random:seed=-1", "random: seed=-1 is negative"),
        ("wr:seed=18446744073709551616", "seed=18446744073709551616 is out of range"),
        (
            "local_first:local_share=101",
            "local_first: local_share=101 is out of range: accepted 0..=100",
        ),
        (
            "zone_first:min_endpoints=0",
            "zone_first: min_endpoints=0 is out of range: accepted 1..=4294967295",
        ),
        ("rr:seed=1", "rr: unknown key `seed` (accepted: none)"),
        ("wrr:weights=1", "wrr: unknown key `weights` (accepted: none)"),
        (
            "p2c:choice=2",
            "p2c: unknown key `choice` (accepted: choices, seed, load, decay, default_rtt)",
        ),
        (
            "zone_first:local_share=5",
            "zone_first: unknown key `local_share` (accepted: min_endpoints)",
        ),
        (
            "local_first:min_endpoints=2",
            "local_first: unknown key `min_endpoints` (accepted: local_share, seed)",
        ),
        (
            "rr:load_factor=1.25",
            "rr: load_factor applies to hashing policies only",
        ),
        ("p2c:balance=150", "p2c: balance applies to hashing policies only"),
        (
            "zone_first:load_factor=1.3 over c_murmurhash",
            "zone_first: load_factor belongs on the inner hashing policy, e.g. `zone_first over c_murmurhash:load_factor=...`",
        ),
        (
            "local_first:balance=130",
            "local_first: balance belongs on the inner hashing policy",
        ),
        (
            "rr over wrr",
            "rr does not wrap another policy: only zone_first and local_first come before `over`",
        ),
        (
            "c_murmurhash over rr",
            "c_murmurhash does not wrap another policy",
        ),
        ("zone_first over", "the policy to wrap is missing after `over`"),
        ("over rr", "must come before `over`"),
        ("zone_first over wrong", "unknown policy `wrong`"),
        ("zone_first over p2c:choices=1", "p2c: choices=1 is out of range"),
        ("round_robin", "(accepted: c_murmurhash, c_murmurhash_bl, c_md5, c_ketama, ketama, ring_hash, maglev, nginx_hash, haproxy_hash, twemproxy, dubbo, pixiu_ring, rr, random, wrr, swrr, wr, p2c, la, zone_first, local_first)"),
    ];
    for (input, want) in cases {
        let got = input.parse::<PolicySpec>().unwrap_err().to_string();
        assert!(got.contains(want), "{input:?}: {got:?} lacks {want:?}");
        assert!(!got.contains('\n'), "one line: {got:?}");
    }
}

#[test]
fn concurrent_picks_stay_eligible_and_release_everything() {
    let lines = [
        "e0 zone=z",
        "e1 zone=z weight=2",
        "e2 zone=z weight=0",
        "e3 weight=3",
        "e4 weight=5",
    ];
    let mut specs = every_spec();
    // swrr's live path (the name is case-insensitive): a period too long to
    // precompute.
    specs.push("SWRR".into());
    for spec in specs {
        let huge;
        let lines: Vec<&str> = if spec == "SWRR" {
            huge = [
                "e0 zone=z weight=4000000000",
                "e1 zone=z weight=3999999999",
                "e2 weight=0",
                "e3 weight=7",
                "e4 weight=5",
            ];
            huge.to_vec()
        } else {
            lines.to_vec()
        };
        let b = balancer(&spec, &lines);
        b.set_healthy("e3", false).unwrap();
        std::thread::scope(|s| {
            for t in 0..4 {
                let b = &b;
                let spec = &spec;
                s.spawn(move || {
                    let mut held = Vec::new();
                    for i in 0..5000 {
                        let key = format!("{t}-{i}");
                        let pick = b.pick(&Request::key(&key).in_zone("z")).unwrap();
                        assert!(
                            !["e2", "e3"].contains(&pick.addr()),
                            "{spec}: {}",
                            pick.addr()
                        );
                        held.push(pick);
                        if held.len() > 8 {
                            drop(held.remove(0));
                        }
                    }
                });
            }
        });
        assert_eq!(b.total_in_flight(), 0, "{spec}");
    }
}

/// Hostile nesting is refused at once, not after minutes and gigabytes: the
/// errors count what a build would make, so they come before any building.
#[test]
fn deep_chains_and_oversized_locality_builds_are_refused_quickly() {
    // Only a guard against hanging (a build of 1.3e9 entries), not a timing.
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        refuse_deep_chains_and_oversized_locality_builds();
        done.send(()).unwrap();
    });
    match finished.recv_timeout(std::time::Duration::from_secs(300)) {
        Ok(()) => {}
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => panic!("the refusals failed"),
        Err(e) => panic!("the refusals hung: {e}"),
    }
}

fn refuse_deep_chains_and_oversized_locality_builds() {
    let deep = format!("{}rr", "zone_first over ".repeat(7000));
    let err = deep.parse::<PolicySpec>().unwrap_err().to_string();
    assert!(
        err.contains("7001 policies joined by `over`: accepted at most 4"),
        "{err}"
    );
    assert!(!err.contains('\n'));

    let zoned = |n: usize| -> Vec<Endpoint> {
        (0..n)
            .map(|i| {
                format!(
                    "10.{}.{}.{}:80 zone=z{i}",
                    i / 65536,
                    i / 256 % 256,
                    i % 256
                )
                .parse()
                .unwrap()
            })
            .collect()
    };
    let err = Balancer::new("zone_first over maglev".parse().unwrap(), zoned(20_000))
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "zone_first over maglev: 20001 instances (one per zone, one over all) make \
         1310805537 entries, more than the limit of 16777216"
    );
    let err = Balancer::new(
        "zone_first over ring_hash:min_ring_size=8388608"
            .parse()
            .unwrap(),
        zoned(20),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("21 instances"), "{err}");
    // Within the budget, the same shapes build.
    Balancer::new("zone_first over maglev".parse().unwrap(), zoned(200)).unwrap();
}
