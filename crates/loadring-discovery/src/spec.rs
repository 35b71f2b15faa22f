//! Source specs: `file:PATH`, `dns://NAME:PORT`, `dns+srv://NAME` (both
//! with an optional `?resolver=IP:PORT`), `etcd://HOST:PORT/PREFIX`.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;

use crate::{DiscoveryError, DiscoveryErrorKind};

/// The accepted forms, for error messages.
pub const SOURCE_SYNTAX: &str =
    "file:PATH, dns://NAME:PORT, dns+srv://NAME (either with ?resolver=IP:PORT), etcd://HOST:PORT/PREFIX";

/// Where a membership comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceSpec {
    /// An endpoints file, watched.
    File(PathBuf),
    /// A DNS name: A/AAAA records with a given port, or SRV records.
    Dns(DnsQuery),
    /// Every key under an etcd prefix.
    Etcd(EtcdTarget),
}

/// A DNS source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsQuery {
    /// The name looked up (absolute: a trailing dot is implied).
    pub name: String,
    /// `Some(port)`: A and AAAA records, each address with this port;
    /// `None`: SRV records, each with its own port and weight.
    pub port: Option<u16>,
    /// The DNS server asked (UDP, then TCP); `None`: the system's
    /// (`/etc/resolv.conf`).
    pub resolver: Option<SocketAddr>,
}

/// An etcd source (or registration target).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdTarget {
    /// `HOST:PORT` of an etcd client URL (plain HTTP/2).
    pub server: String,
    /// The key prefix, starting and ending with `/` (`/services/api/`):
    /// `etcd://h:p/services/api` watches every key below `/services/api/`.
    pub prefix: String,
}

impl EtcdTarget {
    /// The key an endpoint is registered under: the prefix and the
    /// endpoint's identity (`addr`, or `addr tag=T`).
    pub fn key_for(&self, endpoint: &loadring::Endpoint) -> String {
        format!("{}{}", self.prefix, endpoint.id())
    }
}

impl fmt::Display for SourceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceSpec::File(p) => write!(f, "file:{}", p.display()),
            SourceSpec::Dns(q) => {
                match q.port {
                    Some(port) => write!(f, "dns://{}:{port}", q.name)?,
                    None => write!(f, "dns+srv://{}", q.name)?,
                }
                match q.resolver {
                    Some(r) => write!(f, "?resolver={r}"),
                    None => Ok(()),
                }
            }
            SourceSpec::Etcd(t) => {
                write!(f, "etcd://{}{}", t.server, t.prefix.trim_end_matches('/'))
            }
        }
    }
}

fn bad(text: &str, why: impl fmt::Display) -> DiscoveryError {
    DiscoveryError::new(
        DiscoveryErrorKind::Spec,
        Some(text),
        format!("`{text}`: {why}"),
    )
}

fn check_name(text: &str, name: &str) -> Result<(), DiscoveryError> {
    let ok = !name.is_empty()
        && name.len() <= 253
        && name.trim_end_matches('.').split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        });
    if ok {
        Ok(())
    } else {
        Err(bad(text, format!("`{name}` is not a DNS name")))
    }
}

/// Splits `?resolver=IP:PORT` off.
fn resolver(text: &str, rest: &str) -> Result<(String, Option<SocketAddr>), DiscoveryError> {
    let Some((head, query)) = rest.split_once('?') else {
        return Ok((rest.to_string(), None));
    };
    let Some(addr) = query.strip_prefix("resolver=") else {
        return Err(bad(
            text,
            format!("unknown parameter `{query}` (accepted: resolver=IP:PORT)"),
        ));
    };
    let addr = addr
        .parse::<SocketAddr>()
        .map_err(|_| bad(text, format!("resolver `{addr}`: expected IP:PORT")))?;
    Ok((head.to_string(), Some(addr)))
}

impl FromStr for SourceSpec {
    type Err = DiscoveryError;

    fn from_str(text: &str) -> Result<Self, DiscoveryError> {
        if let Some(path) = text.strip_prefix("file:") {
            if path.is_empty() {
                return Err(bad(text, "expected file:PATH"));
            }
            return Ok(SourceSpec::File(PathBuf::from(path)));
        }
        if let Some(rest) = text.strip_prefix("dns+srv://") {
            let (name, resolver) = resolver(text, rest)?;
            check_name(text, &name)?;
            return Ok(SourceSpec::Dns(DnsQuery {
                name,
                port: None,
                resolver,
            }));
        }
        if let Some(rest) = text.strip_prefix("dns://") {
            let (name_port, resolver) = resolver(text, rest)?;
            let (name, port) = name_port.rsplit_once(':').ok_or_else(|| {
                bad(
                    text,
                    "expected dns://NAME:PORT (A/AAAA records get the port)",
                )
            })?;
            let port = port
                .parse::<u16>()
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| bad(text, format!("port `{port}`: expected 1..=65535")))?;
            check_name(text, name)?;
            return Ok(SourceSpec::Dns(DnsQuery {
                name: name.to_string(),
                port: Some(port),
                resolver,
            }));
        }
        if let Some(rest) = text.strip_prefix("etcd://") {
            let (server, prefix) = rest
                .split_once('/')
                .ok_or_else(|| bad(text, "expected etcd://HOST:PORT/PREFIX"))?;
            let port_ok = server
                .rsplit_once(':')
                .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok_and(|p| p != 0));
            if !port_ok {
                return Err(bad(text, format!("`{server}`: expected HOST:PORT")));
            }
            let prefix = prefix.trim_matches('/');
            if prefix.is_empty() {
                return Err(bad(
                    text,
                    "an empty prefix: expected etcd://HOST:PORT/PREFIX",
                ));
            }
            return Ok(SourceSpec::Etcd(EtcdTarget {
                server: server.to_string(),
                prefix: format!("/{prefix}/"),
            }));
        }
        let scheme = text.split_once(':').map_or(text, |(s, _)| s);
        Err(bad(
            text,
            format!("unknown source `{scheme}`: accepted {SOURCE_SYNTAX}"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<SourceSpec, DiscoveryError> {
        text.parse::<SourceSpec>()
    }

    #[test]
    fn every_form_round_trips() {
        for text in [
            "file:/etc/loadring/endpoints",
            "dns://api.example.internal:8080",
            "dns://api.test:53?resolver=127.0.0.1:5353",
            "dns+srv://_http._tcp.api.test",
            "dns+srv://_http._tcp.api.test?resolver=[::1]:5353",
            "etcd://127.0.0.1:2379/services/api",
        ] {
            assert_eq!(parse(text).unwrap().to_string(), text);
        }
        let SourceSpec::Etcd(t) = parse("etcd://localhost:2379/services/api/").unwrap() else {
            panic!()
        };
        assert_eq!(t.prefix, "/services/api/");
        assert_eq!(
            t.key_for(&"10.0.0.1:80 tag=a".parse().unwrap()),
            "/services/api/10.0.0.1:80 tag=a"
        );
    }

    #[test]
    fn bad_specs_name_the_culprit() {
        for (text, why) in [
            ("consul://x", "unknown source `consul`"),
            ("file:", "expected file:PATH"),
            ("dns://api.test", "expected dns://NAME:PORT"),
            ("dns://api.test:0", "port `0`"),
            ("dns://api test:80", "is not a DNS name"),
            ("dns+srv://x?server=1.2.3.4:53", "unknown parameter"),
            ("dns+srv://x?resolver=localhost:53", "expected IP:PORT"),
            ("etcd://127.0.0.1/x", "expected HOST:PORT"),
            ("etcd://127.0.0.1:2379", "expected etcd://HOST:PORT/PREFIX"),
            ("etcd://127.0.0.1:2379/", "an empty prefix"),
        ] {
            let err = parse(text).unwrap_err();
            assert_eq!(err.kind(), DiscoveryErrorKind::Spec, "{text}");
            assert_eq!(err.spec(), Some(text));
            let message = err.to_string();
            assert!(message.starts_with(&format!("`{text}`: ")), "{message}");
            assert!(
                message.contains(why) && !message.contains('\n'),
                "{message}"
            );
        }
    }
}
