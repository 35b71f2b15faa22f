//! The keys wrk sends, one per line: `uniform` over `--keys` keys, or `hot`:
//! zipf (s = 0.99, YCSB's) over the same keys plus one viral key taking 10%
//! of requests. Seeded: the same flags give the same file.

use std::io::Write;

use crate::{Flags, Rng};

pub const VIRAL_KEY: &str = "viral";
pub const VIRAL_SHARE: f64 = 0.10;
pub const ZIPF_S: f64 = 0.99;

pub fn main(flags: &Flags) -> Result<(), String> {
    let workload = flags.required("workload")?;
    let requests: usize = flags.number("requests", 200_000)?;
    let keys: usize = flags.number("keys", 10_000)?;
    let seed: u64 = flags.number("seed", 42)?;
    let out = flags.required("out")?;
    let sequence = generate(workload, requests, keys, seed)?;
    let mut file =
        std::io::BufWriter::new(std::fs::File::create(out).map_err(|e| format!("{out}: {e}"))?);
    for key in &sequence {
        writeln!(file, "{key}").map_err(|e| format!("{out}: {e}"))?;
    }
    file.flush().map_err(|e| format!("{out}: {e}"))
}

pub fn generate(
    workload: &str,
    requests: usize,
    keys: usize,
    seed: u64,
) -> Result<Vec<String>, String> {
    let mut rng = Rng::new(seed);
    match workload {
        "uniform" => Ok((0..requests)
            .map(|_| format!("key-{}", rng.next_u64() % keys as u64))
            .collect()),
        "hot" => {
            // Cumulative zipf weights; rank r (0-based) has weight 1/(r+1)^s.
            let mut cdf = Vec::with_capacity(keys);
            let mut total = 0.0;
            for r in 0..keys {
                total += 1.0 / ((r + 1) as f64).powf(ZIPF_S);
                cdf.push(total);
            }
            Ok((0..requests)
                .map(|_| {
                    if rng.unit() <= VIRAL_SHARE {
                        VIRAL_KEY.to_string()
                    } else {
                        let u = rng.unit() * total;
                        let rank = cdf.partition_point(|&c| c < u).min(keys - 1);
                        format!("key-{rank}")
                    }
                })
                .collect())
        }
        other => Err(format!("--workload: uniform or hot, not {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hot_has_the_viral_share_and_a_zipf_head() {
        let keys = generate("hot", 100_000, 10_000, 7).unwrap();
        let viral = keys.iter().filter(|k| *k == VIRAL_KEY).count() as f64 / 1e5;
        assert!((viral - 0.10).abs() < 0.01, "{viral}");
        let first = keys.iter().filter(|k| *k == "key-0").count();
        let tenth = keys.iter().filter(|k| *k == "key-9").count();
        assert!(first > 5 * tenth, "{first} {tenth}");
        assert_eq!(keys, generate("hot", 100_000, 10_000, 7).unwrap());
    }
}
