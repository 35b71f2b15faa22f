//! Ring lookup and build, loadring alone: brpc's `c_murmurhash` through
//! `Balancer::pick` (shared and through the thread's local handle) against
//! the raw `Ring::locate` under it, and `Balancer::new` against the ring's
//! sort alone. What the balancer adds to the ring is the difference.
//!
//! ```text
//! cargo bench -p loadring --bench ring -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! Lookups cycle through 1024 pseudo-random codes (or 16-byte keys), so that
//! neither the branch predictor nor the cache sees one hash over and over.
//! The peers (pingora-ketama, pingora-load-balancing, the `maglev` crate) are
//! measured on equal ring sizes and the same keys in `bench/peers`, a crate
//! outside the workspace.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion};
use loadring::hash::murmur3_x86_32;
use loadring::ring::Ring;
use loadring::{Balancer, Endpoint, Request};

/// Inputs per lookup benchmark (a power of two: the index is masked).
const INPUTS: usize = 1024;

/// `n` distinct addresses, already in brpc's endpoint order (by IP, then port).
fn addrs(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("10.0.{}.{}:8080", i / 250, i % 250 + 1))
        .collect()
}

/// A fixed pseudo-random sequence (SplitMix64), the same in every run.
fn randoms(n: usize) -> Vec<u64> {
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    (0..n)
        .map(|_| {
            s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        })
        .collect()
}

fn codes() -> Vec<u32> {
    randoms(INPUTS).into_iter().map(|r| r as u32).collect()
}

/// 16-byte keys such as `user:04721938465`.
fn keys() -> Vec<[u8; 16]> {
    randoms(INPUTS)
        .into_iter()
        .map(|r| {
            let text = format!("user:{:011}", r % 100_000_000_000);
            text.as_bytes().try_into().expect("5 + 11 bytes")
        })
        .collect()
}

fn balancer(addrs: &[String], replicas: u32) -> Balancer {
    let endpoints: Vec<Endpoint> = addrs.iter().map(|a| Endpoint::new(a).unwrap()).collect();
    let spec = format!("c_murmurhash:replicas={replicas}").parse().unwrap();
    Balancer::new(spec, endpoints).unwrap()
}

/// brpc's murmur points (`"<addr>-<i>"`), unsorted, owned by the address index.
fn murmur_entries(addrs: &[String], replicas: u32) -> Vec<(u32, u32)> {
    let mut entries = Vec::with_capacity(addrs.len() * replicas as usize);
    for (owner, addr) in addrs.iter().enumerate() {
        for i in 0..replicas {
            let name = format!("{addr}-{i}");
            entries.push((murmur3_x86_32(name.as_bytes(), 0), owner as u32));
        }
    }
    entries
}

/// The raw ring: the same points as the balancer's, without the balancer.
fn raw_ring(addrs: &[String], replicas: u32) -> Ring<u32> {
    // The addresses are generated in brpc's order, so rank = index.
    let rank: Vec<u32> = (0..addrs.len() as u32).collect();
    Ring::build(murmur_entries(addrs, replicas), &rank)
}

/// The raw ring and the balancer must agree, or the bench measures the wrong thing.
fn check_raw_ring(balancer: &Balancer, ring: &Ring<u32>, addrs: &[String], codes: &[u32]) {
    for &c in codes {
        let pick = balancer.pick(&Request::code(u64::from(c))).unwrap();
        assert_eq!(pick.addr(), addrs[ring.owner(ring.locate(c))], "code {c}");
    }
}

fn lookup(c: &mut Criterion) {
    let addrs = addrs(100);
    let codes = codes();
    let keys = keys();
    for replicas in [100u32, 160] {
        let bal = balancer(&addrs, replicas);
        let ring = raw_ring(&addrs, replicas);
        check_raw_ring(&bal, &ring, &addrs, &codes);
        let local = bal.local();

        let mut g = c.benchmark_group(format!("lookup_code/100x{replicas}"));
        g.bench_function("loadring_pick", |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) & (INPUTS - 1);
                let pick = bal.pick(&Request::code(u64::from(codes[i]))).unwrap();
                drop(black_box(pick));
            })
        });
        g.bench_function("loadring_local_pick", |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) & (INPUTS - 1);
                let pick = local.pick(&Request::code(u64::from(codes[i]))).unwrap();
                drop(black_box(pick));
            })
        });
        g.bench_function("loadring_ring", |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) & (INPUTS - 1);
                ring.owner(ring.locate(black_box(codes[i])))
            })
        });
        g.finish();

        let mut g = c.benchmark_group(format!("lookup_key16/100x{replicas}"));
        g.bench_function("loadring_pick", |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) & (INPUTS - 1);
                let pick = bal.pick(&Request::key(black_box(&keys[i]))).unwrap();
                drop(black_box(pick));
            })
        });
        g.bench_function("loadring_local_pick", |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) & (INPUTS - 1);
                let pick = local.pick(&Request::key(black_box(&keys[i]))).unwrap();
                drop(black_box(pick));
            })
        });
        g.bench_function("loadring_ring", |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) & (INPUTS - 1);
                ring.owner(ring.locate(murmur3_x86_32(black_box(&keys[i]), 0)))
            })
        });
        g.finish();
    }
}

fn build(c: &mut Criterion) {
    let mut g = c.benchmark_group("build_x100");
    g.sample_size(20);
    for n in [1usize, 32, 256, 1024] {
        let addrs = addrs(n);
        let endpoints: Vec<Endpoint> = addrs.iter().map(|a| Endpoint::new(a).unwrap()).collect();
        let spec: loadring::PolicySpec = "c_murmurhash:replicas=100".parse().unwrap();
        g.bench_with_input(BenchmarkId::new("loadring_balancer", n), &n, |b, _| {
            b.iter_batched(
                || endpoints.clone(),
                |e| Balancer::new(spec.clone(), e).unwrap(),
                BatchSize::SmallInput,
            )
        });
        // The sort and index alone, from points already hashed.
        let entries = murmur_entries(&addrs, 100);
        let rank: Vec<u32> = (0..n as u32).collect();
        g.bench_with_input(BenchmarkId::new("loadring_ring_sort", n), &n, |b, _| {
            b.iter_batched(
                || entries.clone(),
                |e| Ring::build(e, &rank),
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
}

/// Each family at its system's defaults over 1,024 endpoints: the build
/// (`Balancer::new`) and a pick by 16-byte key (shared and local, the guard
/// dropped), beside `c_murmurhash`.
///
/// ```text
/// cargo bench -p loadring --bench ring -- family_1024 --warm-up-time 1 --measurement-time 2
/// ```
fn families(c: &mut Criterion) {
    let addrs = addrs(1024);
    let endpoints: Vec<Endpoint> = addrs.iter().map(|a| Endpoint::new(a).unwrap()).collect();
    let keys = keys();
    let mut g = c.benchmark_group("family_1024");
    g.sample_size(20);
    for spec in ["c_murmurhash", "dubbo", "pixiu_ring"] {
        let parsed: loadring::PolicySpec = spec.parse().unwrap();
        g.bench_function(BenchmarkId::new("build", spec), |b| {
            b.iter_batched(
                || endpoints.clone(),
                |e| Balancer::new(parsed.clone(), e).unwrap(),
                BatchSize::SmallInput,
            )
        });
        let bal = Balancer::new(parsed, endpoints.clone()).unwrap();
        g.bench_function(BenchmarkId::new("pick", spec), |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) & (INPUTS - 1);
                let pick = bal.pick(&Request::key(&keys[i][..])).unwrap();
                drop(black_box(pick));
            })
        });
        let local = bal.local();
        g.bench_function(BenchmarkId::new("local_pick", spec), |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) & (INPUTS - 1);
                let pick = local.pick(&Request::key(&keys[i][..])).unwrap();
                drop(black_box(pick));
            })
        });
    }
    g.finish();
}

criterion_group!(benches, lookup, build, families);
criterion_main!(benches);
