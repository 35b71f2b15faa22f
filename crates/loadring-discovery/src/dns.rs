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
//!
//! An answer of more than [`MAX_ENDPOINTS`] addresses is refused as such a
//! failed lookup (with one line naming the bound), as an endpoints file of
//! more endpoints is. An SRV record whose target is `.` ("decidedly not
//! available", RFC 2782) is no member; each target is looked up once
//! however many records name it.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::time::Duration;

use hickory_resolver::config::{NameServerConfig, ResolverConfig};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::proto::rr::{Name, RData, RecordType};
use hickory_resolver::TokioResolver;
use loadring::Endpoint;

use crate::spec::DnsQuery;
use crate::{Membership, Publisher, MAX_ENDPOINTS};
use loadring::Echo;

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
                within(&by_addr, MAX_ENDPOINTS)?;
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
            // Each target's addresses, looked up once: an answer naming one
            // target in a thousand records made a thousand lookups.
            let mut addresses: HashMap<Name, Vec<IpAddr>> = HashMap::new();
            for (_, s) in records.iter().filter(|(_, s)| Some(s.priority) == best) {
                if s.target.is_root() {
                    continue;
                }
                if !addresses.contains_key(&s.target) {
                    let ips = resolver
                        .lookup_ip(s.target.clone())
                        .await
                        .map_err(|e| format!("SRV target {}: {e}", Echo(&s.target.to_string())))?;
                    ttls.extend(ips.as_lookup().answers().iter().map(|r| r.ttl));
                    addresses.insert(s.target.clone(), ips.iter().collect());
                }
                for &ip in &addresses[&s.target] {
                    let e = endpoint(ip, s.port, s.weight)?;
                    // Two records for one address: their weights add up.
                    match by_addr.get(e.addr()) {
                        Some(was) => {
                            let w = was.weight().saturating_add(e.weight());
                            by_addr.insert(e.addr().to_string(), e.with_weight(w));
                        }
                        None => {
                            by_addr.insert(e.addr().to_string(), e);
                            within(&by_addr, MAX_ENDPOINTS)?;
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

/// Refuses an answer of more than `most` addresses.
fn within(by_addr: &BTreeMap<String, Endpoint>, most: usize) -> Result<(), String> {
    if by_addr.len() > most {
        return Err(format!(
            "the answer holds more than {most} addresses, the most endpoints a membership may have"
        ));
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_of_more_addresses_than_the_most_is_refused() {
        let mut by_addr = BTreeMap::new();
        for i in 1..=3u8 {
            let e = endpoint(IpAddr::from([10, 0, 0, i]), 80, 1).unwrap();
            by_addr.insert(e.addr().to_string(), e);
        }
        assert!(within(&by_addr, 3).is_ok());
        assert_eq!(
            within(&by_addr, 2).unwrap_err(),
            "the answer holds more than 2 addresses, the most endpoints a membership may have"
        );
    }

    #[test]
    fn a_weight_of_zero_counts_as_one() {
        let e = endpoint(IpAddr::from([0u16, 0, 0, 0, 0, 0, 0, 1]), 53, 0).unwrap();
        assert_eq!(e.to_string(), "[::1]:53");
    }
}
