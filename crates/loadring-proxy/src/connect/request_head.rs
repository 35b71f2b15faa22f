//! A request's head as the gateway holds it, from the client's connection
//! to the backend's: the request line and [`Fields`] kept raw from an
//! HTTP/1.1 client, so that a request from one to an HTTP/1.1 backend is
//! read and written again without a `HeaderMap`.

use http::{request, Extensions, Method, Request, Uri, Version};

use super::error::UpstreamError;
use super::head_fields::Fields;

/// A request's head: what `http::request::Parts` holds, its fields as
/// [`Fields`].
#[derive(Debug, Clone)]
pub(crate) struct RequestHead {
    pub(crate) method: Method,
    pub(crate) uri: Uri,
    pub(crate) version: Version,
    pub(crate) fields: Fields,
    pub(crate) extensions: Extensions,
}

impl RequestHead {
    /// The usual `http` head.
    ///
    /// # Errors
    /// As [`Fields::into_map`].
    pub(crate) fn into_parts(self) -> Result<request::Parts, UpstreamError> {
        let (mut parts, ()) = Request::new(()).into_parts();
        parts.method = self.method;
        parts.uri = self.uri;
        parts.version = self.version;
        parts.headers = self.fields.into_map()?;
        parts.extensions = self.extensions;
        Ok(parts)
    }
}

impl From<request::Parts> for RequestHead {
    fn from(parts: request::Parts) -> Self {
        RequestHead {
            method: parts.method,
            uri: parts.uri,
            version: parts.version,
            fields: Fields::Map(parts.headers),
            extensions: parts.extensions,
        }
    }
}

/// The head of the request `text` (tests), its fields raw.
#[cfg(test)]
pub(crate) fn read(text: &str) -> RequestHead {
    use super::fields::{Spans, MAX_HEADERS};
    let bytes = bytes::Bytes::copy_from_slice(text.as_bytes());
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut parsed = httparse::Request::new(&mut fields);
    let httparse::Status::Complete(len) = parsed.parse(&bytes).expect("a valid head") else {
        panic!("a whole head: {text:?}");
    };
    let mut spans = Spans::new();
    spans.record(&bytes, parsed.headers);
    RequestHead {
        method: parsed.method.expect("a method").parse().expect("a method"),
        uri: parsed.path.expect("a target").parse().expect("a target"),
        version: match parsed.version {
            Some(0) => Version::HTTP_10,
            _ => Version::HTTP_11,
        },
        fields: Fields::Raw(Box::new(super::raw_fields::RawFields::new(
            bytes.slice(..len),
            spans,
        ))),
        extensions: Extensions::new(),
    }
}
