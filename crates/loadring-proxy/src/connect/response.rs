//! A backend's response head read off the connection's buffer, and what
//! it says of the body's framing (RFC 9112 6.3) and of the connection's
//! reuse (RFC 9112 9.3).

use std::mem::MaybeUninit;

use bytes::BytesMut;
use http::{StatusCode, Version};

use super::decode::Framing;
use super::error::UpstreamError;
use super::fields::Spans;
pub(crate) use super::fields::{MAX_HEAD, MAX_HEADERS};
use super::known_names::is_named;
use super::raw_fields::RawFields;
use super::raw_head::RawHead;
use crate::field_list::{elements, TransferCodings};

/// A response head taken off `buf`, `None` until it is whole.
///
/// # Errors
/// The head is not HTTP/1.x, or is over [`MAX_HEAD`] bytes or
/// [`MAX_HEADERS`] fields.
pub(crate) fn parse_head(buf: &mut BytesMut) -> Result<Option<Box<RawHead>>, UpstreamError> {
    if buf.is_empty() {
        return Ok(None);
    }
    // Left uninitialised: zeroing 100 fields on every parse costs more
    // than the parse of a usual head.
    let mut headers = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut parsed = httparse::Response::new(&mut []);
    let len = match httparse::ParserConfig::default().parse_response_with_uninit_headers(
        &mut parsed,
        buf,
        &mut headers,
    ) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => {
            return Err(UpstreamError::HeadTooLarge(MAX_HEAD));
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(UpstreamError::TooManyHeaders(MAX_HEADERS));
        }
        Err(e) => return Err(UpstreamError::InvalidHead(e.to_string())),
    };
    if len > MAX_HEAD {
        return Err(UpstreamError::HeadTooLarge(MAX_HEAD));
    }
    let status = parsed
        .code
        .and_then(|c| StatusCode::from_u16(c).ok())
        .ok_or_else(|| UpstreamError::InvalidHead("status code".into()))?;
    let version = match parsed.version {
        Some(0) => Version::HTTP_10,
        _ => Version::HTTP_11,
    };
    let mut fields = Spans::new();
    fields.record(buf, parsed.headers);
    let bytes = buf.split_to(len).freeze();
    // Boxed: it travels through the exchange, the forwarding and the
    // answer, and would be copied at each step.
    Ok(Some(Box::new(RawHead {
        status,
        version,
        fields: RawFields::new(bytes, fields),
    })))
}

/// What a response head says of its body and its connection: how the
/// body ends, and whether the connection may carry another exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BodyAndReuse {
    pub(crate) framing: Framing,
    pub(crate) keep_alive: bool,
    /// `Some(n)`: `Content-Length` said `n` in another form than one field
    /// of digits alone (`2, 2`, two fields, `2,`), which RFC 9110 8.6 lets
    /// a recipient take as `n`; the answer passed on says `n` once, as a
    /// sender MUST NOT forward a value that is not 1*DIGIT (and a client
    /// may refuse a list).
    pub(crate) normalized_length: Option<u64>,
}

/// How the body of `head` (the answer to a HEAD request when `to_head`)
/// ends, and whether the connection may carry another exchange after it:
/// HTTP/1.1 unless `Connection` says `close`, HTTP/1.0 only when it says
/// `keep-alive` (RFC 9112 6.3 and 9.3). One pass over the fields: every
/// response is read this way.
///
/// Refused, on every answer (to HEAD, 204 and 304 too: their framing does
/// not depend on it, but it would be passed on, and RFC 9110 8.6 says a
/// sender MUST NOT forward it; nginx and HAProxy refuse it alike): a
/// `Content-Length` that is not 1*DIGIT or says two values. Refused on an
/// answer with a body: a `Transfer-Encoding` other than `chunked` alone,
/// and any on an HTTP/1.0 answer (RFC 9112 6.1: its framing is to be taken
/// as faulty; hyper's client refuses it too).
///
/// Not kept after it: an HTTP/1.0 answer with a `Transfer-Encoding` (RFC
/// 9112 6.1: close the connection after it), and a 204 that says a length
/// other than 0 or a coding, which no server may send (RFC 9110 8.6, RFC
/// 9112 6.1): a backend that frames its 204s wrong may send a body after
/// the head, which would be read as the next answer.
///
/// # Errors
/// Its framing cannot be trusted or kept.
pub(crate) fn body_and_reuse(to_head: bool, head: &RawHead) -> Result<BodyAndReuse, UpstreamError> {
    let mut codings: Option<TransferCodings> = None;
    let mut length: Option<u64> = None;
    let mut length_fields = 0usize;
    // One field, digits alone: passed on as it came.
    let mut plain_length = true;
    let mut length_error: Option<&'static str> = None;
    let (mut close, mut keep_alive) = (false, false);
    head.fields.for_each_field(|name, value| {
        if is_named(name, b"transfer-encoding") {
            codings.get_or_insert_default().add(value);
        } else if is_named(name, b"content-length") {
            length_fields += 1;
            plain_length &= !value.is_empty() && value.iter().all(u8::is_ascii_digit);
            if let Some(n) = plain_digits(value) {
                // The usual field: no list to split.
                match length {
                    Some(l) if l != n && length_error.is_none() => {
                        length_error = Some("two different Content-Length values");
                    }
                    _ => length = Some(n),
                }
                return;
            }
            for token in elements(value) {
                if length_error.is_some() {
                    break;
                }
                let n = std::str::from_utf8(token)
                    .ok()
                    .filter(|t| t.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|t| t.parse::<u64>().ok());
                match (n, length) {
                    (None, _) => length_error = Some("invalid Content-Length"),
                    (Some(n), Some(l)) if l != n => {
                        length_error = Some("two different Content-Length values");
                    }
                    (Some(n), _) => length = Some(n),
                }
            }
        } else if is_named(name, b"connection") {
            for token in elements(value) {
                close |= token.eq_ignore_ascii_case(b"close");
                keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
            }
        }
    });
    if let Some(why) = length_error {
        return Err(UpstreamError::Framing(why));
    }
    if length_fields > 0 && length.is_none() {
        return Err(UpstreamError::Framing("invalid Content-Length"));
    }
    let status = head.status;
    let http_10 = head.version == Version::HTTP_10;
    let keep_alive = match head.version {
        Version::HTTP_11 => !close,
        Version::HTTP_10 => keep_alive && !close && codings.is_none(),
        _ => false,
    } && !(status == StatusCode::NO_CONTENT
        && (codings.is_some() || length.is_some_and(|n| n > 0)));
    let framing = if status == StatusCode::SWITCHING_PROTOCOLS {
        Framing::Upgrade
    } else if to_head
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
    {
        Framing::Empty
    } else if let Some(codings) = codings {
        if http_10 {
            return Err(UpstreamError::Framing(
                "Transfer-Encoding in an HTTP/1.0 response",
            ));
        }
        if !codings.chunked_alone() {
            return Err(UpstreamError::Framing(
                "Transfer-Encoding other than chunked alone",
            ));
        }
        Framing::Chunked
    } else {
        length.map_or(Framing::Eof, Framing::Length)
    };
    let normalized_length = length.filter(|_| length_fields > 1 || !plain_length);
    Ok(BodyAndReuse {
        framing,
        keep_alive,
        normalized_length,
    })
}

/// A value of digits alone that fits a `u64`.
fn plain_digits(value: &[u8]) -> Option<u64> {
    if value.is_empty() || value.len() > 19 {
        // 20 digits may not fit: the general path reads them.
        return None;
    }
    value.iter().try_fold(0u64, |n, &b| {
        b.is_ascii_digit().then(|| n * 10 + u64::from(b - b'0'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::header::{CONNECTION, CONTENT_LENGTH, TRANSFER_ENCODING};

    fn head(text: &str) -> Result<Option<Box<RawHead>>, String> {
        let mut buf = BytesMut::from(text.as_bytes());
        parse_head(&mut buf).map_err(|e| e.to_string())
    }

    fn framed(to_head: bool, text: &str) -> Result<Framing, String> {
        let parts = head(text)?.ok_or("partial")?;
        body_and_reuse(to_head, &parts)
            .map(|read| read.framing)
            .map_err(|e| e.to_string())
    }

    fn keeps_alive(parts: &RawHead) -> bool {
        body_and_reuse(false, parts).unwrap().keep_alive
    }

    /// The rules written plainly, a lookup per field name: the one pass
    /// of [`body_and_reuse`] must agree with them on any head.
    fn body_and_reuse_spec(
        to_head: bool,
        head: &http::response::Parts,
    ) -> Result<BodyAndReuse, String> {
        let all = |name| {
            head.headers
                .get_all(name)
                .iter()
                .flat_map(elements)
                .collect::<Vec<_>>()
        };
        // Every Content-Length is checked first, whatever the answer.
        let mut length = None;
        for token in all(CONTENT_LENGTH) {
            let n = std::str::from_utf8(token)
                .ok()
                .filter(|t| t.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|t| t.parse::<u64>().ok())
                .ok_or("invalid Content-Length")?;
            if length.is_some_and(|l| l != n) {
                return Err("two different Content-Length values".into());
            }
            length = Some(n);
        }
        if head.headers.contains_key(CONTENT_LENGTH) && length.is_none() {
            return Err("invalid Content-Length".into());
        }
        let fields: Vec<&[u8]> = head
            .headers
            .get_all(CONTENT_LENGTH)
            .iter()
            .map(|v| v.as_bytes())
            .collect();
        let plain = matches!(fields[..], [v] if !v.is_empty() && v.iter().all(u8::is_ascii_digit));
        let normalized_length = length.filter(|_| !plain);
        let coded = head.headers.contains_key(TRANSFER_ENCODING);
        let connection = all(CONNECTION);
        let has = |token: &[u8]| connection.iter().any(|t| t.eq_ignore_ascii_case(token));
        let status = head.status;
        let keep_alive = match head.version {
            Version::HTTP_11 => !has(b"close"),
            Version::HTTP_10 => has(b"keep-alive") && !has(b"close") && !coded,
            _ => false,
        } && !(status == 204 && (coded || length.is_some_and(|n| n > 0)));
        let framing = if status == 101 {
            Framing::Upgrade
        } else if to_head || status.is_informational() || status == 204 || status == 304 {
            Framing::Empty
        } else if coded && head.version == Version::HTTP_10 {
            return Err("Transfer-Encoding in an HTTP/1.0 response".into());
        } else if coded {
            match all(TRANSFER_ENCODING)[..] {
                [t] if t.eq_ignore_ascii_case(b"chunked") => Framing::Chunked,
                _ => return Err("Transfer-Encoding other than chunked alone".into()),
            }
        } else {
            length.map_or(Framing::Eof, Framing::Length)
        };
        Ok(BodyAndReuse {
            framing,
            keep_alive,
            normalized_length,
        })
    }

    proptest::proptest! {
        // Cheap cases, and some disagreements need three rare fields.
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4096))]
        #[test]
        fn one_pass_agrees_with_the_rules(
            version in proptest::sample::select(vec!["1.0", "1.1"]),
            status in proptest::sample::select(vec![100u16, 101, 200, 204, 304, 404]),
            to_head: bool,
            fields in proptest::collection::vec(proptest::sample::select(vec![
                "transfer-encoding: chunked", "transfer-encoding: Chunked",
                "transfer-encoding: gzip", "transfer-encoding: gzip, chunked",
                "transfer-encoding: chunked, gzip", "transfer-encoding: ",
                "transfer-encoding: ,", "transfer-encoding: chunked, chunked", "content-length: 5", "content-length: 6",
                "content-length: 5, 5", "content-length: 5, 6", "content-length: -1",
                "content-length: 0", "content-length: 5,", "content-length: 05",
                "content-length: x", "content-length: ", "content-length: 99999999999999999999999",
                "content-length: 00000000000000000005", "content-length: 18446744073709551615",
                "connection: close", "connection: Keep-Alive", "connection: x, close",
                "connection: keep-alive, ", "connection: ", "x-a: chunked",
            ]), 0..6),
        ) {
            let text: String = fields.iter().map(|f| format!("{f}\r\n")).collect();
            let text = format!("HTTP/{version} {status} X\r\n{text}\r\n");
            let parts = head(&text).unwrap().unwrap();
            let got = body_and_reuse(to_head, &parts).map_err(|e| e.to_string());
            let want = body_and_reuse_spec(to_head, &parts.into_parts().unwrap())
                .map_err(|why| format!("invalid response framing: {why}"));
            proptest::prop_assert_eq!(got, want, "{}", text);
        }
    }

    /// A head of exactly [`MAX_HEAD`] bytes is read, whole or still
    /// coming; one byte more is refused.
    #[test]
    fn a_head_may_take_max_head_bytes_and_no_more() {
        use super::super::fields::padded_head;
        let parse = |len, whole| parse_head(&mut padded_head(b"HTTP/1.1 200 OK\r\n", len, whole));
        assert!(matches!(parse(MAX_HEAD, true), Ok(Some(_))));
        assert!(matches!(parse(MAX_HEAD, false), Ok(None)));
        for whole in [true, false] {
            assert!(
                matches!(
                    parse(MAX_HEAD + 1, whole),
                    Err(UpstreamError::HeadTooLarge(_))
                ),
                "whole: {whole}"
            );
        }
    }

    #[test]
    fn framing_follows_rfc_9112_6_3() {
        use Framing::*;
        let cases: &[(bool, &str, Result<Framing, &str>)] = &[
            (
                false,
                "HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n",
                Ok(Length(5)),
            ),
            (
                true,
                "HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n",
                Ok(Empty),
            ),
            (
                false,
                "HTTP/1.1 204 No Content\r\ncontent-length: 5\r\n\r\n",
                Ok(Empty),
            ),
            (false, "HTTP/1.1 304 Not Modified\r\n\r\n", Ok(Empty)),
            (
                false,
                "HTTP/1.1 101 Switching Protocols\r\n\r\n",
                Ok(Upgrade),
            ),
            (
                false,
                "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n",
                Ok(Chunked),
            ),
            (
                false,
                "HTTP/1.1 200 OK\r\ntransfer-encoding: Chunked\r\n\r\n",
                Ok(Chunked),
            ),
            (
                false,
                "HTTP/1.1 200 OK\r\ntransfer-encoding: \r\ntransfer-encoding: chunked , \r\n\r\n",
                Ok(Chunked),
            ),
            (
                false,
                "HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n",
                Err("invalid response framing: Transfer-Encoding other than chunked alone"),
            ),
            (
                false,
                "HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\ntransfer-encoding: chunked\r\n\r\n",
                Err("invalid response framing: Transfer-Encoding other than chunked alone"),
            ),
            (
                false,
                "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked, chunked\r\n\r\n",
                Err("invalid response framing: Transfer-Encoding other than chunked alone"),
            ),
            (
                true,
                "HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n",
                Ok(Empty),
            ),
            (false, "HTTP/1.1 200 OK\r\n\r\n", Ok(Eof)),
            (false, "HTTP/1.0 200 OK\r\n\r\n", Ok(Eof)),
            (
                false,
                "HTTP/1.1 200 OK\r\ncontent-length: 5\r\ncontent-length: 5\r\n\r\n",
                Ok(Length(5)),
            ),
            (
                false,
                "HTTP/1.1 200 OK\r\ncontent-length: 5, 5\r\n\r\n",
                Ok(Length(5)),
            ),
            (
                false,
                "HTTP/1.1 200 OK\r\ncontent-length: 5\r\ncontent-length: 6\r\n\r\n",
                Err("invalid response framing: two different Content-Length values"),
            ),
            (
                false,
                "HTTP/1.1 200 OK\r\ncontent-length: 5, 6, x\r\n\r\n",
                Err("invalid response framing: two different Content-Length values"),
            ),
            (
                false,
                "HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n",
                Err("invalid response framing: invalid Content-Length"),
            ),
            (
                false,
                "HTTP/1.1 200 OK\r\ncontent-length: 99999999999999999999999\r\n\r\n",
                Err("invalid response framing: invalid Content-Length"),
            ),
            (
                false,
                "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked, gzip\r\n\r\n",
                Err("invalid response framing: Transfer-Encoding other than chunked alone"),
            ),
            // Every answer's Content-Length is checked, bodiless ones' too
            // (RFC 9110 8.6: it would be passed on).
            (
                true,
                "HTTP/1.1 200 OK\r\ncontent-length: abc\r\n\r\n",
                Err("invalid response framing: invalid Content-Length"),
            ),
            (
                true,
                "HTTP/1.1 200 OK\r\ncontent-length: 5, 6\r\n\r\n",
                Err("invalid response framing: two different Content-Length values"),
            ),
            (
                false,
                "HTTP/1.1 304 Not Modified\r\ncontent-length: -1\r\n\r\n",
                Err("invalid response framing: invalid Content-Length"),
            ),
            (
                false,
                "HTTP/1.1 204 No Content\r\ncontent-length: \r\n\r\n",
                Err("invalid response framing: invalid Content-Length"),
            ),
            (
                true,
                "HTTP/1.1 200 OK\r\ncontent-length: 5, 5\r\n\r\n",
                Ok(Empty),
            ),
            // HTTP/1.0 has no transfer codings (RFC 9112 6.1).
            (
                false,
                "HTTP/1.0 200 OK\r\ntransfer-encoding: chunked\r\n\r\n",
                Err("invalid response framing: Transfer-Encoding in an HTTP/1.0 response"),
            ),
            (
                false,
                "HTTP/1.0 200 OK\r\ntransfer-encoding: chunked\r\ncontent-length: 2\r\n\r\n",
                Err("invalid response framing: Transfer-Encoding in an HTTP/1.0 response"),
            ),
            (
                true,
                "HTTP/1.0 200 OK\r\ntransfer-encoding: chunked\r\n\r\n",
                Ok(Empty),
            ),
        ];
        for (to_head, text, want) in cases {
            assert_eq!(
                framed(*to_head, text),
                want.map_err(str::to_string),
                "{text:?}"
            );
        }
    }

    #[test]
    fn reuse_follows_the_version_and_connection() {
        for (text, want) in [
            ("HTTP/1.1 200 OK\r\n\r\n", true),
            ("HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n", false),
            ("HTTP/1.1 200 OK\r\nconnection: x, Close\r\n\r\n", false),
            ("HTTP/1.0 200 OK\r\n\r\n", false),
            ("HTTP/1.0 200 OK\r\nconnection: keep-alive\r\n\r\n", true),
            // HTTP/1.0 with a coding: closed after (RFC 9112 6.1).
            (
                "HTTP/1.0 304 Not Modified\r\nconnection: keep-alive\r\ntransfer-encoding: chunked\r\n\r\n",
                false,
            ),
            // A 204 that says a length or a coding frames its 204s wrong
            // (RFC 9110 8.6, RFC 9112 6.1): its body may follow.
            ("HTTP/1.1 204 No Content\r\n\r\n", true),
            ("HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n", true),
            ("HTTP/1.1 204 No Content\r\ncontent-length: 5\r\n\r\n", false),
            ("HTTP/1.1 204 No Content\r\ntransfer-encoding: chunked\r\n\r\n", false),
            // A 304 may say the length and coding of what it stands for.
            ("HTTP/1.1 304 Not Modified\r\ncontent-length: 5\r\n\r\n", true),
            ("HTTP/1.1 304 Not Modified\r\ntransfer-encoding: chunked\r\n\r\n", true),
        ] {
            assert_eq!(keeps_alive(&head(text).unwrap().unwrap()), want, "{text:?}");
        }
    }

    /// A Content-Length passed on is one field of digits (RFC 9110 8.6): a
    /// value said in another form is said again as the one number.
    #[test]
    fn a_length_in_another_form_is_normalized() {
        for (fields, want) in [
            ("content-length: 5\r\n", None),
            ("content-length: 05\r\n", None),
            ("content-length: 5, 5\r\n", Some(5)),
            ("content-length: 5,\r\n", Some(5)),
            ("content-length: ,5\r\n", Some(5)),
            ("content-length: 5\r\ncontent-length: 5\r\n", Some(5)),
            ("content-length: 5\r\ncontent-length: \r\n", Some(5)),
            ("", None),
        ] {
            let text = format!("HTTP/1.1 200 OK\r\n{fields}\r\n");
            let parts = head(&text).unwrap().unwrap();
            for to_head in [false, true] {
                let read = body_and_reuse(to_head, &parts).unwrap();
                assert_eq!(read.normalized_length, want, "{fields:?}");
            }
        }
    }

    /// Status lines: `HTTP/1.x`, three digits of 100..=999 (RFC 9112 4),
    /// a reason that may be absent (hyper and nginx take `HTTP/1.1 200`),
    /// lines ended by a bare LF (RFC 9112 2.2: a recipient MAY take one),
    /// empty lines before it skipped. Anything else is refused: whitespace
    /// first, another version or protocol, codes of two or four digits or
    /// under 100, a NUL or a bare CR.
    #[test]
    fn status_lines_follow_rfc_9112_4() {
        let status = |line: &str| {
            head(&format!("{line}content-length: 0\r\n\r\n"))
                .map(|parts| parts.map(|p| (p.version, p.status.as_u16())))
        };
        for (line, want) in [
            ("HTTP/1.1 200 OK\r\n", (Version::HTTP_11, 200)),
            ("HTTP/1.0 404 Not Found\r\n", (Version::HTTP_10, 404)),
            ("HTTP/1.1 200\r\n", (Version::HTTP_11, 200)),
            ("HTTP/1.1 200 \r\n", (Version::HTTP_11, 200)),
            ("HTTP/1.1 200 OK\n", (Version::HTTP_11, 200)),
            ("\r\n\nHTTP/1.1 200 OK\r\n", (Version::HTTP_11, 200)),
            ("HTTP/1.1 599 Odd\r\n", (Version::HTTP_11, 599)),
        ] {
            assert_eq!(status(line), Ok(Some(want)), "{line:?}");
        }
        for line in [
            "HTTP/1.1 99 X\r\n",
            "HTTP/1.1 099 X\r\n",
            "HTTP/1.1 1000 X\r\n",
            "HTTP/1.1 abc\r\n",
            "HTTP/1.1 20 OK\r\n",
            "HTTP/2.0 200 OK\r\n",
            "HTTP/1.2 200 OK\r\n",
            "HTTP/1 200 OK\r\n",
            "ICY 200 OK\r\n",
            "http/1.1 200 OK\r\n",
            " HTTP/1.1 200 OK\r\n",
            "\tHTTP/1.1 200 OK\r\n",
            "\0HTTP/1.1 200 OK\r\n",
            "HTTP/1.1 200 O\0K\r\n",
            "HTTP/1.1 200 O\rK\r\n",
            "HTTP/1.1  200 OK\r\n",
        ] {
            assert!(status(line).is_err(), "{line:?}: {:?}", status(line));
        }
    }

    /// Field lines a proxy may not pass on are refused: obs-fold (RFC
    /// 9112 5.2), whitespace before the first field (2.2) or before a
    /// colon (5.1), a NUL, a bare CR or another control byte (RFC 9110 5.5).
    #[test]
    fn field_lines_a_proxy_may_not_pass_on_are_refused() {
        for fields in [
            "x-a: 1\r\n folded\r\n",
            "x-a: 1\r\n\tfolded\r\n",
            " x-a: 1\r\n",
            "x-a : 1\r\n",
            "x-a\t: 1\r\n",
            "content-length : 0\r\n",
            "x-a: a\0b\r\n",
            "x-\0a: 1\r\n",
            "x-a: a\rb\r\n",
            "x-a: a\x01b\r\n",
            "x-a: a\x7fb\r\n",
            "x a: 1\r\n",
            ": 1\r\n",
        ] {
            let text = format!("HTTP/1.1 200 OK\r\n{fields}\r\n");
            assert!(head(&text).is_err(), "{fields:?}: {:?}", head(&text));
        }
        // Bytes of 0x80 and over are obs-text, and a tab is whitespace.
        let mut buf = BytesMut::from(&b"HTTP/1.1 200 OK\r\nx-a: caf\xe9\tb\r\n\r\n"[..]);
        let parts = parse_head(&mut buf).unwrap().unwrap().into_parts().unwrap();
        assert_eq!(parts.headers["x-a"].as_bytes(), b"caf\xe9\tb");
    }

    #[test]
    fn a_head_is_parsed_whole_or_not_at_all() {
        let mut buf = BytesMut::from(&b"HTTP/1.1 200 OK\r\nx-a: 1\r\nx-a: 2\r\n\r\nbody"[..]);
        let parts = parse_head(&mut buf).unwrap().unwrap().into_parts().unwrap();
        assert_eq!(parts.status, 200);
        let all: Vec<_> = parts.headers.get_all("x-a").iter().collect();
        assert_eq!(all, ["1", "2"]);
        assert_eq!(&buf[..], b"body", "the body's bytes stay");
        assert!(matches!(head("HTTP/1.1 200 OK\r\nx-a: 1\r\n"), Ok(None)));
    }

    #[test]
    fn hostile_heads_are_refused_at_their_limits() {
        let long = format!("HTTP/1.1 200 OK\r\nx-a: {}", "a".repeat(MAX_HEAD));
        assert_eq!(
            head(&long).err(),
            Some(format!("the response head is over {MAX_HEAD} bytes"))
        );
        let many: String = (0..=MAX_HEADERS).map(|i| format!("x-{i}: 1\r\n")).collect();
        assert_eq!(
            head(&format!("HTTP/1.1 200 OK\r\n{many}\r\n")).err(),
            Some(format!(
                "the response has more than {MAX_HEADERS} header fields"
            ))
        );
        assert!(head("SSH-2.0-OpenSSH\r\n\r\n").is_err());
        assert!(head("HTTP/1.1 2000 OK\r\n\r\n").is_err());
    }
}
