//! A client that reads nothing for the send timeout is cut off.
//!
//! A response goes to its client as fast as the client reads it. One that
//! stops reading (its window full, on purpose or not) holds its request's
//! place at the endpoint, the connection to the backend and often a
//! backend's worker, for as long as it keeps its connection open: the
//! "slow read" attack, and a skewed in-flight count for bounded load.
//! nginx's `send_timeout` (60 s) closes such a connection once nothing
//! could be written for that long, HAProxy's `timeout client` likewise.
//!
//! [`SendLimit`] is the client's socket with that limit: a write that
//! cannot proceed starts the clock, any byte written stops it, and a write
//! still held back when the clock runs out fails (`TimedOut`), which ends
//! the connection and abandons its requests (`--max-abandoned`). A write
//! that goes through at once, the usual case, costs a flag's check; the
//! clock is touched only when the client's window is full.

use std::future::Future;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// `S`, whose writes fail once held back for `within` (module docs).
#[derive(Debug)]
pub(crate) struct SendLimit<S> {
    inner: S,
    within: Duration,
    /// Made at the first write held back, then reset.
    clock: Option<Pin<Box<Sleep>>>,
    /// Whether the clock runs: a write is held back since it was set.
    running: bool,
}

impl<S> SendLimit<S> {
    pub(crate) fn new(inner: S, within: Duration) -> Self {
        SendLimit {
            inner,
            within,
            clock: None,
            running: false,
        }
    }

    /// What a write that `inner` answered `written` comes to: progress
    /// stops the clock, a write held back starts it (or fails once it has
    /// run out).
    #[inline]
    fn limit<T>(
        &mut self,
        cx: &mut Context<'_>,
        written: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if written.is_ready() {
            // Written (or failed): whatever comes next starts afresh.
            self.running = false;
            return written;
        }
        let clock = match &mut self.clock {
            Some(clock) => {
                if !self.running {
                    clock.as_mut().reset(Instant::now() + self.within);
                }
                clock
            }
            None => self.clock.insert(Box::pin(tokio::time::sleep(self.within))),
        };
        self.running = true;
        match clock.as_mut().poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the client read nothing for {:?}", self.within),
            ))),
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for SendLimit<S> {
    #[inline]
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for SendLimit<S> {
    #[inline]
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.limit(cx, written)
    }

    #[inline]
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.limit(cx, written)
    }

    #[inline]
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    #[inline]
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let flushed = Pin::new(&mut this.inner).poll_flush(cx);
        this.limit(cx, flushed)
    }

    #[inline]
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let shut = Pin::new(&mut this.inner).poll_shutdown(cx);
        this.limit(cx, shut)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const WITHIN: Duration = Duration::from_millis(100);

    /// A client end whose window holds 64 bytes, and the proxy's end with
    /// the limit.
    fn pair() -> (SendLimit<tokio::io::DuplexStream>, tokio::io::DuplexStream) {
        let (proxy, client) = tokio::io::duplex(64);
        (SendLimit::new(proxy, WITHIN), client)
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_held_back_for_the_limit_fails_then() {
        let (mut proxy, _client) = pair();
        let started = Instant::now();
        let failed = proxy.write_all(&[7; 200]).await.unwrap_err();
        assert_eq!(failed.kind(), io::ErrorKind::TimedOut);
        assert!(
            failed.to_string().contains("read nothing for 100ms"),
            "{failed}"
        );
        assert_eq!(started.elapsed(), WITHIN);
    }

    #[tokio::test(start_paused = true)]
    async fn each_byte_read_gives_the_writer_another_period() {
        let (mut proxy, mut client) = pair();
        let started = Instant::now();
        let reading = async {
            // 8 bytes every 0.9 periods: never a whole period without one.
            let mut got = Vec::new();
            let mut buf = [0u8; 8];
            while got.len() < 200 {
                tokio::time::sleep(WITHIN * 9 / 10).await;
                let n = client.read(&mut buf).await.unwrap();
                got.extend_from_slice(&buf[..n]);
            }
            (got, client)
        };
        let (written, (got, mut client)) = tokio::join!(proxy.write_all(&[7; 200]), reading);
        written.unwrap();
        assert_eq!(got, vec![7; 200]);
        assert!(
            started.elapsed() > WITHIN * 10,
            "it took reads to get through"
        );
        // Then the client stops reading: a period after the window fills.
        proxy.write_all(&[8; 64]).await.unwrap();
        let full = Instant::now();
        let failed = proxy.write_all(&[9; 1]).await.unwrap_err();
        assert_eq!(failed.kind(), io::ErrorKind::TimedOut);
        assert_eq!(full.elapsed(), WITHIN);
        let mut rest = [0u8; 64];
        client.read_exact(&mut rest).await.unwrap();
        assert_eq!(rest, [8; 64]);
    }

    /// A socket whose window is never full.
    struct Roomy;

    impl AsyncWrite for Roomy {
        fn poll_write(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            Poll::Ready(Ok(buf.len()))
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[tokio::test(start_paused = true)]
    async fn writes_that_go_through_never_start_the_clock() {
        let mut proxy = SendLimit::new(Roomy, WITHIN);
        for round in 0..100u8 {
            proxy.write_all(&[round; 64]).await.unwrap();
            proxy.flush().await.unwrap();
            tokio::time::advance(WITHIN * 2).await;
        }
        assert!(proxy.clock.is_none());
        proxy.shutdown().await.unwrap();
    }

    /// A socket whose window stays full: every write, flush and shutdown
    /// is held back.
    struct Full;

    impl AsyncWrite for Full {
        fn poll_write(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            _: &[u8],
        ) -> Poll<io::Result<usize>> {
            Poll::Pending
        }

        fn poll_write_vectored(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            _: &[IoSlice<'_>],
        ) -> Poll<io::Result<usize>> {
            Poll::Pending
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Pending
        }

        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Pending
        }
    }

    /// How long `op` on a fresh limit over [`Full`] took to fail, and how.
    async fn held_back<F>(op: F) -> (io::ErrorKind, Duration)
    where
        F: for<'a> FnOnce(
            &'a mut SendLimit<Full>,
        ) -> Pin<Box<dyn Future<Output = io::Result<()>> + 'a>>,
    {
        let mut limit = SendLimit::new(Full, WITHIN);
        let started = Instant::now();
        let failed = op(&mut limit).await.unwrap_err();
        (failed.kind(), started.elapsed())
    }

    #[tokio::test(start_paused = true)]
    async fn every_kind_of_write_held_back_fails_at_the_limit() {
        let timed_out = (io::ErrorKind::TimedOut, WITHIN);
        assert_eq!(held_back(|l| Box::pin(l.write_all(b"x"))).await, timed_out);
        assert_eq!(
            held_back(|l| Box::pin(async move {
                l.write_vectored(&[IoSlice::new(b"a"), IoSlice::new(b"b")])
                    .await
                    .map(drop)
            }))
            .await,
            timed_out
        );
        assert_eq!(held_back(|l| Box::pin(l.flush())).await, timed_out);
        assert_eq!(held_back(|l| Box::pin(l.shutdown())).await, timed_out);
    }

    /// A socket with vectored writes, which takes everything and keeps it.
    #[derive(Default)]
    struct Vectored(Vec<u8>);

    impl AsyncWrite for Vectored {
        fn poll_write(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            self.0.extend_from_slice(buf);
            Poll::Ready(Ok(buf.len()))
        }

        fn poll_write_vectored(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            bufs: &[IoSlice<'_>],
        ) -> Poll<io::Result<usize>> {
            let before = self.0.len();
            for buf in bufs {
                self.0.extend_from_slice(buf);
            }
            Poll::Ready(Ok(self.0.len() - before))
        }

        fn is_write_vectored(&self) -> bool {
            true
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[tokio::test(start_paused = true)]
    async fn vectored_writes_pass_as_the_socket_takes_them() {
        let mut limit = SendLimit::new(Vectored::default(), WITHIN);
        assert!(limit.is_write_vectored());
        assert!(!SendLimit::new(Roomy, WITHIN).is_write_vectored());
        let written = limit
            .write_vectored(&[
                IoSlice::new(b"head"),
                IoSlice::new(b""),
                IoSlice::new(b"body"),
            ])
            .await
            .unwrap();
        assert_eq!(written, 8);
        assert_eq!(limit.inner.0, b"headbody");
    }

    #[tokio::test(start_paused = true)]
    async fn reads_pass_through() {
        let (mut proxy, mut client) = pair();
        client.write_all(b"ask").await.unwrap();
        let mut asked = [0u8; 3];
        proxy.read_exact(&mut asked).await.unwrap();
        assert_eq!(&asked, b"ask");
    }
}
