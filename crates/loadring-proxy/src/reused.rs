//! Telling a request lost on a stale keep-alive connection from one a
//! backend failed on.
//!
//! A backend closes an idle keep-alive connection whenever its own timeout
//! says so; a request sent on it at that moment meets a closed connection
//! before the backend could read a byte of it. Such a request is safe to
//! send again, whatever its method, on a fresh connection: nginx and
//! HAProxy do so. The same failure on a fresh connection means the backend
//! took the request and died on it, and only an idempotent request may be
//! repeated.
//!
//! The upstream client does not say whether the connection it used was
//! reused, so [`CountingConnector`] wraps each connection in a
//! [`CountedConnection`] that keeps count of its exchanges (a request
//! written after a response was read begins a new one) and whether the
//! current exchange has read any byte. Its [`UpstreamConnection`] handle
//! comes back with each response and with each error
//! ([`lost_before_processing`], [`close_connection`]).
//!
//! A request can also be lost without an error. The pool may hand it to a
//! connection whose task is ending (the backend closed it a moment ago).
//! The hand-off is a channel that drops what it holds when the task drops
//! its end, so the request normally comes back and goes to another
//! connection; but a send racing that drop lands after the drain, and the
//! request stays in a queue nobody reads while the pool's handle waits on
//! it: neither a response nor an error ever comes. [`unless_dropped_unsent`] watches the connection a request was
//! handed to, and gives the request up when that connection is gone
//! without having written it: then nothing of it reached the backend, and
//! it is safe to send again on a fresh connection.

use std::future::{poll_fn, Future};
use std::io;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use http::{Response, Uri};
use hyper_util::client::legacy::connect::{
    CaptureConnection, Connected, Connection, HttpConnector,
};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// What is known of one upstream connection, shared with its users.
#[derive(Debug, Default)]
struct State {
    /// Requests begun on it (a write after a read begins one).
    exchanges: AtomicU64,
    /// A byte was read since the current request began.
    read_since_request: AtomicBool,
    /// The proxy wants it closed.
    closing: AtomicBool,
    /// The connection's task, to wake when it is to close.
    reader: Mutex<Option<Waker>>,
    /// The socket is gone (the connection's task dropped it).
    ended: AtomicBool,
    /// The request handed to the connection last, to wake when it ends.
    watcher: Mutex<Option<Waker>>,
}

/// A handle on one upstream connection.
#[derive(Debug, Clone, Default)]
pub struct UpstreamConnection(Arc<State>);

impl UpstreamConnection {
    /// Requests begun on the connection.
    pub fn exchanges(&self) -> u64 {
        self.0.exchanges.load(Relaxed)
    }

    /// Whether the current request was sent on a connection that had
    /// carried another exchange, and no byte of its answer has come.
    pub fn reused_and_unanswered(&self) -> bool {
        self.exchanges() >= 2 && !self.0.read_since_request.load(Relaxed)
    }

    /// Whether the socket is gone with no request written since the last
    /// answer began: a request handed to it then was never sent. Until
    /// then, `cx` is woken when it goes.
    fn ended_with_nothing_unanswered(&self, cx: &Context<'_>) -> bool {
        let state = &self.0;
        {
            let mut watcher = state.watcher.lock().unwrap_or_else(|e| e.into_inner());
            match &*watcher {
                Some(w) if w.will_wake(cx.waker()) => {}
                _ => *watcher = Some(cx.waker().clone()),
            }
        }
        // Read after the waker is in place: an end after this read wakes it.
        state.ended.load(Relaxed)
            && (state.exchanges.load(Relaxed) == 0 || state.read_since_request.load(Relaxed))
    }

    /// Closes the connection: it is not used again, and its next read ends
    /// it (now, when it is idle).
    pub fn close(&self) {
        self.0.closing.store(true, Relaxed);
        let reader = self
            .0
            .reader
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(waker) = reader {
            waker.wake();
        }
    }
}

/// An [`HttpConnector`] whose connections count their responses.
#[derive(Debug, Clone)]
pub struct CountingConnector(pub HttpConnector);

/// A connection made by [`CountingConnector`].
#[derive(Debug)]
pub struct CountedConnection {
    stream: TcpStream,
    handle: UpstreamConnection,
}

type ConnectFuture =
    Pin<Box<dyn Future<Output = Result<TokioIo<CountedConnection>, BoxError>> + Send>>;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl tower_service::Service<Uri> for CountingConnector {
    type Response = TokioIo<CountedConnection>;
    type Error = BoxError;
    type Future = ConnectFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let connecting = self.0.call(uri);
        Box::pin(async move {
            Ok(TokioIo::new(CountedConnection {
                stream: connecting.await?.into_inner(),
                handle: UpstreamConnection::default(),
            }))
        })
    }
}

impl Connection for CountedConnection {
    fn connected(&self) -> Connected {
        self.stream.connected().extra(self.handle.clone())
    }
}

impl AsyncRead for CountedConnection {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let state = self.handle.0.clone();
        if state.closing.load(Relaxed) {
            return Poll::Ready(Err(io::Error::other(
                "closed by the proxy: the backend's response was malformed",
            )));
        }
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        match &polled {
            Poll::Ready(Ok(())) if buf.filled().len() > before => {
                state.read_since_request.store(true, Relaxed);
            }
            Poll::Pending => {
                *state.reader.lock().unwrap_or_else(|e| e.into_inner()) = Some(cx.waker().clone());
                // A close asked for meanwhile would not wake this task.
                if state.closing.load(Relaxed) {
                    cx.waker().wake_by_ref();
                }
            }
            _ => {}
        }
        polled
    }
}

impl AsyncWrite for CountedConnection {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.begin_exchange();
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.begin_exchange();
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }
}

impl Drop for CountedConnection {
    fn drop(&mut self) {
        let state = &self.handle.0;
        state.ended.store(true, Relaxed);
        let watcher = state
            .watcher
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(waker) = watcher {
            waker.wake();
        }
    }
}

impl CountedConnection {
    /// A write after a read (or the first write) begins an exchange.
    fn begin_exchange(&self) {
        let state = &self.handle.0;
        if state.read_since_request.swap(false, Relaxed) || state.exchanges.load(Relaxed) == 0 {
            state.exchanges.fetch_add(1, Relaxed);
        }
    }
}

/// Runs `sending` (a request sent through the pool with `capture` on it)
/// to its end, unless the connection the request was handed to is gone
/// without having written it: `None` then, and nothing of the request
/// reached a backend.
///
/// The pool's own answer in that case may never come, when its hand-off
/// raced the end of the connection's task; waiting for it would hold the
/// request until its timeout.
pub async fn unless_dropped_unsent<F: Future>(
    capture: CaptureConnection,
    sending: F,
) -> Option<F::Output> {
    let mut sending = pin!(sending);
    poll_fn(|cx| {
        // The pool hands the request over (and captures the connection)
        // only while `sending` is polled, so the connection read below is
        // the one it holds now.
        if let Poll::Ready(output) = sending.as_mut().poll(cx) {
            return Poll::Ready(Some(output));
        }
        if dropped_unsent(&capture, cx) {
            return Poll::Ready(None);
        }
        Poll::Pending
    })
    .await
}

fn dropped_unsent(capture: &CaptureConnection, cx: &Context<'_>) -> bool {
    let connected = capture.connection_metadata();
    let Some(connected) = connected.as_ref() else {
        return false;
    };
    let mut extensions = http::Extensions::new();
    connected.get_extras(&mut extensions);
    extensions
        .get::<UpstreamConnection>()
        .is_some_and(|c| c.ended_with_nothing_unanswered(cx))
}

/// Closes the connection that carried `response` (a response whose framing
/// cannot be trusted leaves the connection in an unknown state).
pub fn close_connection<B>(response: &Response<B>) {
    if let Some(connection) = response.extensions().get::<UpstreamConnection>() {
        connection.close();
    }
}

/// Whether the request that failed with `error` is safe to send again
/// whatever its method: it was never sent (the client gave it up before
/// writing it), or it met a closed (or reset) connection that had carried
/// an earlier exchange, before any byte of an answer: a stale keep-alive
/// connection, not a backend failing this request.
pub fn lost_before_processing(error: &hyper_util::client::legacy::Error) -> bool {
    if error.is_connect() {
        return false;
    }
    if never_sent(error) {
        return true;
    }
    if !closed_before_a_response(error) {
        return false;
    }
    let Some(connected) = error.connect_info() else {
        return false;
    };
    let mut extensions = http::Extensions::new();
    connected.get_extras(&mut extensions);
    extensions
        .get::<UpstreamConnection>()
        .is_some_and(UpstreamConnection::reused_and_unanswered)
}

/// hyper's word that the request was not written at all.
fn never_sent(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = error.source();
    while let Some(e) = source {
        if e.downcast_ref::<hyper::Error>()
            .is_some_and(hyper::Error::is_canceled)
        {
            return true;
        }
        source = e.source();
    }
    false
}

/// Whether the error says the connection closed (or was reset) before a
/// response began.
pub(crate) fn closed_before_a_response(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = error.source();
    while let Some(e) = source {
        if let Some(h) = e.downcast_ref::<hyper::Error>() {
            if h.is_incomplete_message() || h.is_canceled() || h.is_closed() {
                return true;
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// Counts its wake-ups.
    #[derive(Default)]
    struct Wakes(AtomicUsize);

    impl Wake for Wakes {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Relaxed);
        }
    }

    /// A counted connection and its peer's end.
    async fn connection() -> (CountedConnection, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let stream = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (peer, _) = listener.accept().await.unwrap();
        let connection = CountedConnection {
            stream,
            handle: UpstreamConnection::default(),
        };
        (connection, peer)
    }

    /// One request written and its answer read.
    async fn exchange(connection: &mut CountedConnection, peer: &mut TcpStream) {
        connection.write_all(b"request").await.unwrap();
        let mut buf = [0; 7];
        peer.read_exact(&mut buf).await.unwrap();
        peer.write_all(b"answer").await.unwrap();
        let mut buf = [0; 6];
        connection.read_exact(&mut buf).await.unwrap();
    }

    #[tokio::test]
    async fn a_connection_gone_after_its_answer_wakes_its_watcher_and_held_nothing() {
        let (mut connection, mut peer) = connection().await;
        exchange(&mut connection, &mut peer).await;
        let handle = connection.handle.clone();
        let wakes = Arc::new(Wakes::default());
        let waker = Waker::from(wakes.clone());
        let cx = Context::from_waker(&waker);
        // Alive: a request handed to it may still be written.
        assert!(!handle.ended_with_nothing_unanswered(&cx));
        assert_eq!(wakes.0.load(Relaxed), 0);
        drop(connection);
        assert_eq!(wakes.0.load(Relaxed), 1, "its end wakes the watcher");
        assert!(handle.ended_with_nothing_unanswered(&cx));
    }

    #[tokio::test]
    async fn a_connection_gone_after_writing_a_request_may_have_delivered_it() {
        let (mut connection, mut peer) = connection().await;
        exchange(&mut connection, &mut peer).await;
        connection.write_all(b"another").await.unwrap();
        let handle = connection.handle.clone();
        drop(connection);
        let cx = Context::from_waker(Waker::noop());
        assert!(!handle.ended_with_nothing_unanswered(&cx));
    }

    #[tokio::test]
    async fn a_new_connection_gone_before_any_write_held_nothing() {
        let (connection, _peer) = connection().await;
        let handle = connection.handle.clone();
        let cx = Context::from_waker(Waker::noop());
        assert!(!handle.ended_with_nothing_unanswered(&cx));
        drop(connection);
        assert!(handle.ended_with_nothing_unanswered(&cx));
    }
}
