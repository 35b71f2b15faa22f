//! The per-thread handle (`Balancer::local`) and lookups (`route`): the same
//! answers as `Balancer::pick`, the same accounting, and membership changes
//! seen at the next pick.

use std::time::Duration;

use loadring::{Balancer, Endpoint, Outcome, Request};

fn endpoints(n: usize) -> Vec<Endpoint> {
    (0..n)
        .map(|i| Endpoint::new(format!("10.0.0.{}:80", i + 1)).unwrap())
        .collect()
}

const HASHING: [&str; 8] = [
    "c_murmurhash",
    "c_murmurhash_bl",
    "c_md5",
    "ketama",
    "ring_hash",
    "maglev",
    "nginx_hash:consistent=true",
    "haproxy_hash:type=consistent",
];

/// Idle, every hashing policy places a key on the same endpoint whichever
/// way it is asked: shared pick, local pick, shared route, local route.
#[test]
fn local_picks_and_routes_agree_with_shared_picks() {
    for spec in HASHING {
        let balancer = Balancer::new(spec.parse().unwrap(), endpoints(7)).unwrap();
        let local = balancer.local();
        for k in 0..300 {
            let key = format!("user:{k}");
            let req = Request::key(&key);
            let shared = balancer.pick(&req).unwrap().addr().to_string();
            let local_pick = local.pick(&req).unwrap();
            assert_eq!(local_pick.addr(), shared, "{spec} {key}");
            assert_eq!(
                local_pick.in_flight(),
                1,
                "{spec}: the local guard holds one slot"
            );
            drop(local_pick);
            let route = balancer.route(&req).unwrap().expect("a hashing policy");
            assert_eq!(route.addr(), shared, "{spec} {key}");
            let local_route = local.route(&req).unwrap().expect("a hashing policy");
            assert_eq!(local_route.addr(), shared, "{spec} {key}");
            assert_eq!(route.in_flight(), 0, "{spec}: a route reserves nothing");
        }
        assert_eq!(balancer.total_in_flight(), 0, "{spec}");
    }
}

/// Non-hashing policies share their state between the two ways of picking
/// (round robin goes on where the other left off) and do not route.
#[test]
fn round_robin_continues_across_local_and_shared_picks() {
    let balancer = Balancer::new("rr".parse().unwrap(), endpoints(3)).unwrap();
    let local = balancer.local();
    let order: Vec<String> = (0..6)
        .map(|i| {
            let req = Request::new();
            if i % 2 == 0 {
                local.pick(&req).unwrap().addr().to_string()
            } else {
                balancer.pick(&req).unwrap().addr().to_string()
            }
        })
        .collect();
    let want: Vec<String> = (0..6).map(|i| format!("10.0.0.{}:80", i % 3 + 1)).collect();
    assert_eq!(order, want);
    assert!(local.route(&Request::key("k")).unwrap().is_none());
    assert!(balancer.route(&Request::key("k")).unwrap().is_none());
}

/// A handle made before a membership change follows it at its next pick;
/// its guards from the old membership release harmlessly.
#[test]
fn a_local_handle_follows_membership_changes() {
    let balancer = Balancer::new("c_murmurhash".parse().unwrap(), endpoints(4)).unwrap();
    let local = balancer.local();
    let held: Vec<_> = (0..40)
        .map(|k| local.pick(&Request::key(&format!("k{k}"))).unwrap())
        .collect();
    assert_eq!(balancer.total_in_flight(), 40);
    balancer.remove("10.0.0.2:80").unwrap();
    let on_removed = held.iter().filter(|p| p.addr() == "10.0.0.2:80").count() as u64;
    assert!(
        on_removed > 0,
        "the test needs a guard on the removed endpoint"
    );
    assert_eq!(balancer.total_in_flight(), 40 - on_removed);
    for k in 0..200 {
        let key = format!("k{k}");
        let pick = local.pick(&Request::key(&key)).unwrap();
        assert_ne!(pick.addr(), "10.0.0.2:80", "{key}: removed");
        assert_eq!(
            pick.addr(),
            balancer.pick(&Request::key(&key)).unwrap().addr()
        );
    }
    balancer
        .insert(Endpoint::new("10.0.0.9:80").unwrap(), ())
        .unwrap();
    let reached = (0..200)
        .any(|k| local.pick(&Request::key(&format!("k{k}"))).unwrap().addr() == "10.0.0.9:80");
    assert!(
        reached,
        "an inserted endpoint is picked through the old handle"
    );
    drop(held);
    assert_eq!(balancer.total_in_flight(), 0);
    assert!(balancer.loads().iter().all(|(_, l)| *l == 0));
}

/// A route taken before a change still reads the membership it came from.
#[test]
fn a_route_outlives_a_membership_change() {
    let balancer = Balancer::new("maglev".parse().unwrap(), endpoints(3)).unwrap();
    let key = (0..)
        .map(|k| format!("k{k}"))
        .find(|k| balancer.route(&Request::key(k)).unwrap().unwrap().addr() == "10.0.0.3:80")
        .unwrap();
    let route = balancer.route(&Request::key(&key)).unwrap().unwrap();
    balancer.update(endpoints(2)).unwrap();
    assert_eq!(route.addr(), "10.0.0.3:80");
    assert_eq!(route.endpoint(), &endpoints(3)[2]);
    assert_ne!(
        balancer.route(&Request::key(&key)).unwrap().unwrap().addr(),
        "10.0.0.3:80"
    );
}

/// Bounded caps and health hold through the handle, and its guards report
/// outcomes to the policy (an ejection after one failure).
#[test]
fn local_picks_respect_caps_health_and_report_outcomes() {
    let balancer = Balancer::new("c_murmurhash_bl".parse().unwrap(), endpoints(4)).unwrap();
    let local = balancer.local();
    let held: Vec<_> = (0..40)
        .map(|_| local.pick(&Request::key("hot")).unwrap())
        .collect();
    for pick in &held {
        let cap = balancer.cap(pick.addr()).unwrap().unwrap();
        assert!(
            pick.in_flight() <= cap,
            "{} above its cap {cap}",
            pick.addr()
        );
    }
    let owner = held[0].addr().to_string();
    balancer.set_healthy(&*owner, false).unwrap();
    assert_ne!(local.pick(&Request::key("hot")).unwrap().addr(), owner);
    drop(held);

    let ejecting = Balancer::new(
        "c_murmurhash:eject_after=1 eject_for=10s".parse().unwrap(),
        endpoints(4),
    )
    .unwrap();
    let local = ejecting.local();
    let at = |s| Request::key("user:1").at(Duration::from_secs(s));
    let first = local.pick(&at(0)).unwrap();
    let owner = first.addr().to_string();
    first.finish(Outcome::failure(Duration::ZERO).at(Duration::ZERO));
    assert_ne!(local.pick(&at(1)).unwrap().addr(), owner, "ejected");
    assert_eq!(local.pick(&at(10)).unwrap().addr(), owner, "back");
    assert_eq!(ejecting.total_in_flight(), 0);
}

/// An empty balancer: the same errors through the handle.
#[test]
fn an_empty_balancer_gives_the_same_errors() {
    let balancer = Balancer::new("c_murmurhash".parse().unwrap(), []).unwrap();
    let local = balancer.local();
    assert_eq!(
        local.pick(&Request::key("k")).unwrap_err(),
        balancer.pick(&Request::key("k")).unwrap_err()
    );
    assert!(local.route(&Request::key("k")).is_err());
    balancer.update(endpoints(1)).unwrap();
    assert_eq!(
        local.pick(&Request::key("k")).unwrap().addr(),
        "10.0.0.1:80"
    );
}
