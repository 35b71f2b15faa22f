//! The client the gateway reaches backends with, and the body type that
//! goes both ways: below forwarding and the active health checks, which
//! both send requests with it.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Empty, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use crate::body::BoxError;
use crate::reused::CountingConnector;

/// Bodies both ways.
pub type ProxyBody = UnsyncBoxBody<Bytes, BoxError>;

/// The upstream client: keep-alive pools per backend address.
pub type Client = hyper_util::client::legacy::Client<CountingConnector, ProxyBody>;

/// An empty body.
pub fn empty_body() -> ProxyBody {
    Empty::new().map_err(|never| match never {}).boxed_unsync()
}

/// A short plain-text body.
pub fn text_body(text: impl Into<Bytes>) -> ProxyBody {
    Full::new(text.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// A client with keep-alive pools and the cluster's connect timeout.
pub fn client(connect_timeout: Duration) -> Client {
    hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(60))
        // Without a timer idle connections are never reaped.
        .pool_timer(TokioTimer::new())
        .build(connector(connect_timeout))
}

/// A client that opens a new connection for each request (no idle
/// connection is kept): for sending again a request lost on a stale one.
pub fn fresh_client(connect_timeout: Duration) -> Client {
    hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(0)
        .build(connector(connect_timeout))
}

fn connector(connect_timeout: Duration) -> CountingConnector {
    let mut connector = HttpConnector::new();
    connector.set_connect_timeout(Some(connect_timeout));
    connector.set_nodelay(true);
    CountingConnector(connector)
}
