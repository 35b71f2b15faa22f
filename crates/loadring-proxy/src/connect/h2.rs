//! HTTP/2 to backends (`--backend-protocol h2c`): one connection per
//! endpoint per worker thread, shared by every stream of that worker's
//! requests (gRPC calls included), made again once it has closed.
//!
//! Each connection also tells whether its backend accepts extended CONNECT
//! (RFC 8441, WebSockets over HTTP/2): known once the backend's first
//! frame, its SETTINGS (RFC 9113 3.4), has been read.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use hyper::client::conn::http2::{self, SendRequest};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::sync::{watch, Mutex};
use tokio_rustls::rustls::ClientConfig;

use super::connection::{open, ConnectError, Observed, ReadObserver};
use crate::request_body::Outgoing;

/// An endpoint's HTTP/2 connection, as requests share it.
#[derive(Debug, Clone)]
pub(crate) struct H2Conn {
    pub(crate) sender: SendRequest<Outgoing>,
    /// Whether the backend announced extended CONNECT: `None` until its
    /// SETTINGS are in.
    connect_protocol: watch::Receiver<Option<bool>>,
}

impl H2Conn {
    /// Whether the backend accepts extended CONNECT, once its SETTINGS
    /// are in (waiting at most `within`; a connection that ends first
    /// does not).
    pub(crate) async fn extended_connect(&self, within: Duration) -> bool {
        let mut announced = self.connect_protocol.clone();
        let known = tokio::time::timeout(within, announced.wait_for(Option::is_some)).await;
        matches!(known, Ok(Ok(value)) if *value == Some(true))
    }
}

/// The connection of one endpoint, being made by at most one request (the
/// others wait for it rather than each making their own).
type Slot = Arc<Mutex<Option<H2Conn>>>;

thread_local! {
    /// By pool id and backend address.
    static CONNECTIONS: RefCell<HashMap<(usize, Arc<str>), Slot>> = RefCell::new(HashMap::new());
}

/// This worker's connection to `addr`, made now when there is none open
/// (or when `fresh`: the last one failed a stream).
pub(crate) async fn sender(
    pool: usize,
    addr: &Arc<str>,
    timeout: Duration,
    tls: Option<&Arc<ClientConfig>>,
    fresh: bool,
) -> Result<H2Conn, ConnectError> {
    let slot = CONNECTIONS
        .try_with(|all| {
            all.borrow_mut()
                .entry((pool, addr.clone()))
                .or_default()
                .clone()
        })
        .unwrap_or_default();
    let mut held = slot.lock().await;
    if let Some(conn) = held.as_ref() {
        if !fresh && !conn.sender.is_closed() {
            return Ok(conn.clone());
        }
    }
    let stream = open(addr, timeout, tls).await?;
    let (announce, connect_protocol) = watch::channel(None);
    let stream = Observed {
        stream,
        observer: SettingsReader::new(announce),
    };
    let mut builder = http2::Builder::new(TokioExecutor::new());
    // Pings find a dead peer on a connection that otherwise waits for
    // streams forever.
    builder
        .timer(TokioTimer::new())
        .keep_alive_interval(Duration::from_secs(30))
        .keep_alive_timeout(Duration::from_secs(10));
    let (sender, connection) = builder
        .handshake(TokioIo::new(stream))
        .await
        .map_err(|e| ConnectError::Handshake(addr.to_string(), e))?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!("upstream h2 connection: {e}");
        }
    });
    let conn = H2Conn {
        sender,
        connect_protocol,
    };
    *held = Some(conn.clone());
    drop(held);
    // A new connection is rare (one per endpoint and thread, again after a
    // close): the moment to forget the slots of closed connections, those
    // of endpoints gone from the membership or of replaced forwarders
    // included, so the map holds no more than the connections open.
    let _ = CONNECTIONS.try_with(|all| all.borrow_mut().retain(|_, slot| worth_keeping(slot)));
    Ok(conn)
}

/// A slot in use (being filled) or holding an open connection.
fn worth_keeping(slot: &Slot) -> bool {
    match slot.try_lock() {
        Ok(held) => held.as_ref().is_some_and(|conn| !conn.sender.is_closed()),
        Err(_) => true,
    }
}

/// Reads whether the backend's first frame (its SETTINGS) announces
/// extended CONNECT. h2 does not say when a peer's SETTINGS came, only what
/// they are once applied; the frame read here is known the moment it is
/// whole. (A later SETTINGS frame could announce it too; servers announce
/// it at once.)
#[derive(Debug)]
struct SettingsReader {
    /// The first frame's bytes read so far.
    frame: Vec<u8>,
    /// Told once the frame is whole (or the connection goes).
    announce: Option<watch::Sender<Option<bool>>>,
}

/// The largest first frame read: HTTP/2's default maximum frame size.
const MAX_FIRST_FRAME: usize = 9 + 16_384;

impl SettingsReader {
    fn new(announce: watch::Sender<Option<bool>>) -> Self {
        SettingsReader {
            frame: Vec::new(),
            announce: Some(announce),
        }
    }
}

impl ReadObserver for SettingsReader {
    fn saw(&mut self, bytes: &[u8]) {
        let Some(announce) = &self.announce else {
            return;
        };
        let wanted = MAX_FIRST_FRAME - self.frame.len();
        self.frame
            .extend_from_slice(&bytes[..bytes.len().min(wanted)]);
        let Some(header) = self.frame.first_chunk::<9>() else {
            return;
        };
        let length = u32::from_be_bytes([0, header[0], header[1], header[2]]) as usize;
        let Some(frame) = self.frame.get(..9 + length) else {
            if 9 + length <= MAX_FIRST_FRAME {
                return;
            }
            // Larger than any SETTINGS frame a server sends first.
            announce.send_replace(Some(false));
            self.announce = None;
            return;
        };
        announce.send_replace(Some(announces_extended_connect(frame)));
        self.announce = None;
        self.frame = Vec::new();
    }
}

/// Whether `frame` is a SETTINGS frame (type 4, not an ACK) that sets
/// SETTINGS_ENABLE_CONNECT_PROTOCOL (8) to 1 (RFC 9113 6.5, RFC 8441 3).
fn announces_extended_connect(frame: &[u8]) -> bool {
    let (header, payload) = frame.split_at(9.min(frame.len()));
    if header.len() < 9 || header[3] != 4 || header[4] & 1 != 0 {
        return false;
    }
    // The last value given counts.
    payload
        .chunks_exact(6)
        .rfind(|setting| setting[..2] == [0, 8])
        .is_some_and(|setting| setting[2..] == [0, 0, 0, 1])
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use bytes::Bytes;
    use http_body_util::Empty;
    use hyper::service::service_fn;
    use tokio::net::TcpListener;

    use super::*;
    use crate::connect::pool::new_id;

    const WAIT: Duration = Duration::from_secs(10);

    /// An HTTP/2 server that answers every stream; dropping the sender
    /// ends its accept loop and every connection it serves.
    async fn h2_backend() -> (Arc<str>, tokio::sync::oneshot::Sender<()>) {
        h2_backend_with(false).await
    }

    /// [`h2_backend`], announcing extended CONNECT or not.
    async fn h2_backend_with(
        connect_protocol: bool,
    ) -> (Arc<str>, tokio::sync::oneshot::Sender<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let mut served = tokio::task::JoinSet::new();
            loop {
                tokio::select! {
                    _ = &mut stopped => break,
                    accepted = listener.accept() => {
                        let Ok((stream, _)) = accepted else { break };
                        let mut http = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
                        if connect_protocol {
                            http.enable_connect_protocol();
                        }
                        served.spawn(
                            http
                                .serve_connection(
                                    TokioIo::new(stream),
                                    service_fn(|_| async {
                                        Ok::<_, Infallible>(http::Response::new(Empty::<Bytes>::new()))
                                    }),
                                ),
                        );
                    }
                }
            }
            served.abort_all();
        });
        (addr.into(), stop)
    }

    fn slots() -> usize {
        CONNECTIONS.with(|all| all.borrow().len())
    }

    #[tokio::test]
    async fn the_slots_of_closed_connections_go_when_a_new_one_is_made() {
        let pool = new_id();
        let (gone, stop_gone) = h2_backend().await;
        let (kept, _keep) = h2_backend().await;
        let first = sender(pool, &gone, WAIT, None, false).await.unwrap();
        let open = sender(pool, &kept, WAIT, None, false).await.unwrap();
        assert_eq!(slots(), 2);
        // The first backend goes: its connection closes.
        drop(stop_gone);
        let closed = tokio::time::timeout(WAIT, async {
            while !first.sender.is_closed() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
        assert!(closed.is_ok(), "the close was seen");
        assert_eq!(slots(), 2, "nothing swept before a new connection");
        let (next, _next) = h2_backend().await;
        let _third = sender(pool, &next, WAIT, None, false).await.unwrap();
        assert_eq!(slots(), 2, "the closed one's slot went, the open ones stay");
        let again = sender(pool, &kept, WAIT, None, false).await.unwrap();
        assert!(
            !again.sender.is_closed() && !open.sender.is_closed(),
            "the open one is reused"
        );
        assert_eq!(slots(), 2);
    }

    #[test]
    fn a_settings_frame_announces_extended_connect_with_8_set_to_1() {
        let settings = |flags: u8, entries: &[(u16, u32)]| {
            let mut frame = vec![0, 0, (entries.len() * 6) as u8, 4, flags, 0, 0, 0, 0];
            for (id, value) in entries {
                frame.extend_from_slice(&id.to_be_bytes());
                frame.extend_from_slice(&value.to_be_bytes());
            }
            frame
        };
        let yes = settings(0, &[(3, 200), (8, 1)]);
        assert!(announces_extended_connect(&yes));
        assert!(!announces_extended_connect(&settings(0, &[(3, 200)])));
        assert!(!announces_extended_connect(&settings(0, &[(8, 0)])));
        assert!(!announces_extended_connect(&settings(0, &[(8, 1), (8, 0)])));
        assert!(
            !announces_extended_connect(&settings(1, &[(8, 1)])),
            "an ACK"
        );
        let mut ping = yes.clone();
        ping[3] = 6;
        assert!(!announces_extended_connect(&ping), "not SETTINGS");
        assert!(!announces_extended_connect(&yes[..5]));
    }

    /// Read whole in pieces of any size, the frame is known at its last byte.
    #[test]
    fn the_first_frame_is_known_whole_whatever_the_reads() {
        let mut frame = vec![
            0, 0, 12, 4, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 100, 0, 8, 0, 0, 0, 1,
        ];
        frame.extend_from_slice(b"the next frame");
        for piece in 1..frame.len() {
            let (announce, told) = watch::channel(None);
            let mut reader = SettingsReader::new(announce);
            for (i, chunk) in frame.chunks(piece).enumerate() {
                assert_eq!(*told.borrow(), None, "{piece}: known after {i} pieces");
                reader.saw(chunk);
                if (i + 1) * piece >= 21 {
                    break;
                }
            }
            assert_eq!(*told.borrow(), Some(true), "{piece}");
            assert!(reader.announce.is_none() && reader.frame.is_empty());
            // What follows is not read.
            reader.saw(b"more");
            assert!(reader.frame.is_empty());
        }
    }

    #[tokio::test]
    async fn a_connection_tells_whether_its_backend_accepts_extended_connect() {
        let pool = new_id();
        for announced in [true, false] {
            let (addr, _stop) = h2_backend_with(announced).await;
            let conn = sender(pool, &addr, WAIT, None, false).await.unwrap();
            // Known from the backend's SETTINGS: no waiting out the bound.
            let told = tokio::time::timeout(WAIT / 2, conn.extended_connect(WAIT)).await;
            assert_eq!(told, Ok(announced));
        }
    }
}
