//! Thread per core: worker threads, each with its own current-thread
//! runtime and its own listener on the gateway's address (`SO_REUSEPORT`:
//! the kernel spreads new connections over them, and [`WorkerLoads`] evens
//! out what the kernel's hash leaves uneven). A client connection, the
//! requests on it, their upstream connections (pooled per thread, see
//! `connect`) and the tasks that drive them all stay on one thread.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

/// `count` listeners on `addr`, each with `SO_REUSEPORT` (and
/// `SO_REUSEADDR`, as `TcpListener::bind` sets it); the first one binds
/// the address (port 0 picks one), the others join it.
///
/// An address another program listens on is refused, even one that lets
/// others join (a second proxy started on the same `--listen`): with
/// `SO_REUSEPORT` on both, the kernel would share the port between them,
/// and the second would take part of the first one's clients without a
/// word. So the address is first bound once without `SO_REUSEPORT`, which
/// fails while anyone listens on it, and let go.
///
/// # Errors
/// The address cannot be bound (busy, not ours).
pub(crate) fn bind_reuseport(
    addr: SocketAddr,
    count: usize,
) -> io::Result<Vec<std::net::TcpListener>> {
    if addr.port() != 0 {
        drop(socket(addr, false)?);
    }
    let mut listeners: Vec<std::net::TcpListener> = Vec::with_capacity(count);
    let mut addr = addr;
    for _ in 0..count.max(1) {
        let socket = socket(addr, true)?;
        socket.set_nonblocking(true)?;
        socket.listen(1024)?;
        let listener: std::net::TcpListener = socket.into();
        // The others join the port the first one got.
        addr = listener.local_addr()?;
        listeners.push(listener);
    }
    Ok(listeners)
}

/// A TCP socket bound to `addr` with `SO_REUSEADDR`, and `SO_REUSEPORT` if
/// `shared`.
fn socket(addr: SocketAddr, shared: bool) -> io::Result<socket2::Socket> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(shared)?;
    socket.bind(&addr.into())?;
    Ok(socket)
}

/// Client connections evened out over the workers.
///
/// The kernel picks a worker's listener by a hash of the connection's
/// addresses, not by how busy the worker is, and a kept-alive connection
/// stays where it landed: 258 connections were seen to land 114 and 144 on
/// two workers. So a worker that accepts a connection while it serves
/// [`MARGIN`] or more connections than another hands it to the one serving
/// fewest (Envoy calls this exact connection balance). The margin keeps
/// one-request connections from being handed over on every difference of
/// one: each hand-over costs a message and a wake-up of the other thread.
///
/// A connection is counted from the moment its worker is chosen (so a burst
/// of accepts on one worker does not all go to the same other worker) until
/// its [`Serving`] guard drops.
#[derive(Debug)]
pub(crate) struct WorkerLoads {
    open: Box<[AtomicUsize]>,
}

/// How many more connections than another a worker must serve before it
/// hands a new one over.
pub(crate) const MARGIN: usize = 2;

impl WorkerLoads {
    /// Loads for `workers` workers (at least one), none serving anything.
    pub(crate) fn new(workers: usize) -> Arc<Self> {
        Arc::new(WorkerLoads {
            open: (0..workers.max(1)).map(|_| AtomicUsize::new(0)).collect(),
        })
    }

    /// The worker to serve a connection that `accepted_by` just accepted,
    /// counted as serving it from now on.
    pub(crate) fn place(self: &Arc<Self>, accepted_by: usize) -> Serving {
        let accepted_by = accepted_by.min(self.open.len() - 1);
        let mine = self.open[accepted_by].load(Relaxed);
        let (least, fewest) = self
            .open
            .iter()
            .map(|n| n.load(Relaxed))
            .enumerate()
            .min_by_key(|&(_, n)| n)
            .unwrap_or((accepted_by, mine));
        let worker = if fewest + MARGIN <= mine {
            least
        } else {
            accepted_by
        };
        self.serving(worker)
    }

    /// Counts one connection `worker` serves, until the guard drops.
    pub(crate) fn serving(self: &Arc<Self>, worker: usize) -> Serving {
        let worker = worker.min(self.open.len() - 1);
        self.open[worker].fetch_add(1, Relaxed);
        Serving {
            loads: self.clone(),
            worker,
        }
    }

    /// The connections each worker serves, in worker order.
    pub(crate) fn open(&self) -> Vec<usize> {
        self.open.iter().map(|n| n.load(Relaxed)).collect()
    }
}

/// One client connection a worker serves; dropping it ends the count.
#[derive(Debug)]
pub(crate) struct Serving {
    loads: Arc<WorkerLoads>,
    worker: usize,
}

impl Serving {
    /// The worker serving the connection.
    pub(crate) fn worker(&self) -> usize {
        self.worker
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.loads.open[self.worker].fetch_sub(1, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Places `accepts` connections, all accepted by `by`, keeping them.
    fn place_all(loads: &Arc<WorkerLoads>, by: usize, accepts: usize) -> Vec<Serving> {
        (0..accepts).map(|_| loads.place(by)).collect()
    }

    #[test]
    fn connections_all_accepted_by_one_worker_spread_within_the_margin() {
        for workers in 1..=4 {
            let loads = WorkerLoads::new(workers);
            let kept = place_all(&loads, 0, 101);
            let open = loads.open();
            assert_eq!(open.iter().sum::<usize>(), 101);
            let (most, least) = (*open.iter().max().unwrap(), *open.iter().min().unwrap());
            assert!(most - least <= MARGIN, "{workers} workers: {open:?}");
            assert!(kept.iter().all(|s| s.worker() < workers));
        }
    }

    #[test]
    fn a_worker_keeps_a_connection_until_it_serves_margin_more_than_another() {
        let loads = WorkerLoads::new(2);
        let mut kept = place_all(&loads, 0, MARGIN);
        assert_eq!(loads.open(), [MARGIN, 0]);
        kept.push(loads.place(0));
        assert_eq!(kept.last().unwrap().worker(), 1);
        assert_eq!(loads.open(), [MARGIN, 1]);
        // Worker 1 keeps what it accepts while it serves fewer.
        kept.push(loads.place(1));
        assert_eq!(loads.open(), [MARGIN, 2]);
    }

    #[test]
    fn the_count_ends_when_the_guard_drops() {
        let loads = WorkerLoads::new(3);
        let kept = place_all(&loads, 2, 9);
        assert_eq!(loads.open().iter().sum::<usize>(), 9);
        drop(kept);
        assert_eq!(loads.open(), [0, 0, 0]);
        // A worker index past the end is the last worker's.
        let last = loads.serving(7);
        assert_eq!((last.worker(), loads.open()), (2, vec![0, 0, 1]));
        drop(last);
        // And one accepted past the end, accepted by the last worker.
        let placed = loads.place(7);
        assert_eq!((placed.worker(), loads.open()), (2, vec![0, 0, 1]));
    }

    #[test]
    fn the_fewest_serving_gets_the_hand_over() {
        let loads = WorkerLoads::new(3);
        let _held = [
            loads.serving(0),
            loads.serving(0),
            loads.serving(0),
            loads.serving(1),
        ];
        // Worker 0 serves 3, worker 1 one, worker 2 none: worker 2 gets it.
        assert_eq!(loads.place(0).worker(), 2);
        // Worker 1 (one) against worker 2 (none): within the margin.
        assert_eq!(loads.place(1).worker(), 1);
    }
}
