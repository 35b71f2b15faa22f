//! A response body's framing undone (RFC 9112 6 and 7.1), on the bytes
//! read so far: no I/O here, so every hostile input is a plain test.
//!
//! Memory stays bounded whatever the backend sends: data is handed on as
//! it comes (never gathered), and a chunk-size line or the trailers must
//! fit in [`MAX_LINE`] and [`super::fields::MAX_HEAD`] bytes.

use bytes::{Buf, Bytes, BytesMut};
use http::HeaderMap;

use super::error::UpstreamError;
use super::fields::{headers_of, worth_parsing, Spans, MAX_HEAD, MAX_HEADERS};

/// The longest chunk-size line read (size and extensions), as a guard
/// against a backend that never ends one.
pub(crate) const MAX_LINE: usize = 4096;

/// How a body ends, from its response head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// No body (an answer to HEAD, 1xx, 204, 304).
    Empty,
    /// `Content-Length` bytes.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Whatever comes until the backend closes.
    Eof,
    /// `101 Switching Protocols`: what follows is another protocol's.
    Upgrade,
}

/// What the bytes read so far give.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step {
    Data(Bytes),
    Trailers(HeaderMap),
    /// The body has ended (what follows in the buffer is not its).
    End,
    /// More bytes are needed.
    More,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Length(u64),
    /// At a chunk-size line.
    Size,
    /// In a chunk's data, this many bytes left.
    Data(u64),
    /// After a chunk's data: its CRLF.
    DataEnd,
    /// After the last chunk: trailers, then the empty line. Once a parse
    /// found them partial, the bytes then held (see [`worth_parsing`]).
    Trailers(Option<usize>),
    Eof,
    Done,
}

/// Takes a body's framing off, a step at a time.
#[derive(Debug)]
pub(crate) struct Decoder {
    state: State,
}

impl Decoder {
    pub(crate) fn new(framing: Framing) -> Self {
        let state = match framing {
            Framing::Empty | Framing::Upgrade | Framing::Length(0) => State::Done,
            Framing::Length(n) => State::Length(n),
            Framing::Chunked => State::Size,
            Framing::Eof => State::Eof,
        };
        Decoder { state }
    }

    pub(crate) fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Bytes still to come, when known.
    pub(crate) fn remaining(&self) -> Option<u64> {
        match self.state {
            State::Length(n) => Some(n),
            State::Done => Some(0),
            _ => None,
        }
    }

    /// The next piece of the body in `buf` (taken off it).
    ///
    /// # Errors
    /// The chunked coding is broken.
    pub(crate) fn step(&mut self, buf: &mut BytesMut) -> Result<Step, UpstreamError> {
        loop {
            match self.state {
                State::Done => return Ok(Step::End),
                State::Length(left) | State::Data(left) => {
                    if buf.is_empty() {
                        return Ok(Step::More);
                    }
                    let n = usize::try_from(left).unwrap_or(usize::MAX).min(buf.len());
                    let data = buf.split_to(n).freeze();
                    let left = left - n as u64;
                    self.state = match self.state {
                        State::Length(_) if left == 0 => State::Done,
                        State::Length(_) => State::Length(left),
                        _ if left == 0 => State::DataEnd,
                        _ => State::Data(left),
                    };
                    return Ok(Step::Data(data));
                }
                State::Eof => {
                    if buf.is_empty() {
                        return Ok(Step::More);
                    }
                    return Ok(Step::Data(buf.split().freeze()));
                }
                State::DataEnd => {
                    let seen = &buf[..buf.len().min(2)];
                    if !b"\r\n".starts_with(seen) {
                        return Err(UpstreamError::Chunked("no CRLF after a chunk's data"));
                    }
                    if seen.len() < 2 {
                        return Ok(Step::More);
                    }
                    buf.advance(2);
                    self.state = State::Size;
                }
                State::Size => {
                    let Some(size) = chunk_size(buf)? else {
                        return Ok(Step::More);
                    };
                    self.state = if size == 0 {
                        State::Trailers(None)
                    } else {
                        State::Data(size)
                    };
                }
                State::Trailers(scanned) => {
                    if !worth_parsing(buf, scanned) {
                        self.state = State::Trailers(Some(buf.len()));
                        return Ok(Step::More);
                    }
                    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
                    let (len, fields) = match httparse::parse_headers(buf, &mut headers) {
                        Ok(httparse::Status::Complete((len, fields))) => (len, fields),
                        Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => {
                            return Err(UpstreamError::HeadTooLarge(MAX_HEAD));
                        }
                        Ok(httparse::Status::Partial) => {
                            self.state = State::Trailers(Some(buf.len()));
                            return Ok(Step::More);
                        }
                        Err(httparse::Error::TooManyHeaders) => {
                            return Err(UpstreamError::TooManyHeaders(MAX_HEADERS));
                        }
                        Err(_) => return Err(UpstreamError::Chunked("invalid trailers")),
                    };
                    if len > MAX_HEAD {
                        return Err(UpstreamError::HeadTooLarge(MAX_HEAD));
                    }
                    let empty = fields.is_empty();
                    let trailers = if empty {
                        None
                    } else {
                        let mut spans = Spans::new();
                        spans.record(buf, fields);
                        let bytes = buf.split_to(len).freeze();
                        Some(headers_of(&bytes, &spans, 0)?)
                    };
                    if empty {
                        buf.advance(len);
                    }
                    self.state = State::Done;
                    return Ok(match trailers {
                        Some(t) => Step::Trailers(t),
                        None => Step::End,
                    });
                }
            }
        }
    }

    /// The backend closed the connection: the end of a body read to EOF,
    /// an error for any other.
    ///
    /// # Errors
    /// The body was not complete.
    pub(crate) fn at_eof(&mut self) -> Result<Step, UpstreamError> {
        match self.state {
            State::Eof | State::Done => {
                self.state = State::Done;
                Ok(Step::End)
            }
            _ => Err(UpstreamError::Closed("in the middle of the response body")),
        }
    }

    /// The most bytes a [`Step::More`] may leave in the buffer in the
    /// present state: the bounds of the module's doc, that the property
    /// tests hold the decoder to.
    #[cfg(test)]
    pub(super) fn held_limit(&self) -> usize {
        match self.state {
            State::Size => MAX_LINE - 1,
            State::Trailers(_) => MAX_HEAD,
            State::DataEnd => 1,
            State::Length(_) | State::Data(_) | State::Eof | State::Done => 0,
        }
    }

    /// After a chunk's data, whether the body's end is already in `buf`
    /// (the usual case: the last chunk comes in the same read), so that
    /// the body says it has ended with its last data.
    pub(crate) fn end_if_buffered(&mut self, buf: &mut BytesMut) {
        const LAST: &[u8] = b"\r\n0\r\n\r\n";
        if self.state == State::DataEnd && buf.len() == LAST.len() && &buf[..] == LAST {
            buf.clear();
            self.state = State::Done;
        }
    }
}

/// A chunk-size line (hex size, extensions ignored, CRLF) taken off
/// `buf`; `None` until it is whole.
fn chunk_size(buf: &mut BytesMut) -> Result<Option<u64>, UpstreamError> {
    let Some(lf) = buf.iter().take(MAX_LINE).position(|&b| b == b'\n') else {
        if buf.len() >= MAX_LINE {
            return Err(UpstreamError::Chunked("chunk-size line too long"));
        }
        return Ok(None);
    };
    let line = &buf[..lf];
    let Some(line) = line.strip_suffix(b"\r") else {
        return Err(UpstreamError::Chunked("no CRLF after a chunk size"));
    };
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 {
        return Err(UpstreamError::Chunked("invalid chunk size"));
    }
    let mut size: u64 = 0;
    for &b in &line[..digits] {
        let digit = u64::from(
            char::from(b)
                .to_digit(16)
                .ok_or(UpstreamError::Chunked("invalid chunk size"))?,
        );
        size = size
            .checked_mul(16)
            .and_then(|s| s.checked_add(digit))
            .ok_or(UpstreamError::Chunked("chunk size overflow"))?;
    }
    // Only spaces and tabs may stand between the size and its extensions
    // (RFC 9112 7.1.1's BWS): a stray CR or form feed there is how two
    // parsers come to read one body differently.
    let rest = &line[digits..];
    let blank = rest
        .iter()
        .take_while(|&&b| b == b' ' || b == b'\t')
        .count();
    let rest = &rest[blank..];
    if !rest.is_empty() && rest[0] != b';' {
        return Err(UpstreamError::Chunked("invalid chunk size"));
    }
    if rest
        .iter()
        .any(|&b| b == b'\r' || (b < 0x20 && b != b'\t') || b == 0x7f)
    {
        return Err(UpstreamError::Chunked("invalid chunk extension"));
    }
    buf.advance(lf + 1);
    Ok(Some(size))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The body's steps as text, the buffer given whole, then EOF.
    fn decode(framing: Framing, input: &[u8]) -> Result<Vec<String>, String> {
        let mut decoder = Decoder::new(framing);
        let mut buf = BytesMut::from(input);
        let mut seen = Vec::new();
        let mut eof = false;
        loop {
            let step = decoder.step(&mut buf).map_err(|e| e.to_string())?;
            let step = match step {
                Step::More if !eof => {
                    eof = true;
                    decoder.at_eof().map_err(|e| e.to_string())?
                }
                Step::More => return Err("more after EOF".into()),
                other => other,
            };
            match step {
                Step::Data(d) => seen.push(String::from_utf8_lossy(&d).into_owned()),
                Step::Trailers(t) => {
                    let mut t: Vec<_> = t
                        .iter()
                        .map(|(k, v)| format!("{k}={}", v.to_str().unwrap()))
                        .collect();
                    t.sort();
                    seen.push(format!("trailers {}", t.join(",")));
                }
                Step::End => {
                    if !buf.is_empty() {
                        seen.push(format!("left {}", String::from_utf8_lossy(&buf)));
                    }
                    return Ok(seen);
                }
                Step::More => unreachable!(),
            }
        }
    }

    #[test]
    fn bodies_decode_as_framed() {
        /// The framing, the bytes, and the pieces or the error.
        type Case<'a> = (Framing, &'a [u8], Result<&'a [&'a str], &'a str>);
        let cases: &[Case] = &[
            (Framing::Length(5), b"hello", Ok(&["hello"])),
            (Framing::Length(3), b"abcdef", Ok(&["abc", "left def"])),
            (Framing::Empty, b"junk", Ok(&["left junk"])),
            (Framing::Eof, b"to the end", Ok(&["to the end"])),
            (Framing::Chunked, b"3\r\nabc\r\n0\r\n\r\n", Ok(&["abc"])),
            (
                Framing::Chunked,
                b"3;name=v;x\r\nabc\r\nA \t;e\r\n0123456789\r\n0\r\n\r\n",
                Ok(&["abc", "0123456789"]),
            ),
            (
                Framing::Chunked,
                b"2\r\nhi\r\n0\r\nx-sum: 2\r\nx-b: y\r\n\r\n",
                Ok(&["hi", "trailers x-b=y,x-sum=2"]),
            ),
            (Framing::Chunked, b"0\r\n\r\nGARBAGE", Ok(&["left GARBAGE"])),
            (
                Framing::Length(10),
                b"short",
                Err("the backend closed the connection in the middle of the response body"),
            ),
            (
                Framing::Chunked,
                b"5\r\nab",
                Err("the backend closed the connection in the middle of the response body"),
            ),
            (
                Framing::Chunked,
                b"zz\r\nab\r\n",
                Err("invalid chunked body: invalid chunk size"),
            ),
            (
                Framing::Chunked,
                b"3x\r\nabc\r\n",
                Err("invalid chunked body: invalid chunk size"),
            ),
            (Framing::Chunked, b"3 \t\r\nabc\r\n0\r\n\r\n", Ok(&["abc"])),
            (
                Framing::Chunked,
                b"3\r\r\nabc\r\n0\r\n\r\n",
                Err("invalid chunked body: invalid chunk size"),
            ),
            (
                Framing::Chunked,
                b"3\x0c;e\r\nabc\r\n0\r\n\r\n",
                Err("invalid chunked body: invalid chunk size"),
            ),
            (
                Framing::Chunked,
                b"ffffffffffffffffff\r\n",
                Err("invalid chunked body: chunk size overflow"),
            ),
            (
                Framing::Chunked,
                b"3\nabc\r\n0\r\n\r\n",
                Err("invalid chunked body: no CRLF after a chunk size"),
            ),
            (
                Framing::Chunked,
                b"3\r\nabcX\r\n0\r\n\r\n",
                Err("invalid chunked body: no CRLF after a chunk's data"),
            ),
            (
                Framing::Chunked,
                b"0\r\nbad trailer\r\n\r\n",
                Err("invalid chunked body: invalid trailers"),
            ),
        ];
        for (framing, input, want) in cases {
            let got = decode(*framing, input);
            let want = want
                .map(|w| w.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .map_err(str::to_string);
            assert_eq!(
                got,
                want,
                "{framing:?} {:?}",
                String::from_utf8_lossy(input)
            );
        }
    }

    /// A chunk size is 1*HEXDIG (RFC 9112 7.1) whose value fits 64 bits
    /// (leading zeros are no limit: the value is, as in nginx and
    /// HAProxy): no sign, no `0x`, no whitespace before it, only spaces and
    /// tabs after it (before extensions or the CRLF, as HAProxy takes
    /// them), the line ended by CRLF. A zero size is the last chunk: what
    /// follows its trailers is not the body's.
    #[test]
    fn chunk_sizes_are_hex_digits_of_at_most_64_bits() {
        let size = |line: &str| {
            chunk_size(&mut BytesMut::from(line.as_bytes())).map_err(|e| e.to_string())
        };
        for (line, want) in [
            ("5\r\n", 5),
            ("A\r\n", 10),
            ("aF\r\n", 0xaf),
            ("00000000000000000005\r\n", 5),
            ("ffffffffffffffff\r\n", u64::MAX),
            ("5 \t\r\n", 5),
            ("5;e=1\r\n", 5),
            ("5 ; e\r\n", 5),
        ] {
            assert_eq!(size(line), Ok(Some(want)), "{line:?}");
        }
        assert_eq!(size("5"), Ok(None), "a line not yet ended");
        for (line, want) in [
            ("10000000000000000\r\n", "chunk size overflow"),
            ("fffffffffffffffff\r\n", "chunk size overflow"),
            ("-5\r\n", "invalid chunk size"),
            ("+5\r\n", "invalid chunk size"),
            (" 5\r\n", "invalid chunk size"),
            ("\t5\r\n", "invalid chunk size"),
            ("0x5\r\n", "invalid chunk size"),
            ("\r\n", "invalid chunk size"),
            (";e\r\n", "invalid chunk size"),
            ("5 x\r\n", "invalid chunk size"),
            ("5\n", "no CRLF after a chunk size"),
        ] {
            assert_eq!(
                size(line),
                Err(format!("invalid chunked body: {want}")),
                "{line:?}"
            );
        }
        assert_eq!(
            decode(Framing::Chunked, b"3\r\nabc\r\n0\r\n\r\n0\r\n\r\n0\r\n\r\n"),
            Ok(vec![
                "abc".to_string(),
                "left 0\r\n\r\n0\r\n\r\n".to_string()
            ]),
        );
    }

    /// A chunk-size line that never ends, or trailers that never end, are
    /// refused at their limit, not gathered.
    #[test]
    fn endless_lines_stop_at_their_limit() {
        let mut decoder = Decoder::new(Framing::Chunked);
        let mut buf = BytesMut::from(&b"1"[..]);
        buf.extend_from_slice(&vec![b'0'; MAX_LINE]);
        assert!(matches!(
            decoder.step(&mut buf),
            Err(UpstreamError::Chunked("chunk-size line too long"))
        ));
        let mut decoder = Decoder::new(Framing::Chunked);
        let mut buf = BytesMut::from(&b"0\r\nx-a: "[..]);
        buf.extend_from_slice(&vec![b'a'; MAX_HEAD]);
        assert!(matches!(
            decoder.step(&mut buf),
            Err(UpstreamError::HeadTooLarge(_))
        ));
    }

    /// Fed a byte at a time, a chunked body gives the same data.
    #[test]
    fn a_chunked_body_split_anywhere_decodes_the_same() {
        let input = b"3;e=1\r\nabc\r\n2\r\nde\r\n0\r\nx-t: 1\r\n\r\n";
        let mut decoder = Decoder::new(Framing::Chunked);
        let mut buf = BytesMut::new();
        let mut data = Vec::new();
        let mut trailers = None;
        for &b in input {
            buf.extend_from_slice(&[b]);
            loop {
                match decoder.step(&mut buf).unwrap() {
                    Step::Data(d) => data.extend_from_slice(&d),
                    Step::Trailers(t) => trailers = Some(t),
                    Step::End | Step::More => break,
                }
            }
        }
        assert!(decoder.is_done());
        assert_eq!(data, b"abcde");
        assert_eq!(trailers.unwrap()["x-t"], "1");
    }

    /// Trailers sent a byte at a time: many fields are read whole at their
    /// empty line, and one that never ends is refused at the byte that
    /// takes it past [`MAX_HEAD`], not before and not later.
    #[test]
    fn trailers_a_byte_at_a_time_end_at_their_empty_line_or_the_limit() {
        let mut wire = b"0\r\n".to_vec();
        for i in 0..60 {
            wire.extend_from_slice(format!("x-t{i}: {i}\r\n").as_bytes());
        }
        wire.extend_from_slice(b"x-lf: 1\n\r\nnext");
        let mut decoder = Decoder::new(Framing::Chunked);
        let mut buf = BytesMut::new();
        let mut trailers = None;
        for (at, &b) in wire.iter().enumerate() {
            buf.extend_from_slice(&[b]);
            match decoder.step(&mut buf).unwrap() {
                Step::Trailers(t) => {
                    assert_eq!(at, wire.len() - 5, "at the empty line's last byte");
                    trailers = Some(t);
                    break;
                }
                step => assert_eq!(step, Step::More),
            }
        }
        let trailers = trailers.expect("trailers");
        assert_eq!(trailers.len(), 61);
        assert_eq!(trailers["x-t59"], "59");
        assert_eq!(trailers["x-lf"], "1");
        assert_eq!(decoder.step(&mut buf).unwrap(), Step::End);

        let mut decoder = Decoder::new(Framing::Chunked);
        let mut buf = BytesMut::from(&b"0\r\nx-a: "[..]);
        assert_eq!(decoder.step(&mut buf).unwrap(), Step::More);
        loop {
            buf.extend_from_slice(b"a");
            match decoder.step(&mut buf) {
                Ok(Step::More) => assert!(buf.len() <= MAX_HEAD),
                Err(UpstreamError::HeadTooLarge(_)) => break,
                other => panic!("{other:?} with {} bytes held", buf.len()),
            }
        }
        assert_eq!(buf.len(), MAX_HEAD + 1);
    }

    /// Trailers of exactly [`MAX_HEAD`] bytes are read, whole or still
    /// coming; one byte more is refused.
    #[test]
    fn trailers_may_take_max_head_bytes_and_no_more() {
        use super::super::fields::padded_head;
        let at_trailers = || {
            let mut decoder = Decoder::new(Framing::Chunked);
            assert_eq!(
                decoder.step(&mut BytesMut::from(&b"0\r\n"[..])).unwrap(),
                Step::More
            );
            decoder
        };
        // Parsed after an earlier read found them partial (`step`), or at
        // once, in the read that ended the body's chunks (`step_at_once`).
        let step = |len, whole| at_trailers().step(&mut padded_head(b"", len, whole));
        let step_at_once = |len, whole| {
            let mut buf = BytesMut::from(&b"0\r\n"[..]);
            buf.extend_from_slice(&padded_head(b"", len, whole));
            Decoder::new(Framing::Chunked).step(&mut buf)
        };
        for step in [&step as &dyn Fn(usize, bool) -> _, &step_at_once] {
            assert!(matches!(step(MAX_HEAD, true), Ok(Step::Trailers(_))));
            assert!(matches!(step(MAX_HEAD, false), Ok(Step::More)));
            for whole in [true, false] {
                assert!(
                    matches!(
                        step(MAX_HEAD + 1, whole),
                        Err(UpstreamError::HeadTooLarge(_))
                    ),
                    "whole: {whole}"
                );
            }
        }
    }

    /// A chunk extension holds no control character: a CR, another
    /// control byte or DEL in it is refused (a tab is whitespace).
    #[test]
    fn chunk_extensions_refuse_control_bytes() {
        let body = |ext: &[u8]| {
            let mut input = b"3;".to_vec();
            input.extend_from_slice(ext);
            input.extend_from_slice(b"\r\nabc\r\n0\r\n\r\n");
            decode(Framing::Chunked, &input)
        };
        assert_eq!(body(b"a=\tb"), Ok(vec!["abc".to_string()]));
        for bad in [&b"a\rb"[..], b"a\x01b", b"a\x7fb"] {
            assert_eq!(
                body(bad),
                Err("invalid chunked body: invalid chunk extension".to_string()),
                "{bad:?}"
            );
        }
    }

    /// What is left is known for a length and for no body, and counts down
    /// as the data is taken; a chunked body or one read to EOF says
    /// nothing (the body's size hint: its client's framing).
    #[test]
    fn remaining_counts_down_a_known_length_only() {
        let mut decoder = Decoder::new(Framing::Length(5));
        assert_eq!(decoder.remaining(), Some(5));
        decoder.step(&mut BytesMut::from(&b"abc"[..])).unwrap();
        assert_eq!(decoder.remaining(), Some(2));
        decoder.step(&mut BytesMut::from(&b"de"[..])).unwrap();
        assert!(decoder.is_done());
        assert_eq!(decoder.remaining(), Some(0));
        assert_eq!(Decoder::new(Framing::Empty).remaining(), Some(0));
        assert_eq!(Decoder::new(Framing::Chunked).remaining(), None);
        assert_eq!(Decoder::new(Framing::Eof).remaining(), None);
    }

    #[test]
    fn the_last_chunk_in_the_same_read_ends_the_body_with_its_data() {
        let mut decoder = Decoder::new(Framing::Chunked);
        let mut buf = BytesMut::from(&b"2\r\nhi\r\n0\r\n\r\n"[..]);
        assert_eq!(
            decoder.step(&mut buf).unwrap(),
            Step::Data(Bytes::from_static(b"hi"))
        );
        decoder.end_if_buffered(&mut buf);
        assert!(decoder.is_done());
        assert!(buf.is_empty());
    }
}
