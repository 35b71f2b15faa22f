//! Forwarding one request: the key, the attempts over the policy's
//! candidates, the response streamed back with its guard.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, Response, StatusCode, Uri, Version};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::capture_connection;
use loadring::{LoadReport, Outcome, Pick};

use crate::body::{BoxError, GuardedBody, OnClientGone};
use crate::cluster::{Backend, Cluster, SelectError};
use crate::load_report::Reading;
use crate::metrics::{ClusterCounters, Metrics};
use crate::request_body::{ReadError, RequestBody};
use crate::reused::{
    close_connection, closed_before_a_response, lost_before_processing, unless_dropped_unsent,
};
// Public here before they moved below `health`, which uses them too.
pub use crate::upstream_client::{client, empty_body, fresh_client, text_body, Client, ProxyBody};

/// Headers that describe one connection, not the request (RFC 9110 7.6.1),
/// removed both ways.
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "upgrade",
];

/// Removes hop-by-hop headers, those the `Connection` header names included.
/// `Transfer-Encoding` goes too: hyper frames each side's body itself.
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in HOP_BY_HOP {
        headers.remove(name);
    }
    headers.remove(header::TRANSFER_ENCODING);
}

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");

/// Appends the client's address to `X-Forwarded-For`: one header, the
/// addresses of every earlier one (in order, several lines joined as one
/// list) then the client's.
pub fn append_forwarded_for(headers: &mut HeaderMap, peer: IpAddr) {
    use std::fmt::Write as _;
    let mut value = String::with_capacity(48);
    for previous in headers.get_all(&X_FORWARDED_FOR) {
        if let Ok(previous) = previous.to_str() {
            value.push_str(previous);
            value.push_str(", ");
        }
    }
    // Writing into a String cannot fail.
    let _ = write!(value, "{}", peer.to_canonical());
    // The String's buffer becomes the value's: no copy.
    match HeaderValue::from_maybe_shared(Bytes::from(value)) {
        Ok(value) => {
            headers.insert(X_FORWARDED_FOR, value);
        }
        Err(_) => {
            headers.remove(X_FORWARDED_FOR);
        }
    }
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

fn classify(error: &hyper_util::client::legacy::Error) -> NoResponse {
    if error.is_connect() {
        NoResponse::Connect
    } else if closed_before_a_response(error) {
        NoResponse::Closed
    } else {
        NoResponse::Other
    }
}

/// Why a response's framing cannot be trusted, if it cannot: both
/// `Content-Length` and `Transfer-Encoding` (RFC 9112 6.3: a sign of
/// request smuggling or a broken backend; which length is right is
/// unknowable, so the response is not forwarded).
fn malformed_framing(headers: &HeaderMap) -> Option<&'static str> {
    (headers.contains_key(header::CONTENT_LENGTH)
        && headers.contains_key(header::TRANSFER_ENCODING))
    .then_some("both Content-Length and Transfer-Encoding")
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

/// Sends requests to one cluster.
#[derive(Debug, Clone)]
pub struct Forwarder {
    cluster: Arc<Cluster>,
    /// The cluster's name as the metrics label it is on every request.
    label: Arc<str>,
    client: Client,
    /// For requests lost on a stale keep-alive connection.
    fresh: Client,
    metrics: Arc<Metrics>,
    /// The cluster's counters without endpoint labels, resolved once.
    counters: ClusterCounters,
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

    /// A forwarder for `cluster` over `client`.
    pub fn new(cluster: Arc<Cluster>, client: Client, metrics: Arc<Metrics>) -> Self {
        Forwarder {
            label: cluster.name().into(),
            counters: metrics.cluster(cluster.name()),
            fresh: fresh_client(cluster.config().connect_timeout),
            cluster,
            client,
            metrics,
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
    /// Unless the cluster aborts on close, the exchange runs on its own
    /// task: a client that leaves does not cancel the backend's work, and
    /// the endpoint's slot is held until the backend is done.
    pub async fn forward(
        &self,
        request: Request<Incoming>,
        peer: SocketAddr,
    ) -> Response<ProxyBody> {
        if self.cluster.config().abort_on_close {
            return self.exchange(request, peer).await;
        }
        let this = self.clone();
        match tokio::spawn(async move { this.exchange(request, peer).await }).await {
            Ok(response) => response,
            Err(e) => {
                tracing::error!(cluster = self.cluster.name(), "forwarding failed: {e}");
                local_response(
                    StatusCode::BAD_GATEWAY,
                    "the request could not be forwarded",
                )
            }
        }
    }

    async fn exchange(&self, request: Request<Incoming>, peer: SocketAddr) -> Response<ProxyBody> {
        let cluster = &self.cluster;
        let name = cluster.name();
        let (mut parts, body) = request.into_parts();
        let key = if cluster.is_hashing() {
            cluster
                .key()
                .evaluate(&parts, peer.ip(), cluster.key_style())
        } else {
            None
        };
        strip_hop_by_hop(&mut parts.headers);
        append_forwarded_for(&mut parts.headers, peer.ip());
        let path_and_query = parts
            .uri
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| http::uri::PathAndQuery::from_static("/"));
        let retries = cluster.config().retries;
        // A body read whole can be sent again; with no retry allowed there
        // is no reason to hold it back.
        let read_ahead = if retries == 0 {
            0
        } else {
            cluster.config().retry_buffer
        };
        let mut body = match RequestBody::read(body, read_ahead, cluster.config().timeout).await {
            Ok(body) => body,
            Err(ReadError::Client(e)) => {
                let why = describe(&e);
                tracing::debug!(cluster = name, "reading the request body: {why}");
                return local_response(
                    StatusCode::BAD_REQUEST,
                    &format!("the request body could not be read: {why}"),
                );
            }
            Err(ReadError::Stalled(idle)) => {
                tracing::debug!(cluster = name, "the request body stalled for {idle:?}");
                return local_response(
                    StatusCode::REQUEST_TIMEOUT,
                    &format!("the request body stalled: nothing for {idle:?}"),
                );
            }
        };
        let replayable = body.is_replayable();
        let idempotent = is_idempotent(&parts.method);
        let mut tried: Vec<String> = Vec::new();
        let timeout = cluster.config().timeout;
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
                    return local_response(StatusCode::SERVICE_UNAVAILABLE, "no eligible endpoint");
                }
                Err(SelectError::NoEligibleEndpoint) => {
                    return local_response(StatusCode::BAD_GATEWAY, "no endpoint answered");
                }
                Err(SelectError::Refused(why)) => {
                    tracing::warn!(cluster = name, "request refused by the balancer: {why}");
                    return local_response(StatusCode::SERVICE_UNAVAILABLE, &why);
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
            let uri = Uri::builder()
                .scheme("http")
                .authority(upstream.authority().clone())
                .path_and_query(path_and_query.clone())
                .build();
            let uri = match uri {
                Ok(uri) => uri,
                Err(e) => {
                    return local_response(
                        StatusCode::BAD_REQUEST,
                        &format!("bad request target: {e}"),
                    )
                }
            };
            let started = Instant::now();
            let mut fresh_connection = false;
            let result = loop {
                let Some(outgoing_body) = body.next_attempt() else {
                    // Unreachable: a body sent once is never sent again.
                    return local_response(StatusCode::BAD_GATEWAY, "no response from the backend");
                };
                let mut outgoing =
                    Request::new(outgoing_body.map_err(BoxError::from).boxed_unsync());
                *outgoing.method_mut() = parts.method.clone();
                *outgoing.version_mut() = Version::HTTP_11;
                // A body that cannot be sent again leaves nothing to resend:
                // the headers go with it.
                *outgoing.headers_mut() = if replayable {
                    parts.headers.clone()
                } else {
                    std::mem::take(&mut parts.headers)
                };
                *outgoing.uri_mut() = uri.clone();
                let client = if fresh_connection {
                    &self.fresh
                } else {
                    &self.client
                };
                let capture = capture_connection(&mut outgoing);
                let sending = unless_dropped_unsent(capture, client.request(outgoing));
                let result = match tokio::time::timeout(timeout, sending).await {
                    Ok(Some(answer)) => Ok(answer),
                    Ok(None) if !fresh_connection => {
                        // Handed to a connection that went without
                        // writing it: nothing reached the backend.
                        tracing::debug!(
                            cluster = name,
                            endpoint = upstream.addr(),
                            "stale keep-alive connection gone before the request was written, \
                             sending again on a new one"
                        );
                        if !replayable {
                            break None;
                        }
                        self.counters.reused_connection_retry();
                        fresh_connection = true;
                        continue;
                    }
                    Ok(None) => break None,
                    Err(elapsed) => Err(elapsed),
                };
                if let Ok(Err(error)) = &result {
                    if replayable && !fresh_connection && lost_before_processing(error) {
                        tracing::debug!(
                            cluster = name,
                            endpoint = upstream.addr(),
                            "stale keep-alive connection, sending again on a new one: {}",
                            describe(error)
                        );
                        self.counters.reused_connection_retry();
                        fresh_connection = true;
                        continue;
                    }
                }
                break Some(result);
            };
            let Some(result) = result else {
                // The request was never written: as after a connect
                // failure, another endpoint may take it.
                self.attempt_failed(pick, started, &upstream, 502);
                if replayable && attempt < retries {
                    tried.push(upstream.addr().to_string());
                    attempt += 1;
                    continue;
                }
                tracing::warn!(
                    cluster = name,
                    endpoint = upstream.addr(),
                    "no response: the connection closed before the request was written"
                );
                return local_response(StatusCode::BAD_GATEWAY, "no response from the backend");
            };
            match result {
                Ok(Ok(response)) => {
                    if let Some(why) = malformed_framing(response.headers()) {
                        close_connection(&response);
                        drop(response);
                        self.attempt_failed(pick, started, &upstream, 502);
                        tracing::warn!(
                            cluster = name,
                            endpoint = upstream.addr(),
                            "malformed response: {why}"
                        );
                        return local_response(
                            StatusCode::BAD_GATEWAY,
                            "malformed response from the backend",
                        );
                    }
                    let status = response.status();
                    self.metrics
                        .request(&self.label, &upstream, status.as_u16());
                    if status.is_server_error() {
                        upstream.count_failure();
                    }
                    let (mut head, incoming) = response.into_parts();
                    strip_hop_by_hop(&mut head.headers);
                    let report = self.take_report(&mut head.headers, &upstream);
                    let on_client_gone = if cluster.config().abort_on_close {
                        OnClientGone::Abort
                    } else {
                        OnClientGone::Drain
                    };
                    let guarded = GuardedBody::new(
                        incoming,
                        pick,
                        started,
                        !status.is_server_error(),
                        timeout,
                        on_client_gone,
                    )
                    .with_report(report);
                    return Response::from_parts(head, guarded.boxed_unsync());
                }
                Ok(Err(error)) => {
                    self.attempt_failed(pick, started, &upstream, 502);
                    let retryable = replayable
                        && match classify(&error) {
                            NoResponse::Connect => true,
                            NoResponse::Closed => idempotent,
                            NoResponse::Other => false,
                        };
                    if retryable && attempt < retries {
                        tracing::debug!(
                            cluster = name,
                            endpoint = upstream.addr(),
                            "retrying: {}",
                            describe(&error)
                        );
                        tried.push(upstream.addr().to_string());
                        attempt += 1;
                        continue;
                    }
                    tracing::warn!(
                        cluster = name,
                        endpoint = upstream.addr(),
                        "no response: {}",
                        describe(&error)
                    );
                    return local_response(StatusCode::BAD_GATEWAY, "no response from the backend");
                }
                Err(_) => {
                    self.attempt_failed(pick, started, &upstream, 504);
                    tracing::warn!(
                        cluster = name,
                        endpoint = upstream.addr(),
                        "no response within {timeout:?}"
                    );
                    return local_response(
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
    use super::*;

    #[test]
    fn hop_by_hop_headers_go_named_ones_too() {
        let mut h = HeaderMap::new();
        h.insert(
            "connection",
            HeaderValue::from_static("keep-alive, x-session-hop"),
        );
        h.insert("x-session-hop", HeaderValue::from_static("1"));
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.insert("te", HeaderValue::from_static("trailers"));
        h.insert("x-user", HeaderValue::from_static("alice"));
        strip_hop_by_hop(&mut h);
        let left: Vec<_> = h.keys().map(|k| k.as_str()).collect();
        assert_eq!(left, ["x-user"]);
    }

    #[test]
    fn forwarded_for_appends() {
        let mut h = HeaderMap::new();
        append_forwarded_for(&mut h, "10.0.0.1".parse().unwrap());
        assert_eq!(h["x-forwarded-for"], "10.0.0.1");
        append_forwarded_for(&mut h, "::ffff:10.0.0.2".parse().unwrap());
        assert_eq!(h["x-forwarded-for"], "10.0.0.1, 10.0.0.2");
        // Several lines: one list, in order, then the client.
        h.append("x-forwarded-for", HeaderValue::from_static("10.0.0.3"));
        append_forwarded_for(&mut h, "2001:db8::1".parse().unwrap());
        let all: Vec<_> = h.get_all("x-forwarded-for").iter().collect();
        assert_eq!(all, ["10.0.0.1, 10.0.0.2, 10.0.0.3, 2001:db8::1"]);
    }
}
