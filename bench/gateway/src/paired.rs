//! Same-seed comparisons: loadring's rows against the peers', round by round.
//!
//! `bench/gateway.sh` resets the backends' service-time streams with the
//! round's number before each measurement, so round N of every row is served
//! the same service times (common random numbers). A difference between two
//! rows' rounds N is then the proxies' and the machine's, not the draws', and
//! the median of those differences reads a gap that the rows' medians, each
//! taken over other draws, blur: a row's p99 moves by about 0.08 ms from one
//! set of draws to another, more than the proxies differ.
//!
//! For every row whose proxy is loadring's and every row of the same
//! workload whose proxy is not: p99 minus the peer's, in ms, and req/s over
//! the peer's, per round both have, and their medians. Samples without a
//! round (a name without `.rN`) are left out.

use crate::report::{first_seen, median, Row};

/// One measurement of a row: which round, and the figures compared.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub proxy: String,
    pub workload: String,
    pub round: u32,
    pub p99_ms: f64,
    pub rps: f64,
}

impl Sample {
    /// The sample of a run named `NAME.rN` (N from 1), `None` for a name
    /// without a round.
    pub fn of(name: &str, row: &Row) -> Option<Sample> {
        Some(Sample {
            proxy: row.proxy.clone(),
            workload: row.workload.clone(),
            round: round_of(name)?,
            p99_ms: row.p99_ms,
            rps: row.rps,
        })
    }
}

/// The round N of a run named `ANYTHING.rN`.
pub fn round_of(name: &str) -> Option<u32> {
    let (_, n) = name.rsplit_once(".r")?;
    // `parse` alone would take a sign (`+1`); an empty `n` fails to parse.
    if !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse().ok().filter(|&n| n > 0)
}

/// loadring's row against a peer's, over the rounds both have.
#[derive(Debug, Clone, PartialEq)]
pub struct Pairing {
    pub workload: String,
    pub loadring: String,
    pub peer: String,
    /// (round, p99 difference in ms, req/s ratio), by round.
    pub rounds: Vec<(u32, f64, f64)>,
}

impl Pairing {
    /// The median p99 difference, ms (loadring's less the peer's).
    pub fn p99_difference(&self) -> f64 {
        median(self.rounds.iter().map(|r| r.1).collect())
    }

    /// The median of loadring's req/s over the peer's.
    pub fn rps_ratio(&self) -> f64 {
        median(self.rounds.iter().map(|r| r.2).collect())
    }
}

fn is_loadring(proxy: &str) -> bool {
    proxy.starts_with("loadring")
}

/// Every loadring row against every peer row of its workload, in the order
/// the rows were first measured; pairs with no round in common are left out.
pub fn compare(samples: &[Sample]) -> Vec<Pairing> {
    let rows = first_seen(
        samples
            .iter()
            .map(|s| (s.workload.as_str(), s.proxy.as_str())),
    );
    let mut pairings = Vec::new();
    for &(workload, ours) in rows.iter().filter(|(_, p)| is_loadring(p)) {
        for &(_, peer) in rows
            .iter()
            .filter(|(w, p)| *w == workload && !is_loadring(p))
        {
            let of = |proxy: &str| -> Vec<&Sample> {
                samples
                    .iter()
                    .filter(|s| s.workload == workload && s.proxy == proxy)
                    .collect()
            };
            let theirs = of(peer);
            let mut rounds: Vec<(u32, f64, f64)> = of(ours)
                .into_iter()
                .filter_map(|a| {
                    let b = theirs.iter().find(|b| b.round == a.round)?;
                    let ratio = if b.rps > 0.0 { a.rps / b.rps } else { 0.0 };
                    Some((a.round, a.p99_ms - b.p99_ms, ratio))
                })
                .collect();
            rounds.sort_by_key(|r| r.0);
            rounds.dedup_by_key(|r| r.0);
            if !rounds.is_empty() {
                pairings.push(Pairing {
                    workload: workload.to_string(),
                    loadring: ours.to_string(),
                    peer: peer.to_string(),
                    rounds,
                });
            }
        }
    }
    pairings
}

/// The Markdown table of `pairings`; empty for none.
pub fn table(pairings: &[Pairing]) -> String {
    if pairings.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "| workload | loadring | against | rounds | p99 difference ms, median (round by round) | req/s over the peer's, median (round by round) |\n\
         |---|---|---|---:|---|---|\n",
    );
    for p in pairings {
        let each = |f: fn(&(u32, f64, f64)) -> String| {
            p.rounds.iter().map(f).collect::<Vec<_>>().join(" / ")
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {:+.3} ({}) | {:.3} ({}) |\n",
            p.workload,
            p.loadring,
            p.peer,
            p.rounds.len(),
            p.p99_difference(),
            each(|r| format!("{:+.3}", r.1)),
            p.rps_ratio(),
            each(|r| format!("{:.3}", r.2)),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(proxy: &str, workload: &str, round: u32, p99_ms: f64, rps: f64) -> Sample {
        Sample {
            proxy: proxy.into(),
            workload: workload.into(),
            round,
            p99_ms,
            rps,
        }
    }

    #[test]
    fn rounds_are_read_from_the_name_end() {
        assert_eq!(round_of("uniform-nginx.r1"), Some(1));
        assert_eq!(round_of("hot-loadring-nginx-lf125.r12"), Some(12));
        assert_eq!(round_of("a.r2.r3"), Some(3), "the last suffix");
        for none in [
            "uniform-nginx",
            "x.r",
            "x.r0",
            "x.r-1",
            "x.r+1",
            "x.r1a",
            "x.rr",
            "",
            "x.r 1",
        ] {
            assert_eq!(round_of(none), None, "{none:?}");
        }
    }

    #[test]
    fn each_round_is_set_against_the_peers_round_of_the_same_seed() {
        // Rounds listed out of order, and a peer round missing: only the
        // rounds both rows have count, each against its own seed's.
        let samples = [
            s("nginx", "uniform", 2, 25.40, 39000.0),
            s("nginx", "uniform", 1, 25.60, 38000.0),
            s("loadring nginx_hash", "uniform", 1, 25.50, 38380.0),
            s("loadring nginx_hash", "uniform", 2, 25.52, 38610.0),
            s("loadring nginx_hash", "uniform", 3, 30.00, 1.0),
        ];
        let p = compare(&samples);
        assert_eq!(p.len(), 1);
        assert_eq!(
            (p[0].loadring.as_str(), p[0].peer.as_str()),
            ("loadring nginx_hash", "nginx")
        );
        let rounds: Vec<u32> = p[0].rounds.iter().map(|r| r.0).collect();
        assert_eq!(rounds, [1, 2]);
        assert!((p[0].rounds[0].1 - -0.10).abs() < 1e-9);
        assert!((p[0].rounds[1].1 - 0.12).abs() < 1e-9);
        assert!((p[0].rounds[0].2 - 1.01).abs() < 1e-9);
        assert!((p[0].rounds[1].2 - 0.99).abs() < 1e-9);
        // Two rounds: the medians are the means of the two.
        assert!((p[0].p99_difference() - 0.01).abs() < 1e-9);
        assert!((p[0].rps_ratio() - 1.0).abs() < 1e-9);
    }

    #[test]
    fn every_loadring_row_meets_every_peer_of_its_workload_only() {
        let samples = [
            s("nginx", "uniform", 1, 25.5, 100.0),
            s("haproxy", "uniform", 1, 25.6, 100.0),
            s("loadring a", "uniform", 1, 25.7, 100.0),
            s("loadring b", "uniform", 1, 25.8, 100.0),
            s("nginx", "hot", 1, 25.5, 100.0),
            s("loadring a", "hot", 1, 25.4, 100.0),
        ];
        let pairs: Vec<(String, String, String)> = compare(&samples)
            .into_iter()
            .map(|p| (p.workload, p.loadring, p.peer))
            .collect();
        let want = [
            ("uniform", "loadring a", "nginx"),
            ("uniform", "loadring a", "haproxy"),
            ("uniform", "loadring b", "nginx"),
            ("uniform", "loadring b", "haproxy"),
            ("hot", "loadring a", "nginx"),
        ];
        let want: Vec<(String, String, String)> = want
            .iter()
            .map(|(w, a, b)| (w.to_string(), a.to_string(), b.to_string()))
            .collect();
        assert_eq!(pairs, want);
    }

    #[test]
    fn an_odd_count_takes_the_middle_and_the_table_shows_each_round() {
        let samples = [
            s("nginx", "uniform", 1, 25.50, 100.0),
            s("nginx", "uniform", 2, 25.50, 100.0),
            s("nginx", "uniform", 3, 25.50, 100.0),
            s("loadring x", "uniform", 1, 25.55, 99.0),
            s("loadring x", "uniform", 2, 25.40, 101.0),
            s("loadring x", "uniform", 3, 25.90, 100.5),
        ];
        let p = compare(&samples);
        assert!((p[0].p99_difference() - 0.05).abs() < 1e-9);
        assert!((p[0].rps_ratio() - 1.005).abs() < 1e-9);
        let t = table(&p);
        let line = t.lines().nth(2).unwrap();
        assert_eq!(
            line,
            "| uniform | loadring x | nginx | 3 | +0.050 (+0.050 / -0.100 / +0.400) | 1.005 (0.990 / 1.010 / 1.005) |"
        );
    }

    #[test]
    fn a_sample_takes_its_rows_figures_and_its_names_round() {
        let row = Row {
            proxy: "loadring nginx_hash".into(),
            workload: "hot".into(),
            rps: 38500.0,
            p50_ms: 5.7,
            p99_ms: 25.5,
            p999_ms: 37.0,
            errors: 0,
            hot_over_mean: 1.0,
            peak_over_mean: 1.0,
            owner_share: 1.0,
            cpu_us: 12.0,
            samples: 1,
            cpu_us_min: 12.0,
            cpu_us_max: 12.0,
            p99_ms_min: 25.5,
            p99_ms_max: 25.5,
        };
        assert_eq!(
            Sample::of("hot-loadring-nginx.r2", &row),
            Some(s("loadring nginx_hash", "hot", 2, 25.5, 38500.0))
        );
        assert_eq!(Sample::of("hot-loadring-nginx", &row), None);
    }

    #[test]
    fn five_rounds_take_the_third_of_five() {
        let mut samples = Vec::new();
        for (round, (ours, rps)) in [(0.3, 1.0), (0.1, 3.0), (0.5, 2.0), (0.2, 5.0), (0.4, 4.0)]
            .into_iter()
            .enumerate()
        {
            let round = round as u32 + 1;
            samples.push(s("nginx", "uniform", round, 25.0, 1.0));
            samples.push(s("loadring x", "uniform", round, 25.0 + ours, rps));
        }
        let p = &compare(&samples)[0];
        assert!((p.p99_difference() - 0.3).abs() < 1e-9);
        assert!((p.rps_ratio() - 3.0).abs() < 1e-9);
    }

    #[test]
    fn no_pairs_without_a_peer_or_without_rounds_in_common() {
        assert!(compare(&[]).is_empty());
        assert!(compare(&[s("loadring a", "uniform", 1, 25.0, 1.0)]).is_empty());
        let apart = [
            s("nginx", "uniform", 1, 25.0, 1.0),
            s("loadring a", "uniform", 2, 25.0, 1.0),
        ];
        assert!(compare(&apart).is_empty());
        assert_eq!(table(&[]), "");
        // A peer without req/s gives a ratio of 0, not a division by zero.
        let zero = [
            s("nginx", "uniform", 1, 25.0, 0.0),
            s("loadring a", "uniform", 1, 25.0, 5.0),
        ];
        assert_eq!(compare(&zero)[0].rounds[0].2, 0.0);
    }
}
