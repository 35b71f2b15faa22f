//! One upstream connection: the socket (watched for the first byte of each
//! answer), hyper's HTTP/1 sender, and the task that drives it and closes
//! it after the idle timeout.

use std::future::Future;
use std::io;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
// tokio's clock (the system's, unless a test pauses it): idle times and the
// timer that acts on them read the same one.
use tokio::time::Instant;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::ClientConfig;
use tokio_rustls::TlsConnector;

use crate::request_body::Outgoing;

/// The read buffer of an upstream connection.
const READ_BUFFER: usize = 4096;

/// In use by a request (or being made).
const IN_USE: u64 = 0;
/// Closed for good: never handed out again.
const CLOSED: u64 = u64::MAX;

/// The process's clock origin: idle times are stored as milliseconds since
/// it (plus one, so that 0 means "in use").
fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

fn now_mark() -> u64 {
    let ms = u64::try_from(origin().elapsed().as_millis()).unwrap_or(CLOSED - 2);
    ms.saturating_add(1).min(CLOSED - 1)
}

fn instant_of(mark: u64) -> Instant {
    origin() + Duration::from_millis(mark - 1)
}

/// What the pool, the request and the connection's task share.
#[derive(Debug)]
pub(crate) struct Shared {
    /// [`IN_USE`], [`CLOSED`], or when it became idle (see [`now_mark`]).
    state: AtomicU64,
    /// A byte came from the backend since the current request was handed over.
    answered: AtomicBool,
}

impl Shared {
    /// Takes an idle connection for a request: false when its task closed
    /// it meanwhile (or another request has it).
    pub(crate) fn try_take(&self) -> bool {
        let state = self.state.load(Relaxed);
        state != IN_USE
            && state != CLOSED
            && self
                .state
                .compare_exchange(state, IN_USE, Relaxed, Relaxed)
                .is_ok()
    }

    /// Back in the pool, idle from now.
    pub(crate) fn set_idle(&self) {
        let _ = self
            .state
            .compare_exchange(IN_USE, now_mark(), Relaxed, Relaxed);
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.state.load(Relaxed) == CLOSED
    }

    /// Closes the connection if it has been idle for `timeout` at `now`;
    /// otherwise says when to look again.
    fn close_if_idle(&self, timeout: Duration, now: Instant) -> Result<(), Instant> {
        let state = self.state.load(Relaxed);
        if state == IN_USE {
            return Err(now + timeout);
        }
        let deadline = instant_of(state) + timeout;
        if now < deadline {
            return Err(deadline);
        }
        match self.state.compare_exchange(state, CLOSED, Relaxed, Relaxed) {
            Ok(_) => Ok(()),
            // Taken (or idle again) meanwhile: look again later.
            Err(_) => Err(now + timeout),
        }
    }
}

/// A connection to a backend: cleartext, or TLS over it.
#[derive(Debug)]
pub(crate) enum Stream {
    Tcp(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s).poll_shutdown(cx),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Tcp(s) => s.is_write_vectored(),
            Stream::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Tls(s) => Pin::new(s).poll_write_vectored(cx, bufs),
        }
    }
}

/// What a connection's reads are shown to, as they come.
pub(crate) trait ReadObserver {
    /// `bytes` came from the backend, after those before.
    fn saw(&mut self, bytes: &[u8]);
}

/// An HTTP/1 connection notes that an answer began.
impl ReadObserver for Arc<Shared> {
    fn saw(&mut self, _: &[u8]) {
        self.answered.store(true, Relaxed);
    }
}

/// The socket, showing each read to its observer; writes pass through.
#[derive(Debug)]
pub(crate) struct Observed<O> {
    pub(crate) stream: Stream,
    pub(crate) observer: O,
}

impl<O: ReadObserver + Unpin> AsyncRead for Observed<O> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.stream).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.observer.saw(&buf.filled()[before..]);
        }
        polled
    }
}

impl<O: Unpin> AsyncWrite for Observed<O> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
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
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }
}

/// A connection in a request's hands (or idle in a pool).
#[derive(Debug)]
pub(crate) struct Conn {
    pub(crate) sender: SendRequest<Outgoing>,
    pub(crate) shared: Arc<Shared>,
    /// Resolves (with an error) once the connection's task has ended.
    pub(crate) ended: oneshot::Receiver<()>,
    /// Requests it carried before the current one.
    pub(crate) served: u32,
}

impl Conn {
    /// Whether the connection carried an exchange before this request.
    pub(crate) fn is_reused(&self) -> bool {
        self.served > 0
    }

    /// Whether a byte of an answer came since the request was handed over.
    pub(crate) fn answered(&self) -> bool {
        self.shared.answered.load(Relaxed)
    }

    /// A request is about to be handed over.
    pub(crate) fn begin(&mut self) {
        self.shared.answered.store(false, Relaxed);
    }
}

/// Why a connection could not be made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnectError {
    #[error("connect to {0}: {1}")]
    Io(String, io::Error),
    #[error("connect to {0}: timed out after {1:?}")]
    Timeout(String, Duration),
    #[error("connect to {0}: HTTP handshake: {1}")]
    Handshake(String, hyper::Error),
    #[error("connect to {0}: TLS: {1}")]
    Tls(String, io::Error),
}

/// Opens a connection to `addr` (`host:port`) within `timeout`, with
/// TCP_NODELAY, and a TLS session over it when `tls` is given (SNI: the
/// host; the certificate verified, a failure is an error).
pub(crate) async fn open(
    addr: &str,
    timeout: Duration,
    tls: Option<&Arc<ClientConfig>>,
) -> Result<Stream, ConnectError> {
    let opening = async {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|e| ConnectError::Io(addr.to_string(), e))?;
        // Small requests and answers go out at once, as the old client did.
        let _ = stream.set_nodelay(true);
        let Some(tls) = tls else {
            return Ok(Stream::Tcp(stream));
        };
        let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let name = ServerName::try_from(host.to_string()).map_err(|e| {
            ConnectError::Tls(
                addr.to_string(),
                io::Error::new(io::ErrorKind::InvalidInput, e),
            )
        })?;
        let session = TlsConnector::from(tls.clone())
            .connect(name, stream)
            .await
            .map_err(|e| ConnectError::Tls(addr.to_string(), e))?;
        Ok(Stream::Tls(Box::new(session)))
    };
    match tokio::time::timeout(timeout, opening).await {
        Ok(result) => result,
        Err(_) => Err(ConnectError::Timeout(addr.to_string(), timeout)),
    }
}

/// Connects to `addr` (`host:port`) within `timeout`, with TCP_NODELAY,
/// and starts the connection's task on this worker; it closes the
/// connection once it has been idle for `idle_timeout`.
pub(crate) async fn connect(
    addr: &str,
    timeout: Duration,
    idle_timeout: Duration,
    tls: Option<&Arc<ClientConfig>>,
) -> Result<Conn, ConnectError> {
    let stream = open(addr, timeout, tls).await?;
    let shared = Arc::new(Shared {
        state: AtomicU64::new(IN_USE),
        answered: AtomicBool::new(false),
    });
    let io = TokioIo::new(Observed {
        stream,
        observer: shared.clone(),
    });
    let (sender, connection) = http1::Builder::new()
        // A fixed 4 KiB read buffer (grown only while a head is longer)
        // instead of hyper's adaptive one, which starts at 8 KiB and grows:
        // an idle connection per endpoint and thread adds up.
        .read_buf_exact_size(Some(READ_BUFFER))
        .handshake(io)
        .await
        .map_err(|e| ConnectError::Handshake(addr.to_string(), e))?;
    let (end, ended) = oneshot::channel();
    tokio::spawn(drive(connection, shared.clone(), idle_timeout, end));
    Ok(Conn {
        sender,
        shared,
        ended,
        served: 0,
    })
}

/// Drives the connection until it ends, or until it has been idle for
/// `idle_timeout` (then it is closed); dropping `end` tells the request
/// holding it.
async fn drive(
    connection: http1::Connection<TokioIo<Observed<Arc<Shared>>>, Outgoing>,
    shared: Arc<Shared>,
    idle_timeout: Duration,
    end: oneshot::Sender<()>,
) {
    // An answer `101 Switching Protocols` hands the socket over to the
    // tunnel (WebSocket), and the connection's task ends.
    let mut connection = pin!(connection.with_upgrades());
    let mut timer = pin!(tokio::time::sleep(idle_timeout));
    // The timer is polled once per deadline, to register it, not on every
    // wake-up of the connection (several per request): once registered it
    // wakes this task when it fires, and `is_elapsed` says it did.
    let mut timer_registered = false;
    std::future::poll_fn(|cx| loop {
        if let Poll::Ready(result) = connection.as_mut().poll(cx) {
            if let Err(e) = result {
                tracing::debug!("upstream connection: {e}");
            }
            return Poll::Ready(());
        }
        if !timer_registered {
            if timer.as_mut().poll(cx).is_pending() {
                timer_registered = true;
                return Poll::Pending;
            }
        } else if !timer.is_elapsed() {
            return Poll::Pending;
        }
        match shared.close_if_idle(idle_timeout, Instant::now()) {
            Ok(()) => return Poll::Ready(()),
            Err(next) => {
                timer.as_mut().reset(next);
                timer_registered = false;
            }
        }
    })
    .await;
    shared.state.store(CLOSED, Relaxed);
    drop(end);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared(state: u64) -> Shared {
        Shared {
            state: AtomicU64::new(state),
            answered: AtomicBool::new(false),
        }
    }

    #[test]
    fn an_idle_connection_closes_at_its_deadline_and_not_before() {
        let s = shared(IN_USE);
        s.set_idle();
        let since = instant_of(s.state.load(Relaxed));
        let timeout = Duration::from_secs(60);
        let early = since + Duration::from_secs(59);
        assert_eq!(s.close_if_idle(timeout, early), Err(since + timeout));
        assert!(!s.is_closed());
        assert_eq!(s.close_if_idle(timeout, since + timeout), Ok(()));
        assert!(s.is_closed());
        assert!(!s.try_take(), "a closed connection is never handed out");
    }

    /// The connection's task closes an idle connection once its timeout
    /// has passed, and one in use never, however many timeouts pass.
    #[tokio::test(start_paused = true)]
    async fn the_task_closes_a_connection_idle_for_its_timeout() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let mut open = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                open.push(stream);
            }
        });
        let idle_timeout = Duration::from_secs(60);
        let mut idle = connect(&addr, Duration::from_secs(5), idle_timeout, None)
            .await
            .unwrap();
        let mut busy = connect(&addr, Duration::from_secs(5), idle_timeout, None)
            .await
            .unwrap();
        idle.shared.set_idle();
        // Not before its timeout...
        let early = tokio::time::timeout(Duration::from_secs(59), &mut idle.ended).await;
        assert!(early.is_err(), "closed before its idle timeout");
        assert!(!idle.shared.is_closed());
        // ...and at it (time only moves when nothing else can run).
        let closed = tokio::time::timeout(Duration::from_secs(2), &mut idle.ended).await;
        assert!(closed.is_ok(), "still open past its idle timeout");
        assert!(idle.shared.is_closed());
        // In use (never given back): open after several timeouts.
        let still = tokio::time::timeout(5 * idle_timeout, &mut busy.ended).await;
        assert!(still.is_err(), "a connection in use was closed");
        assert!(!busy.shared.is_closed());
    }

    #[test]
    fn a_connection_in_use_is_never_closed_for_idleness() {
        let s = shared(IN_USE);
        let now = Instant::now() + Duration::from_secs(3600);
        assert!(s.close_if_idle(Duration::from_secs(1), now).is_err());
        assert!(!s.is_closed());
        assert!(!s.try_take(), "in use: not handed out twice");
        s.set_idle();
        assert!(s.try_take());
        assert!(!s.try_take());
    }
}
