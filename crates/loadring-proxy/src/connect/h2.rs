//! HTTP/2 to backends (`--backend-protocol h2c`): one connection per
//! endpoint per worker thread, shared by every stream of that worker's
//! requests (gRPC calls included), made again once it has closed.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use hyper::client::conn::http2::{self, SendRequest};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::sync::Mutex;
use tokio_rustls::rustls::ClientConfig;

use super::connection::{open, ConnectError};
use crate::request_body::Outgoing;

/// The connection of one endpoint, being made by at most one request (the
/// others wait for it rather than each making their own).
type Slot = Arc<Mutex<Option<SendRequest<Outgoing>>>>;

thread_local! {
    /// By pool id and backend address.
    static CONNECTIONS: RefCell<HashMap<(usize, Arc<str>), Slot>> = RefCell::new(HashMap::new());
}

/// This worker's connection to `addr`, made now when there is none open
/// (or when `fresh`: the last one failed a stream).
pub(crate) async fn sender(
    pool: usize,
    addr: &Arc<str>,
    timeout: Duration,
    tls: Option<&Arc<ClientConfig>>,
    fresh: bool,
) -> Result<SendRequest<Outgoing>, ConnectError> {
    let slot = CONNECTIONS
        .try_with(|all| {
            all.borrow_mut()
                .entry((pool, addr.clone()))
                .or_default()
                .clone()
        })
        .unwrap_or_default();
    let mut held = slot.lock().await;
    if let Some(sender) = held.as_ref() {
        if !fresh && !sender.is_closed() {
            return Ok(sender.clone());
        }
    }
    let stream = open(addr, timeout, tls).await?;
    let mut builder = http2::Builder::new(TokioExecutor::new());
    // Pings find a dead peer on a connection that otherwise waits for
    // streams forever.
    builder
        .timer(TokioTimer::new())
        .keep_alive_interval(Duration::from_secs(30))
        .keep_alive_timeout(Duration::from_secs(10));
    let (sender, connection) = builder
        .handshake(TokioIo::new(stream))
        .await
        .map_err(|e| ConnectError::Handshake(addr.to_string(), e))?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!("upstream h2 connection: {e}");
        }
    });
    *held = Some(sender.clone());
    Ok(sender)
}
