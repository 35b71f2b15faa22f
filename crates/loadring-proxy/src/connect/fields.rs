//! Header fields parsed by httparse, made a `HeaderMap` whose values
//! share the bytes they were read from (not copied): for a response head
//! and for a chunked body's trailers.

use std::ops::Range;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};
use http::HeaderMap;

use super::error::UpstreamError;

/// The longest response head (or trailers) read.
pub(crate) const MAX_HEAD: usize = 64 * 1024;
/// The most header fields read in a head (hyper's default).
pub(crate) const MAX_HEADERS: usize = 100;

/// A header field's name, and where its value is in the head's bytes.
pub(crate) type Field = (HeaderName, Range<usize>);

/// Where each field's value lies in `buf` (the fields were parsed from it).
pub(crate) fn ranges(
    buf: &[u8],
    fields: &[httparse::Header<'_>],
) -> Result<Vec<Field>, UpstreamError> {
    let base = buf.as_ptr() as usize;
    fields
        .iter()
        .map(|h| {
            let name = HeaderName::from_bytes(h.name.as_bytes())
                .map_err(|_| UpstreamError::InvalidHead(format!("header name {:?}", h.name)))?;
            let start = h.value.as_ptr() as usize - base;
            Ok((name, start..start + h.value.len()))
        })
        .collect()
}

/// The fields, their values sharing `bytes` (not copied).
pub(crate) fn headers_of(bytes: &Bytes, fields: Vec<Field>) -> Result<HeaderMap, UpstreamError> {
    let mut map = HeaderMap::with_capacity(fields.len());
    for (name, range) in fields {
        let value = HeaderValue::from_maybe_shared(bytes.slice(range))
            .map_err(|_| UpstreamError::InvalidHead(format!("value of {name}")))?;
        map.append(name, value);
    }
    Ok(map)
}
