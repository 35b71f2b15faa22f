//! The endpoint lifecycle on a simulated clock: slow start, outlier
//! ejection, the panic threshold, and the parameters they reject. Every time
//! is given with `Request::at` and `Outcome::at`; nothing sleeps.

use std::time::Duration;

use loadring::{Balancer, Endpoint, Outcome, PickErrorKind, PolicySpec, Request};

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn balancer(spec: &str, n: usize) -> Balancer {
    let endpoints = (0..n).map(|i| Endpoint::new(format!("e{i}")).unwrap());
    Balancer::new(spec.parse().unwrap(), endpoints).unwrap()
}

/// The endpoints of `count` picks at time `at`, each released at once.
fn picks(b: &Balancer, count: usize, at: Duration) -> Vec<String> {
    (0..count)
        .map(|_| b.pick(&Request::new().at(at)).unwrap().addr().to_string())
        .collect()
}

fn count(addrs: &[String], addr: &str) -> usize {
    addrs.iter().filter(|a| *a == addr).count()
}

/// Reports one request to `addr` at time `at` as failed (or succeeded).
fn report(b: &Balancer, addr: &str, at: Duration, success: bool) {
    let req = Request::new().at(at);
    let candidate = b
        .candidates(&req)
        .unwrap()
        .find(|c| c.addr() == addr)
        .unwrap_or_else(|| panic!("{addr} is not a candidate at {at:?}"));
    let outcome = if success {
        Outcome::success(Duration::from_millis(5))
    } else {
        Outcome::failure(Duration::from_millis(5))
    };
    candidate.reserve().finish(outcome.at(at));
}

fn fail(b: &Balancer, addr: &str, at: Duration, times: usize) {
    for _ in 0..times {
        report(b, addr, at, false);
    }
}

/// Round robin over e0..e4 with e4 new: a pick that lands on e4 keeps it
/// with probability f (deterministically: each time the running sum of f
/// crosses a whole number) and is otherwise made again without it, which
/// lands on e0. Per five rr steps there are 4 picks when e4 is turned away
/// and 5 when it is kept, so e4's share is f / (4 + f).
#[test]
fn slow_start_ramps_a_new_endpoint_along_envoys_curve() {
    let b = balancer("rr:slow_start=10s", 4);
    // Endpoints of the first build are not in slow start.
    assert_eq!(count(&picks(&b, 400, secs(1)), "e0"), 100);
    b.insert(Endpoint::new("e4").unwrap(), ()).unwrap();
    // Its first pick at 100 s starts its window. Until 1 s in, the time
    // factor (≤ 0.1) is under the 10% floor: f = 0.1, share 0.1 / 4.1:
    // 10 of 410 picks.
    let first = picks(&b, 410, secs(100));
    assert_eq!(count(&first, "e4"), 10, "{first:?}");
    // 5 s into the 10 s window, f = 0.5: share 0.5 / 4.5, 100 of 900.
    // (± 1: where the 900 picks start in the 9-pick period.)
    let half = count(&picks(&b, 900, secs(105)), "e4");
    assert!((99..=101).contains(&half), "{half}");
    // 7.5 s in: f = 0.75, share 0.75 / 4.75 = 3 / 19: 60 of 380.
    let three_quarters = count(&picks(&b, 380, Duration::from_millis(107_500)), "e4");
    assert!((59..=61).contains(&three_quarters), "{three_quarters}");
    // The window is over: a fifth of the picks.
    assert_eq!(count(&picks(&b, 1000, secs(110)), "e4"), 200);
}

#[test]
fn slow_start_aggression_bends_the_curve() {
    // Aggression 2: f = (t / window)^(1/2); 2.5 s into 10 s, f = 0.5.
    let b = balancer("rr:slow_start=10s slow_start_aggression=2", 4);
    b.insert(Endpoint::new("e4").unwrap(), ()).unwrap();
    // The fifth pick offers e4 (turned away at f = 0.1): its window starts.
    assert_eq!(count(&picks(&b, 5, secs(50)), "e4"), 0);
    let half = count(&picks(&b, 900, Duration::from_millis(52_500)), "e4");
    assert!((99..=101).contains(&half), "{half}");
}

#[test]
fn ejection_after_consecutive_failures_until_the_time_is_up() {
    let b = balancer("rr:eject_after=3 eject_for=10s", 4);
    fail(&b, "e0", secs(1), 2);
    assert_eq!(count(&picks(&b, 4, secs(1)), "e0"), 1, "2 failures: in");
    // A success resets the count: two more failures are still not three.
    report(&b, "e0", secs(1), true);
    fail(&b, "e0", secs(1), 2);
    assert_eq!(count(&picks(&b, 4, secs(1)), "e0"), 1);
    fail(&b, "e0", secs(1), 1);
    assert_eq!(count(&picks(&b, 400, secs(1)), "e0"), 0, "ejected at 1 s");
    let last = Duration::from_millis(10_999);
    assert_eq!(
        count(&picks(&b, 400, last), "e0"),
        0,
        "still out at 10.999 s"
    );
    assert_eq!(count(&picks(&b, 4, secs(11)), "e0"), 1, "back at 11 s");
    // Ejected again at once: the multiplier is 2, so 20 s.
    fail(&b, "e0", secs(11), 3);
    assert_eq!(
        count(&picks(&b, 400, Duration::from_millis(30_999)), "e0"),
        0
    );
    assert_eq!(count(&picks(&b, 4, secs(31)), "e0"), 1, "back at 31 s");
    // 20 s (two eject_for) in service bring the multiplier from 2 to 0:
    // the next ejection is 10 s again.
    fail(&b, "e0", secs(51), 3);
    assert_eq!(
        count(&picks(&b, 400, Duration::from_millis(60_999)), "e0"),
        0
    );
    assert_eq!(count(&picks(&b, 4, secs(61)), "e0"), 1, "back at 61 s");
}

#[test]
fn ejection_time_is_capped() {
    let b = balancer("rr:eject_after=1 eject_for=10s max_eject_for=15s", 4);
    fail(&b, "e0", secs(0), 1);
    assert_eq!(count(&picks(&b, 4, secs(10)), "e0"), 1, "back at 10 s");
    fail(&b, "e0", secs(10), 1);
    // 2 × 10 s capped at 15 s.
    assert_eq!(
        count(&picks(&b, 400, Duration::from_millis(24_999)), "e0"),
        0
    );
    assert_eq!(count(&picks(&b, 4, secs(25)), "e0"), 1);
}

#[test]
fn at_most_max_ejection_percent_are_ejected_but_always_one() {
    // 20% of 10 endpoints: two.
    let b = balancer("rr:eject_after=1 max_ejection_percent=20", 10);
    for addr in ["e0", "e1", "e2"] {
        fail(&b, addr, secs(0), 1);
    }
    let seen = picks(&b, 100, secs(1));
    assert_eq!(
        (count(&seen, "e0"), count(&seen, "e1"), count(&seen, "e2")),
        (0, 0, 12),
        "{seen:?}"
    );
    // The default 10% of 4 endpoints is 0.4: one may still be ejected.
    let b = balancer("rr:eject_after=1", 4);
    fail(&b, "e0", secs(0), 1);
    fail(&b, "e1", secs(0), 1);
    let seen = picks(&b, 300, secs(1));
    assert_eq!((count(&seen, "e0"), count(&seen, "e1")), (0, 100));
    // Once e0 is back (30 s, the default eject_for), e1 may go.
    fail(&b, "e1", secs(30), 1);
    let seen = picks(&b, 300, secs(31));
    assert_eq!((count(&seen, "e0"), count(&seen, "e1")), (100, 0));
}

/// Ejection is ineligibility: a hashing policy walks on to the successor,
/// exactly where it goes when the owner is unhealthy, and the key comes
/// back when the ejection ends.
/// The endpoint `b` routes `req` to, owned.
fn route(b: &Balancer, req: &Request<'_>) -> Option<Endpoint> {
    b.route(req).unwrap().map(|r| r.endpoint().clone())
}

#[test]
fn hashing_walks_past_an_ejected_owner_and_comes_back() {
    let b = balancer("c_murmurhash:eject_after=1 eject_for=10s", 8);
    let reference = balancer("c_murmurhash", 8);
    for (k, key) in ["user:1", "user:2", "user:3", "user:4"]
        .into_iter()
        .enumerate()
    {
        let start = 100 * k as u64;
        let at = |t: u64| Request::key(key).at(secs(start + t));
        let owner = route(&b, &at(0)).unwrap();
        assert_eq!(Some(owner.clone()), route(&reference, &at(0)));
        let pick = b.pick(&at(0)).unwrap();
        assert_eq!(pick.addr(), owner.addr());
        pick.finish(Outcome::failure(Duration::ZERO).at(secs(start)));
        reference.set_healthy(&owner, false).unwrap();
        let moved = route(&b, &at(5)).unwrap();
        assert_ne!(moved, owner);
        assert_eq!(Some(moved), route(&reference, &at(5)), "{key}");
        assert_eq!(route(&b, &at(10)), Some(owner.clone()), "back");
        reference.set_healthy(&owner, true).unwrap();
        // Back in service: the next key may be ejected (budget of one).
        assert_eq!(b.pick(&at(10)).unwrap().addr(), owner.addr());
    }
}

#[test]
fn panic_ignores_health_below_the_threshold() {
    let b = balancer("rr:panic_below=50", 10);
    for i in 0..5 {
        b.set_healthy(format!("e{i}").as_str(), false).unwrap();
    }
    // 5 of 10 in service is not below 50%: unhealthy ones are skipped.
    let seen = picks(&b, 100, secs(0));
    assert!(
        (0..5).all(|i| count(&seen, &format!("e{i}")) == 0),
        "{seen:?}"
    );
    b.set_healthy("e5", false).unwrap();
    // 4 of 10 is: every endpoint takes its turn.
    let seen = picks(&b, 100, secs(0));
    assert!(
        (0..10).all(|i| count(&seen, &format!("e{i}")) == 10),
        "{seen:?}"
    );
    b.set_healthy("e5", true).unwrap();
    let seen = picks(&b, 100, secs(0));
    assert_eq!(count(&seen, "e0"), 0, "out of panic again");
}

#[test]
fn panic_counts_ejected_endpoints_as_out_of_service() {
    let b = balancer(
        "rr:panic_below=50 eject_after=1 max_ejection_percent=100",
        4,
    );
    fail(&b, "e0", secs(0), 1);
    fail(&b, "e1", secs(0), 1);
    // 2 of 4 in service: no panic, the ejected are skipped.
    let seen = picks(&b, 100, secs(1));
    assert_eq!((count(&seen, "e0"), count(&seen, "e2")), (0, 50));
    fail(&b, "e2", secs(1), 1);
    // 1 of 4: panic, all four take turns.
    let seen = picks(&b, 100, secs(2));
    assert_eq!((count(&seen, "e0"), count(&seen, "e3")), (25, 25));
}

#[test]
fn bad_lifecycle_and_latency_parameters_are_rejected_in_one_line() {
    let cases = [
        (
            "rr:slow_start=10",
            "slow_start",
            "slow_start=10 has no unit",
        ),
        ("rr:slow_start=1.5s", "slow_start", "is not a whole number"),
        ("rr:slow_start=0ms", "slow_start", "is out of range"),
        (
            "c_murmurhash:slow_start=10s",
            "slow_start",
            "does not apply to hashing",
        ),
        (
            "maglev:slow_start=10s",
            "slow_start",
            "does not apply to hashing",
        ),
        (
            "rr:slow_start_aggression=2",
            "slow_start_aggression",
            "needs slow_start=DUR",
        ),
        (
            "rr:slow_start=1s slow_start_aggression=0",
            "slow_start_aggression",
            "accepted a decimal number in (0, 100]",
        ),
        (
            "rr:slow_start=1s slow_start_aggression=NaN",
            "slow_start_aggression",
            "accepted a decimal",
        ),
        (
            "rr:slow_start=1s slow_start_min_weight=101",
            "slow_start_min_weight",
            "0..=100",
        ),
        ("rr:eject_for=10s", "eject_for", "needs eject_after=N"),
        (
            "rr:max_ejection_percent=20",
            "max_ejection_percent",
            "needs eject_after=N",
        ),
        (
            "rr:eject_after=0",
            "eject_after",
            "eject_after=0 is out of range: accepted 1..=1000",
        ),
        (
            "rr:eject_after=3 eject_for=10s max_eject_for=5s",
            "max_eject_for",
            "shorter than eject_for",
        ),
        (
            "rr:eject_after=3 max_ejection_percent=101",
            "max_ejection_percent",
            "0..=100",
        ),
        ("rr:panic_below=0", "panic_below", "accepted 1..=100"),
        ("rr:panic_below=101", "panic_below", "accepted 1..=100"),
        ("rr:panic_below=50%", "panic_below", "not a whole number"),
        ("p2c:load=ewma", "load", "accepted in_flight, peak_ewma"),
        ("p2c:decay=1s", "decay", "applies to load=peak_ewma only"),
        (
            "p2c:default_rtt=5ms",
            "default_rtt",
            "applies to load=peak_ewma only",
        ),
        (
            "p2c:load=peak_ewma decay=1h1m",
            "decay",
            "is not a whole number",
        ),
        ("la:timeout=0ms", "timeout", "is out of range"),
        ("la:window=5ms", "window", "from 10ms"),
        ("la:choices=2", "choices", "unknown key `choices`"),
    ];
    for (spec, key, want) in cases {
        let err = spec.parse::<PolicySpec>().unwrap_err();
        let text = err.to_string();
        assert!(text.contains(want), "{spec}: {text:?} lacks {want:?}");
        assert_eq!(err.key(), Some(key), "{spec}: {text}");
        assert!(!text.contains('\n'), "{spec}: one line");
    }
}

#[test]
fn good_specs_parse_and_keep_their_family() {
    for (spec, name, hashing) in [
        ("la", "la", false),
        ("la:timeout=1s window=500ms seed=3", "la", false),
        (
            "p2c:load=peak_ewma decay=500ms default_rtt=20ms",
            "p2c",
            false,
        ),
        (
            "rr:slow_start=1m eject_after=5 eject_for=30s panic_below=50",
            "rr",
            false,
        ),
        (
            "c_murmurhash_bl:eject_after=5 panic_below=70",
            "c_murmurhash_bl",
            true,
        ),
        ("zone_first over la:eject_after=5", "zone_first", false),
    ] {
        let parsed: PolicySpec = spec.parse().unwrap();
        assert_eq!(
            (parsed.name(), parsed.is_hashing()),
            (name, hashing),
            "{spec}"
        );
    }
    let bounded: PolicySpec = "c_murmurhash_bl:eject_after=5".parse().unwrap();
    assert!(
        bounded.load_factor().is_some(),
        "the wrapper keeps the bound"
    );
}

/// The lifecycle wrapper passes incremental membership changes to the
/// policy it wraps: a ring that merges one endpoint in places every key as
/// a ring built over the whole membership.
#[test]
fn incremental_changes_place_like_a_full_build() {
    let b = balancer("c_murmurhash:eject_after=3", 6);
    b.insert(Endpoint::new("e6").unwrap(), ()).unwrap();
    b.remove("e2").unwrap();
    let names = ["e0", "e1", "e3", "e4", "e5", "e6"];
    let full = Balancer::new(
        "c_murmurhash".parse().unwrap(),
        names.map(|n| Endpoint::new(n).unwrap()),
    )
    .unwrap();
    for k in 0..500 {
        let key = format!("key-{k}");
        let req = Request::key(&key).at(secs(0));
        assert_eq!(route(&b, &req), route(&full, &req), "{key}");
    }
}

/// The ejection budget counts the endpoints of one balancer: two balancers
/// built from one parsed specification each eject their own endpoint (the
/// default 10% of 4 endpoints allows one each).
#[test]
fn each_balancer_has_its_own_ejection_budget() {
    let spec: PolicySpec = "rr:eject_after=1".parse().unwrap();
    let endpoints = || (0..4).map(|i| Endpoint::new(format!("e{i}")).unwrap());
    let a = Balancer::new(spec.clone(), endpoints()).unwrap();
    let b = Balancer::new(spec, endpoints()).unwrap();
    fail(&a, "e0", secs(0), 1);
    fail(&b, "e1", secs(0), 1);
    let (on_a, on_b) = (picks(&a, 300, secs(1)), picks(&b, 300, secs(1)));
    assert_eq!((count(&on_a, "e0"), count(&on_a, "e1")), (0, 100));
    assert_eq!((count(&on_b, "e0"), count(&on_b, "e1")), (100, 0));
}

/// `Balancer::lifecycle` tells what the picks above show: the ejection's time
/// left, and the slow-start fraction on Envoy's curve (written here from
/// the documented formula: max(10%, t / window) with aggression 1).
#[test]
fn the_lifecycle_view_tells_the_ejection_left_and_the_ramp() {
    let b = balancer("rr:eject_after=2 eject_for=10s slow_start=10s", 3);
    let view = b.lifecycle("e0", secs(1)).unwrap();
    assert_eq!((view.ejected_for, view.slow_start), (None, None));
    fail(&b, "e0", secs(1), 2);
    assert_eq!(
        b.lifecycle("e0", Duration::from_millis(3_500))
            .unwrap()
            .ejected_for,
        Some(Duration::from_millis(7_500))
    );
    assert_eq!(b.lifecycle("e0", secs(11)).unwrap().ejected_for, None);
    assert_eq!(b.lifecycle("e1", secs(3)).unwrap().ejected_for, None);

    b.insert(Endpoint::new("e3").unwrap(), ()).unwrap();
    assert_eq!(
        b.lifecycle("e3", secs(20)).unwrap().slow_start,
        Some(0.1),
        "not picked yet: the floor"
    );
    // Its window starts at its first pick (within 4 picks at 20 s).
    assert_eq!(count(&picks(&b, 4, secs(20)), "e3"), 0);
    let at = |ms: u64| {
        b.lifecycle("e3", Duration::from_millis(ms))
            .unwrap()
            .slow_start
    };
    assert_eq!(at(20_500), Some(0.1), "below the floor");
    assert_eq!(at(25_000), Some(0.5));
    assert_eq!(at(27_500), Some(0.75));
    assert_eq!(at(30_000), None, "the window is over");
    assert!(b.lifecycle("nope", secs(1)).is_err());
    // No lifecycle keys: nothing to tell.
    let plain = balancer("rr", 2);
    assert_eq!(
        plain.lifecycle("e0", secs(1)).unwrap(),
        loadring::LifecycleView::default()
    );
}

/// `Balancer::states` reads in one pass what the per-member getters read
/// one lookup at a time: loads, health marks, caps and lifecycles.
#[test]
fn states_agree_with_the_per_member_getters() {
    let b = balancer("c_murmurhash_bl:eject_after=1 eject_for=10s", 4);
    let held: Vec<_> = (0..6u64)
        .map(|i| b.pick(&Request::code(i * 677_000_003).at(secs(1))).unwrap())
        .collect();
    b.set_healthy("e2", false).unwrap();
    b.candidates(&Request::code(0).at(secs(1)))
        .unwrap()
        .find(|c| c.addr() == "e1")
        .unwrap()
        .reserve()
        .finish(Outcome::failure(Duration::from_millis(5)).at(secs(1)));
    let at = secs(2);
    let states = b.states(at);
    assert_eq!(states.len(), 4);
    for (s, (endpoint, load)) in states.iter().zip(b.loads()) {
        assert_eq!(s.endpoint, endpoint);
        assert_eq!(s.in_flight, load);
        assert_eq!(s.healthy, b.is_healthy(endpoint.id()).unwrap());
        assert_eq!(s.cap, b.cap(endpoint.id()).unwrap());
        assert!(s.cap.is_some(), "bounded");
        assert_eq!(s.lifecycle, b.lifecycle(endpoint.id(), at).unwrap());
    }
    assert!(!states[2].healthy);
    assert_eq!(states[1].lifecycle.ejected_for, Some(secs(9)));
    assert_eq!(states.iter().map(|s| s.in_flight).sum::<u64>(), 6);
    drop(held);
}

/// The endpoints `b` has ejected at `at`.
fn ejected(b: &Balancer, at: Duration) -> Vec<String> {
    b.states(at)
        .into_iter()
        .filter(|s| s.lifecycle.ejected_for.is_some())
        .map(|s| s.endpoint.addr().to_string())
        .collect()
}

/// An ejected endpoint removed while guards of it are held, then added
/// back, starts un-ejected, exactly as one that no guard held (Envoy forgets
/// a removed host's detector state): it never comes back outside the new
/// membership's budget. Here the budget of two endpoints is one ejection;
/// e0 coming back ejected next to an ejected e1 left nothing to pick.
#[test]
fn a_rejoining_endpoint_starts_un_ejected_guards_held_or_not() {
    let three = || (0..3).map(|i| Endpoint::new(format!("e{i}")).unwrap());
    let but = |out: &'static str| three().filter(move |e| e.addr() != out);
    for hold in [true, false] {
        let b = balancer("rr:eject_after=1 eject_for=10s", 3);
        let guard = b
            .candidates(&Request::new().at(secs(0)))
            .unwrap()
            .find(|c| c.addr() == "e0")
            .unwrap()
            .reserve();
        fail(&b, "e0", secs(0), 1);
        assert_eq!(ejected(&b, secs(1)), ["e0"]);
        b.update(but("e0")).unwrap();
        let guard = if hold {
            Some(guard)
        } else {
            drop(guard);
            None
        };
        // The budget of {e1, e2} has room: e0 is not a member.
        fail(&b, "e1", secs(1), 1);
        assert_eq!(ejected(&b, secs(2)), ["e1"], "hold={hold}");
        b.update(but("e2")).unwrap();
        assert_eq!(ejected(&b, secs(2)), ["e1"], "hold={hold}");
        assert_eq!(
            b.lifecycle("e0", secs(2)).unwrap(),
            loadring::LifecycleView::default(),
            "hold={hold}"
        );
        assert_eq!(picks(&b, 4, secs(2)), ["e0"; 4], "hold={hold}");
        // Its past ejections are forgotten too: once e1 is back (11 s), a
        // new ejection of e0 lasts eject_for, not twice that.
        fail(&b, "e0", secs(12), 1);
        assert_eq!(
            b.lifecycle("e0", secs(12)).unwrap().ejected_for,
            Some(secs(10)),
            "hold={hold}"
        );
        drop(guard);
    }
}

/// Membership churn with guards held, so that endpoints leave and come back
/// while requests on them run and fail: at every step, at most
/// `max_ejection_percent` of the current members (at least one) are
/// ejected, and a pick succeeds, on an endpoint not ejected, whenever a
/// healthy endpoint is not ejected.
#[test]
fn the_ejection_budget_holds_over_the_membership_through_churn() {
    for (text, n, out, percent) in [
        ("rr:eject_after=1 eject_for=1s", 3, 1, 10),
        ("rr:eject_after=1", 3, 1, 10),
        ("c_murmurhash:eject_after=1 eject_for=2s", 3, 1, 10),
        (
            "p2c:eject_after=1 eject_for=1s max_ejection_percent=50",
            6,
            2,
            50,
        ),
        (
            "rr:eject_after=2 eject_for=500ms max_ejection_percent=30",
            10,
            3,
            30,
        ),
        ("zone_first over rr:eject_after=1 eject_for=1s", 5, 2, 10),
    ] {
        let all: Vec<Endpoint> = (0..n)
            .map(|i| {
                Endpoint::new(format!("e{i}"))
                    .unwrap()
                    .with_zone(format!("z{}", i % 2))
                    .unwrap()
            })
            .collect();
        let b = Balancer::new(text.parse().unwrap(), all.clone()).unwrap();
        let budget = |members: usize| (members * percent / 100).max(1);
        let check = |at: Duration, step: usize| {
            let states = b.states(at);
            let out = ejected(&b, at);
            assert!(
                out.len() <= budget(states.len()),
                "{text}: step {step}: {out:?} ejected of {} members",
                states.len()
            );
        };
        let mut held = std::collections::VecDeque::new();
        for step in 0..3_000usize {
            let at = Duration::from_millis(100 * step as u64);
            // A turning window of `out` endpoints is left out: one leaves
            // and one comes back at each step.
            let members = all
                .iter()
                .enumerate()
                .filter(|(i, _)| (i + step) % n >= out)
                .map(|(_, e)| e.clone());
            b.update(members).unwrap();
            check(at, step);
            let req = Request::code(step as u64).at(at);
            let open = b
                .states(at)
                .iter()
                .any(|s| s.healthy && s.lifecycle.ejected_for.is_none());
            let pick = match b.pick(&req) {
                Ok(pick) => pick,
                Err(e) if !open => {
                    assert_eq!(e.kind(), PickErrorKind::NoEligibleEndpoint, "{text}");
                    continue;
                }
                Err(e) => panic!("{text}: step {step}: {e}"),
            };
            let out = ejected(&b, at);
            assert!(
                !out.iter().any(|a| a == pick.addr()),
                "{text}: step {step}: picked {} of {out:?}",
                pick.addr()
            );
            match step % 6 {
                0 | 3 => held.push_back(pick),
                2 | 4 => pick.finish(Outcome::failure(Duration::from_millis(5)).at(at)),
                _ => pick.finish(Outcome::success(Duration::from_millis(5)).at(at)),
            }
            check(at, step);
            // The oldest held guards fail now, on members or not.
            while held.len() > 5 {
                let pick: loadring::Pick = held.pop_front().unwrap();
                pick.finish(Outcome::failure(Duration::from_millis(5)).at(at));
                check(at, step);
            }
        }
        drop(held);
        assert_eq!(b.total_in_flight(), 0, "{text}");
    }
}

/// The budget is kept when the membership shrinks too: of the endpoints
/// ejected that stay, those with the most time left stay ejected, as many
/// as the smaller membership allows; the others are back at once.
#[test]
fn a_shrinking_membership_returns_the_ejections_past_its_budget() {
    // 20% of 10 endpoints: two.
    let b = balancer("rr:eject_after=1 eject_for=10s max_ejection_percent=20", 10);
    fail(&b, "e0", secs(0), 1);
    fail(&b, "e1", secs(1), 1);
    fail(&b, "e2", secs(2), 1);
    assert_eq!(ejected(&b, secs(3)), ["e0", "e1"]);
    // 20% of 5: one. e1 has the more time left (8 s against 7 s).
    let five = (0..5).map(|i| Endpoint::new(format!("e{i}")).unwrap());
    b.update(five).unwrap();
    assert_eq!(ejected(&b, secs(3)), ["e1"]);
    let seen = picks(&b, 40, secs(3));
    assert_eq!((count(&seen, "e0"), count(&seen, "e1")), (10, 0));
    // Back in service, e0 keeps its record: its next ejection is twice as long.
    assert_eq!(ejected(&b, secs(11)), Vec::<String>::new());
    fail(&b, "e0", secs(11), 1);
    assert_eq!(
        b.lifecycle("e0", secs(11)).unwrap().ejected_for,
        Some(secs(20))
    );
}
