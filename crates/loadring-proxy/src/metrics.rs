//! Prometheus metrics, as text on the admin listener's `/metrics`.
//!
//! Counters are kept as requests go; gauges (`loadring_in_flight`,
//! `loadring_endpoint_healthy`) are read from the balancers at scrape time,
//! so they are never out of step with the guards; so is
//! `loadring_worker_connections`, read from the workers' counts. With a single cluster the
//! series carry only their own labels (`endpoint`, `code`); with several,
//! a `cluster` label is added.
//!
//! Label values (endpoint addresses, tags, cluster names) are escaped as
//! the text format says when they are encoded (label_value.rs), here and
//! in `endpoint_counters`. Label names, metric names and help texts are
//! this module's constants.

use std::sync::Arc;

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{EncodeLabel, EncodeLabelSet, LabelSetEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::cluster::Cluster;
use crate::endpoint_counters::{EndpointCounters, ReportLabels, RequestLabels};
use crate::label_value::Escaped;
use crate::places::Places;
use crate::upstream::Upstream;
use crate::workers::WorkerLoads;

/// Labels named by this module (`cluster`, `endpoint`, `tag`, `worker`),
/// their values as given: escaped when encoded.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Labels(Vec<(&'static str, String)>);

impl EncodeLabelSet for Labels {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        for (name, value) in &self.0 {
            (*name, Escaped(value)).encode(encoder.encode_label())?;
        }
        Ok(())
    }
}

/// The labels of `loadring_grpc_responses_total`: a gRPC call's status,
/// from its trailers (or the proxy's own UNAVAILABLE).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct GrpcLabels {
    cluster: Option<Arc<str>>,
    endpoint: Arc<str>,
    grpc_status: u32,
}

impl EncodeLabelSet for GrpcLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        if let Some(cluster) = &self.cluster {
            ("cluster", Escaped(cluster)).encode(encoder.encode_label())?;
        }
        ("endpoint", Escaped(&self.endpoint)).encode(encoder.encode_label())?;
        ("grpc_status", self.grpc_status).encode(encoder.encode_label())
    }
}

/// Every series the proxy exports.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// Scrapes rebuild the gauges: one at a time.
    scrape: std::sync::Mutex<()>,
    labelled_by_cluster: bool,
    in_flight: Family<Labels, Gauge>,
    healthy: Family<Labels, Gauge>,
    requests: Family<RequestLabels, Counter>,
    load_reports: Family<ReportLabels, Counter>,
    grpc: Family<GrpcLabels, Counter>,
    reported: Family<Labels, Gauge>,
    worker_connections: Family<Labels, Gauge>,
    /// The workers whose connections `worker_connections` shows, once a
    /// proxy serves with these metrics.
    workers: std::sync::OnceLock<Arc<WorkerLoads>>,
    retries: PerCluster,
    reused_retries: PerCluster,
    spilled: PerCluster,
    abandoned_cancelled: PerCluster,
    /// The places for abandoned requests whose use `abandoned` shows, once
    /// a gateway is built with these metrics.
    abandoned_places: std::sync::OnceLock<Places>,
    abandoned: Gauge,
    reset_floods: Counter,
    started: std::time::Instant,
    history: crate::history::History,
}

/// One cluster's counters without endpoint labels (see [`Metrics::cluster`]).
#[derive(Debug, Clone)]
pub struct ClusterCounters {
    retries: Counter,
    reused_retries: Counter,
    spilled: Counter,
}

impl ClusterCounters {
    /// Counts a retry.
    pub fn retry(&self) {
        self.retries.inc();
    }

    /// Counts a request sent again after a stale keep-alive connection.
    pub fn reused_connection_retry(&self) {
        self.reused_retries.inc();
    }

    /// Counts a bounded pick that left the key's owner.
    pub fn spill(&self) {
        self.spilled.inc();
    }
}

/// A counter per cluster: a family labelled `cluster` when there are
/// several, a single series otherwise (no empty `{}`).
#[derive(Debug, Clone)]
enum PerCluster {
    One(Counter),
    Labelled(Family<Labels, Counter>),
}

impl PerCluster {
    fn new(labelled: bool) -> Self {
        if labelled {
            PerCluster::Labelled(Family::default())
        } else {
            PerCluster::One(Counter::default())
        }
    }

    fn register(&self, registry: &mut Registry, name: &str, help: &str) {
        match self {
            PerCluster::One(c) => registry.register(name, help, c.clone()),
            PerCluster::Labelled(f) => registry.register(name, help, f.clone()),
        }
    }

    fn counter(&self, cluster: &str) -> Counter {
        match self {
            PerCluster::One(c) => c.clone(),
            PerCluster::Labelled(f) => {
                f.get_or_create_owned(&Labels(vec![("cluster", cluster.to_string())]))
            }
        }
    }
}

impl Metrics {
    /// Registers the series; `labelled_by_cluster` adds a `cluster` label
    /// (for configs with several clusters).
    pub fn new(labelled_by_cluster: bool) -> Self {
        let mut registry = Registry::default();
        let in_flight = Family::<Labels, Gauge>::default();
        let healthy = Family::<Labels, Gauge>::default();
        let requests = Family::<RequestLabels, Counter>::default();
        let load_reports = Family::<ReportLabels, Counter>::default();
        let reported = Family::<Labels, Gauge>::default();
        let grpc = Family::<GrpcLabels, Counter>::default();
        let worker_connections = Family::<Labels, Gauge>::default();
        let retries = PerCluster::new(labelled_by_cluster);
        let spilled = PerCluster::new(labelled_by_cluster);
        let reused_retries = PerCluster::new(labelled_by_cluster);
        let abandoned_cancelled = PerCluster::new(labelled_by_cluster);
        let abandoned = Gauge::default();
        registry.register(
            "loadring_in_flight",
            "Requests in flight per endpoint, held until the response body is sent or the client leaves",
            in_flight.clone(),
        );
        registry.register(
            "loadring_endpoint_healthy",
            "1 if the endpoint is marked healthy (active checks and passive ejection), else 0",
            healthy.clone(),
        );
        registry.register(
            "loadring_requests",
            "Attempts per endpoint and status code (502: no response, 504: timed out)",
            requests.clone(),
        );
        registry.register(
            "loadring_load_reports",
            "Responses of clusters with --load-report, per endpoint and result: ok (the report was used), malformed (ignored), missing",
            load_reports.clone(),
        );
        registry.register(
            "loadring_grpc_responses",
            "gRPC calls per endpoint and grpc-status (from the trailers; 14 UNAVAILABLE when the proxy reached no backend)",
            grpc.clone(),
        );
        registry.register(
            "loadring_reported_load",
            "Per endpoint the fleet-wide load the bounded cap uses: the backend's last fresh report plus this proxy's picks since, minus those completed since (absent without a fresh report)",
            reported.clone(),
        );
        registry.register(
            "loadring_worker_connections",
            "Client connections each worker thread serves now (the gateway's, over all clusters)",
            worker_connections.clone(),
        );
        retries.register(
            &mut registry,
            "loadring_retries",
            "Attempts made after a failed one",
        );
        reused_retries.register(
            &mut registry,
            "loadring_reused_connection_retries",
            "Requests sent again on a new connection after a reused keep-alive connection was found closed",
        );
        spilled.register(
            &mut registry,
            "loadring_spilled",
            "Bounded picks that left the key's owner because it was at its cap",
        );
        registry.register(
            "loadring_abandoned",
            "Requests whose client left that are still read to their end now (over all clusters; at most --max-abandoned)",
            abandoned.clone(),
        );
        abandoned_cancelled.register(
            &mut registry,
            "loadring_abandoned_cancelled",
            "Requests cancelled when their client left because --max-abandoned requests were already being read to their end",
        );
        let reset_floods = Counter::default();
        registry.register(
            "loadring_client_reset_floods",
            "Client connections closed because they reset most of their requests before their answers (at least 100, and more than half: HTTP/2 rapid reset)",
            reset_floods.clone(),
        );
        Metrics {
            registry,
            scrape: std::sync::Mutex::new(()),
            labelled_by_cluster,
            in_flight,
            healthy,
            requests,
            load_reports,
            grpc,
            reported,
            worker_connections,
            workers: std::sync::OnceLock::new(),
            retries,
            reused_retries,
            spilled,
            abandoned_cancelled,
            abandoned_places: std::sync::OnceLock::new(),
            abandoned,
            reset_floods,
            started: std::time::Instant::now(),
            history: crate::history::History::default(),
        }
    }

    /// Shows the connections of `loads`' workers from now on: the first
    /// proxy serving with these metrics calls it; later calls change nothing.
    pub(crate) fn count_workers(&self, loads: Arc<WorkerLoads>) {
        let _ = self.workers.set(loads);
    }

    /// Shows the use of `places` (the places for abandoned requests) from
    /// now on: the gateway calls it once; later calls change nothing.
    pub(crate) fn count_abandoned(&self, places: Places) {
        let _ = self.abandoned_places.set(places);
    }

    /// `loadring_client_reset_floods_total`, for a client connection's
    /// [`ResetFlood`](crate::reset_flood::ResetFlood).
    pub(crate) fn reset_floods(&self) -> Counter {
        self.reset_floods.clone()
    }

    /// Time since the metrics were registered (the gateway was built): the
    /// time base of `/status`'s counters.
    pub fn uptime(&self) -> std::time::Duration {
        self.started.elapsed()
    }

    fn labels(&self, cluster: &str, rest: &[(&'static str, &str)]) -> Labels {
        let mut labels = Vec::with_capacity(rest.len() + 1);
        if self.labelled_by_cluster {
            labels.push(("cluster", cluster.to_string()));
        }
        labels.extend(rest.iter().map(|&(k, v)| (k, v.to_string())));
        Labels(labels)
    }

    /// The counters of `upstream` in `cluster`, resolved on its first
    /// count and kept in it (an upstream belongs to one gateway).
    fn of<'u>(&self, cluster: &Arc<str>, upstream: &'u Upstream) -> &'u EndpointCounters {
        upstream.counters(|| {
            EndpointCounters::new(
                self.requests.clone(),
                self.load_reports.clone(),
                self.labelled_by_cluster.then(|| cluster.clone()),
                upstream.shared_addr().clone(),
            )
        })
    }

    /// Counts an attempt of `cluster` on `upstream` that ended with `code`.
    #[inline]
    pub fn request(&self, cluster: &Arc<str>, upstream: &Upstream, code: u16) {
        self.of(cluster, upstream).request(code);
    }

    /// Counts a response of `cluster` from `upstream` whose load report was
    /// `result` (`ok`, `malformed` or `missing`).
    pub fn load_report(&self, cluster: &Arc<str>, upstream: &Upstream, result: &'static str) {
        self.of(cluster, upstream).load_report(result);
    }

    /// The counters of `cluster` without endpoint labels, resolved once (a
    /// forwarder holds them).
    pub fn cluster(&self, cluster: &str) -> ClusterCounters {
        ClusterCounters {
            retries: self.retries.counter(cluster),
            reused_retries: self.reused_retries.counter(cluster),
            spilled: self.spilled.counter(cluster),
        }
    }

    /// `cluster`'s count of requests cancelled when their client left, for
    /// want of a place for abandoned requests.
    pub(crate) fn abandoned_cancelled(&self, cluster: &str) -> Counter {
        self.abandoned_cancelled.counter(cluster)
    }

    /// Counts a gRPC call of `cluster` on `endpoint` that ended with
    /// `grpc_status`.
    pub fn grpc_response(&self, cluster: &Arc<str>, endpoint: &Arc<str>, grpc_status: u32) {
        let labels = GrpcLabels {
            cluster: self.labelled_by_cluster.then(|| cluster.clone()),
            endpoint: endpoint.clone(),
            grpc_status,
        };
        self.grpc.get_or_create(&labels).inc();
    }

    /// The dashboard's last minutes (recorded while an admin listener runs).
    pub fn history(&self) -> &crate::history::History {
        &self.history
    }

    /// Records one sample of `clusters` into [`Metrics::history`].
    pub fn sample(&self, clusters: &[Arc<Cluster>]) {
        self.history.record(clusters, self.uptime());
    }

    /// Counts a retry.
    pub fn retry(&self, cluster: &str) {
        self.retries.counter(cluster).inc();
    }

    /// Counts a request sent again after a stale keep-alive connection.
    pub fn reused_connection_retry(&self, cluster: &str) {
        self.reused_retries.counter(cluster).inc();
    }

    /// Counts a bounded pick that left the key's owner.
    pub fn spill(&self, cluster: &str) {
        self.spilled.counter(cluster).inc();
    }

    /// Makes the counters without endpoint labels appear at 0 from the start.
    pub fn declare(&self, cluster: &str) {
        self.retries.counter(cluster);
        self.reused_retries.counter(cluster);
        self.spilled.counter(cluster);
        self.abandoned_cancelled.counter(cluster);
    }

    /// The Prometheus text exposition, gauges read from `clusters` now.
    pub fn render(&self, clusters: &[std::sync::Arc<Cluster>]) -> String {
        let _one_at_a_time = self.scrape.lock().unwrap_or_else(|e| e.into_inner());
        self.in_flight.clear();
        self.healthy.clear();
        self.reported.clear();
        self.worker_connections.clear();
        if let Some(places) = self.abandoned_places.get() {
            self.abandoned
                .set(i64::try_from(places.taken()).unwrap_or(i64::MAX));
        }
        if let Some(loads) = self.workers.get() {
            for (worker, open) in loads.open().into_iter().enumerate() {
                let labels = Labels(vec![("worker", worker.to_string())]);
                self.worker_connections
                    .get_or_create(&labels)
                    .set(i64::try_from(open).unwrap_or(i64::MAX));
            }
        }
        for cluster in clusters {
            let balancer = cluster.balancer();
            if cluster.config().load_report.is_some() {
                for (endpoint, load) in balancer.reported_loads() {
                    let Some(load) = load else { continue };
                    let mut rest = vec![("endpoint", endpoint.addr())];
                    if let Some(tag) = endpoint.tag() {
                        rest.push(("tag", tag));
                    }
                    let labels = self.labels(cluster.name(), &rest);
                    self.reported
                        .get_or_create(&labels)
                        .set(i64::try_from(load).unwrap_or(i64::MAX));
                }
            }
            for state in balancer.states(loadring::clock::now()) {
                let endpoint = &state.endpoint;
                let mut rest = vec![("endpoint", endpoint.addr())];
                if let Some(tag) = endpoint.tag() {
                    rest.push(("tag", tag));
                }
                let labels = self.labels(cluster.name(), &rest);
                self.in_flight
                    .get_or_create(&labels)
                    .set(i64::try_from(state.in_flight).unwrap_or(i64::MAX));
                // Marked healthy and not ejected: picks take it.
                let healthy = state.healthy && state.lifecycle.ejected_for.is_none();
                self.healthy.get_or_create(&labels).set(i64::from(healthy));
            }
        }
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut text, &self.registry);
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ClusterConfig;

    /// A cluster named `name` (the config does not restrict it) over
    /// `endpoints` (`ADDR[ tag=T]`, as in an endpoints file).
    fn cluster(name: &str, endpoints: &[&str]) -> Arc<Cluster> {
        let mut config = ClusterConfig::new(name, "rr".parse().unwrap());
        config.endpoints = endpoints.iter().map(|e| e.parse().unwrap()).collect();
        Arc::new(Cluster::new(config).unwrap())
    }

    /// Splits a label value's inside at its closing quote, checking that it
    /// escapes only `\`, `"` and a line feed: `None` when it does not.
    fn quoted(text: &str) -> Option<(&str, &str)> {
        let mut chars = text.char_indices();
        while let Some((at, c)) = chars.next() {
            match c {
                '"' => return Some((&text[..at], &text[at + 1..])),
                '\\' => match chars.next() {
                    Some((_, '\\' | '"' | 'n')) => {}
                    _ => return None,
                },
                '\n' => return None,
                _ => {}
            }
        }
        None
    }

    /// Whether `line` is a sample `name{label="value",...} value` (or one
    /// without labels) of the proxy's series, each label value properly
    /// quoted and escaped, each label name one the proxy uses once.
    fn is_sample(line: &str) -> bool {
        let Some(name_end) = line.find(['{', ' ']) else {
            return false;
        };
        let (name, mut rest) = line.split_at(name_end);
        if !name.starts_with("loadring_")
            || !name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
        {
            return false;
        }
        if let Some(labels) = rest.strip_prefix('{') {
            rest = labels;
            let mut seen = Vec::new();
            loop {
                let Some((label, value)) = rest.split_once("=\"") else {
                    return false;
                };
                let known = [
                    "cluster",
                    "endpoint",
                    "tag",
                    "code",
                    "result",
                    "grpc_status",
                    "worker",
                ];
                if !known.contains(&label) || seen.contains(&label) {
                    return false;
                }
                seen.push(label);
                let Some((_, after)) = quoted(value) else {
                    return false;
                };
                if let Some(more) = after.strip_prefix(',') {
                    rest = more;
                } else if let Some(end) = after.strip_prefix('}') {
                    rest = end;
                    break;
                } else {
                    return false;
                }
            }
        }
        rest.strip_prefix(' ')
            .is_some_and(|value| value.parse::<f64>().is_ok())
    }

    #[test]
    fn label_values_are_escaped() {
        // A cluster name with every character to escape and a whole fake
        // series after a line feed; tags that would close the value, the
        // braces, or forge a cluster label.
        let evil = "a\"b\\c\nloadring_fake{cluster=\"x\"} 1";
        let spoof = "s\",cluster=\"spoof";
        let clusters = [
            cluster(
                evil,
                &[
                    "127.0.0.1:30101 tag=y\",cluster=\"spoof",
                    "127.0.0.1:30102 tag=x\"}",
                ],
            ),
            cluster(spoof, &["127.0.0.1:30103 tag=back\\slash"]),
        ];
        let metrics = Metrics::new(true);
        for cluster in &clusters {
            metrics.declare(cluster.name());
            let name: Arc<str> = cluster.name().into();
            for upstream in cluster.upstreams() {
                metrics.request(&name, &upstream, 200);
                metrics.load_report(&name, &upstream, "ok");
                metrics.grpc_response(&name, upstream.shared_addr(), 14);
            }
            metrics.cluster(cluster.name()).retry();
        }
        let text = metrics.render(&clusters);

        let e = r#"cluster="a\"b\\c\nloadring_fake{cluster=\"x\"} 1""#;
        let s = r#"cluster="s\",cluster=\"spoof""#;
        let expected = [
            format!(
                r#"loadring_in_flight{{{e},endpoint="127.0.0.1:30101",tag="y\",cluster=\"spoof"}} 0"#
            ),
            format!(r#"loadring_in_flight{{{e},endpoint="127.0.0.1:30102",tag="x\"}}"}} 0"#),
            format!(r#"loadring_in_flight{{{s},endpoint="127.0.0.1:30103",tag="back\\slash"}} 0"#),
            format!(r#"loadring_endpoint_healthy{{{e},endpoint="127.0.0.1:30102",tag="x\"}}"}} 1"#),
            format!(
                r#"loadring_endpoint_healthy{{{s},endpoint="127.0.0.1:30103",tag="back\\slash"}} 1"#
            ),
            format!(r#"loadring_requests_total{{{e},endpoint="127.0.0.1:30101",code="200"}} 1"#),
            format!(r#"loadring_requests_total{{{s},endpoint="127.0.0.1:30103",code="200"}} 1"#),
            format!(
                r#"loadring_load_reports_total{{{e},endpoint="127.0.0.1:30102",result="ok"}} 1"#
            ),
            format!(
                r#"loadring_grpc_responses_total{{{s},endpoint="127.0.0.1:30103",grpc_status="14"}} 1"#
            ),
            format!(r#"loadring_retries_total{{{e}}} 1"#),
            format!(r#"loadring_retries_total{{{s}}} 1"#),
            format!(r#"loadring_spilled_total{{{s}}} 0"#),
            format!(r#"loadring_abandoned_cancelled_total{{{e}}} 0"#),
        ];
        let lines: Vec<&str> = text.lines().collect();
        for line in &expected {
            assert!(lines.contains(&line.as_str()), "no line {line}\n{text}");
        }
        for line in &lines {
            if !line.starts_with("# ") {
                assert!(is_sample(line), "not a sample: {line}\n{text}");
            }
        }
        assert_eq!(lines.last(), Some(&"# EOF"), "{text}");
        // Nothing forged: one sample per series above, none of the fake one.
        assert!(!text.contains("\nloadring_fake"), "{text}");
        let samples = lines.iter().filter(|l| !l.starts_with("# ")).count();
        // 3 endpoints × (in_flight, healthy, requests, load_reports, grpc)
        // + 2 clusters × 4 counters without endpoint labels + abandoned
        // + reset floods.
        assert_eq!(samples, 3 * 5 + 2 * 4 + 2, "{text}");
    }
}
