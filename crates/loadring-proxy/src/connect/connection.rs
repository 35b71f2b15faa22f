//! One upstream connection: the socket (TCP, or TLS over it), opened
//! within a timeout, and for HTTP/1.1 the bytes read from it and not yet
//! used. No task of its own: the request holding it reads and writes.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::ClientConfig;
use tokio_rustls::TlsConnector;

/// What a read asks room for in a connection's buffer at first: an idle
/// connection per endpoint and worker adds up, so a small one.
const READ_BUFFER: usize = 4096;
/// The most a read asks room for: a large body is read in pieces that
/// grow while each read fills its room (fewer reads and frames), as hyper's
/// client did.
const MAX_READ_BUFFER: usize = 64 * 1024;

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

/// An HTTP/1.1 connection in a request's hands (or idle in a pool): the
/// socket, and what was read from it and not yet used.
#[derive(Debug)]
pub(crate) struct Conn {
    pub(crate) stream: Stream,
    pub(crate) buf: BytesMut,
    /// The room the next read asks for.
    read_size: usize,
    /// Exchanges it carried before the current one.
    pub(crate) served: u32,
}

impl Conn {
    pub(crate) fn new(stream: Stream) -> Self {
        Conn {
            stream,
            buf: BytesMut::new(),
            read_size: READ_BUFFER,
            served: 0,
        }
    }

    /// Whether the connection carried an exchange before this request.
    pub(crate) fn is_reused(&self) -> bool {
        self.served > 0
    }

    /// Reads what the backend sent into the buffer: the count, 0 at the
    /// end of its stream.
    pub(crate) fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        if self.buf.capacity() - self.buf.len() < READ_BUFFER / 4 {
            self.buf.reserve(self.read_size);
        }
        let room = self.buf.capacity() - self.buf.len();
        let polled = tokio_util::io::poll_read_buf(Pin::new(&mut self.stream), cx, &mut self.buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n == room) {
            self.read_size = (self.read_size * 2).min(MAX_READ_BUFFER);
        }
        polled
    }

    /// Its exchange over, before it idles: a buffer grown for a large body
    /// is let go (idle connections add up), the next reads start small.
    pub(crate) fn rest(&mut self) {
        if self.buf.capacity() > 2 * READ_BUFFER {
            self.buf = BytesMut::new();
        }
        self.read_size = READ_BUFFER;
    }

    /// Whether an idle connection can carry a request: nothing arrived on
    /// it since its last exchange, neither its end nor a stray byte (both
    /// mean the backend is done with it). One read that does not wait.
    pub(crate) fn is_usable(&mut self) -> bool {
        if !self.buf.is_empty() {
            return false;
        }
        let mut byte = [0u8; 1];
        match &mut self.stream {
            // Without a poll: no waker to register (nobody waits on an idle
            // connection), and no system call while the socket has not been
            // reported readable since its last read.
            Stream::Tcp(tcp) => {
                matches!(tcp.try_read(&mut byte), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
            }
            // TLS may hold what came (a close_notify read with the last
            // answer) where only a read of its own finds it. The waker is
            // never called: the read only looks.
            Stream::Tls(_) => {
                let mut cx = Context::from_waker(Waker::noop());
                let mut read = ReadBuf::new(&mut byte);
                matches!(
                    Pin::new(&mut self.stream).poll_read(&mut cx, &mut read),
                    Poll::Pending
                )
            }
        }
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

impl ConnectError {
    /// Whether the connection failed for want of this machine's resources
    /// (file descriptors, buffers, memory, local ports), not for anything
    /// the backend did: the endpoint is not to blame for it.
    pub(crate) fn is_local(&self) -> bool {
        match self {
            ConnectError::Io(_, e) => is_out_of_local_resources(e),
            _ => false,
        }
    }
}

/// `error` says the process or the machine ran out of something a new
/// socket needs.
pub(crate) fn is_out_of_local_resources(error: &io::Error) -> bool {
    matches!(
        error.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM | libc::EADDRNOTAVAIL)
    )
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

/// Connects to `addr` (`host:port`) within `timeout` for HTTP/1.1 (see
/// [`open`]).
pub(crate) async fn connect(
    addr: &str,
    timeout: Duration,
    tls: Option<&Arc<ClientConfig>>,
) -> Result<Conn, ConnectError> {
    Ok(Conn::new(open(addr, timeout, tls).await?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_want_of_local_resources_is_local() {
        let io = |errno| ConnectError::Io("b:1".into(), io::Error::from_raw_os_error(errno));
        for errno in [
            libc::EMFILE,
            libc::ENFILE,
            libc::ENOBUFS,
            libc::ENOMEM,
            libc::EADDRNOTAVAIL,
        ] {
            assert!(io(errno).is_local(), "errno {errno}");
        }
        for errno in [
            libc::ECONNREFUSED,
            libc::ETIMEDOUT,
            libc::EHOSTUNREACH,
            libc::ENETUNREACH,
        ] {
            assert!(!io(errno).is_local(), "errno {errno}");
        }
        let timeout = ConnectError::Timeout("b:1".into(), Duration::from_secs(2));
        assert!(!timeout.is_local());
        let tls = ConnectError::Tls("b:1".into(), io::Error::from_raw_os_error(libc::EMFILE));
        assert!(
            !tls.is_local(),
            "a TLS failure comes after the socket was made"
        );
    }
}
