//! A request on its way to a backend, as the upstream layer takes it and
//! gives it back unsent.

use http::Request;

use super::request_head::RequestHead;
use crate::request_body::Outgoing;

/// A request on its way to a backend: its head, and its body.
///
/// The head is boxed: it is moved from the gateway into an attempt, into
/// the connection's exchange and back when unsent, and each move of a
/// future holding it copies what is not boxed (224 bytes, several times a
/// request).
#[derive(Debug)]
pub(crate) struct OutgoingRequest {
    pub(crate) head: Box<RequestHead>,
    pub(crate) body: Outgoing,
}

impl From<Request<Outgoing>> for OutgoingRequest {
    fn from(request: Request<Outgoing>) -> Self {
        let (parts, body) = request.into_parts();
        OutgoingRequest {
            head: Box::new(parts.into()),
            body,
        }
    }
}
