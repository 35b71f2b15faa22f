//! A request on its way to a backend, as the upstream layer takes it and
//! gives it back unsent.

use http::Request;

use super::request_head::RequestHead;
use crate::request_body::Outgoing;

/// A request on its way to a backend: its head, and its body.
#[derive(Debug)]
pub(crate) struct OutgoingRequest {
    pub(crate) head: RequestHead,
    pub(crate) body: Outgoing,
}

impl From<Request<Outgoing>> for OutgoingRequest {
    fn from(request: Request<Outgoing>) -> Self {
        let (parts, body) = request.into_parts();
        OutgoingRequest {
            head: parts.into(),
            body,
        }
    }
}
