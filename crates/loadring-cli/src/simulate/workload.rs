//! The offered load: which key each request asks for, when it arrives, how
//! long it holds its slot. Generated once from the seed and replayed
//! unchanged against every policy, so policies are compared on the very same
//! requests.
//!
//! Randomness comes from PCG-64 (`rand_pcg`, value-stable across platforms
//! and versions) and is turned into variates by the plain formulas below (no
//! distribution crate whose algorithms could change between versions).

use std::fmt;
use std::str::FromStr;

use rand_pcg::rand_core::{Rng, SeedableRng};
use rand_pcg::Pcg64;

use crate::echo::echo;

/// Which key each request asks for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Workload {
    /// Key of rank `r` (1-based) with probability proportional to `1 / r^s`.
    Zipf { s: f64 },
    /// Every key equally likely.
    Uniform,
    /// `key-0` gets a fraction `p` of all requests (a viral key); the others
    /// are zipf(`s`) over the remaining keys.
    Hot { p: f64, s: f64 },
}

/// The zipf exponent of `hot:P` when none is given.
pub const HOT_DEFAULT_ZIPF: f64 = 1.1;

const WORKLOADS: &str = "zipf:S (S > 0), uniform, hot:P or hot:P:S (0 < P <= 1, S > 0)";

impl FromStr for Workload {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let bad = |why: &str| format!("--workload {}: {why} (accepted: {WORKLOADS})", echo(text));
        let mut parts = text.split(':');
        let name = parts.next().unwrap_or_default().to_ascii_lowercase();
        let args: Vec<&str> = parts.collect();
        let exponent = |v: &str| -> Result<f64, String> {
            match v.parse::<f64>() {
                Ok(s) if s.is_finite() && s > 0.0 => Ok(s),
                _ => Err(bad(&format!(
                    "the zipf exponent `{v}` must be a number > 0"
                ))),
            }
        };
        match (name.as_str(), args.as_slice()) {
            ("zipf", [s]) => Ok(Workload::Zipf { s: exponent(s)? }),
            ("uniform", []) => Ok(Workload::Uniform),
            ("hot", [p, rest @ ..]) if rest.len() <= 1 => {
                let p = match p.parse::<f64>() {
                    Ok(v) if v > 0.0 && v <= 1.0 => v,
                    _ => return Err(bad(&format!("the hot share `{p}` must be in (0, 1]"))),
                };
                let s = match rest {
                    [s] => exponent(s)?,
                    _ => HOT_DEFAULT_ZIPF,
                };
                Ok(Workload::Hot { p, s })
            }
            ("zipf" | "uniform" | "hot", _) => Err(bad("wrong number of parameters")),
            _ => Err(bad("unknown workload")),
        }
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Workload::Zipf { s } => write!(f, "zipf:{s}"),
            Workload::Uniform => f.write_str("uniform"),
            Workload::Hot { p, s } if *s == HOT_DEFAULT_ZIPF => write!(f, "hot:{p}"),
            Workload::Hot { p, s } => write!(f, "hot:{p}:{s}"),
        }
    }
}

impl Workload {
    /// One line for people: what the requests ask for.
    pub fn describe(&self, keys: usize) -> String {
        match self {
            Workload::Zipf { s } => format!("zipf:{s} over {} keys", thousands(keys as u64)),
            Workload::Uniform => format!("uniform over {} keys", thousands(keys as u64)),
            Workload::Hot { p, s } => format!(
                "one viral key (key-0) gets {}% of requests, the rest zipf:{s} over {} keys",
                p * 100.0,
                thousands(keys.saturating_sub(1) as u64)
            ),
        }
    }
}

/// The longest mean service time, in milliseconds: about 5.8 years, so that
/// the longest exponential draw (36.8 means) stays below 2^64 ns.
const MAX_SERVICE_MS: f64 = 1.8e11;

/// How long a request holds its slot.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Service {
    /// Exponentially distributed with this mean, in milliseconds.
    Exp { ms: f64 },
    /// Always this long, in milliseconds.
    Fixed { ms: f64 },
}

impl FromStr for Service {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let bad = |why: &str| {
            format!(
                "--service {}: {why} (accepted: exp:MS or fixed:MS, MS a number of milliseconds \
                 from 0.000001 (1 ns, the virtual clock's tick) to {MAX_SERVICE_MS})",
                echo(text)
            )
        };
        let (kind, ms) = text.split_once(':').ok_or_else(|| bad("missing `:MS`"))?;
        let ms = match ms.parse::<f64>() {
            Ok(v) if v.is_finite() && v * 1e6 >= 1.0 && v <= MAX_SERVICE_MS => v,
            Ok(v) if v > MAX_SERVICE_MS => return Err(bad(&format!("`{}` is too long", echo(ms)))),
            _ => {
                return Err(bad(&format!(
                    "`{}` is not a duration of at least 1 ns",
                    echo(ms)
                )))
            }
        };
        match kind.to_ascii_lowercase().as_str() {
            "exp" => Ok(Service::Exp { ms }),
            "fixed" => Ok(Service::Fixed { ms }),
            _ => Err(bad(&format!("unknown distribution `{kind}`"))),
        }
    }
}

impl fmt::Display for Service {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Service::Exp { ms } => write!(f, "exp:{ms}"),
            Service::Fixed { ms } => write!(f, "fixed:{ms}"),
        }
    }
}

impl Service {
    /// The mean service time in nanoseconds.
    pub fn mean_ns(&self) -> f64 {
        match self {
            Service::Exp { ms } | Service::Fixed { ms } => ms * 1e6,
        }
    }
}

/// The key names, `key-0` .. `key-{n-1}`, formatted once into one buffer.
#[derive(Debug)]
pub struct Keys {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Keys {
    pub fn new(n: usize) -> Self {
        use std::io::Write;
        let mut bytes = Vec::with_capacity(n * 10);
        let mut ends = Vec::with_capacity(n);
        for i in 0..n {
            // Writing into a Vec cannot fail.
            write!(bytes, "key-{i}").expect("write to a Vec");
            ends.push(bytes.len());
        }
        Keys { bytes, ends }
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    #[inline]
    pub fn get(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }
}

/// One request: when it arrives, which key, how long it stays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival {
    /// Virtual time of arrival, nanoseconds since the start.
    pub at: u64,
    /// How long it holds its slot, nanoseconds.
    pub service: u64,
    /// Index into [`Keys`].
    pub key: u32,
}

/// The whole offered load of a run.
#[derive(Debug)]
pub struct Trace {
    pub keys: Keys,
    /// In arrival order (non-decreasing `at`).
    pub arrivals: Vec<Arrival>,
    /// The zones requests come from (`--zones`), none without it.
    zone_names: Vec<String>,
    /// Request `i` comes from `zone_names[zone_of[i]]` (empty without zones).
    zone_of: Vec<u16>,
}

impl Trace {
    /// `requests` Poisson arrivals at `rate` per second of virtual time.
    pub fn generate(
        requests: usize,
        keys: usize,
        workload: Workload,
        rate: f64,
        service: Service,
        seed: u64,
    ) -> Trace {
        let mut rng = Pcg64::seed_from_u64(seed);
        let picker = KeyPicker::new(workload, keys);
        let gap_ns = 1e9 / rate;
        let mut at = 0u64;
        let mut arrivals = Vec::with_capacity(requests);
        for _ in 0..requests {
            // Draw order is part of the seed's meaning: gap, key, service.
            at = at.saturating_add(exponential(&mut rng, gap_ns));
            let key = picker.pick(&mut rng);
            let service = match service {
                Service::Exp { .. } => exponential(&mut rng, service.mean_ns()),
                Service::Fixed { .. } => service.mean_ns().round() as u64,
            };
            arrivals.push(Arrival { at, service, key });
        }
        Trace {
            keys: Keys::new(keys),
            arrivals,
            zone_names: Vec::new(),
            zone_of: Vec::new(),
        }
    }

    /// Gives each request a zone drawn uniformly from `zones` (at most
    /// 65536 of them). The draws come from a stream of their own, so the
    /// keys, arrivals and service times stay those of the seed without zones.
    pub fn with_zones(mut self, zones: &[String], seed: u64) -> Trace {
        if zones.is_empty() {
            return self;
        }
        // A second stream of the same seed: PCG streams are independent.
        let mut rng = Pcg64::new(u128::from(seed), ZONE_STREAM);
        let n = zones.len();
        self.zone_of = (0..self.arrivals.len())
            .map(|_| ((uniform(&mut rng) * n as f64) as usize).min(n - 1) as u16)
            .collect();
        self.zone_names = zones.to_vec();
        self
    }

    /// The zone request `i` comes from, if requests have zones.
    #[inline]
    pub fn zone(&self, i: usize) -> Option<&str> {
        self.zone_of
            .get(i)
            .map(|&z| self.zone_names[usize::from(z)].as_str())
    }

    /// The arrival time of the last request (the run's virtual length).
    pub fn end(&self) -> u64 {
        self.arrivals.last().map_or(0, |a| a.at)
    }
}

/// The PCG stream of the zone draws (not the one `seed_from_u64` picks).
const ZONE_STREAM: u128 = 0x7a6f_6e65_7a6f_6e65_7a6f_6e65_7a6f_6e65;

/// A uniform draw in [0, 1) with 53 random bits.
#[inline]
fn uniform(rng: &mut Pcg64) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// An exponential draw with mean `mean`, rounded to whole nanoseconds
/// (inversion: `-mean * ln(1 - u)`, and `1 - u` is never 0).
#[inline]
fn exponential(rng: &mut Pcg64, mean: f64) -> u64 {
    (-mean * (1.0 - uniform(rng)).ln()).round() as u64
}

/// Samples key indices for a workload: zipf by binary search in the
/// precomputed cumulative distribution.
struct KeyPicker {
    workload: Workload,
    keys: usize,
    /// Zipf ranks map to key indices starting here (1 when key-0 is viral).
    first: usize,
    cdf: Vec<f64>,
}

impl KeyPicker {
    fn new(workload: Workload, keys: usize) -> Self {
        let (s, first) = match workload {
            Workload::Zipf { s } => (Some(s), 0),
            Workload::Hot { s, .. } => (Some(s), 1),
            Workload::Uniform => (None, 0),
        };
        let cdf = match s {
            Some(s) if keys > first => {
                let mut cdf: Vec<f64> = Vec::with_capacity(keys - first);
                let mut sum = 0.0;
                for rank in 1..=keys - first {
                    sum += (rank as f64).powf(-s);
                    cdf.push(sum);
                }
                for c in &mut cdf {
                    *c /= sum;
                }
                cdf
            }
            _ => Vec::new(),
        };
        KeyPicker {
            workload,
            keys,
            first,
            cdf,
        }
    }

    #[inline]
    fn pick(&self, rng: &mut Pcg64) -> u32 {
        let i = match self.workload {
            Workload::Uniform => ((uniform(rng) * self.keys as f64) as usize).min(self.keys - 1),
            Workload::Hot { p, .. } if self.cdf.is_empty() || uniform(rng) < p => 0,
            Workload::Zipf { .. } | Workload::Hot { .. } => {
                let u = uniform(rng);
                let rank = self.cdf.partition_point(|&c| c <= u);
                self.first + rank.min(self.cdf.len() - 1)
            }
        };
        i as u32
    }
}

/// `1234567` -> `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workloads_parse_and_print_back() {
        for text in ["zipf:1.1", "uniform", "hot:0.1", "hot:0.25:0.8"] {
            let w: Workload = text.parse().unwrap();
            assert_eq!(w.to_string(), text);
        }
        assert_eq!(
            "HOT:0.5".parse::<Workload>().unwrap(),
            Workload::Hot { p: 0.5, s: 1.1 }
        );
    }

    #[test]
    fn bad_workloads_name_the_culprit() {
        for (text, want) in [
            ("pareto", "unknown workload"),
            ("zipf:0", "exponent `0` must be a number > 0"),
            ("zipf:-1", "exponent `-1`"),
            ("zipf:nan", "exponent `nan`"),
            ("zipf", "wrong number of parameters"),
            ("uniform:3", "wrong number of parameters"),
            ("hot:0", "hot share `0` must be in (0, 1]"),
            ("hot:1.5", "hot share"),
            ("hot:0.1:0", "exponent `0`"),
            ("hot:0.1:1:2", "wrong number"),
        ] {
            let err = text.parse::<Workload>().unwrap_err();
            assert!(err.contains(want), "{text}: {err}");
            assert!(err.contains("accepted: zipf:S"), "{text}: {err}");
        }
    }

    #[test]
    fn services_parse() {
        assert_eq!(
            "exp:10".parse::<Service>().unwrap(),
            Service::Exp { ms: 10.0 }
        );
        assert_eq!(
            "fixed:2.5".parse::<Service>().unwrap().mean_ns(),
            2_500_000.0
        );
        for bad in ["exp", "exp:0", "exp:-1", "gamma:3", "fixed:inf", "exp:x"] {
            assert!(bad.parse::<Service>().is_err(), "{bad}");
        }
    }

    #[test]
    fn keys_are_formatted_once() {
        let keys = Keys::new(12);
        assert_eq!(keys.len(), 12);
        assert_eq!(keys.get(0), b"key-0");
        assert_eq!(keys.get(11), b"key-11");
    }

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1_000_000), "1,000,000");
    }

    fn frequencies(workload: Workload, keys: usize, n: usize) -> Vec<f64> {
        let trace = Trace::generate(n, keys, workload, 1000.0, Service::Fixed { ms: 1.0 }, 7);
        let mut counts = vec![0usize; keys];
        for a in &trace.arrivals {
            counts[a.key as usize] += 1;
        }
        counts.iter().map(|&c| c as f64 / n as f64).collect()
    }

    #[test]
    fn zipf_frequencies_follow_the_power_law() {
        let s = 1.1;
        let keys = 50;
        let f = frequencies(Workload::Zipf { s }, keys, 200_000);
        let h: f64 = (1..=keys).map(|r| (r as f64).powf(-s)).sum();
        for (rank, got) in f.iter().enumerate().take(5) {
            let want = ((rank + 1) as f64).powf(-s) / h;
            assert!(
                (got - want).abs() < 0.01,
                "rank {}: {got} vs {want}",
                rank + 1
            );
        }
    }

    #[test]
    fn the_viral_key_gets_its_share() {
        let f = frequencies(Workload::Hot { p: 0.3, s: 1.0 }, 100, 100_000);
        assert!((f[0] - 0.3).abs() < 0.01, "{}", f[0]);
        // key-1 is zipf rank 1 over the 99 other keys.
        let h: f64 = (1..=99).map(|r| 1.0 / r as f64).sum();
        assert!((f[1] - 0.7 / h).abs() < 0.01, "{}", f[1]);
    }

    #[test]
    fn uniform_covers_every_key() {
        let f = frequencies(Workload::Uniform, 10, 100_000);
        assert!(f.iter().all(|&x| (x - 0.1).abs() < 0.01), "{f:?}");
    }

    #[test]
    fn arrivals_are_poisson_at_the_rate() {
        let trace = Trace::generate(
            100_000,
            10,
            Workload::Uniform,
            5000.0,
            Service::Exp { ms: 4.0 },
            3,
        );
        let seconds = trace.end() as f64 / 1e9;
        assert!((seconds - 20.0).abs() < 0.5, "{seconds}");
        assert!(trace.arrivals.windows(2).all(|w| w[0].at <= w[1].at));
        let mean_ms = trace.arrivals.iter().map(|a| a.service as f64).sum::<f64>()
            / trace.arrivals.len() as f64
            / 1e6;
        assert!((mean_ms - 4.0).abs() < 0.1, "{mean_ms}");
    }

    #[test]
    fn the_seed_fixes_the_trace() {
        let gen = |seed| {
            Trace::generate(
                1000,
                100,
                Workload::Hot { p: 0.1, s: 1.1 },
                100.0,
                Service::Exp { ms: 1.0 },
                seed,
            )
            .arrivals
        };
        assert_eq!(gen(5), gen(5));
        assert_ne!(gen(5), gen(6));
    }
}
