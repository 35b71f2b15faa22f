//! Idle connections, per worker thread: a request takes one of its own
//! worker's and gives it back there, so no lock is shared between workers
//! and the connection's task runs where the request does.
//!
//! That holds on a current-thread runtime (the gateway's workers each run
//! one). On a multi-thread runtime a task moves between threads, so a
//! connection given back on one thread would be missed by the next request
//! running on another, and every worker would open its own: there the
//! pool is one, shared by the runtime's threads behind a lock.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, LazyLock, Mutex};

use tokio::runtime::{Handle, RuntimeFlavor};

use super::connection::Conn;

/// Idle connections kept per backend address on one worker; past it a
/// connection given back is closed.
pub(crate) const MAX_IDLE_PER_ADDRESS: usize = 128;

/// Give-backs between two sweeps of a worker's closed connections (those
/// of endpoints gone from the membership are never taken again).
const SWEEP_EVERY: u32 = 4096;

#[derive(Default)]
struct Idle {
    /// By pool id, then by backend address. A map, not a vector by id: the
    /// pools of forwarders replaced by reloads leave it at the next sweep.
    pools: HashMap<usize, HashMap<Arc<str>, Vec<Conn>>>,
    given_back: u32,
}

impl Idle {
    fn sweep(&mut self) {
        self.pools.retain(|_, pool| {
            pool.retain(|_, list| {
                list.retain(|c| !c.sender.is_closed() && !c.shared.is_closed());
                !list.is_empty()
            });
            !pool.is_empty()
        });
    }

    fn take(&mut self, pool: usize, addr: &str) -> Option<Conn> {
        let list = self.pools.get_mut(&pool)?.get_mut(addr)?;
        let mut i = list.len();
        while i > 0 {
            i -= 1;
            let conn = &list[i];
            if conn.sender.is_closed() || conn.shared.is_closed() {
                list.swap_remove(i);
                continue;
            }
            if conn.sender.is_ready() && conn.shared.try_take() {
                return Some(list.swap_remove(i));
            }
        }
        None
    }

    fn give_back(&mut self, pool: usize, addr: &Arc<str>, conn: Conn) {
        self.given_back += 1;
        if self.given_back >= SWEEP_EVERY {
            self.given_back = 0;
            self.sweep();
        }
        let pool = self.pools.entry(pool).or_default();
        let list = match pool.get_mut(&**addr) {
            Some(list) => list,
            None => pool.entry(addr.clone()).or_default(),
        };
        if list.len() >= MAX_IDLE_PER_ADDRESS {
            // Dropping the sender ends the connection.
            return;
        }
        list.push(conn);
    }
}

thread_local! {
    static IDLE: RefCell<Idle> = RefCell::new(Idle::default());
}

/// The pool of multi-thread runtimes' threads.
static SHARED: LazyLock<Mutex<Idle>> = LazyLock::new(Mutex::default);

/// Runs `f` on this thread's pool, or on the shared one when the thread
/// belongs to a multi-thread runtime (module docs).
fn with_idle<R>(f: impl FnOnce(&mut Idle) -> R) -> Option<R> {
    let shared = Handle::try_current()
        .is_ok_and(|handle| handle.runtime_flavor() != RuntimeFlavor::CurrentThread);
    if shared {
        // A panic while holding the lock leaves the pool as consistent as
        // any other moment: keep using it.
        let mut idle = SHARED
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        return Some(f(&mut idle));
    }
    IDLE.try_with(|idle| f(&mut idle.borrow_mut())).ok()
}

/// A new pool's id: each [`super::Upstream`] has its own connections.
pub(crate) fn new_id() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    NEXT.fetch_add(1, Relaxed)
}

/// An idle connection to `addr` of this worker, ready for a request: the
/// most recently used first (its socket is the warmest, and the oldest ones
/// age out). Closed ones met on the way are dropped; ones still finishing
/// their last exchange are left for later.
pub(crate) fn take(pool: usize, addr: &str) -> Option<Conn> {
    with_idle(|idle| idle.take(pool, addr)).flatten()
}

/// Gives `conn` (its exchange over) back to this worker's pool; closes it
/// when the pool for `addr` is full.
pub(crate) fn give_back(pool: usize, addr: &Arc<str>, mut conn: Conn) {
    if conn.sender.is_closed() {
        return;
    }
    conn.served = conn.served.saturating_add(1);
    conn.shared.set_idle();
    // Without a pool (the thread is exiting) the connection closes.
    let _ = with_idle(|idle| idle.give_back(pool, addr, conn));
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::net::TcpListener;

    use super::*;
    use crate::connect::connection::connect;

    const WAIT: Duration = Duration::from_secs(10);

    /// A listener that keeps every connection open (`close`: drops each
    /// at once instead).
    async fn backend(close: bool) -> Arc<str> {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let mut open = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                if !close {
                    open.push(stream);
                }
            }
        });
        addr.into()
    }

    async fn ready(addr: &Arc<str>) -> Conn {
        let mut conn = connect(addr, WAIT, WAIT, None).await.unwrap();
        tokio::time::timeout(WAIT, conn.sender.ready())
            .await
            .unwrap()
            .unwrap();
        conn
    }

    #[tokio::test]
    async fn the_connection_given_back_last_is_taken_first() {
        let addr = backend(false).await;
        let pool = new_id();
        let (a, b) = (ready(&addr).await, ready(&addr).await);
        let (a_id, b_id) = (Arc::as_ptr(&a.shared), Arc::as_ptr(&b.shared));
        give_back(pool, &addr, a);
        give_back(pool, &addr, b);
        let first = take(pool, &addr).expect("an idle connection");
        assert_eq!(Arc::as_ptr(&first.shared), b_id);
        assert_eq!(first.served, 1, "one exchange counted");
        let second = take(pool, &addr).expect("the other");
        assert_eq!(Arc::as_ptr(&second.shared), a_id);
        assert!(take(pool, &addr).is_none(), "both in use");
        assert!(take(new_id(), &addr).is_none(), "another pool has none");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn on_a_multi_thread_runtime_the_threads_share_one_pool() {
        let addr = backend(false).await;
        let pool = new_id();
        let conn = ready(&addr).await;
        let id = Arc::as_ptr(&conn.shared);
        let giver = addr.clone();
        // Given back on another thread of the runtime (a blocking one: never
        // the thread this test's task runs on).
        let other = tokio::task::spawn_blocking(move || {
            give_back(pool, &giver, conn);
            std::thread::current().id()
        })
        .await
        .unwrap();
        assert_ne!(other, std::thread::current().id());
        let taken = take(pool, &addr).expect("the connection given back elsewhere");
        assert_eq!(Arc::as_ptr(&taken.shared), id);
    }

    #[tokio::test]
    async fn a_connection_the_backend_closed_is_never_taken() {
        let addr = backend(true).await;
        let pool = new_id();
        // Not waited ready: the close may come first.
        let conn = connect(&addr, WAIT, WAIT, None).await.unwrap();
        let shared = conn.shared.clone();
        give_back(pool, &addr, conn);
        // The connection's task sees the close and marks it.
        let closed = tokio::time::timeout(WAIT, async {
            while !shared.is_closed() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
        assert!(closed.is_ok(), "the close was seen");
        assert!(take(pool, &addr).is_none());
    }

    #[tokio::test]
    async fn past_the_cap_a_connection_given_back_is_closed() {
        let addr = backend(false).await;
        let pool = new_id();
        for _ in 0..=MAX_IDLE_PER_ADDRESS {
            let conn = ready(&addr).await;
            give_back(pool, &addr, conn);
        }
        let mut taken = Vec::new();
        while let Some(conn) = take(pool, &addr) {
            taken.push(conn);
        }
        assert_eq!(taken.len(), MAX_IDLE_PER_ADDRESS);
    }
}
