//! `loadring-gatebench`: the Rust half of `bench/gateway.sh`, the gateway
//! benchmark of loadring proxy against nginx and HAProxy (BENCHMARKS.md,
//! "Gateway").
//!
//! - `keys`: the request keys wrk sends (seeded, one per line).
//! - `backends`: N HTTP/1.1 backends in one process, each answering after an
//!   exponential service time, counting its concurrency and its keys; an
//!   admin listener hands out (and resets) the counts as JSON.
//! - `cpu PID`: CPU ticks of a process and its descendants (nginx workers).
//! - `report DIR`: the table and the plot from a run's files.
//! - `churn`: rewrites an endpoints file every 200 ms (one endpoint out,
//!   then back); `churn-report DIR`: the churn table.
//! - `drive`: sends a key file's requests through a proxy and fails on any
//!   answer but 200 (the training load of `scripts/build-pgo.sh`).
//!
//! Everything listens on 127.0.0.1 only.

mod backends;
mod cert;
mod churn;
mod drive;
mod keys;
mod paired;
mod plot;
mod report;

use std::process::ExitCode;

const USAGE: &str = "usage:
  loadring-gatebench keys --workload uniform|hot [--requests N] [--keys K] [--seed S] --out FILE
  loadring-gatebench backends --base-port P --count N --admin-port A [--mean-ms M] [--seed S]
  loadring-gatebench cpu PID
  loadring-gatebench report DIR [--plot FILE.png]
  loadring-gatebench churn --file ENDPOINTS --log FILE [--interval-ms 200] [--seconds S]
  loadring-gatebench churn-report DIR
  loadring-gatebench drive --to HOST:PORT --keys FILE [--requests N] [--connections C]
                     [--protocol http1|h2c|h2] [--tls-ca FILE] [--streams S] [--key-in header|path]
  loadring-gatebench cert --out DIR";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("keys") => keys::main(&Flags::parse(&args[1..])),
        Some("backends") => backends::main(&Flags::parse(&args[1..])),
        Some("cpu") => cpu(&args[1..]),
        Some("report") => report::main(&Flags::parse(&args[1..])),
        Some("churn") => churn::main(&Flags::parse(&args[1..])),
        Some("churn-report") => churn::report(&Flags::parse(&args[1..])),
        Some("drive") => drive::main(&Flags::parse(&args[1..])),
        Some("cert") => cert::main(&Flags::parse(&args[1..])),
        _ => Err(USAGE.to_string()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// `--name value` pairs and bare arguments.
#[derive(Debug, Default)]
pub struct Flags {
    pairs: Vec<(String, String)>,
    bare: Vec<String>,
}

impl Flags {
    fn parse(args: &[String]) -> Flags {
        let mut flags = Flags::default();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            match a.strip_prefix("--") {
                Some(name) => {
                    let value = it.next().cloned().unwrap_or_default();
                    flags.pairs.push((name.to_string(), value));
                }
                None => flags.bare.push(a.clone()),
            }
        }
        flags
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn required(&self, name: &str) -> Result<&str, String> {
        self.get(name)
            .ok_or_else(|| format!("--{name} is required\n{USAGE}"))
    }

    pub fn number<T: std::str::FromStr>(&self, name: &str, default: T) -> Result<T, String> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| format!("--{name}: bad number {v:?}")),
        }
    }

    pub fn bare(&self) -> &[String] {
        &self.bare
    }
}

/// CPU ticks (utime + stime, in USER_HZ = 1/100 s on Linux) of `pid` and all
/// its descendants: nginx's workers, HAProxy's and loadring's threads.
fn cpu(args: &[String]) -> Result<(), String> {
    let pid: u32 = args
        .first()
        .and_then(|p| p.parse().ok())
        .ok_or("cpu PID: a process id")?;
    let mut stats = Vec::new();
    for entry in std::fs::read_dir("/proc").map_err(|e| e.to_string())? {
        let Ok(entry) = entry else { continue };
        let Some(p) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if let Ok(text) = std::fs::read_to_string(format!("/proc/{p}/stat")) {
            if let Some(stat) = parse_stat(&text) {
                stats.push((p, stat));
            }
        }
    }
    let mut family = vec![pid];
    let mut grew = true;
    while grew {
        grew = false;
        for (p, (ppid, _)) in &stats {
            if family.contains(ppid) && !family.contains(p) {
                family.push(*p);
                grew = true;
            }
        }
    }
    let ticks: u64 = stats
        .iter()
        .filter(|(p, _)| family.contains(p))
        .map(|(_, (_, t))| t)
        .sum();
    println!("{ticks}");
    Ok(())
}

/// `(ppid, utime + stime)` from a `/proc/PID/stat` line (the command name,
/// in parentheses, may hold spaces: fields count from the last `)`).
fn parse_stat(text: &str) -> Option<(u32, u64)> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state(0) ppid(1) ... utime(11) stime(12).
    let ppid = fields.get(1)?.parse().ok()?;
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((ppid, utime + stime))
}

/// SplitMix64: the seeded generator of keys and service times.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }

    /// Uniform in (0, 1].
    pub fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }
}

pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_after_a_name_with_spaces() {
        let line = "42 (my (odd) name) S 7 42 42 0 -1 4194560 100 0 0 0 31 12 0 0 20 0 3 0";
        assert_eq!(parse_stat(line), Some((7, 43)));
    }
}
