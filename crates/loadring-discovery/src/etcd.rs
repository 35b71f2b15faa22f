//! etcd v3: every key under a prefix is one endpoint, its value an endpoint
//! line (`10.0.0.7:8080 weight=2 zone=b`). The source reads the prefix,
//! then watches it from the next revision; when the connection breaks
//! (etcd restarted, a network cut) it keeps the last good membership,
//! reconnects every 500 ms and reads the whole prefix again, so no event
//! can be missed. Endpoints come in key order, so every gateway watching
//! the prefix builds the same list. A value that is not an endpoint line
//! (one line of at most [`MAX_VALUE_BYTES`], in UTF-8) is skipped with a
//! warning (the others still count); of two keys naming
//! one endpoint, the first in key order counts.
//!
//! A prefix holds at most [`MAX_ENDPOINTS`] keys (as an endpoints file
//! lists at most as many endpoints), whose keys and values hold at most
//! [`MAX_PREFIX_BYTES`]: a prefix past either bound, read or grown through
//! the watch, is refused with one line naming the bound, and the current
//! membership stays (at the start: an error); it is read again every
//! [`RETRY`] until it is back in bounds. The prefix is read in pages, at
//! one revision.
//!
//! [`register`] is the other side: it puts `PREFIX/<endpoint id>` under a
//! lease of the given TTL and keeps the lease alive (every third of the
//! TTL), so the key disappears one TTL after the registering process dies.
//! On a graceful stop it revokes the lease: the endpoint leaves at once.
//! When etcd comes back after a restart (or the lease expired while the
//! registrar could not reach it), the key is put again under a new lease.

use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::time::Duration;

use etcd_client::{Client, ConnectOptions, EventType, GetOptions, PutOptions, WatchOptions};
use loadring::{Endpoint, Id};

use crate::spec::{EtcdTarget, SourceSpec};
use crate::{DiscoveryError, DiscoveryErrorKind, Membership, Publisher, MAX_ENDPOINTS};
use loadring::{Echo, EchoBytes};

/// How long connecting (and each request) may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The pause between reconnection attempts.
pub const RETRY: Duration = Duration::from_millis(500);
/// The longest lease [`register`] takes: etcd's own most (`MaxLeaseTTL`,
/// 9,000,000,000 s), past which etcd refuses the lease.
pub const MAX_TTL: Duration = Duration::from_secs(9_000_000_000);

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

/// The most bytes the keys and values under a prefix may hold in all:
/// 64 MiB, room for [`MAX_ENDPOINTS`] keys of endpoint lines twice as long
/// as a file of [`MAX_FILE_BYTES`](crate::MAX_FILE_BYTES) holds them (a key
/// repeats its endpoint after the prefix).
pub const MAX_PREFIX_BYTES: usize = 64 << 20;

/// The longest value taken for an endpoint line: 4,096 bytes (white space
/// around it aside). A longer value (a megabyte of address) is skipped as
/// a value that is not an endpoint.
pub const MAX_VALUE_BYTES: usize = 4096;

/// How many keys one range request reads: pages of 1,024 keys stay under
/// the 4 MiB a gRPC answer may hold while each key and value are under
/// 4 KiB.
const PAGE: i64 = 1024;

/// The keys under a prefix, each with its endpoint (`None`: a value that is
/// not an endpoint line), bounded: at most `most` keys, whose keys and
/// values hold at most `most_bytes`. A put past a bound is refused whole
/// (nothing is kept of it), so a prefix that grew too large takes no more
/// memory than the bounds.
#[derive(Debug)]
pub(crate) struct Keys {
    by_key: BTreeMap<Vec<u8>, (Option<Endpoint>, usize)>,
    bytes: usize,
    most: usize,
    most_bytes: usize,
    prefix: String,
    /// Values that are not endpoints, found since the last [`Keys::report_skipped`].
    skipped: usize,
}

impl Keys {
    pub(crate) fn new(prefix: &str, most: usize, most_bytes: usize) -> Self {
        Keys {
            by_key: BTreeMap::new(),
            bytes: 0,
            most,
            most_bytes,
            prefix: prefix.to_string(),
            skipped: 0,
        }
    }

    /// Refuses a prefix of `count` keys (etcd's count of a range) at once.
    pub(crate) fn check_count(&self, count: i64) -> Result<(), String> {
        match usize::try_from(count) {
            Ok(n) if n <= self.most => Ok(()),
            _ => Err(self.too_many(&count.to_string())),
        }
    }

    fn too_many(&self, count: &str) -> String {
        format!(
            "{count} keys under `{}`: more than the {} endpoints a membership may have",
            Echo(&self.prefix),
            self.most
        )
    }

    /// `key` put with `value`: its endpoint, or none for a value that is not
    /// an endpoint line (logged: the first of a read, then counted).
    ///
    /// # Errors
    /// One key more than `most`, or keys and values past `most_bytes`.
    pub(crate) fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), String> {
        let size = key.len().saturating_add(value.len());
        let was = self.by_key.get(key).map(|(_, size)| *size);
        if was.is_none() && self.by_key.len() >= self.most {
            return Err(self.too_many(&format!("at least {}", self.most + 1)));
        }
        let bytes = self.bytes - was.unwrap_or(0);
        if bytes.saturating_add(size) > self.most_bytes {
            return Err(format!(
                "the keys and values under `{}` hold more than {} MiB, the most a membership may take",
                Echo(&self.prefix),
                self.most_bytes >> 20
            ));
        }
        let endpoint = self.endpoint_of(key, value);
        self.bytes = bytes + size;
        self.by_key.insert(key.to_vec(), (endpoint, size));
        Ok(())
    }

    /// `key` deleted.
    pub(crate) fn delete(&mut self, key: &[u8]) {
        if let Some((_, size)) = self.by_key.remove(key) {
            self.bytes -= size;
        }
    }

    fn endpoint_of(&mut self, key: &[u8], value: &[u8]) -> Option<Endpoint> {
        let value = value.trim_ascii();
        let parsed = if value.len() > MAX_VALUE_BYTES {
            Err(format!(
                "{} bytes, more than the {MAX_VALUE_BYTES} of an endpoint line",
                value.len()
            ))
        } else {
            match std::str::from_utf8(value) {
                Err(e) => Err(format!("not UTF-8 (byte {})", e.valid_up_to())),
                Ok(text) if text.contains(char::is_control) => {
                    Err("a control character: an endpoint line is one line".into())
                }
                Ok(text) => text.parse::<Endpoint>().map_err(|e| e.to_string()),
            }
        };
        match parsed {
            Ok(e) => Some(e),
            Err(e) => {
                // One line per read, however many keys are bad: a prefix of
                // a million bad values logged a million lines per reconnect.
                if self.skipped == 0 {
                    tracing::warn!(
                        "etcd key `{}`: `{}` is not an endpoint ({e}); skipped",
                        EchoBytes(key),
                        EchoBytes(value)
                    );
                }
                self.skipped += 1;
                None
            }
        }
    }

    /// Logs how many more values were skipped than the one logged.
    fn report_skipped(&mut self) {
        if self.skipped > 1 {
            tracing::warn!(
                "etcd prefix `{}`: {} more values that are not endpoints skipped",
                Echo(&self.prefix),
                self.skipped - 1
            );
        }
        self.skipped = 0;
    }

    /// The membership: the endpoints in key order, the first key of each
    /// backend (address and tag) counting.
    pub(crate) fn membership(&self) -> Membership {
        let mut seen: HashSet<Id<'_>> = HashSet::with_capacity(self.by_key.len());
        let mut firsts: Vec<&Endpoint> = Vec::with_capacity(self.by_key.len());
        for e in self.by_key.values().filter_map(|(e, _)| e.as_ref()) {
            if seen.insert(e.id()) {
                firsts.push(e);
            }
        }
        firsts.into_iter().cloned().collect()
    }
}

/// The first key past every key starting with `prefix` (etcd's range end
/// for a prefix).
fn range_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // Every byte 0xff (or no prefix): to the end of the key space.
    vec![0]
}

/// Reads the whole prefix, a page at a time at one revision: the keys, and
/// the revision read.
async fn read_prefix(client: &mut Client, target: &EtcdTarget) -> Result<(Keys, i64), String> {
    let mut keys = Keys::new(&target.prefix, MAX_ENDPOINTS, MAX_PREFIX_BYTES);
    let end = range_end(target.prefix.as_bytes());
    let mut from = target.prefix.as_bytes().to_vec();
    let mut revision = 0;
    loop {
        let mut options = GetOptions::new().with_range(end.clone()).with_limit(PAGE);
        if revision > 0 {
            options = options.with_revision(revision);
        }
        let response =
            tokio::time::timeout(CONNECT_TIMEOUT, client.get(from.clone(), Some(options)))
                .await
                .map_err(|_| {
                    format!(
                        "etcd at {}: no answer within {CONNECT_TIMEOUT:?}",
                        target.server
                    )
                })?
                .map_err(|e| format!("etcd at {}: {e}", target.server))?;
        if revision == 0 {
            revision = response.header().map_or(0, |h| h.revision());
            // Refused before its keys are read: a prefix of millions of keys
            // costs one answer, not millions of keys' worth.
            keys.check_count(response.count())?;
        }
        for kv in response.kvs() {
            keys.put(kv.key(), kv.value())?;
        }
        match response.kvs().last() {
            Some(last) if response.more() => {
                from = last.key().to_vec();
                from.push(0);
            }
            _ => break,
        }
    }
    keys.report_skipped();
    Ok((keys, revision))
}

/// Connects and reads the prefix once: the client and the membership.
pub(crate) async fn first_membership(target: &EtcdTarget) -> Result<(Client, Membership), String> {
    let mut client = connect(target).await?;
    let (keys, _) = read_prefix(&mut client, target).await?;
    Ok((client, keys.membership()))
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
    publisher.publish(current.membership());
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
                // Past a bound: the watch ends with the reason, the current
                // membership stays (logged once), and the prefix is read
                // again after the pause, refused until it is back in bounds.
                EventType::Put => current.put(kv.key(), kv.value())?,
                EventType::Delete => current.delete(kv.key()),
            }
            changed = true;
        }
        current.report_skipped();
        if changed {
            publisher.publish(current.membership());
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
/// A TTL under 1 s or over [`MAX_TTL`]; etcd unreachable at the start.
pub async fn register(
    target: &EtcdTarget,
    endpoint: &Endpoint,
    ttl: Duration,
    stop: impl Future<Output = ()>,
) -> Result<(), DiscoveryError> {
    // Saturating: `Duration::MAX` rounded up overflowed (a panic).
    let secs = ttl
        .as_secs()
        .saturating_add(u64::from(ttl.subsec_nanos() > 0));
    if secs == 0 {
        return Err(DiscoveryError::new(
            DiscoveryErrorKind::Register,
            None,
            format!("--ttl {ttl:?}: an etcd lease lasts at least 1s"),
        ));
    }
    if secs > MAX_TTL.as_secs() {
        return Err(DiscoveryError::new(
            DiscoveryErrorKind::Register,
            None,
            format!(
                "--ttl {ttl:?}: an etcd lease lasts at most {}s (accepted: 1s..={}s)",
                MAX_TTL.as_secs(),
                MAX_TTL.as_secs()
            ),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(most: usize, most_bytes: usize) -> Keys {
        Keys::new("/services/api/", most, most_bytes)
    }

    fn addrs(keys: &Keys) -> Vec<String> {
        keys.membership().iter().map(ToString::to_string).collect()
    }

    #[test]
    fn one_key_more_than_the_most_is_refused_and_nothing_of_it_kept() {
        let mut k = keys(3, MAX_PREFIX_BYTES);
        for (key, value) in [
            ("/a", "10.0.0.1:80"),
            ("/b", "junk=1"),
            ("/c", "10.0.0.3:80"),
        ] {
            k.put(key.as_bytes(), value.as_bytes()).unwrap();
        }
        // A key put again is no key more.
        k.put(b"/c", b"10.0.0.3:80 weight=2").unwrap();
        let err = k.put(b"/d", b"10.0.0.4:80").unwrap_err();
        assert_eq!(
            err,
            "at least 4 keys under `/services/api/`: more than the 3 endpoints a membership may have"
        );
        assert_eq!(addrs(&k), ["10.0.0.1:80", "10.0.0.3:80 weight=2"]);
        // A key deleted makes room for one.
        k.delete(b"/b");
        k.put(b"/d", b"10.0.0.4:80").unwrap();
        assert_eq!(addrs(&k).len(), 3);
    }

    #[test]
    fn a_count_past_the_most_is_refused_before_any_key_is_read() {
        let k = keys(MAX_ENDPOINTS, MAX_PREFIX_BYTES);
        assert!(k.check_count(1 << 20).is_ok());
        assert_eq!(
            k.check_count((1 << 20) + 1).unwrap_err(),
            "1048577 keys under `/services/api/`: more than the 1048576 endpoints a membership may have"
        );
        assert!(k.check_count(-1).is_err());
    }

    #[test]
    fn keys_and_values_past_the_most_bytes_are_refused() {
        let mut k = keys(MAX_ENDPOINTS, 40);
        k.put(b"/a", b"10.0.0.1:80").unwrap(); // 13 bytes
        let huge = vec![b'x'; 1 << 20];
        let err = k.put(b"/b", &huge).unwrap_err();
        assert!(err.contains("hold more than 0 MiB"), "{err}");
        assert!(!err.contains("xxxxx"), "{err}");
        // A value replaced counts once: 2 + 11 + 2 + 24 = 39 bytes.
        k.put(b"/a", b"10.0.0.1:81").unwrap();
        k.put(b"/c", b"10.0.0.255:8080 weight=9").unwrap();
        assert!(k.put(b"/d", b"").is_err());
        assert_eq!(addrs(&k), ["10.0.0.1:81", "10.0.0.255:8080 weight=9"]);
    }

    /// A large membership is built in linear time: the first key of each
    /// backend used to be found by a scan of the list kept so far, some
    /// 10^10 steps for these 131,072 keys (10^12 for a full prefix).
    #[test]
    fn a_large_membership_is_built_at_once() {
        const MANY: usize = 1 << 17;
        let mut k = keys(MANY, MAX_PREFIX_BYTES);
        for i in 0..MANY {
            let [_, a, b, c] = (i as u32).to_be_bytes();
            let value = format!("10.{a}.{b}.{c}:80");
            let key = format!("/services/api/{value}");
            k.put(key.as_bytes(), value.as_bytes()).unwrap();
        }
        assert_eq!(k.membership().len(), MANY);
        let err = k
            .put(b"/services/api/one-more", b"10.0.0.1:81")
            .unwrap_err();
        assert!(err.contains("more than the 131072 endpoints"), "{err}");
    }

    #[test]
    fn of_two_keys_naming_one_backend_the_first_counts() {
        let mut k = keys(10, MAX_PREFIX_BYTES);
        k.put(b"/b", b"10.0.0.1:80 weight=5").unwrap();
        k.put(b"/a", b"10.0.0.1:80 weight=2").unwrap();
        k.put(b"/c", b"10.0.0.1:80 tag=x").unwrap();
        assert_eq!(addrs(&k), ["10.0.0.1:80 weight=2", "10.0.0.1:80 tag=x"]);
    }

    #[test]
    fn a_huge_or_multi_line_value_is_no_endpoint() {
        let mut k = keys(10, MAX_PREFIX_BYTES);
        let huge = "x".repeat(MAX_VALUE_BYTES + 1);
        k.put(b"/a", huge.as_bytes()).unwrap();
        k.put(b"/b", b"10.0.0.1:80\nweight=2").unwrap();
        k.put(b"/c", b"10.0.0.2:80 \x1b[2J").unwrap();
        k.put(b"/d", b"caf\xe9:80").unwrap();
        // White space around a line is no part of it.
        k.put(b"/e", format!("  {}\n", &huge[1..]).as_bytes())
            .unwrap();
        k.put(b"/f", b" 10.0.0.3:80 weight=2\r\n").unwrap();
        assert_eq!(
            addrs(&k),
            [huge[1..].to_string(), "10.0.0.3:80 weight=2".into()]
        );
        assert_eq!(k.skipped, 4);
    }

    #[test]
    fn the_range_end_of_a_prefix() {
        assert_eq!(range_end(b"/services/api/"), b"/services/api0");
        assert_eq!(range_end(b"a\xff"), b"b");
        assert_eq!(range_end(b"\xff\xff"), b"\0");
    }
}
