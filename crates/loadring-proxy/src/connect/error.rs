//! What can go wrong in an exchange with a backend, over either protocol.

use std::io;

/// An exchange with a backend failed: the request could not be written,
/// or the answer could not be read or was not valid HTTP.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// The socket failed (reset, broken pipe...).
    #[error("upstream connection: {0}")]
    Io(#[from] io::Error),
    /// The backend closed the connection before the answer was complete.
    #[error("the backend closed the connection {0}")]
    Closed(&'static str),
    /// The backend sent bytes before any of the request was written: an
    /// answer to nothing asked on this connection.
    #[error("the backend sent bytes before the request was written")]
    Unsolicited,
    /// The response head was longer than the proxy reads.
    #[error("the response head is over {0} bytes")]
    HeadTooLarge(usize),
    /// More header lines than the proxy reads.
    #[error("the response has more than {0} header fields")]
    TooManyHeaders(usize),
    /// The response head is not HTTP/1.x.
    #[error("invalid response head: {0}")]
    InvalidHead(String),
    /// The body's framing cannot be trusted (RFC 9112 6.3).
    #[error("invalid response framing: {0}")]
    Framing(&'static str),
    /// A chunked body broke its coding.
    #[error("invalid chunked body: {0}")]
    Chunked(&'static str),
    /// The request body did not match its `Content-Length`.
    #[error("the request body has {sent} bytes, its Content-Length says {declared}")]
    RequestBodyLength { declared: u64, sent: u64 },
    /// Reading the client's body (to send it on) failed.
    #[error("reading the request body: {0}")]
    RequestBody(#[source] crate::downstream::body::BodyError),
    /// The HTTP/2 client failed.
    #[error("{0}")]
    H2(#[source] hyper::Error),
}

impl UpstreamError {
    /// Whether this says an answer came that is not HTTP/1.1 as it must be
    /// (a head too large or malformed, a framing that cannot be trusted).
    pub(crate) fn is_malformed_answer(&self) -> bool {
        matches!(
            self,
            UpstreamError::HeadTooLarge(_)
                | UpstreamError::TooManyHeaders(_)
                | UpstreamError::InvalidHead(_)
                | UpstreamError::Framing(_)
                | UpstreamError::Chunked(_)
        )
    }

    /// Whether this says the connection closed (or was reset) before a
    /// response began.
    pub(crate) fn closed_before_a_response(&self) -> bool {
        match self {
            UpstreamError::Closed(_) => true,
            UpstreamError::Io(e) => is_a_close(e),
            UpstreamError::H2(e) => hyper_closed(e),
            _ => false,
        }
    }
}

fn is_a_close(e: &io::Error) -> bool {
    use io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof
    )
}

/// Whether hyper's `error` says the connection closed (or was reset)
/// before a response began.
fn hyper_closed(error: &hyper::Error) -> bool {
    if error.is_incomplete_message() || error.is_canceled() || error.is_closed() {
        return true;
    }
    let mut source = std::error::Error::source(error);
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<io::Error>() {
            if is_a_close(io) {
                return true;
            }
        }
        source = e.source();
    }
    false
}
