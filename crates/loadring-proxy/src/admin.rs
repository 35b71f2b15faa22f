//! The admin listener: `GET /metrics` (Prometheus text) and `GET /status`
//! (JSON: each cluster's policy, key and endpoints).

use std::sync::Arc;

use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use serde_json::{json, Value};

use crate::cluster::Cluster;
use crate::forward::{local_response, text_body, ProxyBody};
use crate::metrics::Metrics;

/// Answers one admin request.
pub fn answer(
    request: &Request<Incoming>,
    clusters: &[Arc<Cluster>],
    metrics: &Metrics,
) -> Response<ProxyBody> {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return local_response(
            StatusCode::METHOD_NOT_ALLOWED,
            "GET /metrics or GET /status",
        );
    }
    match request.uri().path() {
        "/metrics" => {
            let mut response = Response::new(text_body(metrics.render(clusters)));
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                ),
            );
            response
        }
        "/status" => {
            let mut response = Response::new(text_body(status(clusters).to_string() + "\n"));
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            response
        }
        _ => local_response(StatusCode::NOT_FOUND, "GET /metrics or GET /status"),
    }
}

/// The status document. With a single cluster, its `policy`, `key` and
/// `endpoints` are also at the top level.
pub fn status(clusters: &[Arc<Cluster>]) -> Value {
    let described: Vec<Value> = clusters.iter().map(|c| describe(c)).collect();
    let mut document = json!({ "clusters": described });
    if let [only] = described.as_slice() {
        for field in ["policy", "key", "endpoints"] {
            document[field] = only[field].clone();
        }
    }
    document
}

fn describe(cluster: &Cluster) -> Value {
    let balancer = cluster.balancer();
    let endpoints: Vec<Value> = balancer
        .loads()
        .into_iter()
        .map(|(e, in_flight)| {
            json!({
                "addr": e.addr(),
                "tag": e.tag(),
                "zone": e.zone(),
                "weight": e.weight(),
                "healthy": balancer.is_healthy(e.id()).unwrap_or(false),
                "in_flight": in_flight,
                "cap": balancer.cap(e.id()).ok().flatten(),
            })
        })
        .collect();
    json!({
        "name": cluster.name(),
        "policy": cluster.policy().to_string(),
        "key": cluster.key().sources().iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        "endpoints": endpoints,
    })
}
