//! The terminal report: the run in a few lines, one row per policy, a verdict
//! per policy, and who served how much.

use std::fmt::Write;

use super::args::{Change, Config};
use super::engine::{Outcome, Setup, MIN_MEAN, WARMUP_SHARE};
use super::workload::thousands;

pub fn render(config: &Config, setup: &Setup<'_>, outcomes: &[Outcome], wall: f64) -> String {
    let mut out = String::new();
    header(&mut out, config, setup);
    out.push('\n');
    metrics(&mut out, outcomes);
    out.push('\n');
    verdicts(&mut out, outcomes);
    out.push('\n');
    shares(&mut out, setup, outcomes);
    let _ = writeln!(
        out,
        "\npeak/mean: worst in-flight of a picked endpoint over the mean per endpoint (after {:.0}% warm-up, mean >= {MIN_MEAN})",
        WARMUP_SHARE * 100.0
    );
    let _ = writeln!(
        out,
        "locality: requests served by their key's natural owner; churn: keys whose owner changed at the membership change"
    );
    let _ = writeln!(
        out,
        "{} policies simulated in {wall:.2}s wall time; --json for machines, --plot FILE.png for a picture",
        outcomes.len()
    );
    out
}

fn header(out: &mut String, config: &Config, setup: &Setup<'_>) {
    let seconds = setup.trace.end() as f64 / 1e9;
    let per_endpoint = config.rate * config.service.mean_ns() / 1e9 / config.endpoints.len() as f64;
    let _ = writeln!(
        out,
        "loadring simulate: {} requests, {} endpoints, seed {}",
        thousands(config.requests as u64),
        config.endpoints.len(),
        config.seed
    );
    let _ = writeln!(
        out,
        "  keys        {}",
        config.workload.describe(config.keys)
    );
    let _ = writeln!(
        out,
        "  traffic     Poisson {}/s for {seconds:.1}s of virtual time, service {} ms: ~{per_endpoint:.1} in flight per endpoint",
        thousands(config.rate.round() as u64),
        config.service,
    );
    if !config.zones.is_empty() {
        let _ = writeln!(
            out,
            "  zones       requests from {} zones equally, zone-1 .. zone-{}",
            config.zones.len(),
            config.zones.len()
        );
    }
    if config.events.is_empty() {
        let _ = writeln!(out, "  membership  fixed");
    }
    for event in &config.events {
        let at = event.at as f64 / 1e9;
        let _ = match &event.change {
            Change::Remove(addr) => writeln!(out, "  membership  {addr} removed at {at:.1}s"),
            Change::Add(e) => writeln!(out, "  membership  {e} added at {at:.1}s"),
        };
    }
}

fn opt(value: Option<f64>, decimals: usize) -> String {
    value.map_or_else(|| "-".into(), |v| format!("{v:.decimals$}"))
}

fn metrics(out: &mut String, outcomes: &[Outcome]) {
    let width = policy_width(outcomes);
    let _ = writeln!(
        out,
        "{:<width$}  {:>9}  {:>9}  {:>8}  {:>6}  {:>6}  {:>7}",
        "policy", "peak/mean", "cap viol.", "locality", "churn", "ideal", "ns/pick"
    );
    for o in outcomes {
        let _ = writeln!(
            out,
            "{:<width$}  {:>9}  {:>9}  {:>8}  {:>6}  {:>6}  {:>7.0}",
            o.name,
            opt(o.max_over_mean, 2),
            o.cap_violations
                .map_or_else(|| "-".into(), |v| v.to_string()),
            opt(o.locality, 3),
            opt(o.churn, 3),
            opt(o.ideal_churn, 3),
            o.ns_per_pick,
        );
    }
}

fn policy_width(outcomes: &[Outcome]) -> usize {
    outcomes
        .iter()
        .map(|o| o.name.len())
        .max()
        .unwrap_or(0)
        .max("policy".len())
}

fn verdicts(out: &mut String, outcomes: &[Outcome]) {
    let width = policy_width(outcomes);
    let _ = writeln!(out, "verdict");
    for o in outcomes {
        let _ = writeln!(out, "{:<width$}  {}", o.name, verdict(o));
    }
}

/// One line a person can act on, from the numbers alone.
pub fn verdict(o: &Outcome) -> String {
    let zoned = o.spec.inner().is_some() && o.spec.is_hashing();
    let owner = |locality: Option<f64>| match locality {
        Some(l) if l >= 1.0 => "every request on its key's owner".to_string(),
        Some(l) => format!("{} of requests on their key's owner", percent(l)),
        None if zoned => {
            "key affinity not measured (the owner depends on the request's zone)".to_string()
        }
        None => "no key affinity: a key's requests go anywhere".to_string(),
    };
    let peak = match o.max_over_mean {
        Some(m) => format!("peak {m:.2}x the mean"),
        None => format!("peak not measured (under {MIN_MEAN} in flight per endpoint)"),
    };
    // Caps are checked only where they are measured (not per zone).
    let measured = o.cap_violations.is_some();
    let bound = match (o.spec.load_factor(), o.spec.hash_balance_factor()) {
        (Some(factor), _) => Some(format!("{factor}x the mean, rounded up")),
        (None, Some(f)) => Some(format!("Envoy's: {f}% of the mean, plus one")),
        (None, None) => None,
    }
    .filter(|_| measured);
    let mut line = match (bound, o.max_over_mean) {
        (Some(cap), _) => match o.cap_violations.unwrap_or(0) {
            0 => format!(
                "bounded: never over its cap ({cap}), {peak}; {}",
                owner(o.locality)
            ),
            v => format!(
                "bounded, yet {v} picks went over the cap ({cap}); {}",
                owner(o.locality)
            ),
        },
        (None, Some(m)) if m >= 1.5 && o.locality.is_some() => format!(
            "hot spot: the busiest endpoint peaks at {m:.1}x the mean; {}",
            owner(o.locality)
        ),
        (None, Some(_)) if o.locality.is_some() => {
            format!("balanced here ({peak}); {}", owner(o.locality))
        }
        (None, Some(_)) if zoned => format!("{peak}; {}", owner(None)),
        (None, Some(_)) => format!("even load ({peak}), but {}", owner(None)),
        (None, None) => format!("{peak}; {}", owner(o.locality)),
    };
    if let (Some(churn), Some(must)) = (o.churn, o.necessary_churn) {
        let (churn, must) = (churn * 100.0, must * 100.0);
        let _ = if churn <= must + 0.05 {
            write!(line, "; a change moves only the keys it must ({churn:.1}%)")
        } else if churn <= 1.1 * must {
            write!(
                line,
                "; a change moves a few more keys than it must ({churn:.1}% for {must:.1}%)"
            )
        } else {
            write!(
                line,
                "; a change also moves keys between endpoints that stay ({churn:.1}% for {must:.1}%)"
            )
        };
    }
    line
}

fn percent(share: f64) -> String {
    format!("{:.0}%", share * 100.0)
}

/// Beyond this many endpoints the share table would not fit a terminal.
const MAX_COLUMNS: usize = 16;

/// Who served how much: a share of all requests per endpoint and policy (or,
/// with many endpoints, the busiest and the idlest).
fn shares(out: &mut String, setup: &Setup<'_>, outcomes: &[Outcome]) {
    let width = policy_width(outcomes);
    if setup.addrs.len() > MAX_COLUMNS {
        let _ = writeln!(out, "share of requests, busiest and idlest endpoint");
        for o in outcomes {
            let total = o.requests.iter().sum::<u64>().max(1) as f64;
            let share = |i: usize| o.requests[i] as f64 * 100.0 / total;
            let by_share = |a: &usize, b: &usize| o.requests[*a].cmp(&o.requests[*b]);
            let busiest = (0..o.requests.len()).max_by(by_share).unwrap_or(0);
            let idlest = (0..o.requests.len()).min_by(by_share).unwrap_or(0);
            let _ = writeln!(
                out,
                "{:<width$}  {} {:.2}%, {} {:.2}%",
                o.name,
                setup.addrs[busiest],
                share(busiest),
                setup.addrs[idlest],
                share(idlest)
            );
        }
        return;
    }
    let (labels, legend) = short_labels(&setup.addrs);
    let col = labels.iter().map(|l| l.len()).max().unwrap_or(0).max(5);
    let _ = writeln!(out, "share of requests per endpoint, % ({legend})");
    let _ = write!(out, "{:<width$}", "policy");
    for label in &labels {
        let _ = write!(out, "  {label:>col$}");
    }
    out.push('\n');
    for o in outcomes {
        let total = o.requests.iter().sum::<u64>().max(1) as f64;
        let _ = write!(out, "{:<width$}", o.name);
        for &n in &o.requests {
            let _ = write!(out, "  {:>col$.1}", n as f64 * 100.0 / total);
        }
        out.push('\n');
    }
}

/// Column labels for addresses: what is left after their common prefix and
/// suffix (`10.0.0.1:80`, `10.0.0.12:80` -> `1`, `12`, legend `10.0.0.*:80`),
/// or `#1`, `#2`, ... when that leaves them ambiguous or too long.
pub fn short_labels(addrs: &[String]) -> (Vec<String>, String) {
    let numbered = || {
        let labels: Vec<String> = (1..=addrs.len()).map(|i| format!("#{i}")).collect();
        let legend = addrs
            .iter()
            .enumerate()
            .map(|(i, a)| format!("#{} {a}", i + 1))
            .collect::<Vec<_>>()
            .join(", ");
        (labels, legend)
    };
    if addrs.len() < 2 {
        return numbered();
    }
    let first: Vec<char> = addrs[0].chars().collect();
    let mut prefix = first.len();
    let mut suffix = first.len();
    for a in &addrs[1..] {
        let c: Vec<char> = a.chars().collect();
        prefix = prefix.min(first.iter().zip(&c).take_while(|(x, y)| x == y).count());
        suffix = suffix.min(
            first
                .iter()
                .rev()
                .zip(c.iter().rev())
                .take_while(|(x, y)| x == y)
                .count(),
        );
    }
    let labels: Vec<String> = addrs
        .iter()
        .map(|a| {
            let c: Vec<char> = a.chars().collect();
            let end = c.len().saturating_sub(suffix).max(prefix);
            c[prefix.min(c.len())..end].iter().collect()
        })
        .collect();
    let unique = labels
        .iter()
        .enumerate()
        .all(|(i, l)| !l.is_empty() && !labels[..i].contains(l));
    if !unique || labels.iter().any(|l| l.len() > 12) {
        return numbered();
    }
    let pre: String = first[..prefix].iter().collect();
    let post: String = first[first.len() - suffix..].iter().collect();
    (labels, format!("endpoint {pre}*{post}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn labels_drop_the_common_prefix_and_suffix() {
        let (labels, legend) =
            short_labels(&strings(&["10.0.0.1:80", "10.0.0.2:80", "10.0.0.10:80"]));
        assert_eq!(labels, strings(&["1", "2", "10"]));
        assert_eq!(legend, "endpoint 10.0.0.*:80");
    }

    #[test]
    fn ambiguous_labels_fall_back_to_numbers() {
        // Common prefix `web1` would leave `` for the first.
        let (labels, legend) = short_labels(&strings(&["web1", "web10"]));
        assert_eq!(labels, strings(&["#1", "#2"]));
        assert_eq!(legend, "#1 web1, #2 web10");
        let (labels, _) = short_labels(&strings(&["a"]));
        assert_eq!(labels, strings(&["#1"]));
    }
}
