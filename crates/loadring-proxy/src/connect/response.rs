//! A backend's response head read off the connection's buffer, and what
//! it says of the body's framing (RFC 9112 6.3) and of the connection's
//! reuse (RFC 9112 9.3).

use std::mem::MaybeUninit;

use bytes::BytesMut;
use http::header::{CONNECTION, CONTENT_LENGTH, TRANSFER_ENCODING};
use http::{response, Response, StatusCode, Version};

use super::decode::Framing;
use super::error::UpstreamError;
use super::fields::{headers_of, spans};
pub(crate) use super::fields::{MAX_HEAD, MAX_HEADERS};
use crate::field_list::{elements, TransferCodings};

/// A response head taken off `buf`, `None` until it is whole.
///
/// # Errors
/// The head is not HTTP/1.x, or is over [`MAX_HEAD`] bytes or
/// [`MAX_HEADERS`] fields.
pub(crate) fn parse_head(buf: &mut BytesMut) -> Result<Option<response::Parts>, UpstreamError> {
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
    let fields = spans(buf, parsed.headers);
    let bytes = buf.split_to(len).freeze();
    let (mut parts, ()) = Response::new(()).into_parts();
    parts.status = status;
    parts.version = version;
    parts.headers = headers_of(&bytes, &fields)?;
    Ok(Some(parts))
}

/// What a response head says of its body and its connection: how the
/// body ends, and whether the connection may carry another exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BodyAndReuse {
    pub(crate) framing: Framing,
    pub(crate) keep_alive: bool,
    /// `Some(n)`: `Content-Length` said `n` more than once (`2, 2`, or
    /// in two fields), which RFC 9110 8.6 lets a recipient take as `n`;
    /// the answer passed on says it once, as a client may refuse a list.
    pub(crate) repeated_length: Option<u64>,
}

/// How the body of `head` (the answer to a HEAD request when `to_head`)
/// ends, and whether the connection may carry another exchange after it:
/// HTTP/1.1 unless `Connection` says `close`, HTTP/1.0 only when it says
/// `keep-alive` (RFC 9112 6.3 and 9.3). One pass over the fields: every
/// response is read this way.
///
/// # Errors
/// Its framing cannot be trusted or kept: a body's `Transfer-Encoding`
/// other than `chunked` alone, or an invalid or twice different
/// `Content-Length`.
pub(crate) fn body_and_reuse(
    to_head: bool,
    head: &response::Parts,
) -> Result<BodyAndReuse, UpstreamError> {
    let mut codings: Option<TransferCodings> = None;
    let mut length: Option<u64> = None;
    let mut lengths_said = 0usize;
    let mut has_length = false;
    let mut length_error: Option<&'static str> = None;
    let (mut close, mut keep_alive) = (false, false);
    for (name, value) in &head.headers {
        if name == TRANSFER_ENCODING {
            codings.get_or_insert_default().add(value);
        } else if name == CONTENT_LENGTH {
            has_length = true;
            for token in elements(value) {
                if length_error.is_some() {
                    break;
                }
                lengths_said += 1;
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
        } else if name == CONNECTION {
            for token in elements(value) {
                close |= token.eq_ignore_ascii_case(b"close");
                keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
            }
        }
    }
    let keep_alive = match head.version {
        Version::HTTP_11 => !close,
        Version::HTTP_10 => keep_alive && !close,
        _ => false,
    };
    let status = head.status;
    let framing = if status == StatusCode::SWITCHING_PROTOCOLS {
        Framing::Upgrade
    } else if to_head
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
    {
        Framing::Empty
    } else if let Some(codings) = codings {
        if !codings.chunked_alone() {
            return Err(UpstreamError::Framing(
                "Transfer-Encoding other than chunked alone",
            ));
        }
        Framing::Chunked
    } else if let Some(why) = length_error {
        return Err(UpstreamError::Framing(why));
    } else if has_length && length.is_none() {
        return Err(UpstreamError::Framing("invalid Content-Length"));
    } else {
        length.map_or(Framing::Eof, Framing::Length)
    };
    let repeated_length = length.filter(|_| lengths_said > 1 && length_error.is_none());
    Ok(BodyAndReuse {
        framing,
        keep_alive,
        repeated_length,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(text: &str) -> Result<Option<response::Parts>, String> {
        let mut buf = BytesMut::from(text.as_bytes());
        parse_head(&mut buf).map_err(|e| e.to_string())
    }

    fn framed(to_head: bool, text: &str) -> Result<Framing, String> {
        let parts = head(text)?.ok_or("partial")?;
        body_and_reuse(to_head, &parts)
            .map(|read| read.framing)
            .map_err(|e| e.to_string())
    }

    fn keeps_alive(parts: &response::Parts) -> bool {
        body_and_reuse(false, parts).unwrap().keep_alive
    }

    /// The rules written plainly, a lookup per field name: the one pass
    /// of [`body_and_reuse`] must agree with them on any head.
    fn body_and_reuse_spec(to_head: bool, head: &response::Parts) -> Result<BodyAndReuse, String> {
        let all = |name| {
            head.headers
                .get_all(name)
                .iter()
                .flat_map(elements)
                .collect::<Vec<_>>()
        };
        let connection = all(CONNECTION);
        let has = |token: &[u8]| connection.iter().any(|t| t.eq_ignore_ascii_case(token));
        let keep_alive = match head.version {
            Version::HTTP_11 => !has(b"close"),
            Version::HTTP_10 => has(b"keep-alive") && !has(b"close"),
            _ => false,
        };
        let said: Vec<Option<u64>> = all(CONTENT_LENGTH)
            .into_iter()
            .map(|t| {
                std::str::from_utf8(t)
                    .ok()
                    .filter(|t| t.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|t| t.parse::<u64>().ok())
            })
            .collect();
        let repeated_length = match said[..] {
            [Some(n), ref rest @ ..] if !rest.is_empty() && rest.iter().all(|l| *l == Some(n)) => {
                Some(n)
            }
            _ => None,
        };
        let status = head.status;
        let framing = if status == 101 {
            Framing::Upgrade
        } else if to_head || status.is_informational() || status == 204 || status == 304 {
            Framing::Empty
        } else if head.headers.contains_key(TRANSFER_ENCODING) {
            match all(TRANSFER_ENCODING)[..] {
                [t] if t.eq_ignore_ascii_case(b"chunked") => Framing::Chunked,
                _ => return Err("Transfer-Encoding other than chunked alone".into()),
            }
        } else {
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
            length.map_or(Framing::Eof, Framing::Length)
        };
        Ok(BodyAndReuse {
            framing,
            keep_alive,
            repeated_length,
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
                "content-length: x", "content-length: ", "content-length: 99999999999999999999999",
                "connection: close", "connection: Keep-Alive", "connection: x, close",
                "connection: keep-alive, ", "connection: ", "x-a: chunked",
            ]), 0..6),
        ) {
            let text: String = fields.iter().map(|f| format!("{f}\r\n")).collect();
            let text = format!("HTTP/{version} {status} X\r\n{text}\r\n");
            let parts = head(&text).unwrap().unwrap();
            let got = body_and_reuse(to_head, &parts).map_err(|e| e.to_string());
            let want = body_and_reuse_spec(to_head, &parts)
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
        ] {
            assert_eq!(keeps_alive(&head(text).unwrap().unwrap()), want, "{text:?}");
        }
    }

    #[test]
    fn a_head_is_parsed_whole_or_not_at_all() {
        let mut buf = BytesMut::from(&b"HTTP/1.1 200 OK\r\nx-a: 1\r\nx-a: 2\r\n\r\nbody"[..]);
        let parts = parse_head(&mut buf).unwrap().unwrap();
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
