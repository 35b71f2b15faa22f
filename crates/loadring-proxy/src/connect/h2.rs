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
    drop(held);
    // A new connection is rare (one per endpoint and thread, again after a
    // close): the moment to forget the slots of closed connections, those
    // of endpoints gone from the membership or of replaced forwarders
    // included, so the map holds no more than the connections open.
    let _ = CONNECTIONS.try_with(|all| all.borrow_mut().retain(|_, slot| worth_keeping(slot)));
    Ok(sender)
}

/// A slot in use (being filled) or holding an open connection.
fn worth_keeping(slot: &Slot) -> bool {
    match slot.try_lock() {
        Ok(held) => held.as_ref().is_some_and(|sender| !sender.is_closed()),
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use bytes::Bytes;
    use http_body_util::Empty;
    use hyper::service::service_fn;
    use tokio::net::TcpListener;

    use super::*;
    use crate::connect::pool::new_id;

    const WAIT: Duration = Duration::from_secs(10);

    /// An HTTP/2 server that answers every stream; dropping the sender
    /// ends its accept loop and every connection it serves.
    async fn h2_backend() -> (Arc<str>, tokio::sync::oneshot::Sender<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let mut served = tokio::task::JoinSet::new();
            loop {
                tokio::select! {
                    _ = &mut stopped => break,
                    accepted = listener.accept() => {
                        let Ok((stream, _)) = accepted else { break };
                        served.spawn(
                            hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                                .serve_connection(
                                    TokioIo::new(stream),
                                    service_fn(|_| async {
                                        Ok::<_, Infallible>(http::Response::new(Empty::<Bytes>::new()))
                                    }),
                                ),
                        );
                    }
                }
            }
            served.abort_all();
        });
        (addr.into(), stop)
    }

    fn slots() -> usize {
        CONNECTIONS.with(|all| all.borrow().len())
    }

    #[tokio::test]
    async fn the_slots_of_closed_connections_go_when_a_new_one_is_made() {
        let pool = new_id();
        let (gone, stop_gone) = h2_backend().await;
        let (kept, _keep) = h2_backend().await;
        let first = sender(pool, &gone, WAIT, None, false).await.unwrap();
        let open = sender(pool, &kept, WAIT, None, false).await.unwrap();
        assert_eq!(slots(), 2);
        // The first backend goes: its connection closes.
        drop(stop_gone);
        let closed = tokio::time::timeout(WAIT, async {
            while !first.is_closed() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
        assert!(closed.is_ok(), "the close was seen");
        assert_eq!(slots(), 2, "nothing swept before a new connection");
        let (next, _next) = h2_backend().await;
        let _third = sender(pool, &next, WAIT, None, false).await.unwrap();
        assert_eq!(slots(), 2, "the closed one's slot went, the open ones stay");
        let again = sender(pool, &kept, WAIT, None, false).await.unwrap();
        assert!(
            !again.is_closed() && !open.is_closed(),
            "the open one is reused"
        );
        assert_eq!(slots(), 2);
    }
}
