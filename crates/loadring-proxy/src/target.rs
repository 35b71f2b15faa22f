//! What a request names, checked before it is routed: its method (no
//! tunnels but WebSockets), its one `Host`, and its path with dot segments resolved.
//!
//! A path is routed and forwarded with its dot segments resolved (RFC 3986
//! 5.2.4), as nginx matches locations: `/api/../internal/x` is
//! `/internal/x`, so a route on `/api/` cannot be bypassed by a backend
//! that resolves them itself. Segments written `%2e`/`%2E` count as dots.
//! A path that climbs above the root is refused with 400, as nginx does.

use std::borrow::Cow;
use std::net::IpAddr;

use http::{header, Method, StatusCode, Version};

use crate::connect::request_head::RequestHead;

/// Why a request is answered by the proxy itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The status.
    pub status: StatusCode,
    /// One line for the client.
    pub why: &'static str,
}

fn refused(status: StatusCode, why: &'static str) -> Refused {
    Refused { status, why }
}

/// The request's host as written, checked but not normalised (see
/// [`host_part`]; [`canonical_host`] normalises it, only when a route
/// compares it), or `None` when it names none (HTTP/1.0 without `Host`).
///
/// # Errors
/// CONNECT (501: no tunnels) unless it is HTTP/2's extended CONNECT for a
/// WebSocket; two `Host` headers, or an HTTP/1.1 request
/// without one, or an unreadable or malformed one (400, RFC 9112 3.2).
pub(crate) fn check(request: &RequestHead) -> Result<Option<&str>, Refused> {
    if request.method == Method::CONNECT {
        match request.extensions.get::<hyper::ext::Protocol>() {
            // HTTP/2's extended CONNECT for a WebSocket (RFC 8441): a tunnel
            // to a backend the policy picks, like an HTTP/1.1 upgrade.
            Some(protocol) if is_websocket(protocol) => {}
            Some(_) => {
                return Err(refused(
                    StatusCode::NOT_IMPLEMENTED,
                    "extended CONNECT is only supported with :protocol websocket",
                ));
            }
            None => {
                return Err(refused(
                    StatusCode::NOT_IMPLEMENTED,
                    "CONNECT is not supported: this proxy opens no tunnels",
                ));
            }
        }
    }
    let mut hosts = request.fields.get_all(&header::HOST);
    let host = hosts.next();
    if hosts.next().is_some() {
        return Err(refused(
            StatusCode::BAD_REQUEST,
            "more than one Host header",
        ));
    }
    let from_uri = request.uri.authority().map(|a| a.as_str());
    let named = match (host, from_uri) {
        // An absolute target's authority wins over Host (RFC 9112 3.2.2).
        (_, Some(authority)) => Some(authority),
        (Some(h), None) => Some(
            h.as_text()
                .ok_or_else(|| refused(StatusCode::BAD_REQUEST, "unreadable Host header"))?,
        ),
        (None, None) if request.version == Version::HTTP_11 => {
            return Err(refused(StatusCode::BAD_REQUEST, "no Host header"));
        }
        (None, None) => None,
    };
    match named {
        None => Ok(None),
        Some(text) => host_part(text)
            .map(Some)
            .ok_or_else(|| refused(StatusCode::BAD_REQUEST, "malformed Host header")),
    }
}

/// Whether an extended CONNECT's `:protocol` is `websocket` (RFC 8441 4;
/// tokens compare without case, RFC 6455 4.2.1).
pub fn is_websocket(protocol: &hyper::ext::Protocol) -> bool {
    protocol.as_ref().eq_ignore_ascii_case(b"websocket")
}

/// A host as routes compare it: the port dropped, lower case, without a
/// final dot, IP literals in their canonical form without brackets
/// (`[::1]:8080` and `[0:0::1]` are `::1`). `None` when it is no host.
pub fn normalize_host(text: &str) -> Option<String> {
    host_part(text).map(canonical_host)
}

/// The host of a `Host` value or authority, port and brackets dropped,
/// not normalised: `None` when it is no host (what [`normalize_host`]
/// refuses). Nothing is allocated: every request's host is checked, and
/// only routes need it normalised.
pub fn host_part(text: &str) -> Option<&str> {
    let text = text.trim();
    let host = if let Some(rest) = text.strip_prefix('[') {
        let (literal, after) = rest.split_once(']')?;
        if !(after.is_empty() || after.strip_prefix(':').is_some_and(is_port))
            || literal.bytes().any(is_forbidden)
        {
            return None;
        }
        literal
    } else {
        // Every request's host goes through here: a few short scans, the
        // last colon, an earlier one, a character no host has.
        let bytes = text.as_bytes();
        let last_colon = bytes.iter().rposition(|&b| b == b':');
        // Two colons: a bare IPv6 literal (only in route settings: a Host
        // needs brackets), or no host at all.
        if let Some(i) = last_colon {
            if bytes[..i].contains(&b':') && text.parse::<IpAddr>().is_ok() {
                return Some(text);
            }
        }
        let host = match last_colon {
            Some(i) if is_port(&text[i + 1..]) => &text[..i],
            Some(_) => return None,
            None => text,
        };
        if host.bytes().any(is_forbidden) {
            return None;
        }
        host
    };
    // An IP literal passes this too: never empty.
    if host.strip_suffix('.').unwrap_or(host).is_empty() {
        return None;
    }
    Some(host)
}

/// A host from [`host_part`] as routes compare it (see [`normalize_host`]).
pub fn canonical_host(host: &str) -> String {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return ip.to_canonical().to_string();
    }
    host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase()
}

/// A character no host has.
fn is_forbidden(b: u8) -> bool {
    matches!(b, b'[' | b']' | b'/' | b'@' | b' ')
}

/// Whether `text` is a port: digits only (RFC 3986 3.2.3; no sign, which
/// `u16::from_str` would take), at most 65535, or nothing (`host:`).
pub(crate) fn is_port(text: &str) -> bool {
    let mut value: u32 = 0;
    for b in text.bytes() {
        if !b.is_ascii_digit() {
            return false;
        }
        value = (value * 10 + u32::from(b - b'0')).min(65_536);
    }
    value <= 65_535
}

/// `path` with its dot segments resolved (RFC 3986 5.2.4); borrowed when
/// it has none.
///
/// # Errors
/// A path that climbs above the root (400).
pub fn resolve_dot_segments(path: &str) -> Result<Cow<'_, str>, Refused> {
    let is_dot = |s: &str| s == "." || s.eq_ignore_ascii_case("%2e");
    let is_dot_dot = |s: &str| {
        s.len() >= 2
            && s.len() <= 6
            && matches!(
                s.to_ascii_lowercase().as_str(),
                ".." | ".%2e" | "%2e." | "%2e%2e"
            )
    };
    // Every request's path: most have no dot and no escape at all.
    if !path.bytes().any(|b| b == b'.' || b == b'%')
        || !path.split('/').any(|s| is_dot(s) || is_dot_dot(s))
    {
        return Ok(Cow::Borrowed(path));
    }
    let mut out: Vec<&str> = Vec::new();
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    let last = segments.len().saturating_sub(1);
    for (i, segment) in segments.iter().enumerate() {
        if is_dot(segment) {
            // `/a/.` is `/a/`: a trailing dot segment leaves a slash.
            if i == last {
                out.push("");
            }
        } else if is_dot_dot(segment) {
            if out.pop().is_none() {
                return Err(refused(
                    StatusCode::BAD_REQUEST,
                    "the path climbs above the root",
                ));
            }
            if i == last {
                out.push("");
            }
        } else {
            out.push(segment);
        }
    }
    Ok(Cow::Owned(format!("/{}", out.join("/"))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Request;

    /// The rule as docs/proxy.md states it, written plainly: the single
    /// pass of [`host_part`] must agree with it on any text.
    fn host_part_spec(text: &str) -> Option<&str> {
        let text = text.trim();
        let host = if let Some(rest) = text.strip_prefix('[') {
            let (literal, after) = rest.split_once(']')?;
            if !(after.is_empty() || after.strip_prefix(':').is_some_and(is_port)) {
                return None;
            }
            literal
        } else if text.matches(':').count() >= 2 && text.parse::<IpAddr>().is_ok() {
            return Some(text);
        } else {
            match text.rsplit_once(':') {
                Some((host, port)) if is_port(port) => host,
                Some(_) => return None,
                None => text,
            }
        };
        let bare = host.strip_suffix('.').unwrap_or(host);
        let forbidden = ['[', ']', '/', '@', ' '];
        (!bare.is_empty() && !bare.contains(forbidden)).then_some(host)
    }

    proptest::proptest! {
        #[test]
        fn host_part_agrees_with_its_rule(text in "[ \\[\\]:/@.a-f0-9x]{0,24}") {
            proptest::prop_assert_eq!(host_part(&text), host_part_spec(&text));
        }
    }

    #[test]
    fn a_port_is_digits_up_to_65535() {
        for (text, port) in [
            ("", true),
            ("0", true),
            ("80", true),
            ("00080", true),
            ("0000000000080", true),
            ("65535", true),
            ("65536", false),
            ("99999999999999999999", false),
            ("+80", false),
            ("-1", false),
            ("8 0", false),
            ("80a", false),
            ("٨٠", false),
        ] {
            assert_eq!(is_port(text), port, "{text:?}");
        }
    }

    #[test]
    fn hosts_normalize() {
        for (text, want) in [
            ("Example.COM:8080", Some("example.com")),
            ("example.com.", Some("example.com")),
            ("[::1]", Some("::1")),
            ("[::1]:8080", Some("::1")),
            ("[0:0:0::1]:80", Some("::1")),
            ("::1", Some("::1")),
            ("127.0.0.1:9", Some("127.0.0.1")),
            ("[::ffff:10.0.0.1]", Some("10.0.0.1")),
            ("[::1", None),
            ("[::1]x", None),
            ("a:b", None),
            ("", None),
        ] {
            assert_eq!(normalize_host(text).as_deref(), want, "{text}");
        }
    }

    #[test]
    fn check_gives_the_host_as_written_and_refuses_what_normalising_refuses() {
        let with_host = |host: &str| {
            Request::builder()
                .uri("/x")
                .header(header::HOST, host)
                .body(())
                .unwrap()
                .into_parts()
                .0
                .into()
        };
        for (host, written) in [
            ("Example.COM:8080", Some("Example.COM")),
            ("example.com.", Some("example.com.")),
            ("[0:0:0::1]:80", Some("0:0:0::1")),
            ("127.0.0.1:9", Some("127.0.0.1")),
            ("[::1", None),
            ("a:b", None),
            ("a/b", None),
            ("", None),
        ] {
            let request = with_host(host);
            let checked = check(&request);
            match written {
                Some(written) => {
                    assert_eq!(checked, Ok(Some(written)), "{host}");
                    assert_eq!(
                        Some(canonical_host(written)),
                        normalize_host(host),
                        "{host}"
                    );
                }
                None => assert_eq!(
                    checked,
                    Err(refused(StatusCode::BAD_REQUEST, "malformed Host header")),
                    "{host}"
                ),
            }
        }
        // An absolute target's authority wins, as written too.
        let absolute: RequestHead = Request::builder()
            .uri("http://API.example:81/x")
            .header(header::HOST, "other")
            .body(())
            .unwrap()
            .into_parts()
            .0
            .into();
        assert_eq!(check(&absolute), Ok(Some("API.example")));
    }

    /// RFC 9112 3.2: an HTTP/1.1 request must name its host, once; an
    /// HTTP/1.0 one may not name it at all, and an HTTP/2 one names it in
    /// `:authority` (the URI) when it does.
    #[test]
    fn a_host_is_required_of_http_1_1_only_and_once() {
        let without_host = |version: Version, uri: &str| {
            Request::builder()
                .version(version)
                .uri(uri)
                .body(())
                .unwrap()
                .into_parts()
                .0
                .into()
        };
        let no_host = Err(refused(StatusCode::BAD_REQUEST, "no Host header"));
        assert_eq!(check(&without_host(Version::HTTP_11, "/x")), no_host);
        assert_eq!(check(&without_host(Version::HTTP_10, "/x")), Ok(None));
        assert_eq!(check(&without_host(Version::HTTP_2, "/x")), Ok(None));
        assert_eq!(
            check(&without_host(Version::HTTP_11, "http://a.example/x")),
            Ok(Some("a.example"))
        );
        let twice: RequestHead = Request::builder()
            .version(Version::HTTP_10)
            .uri("/x")
            .header(header::HOST, "a.example")
            .header(header::HOST, "a.example")
            .body(())
            .unwrap()
            .into_parts()
            .0
            .into();
        assert_eq!(
            check(&twice),
            Err(refused(
                StatusCode::BAD_REQUEST,
                "more than one Host header"
            ))
        );
    }

    #[test]
    fn connect_passes_only_as_a_websocket_over_http2() {
        let connect = |protocol: Option<&'static str>| {
            let mut request = Request::builder()
                .method(Method::CONNECT)
                .version(Version::HTTP_2)
                .uri("http://chat.example/room")
                .body(())
                .unwrap();
            if let Some(p) = protocol {
                request
                    .extensions_mut()
                    .insert(hyper::ext::Protocol::from_static(p));
            }
            let request: RequestHead = request.into_parts().0.into();
            check(&request)
                .map(|host| host.map(str::to_string))
                .map_err(|r| (r.status, r.why))
        };
        let host = Ok(Some("chat.example".to_string()));
        assert_eq!(connect(Some("websocket")), host);
        assert_eq!(connect(Some("WebSocket")), host);
        let refused = |why| Err((StatusCode::NOT_IMPLEMENTED, why));
        assert_eq!(
            connect(Some("connect-udp")),
            refused("extended CONNECT is only supported with :protocol websocket")
        );
        assert_eq!(
            connect(None),
            refused("CONNECT is not supported: this proxy opens no tunnels")
        );
    }

    #[test]
    fn dot_segments_resolve() {
        for (path, want) in [
            ("/api/v1", Some("/api/v1")),
            ("/api/../internal/secret", Some("/internal/secret")),
            ("/api/%2E%2e/internal", Some("/internal")),
            ("/a/./b/.", Some("/a/b/")),
            ("/a/b/..", Some("/a/")),
            ("/a/..b/c", Some("/a/..b/c")),
            ("/..", None),
            ("/a/../../b", None),
        ] {
            let got = resolve_dot_segments(path).ok().map(|p| p.into_owned());
            assert_eq!(got.as_deref(), want, "{path}");
        }
    }

    /// Every request's path is looked at: one without a dot segment is
    /// given back as it is, not copied, whatever dots and escapes it has.
    #[test]
    fn a_path_without_dot_segments_is_not_copied() {
        for path in [
            "/",
            "/api/v1",
            "/a.b/c.",
            "/%41/b",
            "/a/..b/.c",
            "/a/%2e%2f",
        ] {
            assert!(
                matches!(resolve_dot_segments(path), Ok(Cow::Borrowed(p)) if p == path),
                "{path}"
            );
        }
        assert!(matches!(
            resolve_dot_segments("/a/./b"),
            Ok(Cow::Owned(p)) if p == "/a/b"
        ));
    }
}
