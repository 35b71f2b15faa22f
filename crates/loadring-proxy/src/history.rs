//! The last five minutes the dashboard draws: once a second, each
//! endpoint's requests in flight and its counters (requests, errors,
//! spills: rates come from their differences), kept by
//! the admin listener (a proxy without one keeps nothing) and served as
//! `GET /history`, so a page opened now shows the minutes before it.
//!
//! Five minutes of a large membership would be a great deal of memory (a
//! reading of 100,000 endpoints holds 100,000 cells; 300 of them, 30
//! million): the samples kept hold at most [`MAX_CELLS`] endpoint
//! readings in all, so a large membership keeps a shorter history (300
//! samples up to 3,495 endpoints, 10 at 100,000). The endpoints' names are
//! kept once per membership, not once per sample.
//!
//! Sampling reads the balancer's loads and a counter, as a `/status`
//! request does: nothing on the request path.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use crate::cluster::Cluster;
use crate::upstream::Served;

/// Time between samples.
pub const INTERVAL: Duration = Duration::from_secs(1);
/// Samples kept at most: five minutes.
pub const SAMPLES: usize = 300;
/// The most endpoint readings the samples kept hold in all (about 32 MiB):
/// past it the oldest samples go first. The newest sample is always kept.
pub const MAX_CELLS: usize = 1 << 20;

/// An endpoint's name: its address and tag.
type Name = (Arc<str>, Option<Arc<str>>);

/// One endpoint in one reading.
#[derive(Debug, Clone, Copy)]
struct Cell {
    in_flight: u64,
    served: Served,
}

/// One reading of one cluster.
#[derive(Debug)]
struct ClusterSample {
    /// What the current endpoints had served (as `/status` counts it).
    served: Served,
    /// The endpoints' names, shared with the samples before while the
    /// membership stays.
    names: Arc<[Name]>,
    /// One cell per name.
    cells: Box<[Cell]>,
}

#[derive(Debug)]
struct Sample {
    uptime_ms: u64,
    clusters: Vec<ClusterSample>,
}

impl Sample {
    /// The endpoint readings it holds.
    fn cells(&self) -> usize {
        self.clusters.iter().map(|c| c.cells.len()).sum()
    }
}

#[derive(Debug, Default)]
struct Samples {
    kept: VecDeque<Arc<Sample>>,
    /// The cells of `kept`, summed.
    cells: usize,
}

/// The samples of the last [`SAMPLES`] seconds, within [`MAX_CELLS`].
#[derive(Debug, Default)]
pub struct History {
    samples: Mutex<Samples>,
}

impl History {
    /// Records one reading of `clusters` at `uptime`; the oldest reading
    /// goes past [`SAMPLES`].
    pub fn record(&self, clusters: &[Arc<Cluster>], uptime: Duration) {
        self.record_within(clusters, uptime, MAX_CELLS);
    }

    /// [`History::record`] with `max_cells` for [`MAX_CELLS`].
    fn record_within(&self, clusters: &[Arc<Cluster>], uptime: Duration, max_cells: usize) {
        let mut samples = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        let previous = samples.kept.back().cloned();
        let sample = Sample {
            uptime_ms: u64::try_from(uptime.as_millis()).unwrap_or(u64::MAX),
            clusters: clusters
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let loads = c.balancer().loads();
                    let upstreams = c.upstreams_of(loads.iter().map(|(e, _)| e));
                    let before = previous.as_ref().and_then(|p| p.clusters.get(i));
                    let same_names = before.is_some_and(|b| {
                        b.names.len() == loads.len()
                            && b.names.iter().zip(&loads).all(|((addr, tag), (e, _))| {
                                &**addr == e.addr() && tag.as_deref() == e.tag()
                            })
                    });
                    let names = match before {
                        Some(b) if same_names => b.names.clone(),
                        _ => loads
                            .iter()
                            .map(|(e, _)| (e.addr().into(), e.tag().map(Into::into)))
                            .collect(),
                    };
                    let cells = loads
                        .iter()
                        .zip(upstreams)
                        .map(|((_, load), upstream)| Cell {
                            in_flight: *load,
                            served: upstream.map(|u| u.served()).unwrap_or_default(),
                        })
                        .collect();
                    ClusterSample {
                        served: c.served(),
                        names,
                        cells,
                    }
                })
                .collect(),
        };
        samples.cells += sample.cells();
        samples.kept.push_back(Arc::new(sample));
        while samples.kept.len() > SAMPLES || (samples.cells > max_cells && samples.kept.len() > 1)
        {
            if let Some(oldest) = samples.kept.pop_front() {
                samples.cells -= oldest.cells();
            }
        }
    }

    /// The samples as JSON (docs/proxy.md, `GET /history`): per cluster and
    /// per endpoint, series aligned on `uptime_ms` (`null` where an
    /// endpoint was not a member).
    pub fn to_json(&self, clusters: &[Arc<Cluster>]) -> Value {
        // Shared, not copied: the lock is held for as long as a clone of
        // the list of pointers takes.
        let samples: Vec<Arc<Sample>> = self
            .samples
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .kept
            .iter()
            .cloned()
            .collect();
        let n = samples.len();
        let described: Vec<Value> = clusters
            .iter()
            .enumerate()
            .map(|(i, cluster)| {
                // Endpoints in order of first appearance; one pass per
                // sample (a thousand endpoints stay cheap).
                let mut index: HashMap<(&str, Option<&str>), usize> = HashMap::new();
                let mut series: Vec<[Vec<Option<u64>>; 4]> = Vec::new();
                let mut order: Vec<(&str, Option<&str>)> = Vec::new();
                for (j, s) in samples.iter().enumerate() {
                    let Some(c) = s.clusters.get(i) else { continue };
                    for ((addr, tag), cell) in c.names.iter().zip(&c.cells) {
                        let id = (&**addr, tag.as_deref());
                        let k = *index.entry(id).or_insert_with(|| {
                            order.push(id);
                            series.push(std::array::from_fn(|_| vec![None; n]));
                            series.len() - 1
                        });
                        series[k][0][j] = Some(cell.in_flight);
                        series[k][1][j] = Some(cell.served.attempts);
                        series[k][2][j] = Some(cell.served.failures);
                        series[k][3][j] = Some(cell.served.spills);
                    }
                }
                let endpoints: Vec<Value> = order
                    .iter()
                    .zip(&series)
                    .map(|((addr, tag), [in_flight, requests, errors, spills])| {
                        json!({
                            "addr": addr,
                            "tag": tag,
                            "in_flight": in_flight,
                            "requests": requests,
                            "errors": errors,
                            "spills": spills,
                        })
                    })
                    .collect();
                let total = |f: fn(&Served) -> u64| -> Vec<Option<u64>> {
                    samples
                        .iter()
                        .map(|s| s.clusters.get(i).map(|c| f(&c.served)))
                        .collect()
                };
                json!({
                    "name": cluster.name(),
                    "requests": total(|s| s.attempts),
                    "errors": total(|s| s.failures),
                    "spills": total(|s| s.spills),
                    "endpoints": endpoints,
                })
            })
            .collect();
        json!({
            "interval_ms": u64::try_from(INTERVAL.as_millis()).unwrap_or(u64::MAX),
            "uptime_ms": samples.iter().map(|s| s.uptime_ms).collect::<Vec<_>>(),
            "clusters": described,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ClusterConfig;

    fn cluster(addrs: &[&str]) -> Arc<Cluster> {
        let mut config = ClusterConfig::new("c", "rr".parse().unwrap());
        config.endpoints = addrs.iter().map(|a| a.parse().unwrap()).collect();
        Arc::new(Cluster::new(config).unwrap())
    }

    #[test]
    fn keeps_five_minutes_and_aligns_endpoints_that_come_and_go() {
        let c = cluster(&["127.0.0.1:1", "127.0.0.1:2"]);
        let history = History::default();
        let clusters = [c.clone()];
        let held = c.select(None, &[]).unwrap().pick;
        history.record(&clusters, Duration::from_secs(1));
        c.set_endpoints(vec![
            "127.0.0.1:2".parse().unwrap(),
            "127.0.0.1:3".parse().unwrap(),
        ])
        .unwrap();
        history.record(&clusters, Duration::from_secs(2));
        let doc = history.to_json(&clusters);
        assert_eq!(doc["uptime_ms"], json!([1000, 2000]));
        let held_on = held.addr().to_string();
        let series_in = |doc: &Value, addr: &str| {
            doc["clusters"][0]["endpoints"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["addr"] == addr)
                .map(|e| e["in_flight"].clone())
        };
        let series = |addr: &str| series_in(&doc, addr);
        let one = if held_on == "127.0.0.1:1" { 1 } else { 0 };
        assert_eq!(series("127.0.0.1:1"), Some(json!([one, null])));
        assert_eq!(series("127.0.0.1:2"), Some(json!([1 - one, 1 - one])));
        assert_eq!(series("127.0.0.1:3"), Some(json!([null, 0])));
        assert_eq!(
            doc["clusters"][0]["spills"],
            json!([0, 0]),
            "round robin never spills"
        );
        assert_eq!(
            doc["clusters"][0]["requests"],
            json!([1, 1 - one]),
            "the held pick, counted while its endpoint is a member"
        );
        for t in 3..=(SAMPLES as u64 + 5) {
            history.record(&clusters, Duration::from_secs(t));
        }
        let doc = history.to_json(&clusters);
        let times = doc["uptime_ms"].as_array().unwrap();
        assert_eq!(times.len(), SAMPLES);
        assert_eq!(times[0], 6000, "the oldest went first");
        assert_eq!(series_in(&doc, "127.0.0.1:1"), None);
        drop(held);
    }

    #[test]
    fn a_large_membership_keeps_fewer_samples_within_the_cells() {
        let c = cluster(&["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"]);
        let clusters = [c.clone()];
        let history = History::default();
        // Room for 10 cells: three samples of three endpoints.
        for t in 1..=5 {
            history.record_within(&clusters, Duration::from_secs(t), 10);
        }
        let doc = history.to_json(&clusters);
        assert_eq!(doc["uptime_ms"], json!([3000, 4000, 5000]));
        assert_eq!(history.samples.lock().unwrap().cells, 9);
        // One sample larger than the room is still kept, alone.
        history.record_within(&clusters, Duration::from_secs(6), 2);
        let doc = history.to_json(&clusters);
        assert_eq!(doc["uptime_ms"], json!([6000]));
        assert_eq!(doc["clusters"][0]["endpoints"].as_array().unwrap().len(), 3);
        assert_eq!(history.samples.lock().unwrap().cells, 3);
    }

    #[test]
    fn names_are_kept_once_while_the_membership_stays() {
        let c = cluster(&["127.0.0.1:1", "127.0.0.1:2"]);
        let clusters = [c.clone()];
        let history = History::default();
        history.record(&clusters, Duration::from_secs(1));
        history.record(&clusters, Duration::from_secs(2));
        c.set_endpoints(vec!["127.0.0.1:2".parse().unwrap()])
            .unwrap();
        history.record(&clusters, Duration::from_secs(3));
        let samples = history.samples.lock().unwrap();
        let names: Vec<&Arc<[Name]>> = samples.kept.iter().map(|s| &s.clusters[0].names).collect();
        assert!(Arc::ptr_eq(names[0], names[1]));
        assert!(!Arc::ptr_eq(names[1], names[2]));
        assert_eq!(&*names[2][0].0, "127.0.0.1:2");
    }
}
