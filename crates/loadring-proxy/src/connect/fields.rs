//! Header fields parsed by httparse, made a `HeaderMap` whose values
//! share the bytes they were read from (not copied): for a response head
//! and for a chunked body's trailers.

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};
use http::HeaderMap;

use super::error::UpstreamError;

/// The longest response head (or trailers) read.
pub(crate) const MAX_HEAD: usize = 64 * 1024;
/// The most header fields read in a head (hyper's default).
pub(crate) const MAX_HEADERS: usize = 100;

/// Where each field's name and value lie in the bytes they were parsed
/// from: offsets, so that the parse's borrow of the buffer can end before
/// the head is split off it. On the stack: a response's head is read
/// without an allocation of its own for this.
pub(crate) struct Spans {
    /// Name start, name end, value start, value end.
    spans: [[u32; 4]; MAX_HEADERS],
    len: usize,
}

/// Where `fields` (parsed from `buf`, at most [`MAX_HEADERS`], within
/// [`MAX_HEAD`] bytes) lie in it.
pub(crate) fn spans(buf: &[u8], fields: &[httparse::Header<'_>]) -> Spans {
    let base = buf.as_ptr() as usize;
    let at = |part: &[u8]| {
        let start = part.as_ptr() as usize - base;
        // Within MAX_HEAD bytes, checked before.
        let start = u32::try_from(start).unwrap_or(u32::MAX);
        let end = start.saturating_add(u32::try_from(part.len()).unwrap_or(u32::MAX));
        (start, end)
    };
    let mut spans = Spans {
        spans: [[0; 4]; MAX_HEADERS],
        len: 0,
    };
    for (span, field) in spans.spans.iter_mut().zip(fields) {
        let (name_start, name_end) = at(field.name.as_bytes());
        let (value_start, value_end) = at(field.value);
        *span = [name_start, name_end, value_start, value_end];
        spans.len += 1;
    }
    spans
}

/// The fields at `spans` of `bytes`, their values sharing `bytes` (not
/// copied).
///
/// # Errors
/// A name that is not a header name, or a value that is not a header
/// value.
pub(crate) fn headers_of(bytes: &Bytes, spans: &Spans) -> Result<HeaderMap, UpstreamError> {
    let mut map = HeaderMap::with_capacity(spans.len);
    for &[name_start, name_end, value_start, value_end] in &spans.spans[..spans.len] {
        let name_bytes = bytes
            .get(name_start as usize..name_end as usize)
            .unwrap_or_default();
        let name = HeaderName::from_bytes(name_bytes).map_err(|_| {
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
