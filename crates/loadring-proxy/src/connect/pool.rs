//! Idle connections, per worker thread: a request takes one of its own
//! worker's and gives it back there, so no lock is shared between workers
//! and the connection's task runs where the request does.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

use super::connection::Conn;

/// Idle connections kept per backend address on one worker; past it a
/// connection given back is closed.
pub(crate) const MAX_IDLE_PER_ADDRESS: usize = 128;

/// Give-backs between two sweeps of a worker's closed connections (those
/// of endpoints gone from the membership are never taken again).
const SWEEP_EVERY: u32 = 4096;

#[derive(Default)]
struct Idle {
    /// By pool id, then by backend address.
    pools: Vec<HashMap<Arc<str>, Vec<Conn>>>,
    given_back: u32,
}

impl Idle {
    fn sweep(&mut self) {
        for pool in &mut self.pools {
            pool.retain(|_, list| {
                list.retain(|c| !c.sender.is_closed() && !c.shared.is_closed());
                !list.is_empty()
            });
        }
    }
}

thread_local! {
    static IDLE: RefCell<Idle> = RefCell::new(Idle::default());
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
    IDLE.try_with(|idle| {
        let mut idle = idle.borrow_mut();
        let list = idle.pools.get_mut(pool)?.get_mut(addr)?;
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
    })
    .ok()
    .flatten()
}

/// Gives `conn` (its exchange over) back to this worker's pool; closes it
/// when the pool for `addr` is full.
pub(crate) fn give_back(pool: usize, addr: &Arc<str>, mut conn: Conn) {
    if conn.sender.is_closed() {
        return;
    }
    conn.served = conn.served.saturating_add(1);
    conn.shared.set_idle();
    let _ = IDLE.try_with(|idle| {
        let idle = &mut *idle.borrow_mut();
        idle.given_back += 1;
        if idle.given_back >= SWEEP_EVERY {
            idle.given_back = 0;
            idle.sweep();
        }
        if idle.pools.len() <= pool {
            idle.pools.resize_with(pool + 1, HashMap::new);
        }
        let pool = &mut idle.pools[pool];
        let list = match pool.get_mut(&**addr) {
            Some(list) => list,
            None => pool.entry(addr.clone()).or_default(),
        };
        if list.len() >= MAX_IDLE_PER_ADDRESS {
            // Dropping the sender ends the connection.
            return;
        }
        list.push(conn);
    });
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
        let mut conn = connect(addr, WAIT, WAIT).await.unwrap();
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

    #[tokio::test]
    async fn a_connection_the_backend_closed_is_never_taken() {
        let addr = backend(true).await;
        let pool = new_id();
        // Not waited ready: the close may come first.
        let conn = connect(&addr, WAIT, WAIT).await.unwrap();
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
