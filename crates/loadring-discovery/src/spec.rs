//! Source specs: `file:PATH`, `dns://NAME:PORT`, `dns+srv://NAME` (both
//! with an optional `?resolver=IP:PORT`), `etcd://HOST:PORT/PREFIX`.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;

use crate::{DiscoveryError, DiscoveryErrorKind};
use loadring::Echo;

/// The longest source spec: 4,096 bytes (a path as long as Linux takes).
pub const MAX_SPEC_BYTES: usize = 4096;

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

/// A spec error: the spec echoed (whole when short, one line), then why.
/// [`DiscoveryError::spec`] keeps the text whole.
fn bad(text: &str, why: impl fmt::Display) -> DiscoveryError {
    DiscoveryError::new(
        DiscoveryErrorKind::Spec,
        Some(text),
        format!("`{}`: {why}", Echo(text)),
    )
}

/// Whether `name` is a DNS name: labels of letters, digits, `-` and `_`,
/// 1 to 63 bytes each, 253 in all, and at most one trailing dot.
fn is_dns_name(name: &str) -> bool {
    let bare = name.strip_suffix('.').unwrap_or(name);
    !bare.is_empty()
        && bare.len() <= 253
        && bare.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        })
}

fn check_name(text: &str, name: &str) -> Result<(), DiscoveryError> {
    if is_dns_name(name) {
        Ok(())
    } else {
        Err(bad(text, format!("`{}` is not a DNS name", Echo(name))))
    }
}

/// A port: 1 to 65535 in decimal digits (`+80`, which `u16`'s parse takes,
/// is not one).
fn port(text: &str) -> Option<u16> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse::<u16>().ok().filter(|p| *p != 0)
}

/// Whether `host` is what an etcd client URL can name: a DNS name, an IPv4
/// address or a bracketed IPv6 address.
fn is_host(host: &str) -> bool {
    if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return v6.parse::<std::net::Ipv6Addr>().is_ok();
    }
    host.parse::<std::net::Ipv4Addr>().is_ok() || is_dns_name(host)
}

/// Splits `?resolver=IP:PORT` off.
fn resolver(text: &str, rest: &str) -> Result<(String, Option<SocketAddr>), DiscoveryError> {
    let Some((head, query)) = rest.split_once('?') else {
        return Ok((rest.to_string(), None));
    };
    let Some(addr) = query.strip_prefix("resolver=") else {
        return Err(bad(
            text,
            format!(
                "unknown parameter `{}` (accepted: resolver=IP:PORT)",
                Echo(query)
            ),
        ));
    };
    let addr = addr
        .parse::<SocketAddr>()
        .map_err(|_| bad(text, format!("resolver `{}`: expected IP:PORT", Echo(addr))))?;
    Ok((head.to_string(), Some(addr)))
}

impl FromStr for SourceSpec {
    type Err = DiscoveryError;

    fn from_str(text: &str) -> Result<Self, DiscoveryError> {
        // Every message that shows a source (a start error, a kept read)
        // shows it whole: it must be one line, of a bounded length.
        if text.len() > MAX_SPEC_BYTES {
            return Err(bad(
                text,
                format!(
                    "{} bytes: a source spec has at most {MAX_SPEC_BYTES}",
                    text.len()
                ),
            ));
        }
        if let Some((at, c)) = text.char_indices().find(|(_, c)| c.is_control()) {
            return Err(bad(
                text,
                format!(
                    "a control character (`{}`) at byte {at}: a source spec is one line of text",
                    c.escape_debug()
                ),
            ));
        }
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
            let (name, port_text) = name_port.rsplit_once(':').ok_or_else(|| {
                bad(
                    text,
                    "expected dns://NAME:PORT (A/AAAA records get the port)",
                )
            })?;
            let port = port(port_text).ok_or_else(|| {
                bad(
                    text,
                    format!("port `{}`: expected 1..=65535", Echo(port_text)),
                )
            })?;
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
            let server_ok = server
                .rsplit_once(':')
                .is_some_and(|(h, p)| is_host(h) && port(p).is_some());
            if !server_ok {
                return Err(bad(
                    text,
                    format!(
                        "`{}`: expected HOST:PORT (a DNS name, an IPv4 or [IPv6] address; port 1..=65535)",
                        Echo(server)
                    ),
                ));
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
            format!(
                "unknown source `{}`: accepted {SOURCE_SYNTAX}",
                Echo(scheme)
            ),
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
            // Found by probing: each was accepted, and failed (or not) only
            // when the source started.
            ("dns://api.test:+80", "port `+80`"),
            ("dns://api.test..:80", "is not a DNS name"),
            ("dns+srv://x..", "is not a DNS name"),
            ("etcd://127.0.0.1:+2379/x", "expected HOST:PORT"),
            ("etcd://a b:2379/x", "expected HOST:PORT"),
            ("etcd://user@h:2379/x", "expected HOST:PORT"),
            ("etcd://::1:2379/x", "expected HOST:PORT"),
            ("etcd://[::1:2379/x", "expected HOST:PORT"),
            (
                "file:/etc/endpoints\n",
                "a control character (`\\n`) at byte 19",
            ),
            ("etcd://h:1/a\tb", "a control character (`\\t`)"),
        ] {
            let err = parse(text).unwrap_err();
            assert_eq!(err.kind(), DiscoveryErrorKind::Spec, "{text}");
            assert_eq!(err.spec(), Some(text));
            let message = err.to_string();
            let shown = text.escape_debug().to_string();
            assert!(message.starts_with(&format!("`{shown}`: ")), "{message}");
            assert!(
                message.contains(why) && !message.contains('\n'),
                "{message}"
            );
        }
    }
}

#[cfg(test)]
mod probes {
    use super::*;

    #[test]
    fn odd_but_valid_hosts_are_taken() {
        for text in [
            "etcd://[::1]:2379/services/api",
            "etcd://etcd-0.etcd.svc:2379/x",
            "etcd://10.0.0.1:2379/x",
            "dns://api.test.:80",
        ] {
            assert_eq!(text.parse::<SourceSpec>().unwrap().to_string(), text);
        }
    }

    #[test]
    fn a_very_long_spec_is_one_short_line_naming_the_bound() {
        // A path as long as Linux takes is still a spec.
        let longest = format!("file:/{}", "a".repeat(MAX_SPEC_BYTES - 6));
        assert!(longest.parse::<SourceSpec>().is_ok());
        for text in [
            format!("{longest}a"),
            format!("etcd://127.0.0.1:2379/{}", "p".repeat(1 << 20)),
        ] {
            let err = text.parse::<SourceSpec>().unwrap_err();
            assert_eq!(err.spec(), Some(text.as_str()), "kept whole");
            let message = err.to_string();
            assert!(message.len() < 200, "{message}");
            assert!(
                message.ends_with(&format!(
                    "characters)`: {} bytes: a source spec has at most 4096",
                    text.len()
                )),
                "{message}"
            );
        }
        // Each part a message repeats is cut too.
        for text in [
            format!("dns://{}:80", "a".repeat(300)),
            format!("dns://a.test:{}", "9".repeat(300)),
            format!("zk{}://x", "k".repeat(300)),
            format!("etcd://{}:1/x", "h".repeat(300)),
            format!("dns+srv://x?resolver={}", "1".repeat(300)),
            format!("dns+srv://x?{}", "q".repeat(300)),
        ] {
            let message = text.parse::<SourceSpec>().unwrap_err().to_string();
            assert!(message.len() < 300, "{message}");
        }
    }
}
