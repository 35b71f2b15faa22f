//! A future run inline by its caller that is never cancelled: if the
//! caller drops it before it has finished, the rest goes on as a task of
//! the runtime.
//!
//! A request's exchange with its backend must not stop when the client
//! leaves (the backend's work goes on, and the endpoint's slot is held
//! until it is done). Spawning every exchange as a task guarantees that,
//! at the price of a task per request; most clients wait for their answer,
//! so the exchange is polled where the request is served, and only one
//! whose client left is handed over. Clients can leave faster than
//! backends answer, so the rest goes on only in a place of the proxy's
//! limit on abandoned requests ([`Abandoning`]); without one, it is
//! dropped (cancelled) like any future.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::runtime::Handle;

use crate::abandoned::Abandoning;

/// `F`, polled by whoever awaits this; the unfinished rest spawned when
/// this is dropped.
pub(crate) struct RunToEnd<F>
where
    F: Future + Send + ?Sized + 'static,
    F::Output: Send + 'static,
{
    /// Boxed so that a future already polled can move to a task.
    inner: Option<Pin<Box<F>>>,
    abandoning: Abandoning,
}

impl<F> RunToEnd<F>
where
    F: Future + Send + ?Sized + 'static,
    F::Output: Send + 'static,
{
    /// Takes the future boxed: built in its box by
    /// [`boxed_in_place!`](crate::in_place::boxed_in_place), a future of
    /// kilobytes is not copied on its way in. Dropped unfinished, it goes
    /// on in a place of `abandoning`'s, or is cancelled.
    pub(crate) fn new(future: Pin<Box<F>>, abandoning: Abandoning) -> Self {
        RunToEnd {
            inner: Some(future),
            abandoning,
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
        let Some(rest) = self.inner.take() else {
            return;
        };
        // Outside a runtime (it is shutting down) the rest is dropped, as
        // a spawned task would be.
        let Ok(runtime) = Handle::try_current() else {
            return;
        };
        let Some(place) = self.abandoning.place() else {
            return;
        };
        runtime.spawn(async move {
            let output = rest.await;
            // Given back before the output is dropped: what the output
            // leaves unfinished in turn (a body) may need a place.
            drop(place);
            output
        });
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    use std::sync::Arc;

    use prometheus_client::metrics::counter::Counter;
    use tokio::sync::oneshot;

    use super::*;
    use crate::places::Places;

    #[tokio::test]
    async fn a_future_awaited_to_its_end_is_never_spawned() {
        let before = alive_tasks();
        let answer = RunToEnd::new(Box::pin(async { 42 }), abandoning(1).0).await;
        assert_eq!(answer, 42);
        assert_eq!(alive_tasks(), before);
    }

    /// Dropped while it waits: the rest runs on and finishes.
    #[tokio::test]
    async fn a_future_dropped_unfinished_runs_to_its_end() {
        let (go, wait) = oneshot::channel::<()>();
        let (done_tx, done) = oneshot::channel::<()>();
        let started = Arc::new(AtomicBool::new(false));
        let s = started.clone();
        let (abandoning, places, cancelled) = abandoning(1);
        let mut run = Box::pin(RunToEnd::new(
            Box::pin(async move {
                s.store(true, SeqCst);
                let _ = wait.await;
                let _ = done_tx.send(());
            }),
            abandoning,
        ));
        // Polled once: it has started and waits.
        assert!(futures_poll_once(run.as_mut()).await.is_pending());
        assert!(started.load(SeqCst));
        drop(run);
        assert_eq!(places.taken(), 1, "the rest holds a place");
        let _ = go.send(());
        assert!(done.await.is_ok(), "the rest ran to its end");
        assert_eq!(cancelled.get(), 0);
        for _ in 0..100 {
            if places.taken() == 0 {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(places.taken(), 0, "its place given back");
    }

    /// Dropped while it waits with no place free: the rest is dropped
    /// (cancelled) at once, nothing spawned, the cancellation counted.
    #[tokio::test]
    async fn a_future_dropped_unfinished_without_a_place_is_cancelled() {
        let (abandoning, places, cancelled) = abandoning(1);
        let _taken = places.try_take().unwrap();
        let (_go, wait) = oneshot::channel::<()>();
        let dropped = Arc::new(AtomicBool::new(false));
        let on_drop = DropFlag(dropped.clone());
        let before = alive_tasks();
        let mut run = Box::pin(RunToEnd::new(
            Box::pin(async move {
                let _flag = on_drop;
                let _ = wait.await;
            }),
            abandoning,
        ));
        assert!(futures_poll_once(run.as_mut()).await.is_pending());
        drop(run);
        assert!(dropped.load(SeqCst), "the rest was dropped with it");
        assert_eq!(cancelled.get(), 1);
        assert_eq!(places.taken(), 1, "no place taken for it");
        assert_eq!(alive_tasks(), before, "nothing spawned");
    }

    /// The rest's output is dropped after its place is given back: what
    /// it leaves unfinished (a body) can take that place.
    #[tokio::test]
    async fn the_place_is_free_when_the_output_is_dropped() {
        let (abandoning, places, _) = abandoning(1);
        let (go, wait) = oneshot::channel::<()>();
        let (seen_tx, seen) = oneshot::channel::<usize>();
        let output = TakenOnDrop(places.clone(), Some(seen_tx));
        let mut run = Box::pin(RunToEnd::new(
            Box::pin(async move {
                let _ = wait.await;
                output
            }),
            abandoning,
        ));
        assert!(futures_poll_once(run.as_mut()).await.is_pending());
        drop(run);
        let _ = go.send(());
        assert_eq!(seen.await.unwrap(), 0, "places taken as the output drops");
    }

    fn alive_tasks() -> usize {
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks()
    }

    /// Sets its flag when dropped.
    struct DropFlag(Arc<AtomicBool>);

    impl Drop for DropFlag {
        fn drop(&mut self) {
            self.0.store(true, SeqCst);
        }
    }

    /// Tells the places taken when it is dropped.
    struct TakenOnDrop(Places, Option<oneshot::Sender<usize>>);

    impl Drop for TakenOnDrop {
        fn drop(&mut self) {
            if let Some(tell) = self.1.take() {
                let _ = tell.send(self.0.taken());
            }
        }
    }

    /// Places for `limit` abandoned requests, and their cancellations.
    fn abandoning(limit: usize) -> (Abandoning, Places, Counter) {
        let places = Places::new(limit);
        let cancelled = Counter::default();
        (
            Abandoning::new(places.clone(), cancelled.clone()),
            places,
            cancelled,
        )
    }

    /// A future that panics while polled is gone with the panic: the
    /// dropped wrapper spawns nothing (a task would poll it again).
    #[tokio::test]
    async fn a_future_that_panics_is_not_spawned_again() {
        use futures_util::FutureExt as _;
        let before = alive_tasks();
        let run = RunToEnd::new(
            Box::pin(async move {
                if before < usize::MAX {
                    panic!("a bug");
                }
            }),
            abandoning(1).0,
        );
        let caught = std::panic::AssertUnwindSafe(run).catch_unwind().await;
        assert!(caught.is_err(), "the panic reaches the caller");
        assert_eq!(alive_tasks(), before, "nothing spawned");
    }

    async fn futures_poll_once<F: Future + Unpin>(mut f: F) -> Poll<F::Output> {
        std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut f).poll(cx))).await
    }
}
