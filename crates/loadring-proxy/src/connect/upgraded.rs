//! The backend's side of a tunnel after `101 Switching Protocols`: the
//! connection's socket, the bytes that came after the response head
//! first.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Buf;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::connection::Conn;

/// A switched connection, as the tunnel reads and writes it.
#[derive(Debug)]
pub(crate) struct Upgraded {
    pub(crate) conn: Conn,
}

impl AsyncRead for Upgraded {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let conn = &mut self.get_mut().conn;
        if !conn.buf.is_empty() {
            let n = conn.buf.len().min(buf.remaining());
            buf.put_slice(&conn.buf[..n]);
            conn.buf.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut conn.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Upgraded {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().conn.stream).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().conn.stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().conn.stream).poll_shutdown(cx)
    }
}
