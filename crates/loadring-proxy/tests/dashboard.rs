//! The admin dashboard in a real browser: headless Chromium loads `/` from a
//! live proxy (real backends, a hot key held in flight under
//! `c_murmurhash_bl`), and the DOM its own script built is checked against
//! `/status` and against the balancer's caps. Chromium runs with its own
//! profile in the test's temp dir, bounded in time, killed by pid.

use crate::common;

use std::collections::HashMap;
use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{eventually, get, metric};
use loadring::Endpoint;
use loadring_proxy::internals::Gateway;
use loadring_proxy::{ClusterConfig, DemoBackend, KeySpec, Proxy, ProxyConfig};
use serde_json::Value;
use tokio::task::JoinHandle;

/// Markup that runs script if a page writes it as HTML (tags allow no white
/// space: after a quoted value, `/` separates attributes).
const HOSTILE: &str = "<img/src='x'/onerror=document.title='owned'>";
/// How long the hot requests are held by their backend.
const HELD_MS: u64 = 60_000;
/// Virtual time Chromium gives the page's script: several polls.
const BUDGET_MS: u64 = 4_000;
/// Wall-clock bound on one Chromium run.
const BROWSER_LIMIT: Duration = Duration::from_secs(60);

struct Running {
    admin: SocketAddr,
    addr: SocketAddr,
    gateway: Arc<Gateway>,
    task: JoinHandle<()>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn start(cluster: ClusterConfig) -> Running {
    let config = ProxyConfig {
        listen: "127.0.0.1:0".into(),
        admin: Some("127.0.0.1:0".into()),
        drain_timeout: Duration::from_secs(1),
        clusters: vec![cluster],
        routes: vec![],
        clients: Default::default(),
        tls: None,
    };
    let proxy = Proxy::bind(config).await.expect("proxy binds");
    let addr = proxy.local_addr().unwrap();
    let admin = proxy.admin_addr().unwrap();
    let gateway = proxy.gateway().clone();
    let task = tokio::spawn(async move {
        proxy.serve(std::future::pending()).await.unwrap();
    });
    Running {
        admin,
        addr,
        gateway,
        task,
    }
}

/// `n` demo backends on loopback.
async fn demo_backends(n: usize) -> Vec<DemoBackend> {
    let mut backends = Vec::new();
    for _ in 0..n {
        backends.push(DemoBackend::start("127.0.0.1:0").await.unwrap());
    }
    backends
}

/// The cluster `default` of `policy` over `backends`.
fn cluster_over(backends: &[DemoBackend], policy: &str) -> ClusterConfig {
    let mut cluster = ClusterConfig::new("default", policy.parse().unwrap());
    cluster.endpoints = backends
        .iter()
        .map(|b| b.addr().to_string().parse().unwrap())
        .collect();
    cluster
}

async fn status(admin: SocketAddr) -> Value {
    let reply = get(admin, "/status", &[]).await;
    assert_eq!(reply.status, 200);
    serde_json::from_str(&reply.body).expect("/status is JSON")
}

/// `n` requests for the hot key, held by the backend for `HELD_MS`, once
/// `/status` counts all of them in flight.
async fn hold_hot_requests(proxy: &Running, n: u64) -> Vec<JoinHandle<()>> {
    let held: Vec<JoinHandle<()>> = (0..n)
        .map(|_| {
            let addr = proxy.addr;
            tokio::spawn(async move {
                get(addr, &format!("/?delay={HELD_MS}"), &[("x-user", "hot")]).await;
            })
        })
        .collect();
    let admin = proxy.admin;
    assert!(
        eventually(Duration::from_secs(10), || async {
            status(admin).await["clusters"][0]["in_flight"] == n
        })
        .await,
        "{n} hot requests in flight: {}",
        status(admin).await
    );
    held
}

/// The Chromium binary on PATH; a missing one fails the test with the
/// command that installs it.
fn chromium() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path).chain([PathBuf::from("/usr/bin")]) {
        for name in ["chromium", "chromium-browser"] {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    panic!("headless Chromium is needed for the dashboard tests: apt-get install -y chromium");
}

/// Runs headless Chromium on `url` with `args`, its standard output into
/// `out`; waits for it to exit, at most [`BROWSER_LIMIT`] (then kills it by
/// pid and fails).
fn browse(dir: &Path, url: &str, args: &[String], out: &Path) {
    let profile = dir.join("profile");
    let stdout = std::fs::File::create(out).unwrap();
    let stderr_path = out.with_extension("stderr");
    let stderr = std::fs::File::create(&stderr_path).unwrap();
    let mut child = Command::new(chromium())
        .args([
            "--headless",
            // Root in CI containers: Chromium's sandbox refuses to start.
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-background-networking",
            "--hide-scrollbars",
            "--mute-audio",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .spawn()
        .unwrap_or_else(|e| panic!("chromium: {e} (apt-get install -y chromium)"));
    let started = Instant::now();
    let exit = loop {
        if let Some(exit) = child.try_wait().unwrap() {
            break exit;
        }
        if started.elapsed() > BROWSER_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "chromium ran over {BROWSER_LIMIT:?} on {url}: {}",
                tail(&stderr_path)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(exit.success(), "chromium {exit}: {}", tail(&stderr_path));
}

fn tail(path: &Path) -> String {
    let mut text = String::new();
    let _ = std::fs::File::open(path).and_then(|mut f| f.read_to_string(&mut text));
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

/// The DOM after the page's script ran for [`BUDGET_MS`] of virtual time.
async fn dump_dom(dir: &Path, url: String) -> String {
    dump_dom_and_console(dir, url).await.0
}

/// [`dump_dom`], and what the page wrote to the console (Chromium's
/// `CONSOLE` log lines: `console.*` calls, uncaught errors, failed loads).
async fn dump_dom_and_console(dir: &Path, url: String) -> (String, Vec<String>) {
    let dir = dir.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let out = dir.join(format!("logged-dom-{}.html", url.len()));
        browse(
            &dir,
            &url,
            &[
                format!("--virtual-time-budget={BUDGET_MS}"),
                "--dump-dom".into(),
                "--enable-logging=stderr".into(),
                "--v=0".into(),
            ],
            &out,
        );
        let log = std::fs::read_to_string(out.with_extension("stderr")).unwrap();
        let console = log
            .lines()
            .filter(|l| l.contains(":CONSOLE"))
            .map(str::to_string)
            .collect();
        (std::fs::read_to_string(out).unwrap(), console)
    })
    .await
    .unwrap()
}

/// A screenshot of `url` at `width` x `height`; returns the PNG's bytes.
async fn screenshot(dir: &Path, url: String, width: u32, height: u32, name: &str) -> Vec<u8> {
    let dir = dir.to_path_buf();
    let png = dir.join(name);
    let out = dir.join(format!("{name}.out"));
    tokio::task::spawn_blocking(move || {
        browse(
            &dir,
            &url,
            &[
                format!("--virtual-time-budget={BUDGET_MS}"),
                format!("--screenshot={}", png.display()),
                format!("--window-size={width},{height}"),
            ],
            &out,
        );
        std::fs::read(&png).unwrap_or_else(|e| panic!("{}: {e}", png.display()))
    })
    .await
    .unwrap()
}

/// The serialized DOM's text back to characters (what a text node or an
/// attribute value holds).
fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&")
}

/// The `<tr class="endpoint" ...>` rows of the dump, each as its markup.
fn rows(dom: &str) -> Vec<&str> {
    dom.split(r#"<tr class="endpoint""#)
        .skip(1)
        .map(|r| r.split("</tr>").next().unwrap())
        .collect()
}

/// The opening tag of the first element of `markup` with class `class`.
fn tag_of<'a>(markup: &'a str, class: &str) -> &'a str {
    let at = markup
        .find(&format!(r#"class="{class}""#))
        .unwrap_or_else(|| panic!("no element of class {class} in {markup}"));
    let end = markup[at..].find('>').unwrap() + at;
    &markup[at..end]
}

/// The value of attribute `name` in an opening tag.
fn attr(tag: &str, name: &str) -> Option<String> {
    let at = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    let end = tag[at..].find('"')? + at;
    Some(unescape(&tag[at..end]))
}

/// The text right inside the first element of class `class`.
fn text_of(markup: &str, class: &str) -> String {
    let at = markup.find(&format!(r#"class="{class}""#)).unwrap();
    let open = markup[at..].find('>').unwrap() + at + 1;
    let close = markup[open..].find('<').unwrap() + open;
    unescape(&markup[open..close])
}

/// A percentage written `left: 41.67%` in a style attribute.
fn style_percent(tag: &str, property: &str) -> f64 {
    let style = attr(tag, "style").unwrap_or_else(|| panic!("no style in {tag}"));
    let value = style
        .split(';')
        .find_map(|d| d.trim().strip_prefix(&format!("{property}:")))
        .unwrap_or_else(|| panic!("no {property} in {style}"));
    value.trim().trim_end_matches('%').parse().unwrap()
}

/// Three backends and a fourth tagged with [`HOSTILE`]; a hot key held in
/// flight on all of them by the bounded ring; a few finished requests.
async fn hot_cluster() -> (Vec<DemoBackend>, Running, Vec<JoinHandle<()>>) {
    let backends = demo_backends(4).await;
    let mut cluster = ClusterConfig::new("default", "c_murmurhash_bl".parse().unwrap());
    cluster.endpoints = backends
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let e = Endpoint::new(b.addr().to_string()).unwrap();
            if i == 3 {
                e.with_tag(HOSTILE).unwrap()
            } else {
                e
            }
        })
        .collect();
    cluster.key = KeySpec::parse(&["header:x-user"]).unwrap();
    cluster.timeout = Duration::from_millis(HELD_MS * 2);
    let proxy = start(cluster).await;
    for i in 0..8 {
        let user = format!("u{i}");
        assert_eq!(get(proxy.addr, "/", &[("x-user", &user)]).await.status, 200);
    }
    let held = hold_hot_requests(&proxy, 12).await;
    (backends, proxy, held)
}

/// The page's rows against `/status` and the balancer: every endpoint has
/// its row; its in-flight count is the one `/status` gives (the hot
/// requests are held, so the readings before and after the browser agree);
/// the cap line stands at the cap the balancer enforces, on the same scale
/// as the bar; the hostile tag shows as text and runs nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_every_endpoint_its_load_and_its_cap_as_the_balancer_does() {
    let (_backends, proxy, held) = hot_cluster().await;
    let dir = tempfile::tempdir().unwrap();
    let before = status(proxy.admin).await;
    let dom = dump_dom(dir.path(), format!("http://{}/", proxy.admin)).await;
    let after = status(proxy.admin).await;
    let endpoints = after["endpoints"].as_array().unwrap().clone();
    for (b, a) in before["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .zip(&endpoints)
    {
        assert_eq!(b["in_flight"], a["in_flight"], "held requests: no change");
    }

    assert!(
        dom.contains(r#"data-state="live""#),
        "the script ran: {dom}"
    );
    // The hostile tag: nothing ran, no element was made of it, it shows as
    // text.
    assert!(
        dom.contains("<title>loadring</title>"),
        "no script changed the title"
    );
    assert!(!dom.contains("<img"), "no element made from a name: {dom}");
    assert!(
        dom.contains(&HOSTILE.replace('<', "&lt;").replace('>', "&gt;")),
        "the name shows as text"
    );
    let rows = rows(&dom);
    assert_eq!(rows.len(), endpoints.len(), "a row per endpoint: {dom}");
    let balancer = proxy.gateway.clusters()[0].balancer();
    // The bars' scale: the highest count or cap, and a quarter more.
    let mut highest: u64 = 1;
    for e in &endpoints {
        highest = highest
            .max(e["in_flight"].as_u64().unwrap())
            .max(e["cap"].as_u64().unwrap_or(0));
    }
    let scale = highest as f64 * 1.25;
    let mut capped = 0;
    for (row, e) in rows.iter().zip(&endpoints) {
        let addr = e["addr"].as_str().unwrap();
        assert_eq!(text_of(row, "addr"), addr);
        let tag = e["tag"].as_str();
        assert_eq!(text_of(row, "tag"), tag.unwrap_or("\u{2014}"));
        let cell = tag_of(row, "in-flight");
        let in_flight = e["in_flight"].as_u64().unwrap();
        assert_eq!(attr(cell, "data-in-flight"), Some(in_flight.to_string()));
        assert!(
            row.contains(&format!(">{in_flight} in flight")),
            "the count is written: {row}"
        );
        let cap = balancer
            .cap(loadring::Id::new(addr, tag))
            .unwrap()
            .expect("a bounded policy caps every endpoint");
        let line = tag_of(row, "cap-line");
        assert_eq!(attr(line, "data-cap"), Some(cap.to_string()), "{addr}");
        let left = style_percent(line, "left");
        let expected = cap as f64 / scale * 100.0;
        assert!(
            (left - expected).abs() < 0.01,
            "cap line at {left}%, want {expected}%"
        );
        let fill = if row.contains(r#"class="fill at-cap""#) {
            capped += 1;
            tag_of(row, "fill at-cap")
        } else {
            tag_of(row, "fill")
        };
        let width = style_percent(fill, "width");
        let expected = in_flight as f64 / scale * 100.0;
        assert!(
            (width - expected).abs() < 0.01,
            "bar at {width}%, want {expected}%"
        );
        assert_eq!(
            row.contains("at cap"),
            in_flight >= cap,
            "{addr}: {in_flight} of {cap}"
        );
    }
    eprintln!("{capped} endpoint(s) at their cap");

    let png = screenshot(
        dir.path(),
        format!("http://{}/", proxy.admin),
        1280,
        1100,
        "dashboard.png",
    )
    .await;
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let width = u32::from_be_bytes(png[16..20].try_into().unwrap());
    assert_eq!(width, 1280, "laptop width");
    let phone = screenshot(
        dir.path(),
        format!("http://{}/", proxy.admin),
        390,
        1600,
        "phone.png",
    )
    .await;
    assert_eq!(u32::from_be_bytes(phone[16..20].try_into().unwrap()), 390);
    if let Some(dir) = std::env::var_os("LOADRING_DASHBOARD_KEEP") {
        // To look at them: a folder for both screenshots.
        let dir = PathBuf::from(dir);
        std::fs::write(dir.join("laptop.png"), &png).unwrap();
        std::fs::write(dir.join("phone.png"), &phone).unwrap();
    }
    for h in held {
        h.abort();
    }
}

/// `?refresh=0`: one reading of `/status`, then nothing; the page says it
/// is frozen. A live page reads it again every second of the same budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refresh_0_freezes_the_page_after_one_reading() {
    let (_backends, proxy, held) = hot_cluster().await;
    let dir = tempfile::tempdir().unwrap();
    let polls = |dom: &str| -> u64 {
        let state = tag_of(dom, "state");
        attr(state, "data-polls").unwrap().parse().unwrap()
    };
    let frozen = dump_dom(dir.path(), format!("http://{}/?refresh=0", proxy.admin)).await;
    assert!(frozen.contains(r#"data-state="frozen""#), "{frozen}");
    assert_eq!(polls(&frozen), 1, "{frozen}");
    assert_eq!(rows(&frozen).len(), 4, "the one reading is drawn");
    let live = dump_dom(dir.path(), format!("http://{}/", proxy.admin)).await;
    assert!(live.contains(r#"data-state="live""#), "{live}");
    assert!(polls(&live) >= 2, "{live}");
    for h in held {
        h.abort();
    }
}

/// The admin responses' security headers, and the files of the page.
#[tokio::test]
async fn the_admin_listener_serves_the_page_with_a_strict_policy() {
    let backend = DemoBackend::start("127.0.0.1:0").await.unwrap();
    let mut cluster = ClusterConfig::new("default", "c_murmurhash_bl".parse().unwrap());
    cluster.endpoints = vec![backend.addr().to_string().parse().unwrap()];
    cluster.key = KeySpec::parse(&["header:x-user"]).unwrap();
    let proxy = start(cluster).await;
    for (path, kind) in [
        ("/", "text/html"),
        ("/dashboard.js", "text/javascript"),
        ("/dashboard.css", "text/css"),
        ("/status", "application/json"),
        ("/metrics", "application/openmetrics-text"),
    ] {
        let reply = get(proxy.admin, path, &[]).await;
        assert_eq!(reply.status, 200, "{path}");
        assert!(
            reply.header("content-type").unwrap().starts_with(kind),
            "{path}"
        );
        let csp = reply.header("content-security-policy").unwrap();
        for directive in [
            "default-src 'none'",
            "script-src 'self'",
            "style-src 'self'",
            "connect-src 'self'",
            "frame-ancestors 'none'",
        ] {
            assert!(csp.contains(directive), "{path}: {csp}");
        }
        assert!(!csp.contains("unsafe"), "{csp}");
        assert_eq!(reply.header("x-content-type-options"), Some("nosniff"));
        assert_eq!(reply.header("cache-control"), Some("no-store"));
    }
    let reply = get(proxy.admin, "/nope", &[]).await;
    assert_eq!(reply.status, 404);
    assert!(reply.body.contains("GET /status"), "{}", reply.body);
    // The page is served by the admin listener only.
    assert_ne!(
        get(proxy.addr, "/dashboard.js", &[])
            .await
            .header("content-type"),
        Some("text/javascript; charset=utf-8")
    );
}

/// Every `/status` field, its value from what happened: the counters from
/// the requests sent (one failing), the shares from `describe`'s layout,
/// and every field named in docs/proxy.md.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_counts_what_each_endpoint_served_and_documents_every_field() {
    let (backends, proxy, held) = hot_cluster().await;
    let failed = get(proxy.addr, "/?status=500", &[("x-user", "u0")]).await;
    assert_eq!(failed.status, 500);
    let failed_on = failed.backend();
    let doc = status(proxy.admin).await;
    let cluster = &doc["clusters"][0];
    let metrics = get(proxy.admin, "/metrics", &[]).await.body;
    // Requests: the backends' own counts (8 quick, 12 held, 1 failing).
    let served: HashMap<String, u64> = backends
        .iter()
        .map(|b| (b.addr().to_string(), b.requests()))
        .collect();
    let mut spills = 0;
    for e in cluster["endpoints"].as_array().unwrap() {
        let addr = e["addr"].as_str().unwrap();
        assert_eq!(e["requests"].as_u64(), Some(served[addr]), "{addr}");
        let errors = u64::from(addr == failed_on);
        assert_eq!(e["errors"].as_u64(), Some(errors), "{addr}");
        assert_eq!(e["healthy"], true);
        assert_eq!(e["checked_up"], true);
        assert_eq!(e["ejected_ms"], Value::Null);
        assert_eq!(e["slow_start"], Value::Null);
        assert_eq!(e["weight"], 1);
        assert_eq!(e["zone"], Value::Null);
        spills += e["spills"].as_u64().unwrap();
    }
    assert_eq!(cluster["requests"], 21);
    assert_eq!(cluster["errors"], 1);
    assert_eq!(cluster["spills"].as_u64(), Some(spills));
    assert_eq!(
        metric(&metrics, "loadring_spilled_total"),
        Some(spills as f64),
        "the same spills as /metrics"
    );
    assert!(spills > 0, "12 held on one key spill under a cap");
    assert_eq!(cluster["in_flight"], 12);
    assert_eq!(cluster["in_flight_mean"], 3.0);
    assert_eq!(cluster["bounded"], true);
    // Shares: describe's layout of this very balancer.
    let layout = proxy.gateway.clusters()[0]
        .balancer()
        .layout()
        .unwrap()
        .unwrap();
    assert_eq!(cluster["layout"]["entries"], layout.entries());
    assert_eq!(cluster["layout"]["entry_label"], layout.entry_label());
    // JSON numbers read back within an ulp or so.
    let close = |v: &Value, want: f64| (v.as_f64().unwrap() - want).abs() <= 1e-12 * want.abs();
    assert!(close(&cluster["layout"]["deviation"], layout.deviation()));
    assert!(close(
        &cluster["layout"]["max_over_mean"],
        layout.max_over_mean()
    ));
    for ((endpoint, share), e) in layout
        .shares()
        .iter()
        .zip(cluster["endpoints"].as_array().unwrap())
    {
        assert_eq!(e["addr"], endpoint.addr());
        assert!(close(&e["share"], *share), "{e}");
        assert_eq!(e["fair_share"], 0.25);
    }
    assert!(doc["uptime_ms"].as_u64().unwrap() > 0);
    assert_eq!(
        doc["endpoints"], cluster["endpoints"],
        "one cluster: also on top"
    );

    // Every field is documented.
    let docs = include_str!("../../../docs/proxy.md");
    let mut fields: Vec<&str> = Vec::new();
    let objects = [&doc, cluster, &cluster["layout"], &cluster["endpoints"][0]];
    for object in objects {
        fields.extend(object.as_object().unwrap().keys().map(String::as_str));
    }
    for field in fields {
        assert!(
            docs.contains(&format!("`{field}`")),
            "docs/proxy.md: `{field}`"
        );
    }
    for h in held {
        h.abort();
    }
}

/// `/history` holds the seconds sampled so far, each endpoint's series
/// aligned with `uptime_ms`, and the page draws from it at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_keeps_the_seconds_sampled_so_far() {
    let (_backends, proxy, held) = hot_cluster().await;
    let admin = proxy.admin;
    let history = || async move {
        let reply = get(admin, "/history", &[]).await;
        assert_eq!(reply.status, 200);
        serde_json::from_str::<Value>(&reply.body).unwrap()
    };
    assert!(
        eventually(Duration::from_secs(10), || async {
            history().await["uptime_ms"].as_array().unwrap().len() >= 3
        })
        .await
    );
    let doc = history().await;
    assert_eq!(doc["interval_ms"], 1000);
    let times = doc["uptime_ms"].as_array().unwrap();
    let endpoints = doc["clusters"][0]["endpoints"].as_array().unwrap();
    assert_eq!(endpoints.len(), 4);
    let last = times.len() - 1;
    let now = status(admin).await;
    for e in endpoints {
        let series = e["in_flight"].as_array().unwrap();
        assert_eq!(series.len(), times.len());
        let addr = e["addr"].as_str().unwrap();
        let current = now["endpoints"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["addr"] == addr)
            .unwrap();
        assert_eq!(
            series[last], current["in_flight"],
            "{addr}: held, unchanged"
        );
    }
    assert_eq!(
        doc["clusters"][0]["spills"][last], now["clusters"][0]["spills"],
        "the spill counter /status gives"
    );
    for h in held {
        h.abort();
    }
}

/// Makes the README's `docs/dashboard.png`: a minute of live traffic (a hot
/// key in waves over steady keys, a few failures) under `c_murmurhash_bl`,
/// then a screenshot of the page taken as the test above takes one:
///
/// ```text
/// LOADRING_DASHBOARD_PNG=$PWD/docs/dashboard.png \
///   cargo test -p loadring-proxy --test main -- --ignored readme_screenshot
/// ```
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a minute of traffic; makes docs/dashboard.png"]
async fn readme_screenshot() {
    let backends = demo_backends(4).await;
    let mut cluster = ClusterConfig::new("default", "c_murmurhash_bl".parse().unwrap());
    cluster.endpoints = backends
        .iter()
        .enumerate()
        .map(|(i, b)| {
            Endpoint::new(b.addr().to_string())
                .unwrap()
                .with_zone(if i < 2 { "eu-1a" } else { "eu-1b" })
                .unwrap()
        })
        .collect();
    cluster.key = KeySpec::parse(&["header:x-user"]).unwrap();
    let proxy = start(cluster).await;
    let addr = proxy.addr;
    // Traffic runs until the screenshot is taken, so it shows a live load.
    let traffic = tokio::spawn(async move {
        let started = Instant::now();
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut random = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut tasks: Vec<JoinHandle<()>> = Vec::new();
        loop {
            let t = started.elapsed().as_secs_f64();
            // The hot key comes in waves of 20 s.
            let hot = (t / 20.0 * std::f64::consts::TAU).sin() > -0.2;
            let r = random();
            let (user, delay, code) = if hot && r % 3 != 0 {
                ("hot".to_string(), 800 + r % 1200, 200)
            } else {
                let code = if r % 40 == 0 { 500 } else { 200 };
                (format!("u{}", r % 500), 50 + r % 400, code)
            };
            tasks.push(tokio::spawn(async move {
                let target = format!("/?delay={delay}&status={code}");
                get(addr, &target, &[("x-user", &user)]).await;
            }));
            tasks.retain(|t| !t.is_finished());
            tokio::time::sleep(Duration::from_millis(40)).await;
        }
    });
    tokio::time::sleep(Duration::from_secs(60)).await;
    let dir = tempfile::tempdir().unwrap();
    let png = screenshot(
        dir.path(),
        format!("http://{}/", proxy.admin),
        1280,
        1000,
        "dashboard.png",
    )
    .await;
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    traffic.abort();
    if let Some(keep) = std::env::var_os("LOADRING_DASHBOARD_PNG") {
        std::fs::write(keep, &png).unwrap();
    }
}

/// An ejected endpoint: `/status` gives the time left of its ejection and
/// the page says so in words on its row (the others are up).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ejected_endpoint_shows_its_time_left() {
    let backends = demo_backends(3).await;
    let mut cluster = cluster_over(&backends, "c_murmurhash_bl");
    cluster.key = KeySpec::parse(&["header:x-user"]).unwrap();
    cluster.health.eject_after = 1;
    cluster.health.eject_for = Duration::from_secs(600);
    let proxy = start(cluster).await;
    let failed = get(proxy.addr, "/?status=500", &[("x-user", "k")]).await;
    assert_eq!(failed.status, 500);
    let ejected = failed.backend();
    let doc = status(proxy.admin).await;
    for e in doc["endpoints"].as_array().unwrap() {
        let left = e["ejected_ms"].as_u64();
        if e["addr"] == ejected.as_str() {
            assert!(left.is_some_and(|ms| ms > 0 && ms <= 600_000), "{e}");
            assert_eq!(e["healthy"], false);
            assert_eq!(e["errors"], 1);
        } else {
            assert_eq!(left, None, "{e}");
        }
    }
    // One mechanism: --eject-after's ejection is the balancer's lifecycle,
    // not a health mark (which stays the active checks' verdict).
    let balancer = proxy.gateway.clusters()[0].balancer();
    assert_eq!(balancer.is_healthy(ejected.as_str()), Ok(true));
    let lifecycle = balancer.lifecycle(ejected.as_str(), loadring::clock::now());
    assert!(lifecycle.unwrap().ejected_for.is_some());
    let dir = tempfile::tempdir().unwrap();
    let dom = dump_dom(dir.path(), format!("http://{}/", proxy.admin)).await;
    let rows = rows(&dom);
    assert_eq!(rows.len(), 3);
    for row in rows {
        let health = tag_of(row, "health");
        if text_of(row, "addr") == ejected {
            assert_eq!(attr(health, "data-health").as_deref(), Some("ejected"));
            let text = text_of(row, "health");
            // 600 s less the moments since: "9 min 59 s" or so.
            assert!(
                text.contains("ejected, back in 9 min") || text.contains("back in 10 min 0 s"),
                "{text}"
            );
        } else {
            assert_eq!(attr(health, "data-health").as_deref(), Some("up"));
            assert!(text_of(row, "health").contains("up"));
        }
    }
}

/// With `--load-report`, each row shows the load the cap counts beside the
/// proxy's own count: `reported N` as `/status` gives it, or `no fresh
/// report` for a backend that does not report.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_reported_load_beside_the_local_count() {
    let mut backends = Vec::new();
    for reports in [true, true, false] {
        let b = DemoBackend::start("127.0.0.1:0").await.unwrap();
        b.set_load_report(reports);
        backends.push(b);
    }
    // Reports that stay fresh while the browser runs.
    let mut cluster = ClusterConfig::new(
        "default",
        "c_murmurhash_bl:load_factor=1.25 report_max_age=60m"
            .parse()
            .unwrap(),
    );
    cluster.endpoints = backends
        .iter()
        .map(|b| Endpoint::new(b.addr().to_string()).unwrap())
        .collect();
    cluster.key = KeySpec::parse(&["header:x-user"]).unwrap();
    cluster.timeout = Duration::from_millis(HELD_MS * 2);
    cluster.load_report = Some("orca".parse().unwrap());
    let proxy = start(cluster).await;
    // Quick requests until every backend has answered one.
    for i in 0..200 {
        let user = format!("u{i}");
        assert_eq!(get(proxy.addr, "/", &[("x-user", &user)]).await.status, 200);
        if backends.iter().all(|b| b.requests() > 0) {
            break;
        }
    }
    assert!(backends.iter().all(|b| b.requests() > 0));
    let held = hold_hot_requests(&proxy, 5).await;
    let dir = tempfile::tempdir().unwrap();
    let dom = dump_dom(dir.path(), format!("http://{}/", proxy.admin)).await;
    let doc = status(proxy.admin).await;
    let endpoints = doc["endpoints"].as_array().unwrap();
    let rows = rows(&dom);
    assert_eq!(rows.len(), 3, "{dom}");
    for ((row, e), b) in rows.iter().zip(endpoints).zip(&backends) {
        assert_eq!(e["addr"], b.addr().to_string());
        let cell = tag_of(row, "in-flight");
        let label = unescape(row);
        match e["reported_load"].as_u64() {
            Some(n) => {
                assert_eq!(attr(cell, "data-reported"), Some(n.to_string()));
                assert!(label.contains(&format!("\u{b7} reported {n}")), "{label}");
            }
            None => {
                assert_eq!(attr(cell, "data-reported"), Some(String::new()));
                assert!(label.contains("no fresh report"), "{label}");
            }
        }
    }
    // The backends that report are in the view, the silent one is not.
    let reported: Vec<bool> = endpoints
        .iter()
        .map(|e| e["reported_load"].is_u64())
        .collect();
    assert_eq!(reported, [true, true, false], "{doc}");
    for h in held {
        h.abort();
    }
}

/// `/status?endpoints=N` over HTTP: N endpoints listed with the whole
/// membership's count; anything else is a 400 of one line of text.
#[tokio::test]
async fn status_lists_the_endpoints_asked_for_and_refuses_a_bad_query() {
    let backends = demo_backends(3).await;
    let cluster = cluster_over(&backends, "rr");
    let proxy = start(cluster).await;
    let addrs: Vec<String> = backends.iter().map(|b| b.addr().to_string()).collect();
    let listed = |doc: &Value| -> Vec<String> {
        doc["clusters"][0]["endpoints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["addr"].as_str().unwrap().to_string())
            .collect()
    };
    // Nothing in flight, no requests: the first in membership order.
    for (query, shown) in [
        ("", 3),
        ("?endpoints=2", 2),
        ("?endpoints=0", 0),
        ("?endpoints=9", 3),
    ] {
        let reply = get(proxy.admin, &format!("/status{query}"), &[]).await;
        assert_eq!(reply.status, 200, "{query}");
        let doc: Value = serde_json::from_str(&reply.body).unwrap();
        assert_eq!(listed(&doc), addrs[..shown], "{query}");
        assert_eq!(doc["clusters"][0]["endpoint_count"], 3);
        assert_eq!(doc["clusters"][0]["endpoints_shown"], shown);
    }
    for (query, why) in [
        (
            "endpoints=x",
            "endpoints: `x` is not a count: accepted 0..=1048576",
        ),
        (
            "endpoints=1048577",
            "endpoints: `1048577` is out of range: accepted 0..=1048576",
        ),
        (
            "top=5",
            "top: not a parameter of /status (`top=5`): accepted endpoints=0..=1048576",
        ),
    ] {
        let reply = get(proxy.admin, &format!("/status?{query}"), &[]).await;
        assert_eq!(reply.status, 400, "{query}");
        assert_eq!(reply.body, format!("{why}\n"));
        assert_eq!(
            reply.header("content-type"),
            Some("text/plain; charset=utf-8")
        );
        // An admin response like the others.
        assert_eq!(reply.header("cache-control"), Some("no-store"));
    }
}

/// Endpoints of the large-cluster test; the page lists [`PAGE_SHOWN`].
const LARGE: usize = 250;
/// `SHOWN` in dashboard.js.
const PAGE_SHOWN: usize = 200;

/// A cluster of more endpoints than the page asks `/status` for: the page
/// lists the 200 busiest (the ones holding requests, then the first idle
/// ones in membership order), says so above the table, and draws a line
/// for each of them only. Then, with traffic moving the busiest between
/// polls, it keeps working: live, no console message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_cluster_shows_its_busiest_endpoints_and_says_so() {
    assert!(include_str!("../src/dashboard/dashboard.js")
        .contains(&format!("const SHOWN = {PAGE_SHOWN};")));
    let backends = demo_backends(LARGE).await;
    let mut cluster = cluster_over(&backends, "c_murmurhash");
    cluster.key = KeySpec::parse(&["header:x-user"]).unwrap();
    cluster.timeout = Duration::from_millis(HELD_MS * 2);
    let proxy = start(cluster).await;
    // Requests held on keys of their own until at least three endpoints
    // past the first 200 hold one: those must be listed, in place of idle
    // ones that come first in membership order.
    let held_by =
        |backends: &[DemoBackend]| -> Vec<u64> { backends.iter().map(|b| b.requests()).collect() };
    let mut held: Vec<JoinHandle<()>> = Vec::new();
    for k in 0..200 {
        let addr = proxy.addr;
        held.push(tokio::spawn(async move {
            get(
                addr,
                &format!("/?delay={HELD_MS}"),
                &[("x-user", &format!("k{k}"))],
            )
            .await;
        }));
        let n = held.len() as u64;
        assert!(
            eventually(Duration::from_secs(10), || async {
                held_by(&backends).iter().sum::<u64>() == n
            })
            .await,
            "{n} requests reach the backends"
        );
        if held_by(&backends)[PAGE_SHOWN..]
            .iter()
            .filter(|&&c| c > 0)
            .count()
            >= 3
        {
            break;
        }
    }
    let counts = held_by(&backends);
    assert!(counts[PAGE_SHOWN..].iter().filter(|&&c| c > 0).count() >= 3);
    let n = held.len() as u64;
    assert!(
        eventually(Duration::from_secs(10), || async {
            status(proxy.admin).await["clusters"][0]["in_flight"] == n
        })
        .await
    );
    // Each endpoint's backend holds all it was sent: as many in flight as
    // requests. The busiest: those holding some, then idle ones in
    // membership order; listed in membership order.
    let mut by_rank: Vec<usize> = (0..LARGE).collect();
    by_rank.sort_by_key(|&i| (std::cmp::Reverse(counts[i]), i));
    let mut shown: Vec<usize> = by_rank[..PAGE_SHOWN].to_vec();
    shown.sort_unstable();
    assert!(shown.iter().any(|&i| i >= PAGE_SHOWN));

    let dir = tempfile::tempdir().unwrap();
    let dom = dump_dom(dir.path(), format!("http://{}/", proxy.admin)).await;
    assert!(dom.contains(r#"data-state="live""#), "{dom}");
    let note = tag_of(&dom, "shown");
    assert_eq!(attr(note, "data-shown").as_deref(), Some("200"));
    assert_eq!(attr(note, "data-count").as_deref(), Some("250"));
    assert_eq!(
        text_of(&dom, "shown"),
        "The 200 busiest of 250 endpoints (most in flight, then most requests), in membership order"
    );
    let listed_rows = rows(&dom);
    assert_eq!(listed_rows.len(), PAGE_SHOWN);
    for (row, &i) in listed_rows.iter().zip(&shown) {
        assert_eq!(text_of(row, "addr"), backends[i].addr().to_string());
        let cell = tag_of(row, "in-flight");
        assert_eq!(attr(cell, "data-in-flight"), Some(counts[i].to_string()));
    }
    // A line (and a legend entry) per endpoint listed, none for the others.
    let legend = dom.split(r#"<ul class="legend">"#).nth(1).unwrap();
    let legend = legend.split("</ul>").next().unwrap();
    assert_eq!(legend.matches("<li>").count(), PAGE_SHOWN);
    assert!(
        dom.contains("<dt>Endpoints</dt><dd class=\"num\">250</dd>"),
        "the whole membership's count: {dom}"
    );

    // Quick requests on many keys raise idle endpoints' request counts: the
    // idle ones listed change from one poll to the next.
    let addr = proxy.addr;
    let traffic = tokio::spawn(async move {
        for i in 0.. {
            get(addr, "/", &[("x-user", &format!("q{i}"))]).await;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    let listed = |doc: &Value| -> Vec<String> {
        doc["clusters"][0]["endpoints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["addr"].as_str().unwrap().to_string())
            .collect()
    };
    let before = listed(&get_json(proxy.admin, "/status?endpoints=200").await);
    let (dom, console) = dump_dom_and_console(dir.path(), format!("http://{}/", proxy.admin)).await;
    let after = listed(&get_json(proxy.admin, "/status?endpoints=200").await);
    traffic.abort();
    assert_ne!(before, after, "the traffic changed the busiest");
    assert!(dom.contains(r#"data-state="live""#), "{dom}");
    let polls: u64 = attr(tag_of(&dom, "state"), "data-polls")
        .unwrap()
        .parse()
        .unwrap();
    assert!(polls >= 2, "{dom}");
    assert_eq!(rows(&dom).len(), PAGE_SHOWN);
    assert_eq!(
        text_of(&dom, "shown"),
        "The 200 busiest of 250 endpoints (most in flight, then most requests), in membership order"
    );
    assert_eq!(console, Vec::<String>::new(), "nothing on the console");
    for h in held {
        h.abort();
    }
}

async fn get_json(admin: SocketAddr, target: &str) -> Value {
    let reply = get(admin, target, &[]).await;
    assert_eq!(reply.status, 200, "{target}");
    serde_json::from_str(&reply.body).unwrap()
}
