//! A backend's HTTP/1.1 response head kept as it came: its status line
//! read, its fields as [`RawFields`] (no `HeaderMap` built).

use http::{response, Response, StatusCode, Version};

use super::error::UpstreamError;
use super::raw_fields::RawFields;

/// A response head as read.
#[derive(Debug)]
pub(crate) struct RawHead {
    pub(crate) status: StatusCode,
    pub(crate) version: Version,
    pub(crate) fields: RawFields,
}

impl RawHead {
    /// The usual `http` head, its fields made a map
    /// ([`RawFields::into_map`]).
    ///
    /// # Errors
    /// As [`RawFields::into_map`].
    pub(crate) fn into_parts(self) -> Result<response::Parts, UpstreamError> {
        let (mut parts, ()) = Response::new(()).into_parts();
        parts.status = self.status;
        parts.version = self.version;
        parts.headers = self.fields.into_map()?;
        Ok(parts)
    }
}

/// A response head read from `text` (tests).
#[cfg(test)]
pub(crate) fn read(text: &str) -> RawHead {
    let mut fields = [httparse::EMPTY_HEADER; super::fields::MAX_HEADERS];
    let mut parsed = httparse::Response::new(&mut fields);
    parsed.parse(text.as_bytes()).expect("a valid head");
    let status = StatusCode::from_u16(parsed.code.expect("a status")).expect("a status code");
    let version = match parsed.version {
        Some(0) => Version::HTTP_10,
        _ => Version::HTTP_11,
    };
    RawHead {
        status,
        version,
        fields: super::raw_fields::read(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parts_made_keep_the_status_line_and_the_fields() {
        let parts = read("HTTP/1.0 404 Not Found\r\nA: 1\r\nB: 2\r\na: 3\r\n\r\n")
            .into_parts()
            .unwrap();
        assert_eq!(parts.status, StatusCode::NOT_FOUND);
        assert_eq!(parts.version, Version::HTTP_10);
        assert_eq!(parts.headers.get_all("a").iter().count(), 2);
        assert_eq!(parts.headers.len(), 3);
    }
}
