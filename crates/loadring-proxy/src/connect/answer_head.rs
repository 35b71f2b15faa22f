//! A backend's response head as the upstream layer hands it on: kept as
//! read from an HTTP/1.1 backend ([`RawHead`]: no map built), or the usual
//! `http` head an HTTP/2 backend's answer comes as.

use http::header::HeaderName;
use http::{response, HeaderMap, Response, StatusCode};

use super::error::UpstreamError;
use super::raw_head::RawHead;
use crate::{few_headers, hop_by_hop};

/// See the module's documentation.
#[derive(Debug)]
pub(crate) enum AnswerHead {
    /// As read from an HTTP/1.1 backend.
    Raw(Box<RawHead>),
    /// A map: an HTTP/2 backend's, the gateway's own, or one made from a
    /// raw head ([`AnswerHead::into_parts`]). Boxed as the raw one is: an
    /// answer is moved from the exchange to the client's connection, and
    /// each move copies what is not.
    Parts(Box<response::Parts>),
}

impl AnswerHead {
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            AnswerHead::Raw(raw) => raw.status,
            AnswerHead::Parts(parts) => parts.status,
        }
    }

    /// Whether it has a field named `name`.
    pub(crate) fn contains(&self, name: &HeaderName) -> bool {
        match self {
            AnswerHead::Raw(raw) => raw.fields.contains(name.as_str()),
            AnswerHead::Parts(parts) => few_headers::contains(&parts.headers, name),
        }
    }

    /// The map, when it is one.
    pub(crate) fn map(&self) -> Option<&HeaderMap> {
        match self {
            AnswerHead::Raw(_) => None,
            AnswerHead::Parts(parts) => Some(&parts.headers),
        }
    }

    /// Removes the hop-by-hop fields (RFC 9110 7.6.1), and those
    /// `Connection` names.
    pub(crate) fn strip_hop_by_hop(&mut self) {
        match self {
            AnswerHead::Raw(raw) => raw.fields.strip_hop_by_hop(),
            AnswerHead::Parts(parts) => hop_by_hop::strip_hop_by_hop(&mut parts.headers),
        }
    }

    /// The usual `http` head.
    ///
    /// # Errors
    /// A raw head's field the `http` crate refuses ([`RawHead::into_parts`]).
    pub(crate) fn into_parts(self) -> Result<response::Parts, UpstreamError> {
        match self {
            AnswerHead::Raw(raw) => raw.into_parts(),
            AnswerHead::Parts(parts) => Ok(*parts),
        }
    }
}

impl From<response::Parts> for AnswerHead {
    fn from(parts: response::Parts) -> Self {
        AnswerHead::Parts(Box::new(parts))
    }
}

impl<B> From<Response<B>> for Answered<B> {
    fn from(response: Response<B>) -> Self {
        let (head, body) = response.into_parts();
        Answered {
            head: head.into(),
            body,
        }
    }
}

/// A backend's answer: its head, and its body to come.
#[derive(Debug)]
pub(crate) struct Answered<B> {
    pub(crate) head: AnswerHead,
    pub(crate) body: B,
}

impl<B> Answered<B> {
    /// As an `http` response.
    ///
    /// # Errors
    /// As [`AnswerHead::into_parts`].
    pub(crate) fn into_response(self) -> Result<Response<B>, UpstreamError> {
        Ok(Response::from_parts(self.head.into_parts()?, self.body))
    }
}

#[cfg(test)]
mod tests {
    use http::header::{CONTENT_LENGTH, HOST, TRANSFER_ENCODING, UPGRADE};

    use super::*;

    const TEXT: &str = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: Upgrade\r\n\
                        Upgrade: x\r\nX-Hop: 1\r\n\r\n";

    /// A head as read and the same head as a map answer alike.
    #[test]
    fn raw_and_mapped_heads_answer_alike() {
        let raw = AnswerHead::Raw(Box::new(super::super::raw_head::read(TEXT)));
        let mapped = AnswerHead::Raw(Box::new(super::super::raw_head::read(TEXT)))
            .into_parts()
            .map(AnswerHead::from)
            .unwrap();
        for head in [raw, mapped] {
            assert_eq!(head.status(), StatusCode::NOT_FOUND);
            assert!(head.contains(&CONTENT_LENGTH));
            assert!(head.contains(&UPGRADE));
            assert!(!head.contains(&TRANSFER_ENCODING));
            assert!(!head.contains(&HOST));
            let mut head = head;
            head.strip_hop_by_hop();
            assert!(!head.contains(&UPGRADE), "named by Connection");
            let parts = head.into_parts().unwrap();
            let left: Vec<&str> = parts.headers.keys().map(HeaderName::as_str).collect();
            assert_eq!(left, ["content-length", "x-hop"]);
        }
    }

    #[test]
    fn only_a_map_is_one() {
        let raw = AnswerHead::Raw(Box::new(super::super::raw_head::read(TEXT)));
        assert!(raw.map().is_none());
        let parts = raw.into_parts().unwrap();
        let mapped = AnswerHead::from(parts);
        assert_eq!(mapped.map().map(HeaderMap::len), Some(4));
        let answered = Answered {
            head: mapped,
            body: (),
        };
        let response = answered.into_response().unwrap();
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        let back = Answered::from(response);
        assert_eq!(back.head.status(), StatusCode::NOT_FOUND);
    }
}
