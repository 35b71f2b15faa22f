//! N backends in one process: `127.0.0.1:BASE..BASE+N`. Each request waits an
//! exponential service time (mean `--mean-ms`, seeded per backend), then
//! answers 200 with the backend's address. Each backend counts its requests,
//! its concurrency (current and peak), its busy time and the requests of each
//! `X-Key` it served.
//!
//! The admin listener, `127.0.0.1:A`: `GET /stats` the counts as JSON
//! ([`Stats`]), `GET /reset` zeroes them (the peak restarts from the current
//! concurrency) and starts a new measurement.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;

use crate::{mix, Flags};

#[derive(Debug, Default)]
struct Backend {
    addr: String,
    seed: u64,
    draws: AtomicU64,
    in_flight: AtomicU64,
    peak: AtomicU64,
    requests: AtomicU64,
    busy_us: AtomicU64,
    keys: Mutex<HashMap<String, u64>>,
}

/// What `GET /stats` answers.
#[derive(Debug, Serialize, Deserialize)]
pub struct Stats {
    /// Seconds since the last reset.
    pub elapsed_s: f64,
    pub backends: Vec<BackendStats>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct BackendStats {
    pub addr: String,
    pub requests: u64,
    /// The most requests in service at once.
    pub peak: u64,
    /// Service time summed over requests, in microseconds (divided by the
    /// elapsed time: the mean concurrency).
    pub busy_us: u64,
    /// Requests per `X-Key` value.
    pub keys: HashMap<String, u64>,
}

pub fn main(flags: &Flags) -> Result<(), String> {
    let base: u16 = flags.number("base-port", 0)?;
    let count: u16 = flags.number("count", 8)?;
    let admin: u16 = flags.number("admin-port", 0)?;
    let mean_ms: f64 = flags.number("mean-ms", 5.0)?;
    let seed: u64 = flags.number("seed", 1)?;
    if base == 0 || admin == 0 || count == 0 {
        return Err("--base-port, --count and --admin-port are required".into());
    }
    let runtime = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    runtime.block_on(serve(base, count, admin, mean_ms, seed))
}

async fn serve(base: u16, count: u16, admin: u16, mean_ms: f64, seed: u64) -> Result<(), String> {
    let mut backends = Vec::new();
    for i in 0..count {
        let addr = format!("127.0.0.1:{}", base + i);
        let listener = TcpListener::bind(&addr)
            .await
            .map_err(|e| format!("{addr}: {e}"))?;
        let backend = Arc::new(Backend {
            addr,
            seed: mix(seed ^ u64::from(i)),
            ..Backend::default()
        });
        backends.push(backend.clone());
        tokio::spawn(accept(listener, move |request| {
            let backend = backend.clone();
            async move { Ok::<_, Infallible>(answer(request, &backend, mean_ms).await) }
        }));
    }
    let addr = format!("127.0.0.1:{admin}");
    let listener = TcpListener::bind(&addr)
        .await
        .map_err(|e| format!("{addr}: {e}"))?;
    let since = Arc::new(Mutex::new(Instant::now()));
    let backends = Arc::new(backends);
    tokio::spawn(accept(listener, move |request: Request<Incoming>| {
        let (backends, since) = (backends.clone(), since.clone());
        async move { Ok::<_, Infallible>(admin_answer(request.uri().path(), &backends, &since)) }
    }));
    eprintln!(
        "backends: 127.0.0.1:{base}..{}, admin 127.0.0.1:{admin}",
        base + count - 1
    );
    let _ = tokio::signal::ctrl_c().await;
    Ok(())
}

async fn accept<F, Fut>(listener: TcpListener, handler: F)
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = Result<Response<Full<Bytes>>, Infallible>> + Send + 'static,
{
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let handler = handler.clone();
        tokio::spawn(async move {
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service_fn(handler))
                .await;
        });
    }
}

async fn answer(
    request: Request<Incoming>,
    backend: &Backend,
    mean_ms: f64,
) -> Response<Full<Bytes>> {
    // Released on drop: a request whose connection closes mid-service (the
    // proxy gave up on it) leaves the count too.
    let _in_service = InService::enter(backend);
    if let Some(key) = request.headers().get("x-key") {
        let key = String::from_utf8_lossy(key.as_bytes());
        let mut keys = backend.keys.lock().unwrap_or_else(|e| e.into_inner());
        match keys.get_mut(key.as_ref()) {
            Some(n) => *n += 1,
            None => {
                keys.insert(key.into_owned(), 1);
            }
        }
    }
    // Exponential service time, a seeded draw per request.
    let draw = mix(backend.seed ^ backend.draws.fetch_add(1, Relaxed));
    let unit = ((draw >> 11) + 1) as f64 / (1u64 << 53) as f64;
    let service = Duration::from_secs_f64(-unit.ln() * mean_ms / 1000.0);
    tokio::time::sleep(service).await;
    backend
        .busy_us
        .fetch_add(service.as_micros() as u64, Relaxed);
    backend.requests.fetch_add(1, Relaxed);
    Response::builder()
        .header("x-backend", backend.addr.as_str())
        .body(Full::new(Bytes::from_static(b"ok\n")))
        .expect("a valid response")
}

/// One request in service: counted in `in_flight` (and the peak) from
/// [`InService::enter`] until dropped.
struct InService<'a>(&'a Backend);

impl<'a> InService<'a> {
    fn enter(backend: &'a Backend) -> Self {
        let now = backend.in_flight.fetch_add(1, Relaxed) + 1;
        backend.peak.fetch_max(now, Relaxed);
        InService(backend)
    }
}

impl Drop for InService<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Relaxed);
    }
}

fn admin_answer(
    path: &str,
    backends: &[Arc<Backend>],
    since: &Mutex<Instant>,
) -> Response<Full<Bytes>> {
    let mut since = since.lock().unwrap_or_else(|e| e.into_inner());
    let body = match path {
        "/reset" => {
            for b in backends {
                b.requests.store(0, Relaxed);
                b.busy_us.store(0, Relaxed);
                b.peak.store(b.in_flight.load(Relaxed), Relaxed);
                b.keys.lock().unwrap_or_else(|e| e.into_inner()).clear();
            }
            *since = Instant::now();
            "reset\n".to_string()
        }
        "/stats" => {
            let stats = Stats {
                elapsed_s: since.elapsed().as_secs_f64(),
                backends: backends
                    .iter()
                    .map(|b| BackendStats {
                        addr: b.addr.clone(),
                        requests: b.requests.load(Relaxed),
                        peak: b.peak.load(Relaxed),
                        busy_us: b.busy_us.load(Relaxed),
                        keys: b.keys.lock().unwrap_or_else(|e| e.into_inner()).clone(),
                    })
                    .collect(),
            };
            serde_json::to_string(&stats).expect("serializable")
        }
        _ => "GET /stats or /reset\n".to_string(),
    };
    Response::new(Full::new(Bytes::from(body)))
}
