//! A request's header fields as the gateway holds them: as an HTTP/1.1
//! client sent them ([`RawFields`]: no map built), or a map (an HTTP/2
//! client's, which hyper reads, or one made when a map is needed).
//!
//! The questions a request is asked (its host, its key, its framing, its
//! hop-by-hop fields) and the changes made to it (`X-Forwarded-For`,
//! `Host`) are asked and made here alike for both; a map is made of raw
//! fields only for an HTTP/2 backend ([`Fields::into_map`]).

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};
use http::HeaderMap;

use super::error::UpstreamError;
use super::raw_fields::{RawFields, RawValues};
use crate::{few_headers, hop_by_hop};

/// See the module's documentation.
#[derive(Debug, Clone)]
pub(crate) enum Fields {
    /// As an HTTP/1.1 client sent them. Boxed: a request's head is moved
    /// on its way to the backend, and each move copies what is not.
    Raw(Box<RawFields>),
    Map(HeaderMap),
}

/// One value of a field.
#[derive(Debug, Clone, Copy)]
pub(crate) enum FieldValue<'a> {
    Map(&'a HeaderValue),
    /// The value's bytes, and the fields they are read from.
    Raw(&'a [u8], &'a RawFields),
}

impl<'a> FieldValue<'a> {
    pub(crate) fn as_bytes(&self) -> &'a [u8] {
        match self {
            FieldValue::Map(value) => value.as_bytes(),
            FieldValue::Raw(value, _) => value,
        }
    }

    /// The value as text when it is visible ASCII, spaces and tabs (what
    /// `HeaderValue::to_str` takes).
    pub(crate) fn as_text(&self) -> Option<&'a str> {
        let value = self.as_bytes();
        value
            .iter()
            .all(|&b| b == b'\t' || (b' '..=b'~').contains(&b))
            .then(|| std::str::from_utf8(value).ok())
            .flatten()
    }

    /// The value held past the request's borrow: its bytes shared (a
    /// reference count), not copied, where they can be.
    pub(crate) fn to_shared(self) -> Bytes {
        match self {
            FieldValue::Map(value) => Bytes::copy_from_slice(value.as_bytes()),
            FieldValue::Raw(value, fields) => fields
                .shared(value)
                .unwrap_or_else(|| Bytes::copy_from_slice(value)),
        }
    }
}

/// The values of one name, in order: see [`Fields::get_all`].
#[derive(Debug)]
pub(crate) enum Values<'a> {
    Map(http::header::ValueIter<'a, HeaderValue>),
    Raw(RawValues<'a>, &'a RawFields),
    None,
}

impl<'a> Iterator for Values<'a> {
    type Item = FieldValue<'a>;

    fn next(&mut self) -> Option<FieldValue<'a>> {
        match self {
            Values::Map(values) => values.next().map(FieldValue::Map),
            Values::Raw(values, fields) => values.next().map(|v| FieldValue::Raw(v, fields)),
            Values::None => None,
        }
    }
}

impl Fields {
    /// The values of the fields named `name`, in order.
    pub(crate) fn get_all<'a>(&'a self, name: &'a HeaderName) -> Values<'a> {
        match self {
            Fields::Raw(raw) => Values::Raw(raw.get_all(name.as_str()), raw),
            // As `few_headers::get_all`: a short map's names compared
            // first, a long one looked up once.
            Fields::Map(map) if few_headers::worth_a_lookup(map, name) => {
                Values::Map(map.get_all(name).iter())
            }
            Fields::Map(_) => Values::None,
        }
    }

    /// The first value of `name`.
    pub(crate) fn get<'a>(&'a self, name: &'a HeaderName) -> Option<FieldValue<'a>> {
        self.get_all(name).next()
    }

    /// Whether a field is named `name`.
    pub(crate) fn contains(&self, name: &HeaderName) -> bool {
        match self {
            Fields::Raw(raw) => raw.contains(name.as_str()),
            Fields::Map(map) => few_headers::contains(map, name),
        }
    }

    /// Makes `value` the one field named `name`.
    pub(crate) fn insert(&mut self, name: HeaderName, value: HeaderValue) {
        match self {
            Fields::Raw(raw) => raw.set(name, value),
            Fields::Map(map) => {
                map.insert(name, value);
            }
        }
    }

    /// Removes every field named `name`.
    pub(crate) fn remove(&mut self, name: &HeaderName) {
        match self {
            Fields::Raw(raw) => raw.remove(name.as_str()),
            Fields::Map(map) => {
                map.remove(name);
            }
        }
    }

    /// Removes the hop-by-hop fields (RFC 9110 7.6.1), and those
    /// `Connection` names.
    pub(crate) fn strip_hop_by_hop(&mut self) {
        match self {
            Fields::Raw(raw) => raw.strip_hop_by_hop(),
            Fields::Map(map) => hop_by_hop::strip_hop_by_hop(map),
        }
    }

    /// Calls `each` with every field, in order: a map's names in lower
    /// case, raw names as they were spelled.
    pub(crate) fn for_each(&self, mut each: impl FnMut(&[u8], &[u8])) {
        match self {
            Fields::Raw(raw) => raw.for_each_field(each),
            Fields::Map(map) => {
                for (name, value) in map {
                    each(name.as_str().as_bytes(), value.as_bytes());
                }
            }
        }
    }

    /// How many fields there are.
    pub(crate) fn len(&self) -> usize {
        match self {
            Fields::Raw(raw) => raw.len(),
            Fields::Map(map) => map.len(),
        }
    }

    /// The fields as a map.
    ///
    /// # Errors
    /// A raw name or value the `http` crate refuses
    /// ([`RawFields::into_map`]).
    pub(crate) fn into_map(self) -> Result<HeaderMap, UpstreamError> {
        match self {
            Fields::Raw(raw) => raw.into_map(),
            Fields::Map(map) => Ok(map),
        }
    }
}

impl From<HeaderMap> for Fields {
    fn from(map: HeaderMap) -> Self {
        Fields::Map(map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::header::{CONTENT_TYPE, COOKIE, HOST};

    const TEXT: &str = "HTTP/1.1 200 OK\r\nHost: a.example\r\nX-Key: k1\r\nCOOKIE: a=1\r\n\
                        x-key: k2\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\n\r\n";

    /// The same fields, raw and as a map.
    fn both() -> [Fields; 2] {
        let raw = super::super::raw_fields::read(TEXT);
        let map = raw.clone().into_map().unwrap();
        [Fields::Raw(Box::new(raw)), Fields::Map(map)]
    }

    fn values(fields: &Fields, name: &HeaderName) -> Vec<Vec<u8>> {
        fields
            .get_all(name)
            .map(|v| v.as_bytes().to_vec())
            .collect()
    }

    /// Raw fields answer and change as the map made of them does.
    #[test]
    fn raw_fields_answer_as_their_map_does() {
        let key = HeaderName::from_static("x-key");
        let hop = HeaderName::from_static("x-hop");
        let names = [HOST, key.clone(), COOKIE, CONTENT_TYPE, hop.clone()];
        let [mut raw, mut map] = both();
        let same = |raw: &Fields, map: &Fields| {
            for name in &names {
                assert_eq!(values(raw, name), values(map, name), "{name}");
                assert_eq!(raw.contains(name), map.contains(name), "{name}");
                assert_eq!(
                    raw.get(name).map(|v| v.as_bytes().to_vec()),
                    map.get(name).map(|v| v.as_bytes().to_vec()),
                    "{name}"
                );
            }
            assert_eq!(raw.len(), map.len());
            assert_eq!(
                raw.clone().into_map().unwrap(),
                map.clone().into_map().unwrap()
            );
        };
        same(&raw, &map);
        assert_eq!(values(&raw, &key), [b"k1".to_vec(), b"k2".to_vec()]);
        for fields in [&mut raw, &mut map] {
            fields.insert(HOST, HeaderValue::from_static("b.example"));
            fields.remove(&key);
            fields.insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        }
        same(&raw, &map);
        assert_eq!(values(&raw, &HOST), [b"b.example".to_vec()]);
        assert!(!raw.contains(&key) && !map.contains(&key));
        assert_eq!((raw.len(), map.len()), (5, 5));
        // A field the gateway added, removed again: gone from the names
        // noted too.
        for fields in [&mut raw, &mut map] {
            fields.remove(&CONTENT_TYPE);
        }
        same(&raw, &map);
        assert!(!raw.contains(&CONTENT_TYPE));
        for fields in [&mut raw, &mut map] {
            fields.strip_hop_by_hop();
        }
        same(&raw, &map);
        assert!(!raw.contains(&hop) && raw.contains(&COOKIE));
    }

    /// A value is text when it is visible ASCII, spaces and tabs, as
    /// `HeaderValue::to_str` has it.
    #[test]
    fn a_value_is_text_as_the_http_crate_says() {
        for bytes in [&b"a b\tc"[..], b"", b"~!", b"caf\xe9", b"\xc3\xa9"] {
            let value = HeaderValue::from_bytes(bytes).unwrap();
            let want = value.to_str().ok();
            assert_eq!(FieldValue::Map(&value).as_text(), want, "{bytes:?}");
        }
        let raw = super::super::raw_fields::read("HTTP/1.1 200 OK\r\nA: x\ty\r\n\r\n");
        let value = raw.get_all("a").next().unwrap();
        assert_eq!(FieldValue::Raw(value, &raw).as_text(), Some("x\ty"));
    }

    /// A raw value is held past the borrow without a copy: it shares the
    /// head's bytes. One the gateway added is copied.
    #[test]
    fn a_raw_value_is_shared_not_copied() {
        let [mut raw, _] = both();
        let key = HeaderName::from_static("x-key");
        let value = raw.get(&key).unwrap();
        let shared = value.to_shared();
        assert_eq!(shared, "k1");
        assert_eq!(shared.as_ptr(), value.as_bytes().as_ptr());
        raw.insert(key.clone(), HeaderValue::from_static("k3"));
        let added = raw.get(&key).unwrap();
        assert_eq!(added.to_shared(), "k3");
    }
}
