//! The client connections of one listener, told to finish what they are
//! doing and close when the proxy stops; stopping waits for the last one.
//!
//! A connection's future is polled a few times for every request it
//! carries, so between stops it only reads a flag and compares its waker
//! with the one it left: no channel is polled (hyper-util's graceful
//! watcher polled a `watch` channel on every poll, with its own waker
//! registration and cooperative budget each time).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use tokio::sync::Notify;

/// A connection that can be told to finish its exchanges and close.
pub(crate) trait Graceful: Future {
    /// Finish what is in flight, take nothing new.
    fn graceful_shutdown(self: Pin<&mut Self>);
}

impl<C: hyper_util::server::graceful::GracefulConnection> Graceful for C {
    fn graceful_shutdown(self: Pin<&mut Self>) {
        hyper_util::server::graceful::GracefulConnection::graceful_shutdown(self);
    }
}

/// The connections to drain.
#[derive(Debug, Default)]
pub(crate) struct Drain {
    shared: Arc<Shared>,
}

#[derive(Debug, Default)]
struct Shared {
    stopping: AtomicBool,
    connections: Mutex<Connections>,
    /// Told when the last connection ends while stopping.
    none_left: Notify,
}

#[derive(Debug, Default)]
struct Connections {
    /// Each connection's waker, once polled; `None` for a free slot too.
    wakers: Vec<Option<Waker>>,
    free: Vec<usize>,
    live: usize,
}

impl Shared {
    fn connections(&self) -> MutexGuard<'_, Connections> {
        // A panic under the lock leaves plain data: still usable.
        self.connections
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Drain {
    pub(crate) fn new() -> Self {
        Drain::default()
    }

    /// A connection's place, taken when it is accepted (before a TLS
    /// handshake, say): stopping waits for it from now on.
    pub(crate) fn enter(&self) -> Entered {
        let mut connections = self.shared.connections();
        connections.live += 1;
        let slot = match connections.free.pop() {
            Some(slot) => slot,
            None => {
                connections.wakers.push(None);
                connections.wakers.len() - 1
            }
        };
        Entered {
            shared: self.shared.clone(),
            slot,
        }
    }

    /// Tells every connection to finish and close, and waits until the
    /// last one has ended.
    pub(crate) async fn stop(self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        let wakers: Vec<Waker> = self
            .shared
            .connections()
            .wakers
            .iter()
            .flatten()
            .cloned()
            .collect();
        for waker in wakers {
            waker.wake();
        }
        loop {
            // Registered before the count is read: a last connection
            // ending in between leaves its permit.
            let none_left = self.shared.none_left.notified();
            if self.shared.connections().live == 0 {
                return;
            }
            none_left.await;
        }
    }
}

/// A connection's place in a [`Drain`], until it ends.
#[derive(Debug)]
pub(crate) struct Entered {
    shared: Arc<Shared>,
    slot: usize,
}

impl Entered {
    /// A second place in the same drain, for what the connection becomes
    /// after the future watched now ends (HTTP/1.1's reader handing an
    /// HTTP/2 preface on).
    pub(crate) fn again(&self) -> Entered {
        let drain = Drain {
            shared: self.shared.clone(),
        };
        drain.enter()
    }

    /// `conn`, told to finish when the drain stops.
    pub(crate) fn watch<C: Graceful>(self, conn: C) -> Watched<C> {
        Watched {
            conn: Box::pin(conn),
            entered: self,
            waker: None,
            told: false,
        }
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        let last = {
            let mut connections = self.shared.connections();
            if let Some(waker) = connections.wakers.get_mut(self.slot) {
                *waker = None;
            }
            connections.free.push(self.slot);
            connections.live -= 1;
            connections.live == 0
        };
        if last && self.shared.stopping.load(Ordering::SeqCst) {
            self.shared.none_left.notify_one();
        }
    }
}

/// A connection that finishes when its drain stops.
pub(crate) struct Watched<C> {
    conn: Pin<Box<C>>,
    entered: Entered,
    /// The waker the drain holds for this connection.
    waker: Option<Waker>,
    told: bool,
}

impl<C> std::fmt::Debug for Watched<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watched")
            .field("slot", &self.entered.slot)
            .field("told", &self.told)
            .finish_non_exhaustive()
    }
}

impl<C: Graceful> Future for Watched<C> {
    type Output = C::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<C::Output> {
        let this = &mut *self;
        if !this.told {
            if !this.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                let waker = cx.waker().clone();
                let shared = &this.entered.shared;
                if let Some(slot) = shared.connections().wakers.get_mut(this.entered.slot) {
                    *slot = Some(waker.clone());
                }
                this.waker = Some(waker);
            }
            // Read after the waker is left: a stop in between wakes it.
            if this.entered.shared.stopping.load(Ordering::SeqCst) {
                this.told = true;
                this.conn.as_mut().graceful_shutdown();
            }
        }
        this.conn.as_mut().poll(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    use super::*;

    const WAIT: Duration = Duration::from_secs(10);

    /// A connection that ends once told to, counting its polls.
    #[derive(Default)]
    struct Conn {
        told: Arc<AtomicBool>,
        polls: Arc<AtomicUsize>,
    }

    impl Future for Conn {
        type Output = ();
        fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
            self.polls.fetch_add(1, Ordering::SeqCst);
            if self.told.load(Ordering::SeqCst) {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        }
    }

    impl Graceful for Conn {
        fn graceful_shutdown(self: Pin<&mut Self>) {
            self.told.store(true, Ordering::SeqCst);
        }
    }

    #[tokio::test]
    async fn a_second_place_of_a_connection_is_waited_for_too() {
        let drain = Drain::new();
        let entered = drain.enter();
        let again = entered.again();
        drop(entered);
        let stopping = tokio::spawn(drain.stop());
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(!stopping.is_finished(), "stopped with a place left");
        drop(again);
        tokio::time::timeout(WAIT, stopping).await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn stop_wakes_idle_connections_and_waits_for_the_last() {
        let drain = Drain::new();
        let conns: Vec<Conn> = (0..3).map(|_| Conn::default()).collect();
        let told: Vec<_> = conns.iter().map(|c| c.told.clone()).collect();
        let polls: Vec<_> = conns.iter().map(|c| c.polls.clone()).collect();
        let tasks: Vec<_> = conns
            .into_iter()
            .map(|c| tokio::spawn(drain.enter().watch(c)))
            .collect();
        // A place taken (a TLS handshake under way) holds the stop too.
        let handshaking = drain.enter();
        while polls.iter().any(|p| p.load(Ordering::SeqCst) == 0) {
            tokio::task::yield_now().await;
        }
        assert!(told.iter().all(|t| !t.load(Ordering::SeqCst)));
        let mut stop = tokio::spawn(drain.stop());
        for task in tasks {
            tokio::time::timeout(WAIT, task)
                .await
                .expect("each idle connection is woken and told")
                .unwrap();
        }
        assert!(told.iter().all(|t| t.load(Ordering::SeqCst)));
        // The handshake's place still holds it.
        assert!(
            tokio::time::timeout(Duration::from_millis(50), &mut stop)
                .await
                .is_err(),
            "stop waits for every place"
        );
        let late = Conn::default();
        let late_told = late.told.clone();
        handshaking.watch(late).await;
        assert!(late_told.load(Ordering::SeqCst), "told at its first poll");
        tokio::time::timeout(WAIT, stop)
            .await
            .expect("stop returns once none is left")
            .unwrap();
    }

    #[tokio::test]
    async fn a_connection_ended_gives_its_place_back() {
        let drain = Drain::new();
        for _ in 0..5 {
            let conn = Conn::default();
            conn.told.store(true, Ordering::SeqCst);
            drain.enter().watch(conn).await;
        }
        let places = {
            let connections = drain.shared.connections();
            (connections.live, connections.wakers.len())
        };
        assert_eq!(places, (0, 1));
        tokio::time::timeout(WAIT, drain.stop())
            .await
            .expect("nothing to wait for");
    }
}
