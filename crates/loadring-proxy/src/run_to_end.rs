//! A future run inline by its caller that is never cancelled: if the
//! caller drops it before it has finished, the rest goes on as a task of
//! the runtime.
//!
//! A request's exchange with its backend must not stop when the client
//! leaves (the backend's work goes on, and the endpoint's slot is held
//! until it is done). Spawning every exchange as a task guarantees that,
//! at the price of a task per request; most clients wait for their answer,
//! so the exchange is polled where the request is served, and only one
//! whose client left is handed over.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::runtime::Handle;

/// `F`, polled by whoever awaits this; the unfinished rest spawned when
/// this is dropped.
pub(crate) struct RunToEnd<F>
where
    F: Future + Send + ?Sized + 'static,
    F::Output: Send + 'static,
{
    /// Boxed so that a future already polled can move to a task.
    inner: Option<Pin<Box<F>>>,
}

impl<F> RunToEnd<F>
where
    F: Future + Send + ?Sized + 'static,
    F::Output: Send + 'static,
{
    /// Takes the future boxed: built in its box by
    /// [`boxed_in_place!`](crate::in_place::boxed_in_place), a future of
    /// kilobytes is not copied on its way in.
    pub(crate) fn new(future: Pin<Box<F>>) -> Self {
        RunToEnd {
            inner: Some(future),
        }
    }
}

impl<F> Future for RunToEnd<F>
where
    F: Future + Send + ?Sized + 'static,
    F::Output: Send + 'static,
{
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // Out while it is polled: a future that panics is dropped as the
        // panic unwinds, never handed to a task to be polled again.
        let Some(mut inner) = self.inner.take() else {
            // Polled after it completed: a caller's bug, never hyper's.
            return Poll::Pending;
        };
        let polled = inner.as_mut().poll(cx);
        if polled.is_pending() {
            self.inner = Some(inner);
        }
        polled
    }
}

impl<F> Drop for RunToEnd<F>
where
    F: Future + Send + ?Sized + 'static,
    F::Output: Send + 'static,
{
    fn drop(&mut self) {
        if let Some(rest) = self.inner.take() {
            // Outside a runtime (it is shutting down) the rest is dropped,
            // as a spawned task would be.
            if let Ok(runtime) = Handle::try_current() {
                runtime.spawn(rest);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    use std::sync::Arc;

    use tokio::sync::oneshot;

    use super::*;

    #[tokio::test]
    async fn a_future_awaited_to_its_end_is_never_spawned() {
        let before = tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks();
        let answer = RunToEnd::new(Box::pin(async { 42 })).await;
        assert_eq!(answer, 42);
        assert_eq!(
            tokio::runtime::Handle::current()
                .metrics()
                .num_alive_tasks(),
            before
        );
    }

    /// Dropped while it waits: the rest runs on and finishes.
    #[tokio::test]
    async fn a_future_dropped_unfinished_runs_to_its_end() {
        let (go, wait) = oneshot::channel::<()>();
        let (done_tx, done) = oneshot::channel::<()>();
        let started = Arc::new(AtomicBool::new(false));
        let s = started.clone();
        let mut run = Box::pin(RunToEnd::new(Box::pin(async move {
            s.store(true, SeqCst);
            let _ = wait.await;
            let _ = done_tx.send(());
        })));
        // Polled once: it has started and waits.
        assert!(futures_poll_once(run.as_mut()).await.is_pending());
        assert!(started.load(SeqCst));
        drop(run);
        let _ = go.send(());
        assert!(done.await.is_ok(), "the rest ran to its end");
    }

    /// A future that panics while polled is gone with the panic: the
    /// dropped wrapper spawns nothing (a task would poll it again).
    #[tokio::test]
    async fn a_future_that_panics_is_not_spawned_again() {
        use futures_util::FutureExt as _;
        let before = tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks();
        let run = RunToEnd::new(Box::pin(async move {
            if before < usize::MAX {
                panic!("a bug");
            }
        }));
        let caught = std::panic::AssertUnwindSafe(run).catch_unwind().await;
        assert!(caught.is_err(), "the panic reaches the caller");
        assert_eq!(
            tokio::runtime::Handle::current()
                .metrics()
                .num_alive_tasks(),
            before,
            "nothing spawned"
        );
    }

    async fn futures_poll_once<F: Future + Unpin>(mut f: F) -> Poll<F::Output> {
        std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut f).poll(cx))).await
    }
}
