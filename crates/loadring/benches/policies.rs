//! Pick + release through `Balancer::pick` for every classic policy.
//!
//! `cargo bench -p loadring --bench policies -- --warm-up-time 1 --measurement-time 2`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use loadring::{Balancer, Endpoint, Request};

/// `n` endpoints of weights 1..=4 in two zones.
fn endpoints(n: usize) -> Vec<Endpoint> {
    (0..n)
        .map(|i| {
            Endpoint::new(format!("10.0.{}.{}:80", i / 256, i % 256))
                .unwrap()
                .with_weight(i as u32 % 4 + 1)
                .with_zone(if i % 2 == 0 { "a" } else { "b" })
                .unwrap()
        })
        .collect()
}

const SPECS: &[&str] = &[
    "rr",
    "random",
    "wrr",
    "swrr",
    "wr",
    "p2c",
    "p2c:choices=8",
    "zone_first",
    "local_first",
    "zone_first over c_murmurhash_bl",
    // The hashing peers, for scale.
    "c_murmurhash",
];

fn bench_policies(c: &mut Criterion) {
    for n in [16usize, 1024] {
        let mut group = c.benchmark_group(format!("pick_release/{n}"));
        for spec in SPECS {
            let balancer = Balancer::new(spec.parse().unwrap(), endpoints(n)).unwrap();
            let keys: Vec<String> = (0..1024).map(|i| format!("user:{i}")).collect();
            let mut k = 0usize;
            group.bench_function(BenchmarkId::from_parameter(spec), |b| {
                b.iter(|| {
                    k = (k + 1) & 1023;
                    let req = Request::key(&keys[k]).in_zone("a");
                    let pick = balancer.pick(black_box(&req)).unwrap();
                    black_box(pick.addr().len())
                })
            });
        }
        group.finish();
    }
}

/// The slower paths: periods too long to precompute.
fn bench_huge_periods(c: &mut Criterion) {
    let mut group = c.benchmark_group("pick_release_huge_weights");
    for n in [16usize, 1024] {
        let eps: Vec<Endpoint> = endpoints(n)
            .into_iter()
            .enumerate()
            .map(|(i, e)| e.with_weight(u32::MAX - i as u32))
            .collect();
        for spec in ["wrr", "swrr"] {
            let balancer = Balancer::new(spec.parse().unwrap(), eps.clone()).unwrap();
            group.bench_function(BenchmarkId::new(spec, n), |b| {
                b.iter(|| {
                    let pick = balancer.pick(black_box(&Request::new())).unwrap();
                    black_box(pick.addr().len())
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench_floor, bench_policies, bench_huge_periods);
criterion_main!(benches);

/// What every pick pays outside the policy, rebuilt from the same parts as
/// `Balancer::pick` + `Pick::drop`: an arc-swap load, an `Arc` clone and
/// drop, two atomic increments to reserve and two decrements to release.
fn bench_floor(c: &mut Criterion) {
    use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
    use std::sync::Arc;

    struct Member {
        word: AtomicU64,
        total: Arc<AtomicI64>,
    }
    let total = Arc::new(AtomicI64::new(0));
    let snapshot = arc_swap::ArcSwap::from_pointee(vec![Arc::new(Member {
        word: AtomicU64::new(0),
        total: total.clone(),
    })]);
    c.bench_function("floor/balancer_and_guard", |b| {
        b.iter(|| {
            let snap = snapshot.load();
            let m = black_box(&snap[0]).clone();
            m.word.fetch_add(1, Relaxed);
            m.total.fetch_add(1, Relaxed);
            black_box(&m);
            m.word.fetch_sub(1, Relaxed);
            m.total.fetch_sub(1, Relaxed);
            drop(m);
        })
    });
}
