//! Ring lookup and build: loadring's `c_murmurhash` against the crates
//! `hashring` and `pingora-ketama`, on the same endpoints in the same run.
//!
//! ```text
//! cargo bench -p loadring --bench ring -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! Lookups cycle through 1024 pseudo-random codes (or 16-byte keys), so that
//! neither the branch predictor nor the cache sees one hash over and over.
//! Point counts: ours and hashring's are `endpoints x replicas`; pingora-ketama
//! always makes 160 points per weight unit, so in the `x100` groups it has 1.6
//! times more points than the others (one more binary-search step).

use std::hint::black_box;
use std::net::SocketAddr;

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion};
use hashring::HashRing;
use loadring::hash::murmur3_x86_32;
use loadring::ring::Ring;
use loadring::{Balancer, Endpoint, Request};
use pingora_ketama::{Bucket, Continuum};

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

#[derive(Clone, Copy, Debug, Hash, PartialEq)]
struct VNode {
    addr: SocketAddr,
    id: u32,
}

fn vnodes(addrs: &[String], replicas: u32) -> Vec<VNode> {
    addrs
        .iter()
        .flat_map(|a| {
            let addr: SocketAddr = a.parse().unwrap();
            (0..replicas).map(move |id| VNode { addr, id })
        })
        .collect()
}

fn hash_ring(addrs: &[String], replicas: u32) -> HashRing<VNode> {
    let mut ring = HashRing::new();
    ring.batch_add(vnodes(addrs, replicas));
    ring
}

fn buckets(addrs: &[String]) -> Vec<Bucket> {
    addrs
        .iter()
        .map(|a| Bucket::new(a.parse().unwrap(), 1))
        .collect()
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
        let hring = hash_ring(&addrs, replicas);
        let continuum = Continuum::new(&buckets(&addrs));

        let mut g = c.benchmark_group(format!("lookup_code/100x{replicas}"));
        g.bench_function("loadring_pick", |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) & (INPUTS - 1);
                let pick = bal.pick(&Request::code(u64::from(codes[i]))).unwrap();
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
        g.bench_function("hashring", |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) & (INPUTS - 1);
                hring.get(&black_box(codes[i])).map(|v| v.addr)
            })
        });
        // pingora-ketama only looks up keys: the code's 4 bytes are its
        // shortest key (one CRC32 of 4 bytes, then its binary search).
        g.bench_function("pingora_ketama", |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) & (INPUTS - 1);
                continuum.node(&black_box(codes[i]).to_le_bytes())
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
        g.bench_function("loadring_ring", |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) & (INPUTS - 1);
                ring.owner(ring.locate(murmur3_x86_32(black_box(&keys[i]), 0)))
            })
        });
        g.bench_function("hashring", |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) & (INPUTS - 1);
                hring.get(black_box(&keys[i])).map(|v| v.addr)
            })
        });
        g.bench_function("pingora_ketama", |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) & (INPUTS - 1);
                continuum.node(black_box(&keys[i]))
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
        let nodes = vnodes(&addrs, 100);
        g.bench_with_input(BenchmarkId::new("hashring", n), &n, |b, _| {
            b.iter_batched(
                || nodes.clone(),
                |v| {
                    let mut ring = HashRing::new();
                    ring.batch_add(v);
                    ring
                },
                BatchSize::SmallInput,
            )
        });
        // 160 points per endpoint: pingora-ketama's fixed multiple.
        let buckets = buckets(&addrs);
        g.bench_with_input(BenchmarkId::new("pingora_ketama_x160", n), &n, |b, _| {
            b.iter(|| Continuum::new(&buckets))
        });
    }
    g.finish();
}

criterion_group!(benches, lookup, build);
criterion_main!(benches);
