//! A connection whose first bytes were read already: they are read again
//! first. For the bytes read to tell HTTP/2's preface from HTTP/1.1, and
//! those a client sent past its upgrade's head (its new protocol's first).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// `S`, `read` given back before anything more is read from it.
#[derive(Debug)]
pub(crate) struct Prefixed<S> {
    read: Bytes,
    inner: S,
}

impl<S> Prefixed<S> {
    pub(crate) fn new(read: Bytes, inner: S) -> Self {
        Prefixed { read, inner }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Prefixed<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if !self.read.is_empty() {
            let n = self.read.len().min(buf.remaining());
            buf.put_slice(&self.read[..n]);
            self.read.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Prefixed<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn the_bytes_read_before_come_first_then_the_connections() {
        let (mut near, far) = tokio::io::duplex(64);
        near.write_all(b" world").await.unwrap();
        drop(near);
        let mut prefixed = Prefixed::new(Bytes::from_static(b"hello"), far);
        let mut two = [0u8; 2];
        prefixed.read_exact(&mut two).await.unwrap();
        assert_eq!(&two, b"he");
        let mut rest = String::new();
        prefixed.read_to_string(&mut rest).await.unwrap();
        assert_eq!(rest, "llo world");
    }
}
