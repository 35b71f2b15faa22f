//! WebSocket over HTTP/2 through the gateway (RFC 8441 extended CONNECT):
//! an `h2` crate client opens streams with `:protocol websocket`, the
//! proxy makes each an HTTP/1.1 handshake to a tokio-tungstenite backend
//! (the echo servers of websocket.rs), and WebSocket frames flow over the
//! HTTP/2 stream. Every wait bounded, counted on both sides.

use crate::common;
use crate::running;
use crate::websocket::{
    echo, in_flight, open, proxy, spilled_under_the_cap, ws_backend, WsBackend,
};

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};

use base64::Engine as _;
use bytes::{Buf, Bytes};
use common::{eventually, WAIT};
use futures_util::{SinkExt, StreamExt};
use h2::client::SendRequest;
use h2::{RecvStream, SendStream};
use http::{Method, Request, StatusCode};
use http_body_util::Empty;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use loadring_proxy::{BackendProtocol, ClusterConfig, DemoBackend, KeySpec};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::handshake::server::{
    Request as Handshake, Response as HandshakeAnswer,
};
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

/// One HTTP/2 stream as a byte stream, for tungstenite to frame on.
struct H2Io {
    send: SendStream<Bytes>,
    recv: RecvStream,
    /// Received, not read yet.
    pending: Bytes,
}

impl AsyncRead for H2Io {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        while this.pending.is_empty() {
            match ready!(this.recv.poll_data(cx)) {
                Some(Ok(data)) => {
                    let _ = this.recv.flow_control().release_capacity(data.len());
                    this.pending = data;
                }
                Some(Err(e)) => return Poll::Ready(Err(io::Error::other(e))),
                // The stream ended: end of file.
                None => return Poll::Ready(Ok(())),
            }
        }
        let n = buf.remaining().min(this.pending.len());
        buf.put_slice(&this.pending[..n]);
        this.pending.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for H2Io {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        // The test's messages are a few bytes: h2 buffers what the window
        // does not take yet, no capacity to wait for.
        self.send
            .send_data(Bytes::copy_from_slice(data), false)
            .map_err(io::Error::other)?;
        Poll::Ready(Ok(data.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        // END_STREAM; an error means it had ended already.
        let _ = self.send.send_data(Bytes::new(), true);
        Poll::Ready(Ok(()))
    }
}

type Ws = WebSocketStream<H2Io>;

/// An HTTP/2 client on `io`, once the server's SETTINGS have announced
/// extended CONNECT.
async fn h2_client<T>(io: T) -> SendRequest<Bytes>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (client, connection) = tokio::time::timeout(WAIT, h2::client::handshake(io))
        .await
        .expect("in time")
        .expect("the HTTP/2 handshake passes");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    assert!(
        eventually(WAIT, || {
            let client = client.clone();
            async move { client.is_extended_connect_protocol_enabled() }
        })
        .await,
        "the proxy announces SETTINGS_ENABLE_CONNECT_PROTOCOL"
    );
    client
}

async fn h2_cleartext(proxy: SocketAddr) -> SendRequest<Bytes> {
    h2_client(TcpStream::connect(proxy).await.unwrap()).await
}

/// Sends extended CONNECT `:protocol websocket` for `room` on `client`;
/// the answer's head, and the stream when it opened.
async fn connect(
    client: &SendRequest<Bytes>,
    path: &str,
    room: &str,
) -> (http::response::Parts, Option<H2Io>) {
    let mut request = Request::builder()
        .method(Method::CONNECT)
        .uri(format!("http://chat.test{path}"))
        .header("x-room", room)
        .header("sec-websocket-version", "13")
        .header("sec-websocket-protocol", "chat, superchat")
        .header("origin", "http://chat.test")
        .body(())
        .unwrap();
    request
        .extensions_mut()
        .insert(h2::ext::Protocol::from("websocket"));
    let sending = async {
        let mut client = client.clone().ready().await?;
        let (response, send) = client.send_request(request, false)?;
        let response = response.await?;
        Ok::<_, h2::Error>((response, send))
    };
    let (response, send) = tokio::time::timeout(WAIT, sending)
        .await
        .expect("in time")
        .expect("the CONNECT stream is answered");
    let (head, recv) = response.into_parts();
    let io = (head.status == StatusCode::OK).then(|| H2Io {
        send,
        recv,
        pending: Bytes::new(),
    });
    (head, io)
}

/// A WebSocket for `room` over an HTTP/2 stream; the backend that took it.
async fn open_h2(client: &SendRequest<Bytes>, room: &str) -> (Ws, String) {
    let (head, io) = connect(client, "/chat", room).await;
    assert_eq!(head.status, 200, "{head:?}");
    assert!(
        head.headers.get("sec-websocket-accept").is_none(),
        "no accept over HTTP/2 (RFC 8441 5): {head:?}"
    );
    let io = io.unwrap();
    let mut ws = WebSocketStream::from_raw_socket(io, Role::Client, None).await;
    let hello = next(&mut ws).await;
    (ws, hello.into_text().unwrap().to_string())
}

async fn next(ws: &mut Ws) -> Message {
    match tokio::time::timeout(WAIT, ws.next())
        .await
        .expect("in time")
    {
        Some(Ok(message)) => message,
        other => panic!("expected a message, got {other:?}"),
    }
}

async fn echoes(ws: &mut Ws, i: usize) {
    ws.send(Message::text(format!("ping-{i}"))).await.unwrap();
    assert_eq!(next(ws).await, Message::text(format!("ping-{i}")));
    let binary = Bytes::from(vec![0, 1, 2, 0xff, i as u8]);
    ws.send(Message::binary(binary.clone())).await.unwrap();
    assert_eq!(next(ws).await, Message::binary(binary));
}

/// Each tunnel asks its echo backend to close (it says "bye"); every slot
/// is released and no backend holds a tunnel any more.
async fn the_backends_close(tunnels: &mut [Ws], admin: SocketAddr, backends: &[WsBackend]) {
    for ws in tunnels.iter_mut() {
        ws.send(Message::text("bye")).await.unwrap();
    }
    assert!(
        eventually(WAIT, || async { in_flight(admin).await == 0.0 }).await,
        "closed by the backend: released"
    );
    assert!(eventually(WAIT, || async { open_at(backends) == 0 }).await);
}

fn open_at(backends: &[WsBackend]) -> u64 {
    backends.iter().map(|b| b.open.load(Relaxed)).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_tunnels_echo_reach_the_owner_and_hold_their_slot_until_either_side_closes() {
    let backends = [ws_backend().await, ws_backend().await, ws_backend().await];
    let running = proxy("c_murmurhash", &[&backends[0], &backends[1], &backends[2]]).await;
    let client = h2_cleartext(running.addr).await;
    // Five tunnels, streams of one HTTP/2 connection, each placed on its
    // own key: on the backend an HTTP/1.1 upgrade for the room gets.
    let mut tunnels = Vec::new();
    for i in 0..5 {
        let room = format!("room-{i}");
        let (mut over_h1, owner) = open(running.addr, &room).await;
        over_h1.close(None).await.unwrap();
        let (mut ws, backend) = open_h2(&client, &room).await;
        assert_eq!(backend, owner, "{room}: the key's owner over HTTP/2 too");
        echoes(&mut ws, i).await;
        tunnels.push(ws);
    }
    assert!(eventually(WAIT, || async { open_at(&backends) == 5 }).await);
    assert_eq!(
        in_flight(running.admin).await,
        5.0,
        "open HTTP/2 tunnels are in flight"
    );

    // The client resets one stream...
    let mut reset = tunnels.remove(0);
    reset.get_mut().send.send_reset(h2::Reason::CANCEL);
    assert!(
        eventually(WAIT, || async { in_flight(running.admin).await == 4.0 }).await,
        "reset by the client: released"
    );
    // ...ends another (END_STREAM, no close frame)...
    let mut ended = tunnels.remove(0);
    ended.get_mut().send.send_data(Bytes::new(), true).unwrap();
    assert!(
        eventually(WAIT, || async { in_flight(running.admin).await == 3.0 }).await,
        "ended by the client: released"
    );
    // ...closes a third as WebSocket does.
    tunnels.remove(0).close(None).await.unwrap();
    assert!(
        eventually(WAIT, || async { in_flight(running.admin).await == 2.0 }).await,
        "closed by the client: released"
    );
    // The backend closes the others.
    the_backends_close(&mut tunnels, running.admin, &backends).await;
    drop((reset, ended));
}

/// A WebSocket over HTTP/2 is a stream that stays open, and its
/// connection is not idle while it does: it is not told to go away
/// (`GOAWAY`) however long it opens no other stream, and a new stream on it
/// is served. Once the tunnel closes, the connection is idle and goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_h2_tunnel_keeps_its_connection_until_it_closes() {
    let backend = ws_backend().await;
    let mut cluster = ClusterConfig::new("default", "c_murmurhash".parse().unwrap());
    cluster.endpoints = vec![backend.addr.to_string().parse().unwrap()];
    cluster.key = KeySpec::parse(&["header:x-room"]).unwrap();
    let header_timeout = std::time::Duration::from_millis(200);
    let clients = loadring_proxy::ClientLimits {
        header_timeout,
        ..Default::default()
    };
    let running = running::serve(running::config(vec![cluster], vec![], clients), 1).await;
    let client = h2_cleartext(running.addr).await;
    let (mut ws, _) = open_h2(&client, "room-idle").await;
    echoes(&mut ws, 0).await;
    // Three periods with no new stream: an idle connection would have been
    // told to go away after two. (A wait for something that must not
    // happen: a slow machine can only make it pass, never fail.)
    tokio::time::sleep(header_timeout * 3).await;
    echoes(&mut ws, 1).await;
    let (mut second, _) = open_h2(&client, "room-idle-2").await;
    echoes(&mut second, 2).await;
    the_backends_close(&mut [ws, second], running.admin, &[backend]).await;
    // Nothing open now: told to go away (the client sees it without
    // opening a stream).
    let went_away = eventually(WAIT, || {
        let client = client.clone();
        async move { client.ready().await.is_err() }
    })
    .await;
    assert!(
        went_away,
        "GOAWAY after {header_timeout:?} without a stream open"
    );
}

/// A backend that switches every handshake and then sends without end;
/// it counts the tunnels the proxy closed under it.
async fn flooding_ws_backend() -> (SocketAddr, Arc<AtomicU64>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let closed = Arc::new(AtomicU64::new(0));
    let counted = closed.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let closed = counted.clone();
            tokio::spawn(async move {
                use tokio::io::AsyncWriteExt;
                if !common::read_head(&mut stream).await {
                    return;
                }
                // The proxy looks at the status alone.
                let switched = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\
                                Connection: Upgrade\r\n\r\n";
                if stream.write_all(switched.as_bytes()).await.is_err() {
                    return;
                }
                let piece = vec![0u8; 64 * 1024];
                while stream.write_all(&piece).await.is_ok() {}
                closed.fetch_add(1, Relaxed);
            });
        }
    });
    (addr, closed)
}

/// An HTTP/2 client that opens a WebSocket and takes nothing of it (its
/// stream's window stays shut while its socket is read): once nothing
/// could be sent to it for the send timeout, the tunnel is closed and its
/// slot released, where it was held as long as the client liked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_h2_tunnel_whose_client_takes_nothing_is_closed_at_the_send_timeout() {
    let (backend, closed) = flooding_ws_backend().await;
    let mut cluster = ClusterConfig::new("default", "rr".parse().unwrap());
    cluster.endpoints = vec![backend.to_string().parse().unwrap()];
    let clients = loadring_proxy::ClientLimits {
        send_timeout: std::time::Duration::from_millis(300),
        ..Default::default()
    };
    let running = running::serve(running::config(vec![cluster], vec![], clients), 1).await;
    let client = h2_cleartext(running.addr).await;
    let (head, tunnel) = connect(&client, "/feed", "room-feed").await;
    assert_eq!(head.status, 200, "{head:?}");
    assert!(
        eventually(WAIT, || async { closed.load(Relaxed) == 1 }).await,
        "the backend's side of the tunnel is still open"
    );
    assert!(
        eventually(WAIT, || async { in_flight(running.admin).await == 0.0 }).await,
        "the tunnel's slot is still held"
    );
    drop(tunnel);
}

/// Keyed by method and target, a room is placed alike over HTTP/1.1 (a
/// `GET`) and HTTP/2 (a `CONNECT`, keyed as the `GET` it becomes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_room_keyed_by_method_and_target_has_one_owner_either_way() {
    let backends = [ws_backend().await, ws_backend().await, ws_backend().await];
    let mut cluster = ClusterConfig::new("default", "c_murmurhash".parse().unwrap());
    cluster.endpoints = backends
        .iter()
        .map(|b| b.addr.to_string().parse().unwrap())
        .collect();
    cluster.key = KeySpec::parse(&["method-uri"]).unwrap();
    let running = running::start(cluster).await;
    let client = h2_cleartext(running.addr).await;
    let mut owners = std::collections::HashSet::new();
    for i in 0..6 {
        let path = format!("/room-{i}?v=1");
        let (mut over_h1, _) = tokio::time::timeout(
            WAIT,
            tokio_tungstenite::connect_async(format!("ws://{}{path}", running.addr)),
        )
        .await
        .expect("in time")
        .expect("the upgrade passes");
        let Some(Ok(Message::Text(owner))) = over_h1.next().await else {
            panic!("{path}: no hello over HTTP/1.1");
        };
        let (head, io) = connect(&client, &path, "").await;
        assert_eq!(head.status, 200, "{head:?}");
        let mut ws = WebSocketStream::from_raw_socket(io.unwrap(), Role::Client, None).await;
        let over_h2 = next(&mut ws).await.into_text().unwrap();
        assert_eq!(over_h2, owner, "{path}");
        owners.insert(owner.to_string());
    }
    assert!(owners.len() > 1, "the rooms are spread: {owners:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_room_over_h2_spills_once_its_owner_holds_its_cap() {
    let backends = [ws_backend().await, ws_backend().await, ws_backend().await];
    let running = proxy(
        "c_murmurhash_bl:load_factor=1.25",
        &[&backends[0], &backends[1], &backends[2]],
    )
    .await;
    let client = h2_cleartext(running.addr).await;
    let tunnels = 12;
    let mut held = Vec::new();
    let mut per_backend = std::collections::HashMap::<String, usize>::new();
    for _ in 0..tunnels {
        let (ws, backend) = open_h2(&client, "the-hot-room").await;
        *per_backend.entry(backend).or_default() += 1;
        held.push(ws);
    }
    spilled_under_the_cap(&per_backend, tunnels, 3);
    assert_eq!(in_flight(running.admin).await, f64::from(tunnels));
    // The whole connection goes: every stream with it.
    drop((held, client));
    assert!(eventually(WAIT, || async { in_flight(running.admin).await == 0.0 }).await);
}

/// A WebSocket backend that keeps the head of every handshake it takes,
/// picks the subprotocol `chat`, and then only holds the connection.
async fn recording_backend() -> (SocketAddr, Arc<Mutex<Vec<http::request::Parts>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let kept = heads.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let kept = kept.clone();
            tokio::spawn(async move {
                // Its error type is tungstenite's, as its callback takes it.
                #[allow(clippy::result_large_err)]
                let keep = |request: &Handshake, mut response: HandshakeAnswer| {
                    let mut copy = http::Request::new(());
                    *copy.method_mut() = request.method().clone();
                    *copy.uri_mut() = request.uri().clone();
                    *copy.headers_mut() = request.headers().clone();
                    kept.lock().unwrap().push(copy.into_parts().0);
                    response
                        .headers_mut()
                        .insert("sec-websocket-protocol", "chat".parse().unwrap());
                    Ok(response)
                };
                if let Ok(mut ws) = tokio_tungstenite::accept_hdr_async(tcp, keep).await {
                    while let Some(Ok(_)) = ws.next().await {}
                }
            });
        }
    });
    (addr, heads)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_backend_gets_a_websocket_handshake_and_its_answer_comes_back() {
    let (backend, heads) = recording_backend().await;
    let mut cluster = ClusterConfig::new("default", "rr".parse().unwrap());
    cluster.endpoints = vec![backend.to_string().parse().unwrap()];
    let running = running::start(cluster).await;
    let client = h2_cleartext(running.addr).await;
    let (mut keys, mut held) = (Vec::new(), Vec::new());
    for _ in 0..2 {
        let (head, io) = connect(&client, "/chat?x=1", "r").await;
        assert_eq!(head.status, 200, "{head:?}");
        held.push(io.expect("a tunnel"));
        assert_eq!(head.headers["sec-websocket-protocol"], "chat");
        assert!(head.headers.get("sec-websocket-accept").is_none());
        let seen = heads
            .lock()
            .unwrap()
            .pop()
            .expect("the backend got the handshake");
        assert_eq!(seen.method, Method::GET);
        assert_eq!(seen.uri, "/chat?x=1");
        let header = |name: &str| seen.headers[name].to_str().unwrap().to_string();
        assert_eq!(header("connection").to_ascii_lowercase(), "upgrade");
        assert_eq!(header("upgrade").to_ascii_lowercase(), "websocket");
        assert_eq!(header("sec-websocket-version"), "13");
        assert_eq!(header("sec-websocket-protocol"), "chat, superchat");
        assert_eq!(header("origin"), "http://chat.test");
        assert_eq!(header("host"), "chat.test");
        assert_eq!(header("x-forwarded-for"), "127.0.0.1");
        let key = header("sec-websocket-key");
        let nonce = base64::engine::general_purpose::STANDARD
            .decode(&key)
            .unwrap_or_else(|e| panic!("{key}: {e}"));
        assert_eq!(nonce.len(), 16, "{key}");
        keys.push(key);
    }
    assert_ne!(keys[0], keys[1], "a fresh key per handshake");
    assert_eq!(in_flight(running.admin).await, 2.0);
    // Dropped, each stream is reset.
    drop(held);
    assert!(eventually(WAIT, || async { in_flight(running.admin).await == 0.0 }).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_that_does_not_switch_is_answered_as_it_answered_or_502() {
    // DemoBackend answers `?status=CODE` with that status, else 200: it
    // never switches.
    let demo = DemoBackend::start("127.0.0.1:0").await.unwrap();
    let mut cluster = ClusterConfig::new("default", "rr".parse().unwrap());
    cluster.endpoints = vec![demo.addr().to_string().parse().unwrap()];
    let running = running::start(cluster).await;
    let client = h2_cleartext(running.addr).await;

    // Refused by the backend: its answer as it gave it.
    let (head, io) = connect(&client, "/chat?status=403", "r").await;
    assert_eq!(head.status, 403);
    assert!(io.is_none());
    assert_eq!(head.headers["x-echo-method"], "GET");
    assert_eq!(head.headers["x-echo-hop"], "connection,upgrade");
    // Answered 200 without switching: over HTTP/2 that would open a tunnel
    // to nothing.
    let (head, io) = connect(&client, "/chat", "r").await;
    assert_eq!(head.status, 502, "{head:?}");
    assert!(io.is_none());
    let failed = format!(
        "loadring_requests_total{{endpoint=\"{}\",code=\"502\"}}",
        demo.addr()
    );
    assert_eq!(common::metric(&running.metrics().await, &failed), Some(1.0));
    assert!(eventually(WAIT, || async { in_flight(running.admin).await == 0.0 }).await);

    // CONNECT without `:protocol`, or with another one: no tunnel.
    for protocol in [None, Some("connect-udp")] {
        let mut request = Request::builder()
            .method(Method::CONNECT)
            .uri("chat.test:443")
            .body(())
            .unwrap();
        if let Some(p) = protocol {
            *request.uri_mut() = "http://chat.test/chat".parse().unwrap();
            request.extensions_mut().insert(h2::ext::Protocol::from(p));
        }
        let mut sender = client.clone().ready().await.unwrap();
        let (response, _send) = sender.send_request(request, false).unwrap();
        let response = tokio::time::timeout(WAIT, response).await.unwrap().unwrap();
        assert_eq!(response.status(), 501, "{protocol:?}");
    }
    assert_eq!(demo.requests(), 2, "only the two handshakes reached it");
}

/// An HTTP/2 WebSocket backend (RFC 8441 server side, hyper): a stream
/// CONNECT with `:protocol websocket` is answered 200 (subprotocol `chat`)
/// and echoed on as the HTTP/1.1 echo servers do; anything else is a 404.
/// With `announce` false it does not enable extended CONNECT.
async fn h2c_ws_backend(announce: bool) -> WsBackend {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let open = Arc::new(AtomicU64::new(0));
    let counted = open.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let open = counted.clone();
            let service = service_fn(move |mut request: Request<hyper::body::Incoming>| {
                let open = open.clone();
                async move {
                    let websocket = request.method() == Method::CONNECT
                        && request
                            .extensions()
                            .get::<hyper::ext::Protocol>()
                            .is_some_and(|p| p.as_ref() == b"websocket");
                    let mut response = http::Response::new(Empty::<Bytes>::new());
                    if !websocket {
                        *response.status_mut() = StatusCode::NOT_FOUND;
                        return Ok::<_, Infallible>(response);
                    }
                    let upgrade = hyper::upgrade::on(&mut request);
                    tokio::spawn(async move {
                        if let Ok(upgraded) = upgrade.await {
                            let io = TokioIo::new(upgraded);
                            let ws = WebSocketStream::from_raw_socket(io, Role::Server, None).await;
                            echo(ws, addr, &open).await;
                        }
                    });
                    response
                        .headers_mut()
                        .insert("sec-websocket-protocol", "chat".parse().unwrap());
                    Ok(response)
                }
            });
            let mut http = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
            if announce {
                http.enable_connect_protocol();
            }
            let connection = http.serve_connection(TokioIo::new(tcp), service);
            tokio::spawn(connection);
        }
    });
    WsBackend { addr, open }
}

async fn h2c_proxy(backends: &[&WsBackend]) -> running::Running {
    let mut cluster = ClusterConfig::new("default", "c_murmurhash".parse().unwrap());
    cluster.endpoints = backends
        .iter()
        .map(|b| b.addr.to_string().parse().unwrap())
        .collect();
    cluster.key = KeySpec::parse(&["header:x-room"]).unwrap();
    cluster.backend_protocol = BackendProtocol::H2c;
    running::start(cluster).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_tunnels_reach_an_h2c_cluster_by_extended_connect() {
    let backends = [h2c_ws_backend(true).await, h2c_ws_backend(true).await];
    let running = h2c_proxy(&[&backends[0], &backends[1]]).await;
    let client = h2_cleartext(running.addr).await;
    let mut tunnels = Vec::new();
    let mut owners = Vec::new();
    for i in 0..4 {
        let (head, io) = connect(&client, "/chat", &format!("room-{i}")).await;
        assert_eq!(head.status, 200, "{head:?}");
        assert_eq!(head.headers["sec-websocket-protocol"], "chat");
        let mut ws = WebSocketStream::from_raw_socket(io.unwrap(), Role::Client, None).await;
        let owner = next(&mut ws).await.into_text().unwrap().to_string();
        echoes(&mut ws, i).await;
        tunnels.push(ws);
        owners.push(owner);
    }
    // A room's tunnels stay on its owner.
    for (i, owner) in owners.iter().enumerate() {
        let (mut ws, again) = open_h2(&client, &format!("room-{i}")).await;
        assert_eq!(&again, owner, "room-{i}");
        ws.close(None).await.unwrap();
    }
    assert!(eventually(WAIT, || async { in_flight(running.admin).await == 4.0 }).await);
    assert_eq!(open_at(&backends), 4);
    // The client resets one, the backend closes the others.
    tunnels
        .remove(0)
        .get_mut()
        .send
        .send_reset(h2::Reason::CANCEL);
    assert!(
        eventually(WAIT, || async { in_flight(running.admin).await == 3.0 }).await,
        "reset by the client: released"
    );
    the_backends_close(&mut tunnels, running.admin, &backends).await;
}

/// An HTTP/1.1 client's WebSocket handshake reaches an h2c cluster as
/// extended CONNECT; the proxy answers the client's key itself (the
/// tungstenite client checks `Sec-WebSocket-Accept`), and the tunnel holds
/// its slot until it closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http1_upgrades_reach_an_h2c_cluster_by_extended_connect() {
    let backends = [h2c_ws_backend(true).await, h2c_ws_backend(true).await];
    let running = h2c_proxy(&[&backends[0], &backends[1]]).await;
    let h2 = h2_cleartext(running.addr).await;
    let mut tunnels = Vec::new();
    for i in 0..4 {
        let room = format!("room-{i}");
        // The test's HTTP/2 backend always chooses subprotocol `chat`: the
        // client offers it (tungstenite refuses one it did not offer).
        let mut request = format!("ws://{}/chat", running.addr)
            .into_client_request()
            .unwrap();
        request
            .headers_mut()
            .insert("x-room", room.parse().unwrap());
        request
            .headers_mut()
            .insert("sec-websocket-protocol", "chat".parse().unwrap());
        let (mut ws, answer) =
            tokio::time::timeout(WAIT, tokio_tungstenite::connect_async(request))
                .await
                .expect("in time")
                .expect("the upgrade passes, Sec-WebSocket-Accept checked");
        assert_eq!(answer.status(), 101);
        assert_eq!(answer.headers()["sec-websocket-protocol"], "chat");
        let owner = match tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("in time")
        {
            Some(Ok(Message::Text(t))) => t.to_string(),
            other => panic!("expected the backend's address, got {other:?}"),
        };
        // The same room over HTTP/2 has the same owner.
        let (mut again, owner_h2) = open_h2(&h2, &room).await;
        assert_eq!(owner, owner_h2, "{room}");
        again.close(None).await.unwrap();
        ws.send(Message::text(format!("ping-{i}"))).await.unwrap();
        match tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("in time")
        {
            Some(Ok(Message::Text(t))) => assert_eq!(t.as_str(), format!("ping-{i}")),
            other => panic!("expected the echo, got {other:?}"),
        }
        tunnels.push(ws);
    }
    assert!(eventually(WAIT, || async { in_flight(running.admin).await == 4.0 }).await);
    assert!(eventually(WAIT, || async { open_at(&backends) == 4 }).await);
    for mut ws in tunnels {
        ws.close(None).await.unwrap();
    }
    assert!(
        eventually(WAIT, || async { in_flight(running.admin).await == 0.0 }).await,
        "closed by the clients: released"
    );
    assert!(eventually(WAIT, || async { open_at(&backends) == 0 }).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_h2c_backend_without_extended_connect_or_another_upgrade_to_h2c_is_a_501() {
    let backend = h2c_ws_backend(false).await;
    let running = h2c_proxy(&[&backend]).await;
    let client = h2_cleartext(running.addr).await;
    let (head, io) = connect(&client, "/chat", "r").await;
    assert_eq!(head.status, 501, "{head:?}");
    assert!(io.is_none());
    // An HTTP/1.1 WebSocket handshake: the same backend cannot take it.
    let websocket = [
        ("connection", "upgrade"),
        ("upgrade", "websocket"),
        ("sec-websocket-version", "13"),
        ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
    ];
    let reply = common::get(running.addr, "/chat", &websocket).await;
    assert_eq!(reply.status, 501);
    assert!(reply.body.contains("extended CONNECT"), "{reply:?}");
    // Another protocol, or a WebSocket without its key, cannot be
    // translated to HTTP/2 at all.
    for upgrade in [
        &[("connection", "upgrade"), ("upgrade", "foo/1")][..],
        &websocket[..3],
    ] {
        let reply = common::get(running.addr, "/chat", upgrade).await;
        assert_eq!(reply.status, 501, "{upgrade:?}");
        assert!(
            reply.body.contains("must be a WebSocket handshake"),
            "{upgrade:?}: {reply:?}"
        );
    }
    assert_eq!(backend.open.load(Relaxed), 0);
    assert_eq!(in_flight(running.admin).await, 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_tls_alpn_h2() {
    let pki = crate::tls::Pki::new();
    let (files, _) = pki.leaf("gateway");
    let backend = ws_backend().await;
    let mut cluster = ClusterConfig::new("default", "rr".parse().unwrap());
    cluster.endpoints = vec![backend.addr.to_string().parse().unwrap()];
    let mut config = running::config(vec![cluster], vec![], Default::default());
    config.tls = Some(files);
    let running = running::serve(config, 1).await;
    let tcp = TcpStream::connect(running.addr).await.unwrap();
    let name = tokio_rustls::rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let tls = tokio::time::timeout(WAIT, pki.client(b"h2").connect(name, tcp))
        .await
        .expect("in time")
        .expect("the TLS handshake passes");
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let client = h2_client(tls).await;
    let (mut ws, hello) = open_h2(&client, "room").await;
    assert_eq!(hello, backend.addr.to_string());
    echoes(&mut ws, 0).await;
    assert_eq!(in_flight(running.admin).await, 1.0);
    ws.close(None).await.unwrap();
    assert!(eventually(WAIT, || async { in_flight(running.admin).await == 0.0 }).await);
}
