//! # loadring-discovery
//!
//! Membership sources for a [`loadring::Balancer`]: who is in the pool, as
//! it changes. Each source delivers a **snapshot** — the whole membership,
//! a `Vec<Endpoint>` — every time it changes, and the consumer applies it
//! with [`Balancer::update_backends`](loadring::Balancer::update_backends)
//! (see [`apply`]): endpoints that stay keep their in-flight counts and
//! health by identity (address + tag), new ones are inserted, missing ones
//! removed, changed weights set. Snapshots rather than deltas because every
//! source below knows its whole state after each event (a re-read file, a
//! re-resolved name, an etcd range re-read after a reconnect), and a
//! snapshot cannot drift from the source after a missed event; [`changes`]
//! turns two snapshots into the insert/remove/weight steps for consumers
//! that want them (a tower `Discover` stream, logs).
//!
//! | source | spec | changes seen |
//! |---|---|---|
//! | endpoints file | `file:PATH` | folder events + a 250 ms poll, [`Discovery::refresh`] |
//! | DNS A/AAAA | `dns://NAME:PORT[?resolver=IP:PORT]` | re-resolved when the TTL runs out |
//! | DNS SRV | `dns+srv://NAME[?resolver=IP:PORT]` | port and weight from each record |
//! | etcd v3 | `etcd://HOST:PORT/PREFIX` | a watch of the prefix; reconnects |
//!
//! A source that fails after its start (an unreadable file, a failed
//! lookup, etcd down) keeps the last good membership and logs one line;
//! [`Discovery::start`] itself fails when there is no first membership to
//! start from. [`etcd::register`] is the other side of the etcd source: it
//! holds an endpoint's key under a lease kept alive, so an endpoint whose
//! process dies leaves the pool when its lease expires.
//!
//! Errors are opaque, with a kind and accessors: [`DiscoveryError`] (a bad
//! spec, a source that cannot start, a read that kept the membership, a
//! registration that cannot begin), [`EndpointLineError`] (a bad line of an
//! endpoints text) and [`EndpointRejected`] (an endpoint an
//! [`EndpointCheck`] refuses).
//!
//! ```no_run
//! use loadring::Balancer;
//! use loadring_discovery::{apply, Discovery};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let balancer: Balancer<()> = Balancer::with_backends("ring_hash".parse()?, std::iter::empty())?;
//! let mut discovery = Discovery::start("etcd://127.0.0.1:2379/services/api".parse()?).await?;
//! apply(&balancer, &discovery.membership(), |_| ())?;
//! loop {
//!     let membership = discovery.changed().await;
//!     apply(&balancer, &membership, |_| ())?;
//! }
//! # }
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use loadring::{Balancer, BuildError, Endpoint};
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;

mod bounded_read;
pub mod dns;
pub mod etcd;
pub mod file;
mod spec;

pub use bounded_read::{read_file, read_text, MAX_FILE_BYTES};

/// The most endpoints an endpoints text may list: 1,048,576, far more than
/// any pool a balancer serves, and a bound on what a file of
/// [`MAX_FILE_BYTES`] can make a balancer hold (each endpoint costs it
/// some hundreds of bytes: a file of short lines would otherwise take
/// gigabytes). The other sources hold to it too: an etcd prefix of more
/// keys and a DNS answer of more addresses are refused with one line, the
/// current membership kept (see [`etcd`], [`dns`]).
pub const MAX_ENDPOINTS: usize = 1 << 20;
pub use spec::{DnsQuery, EtcdTarget, SourceSpec, MAX_SPEC_BYTES, SOURCE_SYNTAX};

/// One membership: every endpoint in the pool, in the source's order
/// (file order, the etcd keys' order, DNS answers sorted by address).
pub type Membership = Vec<Endpoint>;

mod error;

pub use error::{
    DiscoveryError, DiscoveryErrorKind, EndpointLineError, EndpointLineErrorKind, EndpointRejected,
};

/// A check every endpoint of a membership must pass before the membership
/// is published (an address the consumer can connect to, say); it refuses
/// one with an [`EndpointRejected`]. See [`Discovery::start_checked`].
pub type EndpointCheck = Arc<dyn Fn(&Endpoint) -> Result<(), EndpointRejected> + Send + Sync>;

/// Parses endpoint lines: one endpoint per line, blank lines and `#`
/// comments ignored (the endpoints file's format).
///
/// # Errors
/// The first bad line ([`EndpointLineError::line`]), shown as `line N: why`.
pub fn parse_endpoints(text: &str) -> Result<Vec<Endpoint>, EndpointLineError> {
    parse_endpoints_checked(text, &|_| Ok(()))
}

/// [`parse_endpoints`], each endpoint also passing `check`: a line that
/// parses but fails the check is named by its line like one that does not
/// parse.
///
/// ```
/// use loadring_discovery::{parse_endpoints_checked, EndpointLineErrorKind, EndpointRejected};
///
/// let no_port_zero = |e: &loadring::Endpoint| {
///     if e.addr().ends_with(":0") { Err(EndpointRejected::new(e, "port 0")) } else { Ok(()) }
/// };
/// let text = "# pool\n10.0.0.1:80\n\n10.0.0.2:0\n";
/// let err = parse_endpoints_checked(text, &no_port_zero).unwrap_err();
/// assert_eq!(err.kind(), EndpointLineErrorKind::Rejected);
/// assert_eq!(err.line(), 4);
/// assert_eq!(err.rejected().map(|r| r.reason()), Some("port 0"));
/// assert_eq!(err.to_string(), "line 4: endpoint `10.0.0.2:0`: port 0");
/// // A byte order mark before the first line is no part of it.
/// let first = parse_endpoints_checked("\u{feff}10.0.0.1:80\n", &no_port_zero).unwrap();
/// assert_eq!(first[0].addr(), "10.0.0.1:80");
/// ```
///
/// # Errors
/// The first bad line ([`EndpointLineError::line`]), shown as `line N: why`.
pub fn parse_endpoints_checked(
    text: &str,
    check: &dyn Fn(&Endpoint) -> Result<(), EndpointRejected>,
) -> Result<Vec<Endpoint>, EndpointLineError> {
    parse_at_most(text, check, MAX_ENDPOINTS)
}

/// [`parse_endpoints_checked`], with at most `most` endpoints.
fn parse_at_most(
    text: &str,
    check: &dyn Fn(&Endpoint) -> Result<(), EndpointRejected>,
    most: usize,
) -> Result<Vec<Endpoint>, EndpointLineError> {
    let mut endpoints = Vec::new();
    // A byte order mark (some editors write one) is not part of the first
    // line: it made the first endpoint's address start with an invisible
    // character.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if endpoints.len() == most {
            return Err(EndpointLineError::too_many(n + 1, most));
        }
        let endpoint = line
            .parse::<Endpoint>()
            .map_err(|e| EndpointLineError::not_an_endpoint(n + 1, e))?;
        check(&endpoint).map_err(|e| EndpointLineError::refused(n + 1, e))?;
        endpoints.push(endpoint);
    }
    Ok(endpoints)
}

/// The first endpoint of `membership` that fails `check`, as its reason.
fn check_all(membership: &[Endpoint], check: &EndpointCheck) -> Result<(), EndpointRejected> {
    membership.iter().try_for_each(|e| check(e))
}

/// What one read of a source came to: the events a test (or a status
/// page) can wait on instead of waiting for time to pass
/// ([`Discovery::next_read`]).
///
/// Only reads that decide something count: a poll that finds a file's text
/// unchanged, or a missing file found missing again, is not a read here.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReadOutcome {
    /// A new membership was published.
    Applied,
    /// The membership read is the current one: nothing published.
    Unchanged,
    /// A problem (an unreadable file, a bad line, a failed lookup, etcd
    /// down, an endpoint failing the check): the current membership stays.
    /// The error ([`DiscoveryErrorKind::Read`]) shows the logged reason.
    Kept(DiscoveryError),
}

/// A running source: the latest membership, and a wait for the next.
/// Dropping it stops the source.
#[derive(Debug)]
pub struct Discovery {
    spec: SourceSpec,
    current: watch::Receiver<Membership>,
    reads: watch::Receiver<(u64, Option<ReadOutcome>)>,
    refresh: Arc<Notify>,
    task: JoinHandle<()>,
}

impl Drop for Discovery {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What a source's task is given: where to publish, and the nudge that asks
/// for a re-read now.
pub(crate) struct Publisher {
    tx: watch::Sender<Membership>,
    /// How many reads decided something, and what the last one decided.
    reads: watch::Sender<(u64, Option<ReadOutcome>)>,
    refresh: Arc<Notify>,
    /// A re-read was asked for and has not come to anything yet.
    asked: AtomicBool,
    what: String,
    /// What every endpoint published must pass.
    pub(crate) check: EndpointCheck,
}

impl Publisher {
    /// Publishes `membership` if it differs from the current one; whether it did.
    /// A membership with an endpoint that fails the check is kept out whole.
    pub(crate) fn publish(&self, membership: Membership) -> bool {
        // The file source has checked each line already (to name it); the
        // other sources are checked here, so every source holds the check.
        if let Err(why) = check_all(&membership, &self.check) {
            self.keep(&why.to_string());
            return false;
        }
        let changed = self.tx.send_if_modified(|current| {
            if *current == membership {
                false
            } else {
                *current = membership;
                true
            }
        });
        let asked = self.asked.swap(false, Ordering::Relaxed);
        if changed {
            tracing::info!("{}: {} endpoints", self.what, self.tx.borrow().len());
        } else if asked {
            // The one trace of a SIGHUP that changed nothing: without it an
            // operator (or a test) cannot tell a re-read from no re-read.
            tracing::info!(
                "{}: read again as asked: the same {} endpoints",
                self.what,
                self.current_len()
            );
        }
        self.record(if changed {
            ReadOutcome::Applied
        } else {
            ReadOutcome::Unchanged
        });
        changed
    }

    fn record(&self, outcome: ReadOutcome) {
        self.reads.send_modify(|(count, last)| {
            *count += 1;
            *last = Some(outcome);
        });
    }

    /// How many endpoints the current membership has.
    pub(crate) fn current_len(&self) -> usize {
        self.tx.borrow().len()
    }

    /// Logs a problem that keeps the current membership.
    pub(crate) fn keep(&self, why: &str) {
        self.asked.store(false, Ordering::Relaxed);
        tracing::warn!(
            "{}: {why}; keeping the current {} endpoints",
            self.what,
            self.current_len()
        );
        self.record(ReadOutcome::Kept(DiscoveryError::new(
            DiscoveryErrorKind::Read,
            Some(&self.what),
            why,
        )));
    }

    /// Completes when someone asked for a re-read.
    pub(crate) async fn refreshed(&self) {
        self.refresh.notified().await;
        self.asked.store(true, Ordering::Relaxed);
    }
}

impl Discovery {
    /// Starts the source: reads its first membership now, then follows it
    /// on a tokio task (so this needs a tokio runtime with timers and I/O).
    ///
    /// # Errors
    /// No first membership: an unreadable file or a bad line, a name that
    /// does not resolve, etcd unreachable (within 5 s).
    pub async fn start(spec: SourceSpec) -> Result<Self, DiscoveryError> {
        Discovery::start_checked(spec, Arc::new(|_| Ok(()))).await
    }

    /// [`Discovery::start`], every membership also held to `check`: one with
    /// an endpoint that fails it is not published (the current one stays,
    /// as for a line that does not parse), and a first one that fails it
    /// is an error. A file's endpoint is named by its line.
    ///
    /// # Errors
    /// As [`Discovery::start`], and a first membership that fails `check`.
    pub async fn start_checked(
        spec: SourceSpec,
        check: EndpointCheck,
    ) -> Result<Self, DiscoveryError> {
        let what = spec.to_string();
        let refresh = Arc::new(Notify::new());
        let fail = |e: String| {
            DiscoveryError::new(
                DiscoveryErrorKind::Start,
                Some(&what),
                format!("{what}: {e}"),
            )
        };
        let (first, source): (Membership, Box<dyn FnOnce(Publisher) -> JoinHandle<()>>) =
            match &spec {
                SourceSpec::File(path) => {
                    let (first, text) = file::read(path, &check).map_err(fail)?;
                    let path = path.clone();
                    (
                        first,
                        Box::new(move |p| tokio::spawn(file::follow(path, Some(text), p))),
                    )
                }
                SourceSpec::Dns(query) => {
                    let resolver = dns::resolver(query).map_err(fail)?;
                    let (first, ttl) = dns::resolve(&resolver, query).await.map_err(fail)?;
                    let query = query.clone();
                    (
                        first,
                        Box::new(move |p| tokio::spawn(dns::follow(resolver, query, ttl, p))),
                    )
                }
                SourceSpec::Etcd(target) => {
                    let (client, first) = etcd::first_membership(target).await.map_err(fail)?;
                    let target = target.clone();
                    (
                        first,
                        Box::new(move |p| tokio::spawn(etcd::follow(client, target, p))),
                    )
                }
            };
        check_all(&first, &check).map_err(|e| fail(e.to_string()))?;
        let (tx, current) = watch::channel(first);
        let (reads_tx, reads) = watch::channel((0, None));
        let task = source(Publisher {
            tx,
            reads: reads_tx,
            refresh: refresh.clone(),
            asked: AtomicBool::new(false),
            what,
            check,
        });
        Ok(Discovery {
            spec,
            current,
            reads,
            refresh,
            task,
        })
    }

    /// The source this follows.
    pub fn spec(&self) -> &SourceSpec {
        &self.spec
    }

    /// The current membership (marked as seen).
    pub fn membership(&mut self) -> Membership {
        self.current.borrow_and_update().clone()
    }

    /// Waits for the next membership that differs from the last one seen.
    /// A source never ends while this handle lives: it keeps retrying.
    pub async fn changed(&mut self) -> Membership {
        if self.current.changed().await.is_err() {
            // The task ended (it does not, short of a panic): no more news.
            std::future::pending::<()>().await;
        }
        self.membership()
    }

    /// Waits for the next read that decides something (after the last one
    /// this returned; the first read at [`Discovery::start`] is not one) and
    /// returns what it decided. Reads that come while nobody waits are
    /// folded: this returns the latest.
    pub async fn next_read(&mut self) -> ReadOutcome {
        loop {
            if self.reads.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
            if let (_, Some(outcome)) = &*self.reads.borrow_and_update() {
                return outcome.clone();
            }
        }
    }

    /// Asks the source to read its membership again now (a file re-read,
    /// a lookup before the TTL runs out, an etcd range re-read): what SIGHUP
    /// does in the proxy. A file re-read logs its problem again.
    pub fn refresh(&self) {
        self.refresh.notify_one();
    }
}

/// Applies a membership to a balancer (one `update_backends`): `value`
/// makes the value of each endpoint. Returns whether anything changed.
///
/// # Errors
/// A membership the policy cannot be built over; the balancer keeps the
/// current one.
pub fn apply<T: Clone>(
    balancer: &Balancer<T>,
    membership: &[Endpoint],
    mut value: impl FnMut(&Endpoint) -> T,
) -> Result<bool, BuildError> {
    balancer.update_backends(membership.iter().map(|e| (e.clone(), value(e))))
}

/// One step from one membership to the next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A new endpoint, or one whose attributes other than its weight changed
    /// (zone, hash key): insert it (replacing the old one).
    Insert(Endpoint),
    /// An endpoint that left (as it was): remove it by its `id()`.
    Remove(Endpoint),
    /// Same identity, only the weight changed (the endpoint as it is now):
    /// `set_weight` by its `id()`.
    Weight(Endpoint),
}

/// The steps from `old` to `new`: removals first, then inserts and weight
/// changes in `new`'s order. Applying them one by one with
/// `Balancer::remove`, `insert` and `set_weight` yields `new`'s pool.
pub fn changes(old: &[Endpoint], new: &[Endpoint]) -> Vec<Change> {
    let id = |e: &Endpoint| e.id().to_string();
    let before: HashMap<String, &Endpoint> = old.iter().map(|e| (id(e), e)).collect();
    let after: HashMap<String, &Endpoint> = new.iter().map(|e| (id(e), e)).collect();
    let mut steps: Vec<Change> = old
        .iter()
        .filter(|e| !after.contains_key(&id(e)))
        .map(|e| Change::Remove(e.clone()))
        .collect();
    for e in new {
        match before.get(&id(e)) {
            None => steps.push(Change::Insert(e.clone())),
            Some(was) if *was == e => {}
            Some(was) if (*was).clone().with_weight(e.weight()) == *e => {
                steps.push(Change::Weight(e.clone()));
            }
            Some(_) => steps.push(Change::Insert(e.clone())),
        }
    }
    steps
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_endpoint_more_than_the_most_is_an_error_naming_its_line() {
        let no_check = |_: &Endpoint| Ok(());
        let text = "# pool\n10.0.0.1:80\n10.0.0.2:80\n\n10.0.0.3:80\n";
        assert_eq!(parse_at_most(text, &no_check, 3).unwrap().len(), 3);
        let more = format!("{text}# and one more\n10.0.0.4:80\n");
        let err = parse_at_most(&more, &no_check, 3).unwrap_err();
        assert_eq!(err.kind(), EndpointLineErrorKind::TooMany);
        assert_eq!(err.line(), 7);
        assert_eq!(
            err.to_string(),
            "line 7: one endpoint more than the 3 a membership may have"
        );
        // Blank lines and comments past the most are no endpoints.
        assert!(parse_at_most(&format!("{text}\n# end\n"), &no_check, 3).is_ok());
    }

    use super::*;

    fn eps(lines: &str) -> Vec<Endpoint> {
        parse_endpoints(lines).unwrap()
    }

    #[test]
    fn comments_and_blank_lines_are_skipped() {
        let e = eps("# fleet\n\n127.0.0.1:1 weight=2\n  127.0.0.1:2  \n");
        let addrs: Vec<_> = e.iter().map(|e| (e.addr(), e.weight())).collect();
        assert_eq!(addrs, [("127.0.0.1:1", 2), ("127.0.0.1:2", 1)]);
    }

    #[test]
    fn a_bad_line_is_named() {
        let err = parse_endpoints("127.0.0.1:1\n127.0.0.1:2 weight=x\n").unwrap_err();
        assert!(err.to_string().starts_with("line 2: "), "{err}");
        assert_eq!(err.line(), 2);
        assert_eq!(err.kind(), EndpointLineErrorKind::Syntax);
        assert!(err.rejected().is_none());
        let why = err.parse_error().expect("the endpoint's parse error");
        assert_eq!(err.to_string(), format!("line 2: {why}"));
    }

    #[test]
    fn a_line_the_check_refuses_is_named_with_the_refusal() {
        let no_b = |e: &Endpoint| {
            if e.addr().starts_with("b:") {
                Err(EndpointRejected::new(e, "not b"))
            } else {
                Ok(())
            }
        };
        let err = parse_endpoints_checked("a:1\n\n# c\nb:2 weight=3\n", &no_b).unwrap_err();
        assert_eq!(err.kind(), EndpointLineErrorKind::Rejected);
        assert_eq!(err.line(), 4);
        assert!(err.parse_error().is_none());
        let rejected = err.rejected().expect("the check's refusal");
        assert_eq!(rejected.endpoint().addr(), "b:2");
        assert_eq!(rejected.endpoint().weight(), 3);
        assert_eq!(rejected.reason(), "not b");
        assert_eq!(err.to_string(), "line 4: endpoint `b:2`: not b");
    }

    #[test]
    fn changes_map_one_to_one_onto_the_balancer() {
        let old = eps("a:1\nb:1 weight=2\nc:1\nd:1 zone=x\n");
        let new = eps("b:1 weight=5\nc:1\nd:1 zone=y\ne:1\n");
        assert_eq!(
            changes(&old, &new),
            [
                Change::Remove("a:1".parse().unwrap()),
                Change::Weight("b:1 weight=5".parse().unwrap()),
                Change::Insert("d:1 zone=y".parse().unwrap()),
                Change::Insert("e:1".parse().unwrap()),
            ]
        );
        // Applied step by step, the balancer ends where a snapshot puts it.
        let spec: loadring::PolicySpec = "ring_hash".parse().unwrap();
        let stepped =
            Balancer::with_backends(spec.clone(), old.iter().map(|e| (e.clone(), ()))).unwrap();
        for step in changes(&old, &new) {
            match step {
                Change::Insert(e) => {
                    stepped.insert(e, ()).unwrap();
                }
                Change::Remove(e) => stepped.remove(&e).unwrap(),
                Change::Weight(e) => stepped.set_weight(&e, e.weight()).unwrap(),
            }
        }
        let snapshot = Balancer::with_backends(spec, std::iter::empty()).unwrap();
        apply(&snapshot, &new, |_| ()).unwrap();
        let mut a = stepped.endpoints();
        let mut b = snapshot.endpoints();
        a.sort_by_key(|e| e.id().to_string());
        b.sort_by_key(|e| e.id().to_string());
        assert_eq!(a, b);
    }
}
