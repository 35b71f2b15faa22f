//! A small HTTP/1.1 backend for demos and tests: it answers with its own
//! address, can be told to be slow or to fail, reports what it received,
//! and counts its concurrency.
//!
//! - `GET /health...`: 200, or 503 after [`DemoBackend::set_healthy`]`(false)`.
//! - any other request: `?delay=MS` waits first, `?status=CODE` answers with
//!   that status, `?drip=N` sends the body as N lines 100 ms apart after
//!   the headers; the body is otherwise the request's body when it has one
//!   (of at most 16 MiB), else the backend's address and a newline. Headers `x-backend` (its address),
//!   `x-echo-method`, `x-echo-uri`, `x-echo-host`, `x-echo-forwarded-for`
//!   and `x-echo-hop` (the hop-by-hop headers it received) tell what came.
//! - after [`DemoBackend::set_load_report`]`(true)`, each answer carries an
//!   ORCA load report, `endpoint-load-metrics: TEXT named_metrics.in_flight=N`,
//!   N the requests it has in service besides the one answered (the count
//!   once this answer has gone), for `loadring proxy --load-report orca`.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Channel, Either, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};

/// The most of a request's body the demo backend reads to echo it.
const MAX_ECHOED_BODY: usize = 16 << 20;

#[derive(Debug, Default)]
struct Counters {
    in_flight: AtomicU64,
    max_in_flight: AtomicU64,
    requests: AtomicU64,
    connections: AtomicU64,
    unhealthy: AtomicBool,
    load_report: AtomicBool,
    /// A report given verbatim instead of the count.
    report_text: std::sync::Mutex<Option<String>>,
}

/// A running demo backend; dropping it (or [`DemoBackend::kill`]) closes its
/// listener and every connection at once, like a killed process.
#[derive(Debug)]
pub struct DemoBackend {
    addr: SocketAddr,
    counters: Arc<Counters>,
    task: JoinHandle<()>,
}

impl DemoBackend {
    /// Starts serving on `addr` (`127.0.0.1:0` for any free port).
    ///
    /// # Errors
    /// The address cannot be bound.
    pub async fn start(addr: &str) -> std::io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let counters = Arc::new(Counters::default());
        let shared = counters.clone();
        let task = tokio::spawn(async move {
            // Connections live in this set: aborting the task drops it, which
            // aborts them all.
            let mut connections = JoinSet::new();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                shared.connections.fetch_add(1, SeqCst);
                let counters = shared.clone();
                let service = service_fn(move |request| answer(request, addr, counters.clone()));
                connections.spawn(async move {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
                while connections.try_join_next().is_some() {}
            }
        });
        Ok(DemoBackend {
            addr,
            counters,
            task,
        })
    }

    /// Its address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Requests being answered now (health checks excluded).
    pub fn in_flight(&self) -> u64 {
        self.counters.in_flight.load(SeqCst)
    }

    /// The most requests it was answering at once.
    pub fn max_in_flight(&self) -> u64 {
        self.counters.max_in_flight.load(SeqCst)
    }

    /// Requests received (health checks excluded).
    pub fn requests(&self) -> u64 {
        self.counters.requests.load(SeqCst)
    }

    /// Connections accepted.
    pub fn connections(&self) -> u64 {
        self.counters.connections.load(SeqCst)
    }

    /// Makes `/health...` answer 200 (true) or 503 (false).
    pub fn set_healthy(&self, healthy: bool) {
        self.counters.unhealthy.store(!healthy, SeqCst);
    }

    /// Makes every answer carry (true) or not (false) its load report in
    /// `endpoint-load-metrics` (see the module's documentation).
    pub fn set_load_report(&self, on: bool) {
        self.counters.load_report.store(on, SeqCst);
    }

    /// Makes every answer carry `text` verbatim as its load report (to try
    /// reports of other formats, or malformed ones), or its count again
    /// (`None`); [`DemoBackend::set_load_report`] still turns reports on and off.
    pub fn set_load_report_text(&self, text: Option<&str>) {
        *self
            .counters
            .report_text
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = text.map(str::to_string);
    }

    /// Stops it abruptly: listener and connections closed.
    pub fn kill(self) {
        self.task.abort();
    }
}

impl Drop for DemoBackend {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct InFlight(Arc<Counters>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, SeqCst);
    }
}

fn query_param<'q>(query: Option<&'q str>, name: &str) -> Option<&'q str> {
    query?
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

async fn answer(
    request: Request<Incoming>,
    addr: SocketAddr,
    counters: Arc<Counters>,
) -> Result<Response<Either<Full<Bytes>, Channel<Bytes>>>, Infallible> {
    if request.uri().path().starts_with("/health") {
        let status = if counters.unhealthy.load(SeqCst) {
            StatusCode::SERVICE_UNAVAILABLE
        } else {
            StatusCode::OK
        };
        let mut response = Response::new(Either::Left(Full::new(Bytes::from_static(b"health\n"))));
        *response.status_mut() = status;
        return Ok(response);
    }
    counters.requests.fetch_add(1, SeqCst);
    let now = counters.in_flight.fetch_add(1, SeqCst) + 1;
    counters.max_in_flight.fetch_max(now, SeqCst);
    let _in_flight = InFlight(counters.clone());
    let query = request.uri().query();
    if let Some(ms) = query_param(query, "delay").and_then(|v| v.parse().ok()) {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    let status = query_param(query, "status")
        .and_then(|v| v.parse::<u16>().ok())
        .and_then(|v| StatusCode::from_u16(v).ok())
        .unwrap_or(StatusCode::OK);
    let header = |name: &str| {
        request
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let hop: Vec<&str> = [
        "connection",
        "keep-alive",
        "te",
        "upgrade",
        "proxy-connection",
    ]
    .into_iter()
    .filter(|h| request.headers().contains_key(*h))
    .collect();
    let echo = [
        ("x-backend", addr.to_string()),
        ("x-echo-method", request.method().to_string()),
        ("x-echo-uri", request.uri().to_string()),
        ("x-echo-host", header("host")),
        ("x-echo-forwarded-for", header("x-forwarded-for")),
        ("x-echo-hop", hop.join(",")),
    ];
    let drip = query_param(query, "drip").and_then(|v| v.parse::<u32>().ok());
    // Echoed whole, so read whole: up to a bound, so that an upload cannot
    // take the demo's memory (a larger body is echoed as none).
    let body = match http_body_util::Limited::new(request.into_body(), MAX_ECHOED_BODY)
        .collect()
        .await
    {
        Ok(collected) => collected.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let body = if body.is_empty() {
        Bytes::from(format!("{addr}\n"))
    } else {
        body
    };
    let body = match drip {
        None => Either::Left(Full::new(body)),
        Some(lines) => {
            let (mut tx, channel) = Channel::new(1);
            tokio::spawn(async move {
                for i in 0..lines {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    if tx
                        .send_data(Bytes::from(format!("line {i}\n")))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            });
            Either::Right(channel)
        }
    };
    let mut response = Response::new(body);
    *response.status_mut() = status;
    for (name, value) in echo {
        if let Ok(value) = value.parse() {
            response.headers_mut().insert(name, value);
        }
    }
    if counters.load_report.load(SeqCst) {
        // This request is still counted: the report is the count once it has gone.
        let others = counters.in_flight.load(SeqCst).saturating_sub(1);
        let text = counters
            .report_text
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .unwrap_or_else(|| format!("TEXT named_metrics.in_flight={others}"));
        if let Ok(value) = text.parse() {
            response.headers_mut().insert(loadring::orca::HEADER, value);
        }
    }
    Ok(response)
}
