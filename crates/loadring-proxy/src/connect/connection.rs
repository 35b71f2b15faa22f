//! One upstream connection: the socket (watched for the first byte of each
//! answer), hyper's HTTP/1 sender, and the task that drives it and closes
//! it after the idle timeout.

use std::io;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

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

/// The socket, noting each byte the backend sends.
#[derive(Debug)]
struct Watched {
    stream: TcpStream,
    shared: Arc<Shared>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.shared.answered.store(true, Relaxed);
        }
        polled
    }
}

impl AsyncWrite for Watched {
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
    #[error("connect to {0}: HTTP/1 handshake: {1}")]
    Handshake(String, hyper::Error),
}

/// Connects to `addr` (`host:port`) within `timeout`, with TCP_NODELAY,
/// and starts the connection's task on this worker; it closes the
/// connection once it has been idle for `idle_timeout`.
pub(crate) async fn connect(
    addr: &str,
    timeout: Duration,
    idle_timeout: Duration,
) -> Result<Conn, ConnectError> {
    let stream = match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => return Err(ConnectError::Io(addr.to_string(), e)),
        Err(_) => return Err(ConnectError::Timeout(addr.to_string(), timeout)),
    };
    // Small requests and answers go out at once, as the old client did.
    let _ = stream.set_nodelay(true);
    let shared = Arc::new(Shared {
        state: AtomicU64::new(IN_USE),
        answered: AtomicBool::new(false),
    });
    let io = TokioIo::new(Watched {
        stream,
        shared: shared.clone(),
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
    connection: http1::Connection<TokioIo<Watched>, Outgoing>,
    shared: Arc<Shared>,
    idle_timeout: Duration,
    end: oneshot::Sender<()>,
) {
    let mut connection = pin!(connection);
    let mut deadline = Instant::now() + idle_timeout;
    loop {
        tokio::select! {
            biased;
            result = &mut connection => {
                if let Err(e) = result {
                    tracing::debug!("upstream connection: {e}");
                }
                break;
            }
            () = tokio::time::sleep_until(deadline.into()) => {
                match shared.close_if_idle(idle_timeout, Instant::now()) {
                    Ok(()) => break,
                    Err(next) => deadline = next,
                }
            }
        }
    }
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
