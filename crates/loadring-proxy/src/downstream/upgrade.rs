//! An HTTP/1.1 client's connection after its upgrade was answered `101`:
//! handed by the connection to the tunnel (websocket.rs) through the
//! request's extensions, with the bytes the client sent past its head.

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::oneshot;

use super::prefixed::Prefixed;

/// A client connection of any kind (plain or TLS).
pub(crate) trait Io: AsyncRead + AsyncWrite + Send + Unpin + 'static {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Io for T {}

/// A switched connection: what the client sent after its head first.
pub(crate) type Switched = Prefixed<Box<dyn Io>>;

/// In a request that asks to switch protocols: where its connection
/// comes once the `101` is written. Request extensions must be `Clone`;
/// the first taker has it.
#[derive(Clone)]
pub(crate) struct PendingSwitch(Arc<Mutex<Option<oneshot::Receiver<Switched>>>>);

impl std::fmt::Debug for PendingSwitch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PendingSwitch")
    }
}

impl PendingSwitch {
    pub(crate) fn new() -> (oneshot::Sender<Switched>, Self) {
        let (send, receive) = oneshot::channel();
        (send, PendingSwitch(Arc::new(Mutex::new(Some(receive)))))
    }

    /// The connection to come, if nobody took it before.
    pub(crate) fn take(&self) -> Option<oneshot::Receiver<Switched>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }
}
