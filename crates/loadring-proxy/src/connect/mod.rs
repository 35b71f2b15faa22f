//! The gateway's upstream connection layer: HTTP/1 connections to
//! backends, pooled per worker thread, that a request takes, sends on and
//! gives back when its response body has ended.
//!
//! A request stays on its own task: it takes an idle connection of its
//! worker (no lock shared with other workers, see [`pool`]) or makes one,
//! writes itself (moved, not copied) and reads the answer, HTTP/1.1 being
//! spoken here ([`exchange`], [`request`], [`response`], [`decode`]): no
//! task per connection, no channel between a request and its connection.
//! HTTP/2 (`h2c`) stays hyper's client ([`h2`]).
//!
//! What went wrong is told apart for the retry rules (docs/proxy.md,
//! *Retries*): no connection ([`Failure::Connect`]), a request the
//! connection never wrote ([`Failure::Unsent`], with the request itself
//! back when it is in hand), and one that was written ([`Failure::Sent`]),
//! `stale` when it met a reused connection closed before any byte of an
//! answer came (a backend closing an idle keep-alive connection at that
//! instant never read it).

pub(crate) mod answer_head;
mod body;
#[cfg(test)]
pub(crate) mod codec_props;
mod connection;
pub(crate) mod decode;
mod error;
mod exchange;
#[cfg(test)]
mod exchange_tests;
pub(crate) mod fields;
mod h2;
pub(crate) mod head_fields;
pub(crate) mod known_names;
mod names;
mod outgoing;
pub(crate) mod pool;
pub(crate) mod raw_fields;
pub(crate) mod raw_head;
mod request;
pub(crate) mod request_head;
mod response;
mod upgraded;

use std::sync::Arc;
use std::time::Duration;

use http::header::HOST;
use http::uri::{Authority, Scheme};
use http::{Request, Uri, Version};
use tokio_rustls::rustls::ClientConfig;

pub(crate) use answer_head::{AnswerHead, Answered};
use body::Home;
pub(crate) use body::UpstreamBody;
use connection::{connect, Conn};
pub(crate) use connection::{is_out_of_local_resources, ConnectError};
pub(crate) use error::UpstreamError;
use exchange::{exchange, ExchangeError};
pub(crate) use outgoing::OutgoingRequest;
pub(crate) use request_head::RequestHead;

use crate::config::BackendProtocol;
use crate::request_body::Outgoing;

/// How long an unused connection is kept open.
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Connections to the backends of one user (a cluster's requests, its
/// active checks).
#[derive(Debug)]
pub(crate) struct Upstream {
    pool: usize,
    /// Idle HTTP/1 connections kept per worker over all backends.
    keepalive: usize,
    connect_timeout: Duration,
    idle_timeout: Duration,
    protocol: BackendProtocol,
    tls: Option<Arc<ClientConfig>>,
}

/// How an exchange failed.
#[derive(Debug)]
pub(crate) enum Failure {
    /// No connection could be made: nothing reached the backend.
    Connect(ConnectError),
    /// The connection did not write the request: nothing of it reached the
    /// backend. The request itself when it is in hand.
    Unsent {
        error: UpstreamError,
        request: Option<Box<OutgoingRequest>>,
    },
    /// The request was written (maybe in part) and no response came.
    Sent {
        error: UpstreamError,
        /// On a reused connection, closed before any byte of an answer.
        stale: bool,
        /// The request's head, when the connection kept it (HTTP/1.1): a
        /// resend needs no copy made ahead.
        head: Option<Box<RequestHead>>,
    },
}

impl Failure {
    /// The error, for logs.
    pub(crate) fn error(&self) -> &(dyn std::error::Error + 'static) {
        match self {
            Failure::Connect(e) => e,
            Failure::Unsent { error, .. } | Failure::Sent { error, .. } => error,
        }
    }

    /// Whether the backend answered, but not in a form that can be passed
    /// on: the client is told so rather than that nothing came.
    pub(crate) fn answered_malformed(&self) -> bool {
        matches!(self, Failure::Sent { error, .. } if error.is_malformed_answer())
    }

    /// The written request's head, when the connection gave it back.
    pub(crate) fn take_head(&mut self) -> Option<Box<RequestHead>> {
        match self {
            Failure::Sent { head, .. } => head.take(),
            _ => None,
        }
    }

    /// The connection closed (or was reset) before a response began.
    pub(crate) fn closed_before_a_response(&self) -> bool {
        match self {
            Failure::Connect(_) => false,
            Failure::Unsent { .. } => true,
            Failure::Sent { error, .. } => error.closed_before_a_response(),
        }
    }
}

impl Upstream {
    /// The connections of `cluster`'s requests (or of its checks).
    pub(crate) fn for_cluster(cluster: &crate::cluster::Cluster) -> Self {
        Upstream::with(
            cluster.config().connect_timeout,
            cluster.config().backend_protocol,
            cluster.backend_tls().cloned(),
        )
        .keeping(cluster.config().keepalive)
    }

    /// Connections speaking `protocol`, over TLS when `tls` is given, made
    /// within `connect_timeout`.
    pub(crate) fn with(
        connect_timeout: Duration,
        protocol: BackendProtocol,
        tls: Option<Arc<ClientConfig>>,
    ) -> Self {
        Upstream {
            pool: pool::new_id(),
            keepalive: crate::config::DEFAULT_KEEPALIVE,
            connect_timeout,
            idle_timeout: IDLE_TIMEOUT,
            protocol,
            tls,
        }
    }

    /// At most `keepalive` idle HTTP/1 connections per worker over all
    /// backends, the least recently used closed beyond.
    pub(crate) fn keeping(mut self, keepalive: usize) -> Self {
        self.keepalive = keepalive;
        self
    }

    /// A connection to `addr` (`host:port`): an idle one of this worker's,
    /// unless `fresh`, or a new one.
    ///
    /// # Errors
    /// The connection could not be made.
    pub(crate) async fn checkout(
        &self,
        addr: &Arc<str>,
        fresh: bool,
    ) -> Result<Checkout, ConnectError> {
        let conn = match self.protocol {
            // Making a connection (TCP, TLS, the HTTP handshake) is the
            // largest state of a request's future and the rare path: boxed,
            // so that the common one (a pooled connection) does not carry
            // its size through every move of the future.
            BackendProtocol::H2c => Sender::H2(
                Box::pin(h2::sender(
                    self.pool,
                    addr,
                    self.connect_timeout,
                    self.tls.as_ref(),
                    fresh,
                ))
                .await?,
            ),
            BackendProtocol::Http1 => Sender::H1(
                match (!fresh).then(|| pool::take(self.pool, addr)).flatten() {
                    Some(conn) => conn,
                    None => {
                        Box::pin(connect(addr, self.connect_timeout, self.tls.as_ref())).await?
                    }
                },
            ),
        };
        Ok(Checkout {
            conn,
            home: Home {
                pool: self.pool,
                keepalive: self.keepalive,
                addr: addr.clone(),
                idle_timeout: self.idle_timeout,
            },
            tls: self.tls.is_some(),
        })
    }
}

/// What a request is sent on.
#[derive(Debug)]
enum Sender {
    /// A pooled HTTP/1.1 connection, this request's alone.
    H1(Conn),
    /// The endpoint's HTTP/2 connection, shared.
    H2(h2::H2Conn),
}

/// A connection held by one request, before it is sent on.
#[derive(Debug)]
pub(crate) struct Checkout {
    conn: Sender,
    home: Home,
    tls: bool,
}

impl Checkout {
    /// Whether a request written and not answered comes back with its
    /// head ([`Failure::Sent`]): over HTTP/1.1 it does, and a resend needs
    /// no copy made ahead; HTTP/2 keeps it.
    pub(crate) fn returns_written_requests(&self) -> bool {
        matches!(self.conn, Sender::H1(_))
    }

    /// Whether the backend accepts HTTP/2 extended CONNECT (RFC 8441),
    /// waiting up to `within` for its SETTINGS on a new connection; an
    /// HTTP/1.1 connection does not.
    pub(crate) async fn extended_connect(&self, within: Duration) -> bool {
        match &self.conn {
            Sender::H1(_) => false,
            Sender::H2(conn) => conn.extended_connect(within).await,
        }
    }

    /// Sends `request` (origin-form target, `Host` set) and waits for the
    /// response head. Over HTTP/1.1 the body holds the connection, and
    /// gives it back to this worker's pool once it has ended.
    ///
    /// # Errors
    /// See [`Failure`]; the connection is closed then.
    pub(crate) async fn send(
        self,
        request: OutgoingRequest,
    ) -> Result<Answered<UpstreamBody>, Failure> {
        let Checkout { conn, home, tls } = self;
        let mut conn = match conn {
            Sender::H1(conn) => conn,
            Sender::H2(conn) => {
                let request = match h2_request(request, &home.addr, tls) {
                    Ok(request) => request,
                    Err(error) => {
                        return Err(Failure::Unsent {
                            error,
                            request: None,
                        })
                    }
                };
                let mut sender = conn.sender;
                return match sender.try_send_request(request).await {
                    Ok(response) => {
                        let (head, body) = response.into_parts();
                        Ok(Answered {
                            head: head.into(),
                            body: UpstreamBody::h2(body),
                        })
                    }
                    Err(e) => Err(h2_failure(e)),
                };
            }
        };
        let reused = conn.is_reused();
        match exchange(&mut conn, request).await {
            Ok(exchange::Answer {
                head,
                framing,
                keep_alive,
                writer,
            }) => {
                let body = UpstreamBody::h1(conn, framing, writer, keep_alive, home);
                Ok(Answered {
                    head: AnswerHead::Raw(head),
                    body,
                })
            }
            Err(ExchangeError::Unsent(error, request)) => Err(Failure::Unsent {
                error,
                request: Some(request),
            }),
            Err(ExchangeError::Sent {
                error,
                answered,
                head,
            }) => {
                let stale = reused && !answered && error.closed_before_a_response();
                Err(Failure::Sent { error, stale, head })
            }
        }
    }
}

/// A request as HTTP/2 sends it: absolute target (`:scheme` and
/// `:authority` from the `Host` header, or the endpoint), no `Host`.
///
/// # Errors
/// A raw field the `http` crate refuses ([`Fields::into_map`]).
fn h2_request(
    request: OutgoingRequest,
    addr: &str,
    tls: bool,
) -> Result<Request<Outgoing>, UpstreamError> {
    let OutgoingRequest { head, body } = request;
    let mut request = Request::from_parts(head.into_parts()?, body);
    let host = request.headers_mut().remove(HOST);
    let authority = host
        .as_ref()
        .and_then(|h| Authority::try_from(h.as_bytes()).ok())
        .or_else(|| Authority::try_from(addr).ok());
    let mut parts = std::mem::take(request.uri_mut()).into_parts();
    parts.scheme = Some(if tls { Scheme::HTTPS } else { Scheme::HTTP });
    parts.authority = authority;
    if parts.path_and_query.is_none() {
        parts.path_and_query = Some(http::uri::PathAndQuery::from_static("/"));
    }
    match Uri::from_parts(parts) {
        Ok(uri) => *request.uri_mut() = uri,
        Err(_) => {
            // Unreachable with a valid authority; keep a Host then.
            if let Some(host) = host {
                request.headers_mut().insert(HOST, host);
            }
        }
    }
    *request.version_mut() = Version::HTTP_2;
    Ok(request)
}

fn h2_failure(mut e: hyper::client::conn::TrySendError<Request<Outgoing>>) -> Failure {
    let request = e.take_message();
    let error = e.into_error();
    if request.is_some() || error.is_canceled() {
        return Failure::Unsent {
            error: UpstreamError::H2(error),
            request: request.map(|request| Box::new(request.into())),
        };
    }
    // HTTP/2 gives back a request the connection never took: a written one
    // is never resent on a fresh connection.
    Failure::Sent {
        error: UpstreamError::H2(error),
        stale: false,
        head: None,
    }
}
