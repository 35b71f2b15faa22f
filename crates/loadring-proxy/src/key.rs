//! Where a request's hash key comes from (`--key`), and how several sources
//! combine.
//!
//! For Envoy's policies (`ring_hash`, `maglev`) each source is hashed the
//! way an Envoy route `hash_policy` hashes it (xxHash64, seed 0) and several
//! are combined as Envoy combines them (the running hash rotated left by one
//! bit, then xored with the next): a request lands on the backend an Envoy
//! sidecar with the same hash policies and the same ring would choose.
//!
//! For the other hashing policies (brpc's, ketama) the key is the source's
//! value itself, hashed by the policy's own function, so a request lands
//! where `loadring place` puts that value. Several sources' values are joined
//! with a newline (a byte no header, cookie or path can hold), skipping the
//! absent ones.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use http::header::{HeaderName, COOKIE};
use http::request::Parts;
use loadring::hash::xxhash64;

/// The accepted sources, for error messages.
pub const KEY_SOURCES: &str =
    "header:NAME, cookie:NAME, query:NAME, path, uri, method-uri, source-ip (comma-separated to combine)";

/// One place a key can come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// Every value of a request header, sorted and concatenated (Envoy's
    /// `hash_policy.header`).
    Header(HeaderName),
    /// A cookie's value; an empty value counts as absent (Envoy's
    /// `hash_policy.cookie`, without generating cookies).
    Cookie(String),
    /// The first value of a query parameter, as written (not decoded); an
    /// empty value is present (Envoy's `hash_policy.query_parameter`).
    Query(String),
    /// The path without the query.
    Path,
    /// The path and the query, as in the request line (Envoy's
    /// `hash_policy.header` of `:path`).
    Uri,
    /// dubbo-go-pixiu's HTTP key: the method, a dot, and the request-target
    /// as sent (`GET./pixiu?total=1`; Go's `Method + "." + RequestURI`).
    MethodUri,
    /// The client's IP address, without the port (Envoy's
    /// `connection_properties.source_ip`).
    SourceIp,
}

impl fmt::Display for KeySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeySource::Header(name) => write!(f, "header:{name}"),
            KeySource::Cookie(name) => write!(f, "cookie:{name}"),
            KeySource::Query(name) => write!(f, "query:{name}"),
            KeySource::Path => f.write_str("path"),
            KeySource::Uri => f.write_str("uri"),
            KeySource::MethodUri => f.write_str("method-uri"),
            KeySource::SourceIp => f.write_str("source-ip"),
        }
    }
}

impl FromStr for KeySource {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let bad = |why: &str| format!("key source `{text}`: {why}; accepted: {KEY_SOURCES}");
        let (kind, name) = match text.split_once(':') {
            Some((kind, name)) => (kind, Some(name)),
            None => (text, None),
        };
        let named = |name: Option<&str>| match name {
            Some(n) if !n.is_empty() && !n.contains(|c: char| c.is_whitespace() || c == '=') => {
                Ok(n.to_string())
            }
            _ => Err(bad("a name is needed after the colon")),
        };
        match (kind, name) {
            ("header", name) => {
                let name = named(name)?;
                HeaderName::from_bytes(name.as_bytes())
                    .map(KeySource::Header)
                    .map_err(|_| bad("not a valid header name"))
            }
            ("cookie", name) => named(name).map(KeySource::Cookie),
            ("query", name) => named(name).map(KeySource::Query),
            ("path", None) => Ok(KeySource::Path),
            ("uri", None) => Ok(KeySource::Uri),
            ("method-uri", None) => Ok(KeySource::MethodUri),
            ("source-ip", None) => Ok(KeySource::SourceIp),
            ("path" | "uri" | "method-uri" | "source-ip", Some(_)) => {
                Err(bad("this source takes no name"))
            }
            _ => Err(bad("unknown source")),
        }
    }
}

impl KeySource {
    /// This source's value in the request, or `None` when it is absent.
    pub fn value(&self, parts: &Parts, peer: IpAddr) -> Option<Vec<u8>> {
        match self {
            KeySource::Header(name) => {
                let mut values: Vec<&[u8]> = parts
                    .headers
                    .get_all(name)
                    .iter()
                    .map(|v| v.as_bytes())
                    .collect();
                if values.is_empty() {
                    return None;
                }
                // Envoy sorts the values so that their order does not matter.
                values.sort_unstable();
                Some(values.concat())
            }
            KeySource::Cookie(name) => cookie_value(parts, name).map(|v| v.as_bytes().to_vec()),
            KeySource::Query(name) => {
                query_value(parts.uri.query()?, name).map(|v| v.as_bytes().to_vec())
            }
            KeySource::Path => Some(parts.uri.path().as_bytes().to_vec()),
            KeySource::Uri => Some(
                parts
                    .uri
                    .path_and_query()
                    .map_or("/", |pq| pq.as_str())
                    .as_bytes()
                    .to_vec(),
            ),
            KeySource::MethodUri => {
                let mut key = parts.method.as_str().as_bytes().to_vec();
                key.push(b'.');
                // HTTP/2 sends the target as `:path` (Go's RequestURI holds
                // it); the scheme and authority are pseudo-headers of their own.
                let target = if parts.version == http::Version::HTTP_2 {
                    parts
                        .uri
                        .path_and_query()
                        .map_or("/", |pq| pq.as_str())
                        .into()
                } else {
                    request_target(&parts.uri)
                };
                key.extend_from_slice(target.as_bytes());
                Some(key)
            }
            KeySource::SourceIp => Some(peer.to_canonical().to_string().into_bytes()),
        }
    }
}

/// The request-target of the request line, as Go's `RequestURI` holds it:
/// the path and query as sent (origin form), or the whole URI when the
/// client sent one (absolute and authority forms).
fn request_target(uri: &http::Uri) -> std::borrow::Cow<'_, str> {
    match (uri.authority(), uri.path_and_query()) {
        (None, Some(pq)) => pq.as_str().into(),
        (None, None) => "/".into(),
        (Some(_), _) => uri.to_string().into(),
    }
}

/// The first `name=value` pair of the `Cookie` headers, its value unquoted;
/// an empty value is absent (as Envoy's `parseCookieValue` reads them).
fn cookie_value<'p>(parts: &'p Parts, name: &str) -> Option<&'p str> {
    for header in parts.headers.get_all(COOKIE) {
        let Ok(text) = header.to_str() else { continue };
        for pair in text.split(';') {
            let pair = pair.trim_start_matches(' ');
            let Some((k, v)) = pair.split_once('=') else {
                continue;
            };
            if k == name {
                let v = v
                    .strip_prefix('"')
                    .and_then(|v| v.strip_suffix('"'))
                    .unwrap_or(v);
                return (!v.is_empty()).then_some(v);
            }
        }
    }
    None
}

/// The first value of parameter `name` in `query`, as written; a parameter
/// without `=` has the empty value.
fn query_value<'q>(query: &'q str, name: &str) -> Option<&'q str> {
    query
        .split('&')
        .map(|pair| pair.split_once('=').unwrap_or((pair, "")))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// One or more sources, combined in order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KeySpec {
    sources: Vec<KeySource>,
}

impl KeySpec {
    /// Sources given as `--key` values, each possibly a comma-separated list.
    ///
    /// # Errors
    /// The first unreadable source, named.
    pub fn parse<S: AsRef<str>>(texts: &[S]) -> Result<Self, String> {
        let mut sources = Vec::new();
        for text in texts {
            for part in text.as_ref().split(',') {
                sources.push(part.trim().parse()?);
            }
        }
        Ok(KeySpec { sources })
    }

    /// Whether no source is configured.
    pub fn is_empty(&self) -> bool {
        self.sources.is_empty()
    }

    /// The sources, in order.
    pub fn sources(&self) -> &[KeySource] {
        &self.sources
    }

    /// The request's key in the form `style` needs; `None` when every source
    /// is absent (the request is then served round robin).
    pub fn evaluate(&self, parts: &Parts, peer: IpAddr, style: KeyStyle) -> Option<RequestKey> {
        match style {
            KeyStyle::Envoy => {
                let hashes = self
                    .sources
                    .iter()
                    .map(|s| s.value(parts, peer).map(|v| xxhash64(&v, 0)));
                envoy_combine(hashes).map(RequestKey::Code)
            }
            KeyStyle::Value => {
                let mut key: Option<Vec<u8>> = None;
                for value in self.sources.iter().filter_map(|s| s.value(parts, peer)) {
                    match &mut key {
                        None => key = Some(value),
                        Some(key) => {
                            key.push(b'\n');
                            key.extend_from_slice(&value);
                        }
                    }
                }
                key.map(RequestKey::Bytes)
            }
        }
    }
}

/// Envoy's `HashPolicyImpl::generateHash`: absent hashes are skipped; each
/// present one is xored into the running hash rotated left by one bit, so
/// two equal sources do not cancel out.
pub fn envoy_combine(hashes: impl IntoIterator<Item = Option<u64>>) -> Option<u64> {
    hashes
        .into_iter()
        .flatten()
        .fold(None, |acc: Option<u64>, h| {
            Some(acc.map_or(0, |a| a.rotate_left(1)) ^ h)
        })
}

/// How a policy wants the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyStyle {
    /// A 64-bit code computed as Envoy computes it (`ring_hash`, `maglev`).
    Envoy,
    /// The value's bytes, hashed by the policy (brpc's and ketama policies).
    Value,
}

impl KeyStyle {
    /// The style for a policy: Envoy's for `ring_hash` and `maglev` (also
    /// under a locality policy), the value for the others.
    pub fn for_policy(spec: &loadring::PolicySpec) -> Self {
        let mut spec = spec;
        while let Some(inner) = spec.inner() {
            spec = inner;
        }
        match spec.name() {
            "ring_hash" | "maglev" => KeyStyle::Envoy,
            _ => KeyStyle::Value,
        }
    }
}

/// A request's key, ready for [`loadring::Request`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestKey {
    /// A precomputed hash ([`loadring::Request::code`]).
    Code(u64),
    /// Bytes the policy hashes ([`loadring::Request::key`]).
    Bytes(Vec<u8>),
}

impl RequestKey {
    /// The request to place.
    pub fn request(&self) -> loadring::Request<'_> {
        match self {
            RequestKey::Code(code) => loadring::Request::code(*code),
            RequestKey::Bytes(bytes) => loadring::Request::key(bytes),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn parts(uri: &str, headers: &[(&str, &str)]) -> Parts {
        let mut builder = http::Request::builder().uri(uri);
        for (k, v) in headers {
            builder = builder.header(*k, *v);
        }
        builder.body(()).unwrap().into_parts().0
    }

    const PEER: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 1, 2, 3));

    fn values(spec: &str, p: &Parts) -> Option<Vec<u8>> {
        KeySpec::parse(&[spec]).unwrap().sources()[0].value(p, PEER)
    }

    #[test]
    fn sources_parse_and_print_back() {
        for text in [
            "header:x-user",
            "cookie:sid",
            "query:u",
            "path",
            "uri",
            "method-uri",
            "source-ip",
        ] {
            let s: KeySource = text.parse().unwrap();
            assert_eq!(s.to_string(), text);
        }
        let spec = KeySpec::parse(&["header:x-user, cookie:sid", "path"]).unwrap();
        assert_eq!(spec.sources().len(), 3);
    }

    #[test]
    fn bad_sources_are_named() {
        for bad in [
            "header",
            "header:",
            "header:bad name",
            "cookie:",
            "query",
            "path:x",
            "method-uri:x",
            "method",
            "ip",
            "",
        ] {
            let err = bad.parse::<KeySource>().unwrap_err();
            assert!(err.contains(&format!("`{bad}`")), "{err}");
            assert!(err.contains("accepted"), "{err}");
        }
    }

    #[test]
    fn values_are_read_as_envoy_reads_them() {
        let p = parts(
            "/a/b?x=1&u=alice&u=bob&flag",
            &[
                ("x-user", "zed"),
                ("x-user", "amy"),
                ("cookie", "a=1; sid=\"s-42\"; e="),
            ],
        );
        assert_eq!(values("header:x-user", &p), Some(b"amyzed".to_vec()));
        assert_eq!(values("header:x-none", &p), None);
        assert_eq!(values("cookie:sid", &p), Some(b"s-42".to_vec()));
        assert_eq!(values("cookie:e", &p), None, "empty cookie is absent");
        assert_eq!(values("cookie:zz", &p), None);
        assert_eq!(values("query:u", &p), Some(b"alice".to_vec()));
        assert_eq!(values("query:flag", &p), Some(b"".to_vec()));
        assert_eq!(values("query:nope", &p), None);
        assert_eq!(values("path", &p), Some(b"/a/b".to_vec()));
        assert_eq!(
            values("uri", &p),
            Some(b"/a/b?x=1&u=alice&u=bob&flag".to_vec())
        );
        assert_eq!(values("source-ip", &p), Some(b"10.1.2.3".to_vec()));
    }

    /// pixiu's key: `METHOD.` and the target exactly as in the request line
    /// (percent-escapes kept, nothing decoded or normalized).
    #[test]
    fn method_uri_is_pixius_key() {
        let key = |method: &str, uri: &str| {
            let p = http::Request::builder()
                .method(method)
                .uri(uri)
                .body(())
                .unwrap()
                .into_parts()
                .0;
            String::from_utf8(KeySource::MethodUri.value(&p, PEER).unwrap()).unwrap()
        };
        assert_eq!(key("GET", "/pixiu?total=1"), "GET./pixiu?total=1");
        assert_eq!(key("DELETE", "/orders/"), "DELETE./orders/");
        assert_eq!(
            key("PUT", "/a%2Fb/../c?x=%E8%AE%A2"),
            "PUT./a%2Fb/../c?x=%E8%AE%A2"
        );
        assert_eq!(
            key("GET", "http://example.com/p?q"),
            "GET.http://example.com/p?q"
        );
        assert_eq!(key("CONNECT", "example.com:443"), "CONNECT.example.com:443");
        assert_eq!(key("OPTIONS", "*"), "OPTIONS.*");
        // Over HTTP/2 the target is `:path`: the same key as HTTP/1.1's.
        let h2 = http::Request::builder()
            .version(http::Version::HTTP_2)
            .uri("http://example.com/pixiu?total=1")
            .body(())
            .unwrap()
            .into_parts()
            .0;
        assert_eq!(
            String::from_utf8(KeySource::MethodUri.value(&h2, PEER).unwrap()).unwrap(),
            "GET./pixiu?total=1"
        );
    }

    /// Expected codes computed independently with Python's `xxhash` package:
    /// `xxhash.xxh64(b"alice").intdigest()` and, for the combination,
    /// `(rotl1(h1) ^ h2)` in Python integers masked to 64 bits.
    #[test]
    fn envoy_codes_are_xxhash64_combined_by_rotation() {
        let p = parts("/p?u=alice", &[("x-user", "alice"), ("cookie", "sid=s-42")]);
        let code =
            |spec: &str| match KeySpec::parse(&[spec])
                .unwrap()
                .evaluate(&p, PEER, KeyStyle::Envoy)
            {
                Some(RequestKey::Code(c)) => c,
                other => panic!("{other:?}"),
            };
        assert_eq!(code("header:x-user"), XXH64_ALICE);
        assert_eq!(code("query:u"), XXH64_ALICE);
        assert_eq!(code("header:x-user,cookie:sid"), COMBINED_ALICE_S42);
        assert_eq!(code("header:x-user,header:x-user"), COMBINED_ALICE_ALICE);
        assert_eq!(
            code("header:x-absent,cookie:sid"),
            XXH64_S42,
            "absent skipped"
        );
        assert_eq!(code("source-ip"), XXH64_PEER);
        assert_eq!(
            KeySpec::parse(&["header:x-absent"])
                .unwrap()
                .evaluate(&p, PEER, KeyStyle::Envoy),
            None
        );
    }

    #[test]
    fn values_join_with_newlines_for_other_policies() {
        let p = parts("/p", &[("x-user", "alice"), ("cookie", "sid=s-42")]);
        let key = KeySpec::parse(&["header:x-user,header:x-absent,cookie:sid"])
            .unwrap()
            .evaluate(&p, PEER, KeyStyle::Value);
        assert_eq!(key, Some(RequestKey::Bytes(b"alice\ns-42".to_vec())));
    }

    // Independent values (Python `xxhash` 4.1.0), see the test above.
    const XXH64_ALICE: u64 = 0x73a3ea485f2e6049;
    const XXH64_S42: u64 = 0x910796266910afc9;
    const XXH64_PEER: u64 = 0x43bc2967acb25af4;
    const COMBINED_ALICE_S42: u64 = 0x764042b6d74c6f5b;
    const COMBINED_ALICE_ALICE: u64 = 0x94e43ed8e172a0db;
}
