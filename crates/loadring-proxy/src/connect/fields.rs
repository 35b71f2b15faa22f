//! Header fields parsed by httparse, made a `HeaderMap` whose values
//! share the bytes they were read from (not copied): for a response head
//! and for a chunked body's trailers. A field's line as the gateway
//! writes one, to a backend or to a client. And whether a head is worth
//! parsing yet ([`worth_parsing`]: its end may have come).

use bytes::{BufMut, Bytes};
use http::header::HeaderValue;
use http::HeaderMap;

use super::error::UpstreamError;
use super::known_names::Known;
use super::names::header_name;

/// The longest response head (or trailers) read.
pub(crate) const MAX_HEAD: usize = 64 * 1024;
/// The most header fields read in a head (hyper's default).
pub(crate) const MAX_HEADERS: usize = 100;

/// Whether a head (or trailers) in `buf` is worth parsing: at once when no
/// parse has found it partial yet (`scanned` is `None`); after one did
/// (`scanned`: the bytes held then), only once its end may have come in
/// the bytes since ([`ends_head`]) or it has grown past [`MAX_HEAD`] (to be
/// refused). A peer sending a head a byte at a time so costs a look at
/// each byte, not a parse of all so far at each (quadratic in its length).
pub(crate) fn worth_parsing(buf: &[u8], scanned: Option<usize>) -> bool {
    scanned.is_none_or(|from| buf.len() > MAX_HEAD || ends_head(buf, from))
}

/// Whether `buf` holds the end of a head or trailers (an empty line: the
/// first line, or one after a line's end) at or after `from`, less the two
/// bytes before it that may belong to the line's end.
pub(crate) fn ends_head(buf: &[u8], from: usize) -> bool {
    // Usually a whole head came in one read, and nothing after it.
    if buf.ends_with(b"\n\r\n") || buf.ends_with(b"\n\n") {
        return true;
    }
    // Trailers may be none: their section is the empty line alone.
    if from < 2 && (buf.starts_with(b"\n") || buf.starts_with(b"\r\n")) {
        return true;
    }
    let start = from.saturating_sub(2).min(buf.len());
    buf[start..].iter().enumerate().any(|(i, &b)| {
        b == b'\n' && {
            let rest = &buf[start + i + 1..];
            rest.starts_with(b"\n") || rest.starts_with(b"\r\n")
        }
    })
}

/// Where each field's name and value lie in the bytes they were parsed
/// from: offsets, so that the parse's borrow of the buffer can end before
/// the head is split off it. A head's usual few fields are kept on the
/// stack (no allocation, and only [`INLINE`] entries to clear), the rest
/// of a long one in a vector.
#[derive(Debug, Clone)]
pub(crate) struct Spans {
    /// Name start, name end, value start, value end.
    inline: [[u32; 4]; INLINE],
    more: Vec<[u32; 4]>,
    len: usize,
    /// The [`Known`] names among them.
    known: u16,
}

/// The fields of a head kept on the stack.
const INLINE: usize = 16;

impl Spans {
    /// No fields yet.
    pub(crate) fn new() -> Self {
        Spans {
            inline: [[0; 4]; INLINE],
            more: Vec::new(),
            len: 0,
            known: 0,
        }
    }

    /// Where `fields` (parsed from `buf`, at most [`MAX_HEADERS`], within
    /// [`MAX_HEAD`] bytes) lie in it, in place of what was noted before.
    /// Filled where it lies rather than returned: a call's result would be
    /// copied out, all its 288 bytes.
    pub(crate) fn record(&mut self, buf: &[u8], fields: &[httparse::Header<'_>]) {
        let base = buf.as_ptr() as usize;
        let at = |part: &[u8]| {
            let start = part.as_ptr() as usize - base;
            // Within MAX_HEAD bytes, checked before.
            let start = u32::try_from(start).unwrap_or(u32::MAX);
            let end = start.saturating_add(u32::try_from(part.len()).unwrap_or(u32::MAX));
            (start, end)
        };
        self.more.clear();
        self.more.reserve(fields.len().saturating_sub(INLINE));
        self.len = fields.len();
        let mut known = 0;
        for (i, field) in fields.iter().enumerate() {
            known |= Known::bit(field.name.as_bytes());
            let (name_start, name_end) = at(field.name.as_bytes());
            let (value_start, value_end) = at(field.value);
            let span = [name_start, name_end, value_start, value_end];
            match self.inline.get_mut(i) {
                Some(slot) => *slot = span,
                None => self.more.push(span),
            }
        }
        self.known = known;
    }

    /// Which [`Known`] names the fields have.
    pub(crate) fn known(&self) -> u16 {
        self.known
    }

    /// How many fields were noted.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Field `i`'s name start, name end, value start and value end.
    pub(crate) fn get(&self, i: usize) -> Option<&[u32; 4]> {
        if i >= self.len {
            return None;
        }
        match self.inline.get(i) {
            Some(span) => Some(span),
            None => self.more.get(i - INLINE),
        }
    }

    /// Each field's name start, name end, value start and value end, in
    /// order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &[u32; 4]> {
        self.inline[..self.len.min(INLINE)].iter().chain(&self.more)
    }
}

/// The fields at `spans` of `bytes`, their values sharing `bytes` (not
/// copied), in a map with room for `room` more fields: a request's map is
/// given the fields the gateway adds (`X-Forwarded-For`, `Host`) without
/// growing, which would allocate and copy it again on every request.
///
/// # Errors
/// A name that is not a header name, or a value that is not a header
/// value.
pub(crate) fn headers_of(
    bytes: &Bytes,
    spans: &Spans,
    room: usize,
) -> Result<HeaderMap, UpstreamError> {
    headers_from(bytes, spans.iter(), spans.len + room)
}

/// The fields at `spans` of `bytes`, as [`headers_of`], in a map with room
/// for `capacity` fields.
///
/// # Errors
/// As [`headers_of`].
pub(crate) fn headers_from<'s>(
    bytes: &Bytes,
    spans: impl Iterator<Item = &'s [u32; 4]>,
    capacity: usize,
) -> Result<HeaderMap, UpstreamError> {
    let mut map = HeaderMap::with_capacity(capacity);
    for &[name_start, name_end, value_start, value_end] in spans {
        let name_bytes = bytes
            .get(name_start as usize..name_end as usize)
            .unwrap_or_default();
        let name = header_name(name_bytes).map_err(|_| {
            UpstreamError::InvalidHead(format!(
                "header name {:?}",
                String::from_utf8_lossy(name_bytes)
            ))
        })?;
        let range = value_start as usize..value_end as usize;
        if range.end > bytes.len() {
            return Err(UpstreamError::InvalidHead(format!("value of {name}")));
        }
        let value = HeaderValue::from_maybe_shared(bytes.slice(range))
            .map_err(|_| UpstreamError::InvalidHead(format!("value of {name}")))?;
        map.append(name, value);
    }
    Ok(map)
}

/// Appends the field line `name: value` and its CRLF, the name in lower
/// case (a map's names are; a raw head's as they were spelled), to a head
/// or trailers being written.
pub(crate) fn put_field<B: BufMut + AsMut<[u8]>>(out: &mut B, name: &[u8], value: &[u8]) {
    let at = out.as_mut().len();
    out.put_slice(name);
    if let Some(written) = out.as_mut().get_mut(at..) {
        written.make_ascii_lowercase();
    }
    out.put_slice(b": ");
    out.put_slice(value);
    out.put_slice(b"\r\n");
}

/// `start` then one field, `x-pad: aaa…`, `len` bytes in all, with the
/// empty line that ends a head (or trailers) or not: a head of an exact
/// size, for the tests of the limit [`MAX_HEAD`].
#[cfg(test)]
pub(super) fn padded_head(start: &[u8], len: usize, whole: bool) -> bytes::BytesMut {
    let end = if whole { 4 } else { 0 };
    let mut head = start.to_vec();
    head.extend_from_slice(b"x-pad: ");
    head.resize(len - end, b'a');
    if whole {
        head.extend_from_slice(b"\r\n\r\n");
    }
    bytes::BytesMut::from(&head[..])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A head of `n` fields, parsed, made a map: every field, in order,
    /// whether it was kept on the stack or past it.
    #[test]
    fn every_field_of_short_and_long_heads_is_kept_in_order() {
        for n in [
            0,
            1,
            INLINE - 1,
            INLINE,
            INLINE + 1,
            2 * INLINE + 3,
            MAX_HEADERS,
        ] {
            let mut head = String::from("HTTP/1.1 200 OK\r\n");
            for i in 0..n {
                head.push_str(&format!("x-f{i}: v{i}\r\n"));
            }
            head.push_str("\r\n");
            let bytes = Bytes::from(head);
            let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut response = httparse::Response::new(&mut fields);
            assert!(response.parse(&bytes).unwrap().is_complete());
            let mut spans = Spans::new();
            spans.record(&bytes, response.headers);
            let map = headers_of(&bytes, &spans, 0).unwrap();
            let got: Vec<(String, String)> = map
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_owned()))
                .collect();
            let want: Vec<(String, String)> = (0..n)
                .map(|i| (format!("x-f{i}"), format!("v{i}")))
                .collect();
            assert_eq!(got, want, "{n} fields");
        }
    }

    /// Fed a byte at a time, a head parsed only when [`worth_parsing`] says
    /// so is found whole at the same byte as one parsed at
    /// every byte, with a parse per line end at most.
    #[test]
    fn a_head_fed_a_byte_at_a_time_is_parsed_once_its_end_is_in() {
        let heads: [&[u8]; 6] = [
            b"HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\n\r\nbody",
            b"HTTP/1.1 200 OK\nA: 1\n\nbody",
            b"HTTP/1.1 204 No\r\nA: 1\n\r\n",
            b"HTTP/1.1 200 OK\r\nA:1\r\nB:\r\n\r\n",
            b"\r\n\r\nHTTP/1.1 200 OK\r\n\r\n",
            b"HTTP/1.1 200 OK\r\n\r\n",
        ];
        let whole = |buf: &[u8]| {
            let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let parsed = httparse::Response::new(&mut fields).parse(buf);
            matches!(parsed, Ok(httparse::Status::Complete(_)))
        };
        for head in heads {
            let every = (1..=head.len()).find(|&n| whole(&head[..n]));
            let (mut scanned, mut parses, mut guarded) = (None, 0, None);
            for n in 1..=head.len() {
                if worth_parsing(&head[..n], scanned) {
                    parses += 1;
                    if whole(&head[..n]) {
                        guarded = Some(n);
                        break;
                    }
                }
                scanned = Some(n);
            }
            let text = String::from_utf8_lossy(head);
            assert!(every.is_some(), "{text:?}");
            assert_eq!(guarded, every, "{text:?}");
            let lines = head.iter().filter(|&&b| b == b'\n').count();
            assert!(parses <= lines, "{parses} parses of {text:?}");
        }
    }

    /// Where the scan starts: the two bytes before `from` may end a line
    /// that the new bytes end the head after; a `from` past the end (a
    /// buffer that shrank) is the end.
    #[test]
    fn the_end_is_looked_for_from_two_bytes_before_the_new_ones() {
        assert!(ends_head(b"A: 1\r\n\r\nx", 5));
        assert!(ends_head(b"A: 1\n\nx", 5));
        assert!(!ends_head(b"A: 1\r\n\r\nx", 9));
        assert!(!ends_head(b"A: 1\r\nB", 0));
        assert!(ends_head(b"A: 1\r\n\r\n", 100));
        assert!(!ends_head(b"A: 1\r\n\r\nx", 100));
        // An empty section: the empty line first.
        assert!(ends_head(b"\r\n", 1));
        assert!(ends_head(b"\nx", 0));
        assert!(!ends_head(b"\r\nx", 2));
        assert!(!ends_head(b"\r", 0));
    }

    /// A head is parsed at once the first time; after a partial parse,
    /// once its end may have come or it is too long to keep.
    #[test]
    fn a_head_is_worth_parsing_first_then_at_its_end_or_past_the_limit() {
        assert!(worth_parsing(b"GET / HTTP/1.1\r\nA", None));
        assert!(!worth_parsing(b"GET / HTTP/1.1\r\nA", Some(10)));
        assert!(worth_parsing(b"GET / HTTP/1.1\r\nA: 1\r\n\r\n", Some(10)));
        let long = vec![b'a'; MAX_HEAD + 1];
        assert!(!worth_parsing(&long[..MAX_HEAD], Some(MAX_HEAD - 1)));
        assert!(worth_parsing(&long, Some(MAX_HEAD)));
    }
}
