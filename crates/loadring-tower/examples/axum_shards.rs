//! An axum gateway that shards requests by user id over three backend
//! services with bounded load.
//!
//! Three backend servers and the gateway listen on 127.0.0.1 (ports chosen
//! by the system); the gateway's `/users/{id}` route is a `LoadRing` over one
//! hyper-util client: `c_murmurhash_bl`, so each user's requests go to the
//! same backend (its cache stays warm) until that backend holds 1.25x the
//! mean load, when the overflow walks on to the next backend on the ring.
//! The example then sends 600 requests through the gateway, one user "hot"
//! (a third of them), prints where they went, and exits.
//!
//! ```sh
//! cargo run -p loadring-tower --example axum_shards
//! ```

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{Request, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use loadring::Endpoint;
use loadring_tower::{LoadRing, LoadRingLayer, OnBodyEnd, SetAuthority};
use tokio::net::TcpListener;
use tower::{Layer, ServiceExt};

/// What a backend counts: requests served, in flight now, the most at once.
#[derive(Default)]
struct Counters {
    served: AtomicUsize,
    now: AtomicUsize,
    peak: AtomicUsize,
    /// Requests of the hot user, 42.
    hot: AtomicUsize,
}

/// One backend: `/users/{id}` answers after 5 ms with its own name.
async fn backend(name: &'static str) -> (SocketAddr, Arc<Counters>) {
    let counters = Arc::new(Counters::default());
    let app = Router::new()
        .route(
            "/users/{id}",
            get(
                move |State(c): State<Arc<Counters>>, Path(id): Path<String>| async move {
                    let now = c.now.fetch_add(1, SeqCst) + 1;
                    c.peak.fetch_max(now, SeqCst);
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    c.now.fetch_sub(1, SeqCst);
                    c.served.fetch_add(1, SeqCst);
                    if id == "42" {
                        c.hot.fetch_add(1, SeqCst);
                    }
                    format!("{name}: profile of user {id}")
                },
            ),
        )
        .with_state(counters.clone());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (addr, counters)
}

/// The shard key: the user id in `/users/{id}`; other paths have none (and
/// are spread over the backends).
fn user_id(req: &Request<Body>) -> Option<String> {
    let id = req.uri().path().strip_prefix("/users/")?;
    Some(id.to_string())
}

/// The gateway's service: a `LoadRing` over the client bound to each backend.
type Shards = LoadRing<
    SetAuthority<Client<HttpConnector, Body>>,
    fn(&Request<Body>) -> Option<String>,
    OnBodyEnd,
>;

/// Forwards the request to the user's shard (a clone of the service shares
/// its balancer: loads and caps are common to all requests).
async fn shard(State(shards): State<Shards>, req: Request<Body>) -> Response {
    match shards.oneshot(req).await {
        Ok(response) => response.into_response(),
        Err(e) => (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let mut backends = Vec::new();
    for name in ["shard-1", "shard-2", "shard-3"] {
        backends.push((name, backend(name).await));
    }
    let endpoints: Vec<Endpoint> = backends
        .iter()
        .map(|(_, (addr, _))| Endpoint::new(addr.to_string()))
        .collect::<Result<_, _>>()?;

    // One pooled client; the layer binds a clone of it to each backend.
    let client = Client::builder(TokioExecutor::new()).build_http::<Body>();
    let layer = LoadRingLayer::new(
        "c_murmurhash_bl:load_factor=1.25".parse()?,
        endpoints,
        user_id as fn(&_) -> _,
    )?;
    // The slot is held until each response body has been forwarded.
    let ring = layer.layer(client).hold_until_body_end();
    let balancer = ring.clone();
    let gateway = Router::new()
        .route("/users/{id}", get(shard))
        .with_state(ring);
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let gateway_addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, gateway).await.unwrap() });

    // Traffic: 30 concurrent clients, 600 requests; user 42 is a third of it.
    let http = Client::builder(TokioExecutor::new()).build_http::<Body>();
    let tasks: Vec<_> = (0..30)
        .map(|c| {
            let http = http.clone();
            tokio::spawn(async move {
                let mut last = String::new();
                for i in 0..20 {
                    let user = if i % 3 == 0 { 42 } else { (c * 20 + i) % 100 };
                    let uri = format!("http://{gateway_addr}/users/{user}");
                    let response: Response<_> = http.get(uri.parse().unwrap()).await.unwrap();
                    assert_eq!(response.status(), StatusCode::OK);
                    let body = axum::body::to_bytes(Body::new(response.into_body()), 1 << 16);
                    last = String::from_utf8(body.await.unwrap().to_vec()).unwrap();
                }
                last
            })
        })
        .collect();
    for t in tasks {
        t.await?;
    }

    let owner = balancer
        .balancer()
        .route(&loadring::Request::key("42"))?
        .expect("a hashing policy");
    println!("gateway http://{gateway_addr}/users/{{id}}: c_murmurhash_bl:load_factor=1.25 over 3 backends");
    println!(
        "user 42 (a third of the traffic) belongs to {}",
        owner.addr()
    );
    println!(
        "{:<8} {:<16} {:>7} {:>8} {:>15}",
        "backend", "address", "served", "user 42", "peak in flight"
    );
    for (name, (addr, c)) in &backends {
        println!(
            "{name:<8} {addr:<16} {:>7} {:>8} {:>15}",
            c.served.load(SeqCst),
            c.hot.load(SeqCst),
            c.peak.load(SeqCst)
        );
    }
    let served: usize = backends
        .iter()
        .map(|(_, (_, c))| c.served.load(SeqCst))
        .sum();
    assert_eq!(served, 600, "every request served once");
    assert_eq!(
        balancer.balancer().total_in_flight(),
        0,
        "every slot released"
    );
    println!("600 requests, every slot released");
    Ok(())
}

/// `cargo test` runs the example (the `[[example]]` has `test = true`).
#[test]
fn example_runs() {
    main().unwrap();
}
