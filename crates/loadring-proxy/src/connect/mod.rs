//! The gateway's upstream connection layer: HTTP/1 connections to
//! backends, pooled per worker thread, that a request takes, sends on and
//! gives back when its response body has ended.
//!
//! A request stays on its own task: it takes an idle connection of its
//! worker (no lock shared with other workers, see [`pool`]) or makes one,
//! hands itself over (moved, not copied) and reads the answer. The
//! connection's task is spawned on the same worker when it is made.
//!
//! What went wrong is told apart for the retry rules (docs/proxy.md,
//! *Retries*): no connection ([`Failure::Connect`]), a request the
//! connection never wrote ([`Failure::Unsent`], with the request itself
//! back when hyper returns it), and one that was written
//! ([`Failure::Sent`]), `stale` when it met a reused connection closed
//! before any byte of an answer came (a backend closing an idle keep-alive
//! connection at that instant never read it).
//!
//! A request can also be handed to a connection whose task is ending (the
//! backend had just closed it): it then sits in a queue nobody reads, and
//! its answer would never come while the sender is held. The request
//! watches its connection's task, and when the task is gone it lets the
//! sender go, which returns the queued request unsent.

mod body;
mod connection;
mod h2;
pub(crate) mod pool;

use std::io;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use http::header::HOST;
use http::uri::{Authority, Scheme};
use http::{Request, Response, Uri, Version};
use hyper::body::Incoming;
use tokio_rustls::rustls::ClientConfig;

pub(crate) use body::UpstreamBody;
pub(crate) use connection::ConnectError;
use connection::{connect, Conn};

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
    /// backend. The request itself when hyper gave it back.
    Unsent {
        error: hyper::Error,
        request: Option<Box<Request<Outgoing>>>,
    },
    /// The request was written (maybe in part) and no response came.
    Sent {
        error: hyper::Error,
        /// On a reused connection, closed before any byte of an answer.
        stale: bool,
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

    /// The connection closed (or was reset) before a response began.
    pub(crate) fn closed_before_a_response(&self) -> bool {
        match self {
            Failure::Connect(_) => false,
            Failure::Unsent { .. } => true,
            Failure::Sent { error, .. } => closed_before_a_response(error),
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
                        Box::pin(connect(
                            addr,
                            self.connect_timeout,
                            self.idle_timeout,
                            self.tls.as_ref(),
                        ))
                        .await?
                    }
                },
            ),
        };
        Ok(Checkout {
            conn,
            pool: self.pool,
            keepalive: self.keepalive,
            addr: addr.clone(),
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
    pool: usize,
    keepalive: usize,
    addr: Arc<str>,
    tls: bool,
}

/// The connection that carried a response, until its body has ended.
#[derive(Debug)]
pub(crate) struct Held {
    /// `None` when its task ended before the response was read.
    conn: Option<Conn>,
    pool: usize,
    keepalive: usize,
    addr: Arc<str>,
}

impl Checkout {
    /// Whether the connection carried an exchange before.
    pub(crate) fn is_reused(&self) -> bool {
        // HTTP/2 gives back a request the connection never took (refused
        // stream, GOAWAY): nothing to copy ahead for.
        match &self.conn {
            Sender::H1(conn) => conn.is_reused(),
            Sender::H2(_) => false,
        }
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
    /// response head; the connection comes back with it, to give back once
    /// the body has ended ([`Held::into_body`]).
    ///
    /// # Errors
    /// See [`Failure`]; the connection is closed then.
    pub(crate) async fn send(
        self,
        request: Request<Outgoing>,
    ) -> Result<(Response<Incoming>, Held), Failure> {
        let Checkout {
            conn,
            pool,
            keepalive,
            addr,
            tls,
        } = self;
        let mut conn = match conn {
            Sender::H1(conn) => conn,
            Sender::H2(conn) => {
                let request = h2_request(request, &addr, tls);
                let mut sender = conn.sender;
                return match sender.try_send_request(request).await {
                    Ok(response) => Ok((
                        response,
                        Held {
                            conn: None,
                            pool,
                            keepalive,
                            addr,
                        },
                    )),
                    Err(e) => Err(failure(e, false)),
                };
            }
        };
        conn.begin();
        let reused = conn.is_reused();
        let mut sending = pin!(conn.sender.try_send_request(request));
        let result = tokio::select! {
            biased;
            result = &mut sending => result,
            _ = &mut conn.ended => {
                // The task is gone: a request it never read is returned
                // once the sender lets go of the queue it sits in.
                let answered = conn.answered();
                drop(conn);
                return match sending.await {
                    Ok(response) => Ok((response, Held { conn: None, pool, keepalive, addr })),
                    Err(e) => Err(failure(e, reused && !answered)),
                };
            }
        };
        match result {
            Ok(response) => Ok((
                response,
                Held {
                    conn: Some(conn),
                    pool,
                    keepalive,
                    addr,
                },
            )),
            Err(e) => Err(failure(e, reused && !conn.answered())),
        }
    }
}

impl Held {
    /// The response body, that gives the connection back to this worker's
    /// pool once it has ended (or closes it if it is dropped before).
    pub(crate) fn into_body(self, incoming: Incoming) -> UpstreamBody {
        UpstreamBody::new(incoming, self)
    }

    /// Gives the connection back (its exchange over).
    fn give_back(mut self) {
        if let Some(conn) = self.conn.take() {
            pool::give_back(self.pool, &self.addr, conn, self.keepalive);
        }
    }
}

/// A request as HTTP/2 sends it: absolute target (`:scheme` and
/// `:authority` from the `Host` header, or the endpoint), no `Host`.
fn h2_request(mut request: Request<Outgoing>, addr: &str, tls: bool) -> Request<Outgoing> {
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
    request
}

fn failure(
    mut e: hyper::client::conn::TrySendError<Request<Outgoing>>,
    unanswered_on_reused: bool,
) -> Failure {
    let request = e.take_message();
    let error = e.into_error();
    if request.is_some() || error.is_canceled() {
        return Failure::Unsent {
            error,
            request: request.map(Box::new),
        };
    }
    let stale = unanswered_on_reused && closed_before_a_response(&error);
    Failure::Sent { error, stale }
}

/// Whether `error` says the connection closed (or was reset) before a
/// response began.
pub(crate) fn closed_before_a_response(error: &hyper::Error) -> bool {
    if error.is_incomplete_message() || error.is_canceled() || error.is_closed() {
        return true;
    }
    let mut source = std::error::Error::source(error);
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<io::Error>() {
            use io::ErrorKind::*;
            if matches!(
                io.kind(),
                ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof
            ) {
                return true;
            }
        }
        source = e.source();
    }
    false
}
