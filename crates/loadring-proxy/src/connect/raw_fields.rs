//! A head's header fields kept as they came: the bytes, where each field
//! lies in them, which fields the gateway removed and which it added. No
//! `HeaderMap` is built for them.
//!
//! Most requests and answers go between an HTTP/1.1 client and an
//! HTTP/1.1 backend, and what the gateway does with their fields is a few
//! questions (framing, hop-by-hop fields, a key, the host) and writing
//! them out again. A map costs more than all of that: hashing and
//! inserting each field, two allocations, dropping it. Here a question is
//! a scan of a few names, a removal a bit in a mask, and the fields are
//! written from the bytes they were read in. [`RawFields::into_map`]
//! makes the usual map when one is needed (an HTTP/2 peer, a WebSocket
//! switch, a gRPC call, a load report).
//!
//! Names are compared without regard to case, as HTTP's are (RFC 9110
//! 5.1); a name asked about is given in lower case.

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};
use http::HeaderMap;

use super::error::UpstreamError;
use super::fields::{headers_from, headers_of, Spans, MAX_HEADERS};
use super::known_names::{is_spelled, Known};
use crate::hop_by_hop;

/// A head's fields as read: see the module's documentation.
#[derive(Debug, Clone)]
pub(crate) struct RawFields {
    /// The head's bytes, from its first line to its empty line.
    bytes: Bytes,
    /// Where each field lies in `bytes`.
    spans: Spans,
    /// Bit `i`: field `i` was removed.
    removed: u128,
    /// Fields the gateway added, written after the others.
    added: Vec<(HeaderName, HeaderValue)>,
    /// Which of the [`Known`] names the fields have.
    seen: u16,
}

// A field's index must fit the mask.
const _: () = assert!(MAX_HEADERS <= u128::BITS as usize);

impl RawFields {
    /// The fields of the head parsed off `bytes` (split off a connection's
    /// buffer), at `spans` in them.
    pub(crate) fn new(bytes: Bytes, spans: Spans) -> Self {
        RawFields {
            bytes,
            seen: spans.known(),
            spans,
            removed: 0,
            added: Vec::new(),
        }
    }

    /// How many fields there are now.
    pub(crate) fn len(&self) -> usize {
        self.spans.len() - self.removed.count_ones() as usize + self.added.len()
    }

    /// Notes which [`Known`] names the fields have now.
    fn note_known(&mut self) {
        let mut seen = 0;
        self.for_each_field(|name, _| seen |= Known::bit(name));
        self.seen = seen;
    }

    /// The fields as they are now, in order: those read that were not
    /// removed, then those added. Names as they were spelled.
    #[cfg(test)]
    pub(crate) fn fields(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        let bytes = &self.bytes[..];
        let removed = self.removed;
        self.spans
            .iter()
            .enumerate()
            .filter(move |(i, _)| removed & (1u128 << i) == 0)
            .filter_map(move |(_, span)| field_at(bytes, span))
            .chain(
                self.added
                    .iter()
                    .map(|(name, value)| (name.as_str().as_bytes(), value.as_bytes())),
            )
    }

    /// Calls `each` with the fields [`fields`](Self::fields) gives, in
    /// order. (Every head is read this way, several times: a loop of its
    /// own costs less than the iterator's chain.)
    pub(crate) fn for_each_field(&self, mut each: impl FnMut(&[u8], &[u8])) {
        self.for_each_kept(|_, name, value| each(name, value));
        for (name, value) in &self.added {
            each(name.as_str().as_bytes(), value.as_bytes());
        }
    }

    /// Calls `each` with the fields read and not removed, and their index.
    fn for_each_kept(&self, mut each: impl FnMut(usize, &[u8], &[u8])) {
        let bytes = &self.bytes[..];
        let removed = self.removed;
        self.spans.iter().enumerate().for_each(|(i, span)| {
            if removed & (1u128 << i) == 0 {
                if let Some((name, value)) = field_at(bytes, span) {
                    each(i, name, value);
                }
            }
        });
    }

    /// The values of the fields named `name` (lower case), in order.
    pub(crate) fn get_all<'a>(&'a self, name: &'a str) -> RawValues<'a> {
        RawValues {
            fields: self,
            name: name.as_bytes(),
            // A known name the fields lack: nothing to look at.
            next: if self.lacks(name) { usize::MAX } else { 0 },
        }
    }

    /// Whether `name` (lower case) is a [`Known`] name none of the fields
    /// has.
    fn lacks(&self, name: &str) -> bool {
        let bit = Known::bit(name.as_bytes());
        bit != 0 && bit != Known::OTHER_HOP_BY_HOP && self.seen & bit == 0
    }

    /// Whether a field is named `name` (lower case).
    pub(crate) fn contains(&self, name: &str) -> bool {
        let bit = Known::bit(name.as_bytes());
        if bit != 0 && bit != Known::OTHER_HOP_BY_HOP {
            return self.seen & bit != 0;
        }
        self.get_all(name).next().is_some()
    }

    /// Removes every field named `name` (lower case).
    pub(crate) fn remove(&mut self, name: &str) {
        if self.lacks(name) {
            return;
        }
        let mut removed = self.removed;
        let bytes = &self.bytes[..];
        for (i, span) in self.spans.iter().enumerate() {
            // Told apart by length first, as `get_all` does.
            if span[1].wrapping_sub(span[0]) as usize != name.len() || removed & (1u128 << i) != 0 {
                continue;
            }
            if field_at(bytes, span).is_some_and(|(n, _)| is_spelled(n, name.as_bytes())) {
                removed |= 1u128 << i;
            }
        }
        let added = self.added.len();
        self.added.retain(|(n, _)| n.as_str() != name);
        // Most removals (and every `set` of a new name) find nothing: the
        // names noted stand.
        if removed != self.removed || added != self.added.len() {
            self.removed = removed;
            self.note_known();
        }
    }

    /// Makes `value` the one field named `name`.
    pub(crate) fn set(&mut self, name: HeaderName, value: HeaderValue) {
        self.remove(name.as_str());
        self.seen |= Known::bit(name.as_str().as_bytes());
        self.added.push((name, value));
    }

    /// Removes the hop-by-hop fields, and those `Connection` names, as
    /// [`strip_hop_by_hop`](crate::hop_by_hop::strip_hop_by_hop) does a
    /// map's.
    pub(crate) fn strip_hop_by_hop(&mut self) {
        // Most heads have none of these names: nothing to look at.
        if self.seen & Known::HOP_BY_HOP == 0 {
            return;
        }
        // Element by element: one that is no name (not ASCII) matches no
        // field, and the others are still honoured.
        let named: Vec<Vec<u8>> = self
            .get_all("connection")
            .flat_map(crate::field_list::elements)
            .map(<[u8]>::to_vec)
            .collect();
        let goes = |name: &[u8]| {
            hop_by_hop::is_hop_by_hop_spelling(name)
                || named.iter().any(|n| name.eq_ignore_ascii_case(n))
        };
        // One pass, the known names noted once after it.
        let mut removed = self.removed;
        self.for_each_kept(|i, name, _| {
            if goes(name) {
                removed |= 1u128 << i;
            }
        });
        self.removed = removed;
        self.added
            .retain(|(name, _)| !goes(name.as_str().as_bytes()));
        self.note_known();
    }

    /// The bytes of `part` (a name or value these fields gave) shared with
    /// the head's (a reference count, no copy); `None` for a part of a
    /// field the gateway added.
    pub(crate) fn shared(&self, part: &[u8]) -> Option<Bytes> {
        let start = (part.as_ptr() as usize).checked_sub(self.bytes.as_ptr() as usize)?;
        let end = start.checked_add(part.len())?;
        (end <= self.bytes.len()).then(|| self.bytes.slice(start..end))
    }

    /// The usual map: the fields as [`fields`](Self::fields) gives them.
    ///
    /// # Errors
    /// A name or value the `http` crate refuses (a parse of the head lets
    /// through the same bytes it does: none, in practice).
    pub(crate) fn into_map(self) -> Result<HeaderMap, UpstreamError> {
        let removed = self.removed;
        let mut headers = if removed == 0 {
            headers_of(&self.bytes, &self.spans, self.added.len())?
        } else {
            let kept = self
                .spans
                .iter()
                .enumerate()
                .filter(|(i, _)| removed & (1u128 << i) == 0)
                .map(|(_, span)| span);
            let capacity = self.spans.len() - removed.count_ones() as usize + self.added.len();
            headers_from(&self.bytes, kept, capacity)?
        };
        for (name, value) in self.added {
            headers.append(name, value);
        }
        Ok(headers)
    }
}

/// The values of one name: see [`RawFields::get_all`].
#[derive(Debug, Clone)]
pub(crate) struct RawValues<'a> {
    fields: &'a RawFields,
    name: &'a [u8],
    /// The next field to look at: the head's, then those added.
    next: usize,
}

impl<'a> Iterator for RawValues<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let fields = self.fields;
        let read = fields.spans.len();
        let bytes = &fields.bytes[..];
        while self.next < read {
            let i = self.next;
            self.next += 1;
            let Some(span) = fields.spans.get(i) else {
                break;
            };
            // Most fields are another name's, of another length: told
            // apart by their span alone.
            if span[1].wrapping_sub(span[0]) as usize != self.name.len()
                || fields.removed & (1u128 << i) != 0
            {
                continue;
            }
            match field_at(bytes, span) {
                Some((name, value)) if is_spelled(name, self.name) => return Some(value),
                _ => {}
            }
        }
        while let Some((name, value)) = fields.added.get(self.next - read) {
            self.next += 1;
            if name.as_str().as_bytes() == self.name {
                return Some(value.as_bytes());
            }
        }
        None
    }
}

/// The name and value at `span` of `bytes`.
fn field_at<'b>(bytes: &'b [u8], span: &[u32; 4]) -> Option<(&'b [u8], &'b [u8])> {
    let &[name_start, name_end, value_start, value_end] = span;
    let name = bytes.get(name_start as usize..name_end as usize)?;
    let value = bytes.get(value_start as usize..value_end as usize)?;
    Some((name, value))
}

/// The fields of the response head `text` (tests), at their places.
#[cfg(test)]
pub(crate) fn read(text: &str) -> RawFields {
    let bytes = Bytes::copy_from_slice(text.as_bytes());
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut parsed = httparse::Response::new(&mut fields);
    let httparse::Status::Complete(len) = parsed.parse(&bytes).expect("a valid head") else {
        panic!("a whole head: {text:?}");
    };
    let mut spans = Spans::new();
    spans.record(&bytes, parsed.headers);
    RawFields::new(bytes.slice(..len), spans)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names_and_values(head: &RawFields) -> Vec<(String, String)> {
        head.fields()
            .map(|(n, v)| {
                (
                    String::from_utf8_lossy(n).into_owned(),
                    String::from_utf8_lossy(v).into_owned(),
                )
            })
            .collect()
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn fields_come_as_they_were_spelled_in_order() {
        let head = read("HTTP/1.1 200 OK\r\nX-One: 1\r\ncontent-length: 2\r\nX-ONE: 3\r\n\r\n");
        assert_eq!(
            names_and_values(&head),
            pairs(&[("X-One", "1"), ("content-length", "2"), ("X-ONE", "3")])
        );
        let ones: Vec<&[u8]> = head.get_all("x-one").collect();
        assert_eq!(ones, [&b"1"[..], b"3"]);
        assert!(head.contains("content-length"));
        assert!(!head.contains("content-type"));
    }

    #[test]
    fn a_removal_takes_every_spelling_and_a_set_replaces_all() {
        let mut head =
            read("HTTP/1.1 200 OK\r\nKeep-Alive: a\r\nx: 1\r\nkeep-alive: b\r\nLength: 9\r\n\r\n");
        head.remove("keep-alive");
        assert_eq!(
            names_and_values(&head),
            pairs(&[("x", "1"), ("Length", "9")])
        );
        head.set(
            HeaderName::from_static("length"),
            HeaderValue::from_static("4"),
        );
        head.set(
            HeaderName::from_static("length"),
            HeaderValue::from_static("5"),
        );
        assert_eq!(
            names_and_values(&head),
            pairs(&[("x", "1"), ("length", "5")])
        );
        head.remove("length");
        assert_eq!(names_and_values(&head), pairs(&[("x", "1")]));
    }

    #[test]
    fn the_map_made_holds_what_the_fields_say() {
        let mut head = read("HTTP/1.0 404 Not Found\r\nA: 1\r\nB: 2\r\na: 3\r\nC: 4\r\n\r\n");
        let untouched = read("HTTP/1.0 404 Not Found\r\nA: 1\r\nB: 2\r\na: 3\r\nC: 4\r\n\r\n")
            .into_map()
            .unwrap();
        assert_eq!(untouched.get_all("a").iter().count(), 2);
        assert_eq!(untouched.len(), 4);
        head.remove("b");
        head.set(HeaderName::from_static("d"), HeaderValue::from_static("5"));
        let map = head.into_map().unwrap();
        let got: Vec<(String, String)> = map
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_str().unwrap().to_owned()))
            .collect();
        assert_eq!(
            got,
            pairs(&[("a", "1"), ("a", "3"), ("c", "4"), ("d", "5")])
        );
    }

    #[test]
    fn the_last_field_a_head_may_have_can_be_removed() {
        let mut text = String::from("HTTP/1.1 200 OK\r\n");
        for i in 0..MAX_HEADERS {
            text.push_str(&format!("f{i}: {i}\r\n"));
        }
        text.push_str("\r\n");
        let mut head = read(&text);
        let last = format!("f{}", MAX_HEADERS - 1);
        head.remove(&last);
        head.remove("f0");
        assert_eq!(head.fields().count(), MAX_HEADERS - 2);
        assert!(!head.contains(&last) && !head.contains("f0") && head.contains("f1"));
        assert_eq!(head.into_map().unwrap().len(), MAX_HEADERS - 2);
    }

    /// Names a head may have: every one asked about, in several
    /// spellings, and others of the same lengths.
    const NAMES: [&str; 28] = [
        "Transfer-Encoding",
        "transfer-encodinG",
        "Content-Length",
        "content-length",
        "Connection",
        "CONNECTION",
        "Keep-Alive",
        "keep-alive",
        "Proxy-Connection",
        "Proxy-Authenticate",
        "Proxy-Authorization",
        "TE",
        "te",
        "Trailer",
        "Upgrade",
        "Date",
        "X-Backend",
        "x-session-hop",
        "X-Session-Hop",
        // Of the lengths of the names asked about, but others.
        "connectiom",
        "tf",
        "Upgrad3",
        "x-forwarded-proto",
        "accept-charset",
        "content-language",
        "proxy-authenticatf",
        "proxy-authorizatioM",
        "transfer-encodinh",
    ];

    fn arbitrary_head() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let value = prop::sample::select(vec![
            "1",
            "close",
            "keep-alive, x-session-hop",
            "x-session-hop, Trailer",
            "chunked",
            "caf\u{e9}",
        ]);
        prop::collection::vec((prop::sample::select(NAMES.to_vec()), value), 0..8).prop_map(
            |fields| {
                let mut text = String::from("HTTP/1.1 200 OK\r\n");
                for (name, value) in fields {
                    text.push_str(&format!("{name}: {value}\r\n"));
                }
                text.push_str("\r\n");
                text
            },
        )
    }

    proptest::proptest! {
        /// A raw head answers as the map made of it does: whether it has
        /// a name (any spelling, after removals and sets), and what is
        /// left once its hop-by-hop fields are stripped.
        #[test]
        fn a_raw_head_says_what_its_map_says(
            text in arbitrary_head(),
            removed in proptest::sample::subsequence(NAMES.to_vec(), 0..3),
            set in proptest::option::of(proptest::sample::select(NAMES.to_vec())),
        ) {
            let mut head = read(&text);
            let mut map = read(&text).into_map().unwrap();
            for name in &removed {
                let lower = name.to_ascii_lowercase();
                head.remove(&lower);
                map.remove(lower.as_str());
            }
            if let Some(name) = set {
                let name = HeaderName::from_bytes(name.as_bytes()).unwrap();
                head.set(name.clone(), HeaderValue::from_static("7"));
                map.insert(name, HeaderValue::from_static("7"));
            }
            for name in NAMES {
                let lower = name.to_ascii_lowercase();
                proptest::prop_assert_eq!(
                    head.contains(&lower),
                    map.contains_key(lower.as_str()),
                    "{} in {:?}", lower, text
                );
            }
            head.strip_hop_by_hop();
            crate::hop_by_hop::strip_hop_by_hop(&mut map);
            let mut got: Vec<(String, String)> = head
                .into_map()
                .unwrap()
                .iter()
                .map(|(n, v)| (n.to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
                .collect();
            let mut want: Vec<(String, String)> = map
                .iter()
                .map(|(n, v)| (n.to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
                .collect();
            got.sort();
            want.sort();
            proptest::prop_assert_eq!(got, want, "{:?}", text);
        }
    }
}
