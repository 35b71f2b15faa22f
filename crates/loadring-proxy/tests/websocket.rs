//! WebSocket through the gateway: tokio-tungstenite backends and clients,
//! the proxy in between; every wait bounded, counted on both sides.

use crate::common;
use crate::running::{self, Running};

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use common::{eventually, get, metric, metric_sum, WAIT};
use futures_util::{SinkExt, StreamExt};
use loadring_proxy::{ClusterConfig, KeySpec};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// An echo server: says its address first, echoes every text and binary
/// message, closes on `bye`; counts its open connections.
pub(crate) struct WsBackend {
    pub(crate) addr: SocketAddr,
    pub(crate) open: Arc<AtomicU64>,
}

pub(crate) async fn ws_backend() -> WsBackend {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let open = Arc::new(AtomicU64::new(0));
    let counted = open.clone();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let open = counted.clone();
            tokio::spawn(async move {
                if let Ok(ws) = tokio_tungstenite::accept_async(tcp).await {
                    echo(ws, addr, &open).await;
                }
            });
        }
    });
    WsBackend { addr, open }
}

/// A backend's side of one WebSocket: says `addr`, echoes every text and
/// binary message, closes on `bye`; counted in `open` while it lasts.
pub(crate) async fn echo<S>(mut ws: WebSocketStream<S>, addr: SocketAddr, open: &AtomicU64)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    open.fetch_add(1, Relaxed);
    if ws.send(Message::text(addr.to_string())).await.is_ok() {
        while let Some(Ok(message)) = ws.next().await {
            let echo = match message {
                Message::Text(t) if t.as_str() == "bye" => {
                    let _ = ws.close(None).await;
                    break;
                }
                Message::Text(t) => Message::Text(t),
                Message::Binary(b) => Message::Binary(b),
                Message::Close(_) => break,
                _ => continue,
            };
            if ws.send(echo).await.is_err() {
                break;
            }
        }
    }
    open.fetch_sub(1, Relaxed);
}

pub(crate) async fn proxy(policy: &str, backends: &[&WsBackend]) -> Running {
    let mut cluster = ClusterConfig::new("default", policy.parse().unwrap());
    cluster.endpoints = backends
        .iter()
        .map(|b| b.addr.to_string().parse().unwrap())
        .collect();
    cluster.key = KeySpec::parse(&["header:x-room"]).unwrap();
    running::serve(
        running::config(vec![cluster], vec![], Default::default()),
        1,
    )
    .await
}

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A tunnel for `room`; the backend that took it.
pub(crate) async fn open(proxy: SocketAddr, room: &str) -> (Ws, String) {
    let mut request = format!("ws://{proxy}/chat").into_client_request().unwrap();
    request
        .headers_mut()
        .insert("x-room", room.parse().unwrap());
    let (mut ws, response) = tokio::time::timeout(WAIT, tokio_tungstenite::connect_async(request))
        .await
        .expect("in time")
        .expect("the upgrade passes");
    assert_eq!(response.status(), 101);
    let hello = next_text(&mut ws).await;
    (ws, hello)
}

async fn next_text(ws: &mut Ws) -> String {
    match tokio::time::timeout(WAIT, ws.next())
        .await
        .expect("in time")
    {
        Some(Ok(Message::Text(t))) => t.to_string(),
        other => panic!("expected a text message, got {other:?}"),
    }
}

/// Bounded loads at `load_factor=1.25`: no endpoint holds more than
/// ceil(c * m / n) of the `tunnels` (m) open at once over `endpoints` (n),
/// and the hot room spilled to more than one. The owner's count.
pub(crate) fn spilled_under_the_cap(
    per_backend: &std::collections::HashMap<String, usize>,
    tunnels: u32,
    endpoints: u32,
) -> usize {
    let owner = per_backend.values().copied().max().unwrap();
    let cap = (1.25 * f64::from(tunnels) / f64::from(endpoints)).ceil() as usize;
    assert!(
        owner <= cap,
        "owner holds {owner} > cap {cap}: {per_backend:?}"
    );
    assert!(per_backend.len() > 1, "the room spilled: {per_backend:?}");
    owner
}

pub(crate) async fn in_flight(admin: SocketAddr) -> f64 {
    metric_sum(
        &get(admin, "/metrics", &[]).await.body,
        "loadring_in_flight",
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tunnels_echo_and_hold_their_slot_until_either_side_closes() {
    let backends = [ws_backend().await, ws_backend().await, ws_backend().await];
    let running = proxy("c_murmurhash", &[&backends[0], &backends[1], &backends[2]]).await;
    let mut tunnels = Vec::new();
    for i in 0..6 {
        let (mut ws, backend) = open(running.addr, &format!("room-{i}")).await;
        ws.send(Message::text(format!("ping-{i}"))).await.unwrap();
        assert_eq!(next_text(&mut ws).await, format!("ping-{i}"));
        tunnels.push((ws, backend));
    }
    let open_at_backends = || backends.iter().map(|b| b.open.load(Relaxed)).sum::<u64>();
    assert_eq!(open_at_backends(), 6);
    assert_eq!(
        in_flight(running.admin).await,
        6.0,
        "open tunnels are in flight"
    );

    // The client closes three.
    for (mut ws, _) in tunnels.drain(..3) {
        ws.close(None).await.unwrap();
    }
    assert!(
        eventually(WAIT, || async { in_flight(running.admin).await == 3.0 }).await,
        "closed by the client: released"
    );
    // The backend closes the others.
    for (ws, _) in &mut tunnels {
        ws.send(Message::text("bye")).await.unwrap();
    }
    assert!(
        eventually(WAIT, || async { in_flight(running.admin).await == 0.0 }).await,
        "closed by the backend: released"
    );
    assert!(eventually(WAIT, || async { open_at_backends() == 0 }).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_room_spills_once_its_owner_holds_its_cap() {
    let backends = [ws_backend().await, ws_backend().await, ws_backend().await];
    let running = proxy(
        "c_murmurhash_bl:load_factor=1.25",
        &[&backends[0], &backends[1], &backends[2]],
    )
    .await;
    let tunnels = 12;
    let mut held = Vec::new();
    let mut per_backend = std::collections::HashMap::<String, usize>::new();
    for _ in 0..tunnels {
        let (ws, backend) = open(running.addr, "the-hot-room").await;
        *per_backend.entry(backend).or_default() += 1;
        held.push(ws);
    }
    let owner = spilled_under_the_cap(&per_backend, tunnels, 3);
    let metrics = get(running.admin, "/metrics", &[]).await.body;
    let spilled = metric(&metrics, "loadring_spilled_total").unwrap_or(0.0);
    assert_eq!(
        spilled,
        (tunnels as usize - owner) as f64,
        "every tunnel off the owner was a spill"
    );
    assert_eq!(in_flight(running.admin).await, f64::from(tunnels));
    drop(held);
    assert!(eventually(WAIT, || async { in_flight(running.admin).await == 0.0 }).await);
}

/// A tunnel that carries nothing either way for the tunnel timeout is
/// closed, both sides, and its slot released; one that carries a message
/// now and then, each within the timeout, stays open. Before, a quiet
/// tunnel held its client's connection, its backend's and its slot for
/// ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_tunnel_is_closed_at_the_tunnel_timeout() {
    let backend = ws_backend().await;
    let mut cluster = ClusterConfig::new("default", "rr".parse().unwrap());
    cluster.endpoints = vec![backend.addr.to_string().parse().unwrap()];
    let tunnel_timeout = std::time::Duration::from_secs(1);
    let clients = loadring_proxy::ClientLimits {
        tunnel_timeout,
        ..Default::default()
    };
    let running = running::serve(running::config(vec![cluster], vec![], clients), 1).await;
    let (mut talking, _) = open(running.addr, "room-talking").await;
    let (mut quiet, _) = open(running.addr, "room-quiet").await;
    assert_eq!(in_flight(running.admin).await, 2.0);
    // The talking one sends a message every tenth of the timeout until the
    // quiet one is closed.
    let mut pace = tokio::time::interval(tunnel_timeout / 10);
    let mut sent = 0;
    let mut closing = std::pin::pin!(tokio::time::timeout(WAIT, quiet.next()));
    let closed = loop {
        tokio::select! {
            _ = pace.tick() => {
                talking.send(Message::text(format!("ping-{sent}"))).await.unwrap();
                assert_eq!(next_text(&mut talking).await, format!("ping-{sent}"));
                sent += 1;
            }
            message = &mut closing => break message,
        }
    };
    match closed.expect("the quiet tunnel is still open") {
        None | Some(Ok(Message::Close(_)) | Err(_)) => {}
        Some(Ok(other)) => panic!("a message on the quiet tunnel: {other:?}"),
    }
    assert!(
        eventually(WAIT, || async { in_flight(running.admin).await == 1.0 }).await,
        "the quiet tunnel's slot is still held"
    );
    assert!(eventually(WAIT, || async { backend.open.load(Relaxed) == 1 }).await);
    // Opened before the quiet one, the talking one would have been closed
    // first without its messages.
    talking.send(Message::text("still")).await.unwrap();
    assert_eq!(next_text(&mut talking).await, "still");
}
