//! Idle connections, per worker thread: a request takes one of its own
//! worker's and gives it back there, so no lock is shared between workers
//! and the connection's task runs where the request does.
//!
//! That holds on a current-thread runtime (the gateway's workers each run
//! one). On a multi-thread runtime a task moves between threads, so a
//! connection given back on one thread would be missed by the next request
//! running on another, and every worker would open its own: there the
//! pool is one, shared by the runtime's threads behind a lock.
//!
//! Each pool keeps at most `keepalive` idle connections per worker across
//! all its backends, as nginx's `keepalive N` does per worker and upstream
//! group: past it the least recently used one is closed. Without that cap
//! a cluster of many endpoints keeps one or more idle connections per
//! endpoint and worker (1,024 endpoints: thousands), and their buffers are
//! most of the process's memory.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, LazyLock, Mutex};

use foldhash::fast::RandomState;
use tokio::runtime::{Handle, RuntimeFlavor};

use super::connection::Conn;

/// Give-backs between two sweeps of a worker's closed connections (those
/// of endpoints gone from the membership are never taken again).
const SWEEP_EVERY: u32 = 4096;

/// An idle connection and when it was given back (a count, not a time:
/// the order is all that matters).
struct Parked {
    stamp: u64,
    conn: Conn,
}

/// One pool's idle connections on one worker.
#[derive(Default)]
struct Pool {
    /// By backend address, oldest first.
    by_addr: HashMap<Arc<str>, Vec<Parked>, RandomState>,
    /// Every give-back in order, (stamp, address): the front is the least
    /// recently used connection unless it was taken since (then its record
    /// is stale and skipped).
    order: VecDeque<(u64, Arc<str>)>,
    /// Idle connections in `by_addr`.
    idle: usize,
    next_stamp: u64,
}

impl Pool {
    fn take(&mut self, addr: &str) -> Option<Conn> {
        let list = self.by_addr.get_mut(addr)?;
        let mut i = list.len();
        let mut taken = None;
        while i > 0 {
            i -= 1;
            let conn = &list[i].conn;
            if conn.sender.is_closed() || conn.shared.is_closed() {
                // Removed in place: the list stays oldest first.
                list.remove(i);
                self.idle -= 1;
                continue;
            }
            if conn.sender.is_ready() && conn.shared.try_take() {
                taken = Some(list.remove(i).conn);
                self.idle -= 1;
                break;
            }
        }
        // An empty list stays (the next give-back fills it without a second
        // lookup); sweeps drop those of addresses gone.
        self.compact_if_stale();
        taken
    }

    fn give_back(&mut self, addr: &Arc<str>, conn: Conn, keepalive: usize) {
        if keepalive == 0 {
            // Dropping the sender ends the connection.
            return;
        }
        let stamp = self.next_stamp;
        self.next_stamp += 1;
        let list = match self.by_addr.get_mut(&**addr) {
            Some(list) => list,
            None => self.by_addr.entry(addr.clone()).or_default(),
        };
        list.push(Parked { stamp, conn });
        self.order.push_back((stamp, addr.clone()));
        self.idle += 1;
        while self.idle > keepalive {
            if !self.close_least_recently_used() {
                break;
            }
        }
    }

    /// Closes the idle connection given back longest ago; false when there
    /// is none.
    fn close_least_recently_used(&mut self) -> bool {
        while let Some((stamp, addr)) = self.order.pop_front() {
            // A live record is its address's oldest connection: every
            // older one of that address had its record ahead of it.
            let Some(list) = self.by_addr.get_mut(&addr) else {
                continue;
            };
            if list.first().is_some_and(|p| p.stamp == stamp) {
                list.remove(0);
                self.idle -= 1;
                if list.is_empty() {
                    self.by_addr.remove(&addr);
                }
                return true;
            }
        }
        false
    }

    /// Rebuilds `order` from the idle connections when stale records (of
    /// connections taken since) outnumber them: it stays within a constant
    /// factor of the connections it orders.
    fn compact_if_stale(&mut self) {
        if self.order.len() <= 2 * self.idle + 64 {
            return;
        }
        let mut live: Vec<(u64, Arc<str>)> = self
            .by_addr
            .iter()
            .flat_map(|(addr, list)| list.iter().map(|p| (p.stamp, addr.clone())))
            .collect();
        live.sort_unstable_by_key(|(stamp, _)| *stamp);
        self.order = live.into();
    }

    /// Drops the connections whose task has ended.
    fn sweep(&mut self) {
        let mut idle = 0;
        self.by_addr.retain(|_, list| {
            list.retain(|p| !p.conn.sender.is_closed() && !p.conn.shared.is_closed());
            idle += list.len();
            !list.is_empty()
        });
        self.idle = idle;
        self.compact_if_stale();
    }
}

#[derive(Default)]
struct Idle {
    /// By pool id. A map, not a vector by id: the pools of forwarders
    /// replaced by reloads leave it at the next sweep.
    pools: HashMap<usize, Pool, RandomState>,
    given_back: u32,
}

impl Idle {
    fn sweep(&mut self) {
        self.pools.retain(|_, pool| {
            pool.sweep();
            pool.idle > 0
        });
    }

    fn take(&mut self, pool: usize, addr: &str) -> Option<Conn> {
        self.pools.get_mut(&pool)?.take(addr)
    }

    fn give_back(&mut self, pool: usize, addr: &Arc<str>, conn: Conn, keepalive: usize) {
        self.given_back += 1;
        if self.given_back >= SWEEP_EVERY {
            self.given_back = 0;
            self.sweep();
        }
        self.pools
            .entry(pool)
            .or_default()
            .give_back(addr, conn, keepalive);
    }
}

thread_local! {
    static IDLE: RefCell<Idle> = RefCell::new(Idle::default());
    /// Whether this thread belongs to a multi-thread runtime, found out
    /// once: asking tokio clones the runtime's handle (two atomic
    /// operations) on every take and give-back otherwise. A thread does
    /// not change runtimes while it serves (a thread that did would only
    /// reuse less: either pool is correct anywhere).
    static SHARED_RUNTIME: Cell<Option<bool>> = const { Cell::new(None) };
}

/// The pool of multi-thread runtimes' threads.
static SHARED: LazyLock<Mutex<Idle>> = LazyLock::new(Mutex::default);

fn on_a_shared_runtime() -> bool {
    SHARED_RUNTIME
        .try_with(|cached| match cached.get() {
            Some(shared) => shared,
            None => match Handle::try_current() {
                Ok(handle) => {
                    let shared = handle.runtime_flavor() != RuntimeFlavor::CurrentThread;
                    cached.set(Some(shared));
                    shared
                }
                // Outside a runtime: not cached, a runtime may come.
                Err(_) => false,
            },
        })
        .unwrap_or(false)
}

/// Runs `f` on this thread's pool, or on the shared one when the thread
/// belongs to a multi-thread runtime (module docs).
fn with_idle<R>(f: impl FnOnce(&mut Idle) -> R) -> Option<R> {
    if on_a_shared_runtime() {
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

/// Gives `conn` (its exchange over) back to this worker's pool, which
/// keeps at most `keepalive` idle connections over all addresses: past
/// it, the least recently used one is closed.
pub(crate) fn give_back(pool: usize, addr: &Arc<str>, mut conn: Conn, keepalive: usize) {
    if conn.sender.is_closed() {
        return;
    }
    conn.served = conn.served.saturating_add(1);
    conn.shared.set_idle();
    // Without a pool (the thread is exiting) the connection closes.
    let _ = with_idle(|idle| idle.give_back(pool, addr, conn, keepalive));
}

/// Idle connections of `pool` on this worker (or in the shared pool).
#[cfg(test)]
fn idle_count(pool: usize) -> usize {
    with_idle(|idle| idle.pools.get(&pool).map_or(0, |p| p.idle)).unwrap_or(0)
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

    /// Far above what a test gives back.
    const ANY: usize = 1 << 20;

    #[tokio::test]
    async fn the_connection_given_back_last_is_taken_first() {
        let addr = backend(false).await;
        let pool = new_id();
        let (a, b) = (ready(&addr).await, ready(&addr).await);
        let (a_id, b_id) = (Arc::as_ptr(&a.shared), Arc::as_ptr(&b.shared));
        give_back(pool, &addr, a, ANY);
        give_back(pool, &addr, b, ANY);
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
            give_back(pool, &giver, conn, ANY);
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
        give_back(pool, &addr, conn, ANY);
        assert!(closes(&shared).await, "the close was seen");
        assert!(take(pool, &addr).is_none());
        assert_eq!(idle_count(pool), 0, "dropped when met");
    }

    /// Until the connection's task has ended and marked it closed.
    async fn closes(shared: &Arc<super::super::connection::Shared>) -> bool {
        tokio::time::timeout(WAIT, async {
            while !shared.is_closed() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .is_ok()
    }

    #[tokio::test]
    async fn past_keepalive_the_least_recently_used_connection_is_closed() {
        let (a, b, c) = (
            backend(false).await,
            backend(false).await,
            backend(false).await,
        );
        let pool = new_id();
        let (on_a, on_b) = (ready(&a).await, ready(&b).await);
        let (a_id, b_shared) = (Arc::as_ptr(&on_a.shared), on_b.shared.clone());
        give_back(pool, &a, on_a, 2);
        give_back(pool, &b, on_b, 2);
        // Used again: `a`'s connection is now the most recent.
        let on_a = take(pool, &a).expect("a's connection");
        give_back(pool, &a, on_a, 2);
        // A third one, another address: over the cap of 2, `b`'s goes.
        let on_c = ready(&c).await;
        let c_id = Arc::as_ptr(&on_c.shared);
        give_back(pool, &c, on_c, 2);
        assert_eq!(idle_count(pool), 2);
        assert!(closes(&b_shared).await, "the evicted connection is closed");
        assert!(take(pool, &b).is_none());
        assert_eq!(take(pool, &a).map(|c| Arc::as_ptr(&c.shared)), Some(a_id));
        assert_eq!(take(pool, &c).map(|c| Arc::as_ptr(&c.shared)), Some(c_id));
    }

    #[tokio::test]
    async fn keepalive_0_keeps_no_idle_connection() {
        let addr = backend(false).await;
        let pool = new_id();
        let conn = ready(&addr).await;
        let shared = conn.shared.clone();
        give_back(pool, &addr, conn, 0);
        assert!(take(pool, &addr).is_none());
        assert!(closes(&shared).await, "closed, not parked");
    }

    /// Against a model written from the rule (docs/proxy.md, `keepalive`):
    /// a take gets its address's most recently given back connection; a
    /// give-back past the cap closes the one given back longest ago over
    /// all addresses. A seeded sequence of 400 operations on 5 addresses.
    #[tokio::test]
    async fn takes_and_evictions_follow_a_least_recently_used_model() {
        const CAP: usize = 4;
        let mut addrs = Vec::new();
        for _ in 0..5 {
            addrs.push(backend(false).await);
        }
        let pool = new_id();
        // The model: (address index, connection id), oldest first.
        let mut model: Vec<(usize, usize)> = Vec::new();
        let mut in_hand: Vec<(usize, Conn)> = Vec::new();
        let mut ids: Vec<*const super::super::connection::Shared> = Vec::new();
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move |n: u64| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) % n
        };
        let id_of = |ids: &Vec<*const _>, conn: &Conn| {
            ids.iter()
                .position(|p| *p == Arc::as_ptr(&conn.shared))
                .unwrap()
        };
        for _ in 0..400 {
            let a = next(5) as usize;
            match next(3) {
                // Take one of `a`'s (none: a new connection), hold it.
                0 | 1 => {
                    let want = model.iter().rposition(|(addr, _)| *addr == a);
                    let got = take(pool, &addrs[a]);
                    match (want, got) {
                        (Some(i), Some(conn)) => {
                            assert_eq!(id_of(&ids, &conn), model.remove(i).1);
                            in_hand.push((a, conn));
                        }
                        (None, None) => {
                            let conn = ready(&addrs[a]).await;
                            ids.push(Arc::as_ptr(&conn.shared));
                            in_hand.push((a, conn));
                        }
                        (want, got) => panic!("model {want:?}, pool {:?}", got.is_some()),
                    }
                }
                // Give back one held connection.
                _ => {
                    if in_hand.is_empty() {
                        continue;
                    }
                    let (addr, conn) = in_hand.remove(next(in_hand.len() as u64) as usize);
                    model.push((addr, id_of(&ids, &conn)));
                    if model.len() > CAP {
                        model.remove(0);
                    }
                    give_back(pool, &addrs[addr], conn, CAP);
                }
            }
            assert_eq!(idle_count(pool), model.len());
        }
        // The order's stale records stay bounded.
        let records = with_idle(|idle| idle.pools.get(&pool).map_or(0, |p| p.order.len()));
        assert!(records.unwrap() <= 2 * CAP + 64);
    }
}
