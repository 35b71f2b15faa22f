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
pub(crate) mod pool;

use std::io;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};
use hyper::body::Incoming;

pub(crate) use body::UpstreamBody;
pub(crate) use connection::ConnectError;
use connection::{connect, Conn};

use crate::request_body::Outgoing;

/// How long an unused connection is kept open.
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Connections to the backends of one user (a cluster's requests, its
/// active checks).
#[derive(Debug)]
pub(crate) struct Upstream {
    pool: usize,
    connect_timeout: Duration,
    idle_timeout: Duration,
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
    /// Connections made within `connect_timeout`, closed after 60 s idle.
    pub(crate) fn new(connect_timeout: Duration) -> Self {
        Upstream {
            pool: pool::new_id(),
            connect_timeout,
            idle_timeout: IDLE_TIMEOUT,
        }
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
        let conn = match (!fresh).then(|| pool::take(self.pool, addr)).flatten() {
            Some(conn) => conn,
            None => connect(addr, self.connect_timeout, self.idle_timeout).await?,
        };
        Ok(Checkout {
            conn,
            pool: self.pool,
            addr: addr.clone(),
        })
    }
}

/// A connection held by one request, before it is sent on.
#[derive(Debug)]
pub(crate) struct Checkout {
    conn: Conn,
    pool: usize,
    addr: Arc<str>,
}

/// The connection that carried a response, until its body has ended.
#[derive(Debug)]
pub(crate) struct Held {
    /// `None` when its task ended before the response was read.
    conn: Option<Conn>,
    pool: usize,
    addr: Arc<str>,
}

impl Checkout {
    /// Whether the connection carried an exchange before.
    pub(crate) fn is_reused(&self) -> bool {
        self.conn.is_reused()
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
            mut conn,
            pool,
            addr,
        } = self;
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
                    Ok(response) => Ok((response, Held { conn: None, pool, addr })),
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
            pool::give_back(self.pool, &self.addr, conn);
        }
    }
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
