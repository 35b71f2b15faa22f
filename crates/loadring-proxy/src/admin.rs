//! The admin listener: `GET /` (the live dashboard, see [`crate::dashboard`]),
//! `GET /metrics` (Prometheus text), `GET /status` (JSON: each cluster's
//! policy, key, caps, counters, hash-space shares and endpoints) and
//! `GET /history` (JSON: the last five minutes of in-flight counts and
//! spills, see [`crate::history`]).
//!
//! Everything here reads state the request path keeps anyway (the
//! balancer's loads and caps, per-upstream atomics, the layout computed at
//! each membership change): a browser polling the page costs the request
//! path nothing but the balancer snapshot loads any reader makes.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use serde_json::{json, Value};

use crate::cluster::Cluster;
use crate::dashboard;
use crate::forward::{local_response, text_body, ProxyBody};
use crate::metrics::Metrics;

const ROUTES: &str = "GET / (dashboard), GET /status, GET /history or GET /metrics";

/// Answers one admin request.
pub fn answer(
    request: &Request<Incoming>,
    clusters: &[Arc<Cluster>],
    metrics: &Metrics,
) -> Response<ProxyBody> {
    let mut response = route(request, clusters, metrics);
    dashboard::secure(response.headers_mut());
    response
}

fn route(
    request: &Request<Incoming>,
    clusters: &[Arc<Cluster>],
    metrics: &Metrics,
) -> Response<ProxyBody> {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return local_response(StatusCode::METHOD_NOT_ALLOWED, ROUTES);
    }
    let path = request.uri().path();
    if let Some(asset) = dashboard::asset(path) {
        return typed(asset.body, asset.content_type);
    }
    match path {
        "/metrics" => typed(
            metrics.render(clusters),
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        ),
        "/history" => typed(
            metrics.history().to_json(clusters).to_string() + "\n",
            "application/json",
        ),
        "/status" => typed(
            status(clusters, metrics.uptime()).to_string() + "\n",
            "application/json",
        ),
        _ => local_response(StatusCode::NOT_FOUND, ROUTES),
    }
}

fn typed(body: impl Into<bytes::Bytes>, content_type: &'static str) -> Response<ProxyBody> {
    let mut response = Response::new(text_body(body));
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// The status document (docs/proxy.md lists every field). `uptime` is the
/// proxy's age, the time base of the counters' rates. With a single
/// cluster, its `policy`, `key` and `endpoints` are also at the top level.
pub fn status(clusters: &[Arc<Cluster>], uptime: Duration) -> Value {
    let described: Vec<Value> = clusters.iter().map(|c| describe(c)).collect();
    let mut document = json!({
        "uptime_ms": millis(uptime),
        "clusters": described,
    });
    if let [only] = described.as_slice() {
        for field in ["policy", "key", "endpoints"] {
            document[field] = only[field].clone();
        }
    }
    document
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn describe(cluster: &Cluster) -> Value {
    let balancer = cluster.balancer();
    let layout = cluster.layout();
    let shares: HashMap<(&str, Option<&str>), (f64, f64)> = layout
        .as_deref()
        .map(|l| {
            l.shares()
                .iter()
                .zip(l.fair_shares())
                .map(|((e, share), fair)| ((e.addr(), e.tag()), (*share, fair)))
                .collect()
        })
        .unwrap_or_default();
    // Reports are read only with --load-report; without it every endpoint
    // shows null.
    let reported: HashMap<(String, Option<String>), u64> = if cluster.config().load_report.is_some()
    {
        balancer
            .reported_loads()
            .into_iter()
            .filter_map(|(e, load)| {
                Some(((e.addr().to_string(), e.tag().map(str::to_string)), load?))
            })
            .collect()
    } else {
        HashMap::new()
    };
    // One snapshot, one pass: no lookup per endpoint.
    let states = balancer.states(loadring::clock::now());
    let upstreams = cluster.upstreams_of(states.iter().map(|s| &s.endpoint));
    let mut in_flight_total = 0u64;
    let mut bounded = false;
    let endpoints: Vec<Value> = states
        .iter()
        .zip(upstreams)
        .map(|(state, upstream)| {
            let e = &state.endpoint;
            let served = upstream.as_ref().map(|u| u.served()).unwrap_or_default();
            // Passive ejection, --eject-after's or the policy's own
            // eject_after=, is the balancer's lifecycle.
            let ejected = state.lifecycle.ejected_for;
            in_flight_total += state.in_flight;
            let share = shares.get(&(e.addr(), e.tag()));
            bounded |= state.cap.is_some();
            json!({
                "addr": e.addr(),
                "tag": e.tag(),
                "zone": e.zone(),
                "weight": e.weight(),
                "healthy": state.healthy && ejected.is_none(),
                "checked_up": upstream.as_ref().is_none_or(|u| u.checked_up()),
                "ejected_ms": ejected.map(millis),
                "slow_start": state.lifecycle.slow_start,
                "in_flight": state.in_flight,
                "reported_load": reported.get(&(e.addr().to_string(), e.tag().map(str::to_string))),
                "cap": state.cap,
                "requests": served.attempts,
                "errors": served.failures,
                "spills": served.spills,
                "share": share.map(|s| s.0),
                "fair_share": share.map(|s| s.1),
            })
        })
        .collect();
    let mean = if states.is_empty() {
        0.0
    } else {
        in_flight_total as f64 / states.len() as f64
    };
    let served = cluster.served();
    json!({
        "name": cluster.name(),
        "policy": cluster.policy().to_string(),
        "key": cluster.key().sources().iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        "bounded": bounded,
        "load_report": cluster.config().load_report.as_ref().map(|r| r.to_string()),
        "in_flight": in_flight_total,
        "in_flight_mean": mean,
        "requests": served.attempts,
        "errors": served.failures,
        "spills": served.spills,
        "layout": layout.map(|l| json!({
            "entries": l.entries(),
            "entry_label": l.entry_label(),
            "deviation": l.deviation(),
            "max_over_mean": l.max_over_mean(),
        })),
        "endpoints": endpoints,
    })
}
