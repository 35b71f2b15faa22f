//! Many balancers, one cap, live: several `loadring proxy` processes over
//! the same real backends (hyper, in the test process), each backend
//! counting its requests in service and reporting them in ORCA's
//! `endpoint-load-metrics` header. A hot key goes to every proxy alongside
//! background keys, with few requests in flight per proxy: each proxy's own
//! cap is coarse, and only the backends' reports show the fleet's load.
//!
//! Each backend serves every request in the same time, so its time-averaged
//! concurrency is proportional to the requests it served: the figure is
//! counted, never timed. The same experiment runs with and without
//! `--load-report orca`; both figures are printed.
//!
//! `LOADRING_FLEET=PROXIES,BACKENDS,CLIENTS` (clients per proxy) runs
//! `other_fleet_sizes` with other numbers.

use crate::common;

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use common::{eventually, free_port, get};
use loadring_proxy::DemoBackend;

const BIN: &str = env!("CARGO_BIN_EXE_loadring");

/// The bounded policy with the issue's view: the report plus the proxy's
/// own picks since, minus its completions since.
const POLICY: &str = "c_murmurhash_bl:load_factor=1.25";

/// The same with `report_rule=share`: each proxy takes its share of the
/// room a report shows, plus the slot its own completion freed.
const SHARE_POLICY: &str = "c_murmurhash_bl:load_factor=1.25 report_rule=share";

/// Each backend's service time: fixed, so requests served measure
/// time-averaged concurrency.
const SERVICE_MS: u64 = 50;

/// A `loadring proxy` child, killed by its pid when dropped.
struct ProxyProcess {
    child: Child,
    addr: SocketAddr,
    admin: SocketAddr,
}

impl Drop for ProxyProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl ProxyProcess {
    async fn start(backends: &[SocketAddr], policy: &str, load_report: bool) -> Self {
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let mut command = Command::new(BIN);
        command.args([
            "proxy",
            "--listen",
            &addr.to_string(),
            "--admin",
            &admin.to_string(),
            "--policy",
            policy,
            "--key",
            "header:x-key",
        ]);
        for b in backends {
            command.args(["-e", &b.to_string()]);
        }
        if load_report {
            command.args(["--load-report", "orca"]);
        }
        let mut child = command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("loadring runs");
        let up = eventually(Duration::from_secs(20), || async {
            tokio::net::TcpStream::connect(addr).await.is_ok()
                && tokio::net::TcpStream::connect(admin).await.is_ok()
        })
        .await;
        if !up {
            let _ = child.kill();
            let _ = child.wait();
            panic!("loadring proxy did not start on {addr}");
        }
        ProxyProcess { child, addr, admin }
    }
}

/// One run's numbers.
#[derive(Debug, Clone)]
struct Figures {
    /// Requests each backend received in the run's steady part (from the
    /// moment a tenth of the requests were answered to the moment nine
    /// tenths were: every client busy, no start-up, no tail).
    served: Vec<u64>,
    /// Requests each backend received over the whole run.
    served_all: Vec<u64>,
    /// The busiest backend's time-averaged concurrency over the mean.
    busiest_over_mean: f64,
    /// Responses whose report the proxies used (0 without reports).
    reports_used: f64,
    /// Responses that reached a client with the report header still on.
    headers_seen: u64,
}

/// The size of one experiment.
#[derive(Debug, Clone, Copy)]
struct Fleet {
    proxies: usize,
    backends: usize,
    /// Closed-loop clients per proxy: requests in flight per proxy.
    clients: usize,
    /// Requests each client sends.
    requests: usize,
    /// The share of requests that carry the hot key.
    hot_share: f64,
    /// The policy every proxy runs.
    policy: &'static str,
}

impl Fleet {
    fn new(proxies: usize, backends: usize, clients: usize) -> Self {
        Fleet {
            proxies,
            backends,
            clients,
            requests: 80,
            hot_share: 0.5,
            policy: POLICY,
        }
    }
}

/// A small generator for keys (xorshift64*): reproducible per client.
struct Keys(u64);

impl Keys {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// The hot key with probability `hot`, else one of many background keys.
    fn key(&mut self, hot: f64) -> String {
        let roll = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        if roll < hot {
            "hot".to_string()
        } else {
            format!("bg-{}", self.next() % 100_000)
        }
    }
}

/// Runs `fleet` once over `backends` (their counters read before and after)
/// with or without `--load-report orca`.
async fn run(fleet: Fleet, backends: &[DemoBackend], load_report: bool) -> Figures {
    for b in backends {
        b.set_load_report(true);
    }
    let addrs: Vec<SocketAddr> = backends.iter().map(DemoBackend::addr).collect();
    let mut proxies = Vec::new();
    for _ in 0..fleet.proxies {
        proxies.push(ProxyProcess::start(&addrs, fleet.policy, load_report).await);
    }
    let counts = || {
        backends
            .iter()
            .map(DemoBackend::requests)
            .collect::<Vec<u64>>()
    };
    let before = counts();
    let answered = Arc::new(AtomicUsize::new(0));
    let total = fleet.proxies * fleet.clients * fleet.requests;
    let target = format!("/work?delay={SERVICE_MS}");
    let mut clients = tokio::task::JoinSet::new();
    for (p, proxy) in proxies.iter().enumerate() {
        for c in 0..fleet.clients {
            let addr = proxy.addr;
            let target = target.clone();
            let mut keys = Keys(0x9e37_79b9_7f4a_7c15 ^ ((p * 1000 + c + 1) as u64));
            let answered = answered.clone();
            clients.spawn(async move {
                let mut headers_seen = 0;
                for _ in 0..fleet.requests {
                    let key = keys.key(fleet.hot_share);
                    let reply = get(addr, &target, &[("x-key", &key)]).await;
                    assert_eq!(reply.status, 200, "{key} via {addr}: {}", reply.body);
                    if reply.header("endpoint-load-metrics").is_some() {
                        headers_seen += 1;
                    }
                    answered.fetch_add(1, SeqCst);
                }
                headers_seen
            });
        }
    }
    // The steady part's ends are events (answers counted), looked for
    // every few milliseconds; where exactly they fall does not matter.
    let mut marks = Vec::new();
    for share in [1, 9] {
        let reached = eventually(Duration::from_secs(120), || {
            let answered = answered.clone();
            async move { answered.load(SeqCst) * 10 >= total * share }
        })
        .await;
        assert!(
            reached,
            "the clients stalled before {share}/10 of the requests"
        );
        marks.push(counts());
    }
    let mut headers_seen = 0;
    while let Some(done) = clients.join_next().await {
        headers_seen += done.expect("a client finished");
    }
    let served_all: Vec<u64> = counts().iter().zip(&before).map(|(n, b)| n - b).collect();
    let served: Vec<u64> = marks[1].iter().zip(&marks[0]).map(|(n, b)| n - b).collect();
    let mut reports_used = 0.0;
    for proxy in &proxies {
        let text = get(proxy.admin, "/metrics", &[]).await.body;
        let series = |result: &str| {
            text.lines()
                .filter(|l| l.starts_with("loadring_load_reports_total{"))
                .filter(|l| l.contains(&format!("result=\"{result}\"")))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum::<f64>()
        };
        reports_used += series("ok");
        assert_eq!(series("malformed") + series("missing"), 0.0, "{text}");
    }
    let total: u64 = served.iter().sum();
    let mean = total as f64 / served.len() as f64;
    let busiest = served.iter().copied().max().unwrap_or(0) as f64;
    Figures {
        busiest_over_mean: busiest / mean,
        served,
        served_all,
        reports_used,
        headers_seen,
    }
}

/// Both runs of `fleet` over the same backends: (with reports, without).
async fn compare(fleet: Fleet) -> (Figures, Figures) {
    let mut backends = Vec::new();
    for _ in 0..fleet.backends {
        backends.push(DemoBackend::start("127.0.0.1:0").await.expect("a backend"));
    }
    let with = run(fleet, &backends, true).await;
    let without = run(fleet, &backends, false).await;
    let total = (fleet.proxies * fleet.clients * fleet.requests) as u64;
    for figures in [&with, &without] {
        assert_eq!(
            figures.served_all.iter().sum::<u64>(),
            total,
            "every request served once: {figures:?}"
        );
    }
    println!(
        "{}: {} proxies x {} clients over {} backends, {:.0}% hot: busiest/mean {:.3} with reports \
         (served {:?}), {:.3} without (served {:?}); ratio {:.3}",
        fleet.policy,
        fleet.proxies,
        fleet.clients,
        fleet.backends,
        fleet.hot_share * 100.0,
        with.busiest_over_mean,
        with.served,
        without.busiest_over_mean,
        without.served,
        with.busiest_over_mean / without.busiest_over_mean,
    );
    // The reports flowed: every response carried one, the proxies used
    // them and kept them from the clients; without the flag the header
    // passes through untouched.
    assert_eq!(with.reports_used, total as f64, "{with:?}");
    assert_eq!(with.headers_seen, 0, "{with:?}");
    assert_eq!(without.reports_used, 0.0, "{without:?}");
    assert_eq!(without.headers_seen, total, "{without:?}");
    (with, without)
}

/// Reports cut the busiest backend's share by at least a tenth.
fn check_cut(with: &Figures, without: &Figures) {
    assert!(
        with.busiest_over_mean <= 0.9 * without.busiest_over_mean,
        "reports lower the peak by less than 10%: {:.3} with, {:.3} without",
        with.busiest_over_mean,
        without.busiest_over_mean
    );
}

/// Issue 29's target: with reports, the busiest backend within 1.35x the mean.
fn check_target(with: &Figures) {
    assert!(
        with.busiest_over_mean <= 1.35,
        "with reports the busiest backend carries {:.3}x the mean (limit 1.35): {with:?}",
        with.busiest_over_mean
    );
}

/// The fleet of the issue: 4 proxies over 6 backends, 6 requests in flight
/// per proxy (1 per backend, where one proxy's cap, ceil(1.25 x 6 / 6) = 2,
/// lets every proxy put twice the mean on the hot key's owner).
const ISSUE_FLEET: (usize, usize, usize) = (4, 6, 6);

/// The backends' reports reach the proxies and are kept from the clients;
/// they cut the hot key owner's load by more than a tenth and keep it
/// within 1.35 of the mean (issue 29's target). With the fleet's cap (not
/// rounded up) and each proxy held to its own cap too: 1.117 to 1.216
/// with reports over five runs, 1.78 to 1.81 without.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_keep_the_busiest_backend_within_1_35_of_the_mean() {
    let (proxies, backends, clients) = ISSUE_FLEET;
    let (with, without) = compare(Fleet::new(proxies, backends, clients)).await;
    check_cut(&with, &without);
    check_target(&with);
}

/// The same with `report_rule=share`: each proxy takes its share of the
/// room a report shows (its in flight over the view's total) plus the slot
/// its own completion freed. 1.100 with reports in one run (1.79
/// without); at other sizes the plain view does as well or better (see
/// the README's *Many balancers, one cap*).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_share_rule_keeps_the_busiest_backend_within_1_35_too() {
    let (proxies, backends, clients) = ISSUE_FLEET;
    let fleet = Fleet {
        policy: SHARE_POLICY,
        ..Fleet::new(proxies, backends, clients)
    };
    let (with, without) = compare(fleet).await;
    check_cut(&with, &without);
    check_target(&with);
}

/// The same experiment with the numbers in `LOADRING_FLEET`
/// (`PROXIES,BACKENDS,CLIENTS`); 8 proxies over 5 backends, 2 clients each,
/// without it, with the default `report_rule=view` (`LOADRING_FLEET_POLICY`:
/// another policy). Asserts the cut (with more than one proxy);
/// `LOADRING_FLEET_TARGET=1` asserts the 1.35 target too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_fleet_sizes() {
    let sizes: Vec<usize> = std::env::var("LOADRING_FLEET")
        .unwrap_or_else(|_| "8,5,2".into())
        .split(',')
        .map(|n| {
            n.trim()
                .parse()
                .expect("LOADRING_FLEET=PROXIES,BACKENDS,CLIENTS")
        })
        .collect();
    let [proxies, backends, clients] = sizes[..] else {
        panic!("LOADRING_FLEET=PROXIES,BACKENDS,CLIENTS, got {sizes:?}");
    };
    // The policy, leaked once: a test process runs this test once.
    let policy: &'static str = match std::env::var("LOADRING_FLEET_POLICY") {
        Ok(policy) => Box::leak(policy.into_boxed_str()),
        Err(_) => POLICY,
    };
    let fleet = Fleet {
        policy,
        ..Fleet::new(proxies, backends, clients)
    };
    let (with, without) = compare(fleet).await;
    // One proxy already counts every request: reports cannot cut anything
    // (the run prints both figures).
    if proxies > 1 {
        check_cut(&with, &without);
    }
    if std::env::var_os("LOADRING_FLEET_TARGET").is_some() {
        check_target(&with);
    }
}
