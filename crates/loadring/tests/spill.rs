//! `Pick::spilled`: a bounded pick says whether it left the request's
//! owner because the owner was at its cap, for each bounded rule
//! (loadring's load factor, HAProxy's `balance=`, Envoy's
//! `hash_balance_factor=`), also behind the endpoint lifecycle.

use loadring::{Balancer, Endpoint, Request};

fn balancer(policy: &str) -> Balancer {
    let endpoints = (1..=5).map(|i| Endpoint::new(format!("10.0.0.{i}:80")).unwrap());
    Balancer::new(policy.parse().unwrap(), endpoints).unwrap()
}

/// Holds the guards of a run where one key in three is the same hot key:
/// before each pick the model reads the owner (the unbounded placement) and
/// whether it is at its cap (as many in flight as the cap the next pick
/// applies to it); the pick spills exactly then, to another endpoint.
/// Returns (spilled, kept) counts.
fn run(policy: &str) -> (usize, usize) {
    let b = balancer(policy);
    let mut held = Vec::new();
    let (mut spilled, mut kept) = (0, 0);
    for i in 0..60 {
        let key = if i % 3 == 0 {
            "hot".to_string()
        } else {
            format!("user{i}")
        };
        let req = Request::key(key.as_bytes());
        let owner = b.route(&req).unwrap().unwrap().addr().to_string();
        let in_flight = b
            .loads()
            .into_iter()
            .find(|(e, _)| e.addr() == owner)
            .unwrap()
            .1;
        let cap = b.cap(owner.as_str()).unwrap().expect("a bounded policy");
        let at_cap = in_flight >= cap;
        let pick = b.pick(&req).unwrap();
        assert_eq!(
            pick.spilled(),
            at_cap,
            "{policy}: pick {i} of {key}: owner {owner} at {in_flight} of its cap {cap}"
        );
        assert_eq!(
            pick.addr() != owner,
            at_cap,
            "{policy}: pick {i} of {key} went to {}, owner {owner}",
            pick.addr()
        );
        if at_cap {
            spilled += 1;
        } else {
            kept += 1;
        }
        held.push(pick);
    }
    (spilled, kept)
}

#[test]
fn a_bounded_pick_reports_its_spill_under_every_rule() {
    for policy in [
        "c_murmurhash_bl",
        "ketama:load_factor=1.25",
        "haproxy_hash:balance=125",
        "ring_hash:hash_balance_factor=125",
        "maglev:hash_balance_factor=125",
        // Behind the lifecycle: the picker is no longer called by type.
        "c_murmurhash_bl:eject_after=5",
    ] {
        let (spilled, kept) = run(policy);
        assert!(
            spilled > 0 && kept > 0,
            "{policy}: {spilled} spilled, {kept} kept"
        );
    }
}

#[test]
fn unbounded_picks_and_reserved_candidates_never_spill() {
    let b = balancer("c_murmurhash");
    let held: Vec<_> = (0..20)
        .map(|_| b.pick(&Request::key("hot")).unwrap())
        .collect();
    assert!(held.iter().all(|p| !p.spilled()));
    assert!(held.iter().all(|p| p.addr() == held[0].addr()));

    // A candidate the caller reserves past the owner is its choice, not a spill.
    let b = balancer("c_murmurhash:load_factor=1.01");
    let _owner = b.pick(&Request::key("hot")).unwrap();
    let mut candidates = b.candidates(&Request::key("hot")).unwrap();
    candidates.next();
    let next = candidates.next().unwrap().reserve();
    assert!(!next.spilled());
}
