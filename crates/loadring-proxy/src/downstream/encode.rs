//! A response head written for an HTTP/1.1 client, and how its body is
//! framed (RFC 9112 6-7): no I/O here.
//!
//! The answer's own framing fields decide when it has them (the gateway's
//! upstream layer has checked a backend's `Content-Length` and removed its
//! `Transfer-Encoding`); otherwise an exact length from the body, else
//! chunked for HTTP/1.1 and the connection's end for HTTP/1.0.

use http::header::{CONNECTION, CONTENT_LENGTH, DATE, TRANSFER_ENCODING};
use http::{StatusCode, Version};

use crate::connect::answer_head::AnswerHead;
use crate::connect::fields::put_field;
use crate::connect::known_names::is_named;

/// How the body after a head is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// None at all (an answer to HEAD, 1xx, 204, 304).
    Empty,
    /// Exactly this many bytes.
    Length(u64),
    /// Chunked, trailers at its end.
    Chunked,
    /// As it comes, the connection's close its end (an HTTP/1.0 client).
    UntilClose,
    /// `101`: the connection is the new protocol's after the head.
    Switch,
}

/// What the client's request says of its answer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Asked {
    pub(crate) head: bool,
    pub(crate) version: Version,
    /// The client and the gateway both let the connection carry another
    /// request after this one.
    pub(crate) keep_alive: bool,
}

/// Writes `parts`' head to `out`; `exact` is the body's length when known.
/// Returns the body's framing and whether the connection stays open after.
///
/// A head as a backend sent it is written from its bytes, its names in
/// lower case as a map's are.
pub(crate) fn head(
    out: &mut Vec<u8>,
    parts: &AnswerHead,
    exact: Option<u64>,
    asked: Asked,
) -> (Framing, bool) {
    let status = parts.status();
    let switch = status == StatusCode::SWITCHING_PROTOCOLS;
    let no_body = asked.head
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED;
    // No length on 1xx and 204 (RFC 9110 8.6), nor on 304, where it would
    // be the representation's (a MAY, which hyper's server left out too).
    let length_allowed = !(status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED);
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\n");
    // One pass over the fields: written as they are, but for those the
    // framing below decides (a length is written once, as digits, where
    // the answer may have one), noting the length and the date on the way.
    let mut has_date = false;
    let mut said_length = None;
    match parts {
        AnswerHead::Parts(parts) => {
            for (name, value) in &parts.headers {
                if *name == CONTENT_LENGTH {
                    said_length = said_length.or_else(|| digits(value.as_bytes()));
                    continue;
                }
                if *name == TRANSFER_ENCODING || (*name == CONNECTION && !switch) {
                    continue;
                }
                has_date |= *name == DATE;
                put_field(out, name.as_str().as_bytes(), value.as_bytes());
            }
        }
        AnswerHead::Raw(raw) => raw.fields.for_each_field(|name, value| {
            if is_named(name, b"content-length") {
                said_length = said_length.or_else(|| digits(value));
                return;
            }
            if is_named(name, b"transfer-encoding") || (!switch && is_named(name, b"connection")) {
                return;
            }
            has_date |= is_named(name, b"date");
            put_field(out, name, value);
        }),
    }
    let mut keep_alive = asked.keep_alive;
    let (framing, length) = if switch {
        (Framing::Switch, None)
    } else if no_body {
        // A HEAD answer's length is the one its GET would have (an exact
        // one only when it is not nothing: an empty body may be HEAD's).
        let length = said_length.or(exact.filter(|&n| n > 0));
        (Framing::Empty, length.filter(|_| asked.head))
    } else if let Some(n) = said_length.or(exact) {
        (Framing::Length(n), Some(n))
    } else if asked.version == Version::HTTP_11 {
        (Framing::Chunked, None)
    } else {
        keep_alive = false;
        (Framing::UntilClose, None)
    };
    if let Some(n) = length.filter(|_| length_allowed) {
        out.extend_from_slice(b"content-length: ");
        crate::numerals::put_decimal(out, n);
        out.extend_from_slice(b"\r\n");
    }
    if !has_date {
        super::date::append_field(out);
    }
    if framing == Framing::Chunked {
        out.extend_from_slice(b"transfer-encoding: chunked\r\n");
    }
    if !switch {
        match (keep_alive, asked.version) {
            (false, _) => out.extend_from_slice(b"connection: close\r\n"),
            (true, Version::HTTP_10) => out.extend_from_slice(b"connection: keep-alive\r\n"),
            (true, _) => {}
        }
    }
    out.extend_from_slice(b"\r\n");
    (framing, keep_alive)
}

/// A `Content-Length` value as the upstream layer leaves it: digits.
fn digits(value: &[u8]) -> Option<u64> {
    if value.is_empty() {
        return None;
    }
    value.iter().try_fold(0u64, |n, &b| {
        if b.is_ascii_digit() {
            n.checked_mul(10)?.checked_add(u64::from(b - b'0'))
        } else {
            None
        }
    })
}

/// Appends a chunk's size line for `len` bytes.
pub(crate) fn chunk_size(out: &mut Vec<u8>, len: usize) {
    crate::numerals::put_hex(out, len as u64);
    out.extend_from_slice(b"\r\n");
}

/// Appends the last chunk, then `trailers` and the empty line. Fields
/// that frame or route a message are left out of trailers (RFC 9110
/// 6.5.1).
pub(crate) fn last_chunk(out: &mut Vec<u8>, trailers: Option<&http::HeaderMap>) {
    use http::header::{HOST, TRAILER};
    out.extend_from_slice(b"0\r\n");
    for (name, value) in trailers.into_iter().flatten() {
        if [CONTENT_LENGTH, TRANSFER_ENCODING, HOST, TRAILER, CONNECTION].contains(name) {
            continue;
        }
        put_field(out, name.as_str().as_bytes(), value.as_bytes());
    }
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;

    const HTTP_10: Version = Version::HTTP_10;
    const HTTP_11: Version = Version::HTTP_11;

    /// An answer of `status` with `fields`, as the exchange hands it over.
    fn answer(status: u16, fields: &[(&str, &str)]) -> http::response::Parts {
        let mut builder = http::Response::builder().status(status);
        for &(name, value) in fields {
            builder = builder.header(name, value);
        }
        builder.body(()).unwrap().into_parts().0
    }

    fn asked(version: Version, keep_alive: bool) -> Asked {
        Asked {
            head: false,
            version,
            keep_alive,
        }
    }

    fn asked_head(version: Version, keep_alive: bool) -> Asked {
        Asked {
            head: true,
            ..asked(version, keep_alive)
        }
    }

    /// A head as written, read back by httparse.
    #[derive(Debug)]
    struct Written {
        framing: Framing,
        keep_alive: bool,
        bytes: Vec<u8>,
        code: u16,
        reason: String,
        fields: Vec<(String, String)>,
    }

    impl Written {
        /// The values of the fields named `name`, in order.
        fn all(&self, name: &str) -> Vec<&str> {
            self.fields
                .iter()
                .filter(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
                .collect()
        }
    }

    /// What [`head`] writes for `parts`, read back: one status line of
    /// HTTP/1.1 (RFC 9110 2.5: a server answers in the highest version it
    /// conforms to within the request's major version), fields, and one
    /// empty line ending it all (RFC 9112 2.1), a `Date` at most once
    /// (RFC 9110 6.6.1), and exactly once on a final answer.
    ///
    /// Written twice, from the map and from the same head as a backend
    /// would send it (kept raw by the upstream layer): both must say the
    /// same (the map groups a name's fields, the raw head keeps their
    /// order; a `Date` added may fall in another second).
    fn write(parts: &http::response::Parts, exact: Option<u64>, asked: Asked) -> Written {
        let mut out = Vec::new();
        let (framing, keep_alive) = head(&mut out, &parts.clone().into(), exact, asked);
        let mut sent = format!("HTTP/1.1 {}\r\n", parts.status.as_u16());
        for (name, value) in &parts.headers {
            // Spelled as a backend may: the case is not kept.
            sent.push_str(&name.as_str().to_ascii_uppercase());
            sent.push_str(": ");
            sent.push_str(value.to_str().unwrap());
            sent.push_str("\r\n");
        }
        sent.push_str("\r\n");
        let raw = AnswerHead::Raw(Box::new(crate::connect::raw_head::read(&sent)));
        let mut raw_out = Vec::new();
        let raw_written = head(&mut raw_out, &raw, exact, asked);
        assert_eq!(raw_written, (framing, keep_alive), "{sent:?}");
        let lines = |bytes: &[u8]| {
            let mut lines: Vec<String> = String::from_utf8_lossy(bytes)
                .split("\r\n")
                .filter(|line| !line.starts_with("date: "))
                .map(str::to_owned)
                .collect();
            // By name, each name's in order.
            lines.sort_by_key(|line| line.split(':').next().unwrap_or_default().to_owned());
            lines
        };
        assert_eq!(lines(&raw_out), lines(&out), "{sent:?}");
        let text = String::from_utf8_lossy(&out).into_owned();
        let mut fields = [httparse::EMPTY_HEADER; 64];
        let mut response = httparse::Response::new(&mut fields);
        let len = match response.parse(&out) {
            Ok(httparse::Status::Complete(len)) => len,
            other => panic!("{text:?}: {other:?}"),
        };
        assert_eq!(
            len,
            out.len(),
            "one head, one empty line at its end: {text:?}"
        );
        assert_eq!(response.version, Some(1), "{text:?}");
        let code = response.code.unwrap();
        let written = Written {
            framing,
            keep_alive,
            code,
            reason: response.reason.unwrap_or_default().to_owned(),
            fields: response
                .headers
                .iter()
                .map(|h| {
                    (
                        h.name.to_owned(),
                        String::from_utf8(h.value.to_vec()).unwrap(),
                    )
                })
                .collect(),
            bytes: out,
        };
        let dates = written.all("date");
        assert!(dates.len() <= 1, "{text:?}");
        if code >= 200 {
            assert_eq!(dates.len(), 1, "{text:?}");
        }
        for date in dates {
            assert!(httpdate::parse_http_date(date).is_ok(), "{text:?}");
        }
        written
    }

    /// RFC 9112 4: `HTTP-version SP status-code SP [reason-phrase]`: the
    /// space after the code is there when the reason is empty.
    #[test]
    fn the_status_line_is_http_1_1_the_code_and_its_reason() {
        for (status, version, line, reason) in [
            (200, HTTP_11, "HTTP/1.1 200 OK\r\n", "OK"),
            (200, HTTP_10, "HTTP/1.1 200 OK\r\n", "OK"),
            (404, HTTP_11, "HTTP/1.1 404 Not Found\r\n", "Not Found"),
            (204, HTTP_11, "HTTP/1.1 204 No Content\r\n", "No Content"),
            (
                503,
                HTTP_10,
                "HTTP/1.1 503 Service Unavailable\r\n",
                "Service Unavailable",
            ),
            (599, HTTP_11, "HTTP/1.1 599 \r\n", ""),
            (299, HTTP_11, "HTTP/1.1 299 \r\n", ""),
        ] {
            let written = write(&answer(status, &[]), Some(0), asked(version, true));
            assert!(
                written.bytes.starts_with(line.as_bytes()),
                "{line:?}: {:?}",
                String::from_utf8_lossy(&written.bytes)
            );
            assert_eq!(written.code, status, "{line:?}");
            assert_eq!(written.reason, reason, "{line:?}");
        }
    }

    /// RFC 9112 6.3: a final answer with a body is framed by its
    /// Content-Length (said once: RFC 9110 8.6), else (the gateway
    /// framing it) by the length known, else chunked for an HTTP/1.1
    /// client, else the connection's close for an HTTP/1.0 one (RFC 9112
    /// 6.1: no Transfer-Encoding to a request below HTTP/1.1).
    #[test]
    fn a_body_is_framed_by_its_length_then_the_exact_length_then_the_version() {
        use Framing::*;
        type Case<'a> = (
            u16,
            &'a [(&'a str, &'a str)],
            Option<u64>,
            Version,
            Framing,
            &'a [&'a str],
            &'a [&'a str],
        );
        // (status, the answer's fields, exact, the client's version:
        // framing, content-length written, transfer-encoding written)
        let cases: &[Case<'_>] = &[
            (
                200,
                &[("content-length", "5")],
                None,
                HTTP_11,
                Length(5),
                &["5"],
                &[],
            ),
            (
                200,
                &[("content-length", "5")],
                Some(5),
                HTTP_11,
                Length(5),
                &["5"],
                &[],
            ),
            (
                200,
                &[("content-length", "5")],
                None,
                HTTP_10,
                Length(5),
                &["5"],
                &[],
            ),
            (
                200,
                &[("content-length", "0")],
                None,
                HTTP_11,
                Length(0),
                &["0"],
                &[],
            ),
            (
                404,
                &[("content-length", "9")],
                None,
                HTTP_11,
                Length(9),
                &["9"],
                &[],
            ),
            (200, &[], Some(7), HTTP_11, Length(7), &["7"], &[]),
            (200, &[], Some(7), HTTP_10, Length(7), &["7"], &[]),
            (200, &[], Some(0), HTTP_11, Length(0), &["0"], &[]),
            (
                200,
                &[],
                Some(u64::MAX),
                HTTP_11,
                Length(u64::MAX),
                &["18446744073709551615"],
                &[],
            ),
            (
                200,
                &[],
                Some(1_000_000),
                HTTP_11,
                Length(1_000_000),
                &["1000000"],
                &[],
            ),
            (200, &[], None, HTTP_11, Chunked, &[], &["chunked"]),
            (500, &[], None, HTTP_11, Chunked, &[], &["chunked"]),
            (200, &[], None, HTTP_10, UntilClose, &[], &[]),
            // The answer's own coding is not passed on: the framing is
            // decided here.
            (
                200,
                &[("transfer-encoding", "chunked")],
                None,
                HTTP_11,
                Chunked,
                &[],
                &["chunked"],
            ),
            (
                200,
                &[("transfer-encoding", "chunked")],
                Some(3),
                HTTP_11,
                Length(3),
                &["3"],
                &[],
            ),
            (
                200,
                &[("transfer-encoding", "chunked")],
                None,
                HTTP_10,
                UntilClose,
                &[],
                &[],
            ),
        ];
        for &(status, fields, exact, version, framing, length, coding) in cases {
            let written = write(&answer(status, fields), exact, asked(version, true));
            let case = format!("{status} {fields:?} exact {exact:?} {version:?}");
            assert_eq!(written.framing, framing, "{case}");
            assert_eq!(written.all("content-length"), length, "{case}");
            assert_eq!(written.all("transfer-encoding"), coding, "{case}");
        }
    }

    /// RFC 9110 8.6 and RFC 9112 6.1: no Content-Length nor
    /// Transfer-Encoding on 1xx and 204; RFC 9110 15.4.5: a 304 has no
    /// content (its Content-Length, a MAY, is left out). RFC 9112 6.3: the
    /// body of each is empty, whatever its fields say.
    #[test]
    fn a_1xx_204_or_304_has_no_body_and_says_no_length() {
        for (status, fields, exact) in [
            (204, &[("content-length", "5")][..], None),
            (204, &[("content-length", "0")][..], Some(0)),
            (204, &[][..], Some(5)),
            (204, &[("transfer-encoding", "chunked")][..], None),
            (204, &[][..], None),
            (304, &[("content-length", "5")][..], None),
            (304, &[][..], Some(5)),
            (304, &[][..], None),
            (304, &[("transfer-encoding", "chunked")][..], None),
            (100, &[][..], None),
            (103, &[("content-length", "5")][..], Some(5)),
        ] {
            for version in [HTTP_11, HTTP_10] {
                let written = write(&answer(status, fields), exact, asked(version, true));
                let case = format!("{status} {fields:?} exact {exact:?} {version:?}");
                assert_eq!(written.framing, Framing::Empty, "{case}");
                assert_eq!(written.all("content-length"), [] as [&str; 0], "{case}");
                assert_eq!(written.all("transfer-encoding"), [] as [&str; 0], "{case}");
                // Nothing to read to the connection's end: it may stay.
                assert!(written.keep_alive, "{case}");
                assert!(!written.all("connection").contains(&"close"), "{case}");
            }
        }
    }

    /// RFC 9110 9.3.2: the answer to HEAD has no content; RFC 9110 8.6: it
    /// MAY say the length a GET would have had (and MUST NOT say another).
    /// An exact length of zero may be the empty body of the HEAD answer
    /// itself rather than the GET's length: it is not said.
    #[test]
    fn an_answer_to_head_has_no_body_and_keeps_or_adds_the_get_length() {
        for (fields, exact, length) in [
            (&[("content-length", "5")][..], None, &["5"][..]),
            (&[("content-length", "5")][..], Some(0), &["5"][..]),
            (&[("content-length", "5")][..], Some(5), &["5"][..]),
            (&[("content-length", "0")][..], None, &["0"][..]),
            (&[][..], Some(5), &["5"][..]),
            (&[][..], Some(0), &[][..]),
            (&[][..], None, &[][..]),
            (&[("transfer-encoding", "chunked")][..], None, &[][..]),
        ] {
            for version in [HTTP_11, HTTP_10] {
                let written = write(&answer(200, fields), exact, asked_head(version, true));
                let case = format!("{fields:?} exact {exact:?} {version:?}");
                assert_eq!(written.framing, Framing::Empty, "{case}");
                assert_eq!(written.all("content-length"), length, "{case}");
                assert_eq!(written.all("transfer-encoding"), [] as [&str; 0], "{case}");
                // No body to end with the connection, on HTTP/1.0 too.
                assert!(written.keep_alive, "{case}");
            }
        }
    }

    /// RFC 9110 8.6: a server MUST NOT send a Content-Length in any
    /// response with a status of 1xx or 204, an answer to HEAD among
    /// them (and a 304's, when said, must be the 200's, which an exact
    /// length of the HEAD answer is not known to be).
    #[test]
    fn no_length_is_added_to_a_204_304_or_1xx_answering_head() {
        let mut wrong = Vec::new();
        for status in [204, 304, 103] {
            let written = write(&answer(status, &[]), Some(5), asked_head(HTTP_11, true));
            assert_eq!(written.framing, Framing::Empty, "{status}");
            let lengths = written.all("content-length");
            if !lengths.is_empty() {
                wrong.push(format!(
                    "{status} to HEAD, exact Some(5): content-length {lengths:?}"
                ));
            }
        }
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    /// RFC 9110 15.2.2 and 7.8: a 101 says the protocol switched to in its
    /// `Upgrade` and `Connection: upgrade` fields, which are kept; after
    /// its head the connection is the new protocol's: no length, no
    /// coding (RFC 9110 8.6, RFC 9112 6.1), and no `close`.
    #[test]
    fn a_101_switches_with_its_connection_and_upgrade_fields() {
        for keep_alive in [true, false] {
            let parts = answer(
                101,
                &[
                    ("connection", "upgrade"),
                    ("upgrade", "websocket"),
                    ("sec-websocket-accept", "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="),
                    ("content-length", "0"),
                    ("transfer-encoding", "chunked"),
                ],
            );
            let written = write(&parts, Some(0), asked(HTTP_11, keep_alive));
            assert_eq!(written.framing, Framing::Switch, "keep_alive {keep_alive}");
            assert_eq!(
                written.all("connection"),
                ["upgrade"],
                "keep_alive {keep_alive}"
            );
            assert_eq!(
                written.all("upgrade"),
                ["websocket"],
                "keep_alive {keep_alive}"
            );
            assert_eq!(
                written.all("sec-websocket-accept"),
                ["s3pPLMBiTxaQ9kYGzzhZRbK+xOo="]
            );
            assert_eq!(written.all("content-length"), [] as [&str; 0]);
            assert_eq!(written.all("transfer-encoding"), [] as [&str; 0]);
        }
    }

    /// RFC 9110 7.6.1: the answer's Connection is the backend's hop's, not
    /// passed on. RFC 9112 9.6: a server that closes after the answer says
    /// `close`; RFC 9112 9.3: an HTTP/1.1 connection persists without a
    /// word, an HTTP/1.0 one only with `keep-alive`. A body framed by the
    /// close (HTTP/1.0, no length) ends the connection.
    #[test]
    fn the_connection_field_says_what_the_gateway_does() {
        type Case<'a> = (
            u16,
            Version,
            bool,
            &'a [(&'a str, &'a str)],
            Option<u64>,
            &'a [&'a str],
            bool,
        );
        // (status, version, keep_alive asked, the answer's fields, exact:
        // connection written, keep_alive returned)
        let cases: &[Case<'_>] = &[
            (200, HTTP_11, true, &[], Some(0), &[], true),
            (200, HTTP_11, false, &[], Some(0), &["close"], false),
            (
                200,
                HTTP_11,
                true,
                &[("connection", "close")],
                Some(0),
                &[],
                true,
            ),
            (
                200,
                HTTP_11,
                false,
                &[("connection", "keep-alive")],
                Some(0),
                &["close"],
                false,
            ),
            (
                200,
                HTTP_11,
                false,
                &[("connection", "close"), ("connection", "x-a")],
                Some(0),
                &["close"],
                false,
            ),
            (200, HTTP_11, true, &[], None, &[], true),
            (200, HTTP_11, false, &[], None, &["close"], false),
            (200, HTTP_10, true, &[], Some(3), &["keep-alive"], true),
            (
                200,
                HTTP_10,
                true,
                &[("connection", "close")],
                Some(3),
                &["keep-alive"],
                true,
            ),
            (200, HTTP_10, false, &[], Some(3), &["close"], false),
            (
                200,
                HTTP_10,
                false,
                &[("connection", "keep-alive")],
                Some(3),
                &["close"],
                false,
            ),
            (200, HTTP_10, true, &[], None, &["close"], false),
            (204, HTTP_10, true, &[], None, &["keep-alive"], true),
            (204, HTTP_11, false, &[], None, &["close"], false),
            (
                304,
                HTTP_11,
                true,
                &[("connection", "close")],
                None,
                &[],
                true,
            ),
        ];
        for &(status, version, keep_alive, fields, exact, connection, kept) in cases {
            let written = write(&answer(status, fields), exact, asked(version, keep_alive));
            let case = format!("{status} {version:?} keep_alive {keep_alive} {fields:?} {exact:?}");
            assert_eq!(written.all("connection"), connection, "{case}");
            assert_eq!(written.keep_alive, kept, "{case}");
        }
    }

    /// RFC 9110 6.6.1: a recipient with a clock adds a `Date` to an answer
    /// that has none (the time it is made); one it has is kept, once.
    #[test]
    fn a_date_is_added_when_missing_and_kept_when_there() {
        let before = SystemTime::now() - Duration::from_secs(1);
        for status in [200, 204, 304, 404, 502] {
            let written = write(&answer(status, &[]), Some(0), asked(HTTP_11, true));
            let date = httpdate::parse_http_date(written.all("date")[0]).unwrap();
            let after = SystemTime::now() + Duration::from_secs(1);
            assert!(before <= date && date <= after, "{status}: {date:?}");
        }
        let kept = "Sun, 06 Nov 1994 08:49:37 GMT";
        for (status, exact, version) in [
            (200, Some(0), HTTP_11),
            (200, None, HTTP_11),
            (200, None, HTTP_10),
            (304, None, HTTP_11),
        ] {
            let written = write(
                &answer(status, &[("Date", kept)]),
                exact,
                asked(version, true),
            );
            assert_eq!(
                written.all("date"),
                [kept],
                "{status} {exact:?} {version:?}"
            );
        }
    }

    /// The answer's other fields pass as they are, repeated ones in
    /// order (RFC 9110 5.3).
    #[test]
    fn other_fields_pass_as_they_are() {
        let parts = answer(
            200,
            &[
                ("content-type", "text/plain; charset=utf-8"),
                ("set-cookie", "a=1"),
                ("set-cookie", "b=2"),
                ("x-empty", ""),
            ],
        );
        let written = write(&parts, Some(2), asked(HTTP_11, true));
        assert_eq!(written.all("content-type"), ["text/plain; charset=utf-8"]);
        assert_eq!(written.all("set-cookie"), ["a=1", "b=2"]);
        assert_eq!(written.all("x-empty"), [""]);
    }

    /// RFC 9112 6.1: a sender MUST NOT send a Content-Length in a message
    /// with a Transfer-Encoding; RFC 9110 8.6: a sender MUST NOT forward a
    /// Content-Length that is not 1*DIGIT. An answer whose field is not
    /// digits (the upstream layer is to have refused it before) must not
    /// go out beside another framing or another length.
    #[test]
    fn a_length_that_is_not_digits_is_not_sent_beside_another_framing() {
        let mut wrong = Vec::new();
        for (value, exact) in [("abc", None), ("abc", Some(3)), ("5, 5", None)] {
            let parts = answer(200, &[("content-length", value)]);
            let written = write(&parts, exact, asked(HTTP_11, true));
            let lengths = written.all("content-length");
            let codings = written.all("transfer-encoding");
            let one_length_of_digits = lengths.len() <= 1
                && lengths
                    .iter()
                    .all(|l| l.bytes().all(|b| b.is_ascii_digit()));
            if !one_length_of_digits || !(lengths.is_empty() || codings.is_empty()) {
                wrong.push(format!(
                    "content-length {value:?}, exact {exact:?}: wrote content-length {lengths:?}, transfer-encoding {codings:?}"
                ));
            }
        }
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    /// RFC 9112 7.1: `chunk-size = 1*HEXDIG` then CRLF (lowercase digits).
    #[test]
    fn a_chunk_size_is_hex_digits_and_a_crlf() {
        let cases: &[(usize, &str)] = &[
            (0, "0\r\n"),
            (0x1, "1\r\n"),
            (9, "9\r\n"),
            (0xa, "a\r\n"),
            (0xf, "f\r\n"),
            (0x10, "10\r\n"),
            (0xff, "ff\r\n"),
            (0x100, "100\r\n"),
            (0x3fff, "3fff\r\n"),
            (0x4000, "4000\r\n"),
            (0xabcdef, "abcdef\r\n"),
        ];
        for &(len, want) in cases {
            let mut out = b"prev".to_vec();
            chunk_size(&mut out, len);
            assert_eq!(
                String::from_utf8(out).unwrap(),
                format!("prev{want}"),
                "{len:#x}"
            );
        }
        let mut out = Vec::new();
        chunk_size(&mut out, usize::MAX);
        let digits = std::str::from_utf8(&out)
            .unwrap()
            .strip_suffix("\r\n")
            .unwrap();
        assert_eq!(digits.len(), 2 * std::mem::size_of::<usize>());
        assert!(digits.bytes().all(|b| b == b'f'), "{digits}");
    }

    /// RFC 9112 7.1: `last-chunk trailer-section CRLF`, last-chunk being
    /// `0` CRLF. RFC 9110 6.5.1: fields that frame or route a message are
    /// not sent as trailers.
    #[test]
    fn the_last_chunk_ends_the_body_with_its_trailers() {
        for trailers in [None, Some(http::HeaderMap::new())] {
            let mut out = b"prev".to_vec();
            last_chunk(&mut out, trailers.as_ref());
            assert_eq!(out, b"prev0\r\n\r\n", "{trailers:?}");
        }
        let mut trailers = http::HeaderMap::new();
        for (name, value) in [
            ("grpc-status", "0"),
            ("content-length", "5"),
            ("x-checksum", "abc"),
            ("transfer-encoding", "chunked"),
            ("host", "a.example"),
            ("trailer", "x-checksum"),
            ("connection", "close"),
            ("x-checksum", "def"),
            ("grpc-message", ""),
        ] {
            trailers.append(
                http::HeaderName::from_static(name),
                http::HeaderValue::from_static(value),
            );
        }
        let mut out = Vec::new();
        last_chunk(&mut out, Some(&trailers));
        let text = String::from_utf8_lossy(&out).into_owned();
        assert!(out.starts_with(b"0\r\n"), "{text:?}");
        let mut fields = [httparse::EMPTY_HEADER; 16];
        let (len, fields) = match httparse::parse_headers(&out[3..], &mut fields) {
            Ok(httparse::Status::Complete(done)) => done,
            other => panic!("{text:?}: {other:?}"),
        };
        assert_eq!(3 + len, out.len(), "one empty line at the end: {text:?}");
        let mut got: Vec<(String, &[u8])> = fields
            .iter()
            .map(|f| (f.name.to_ascii_lowercase(), f.value))
            .collect();
        got.sort();
        let want: Vec<(String, &[u8])> = vec![
            ("grpc-message".into(), b""),
            ("grpc-status".into(), b"0"),
            ("x-checksum".into(), b"abc"),
            ("x-checksum".into(), b"def"),
        ];
        assert_eq!(got, want, "{text:?}");
    }
}
