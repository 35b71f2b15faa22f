//! The gateway's own work per request, around the HTTP exchange: the key,
//! the pick (with its spill count), the outcome and the metrics.
//!
//! ```text
//! cargo bench -p loadring-proxy --bench request_path -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! Each iteration is one first attempt of one request; guards are released
//! at once, so bounded picks find room at the key's owner (the cost of the
//! bookkeeping, not of spilling).

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use http::request::Parts;
use loadring::Outcome;
use loadring_proxy::internals::{Cluster, KeyStyle, Metrics};
use loadring_proxy::{ClusterConfig, KeySpec};

const ENDPOINTS: usize = 16;
const USERS: usize = 1024;
const PEER: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 1, 2, 3));

fn requests() -> Vec<Parts> {
    (0..USERS)
        .map(|i| {
            http::Request::get(format!("/items/{i}?page=2"))
                .header("x-user", format!("user{i}"))
                .header("accept", "*/*")
                .body(())
                .unwrap()
                .into_parts()
                .0
        })
        .collect()
}

fn cluster(policy: &str) -> Cluster {
    let mut c = ClusterConfig::new("default", policy.parse().unwrap());
    c.endpoints = (0..ENDPOINTS)
        .map(|i| format!("10.0.0.{}:8080", i + 1).parse().unwrap())
        .collect();
    c.key = KeySpec::parse(&["header:x-user"]).unwrap();
    Cluster::new(c).unwrap()
}

fn key(c: &mut Criterion) {
    let parts = requests();
    let mut g = c.benchmark_group("key");
    for (name, source, style) in [
        ("header", "header:x-user", KeyStyle::Value),
        ("path", "path", KeyStyle::Value),
        ("header_envoy", "header:x-user", KeyStyle::Envoy),
    ] {
        let spec = KeySpec::parse(&[source]).unwrap();
        let mut i = 0;
        g.bench_function(name, |b| {
            b.iter(|| {
                i = (i + 1) % USERS;
                black_box(spec.evaluate(black_box(&parts[i]), PEER, style))
            })
        });
    }
    g.finish();
}

fn metrics(c: &mut Criterion) {
    let mut g = c.benchmark_group("metrics");
    for (name, labelled) in [("one_cluster", false), ("by_cluster", true)] {
        let metrics = Metrics::new(labelled);
        let cluster = cluster("c_murmurhash");
        let upstreams = cluster.upstreams();
        let label: Arc<str> = "default".into();
        let mut i = 0;
        g.bench_function(name, |b| {
            b.iter(|| {
                i = (i + 1) % upstreams.len();
                metrics.request(&label, &upstreams[i], 200);
            })
        });
    }
    g.finish();
}

/// One first attempt: the pick (and its spill), then the outcome reported
/// to the policy, whose lifecycle does passive ejection (`eject_after`'s
/// default, 5, as the gateway runs it).
fn attempt(c: &mut Criterion) {
    let parts = requests();
    let mut g = c.benchmark_group("attempt");
    for (name, policy) in [("plain", "c_murmurhash"), ("bounded", "c_murmurhash_bl")] {
        let cluster = cluster(policy);
        let keys: Vec<_> = parts
            .iter()
            .map(|p| cluster.key().evaluate(p, PEER, cluster.key_style()))
            .collect();
        let mut i = 0;
        g.bench_function(name, |b| {
            b.iter(|| {
                i = (i + 1) % USERS;
                let selected = cluster.select(keys[i].as_ref(), &[]).unwrap();
                black_box(selected.spilled);
                selected
                    .pick
                    .finish(Outcome::success(Duration::from_micros(100)));
            })
        });
    }
    g.finish();
}

criterion_group!(benches, key, metrics, attempt);
criterion_main!(benches);
