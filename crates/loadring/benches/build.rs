//! Ring build, whole: `Balancer::new` for `c_murmurhash:replicas=160` against
//! pingora-ketama's `Continuum::new`, with the same number of points (160 per
//! endpoint, pingora-ketama's fixed multiple) in the same run.
//!
//! ```text
//! cargo bench -p loadring --bench build -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! Our side is the whole public build: endpoint checks and dedup, members,
//! the ring's hashing, sort and index, and the picker. The endpoints are made
//! outside the timed part and cloned in per iteration (`iter_batched`), as
//! pingora-ketama's buckets are borrowed.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use loadring::{Balancer, Endpoint, PolicySpec};
use pingora_ketama::{Bucket, Continuum};

/// `n` distinct addresses, already in brpc's endpoint order (by IP, then port).
fn addrs(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("10.0.{}.{}:8080", i / 250, i % 250 + 1))
        .collect()
}

fn build(c: &mut Criterion) {
    for n in [100usize, 1024] {
        let addrs = addrs(n);
        let endpoints: Vec<Endpoint> = addrs.iter().map(|a| Endpoint::new(a).unwrap()).collect();
        let spec: PolicySpec = "c_murmurhash:replicas=160".parse().unwrap();
        let buckets: Vec<Bucket> = addrs
            .iter()
            .map(|a| Bucket::new(a.parse().unwrap(), 1))
            .collect();

        let mut g = c.benchmark_group(format!("build/{n}x160"));
        g.bench_function("loadring_balancer_new", |b| {
            b.iter_batched(
                || endpoints.clone(),
                |e| Balancer::new(spec.clone(), e).unwrap(),
                BatchSize::SmallInput,
            )
        });
        g.bench_function("pingora_ketama_continuum_new", |b| {
            b.iter(|| Continuum::new(black_box(&buckets)))
        });
        g.finish();
    }
}

criterion_group!(benches, build);
criterion_main!(benches);
