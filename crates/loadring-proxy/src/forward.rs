//! Forwarding one request: the key, the attempts over the policy's
//! candidates, the response streamed back with its guard.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crate::downstream::ClientBody;
use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Response, StatusCode, Uri, Version};
use http_body_util::BodyExt;
use loadring::{LoadReport, Outcome, Pick};

use crate::abandoned::Abandoning;
use crate::body::{GuardedBody, OnClientGone};
use crate::clients::ClientLimits;
use crate::cluster::{Backend, Cluster, SelectError};
use crate::connect::head_fields::Fields;
use crate::connect::{
    AnswerHead, Answered, Failure, OutgoingRequest, RequestHead, Upstream, UpstreamBody,
};
use crate::few_headers;
use crate::field_list::TransferCodings;
use crate::in_place::boxed_in_place;
use crate::load_report::Reading;
use crate::metrics::{ClusterCounters, Metrics};
use crate::places::Places;
use crate::request_body::{Outgoing, ReadError, RequestBody};
use crate::run_to_end::RunToEnd;
use crate::upload::Late;
// Public here before they moved to their own file.
use crate::proxy_body::empty_body;
pub use crate::proxy_body::{text_body, ProxyBody};

pub(crate) use crate::hop_by_hop::strip_hop_by_hop;

/// An HTTP/2 client's cookies, often one field a cookie, made the one
/// `Cookie` field an HTTP/1.1 backend expects: joined by `; `, in order
/// (RFC 9113 8.2.3). HTTP/1.1 servers may read only the first field.
pub fn join_cookies(headers: &mut HeaderMap) {
    let several = {
        let mut fields = few_headers::get_all(headers, &header::COOKIE);
        fields.next().is_some() && fields.next().is_some()
    };
    if !several {
        return;
    }
    let mut joined = Vec::new();
    for field in headers.get_all(header::COOKIE) {
        if !joined.is_empty() {
            joined.extend_from_slice(b"; ");
        }
        joined.extend_from_slice(field.as_bytes());
    }
    // Valid values joined by `; ` make a valid value.
    if let Ok(value) = HeaderValue::from_maybe_shared(Bytes::from(joined)) {
        headers.insert(header::COOKIE, value);
    }
}

const GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");

thread_local! {
    /// The last client address this thread wrote, as a header value: a
    /// connection's requests are served on one thread, so its address is
    /// formatted once per run of requests, not once per request.
    static LAST_PEER: std::cell::RefCell<Option<(IpAddr, HeaderValue)>> =
        const { std::cell::RefCell::new(None) };
}

/// `peer` as `X-Forwarded-For` writes it (an IPv4-mapped IPv6 address as
/// IPv4).
fn peer_value(peer: IpAddr) -> HeaderValue {
    LAST_PEER.with(|last| {
        let mut last = last.borrow_mut();
        match &*last {
            Some((ip, value)) if *ip == peer => value.clone(),
            _ => {
                let value =
                    HeaderValue::from_maybe_shared(Bytes::from(peer.to_canonical().to_string()))
                        .expect("an IP address is a valid header value");
                *last = Some((peer, value.clone()));
                value
            }
        }
    })
}

/// Appends the client's address to `X-Forwarded-For`: one field, the
/// addresses of every earlier one (in order, several lines joined as one
/// list) then the client's.
pub(crate) fn append_forwarded_for(fields: &mut Fields, peer: IpAddr) {
    use std::fmt::Write as _;
    static NAME: HeaderName = X_FORWARDED_FOR;
    let mut previous = fields.get_all(&NAME).peekable();
    if previous.peek().is_none() {
        fields.insert(X_FORWARDED_FOR, peer_value(peer));
        return;
    }
    let mut value = String::with_capacity(48);
    for line in previous {
        if let Some(line) = line.as_text() {
            value.push_str(line);
            value.push_str(", ");
        }
    }
    // Writing into a String cannot fail.
    let _ = write!(value, "{}", peer.to_canonical());
    // The String's buffer becomes the value's: no copy.
    match HeaderValue::from_maybe_shared(Bytes::from(value)) {
        Ok(value) => fields.insert(X_FORWARDED_FOR, value),
        Err(_) => fields.remove(&X_FORWARDED_FOR),
    }
}

/// Whether a backend's status says its attempt failed, for the balancer
/// (ejection, the latency-aware policies): a 5xx, or a status past 599,
/// which RFC 9110 15 calls invalid and tells a client to take as a 5xx.
/// The response itself goes on as the backend sent it, as nginx's and
/// HAProxy's do.
fn is_failure_status(status: StatusCode) -> bool {
    status.as_u16() >= 500
}

/// Methods a retry may repeat (RFC 9110 9.2.2).
fn is_idempotent(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::PUT | Method::DELETE
    )
}

/// How an attempt failed without a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NoResponse {
    /// The connection was never made: nothing reached the backend.
    Connect,
    /// The connection closed before a response began.
    Closed,
    /// Anything else (a protocol error...).
    Other,
}

fn classify(failure: &Failure) -> NoResponse {
    match failure {
        Failure::Connect(_) => NoResponse::Connect,
        _ if failure.closed_before_a_response() => NoResponse::Closed,
        _ => NoResponse::Other,
    }
}

/// The request line's target: origin-form (`/path?query`), as a backend
/// expects it from a gateway.
fn origin_form(uri: Uri) -> Uri {
    match uri.path_and_query() {
        // Already origin-form (what clients send): kept, not rebuilt.
        Some(_) if uri.scheme().is_none() && uri.authority().is_none() => uri,
        Some(pq) => Uri::from(pq.clone()),
        None => Uri::from_static("/"),
    }
}

/// How one try on one endpoint ended.
// The answer is the common case and lives only until it is taken apart:
// boxing it would cost an allocation per request to shrink a local.
#[allow(clippy::large_enum_variant)]
enum Tried {
    Answer(Answered<UpstreamBody>),
    Failed(Failure),
    /// The request was not in hand any more (a streamed body already sent).
    Gone,
    /// A WebSocket over HTTP/2 to a backend that did not announce extended
    /// CONNECT: not sent.
    NoExtendedConnect,
}

/// Why a response's framing cannot be trusted, if it cannot: both
/// `Content-Length` and `Transfer-Encoding` (RFC 9112 6.3: a sign of
/// request smuggling or a broken backend; which length is right is
/// unknowable, so the response is not forwarded).
fn malformed_framing(head: &AnswerHead) -> Option<&'static str> {
    // The rare header first: most responses need one search.
    (head.contains(&header::TRANSFER_ENCODING) && head.contains(&header::CONTENT_LENGTH))
        .then_some("both Content-Length and Transfer-Encoding")
}

/// Whether a request has a `Transfer-Encoding` other than `chunked` alone
/// ([`TransferCodings::chunked_alone`]): refused with 501 (RFC 9112 6.1).
fn unsupported_transfer_coding(fields: &Fields) -> bool {
    let mut values = fields.get_all(&header::TRANSFER_ENCODING).peekable();
    if values.peek().is_none() {
        return false;
    }
    let mut codings = TransferCodings::default();
    values.for_each(|field| codings.add(field.as_bytes()));
    !codings.chunked_alone()
}

/// The error chain on one line.
fn describe(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        text.push_str(": ");
        text.push_str(&e.to_string());
        source = e.source();
    }
    text
}

/// The gateway's answer to a request: the backend's head as the upstream
/// layer read it (not made a map for an HTTP/1.1 client), or its own.
pub(crate) type Reply = Answered<ProxyBody>;

/// A response the proxy makes itself.
pub fn local_response(status: StatusCode, text: &str) -> Response<ProxyBody> {
    let mut response = Response::new(text_body(format!("{text}\n")));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// One request being forwarded: the future [`Forwarder::forward`]
/// returns, answered with the backend's response or the gateway's own.
///
/// A bug that panics while the exchange is polled costs its request a 502,
/// not the client's connection. Unless the cluster aborts on close, a
/// `Forwarding` dropped before its answer hands the unfinished exchange to
/// a task of its own.
pub(crate) struct Forwarding {
    exchange: Exchange,
    /// The cluster's, for the log line of a panic.
    forwarder: Forwarder,
}

/// The exchange, boxed: how it ends when its client leaves.
enum Exchange {
    /// Runs on as a task when dropped unfinished.
    ToEnd(RunToEnd<dyn Future<Output = Reply> + Send>),
    /// Dropped with its client.
    Abortable(BoxedExchange),
    /// Answered, or gone with a panic.
    Over,
}

/// A boxed exchange with a response at its end.
type BoxedExchange = Pin<Box<dyn Future<Output = Reply> + Send>>;

impl Forwarding {
    /// `exchange`, run to its end or dropped with its client as
    /// `forwarder`'s cluster says.
    fn new(forwarder: Forwarder, exchange: BoxedExchange) -> Self {
        let exchange = if forwarder.cluster.config().abort_on_close {
            Exchange::Abortable(exchange)
        } else {
            Exchange::ToEnd(RunToEnd::new(exchange, forwarder.abandoning.clone()))
        };
        Forwarding {
            exchange,
            forwarder,
        }
    }

    /// Whether the answer was given (or the exchange is gone with a panic).
    pub(crate) fn is_over(&self) -> bool {
        matches!(self.exchange, Exchange::Over)
    }
}

impl std::fmt::Debug for Forwarding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Forwarding")
            .field("cluster", &self.forwarder.cluster.name())
            .finish_non_exhaustive()
    }
}

impl Future for Forwarding {
    type Output = Reply;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Reply> {
        let polled = std::panic::catch_unwind(AssertUnwindSafe(|| match &mut self.exchange {
            Exchange::ToEnd(exchange) => Pin::new(exchange).poll(cx),
            Exchange::Abortable(exchange) => exchange.as_mut().poll(cx),
            Exchange::Over => Poll::Pending,
        }));
        match polled {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(response)) => {
                self.exchange = Exchange::Over;
                Poll::Ready(response)
            }
            Err(_) => {
                // What is left of the exchange is dropped here, not spawned.
                self.exchange = Exchange::Over;
                tracing::error!(
                    cluster = self.forwarder.cluster.name(),
                    "forwarding panicked"
                );
                Poll::Ready(
                    local_response(
                        StatusCode::BAD_GATEWAY,
                        "the request could not be forwarded",
                    )
                    .into(),
                )
            }
        }
    }
}

/// Sends requests to one cluster.
#[derive(Debug, Clone)]
pub struct Forwarder {
    /// Shared: an exchange whose client left goes on with its own handle.
    inner: Arc<Inner>,
}

/// What a [`Forwarder`] holds.
#[derive(Debug)]
pub struct Inner {
    cluster: Arc<Cluster>,
    /// The cluster's name as the metrics label it is on every request.
    label: Arc<str>,
    upstream: Arc<Upstream>,
    metrics: Arc<Metrics>,
    /// The cluster's counters without endpoint labels, resolved once.
    counters: ClusterCounters,
    /// Where requests whose client left go on, or not.
    abandoning: Abandoning,
    /// The clients' limits, for tunnels (send and tunnel timeouts).
    clients: ClientLimits,
}

impl std::ops::Deref for Forwarder {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.inner
    }
}

impl Forwarder {
    /// An attempt that ends without a usable response: the policy hears a
    /// failure (releasing the slot; passive ejection is the policy's), the
    /// metrics count `code`, and the endpoint's failures one more.
    fn attempt_failed(&self, pick: Pick<Backend>, started: Instant, upstream: &Backend, code: u16) {
        pick.finish(Outcome::failure(started.elapsed()));
        self.metrics.request(&self.label, upstream, code);
        upstream.count_failure();
    }

    /// The proxy's own answer: for a gRPC call a gRPC status (counted
    /// against `endpoint` when one was tried), else plain text.
    fn refuse(
        &self,
        grpc: bool,
        endpoint: Option<&Backend>,
        status: StatusCode,
        why: &str,
    ) -> Reply {
        if !grpc {
            return local_response(status, why).into();
        }
        if let Some(endpoint) = endpoint {
            self.metrics.grpc_response(
                &self.label,
                endpoint.shared_addr(),
                crate::grpc::status_for(status),
            );
        }
        let (head, ()) = crate::grpc::local_answer(status, why).into_parts();
        Answered {
            head: head.into(),
            body: empty_body(),
        }
    }

    /// The answer to a client that sent nothing of its request body for
    /// `idle`, read ahead or streamed: 408, logged at debug (the client's
    /// doing).
    fn body_stalled(&self, grpc: bool, endpoint: Option<&Backend>, idle: Duration) -> Reply {
        tracing::debug!(
            cluster = self.cluster.name(),
            "the request body stalled for {idle:?}"
        );
        self.refuse(
            grpc,
            endpoint,
            StatusCode::REQUEST_TIMEOUT,
            &format!("the request body stalled: nothing for {idle:?}"),
        )
    }

    /// The backend's load report in `headers`, removed from them and
    /// counted, when the cluster reads reports; a malformed one is ignored.
    fn take_report(&self, headers: &mut HeaderMap, upstream: &Backend) -> Option<LoadReport> {
        let spec = self.cluster.config().load_report.as_ref()?;
        let reading = spec.take(headers);
        self.metrics
            .load_report(&self.label, upstream, reading.label());
        match reading {
            Reading::InService(count) => Some(LoadReport::new(count)),
            Reading::Missing => None,
            Reading::Malformed(why) => {
                // Counted in /metrics; a log line per response would flood.
                tracing::debug!(
                    cluster = self.cluster.name(),
                    endpoint = upstream.addr(),
                    "load report ignored: {why}"
                );
                None
            }
        }
    }

    /// A forwarder for `cluster`, with its own upstream connections.
    /// Requests whose client left go on in `abandoned`'s places; tunnels
    /// close as `clients`' send and tunnel timeouts say.
    pub fn new(
        cluster: Arc<Cluster>,
        metrics: Arc<Metrics>,
        abandoned: Places,
        clients: ClientLimits,
    ) -> Self {
        Forwarder {
            inner: Arc::new(Inner {
                clients,
                label: cluster.name().into(),
                counters: metrics.cluster(cluster.name()),
                abandoning: Abandoning::new(abandoned, metrics.abandoned_cancelled(cluster.name())),
                upstream: Arc::new(Upstream::for_cluster(&cluster)),
                cluster,
                metrics,
            }),
        }
    }

    /// The cluster.
    pub fn cluster(&self) -> &Arc<Cluster> {
        &self.cluster
    }

    /// Forwards `request` from `peer`: the policy's endpoint first, then
    /// (after a connect failure, or a connection closed before a response
    /// on an idempotent request, when the body can be sent again: none, or
    /// one of at most `retry_buffer` bytes, read whole first) the next
    /// candidates, up to `retries` more; 503 when no endpoint is eligible,
    /// 502 when the attempts got no response, 504 when the backend did not
    /// answer in time, 400 when the client's body could not be read.
    ///
    /// A request lost on a stale keep-alive connection (closed before the
    /// backend read it) is sent again at once on a fresh connection to the
    /// same endpoint, whatever its method, when its body can be sent again;
    /// that is not one of the `retries`.
    ///
    /// Unless the cluster aborts on close, a client that leaves does not
    /// cancel the backend's work: the exchange goes on as a task of its
    /// own, and the endpoint's slot is held until the backend is done.
    /// (It runs inline while the client waits: no task per request.)
    ///
    /// The checks and the key are the exchange's: this only boxes it, and
    /// the future returned is a few words (hyper moves it, and each move
    /// copies what it holds).
    pub(crate) fn forward(
        &self,
        request: Box<RequestHead>,
        body: ClientBody,
        peer: SocketAddr,
    ) -> Forwarding {
        // Built in its box (see `in_place`): the exchange is kilobytes.
        let exchange = boxed_in_place!(self.clone().exchange(request, body, peer));
        Forwarding::new(self.clone(), exchange)
    }

    async fn exchange(
        self,
        mut parts: Box<RequestHead>,
        body: ClientBody,
        peer: SocketAddr,
    ) -> Reply {
        let cluster = &self.cluster;
        let name = cluster.name();
        let grpc = crate::grpc::is_grpc(&parts.fields);
        // The endpoint of the last attempt, for a gRPC call's status.
        let mut last: Option<Backend> = None;
        let tunnel =
            match crate::websocket::Tunnel::asked(&mut parts, cluster.config().backend_protocol) {
                Ok(tunnel) => tunnel,
                Err(why) => return local_response(StatusCode::NOT_IMPLEMENTED, why).into(),
            };
        let extended_connect = tunnel
            .as_ref()
            .is_some_and(crate::websocket::Tunnel::needs_extended_connect);
        // Only a body has a transfer coding: a request without one skips
        // the look at its fields.
        if !hyper::body::Body::is_end_stream(&body) && unsupported_transfer_coding(&parts.fields) {
            return local_response(
                StatusCode::NOT_IMPLEMENTED,
                "Transfer-Encoding other than chunked alone is not supported",
            )
            .into();
        }
        // A target with an authority (HTTP/2's `:authority`, an absolute
        // form) names the host, and routing went by it: the `Host` the
        // backend and the key see is that one, whatever the client's said
        // (RFC 9112 3.2.2, RFC 9113 8.3.1).
        if let Some(authority) = parts.uri.authority() {
            if let Ok(host) = HeaderValue::from_str(authority.as_str()) {
                parts.fields.insert(header::HOST, host);
            }
        }
        let key = if cluster.is_hashing() {
            cluster
                .key()
                .evaluate_keyed((&*parts).into(), peer.ip(), cluster.key_style())
        } else {
            None
        };
        // A gRPC call's `TE: trailers` goes on (servers such as grpc-go
        // refuse a call without it); HTTP/2 allows no other TE.
        let te_trailers = grpc
            && parts
                .fields
                .get(&header::TE)
                .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"trailers"));
        parts.fields.strip_hop_by_hop();
        if parts.version == Version::HTTP_2
            && cluster.config().backend_protocol == crate::config::BackendProtocol::Http1
        {
            // An HTTP/2 client's fields are hyper's map.
            if let Fields::Map(map) = &mut parts.fields {
                join_cookies(map);
            }
        }
        if te_trailers {
            parts
                .fields
                .insert(header::TE, HeaderValue::from_static("trailers"));
        }
        if let Some(tunnel) = &tunnel {
            tunnel.ask(&mut parts);
        }
        append_forwarded_for(&mut parts.fields, peer.ip());
        let had_host = parts.fields.contains(&header::HOST);
        // Without one from the client, each attempt names its endpoint.
        //
        // What each attempt sends besides the body: moved into the request
        // unless a resend of a written request is possible (then copied).
        // Its version is the connection's; its extensions hold an extended
        // CONNECT's `:protocol` alone (a WebSocket to an HTTP/2 backend).
        let protocol = parts.extensions.remove::<hyper::ext::Protocol>();
        let mut extensions = http::Extensions::new();
        if let Some(protocol) = protocol {
            extensions.insert(protocol);
        }
        parts.uri = origin_form(std::mem::take(&mut parts.uri));
        parts.version = Version::HTTP_11;
        parts.extensions = extensions;
        let mut head = Some(parts);
        let config = cluster.config();
        let retries = config.retries;
        // A body read whole can be sent again; with no retry allowed there
        // is no reason to hold it back. A gRPC call's body is a stream the
        // client may feed only as answers come: it flows at once, and like
        // any streamed body it is sent once (not retried).
        let read_ahead = if retries == 0 || grpc {
            0
        } else {
            config.retry_buffer
        };
        let mut body = match RequestBody::read(body, read_ahead, config.timeout).await {
            Ok(body) => body,
            Err(ReadError::Client(e)) => {
                let why = describe(&e);
                tracing::debug!(cluster = name, "reading the request body: {why}");
                return self.refuse(
                    grpc,
                    last.as_ref(),
                    StatusCode::BAD_REQUEST,
                    &format!("the request body could not be read: {why}"),
                );
            }
            Err(ReadError::Stalled(idle)) => {
                return self.body_stalled(grpc, last.as_ref(), idle);
            }
        };
        let replayable = body.is_replayable();
        let upload = body.upload();
        let idempotent = head.as_ref().is_some_and(|h| is_idempotent(&h.method));
        // A request a connection gave back unsent: its body, as it was.
        let mut returned_body: Option<Outgoing> = None;
        let mut tried: Vec<String> = Vec::new();
        let timeout = config.timeout;
        let mut attempt = 0;
        loop {
            let selected = {
                let tried: Vec<&str> = tried.iter().map(String::as_str).collect();
                cluster.select(key.as_ref(), &tried)
            };
            let selected = match selected {
                Ok(s) => s,
                Err(SelectError::NoEligibleEndpoint) if tried.is_empty() => {
                    // Logged where endpoints are marked unhealthy, not per request.
                    tracing::debug!(cluster = name, "no eligible endpoint: 503");
                    return self.refuse(
                        grpc,
                        last.as_ref(),
                        StatusCode::SERVICE_UNAVAILABLE,
                        "no eligible endpoint",
                    );
                }
                Err(SelectError::NoEligibleEndpoint) => {
                    return self.refuse(
                        grpc,
                        last.as_ref(),
                        StatusCode::BAD_GATEWAY,
                        "no endpoint answered",
                    );
                }
                Err(SelectError::Refused(why)) => {
                    tracing::warn!(cluster = name, "request refused by the balancer: {why}");
                    return self.refuse(grpc, last.as_ref(), StatusCode::SERVICE_UNAVAILABLE, &why);
                }
            };
            if selected.spilled {
                self.counters.spill();
            }
            if attempt > 0 {
                self.counters.retry();
            }
            let pick = selected.pick;
            let upstream = pick.value().clone();
            if grpc {
                last = Some(upstream.clone());
            }
            let started = Instant::now();
            let mut fresh_connection = false;
            let result = loop {
                // Pinned where it is built, and the timeout given a reference:
                // moved into the timeout, it would be copied, all its
                // kilobytes, once into the call and once out.
                let tried_once = {
                    let mut trying = std::pin::pin!(async {
                        let connection = match self
                            .upstream
                            .checkout(upstream.shared_addr(), fresh_connection)
                            .await
                        {
                            Ok(c) => c,
                            Err(e) => return Tried::Failed(Failure::Connect(e)),
                        };
                        if extended_connect
                            && !connection.extended_connect(config.connect_timeout).await
                        {
                            return Tried::NoExtendedConnect;
                        }
                        let Some(outgoing_body) =
                            returned_body.take().or_else(|| body.next_attempt())
                        else {
                            return Tried::Gone;
                        };
                        // Copied only when the request may have to be sent again
                        // after it was written (a retry left for an idempotent
                        // request) over a connection that keeps it (HTTP/2):
                        // HTTP/1.1 gives a written request's head back.
                        let resend = replayable
                            && !connection.returns_written_requests()
                            && idempotent
                            && attempt < retries;
                        let this_head = match (resend, head.as_ref()) {
                            (true, Some(h)) => h.clone(),
                            _ => match head.take() {
                                Some(h) => h,
                                None => return Tried::Gone,
                            },
                        };
                        let mut request = OutgoingRequest {
                            head: this_head,
                            body: outgoing_body,
                        };
                        if !had_host {
                            if let Ok(host) = HeaderValue::from_str(upstream.authority().as_str()) {
                                request.head.fields.insert(header::HOST, host);
                            }
                        }
                        match connection.send(request).await {
                            Ok(response) => Tried::Answer(response),
                            Err(failure) => Tried::Failed(failure),
                        }
                    });
                    // A streamed body's attempt is timed from its last step
                    // (upload.rs): when the time runs out, it runs again for
                    // what is left. Any other attempt is timed from its start.
                    // One timer future here, whichever: the request path's
                    // code stays as it was without uploads.
                    if let Some(upload) = &upload {
                        upload.step();
                    }
                    // The first try is timed from `started` (the clock read
                    // once for both); a resend on a fresh connection, and a
                    // streamed body's next wait, from now.
                    let mut from = if fresh_connection {
                        Instant::now()
                    } else {
                        started
                    };
                    let mut budget = timeout;
                    let timed = loop {
                        match crate::slot_timer::timeout_from(from, budget, trying.as_mut()).await {
                            Ok(t) => break Ok(t),
                            Err(_) => match upload.as_ref().map(|u| u.left(timeout)) {
                                Some(Ok(left)) => {
                                    from = Instant::now();
                                    budget = left;
                                }
                                Some(Err(late)) => break Err(late),
                                None => break Err(Late::Backend),
                            },
                        }
                    };
                    match timed {
                        Ok(t) => t,
                        Err(late) => break Err(late),
                    }
                };
                match tried_once {
                    Tried::Failed(Failure::Unsent {
                        request: Some(request),
                        error,
                    }) => {
                        // Nothing of it reached the backend, and it is in
                        // hand whatever its body.
                        let OutgoingRequest { head: h, body: b } = *request;
                        head = Some(h);
                        returned_body = Some(b);
                        if fresh_connection {
                            break Ok(Tried::Failed(Failure::Unsent {
                                request: None,
                                error,
                            }));
                        }
                        tracing::debug!(
                            cluster = name,
                            endpoint = upstream.addr(),
                            "pooled connection unusable before the request was written \
                             ({error}), sending again on a new one"
                        );
                        self.counters.reused_connection_retry();
                        fresh_connection = true;
                    }
                    Tried::Failed(Failure::Sent {
                        error,
                        stale: true,
                        head: written,
                    }) if !fresh_connection
                        && replayable
                        && (head.is_some() || written.is_some()) =>
                    {
                        if let Some(written) = written {
                            head = Some(written);
                        }
                        tracing::debug!(
                            cluster = name,
                            endpoint = upstream.addr(),
                            "stale keep-alive connection, sending again on a new one: {}",
                            describe(&error)
                        );
                        self.counters.reused_connection_retry();
                        fresh_connection = true;
                    }
                    other => break Ok(other),
                }
            };
            match result {
                Ok(Tried::Answer(Answered { head, body })) => {
                    // Made a map for what reads its fields further: a gRPC
                    // status, a switch, a load report. Others stay as read.
                    let needs_map = grpc || tunnel.is_some() || config.load_report.is_some();
                    let head = if needs_map {
                        head.into_parts().map(AnswerHead::from)
                    } else {
                        Ok(head)
                    };
                    let checked = head.map_err(|e| e.to_string()).and_then(|head| {
                        let malformed = malformed_framing(&head).or_else(|| {
                            // A switch nothing asked for (RFC 9110 15.2.2):
                            // the client would wait on a protocol it never
                            // chose.
                            (tunnel.is_none() && head.status() == StatusCode::SWITCHING_PROTOCOLS)
                                .then_some(
                                "101 Switching Protocols to a request that asked for no upgrade",
                            )
                        });
                        match malformed {
                            Some(why) => Err(why.to_owned()),
                            None => Ok(head),
                        }
                    });
                    let mut head = match checked {
                        Ok(head) => head,
                        Err(why) => {
                            // Its connection is closed with it: its state is
                            // unknown.
                            drop(body);
                            self.attempt_failed(pick, started, &upstream, 502);
                            tracing::warn!(
                                cluster = name,
                                endpoint = upstream.addr(),
                                "malformed response: {why}"
                            );
                            return self.refuse(
                                grpc,
                                last.as_ref(),
                                StatusCode::BAD_GATEWAY,
                                "malformed response from the backend",
                            );
                        }
                    };
                    if let Some(why) = tunnel.as_ref().and_then(|t| t.unusable(head.status())) {
                        drop(body);
                        self.attempt_failed(pick, started, &upstream, 502);
                        tracing::warn!(cluster = name, endpoint = upstream.addr(), "{why}");
                        return self.refuse(
                            grpc,
                            last.as_ref(),
                            StatusCode::BAD_GATEWAY,
                            "the backend did not switch to WebSocket",
                        );
                    }
                    let status = head.status();
                    self.metrics
                        .request(&self.label, &upstream, status.as_u16());
                    // A trailers-only gRPC answer has its status here.
                    let grpc_status = if grpc {
                        head.map().and_then(crate::grpc::status)
                    } else {
                        None
                    };
                    let grpc_failed = match grpc_status {
                        Some(code) => {
                            self.metrics
                                .grpc_response(&self.label, upstream.shared_addr(), code);
                            crate::grpc::is_failure(code)
                        }
                        _ => false,
                    };
                    let tally = (grpc && !grpc_failed && !head.contains(&GRPC_STATUS)).then(|| {
                        crate::grpc::Tally {
                            metrics: self.metrics.clone(),
                            label: self.label.clone(),
                            upstream: upstream.clone(),
                        }
                    });
                    // The outcome (the balancer's lifecycle: ejection, `la`,
                    // peak EWMA) is given when the body ends.
                    let succeeded = !is_failure_status(status) && !grpc_failed;
                    if !succeeded {
                        upstream.count_failure();
                    }
                    if let Some(tunnel) = tunnel {
                        if tunnel.switched(status) {
                            // A map: made above, a switch was asked for.
                            let AnswerHead::Parts(mut parts) = head else {
                                return local_response(
                                    StatusCode::BAD_GATEWAY,
                                    "the backend's switch could not be read",
                                )
                                .into();
                            };
                            let protocol = parts.headers.get(header::UPGRADE).cloned();
                            strip_hop_by_hop(&mut parts.headers);
                            let response = Response::from_parts(*parts, body);
                            return tunnel
                                .open(response, protocol, pick, started, &self.clients)
                                .into();
                        }
                    }
                    head.strip_hop_by_hop();
                    let report = match &mut head {
                        AnswerHead::Parts(parts) => self.take_report(&mut parts.headers, &upstream),
                        // Read only when the cluster reads reports, and then
                        // a map.
                        AnswerHead::Raw(_) => None,
                    };
                    let on_client_gone = if config.abort_on_close {
                        OnClientGone::Abort
                    } else {
                        OnClientGone::Drain(self.abandoning.clone())
                    };
                    let guarded =
                        GuardedBody::new(body, pick, started, succeeded, timeout, on_client_gone)
                            .with_report(report)
                            .with_grpc(tally);
                    return Answered {
                        head,
                        body: guarded.boxed_unsync(),
                    };
                }
                Ok(Tried::NoExtendedConnect) => {
                    // Not a failure of the endpoint: it serves what it
                    // announced. The slot goes back without an outcome.
                    drop(pick);
                    self.metrics.request(&self.label, &upstream, 501);
                    return local_response(
                        StatusCode::NOT_IMPLEMENTED,
                        "the backend does not take WebSockets over HTTP/2: \
                         it did not announce extended CONNECT (RFC 8441)",
                    )
                    .into();
                }
                Ok(Tried::Gone) => {
                    // Unreachable: a request is never tried once it is gone.
                    self.attempt_failed(pick, started, &upstream, 502);
                    return self.refuse(
                        grpc,
                        last.as_ref(),
                        StatusCode::BAD_GATEWAY,
                        "no response from the backend",
                    );
                }
                Ok(Tried::Failed(Failure::Connect(e))) if e.is_local() => {
                    // Out of descriptors or ports here, not the endpoint's
                    // doing: no verdict on it (counted against it, such
                    // failures would eject healthy endpoints one by one),
                    // and no retry, which would meet the same want. The
                    // worker's idle connections give their descriptors
                    // back for the requests that follow.
                    crate::connect::pool::shed();
                    drop(pick);
                    self.metrics.request(&self.label, &upstream, 503);
                    tracing::warn!(
                        cluster = name,
                        endpoint = upstream.addr(),
                        "{e}: out of local resources, answered 503 (the endpoint not blamed)"
                    );
                    return self.refuse(
                        grpc,
                        last.as_ref(),
                        StatusCode::SERVICE_UNAVAILABLE,
                        "the proxy is out of connections: try again later",
                    );
                }
                Ok(Tried::Failed(mut failure)) => {
                    self.attempt_failed(pick, started, &upstream, 502);
                    if let Some(written) = failure.take_head() {
                        head = Some(written);
                    }
                    let in_hand = head.is_some() && (replayable || returned_body.is_some());
                    let retryable = in_hand
                        && match classify(&failure) {
                            NoResponse::Connect => true,
                            NoResponse::Closed => {
                                idempotent || matches!(failure, Failure::Unsent { .. })
                            }
                            NoResponse::Other => false,
                        };
                    if retryable && attempt < retries {
                        tracing::debug!(
                            cluster = name,
                            endpoint = upstream.addr(),
                            "retrying: {}",
                            describe(failure.error())
                        );
                        tried.push(upstream.addr().to_string());
                        attempt += 1;
                        continue;
                    }
                    let what = if failure.answered_malformed() {
                        "malformed response from the backend"
                    } else {
                        "no response from the backend"
                    };
                    tracing::warn!(
                        cluster = name,
                        endpoint = upstream.addr(),
                        "{what}: {}",
                        describe(failure.error())
                    );
                    return self.refuse(grpc, last.as_ref(), StatusCode::BAD_GATEWAY, what);
                }
                Err(Late::Client) => {
                    // The client's pause, not the endpoint's: no verdict.
                    drop(pick);
                    self.metrics.request(&self.label, &upstream, 408);
                    return self.body_stalled(grpc, last.as_ref(), timeout);
                }
                Err(Late::Backend) => {
                    self.attempt_failed(pick, started, &upstream, 504);
                    tracing::warn!(
                        cluster = name,
                        endpoint = upstream.addr(),
                        "no response within {timeout:?}"
                    );
                    return self.refuse(
                        grpc,
                        last.as_ref(),
                        StatusCode::GATEWAY_TIMEOUT,
                        "the backend did not answer in time",
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};

    use tokio::sync::oneshot;

    use super::*;
    use crate::config::ClusterConfig;

    fn forwarder(abort_on_close: bool) -> Forwarder {
        let mut config = ClusterConfig::new("c", "rr".parse().unwrap());
        config.endpoints = vec!["127.0.0.1:9".parse().unwrap()];
        config.abort_on_close = abort_on_close;
        let cluster = Arc::new(Cluster::new(config).unwrap());
        Forwarder::new(
            cluster,
            Arc::new(Metrics::new(true)),
            Places::new(16),
            ClientLimits::default(),
        )
    }

    fn alive_tasks() -> usize {
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks()
    }

    /// A bug in an exchange costs its request a 502, whether the cluster
    /// aborts on close or not, and what is left of it is not run again.
    #[tokio::test]
    async fn an_exchange_that_panics_is_answered_502_and_not_spawned() {
        for abort_on_close in [false, true] {
            let before = alive_tasks();
            let exchange: BoxedExchange = Box::pin(async move {
                if before < usize::MAX {
                    panic!("a bug in the exchange");
                }
                local_response(StatusCode::OK, "unreachable").into()
            });
            let response = Forwarding::new(forwarder(abort_on_close), exchange).await;
            assert_eq!(
                response.head.status(),
                StatusCode::BAD_GATEWAY,
                "abort_on_close {abort_on_close}"
            );
            assert_eq!(alive_tasks(), before, "abort_on_close {abort_on_close}");
        }
    }

    /// Dropped before its answer (the client left), an exchange goes on as
    /// a task, unless the cluster aborts on close.
    #[tokio::test]
    async fn a_forwarding_dropped_unfinished_goes_on_unless_the_cluster_aborts() {
        for abort_on_close in [false, true] {
            let (go, wait) = oneshot::channel::<()>();
            let finished = Arc::new(AtomicBool::new(false));
            let ran_to_end = finished.clone();
            let exchange: BoxedExchange = Box::pin(async move {
                let _ = wait.await;
                ran_to_end.store(true, SeqCst);
                local_response(StatusCode::OK, "done").into()
            });
            let mut forwarding = Forwarding::new(forwarder(abort_on_close), exchange);
            let polled = std::future::poll_fn(|cx| {
                Poll::Ready(Pin::new(&mut forwarding).poll(cx).is_pending())
            })
            .await;
            assert!(polled, "waits for its backend");
            let before = alive_tasks();
            drop(forwarding);
            let spawned = alive_tasks() - before;
            let _ = go.send(());
            if abort_on_close {
                assert_eq!(spawned, 0, "dropped with its client");
                tokio::task::yield_now().await;
                assert!(!finished.load(SeqCst));
            } else {
                assert_eq!(spawned, 1, "handed to a task");
                let ran = tokio::time::timeout(std::time::Duration::from_secs(60), async {
                    while !finished.load(SeqCst) {
                        tokio::task::yield_now().await;
                    }
                });
                assert!(ran.await.is_ok(), "the task ran the exchange to its end");
            }
        }
    }

    /// 5xx and the invalid statuses past 599 (RFC 9110 15) are failures;
    /// informational, success, redirection and client errors are not.
    #[test]
    fn server_errors_and_invalid_statuses_are_failures() {
        for (code, failure) in [
            (100, false),
            (200, false),
            (304, false),
            (404, false),
            (429, false),
            (499, false),
            (500, true),
            (503, true),
            (599, true),
            (600, true),
            (999, true),
        ] {
            let status = StatusCode::from_u16(code).unwrap();
            assert_eq!(is_failure_status(status), failure, "{code}");
        }
    }

    #[test]
    fn only_chunked_alone_is_a_transfer_coding_forwarded() {
        for (fields, refused) in [
            (&[][..], false),
            (&["chunked"][..], false),
            (&["Chunked "][..], false),
            (&["", " chunked ,"][..], false),
            (&["gzip, chunked"][..], true),
            (&["gzip", "chunked"][..], true),
            (&["chunked, chunked"][..], true),
            (&["chunked", "chunked"][..], true),
            (&["identity"][..], true),
            (&[""][..], true),
        ] {
            let mut h = HeaderMap::new();
            h.insert("x-user", HeaderValue::from_static("alice"));
            let mut text = String::from("HTTP/1.1 200 OK\r\nX-User: alice\r\n");
            for field in fields {
                h.append(header::TRANSFER_ENCODING, HeaderValue::from_static(field));
                text.push_str(&format!("Transfer-Encoding: {field}\r\n"));
            }
            text.push_str("\r\n");
            let raw = Fields::Raw(Box::new(crate::connect::raw_fields::read(&text)));
            assert_eq!(
                unsupported_transfer_coding(&Fields::Map(h)),
                refused,
                "{fields:?}"
            );
            assert_eq!(unsupported_transfer_coding(&raw), refused, "raw {fields:?}");
        }
    }

    #[test]
    fn cookies_are_joined_in_order_and_other_fields_kept() {
        let mut h = HeaderMap::new();
        h.append(header::COOKIE, HeaderValue::from_static("a=1"));
        h.append("x-user", HeaderValue::from_static("alice"));
        h.append(header::COOKIE, HeaderValue::from_static("b=2; c=3"));
        h.append(header::COOKIE, HeaderValue::from_static("d=4"));
        join_cookies(&mut h);
        let cookies: Vec<_> = h.get_all(header::COOKIE).iter().collect();
        assert_eq!(cookies, ["a=1; b=2; c=3; d=4"]);
        assert_eq!(h["x-user"], "alice");
        assert_eq!(h.len(), 2);
        // One field, or none: left as it is.
        for one in [&["a=1"][..], &[][..]] {
            let mut h = HeaderMap::new();
            for v in one {
                h.append(header::COOKIE, HeaderValue::from_static(v));
            }
            let before = h.clone();
            join_cookies(&mut h);
            assert_eq!(h, before);
        }
    }

    /// The values of `X-Forwarded-For` in `fields`.
    fn forwarded(fields: &Fields) -> Vec<String> {
        fields
            .get_all(&X_FORWARDED_FOR)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .collect()
    }

    #[test]
    fn forwarded_for_appends() {
        let mut h = Fields::Map(HeaderMap::new());
        append_forwarded_for(&mut h, "10.0.0.1".parse().unwrap());
        assert_eq!(forwarded(&h), ["10.0.0.1"]);
        append_forwarded_for(&mut h, "::ffff:10.0.0.2".parse().unwrap());
        assert_eq!(forwarded(&h), ["10.0.0.1, 10.0.0.2"]);
        // Several lines: one list, in order, then the client.
        let Fields::Map(map) = &mut h else {
            panic!("a map");
        };
        map.append("x-forwarded-for", HeaderValue::from_static("10.0.0.3"));
        append_forwarded_for(&mut h, "2001:db8::1".parse().unwrap());
        assert_eq!(forwarded(&h), ["10.0.0.1, 10.0.0.2, 10.0.0.3, 2001:db8::1"]);
        // The same of fields as a client sent them, in any spelling.
        let read = |text: &str| Fields::Raw(Box::new(crate::connect::raw_fields::read(text)));
        let mut raw = read("HTTP/1.1 200 OK\r\nHost: a\r\n\r\n");
        append_forwarded_for(&mut raw, "10.0.0.1".parse().unwrap());
        assert_eq!(forwarded(&raw), ["10.0.0.1"]);
        let mut raw = read(
            "HTTP/1.1 200 OK\r\nX-Forwarded-For: 10.0.0.1, 10.0.0.2\r\nHost: a\r\n\
             x-forwarded-FOR: 10.0.0.3\r\n\r\n",
        );
        append_forwarded_for(&mut raw, "2001:db8::1".parse().unwrap());
        assert_eq!(
            forwarded(&raw),
            ["10.0.0.1, 10.0.0.2, 10.0.0.3, 2001:db8::1"]
        );
        assert!(raw.contains(&header::HOST));
    }

    /// Clients in turn on one thread: each request names its own.
    #[test]
    fn forwarded_for_names_each_client_in_turn() {
        for (peer, want) in [
            ("10.0.0.1", "10.0.0.1"),
            ("10.0.0.1", "10.0.0.1"),
            ("2001:db8::1", "2001:db8::1"),
            ("::ffff:10.0.0.9", "10.0.0.9"),
            ("10.0.0.1", "10.0.0.1"),
        ] {
            let mut h = Fields::Map(HeaderMap::new());
            append_forwarded_for(&mut h, peer.parse().unwrap());
            assert_eq!(forwarded(&h), [want], "{peer}");
        }
    }
}
