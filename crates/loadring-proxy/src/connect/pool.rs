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
