//! The proxy: listeners bound up front (so a busy address is an error before
//! anything is served), routes to clusters, background tasks (health
//! checks, membership from endpoints files and discovery sources), and a
//! graceful stop.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use std::borrow::Cow;

use futures_util::FutureExt as _;
use http::{Method, Request, Response, StatusCode, Uri};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use prometheus_client::metrics::counter::Counter;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use crate::activity::{Activity, OpenStream};
use crate::clients::{AcceptErrors, AcceptLog, ClientLimits};
use crate::cluster::Cluster;
use crate::config::{ConfigError, Naming, ProxyConfig, RouteConfig};
use crate::connect::request_head::RequestHead;
use crate::downstream::{ClientBody, H1Connection, Handler, Io, Prefixed};
use crate::drain::{Drain, Entered};
use crate::error::{ProxyError, ProxyErrorKind};
use crate::forward::{local_response, Forwarder, Forwarding, ProxyBody, Reply};
use crate::health::spawn_active_checks;
use crate::idle_limit::{Ended, IdleLimit};
use crate::joined_writes::JoinedWrites;
use crate::metrics::Metrics;
use crate::places::{Place, Places};
use crate::reload::{spawn_membership, start_discovery};
use crate::reset_flood::LeftEarly;
use crate::send_limit::SendLimit;
use crate::slot_timer::SlotTimer;
use crate::target::{self, canonical_host, normalize_host};
use crate::tls::ServerTls;
use crate::websocket::TunnelStream;
use crate::workers::{Serving, WorkerLoads};
use loadring_discovery::Discovery;

/// Routes and forwarders: everything a request needs.
#[derive(Debug)]
pub struct Gateway {
    forwarders: Vec<Forwarder>,
    clusters: Vec<Arc<Cluster>>,
    routes: Vec<RouteConfig>,
    metrics: Arc<Metrics>,
}

impl Gateway {
    /// Builds every cluster (reading endpoints files now).
    ///
    /// # Errors
    /// The first bad cluster, naming the config file's keys.
    pub fn new(config: &ProxyConfig) -> Result<Self, ConfigError> {
        Gateway::new_as(config, Naming::Keys)
    }

    /// [`Gateway::new`], its errors naming settings as `naming` says.
    ///
    /// # Errors
    /// The first bad cluster.
    pub fn new_as(config: &ProxyConfig, naming: Naming) -> Result<Self, ConfigError> {
        config.validate_as(naming)?;
        let multi = config.clusters.len() > 1;
        let metrics = Arc::new(Metrics::new(multi));
        // One limit for the whole proxy: what abandoned requests cost (a
        // connection to a backend each) comes out of one budget.
        let abandoned = Places::new(config.clients.max_abandoned());
        metrics.count_abandoned(abandoned.clone());
        let mut forwarders = Vec::new();
        let mut clusters = Vec::new();
        for c in &config.clusters {
            let cluster = Arc::new(Cluster::new_as(c.clone(), naming).map_err(|e| {
                if multi {
                    e.in_cluster(&c.name)
                } else {
                    e
                }
            })?);
            metrics.declare(cluster.name());
            forwarders.push(Forwarder::new(
                cluster.clone(),
                metrics.clone(),
                abandoned.clone(),
                config.clients,
            ));
            clusters.push(cluster);
        }
        Ok(Gateway {
            forwarders,
            clusters,
            routes: config.routes.clone(),
            metrics,
        })
    }

    /// The clusters, in configuration order.
    pub fn clusters(&self) -> &[Arc<Cluster>] {
        &self.clusters
    }

    /// The metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The forwarder for a request to `host` (normalised) and `path` (dot
    /// segments resolved): the first matching route's cluster, or the only
    /// cluster when there are no routes.
    fn route(&self, host: Option<&str>, path: &str) -> Option<&Forwarder> {
        if self.routes.is_empty() {
            return self.forwarders.first();
        }
        let route = self.routes.iter().find(|r| {
            path.starts_with(&r.path_prefix)
                && r.host
                    .as_ref()
                    .is_none_or(|want| host.is_some() && normalize_host(want).as_deref() == host)
        })?;
        self.forwarders
            .iter()
            .find(|f| f.cluster().name() == route.cluster)
    }

    /// Handles one request from `peer`: checked and routed now, answered
    /// by the future returned (a few words: see [`Handling`]), which
    /// carries `left_early`: built with it, not given it after (each move
    /// of the answer copies it).
    pub(crate) fn handle_marked(
        &self,
        mut request: Box<RequestHead>,
        body: ClientBody,
        peer: SocketAddr,
        left_early: LeftEarly,
    ) -> Handling {
        let host = match target::check(&request) {
            // Normalised only for routes to compare: without them the
            // check is all a request's host costs.
            Ok(host) if !self.routes.is_empty() => host.map(canonical_host),
            Ok(_) => None,
            Err(refused) => {
                return Handling::answered(local_response(refused.status, refused.why), left_early)
            }
        };
        let path = match target::resolve_dot_segments(request.uri.path()) {
            Ok(Cow::Borrowed(_)) => None,
            Ok(Cow::Owned(resolved)) => Some(resolved),
            Err(refused) => {
                return Handling::answered(local_response(refused.status, refused.why), left_early)
            }
        };
        if let Some(path) = path {
            // What is routed is what is forwarded.
            let mut parts = request.uri.clone().into_parts();
            let resolved = match request.uri.query() {
                Some(q) => format!("{path}?{q}"),
                None => path,
            };
            match resolved.parse() {
                Ok(pq) => parts.path_and_query = Some(pq),
                Err(_) => {
                    return Handling::answered(
                        local_response(StatusCode::BAD_REQUEST, "bad request target"),
                        left_early,
                    )
                }
            }
            match Uri::from_parts(parts) {
                Ok(uri) => request.uri = uri,
                Err(_) => {
                    return Handling::answered(
                        local_response(StatusCode::BAD_REQUEST, "bad request target"),
                        left_early,
                    )
                }
            }
        }
        match self.route(host.as_deref(), request.uri.path()) {
            Some(forwarder) => Handling {
                answer: Answer::Forwarding(forwarder.forward(request, body, peer)),
                left_early,
            },
            None => Handling::answered(
                local_response(StatusCode::NOT_FOUND, "no route for this request"),
                left_early,
            ),
        }
    }
}

/// The gateway answers its own HTTP/1.1 server's requests.
impl Handler for Gateway {
    type Answer = Handling;

    fn answer(&self, head: Box<RequestHead>, body: ClientBody, peer: SocketAddr) -> Handling {
        self.handle_marked(head, body, peer, LeftEarly::default())
    }
}

/// The answer to one request: the future [`Gateway::handle_marked`]
/// returns.
///
/// Small on purpose: hyper moves a request's future (into its in-flight
/// slot, into a stream's task), and each move copies all of it. The
/// forwarding state, kilobytes, stays in its box.
#[derive(Debug)]
pub(crate) struct Handling {
    answer: Answer,
    /// Counts the request in its connection if dropped unanswered (set by
    /// the connection's service for HTTP/2 streams: reset_flood.rs).
    left_early: LeftEarly,
}

#[derive(Debug)]
enum Answer {
    /// The gateway's own (a refused request, no route); taken when polled.
    Local(Option<Reply>),
    Forwarding(Forwarding),
}

impl Handling {
    fn answered(response: Response<ProxyBody>, left_early: LeftEarly) -> Self {
        Handling {
            answer: Answer::Local(Some(response.into())),
            left_early,
        }
    }
}

impl Future for Handling {
    type Output = Reply;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Reply> {
        match &mut self.answer {
            Answer::Local(response) => match response.take() {
                Some(response) => Poll::Ready(response),
                // Polled again after its answer: a caller's bug.
                None => Poll::Pending,
            },
            Answer::Forwarding(forwarding) => Pin::new(forwarding).poll(cx),
        }
    }
}

impl Drop for Handling {
    fn drop(&mut self) {
        let answered = match &self.answer {
            Answer::Local(response) => response.is_none(),
            Answer::Forwarding(forwarding) => forwarding.is_over(),
        };
        if !answered {
            self.left_early.note();
        }
    }
}

/// A response as hyper's service gives it: the answer's head made a map.
/// An HTTP/2 stream's answer is watched by its connection, and counts the
/// stream `open` until hyper drops its body.
fn served_watched(
    open: Option<OpenStream>,
) -> impl FnOnce(Reply) -> Result<Response<ProxyBody>, Infallible> {
    move |reply| {
        let response = reply.into_response().unwrap_or_else(|e| {
            tracing::warn!("malformed response: {e}");
            local_response(
                StatusCode::BAD_GATEWAY,
                "malformed response from the backend",
            )
        });
        Ok(match open {
            Some(open) => {
                let activity = open.activity().clone();
                activity.answers().watch(response, open)
            }
            None => response,
        })
    }
}

/// A configured proxy with its listeners bound, not serving yet.
#[derive(Debug)]
pub struct Proxy {
    gateway: Arc<Gateway>,
    listener: TcpListener,
    /// Listeners on the same address for the other worker threads.
    workers: Vec<std::net::TcpListener>,
    admin: Option<TcpListener>,
    drain_timeout: Duration,
    clients: ClientLimits,
    /// The membership sources, by cluster index.
    discoveries: Vec<(usize, Discovery)>,
    /// The listener's TLS, when it has a certificate.
    tls: Option<Arc<ServerTls>>,
    /// The client connections each worker serves (this task's first).
    loads: Arc<WorkerLoads>,
}

async fn bind(flag: &str, addr: &str) -> Result<TcpListener, ProxyError> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| ProxyError::bind(flag, addr, e))
}

/// `count` listeners on `addr` (`SO_REUSEPORT`): the first for this
/// runtime, the others for the worker threads.
async fn bind_workers(
    flag: &str,
    addr: &str,
    count: usize,
) -> Result<(TcpListener, Vec<std::net::TcpListener>), ProxyError> {
    let failed = |e: std::io::Error| ProxyError::bind(flag, addr, e);
    let resolved = tokio::net::lookup_host(addr)
        .await
        .map_err(failed)?
        .next()
        .ok_or_else(|| ProxyError::bind(flag, addr, "no address"))?;
    let mut all = crate::workers::bind_reuseport(resolved, count).map_err(failed)?;
    let first = TcpListener::from_std(all.remove(0)).map_err(failed)?;
    Ok((first, all))
}

impl Proxy {
    /// Validates `config`, builds the clusters and binds the listeners.
    /// Errors name the config file's keys.
    ///
    /// # Errors
    /// A bad configuration, or an address that cannot be bound.
    pub async fn bind(config: ProxyConfig) -> Result<Self, ProxyError> {
        Proxy::bind_as(config, Naming::Keys).await
    }

    /// [`Proxy::bind`], its errors naming settings as `naming` says (the
    /// command line's flags, or the config file's keys).
    ///
    /// # Errors
    /// A bad configuration, or an address that cannot be bound.
    pub async fn bind_as(config: ProxyConfig, naming: Naming) -> Result<Self, ProxyError> {
        Proxy::bind_workers(config, naming, 1).await
    }

    /// [`Proxy::bind_as`] for `workers` threads serving clients: with more
    /// than one, the listen address is bound once per worker with
    /// `SO_REUSEPORT`, and [`Proxy::serve`] starts the other `workers - 1`
    /// threads, each with its own current-thread runtime, so that a request
    /// and its upstream connection stay on one thread. The task calling
    /// `serve` is the first worker.
    ///
    /// # Errors
    /// A bad configuration, or an address that cannot be bound.
    pub async fn bind_workers(
        config: ProxyConfig,
        naming: Naming,
        workers: usize,
    ) -> Result<Self, ProxyError> {
        let gateway = Arc::new(Gateway::new_as(&config, naming)?);
        let tls = match &config.tls {
            Some(files) => Some(Arc::new(ServerTls::load(files, naming)?)),
            None => None,
        };
        let mut discoveries = Vec::new();
        for (i, cluster) in gateway.clusters.iter().enumerate() {
            if let Some(d) = start_discovery(cluster, naming).await.map_err(|e| {
                if gateway.clusters.len() > 1 {
                    e.in_cluster(cluster.name())
                } else {
                    e
                }
            })? {
                discoveries.push((i, d));
            }
        }
        let (listener, workers) = if workers > 1 {
            bind_workers(naming.name("listen"), &config.listen, workers).await?
        } else {
            (
                bind(naming.name("listen"), &config.listen).await?,
                Vec::new(),
            )
        };
        let admin = match &config.admin {
            Some(addr) => Some(bind(naming.name("admin"), addr).await?),
            None => None,
        };
        let loads = WorkerLoads::new(workers.len() + 1);
        gateway.metrics.count_workers(loads.clone());
        Ok(Proxy {
            gateway,
            listener,
            workers,
            admin,
            drain_timeout: config.drain_timeout,
            clients: config.clients,
            discoveries,
            tls,
            loads,
        })
    }

    /// The address the proxy serves on.
    ///
    /// # Errors
    /// The socket's error.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The admin listener's address, if any.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// The gateway (clusters, metrics), for this crate's tests: hidden, as
    /// its type is not part of the API.
    #[doc(hidden)]
    pub fn gateway(&self) -> &Arc<Gateway> {
        &self.gateway
    }

    /// Serves until `shutdown` completes; then stops accepting, lets the
    /// requests in flight finish (up to the drain timeout) and returns.
    /// With workers ([`Proxy::bind_workers`]), each worker thread serves its
    /// own listener and drains likewise; this returns once all are done.
    ///
    /// # Errors
    /// A worker thread could not be started; accept errors are logged and
    /// retried.
    pub async fn serve(self, shutdown: impl Future<Output = ()>) -> Result<(), ProxyError> {
        let Proxy {
            gateway,
            listener,
            workers,
            admin,
            drain_timeout,
            clients,
            discoveries,
            tls,
            loads,
        } = self;
        let mut background: Vec<JoinHandle<()>> = Vec::new();
        for forwarder in &gateway.forwarders {
            background.extend(spawn_active_checks(forwarder.cluster().clone()));
        }
        for (i, discovery) in discoveries {
            background.push(spawn_membership(gateway.clusters[i].clone(), discovery));
        }
        let accept_log = AcceptLog::default();
        if let Some(admin) = admin {
            background.push(tokio::spawn(serve_admin(
                admin,
                gateway.clone(),
                clients,
                accept_log.clone(),
            )));
        }
        if let Some(tls) = &tls {
            background.push(spawn_tls_reload(tls.clone())?);
        }
        let connections = Places::new(clients.max_connections());
        let (stop, stopping) = watch::channel(false);
        let (inboxes, mut receivers): (Vec<_>, Vec<_>) = (0..=workers.len())
            .map(|_| mpsc::unbounded_channel())
            .unzip();
        let inboxes: Arc<[mpsc::UnboundedSender<Handed>]> = inboxes.into();
        let mut finished = Vec::new();
        for (i, (listener, inbox)) in workers.into_iter().zip(receivers.drain(1..)).enumerate() {
            let serving = ServeClients {
                gateway: gateway.clone(),
                tls: tls.clone(),
                clients,
                connections: connections.clone(),
                accept_log: accept_log.clone(),
                drain_timeout,
                stop: stopping.clone(),
                worker: i + 1,
                loads: loads.clone(),
                inboxes: inboxes.clone(),
            };
            let (done, done_rx) = oneshot::channel::<()>();
            std::thread::Builder::new()
                .name(format!("loadring-worker-{}", i + 1))
                .spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build();
                    match runtime {
                        Ok(runtime) => runtime.block_on(async move {
                            match TcpListener::from_std(listener) {
                                Ok(listener) => serving.run(listener, inbox).await,
                                Err(e) => tracing::error!("worker {}: listener: {e}", i + 1),
                            }
                        }),
                        Err(e) => tracing::error!("worker {}: runtime: {e}", i + 1),
                    }
                    drop(done);
                })
                .map_err(|e| {
                    ProxyError::new(ProxyErrorKind::Worker, format!("worker thread: {e}"))
                })?;
            finished.push(done_rx);
        }
        let serving = ServeClients {
            gateway,
            tls,
            clients,
            connections,
            accept_log,
            drain_timeout,
            stop: stopping,
            worker: 0,
            loads,
            inboxes,
        };
        let inbox = receivers.pop().expect("the first worker's inbox");
        let stopper = async move {
            shutdown.await;
            tracing::info!("stopping: draining requests in flight");
            let _ = stop.send(true);
        };
        tokio::join!(serving.run(listener, inbox), stopper);
        for done in finished {
            // Dropped (not sent) when the worker is done.
            let _ = done.await;
        }
        for task in background {
            task.abort();
        }
        Ok(())
    }
}

/// Until told to stop (or the sender is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}

/// What one worker needs to serve its listener's clients.
struct ServeClients {
    gateway: Arc<Gateway>,
    tls: Option<Arc<ServerTls>>,
    clients: ClientLimits,
    /// Shared by every worker: the limit is the process's.
    connections: Places,
    /// Shared too: one accept warning a second for the process.
    accept_log: AcceptLog,
    drain_timeout: Duration,
    stop: watch::Receiver<bool>,
    /// This worker's index in `loads` and `inboxes`.
    worker: usize,
    loads: Arc<WorkerLoads>,
    /// Where each worker takes the connections handed over to it.
    inboxes: Arc<[mpsc::UnboundedSender<Handed>]>,
}

/// A client connection one worker accepted and another is to serve.
#[derive(Debug)]
struct Handed {
    stream: std::net::TcpStream,
    peer: SocketAddr,
    slot: Place,
    serving: Serving,
}

impl ServeClients {
    /// Accepts and serves clients until told to stop, with those the other
    /// workers hand over to this one (`inbox`); then lets the requests in
    /// flight finish, up to the drain timeout.
    async fn run(self, listener: TcpListener, mut inbox: mpsc::UnboundedReceiver<Handed>) {
        let ServeClients {
            clients,
            connections,
            drain_timeout,
            worker,
            loads,
            inboxes,
            ..
        } = &self;
        // The workers (current-thread runtimes) time header reads and
        // requests on a timer made for that (slot_timer.rs); tokio's serves
        // a listener run inside a multi-thread runtime.
        if SlotTimer::fits_this_runtime() {
            crate::slot_timer::use_on_this_thread();
        }
        // HTTP/2 clients (told apart by their preface: with prior knowledge,
        // or over TLS as ALPN chose) are hyper's.
        // SETTINGS_ENABLE_CONNECT_PROTOCOL: HTTP/2 clients may open
        // WebSockets with extended CONNECT (RFC 8441), see websocket.rs.
        // Each stream may hold a connection to a backend: the streams one
        // client connection has open at once are capped (nginx's default
        // is 128, HAProxy's 100), named here rather than left to hyper's
        // default, which has changed before.
        let mut http = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
        http.timer(TokioTimer::new())
            .max_concurrent_streams(MAX_CLIENT_STREAMS)
            .enable_connect_protocol();
        let serve = ServeOne {
            gateway: self.gateway.clone(),
            tls: self.tls.clone(),
            header_timeout: clients.header_timeout,
            send_timeout: clients.send_timeout,
            http: Arc::new(http),
            drain: Drain::new(),
        };
        let mut accept_errors = AcceptErrors::new(self.accept_log.clone());
        let mut stop = self.stop.clone();
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let (stream, peer) = match accepted {
                        Ok(a) => a,
                        Err(e) => {
                            wait_out(&e, &mut accept_errors).await;
                            continue;
                        }
                    };
                    accept_errors.succeeded();
                    let Some(slot) = connections.try_take() else {
                        // At the limit: refused at once, so that the
                        // connections open are not starved.
                        let _ = stream.try_write(AT_CAPACITY);
                        tracing::debug!("client {peer}: refused, at the connection limit");
                        continue;
                    };
                    let _ = stream.set_nodelay(true);
                    let serving = loads.place(*worker);
                    if serving.worker() == *worker {
                        serve.start(stream, peer, slot, serving);
                        continue;
                    }
                    // Another worker serves fewer: hand it over, or serve
                    // it here if that worker has stopped.
                    let stream = match stream.into_std() {
                        Ok(stream) => stream,
                        Err(e) => {
                            tracing::debug!("client {peer}: {e}");
                            continue;
                        }
                    };
                    let to = serving.worker();
                    if let Err(mpsc::error::SendError(back)) =
                        inboxes[to].send(Handed { stream, peer, slot, serving })
                    {
                        let Handed { stream, peer, slot, serving } = back;
                        drop(serving);
                        serve.start_std(stream, peer, slot, loads.serving(*worker));
                    }
                }
                Some(handed) = inbox.recv() => {
                    let Handed { stream, peer, slot, serving } = handed;
                    serve.start_std(stream, peer, slot, serving);
                }
                // A dropped sender (the serving task gone) stops too.
                () = stopped(&mut stop) => break,
            }
        }
        drop(listener);
        // Connections handed over as the stop began close with the
        // listener's backlog: from now on, a hand-over to this worker fails
        // and the accepting worker keeps the connection.
        inbox.close();
        while inbox.try_recv().is_ok() {}
        let drain_timeout = *drain_timeout;
        if tokio::time::timeout(drain_timeout, serve.drain.stop())
            .await
            .is_err()
        {
            tracing::warn!(
                "drain timeout ({drain_timeout:?}) reached: closing the connections left"
            );
        }
    }
}

/// A failed accept (out of file descriptors and the like): the worker's
/// idle connections to backends give theirs back, and the loop waits, not
/// spins.
async fn wait_out(error: &std::io::Error, errors: &mut AcceptErrors) {
    if crate::connect::is_out_of_local_resources(error) {
        crate::connect::pool::shed();
    }
    tokio::time::sleep(errors.failed(error)).await;
}

/// What a worker needs to serve one client connection.
struct ServeOne {
    gateway: Arc<Gateway>,
    tls: Option<Arc<ServerTls>>,
    /// The header timeout: the limit of a TLS handshake, and of the wait
    /// for a connection's first request.
    header_timeout: Duration,
    /// How long a write to the client may be held back (send_limit.rs).
    send_timeout: Duration,
    http: Arc<hyper::server::conn::http2::Builder<TokioExecutor>>,
    drain: Drain,
}

impl ServeOne {
    /// Serves a connection handed over from another worker's runtime.
    fn start_std(
        &self,
        stream: std::net::TcpStream,
        peer: SocketAddr,
        slot: Place,
        serving: Serving,
    ) {
        match TcpStream::from_std(stream) {
            Ok(stream) => self.start(stream, peer, slot, serving),
            Err(e) => tracing::debug!("client {peer}: {e}"),
        }
    }

    /// Serves `stream` on a task of this worker until the client is done;
    /// `slot` and `serving` count it until then.
    fn start(&self, stream: TcpStream, peer: SocketAddr, slot: Place, serving: Serving) {
        // Entered now: a drain that begins during a TLS handshake or the
        // wait for the first request waits for this connection too.
        let entered = self.drain.enter();
        let client = Client {
            gateway: self.gateway.clone(),
            http: self.http.clone(),
            header_timeout: self.header_timeout,
            send_timeout: self.send_timeout,
            peer,
        };
        // A client that reads nothing for the send timeout is cut off
        // (send_limit.rs); under TLS, its socket is.
        let stream = SendLimit::new(stream, self.send_timeout);
        match &self.tls {
            None => {
                tokio::spawn(async move {
                    let _counted = (slot, serving);
                    client.serve(stream, entered).await;
                });
            }
            Some(tls) => {
                let acceptor = TlsAcceptor::from(tls.current());
                let within = self.header_timeout;
                tokio::spawn(async move {
                    let _counted = (slot, serving);
                    // A client that sends garbage (or plain HTTP) or stalls
                    // costs its own connection only.
                    let stream = match tokio::time::timeout(within, acceptor.accept(stream)).await {
                        Ok(Ok(stream)) => stream,
                        Ok(Err(e)) => {
                            tracing::debug!("client {peer}: TLS handshake: {e}");
                            return;
                        }
                        Err(_) => {
                            tracing::debug!("client {peer}: TLS handshake timed out");
                            return;
                        }
                    };
                    client.serve(stream, entered).await;
                });
            }
        }
    }
}

/// What serving one client connection needs.
struct Client {
    gateway: Arc<Gateway>,
    http: Arc<hyper::server::conn::http2::Builder<TokioExecutor>>,
    header_timeout: Duration,
    send_timeout: Duration,
    peer: SocketAddr,
}

impl Client {
    /// Serves `io` (plain or TLS) until the client is done: HTTP/1.1 on
    /// the gateway's own server, HTTP/2 (its preface first) on hyper's.
    async fn serve<S: Io>(self, io: S, entered: Entered) {
        let peer = self.peer;
        // The HTTP/2 connection's place, should the client speak it.
        let h2_place = entered.again();
        let h1 = entered.watch(H1Connection::new(
            io,
            self.gateway.clone(),
            peer,
            self.header_timeout,
        ));
        match h1.await {
            Ok(None) => {}
            Ok(Some((io, read))) => self.serve_h2(Prefixed::new(read, io), h2_place).await,
            Err(e) => tracing::debug!("client {peer}: {e}"),
        }
    }

    /// Serves an HTTP/2 connection (with prior knowledge, or as TLS's ALPN
    /// chose) on hyper's server.
    async fn serve_h2<S: Io>(self, io: Prefixed<S>, entered: Entered) {
        let Client {
            gateway,
            http,
            header_timeout: within,
            send_timeout,
            peer,
        } = self;
        let activity = Activity::default();
        let floods = gateway.metrics().reset_floods();
        let service = service_fn({
            let activity = activity.clone();
            move |mut request: Request<Incoming>| {
                activity.note(request.version());
                // Not boxed: the future is a few words (the forwarding
                // state, kilobytes, has its own box), and hyper moves it
                // into a stream's task without a copy of much. A stream's
                // counts if its client resets it unanswered
                // (reset_flood.rs). Its answer is watched too, for a
                // client that takes nothing of it (stream_send_limit.rs),
                // and the stream is open, the connection not idle, until
                // the answer is over.
                if request.method() == Method::CONNECT {
                    // A WebSocket's stream outlives its answer: its
                    // tunnel holds it open (websocket.rs).
                    let tunnel = TunnelStream::new(activity.open_stream());
                    request.extensions_mut().insert(tunnel);
                }
                let left_early = LeftEarly::new(activity.clone());
                let open = Some(activity.open_stream());
                let (head, body) = request.into_parts();
                gateway
                    .handle_marked(
                        Box::new(head.into()),
                        ClientBody::Hyper(body),
                        peer,
                        left_early,
                    )
                    .map(served_watched(open))
            }
        });
        let connection = http.serve_connection(TokioIo::new(JoinedWrites::new(io)), service);
        // A request within the header timeout, or the connection is closed
        // (idle_limit.rs).
        let ended = entered
            .watch(
                IdleLimit::new(connection, within, activity).cutting_stalled_answers(send_timeout),
            )
            .await;
        log_end(peer, within, ended, &floods);
    }
}

/// How a client connection ended, logged at debug level (its client's
/// doing, not the proxy's), and at info a flood of resets (counted in
/// `floods`, `loadring_client_reset_floods_total`).
fn log_end(
    peer: SocketAddr,
    within: Duration,
    ended: Ended<Result<(), impl std::fmt::Display>>,
    floods: &Counter,
) {
    match ended {
        Ended::Closed(Ok(())) => {}
        Ended::Closed(Err(e)) => tracing::debug!("client {peer}: {e}"),
        Ended::NoRequest => tracing::debug!("client {peer}: no request in {within:?}"),
        Ended::Stalled { cut } => tracing::debug!(
            "client {peer}: connection closed, it took nothing of its {cut} answers for the send \
             timeout"
        ),
        Ended::Flooded { left, requests } => {
            floods.inc();
            tracing::info!(
                "client {peer}: connection closed, it reset {left} of its {requests} requests \
                 before their answers"
            );
        }
    }
}

/// Reloads the listener's certificate and key on every SIGHUP; a pair that
/// cannot be read is logged and the one in use stays.
fn spawn_tls_reload(tls: Arc<ServerTls>) -> Result<JoinHandle<()>, ProxyError> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut hangups = signal(SignalKind::hangup())
        .map_err(|e| ProxyError::new(ProxyErrorKind::Worker, format!("SIGHUP handler: {e}")))?;
    Ok(tokio::spawn(async move {
        while hangups.recv().await.is_some() {
            match tls.reload() {
                Ok(()) => tracing::info!("SIGHUP: TLS certificate reloaded"),
                Err(e) => tracing::error!("SIGHUP: TLS certificate kept: {e}"),
            }
        }
    }))
}

/// The streams an HTTP/2 client connection may have open at once.
const MAX_CLIENT_STREAMS: u32 = 200;

/// The answer to a connection over the limit, written if the socket takes it.
const AT_CAPACITY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\ncontent-length: 37\r\nconnection: close\r\n\r\ntoo many connections: try again later\n";

/// Admin connections open at once: a dashboard takes a few, a scraper
/// one. Beyond, they are refused at once, so that a flood of them cannot
/// take the file descriptors the clients' connections need.
pub const MAX_ADMIN_CONNECTIONS: usize = 64;

async fn serve_admin(
    listener: TcpListener,
    gateway: Arc<Gateway>,
    clients: ClientLimits,
    accept_log: AcceptLog,
) {
    // The dashboard's timeline, sampled beside the listener: it stops with it.
    let sampler = gateway.clone();
    let sampling = async move {
        let mut ticker = tokio::time::interval(crate::history::INTERVAL);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            ticker.tick().await;
            sampler.metrics().sample(sampler.clusters());
        }
    };
    tokio::join!(
        sampling,
        accept_admin(listener, gateway, clients, accept_log)
    );
}

/// Serves the admin listener with the clients' limits: the header timeout
/// (which hyper's HTTP/1.1 server also applies to a kept-alive
/// connection's wait), the send timeout, and [`MAX_ADMIN_CONNECTIONS`].
async fn accept_admin(
    listener: TcpListener,
    gateway: Arc<Gateway>,
    clients: ClientLimits,
    accept_log: AcceptLog,
) {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(clients.header_timeout);
    let places = Places::new(MAX_ADMIN_CONNECTIONS);
    let mut accept_errors = AcceptErrors::new(accept_log);
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                wait_out(&e, &mut accept_errors).await;
                continue;
            }
        };
        accept_errors.succeeded();
        let Some(place) = places.try_take() else {
            let _ = stream.try_write(AT_CAPACITY);
            tracing::debug!("admin client {peer}: refused, at the admin connection limit");
            continue;
        };
        let gateway = gateway.clone();
        let service = service_fn(move |request| {
            let gateway = gateway.clone();
            async move {
                Ok::<_, Infallible>(crate::admin::answer(
                    &request,
                    gateway.clusters(),
                    gateway.metrics(),
                ))
            }
        });
        let stream = SendLimit::new(stream, clients.send_timeout);
        let connection = http.serve_connection(TokioIo::new(stream), service);
        tokio::spawn(async move {
            let _place = place;
            if let Err(e) = connection.await {
                tracing::debug!("admin client {peer}: {e}");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ClusterConfig;
    use crate::workers::MARGIN;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A round-robin proxy on a port of its own over `endpoint` alone.
    fn one_endpoint(endpoint: &str) -> ProxyConfig {
        let mut cluster = ClusterConfig::new("default", "rr".parse().unwrap());
        cluster.endpoints = vec![endpoint.parse().unwrap()];
        ProxyConfig {
            listen: "127.0.0.1:0".into(),
            admin: None,
            drain_timeout: Duration::from_secs(5),
            clients: ClientLimits::default(),
            clusters: vec![cluster],
            routes: vec![],
            tls: None,
        }
    }

    /// A proxy of `workers` threads whose clients all reach the first
    /// worker's listener (the others listen where nobody connects), its
    /// one endpoint refusing connections.
    async fn lopsided_proxy(workers: usize) -> Proxy {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let refusing = closed.local_addr().unwrap();
        drop(closed);
        let config = one_endpoint(&refusing.to_string());
        let mut proxy = Proxy::bind_workers(config, Naming::Keys, workers)
            .await
            .unwrap();
        for listener in &mut proxy.workers {
            *listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.set_nonblocking(true).unwrap();
        }
        proxy
    }

    /// `proxy` served, with `count` clients connected and counted by their
    /// workers; the sender stops it.
    async fn serve_clients(
        proxy: Proxy,
        count: usize,
    ) -> (
        Vec<TcpStream>,
        Arc<WorkerLoads>,
        oneshot::Sender<()>,
        JoinHandle<Result<(), ProxyError>>,
    ) {
        let addr = proxy.local_addr().unwrap();
        let loads = proxy.loads.clone();
        let (stop, stopped) = oneshot::channel::<()>();
        let serving = tokio::spawn(proxy.serve(async {
            let _ = stopped.await;
        }));
        let mut clients = Vec::new();
        for _ in 0..count {
            clients.push(TcpStream::connect(addr).await.unwrap());
        }
        // Each connection is counted once its worker is chosen.
        for _ in 0..10_000 {
            if loads.open().iter().sum::<usize>() == count {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        (clients, loads, stop, serving)
    }

    #[tokio::test]
    async fn connections_one_worker_accepts_are_shared_with_the_others() {
        let (mut clients, loads, stop, serving) = serve_clients(lopsided_proxy(3).await, 12).await;
        let open = loads.open();
        assert_eq!(open.iter().sum::<usize>(), 12, "{open:?}");
        let (most, least) = (*open.iter().max().unwrap(), *open.iter().min().unwrap());
        assert!(most - least <= MARGIN, "{open:?}");
        // Every connection is served wherever it went: the proxy answers
        // (its only endpoint refuses, so with an error of its own).
        for client in &mut clients {
            client
                .write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
                .await
                .unwrap();
            let mut head = [0u8; 10];
            client.read_exact(&mut head).await.unwrap();
            assert_eq!(&head[..9], b"HTTP/1.1 ", "{head:?}");
            assert_eq!(head[9], b'5', "{head:?}");
        }
        drop(clients);
        let _ = stop.send(());
        serving.await.unwrap().unwrap();
        assert_eq!(loads.open(), [0, 0, 0]);
    }

    /// `/metrics`' `loadring_worker_connections` series, in worker order
    /// (the exposition's own order is its map's).
    fn worker_series(gateway: &Gateway) -> Vec<(usize, usize)> {
        let text = gateway.metrics().render(gateway.clusters());
        let mut series: Vec<(usize, usize)> = text
            .lines()
            .filter_map(|line| line.strip_prefix("loadring_worker_connections{worker=\""))
            .map(|rest| {
                let (worker, count) = rest.split_once("\"} ").unwrap();
                (worker.parse().unwrap(), count.parse().unwrap())
            })
            .collect();
        series.sort_unstable();
        series
    }

    #[tokio::test]
    async fn metrics_show_the_connections_each_worker_serves() {
        let proxy = lopsided_proxy(3).await;
        let gateway = proxy.gateway().clone();
        assert_eq!(worker_series(&gateway), [(0, 0), (1, 0), (2, 0)]);
        let (clients, loads, stop, serving) = serve_clients(proxy, 7).await;
        let open = loads.open();
        let series = worker_series(&gateway);
        assert_eq!(
            series.iter().map(|&(_, n)| n).sum::<usize>(),
            7,
            "{series:?}"
        );
        let expected: Vec<(usize, usize)> = open.into_iter().enumerate().collect();
        assert_eq!(series, expected);
        drop(clients);
        let _ = stop.send(());
        serving.await.unwrap().unwrap();
        assert_eq!(worker_series(&gateway), [(0, 0), (1, 0), (2, 0)]);
    }

    #[test]
    fn metrics_without_a_proxy_have_no_worker_series() {
        let gateway = Gateway::new(&one_endpoint("127.0.0.1:1")).unwrap();
        let text = gateway.metrics().render(gateway.clusters());
        assert!(!text.contains("loadring_worker_connections"), "{text}");
    }

    #[tokio::test]
    async fn a_single_worker_serves_every_connection_itself() {
        let (clients, loads, stop, serving) = serve_clients(lopsided_proxy(1).await, 5).await;
        assert_eq!(loads.open(), [5]);
        drop(clients);
        let _ = stop.send(());
        serving.await.unwrap().unwrap();
    }
}
