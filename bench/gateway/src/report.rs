//! `report DIR`: one row per run from the files `bench/gateway.sh` left in
//! DIR: `runs.tsv` (name, proxy, workload, the loadring spec that places
//! keys as the proxy does, its endpoints file), and per run `NAME.wrk`
//! (wrk's output with the `GATEBENCH {...}` line of `keys.lua`), `NAME.json`
//! (the backends' [`Stats`]) and `NAME.cpu` (the proxy's CPU ticks before and
//! after). Prints the Markdown table, writes it to `DIR/report.md`, the rows to
//! `DIR/report.json` and, with `--plot`, the PNG.
//!
//! A proxy measured more than once on a workload (`bench/gateway.sh`'s
//! rounds, each sample a line of `runs.tsv`) is one row: each figure the
//! median of its samples, taken figure by figure, with the lowest and
//! highest CPU per request and p99 beside it: the spread of the rounds,
//! against which a difference between two rows' medians can be read. Below
//! it, loadring's rows against the peers' round by round ([`crate::paired`]).

use std::collections::HashMap;
use std::path::Path;

use loadring::{Balancer, Endpoint, PolicySpec, Request};
use serde::{Deserialize, Serialize};

use crate::backends::Stats;
use crate::paired;
use crate::Flags;

/// Linux reports CPU times in USER_HZ, 100 per second on every architecture.
const TICK_US: f64 = 10_000.0;

/// What `keys.lua` prints when wrk is done.
#[derive(Debug, Deserialize)]
pub struct Wrk {
    pub requests: u64,
    pub duration_us: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub err_connect: u64,
    pub err_read: u64,
    pub err_write: u64,
    pub err_status: u64,
    pub err_timeout: u64,
}

#[derive(Debug, Serialize, Deserialize, Clone)]
pub struct Row {
    pub proxy: String,
    pub workload: String,
    pub rps: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub errors: u64,
    /// The hottest backend's concurrency over the mean per backend, both
    /// averaged over the run (busy time / elapsed time, Little's law).
    pub hot_over_mean: f64,
    /// The highest peak concurrency of a backend (the most requests it had
    /// in service at once) over the backends' mean peak.
    pub peak_over_mean: f64,
    /// Requests served by their key's owner (no-load placement), over all.
    pub owner_share: f64,
    /// Proxy CPU time per request, microseconds.
    pub cpu_us: f64,
    /// The samples the row is the median of, and the lowest and highest
    /// CPU per request and p99 among them (a single sample: its own).
    pub samples: usize,
    pub cpu_us_min: f64,
    pub cpu_us_max: f64,
    pub p99_ms_min: f64,
    pub p99_ms_max: f64,
}

/// The median of `values` (the mean of the middle two for an even count);
/// 0 for none.
pub(crate) fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => values[n / 2],
        _ => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// Each distinct pair once, in the order first seen.
pub(crate) fn first_seen<'a>(
    pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Vec<(&'a str, &'a str)> {
    let mut order = Vec::new();
    for pair in pairs {
        if !order.contains(&pair) {
            order.push(pair);
        }
    }
    order
}

/// One row per proxy and workload, in the order first measured: the median
/// of each figure over that pair's samples.
pub fn medians(samples: &[Row]) -> Vec<Row> {
    first_seen(
        samples
            .iter()
            .map(|r| (r.proxy.as_str(), r.workload.as_str())),
    )
    .into_iter()
    .map(|(proxy, workload)| {
        let of: Vec<&Row> = samples
            .iter()
            .filter(|r| r.proxy == proxy && r.workload == workload)
            .collect();
        let figure = |f: fn(&Row) -> f64| median(of.iter().map(|r| f(r)).collect());
        let lowest = |f: fn(&Row) -> f64| of.iter().map(|r| f(r)).fold(f64::INFINITY, f64::min);
        let highest =
            |f: fn(&Row) -> f64| of.iter().map(|r| f(r)).fold(f64::NEG_INFINITY, f64::max);
        Row {
            proxy: proxy.to_string(),
            workload: workload.to_string(),
            rps: figure(|r| r.rps),
            p50_ms: figure(|r| r.p50_ms),
            p99_ms: figure(|r| r.p99_ms),
            p999_ms: figure(|r| r.p999_ms),
            // Errors are summed: one in any sample is one too many.
            errors: of.iter().map(|r| r.errors).sum(),
            hot_over_mean: figure(|r| r.hot_over_mean),
            peak_over_mean: figure(|r| r.peak_over_mean),
            owner_share: figure(|r| r.owner_share),
            cpu_us: figure(|r| r.cpu_us),
            samples: of.len(),
            cpu_us_min: lowest(|r| r.cpu_us_min),
            cpu_us_max: highest(|r| r.cpu_us_max),
            p99_ms_min: lowest(|r| r.p99_ms_min),
            p99_ms_max: highest(|r| r.p99_ms_max),
        }
    })
    .collect()
}

pub fn main(flags: &Flags) -> Result<(), String> {
    let dir = Path::new(flags.bare().first().ok_or("report DIR")?);
    let runs = read(&dir.join("runs.tsv"))?;
    let mut rows = Vec::new();
    let mut samples = Vec::new();
    let mut owners: HashMap<(String, String), Balancer> = HashMap::new();
    for line in runs.lines().filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split('\t').collect();
        let [name, proxy, workload, spec, endpoints] = f[..] else {
            return Err(format!("runs.tsv: bad line {line:?}"));
        };
        let key = (spec.to_string(), endpoints.to_string());
        if !owners.contains_key(&key) {
            owners.insert(key.clone(), balancer(spec, &dir.join(endpoints))?);
        }
        let wrk = parse_wrk(&read(&dir.join(format!("{name}.wrk")))?)
            .ok_or_else(|| format!("{name}.wrk: no GATEBENCH line (did wrk run?)"))?;
        let stats: Stats = serde_json::from_str(&read(&dir.join(format!("{name}.json")))?)
            .map_err(|e| format!("{name}.json: {e}"))?;
        let cpu = read(&dir.join(format!("{name}.cpu")))?;
        let ticks: Vec<u64> = cpu
            .split_whitespace()
            .filter_map(|t| t.parse().ok())
            .collect();
        let [before, after] = ticks[..] else {
            return Err(format!("{name}.cpu: two tick counts expected"));
        };
        let sample = row(
            proxy,
            workload,
            &wrk,
            &stats,
            &owners[&key],
            after.saturating_sub(before),
        );
        samples.extend(paired::Sample::of(name, &sample));
        rows.push(sample);
    }
    let rows = medians(&rows);
    let mut table = table(&rows);
    let same_seed = paired::table(&paired::compare(&samples));
    if !same_seed.is_empty() {
        table.push_str(
            "\nSame-seed rounds (each round's service times the same for every proxy):\n\n",
        );
        table.push_str(&same_seed);
    }
    print!("{table}");
    std::fs::write(dir.join("report.md"), &table).map_err(|e| e.to_string())?;
    let json = serde_json::to_string_pretty(&rows).expect("serializable");
    std::fs::write(dir.join("report.json"), json).map_err(|e| e.to_string())?;
    if let Some(plot) = flags.get("plot") {
        crate::plot::draw(Path::new(plot), &rows)?;
        println!("\nplot: {plot}");
    }
    Ok(())
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

fn balancer(spec: &str, endpoints: &Path) -> Result<Balancer, String> {
    let spec: PolicySpec = spec.parse().map_err(|e| format!("{spec}: {e}"))?;
    let endpoints = read(endpoints)?
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| l.parse::<Endpoint>().map_err(|e| format!("{l}: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    Balancer::new(spec, endpoints).map_err(|e| e.to_string())
}

pub fn parse_wrk(output: &str) -> Option<Wrk> {
    let line = output.lines().find_map(|l| l.strip_prefix("GATEBENCH "))?;
    serde_json::from_str(line).ok()
}

pub fn row(
    proxy: &str,
    workload: &str,
    wrk: &Wrk,
    stats: &Stats,
    owners: &Balancer,
    ticks: u64,
) -> Row {
    let n = stats.backends.len().max(1) as f64;
    let elapsed_us = (stats.elapsed_s * 1e6).max(1.0);
    let concurrency: Vec<f64> = stats
        .backends
        .iter()
        .map(|b| b.busy_us as f64 / elapsed_us)
        .collect();
    let mean = concurrency.iter().sum::<f64>() / n;
    let peaks: Vec<f64> = stats.backends.iter().map(|b| b.peak as f64).collect();
    let mean_peak = peaks.iter().sum::<f64>() / n;
    let (mut owned, mut counted) = (0u64, 0u64);
    for b in &stats.backends {
        for (key, &count) in &b.keys {
            counted += count;
            let owner = owners.route(&Request::key(key.as_str())).ok().flatten();
            if owner.is_some_and(|o| o.addr() == b.addr) {
                owned += count;
            }
        }
    }
    let ratio = |max: f64, mean: f64| if mean > 0.0 { max / mean } else { 0.0 };
    let cpu_us = ticks as f64 * TICK_US / wrk.requests.max(1) as f64;
    let p99_ms = wrk.p99_us / 1000.0;
    Row {
        proxy: proxy.to_string(),
        workload: workload.to_string(),
        rps: wrk.requests as f64 / (wrk.duration_us.max(1) as f64 / 1e6),
        p50_ms: wrk.p50_us / 1000.0,
        p99_ms,
        p999_ms: wrk.p999_us / 1000.0,
        errors: wrk.err_connect + wrk.err_read + wrk.err_write + wrk.err_status + wrk.err_timeout,
        hot_over_mean: ratio(concurrency.iter().cloned().fold(0.0, f64::max), mean),
        peak_over_mean: ratio(peaks.iter().cloned().fold(0.0, f64::max), mean_peak),
        owner_share: if counted > 0 {
            owned as f64 / counted as f64
        } else {
            0.0
        },
        cpu_us,
        samples: 1,
        cpu_us_min: cpu_us,
        cpu_us_max: cpu_us,
        p99_ms_min: p99_ms,
        p99_ms_max: p99_ms,
    }
}

pub fn table(rows: &[Row]) -> String {
    let mut out = String::from(
        "| proxy | workload | req/s | p50 ms | p99 ms | p99.9 ms | errors | peak/mean | hottest/mean | owner share | proxy CPU µs/req | samples (CPU min-max, p99 min-max) |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {:.0} | {:.2} | {:.2} | {:.2} | {} | {:.2} | {:.2} | {:.1}% | {:.1} | {} ({:.1}-{:.1}, {:.2}-{:.2}) |\n",
            r.proxy,
            r.workload,
            r.rps,
            r.p50_ms,
            r.p99_ms,
            r.p999_ms,
            r.errors,
            r.peak_over_mean,
            r.hot_over_mean,
            r.owner_share * 100.0,
            r.cpu_us,
            r.samples,
            r.cpu_us_min,
            r.cpu_us_max,
            r.p99_ms_min,
            r.p99_ms_max
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backends::BackendStats;

    fn backend(addr: &str, requests: u64, peak: u64, keys: &[(&str, u64)]) -> BackendStats {
        BackendStats {
            addr: addr.into(),
            requests,
            peak,
            busy_us: 0,
            keys: keys.iter().map(|(k, n)| (k.to_string(), *n)).collect(),
        }
    }

    #[test]
    fn ratios_owner_share_and_cpu() {
        let endpoints = ["127.0.0.1:1", "127.0.0.1:2"].map(|a| a.parse::<Endpoint>().unwrap());
        let owners =
            Balancer::new("nginx_hash:consistent=true".parse().unwrap(), endpoints).unwrap();
        let owner = |k: &str| {
            owners
                .route(&Request::key(k))
                .unwrap()
                .unwrap()
                .addr()
                .to_string()
        };
        let other = |a: &str| {
            if a == "127.0.0.1:1" {
                "127.0.0.1:2"
            } else {
                "127.0.0.1:1"
            }
        };
        // "a": 30 at its owner, 10 elsewhere; "b": 60 at its owner.
        let (oa, ob) = (owner("a"), owner("b"));
        let mut backends = vec![
            backend(&oa, 0, 0, &[("a", 30)]),
            backend(other(&oa), 0, 0, &[("a", 10)]),
        ];
        let at = |bs: &mut Vec<BackendStats>, addr: &str| {
            bs.iter_mut().position(|b| b.addr == addr).unwrap()
        };
        let i = at(&mut backends, &ob);
        backends[i].keys.insert("b".into(), 60);
        // Mean concurrency 6 and 2 over 1 s: mean 4; peaks 12 and 4: mean 8.
        backends[0].busy_us = 6_000_000;
        backends[1].busy_us = 2_000_000;
        backends[0].peak = 12;
        backends[1].peak = 4;
        let stats = Stats {
            elapsed_s: 1.0,
            backends,
        };
        let wrk = parse_wrk(
            "Running 1s test\nGATEBENCH {\"requests\":100,\"duration_us\":2000000,\"p50_us\":5000,\"p99_us\":20000,\"p999_us\":30000,\"err_connect\":0,\"err_read\":1,\"err_write\":0,\"err_status\":2,\"err_timeout\":0}\n",
        )
        .unwrap();
        let r = row("p", "w", &wrk, &stats, &owners, 5);
        assert_eq!(r.rps, 50.0);
        assert_eq!(r.errors, 3);
        assert_eq!(r.hot_over_mean, 1.5);
        assert_eq!(r.peak_over_mean, 1.5);
        assert_eq!(r.owner_share, 0.9);
        assert_eq!(r.cpu_us, 500.0);
        assert_eq!((r.samples, r.cpu_us_min, r.cpu_us_max), (1, 500.0, 500.0));
        assert_eq!((r.p99_ms_min, r.p99_ms_max), (20.0, 20.0));
        let rows = medians(&[r]);
        assert!(table(&rows).contains(
            "| p | w | 50 | 5.00 | 20.00 | 30.00 | 3 | 1.50 | 1.50 | 90.0% | 500.0 | 1 (500.0-500.0, 20.00-20.00) |"
        ));
    }

    fn sample(proxy: &str, workload: &str, rps: f64, p99_ms: f64, cpu_us: f64, errors: u64) -> Row {
        Row {
            proxy: proxy.into(),
            workload: workload.into(),
            rps,
            p50_ms: 1.0,
            p99_ms,
            p999_ms: 1.0,
            errors,
            hot_over_mean: 1.0,
            peak_over_mean: 1.0,
            owner_share: 1.0,
            cpu_us,
            samples: 1,
            cpu_us_min: cpu_us,
            cpu_us_max: cpu_us,
            p99_ms_min: p99_ms,
            p99_ms_max: p99_ms,
        }
    }

    #[test]
    fn samples_of_a_proxy_and_workload_become_one_row_of_medians() {
        let rows = medians(&[
            sample("a", "uniform", 100.0, 30.0, 40.0, 0),
            sample("b", "uniform", 90.0, 35.0, 50.0, 0),
            sample("a", "hot", 10.0, 3.0, 4.0, 0),
            // Each figure's median on its own: no sample is the median of all.
            sample("a", "uniform", 120.0, 20.0, 45.0, 1),
            sample("a", "uniform", 110.0, 40.0, 60.0, 0),
            sample("b", "uniform", 70.0, 31.0, 48.0, 0),
        ]);
        let pairs: Vec<(&str, &str, usize)> = rows
            .iter()
            .map(|r| (r.proxy.as_str(), r.workload.as_str(), r.samples))
            .collect();
        assert_eq!(
            pairs,
            [("a", "uniform", 3), ("b", "uniform", 2), ("a", "hot", 1)]
        );
        let a = &rows[0];
        assert_eq!((a.rps, a.p99_ms, a.cpu_us), (110.0, 30.0, 45.0));
        assert_eq!((a.cpu_us_min, a.cpu_us_max), (40.0, 60.0));
        assert_eq!((a.p99_ms_min, a.p99_ms_max), (20.0, 40.0));
        assert_eq!(a.errors, 1, "errors of all samples count");
        let b = &rows[1];
        assert_eq!(
            (b.rps, b.p99_ms, b.cpu_us),
            (80.0, 33.0, 49.0),
            "even count: the middle two's mean"
        );
        assert!(table(&rows).contains("| 3 (40.0-60.0, 20.00-40.00) |"));
        assert!(table(&rows).contains("| 2 (48.0-50.0, 31.00-35.00) |"));
    }
}
