//! An open tunnel that carries nothing either way for the tunnel timeout
//! is closed.
//!
//! A WebSocket holds its client's connection, a connection to its backend
//! and its endpoint's slot (bounded load counts open tunnels) for as long
//! as it is open. One left open and quiet, by a client gone without a word
//! or on purpose, held them for ever. nginx closes a tunnel that has read
//! nothing for `proxy_read_timeout` (60 s), Envoy one idle for its stream
//! idle timeout (5 min), HAProxy after `timeout tunnel` (an hour is the
//! usual setting, and the default here: WebSocket peers that ping now and
//! then are never near it).
//!
//! Each side's reads are [`Noted`] in the tunnel's [`Traffic`]; the tunnel
//! ends when [`Traffic::quiet_for`] does.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, ReadBuf};
use tokio::time::Instant;

use crate::last_moved::LastMoved;

/// When a tunnel last carried bytes, either way.
#[derive(Debug)]
pub(crate) struct Traffic(LastMoved);

impl Traffic {
    /// A tunnel opened now.
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Traffic(LastMoved::now()))
    }

    /// Ends once the tunnel has carried nothing for `limit`.
    pub(crate) async fn quiet_for(&self, limit: Duration) {
        loop {
            let due = self.0.at() + limit;
            tokio::time::sleep_until(due).await;
            if self.0.at() + limit <= Instant::now() {
                return;
            }
        }
    }
}

/// One side's reads, each that brings bytes noted in the tunnel's
/// [`Traffic`].
#[derive(Debug)]
pub(crate) struct Noted<R> {
    inner: R,
    traffic: Arc<Traffic>,
}

impl<R> Noted<R> {
    pub(crate) fn new(inner: R, traffic: Arc<Traffic>) -> Self {
        Noted { inner, traffic }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Noted<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        ready!(Pin::new(&mut self.inner).poll_read(cx, buf))?;
        if buf.filled().len() > before {
            self.traffic.0.mark();
        }
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const LIMIT: Duration = Duration::from_millis(100);

    #[tokio::test(start_paused = true)]
    async fn a_tunnel_that_carries_nothing_is_quiet_at_the_limit() {
        let traffic = Traffic::new();
        let started = Instant::now();
        traffic.quiet_for(LIMIT).await;
        assert_eq!(started.elapsed(), LIMIT);
    }

    #[tokio::test(start_paused = true)]
    async fn bytes_read_put_the_quiet_off_and_an_empty_read_does_not() {
        let (mut far, near) = tokio::io::duplex(64);
        let traffic = Traffic::new();
        let mut noted = Noted::new(near, traffic.clone());
        let started = Instant::now();
        let reading = async {
            let mut buf = [0u8; 8];
            // Bytes every 0.9 limits, five times, then the far end closes:
            // an end of file is no traffic.
            for _ in 0..5 {
                tokio::time::sleep(LIMIT * 9 / 10).await;
                far.write_all(b"x").await.unwrap();
                assert_eq!(noted.read(&mut buf).await.unwrap(), 1);
            }
            drop(far);
            assert_eq!(noted.read(&mut buf).await.unwrap(), 0);
            std::future::pending::<()>().await;
        };
        tokio::select! {
            () = traffic.quiet_for(LIMIT) => {}
            () = reading => unreachable!("reading never ends"),
        }
        // Quiet a whole limit after the last byte, at 4.5 limits.
        assert_eq!(started.elapsed(), LIMIT * 45 / 10 + LIMIT);
    }
}
