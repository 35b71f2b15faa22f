//! etcd v3: every key under a prefix is one endpoint, its value an endpoint
//! line (`10.0.0.7:8080 weight=2 zone=b`). The source reads the prefix,
//! then watches it from the next revision; when the connection breaks
//! (etcd restarted, a network cut) it keeps the last good membership,
//! reconnects every 500 ms and reads the whole prefix again, so no event
//! can be missed. Endpoints come in key order, so every gateway watching
//! the prefix builds the same list. A value that is not an endpoint line
//! is skipped with a warning (the others still count); of two keys naming
//! one endpoint, the first in key order counts.
//!
//! [`register`] is the other side: it puts `PREFIX/<endpoint id>` under a
//! lease of the given TTL and keeps the lease alive (every third of the
//! TTL), so the key disappears one TTL after the registering process dies.
//! On a graceful stop it revokes the lease: the endpoint leaves at once.
//! When etcd comes back after a restart (or the lease expired while the
//! registrar could not reach it), the key is put again under a new lease.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use etcd_client::{
    Client, ConnectOptions, EventType, GetOptions, KeyValue, PutOptions, WatchOptions,
};
use loadring::Endpoint;

use crate::spec::{EtcdTarget, SourceSpec};
use crate::{DiscoveryError, DiscoveryErrorKind, Membership, Publisher};

/// How long connecting (and each request) may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The pause between reconnection attempts.
pub const RETRY: Duration = Duration::from_millis(500);

async fn connect(target: &EtcdTarget) -> Result<Client, String> {
    let options = ConnectOptions::new()
        .with_connect_timeout(CONNECT_TIMEOUT)
        .with_timeout(CONNECT_TIMEOUT)
        // A dead connection is noticed within 2 s even with no traffic.
        .with_keep_alive(Duration::from_secs(1), Duration::from_secs(1))
        .with_keep_alive_while_idle(true);
    let url = format!("http://{}", target.server);
    tokio::time::timeout(
        CONNECT_TIMEOUT,
        Client::connect([url.as_str()], Some(options)),
    )
    .await
    .map_err(|_| {
        format!(
            "etcd at {} did not answer within {CONNECT_TIMEOUT:?}",
            target.server
        )
    })?
    .map_err(|e| format!("etcd at {}: {e}", target.server))
}

/// Reads the whole prefix: the endpoints by key, and the revision read.
async fn read_prefix(
    client: &mut Client,
    target: &EtcdTarget,
) -> Result<(BTreeMap<Vec<u8>, Endpoint>, i64), String> {
    let response = tokio::time::timeout(
        CONNECT_TIMEOUT,
        client.get(
            target.prefix.as_str(),
            Some(GetOptions::new().with_prefix()),
        ),
    )
    .await
    .map_err(|_| {
        format!(
            "etcd at {}: no answer within {CONNECT_TIMEOUT:?}",
            target.server
        )
    })?
    .map_err(|e| format!("etcd at {}: {e}", target.server))?;
    let revision = response.header().map_or(0, |h| h.revision());
    let mut keys = BTreeMap::new();
    for kv in response.kvs() {
        if let Some(e) = endpoint_of(kv) {
            keys.insert(kv.key().to_vec(), e);
        }
    }
    Ok((keys, revision))
}

fn endpoint_of(kv: &KeyValue) -> Option<Endpoint> {
    let value = String::from_utf8_lossy(kv.value());
    match value.trim().parse::<Endpoint>() {
        Ok(e) => Some(e),
        Err(e) => {
            tracing::warn!(
                "etcd key {}: `{}` is not an endpoint ({e}); skipped",
                String::from_utf8_lossy(kv.key()),
                value.trim()
            );
            None
        }
    }
}

fn membership(keys: &BTreeMap<Vec<u8>, Endpoint>) -> Membership {
    let mut out: Membership = Vec::with_capacity(keys.len());
    for e in keys.values() {
        if !out.iter().any(|o| o.same_backend(e)) {
            out.push(e.clone());
        }
    }
    out
}

/// Connects and reads the prefix once: the client and the membership.
pub(crate) async fn first_membership(target: &EtcdTarget) -> Result<(Client, Membership), String> {
    let mut client = connect(target).await?;
    let (keys, _) = read_prefix(&mut client, target).await?;
    Ok((client, membership(&keys)))
}

/// Follows the prefix: a read, then a watch from the next revision; after
/// any failure, a new connection, a fresh read and a new watch. (The first
/// round reads again on the client [`first_membership`] opened: whatever
/// changed in between is in that read.)
pub(crate) async fn follow(client: Client, target: EtcdTarget, publisher: Publisher) {
    let mut client = Some(client);
    let mut last_problem: Option<String> = None;
    loop {
        match watch_once(client.take(), &target, &publisher, &mut last_problem).await {
            // A re-read was asked for: at once, nothing to report.
            Ok(()) => last_problem = None,
            Err(e) => {
                if last_problem.as_ref() != Some(&e) {
                    publisher.keep(&e);
                    last_problem = Some(e);
                }
                tokio::select! {
                    () = tokio::time::sleep(RETRY) => {},
                    () = publisher.refreshed() => {},
                }
            }
        }
    }
}

/// One connection's read and watch: `Ok` when a re-read was asked for,
/// the problem when the connection or the watch failed.
async fn watch_once(
    client: Option<Client>,
    target: &EtcdTarget,
    publisher: &Publisher,
    last_problem: &mut Option<String>,
) -> Result<(), String> {
    let mut c = match client {
        Some(c) => c,
        None => connect(target).await?,
    };
    let (mut current, rev) = read_prefix(&mut c, target).await?;
    if last_problem.take().is_some() {
        tracing::info!("etcd at {}: reconnected", target.server);
    }
    // After a reconnect: whatever changed while away.
    publisher.publish(membership(&current));
    let options = WatchOptions::new()
        .with_prefix()
        .with_start_revision(rev + 1);
    let mut stream = tokio::time::timeout(
        CONNECT_TIMEOUT,
        c.watch(target.prefix.as_str(), Some(options)),
    )
    .await
    .map_err(|_| {
        format!(
            "etcd at {}: no watch within {CONNECT_TIMEOUT:?}",
            target.server
        )
    })?
    .map_err(|e| format!("etcd at {}: watch: {e}", target.server))?;
    loop {
        let response = tokio::select! {
            r = stream.message() => r,
            () = publisher.refreshed() => return Ok(()),
        };
        let response = match response {
            Ok(Some(r)) => r,
            Ok(None) => return Err(format!("etcd at {}: the watch ended", target.server)),
            Err(e) => return Err(format!("etcd at {}: watch: {e}", target.server)),
        };
        if response.canceled() {
            return Err(format!(
                "etcd at {}: watch canceled (compacted at {})",
                target.server,
                response.compact_revision()
            ));
        }
        let mut changed = false;
        for event in response.events() {
            let Some(kv) = event.kv() else { continue };
            match event.event_type() {
                EventType::Put => match endpoint_of(kv) {
                    Some(e) => {
                        current.insert(kv.key().to_vec(), e);
                    }
                    None => {
                        current.remove(kv.key());
                    }
                },
                EventType::Delete => {
                    current.remove(kv.key());
                }
            }
            changed = true;
        }
        if changed {
            publisher.publish(membership(&current));
        }
    }
}

/// Registers `endpoint` under `target`'s prefix with a lease of `ttl`
/// (whole seconds, at least 1) until `stop` completes, then revokes it.
/// The first registration must succeed (an unreachable etcd is an error);
/// after that, failures are logged and retried every 500 ms, the key put
/// again under a new lease when the old one is gone.
///
/// # Errors
/// A TTL under 1 s; etcd unreachable at the start.
pub async fn register(
    target: &EtcdTarget,
    endpoint: &Endpoint,
    ttl: Duration,
    stop: impl Future<Output = ()>,
) -> Result<(), DiscoveryError> {
    let secs = ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0);
    if secs == 0 {
        return Err(DiscoveryError::new(
            DiscoveryErrorKind::Register,
            None,
            format!("--ttl {ttl:?}: an etcd lease lasts at least 1s"),
        ));
    }
    let secs = i64::try_from(secs).unwrap_or(i64::MAX);
    let key = target.key_for(endpoint);
    let value = endpoint.to_string();
    tokio::pin!(stop);
    let mut session = Session::start(target, &key, &value, secs)
        .await
        .map_err(|e| {
            let shown = SourceSpec::Etcd(target.clone()).to_string();
            DiscoveryError::new(DiscoveryErrorKind::Register, Some(&shown), e)
        })?;
    tracing::info!(
        "registered {key} = {value} (lease {:x}, ttl {secs}s)",
        session.lease
    );
    let mut last_problem: Option<String> = None;
    loop {
        let outcome = tokio::select! {
            r = session.keep_alive(secs) => r,
            () = &mut stop => {
                session.revoke().await;
                tracing::info!("unregistered {key}");
                return Ok(());
            }
        };
        if let Err(e) = outcome {
            if last_problem.as_ref() != Some(&e) {
                tracing::warn!("{key}: {e}; registering again");
                last_problem = Some(e);
            }
        }
        // Register again: a new connection, a new lease, the key put again.
        loop {
            tokio::select! {
                () = tokio::time::sleep(RETRY) => {},
                () = &mut stop => return Ok(()),
            }
            let attempt = tokio::select! {
                s = Session::start(target, &key, &value, secs) => s,
                () = &mut stop => return Ok(()),
            };
            match attempt {
                Ok(s) => {
                    tracing::info!("registered {key} again (lease {:x})", s.lease);
                    session = s;
                    last_problem = None;
                    break;
                }
                Err(e) => {
                    if last_problem.as_ref() != Some(&e) {
                        tracing::warn!("{key}: {e}; retrying");
                        last_problem = Some(e);
                    }
                }
            }
        }
    }
}

struct Session {
    client: Client,
    lease: i64,
}

impl Session {
    async fn start(target: &EtcdTarget, key: &str, value: &str, ttl: i64) -> Result<Self, String> {
        let mut client = connect(target).await?;
        let fail = |what: &str, e: String| format!("etcd at {}: {what}: {e}", target.server);
        let lease = tokio::time::timeout(CONNECT_TIMEOUT, client.lease_grant(ttl, None))
            .await
            .map_err(|_| fail("lease grant", "timed out".into()))?
            .map_err(|e| fail("lease grant", e.to_string()))?
            .id();
        tokio::time::timeout(
            CONNECT_TIMEOUT,
            client.put(key, value, Some(PutOptions::new().with_lease(lease))),
        )
        .await
        .map_err(|_| fail("put", "timed out".into()))?
        .map_err(|e| fail("put", e.to_string()))?;
        Ok(Session { client, lease })
    }

    /// Keeps the lease alive every third of the TTL; returns when it cannot.
    async fn keep_alive(&mut self, ttl: i64) -> Result<(), String> {
        let (mut keeper, mut responses) = self
            .client
            .lease_keep_alive(self.lease)
            .await
            .map_err(|e| format!("keep-alive: {e}"))?;
        let every = Duration::from_millis((ttl as u64 * 1000 / 3).max(300));
        loop {
            keeper
                .keep_alive()
                .await
                .map_err(|e| format!("keep-alive: {e}"))?;
            let answer =
                tokio::time::timeout(every.max(Duration::from_secs(1)), responses.message())
                    .await
                    .map_err(|_| "keep-alive: no answer".to_string())?
                    .map_err(|e| format!("keep-alive: {e}"))?
                    .ok_or_else(|| "keep-alive: the stream ended".to_string())?;
            if answer.ttl() <= 0 {
                return Err(format!("lease {:x} expired", self.lease));
            }
            tokio::time::sleep(every).await;
        }
    }

    async fn revoke(&mut self) {
        let _ = tokio::time::timeout(Duration::from_secs(2), self.client.lease_revoke(self.lease))
            .await;
    }
}
