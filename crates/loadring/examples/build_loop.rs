//! Builds `c_murmurhash:replicas=160` balancers in a loop, for a profiler:
//! `cargo run --release --example build_loop -- ENDPOINTS ITERATIONS`.

use loadring::{Balancer, Endpoint, PolicySpec};

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map_or(1024, |a| a.parse().unwrap());
    let iters: usize = args.next().map_or(1000, |a| a.parse().unwrap());
    let endpoints: Vec<Endpoint> = (0..n)
        .map(|i| Endpoint::new(format!("10.0.{}.{}:8080", i / 250, i % 250 + 1)).unwrap())
        .collect();
    let spec: PolicySpec = "c_murmurhash:replicas=160".parse().unwrap();
    let mut kept = 0;
    for _ in 0..iters {
        let b = Balancer::new(spec.clone(), endpoints.clone()).unwrap();
        kept += std::hint::black_box(&b).policy().name().len();
    }
    println!("{kept}");
}
