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

/// A local guard tells its endpoint as a shared one does: address, tag,
/// the caller's value, the load with every guard counted.
#[test]
fn local_guards_describe_their_endpoint() {
    for spec in ["maglev", "c_murmurhash_bl", "rr"] {
        let backends = (0..3).map(|i| {
            let endpoint = Endpoint::new(format!("10.0.0.{i}:80"))
                .unwrap()
                .with_tag(format!("t{i}"))
                .unwrap();
            (endpoint, i * 10)
        });
        let balancer = Balancer::with_backends(spec.parse().unwrap(), backends).unwrap();
        let local = balancer.local();
        let req = Request::key("user:42");
        let first = local.pick(&req).unwrap();
        let second = local.pick(&req).unwrap();
        let i: usize = first.addr()["10.0.0.".len()..][..1].parse().unwrap();
        assert_eq!(first.tag(), Some(format!("t{i}").as_str()), "{spec}");
        assert_eq!(first.endpoint().tag(), first.tag(), "{spec}");
        assert_eq!(*first.value(), i * 10, "{spec}");
        let together = u64::from(first.addr() == second.addr()) + 1;
        assert_eq!(first.in_flight(), together, "{spec}");
        assert!(format!("{first:?}").contains(first.addr()), "{spec}");
        drop((first, second));
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

/// Plain hashing policies count local picks in the picking thread's own
/// counter: a backend's load is still exact, seen from any thread, while
/// guards of both kinds are held on several threads.
#[test]
fn thread_counters_add_up_across_threads_and_guard_kinds() {
    for spec in ["c_murmurhash", "maglev", "ring_hash"] {
        let balancer = Balancer::new(spec.parse().unwrap(), endpoints(5)).unwrap();
        let held_by_thread = 300u64;
        let (hold, release) = (std::sync::Barrier::new(3), std::sync::Barrier::new(3));
        // Read while every guard is held; checked after the threads are let
        // go, so that a failed check cannot leave them waiting.
        let (loads, total, per_endpoint, threads_ok) = std::thread::scope(|s| {
            let threads: Vec<_> = (0..2)
                .map(|t| {
                    let (balancer, hold, release) = (&balancer, &hold, &release);
                    s.spawn(move || {
                        let local = balancer.local();
                        let keys: Vec<String> =
                            (0..held_by_thread).map(|k| format!("t{t}k{k}")).collect();
                        // Both threads pick and release at once for a while:
                        // two handles writing one counter would lose updates
                        // here. A panic is caught so that the thread still
                        // reaches the barriers (the others would wait forever).
                        let work = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            for _ in 0..100 {
                                for k in &keys {
                                    drop(local.pick(&Request::key(k)).unwrap());
                                }
                            }
                            keys.iter()
                                .map(|k| local.pick(&Request::key(k)).unwrap())
                                .collect::<Vec<_>>()
                        }));
                        hold.wait();
                        release.wait();
                        work.is_ok()
                    })
                })
                .collect();
            hold.wait();
            let shared: Vec<_> = (0..100)
                .map(|k| balancer.pick(&Request::key(&format!("s{k}"))).unwrap())
                .collect();
            let loads: u64 = balancer.loads().iter().map(|(_, l)| l).sum();
            let total = balancer.total_in_flight();
            let per_endpoint: Vec<(u64, u64)> = balancer
                .loads()
                .into_iter()
                .map(|(endpoint, load)| {
                    let on_it = shared.iter().filter(|p| p.endpoint() == &endpoint).count();
                    (load, on_it as u64)
                })
                .collect();
            drop(shared);
            release.wait();
            let threads_ok = threads.into_iter().all(|t| t.join().unwrap_or(false));
            (loads, total, per_endpoint, threads_ok)
        });
        assert!(threads_ok, "{spec}: a picking thread panicked");
        assert_eq!(loads, 2 * held_by_thread + 100, "{spec}");
        assert_eq!(total, 2 * held_by_thread + 100, "{spec}");
        for (load, shared_on_it) in per_endpoint {
            assert!(load >= shared_on_it, "{spec}: {load} < {shared_on_it}");
        }
        assert_eq!(balancer.total_in_flight(), 0, "{spec}");
        assert!(balancer.loads().iter().all(|(_, l)| *l == 0), "{spec}");
    }
}

mod model {
    use loadring::{Balancer, Endpoint, LocalPick, Pick, Request};
    use proptest::prelude::*;

    /// Local handles in the model: more than a balancer's counter slots, so
    /// that some count in the shared counters.
    const HANDLES: u8 = 6;

    #[derive(Debug, Clone)]
    enum Op {
        /// `handle`: through that local handle, or shared if `>= HANDLES`.
        Pick {
            key: u8,
            handle: u8,
        },
        /// Drops every guard (a guard cannot outlive its handle), then
        /// the handle, and makes a new one (which may take the freed slot).
        Renew {
            handle: u8,
        },
        Drop {
            index: u8,
        },
        Update {
            mask: u8,
        },
        Health {
            endpoint: u8,
            healthy: bool,
        },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0u8..16, 0..HANDLES + 2).prop_map(|(key, handle)| Op::Pick { key, handle }),
            1 => (0..HANDLES).prop_map(|handle| Op::Renew { handle }),
            3 => any::<u8>().prop_map(|index| Op::Drop { index }),
            1 => (0u8..32).prop_map(|mask| Op::Update { mask }),
            1 => (0u8..5, any::<bool>()).prop_map(|(endpoint, healthy)| Op::Health { endpoint, healthy }),
        ]
    }

    #[allow(dead_code)] // held for their drop
    enum Guard<'h> {
        Shared(Pick),
        Local(LocalPick<'h>),
    }

    /// Any interleaving of shared and local picks, releases, membership and
    /// health changes: every load is the number of live guards on the
    /// current member, and everything comes back to zero.
    fn run(spec: &str, ops: Vec<Op>) -> Result<(), TestCaseError> {
        let universe: Vec<Endpoint> = (0..5)
            .map(|i| Endpoint::new(format!("10.0.0.{}:80", i + 1)).unwrap())
            .collect();
        let balancer = Balancer::new(spec.parse().unwrap(), universe.clone()).unwrap();
        let mut handles: Vec<_> = (0..HANDLES).map(|_| balancer.local()).collect();
        let mut members: Vec<usize> = (0..5).collect();
        let mut healthy = [true; 5];
        let mut generation = [0u32; 5];
        let mut held: Vec<(usize, u32, Guard)> = Vec::new();
        for op in ops {
            match op {
                Op::Renew { handle } => {
                    drop(held);
                    handles[handle as usize] = balancer.local();
                    held = Vec::new();
                }
                Op::Pick { key, handle } => {
                    let key = format!("key-{key}");
                    let req = Request::key(&key);
                    let picked = match handles.get(handle as usize) {
                        Some(local) => local
                            .pick(&req)
                            .map(|p| (p.addr().to_string(), Guard::Local(p))),
                        None => balancer
                            .pick(&req)
                            .map(|p| (p.addr().to_string(), Guard::Shared(p))),
                    };
                    let any_eligible = members.iter().any(|&i| healthy[i]);
                    match picked {
                        Ok((addr, guard)) => {
                            let i = universe.iter().position(|e| e.addr() == addr).unwrap();
                            prop_assert!(members.contains(&i) && healthy[i], "picked {addr}");
                            held.push((i, generation[i], guard));
                        }
                        Err(e) => prop_assert!(!any_eligible, "{e} with an eligible member"),
                    }
                }
                Op::Drop { index } => {
                    if !held.is_empty() {
                        let i = index as usize % held.len();
                        drop(held.swap_remove(i));
                    }
                }
                Op::Update { mask } => {
                    let next: Vec<usize> = (0..5).filter(|i| mask & (1 << i) != 0).collect();
                    // A backend that comes back starts healthy, and takes
                    // its old member again (with the guards still held on
                    // it) unless none is left.
                    for &back in next.iter().filter(|i| !members.contains(i)) {
                        healthy[back] = true;
                        let still_held = held
                            .iter()
                            .filter(|(e, g, _)| *e == back && *g == generation[back])
                            .count();
                        if still_held == 0 {
                            generation[back] += 1;
                        }
                    }
                    balancer
                        .update(next.iter().map(|&i| universe[i].clone()))
                        .unwrap();
                    members = next;
                }
                Op::Health {
                    endpoint,
                    healthy: h,
                } => {
                    let i = endpoint as usize;
                    if members.contains(&i) {
                        balancer.set_healthy(universe[i].addr(), h).unwrap();
                        healthy[i] = h;
                    }
                }
            }
            for (endpoint, load) in balancer.loads() {
                let i = universe.iter().position(|e| e == &endpoint).unwrap();
                let expected = held
                    .iter()
                    .filter(|(e, g, _)| *e == i && *g == generation[i])
                    .count() as u64;
                prop_assert_eq!(load, expected, "load of {}", endpoint.addr());
            }
        }
        held.clear();
        prop_assert_eq!(balancer.total_in_flight(), 0);
        prop_assert!(balancer.loads().iter().all(|(_, l)| *l == 0));
        Ok(())
    }

    proptest! {
        #![proptest_config(crate::common::cases(200))]

        #[test]
        fn loads_are_exact_with_local_and_shared_guards_murmur(ops in proptest::collection::vec(op(), 1..100)) {
            run("c_murmurhash", ops)?;
        }

        #[test]
        fn loads_are_exact_with_local_and_shared_guards_maglev(ops in proptest::collection::vec(op(), 1..100)) {
            run("maglev", ops)?;
        }

        #[test]
        fn loads_are_exact_with_local_and_shared_guards_bounded(ops in proptest::collection::vec(op(), 1..100)) {
            run("c_murmurhash_bl", ops)?;
        }
    }
}
