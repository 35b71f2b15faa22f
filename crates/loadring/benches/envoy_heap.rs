//! Peak heap while building Envoy `maglev` tables and `ring_hash` rings,
//! counted by a global allocator (`peak_alloc`), with the `maglev` crate as peer.
//!
//! Run: `cargo bench -p loadring --bench envoy_heap`
//!
//! For each build: `retained` = bytes still allocated after the build (the
//! finished table or balancer), `peak` = the largest allocation total during
//! the build, both over the baseline before it; `transient` = peak - retained,
//! the build's scratch memory.

use loadring::maglev::MaglevTable;
use loadring::{Balancer, Endpoint};
use maglev::Maglev;
use peak_alloc::PeakAlloc;

#[global_allocator]
static ALLOC: PeakAlloc = PeakAlloc;

fn names(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("10.{}.{}.{}:8080", i / 65536, i / 256 % 256, i % 256))
        .collect()
}

/// (retained, peak) bytes of `build` over the usage before it.
fn measure<T>(build: impl FnOnce() -> T) -> (T, usize, usize) {
    let before = ALLOC.current_usage();
    ALLOC.reset_peak_usage();
    let built = build();
    let retained = ALLOC.current_usage().saturating_sub(before);
    let peak = ALLOC.peak_usage().saturating_sub(before);
    (built, retained, peak)
}

fn row(what: &str, n: usize, m: &str, retained: usize, peak: usize) {
    let kib = |b: usize| b as f64 / 1024.0;
    println!(
        "{what:<32} {n:>5} {m:>7} {:>12.1} {:>12.1} {:>12.1}",
        kib(retained),
        kib(peak),
        kib(peak - retained)
    );
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is not supported.
    println!(
        "{:<32} {:>5} {:>7} {:>12} {:>12} {:>12}",
        "build", "hosts", "M", "retained KiB", "peak KiB", "transient KiB"
    );
    for m in [65_537u64, 131_071] {
        for n in [1, 32, 256, 1024] {
            let names = names(n);
            let (table, retained, peak) =
                measure(|| MaglevTable::build(names.iter().map(|s| (s.as_str(), 1)), m).unwrap());
            assert_eq!(table.len() as u64, m);
            row("maglev (loadring table)", n, &m.to_string(), retained, peak);
        }
        let endpoints: Vec<Endpoint> = names(1024)
            .into_iter()
            .map(|a| Endpoint::new(a).unwrap())
            .collect();
        let spec: loadring::PolicySpec = format!("maglev:table_size={m}").parse().unwrap();
        let (balancer, retained, peak) =
            measure(|| Balancer::new(spec, endpoints.clone()).unwrap());
        drop(balancer);
        row(
            "maglev (loadring Balancer)",
            1024,
            &m.to_string(),
            retained,
            peak,
        );
        for n in [1, 32, 256, 1024] {
            let names = names(n);
            let (peer, retained, peak) = measure(|| Maglev::with_capacity(names, m as usize));
            drop(peer);
            row("maglev 0.2 crate", n, &m.to_string(), retained, peak);
        }
    }
    for spec in [
        "ring_hash",
        "ring_hash:min_ring_size=102400",
        "c_murmurhash",
    ] {
        for n in [1, 32, 256, 1024] {
            let endpoints: Vec<Endpoint> = names(n)
                .into_iter()
                .map(|a| Endpoint::new(a).unwrap())
                .collect();
            let parsed: loadring::PolicySpec = spec.parse().unwrap();
            let (balancer, retained, peak) =
                measure(|| Balancer::new(parsed, endpoints.clone()).unwrap());
            let points = balancer.layout().unwrap().unwrap().entries();
            drop(balancer);
            row(spec, n, &format!("{points}p"), retained, peak);
        }
    }
}
