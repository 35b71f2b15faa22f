//! `churn`: rewrites an endpoints file every `--interval-ms` (one endpoint
//! removed, then added back, a different one each time) for `--seconds`,
//! logging when each rewrite landed; `churn-report DIR`: the churn table,
//! each churn run beside the steady run of the same policy.
//!
//! Change-to-effect is counted per change: the rewrite's time (logged here,
//! after the rename that makes it visible) to the proxy's log line saying
//! it applied the new membership (`endpoints from ...: N endpoints`, logged
//! once the new ring is in place: the next request is placed by it).

use std::io::Write as _;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::report::parse_wrk;
use crate::Flags;

fn unix_us(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

fn write_members(path: &Path, members: &[&str]) -> Result<(), String> {
    let next = path.with_extension("next");
    let mut text = members.join("\n");
    text.push('\n');
    std::fs::write(&next, text).map_err(|e| format!("{}: {e}", next.display()))?;
    std::fs::rename(&next, path).map_err(|e| format!("{}: {e}", path.display()))
}

pub fn main(flags: &Flags) -> Result<(), String> {
    let file = Path::new(flags.required("file")?);
    let log = Path::new(flags.required("log")?);
    let interval = Duration::from_millis(flags.number("interval-ms", 200)?);
    let seconds: f64 = flags.number("seconds", 10.0)?;
    let all_text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let all: Vec<&str> = all_text.lines().filter(|l| !l.trim().is_empty()).collect();
    if all.len() < 2 {
        return Err(format!("{}: at least 2 endpoints to churn", file.display()));
    }
    let mut out = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let start = std::time::Instant::now();
    let mut change = 0usize;
    let mut next = start + interval;
    while start.elapsed().as_secs_f64() < seconds {
        std::thread::sleep(next.saturating_duration_since(std::time::Instant::now()));
        next += interval;
        // Odd changes remove endpoint k (spread over the list), even ones
        // add it back.
        let k = (change / 2 * 337) % all.len();
        let members: Vec<&str> = if change.is_multiple_of(2) {
            all.iter()
                .enumerate()
                .filter(|(i, _)| *i != k)
                .map(|(_, e)| *e)
                .collect()
        } else {
            all.clone()
        };
        write_members(file, &members)?;
        let at = unix_us(SystemTime::now());
        writeln!(out, "{at}\t{}", members.len()).map_err(|e| e.to_string())?;
        change += 1;
    }
    // Left whole, as it began.
    write_members(file, &all)
}

/// Microseconds since the epoch of an RFC 3339 UTC time as the proxy logs
/// it (`2026-12-02T04:08:40.123456Z`).
fn parse_utc_us(text: &str) -> Option<u64> {
    let text = text.strip_suffix('Z')?;
    let (date, time) = text.split_once('T')?;
    let mut d = date.split('-').map(|p| p.parse::<i64>());
    let (y, m, day) = (d.next()?.ok()?, d.next()?.ok()?, d.next()?.ok()?);
    let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
    let mut t = hms.split(':').map(|p| p.parse::<i64>());
    let (hh, mm, ss) = (t.next()?.ok()?, t.next()?.ok()?, t.next()?.ok()?);
    let frac_us: i64 = format!("{frac:0<6}")[..6].parse().ok()?;
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + hh * 3600 + mm * 60 + ss;
    u64::try_from(secs * 1_000_000 + frac_us).ok()
}

/// The proxy's membership log lines: (time, endpoints).
fn applied(log: &str) -> Vec<(u64, usize)> {
    log.lines()
        .filter(|l| l.contains("endpoints from "))
        .filter_map(|l| {
            let at = parse_utc_us(l.split_whitespace().next()?)?;
            // `... endpoints from SOURCE: N endpoints [fields]`
            let (_, rest) = l.split_once("endpoints from ")?;
            let mut words = rest.rsplit_once(": ")?.1.split_whitespace();
            let n = words.next()?.parse().ok()?;
            (words.next()? == "endpoints").then_some(())?;
            Some((at, n))
        })
        .collect()
}

/// Per change, the delay to the first log line after it with its count,
/// before the next change with the same count; `None` for a change never
/// applied on its own (folded into a later one, or the run ended).
fn delays(changes: &[(u64, usize)], applied: &[(u64, usize)]) -> Vec<Option<u64>> {
    changes
        .iter()
        .enumerate()
        .map(|(i, &(at, n))| {
            let limit = changes.get(i + 2).map_or(u64::MAX, |c| c.0);
            applied
                .iter()
                .find(|&&(t, m)| t >= at && m == n && t < limit)
                .map(|&(t, _)| t - at)
        })
        .collect()
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// `churn-report DIR`: `churn.tsv` lists runs (name, policy, steady|churn);
/// each has NAME.wrk, NAME.rss (VmHWM in kB), NAME.proxy.log and, for
/// churn, NAME.changes.
pub fn report(flags: &Flags) -> Result<(), String> {
    let dir = Path::new(flags.bare().first().ok_or("churn-report DIR")?);
    let runs = read(&dir.join("churn.tsv"))?;
    let mut table = String::from(
        "| policy | run | req/s | p50 ms | p99 ms | p99.9 ms | errors | p99 / steady | changes (applied) | change-to-effect median ms | max ms | peak RSS MiB |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let mut steady_p99 = std::collections::HashMap::new();
    for line in runs.lines().filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split('\t').collect();
        let [name, policy, mode] = f[..] else {
            return Err(format!("churn.tsv: bad line {line:?}"));
        };
        let wrk = parse_wrk(&read(&dir.join(format!("{name}.wrk")))?)
            .ok_or_else(|| format!("{name}.wrk: no GATEBENCH line"))?;
        let errors =
            wrk.err_connect + wrk.err_read + wrk.err_write + wrk.err_status + wrk.err_timeout;
        let rps = wrk.requests as f64 / (wrk.duration_us as f64 / 1e6);
        let rss_kb: f64 = read(&dir.join(format!("{name}.rss")))?
            .trim()
            .parse()
            .map_err(|_| format!("{name}.rss: a number of kB expected"))?;
        let p99 = wrk.p99_us / 1000.0;
        let ratio = if mode == "steady" {
            steady_p99.insert(policy.to_string(), p99);
            "1.00".to_string()
        } else {
            steady_p99
                .get(policy)
                .map_or("-".into(), |s| format!("{:.2}", p99 / s))
        };
        let (changes, median, max) = if mode == "churn" {
            let changes: Vec<(u64, usize)> = read(&dir.join(format!("{name}.changes")))?
                .lines()
                .filter_map(|l| {
                    let (t, n) = l.split_once('\t')?;
                    Some((t.parse().ok()?, n.parse().ok()?))
                })
                .collect();
            let applied = applied(&read(&dir.join(format!("{name}.proxy.log")))?);
            let mut d: Vec<u64> = delays(&changes, &applied).into_iter().flatten().collect();
            d.sort_unstable();
            let median = d
                .get(d.len() / 2)
                .map_or("-".into(), |v| format!("{:.0}", *v as f64 / 1000.0));
            let max = d
                .last()
                .map_or("-".into(), |v| format!("{:.0}", *v as f64 / 1000.0));
            (format!("{} ({})", changes.len(), d.len()), median, max)
        } else {
            ("0".into(), "-".into(), "-".into())
        };
        table.push_str(&format!(
            "| {policy} | {mode} | {rps:.0} | {:.2} | {p99:.2} | {:.2} | {errors} | {ratio} | {changes} | {median} | {max} | {:.1} |\n",
            wrk.p50_us / 1000.0,
            wrk.p999_us / 1000.0,
            rss_kb / 1024.0
        ));
    }
    print!("{table}");
    std::fs::write(dir.join("churn.md"), &table).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_times_parse_to_the_epoch() {
        // 2000-03-01T00:00:00Z is 951868800 s after the epoch.
        assert_eq!(
            parse_utc_us("2000-03-01T00:00:00.000001Z"),
            Some(951_868_800_000_001)
        );
        assert_eq!(parse_utc_us("1970-01-01T00:00:01.5Z"), Some(1_500_000));
        assert_eq!(parse_utc_us("not a time"), None);
    }

    #[test]
    fn each_change_meets_its_own_log_line() {
        let log = "2000-03-01T00:00:00.090000Z  INFO file:/x: 1023 endpoints\n\
                   2000-03-01T00:00:00.100000Z  INFO endpoints from file:/x: 1023 endpoints cluster=\"default\"\n\
                   2000-03-01T00:00:00.300000Z  INFO endpoints from file:/x: 1024 endpoints\n";
        let t0 = 951_868_800_000_000;
        let applied = applied(log);
        assert_eq!(applied, [(t0 + 100_000, 1023), (t0 + 300_000, 1024)]);
        let changes = [(t0, 1023), (t0 + 200_000, 1024), (t0 + 400_000, 1023)];
        assert_eq!(
            delays(&changes, &applied),
            [Some(100_000), Some(100_000), None]
        );
    }
}
