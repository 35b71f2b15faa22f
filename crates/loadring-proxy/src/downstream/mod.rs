//! The gateway's HTTP/1.1 server: a client connection read and answered
//! on the task that serves it, its requests forwarded without a layer
//! between the socket and the exchange (HTTP/2 stays hyper's).
//!
//! Split as the upstream layer (connect/) is: what a head says and how an
//! answer is framed are plain functions over bytes (head.rs, encode.rs),
//! tested on hostile input without sockets; connection.rs does the I/O.
//! A head's fields are kept as read, and chunked bodies decoded, by the
//! upstream layer's own pieces (connect/raw_fields.rs, connect/decode.rs):
//! the same bounds hold for what clients and backends send.

use std::future::Future;
use std::net::SocketAddr;

use crate::connect::answer_head::Answered;
use crate::connect::request_head::RequestHead;
use crate::proxy_body::ProxyBody;

pub(crate) mod body;
mod connection;
mod date;
mod encode;
mod head;
#[cfg(test)]
mod head_props;
mod prefixed;
mod upgrade;

pub(crate) use body::{BodyError, ClientBody};
pub(crate) use connection::H1Connection;
pub(crate) use prefixed::Prefixed;
pub(crate) use upgrade::{Io, PendingSwitch, Switched};

/// What answers the requests of a connection: the gateway.
pub(crate) trait Handler: Send + Sync + 'static {
    /// The answer to come: polled by the connection's task, dropped when
    /// its client leaves first.
    type Answer: Future<Output = Answered<ProxyBody>> + Send + Unpin;

    /// The answer to the request `head` and `body` from `peer`.
    fn answer(&self, head: Box<RequestHead>, body: ClientBody, peer: SocketAddr) -> Self::Answer;
}
