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
//!
//! A take hands out the oldest of the connections given back less than
//! [`ACK_DELAY`] ago, and when all are older, the newest. Among recent
//! ones, oldest first: under a steady load each is used again before the
//! kernel gives up waiting to send its pending ACK with a request, and
//! the ACK rides on that request (taking the newest first left the deeper
//! ones idle long enough that about one answer in ten was acknowledged by
//! a segment of its own: BENCHMARKS.md). Among older ones, newest first:
//! a surplus left by a burst is never used while others will do, and ages
//! out.
//!
//! No task watches an idle connection. A take looks at it first (one read
//! that does not wait, [`Conn::is_usable`]): closed by the backend, or with
//! a stray byte on it, it is dropped and the next one looked at. An idle
//! connection is closed once it has been idle for the upstream's idle
//! timeout: at a take, or by the worker's sweep, a timer task that runs
//! every [`SWEEP_PERIOD`] while the worker has idle connections (and
//! ends when it has none). So a quiet proxy keeps an idle connection at
//! most the idle timeout plus [`SWEEP_PERIOD`].

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, LazyLock, Mutex};

use std::time::Duration;

use foldhash::fast::RandomState;
use tokio::runtime::{Handle, RuntimeFlavor};
// tokio's clock (the system's, unless a test pauses it).
use tokio::time::Instant;

use super::connection::Conn;

/// Give-backs between two sweeps of a worker's closed connections (those
/// of endpoints gone from the membership are never taken again), on a busy
/// worker whose timer sweep would come later.
const SWEEP_EVERY: u32 = 4096;

/// How long after its answer a connection may still owe the backend an
/// ACK. Linux delays the ACK of data it received by at least 40 ms, hoping
/// to carry it on the next segment sent: a request sent on the connection
/// within that time carries it. Past it the kernel has sent it alone, and
/// leaves the mode in which it delays ACKs on that connection: the next
/// answers on it may be acknowledged alone too.
pub(crate) const ACK_DELAY: Duration = Duration::from_millis(40);

/// How often a worker with idle connections sweeps them.
pub(crate) const SWEEP_PERIOD: Duration = Duration::from_secs(5);

/// An idle connection: its place in the order of give-backs (a count, a
/// tie-free key), when it was given back, and when it is closed unless
/// used.
struct Parked {
    stamp: u64,
    since: Instant,
    expires: Instant,
    conn: Conn,
}

impl Parked {
    /// Whether it can stay: not past its idle timeout, and nothing came on
    /// it.
    fn keeps(&mut self, now: Instant) -> bool {
        now < self.expires && self.conn.is_usable()
    }
}

/// One pool's idle connections on one worker.
#[derive(Default)]
struct Pool {
    /// By backend address, oldest first.
    /// (A deque: a take under load is usually of the oldest, its front.)
    by_addr: HashMap<Arc<str>, VecDeque<Parked>, RandomState>,
    /// Every give-back in order, (stamp, address): the front is the least
    /// recently used connection unless it was taken since (then its record
    /// is stale and skipped).
    order: VecDeque<(u64, Arc<str>)>,
    /// Idle connections in `by_addr`.
    idle: usize,
    next_stamp: u64,
}

impl Pool {
    /// The connection [`take`] hands out: the oldest one given back less
    /// than [`ACK_DELAY`] ago, else the newest. Expired and unusable ones
    /// met on the way are closed.
    fn take(&mut self, addr: &str, now: Instant) -> Option<Conn> {
        let list = self.by_addr.get_mut(addr)?;
        // Oldest first, and all with the pool's one idle timeout: the
        // expired ones are at the front.
        while list.front().is_some_and(|p| now >= p.expires) {
            list.pop_front();
            self.idle -= 1;
        }
        // Given back after it: recent. (Instants compared, not durations
        // computed: a take looks at several.)
        let recent_after = now.checked_sub(ACK_DELAY);
        let mut taken = None;
        loop {
            let recent = match recent_after {
                Some(after) => list.partition_point(|p| p.since <= after),
                None => 0,
            };
            // None recent: the newest.
            let Some(mut parked) = list.remove(recent.min(list.len().saturating_sub(1))) else {
                break;
            };
            self.idle -= 1;
            if parked.conn.is_usable() {
                taken = Some(parked.conn);
                break;
            }
        }
        // An empty list stays (the next give-back fills it without a second
        // lookup); sweeps drop those of addresses gone.
        self.compact_if_stale();
        taken
    }

    fn give_back(
        &mut self,
        addr: &Arc<str>,
        conn: Conn,
        keepalive: usize,
        since: Instant,
        expires: Instant,
    ) {
        if keepalive == 0 {
            // Dropped: closed.
            return;
        }
        let stamp = self.next_stamp;
        self.next_stamp += 1;
        let list = match self.by_addr.get_mut(&**addr) {
            Some(list) => list,
            None => self.by_addr.entry(addr.clone()).or_default(),
        };
        list.push_back(Parked {
            stamp,
            since,
            expires,
            conn,
        });
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
            if list.front().is_some_and(|p| p.stamp == stamp) {
                list.pop_front();
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

    /// Closes the connections past their idle timeout or that the
    /// backend closed.
    fn sweep(&mut self, now: Instant) {
        let mut idle = 0;
        self.by_addr.retain(|_, list| {
            list.retain_mut(|p| p.keeps(now));
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
    /// A sweeper task runs for these connections.
    sweeping: bool,
    /// The [`SHEDS`] count this worker's connections were last shed at.
    shed_at: u64,
}

/// How many times some worker ran out of file descriptors: each other
/// worker closes its idle connections at its next sweep on seeing it grow
/// ([`shed`]).
static SHEDS: AtomicU64 = AtomicU64::new(0);

impl Idle {
    fn sweep(&mut self, now: Instant) {
        self.pools.retain(|_, pool| {
            pool.sweep(now);
            pool.idle > 0
        });
    }

    fn take(&mut self, pool: usize, addr: &str, now: Instant) -> Option<Conn> {
        self.pools.get_mut(&pool)?.take(addr, now)
    }

    /// Closes every idle connection here, the shed counted `sheds` seen;
    /// how many were closed.
    fn shed_here(&mut self, sheds: u64) -> usize {
        self.shed_at = sheds;
        let closed = self.pools.values().map(|p| p.idle).sum();
        // Dropped, their sockets closed; the sweeper finds nothing left
        // and ends.
        self.pools.clear();
        closed
    }

    /// Parks `conn`; true when a sweeper must be started.
    fn give_back(
        &mut self,
        pool: usize,
        addr: &Arc<str>,
        conn: Conn,
        keepalive: usize,
        now: Instant,
        expires: Instant,
    ) -> bool {
        self.given_back += 1;
        if self.given_back >= SWEEP_EVERY {
            self.given_back = 0;
            self.sweep(now);
        }
        self.pools
            .entry(pool)
            .or_default()
            .give_back(addr, conn, keepalive, now, expires);
        let start = !self.sweeping && !self.pools.is_empty();
        self.sweeping |= start;
        start
    }

    /// One sweep of the timer's: false when no idle connection is left
    /// (the sweeper ends, and the next give-back starts one).
    ///
    /// `sheds` is [`SHEDS`]' count: when it has grown since this worker
    /// last shed, another worker ran out of descriptors, and these go too.
    fn sweep_on_timer(&mut self, now: Instant, sheds: u64) -> bool {
        if sheds != self.shed_at {
            self.shed_here(sheds);
        }
        self.sweep(now);
        self.sweeping = !self.pools.is_empty();
        self.sweeping
    }
}

/// Sweeps the worker's idle connections every [`SWEEP_PERIOD`] while it
/// has some.
async fn sweeper() {
    /// A sweeper dropped (its runtime shutting down) lets the next
    /// give-back start another.
    struct Running(bool);
    impl Drop for Running {
        fn drop(&mut self) {
            if self.0 {
                let _ = with_idle(|idle| idle.sweeping = false);
            }
        }
    }
    let mut running = Running(true);
    loop {
        tokio::time::sleep(SWEEP_PERIOD).await;
        let sheds = SHEDS.load(Relaxed);
        let more = with_idle(|idle| idle.sweep_on_timer(Instant::now(), sheds)).unwrap_or(false);
        if !more {
            running.0 = false;
            return;
        }
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
/// oldest of those given back less than [`ACK_DELAY`] ago, else the newest
/// (module docs). Expired ones, and ones the backend closed or wrote on,
/// are closed when met.
pub(crate) fn take(pool: usize, addr: &str) -> Option<Conn> {
    let now = Instant::now();
    with_idle(|idle| idle.take(pool, addr, now)).flatten()
}

/// Gives `conn` (its exchange over) back to this worker's pool, which
/// keeps at most `keepalive` idle connections over all addresses: past
/// it, the least recently used one is closed. Unused for `idle_timeout`,
/// it is closed.
pub(crate) fn give_back(
    pool: usize,
    addr: &Arc<str>,
    mut conn: Conn,
    keepalive: usize,
    idle_timeout: Duration,
) {
    conn.served = conn.served.saturating_add(1);
    conn.rest();
    // Without a pool (the thread is exiting) the connection closes. The
    // time is read with the pool in hand: the shared pool's lists stay in
    // the order of their instants, which a take relies on.
    let start = with_idle(|idle| {
        let now = Instant::now();
        idle.give_back(pool, addr, conn, keepalive, now, now + idle_timeout)
    });
    if start == Some(true) {
        match Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn(sweeper())),
            Err(_) => {
                let _ = with_idle(|idle| idle.sweeping = false);
            }
        }
    }
}

/// Closes every idle connection of this worker (or of the shared pool),
/// of every pool, and those of the other workers at their next sweep
/// (within [`SWEEP_PERIOD`]): the process ran out of file descriptors, and
/// a client waiting to be accepted, or a request waiting for a
/// connection, matters more than a connection kept in case.
///
/// (Tested through the command line's test of a proxy out of
/// descriptors: the count is the process's, and a unit test bumping it
/// would close other tests' pools at their sweeps.)
pub(crate) fn shed() {
    let sheds = SHEDS.fetch_add(1, Relaxed) + 1;
    let _ = with_idle(|idle| idle.shed_here(sheds));
}

/// Idle connections of `pool` on this worker (or in the shared pool).
#[cfg(test)]
pub(crate) fn idle_count(pool: usize) -> usize {
    with_idle(|idle| idle.pools.get(&pool).map_or(0, |p| p.idle)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio::net::TcpListener;
    use tokio::sync::mpsc;

    use super::*;
    use crate::connect::connection::{connect, Stream};

    const WAIT: Duration = Duration::from_secs(10);
    /// Longer than any test waits.
    const IDLE: Duration = Duration::from_secs(3600);

    /// What a test backend does with each connection.
    #[derive(Clone, Copy)]
    enum Acts {
        /// Keeps it open, silent.
        Holds,
        /// Closes it at once.
        Closes,
        /// Sends a byte nobody asked for.
        Babbles,
    }

    /// A backend, and the client ends (address) of the connections it saw
    /// closed.
    async fn backend_acting(acts: Acts) -> (Arc<str>, mpsc::UnboundedReceiver<SocketAddr>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (closed, seen) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok((mut stream, peer)) = listener.accept().await {
                let closed = closed.clone();
                match acts {
                    Acts::Closes => continue,
                    Acts::Babbles => stream.write_all(b"x").await.unwrap(),
                    Acts::Holds => {}
                }
                tokio::spawn(async move {
                    let mut sink = [0u8; 64];
                    while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
                    let _ = closed.send(peer);
                });
            }
        });
        (addr.into(), seen)
    }

    async fn backend(hold: bool) -> Arc<str> {
        let acts = if hold { Acts::Holds } else { Acts::Closes };
        backend_acting(acts).await.0
    }

    async fn ready(addr: &Arc<str>) -> Conn {
        connect(addr, WAIT, None).await.unwrap()
    }

    /// A connection told apart by its local address.
    fn id(conn: &Conn) -> SocketAddr {
        match &conn.stream {
            Stream::Tcp(tcp) => tcp.local_addr().unwrap(),
            Stream::Tls(_) => unreachable!("the tests use cleartext"),
        }
    }

    /// Until the backend saw `id` close.
    async fn closes(seen: &mut mpsc::UnboundedReceiver<SocketAddr>, id: SocketAddr) -> bool {
        tokio::time::timeout(WAIT, async {
            while let Some(closed) = seen.recv().await {
                if closed == id {
                    return true;
                }
            }
            false
        })
        .await
        .unwrap_or(false)
    }

    /// Until something (the backend's end, a byte) is there to read.
    async fn readable(conn: &Conn) {
        match &conn.stream {
            Stream::Tcp(tcp) => tokio::time::timeout(WAIT, tcp.readable())
                .await
                .unwrap()
                .unwrap(),
            Stream::Tls(_) => unreachable!("the tests use cleartext"),
        }
    }

    fn give_back(pool: usize, addr: &Arc<str>, conn: Conn, keepalive: usize) {
        super::give_back(pool, addr, conn, keepalive, IDLE);
    }

    /// Far above what a test gives back.
    const ANY: usize = 1 << 20;

    /// Paused time: it moves only when the test moves it (or nothing
    /// else can run).
    #[tokio::test(start_paused = true)]
    async fn recent_connections_are_taken_oldest_first_older_ones_newest_first() {
        let addr = backend(true).await;
        let pool = new_id();
        let (a, b, c) = (ready(&addr).await, ready(&addr).await, ready(&addr).await);
        let (a_id, b_id, c_id) = (id(&a), id(&b), id(&c));
        give_back(pool, &addr, a, ANY);
        give_back(pool, &addr, b, ANY);
        give_back(pool, &addr, c, ANY);
        let first = take(pool, &addr).expect("an idle connection");
        assert_eq!(id(&first), a_id, "all recent: the oldest");
        assert_eq!(first.served, 1, "one exchange counted");
        // `b` and `c` stop being recent; `a` comes back recent.
        tokio::time::advance(ACK_DELAY).await;
        give_back(pool, &addr, first, ANY);
        assert_eq!(
            take(pool, &addr).map(|c| id(&c)),
            Some(a_id),
            "the recent one"
        );
        assert_eq!(take(pool, &addr).map(|c| id(&c)), Some(c_id), "the newest");
        assert_eq!(take(pool, &addr).map(|c| id(&c)), Some(b_id));
        assert!(take(pool, &addr).is_none(), "all in use");
        assert!(take(new_id(), &addr).is_none(), "another pool has none");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn on_a_multi_thread_runtime_the_threads_share_one_pool() {
        let addr = backend(true).await;
        let pool = new_id();
        let conn = ready(&addr).await;
        let conn_id = id(&conn);
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
        assert_eq!(id(&taken), conn_id);
    }

    /// A connection the backend closed, or one with a byte nobody asked
    /// for on it, is dropped when a take meets it.
    #[tokio::test]
    async fn a_connection_the_backend_closed_or_wrote_on_is_never_taken() {
        for acts in [Acts::Closes, Acts::Babbles] {
            let (addr, _) = backend_acting(acts).await;
            let pool = new_id();
            let conn = ready(&addr).await;
            readable(&conn).await;
            give_back(pool, &addr, conn, ANY);
            assert_eq!(idle_count(pool), 1);
            assert!(take(pool, &addr).is_none());
            assert_eq!(idle_count(pool), 0, "dropped when met");
        }
    }

    /// A worker runs one sweeper, however many connections it gives
    /// back: a busy one gives one back per request, and a sweeper each
    /// would be thousands of sleeping tasks.
    #[tokio::test]
    async fn one_sweeper_runs_however_many_give_backs() {
        let alive = || Handle::current().metrics().num_alive_tasks();
        let addr = backend(true).await;
        let pool = new_id();
        give_back(pool, &addr, ready(&addr).await, ANY);
        assert!(with_idle(|idle| idle.sweeping).unwrap(), "a sweeper runs");
        let tasks = alive();
        for _ in 0..100 {
            let conn = take(pool, &addr).expect("the one connection");
            give_back(pool, &addr, conn, ANY);
        }
        assert_eq!(alive(), tasks, "no other sweeper started");
    }

    /// An idle connection is closed once it has been idle for its
    /// timeout (by the worker's sweep when nothing takes it), and not
    /// before; the sweeper ends with the last idle connection and the next
    /// give-back starts another. Paused time: it moves only when nothing
    /// else can run.
    #[tokio::test(start_paused = true)]
    async fn an_idle_connection_is_closed_after_its_timeout_and_not_before() {
        let (addr, mut seen) = backend_acting(Acts::Holds).await;
        let pool = new_id();
        let timeout = Duration::from_secs(60);
        for round in 0..2 {
            let conn = ready(&addr).await;
            let conn_id = id(&conn);
            super::give_back(pool, &addr, conn, ANY, timeout);
            tokio::time::sleep(timeout - Duration::from_secs(1)).await;
            assert_eq!(
                idle_count(pool),
                1,
                "round {round}: closed before its timeout"
            );
            let conn = take(pool, &addr).expect("still idle, not expired");
            assert_eq!(id(&conn), conn_id);
            // Given back again: idle from now.
            super::give_back(pool, &addr, conn, ANY, timeout);
            tokio::time::sleep(timeout - Duration::from_secs(1)).await;
            assert_eq!(idle_count(pool), 1, "round {round}: the idle time restarts");
            tokio::time::sleep(Duration::from_secs(1) + SWEEP_PERIOD).await;
            assert_eq!(idle_count(pool), 0, "round {round}: swept");
            assert!(closes(&mut seen, conn_id).await, "round {round}: closed");
            assert!(
                !with_idle(|idle| idle.sweeping).unwrap(),
                "round {round}: the sweeper ended with nothing left"
            );
        }
    }

    /// Under a steady load one connection is taken and given back again
    /// and again, each give-back adding a record to the eviction order:
    /// the records of connections taken since are dropped as they pile
    /// up, so the order stays within a constant factor of the idle
    /// connections (2 x idle + 64) instead of growing by one a request.
    #[tokio::test]
    async fn the_eviction_order_does_not_grow_with_the_requests() {
        let addr = backend(true).await;
        let now = Instant::now();
        let mut pool = Pool::default();
        let mut conn = ready(&addr).await;
        let mut longest = 0;
        for _ in 0..10_000 {
            pool.give_back(&addr, conn, ANY, now, now + IDLE);
            longest = longest.max(pool.order.len());
            conn = pool.take(&addr, now).expect("the one connection");
        }
        assert!(longest <= 2 + 64 + 1, "the order held {longest} records");
    }

    /// At a take, a connection past its idle timeout is closed, not
    /// handed out, whether or not a sweep came.
    #[tokio::test]
    async fn a_take_never_hands_out_an_expired_connection() {
        let addr = backend(true).await;
        let now = Instant::now();
        let mut pool = Pool::default();
        let (old, new) = (ready(&addr).await, ready(&addr).await);
        let new_id = id(&new);
        pool.give_back(&addr, old, ANY, now, now + Duration::from_secs(10));
        pool.give_back(&addr, new, ANY, now, now + Duration::from_secs(20));
        let later = now + Duration::from_secs(15);
        let taken = pool.take(&addr, later).expect("the newer one");
        assert_eq!(id(&taken), new_id);
        assert!(pool.take(&addr, later).is_none(), "the older one expired");
        assert_eq!(pool.idle, 0);
        pool.give_back(&addr, taken, ANY, later, now + Duration::from_secs(20));
        assert!(pool.take(&addr, now + Duration::from_secs(20)).is_none());
        assert_eq!(pool.idle, 0);
    }

    #[tokio::test]
    async fn past_keepalive_the_least_recently_used_connection_is_closed() {
        let (a, b, c) = (
            backend(true).await,
            backend_acting(Acts::Holds).await,
            backend(true).await,
        );
        let (b, mut b_seen) = b;
        let pool = new_id();
        let (on_a, on_b) = (ready(&a).await, ready(&b).await);
        let (a_id, b_id) = (id(&on_a), id(&on_b));
        give_back(pool, &a, on_a, 2);
        give_back(pool, &b, on_b, 2);
        // Used again: `a`'s connection is now the most recent.
        let on_a = take(pool, &a).expect("a's connection");
        give_back(pool, &a, on_a, 2);
        // A third one, another address: over the cap of 2, `b`'s goes.
        let on_c = ready(&c).await;
        let c_id = id(&on_c);
        give_back(pool, &c, on_c, 2);
        assert_eq!(idle_count(pool), 2);
        assert!(
            closes(&mut b_seen, b_id).await,
            "the evicted connection is closed"
        );
        assert!(take(pool, &b).is_none());
        assert_eq!(take(pool, &a).map(|c| id(&c)), Some(a_id));
        assert_eq!(take(pool, &c).map(|c| id(&c)), Some(c_id));
    }

    /// Out of descriptors: every idle connection of the worker goes, of
    /// every pool, each closed; the pools take connections again after.
    #[tokio::test]
    async fn shedding_closes_every_idle_connection_of_every_pool() {
        let (addr, mut seen) = backend_acting(Acts::Holds).await;
        let (one, two) = (new_id(), new_id());
        let mut ids = Vec::new();
        for pool in [one, one, two] {
            let conn = ready(&addr).await;
            ids.push(id(&conn));
            give_back(pool, &addr, conn, 8);
        }
        assert_eq!((idle_count(one), idle_count(two)), (2, 1));
        // Not `shed()`: its count is the process's, and other tests' pools
        // would go at their sweeps.
        let shed_here = || with_idle(|idle| idle.shed_here(idle.shed_at)).unwrap();
        assert_eq!(shed_here(), 3);
        assert_eq!((idle_count(one), idle_count(two)), (0, 0));
        // Closed in any order.
        let mut open: std::collections::HashSet<SocketAddr> = ids.into_iter().collect();
        let all_closed = tokio::time::timeout(WAIT, async {
            while !open.is_empty() {
                open.remove(&seen.recv().await.unwrap());
            }
        });
        assert!(all_closed.await.is_ok(), "each is closed");
        assert_eq!(shed_here(), 0);
        give_back(one, &addr, ready(&addr).await, 8);
        assert_eq!(idle_count(one), 1);
    }

    /// Another worker's shed reaches this one's connections at its next
    /// sweep, once.
    #[tokio::test]
    async fn a_shed_elsewhere_closes_these_at_the_next_sweep() {
        let addr = backend(true).await;
        let pool = new_id();
        give_back(pool, &addr, ready(&addr).await, 8);
        let seen = with_idle(|idle| idle.shed_at).unwrap();
        let sweep = |sheds| with_idle(|idle| idle.sweep_on_timer(Instant::now(), sheds)).unwrap();
        assert!(sweep(seen), "kept: no shed since");
        assert_eq!(idle_count(pool), 1);
        assert!(!sweep(seen + 1), "nothing left to sweep");
        assert_eq!(idle_count(pool), 0);
        give_back(pool, &addr, ready(&addr).await, 8);
        assert!(sweep(seen + 1), "the same shed is not seen twice");
        assert_eq!(idle_count(pool), 1);
    }

    #[tokio::test]
    async fn keepalive_0_keeps_no_idle_connection() {
        let (addr, mut seen) = backend_acting(Acts::Holds).await;
        let pool = new_id();
        let conn = ready(&addr).await;
        let conn_id = id(&conn);
        give_back(pool, &addr, conn, 0);
        assert!(take(pool, &addr).is_none());
        assert!(closes(&mut seen, conn_id).await, "closed, not parked");
    }

    /// Against a model written from the rules (module docs, docs/proxy.md
    /// `keepalive`): a take closes its address's expired connections and
    /// gets the oldest of those given back less than `ACK_DELAY` ago, else
    /// the newest; a give-back past the cap closes the one given back
    /// longest ago over all addresses. A seeded sequence of 600 operations
    /// on 5 addresses, on a clock moved 0-25 ms between them with an idle
    /// timeout of 150 ms, so that connections cross `ACK_DELAY` and expire.
    #[tokio::test]
    async fn takes_and_evictions_follow_a_model_of_the_rules() {
        const CAP: usize = 4;
        const TIMEOUT: Duration = Duration::from_millis(150);
        let mut addrs = Vec::new();
        for _ in 0..5 {
            addrs.push(backend(true).await);
        }
        let mut pool = Pool::default();
        let mut now = Instant::now();
        // The model: (address index, connection id, given back at), oldest
        // first.
        let mut model: Vec<(usize, usize, Instant)> = Vec::new();
        let mut in_hand: Vec<(usize, Conn)> = Vec::new();
        let mut ids: Vec<SocketAddr> = Vec::new();
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move |n: u64| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) % n
        };
        let id_of =
            |ids: &Vec<SocketAddr>, conn: &Conn| ids.iter().position(|p| *p == id(conn)).unwrap();
        let (mut recent_taken, mut older_taken, mut expired) = (0, 0, 0);
        for _ in 0..600 {
            now += Duration::from_millis(next(26));
            let a = next(5) as usize;
            match next(3) {
                // Take one of `a`'s (none: a new connection), hold it.
                0 | 1 => {
                    let before = model.len();
                    model.retain(|(addr, _, since)| *addr != a || now - *since < TIMEOUT);
                    expired += before - model.len();
                    let mine = || model.iter().enumerate().filter(|(_, m)| m.0 == a);
                    let want = match mine().find(|(_, m)| now - m.2 < ACK_DELAY) {
                        Some((i, _)) => {
                            recent_taken += 1;
                            Some(i)
                        }
                        None => mine().next_back().map(|(i, _)| i),
                    };
                    let got = pool.take(&addrs[a], now);
                    match (want, got) {
                        (Some(i), Some(conn)) => {
                            if now - model[i].2 >= ACK_DELAY {
                                older_taken += 1;
                            }
                            assert_eq!(id_of(&ids, &conn), model.remove(i).1);
                            in_hand.push((a, conn));
                        }
                        (None, None) => {
                            let conn = ready(&addrs[a]).await;
                            ids.push(id(&conn));
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
                    model.push((addr, id_of(&ids, &conn), now));
                    if model.len() > CAP {
                        model.remove(0);
                    }
                    pool.give_back(&addrs[addr], conn, CAP, now, now + TIMEOUT);
                }
            }
            assert_eq!(pool.idle, model.len());
        }
        // Every rule was exercised.
        assert!(recent_taken > 20 && older_taken > 20 && expired > 5);
        // The order's stale records stay bounded.
        assert!(pool.order.len() <= 2 * CAP + 64);
    }
}
