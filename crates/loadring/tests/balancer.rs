//! The Balancer's contract for hashing policies: errors instead of panics.

use loadring::{Balancer, BuildErrorKind, Endpoint, Pick, PickError, Request};

fn ep(text: &str) -> Endpoint {
    text.parse().unwrap()
}

#[test]
fn weight_zero_is_a_member_that_is_never_picked() {
    let balancer =
        Balancer::new("c_murmurhash".parse().unwrap(), [ep("a weight=0"), ep("b")]).unwrap();
    for i in 0..2000u32 {
        assert_eq!(
            balancer
                .pick(&Request::code(u64::from(i) * 2_147_483))
                .unwrap()
                .addr(),
            "b"
        );
    }
    assert_eq!(
        balancer.loads().len(),
        2,
        "a weight-0 endpoint is still a member"
    );
}

#[test]
fn every_weight_zero_is_an_error_and_the_old_membership_stays() {
    let err = Balancer::new(
        "c_md5".parse().unwrap(),
        [ep("a weight=0"), ep("b weight=0")],
    )
    .unwrap_err();
    assert_eq!(err.kind(), BuildErrorKind::AllWeightsZero);
    let balancer = Balancer::new("c_md5".parse().unwrap(), [ep("a")]).unwrap();
    assert_eq!(
        balancer.update([ep("a weight=0")]).unwrap_err().kind(),
        BuildErrorKind::AllWeightsZero
    );
    assert_eq!(balancer.endpoints(), [ep("a")]);
}

#[test]
fn codes_beyond_32_bits_are_errors_not_truncated() {
    let balancer = Balancer::new("c_murmurhash".parse().unwrap(), [ep("a")]).unwrap();
    assert!(balancer.pick(&Request::code(u64::from(u32::MAX))).is_ok());
    let err = balancer.pick(&Request::code(1 << 32)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "request code 4294967296 is out of range for c_murmurhash: accepted 0..=4294967295"
    );
}

#[test]
fn hashing_needs_a_key_and_an_empty_balancer_has_no_endpoints() {
    let balancer = Balancer::new("c_ketama".parse().unwrap(), [ep("a")]).unwrap();
    assert_eq!(
        balancer.pick(&Request::new()).unwrap_err(),
        PickError::missing_key("c_ketama")
    );
    let empty = Balancer::new("c_ketama".parse().unwrap(), []).unwrap();
    assert_eq!(
        empty.pick(&Request::key("k")).unwrap_err(),
        PickError::no_endpoints()
    );
}

#[test]
fn excluded_endpoints_are_skipped_clockwise() {
    let endpoints = [ep("10.0.0.1:80"), ep("10.0.0.2:80"), ep("10.0.0.3:80")];
    let balancer = Balancer::new("c_murmurhash".parse().unwrap(), endpoints).unwrap();
    let first = balancer
        .pick(&Request::key("k"))
        .unwrap()
        .addr()
        .to_string();
    let tried = [first.as_str()];
    let second = balancer
        .pick(&Request::key("k").excluding(&tried))
        .unwrap()
        .addr()
        .to_string();
    assert_ne!(first, second);
    // The same successor as the plain ring without the first endpoint.
    balancer
        .update(
            [ep("10.0.0.1:80"), ep("10.0.0.2:80"), ep("10.0.0.3:80")]
                .into_iter()
                .filter(|e| e.addr() != first),
        )
        .unwrap();
    assert_eq!(balancer.pick(&Request::key("k")).unwrap().addr(), second);
    let all = ["10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80"];
    assert_eq!(
        balancer
            .pick(&Request::key("k").excluding(&all))
            .unwrap_err(),
        PickError::no_eligible_endpoint(2)
    );
}

#[test]
fn conflicting_endpoints_are_rejected() {
    let err = Balancer::new("c_md5".parse().unwrap(), [ep("a"), ep("a weight=2")]).unwrap_err();
    assert!(
        err.to_string()
            .contains("`a` is given twice with different attributes"),
        "{err}"
    );
}

fn endpoints(addrs: &[&str]) -> Vec<Endpoint> {
    addrs.iter().map(|a| Endpoint::new(*a).unwrap()).collect()
}

/// Plain balancers keep no running total and sum their members instead:
/// both ways must count the same guards, current members only. A member
/// added back while its requests still run counts them again.
#[test]
fn totals_count_current_members_with_or_without_a_running_total() {
    for spec in ["c_murmurhash", "c_murmurhash_bl"] {
        let b = Balancer::new(spec.parse().unwrap(), endpoints(&["a:1", "b:1", "c:1"])).unwrap();
        let picks: Vec<Pick> = (0..30)
            .map(|i| b.pick(&Request::key(&format!("key{i}"))).unwrap())
            .collect();
        assert_eq!(b.total_in_flight(), 30, "{spec}");
        let on_c = picks.iter().filter(|p| p.addr() == "c:1").count() as u64;
        assert!(on_c > 0, "{spec}: the test needs a guard on c");
        assert!(b.update(endpoints(&["b:1", "a:1"])).unwrap());
        assert_eq!(b.total_in_flight(), 30 - on_c, "{spec}: c left");
        let loads: u64 = b.loads().iter().map(|(_, l)| l).sum();
        assert_eq!(loads, 30 - on_c, "{spec}");
        assert!(b.update(endpoints(&["a:1", "b:1", "c:1"])).unwrap());
        assert_eq!(
            b.total_in_flight(),
            30,
            "{spec}: c is back, its requests still running"
        );
        let c_load = b.loads().into_iter().find(|(e, _)| e.addr() == "c:1");
        assert_eq!(c_load.map(|(_, l)| l), Some(on_c), "{spec}");
        // Released while removed, then added back: nothing left to count.
        let (on_c_picks, rest): (Vec<Pick>, Vec<Pick>) =
            picks.into_iter().partition(|p| p.addr() == "c:1");
        assert!(b.update(endpoints(&["b:1", "a:1"])).unwrap());
        drop(on_c_picks);
        assert!(b.update(endpoints(&["a:1", "b:1", "c:1"])).unwrap());
        assert_eq!(b.total_in_flight(), 30 - on_c, "{spec}: c is back, empty");
        drop(rest);
        assert_eq!(b.total_in_flight(), 0, "{spec}");
        assert!(b.loads().iter().all(|(_, l)| *l == 0), "{spec}");
    }
}

/// The hot policies are called by type; wrapped ones still work through
/// the trait object.
#[test]
fn hot_policies_are_recognised() {
    let dispatch = |spec: &str| {
        let endpoints = endpoints(&["a:1", "b:1", "c:1"]);
        let balancer = Balancer::new(spec.parse().unwrap(), endpoints).unwrap();
        balancer.dispatch().unwrap()
    };
    assert_eq!(dispatch("c_murmurhash"), "ring");
    assert_eq!(dispatch("c_murmurhash_bl"), "ring");
    assert_eq!(dispatch("ketama"), "ring");
    assert_eq!(dispatch("maglev"), "maglev");
    assert_eq!(dispatch("ring_hash"), "ring64");
    assert_eq!(dispatch("haproxy_hash"), "other");
    assert_eq!(dispatch("c_murmurhash:eject_after=3"), "other");
    assert_eq!(dispatch("rr"), "other");
    let empty = Balancer::new("maglev".parse().unwrap(), []).unwrap();
    assert_eq!(empty.dispatch(), None);
}

/// Each Maglev endpoint needs a slot: a smaller table would leave some
/// endpoints without requests, silently.
#[test]
fn a_maglev_table_smaller_than_the_pool_is_rejected() {
    let pool = |n: usize| -> Vec<Endpoint> {
        (0..n)
            .map(|i| Endpoint::new(format!("h{i}")).unwrap())
            .collect()
    };
    let err = |spec: &str, endpoints: Vec<Endpoint>| {
        Balancer::new(spec.parse().unwrap(), endpoints)
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        err("maglev:table_size=2", pool(3)),
        "maglev: table_size=2 is smaller than the 3 endpoints of weight >= 1, \
         which need a slot each: accepted a prime from 3 to 5000011"
    );
    // Envoy's default size and 100,000 endpoints: 34,463 would get nothing.
    assert_eq!(
        err("maglev", pool(100_000)),
        "maglev: table_size=65537 is smaller than the 100000 endpoints of weight >= 1, \
         which need a slot each: accepted a prime from 100003 to 5000011"
    );
    // Endpoints of weight 0 take no slot; a table as large as the pool
    // gives every endpoint one.
    let zero = [pool(2), vec!["z weight=0".parse().unwrap()]].concat();
    assert!(Balancer::new("maglev:table_size=2".parse().unwrap(), zero).is_ok());
    let exact = Balancer::new("maglev:table_size=3".parse().unwrap(), pool(3)).unwrap();
    let layout = exact.layout().unwrap().unwrap();
    assert!(layout.shares().iter().all(|(_, s)| *s > 0.0));
}
