//! Thread per core: worker threads, each with its own current-thread
//! runtime and its own listener on the gateway's address (`SO_REUSEPORT`:
//! the kernel spreads new connections over them). A client connection, the
//! requests on it, their upstream connections (pooled per thread, see
//! `connect`) and the tasks that drive them all stay on one thread.

use std::io;
use std::net::SocketAddr;

/// `count` listeners on `addr`, each with `SO_REUSEPORT` (and
/// `SO_REUSEADDR`, as `TcpListener::bind` sets it); the first one binds
/// the address (port 0 picks one), the others join it.
///
/// # Errors
/// The address cannot be bound (busy, not ours).
pub(crate) fn bind_reuseport(
    addr: SocketAddr,
    count: usize,
) -> io::Result<Vec<std::net::TcpListener>> {
    let mut listeners: Vec<std::net::TcpListener> = Vec::with_capacity(count);
    let mut addr = addr;
    for _ in 0..count.max(1) {
        let socket = socket2::Socket::new(
            socket2::Domain::for_address(addr),
            socket2::Type::STREAM,
            Some(socket2::Protocol::TCP),
        )?;
        socket.set_reuse_address(true)?;
        socket.set_reuse_port(true)?;
        socket.set_nonblocking(true)?;
        socket.bind(&addr.into())?;
        socket.listen(1024)?;
        let listener: std::net::TcpListener = socket.into();
        // The others join the port the first one got.
        addr = listener.local_addr()?;
        listeners.push(listener);
    }
    Ok(listeners)
}
