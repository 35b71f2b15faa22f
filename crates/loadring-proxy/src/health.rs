//! Health: active checks (a GET of `health_path` every `health_interval`,
//! `health_rise`/`health_fall` in a row to flip). They only move the
//! balancer's health marks: unhealthy endpoints are walked past, nothing is
//! rebuilt, and their keys come back to them when they recover.
//!
//! Passive ejection (`eject_after` consecutive failed requests take an
//! endpoint out for `eject_for`) is the balancer's lifecycle, fed by each
//! request's outcome (see [`ClusterConfig::balancer_policy`]): one
//! mechanism, atomics on the request path, no lock.
//!
//! [`ClusterConfig::balancer_policy`]: crate::config::ClusterConfig::balancer_policy

use std::sync::Arc;
use std::time::Duration;

use http_body_util::BodyExt;
use tokio::task::{JoinHandle, JoinSet};

use crate::cluster::{Backend, Cluster};
use crate::connect::Upstream;
use crate::request_body::Outgoing;

/// Starts the cluster's active checks, if it has a `health_path`.
pub fn spawn_active_checks(cluster: Arc<Cluster>) -> Option<JoinHandle<()>> {
    let path = cluster.config().health.path.clone()?;
    let client = Arc::new(Upstream::for_cluster(&cluster));
    Some(tokio::spawn(async move {
        let health = cluster.config().health.clone();
        let deadline = health.interval.min(cluster.config().timeout);
        let mut ticker = tokio::time::interval(health.interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            ticker.tick().await;
            let mut checks = JoinSet::new();
            for upstream in cluster.upstreams() {
                let (client, path) = (client.clone(), path.clone());
                checks.spawn(async move {
                    let passed = check(&client, &upstream, &path, deadline).await;
                    (upstream, passed)
                });
            }
            while let Some(done) = checks.join_next().await {
                let Ok((upstream, passed)) = done else {
                    continue;
                };
                upstream.checked(passed, health.rise, health.fall);
                cluster.apply_health(&upstream);
            }
        }
    }))
}

/// The most of a check's answer that is read: its status decides, and a
/// health path that serves a large file (or a stream) is neither read
/// whole nor held in memory; past it, the connection is closed.
const MAX_CHECK_BODY: u64 = 64 << 10;

/// One check: a GET answered 2xx or 3xx, its body read (up to
/// [`MAX_CHECK_BODY`]), within `deadline`.
async fn check(client: &Upstream, upstream: &Backend, path: &str, deadline: Duration) -> bool {
    let request = http::Request::get(path)
        .header(http::header::HOST, upstream.authority().as_str())
        .body(Outgoing::empty());
    let Ok(request) = request else {
        return false;
    };
    let attempt = async {
        let connection = client.checkout(upstream.shared_addr(), false).await.ok()?;
        let response = connection.send(request.into()).await.ok()?;
        let status = response.head.status();
        let ok = status.is_success() || status.is_redirection();
        let mut body = response.body;
        let mut read: u64 = 0;
        while read <= MAX_CHECK_BODY {
            match body.frame().await {
                None => break,
                Some(frame) => {
                    let frame = frame.ok()?;
                    read += frame.data_ref().map_or(0, |data| data.len() as u64);
                }
            }
        }
        Some(ok)
    };
    matches!(
        tokio::time::timeout(deadline, attempt).await,
        Ok(Some(true))
    )
}
