//! Property tests of the client's request head ([`super::head::parse`]):
//! what the hand-written tables check on a few heads, held on generated
//! ones, cut anywhere and mangled, since a client sends whatever bytes it
//! likes, in whatever pieces.

use bytes::BytesMut;
use http::header::{HeaderName, CONTENT_LENGTH, TRANSFER_ENCODING};
use http::{HeaderMap, Method, Version};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::{select, Index};

use super::head::{parse, BodyLength, Head, MAX_HEAD};
use crate::connect::codec_props::{edits, encode_fields, field, map_of, mutate, Field};

/// The names whose fields change how a head is framed or kept, never
/// generated at random: `Request` adds the framing and `Connection` fields
/// itself, and leaves the others (their tables are in `head.rs`).
const SAID: [&str; 6] = [
    "content-length",
    "transfer-encoding",
    "connection",
    "te",
    "expect",
    "upgrade",
];

/// What the body of a generated request is framed by.
#[derive(Debug, Clone)]
enum Framing {
    None,
    /// `Content-Length`, repeated with the same value `times`.
    Length {
        length: u64,
        times: usize,
    },
    /// `Transfer-Encoding: chunked` (HTTP/1.1 alone).
    Chunked,
}

/// A request head as a client sends it.
#[derive(Debug, Clone)]
struct Request {
    method: String,
    target: String,
    http10: bool,
    /// Lines ended by a bare LF instead of CRLF (RFC 9112 2.2 lets a
    /// recipient take them).
    bare_lf: bool,
    /// Empty lines before the request line (RFC 9112 2.2).
    empty_lines: usize,
    fields: Vec<Field>,
    framing: Framing,
    /// `Connection: close` or `keep-alive`, if any.
    connection: Option<&'static str>,
}

impl Request {
    /// Its fields in the order sent: the generated ones, then the framing
    /// and the connection's.
    fn all_fields(&self) -> Vec<Field> {
        let said = |name: &str, value: String| Field {
            name: name.to_owned(),
            before: " ",
            value: value.into_bytes(),
            after: "",
        };
        let mut all = self.fields.clone();
        match self.framing {
            Framing::None => {}
            Framing::Length { length, times } => {
                all.extend((0..times).map(|_| said("Content-Length", length.to_string())));
            }
            Framing::Chunked => all.push(said("Transfer-Encoding", "chunked".to_owned())),
        }
        if let Some(connection) = self.connection {
            all.push(said("Connection", connection.to_owned()));
        }
        all
    }

    fn wire(&self) -> Vec<u8> {
        let minor = if self.http10 { 0 } else { 1 };
        let mut wire = "\r\n".repeat(self.empty_lines).into_bytes();
        wire.extend_from_slice(
            format!("{} {} HTTP/1.{minor}\r\n", self.method, self.target).as_bytes(),
        );
        encode_fields(&mut wire, &self.all_fields());
        if self.bare_lf {
            // No CR inside a name or a value: each one ends a line.
            wire.retain(|&b| b != b'\r');
        }
        wire
    }

    fn body(&self) -> BodyLength {
        match self.framing {
            Framing::None => BodyLength::Known(0),
            Framing::Length { length, .. } => BodyLength::Known(length),
            Framing::Chunked => BodyLength::Chunked,
        }
    }

    /// RFC 9112 9.3: HTTP/1.1 persists unless `close`; HTTP/1.0 only with
    /// `keep-alive`.
    fn keep_alive(&self) -> bool {
        match (self.http10, self.connection) {
            (_, Some("close")) => false,
            (true, connection) => connection == Some("keep-alive"),
            (false, _) => true,
        }
    }
}

/// A method: a known one or any token (RFC 9110 9.1); CONNECT takes an
/// authority form, not generated here.
fn method() -> impl Strategy<Value = String> {
    prop_oneof![
        select(vec![
            "GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH"
        ])
        .prop_map(str::to_owned),
        "[A-Za-z!#$%&'*+.^_`|~-]{1,12}".prop_filter("CONNECT", |m| m != "CONNECT"),
    ]
}

/// An origin-form target (RFC 9112 3.2.1): a path and perhaps a query.
fn target() -> impl Strategy<Value = String> {
    let chars = "[a-zA-Z0-9._~!$&'()*+,;=:@%/-]{0,30}";
    (chars, prop::option::of(chars)).prop_map(|(path, query)| match query {
        Some(query) => format!("/{path}?{query}"),
        None => format!("/{path}"),
    })
}

fn request() -> impl Strategy<Value = Request> {
    let ordinary = field().prop_filter("a name that frames or keeps", |f| {
        !SAID.iter().any(|said| f.name.eq_ignore_ascii_case(said))
    });
    let framing = prop_oneof![
        Just(Framing::None),
        (0..=i64::MAX.unsigned_abs(), 1usize..=3)
            .prop_map(|(length, times)| Framing::Length { length, times }),
        Just(Framing::Chunked),
    ];
    (
        (method(), target(), any::<bool>(), prop::bool::weighted(0.2)),
        (0usize..=2, vec(ordinary, 0..=20), framing),
        prop::option::of(select(vec!["close", "keep-alive"])),
    )
        .prop_map(
            |((method, target, http10, bare_lf), (empty_lines, fields, framing), connection)| {
                // HTTP/1.0 has no transfer codings (RFC 9112 6.1): a
                // request framed by one is refused, as a test below checks.
                let framing = match framing {
                    Framing::Chunked if http10 => Framing::None,
                    other => other,
                };
                Request {
                    method,
                    target,
                    http10,
                    bare_lf,
                    empty_lines,
                    fields,
                    framing,
                    connection,
                }
            },
        )
}

/// The fields of `head` as the `http` crate takes them: every head read
/// must make a map (an HTTP/2 backend gets one).
fn map(head: &Head) -> Result<HeaderMap, TestCaseError> {
    head.request
        .fields
        .clone()
        .into_map()
        .map_err(|e| TestCaseError::fail(format!("fields the http crate refuses: {e}")))
}

/// The elements of every field named `name` (RFC 9110 5.6.1: a list, its
/// elements split on commas and trimmed), empty ones left out.
fn elements<'a>(map: &'a HeaderMap, name: &HeaderName) -> Vec<&'a [u8]> {
    map.get_all(name)
        .iter()
        .flat_map(|v| v.as_bytes().split(|&b| b == b','))
        .map(<[u8]>::trim_ascii)
        .filter(|e| !e.is_empty())
        .collect()
}

/// A head taken off `input`, whatever it is: never more held than the
/// limit, what is left of the buffer as it was, and a head read only when
/// its framing can be trusted (RFC 9112 6.3), which is checked here from
/// its fields as the `http` crate reads them.
fn check(input: &[u8]) -> Result<(), TestCaseError> {
    let mut buf = BytesMut::from(input);
    match parse(&mut buf) {
        Ok(None) => {
            prop_assert!(input.len() <= MAX_HEAD, "{} bytes held", input.len());
            prop_assert_eq!(buf.len(), input.len());
            // Left as it was but for a later minor version, read as 1.1
            // (RFC 9110 2.5) in place.
            let changed: Vec<(u8, u8)> = input
                .iter()
                .zip(&buf[..])
                .filter(|(a, b)| a != b)
                .map(|(&a, &b)| (a, b))
                .collect();
            prop_assert!(
                changed.is_empty()
                    || (changed.len() == 1 && matches!(changed[0], (b'2'..=b'9', b'1'))),
                "{:?}",
                changed
            );
        }
        Ok(Some(head)) => {
            prop_assert!(input.len() - buf.len() <= MAX_HEAD);
            prop_assert!(input.ends_with(&buf));
            let fields = map(&head)?;
            let lengths = elements(&fields, &CONTENT_LENGTH);
            let codings = elements(&fields, &TRANSFER_ENCODING);
            match head.body {
                BodyLength::Chunked => {
                    prop_assert_eq!(head.request.version, Version::HTTP_11);
                    prop_assert!(fields.get(&CONTENT_LENGTH).is_none());
                    prop_assert_eq!(codings.len(), 1);
                    prop_assert!(codings[0].eq_ignore_ascii_case(b"chunked"));
                }
                BodyLength::Known(length) => {
                    prop_assert!(fields.get(&TRANSFER_ENCODING).is_none());
                    prop_assert_eq!(
                        fields.get(&CONTENT_LENGTH).is_none(),
                        lengths.is_empty() && length == 0
                    );
                    for said in lengths {
                        prop_assert!(said.iter().all(u8::is_ascii_digit), "{:?}", said);
                        prop_assert_eq!(
                            std::str::from_utf8(said).ok().and_then(|s| s.parse().ok()),
                            Some(length)
                        );
                    }
                }
            }
            // An authority form routes by its host: CONNECT's alone.
            let uri = &head.request.uri;
            prop_assert_eq!(
                uri.scheme().is_none() && uri.authority().is_some(),
                head.request.method == Method::CONNECT
            );
        }
        Err(refusal) => {
            prop_assert!(
                [400, 414, 431, 501, 505].contains(&refusal.status.as_u16()),
                "{:?}",
                refusal
            );
            prop_assert!(!refusal.why.contains('\n'));
        }
    }
    Ok(())
}

/// Bytes no client should send: random ones, pieces of a request's
/// syntax (framing said twice or badly among them), and runs of one byte
/// near the limit.
fn hostile() -> impl Strategy<Value = Vec<u8>> {
    let run_len = prop_oneof![0..100usize, (MAX_HEAD - 40)..(MAX_HEAD + 3)];
    let segment = prop_oneof![
        vec(any::<u8>(), 0..32),
        select(vec![
            &b"GET / HTTP/1.1\r\n"[..],
            b"POST /a HTTP/1.0\r\n",
            b"GET / HTTP/1.7\r\n",
            b"GET / HTTP/2.0\r\n",
            b"CONNECT a.example:443 HTTP/1.1\r\n",
            b"GET http://a.example/ HTTP/1.1\r\n",
            b"OPTIONS * HTTP/1.1\r\n",
            b"GET a.example:80 HTTP/1.1\r\n",
            b"host: a.example\r\n",
            b"Content-Length: 5\r\n",
            b"content-length: 5, 6\r\n",
            b"Content-Length: +5\r\n",
            b"Transfer-Encoding: chunked\r\n",
            b"transfer-encoding: gzip\r\n",
            b"Transfer-Encoding: chunked, identity\r\n",
            b"Connection: close, upgrade\r\n",
            b"x-a: 1\r\n",
            b" folded\r\n",
            b"\r\n",
            b"\n",
            b"\r",
            b":",
        ])
        .prop_map(<[u8]>::to_vec),
        (select(vec![b'a', b' ', b'/', b':', b'\t', b'\n']), run_len).prop_map(|(b, n)| vec![b; n]),
    ];
    vec(segment, 0..8).prop_map(|s| s.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// A head parses to what was sent, and only once whole: each of its
    /// prefixes is left in the buffer as it was, and what follows it (a
    /// body, the next request) stays there.
    #[test]
    fn a_request_head_parses_to_what_was_sent(
        request in request(),
        next in vec(any::<u8>(), 0..40),
        cuts in vec(any::<Index>(), 0..8),
    ) {
        let wire = request.wire();
        for cut in &cuts {
            let prefix = &wire[..cut.index(wire.len())];
            let mut buf = BytesMut::from(prefix);
            prop_assert!(matches!(parse(&mut buf), Ok(None)), "{:?}", String::from_utf8_lossy(prefix));
            prop_assert_eq!(&buf[..], prefix);
        }
        let mut buf = BytesMut::from(&wire[..]);
        buf.extend_from_slice(&next);
        let head = parse(&mut buf)
            .map_err(|e| TestCaseError::fail(format!("{e:?}")))?
            .ok_or_else(|| TestCaseError::fail("partial"))?;
        prop_assert_eq!(head.request.method.as_str(), request.method.as_str());
        prop_assert_eq!(&head.request.uri, request.target.as_str());
        let version = if request.http10 { Version::HTTP_10 } else { Version::HTTP_11 };
        prop_assert_eq!(head.request.version, version);
        prop_assert_eq!(map(&head)?, map_of(&request.all_fields()));
        prop_assert_eq!(head.body, request.body());
        prop_assert_eq!(head.keep_alive, request.keep_alive());
        prop_assert!(!head.expects_continue && !head.asks_upgrade && !head.te_trailers);
        prop_assert_eq!(&buf[..], &next[..]);
        check(&wire)?;
    }

    /// HTTP/1.0 has no transfer codings (RFC 9112 6.1), and a length said
    /// two ways is refused (RFC 9112 6.3, as nginx does): a 400 whatever
    /// else the head holds.
    #[test]
    fn framing_said_two_ways_or_on_http10_is_refused(
        request in request(),
        both in any::<bool>(),
    ) {
        let mut request = request;
        request.framing = Framing::Chunked;
        if both {
            request.fields.push(Field {
                name: "Content-Length".to_owned(),
                before: "",
                value: b"0".to_vec(),
                after: "",
            });
        } else {
            request.http10 = true;
        }
        let mut buf = BytesMut::from(&request.wire()[..]);
        let refused = parse(&mut buf).map(|head| head.map(|h| h.body));
        prop_assert!(
            matches!(&refused, Err(r) if r.status.as_u16() == 400),
            "{:?}",
            refused
        );
    }

    #[test]
    fn hostile_request_heads_are_refused_within_the_limits(
        start in select(vec![&b""[..], b"GET / HTTP/1.1\r\n", b"POST / HTTP/1.1\r\nx-a: "]),
        rest in hostile(),
        end in select(vec![&b""[..], b"\r\n\r\n"]),
        cuts in vec(any::<Index>(), 0..4),
    ) {
        let input = [start, &rest, end].concat();
        check(&input)?;
        for cut in &cuts {
            check(&input[..cut.index(input.len() + 1)])?;
        }
    }

    #[test]
    fn mangled_request_heads_are_refused_within_the_limits(
        request in request(),
        edits in edits(),
    ) {
        check(&mutate(request.wire(), &edits))?;
    }
}
