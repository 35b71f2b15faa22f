//! DNS: `dns://NAME:PORT` takes the A and AAAA records of NAME, each
//! address with PORT and weight 1; `dns+srv://NAME` takes NAME's SRV
//! records of the lowest priority (RFC 2782: higher priorities are
//! fallbacks, not members), each target's addresses with the record's port
//! and weight (a weight of 0 counts as 1: the ring has no zero-weight
//! members). Endpoints are sorted by address, so every gateway resolving
//! the same records builds the same list.
//!
//! The name is looked up again when the shortest TTL of the answer runs
//! out (at least 1 s, at most 5 min between lookups; the resolver's cache
//! is off, so the TTL is the server's). A failed lookup (the server down,
//! NXDOMAIN, no records) keeps the last good membership and is retried
//! every second; one line is logged per problem.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use hickory_resolver::config::{NameServerConfig, ResolverConfig};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::proto::rr::{RData, RecordType};
use hickory_resolver::TokioResolver;
use loadring::Endpoint;

use crate::spec::DnsQuery;
use crate::{Membership, Publisher};

/// The shortest wait between lookups, whatever the TTL.
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);
/// The longest wait between lookups, whatever the TTL.
pub const MAX_INTERVAL: Duration = Duration::from_secs(300);
/// How long one lookup may take (tries included).
pub const LOOKUP_TIMEOUT: Duration = Duration::from_secs(3);

/// A resolver asking `query.resolver` (UDP, then TCP), or the system's.
pub(crate) fn resolver(query: &DnsQuery) -> Result<TokioResolver, String> {
    let provider = TokioRuntimeProvider::default();
    let mut builder = match query.resolver {
        Some(addr) => {
            let mut server = NameServerConfig::udp_and_tcp(addr.ip());
            for c in &mut server.connections {
                c.port = addr.port();
            }
            TokioResolver::builder_with_config(
                ResolverConfig::from_name_servers(vec![server]),
                provider,
            )
        }
        None => TokioResolver::builder(provider)
            .map_err(|e| format!("the system's resolver configuration: {e}"))?,
    };
    // The system's options (ndots, search domains) stay; no cache, so the
    // TTL of each answer is the server's.
    let options = builder.options_mut();
    options.cache_size = 0;
    options.timeout = Duration::from_secs(1);
    options.attempts = 2;
    options.try_tcp_on_error = true;
    builder.build().map_err(|e| format!("resolver: {e}"))
}

fn absolute(name: &str) -> String {
    if name.ends_with('.') {
        name.to_string()
    } else {
        format!("{name}.")
    }
}

fn endpoint(ip: IpAddr, port: u16, weight: u16) -> Result<Endpoint, String> {
    let addr = match ip {
        IpAddr::V4(ip) => format!("{ip}:{port}"),
        IpAddr::V6(ip) => format!("[{ip}]:{port}"),
    };
    Endpoint::new(addr)
        .map(|e| e.with_weight(u32::from(weight.max(1))))
        .map_err(|e| e.to_string())
}

/// One lookup: the membership, sorted by address, and how long it holds.
pub(crate) async fn resolve(
    resolver: &TokioResolver,
    query: &DnsQuery,
) -> Result<(Membership, Duration), String> {
    tokio::time::timeout(LOOKUP_TIMEOUT, lookup(resolver, query))
        .await
        .map_err(|_| format!("no answer within {LOOKUP_TIMEOUT:?}"))?
}

async fn lookup(
    resolver: &TokioResolver,
    query: &DnsQuery,
) -> Result<(Membership, Duration), String> {
    let name = absolute(&query.name);
    let mut by_addr: BTreeMap<String, Endpoint> = BTreeMap::new();
    let ttl;
    match query.port {
        Some(port) => {
            let ips = resolver
                .lookup_ip(name.as_str())
                .await
                .map_err(|e| e.to_string())?;
            ttl = min_ttl(ips.as_lookup().answers().iter().map(|r| r.ttl));
            for ip in ips.iter() {
                let e = endpoint(ip, port, 1)?;
                by_addr.insert(e.addr().to_string(), e);
            }
        }
        None => {
            let srv = resolver
                .lookup(name.as_str(), RecordType::SRV)
                .await
                .map_err(|e| e.to_string())?;
            let records: Vec<(u32, hickory_resolver::proto::rr::rdata::SRV)> = srv
                .answers()
                .iter()
                .filter_map(|r| match &r.data {
                    RData::SRV(s) => Some((r.ttl, s.clone())),
                    _ => None,
                })
                .collect();
            let best = records.iter().map(|(_, s)| s.priority).min();
            let mut ttls: Vec<u32> = records.iter().map(|(t, _)| *t).collect();
            for (_, s) in records.iter().filter(|(_, s)| Some(s.priority) == best) {
                let ips = resolver
                    .lookup_ip(s.target.clone())
                    .await
                    .map_err(|e| format!("SRV target {}: {e}", s.target))?;
                ttls.extend(ips.as_lookup().answers().iter().map(|r| r.ttl));
                for ip in ips.iter() {
                    let e = endpoint(ip, s.port, s.weight)?;
                    // Two records for one address: their weights add up.
                    match by_addr.get(e.addr()) {
                        Some(was) => {
                            let w = was.weight().saturating_add(e.weight());
                            by_addr.insert(e.addr().to_string(), e.with_weight(w));
                        }
                        None => {
                            by_addr.insert(e.addr().to_string(), e);
                        }
                    }
                }
            }
            ttl = min_ttl(ttls.into_iter());
        }
    }
    if by_addr.is_empty() {
        return Err("no records".into());
    }
    Ok((by_addr.into_values().collect(), ttl))
}

fn min_ttl(ttls: impl Iterator<Item = u32>) -> Duration {
    let secs = ttls.min().map_or(MIN_INTERVAL.as_secs(), u64::from);
    Duration::from_secs(secs).clamp(MIN_INTERVAL, MAX_INTERVAL)
}

/// Follows the name: a lookup each time the last answer's TTL runs out.
pub(crate) async fn follow(
    resolver: TokioResolver,
    query: DnsQuery,
    mut wait: Duration,
    publisher: Publisher,
) {
    let mut last_problem: Option<String> = None;
    loop {
        tokio::select! {
            () = tokio::time::sleep(wait) => {},
            () = publisher.refreshed() => {},
        }
        match resolve(&resolver, &query).await {
            Ok((membership, ttl)) => {
                last_problem = None;
                publisher.publish(membership);
                wait = ttl;
            }
            Err(e) => {
                if last_problem.as_ref() != Some(&e) {
                    publisher.keep(&format!("lookup failed: {e}"));
                    last_problem = Some(e);
                }
                wait = MIN_INTERVAL;
            }
        }
    }
}
