//! Following a cluster's membership: its endpoints file (`--endpoints`) or
//! its discovery source (`--discover`), both through `loadring-discovery`
//! (the file is re-read on a change seen by a watch of its folder, on a
//! 250 ms poll, and on SIGHUP). Each new membership replaces the
//! discovered part of the pool (the inline endpoints stay first); a source
//! that fails keeps the current pool and logs one line saying why.

use std::sync::Arc;

use loadring::Endpoint;
use loadring_discovery::{Discovery, SourceSpec};
use tokio::task::JoinHandle;

use crate::cluster::Cluster;
use crate::config::{check_backend_addr, Naming};
use crate::error::{ProxyError, ProxyErrorKind};

/// The source a cluster follows, if any: `--discover`, or `--endpoints
/// FILE` (the same as `--discover file:FILE`).
pub fn source_of(cluster: &Cluster) -> Option<SourceSpec> {
    let config = cluster.config();
    config
        .discover
        .clone()
        .or_else(|| config.endpoints_file.clone().map(SourceSpec::File))
}

/// Starts following the cluster's source, if it has one, and applies its
/// first membership.
///
/// # Errors
/// The source cannot start (etcd unreachable, a name that does not
/// resolve, an unreadable file): one line naming it.
pub async fn start_discovery(
    cluster: &Cluster,
    naming: Naming,
) -> Result<Option<Discovery>, ProxyError> {
    let Some(spec) = source_of(cluster) else {
        return Ok(None);
    };
    // The source checks each endpoint as it reads it, so a file's bad
    // address is named by the line it was read from.
    let check = Arc::new(|e: &Endpoint| check_backend_addr(e));
    let mut discovery = Discovery::start_checked(spec, check).await.map_err(|e| {
        let setting = if cluster.config().discover.is_some() {
            naming.name("discover")
        } else {
            naming.name("endpoints_file")
        };
        ProxyError::new(ProxyErrorKind::Discovery, format!("{setting} {e}")).with_setting(setting)
    })?;
    let first = discovery.membership();
    if first.is_empty() && cluster.balancer().endpoints().is_empty() {
        tracing::warn!(
            cluster = cluster.name(),
            "{}: no endpoints yet; answering 503 until some appear",
            discovery.spec()
        );
    }
    apply_membership(cluster, &discovery.spec().to_string(), first);
    Ok(Some(discovery))
}

/// Follows `discovery` for the cluster, each new membership applied off
/// this runtime's threads (see [`apply_off_the_workers`]). This installs a SIGHUP handler for
/// the process (tokio's): from then on SIGHUP asks the source to read its
/// membership again instead of ending the process.
pub fn spawn_membership(cluster: Arc<Cluster>, mut discovery: Discovery) -> JoinHandle<()> {
    tokio::spawn(async move {
        let source = discovery.spec().to_string();
        let mut hangups = hangups();
        loop {
            tokio::select! {
                membership = discovery.changed() => {
                    apply_off_the_workers(&cluster, &source, membership).await;
                }
                Some(()) = next_hangup(&mut hangups) => discovery.refresh(),
            }
        }
    })
}

/// Applies `discovered` on a blocking thread, then returns: a new
/// balancer is built there and published when ready. The build is long for
/// large tables (maglev's 131,071 slots over 1,024 endpoints, the shares of
/// the admin's layout), and this task runs on a worker serving clients,
/// whose requests would wait for it. Picks never wait: they read the
/// balancer's current snapshot until the new one is in place. Memberships
/// are applied one at a time, in order.
async fn apply_off_the_workers(cluster: &Arc<Cluster>, source: &str, discovered: Vec<Endpoint>) {
    let (on_it, from) = (cluster.clone(), source.to_string());
    let applying = tokio::task::spawn_blocking(move || apply_membership(&on_it, &from, discovered));
    if let Err(e) = applying.await {
        tracing::error!(
            cluster = cluster.name(),
            "{source}: the membership could not be applied: {e}"
        );
    }
}

fn hangups() -> Option<tokio::signal::unix::Signal> {
    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok()
}

async fn next_hangup(signal: &mut Option<tokio::signal::unix::Signal>) -> Option<()> {
    match signal {
        Some(s) => s.recv().await,
        None => std::future::pending().await,
    }
}

/// Replaces the cluster's pool with its inline endpoints and `discovered`.
/// A membership with an endpoint the proxy cannot connect to is refused
/// whole (as a file with a line that does not parse): the current pool is
/// kept and one line names the culprit. The source started by
/// [`start_discovery`] refuses such a membership itself, naming a file's
/// line; here the pool's own check is the backstop. An empty pool is not
/// applied either.
pub fn apply_membership(cluster: &Cluster, source: &str, discovered: Vec<Endpoint>) {
    let kept = |why: &str| {
        tracing::warn!(
            cluster = cluster.name(),
            "{source}: {why}; keeping the current {} endpoints",
            cluster.balancer().endpoints().len()
        );
    };
    let mut all = cluster.config().endpoints.clone();
    all.extend(discovered);
    if all.is_empty() {
        return kept("no endpoints");
    }
    match cluster.set_endpoints(all) {
        Ok(true) => tracing::info!(
            cluster = cluster.name(),
            "endpoints from {source}: {} endpoints",
            cluster.balancer().endpoints().len()
        ),
        Ok(false) => {}
        Err(e) => kept(&e.to_string()),
    }
}
