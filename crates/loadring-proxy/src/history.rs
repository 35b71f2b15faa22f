//! The last five minutes the dashboard draws: once a second, each
//! endpoint's requests in flight and its counters (requests, errors,
//! spills: rates come from their differences), kept by
//! the admin listener (a proxy without one keeps nothing) and served as
//! `GET /history`, so a page opened now shows the minutes before it.
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
/// Samples kept: five minutes.
pub const SAMPLES: usize = 300;

/// One endpoint in one reading.
#[derive(Debug, Clone)]
struct EndpointSample {
    addr: Arc<str>,
    tag: Option<Arc<str>>,
    in_flight: u64,
    served: Served,
}

/// One reading of one cluster.
#[derive(Debug, Clone)]
struct ClusterSample {
    /// What the current endpoints had served (as `/status` counts it).
    served: Served,
    endpoints: Vec<EndpointSample>,
}

#[derive(Debug, Clone)]
struct Sample {
    uptime_ms: u64,
    clusters: Vec<ClusterSample>,
}

/// The samples of the last [`SAMPLES`] seconds.
#[derive(Debug, Default)]
pub struct History {
    samples: Mutex<VecDeque<Sample>>,
}

impl History {
    /// Records one reading of `clusters` at `uptime`; the oldest reading
    /// goes past [`SAMPLES`].
    pub fn record(&self, clusters: &[Arc<Cluster>], uptime: Duration) {
        let mut samples = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        let previous = samples.back();
        let sample = Sample {
            uptime_ms: u64::try_from(uptime.as_millis()).unwrap_or(u64::MAX),
            clusters: clusters
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let loads = c.balancer().loads();
                    let upstreams = c.upstreams_of(loads.iter().map(|(e, _)| e));
                    let before = previous.and_then(|p| p.clusters.get(i));
                    ClusterSample {
                        served: c.served(),
                        endpoints: loads
                            .iter()
                            .zip(upstreams)
                            .enumerate()
                            .map(|(j, ((e, load), upstream))| {
                                // Names are shared with the previous sample
                                // while the membership stays: five minutes
                                // of samples hold one copy of each.
                                let same = before.and_then(|b| b.endpoints.get(j)).filter(|b| {
                                    &*b.addr == e.addr() && b.tag.as_deref() == e.tag()
                                });
                                EndpointSample {
                                    addr: same.map_or_else(|| e.addr().into(), |b| b.addr.clone()),
                                    tag: same
                                        .map_or_else(|| e.tag().map(Into::into), |b| b.tag.clone()),
                                    in_flight: *load,
                                    served: upstream.map(|u| u.served()).unwrap_or_default(),
                                }
                            })
                            .collect(),
                    }
                })
                .collect(),
        };
        if samples.len() == SAMPLES {
            samples.pop_front();
        }
        samples.push_back(sample);
    }

    /// The samples as JSON (docs/proxy.md, `GET /history`): per cluster and
    /// per endpoint, series aligned on `uptime_ms` (`null` where an
    /// endpoint was not a member).
    pub fn to_json(&self, clusters: &[Arc<Cluster>]) -> Value {
        let samples: Vec<Sample> = self
            .samples
            .lock()
            .unwrap_or_else(|e| e.into_inner())
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
                    for e in &c.endpoints {
                        let id = (&*e.addr, e.tag.as_deref());
                        let k = *index.entry(id).or_insert_with(|| {
                            order.push(id);
                            series.push(std::array::from_fn(|_| vec![None; n]));
                            series.len() - 1
                        });
                        series[k][0][j] = Some(e.in_flight);
                        series[k][1][j] = Some(e.served.attempts);
                        series[k][2][j] = Some(e.served.failures);
                        series[k][3][j] = Some(e.served.spills);
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
}
