//! Real hyper servers on 127.0.0.1:0 for the tests: each answers with its
//! own name and counts what it sees.

#![allow(dead_code)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Channel, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use loadring::Endpoint;
use loadring_tower::SetAuthority;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// Every wait in the tests is bounded by this.
pub const WAIT: Duration = Duration::from_secs(20);

pub type HttpClient = Client<HttpConnector, Full<Bytes>>;
/// An endpoint service: the shared client bound to one backend's address.
pub type Upstream = SetAuthority<HttpClient>;

pub fn client() -> HttpClient {
    Client::builder(TokioExecutor::new()).build_http()
}

/// A gate that `/hold` and `/stream` requests wait on until it opens.
pub struct Gate {
    tx: watch::Sender<bool>,
}

impl Gate {
    pub fn new() -> Self {
        Gate {
            tx: watch::channel(false).0,
        }
    }
    pub fn open(&self) {
        self.tx.send_replace(true);
    }
    fn wait(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut rx = self.tx.subscribe();
        async move {
            let _ = rx.wait_for(|open| *open).await;
        }
    }
}

/// One backend server and what it saw.
pub struct Backend {
    pub name: String,
    pub addr: SocketAddr,
    /// Requests received.
    pub hits: AtomicUsize,
    /// Requests being handled now, and the most at once.
    pub current: AtomicUsize,
    pub peak: AtomicUsize,
    /// Answer 500 to everything.
    pub fail: AtomicBool,
    pub gate: Arc<Gate>,
    /// An `endpoint-load-metrics` header value to answer with, if any.
    pub report: std::sync::Mutex<Option<String>>,
}

impl Backend {
    pub fn hits(&self) -> usize {
        self.hits.load(SeqCst)
    }
    pub fn peak(&self) -> usize {
        self.peak.load(SeqCst)
    }
    /// This backend's endpoint service over `client`.
    pub fn upstream(&self, client: &HttpClient) -> Upstream {
        let real = Endpoint::new(self.addr.to_string()).unwrap();
        SetAuthority::new(client.clone(), &real).unwrap()
    }
}

type Reply = hyper::Response<BoxBody<Bytes, Infallible>>;

async fn handle(b: Arc<Backend>, req: hyper::Request<Incoming>) -> Result<Reply, Infallible> {
    b.hits.fetch_add(1, SeqCst);
    let now = b.current.fetch_add(1, SeqCst) + 1;
    b.peak.fetch_max(now, SeqCst);
    let path = req.uri().path().to_string();
    if path == "/hold" {
        b.gate.wait().await;
    }
    b.current.fetch_sub(1, SeqCst);
    let name = Bytes::from(b.name.clone());
    let mut reply = if path == "/stream" {
        // The name now, the rest of the body once the gate opens.
        let (mut tx, body) = Channel::<Bytes, Infallible>::new(2);
        let wait = b.gate.wait();
        tokio::spawn(async move {
            let _ = tx.send_data(name).await;
            wait.await;
            let _ = tx.send_data(Bytes::from_static(b" done")).await;
        });
        hyper::Response::new(body.boxed())
    } else {
        hyper::Response::new(Full::new(name).boxed())
    };
    if b.fail.load(SeqCst) {
        *reply.status_mut() = hyper::StatusCode::INTERNAL_SERVER_ERROR;
    }
    if let Some(report) = b.report.lock().unwrap().clone() {
        reply
            .headers_mut()
            .insert("endpoint-load-metrics", report.parse().unwrap());
    }
    Ok(reply)
}

/// Starts a backend named `name` on 127.0.0.1:0.
pub async fn backend(name: &str, gate: Arc<Gate>) -> Arc<Backend> {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let b = Arc::new(Backend {
        name: name.to_string(),
        addr: listener.local_addr().unwrap(),
        hits: AtomicUsize::new(0),
        current: AtomicUsize::new(0),
        peak: AtomicUsize::new(0),
        fail: AtomicBool::new(false),
        gate,
        report: std::sync::Mutex::new(None),
    });
    let server = b.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let b = server.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req| handle(b.clone(), req));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    b
}

/// `n` backends named `names`, sharing one gate.
pub async fn backends(names: &[&str]) -> (Vec<Arc<Backend>>, Arc<Gate>) {
    let gate = Arc::new(Gate::new());
    let mut out = Vec::new();
    for name in names {
        out.push(backend(name, gate.clone()).await);
    }
    (out, gate)
}

/// A request to `path` for user `user` (the `x-user` header), if any.
pub fn request(path: &str, user: Option<&str>) -> hyper::Request<Full<Bytes>> {
    let mut builder = hyper::Request::builder().uri(path);
    if let Some(user) = user {
        builder = builder.header("x-user", user);
    }
    builder.body(Full::new(Bytes::new())).unwrap()
}

/// The key extractor of the tests: the `x-user` header.
pub fn user_key(req: &hyper::Request<Full<Bytes>>) -> Option<Bytes> {
    req.headers()
        .get("x-user")
        .map(|v| Bytes::copy_from_slice(v.as_bytes()))
}

/// The whole body as a string.
pub async fn text<B>(body: B) -> String
where
    B: hyper::body::Body,
    B::Error: std::fmt::Debug,
{
    let bytes = body.collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// Waits (bounded) until `cond` holds.
pub async fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// An address on 127.0.0.1 where nothing listens (bound, then closed).
pub async fn dead_addr() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap()
}
