//! Bounded load: what the cap check costs a pick, and what concurrent updates
//! cost the picks running beside them.
//!
//! ```text
//! cargo bench -p loadring --bench bounded -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! Every pick here is released at once (pick, then drop the guard), so the
//! bounded walk always finds room at the key's natural owner: the figures are
//! the price of the bounded bookkeeping (the cap check, the compare-and-swap
//! reservation, the shared total of requests in flight), not of spilling.
//! Picks cycle through 1024 pseudo-random request codes, except in
//! `hot_key_past_floor`, where guards are held so that each pick of one hot
//! key reads the running total (the path of every bounded pick under load).

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion};
use loadring::{Balancer, Endpoint, LoadReport, Request};

const INPUTS: usize = 1024;
const ENDPOINTS: usize = 100;

fn endpoints(range: std::ops::Range<usize>) -> Vec<Endpoint> {
    range
        .map(|i| Endpoint::new(format!("10.0.{}.{}:8080", i / 250, i % 250 + 1)).unwrap())
        .collect()
}

/// A fixed pseudo-random sequence of u32 request codes (SplitMix64).
fn codes() -> Vec<u64> {
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    (0..INPUTS)
        .map(|_| {
            s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            (z ^ (z >> 31)) & u64::from(u32::MAX)
        })
        .collect()
}

fn balancer(policy: &str) -> Balancer {
    Balancer::new(policy.parse().unwrap(), endpoints(0..ENDPOINTS)).unwrap()
}

#[inline]
fn pick_release(b: &Balancer, code: u64) {
    let pick = b.pick(&Request::code(code)).unwrap();
    drop(black_box(pick));
}

/// `iters` picks on each of two threads started together; the slower
/// thread's time, so the figure is the time per pick as each thread sees it.
fn two_threads(b: &Balancer, codes: &[u64], iters: u64) -> Duration {
    let barrier = Barrier::new(2);
    thread::scope(|s| {
        let run = |offset: usize| {
            let barrier = &barrier;
            move || {
                barrier.wait();
                let start = Instant::now();
                let mut i = offset;
                for _ in 0..iters {
                    i = (i + 1) & (INPUTS - 1);
                    pick_release(b, codes[i]);
                }
                start.elapsed()
            }
        };
        let a = s.spawn(run(0));
        let c = s.spawn(run(INPUTS / 2));
        a.join().unwrap().max(c.join().unwrap())
    })
}

fn pick_cost(c: &mut Criterion) {
    let codes = codes();
    let policies = [
        ("plain", "c_murmurhash"),
        ("bounded", "c_murmurhash_bl:load_factor=1.25"),
    ];
    let mut g = c.benchmark_group("pick_release/1_thread");
    for (name, policy) in policies {
        let bal = balancer(policy);
        g.bench_function(name, |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) & (INPUTS - 1);
                pick_release(&bal, codes[i]);
            })
        });
        assert_eq!(bal.total_in_flight(), 0);
    }
    g.finish();

    let mut g = c.benchmark_group("pick_release/2_threads");
    for (name, policy) in policies {
        let bal = balancer(policy);
        g.bench_function(name, |b| {
            b.iter_custom(|iters| two_threads(&bal, &codes, iters))
        });
        assert_eq!(bal.total_in_flight(), 0);
    }
    g.finish();
}

/// A hot key past its endpoint's least cap: the pick reads the running total
/// to compute the cap (the path of every bounded pick under load).
/// 200 guards are held: one on the hot code's endpoint (load 1, at the least
/// cap), 199 on other endpoints (the total the cap is computed from); each
/// timed pick of the hot code reads the total, finds room under the cap (3,
/// room for both threads' picks) and reserves on the hot endpoint, then
/// releases.
fn hot_key(c: &mut Criterion) {
    let bal = balancer("c_murmurhash_bl:load_factor=1.25");
    let hot = 0x1234_5678u64;
    let first = bal.pick(&Request::code(hot)).unwrap();
    let owner = first.addr().to_string();
    let mut held = vec![first];
    for code in codes() {
        if held.len() == 200 {
            break;
        }
        let pick = bal.pick(&Request::code(code)).unwrap();
        if pick.addr() != owner {
            held.push(pick);
        }
    }
    assert_eq!(bal.total_in_flight(), 200);
    assert_eq!(bal.cap(&*owner).unwrap(), Some(3), "the hot endpoint's cap");
    let hot_pick = |bal: &Balancer| {
        let pick = bal.pick(&Request::code(hot)).unwrap();
        debug_assert_eq!(pick.addr(), owner);
        drop(black_box(pick));
    };
    let mut g = c.benchmark_group("hot_key_past_floor");
    g.bench_function("1_thread", |b| b.iter(|| hot_pick(&bal)));
    g.bench_function("2_threads", |b| {
        b.iter_custom(|iters| {
            let barrier = Barrier::new(2);
            thread::scope(|s| {
                let run = || {
                    barrier.wait();
                    let start = Instant::now();
                    for _ in 0..iters {
                        hot_pick(&bal);
                    }
                    start.elapsed()
                };
                let a = s.spawn(run);
                let c = s.spawn(run);
                a.join().unwrap().max(c.join().unwrap())
            })
        })
    });
    g.finish();
    let on_owner = held.iter().filter(|p| p.addr() == owner).count();
    assert_eq!(on_owner, 1, "no held guard spilled onto the hot endpoint");
    drop(held);
    assert_eq!(bal.total_in_flight(), 0);
}

/// Picks on `picked` while another thread updates `updated` every millisecond,
/// alternating between two memberships.
fn picks_beside_updates(
    g: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    picked: &Balancer,
    updated: &Balancer,
    memberships: [&[Endpoint]; 2],
    codes: &[u64],
) {
    let stop = AtomicBool::new(false);
    let updates = AtomicU64::new(0);
    thread::scope(|s| {
        s.spawn(|| {
            let mut next = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                next += Duration::from_millis(1);
                let n = updates.fetch_add(1, Ordering::Relaxed);
                let members = memberships[(n % 2) as usize];
                assert!(updated.update(members.iter().cloned()).unwrap());
                if let Some(wait) = next.checked_duration_since(Instant::now()) {
                    thread::sleep(wait);
                }
            }
        });
        let start = Instant::now();
        g.bench_function(name, |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) & (INPUTS - 1);
                pick_release(picked, codes[i]);
            })
        });
        stop.store(true, Ordering::Relaxed);
        let ms = start.elapsed().as_secs_f64() * 1e3;
        let n = updates.load(Ordering::Relaxed);
        // A run filtered to other benchmarks has no updates to report.
        if n > 1 {
            eprintln!(
                "  ({n} updates in {ms:.0} ms: one per {:.2} ms)",
                ms / n as f64
            );
        }
    });
}

/// Picks while another thread swaps the membership every millisecond
/// (alternating endpoints 0..100 and 1..101), against the same picks alone.
/// The control updates a second balancer instead: the same work on the other
/// core, sharing nothing with the picks, which separates the cost of sharing
/// the machine (2 cores, other jobs) from the cost of the swaps themselves.
fn during_updates(c: &mut Criterion) {
    let codes = codes();
    let a = endpoints(0..ENDPOINTS);
    let b_members = endpoints(1..ENDPOINTS + 1);
    for (name, policy) in [
        ("plain", "c_murmurhash"),
        ("bounded", "c_murmurhash_bl:load_factor=1.25"),
    ] {
        let mut g = c.benchmark_group(format!("pick_during_updates/{name}"));
        let bal = balancer(policy);
        g.bench_function("no_updates", |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) & (INPUTS - 1);
                pick_release(&bal, codes[i]);
            })
        });
        let memberships = [&b_members[..], &a[..]];
        picks_beside_updates(&mut g, "update_every_ms", &bal, &bal, memberships, &codes);
        let other = balancer(policy);
        picks_beside_updates(
            &mut g,
            "control_other_balancer_updated",
            &bal,
            &other,
            memberships,
            &codes,
        );
        g.finish();
    }

    // The writer's side: one membership change of a 100 x 100 ring.
    let bal = balancer("c_murmurhash_bl");
    let mut g = c.benchmark_group("update");
    let mut flip = false;
    g.bench_function("c_murmurhash_bl/100x100", |bench| {
        bench.iter(|| {
            flip = !flip;
            let members = if flip { &b_members } else { &a };
            bal.update(members.iter().cloned()).unwrap()
        })
    });
    g.finish();
}

/// Bounded picks once the backends report their load (issue 29): every
/// endpoint has a fresh report of 10 requests in service, so each pick is
/// past the floor and sums the fleet view over the endpoints to get the
/// mean (`O(n)`), against the same balancer before any report (the shared
/// running total). 100 and 1,024 endpoints.
fn reported(c: &mut Criterion) {
    let codes = codes();
    let mut g = c.benchmark_group("reported_view");
    for n in [ENDPOINTS, 1024] {
        let spec = "c_murmurhash_bl:load_factor=1.25 report_max_age=60m";
        let bal: Balancer = Balancer::new(spec.parse().unwrap(), endpoints(0..n)).unwrap();
        g.bench_function(format!("{n}/no_reports"), |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) & (INPUTS - 1);
                pick_release(&bal, codes[i]);
            })
        });
        for e in bal.endpoints() {
            bal.report_load(&e, LoadReport::new(10)).unwrap();
        }
        assert!(bal.reported_loads().iter().all(|(_, l)| *l == Some(10)));
        g.bench_function(format!("{n}/every_endpoint_reported"), |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) & (INPUTS - 1);
                pick_release(&bal, codes[i]);
            })
        });
        assert_eq!(bal.total_in_flight(), 0);
    }
    g.finish();
}

criterion_group!(benches, pick_cost, hot_key, during_updates, reported);
criterion_main!(benches);
