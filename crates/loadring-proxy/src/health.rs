//! Health: active checks (a GET of `health_path` every `health_interval`,
//! `health_rise`/`health_fall` in a row to flip) and passive ejection
//! (`eject_after` consecutive failed requests take an endpoint out for
//! `eject_for`). Both only move the balancer's health marks: unhealthy
//! endpoints are walked past, nothing is rebuilt, and their keys come back
//! to them when they recover.

use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use tokio::task::{JoinHandle, JoinSet};

use crate::cluster::{Backend, Cluster};
use crate::connect::Upstream;
use crate::request_body::Outgoing;

/// Records a failed request on `upstream`; when it ejects the endpoint,
/// marks it unhealthy and schedules its return.
pub fn report_failure(cluster: &Arc<Cluster>, upstream: &Backend) {
    let health = &cluster.config().health;
    if !upstream.request_failed(health.eject_after, health.eject_for) {
        return;
    }
    tracing::warn!(
        cluster = cluster.name(),
        endpoint = upstream.addr(),
        "ejected for {:?} after {} failed requests in a row",
        health.eject_for,
        health.eject_after
    );
    cluster.apply_health(upstream);
    let (cluster, upstream, wait) = (cluster.clone(), upstream.clone(), health.eject_for);
    tokio::spawn(async move {
        tokio::time::sleep(wait).await;
        if upstream.end_ejection(Instant::now()) {
            cluster.apply_health(&upstream);
        }
    });
}

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

/// One check: a GET answered 2xx or 3xx, body read, within `deadline`.
async fn check(client: &Upstream, upstream: &Backend, path: &str, deadline: Duration) -> bool {
    let request = http::Request::get(path)
        .header(http::header::HOST, upstream.authority().as_str())
        .body(Outgoing::empty());
    let Ok(request) = request else {
        return false;
    };
    let attempt = async {
        let connection = client.checkout(upstream.shared_addr(), false).await.ok()?;
        let (response, held) = connection.send(request).await.ok()?;
        let ok = response.status().is_success() || response.status().is_redirection();
        let (_, body) = response.into_parts();
        held.into_body(body).collect().await.ok()?;
        Some(ok)
    };
    matches!(
        tokio::time::timeout(deadline, attempt).await,
        Ok(Some(true))
    )
}
