//! The body type that goes both ways through the gateway (responses to
//! clients, the proxy's own answers).

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};

use crate::body::BoxError;

/// Bodies both ways.
pub type ProxyBody = UnsyncBoxBody<Bytes, BoxError>;

/// A short plain-text body.
pub fn text_body(text: impl Into<Bytes>) -> ProxyBody {
    Full::new(text.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}
