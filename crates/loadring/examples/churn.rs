//! Churn: the share of keys whose owner changes when one of N endpoints is
//! removed, against the ideal 1/N.
//!
//! Run: `cargo run --release -p loadring --example churn [-- KEYS]` (default 100000 keys).
//!
//! `moved` is every key whose natural owner changed; `orphaned` the keys the
//! removed endpoint owned (they must move); `extra` the keys that moved from
//! one surviving endpoint to another, which a perfectly consistent scheme never
//! moves. A ring with a fixed number of points per endpoint (c_murmurhash) has
//! no extra moves; Envoy's ring_hash sizes its ring for N, so each survivor's
//! point count can change with N and keys move between survivors; Maglev
//! refills its table and moves a few keys between survivors too.

use loadring::{Balancer, Endpoint, Request};

fn owners(balancer: &Balancer, keys: &[String]) -> Vec<String> {
    keys.iter()
        .map(|k| {
            balancer
                .route(&Request::key(k.as_str()))
                .expect("every endpoint is healthy")
                .expect("a hashing policy")
                .addr()
                .to_string()
        })
        .collect()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let keys: usize = match std::env::args().nth(1) {
        Some(arg) => arg
            .parse()
            .map_err(|_| format!("KEYS `{arg}`: expected a whole number of keys"))?,
        None => 100_000,
    };
    let keys: Vec<String> = (0..keys).map(|i| format!("key-{i}")).collect();
    println!("{} keys; one endpoint (the middle one) removed", keys.len());
    println!(
        "{:<14} {:>5} {:>8} {:>9} {:>8} {:>8}",
        "policy", "N", "moved", "orphaned", "extra", "ideal"
    );
    for n in [10usize, 100, 1000] {
        let endpoints: Vec<Endpoint> = (0..n)
            .map(|i| Endpoint::new(format!("10.0.{}.{}:80", i / 256, i % 256)))
            .collect::<Result<_, _>>()?;
        let removed = endpoints[n / 2].addr().to_string();
        let survivors: Vec<Endpoint> = endpoints
            .iter()
            .filter(|e| e.addr() != removed)
            .cloned()
            .collect();
        for policy in ["c_murmurhash", "ring_hash", "maglev"] {
            let balancer = Balancer::new(policy.parse()?, endpoints.clone())?;
            let before = owners(&balancer, &keys);
            balancer.update(survivors.clone())?;
            let after = owners(&balancer, &keys);
            let moved = before.iter().zip(&after).filter(|(b, a)| b != a).count();
            let orphaned = before.iter().filter(|b| **b == removed).count();
            let share = |c: usize| format!("{:.3}%", 100.0 * c as f64 / keys.len() as f64);
            println!(
                "{:<14} {:>5} {:>8} {:>9} {:>8} {:>8}",
                policy,
                n,
                share(moved),
                share(orphaned),
                share(moved - orphaned),
                format!("{:.3}%", 100.0 / n as f64)
            );
        }
    }
    Ok(())
}
