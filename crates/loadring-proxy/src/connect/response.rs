//! A backend's response head read off the connection's buffer, and what
//! it says of the body's framing (RFC 9112 6.3) and of the connection's
//! reuse (RFC 9112 9.3).

use std::mem::MaybeUninit;

use bytes::BytesMut;
use http::header::{HeaderName, CONNECTION, CONTENT_LENGTH, TRANSFER_ENCODING};
use http::{response, HeaderMap, Response, StatusCode, Version};

use super::decode::Framing;
use super::error::UpstreamError;
use super::fields::{headers_of, ranges};
pub(crate) use super::fields::{MAX_HEAD, MAX_HEADERS};

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
    let fields = ranges(buf, parsed.headers)?;
    let bytes = buf.split_to(len).freeze();
    let (mut parts, ()) = Response::new(()).into_parts();
    parts.status = status;
    parts.version = version;
    parts.headers = headers_of(&bytes, fields)?;
    Ok(Some(parts))
}

/// The comma-separated tokens of every `name` field.
fn tokens<'a>(headers: &'a HeaderMap, name: &HeaderName) -> impl Iterator<Item = &'a [u8]> {
    headers
        .get_all(name)
        .iter()
        .flat_map(|v| v.as_bytes().split(|&b| b == b','))
        .map(<[u8]>::trim_ascii)
        .filter(|t| !t.is_empty())
}

/// How the body of `head` (the answer to a HEAD request when `to_head`)
/// ends.
///
/// # Errors
/// Its framing cannot be trusted: `Transfer-Encoding` not ending in
/// chunked, or an invalid or twice different `Content-Length`.
pub(crate) fn framing(to_head: bool, head: &response::Parts) -> Result<Framing, UpstreamError> {
    let status = head.status;
    if status == StatusCode::SWITCHING_PROTOCOLS {
        return Ok(Framing::Upgrade);
    }
    if to_head
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
    {
        return Ok(Framing::Empty);
    }
    let headers = &head.headers;
    if headers.contains_key(TRANSFER_ENCODING) {
        return match tokens(headers, &TRANSFER_ENCODING).last() {
            Some(last) if last.eq_ignore_ascii_case(b"chunked") => Ok(Framing::Chunked),
            _ => Err(UpstreamError::Framing(
                "Transfer-Encoding does not end in chunked",
            )),
        };
    }
    let mut length = None;
    for token in tokens(headers, &CONTENT_LENGTH) {
        let n = std::str::from_utf8(token)
            .ok()
            .filter(|t| t.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|t| t.parse::<u64>().ok())
            .ok_or(UpstreamError::Framing("invalid Content-Length"))?;
        if length.is_some_and(|l| l != n) {
            return Err(UpstreamError::Framing(
                "two different Content-Length values",
            ));
        }
        length = Some(n);
    }
    if headers.contains_key(CONTENT_LENGTH) && length.is_none() {
        return Err(UpstreamError::Framing("invalid Content-Length"));
    }
    Ok(length.map_or(Framing::Eof, Framing::Length))
}

/// Whether the connection may carry another exchange after this answer:
/// HTTP/1.1 unless it says `close`, HTTP/1.0 only when it says
/// `keep-alive`.
pub(crate) fn keeps_alive(head: &response::Parts) -> bool {
    let has =
        |token: &[u8]| tokens(&head.headers, &CONNECTION).any(|t| t.eq_ignore_ascii_case(token));
    match head.version {
        Version::HTTP_11 => !has(b"close"),
        Version::HTTP_10 => has(b"keep-alive") && !has(b"close"),
        _ => false,
    }
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
        framing(to_head, &parts).map_err(|e| e.to_string())
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
                "HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, Chunked\r\n\r\n",
                Ok(Chunked),
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
                Err("invalid response framing: Transfer-Encoding does not end in chunked"),
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
