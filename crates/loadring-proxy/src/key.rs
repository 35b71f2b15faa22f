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

use bytes::Bytes;
use http::header::{HeaderName, COOKIE};
use http::request::Parts;
use http::{HeaderMap, Method, Uri, Version};
use loadring::hash::xxhash64;

use crate::connect::head_fields::{FieldValue, Fields, Values};
use crate::connect::request_head::RequestHead;
use crate::error::{ConfigError, ConfigErrorKind};

/// What a key is read from: a request's line and its fields, borrowed
/// from `http`'s parts or from the gateway's own head.
#[derive(Clone, Copy)]
pub(crate) struct Keyed<'p> {
    method: &'p Method,
    uri: &'p Uri,
    version: Version,
    fields: KeyedFields<'p>,
}

#[derive(Clone, Copy)]
enum KeyedFields<'p> {
    Map(&'p HeaderMap),
    Head(&'p Fields),
}

impl<'p> Keyed<'p> {
    fn values(&self, name: &'p HeaderName) -> Values<'p> {
        match self.fields {
            KeyedFields::Map(map) => Values::Map(map.get_all(name).iter()),
            KeyedFields::Head(fields) => fields.get_all(name),
        }
    }
}

impl<'p> From<&'p Parts> for Keyed<'p> {
    fn from(parts: &'p Parts) -> Self {
        Keyed {
            method: &parts.method,
            uri: &parts.uri,
            version: parts.version,
            fields: KeyedFields::Map(&parts.headers),
        }
    }
}

impl<'p> From<&'p RequestHead> for Keyed<'p> {
    fn from(head: &'p RequestHead) -> Self {
        Keyed {
            method: &head.method,
            uri: &head.uri,
            version: head.version,
            fields: KeyedFields::Head(&head.fields),
        }
    }
}

/// The most sources a key combines.
pub(crate) const MAX_KEY_SOURCES: usize = 16;

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

/// The characters of a token (RFC 9110 5.6.2), which a header name is.
const TOKEN: &str = "letters, digits and ! # $ % & ' * + - . ^ _ ` | ~";

/// How a message names character `c`: in backticks, escaped when it does
/// not show.
fn show_char(c: char) -> String {
    match c {
        ' ' => "a space".to_string(),
        c => format!("`{}`", c.escape_debug()),
    }
}

/// Why `name` cannot be the name of a header, if it cannot: a token.
fn header_name_fault(name: &str) -> Option<String> {
    let is_token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if let Some(c) = name.chars().find(|&c| !is_token(c)) {
        return Some(format!(
            "a header name cannot hold {}; accepted: {TOKEN}",
            show_char(c)
        ));
    }
    HeaderName::from_bytes(name.as_bytes())
        .err()
        .map(|_| format!("`{}` is not a header name", loadring::Echo(name)))
}

/// Why `name` cannot be the name of a cookie the proxy finds, if it
/// cannot: a cookie's name is what comes before its `=`, after a `;` and
/// spaces, in a `Cookie` field, which holds visible ASCII only.
fn cookie_name_fault(name: &str) -> Option<String> {
    let bad = name
        .chars()
        .find(|&c| !c.is_ascii_graphic() || matches!(c, ';' | '=' | ','))?;
    let why = match bad {
        ';' => ", which separates cookies",
        '=' => ", which ends a cookie's name",
        _ => "",
    };
    Some(format!(
        "a cookie name cannot hold {}{why}; accepted: visible ASCII characters other than ; = ,",
        show_char(bad)
    ))
}

/// Why `name` cannot be the name of a query parameter as a request writes
/// it (names are compared as written, not decoded), if it cannot.
fn query_name_fault(name: &str) -> Option<String> {
    // What a request's query holds (the `http` crate's rule): visible
    // ASCII but `"`, `#`, `<`, `>`, and UTF-8 beyond ASCII.
    let bad = name.chars().find(|&c| {
        matches!(c, '&' | '=' | '#' | '"' | '<' | '>' | ',')
            || (c.is_ascii() && !c.is_ascii_graphic())
            || c.is_control()
    })?;
    let why = match bad {
        '&' => ", which separates parameters",
        '=' => ", which ends a parameter's name",
        '#' => ", which begins the fragment (never sent)",
        _ => {
            ", which a request's query never holds as it is (names are matched as sent: \
              write it percent-encoded)"
        }
    };
    Some(format!(
        "a query parameter name cannot hold {}{why}; accepted: visible ASCII characters \
         other than \" # & , < = >, and UTF-8 beyond ASCII",
        show_char(bad)
    ))
}

impl FromStr for KeySource {
    type Err = ConfigError;

    fn from_str(text: &str) -> Result<Self, ConfigError> {
        let bad = |why: &str| {
            ConfigError::new(
                ConfigErrorKind::Value,
                format!("key source `{}`: {why}", loadring::Echo(text)),
            )
        };
        let with_sources = |why: &str| bad(&format!("{why}; accepted: {KEY_SOURCES}"));
        let (kind, name) = match text.split_once(':') {
            Some((kind, name)) => (kind, Some(name)),
            None => (text, None),
        };
        // A kind that takes a name: the name, or why it is none.
        let named = |kind: &str, fault: fn(&str) -> Option<String>| match name {
            None => Err(bad(&format!("{kind} takes a name: {kind}:NAME"))),
            Some("") => Err(bad(&format!("the name after `{kind}:` is empty"))),
            Some(name) => match fault(name) {
                Some(why) => Err(bad(&why)),
                None => Ok(name),
            },
        };
        match (kind, name) {
            ("header", _) => named("header", header_name_fault).and_then(|name| {
                HeaderName::from_bytes(name.as_bytes())
                    .map(KeySource::Header)
                    .map_err(|_| bad("not a header name"))
            }),
            ("cookie", _) => {
                named("cookie", cookie_name_fault).map(|n| KeySource::Cookie(n.into()))
            }
            ("query", _) => named("query", query_name_fault).map(|n| KeySource::Query(n.into())),
            ("path", None) => Ok(KeySource::Path),
            ("uri", None) => Ok(KeySource::Uri),
            ("method-uri", None) => Ok(KeySource::MethodUri),
            ("source-ip", None) => Ok(KeySource::SourceIp),
            ("path" | "uri" | "method-uri" | "source-ip", Some(_)) => {
                Err(bad(&format!("{kind} takes no name (give `{kind}` alone)")))
            }
            ("", None) => Err(with_sources("empty")),
            _ => Err(with_sources("unknown source")),
        }
    }
}

impl KeySource {
    /// This source's value in the request, or `None` when it is absent
    /// (the tests' reading; the gateway borrows it with `bytes`).
    #[cfg(test)]
    pub(crate) fn value(&self, parts: &Parts, peer: IpAddr) -> Option<Vec<u8>> {
        self.bytes(parts.into(), peer).map(|b| b.to_vec())
    }

    /// This source's value, held without a copy where the request holds it
    /// whole (one header line, a cookie, a query parameter, the path, the
    /// target; the client address is written inline): only several lines
    /// of a header and `method-uri` are put together in a new buffer.
    pub(crate) fn bytes(&self, request: Keyed<'_>, peer: IpAddr) -> Option<KeyBytes> {
        self.find(request, peer).map(Found::into_key)
    }

    /// Where this source's value is: borrowed from the request when it can
    /// be (hashed in place for Envoy's policies, held by [`KeyBytes`] for
    /// the others).
    fn find<'p>(&'p self, parts: Keyed<'p>, peer: IpAddr) -> Option<Found<'p>> {
        match self {
            KeySource::Header(name) => {
                let mut all = parts.values(name);
                let first = all.next()?;
                let Some(second) = all.next() else {
                    return Some(Found::Header(first, 0..first.as_bytes().len()));
                };
                let mut values: Vec<&[u8]> = vec![first.as_bytes(), second.as_bytes()];
                values.extend(all.map(|v| v.as_bytes()));
                // Envoy sorts the values so that their order does not matter.
                values.sort_unstable();
                Some(Found::Held(KeyBytes::owned(values.concat())))
            }
            KeySource::Cookie(name) => {
                cookie_value(parts, name).map(|(header, range)| Found::Header(header, range))
            }
            KeySource::Query(name) => {
                let target = parts.uri.path_and_query()?;
                let value = query_value(target.query()?, name)?;
                Some(Found::target_slice(target, value))
            }
            KeySource::Path => Some(match parts.uri.path_and_query() {
                Some(target) => Found::target_slice(target, target.path()),
                // No target in an authority-form request: http's path is "".
                None => Found::Held(KeyBytes::inline(parts.uri.path().as_bytes())),
            }),
            KeySource::Uri => Some(match parts.uri.path_and_query() {
                Some(target) => Found::Target(target, 0..target.as_str().len()),
                None => Found::Held(KeyBytes::inline(b"/")),
            }),
            KeySource::MethodUri => {
                let mut key = parts.method.as_str().as_bytes().to_vec();
                key.push(b'.');
                // HTTP/2 sends the target as `:path` (Go's RequestURI holds
                // it); the scheme and authority are pseudo-headers of their own.
                let target = if parts.version == Version::HTTP_2 {
                    parts
                        .uri
                        .path_and_query()
                        .map_or("/", |pq| pq.as_str())
                        .into()
                } else {
                    request_target(parts.uri)
                };
                key.extend_from_slice(target.as_bytes());
                Some(Found::Held(KeyBytes::owned(key)))
            }
            KeySource::SourceIp => {
                use std::io::Write as _;
                // The longest address written is 45 bytes (IPv6 ending in an
                // IPv4 address).
                let mut text = [0u8; INLINE];
                let mut cursor = std::io::Cursor::new(&mut text[..]);
                let _ = write!(cursor, "{}", peer.to_canonical());
                let len = cursor.position() as usize;
                Some(Found::Held(KeyBytes::inline(&text[..len])))
            }
        }
    }
}

/// The byte range of `part` in `whole`, if it is a slice of it (`http`
/// hands out a static `"/"` for an empty path, for one).
fn within(whole: &str, part: &str) -> Option<std::ops::Range<usize>> {
    let start = (part.as_ptr() as usize).checked_sub(whole.as_ptr() as usize)?;
    let end = start + part.len();
    (end <= whole.len()).then_some(start..end)
}

/// A source's value in the request.
enum Found<'p> {
    /// A slice of a header value.
    Header(FieldValue<'p>, std::ops::Range<usize>),
    /// A slice of the request-target.
    Target(&'p http::uri::PathAndQuery, std::ops::Range<usize>),
    /// Bytes not in the request as they are (inline or put together).
    Held(KeyBytes),
}

impl Found<'_> {
    /// `part` of the request-target, borrowed when it is a slice of it.
    fn target_slice<'p>(target: &'p http::uri::PathAndQuery, part: &str) -> Found<'p> {
        match within(target.as_str(), part) {
            Some(range) => Found::Target(target, range),
            None => Found::Held(KeyBytes::owned(part.as_bytes().to_vec())),
        }
    }

    fn as_bytes(&self) -> &[u8] {
        match self {
            Found::Header(value, range) => &value.as_bytes()[range.clone()],
            Found::Target(target, range) => &target.as_str().as_bytes()[range.clone()],
            Found::Held(bytes) => bytes,
        }
    }

    /// The value held past the request's borrow (a reference count, no copy).
    fn into_key(self) -> KeyBytes {
        match self {
            Found::Header(FieldValue::Map(value), range) => {
                KeyBytes(Held::Header(value.clone(), range))
            }
            Found::Header(value, range) => KeyBytes(Held::Shared(value.to_shared().slice(range))),
            Found::Target(target, range) => KeyBytes(Held::Target(target.clone(), range)),
            Found::Held(bytes) => bytes,
        }
    }
}

/// Bytes held inline in a key (a client address).
const INLINE: usize = 46;

/// A key's bytes, held where the request holds them when it can: a header
/// value or the request-target shares the request's buffer (a reference
/// count, no copy), so a key from one source costs no allocation.
#[derive(Clone)]
pub struct KeyBytes(Held);

#[derive(Clone)]
enum Held {
    /// A slice of a header value.
    Header(http::HeaderValue, std::ops::Range<usize>),
    /// A slice of the request-target (path and query).
    Target(http::uri::PathAndQuery, std::ops::Range<usize>),
    /// A slice of a head's bytes.
    Shared(Bytes),
    /// A few bytes, inline.
    Inline([u8; INLINE], u8),
    /// Bytes put together for the key.
    Owned(Vec<u8>),
}

impl KeyBytes {
    fn inline(bytes: &[u8]) -> Self {
        let mut held = [0u8; INLINE];
        let len = bytes.len().min(INLINE);
        held[..len].copy_from_slice(&bytes[..len]);
        KeyBytes(Held::Inline(held, len as u8))
    }

    fn owned(bytes: Vec<u8>) -> Self {
        KeyBytes(Held::Owned(bytes))
    }
}

impl std::ops::Deref for KeyBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.0 {
            Held::Header(value, range) => &value.as_bytes()[range.clone()],
            Held::Target(target, range) => &target.as_str().as_bytes()[range.clone()],
            Held::Shared(bytes) => bytes,
            Held::Inline(bytes, len) => &bytes[..usize::from(*len)],
            Held::Owned(bytes) => bytes,
        }
    }
}

impl PartialEq for KeyBytes {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for KeyBytes {}

impl fmt::Debug for KeyBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self))
    }
}

impl From<Vec<u8>> for KeyBytes {
    fn from(bytes: Vec<u8>) -> Self {
        KeyBytes::owned(bytes)
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

/// The first `name=value` pair of the `Cookie` headers, its value unquoted
/// (the header and the value's range in it); an empty value is absent (as
/// Envoy's `parseCookieValue` reads them).
fn cookie_value<'p>(
    parts: Keyed<'p>,
    name: &str,
) -> Option<(FieldValue<'p>, std::ops::Range<usize>)> {
    static COOKIE_NAME: HeaderName = COOKIE;
    for header in parts.values(&COOKIE_NAME) {
        let Some(text) = header.as_text() else {
            continue;
        };
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
                // A slice of the header's text, hence of its bytes.
                return (!v.is_empty()).then(|| (header, within(text, v).unwrap_or(0..0)));
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
    /// Sources given as `--key` values, each possibly a comma-separated
    /// list: at most 16 sources, none twice.
    ///
    /// # Errors
    /// The first unreadable source, named (and the value it is part of,
    /// when that holds several); a source given twice; one too many.
    pub fn parse<S: AsRef<str>>(texts: &[S]) -> Result<Self, ConfigError> {
        let mut sources: Vec<KeySource> = Vec::new();
        let mut typed: Vec<&str> = Vec::new();
        for text in texts {
            let whole = text.as_ref();
            for part in whole.split(',') {
                let part = part.trim();
                let in_whole = |e: ConfigError| {
                    if part == whole.trim() {
                        e
                    } else {
                        e.prefixed(&format!("in `{}`, ", loadring::Echo(whole)))
                    }
                };
                if sources.len() == MAX_KEY_SOURCES {
                    return Err(ConfigError::new(
                        ConfigErrorKind::Range,
                        format!(
                            "key source `{}` is the {}th: accepted at most {MAX_KEY_SOURCES} sources",
                            loadring::Echo(part),
                            MAX_KEY_SOURCES + 1
                        ),
                    ));
                }
                let source: KeySource = part.parse().map_err(in_whole)?;
                if let Some(i) = sources.iter().position(|s| *s == source) {
                    let first = typed[i];
                    let as_first = if first == part {
                        String::new()
                    } else {
                        format!(" (first as `{}`)", loadring::Echo(first))
                    };
                    return Err(in_whole(ConfigError::new(
                        ConfigErrorKind::Conflict,
                        format!(
                            "key source `{}` is given twice{as_first}: a source repeated adds \
                             nothing to the key",
                            loadring::Echo(part)
                        ),
                    )));
                }
                sources.push(source);
                typed.push(part);
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
    #[doc(hidden)]
    pub fn evaluate(&self, parts: &Parts, peer: IpAddr, style: KeyStyle) -> Option<RequestKey> {
        self.evaluate_keyed(parts.into(), peer, style)
    }

    /// The key of the request `parts` tells of: see [`evaluate`](Self::evaluate).
    pub(crate) fn evaluate_keyed(
        &self,
        parts: Keyed<'_>,
        peer: IpAddr,
        style: KeyStyle,
    ) -> Option<RequestKey> {
        match style {
            KeyStyle::Envoy => {
                let hashes = self
                    .sources
                    .iter()
                    .map(|s| s.find(parts, peer).map(|v| xxhash64(v.as_bytes(), 0)));
                envoy_combine(hashes).map(RequestKey::Code)
            }
            KeyStyle::Value => {
                let mut present = self.sources.iter().filter_map(|s| s.bytes(parts, peer));
                let first = present.next()?;
                let Some(second) = present.next() else {
                    // One value: the key is its bytes, not a copy.
                    return Some(RequestKey::Bytes(first));
                };
                let mut key = first.to_vec();
                for value in std::iter::once(second).chain(present) {
                    key.push(b'\n');
                    key.extend_from_slice(&value);
                }
                Some(RequestKey::Bytes(key.into()))
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
    Bytes(KeyBytes),
}

impl RequestKey {
    /// The request to place.
    pub fn request(&self) -> loadring::Request<'_> {
        match self {
            RequestKey::Code(code) => loadring::Request::code(*code),
            RequestKey::Bytes(bytes) => loadring::Request::key(&**bytes),
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

    /// A request's parts with `method` and target `uri`.
    fn method_parts(method: &str, uri: &str) -> Parts {
        http::Request::builder()
            .method(method)
            .uri(uri)
            .body(())
            .unwrap()
            .into_parts()
            .0
    }

    const PEER: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 1, 2, 3));

    /// Each message says what is wrong with the source, and nothing else.
    #[test]
    fn each_bad_source_says_exactly_what_is_wrong() {
        let sources = "accepted: header:NAME, cookie:NAME, query:NAME, path, uri, method-uri, \
                       source-ip (comma-separated to combine)";
        let token = "accepted: letters, digits and ! # $ % & ' * + - . ^ _ ` | ~";
        let cookie = "accepted: visible ASCII characters other than ; = ,";
        let query = "accepted: visible ASCII characters other than \" # & , < = >, and UTF-8 \
                     beyond ASCII";
        for (text, message) in [
            ("path:x", "key source `path:x`: path takes no name (give `path` alone)".to_string()),
            ("source-ip:", "key source `source-ip:`: source-ip takes no name (give `source-ip` alone)".into()),
            ("header", "key source `header`: header takes a name: header:NAME".into()),
            ("query", "key source `query`: query takes a name: query:NAME".into()),
            ("header:", "key source `header:`: the name after `header:` is empty".into()),
            ("cookie:", "key source `cookie:`: the name after `cookie:` is empty".into()),
            ("", format!("key source ``: empty; {sources}")),
            ("hdr:x", format!("key source `hdr:x`: unknown source; {sources}")),
            ("Header:x", format!("key source `Header:x`: unknown source; {sources}")),
            ("header:a:b", format!("key source `header:a:b`: a header name cannot hold `:`; {token}")),
            ("header:bad name", format!("key source `header:bad name`: a header name cannot hold a space; {token}")),
            ("header:é", format!("key source `header:é`: a header name cannot hold `é`; {token}")),
            ("cookie:a;b", format!("key source `cookie:a;b`: a cookie name cannot hold `;`, which separates cookies; {cookie}")),
            ("cookie:a=b", format!("key source `cookie:a=b`: a cookie name cannot hold `=`, which ends a cookie's name; {cookie}")),
            ("cookie:a\tb", format!("key source `cookie:a\\tb`: a cookie name cannot hold `\\t`; {cookie}")),
            ("cookie:é", format!("key source `cookie:é`: a cookie name cannot hold `é`; {cookie}")),
            ("query:a&b", format!("key source `query:a&b`: a query parameter name cannot hold `&`, which separates parameters; {query}")),
            ("query:a=b", format!("key source `query:a=b`: a query parameter name cannot hold `=`, which ends a parameter's name; {query}")),
            ("query:a#b", format!("key source `query:a#b`: a query parameter name cannot hold `#`, which begins the fragment (never sent); {query}")),
            ("query:a b", format!("key source `query:a b`: a query parameter name cannot hold a space, which a request's query never holds as it is (names are matched as sent: write it percent-encoded); {query}")),
        ] {
            let err = text.parse::<KeySource>().unwrap_err();
            assert_eq!(err.to_string(), message, "{text}");
            assert_eq!(err.kind(), ConfigErrorKind::Value, "{text}");
        }
        // What a request can carry is taken: names are matched as sent.
        for good in [
            "cookie:a(b)",
            "cookie:__Host-sid",
            "query:a%20b",
            "query:a?b",
            "query:é",
            "query:a[]",
        ] {
            assert!(good.parse::<KeySource>().is_ok(), "{good}");
        }
    }

    #[test]
    fn a_source_given_twice_or_one_too_many_is_refused() {
        let err = |texts: &[&str]| KeySpec::parse(texts).unwrap_err();
        let twice = err(&["header:X-User, path", "header:x-user"]);
        assert_eq!(
            twice.to_string(),
            "key source `header:x-user` is given twice (first as `header:X-User`): a source \
             repeated adds nothing to the key"
        );
        assert_eq!(twice.kind(), ConfigErrorKind::Conflict);
        assert_eq!(
            err(&["path,path"]).to_string(),
            "in `path,path`, key source `path` is given twice: a source repeated adds nothing to \
             the key"
        );
        // Cookie and query names are case-sensitive: two sources.
        assert!(KeySpec::parse(&["cookie:a,cookie:A,query:a,query:A"]).is_ok());
        assert_eq!(
            err(&["cookie:a,b"]).to_string(),
            "in `cookie:a,b`, key source `b`: unknown source; accepted: header:NAME, cookie:NAME, \
             query:NAME, path, uri, method-uri, source-ip (comma-separated to combine)"
        );
        let sixteen: Vec<String> = (1..=16).map(|i| format!("header:h{i}")).collect();
        assert_eq!(KeySpec::parse(&sixteen).unwrap().sources().len(), 16);
        let seventeen = [sixteen.join(","), "query:q".into()];
        let over = err(&[seventeen[0].as_str(), seventeen[1].as_str()]);
        assert_eq!(
            over.to_string(),
            "key source `query:q` is the 17th: accepted at most 16 sources"
        );
        assert_eq!(over.kind(), ConfigErrorKind::Range);
    }

    #[test]
    fn envoys_style_is_for_ring_hash_and_maglev_under_any_wrapper() {
        for (spec, style) in [
            ("ring_hash", KeyStyle::Envoy),
            ("maglev", KeyStyle::Envoy),
            ("zone_first over maglev", KeyStyle::Envoy),
            (
                "local_first over zone_first over ring_hash",
                KeyStyle::Envoy,
            ),
            ("c_murmurhash", KeyStyle::Value),
            ("ketama", KeyStyle::Value),
            ("zone_first over nginx_hash", KeyStyle::Value),
        ] {
            let spec: loadring::PolicySpec = spec.parse().unwrap();
            assert_eq!(KeyStyle::for_policy(&spec), style, "{spec}");
        }
    }

    #[test]
    fn a_request_key_is_placed_as_itself() {
        let debug = |r: loadring::Request<'_>| format!("{r:?}");
        assert_eq!(
            debug(RequestKey::Code(7).request()),
            debug(loadring::Request::code(7))
        );
        let abc = RequestKey::Bytes(KeyBytes::from(b"abc".to_vec()));
        assert_eq!(debug(abc.request()), debug(loadring::Request::key(b"abc")));
        assert_ne!(debug(abc.request()), debug(loadring::Request::new()));
        assert_ne!(
            KeyBytes::from(b"abc".to_vec()),
            KeyBytes::from(b"abd".to_vec())
        );
        assert_eq!(format!("{:?}", KeyBytes::from(b"abc".to_vec())), "\"abc\"");
    }

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
            let p = method_parts(method, uri);
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
        assert_eq!(code("header:x-user,query:u"), COMBINED_ALICE_ALICE);
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
        assert_eq!(key, Some(RequestKey::Bytes(b"alice\ns-42".to_vec().into())));
    }

    /// Whether `key` lies inside `buffer` (it was not copied out of it).
    fn held_in(key: &[u8], buffer: &[u8]) -> bool {
        let (k, b) = (key.as_ptr() as usize, buffer.as_ptr() as usize);
        k >= b && k + key.len() <= b + buffer.len()
    }

    /// A key from one source is the request's own bytes (held, not copied);
    /// several sources, or several lines of a header, are put together.
    #[test]
    fn a_single_source_key_is_the_requests_own_bytes() {
        let p = parts(
            "/a/b?u=alice&v=2",
            &[
                ("x-user", "alice"),
                ("cookie", "a=1; sid=\"s-42\""),
                ("x-two", "b"),
                ("x-two", "a"),
            ],
        );
        let header = p.headers["x-user"].as_bytes();
        let cookie = p.headers["cookie"].as_bytes();
        let target = p.uri.path_and_query().unwrap().as_str().as_bytes();
        for (spec, buffer, want) in [
            ("header:x-user", header, &b"alice"[..]),
            ("cookie:sid", cookie, b"s-42"),
            ("query:u", target, b"alice"),
            ("query:v", target, b"2"),
            ("path", target, b"/a/b"),
            ("uri", target, b"/a/b?u=alice&v=2"),
        ] {
            let key = KeySpec::parse(&[spec])
                .unwrap()
                .evaluate(&p, PEER, KeyStyle::Value);
            let Some(RequestKey::Bytes(key)) = key else {
                panic!("{spec}: {key:?}")
            };
            assert_eq!(&*key, want, "{spec}");
            assert!(held_in(&key, buffer), "{spec}: copied");
        }
        let two = KeySource::Header("x-two".parse().unwrap()).bytes((&p).into(), PEER);
        assert_eq!(two.as_deref(), Some(&b"ab"[..]), "sorted and joined");
        let joined = KeySpec::parse(&["header:x-user,query:v"])
            .unwrap()
            .evaluate(&p, PEER, KeyStyle::Value);
        assert_eq!(joined, Some(RequestKey::Bytes(b"alice\n2".to_vec().into())));
    }

    /// Targets without a path of their own: the path as `http` gives it
    /// (`/` for an absolute URI, nothing in authority form), never a slice
    /// taken out of bounds.
    /// A request's key is the same read from its fields raw (as an
    /// HTTP/1.1 client sent them, any spelling) as from a map, for every
    /// source and style.
    #[test]
    fn raw_fields_give_the_keys_a_map_gives() {
        let text = "GET /p?u=alice&v= HTTP/1.1\r\nHost: a.example\r\nX-User: alice\r\n\
                    cookie: sid=s-42; x=\"q\"\r\nX-TWO: b\r\nx-two: a\r\n\r\n";
        let raw = crate::connect::request_head::read(text);
        let map: RequestHead = raw.clone().into_parts().unwrap().into();
        for sources in [
            &["header:x-user"][..],
            &["header:x-two"],
            &["header:x-absent"],
            &["cookie:sid"],
            &["cookie:x"],
            &["query:u", "query:v"],
            &["path", "uri", "method-uri"],
            &["source-ip", "header:x-user", "cookie:sid"],
        ] {
            let spec = KeySpec::parse(sources).unwrap();
            for style in [KeyStyle::Envoy, KeyStyle::Value] {
                assert_eq!(
                    spec.evaluate_keyed((&raw).into(), PEER, style),
                    spec.evaluate_keyed((&map).into(), PEER, style),
                    "{sources:?} {style:?}"
                );
            }
        }
        let user = KeySpec::parse(&["header:x-user"]).unwrap();
        assert_eq!(
            user.evaluate_keyed((&raw).into(), PEER, KeyStyle::Value),
            Some(RequestKey::Bytes(b"alice".to_vec().into()))
        );
    }

    #[test]
    fn targets_without_a_path_keep_their_keys() {
        for (method, uri, path, target) in [
            ("GET", "http://example.com", "/", "/"),
            ("CONNECT", "example.com:443", "", "/"),
            ("OPTIONS", "*", "*", "*"),
        ] {
            let p = method_parts(method, uri);
            assert_eq!(values("path", &p), Some(path.as_bytes().to_vec()), "{uri}");
            assert_eq!(values("uri", &p), Some(target.as_bytes().to_vec()), "{uri}");
        }
        let v6 = IpAddr::V6(
            "2001:db8:ffff:ffff:ffff:ffff:255.255.255.255"
                .parse()
                .unwrap(),
        );
        assert_eq!(
            KeySource::SourceIp.value(&parts("/", &[]), v6),
            Some(v6.to_string().into_bytes()),
            "the longest address fits inline"
        );
    }

    // Independent values (Python `xxhash` 4.1.0), see the test above.
    const XXH64_ALICE: u64 = 0x73a3ea485f2e6049;
    const XXH64_S42: u64 = 0x910796266910afc9;
    const XXH64_PEER: u64 = 0x43bc2967acb25af4;
    const COMBINED_ALICE_S42: u64 = 0x764042b6d74c6f5b;
    const COMBINED_ALICE_ALICE: u64 = 0x94e43ed8e172a0db;
}
