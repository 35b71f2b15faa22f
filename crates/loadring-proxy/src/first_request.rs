//! A client connection must ask for something soon after it opens.
//!
//! hyper's header timeout starts with an HTTP/1.1 request's head. Before
//! that head, hyper-util reads the first bytes to tell HTTP/2's preface
//! from HTTP/1.1, with no limit, and an HTTP/2 connection has no limit
//! until its first stream. So a client that connects and sends nothing, or
//! only the start of the preface (`P`, `PRI * HTTP/2.0`), held its
//! connection, and one place of `--max-connections`, for as long as it
//! liked: the slow-loris attack, which the header timeout is there to stop.
//! [`FirstRequest`] closes a connection that has asked for nothing within
//! the header timeout. After the first request the timer is gone: HTTP/1.1
//! connections then idle under hyper's header timeout, and an HTTP/2
//! connection's streams come when its client wants.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Sleep;

/// Set by a connection's service on each request (a relaxed store to a
/// flag only that connection's task touches).
#[derive(Debug, Clone, Default)]
pub(crate) struct Asked(Arc<AtomicBool>);

impl Asked {
    /// The connection has asked for something.
    pub(crate) fn set(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// `conn`, dropped (its socket closed) unless `asked` is set within the
/// deadline: `None` then, else the connection's own output.
#[derive(Debug)]
pub(crate) struct FirstRequest<C> {
    conn: C,
    /// Until the first request; then `None`.
    deadline: Option<Pin<Box<Sleep>>>,
    asked: Asked,
}

impl<C> FirstRequest<C> {
    pub(crate) fn new(conn: C, within: Duration, asked: Asked) -> Self {
        FirstRequest {
            conn,
            deadline: Some(Box::pin(tokio::time::sleep(within))),
            asked,
        }
    }
}

impl<C: Future + Unpin> Future for FirstRequest<C> {
    type Output = Option<C::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        if let Poll::Ready(out) = Pin::new(&mut this.conn).poll(cx) {
            return Poll::Ready(Some(out));
        }
        if let Some(deadline) = &mut this.deadline {
            if this.asked.is_set() {
                // Every later poll costs one check.
                this.deadline = None;
            } else if deadline.as_mut().poll(cx).is_ready() {
                return Poll::Ready(None);
            }
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WITHIN: Duration = Duration::from_millis(100);

    #[tokio::test(start_paused = true)]
    async fn a_connection_that_asks_for_nothing_is_dropped_at_the_deadline() {
        let never = std::future::pending::<()>();
        let started = tokio::time::Instant::now();
        let out = FirstRequest::new(never, WITHIN, Asked::default()).await;
        assert_eq!(out, None);
        // Paused time moves only to the next timer: the deadline's.
        assert_eq!(started.elapsed(), WITHIN);
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_that_asked_outlives_the_deadline() {
        let asked = Asked::default();
        let conn = {
            let asked = asked.clone();
            Box::pin(async move {
                asked.set();
                tokio::time::sleep(WITHIN * 10).await;
                "served"
            })
        };
        let mut first = FirstRequest::new(conn, WITHIN, asked);
        assert_eq!((&mut first).await, Some("served"));
        assert!(first.deadline.is_none(), "the timer went with the request");
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_that_ends_first_gives_its_output() {
        let out = FirstRequest::new(std::future::ready(7), WITHIN, Asked::default()).await;
        assert_eq!(out, Some(7));
    }
}
