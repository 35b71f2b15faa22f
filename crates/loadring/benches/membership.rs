//! One membership change at 1024 endpoints x 160 points: the incremental
//! path (`insert`/`remove`, which merge or drop one endpoint's points) against
//! a full rebuild (`update` with the whole list), in the same run.
//!
//! ```text
//! cargo bench -p loadring --bench membership -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! Each iteration changes the membership twice (one endpoint in, then out
//! again) so that every iteration starts from the same 1023 endpoints; the
//! figures are per pair of changes.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use loadring::{Balancer, Endpoint};

const ENDPOINTS: usize = 1024;

fn endpoints() -> Vec<Endpoint> {
    (0..ENDPOINTS)
        .map(|i| Endpoint::new(format!("10.0.{}.{}:8080", i / 250, i % 250 + 1)).unwrap())
        .collect()
}

fn membership(c: &mut Criterion) {
    let mut group = c.benchmark_group("membership_1024x160");
    for spec in ["c_murmurhash:replicas=160", "c_murmurhash_bl:replicas=160"] {
        let all = endpoints();
        let (rest, last) = all.split_at(ENDPOINTS - 1);
        let last = last[0].clone();
        let balancer = Balancer::new(spec.parse().unwrap(), rest.to_vec()).unwrap();
        group.bench_function(format!("{spec}/insert+remove"), |b| {
            b.iter(|| {
                balancer.insert(last.clone(), ()).unwrap();
                balancer.remove(black_box(&last)).unwrap();
            })
        });
        group.bench_function(format!("{spec}/update+update"), |b| {
            b.iter(|| {
                balancer.update(all.iter().cloned()).unwrap();
                balancer.update(black_box(rest).iter().cloned()).unwrap();
            })
        });
    }
    group.finish();
}

criterion_group!(benches, membership);
criterion_main!(benches);
