//! loadring against its peers, like for like, in one criterion run.
//!
//! ```text
//! cargo bench --manifest-path bench/peers/Cargo.toml -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! The peers: `pingora-ketama` 0.9 (nginx's ketama ring: CRC32, 160 points
//! per weight unit), `pingora-load-balancing` 0.9 (`LoadBalancer<KetamaHashing>`,
//! the same ring behind pingora's selection API) and `maglev` 0.2 (SipHash
//! table). loadring's rows use brpc's `c_murmurhash` (MurmurHash3 x86_32 of
//! the key) and Envoy's `maglev` (xxHash64 of the key).
//!
//! Rules every comparison here follows (the reason this crate exists):
//!
//! - **One run, the same keys.** Every row reads the same 4096 distinct keys,
//!   `user:` and 9 to 19 digits (14 to 24 bytes), drawn by a fixed SplitMix64
//!   so that every run uses the same keys (their count, lengths and
//!   distinctness are asserted). Each iteration takes the next key (the
//!   index is masked), so neither the cache nor the branch predictor sees one
//!   key over and over.
//! - **Equal sizes.** The same endpoints `10.0.{i/250}.{i%250+1}:8080`, weight
//!   1, at 100 and 1024 endpoints. Rings: `c_murmurhash:replicas=160` against
//!   pingora-ketama's fixed 160 points per weight unit; the point counts are
//!   asserted equal, up to the points pingora-ketama drops as duplicate
//!   hashes (it dedups equal CRC32s; the count of those is asserted small).
//!   Maglev: both tables have 65537 slots (loadring's default
//!   `table_size`, asserted on both sides).
//! - **They agree before they are timed.** For a few hundred keys: `route`,
//!   `pick` and the local handle's `route` and `pick` name the same
//!   endpoint, the bounded pick on an idle balancer is the plain pick, pingora's `select` is its ketama ring's `node`, and
//!   every peer answers `Some`.
//!
//! Groups (functions):
//!
//! - `pick/{100,1024}`: `loadring_pick_drop` (`Balancer::pick`, then the guard
//!   dropped: a reservation and its release), `loadring_local_pick_drop`
//!   (the same through the thread's handle, `Balancer::local`: a cached
//!   snapshot, a guard without reference counting), `pingora_ketama_node`
//!   (`Continuum::node`: a lookup, no reservation), `pingora_lb_select`
//!   (`LoadBalancer::select(key, 256)`: per call it loads the selector,
//!   clones an `Arc` of it, SipHashes the backend into a fresh `HashSet`
//!   (allocates), looks the address up in a `HashMap` (SipHash), reads the
//!   backend's readiness, and returns a clone of the `Backend`). The
//!   `pingora_lb_select` rows are the `pingora-lb` feature (on by default),
//!   whose build needs `cmake`: pingora-core forces flate2's `zlib-ng`, built
//!   by cmake. `--no-default-features` leaves them out and builds with Rust
//!   and a C compiler only.
//! - `route/{100,1024}`: `loadring_route` (`Balancer::route`: the key's
//!   endpoint without a reservation, a borrowed `Route`, nothing allocated)
//!   and `loadring_local_route` (the same through `Balancer::local`) against
//!   `pingora_ketama_node`.
//! - `maglev/{100,1024}`: loadring `maglev:table_size=65537` pick and drop,
//!   and route, shared and local, against the `maglev` crate's `get`.
//! - `build/{100,1024}`: `Balancer::new("c_murmurhash:replicas=160", ..)`
//!   against `Continuum::new(&buckets)`; the inputs are built outside the
//!   timed part (`iter_batched` clones the endpoints in). Both sides are
//!   measured twice, alike: dropped outside the timed part, and built and
//!   dropped inside it (`_and_drop`).
//! - `bounded/{100,1024}`: `c_murmurhash_bl:replicas=160` pick and drop
//!   against plain `c_murmurhash:replicas=160` pick and drop, idle (each
//!   guard dropped before the next pick), shared and through a local handle.
//! - `threads/{1,2}`: at 1024 endpoints, pick and drop (plain and bounded,
//!   shared and through a local handle made on each thread), route (shared
//!   and local) and, for reference, pingora-ketama's `node`, on 1 and on 2
//!   threads at once. Each thread makes `iters` calls on its own key sequence (thread `t`
//!   starts at key `t * 4096 / threads`); the time reported is the wall time
//!   from the first thread's start to the last one's end divided by `iters`:
//!   the time per pick *per thread*, so equal rows at 1 and 2 threads mean
//!   perfect scaling. On a machine shared with other work the 2-thread rows
//!   are the noisiest.

use std::collections::HashSet;
use std::hint::black_box;
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkGroup, Criterion};
use loadring::{Balancer, Endpoint, PolicySpec, Request};
use maglev::{ConsistentHasher, Maglev};
use pingora_ketama::{Bucket, Continuum};
#[cfg(feature = "pingora-lb")]
use pingora_load_balancing::{selection::consistent::KetamaHashing, LoadBalancer};

/// Keys per run (a power of two: the index is masked).
const KEYS: usize = 4096;
const MASK: usize = KEYS - 1;
/// Keys checked for agreement before timing.
const CHECKED: usize = 512;
/// Endpoint counts of the per-size groups.
const SIZES: [usize; 2] = [100, 1024];
/// pingora-ketama's points per weight unit (`DEFAULT_POINT_MULTIPLE`).
const KETAMA_POINTS: usize = 160;
/// loadring's default Maglev table size, given to both Maglev tables.
const MAGLEV_TABLE: usize = 65_537;
/// pingora's `select` walk bound.
#[cfg(feature = "pingora-lb")]
const SELECT_ITERATIONS: usize = 256;

const RING: &str = "c_murmurhash:replicas=160";
const BOUNDED: &str = "c_murmurhash_bl:replicas=160";

/// A fixed SplitMix64 sequence, the same in every run.
fn splitmix64(mut state: u64) -> impl FnMut() -> u64 {
    move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// `KEYS` distinct keys, `user:` and 9 to 19 digits: 14 to 24 bytes.
fn keys() -> Vec<String> {
    let mut next = splitmix64(0x5eed_0000_0000_1234);
    let keys: Vec<String> = (0..KEYS)
        .map(|_| {
            let digits = 9 + (next() % 11) as usize;
            let n = next() % 10u64.pow(digits as u32);
            format!("user:{n:0digits$}")
        })
        .collect();
    assert!(
        keys.iter().all(|k| (14..=24).contains(&k.len())),
        "key lengths"
    );
    for len in [14, 24] {
        assert!(keys.iter().any(|k| k.len() == len), "no key of {len} bytes");
    }
    let distinct: HashSet<&String> = keys.iter().collect();
    assert_eq!(distinct.len(), KEYS, "keys are not distinct");
    keys
}

/// `n` distinct addresses, in brpc's endpoint order (by IP, then port).
fn addrs(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("10.0.{}.{}:8080", i / 250, i % 250 + 1))
        .collect()
}

fn endpoints(addrs: &[String]) -> Vec<Endpoint> {
    addrs.iter().map(|a| Endpoint::new(a).unwrap()).collect()
}

fn spec(text: &str) -> PolicySpec {
    text.parse().unwrap()
}

fn balancer(policy: &str, addrs: &[String]) -> Balancer {
    Balancer::new(spec(policy), endpoints(addrs)).unwrap()
}

fn buckets(addrs: &[String]) -> Vec<Bucket> {
    addrs
        .iter()
        .map(|a| Bucket::new(a.parse().unwrap(), 1))
        .collect()
}

#[cfg(feature = "pingora-lb")]
fn pingora_lb(addrs: &[String]) -> LoadBalancer<KetamaHashing> {
    // Static discovery: `try_from_iter` runs the first `update` itself (it
    // never blocks), so no runtime is needed.
    LoadBalancer::try_from_iter(addrs.iter().map(String::as_str)).unwrap()
}

/// The ring's entries (points or slots), as the balancer reports them.
fn entries(balancer: &Balancer) -> usize {
    balancer
        .layout()
        .unwrap()
        .expect("a hashing policy")
        .entries()
}

/// pingora-ketama's point count: `get_addr` steps an index modulo the ring
/// length, so the steps from 0 back to 0 are the points.
fn ketama_points(continuum: &Continuum) -> usize {
    let mut idx = 0;
    let mut points = 0;
    loop {
        continuum.get_addr(&mut idx).expect("a non-empty ring");
        points += 1;
        if idx == 0 {
            return points;
        }
    }
}

/// Equal ring sizes: loadring makes exactly `160 n` points; pingora-ketama
/// makes `160 n` and drops duplicate hashes (a few at most).
fn check_ring_sizes(balancer: &Balancer, continuum: &Continuum, n: usize) {
    let ours = entries(balancer);
    let theirs = ketama_points(continuum);
    eprintln!("{n} endpoints: loadring {ours} points, pingora-ketama {theirs}");
    assert_eq!(ours, KETAMA_POINTS * n, "loadring points at {n} endpoints");
    assert!(
        theirs <= ours && ours - theirs <= 8,
        "pingora-ketama has {theirs} points, loadring {ours} ({n} endpoints)"
    );
}

fn pick_addr(balancer: &Balancer, key: &[u8]) -> String {
    balancer.pick(&Request::key(key)).unwrap().addr().to_owned()
}

/// `route` and `pick`, shared and local, name the same endpoint.
fn check_route(balancer: &Balancer, keys: &[String]) {
    let local = balancer.local();
    for k in &keys[..CHECKED] {
        let req = Request::key(k);
        let picked = pick_addr(balancer, k.as_bytes());
        let route = balancer.route(&req).unwrap().expect("a hashing policy");
        assert_eq!(route.addr(), picked, "route is pick");
        assert_eq!(local.pick(&req).unwrap().addr(), picked, "local pick");
        let local_route = local.route(&req).unwrap().expect("a hashing policy");
        assert_eq!(local_route.addr(), picked, "local route");
    }
    assert_eq!(balancer.total_in_flight(), 0, "a guard leaked");
}

/// Each iteration takes the next key.
fn bench_keys(
    g: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    keys: &[String],
    mut call: impl FnMut(&[u8]),
) {
    g.bench_function(name, |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) & MASK;
            call(black_box(keys[i].as_bytes()));
        })
    });
}

/// The rows `loadring_{kind}pick_drop` (`Balancer::pick`, then the guard
/// dropped) and `loadring_local_{kind}pick_drop` (the same through a local
/// handle, dropped when the rows are done).
fn bench_picks(
    g: &mut BenchmarkGroup<'_, WallTime>,
    kind: &str,
    balancer: &Balancer,
    keys: &[String],
) {
    bench_keys(g, &format!("loadring_{kind}pick_drop"), keys, |k| {
        drop(black_box(balancer.pick(&Request::key(k)).unwrap()));
    });
    let local = balancer.local();
    bench_keys(g, &format!("loadring_local_{kind}pick_drop"), keys, |k| {
        drop(black_box(local.pick(&Request::key(k)).unwrap()));
    });
}

/// The rows `loadring_route` and `loadring_local_route`.
fn bench_routes(g: &mut BenchmarkGroup<'_, WallTime>, balancer: &Balancer, keys: &[String]) {
    bench_keys(g, "loadring_route", keys, |k| {
        black_box(balancer.route(&Request::key(k)).unwrap());
    });
    let local = balancer.local();
    bench_keys(g, "loadring_local_route", keys, |k| {
        black_box(local.route(&Request::key(k)).unwrap());
    });
}

/// `threads` threads each make `iters` calls at once, each on its own key
/// sequence; returns the wall time from the first start to the last end, so
/// that criterion's time per iteration is the time per call per thread.
/// `make` runs on each thread before the start, for per-thread state.
fn per_thread<M, F>(threads: usize, iters: u64, keys: &[String], make: &M) -> Duration
where
    M: Fn() -> F + Sync,
    F: FnMut(&[u8]),
{
    let barrier = Barrier::new(threads);
    let spans: Vec<(Instant, Instant)> = thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let barrier = &barrier;
                s.spawn(move || {
                    let mut call = make();
                    let mut i = t * KEYS / threads;
                    barrier.wait();
                    let start = Instant::now();
                    for _ in 0..iters {
                        i = (i + 1) & MASK;
                        call(black_box(keys[i].as_bytes()));
                    }
                    (start, Instant::now())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let start = spans.iter().map(|s| s.0).min().unwrap();
    let end = spans.iter().map(|s| s.1).max().unwrap();
    end - start
}

fn bench_threads<M, F>(
    g: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    threads: usize,
    keys: &[String],
    make: M,
) where
    M: Fn() -> F + Sync,
    F: FnMut(&[u8]),
{
    g.bench_function(name, |b| {
        b.iter_custom(|iters| per_thread(threads, iters, keys, &make))
    });
}

fn pick(c: &mut Criterion) {
    let keys = keys();
    for n in SIZES {
        let addrs = addrs(n);
        let bal = balancer(RING, &addrs);
        let continuum = Continuum::new(&buckets(&addrs));
        check_ring_sizes(&bal, &continuum, n);
        check_route(&bal, &keys);
        for k in &keys[..CHECKED] {
            assert!(
                continuum.node(k.as_bytes()).is_some(),
                "pingora-ketama answers"
            );
        }
        #[cfg(feature = "pingora-lb")]
        let lb = pingora_lb(&addrs);
        #[cfg(feature = "pingora-lb")]
        for k in &keys[..CHECKED] {
            let k = k.as_bytes();
            let node = continuum.node(k).unwrap();
            let selected = lb.select(k, SELECT_ITERATIONS).expect("pingora answers");
            assert_eq!(
                selected.addr.to_string(),
                node.to_string(),
                "select is node"
            );
        }

        let mut g = c.benchmark_group(format!("pick/{n}"));
        bench_picks(&mut g, "", &bal, &keys);
        bench_keys(&mut g, "pingora_ketama_node", &keys, |k| {
            black_box(continuum.node(k));
        });
        #[cfg(feature = "pingora-lb")]
        bench_keys(&mut g, "pingora_lb_select", &keys, |k| {
            black_box(lb.select(k, SELECT_ITERATIONS));
        });
        g.finish();
    }
}

fn route(c: &mut Criterion) {
    let keys = keys();
    for n in SIZES {
        let addrs = addrs(n);
        let bal = balancer(RING, &addrs);
        let continuum = Continuum::new(&buckets(&addrs));
        check_ring_sizes(&bal, &continuum, n);
        check_route(&bal, &keys);

        let mut g = c.benchmark_group(format!("route/{n}"));
        bench_routes(&mut g, &bal, &keys);
        bench_keys(&mut g, "pingora_ketama_node", &keys, |k| {
            black_box(continuum.node(k));
        });
        g.finish();
    }
}

fn maglev(c: &mut Criterion) {
    let keys = keys();
    for n in SIZES {
        let addrs = addrs(n);
        let bal = balancer(&format!("maglev:table_size={MAGLEV_TABLE}"), &addrs);
        // The crate takes the first prime at or above the capacity.
        let peer = Maglev::with_capacity(addrs.clone(), MAGLEV_TABLE);
        assert_eq!(entries(&bal), MAGLEV_TABLE, "loadring maglev slots");
        assert_eq!(peer.capacity(), MAGLEV_TABLE, "maglev crate slots");
        check_route(&bal, &keys);
        for k in &keys[..CHECKED] {
            assert!(peer.get(k.as_bytes()).is_some(), "the maglev crate answers");
        }

        let mut g = c.benchmark_group(format!("maglev/{n}"));
        bench_picks(&mut g, "", &bal, &keys);
        bench_routes(&mut g, &bal, &keys);
        bench_keys(&mut g, "maglev_crate_get", &keys, |k| {
            black_box(peer.get(k));
        });
        g.finish();
    }
}

fn build(c: &mut Criterion) {
    for n in SIZES {
        let addrs = addrs(n);
        let ring = spec(RING);
        let eps = endpoints(&addrs);
        let buckets = buckets(&addrs);
        check_ring_sizes(
            &Balancer::new(ring.clone(), eps.clone()).unwrap(),
            &Continuum::new(&buckets),
            n,
        );

        // Both sides alike: built inside the timed part and dropped outside
        // it (criterion drops `iter_batched` outputs after timing), then
        // built and dropped inside it (what a rebuild costs a process in the
        // long run, freeing included).
        let mut g = c.benchmark_group(format!("build/{n}"));
        g.sample_size(20);
        g.bench_function("loadring_balancer_new", |b| {
            b.iter_batched(
                || (ring.clone(), eps.clone()),
                |(ring, eps)| Balancer::new(ring, eps).unwrap(),
                BatchSize::SmallInput,
            )
        });
        g.bench_function("pingora_ketama_continuum_new", |b| {
            b.iter_batched(
                || (),
                |()| Continuum::new(black_box(&buckets)),
                BatchSize::SmallInput,
            )
        });
        g.bench_function("loadring_balancer_new_and_drop", |b| {
            b.iter_batched(
                || (ring.clone(), eps.clone()),
                |(ring, eps)| drop(black_box(Balancer::new(ring, eps).unwrap())),
                BatchSize::SmallInput,
            )
        });
        g.bench_function("pingora_ketama_continuum_new_and_drop", |b| {
            b.iter_batched(
                || (),
                |()| drop(black_box(Continuum::new(black_box(&buckets)))),
                BatchSize::SmallInput,
            )
        });
        g.finish();
    }
}

fn bounded(c: &mut Criterion) {
    let keys = keys();
    for n in SIZES {
        let addrs = addrs(n);
        let plain = balancer(RING, &addrs);
        let bounded = balancer(BOUNDED, &addrs);
        assert_eq!(entries(&plain), entries(&bounded), "ring sizes");
        // Idle, the bounded pick is the key's owner: the plain pick.
        for k in &keys[..CHECKED] {
            let k = k.as_bytes();
            assert_eq!(pick_addr(&bounded, k), pick_addr(&plain, k));
        }
        assert_eq!(bounded.total_in_flight(), 0, "a guard leaked");

        let mut g = c.benchmark_group(format!("bounded/{n}"));
        bench_picks(&mut g, "bounded_", &bounded, &keys);
        bench_picks(&mut g, "", &plain, &keys);
        g.finish();
    }
}

fn threads(c: &mut Criterion) {
    let keys = keys();
    let addrs = addrs(1024);
    let plain = balancer(RING, &addrs);
    let bounded = balancer(BOUNDED, &addrs);
    let continuum = Continuum::new(&buckets(&addrs));
    check_ring_sizes(&plain, &continuum, 1024);
    check_route(&plain, &keys);
    check_route(&bounded, &keys);
    for threads in [1, 2] {
        let mut g = c.benchmark_group(format!("threads/{threads}"));
        bench_threads(&mut g, "loadring_pick_drop", threads, &keys, || {
            |k: &[u8]| drop(black_box(plain.pick(&Request::key(k)).unwrap()))
        });
        bench_threads(&mut g, "loadring_local_pick_drop", threads, &keys, || {
            let local = plain.local();
            move |k: &[u8]| drop(black_box(local.pick(&Request::key(k)).unwrap()))
        });
        bench_threads(&mut g, "loadring_bounded_pick_drop", threads, &keys, || {
            |k: &[u8]| drop(black_box(bounded.pick(&Request::key(k)).unwrap()))
        });
        bench_threads(
            &mut g,
            "loadring_local_bounded_pick_drop",
            threads,
            &keys,
            || {
                let local = bounded.local();
                move |k: &[u8]| drop(black_box(local.pick(&Request::key(k)).unwrap()))
            },
        );
        bench_threads(&mut g, "loadring_route", threads, &keys, || {
            |k: &[u8]| {
                black_box(plain.route(&Request::key(k)).unwrap());
            }
        });
        bench_threads(&mut g, "loadring_local_route", threads, &keys, || {
            let local = plain.local();
            move |k: &[u8]| {
                black_box(local.route(&Request::key(k)).unwrap());
            }
        });
        bench_threads(&mut g, "pingora_ketama_node", threads, &keys, || {
            |k: &[u8]| {
                black_box(continuum.node(k));
            }
        });
        g.finish();
    }
    assert_eq!(plain.total_in_flight(), 0, "a guard leaked");
    assert_eq!(bounded.total_in_flight(), 0, "a guard leaked");
}

criterion_group!(benches, pick, route, maglev, build, bounded, threads);
criterion_main!(benches);
