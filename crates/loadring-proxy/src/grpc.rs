//! gRPC over the gateway: telling a call apart, its status (in the
//! trailers, or in the headers of a trailers-only answer), the statuses the
//! balancer counts as failures, and the answer the proxy gives itself when
//! no backend answered (a gRPC status, not an HTML page).

use std::sync::Arc;

use http::header::{HeaderMap, HeaderValue, CONTENT_TYPE};
use http::{Response, StatusCode};

use crate::connect::head_fields::Fields;
use crate::metrics::Metrics;

/// `UNAVAILABLE`.
pub const UNAVAILABLE: u32 = 14;
/// `DEADLINE_EXCEEDED`.
pub const DEADLINE_EXCEEDED: u32 = 4;

/// Whether a request (or response) with these headers is a gRPC call:
/// `content-type: application/grpc` (or `application/grpc+proto`...).
pub(crate) fn is_grpc(fields: &Fields) -> bool {
    fields
        .get(&CONTENT_TYPE)
        .and_then(|v| v.as_text())
        .is_some_and(|v| {
            v.strip_prefix("application/grpc")
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(['+', ';']))
        })
}

/// The `grpc-status` in `headers`, if there is a valid one.
pub fn status(headers: &HeaderMap) -> Option<u32> {
    headers
        .get("grpc-status")?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Whether the balancer's feedback (ejection, `la`, peak EWMA) counts
/// `status` as a failure of the endpoint.
pub fn is_failure(status: u32) -> bool {
    status == UNAVAILABLE || status == DEADLINE_EXCEEDED
}

/// The gRPC status for an HTTP status the proxy answers with itself, as
/// gRPC's HTTP-to-status mapping has it.
pub fn status_for(http: StatusCode) -> u32 {
    match http.as_u16() {
        400 => 13,                      // INTERNAL
        401 => 16,                      // UNAUTHENTICATED
        403 => 7,                       // PERMISSION_DENIED
        404 => 12,                      // UNIMPLEMENTED
        408 | 504 => DEADLINE_EXCEEDED, // the backend (or body) too slow
        429 | 502 | 503 => UNAVAILABLE,
        _ => 2, // UNKNOWN
    }
}

/// The proxy's own answer to a gRPC call: a trailers-only response (HTTP
/// 200, `grpc-status` and `grpc-message` in the headers), its empty body to
/// be given.
pub fn local_answer(http: StatusCode, why: &str) -> Response<()> {
    let mut response = Response::new(());
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    headers.insert("grpc-status", HeaderValue::from(status_for(http)));
    if let Ok(message) = HeaderValue::from_str(&percent_encode(why)) {
        headers.insert("grpc-message", message);
    }
    response
}

/// `grpc-message` is percent-encoded: anything outside printable ASCII,
/// and `%`.
fn percent_encode(text: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if (0x20..0x7f).contains(&b) && b != b'%' {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// Where a call's status from the trailers is counted: `/metrics`, and
/// the endpoint's failure count when it is a failure (the balancer hears the
/// outcome from the body, see `GuardedBody`).
#[derive(Debug, Clone)]
pub struct Tally {
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) label: Arc<str>,
    pub(crate) upstream: crate::cluster::Backend,
}

impl Tally {
    /// Counts `status` in `loadring_grpc_responses_total`.
    pub fn count(&self, status: u32) {
        self.metrics
            .grpc_response(&self.label, self.upstream.shared_addr(), status);
        if is_failure(status) {
            self.upstream.count_failure();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_content_types() {
        let mut h = HeaderMap::new();
        for (ct, want) in [
            ("application/grpc", true),
            ("application/grpc+proto", true),
            ("application/grpc; charset=x", true),
            ("application/grpc-web", false),
            ("application/json", false),
        ] {
            h.insert(CONTENT_TYPE, HeaderValue::from_static(ct));
            assert_eq!(is_grpc(&Fields::Map(h.clone())), want, "{ct}");
            let raw = crate::connect::raw_fields::read(&format!(
                "HTTP/1.1 200 OK\r\nContent-Type: {ct}\r\n\r\n"
            ));
            assert_eq!(is_grpc(&Fields::Raw(Box::new(raw))), want, "raw {ct}");
        }
    }

    #[test]
    fn messages_are_percent_encoded() {
        assert_eq!(percent_encode("no 100% é"), "no 100%25 %C3%A9");
    }

    #[test]
    fn unreachable_is_unavailable_and_slow_is_deadline() {
        assert_eq!(status_for(StatusCode::BAD_GATEWAY), UNAVAILABLE);
        assert_eq!(status_for(StatusCode::SERVICE_UNAVAILABLE), UNAVAILABLE);
        assert_eq!(status_for(StatusCode::GATEWAY_TIMEOUT), DEADLINE_EXCEEDED);
        assert!(is_failure(UNAVAILABLE) && is_failure(DEADLINE_EXCEEDED));
        assert!(!is_failure(0) && !is_failure(5));
    }
}
