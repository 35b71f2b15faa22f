//! Forwarding one request: the key, the attempts over the policy's
//! candidates, the response streamed back with its guard.

use std::error::Error as _;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, Response, StatusCode, Uri, Version};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use loadring::Outcome;

use crate::body::GuardedBody;
use crate::cluster::{Cluster, SelectError};
use crate::health::report_failure;
use crate::metrics::Metrics;
use crate::request_body::{ReadError, RequestBody};

/// Bodies both ways.
pub type ProxyBody = UnsyncBoxBody<Bytes, hyper::Error>;

/// The upstream client: keep-alive pools per backend address.
pub type Client = hyper_util::client::legacy::Client<HttpConnector, ProxyBody>;

/// An empty body.
pub fn empty_body() -> ProxyBody {
    Empty::new().map_err(|never| match never {}).boxed_unsync()
}

/// A short plain-text body.
pub fn text_body(text: impl Into<Bytes>) -> ProxyBody {
    Full::new(text.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// A client with keep-alive pools and the cluster's connect timeout.
pub fn client(connect_timeout: Duration) -> Client {
    let mut connector = HttpConnector::new();
    connector.set_connect_timeout(Some(connect_timeout));
    connector.set_nodelay(true);
    hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(60))
        // Without a timer idle connections are never reaped.
        .pool_timer(TokioTimer::new())
        .build(connector)
}

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
        return NoResponse::Connect;
    }
    let mut source = error.source();
    while let Some(e) = source {
        if let Some(h) = e.downcast_ref::<hyper::Error>() {
            if h.is_incomplete_message() || h.is_canceled() || h.is_closed() {
                return NoResponse::Closed;
            }
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::*;
            if matches!(
                io.kind(),
                ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof
            ) {
                return NoResponse::Closed;
            }
        }
        source = e.source();
    }
    NoResponse::Other
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
    metrics: Arc<Metrics>,
}

impl Forwarder {
    /// A forwarder for `cluster` over `client`.
    pub fn new(cluster: Arc<Cluster>, client: Client, metrics: Arc<Metrics>) -> Self {
        Forwarder {
            label: cluster.name().into(),
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
    pub async fn forward(
        &self,
        request: Request<Incoming>,
        peer: SocketAddr,
    ) -> Response<ProxyBody> {
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
                self.metrics.spill(name);
            }
            if attempt > 0 {
                self.metrics.retry(name);
            }
            let pick = selected.pick;
            let upstream = pick.backend().clone();
            let uri = Uri::builder()
                .scheme("http")
                .authority(upstream.authority().clone())
                .path_and_query(path_and_query.clone())
                .build();
            let Some(outgoing_body) = body.next_attempt() else {
                // Unreachable: a body sent once is never retried.
                return local_response(StatusCode::BAD_GATEWAY, "no response from the backend");
            };
            let mut outgoing = Request::new(outgoing_body.boxed_unsync());
            *outgoing.method_mut() = parts.method.clone();
            *outgoing.version_mut() = Version::HTTP_11;
            // The last attempt takes the headers; earlier ones a copy.
            *outgoing.headers_mut() = if replayable && attempt < retries {
                parts.headers.clone()
            } else {
                std::mem::take(&mut parts.headers)
            };
            match uri {
                Ok(uri) => *outgoing.uri_mut() = uri,
                Err(e) => {
                    return local_response(
                        StatusCode::BAD_REQUEST,
                        &format!("bad request target: {e}"),
                    )
                }
            }
            let started = Instant::now();
            match tokio::time::timeout(timeout, self.client.request(outgoing)).await {
                Ok(Ok(response)) => {
                    let status = response.status();
                    self.metrics
                        .request(&self.label, upstream.shared_addr(), status.as_u16());
                    if status.is_server_error() {
                        report_failure(cluster, &upstream);
                    } else {
                        upstream.request_succeeded();
                    }
                    let (mut head, incoming) = response.into_parts();
                    strip_hop_by_hop(&mut head.headers);
                    let guarded =
                        GuardedBody::new(incoming, pick, started, !status.is_server_error());
                    return Response::from_parts(head, guarded.boxed_unsync());
                }
                Ok(Err(error)) => {
                    pick.finish(Outcome::failure(started.elapsed()));
                    self.metrics
                        .request(&self.label, upstream.shared_addr(), 502);
                    report_failure(cluster, &upstream);
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
                    pick.finish(Outcome::failure(started.elapsed()));
                    self.metrics
                        .request(&self.label, upstream.shared_addr(), 504);
                    report_failure(cluster, &upstream);
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
