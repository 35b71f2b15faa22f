//! Envoy `ring_hash` and `maglev`: build time and lookup time, with peers.
//!
//! Run: `cargo bench -p loadring --bench envoy -- --measurement-time 2 --warm-up-time 1`
//! (peak heap during builds: `cargo bench -p loadring --bench envoy_heap`).
//!
//! Peers in the same run: the `maglev` crate (0.2: unweighted, SipHash, stores
//! every host's permutation) and loadring's own `c_murmurhash` ring.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion};
use loadring::maglev::MaglevTable;
use loadring::{Balancer, Endpoint, Request};
use maglev::{ConsistentHasher, Maglev};

const HOSTS: [usize; 4] = [1, 32, 256, 1024];
const SIZES: [u64; 2] = [65_537, 131_071];

fn names(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("10.{}.{}.{}:8080", i / 65536, i / 256 % 256, i % 256))
        .collect()
}

fn endpoints(n: usize) -> Vec<Endpoint> {
    names(n)
        .into_iter()
        .map(|a| Endpoint::new(a).expect("valid address"))
        .collect()
}

/// Request codes spread over the whole u64 range (splitmix64).
fn codes(n: usize) -> Vec<u64> {
    let mut x = 0x1234_5678u64;
    (0..n)
        .map(|_| {
            x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        })
        .collect()
}

fn build_maglev(c: &mut Criterion) {
    let mut group = c.benchmark_group("build/maglev");
    group.sample_size(20);
    for m in SIZES {
        for n in HOSTS {
            let names = names(n);
            group.bench_with_input(
                BenchmarkId::new(format!("loadring/M={m}"), n),
                &n,
                |b, _| {
                    b.iter_with_large_drop(|| {
                        MaglevTable::build(names.iter().map(|s| (s.as_str(), 1)), m).unwrap()
                    })
                },
            );
        }
        // The whole policy: endpoint checks, pool, table.
        let eps = endpoints(1024);
        let spec: loadring::PolicySpec = format!("maglev:table_size={m}").parse().unwrap();
        group.bench_with_input(
            BenchmarkId::new(format!("balancer/M={m}"), 1024),
            &1024,
            |b, _| {
                b.iter_batched(
                    || eps.clone(),
                    |eps| Balancer::new(spec.clone(), eps).unwrap(),
                    BatchSize::SmallInput,
                )
            },
        );
        // Uneven weights 1..=100 (Envoy's scan), and the same plus one host
        // of weight 10000 (the calendar of due hosts: 166 hosts per slot).
        for (label, heavy) in [("w1-100", None), ("w1-100+heavy", Some(10_000))] {
            let weighted: Vec<(String, u32)> = names(1024)
                .into_iter()
                .enumerate()
                .map(|(i, s)| {
                    let w = match heavy {
                        Some(w) if i == 500 => w,
                        _ => 1 + (i as u32 * 37) % 100,
                    };
                    (s, w)
                })
                .collect();
            group.bench_with_input(
                BenchmarkId::new(format!("loadring-{label}/M={m}"), 1024),
                &1024,
                |b, _| {
                    b.iter_with_large_drop(|| {
                        MaglevTable::build(weighted.iter().map(|(s, w)| (s.as_str(), *w)), m)
                            .unwrap()
                    })
                },
            );
        }
    }
    group.finish();

    // The peer allocates N permutations of M words: keep its samples few.
    let mut group = c.benchmark_group("build/maglev-crate");
    group.sample_size(10);
    for m in SIZES {
        for n in HOSTS {
            let names = names(n);
            group.bench_with_input(
                BenchmarkId::new(format!("maglev-0.2/M={m}"), n),
                &n,
                |b, _| {
                    b.iter_batched(
                        || names.clone(),
                        |names| Maglev::with_capacity(names, m as usize),
                        BatchSize::SmallInput,
                    )
                },
            );
        }
    }
    group.finish();
}

fn build_rings(c: &mut Criterion) {
    let mut group = c.benchmark_group("build/ring");
    group.sample_size(20);
    for n in HOSTS {
        let eps = endpoints(n);
        for spec in [
            "ring_hash",
            "ring_hash:min_ring_size=102400",
            "c_murmurhash",
        ] {
            let parsed: loadring::PolicySpec = spec.parse().unwrap();
            group.bench_with_input(BenchmarkId::new(spec, n), &n, |b, _| {
                b.iter_batched(
                    || eps.clone(),
                    |eps| Balancer::new(parsed.clone(), eps).unwrap(),
                    BatchSize::SmallInput,
                )
            });
        }
    }
    group.finish();
}

fn lookup(c: &mut Criterion) {
    const MASK: usize = 4095;
    let codes = codes(MASK + 1);
    let mut group = c.benchmark_group("lookup");
    for m in SIZES {
        let names = names(1024);
        let table = MaglevTable::build(names.iter().map(|s| (s.as_str(), 1)), m).unwrap();
        group.bench_function(BenchmarkId::new(format!("maglev-table/M={m}"), 1024), |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) & MASK;
                table.lookup(black_box(codes[i]))
            })
        });
        // The same table read with a plain 64-bit `%`, for the reduction's cost.
        let plain: Vec<u16> = (0..table.len()).map(|s| table.owner(s) as u16).collect();
        group.bench_function(
            BenchmarkId::new(format!("plain-mod-u16/M={m}"), 1024),
            |b| {
                let mut i = 0;
                b.iter(|| {
                    i = (i + 1) & MASK;
                    let code = black_box(codes[i]);
                    plain[(code % plain.len() as u64) as usize]
                })
            },
        );
        let peer = Maglev::with_capacity(names.clone(), m as usize);
        group.bench_function(
            BenchmarkId::new(format!("maglev-0.2-get/M={m}"), 1024),
            |b| {
                let mut i = 0;
                b.iter(|| {
                    i = (i + 1) & MASK;
                    peer.get(&black_box(codes[i])).map(String::len)
                })
            },
        );
    }
    // End to end: snapshot load, walk, in-flight reservation and release.
    let eps = endpoints(1024);
    for spec in ["maglev:table_size=131071", "ring_hash", "c_murmurhash"] {
        let balancer = Balancer::new(spec.parse().unwrap(), eps.clone()).unwrap();
        group.bench_function(BenchmarkId::new(format!("pick/{spec}"), 1024), |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) & MASK;
                // c_murmurhash takes 32-bit codes.
                let code = if spec == "c_murmurhash" {
                    codes[i] >> 32
                } else {
                    codes[i]
                };
                balancer.pick(&Request::code(black_box(code))).unwrap()
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_secs(1));
    targets = build_maglev, build_rings, lookup
}
criterion_main!(benches);
