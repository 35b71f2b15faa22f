//! N backends in one process: `127.0.0.1:BASE..BASE+N`. Each request waits an
//! exponential service time (mean `--mean-ms`), then answers 200 with the
//! backend's address. Each backend counts its requests, its concurrency
//! (current and peak), its busy time and the requests of each `X-Key` it
//! served.
//!
//! Service times are a seeded stream per backend: the n-th request a backend
//! serves waits the n-th draw of its stream. A measurement that restarts the
//! streams with a seed gives every proxy measured with that seed the same
//! service times (common random numbers), so their latencies differ by what
//! the proxies do, not by which stretch of the streams each one was served
//! from.
//!
//! The admin listener, `127.0.0.1:A`: `GET /stats` the counts as JSON
//! ([`Stats`]); `GET /reset` zeroes them (the peak restarts from the current
//! concurrency) and starts a new measurement; `GET /reset?seed=S` also
//! restarts every backend's stream of service times at its start for seed `S`
//! (`--seed` is the one a fresh process starts with).

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
    /// The backend's place in the process: with the seed, it picks the stream.
    index: u64,
    /// The current stream's seed, and how many draws of it were taken.
    stream: AtomicU64,
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
    let backends = make(base, count, seed)?;
    for backend in &backends {
        let listener = TcpListener::bind(&backend.addr)
            .await
            .map_err(|e| format!("{}: {e}", backend.addr))?;
        let backend = backend.clone();
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
        async move { Ok::<_, Infallible>(admin_answer(request.uri(), &backends, &since)) }
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
    let service = backend.service_time(mean_ms);
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

impl Backend {
    /// Restarts the stream of service times at its start: the next request
    /// waits the first draw of the stream of `seed` and this backend.
    fn restart(&self, seed: u64) {
        // Mixed before the index joins it: `seed ^ index` alone would give
        // seeds 1, 2 and 3 the same eight streams, only dealt to other backends.
        self.stream.store(mix(mix(seed) ^ self.index), Relaxed);
        self.draws.store(0, Relaxed);
    }

    /// The next draw of the stream: an exponential time of mean `mean_ms`.
    fn service_time(&self, mean_ms: f64) -> Duration {
        let draw = mix(self.stream.load(Relaxed) ^ self.draws.fetch_add(1, Relaxed));
        // 53 random bits as a float in (0, 1]: `ln` never sees 0.
        let unit = ((draw >> 11) + 1) as f64 / (1u64 << 53) as f64;
        Duration::from_secs_f64(-unit.ln() * mean_ms / 1000.0)
    }
}

/// `count` backends on the ports from `base`, their streams started for `seed`.
fn make(base: u16, count: u16, seed: u64) -> Result<Vec<Arc<Backend>>, String> {
    if base.checked_add(count.saturating_sub(1)).is_none() {
        return Err(format!(
            "--base-port {base} --count {count}: the last port would be past 65535"
        ));
    }
    Ok((0..count)
        .map(|i| {
            let backend = Backend {
                addr: format!("127.0.0.1:{}", base + i),
                index: u64::from(i),
                ..Backend::default()
            };
            backend.restart(seed);
            Arc::new(backend)
        })
        .collect())
}

/// The seed of `/reset`'s query: none without one, else `seed=S`.
fn reset_seed(query: Option<&str>) -> Result<Option<u64>, String> {
    let Some(query) = query else {
        return Ok(None);
    };
    match query.strip_prefix("seed=").map(str::parse::<u64>) {
        Some(Ok(seed)) => Ok(Some(seed)),
        _ => Err(format!(
            "/reset?{query}: accepted /reset or /reset?seed=S, S a whole number from 0 to {}",
            u64::MAX
        )),
    }
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
    uri: &http::Uri,
    backends: &[Arc<Backend>],
    since: &Mutex<Instant>,
) -> Response<Full<Bytes>> {
    let mut since = since.lock().unwrap_or_else(|e| e.into_inner());
    let body = match uri.path() {
        "/reset" => {
            let seed = match reset_seed(uri.query()) {
                Ok(seed) => seed,
                Err(e) => {
                    let mut answer = Response::new(Full::new(Bytes::from(format!("{e}\n"))));
                    *answer.status_mut() = http::StatusCode::BAD_REQUEST;
                    return answer;
                }
            };
            for b in backends {
                b.requests.store(0, Relaxed);
                b.busy_us.store(0, Relaxed);
                b.peak.store(b.in_flight.load(Relaxed), Relaxed);
                b.keys.lock().unwrap_or_else(|e| e.into_inner()).clear();
                if let Some(seed) = seed {
                    b.restart(seed);
                }
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
        _ => "GET /stats, /reset or /reset?seed=S\n".to_string(),
    };
    Response::new(Full::new(Bytes::from(body)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backend(index: u64, seed: u64) -> Backend {
        let backend = Backend {
            index,
            ..Backend::default()
        };
        backend.restart(seed);
        backend
    }

    fn draws(backend: &Backend, n: usize) -> Vec<Duration> {
        (0..n).map(|_| backend.service_time(5.0)).collect()
    }

    fn admin(uri: &str, backends: &[Arc<Backend>]) -> (http::StatusCode, String) {
        let since = Mutex::new(Instant::now());
        let answer = admin_answer(&uri.parse().unwrap(), backends, &since);
        let status = answer.status();
        let body = body_text(answer.into_body());
        (status, body)
    }

    fn body_text(body: Full<Bytes>) -> String {
        use http_body_util::BodyExt;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let bytes = runtime.block_on(body.collect()).unwrap().to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[test]
    fn a_restarted_stream_replays_its_service_times() {
        let one = backend(3, 7);
        let first = draws(&one, 1000);
        one.restart(7);
        assert_eq!(draws(&one, 1000), first);
        // A second process (or backend object) with the same seed and place
        // draws the same stream.
        assert_eq!(draws(&backend(3, 7), 1000), first);
    }

    #[test]
    fn streams_differ_by_backend_and_by_seed() {
        let base = draws(&backend(3, 7), 100);
        assert_ne!(draws(&backend(4, 7), 100), base);
        assert_ne!(draws(&backend(3, 8), 100), base);
        // Within a stream, draws are not repeated.
        let mut sorted = base.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), base.len());
    }

    #[test]
    fn every_seed_gives_every_backend_a_stream_of_its_own() {
        let mut firsts: Vec<Vec<Duration>> = Vec::new();
        for seed in 0..8 {
            for index in 0..64 {
                firsts.push(draws(&backend(index, seed), 4));
            }
        }
        let count = firsts.len();
        firsts.sort();
        firsts.dedup();
        assert_eq!(firsts.len(), count);
    }

    #[test]
    fn service_times_are_exponential_with_the_mean_asked() {
        let n = 200_000;
        let times: Vec<f64> = draws(&backend(0, 1), n)
            .iter()
            .map(|d| d.as_secs_f64() * 1000.0)
            .collect();
        let mean = times.iter().sum::<f64>() / n as f64;
        assert!((mean - 5.0).abs() < 0.05, "mean {mean} ms");
        // An exponential's quantile q is -ln(1 - q) times the mean.
        let mut sorted = times;
        sorted.sort_by(f64::total_cmp);
        for (q, expected) in [(0.5, 5.0 * 2f64.ln()), (0.99, 5.0 * 100f64.ln())] {
            let got = sorted[(q * n as f64) as usize];
            assert!(
                (got / expected - 1.0).abs() < 0.03,
                "q{q}: {got} ms, expected {expected}"
            );
        }
    }

    #[test]
    fn reset_with_a_seed_restarts_every_stream_and_without_one_continues_them() {
        let backends: Vec<Arc<Backend>> = (0..3).map(|i| Arc::new(backend(i, 1))).collect();
        for b in &backends {
            draws(b, 10);
            b.requests.store(10, Relaxed);
        }
        assert_eq!(
            admin("/reset?seed=5", &backends),
            (http::StatusCode::OK, "reset\n".into())
        );
        for b in &backends {
            assert_eq!(b.requests.load(Relaxed), 0);
            assert_eq!(draws(b, 20), draws(&backend(b.index, 5), 20));
        }
        // A plain reset zeroes the counts and leaves the streams where they are.
        let next: Vec<Vec<Duration>> = backends
            .iter()
            .map(|b| {
                let replay = backend(b.index, 5);
                draws(&replay, 20);
                draws(&replay, 5)
            })
            .collect();
        assert_eq!(admin("/reset", &backends).0, http::StatusCode::OK);
        for (b, next) in backends.iter().zip(next) {
            assert_eq!(draws(b, 5), next);
        }
    }

    #[test]
    fn a_process_deals_each_backend_its_port_and_stream() {
        let backends = make(9000, 4, 3).unwrap();
        let addrs: Vec<&str> = backends.iter().map(|b| b.addr.as_str()).collect();
        assert_eq!(
            addrs,
            [
                "127.0.0.1:9000",
                "127.0.0.1:9001",
                "127.0.0.1:9002",
                "127.0.0.1:9003"
            ]
        );
        for (i, b) in backends.iter().enumerate() {
            assert_eq!(draws(b, 10), draws(&backend(i as u64, 3), 10));
        }
        assert_eq!(make(65535, 1, 1).unwrap().len(), 1);
        let error = make(65535, 2, 1).unwrap_err();
        assert_eq!(
            error,
            "--base-port 65535 --count 2: the last port would be past 65535"
        );
    }

    #[test]
    fn stats_give_each_backend_its_counts() {
        let backends = make(9000, 2, 1).unwrap();
        backends[1].requests.store(7, Relaxed);
        backends[1].busy_us.store(35_000, Relaxed);
        let (status, body) = admin("/stats", &backends);
        assert_eq!(status, http::StatusCode::OK);
        let stats: Stats = serde_json::from_str(&body).unwrap();
        let counts: Vec<(&str, u64, u64)> = stats
            .backends
            .iter()
            .map(|b| (b.addr.as_str(), b.requests, b.busy_us))
            .collect();
        assert_eq!(
            counts,
            [("127.0.0.1:9000", 0, 0), ("127.0.0.1:9001", 7, 35_000)]
        );
    }

    #[test]
    fn reset_refuses_a_query_it_does_not_know_and_resets_nothing() {
        let backends = vec![Arc::new(backend(0, 1))];
        backends[0].requests.store(4, Relaxed);
        for query in [
            "seed=",
            "seed=-1",
            "seed=x",
            "seed=1&x=2",
            "round=1",
            "seed=18446744073709551616",
        ] {
            let (status, body) = admin(&format!("/reset?{query}"), &backends);
            assert_eq!(status, http::StatusCode::BAD_REQUEST, "{query}");
            assert!(
                body.starts_with(&format!("/reset?{query}: accepted")),
                "{body}"
            );
            assert!(body.contains("18446744073709551615"), "{body}");
            assert_eq!(backends[0].requests.load(Relaxed), 4, "{query}");
        }
        assert_eq!(reset_seed(None), Ok(None));
        assert_eq!(reset_seed(Some("seed=0")), Ok(Some(0)));
        assert_eq!(
            reset_seed(Some("seed=18446744073709551615")),
            Ok(Some(u64::MAX))
        );
    }
}
