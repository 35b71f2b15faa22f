//! Builds `c_murmurhash:replicas=160` balancers (or pingora-ketama
//! continuums, the peer of the `build` group in `bench/peers`) in a loop, for a profiler or
//! for CPU time on a busy machine:
//!
//! ```text
//! cargo run --release --example build_loop -- [loadring|pingora] ENDPOINTS ITERATIONS
//! ```

use loadring::{Balancer, Endpoint, PolicySpec};
use pingora_ketama::{Bucket, Continuum};

fn main() {
    let mut args = std::env::args().skip(1);
    let which = args.next().unwrap_or_else(|| "loadring".into());
    let n: usize = args.next().map_or(1024, |a| a.parse().unwrap());
    let iters: usize = args.next().map_or(1000, |a| a.parse().unwrap());
    let addrs: Vec<String> = (0..n)
        .map(|i| format!("10.0.{}.{}:8080", i / 250, i % 250 + 1))
        .collect();
    let mut kept = 0;
    match which.as_str() {
        "loadring" => {
            let endpoints: Vec<Endpoint> =
                addrs.iter().map(|a| Endpoint::new(a).unwrap()).collect();
            let spec: PolicySpec = "c_murmurhash:replicas=160".parse().unwrap();
            for _ in 0..iters {
                let b = Balancer::new(spec.clone(), endpoints.clone()).unwrap();
                kept += std::hint::black_box(&b).policy().name().len();
            }
        }
        "pingora" => {
            let buckets: Vec<Bucket> = addrs
                .iter()
                .map(|a| Bucket::new(a.parse().unwrap(), 1))
                .collect();
            for _ in 0..iters {
                let c = Continuum::new(std::hint::black_box(&buckets));
                kept += usize::from(std::hint::black_box(&c).node(b"k").is_some());
            }
        }
        other => panic!("`{other}`: expected loadring or pingora"),
    }
    println!("{kept}");
}
