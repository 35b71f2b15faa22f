//! gRPC through the gateway: tonic servers behind an h2c cluster, a tonic
//! client on one channel to the proxy. The messages and the service are
//! written by hand (prost derive, tonic's server and client helpers): no
//! protoc.

use crate::common;
use crate::running::{self, Running};

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use common::{get, metric, WAIT};
use futures_util::{Stream, StreamExt};
use http::uri::PathAndQuery;
use loadring_proxy::{BackendProtocol, ClusterConfig, KeySpec};
use tokio::sync::oneshot;
use tonic::codegen::{BoxFuture, Service};
use tonic::metadata::MetadataValue;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Request, Response, Status, Streaming};
use tonic_prost::ProstCodec;

#[derive(Clone, PartialEq, prost::Message)]
struct Msg {
    #[prost(string, tag = "1")]
    text: String,
    /// The backend that answered.
    #[prost(string, tag = "2")]
    backend: String,
}

/// `test.Echo`: `Say` (unary, answers with its name), `Chat` (bidi echo),
/// `Fail` (NOT_FOUND with a message and a trailer).
#[derive(Clone)]
struct Echo {
    name: String,
}

impl tonic::server::NamedService for Echo {
    const NAME: &'static str = "test.Echo";
}

struct Say(String);
impl tonic::server::UnaryService<Msg> for Say {
    type Response = Msg;
    type Future = BoxFuture<Response<Msg>, Status>;
    fn call(&mut self, request: Request<Msg>) -> Self::Future {
        let name = self.0.clone();
        Box::pin(async move {
            Ok(Response::new(Msg {
                text: request.into_inner().text,
                backend: name,
            }))
        })
    }
}

struct Fail;
impl tonic::server::UnaryService<Msg> for Fail {
    type Response = Msg;
    type Future = BoxFuture<Response<Msg>, Status>;
    fn call(&mut self, _: Request<Msg>) -> Self::Future {
        Box::pin(async move {
            let mut status = Status::not_found("no such room: ünïcode");
            status
                .metadata_mut()
                .insert("x-detail", MetadataValue::from_static("kept"));
            Err(status)
        })
    }
}

struct Down;
impl tonic::server::UnaryService<Msg> for Down {
    type Response = Msg;
    type Future = BoxFuture<Response<Msg>, Status>;
    fn call(&mut self, _: Request<Msg>) -> Self::Future {
        Box::pin(async move { Err(Status::unavailable("draining")) })
    }
}

type MsgStream = Pin<Box<dyn Stream<Item = Result<Msg, Status>> + Send>>;

struct Chat(String);
impl tonic::server::StreamingService<Msg> for Chat {
    type Response = Msg;
    type ResponseStream = MsgStream;
    type Future = BoxFuture<Response<MsgStream>, Status>;
    fn call(&mut self, request: Request<Streaming<Msg>>) -> Self::Future {
        let name = self.0.clone();
        Box::pin(async move {
            let incoming = request.into_inner();
            let out = incoming.map(move |m| {
                m.map(|m| Msg {
                    text: m.text,
                    backend: name.clone(),
                })
            });
            Ok(Response::new(Box::pin(out) as MsgStream))
        })
    }
}

impl Service<http::Request<tonic::body::Body>> for Echo {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Infallible>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        let name = self.name.clone();
        Box::pin(async move {
            let mut grpc = tonic::server::Grpc::new(ProstCodec::<Msg, Msg>::default());
            Ok(match request.uri().path() {
                "/test.Echo/Say" => grpc.unary(Say(name), request).await,
                "/test.Echo/Fail" => grpc.unary(Fail, request).await,
                "/test.Echo/Down" => grpc.unary(Down, request).await,
                "/test.Echo/Chat" => grpc.streaming(Chat(name), request).await,
                _ => Status::unimplemented("no such method").into_http(),
            })
        })
    }
}

/// A tonic server on 127.0.0.1, stopped when dropped.
struct Server {
    addr: SocketAddr,
    /// Connections it accepted.
    connections: Arc<AtomicU64>,
    _stop: oneshot::Sender<()>,
}

async fn server() -> Server {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let connections = Arc::new(AtomicU64::new(0));
    let incoming = tokio_stream_of(listener, connections.clone());
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(Echo {
                name: addr.to_string(),
            })
            .serve_with_incoming_shutdown(incoming, async {
                let _ = stopped.await;
            }),
    );
    Server {
        addr,
        connections,
        _stop: stop,
    }
}

/// The listener's connections as a stream.
fn tokio_stream_of(
    listener: tokio::net::TcpListener,
    connections: Arc<AtomicU64>,
) -> impl Stream<Item = std::io::Result<tokio::net::TcpStream>> {
    futures_util::stream::unfold(listener, move |l| {
        let connections = connections.clone();
        async move {
            let accepted = l.accept().await.map(|(s, _)| s);
            connections.fetch_add(1, Relaxed);
            Some((accepted, l))
        }
    })
}

async fn proxy(policy: &str, endpoints: &[String]) -> Running {
    proxy_with(policy, endpoints, |_| {}).await
}

async fn proxy_with(
    policy: &str,
    endpoints: &[String],
    tune: impl FnOnce(&mut ClusterConfig),
) -> Running {
    let mut cluster = ClusterConfig::new("default", policy.parse().unwrap());
    cluster.endpoints = endpoints.iter().map(|e| e.parse().unwrap()).collect();
    cluster.key = KeySpec::parse(&["header:x-tenant"]).unwrap();
    cluster.backend_protocol = BackendProtocol::H2c;
    cluster.retries = 0;
    tune(&mut cluster);
    running::serve(
        running::config(vec![cluster], vec![], Default::default()),
        1,
    )
    .await
}

async fn channel(addr: SocketAddr) -> Channel {
    Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .expect("the channel connects")
}

async fn say(channel: &Channel, tenant: &str) -> Result<Msg, Status> {
    call(channel, tenant, "/test.Echo/Say").await
}

async fn call(channel: &Channel, tenant: &str, method: &'static str) -> Result<Msg, Status> {
    let mut client = tonic::client::Grpc::new(channel.clone());
    client
        .ready()
        .await
        .map_err(|e| Status::unknown(e.to_string()))?;
    let mut request = Request::new(Msg {
        text: tenant.into(),
        backend: String::new(),
    });
    request
        .metadata_mut()
        .insert("x-tenant", tenant.parse().unwrap());
    client
        .unary(
            request,
            PathAndQuery::from_static(method),
            ProstCodec::default(),
        )
        .await
        .map(Response::into_inner)
}

/// Where the library's own balancer (what `loadring place` runs) puts
/// each key over `endpoints`.
/// Opens a `/test.Echo/Chat` stream of `outgoing` with tenant `tenant`,
/// failing with `what` if it does not open in time.
async fn open_chat<S>(
    client: &mut tonic::client::Grpc<Channel>,
    outgoing: S,
    tenant: &'static str,
    what: &str,
) -> Streaming<Msg>
where
    S: Stream<Item = Msg> + Send + 'static,
{
    let mut request = Request::new(outgoing);
    request
        .metadata_mut()
        .insert("x-tenant", MetadataValue::from_static(tenant));
    tokio::time::timeout(
        WAIT,
        client.streaming(
            request,
            PathAndQuery::from_static("/test.Echo/Chat"),
            ProstCodec::<Msg, Msg>::default(),
        ),
    )
    .await
    .unwrap_or_else(|_| panic!("{what}: in time"))
    .unwrap_or_else(|e| panic!("{what}: {e}"))
    .into_inner()
}

fn placement(policy: &str, endpoints: &[String], keys: &[String]) -> HashMap<String, String> {
    let balancer = loadring::Balancer::new(
        policy.parse().unwrap(),
        endpoints.iter().map(|e| e.parse().unwrap()),
    )
    .unwrap();
    keys.iter()
        .map(|k| {
            let pick = balancer.pick(&loadring::Request::key(k)).unwrap();
            (k.clone(), pick.addr().to_string())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unary_calls_go_to_their_metadata_keys_owner() {
    let servers = [server().await, server().await, server().await];
    let endpoints: Vec<String> = servers.iter().map(|s| s.addr.to_string()).collect();
    let running = proxy("c_murmurhash", &endpoints).await;
    let channel = channel(running.addr).await;
    let keys: Vec<String> = (0..200).map(|i| format!("tenant-{i}")).collect();
    let want = placement("c_murmurhash", &endpoints, &keys);
    let mut owners = std::collections::HashSet::new();
    for key in &keys {
        let reply = tokio::time::timeout(WAIT, say(&channel, key))
            .await
            .expect("in time")
            .expect("the call succeeds");
        assert_eq!(reply.text, *key);
        assert_eq!(reply.backend, want[key], "key {key}");
        owners.insert(reply.backend);
    }
    assert_eq!(owners.len(), 3, "200 keys reach every backend");
    let metrics = get(running.admin, "/metrics", &[]).await.body;
    let ok: f64 = endpoints
        .iter()
        .filter_map(|e| {
            metric(
                &metrics,
                &format!("loadring_grpc_responses_total{{endpoint=\"{e}\",grpc_status=\"0\"}}"),
            )
        })
        .sum();
    assert_eq!(ok, 200.0, "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_hundred_concurrent_calls_on_one_channel_each_reach_its_owner() {
    let servers = [server().await, server().await, server().await];
    let endpoints: Vec<String> = servers.iter().map(|s| s.addr.to_string()).collect();
    let running = proxy("c_murmurhash", &endpoints).await;
    let channel = channel(running.addr).await;
    let keys: Vec<String> = (0..500).map(|i| format!("call-{i}")).collect();
    let want = placement("c_murmurhash", &endpoints, &keys);
    let calls = keys.iter().map(|key| {
        let channel = channel.clone();
        let key = key.clone();
        tokio::spawn(async move { (key.clone(), say(&channel, &key).await) })
    });
    let done = tokio::time::timeout(WAIT, futures_util::future::join_all(calls))
        .await
        .expect("every call in time");
    let mut per_backend: HashMap<String, usize> = HashMap::new();
    for joined in done {
        let (key, reply) = joined.unwrap();
        let reply = reply.unwrap_or_else(|e| panic!("call {key}: {e}"));
        assert_eq!(reply.backend, want[&key], "key {key}");
        *per_backend.entry(reply.backend).or_default() += 1;
    }
    // One shared HTTP/2 connection per endpoint per thread serving the
    // proxy (the test runtime's two), not one per call.
    for s in &servers {
        let n = s.connections.load(Relaxed);
        assert!((1..=2).contains(&n), "{} connections to {}", n, s.addr);
    }
    assert_eq!(per_backend.values().sum::<usize>(), 500);
    assert_eq!(
        per_backend.len(),
        3,
        "spread by key, not pinned: {per_backend:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bidirectional_stream_of_1000_messages_passes_in_order() {
    let servers = [server().await];
    let endpoints = vec![servers[0].addr.to_string()];
    let running = proxy("c_murmurhash", &endpoints).await;
    let channel = channel(running.addr).await;
    let mut client = tonic::client::Grpc::new(channel);
    client.ready().await.unwrap();
    let outgoing = futures_util::stream::iter((0..1000).map(|i| Msg {
        text: format!("m{i}"),
        backend: String::new(),
    }));
    let mut incoming = open_chat(&mut client, outgoing, "chat", "the stream opens").await;
    let mut n = 0;
    while let Some(m) = tokio::time::timeout(WAIT, incoming.message())
        .await
        .expect("in time")
        .expect("no error")
    {
        assert_eq!(m.text, format!("m{n}"));
        n += 1;
    }
    assert_eq!(n, 1000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_statuses_trailers_and_unreachable_backends() {
    let servers = [server().await];
    let live = servers[0].addr.to_string();
    // An endpoint nobody listens on.
    let dead = format!("127.0.0.1:{}", common::free_port());
    let running = proxy("c_murmurhash", std::slice::from_ref(&live)).await;
    let channel = channel(running.addr).await;
    let mut client = tonic::client::Grpc::new(channel.clone());
    client.ready().await.unwrap();
    let mut request = Request::new(Msg::default());
    request
        .metadata_mut()
        .insert("x-tenant", MetadataValue::from_static("a"));
    let status = client
        .unary::<Msg, Msg, _>(
            request,
            PathAndQuery::from_static("/test.Echo/Fail"),
            ProstCodec::default(),
        )
        .await
        .expect_err("the call fails");
    assert_eq!(status.code(), Code::NotFound);
    assert_eq!(status.message(), "no such room: ünïcode");
    assert_eq!(status.metadata().get("x-detail").unwrap(), "kept");

    // The same call to a cluster whose only backend is down.
    let down = proxy("c_murmurhash", std::slice::from_ref(&dead)).await;
    let status = say(&self::channel(down.addr).await, "b")
        .await
        .expect_err("no backend");
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");

    let counted = |admin: SocketAddr, endpoint: String, code: u32| async move {
        let text = get(admin, "/metrics", &[]).await.body;
        metric(
            &text,
            &format!(
                "loadring_grpc_responses_total{{endpoint=\"{endpoint}\",grpc_status=\"{code}\"}}"
            ),
        )
    };
    assert_eq!(counted(running.admin, live, 5).await, Some(1.0));
    assert_eq!(counted(down.admin, dead, 14).await, Some(1.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unavailable_from_a_backend_counts_against_it_and_ejects_it() {
    let servers = [server().await, server().await];
    let endpoints: Vec<String> = servers.iter().map(|s| s.addr.to_string()).collect();
    let running = proxy_with("c_murmurhash", &endpoints, |c| {
        c.health.eject_after = 3;
        c.health.eject_for = Duration::from_secs(3600);
    })
    .await;
    let channel = channel(running.addr).await;
    let key = "tenant-hot".to_string();
    let owner = placement("c_murmurhash", &endpoints, std::slice::from_ref(&key))[&key].clone();
    let healthy = |admin: SocketAddr, endpoint: String| async move {
        let text = get(admin, "/metrics", &[]).await.body;
        metric(
            &text,
            &format!("loadring_endpoint_healthy{{endpoint=\"{endpoint}\"}}"),
        )
    };
    assert_eq!(healthy(running.admin, owner.clone()).await, Some(1.0));
    for _ in 0..3 {
        let status = call(&channel, &key, "/test.Echo/Down").await.unwrap_err();
        assert_eq!(status.code(), Code::Unavailable);
    }
    assert_eq!(
        healthy(running.admin, owner.clone()).await,
        Some(0.0),
        "three UNAVAILABLE in a row eject the endpoint"
    );
    // The key's calls go to the other endpoint now.
    let reply = say(&channel, &key).await.unwrap();
    assert_ne!(reply.backend, owner);
}

/// A bare HTTP/2 (prior knowledge) backend: answers with the version and
/// the `:authority` it received.
async fn h2_backend() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let service = hyper::service::service_fn(
                |request: http::Request<hyper::body::Incoming>| async move {
                    let authority = request
                        .uri()
                        .authority()
                        .map_or(String::new(), |a| a.to_string());
                    Ok::<_, Infallible>(
                        http::Response::builder()
                            .header("x-version", format!("{:?}", request.version()))
                            .header("x-authority", authority)
                            .body(http_body_util::Full::new(bytes::Bytes::from_static(
                                b"over h2",
                            )))
                            .unwrap(),
                    )
                },
            );
            tokio::spawn(
                hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
                    .serve_connection(hyper_util::rt::TokioIo::new(tcp), service),
            );
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http1_in_h2c_out() {
    let backend = h2_backend().await;
    let running = proxy("c_murmurhash", &[backend.to_string()]).await;
    let reply = get(running.addr, "/any", &[("x-tenant", "a")]).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body, "over h2");
    assert_eq!(reply.header("x-version"), Some("HTTP/2.0"));
    // The client's Host became the :authority.
    assert_eq!(
        reply.header("x-authority"),
        Some(running.addr.to_string().as_str())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bidirectional_stream_can_wait_for_each_answer_with_retries_on() {
    let servers = [server().await];
    let endpoints = vec![servers[0].addr.to_string()];
    // The default retries: a request body is read ahead to be resent, except
    // a call's stream, which must flow at once.
    let running = proxy_with("c_murmurhash", &endpoints, |c| {
        c.retries = ClusterConfig::new("x", "rr".parse().unwrap()).retries;
        c.timeout = Duration::from_secs(20);
    })
    .await;
    assert!(
        ClusterConfig::new("x", "rr".parse().unwrap()).retries > 0,
        "the default retries"
    );
    let mut client = tonic::client::Grpc::new(channel(running.addr).await);
    client.ready().await.unwrap();
    let (send, outgoing) = tokio::sync::mpsc::channel::<Msg>(1);
    let outgoing = futures_util::stream::unfold(outgoing, |mut rx| async move {
        rx.recv().await.map(|m| (m, rx))
    });
    send.send(Msg {
        text: "ping-0".into(),
        backend: String::new(),
    })
    .await
    .unwrap();
    let mut incoming = open_chat(
        &mut client,
        outgoing,
        "ping",
        "the stream opens before the client's stream ends",
    )
    .await;
    for i in 0..10 {
        let m = tokio::time::timeout(WAIT, incoming.message())
            .await
            .expect("each answer before the next message")
            .unwrap()
            .unwrap();
        assert_eq!(m.text, format!("ping-{i}"));
        if i < 9 {
            send.send(Msg {
                text: format!("ping-{}", i + 1),
                backend: String::new(),
            })
            .await
            .unwrap();
        }
    }
    drop(send);
    assert!(incoming.message().await.unwrap().is_none());
}
