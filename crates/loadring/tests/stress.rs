//! Many threads picking, releasing, updating and flapping health at once:
//! no panic, every counter back to zero, caps within the documented bound.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;

use loadring::{Balancer, Endpoint, LocalPick, Pick, PickErrorKind, Request};

const PICKERS: u64 = 4;
const PICKS: u64 = 20_000;
const HELD: u64 = 8;

fn endpoints(skip: Option<usize>) -> Vec<Endpoint> {
    (1..=8)
        .filter(|i| Some(*i) != skip)
        .map(|i| Endpoint::new(format!("10.1.0.{i}:80")).unwrap())
        .collect()
}

/// A guard of either kind: half the pickers go through a `LocalBalancer`,
/// whose cached snapshot must follow the updater.
#[allow(dead_code)] // held for their drop
enum Guard<'h> {
    Shared(Pick),
    Local(LocalPick<'h>),
}

fn stress(spec: &str) {
    let balancer = Balancer::new(spec.parse().unwrap(), endpoints(None)).unwrap();
    let spec_of = balancer.spec().unwrap();
    // The cap of one of `members` equal endpoints with `total` in flight:
    // loadring's, or Envoy's `slots + 1` (it admits while in flight <= slots).
    let cap = |total: u64, members: u64| -> u64 {
        match (spec_of.load_factor(), spec_of.hash_balance_factor()) {
            (Some(factor), _) => factor.cap(total, 1, members),
            (None, Some(f)) => ((total + 1) * u64::from(f)).div_ceil(100).div_ceil(members) + 1,
            (None, None) => panic!("{spec} is not bounded"),
        }
    };
    // The bound documented on `Balancer`: with at most G guards alive at once
    // and T picking threads, no endpoint holds more than
    // max(cap(G + T), (G + T) / n) + T, n the fewest eligible endpoints: here 8
    // members, one of them removed by the updater and one unhealthy at a time.
    let (g, t, n) = (PICKERS * HELD, PICKERS, 6);
    let bound = cap(g + t, n + 1).max((g + t) / n) + t;
    let done = AtomicBool::new(false);
    let worst_overshoot = AtomicU64::new(0);
    thread::scope(|s| {
        let pickers: Vec<_> = (0..PICKERS)
            .map(|t| {
                let (balancer, worst) = (&balancer, &worst_overshoot);
                s.spawn(move || {
                    let local = (t % 2 == 1).then(|| balancer.local());
                    let mut held = VecDeque::new();
                    for i in 0..PICKS {
                        // Mostly one hot key, the rest spread out.
                        let key = if i % 4 == 0 {
                            format!("k{t}-{i}")
                        } else {
                            "hot".to_string()
                        };
                        let req = Request::key(&key);
                        let picked = match &local {
                            Some(local) => local
                                .pick(&req)
                                .map(|p| (p.addr().to_string(), p.in_flight(), Guard::Local(p))),
                            None => balancer
                                .pick(&req)
                                .map(|p| (p.addr().to_string(), p.in_flight(), Guard::Shared(p))),
                        };
                        match picked {
                            Ok((addr, load, pick)) => {
                                assert!(
                                    load <= bound,
                                    "{addr} holds {load}, above the bound {bound}"
                                );
                                if let Ok(Some(cap)) = balancer.cap(&*addr) {
                                    worst.fetch_max(load.saturating_sub(cap), Ordering::Relaxed);
                                }
                                held.push_back(pick);
                                if held.len() as u64 > HELD - 1 {
                                    held.pop_front();
                                }
                            }
                            Err(e) if e.kind() == PickErrorKind::NoEligibleEndpoint => {}
                            Err(e) => panic!("unexpected error: {e}"),
                        }
                    }
                })
            })
            .collect();
        s.spawn(|| {
            let mut round = 0usize;
            while !done.load(Ordering::Relaxed) {
                let skip = if round.is_multiple_of(2) {
                    Some(round % 8 + 1)
                } else {
                    None
                };
                balancer.update(endpoints(skip)).unwrap();
                round += 1;
                thread::yield_now();
            }
        });
        s.spawn(|| {
            let mut round = 0usize;
            while !done.load(Ordering::Relaxed) {
                let addr = format!("10.1.0.{}:80", round % 8 + 1);
                // The updater may have just removed it: that is an expected error.
                let _ = balancer.set_healthy(&addr, false);
                thread::yield_now();
                let _ = balancer.set_healthy(&addr, true);
                round += 1;
            }
        });
        let results: Vec<_> = pickers.into_iter().map(|p| p.join()).collect();
        // Stop the updater and the flapper before reporting a picker's panic,
        // or the scope would wait for them forever.
        done.store(true, Ordering::Relaxed);
        for r in results {
            if let Err(panic) = r {
                std::panic::resume_unwind(panic);
            }
        }
    });
    assert_eq!(balancer.total_in_flight(), 0, "every guard was dropped");
    assert!(
        balancer.loads().iter().all(|(_, l)| *l == 0),
        "{:?}",
        balancer.loads()
    );
    let worst = worst_overshoot.load(Ordering::Relaxed);
    eprintln!(
        "{spec}: worst load above the instantaneous cap: {worst} (bound on the load: {bound})"
    );
    // Each reservation is a compare-and-swap against the cap of the total its
    // pick read; that total lags by at most the releases the other threads
    // made in between, each of which lowers the cap by at most one: the
    // load a guard sees exceeds the cap read afterwards by at most T. A
    // removal by the updater takes the removed endpoint's whole load (at most
    // `bound`) out of the total at once, lowering every cap of the 7 members
    // left by up to `cap(bound - 1)` more.
    let removal = cap(bound - 1, n + 1);
    assert!(
        worst <= t + removal,
        "{spec}: a load {worst} above its cap, more than the {t} threads and a removal ({removal}) can explain"
    );
}

#[test]
fn concurrent_bounded_picks_updates_and_health_flaps() {
    stress("c_murmurhash_bl");
}

#[test]
fn concurrent_picks_on_a_tight_bound() {
    stress("c_md5:load_factor=1.05");
}

/// Envoy's rule: the same bound with its caps (`slots + 1`), its spills in
/// the visiting order and its least-overloaded fallback.
#[test]
fn concurrent_picks_under_envoys_rule() {
    stress("ring_hash:hash_balance_factor=100");
    stress("maglev:table_size=307 hash_balance_factor=150");
}
