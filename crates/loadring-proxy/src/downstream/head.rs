//! A client's request head read off its connection's buffer (RFC 9112 2-3),
//! with what it says of its body (RFC 9112 6.3) and of the connection:
//! no I/O here, so every hostile input is a plain test.
//!
//! Whatever could let the gateway and a backend see different requests in
//! the same bytes is refused, and the connection closed after the answer:
//! a length said two ways (`Content-Length` with `Transfer-Encoding`, as
//! nginx refuses it), two different lengths, a length that is not digits,
//! a transfer coding that does not end in `chunked` or one on HTTP/1.0, a
//! target in authority form on any method but CONNECT.

use std::mem::MaybeUninit;

use bytes::BytesMut;
use http::{Extensions, Method, StatusCode, Uri, Version};

use crate::connect::fields::Spans;
use crate::connect::head_fields::Fields;
use crate::connect::known_names::is_named;
use crate::connect::raw_fields::RawFields;
use crate::connect::request_head::RequestHead;
use crate::field_list::{elements, TransferCodings};

/// The longest request head read (request line and fields), as nginx's
/// and HAProxy's default buffers allow a little less.
pub(crate) const MAX_HEAD: usize = crate::connect::fields::MAX_HEAD;
/// The most header fields a request may have (hyper's default).
pub(crate) const MAX_HEADERS: usize = crate::connect::fields::MAX_HEADERS;

// Every target read fits a `Uri` (the `http` crate takes up to
// `u16::MAX - 1` bytes): it lies in a head of at most `MAX_HEAD` bytes
// beside at least a method, two spaces, a version and an empty line; a
// longer request line is refused 414 before, by `too_large`.
const _: () = assert!(MAX_HEAD - b"A  HTTP/1.1\n\n".len() < u16::MAX as usize);

/// How a request's body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyLength {
    /// `Content-Length` bytes (no field: none, RFC 9112 6.3).
    Known(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// A request head and what it says of the body and the connection.
#[derive(Debug)]
pub(crate) struct Head {
    /// Its fields as they came (no map built: see `RawFields`). Boxed from
    /// here to the backend: the head goes by value through the gateway, the
    /// attempt and the connection's exchange, and each future holding it
    /// inline was copied whole, head and all, at each of its moves.
    pub(crate) request: Box<RequestHead>,
    pub(crate) body: BodyLength,
    /// The client lets the connection carry another request after this
    /// one: HTTP/1.1 unless `Connection: close`, HTTP/1.0 with
    /// `Connection: keep-alive`.
    pub(crate) keep_alive: bool,
    /// `Expect: 100-continue` on HTTP/1.1: the client waits for a word
    /// before it sends the body.
    pub(crate) expects_continue: bool,
    /// HTTP/1.1 with `Connection: upgrade` and an `Upgrade` field: the
    /// connection may switch protocols after the answer.
    pub(crate) asks_upgrade: bool,
    /// `TE: trailers`: the client takes trailer fields after a chunked
    /// answer (without it they are left out, as hyper does).
    pub(crate) te_trailers: bool,
}

/// Why a head is refused: the answer's status and text. The connection
/// closes after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub(crate) status: StatusCode,
    pub(crate) why: &'static str,
}

fn refuse(status: StatusCode, why: &'static str) -> Refusal {
    Refusal { status, why }
}

/// A request head taken off `buf`, `None` until it is whole. Empty lines
/// before the request line are skipped (RFC 9112 2.2).
///
/// # Errors
/// The head is not an HTTP/1.x request (400), names a version past 1.1
/// (505), is over [`MAX_HEAD`] bytes or [`MAX_HEADERS`] fields (431; 414
/// when the request line alone is), or frames its body in a way that
/// cannot be trusted (400) or passed on (501).
pub(crate) fn parse(buf: &mut BytesMut) -> Result<Option<Head>, Refusal> {
    let mut headers = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut parsed = httparse::Request::new(&mut []);
    let len = match httparse::ParserConfig::default().parse_request_with_uninit_headers(
        &mut parsed,
        buf,
        &mut headers,
    ) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => return Err(too_large(buf)),
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(refuse(
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                "more than 100 header fields",
            ));
        }
        Err(httparse::Error::Version) => {
            return match version_of(buf) {
                // Read as the highest minor version of its major one
                // (RFC 9110 2.5), as nginx does.
                LineVersion::LaterMinor(at) => {
                    buf[at] = b'1';
                    parse(buf)
                }
                LineVersion::Unsupported => Err(refuse(
                    StatusCode::HTTP_VERSION_NOT_SUPPORTED,
                    "only HTTP/1.x is read on this connection",
                )),
                LineVersion::Malformed => {
                    Err(refuse(StatusCode::BAD_REQUEST, "malformed request line"))
                }
            };
        }
        Err(_) => return Err(refuse(StatusCode::BAD_REQUEST, "malformed request head")),
    };
    if len > MAX_HEAD {
        return Err(too_large(buf));
    }
    let method = parsed
        .method
        .and_then(|m| Method::from_bytes(m.as_bytes()).ok())
        .ok_or_else(|| refuse(StatusCode::BAD_REQUEST, "malformed method"))?;
    let version = match parsed.version {
        Some(0) => Version::HTTP_10,
        _ => Version::HTTP_11,
    };
    let target = parsed.path.unwrap_or_default();
    let base = buf.as_ptr() as usize;
    let target_at = target.as_ptr() as usize - base;
    let target_span = target_at..target_at + target.len();
    let mut fields = Spans::new();
    fields.record(buf, parsed.headers);
    let bytes = buf.split_to(len).freeze();
    // Never too long for a `Uri` (asserted above): a target it refuses is
    // malformed.
    let uri = Uri::from_maybe_shared(bytes.slice(target_span))
        .map_err(|_| refuse(StatusCode::BAD_REQUEST, "malformed request target"))?;
    check_form(&method, &uri)?;
    // Every name httparse reads is a token and every value it reads
    // holds no control character but a tab: what the `http` crate takes
    // (a test below goes through every byte), so the fields are not
    // checked again.
    // Written into its box where it is made: built first and boxed after,
    // its 384 bytes were copied.
    let fields = Box::write(Box::new_uninit(), RawFields::new(bytes, fields));
    let said = Said::of(&fields)?;
    let body = match (said.codings, said.length) {
        (Some(_), Some(_)) => {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                "both Content-Length and Transfer-Encoding",
            ))
        }
        (Some(_), None) if version == Version::HTTP_10 => {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                "Transfer-Encoding on an HTTP/1.0 request",
            ))
        }
        (Some(codings), None) if !said.chunked_last => {
            let _ = codings;
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                "Transfer-Encoding that does not end in chunked",
            ));
        }
        (Some(codings), None) if !codings.chunked_alone() => {
            return Err(refuse(
                StatusCode::NOT_IMPLEMENTED,
                "Transfer-Encoding other than chunked alone is not supported",
            ))
        }
        (Some(_), None) => BodyLength::Chunked,
        (None, length) => BodyLength::Known(length.unwrap_or(0)),
    };
    let http_11 = version == Version::HTTP_11;
    Ok(Some(Head {
        keep_alive: if http_11 {
            !said.close
        } else {
            said.keep_alive && !said.close
        },
        expects_continue: http_11 && said.expects_continue,
        asks_upgrade: http_11 && said.upgrade && fields.contains("upgrade"),
        te_trailers: said.te_trailers,
        request: Box::write(
            Box::new_uninit(),
            RequestHead {
                method,
                uri,
                version,
                fields: Fields::Raw(fields),
                extensions: Extensions::new(),
            },
        ),
        body,
    }))
}

/// The refusal of a head over [`MAX_HEAD`] bytes: 414 when its request
/// line alone is (RFC 9112 3), else 431.
fn too_large(buf: &[u8]) -> Refusal {
    if buf.iter().take(MAX_HEAD).any(|&b| b == b'\n') {
        refuse(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "request head over 64 KiB",
        )
    } else {
        refuse(StatusCode::URI_TOO_LONG, "request line over 64 KiB")
    }
}

/// What a request line httparse refused for its version names.
enum LineVersion {
    /// HTTP/1.x past 1.1: the offset of its minor digit in the buffer.
    LaterMinor(usize),
    /// Another major version (`HTTP/2.0` on this connection, `HTTP/0.9`).
    Unsupported,
    /// No version at all where it should be: not a request line.
    Malformed,
}

/// The version of the request line in `buf` (after any empty lines),
/// when it has the three parts of one (RFC 9112 3: method, target and
/// version, one space apart).
fn version_of(buf: &[u8]) -> LineVersion {
    let start = buf
        .iter()
        .position(|&b| b != b'\r' && b != b'\n')
        .unwrap_or(buf.len());
    let rest = &buf[start..];
    let line = rest.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let parts: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
    let [method, target, version] = parts[..] else {
        return LineVersion::Malformed;
    };
    if method.is_empty() || target.is_empty() {
        return LineVersion::Malformed;
    }
    match *version {
        [b'H', b'T', b'T', b'P', b'/', b'1', b'.', minor] if minor.is_ascii_digit() => {
            // 1.0 and 1.1 are httparse's: what failed is elsewhere.
            if minor <= b'1' {
                return LineVersion::Malformed;
            }
            LineVersion::LaterMinor(start + line.len() - 1)
        }
        [b'H', b'T', b'T', b'P', b'/', major, b'.', minor]
            if major.is_ascii_digit() && minor.is_ascii_digit() =>
        {
            LineVersion::Unsupported
        }
        _ => LineVersion::Malformed,
    }
}

/// A target's form must fit its method (RFC 9112 3.2): the authority form
/// is CONNECT's alone (CONNECT is then refused as a tunnel), and `*` is
/// OPTIONS' alone. A host in the target names where the request is routed,
/// so an authority form on GET would route by it unchecked.
fn check_form(method: &Method, uri: &Uri) -> Result<(), Refusal> {
    let authority_form = uri.scheme().is_none() && uri.authority().is_some();
    let asterisk = uri.path() == "*" && uri.authority().is_none();
    if authority_form != (*method == Method::CONNECT) {
        return Err(refuse(
            StatusCode::BAD_REQUEST,
            "a request target in authority form is for CONNECT alone",
        ));
    }
    if asterisk && *method != Method::OPTIONS {
        return Err(refuse(
            StatusCode::BAD_REQUEST,
            "the request target * is for OPTIONS alone",
        ));
    }
    Ok(())
}

/// What a head's fields say of the body and the connection.
#[derive(Debug, Default)]
struct Said {
    codings: Option<TransferCodings>,
    /// The last coding named is `chunked`.
    chunked_last: bool,
    length: Option<u64>,
    close: bool,
    keep_alive: bool,
    upgrade: bool,
    expects_continue: bool,
    te_trailers: bool,
}

impl Said {
    fn of(fields: &RawFields) -> Result<Said, Refusal> {
        let mut said = Said::default();
        let mut length_fields = 0usize;
        let mut refused = None;
        fields.for_each_field(|name, value| {
            if is_named(name, b"transfer-encoding") {
                said.codings.get_or_insert_default().add(value);
                if let Some(last) = elements(value).last() {
                    said.chunked_last = last.eq_ignore_ascii_case(b"chunked");
                }
            } else if is_named(name, b"content-length") {
                length_fields += 1;
                for token in elements(value) {
                    let n = Some(token)
                        .filter(|t| t.len() <= 19 && t.iter().all(u8::is_ascii_digit))
                        .and_then(|t| std::str::from_utf8(t).ok()?.parse::<u64>().ok());
                    let Some(n) = n else {
                        refused.get_or_insert("invalid Content-Length");
                        continue;
                    };
                    match said.length {
                        Some(l) if l != n => {
                            refused.get_or_insert("two different Content-Length values");
                        }
                        _ => said.length = Some(n),
                    }
                }
            } else if is_named(name, b"connection") {
                for token in elements(value) {
                    said.close |= token.eq_ignore_ascii_case(b"close");
                    said.keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
                    said.upgrade |= token.eq_ignore_ascii_case(b"upgrade");
                }
            } else if is_named(name, b"te") {
                said.te_trailers |= elements(value).any(|t| t.eq_ignore_ascii_case(b"trailers"));
            } else if is_named(name, b"expect") {
                said.expects_continue |= value.eq_ignore_ascii_case(b"100-continue");
            }
        });
        if let Some(why) = refused {
            return Err(refuse(StatusCode::BAD_REQUEST, why));
        }
        if length_fields > 0 && said.length.is_none() {
            return Err(refuse(StatusCode::BAD_REQUEST, "invalid Content-Length"));
        }
        Ok(said)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `text` parsed off a buffer of its own: what `parse` said, and what
    /// it left in the buffer.
    fn parse_text(text: &[u8]) -> (Result<Option<Head>, Refusal>, BytesMut) {
        let mut buf = BytesMut::from(text);
        let got = parse(&mut buf);
        (got, buf)
    }

    /// The fields of `head` as a map.
    fn map(head: &Head) -> http::HeaderMap {
        head.request.fields.clone().into_map().unwrap()
    }

    /// The head of `text`, which must be a whole request head that is read.
    fn read(text: &str) -> Head {
        match parse_text(text.as_bytes()).0 {
            Ok(Some(head)) => head,
            other => panic!("{text:?}: {other:?}"),
        }
    }

    /// A whole head read (`Ok`) or refused with a status (`Err`).
    fn status_of(text: &[u8]) -> Result<(), u16> {
        match parse_text(text).0 {
            Ok(Some(_)) => Ok(()),
            Ok(None) => panic!("{:?}: still partial", String::from_utf8_lossy(text)),
            Err(refusal) => Err(refusal.status.as_u16()),
        }
    }

    /// How the body of a request of `version` with `fields` (each ended
    /// by CRLF) is framed, or the status it is refused with.
    fn body_of(version: &str, fields: &str) -> Result<BodyLength, u16> {
        let text = format!("POST /upload {version}\r\nhost: a.example\r\n{fields}\r\n");
        match parse_text(text.as_bytes()).0 {
            Ok(Some(head)) => Ok(head.body),
            Ok(None) => panic!("{text:?}: still partial"),
            Err(refusal) => Err(refusal.status.as_u16()),
        }
    }

    /// A request head of exactly `len` bytes, its last field padded, with
    /// the empty line that ends it or (`whole` false) without.
    fn padded_head(len: usize, whole: bool) -> BytesMut {
        let end = if whole { b"\r\n\r\n".len() } else { 0 };
        let mut head = b"GET / HTTP/1.1\r\nhost: a.example\r\nx-pad: ".to_vec();
        head.resize(len - end, b'a');
        if whole {
            head.extend_from_slice(b"\r\n\r\n");
        }
        BytesMut::from(&head[..])
    }

    /// RFC 9112 2.2: a head is read once whole. Every proper prefix of a
    /// head is left as it was, to be parsed again with more bytes.
    #[test]
    fn a_partial_head_is_left_in_the_buffer_as_it_was() {
        let whole = b"POST /a?b=c HTTP/1.1\r\nhost: a.example\r\ncontent-length: 3\r\n\r\n";
        for end in 0..whole.len() {
            let prefix = &whole[..end];
            let (got, left) = parse_text(prefix);
            assert!(
                matches!(got, Ok(None)),
                "{:?}: {got:?}",
                String::from_utf8_lossy(prefix)
            );
            assert_eq!(&left[..], prefix, "{:?}", String::from_utf8_lossy(prefix));
        }
    }

    /// RFC 9112 6: the body (or the next request, pipelined) starts right
    /// after the empty line that ends the head; only the head is taken.
    #[test]
    fn a_whole_head_is_taken_off_and_what_follows_stays() {
        let head = "GET /a HTTP/1.1\r\nhost: a.example\r\n\r\n";
        for rest in [
            "",
            "hello",
            "GET /b HTTP/1.1\r\n",
            "GET /b HTTP/1.1\r\nhost: a.example\r\n\r\n",
            "\r\n",
        ] {
            let (got, left) = parse_text(format!("{head}{rest}").as_bytes());
            let got = got.unwrap_or_else(|e| panic!("{rest:?}: {e:?}"));
            assert_eq!(
                got.map(|h| h.request.uri),
                Some(Uri::from_static("/a")),
                "{rest:?}"
            );
            assert_eq!(&left[..], rest.as_bytes(), "{rest:?}");
        }
        // Lines ended by a bare LF (RFC 9112 2.2: a recipient MAY take
        // them) still end the head at its empty line.
        let (got, left) = parse_text(b"GET /a HTTP/1.1\nhost: a.example\n\nnext");
        assert!(matches!(got, Ok(Some(_))), "{got:?}");
        assert_eq!(&left[..], b"next");
    }

    /// RFC 9112 2.2: a server SHOULD ignore at least one empty line (CRLF)
    /// received before the request line.
    #[test]
    fn an_empty_line_before_the_request_line_is_ignored() {
        let (got, left) = parse_text(b"\r\nGET /a HTTP/1.1\r\nhost: a.example\r\n\r\nnext");
        let head = got.unwrap().expect("whole");
        assert_eq!(head.request.method, Method::GET);
        assert_eq!(head.request.uri, "/a");
        assert_eq!(head.request.version, Version::HTTP_11);
        assert_eq!(&left[..], b"next");
    }

    /// Every byte httparse lets into a field's name or value, the `http`
    /// crate takes there too: a head's fields are not checked again
    /// (`parse` keeps them raw), and a map made of them later (for an
    /// HTTP/2 backend) cannot fail.
    #[test]
    fn every_byte_a_parse_lets_into_a_field_is_one_the_http_crate_takes() {
        for byte in 0..=u8::MAX {
            let mut name = b"x-a".to_vec();
            name.insert(1, byte);
            let mut value = b"ab".to_vec();
            value.insert(1, byte);
            for (name, value) in [(&name[..], &b"v"[..]), (b"x-a", &value[..])] {
                let mut text = b"GET / HTTP/1.1\r\nhost: a\r\n".to_vec();
                text.extend_from_slice(name);
                text.extend_from_slice(b": ");
                text.extend_from_slice(value);
                text.extend_from_slice(b"\r\n\r\n");
                if let (Ok(Some(head)), _) = parse_text(&text) {
                    let map = head.request.fields.into_map();
                    assert!(map.is_ok(), "byte {byte:#04x}: {map:?}");
                }
            }
        }
    }

    /// RFC 9112 3: the method, target and version of the request line;
    /// RFC 9112 2.3: `HTTP/1.0` and `HTTP/1.1`.
    #[test]
    fn the_request_line_reaches_the_parts() {
        for (line, method, target, version) in [
            ("GET / HTTP/1.1", Method::GET, "/", Version::HTTP_11),
            ("GET / HTTP/1.0", Method::GET, "/", Version::HTTP_10),
            (
                "POST /a/b?c=d HTTP/1.1",
                Method::POST,
                "/a/b?c=d",
                Version::HTTP_11,
            ),
            ("DELETE /x HTTP/1.0", Method::DELETE, "/x", Version::HTTP_10),
            ("HEAD /x HTTP/1.1", Method::HEAD, "/x", Version::HTTP_11),
            // RFC 9110 9.1: methods are extensible, and case-sensitive:
            // `get` is not GET.
            (
                "PURGE /x HTTP/1.1",
                Method::from_bytes(b"PURGE").unwrap(),
                "/x",
                Version::HTTP_11,
            ),
            (
                "get /x HTTP/1.1",
                Method::from_bytes(b"get").unwrap(),
                "/x",
                Version::HTTP_11,
            ),
        ] {
            let head = read(&format!("{line}\r\nhost: a.example\r\n\r\n"));
            assert_eq!(head.request.method, method, "{line:?}");
            assert_eq!(head.request.uri, target, "{line:?}");
            assert_eq!(head.request.version, version, "{line:?}");
        }
        assert_ne!(
            read("get / HTTP/1.1\r\nhost: a\r\n\r\n").request.method,
            Method::GET
        );
    }

    /// RFC 9110 5.1: field names are case-insensitive (kept lowercase);
    /// RFC 9110 5.3: fields of one name keep their order; RFC 9110 5.5:
    /// the whitespace around a value is not part of it. The values share
    /// the buffer the head was read from.
    #[test]
    fn header_fields_reach_the_parts_with_names_lowered_and_values_shared() {
        let text = b"GET / HTTP/1.1\r\nHost: a.example\r\nX-Two: 1\r\nAccept:  text/plain \r\nx-two: 2\r\nX-EMPTY:\r\n\r\n";
        let mut buf = BytesMut::from(&text[..]);
        let start = buf.as_ptr() as usize;
        let range = start..start + buf.len();
        let head = parse(&mut buf).unwrap().expect("whole");
        let headers = &map(&head);
        let names: Vec<&str> = headers.keys().map(http::HeaderName::as_str).collect();
        assert_eq!(names, ["host", "x-two", "accept", "x-empty"]);
        assert_eq!(headers["host"], "a.example");
        assert_eq!(headers["accept"], "text/plain");
        assert_eq!(headers["x-empty"], "");
        let twos: Vec<_> = headers.get_all("x-two").iter().collect();
        assert_eq!(twos, ["1", "2"]);
        assert_eq!(headers.len(), 5);
        for (name, value) in headers {
            if value.is_empty() {
                continue;
            }
            let at = value.as_bytes().as_ptr() as usize;
            assert!(range.contains(&at), "{name}: the value was copied");
        }
    }

    /// RFC 9112 6.3 (6: no length, no coding: a request's body is empty;
    /// 5: an invalid Content-Length is a 400) and RFC 9110 8.6
    /// (Content-Length = 1*DIGIT; the same value repeated MAY be taken as
    /// that value; a recipient must not be fooled by an overflow).
    #[test]
    fn content_length_follows_rfc_9112_6_3() {
        let cases: &[(&str, Result<BodyLength, u16>)] = &[
            ("", Ok(BodyLength::Known(0))),
            ("content-length: 5\r\n", Ok(BodyLength::Known(5))),
            ("Content-Length: 5\r\n", Ok(BodyLength::Known(5))),
            ("content-length: 0\r\n", Ok(BodyLength::Known(0))),
            ("content-length: 05\r\n", Ok(BodyLength::Known(5))),
            ("content-length:   5  \r\n", Ok(BodyLength::Known(5))),
            (
                "content-length: 9999999999999999999\r\n",
                Ok(BodyLength::Known(9_999_999_999_999_999_999)),
            ),
            ("content-length: 5, 5\r\n", Ok(BodyLength::Known(5))),
            (
                "content-length: 5\r\ncontent-length: 5\r\n",
                Ok(BodyLength::Known(5)),
            ),
            ("content-length: 5, 6\r\n", Err(400)),
            ("content-length: 5\r\ncontent-length: 6\r\n", Err(400)),
            ("content-length: 5\r\ncontent-length: 5, 6\r\n", Err(400)),
            ("content-length: +5\r\n", Err(400)),
            ("content-length: -1\r\n", Err(400)),
            ("content-length: 0x5\r\n", Err(400)),
            ("content-length: 5.0\r\n", Err(400)),
            ("content-length: 5 5\r\n", Err(400)),
            ("content-length: five\r\n", Err(400)),
            ("content-length: \r\n", Err(400)),
            ("content-length: ,\r\n", Err(400)),
            ("content-length: 18446744073709551616\r\n", Err(400)),
            (
                "content-length: 123456789012345678901234567890\r\n",
                Err(400),
            ),
        ];
        for (fields, want) in cases {
            assert_eq!(body_of("HTTP/1.1", fields), *want, "{fields:?}");
        }
    }

    /// RFC 9112 6.1 and 6.3: `chunked` (case-insensitive) frames the body;
    /// with a Content-Length the framing is said two ways (400, as a
    /// smuggling vector); a coding on HTTP/1.0 is faulty framing (400); a
    /// coding list that does not end in chunked is a 400; a coding the
    /// server does not implement (the gateway passes chunked alone) is a
    /// 501.
    #[test]
    fn transfer_encoding_follows_rfc_9112_6_1_and_6_3() {
        let cases: &[(&str, &str, Result<BodyLength, u16>)] = &[
            (
                "HTTP/1.1",
                "transfer-encoding: chunked\r\n",
                Ok(BodyLength::Chunked),
            ),
            (
                "HTTP/1.1",
                "Transfer-Encoding: Chunked\r\n",
                Ok(BodyLength::Chunked),
            ),
            (
                "HTTP/1.1",
                "transfer-encoding: CHUNKED\r\n",
                Ok(BodyLength::Chunked),
            ),
            (
                "HTTP/1.1",
                "transfer-encoding: chunked\r\ncontent-length: 5\r\n",
                Err(400),
            ),
            (
                "HTTP/1.1",
                "content-length: 5\r\ntransfer-encoding: chunked\r\n",
                Err(400),
            ),
            (
                "HTTP/1.1",
                "content-length: 0\r\ntransfer-encoding: chunked\r\n",
                Err(400),
            ),
            ("HTTP/1.0", "transfer-encoding: chunked\r\n", Err(400)),
            (
                "HTTP/1.0",
                "transfer-encoding: chunked\r\ncontent-length: 5\r\n",
                Err(400),
            ),
            ("HTTP/1.1", "transfer-encoding: gzip\r\n", Err(400)),
            ("HTTP/1.1", "transfer-encoding: identity\r\n", Err(400)),
            ("HTTP/1.1", "transfer-encoding: chunked, gzip\r\n", Err(400)),
            (
                "HTTP/1.1",
                "transfer-encoding: chunked\r\ntransfer-encoding: gzip\r\n",
                Err(400),
            ),
            ("HTTP/1.1", "transfer-encoding: gzip, chunked\r\n", Err(501)),
            (
                "HTTP/1.1",
                "transfer-encoding: gzip\r\ntransfer-encoding: chunked\r\n",
                Err(501),
            ),
        ];
        for (version, fields, want) in cases {
            assert_eq!(body_of(version, fields), *want, "{version} {fields:?}");
        }
        // RFC 9112 7: chunked MUST NOT be applied twice; refused either
        // way.
        for fields in [
            "transfer-encoding: chunked, chunked\r\n",
            "transfer-encoding: chunked\r\ntransfer-encoding: chunked\r\n",
        ] {
            assert!(body_of("HTTP/1.1", fields).is_err(), "{fields:?}");
        }
    }

    /// A request may have [`MAX_HEADERS`] (100) fields; one more is a 431
    /// (RFC 6585 5).
    #[test]
    fn a_request_may_have_max_headers_fields_and_no_more() {
        for (count, want) in [(MAX_HEADERS, Ok(())), (MAX_HEADERS + 1, Err(431))] {
            let fields: String = (1..count).map(|i| format!("x-f{i}: {i}\r\n")).collect();
            let text = format!("GET / HTTP/1.1\r\nhost: a.example\r\n{fields}\r\n");
            assert_eq!(status_of(text.as_bytes()), want, "{count} fields");
            if want.is_ok() {
                assert_eq!(map(&read(&text)).len(), count);
            }
        }
    }

    /// A head of exactly [`MAX_HEAD`] bytes is read, whole or still
    /// coming; one byte more is a 431 (RFC 6585 5), whole or not.
    #[test]
    fn a_head_may_take_max_head_bytes_and_no_more() {
        assert_eq!(MAX_HEAD, 64 * 1024);
        let mut buf = padded_head(MAX_HEAD, true);
        assert_eq!(buf.len(), MAX_HEAD);
        assert!(matches!(parse(&mut buf), Ok(Some(_))));
        assert!(buf.is_empty());

        let mut buf = padded_head(MAX_HEAD, false);
        let before = buf.clone();
        assert!(matches!(parse(&mut buf), Ok(None)));
        assert_eq!(buf, before);

        for whole in [true, false] {
            let mut buf = padded_head(MAX_HEAD + 1, whole);
            assert_eq!(buf.len(), MAX_HEAD + 1);
            assert_eq!(
                parse(&mut buf).map(|_| ()).map_err(|r| r.status),
                Err(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE),
                "whole: {whole}"
            );
        }
    }

    /// The limit is on the head: a body read with it does not count.
    #[test]
    fn a_body_read_with_a_head_does_not_count_against_its_limit() {
        let head = b"POST / HTTP/1.1\r\nhost: a.example\r\ncontent-length: 131072\r\n\r\n";
        let mut text = head.to_vec();
        text.resize(head.len() + 2 * MAX_HEAD, b'b');
        let (got, left) = parse_text(&text);
        assert_eq!(
            got.unwrap().expect("whole").body,
            BodyLength::Known(2 * MAX_HEAD as u64)
        );
        assert_eq!(left.len(), 2 * MAX_HEAD);
    }

    /// RFC 9112 2.3: HTTP-version is `HTTP/` DIGIT `.` DIGIT, the name
    /// case-sensitive. RFC 9110 15.6.6: 505 for a version the server does
    /// not support. A line that is not HTTP at all is an invalid request
    /// line: 400 (RFC 9112 3).
    ///
    /// `HTTP/1.2`: RFC 9110 2.5, a server SHOULD process a higher minor
    /// version as the highest it implements (1.1), as nginx does.
    #[test]
    fn other_major_versions_are_505_and_lines_that_are_not_http_400() {
        for (text, want) in [
            (&b"GET / HTTP/2.0\r\nhost: a\r\n\r\n"[..], Err(505)),
            (b"GET / HTTP/3.0\r\nhost: a\r\n\r\n", Err(505)),
            (b"GET / HTTP/0.9\r\nhost: a\r\n\r\n", Err(505)),
            (b"GET / HTTP/1.2\r\nhost: a\r\n\r\n", Ok(())),
            (b"\r\nGET / HTTP/1.9\r\nhost: a\r\n\r\n", Ok(())),
            (b"GET / HTTP/1.1\r\nhost: a\r\n\r\n", Ok(())),
            (b"GET / FOO/1.1\r\nhost: a\r\n\r\n", Err(400)),
            (b"GET / http/1.1\r\nhost: a\r\n\r\n", Err(400)),
            (b"GET / HTTP/1.10\r\nhost: a\r\n\r\n", Err(400)),
            // Not a digit where one must be: no version at all, so not a
            // later minor one read as 1.1, nor another major one.
            (b"GET / HTTP/1.a\r\nhost: a\r\n\r\n", Err(400)),
            (b"GET / HTTP/1.:\r\nhost: a\r\n\r\n", Err(400)),
            (b"GET / HTTP/a.1\r\nhost: a\r\n\r\n", Err(400)),
            (b"GET / HTTP/2.x\r\nhost: a\r\n\r\n", Err(400)),
            (b"GET / HTTP/1\r\nhost: a\r\n\r\n", Err(400)),
            (b"GET / HTTP/11\r\nhost: a\r\n\r\n", Err(400)),
            (b"GET /\r\n\r\n", Err(400)),
            (b"GET  / HTTP/1.1\r\nhost: a\r\n\r\n", Err(400)),
            (b" GET / HTTP/1.1\r\nhost: a\r\n\r\n", Err(400)),
            // A TLS ClientHello's first bytes, and other binary.
            (
                b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",
                Err(400),
            ),
            (b"\0\0\0\0\0\0\0\0\r\n\r\n", Err(400)),
            (b"\xff\xfe\xfd GET / HTTP/1.1\r\n\r\n", Err(400)),
            (b"G\x00T / HTTP/1.1\r\nhost: a\r\n\r\n", Err(400)),
        ] {
            assert_eq!(status_of(text), want, "{:?}", String::from_utf8_lossy(text));
        }
    }

    /// A head of [`MAX_HEAD`] bytes that is all request line but for its
    /// end has its target read whole; one byte more makes a head too
    /// large (431: its request line still fits), never a malformed target.
    #[test]
    fn the_longest_target_a_head_can_hold_is_read() {
        let around = b"GET  HTTP/1.1\r\n\r\n".len();
        for (bare_lf, around) in [(false, around), (true, around - 2)] {
            let end = if bare_lf { "\n\n" } else { "\r\n\r\n" };
            let target = format!("/{}", "a".repeat(MAX_HEAD - around - 1));
            let head = read(&format!("GET {target} HTTP/1.1{end}"));
            assert_eq!(head.request.uri, target.as_str());
            let longer = format!("GET {target}a HTTP/1.1{end}");
            assert_eq!(status_of(longer.as_bytes()), Err(431), "bare LF {bare_lf}");
        }
        // RFC 9112 3: a request line longer than the server reads is 414,
        // whole or not yet ended.
        let line = format!("GET /{}", "a".repeat(MAX_HEAD));
        for end in ["", " HTTP/1.1\r\n\r\n"] {
            let mut buf = BytesMut::from(format!("{line}{end}").as_bytes());
            assert_eq!(
                parse(&mut buf).map(|_| ()).map_err(|r| r.status),
                Err(StatusCode::URI_TOO_LONG),
                "{end:?}"
            );
        }
    }

    /// A later minor version is read as HTTP/1.1, the head taken whole.
    #[test]
    fn a_later_minor_version_is_read_as_http_1_1() {
        let mut buf = BytesMut::from(&b"GET /x HTTP/1.7\r\nhost: a\r\n\r\nnext"[..]);
        let head = parse(&mut buf).unwrap().unwrap();
        assert_eq!(head.request.version, Version::HTTP_11);
        assert_eq!(head.request.uri, "/x");
        assert!(head.keep_alive);
        assert_eq!(&buf[..], b"next");
    }

    /// RFC 9112 3.2: no whitespace is allowed in the request target, and
    /// RFC 9112 3: an invalid request line is answered 400 (or 301). The
    /// version of these lines is HTTP/1.1, which the gateway supports: a
    /// 505 would tell the client to change a version that is fine.
    #[test]
    fn whitespace_in_a_target_is_a_malformed_line_not_an_unsupported_version() {
        let wrong: Vec<(String, Result<(), u16>)> = [
            &b"GET /a b HTTP/1.1\r\nhost: a\r\n\r\n"[..],
            b"GET /a HTTP/1.1 HTTP/1.1\r\nhost: a\r\n\r\n",
            b"GET /a\tb HTTP/1.1\r\nhost: a\r\n\r\n",
        ]
        .into_iter()
        .map(|text| (String::from_utf8_lossy(text).into_owned(), status_of(text)))
        .filter(|(_, got)| *got != Err(400))
        .collect();
        assert!(wrong.is_empty(), "not refused 400: {wrong:?}");
    }

    /// Field lines a server MUST refuse with 400: whitespace between a
    /// name and its colon (RFC 9112 5.1), obs-fold (RFC 9112 5.2: reject
    /// or replace; the gateway rejects), a NUL, a bare CR or another
    /// control byte in a value (RFC 9110 5.5: it MUST reject or replace;
    /// the gateway rejects), a name that is no token (RFC 9110 5.1).
    #[test]
    fn field_lines_a_server_must_not_take_are_400() {
        for fields in [
            &b"x-a : 1\r\n"[..],
            b"x-a\t: 1\r\n",
            b"content-length : 5\r\n",
            b"x-a: 1\r\n folded\r\n",
            b"x-a: 1\r\n\tfolded\r\n",
            b"x-a: a\0b\r\n",
            b"x-a: a\rb\r\n",
            b"x-a: a\x01b\r\n",
            b"x-a: a\x7fb\r\n",
            b"x-\0a: 1\r\n",
            b"x a: 1\r\n",
            b": 1\r\n",
            b"x-a\r\n",
        ] {
            let mut text = b"GET / HTTP/1.1\r\nhost: a.example\r\n".to_vec();
            text.extend_from_slice(fields);
            text.extend_from_slice(b"\r\n");
            assert_eq!(
                status_of(&text),
                Err(400),
                "{:?}",
                String::from_utf8_lossy(fields)
            );
        }
        // RFC 9112 2.2: whitespace between the request line and the first
        // field: reject, or consume the line without taking its field.
        let (got, _) = parse_text(b"GET / HTTP/1.1\r\n x-a: 1\r\nhost: a\r\n\r\n");
        match got {
            Err(refusal) => assert_eq!(refusal.status, StatusCode::BAD_REQUEST),
            Ok(Some(head)) => assert!(!map(&head).contains_key("x-a")),
            Ok(None) => panic!("whole head read as partial"),
        }
        // RFC 9110 5.5: obs-text (0x80 and over) and a tab may be in a
        // value.
        let head = read("GET / HTTP/1.1\r\nhost: a\r\nx-a: a\tb\r\n\r\n");
        assert_eq!(map(&head)["x-a"], "a\tb");
        let (got, _) = parse_text(b"GET / HTTP/1.1\r\nhost: a\r\nx-a: caf\xe9\r\n\r\n");
        assert_eq!(map(&got.unwrap().unwrap())["x-a"].as_bytes(), b"caf\xe9");
    }

    /// RFC 9112 3.2: origin form (`/…`) and absolute form for any method;
    /// authority form for CONNECT alone (RFC 9110 9.3.6: CONNECT's target
    /// is host and port only); `*` for OPTIONS alone (RFC 9112 3.2.4).
    /// RFC 9112 3.2: a target of the wrong form is an invalid request:
    /// 400.
    #[test]
    fn a_target_form_must_fit_its_method() {
        for (line, want) in [
            ("GET /x?y=1 HTTP/1.1", Ok(())),
            ("GET example.com:80 HTTP/1.1", Err(400)),
            ("GET example.com HTTP/1.1", Err(400)),
            ("POST example.com:80 HTTP/1.1", Err(400)),
            ("OPTIONS example.com:80 HTTP/1.1", Err(400)),
            ("CONNECT example.com:443 HTTP/1.1", Ok(())),
            ("CONNECT / HTTP/1.1", Err(400)),
            ("CONNECT http://example.com:443/ HTTP/1.1", Err(400)),
            ("CONNECT * HTTP/1.1", Err(400)),
            ("OPTIONS * HTTP/1.1", Ok(())),
            ("GET * HTTP/1.1", Err(400)),
            ("POST * HTTP/1.1", Err(400)),
            ("GET http://a.example/x HTTP/1.1", Ok(())),
            ("OPTIONS http://a.example HTTP/1.1", Ok(())),
        ] {
            let text = format!("{line}\r\nhost: a.example\r\n\r\n");
            assert_eq!(status_of(text.as_bytes()), want, "{line:?}");
        }
        let head = read("CONNECT example.com:443 HTTP/1.1\r\nhost: example.com:443\r\n\r\n");
        assert_eq!(head.request.method, Method::CONNECT);
        assert_eq!(
            head.request.uri.authority().map(|a| a.as_str()),
            Some("example.com:443")
        );
        let head = read("OPTIONS * HTTP/1.1\r\nhost: a.example\r\n\r\n");
        assert_eq!(head.request.uri.path(), "*");
        // RFC 9112 3.2.2: the absolute form's authority is the target's
        // host.
        let head = read("GET http://a.example:8080/x?y HTTP/1.1\r\nhost: b.example\r\n\r\n");
        assert_eq!(head.request.uri.scheme_str(), Some("http"));
        assert_eq!(
            head.request.uri.authority().map(|a| a.as_str()),
            Some("a.example:8080")
        );
        assert_eq!(head.request.uri.path(), "/x");
        assert_eq!(head.request.uri.query(), Some("y"));
    }

    /// RFC 9112 9.3: HTTP/1.1 persists unless `close` is a connection
    /// option; HTTP/1.0 persists only with `keep-alive` (and no `close`).
    /// RFC 9110 7.6.1: options are case-insensitive tokens of a list.
    #[test]
    fn keep_alive_follows_rfc_9112_9_3() {
        for (version, fields, want) in [
            ("HTTP/1.1", "", true),
            ("HTTP/1.1", "connection: close\r\n", false),
            ("HTTP/1.1", "connection: CLOSE\r\n", false),
            ("HTTP/1.1", "Connection: Close\r\n", false),
            ("HTTP/1.1", "connection: keep-alive, close\r\n", false),
            (
                "HTTP/1.1",
                "connection: keep-alive\r\nconnection: close\r\n",
                false,
            ),
            ("HTTP/1.1", "connection: keep-alive\r\n", true),
            ("HTTP/1.1", "connection: closed\r\n", true),
            ("HTTP/1.1", "connection: x-close\r\n", true),
            ("HTTP/1.1", "x-connection: close\r\n", true),
            ("HTTP/1.0", "", false),
            ("HTTP/1.0", "connection: keep-alive\r\n", true),
            ("HTTP/1.0", "Connection: Keep-Alive\r\n", true),
            ("HTTP/1.0", "connection: x-a, keep-alive\r\n", true),
            ("HTTP/1.0", "connection: keep-alive, close\r\n", false),
            ("HTTP/1.0", "connection: close\r\n", false),
            ("HTTP/1.0", "connection: keep-alived\r\n", false),
        ] {
            let head = read(&format!("GET / {version}\r\nhost: a\r\n{fields}\r\n"));
            assert_eq!(head.keep_alive, want, "{version} {fields:?}");
        }
    }

    /// RFC 9110 10.1.1: `100-continue` is case-insensitive; a server MUST
    /// ignore it in an HTTP/1.0 request.
    #[test]
    fn expects_continue_follows_rfc_9110_10_1_1() {
        for (version, fields, want) in [
            ("HTTP/1.1", "expect: 100-continue\r\n", true),
            ("HTTP/1.1", "Expect: 100-Continue\r\n", true),
            ("HTTP/1.1", "EXPECT: 100-CONTINUE\r\n", true),
            ("HTTP/1.1", "", false),
            ("HTTP/1.1", "expect: 200-ok\r\n", false),
            ("HTTP/1.1", "x-expect: 100-continue\r\n", false),
            ("HTTP/1.0", "expect: 100-continue\r\n", false),
        ] {
            let head = read(&format!(
                "POST / {version}\r\nhost: a\r\ncontent-length: 1\r\n{fields}\r\n"
            ));
            assert_eq!(head.expects_continue, want, "{version} {fields:?}");
        }
    }

    /// RFC 9110 7.8: an upgrade is asked by an `Upgrade` field with an
    /// `upgrade` connection option (a case-insensitive token of a list,
    /// RFC 9110 7.6.1); a server MUST ignore Upgrade in an HTTP/1.0
    /// request.
    #[test]
    fn asks_upgrade_follows_rfc_9110_7_8() {
        for (version, fields, want) in [
            (
                "HTTP/1.1",
                "connection: upgrade\r\nupgrade: websocket\r\n",
                true,
            ),
            (
                "HTTP/1.1",
                "Connection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n",
                true,
            ),
            ("HTTP/1.1", "connection: UPGRADE\r\nupgrade: h2c\r\n", true),
            (
                "HTTP/1.1",
                "connection: keep-alive\r\nconnection: upgrade\r\nupgrade: websocket\r\n",
                true,
            ),
            ("HTTP/1.1", "connection: upgrade\r\n", false),
            ("HTTP/1.1", "upgrade: websocket\r\n", false),
            (
                "HTTP/1.1",
                "connection: keep-alive\r\nupgrade: websocket\r\n",
                false,
            ),
            (
                "HTTP/1.1",
                "connection: upgraded\r\nupgrade: websocket\r\n",
                false,
            ),
            ("HTTP/1.1", "", false),
            (
                "HTTP/1.0",
                "connection: upgrade\r\nupgrade: websocket\r\n",
                false,
            ),
        ] {
            let head = read(&format!("GET /ws {version}\r\nhost: a\r\n{fields}\r\n"));
            assert_eq!(head.asks_upgrade, want, "{version} {fields:?}");
        }
    }

    /// RFC 9110 10.1.4: `trailers` in TE (a list, its keyword
    /// case-insensitive) says the client takes trailer fields.
    #[test]
    fn te_trailers_follows_rfc_9110_10_1_4() {
        for (fields, want) in [
            ("te: trailers\r\n", true),
            ("TE: Trailers\r\n", true),
            ("te: trailers, deflate\r\n", true),
            ("te: deflate;q=0.5, trailers\r\n", true),
            ("te: deflate\r\nte: trailers\r\n", true),
            ("te: deflate\r\n", false),
            ("te: trailersx\r\n", false),
            ("x-te: trailers\r\n", false),
            ("", false),
        ] {
            let head = read(&format!("GET / HTTP/1.1\r\nhost: a\r\n{fields}\r\n"));
            assert_eq!(head.te_trailers, want, "{fields:?}");
        }
    }
}
