//! `loadring proxy` as a child process under faults an operator meets: an
//! idle proxy with an endpoints file, SIGHUP without one. Real sockets on
//! 127.0.0.1, every wait bounded, the child stopped by its pid.

use crate::common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{eventually, free_port, get, WAIT};
use loadring_proxy::DemoBackend;

const BIN: &str = env!("CARGO_BIN_EXE_loadring");

/// A running `loadring proxy`, killed (by its pid) if the test ends early;
/// its stderr lines are collected as they come.
struct ProxyProcess {
    child: Option<Child>,
    addr: SocketAddr,
    log: Arc<Mutex<Vec<String>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Drop for ProxyProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl ProxyProcess {
    async fn start(args: &[&str]) -> Self {
        Self::start_logging(args, "warn").await
    }

    async fn start_logging(args: &[&str], level: &str) -> Self {
        Self::start_as(args, level, None).await
    }

    /// With `fds`, under `ulimit -n FDS` (through `sh`).
    async fn start_as(args: &[&str], level: &str, fds: Option<u32>) -> Self {
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let listen = addr.to_string();
        let mut command = match fds {
            None => Command::new(BIN),
            Some(n) => {
                let mut sh = Command::new("sh");
                sh.args(["-c", &format!("ulimit -n {n} && exec \"$0\" \"$@\""), BIN]);
                sh
            }
        };
        let mut child = command
            .args(["proxy", "--listen", &listen])
            .args(args)
            .env("LOADRING_LOG", level)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("loadring runs");
        let log = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().unwrap();
        let lines = log.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                lines.lock().unwrap().push(line);
            }
        });
        let up = eventually(WAIT, || async {
            tokio::net::TcpStream::connect(addr).await.is_ok()
        })
        .await;
        if !up {
            let _ = child.kill();
            let _ = child.wait();
            panic!("proxy did not start: {:?}", log.lock().unwrap());
        }
        ProxyProcess {
            child: Some(child),
            addr,
            log,
            reader: Some(reader),
        }
    }

    /// The stderr lines so far.
    fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([&format!("-{name}"), &self.pid().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Whether the process has exited (and how), without waiting.
    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.as_mut().unwrap().try_wait().unwrap()
    }

    /// User plus system CPU time so far, in clock ticks (/proc/PID/stat).
    /// The read system calls the process has made (`syscr` in
    /// `/proc/PID/io`): every read of the endpoints file costs a few.
    fn read_calls(&self) -> u64 {
        let io = std::fs::read_to_string(format!("/proc/{}/io", self.pid())).unwrap();
        io.lines()
            .find_map(|l| l.strip_prefix("syscr: "))
            .expect("a syscr line in /proc/PID/io")
            .trim()
            .parse()
            .unwrap()
    }

    /// Sends SIGTERM and waits for the exit; its status and every stderr
    /// line.
    async fn terminate(mut self) -> (ExitStatus, Vec<String>) {
        self.signal("TERM");
        let mut child = self.child.take().unwrap();
        let waited = tokio::task::spawn_blocking(move || child.wait());
        let status = tokio::time::timeout(WAIT, waited)
            .await
            .expect("the proxy exits after SIGTERM")
            .unwrap()
            .unwrap();
        // The reader ends with the pipe: then every line is in.
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        (status, self.log())
    }
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("loadring-faults-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// An idle proxy following an endpoints file (`--endpoints` and
/// `--discover file:`) reads it on its poll and on changes, never because
/// of its own reads: over an idle interval its read system calls stay
/// within a few per poll the interval can hold, with a proxy on `-e` only
/// alongside. (It used to read the file in a loop, woken by the folder
/// events of its own reads: thousands of reads a second, 60-99 % of a
/// core.) Work is counted, not time: the budget grows with the interval
/// actually measured, so a slow machine only widens it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_proxy_with_an_endpoints_file_does_not_burn_cpu() {
    let b = DemoBackend::start("127.0.0.1:0").await.unwrap();
    let addr = b.addr().to_string();
    let dir = temp_dir("idle");
    let file = dir.join("endpoints.txt");
    std::fs::write(&file, format!("{addr}\n")).unwrap();
    let file = file.to_str().unwrap().to_string();
    let discover = format!("file:{file}");
    let proxies = [
        ProxyProcess::start(&["--policy", "rr", "--endpoints", &file]).await,
        ProxyProcess::start(&["--policy", "rr", "--discover", &discover]).await,
        ProxyProcess::start(&["--policy", "rr", "-e", &addr]).await,
    ];
    for p in &proxies {
        assert_eq!(get(p.addr, "/", &[]).await.status, 200);
    }
    let started = std::time::Instant::now();
    let before: Vec<u64> = proxies.iter().map(ProxyProcess::read_calls).collect();
    // An interval of idle to count over; its length only sets how much a
    // loop would show, not whether the test passes.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after: Vec<u64> = proxies.iter().map(ProxyProcess::read_calls).collect();
    let elapsed = started.elapsed();
    let used: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    // A poll reads a small file in two calls (the text, then its end); the
    // watch reads the folder events of that read (open, close) in two to
    // four, and a wake-up may read an eventfd: about 4 in all, budgeted 12
    // per poll, polls every 250 ms, two more for the edges. The loop this
    // guards against made over 100,000 a second.
    let polls = u64::try_from(elapsed.as_millis() / 250).unwrap() + 2;
    let budget = 12 * polls;
    for (what, used) in ["--endpoints", "--discover file:", "-e only"]
        .iter()
        .zip(&used)
    {
        assert!(
            *used <= budget,
            "{what}: {used} read calls in {elapsed:?}, budget {budget} (all: {used:?})"
        );
    }
    for p in proxies {
        assert!(p.terminate().await.0.success());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// SIGHUP to a proxy with no endpoints file: it keeps serving (the request
/// in flight completes, new ones are answered), logs one line per SIGHUP,
/// and stops with 0 on SIGTERM. (It used to exit at once with code 129.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_without_an_endpoints_file_does_not_stop_the_proxy() {
    let b = DemoBackend::start("127.0.0.1:0").await.unwrap();
    let addr = b.addr().to_string();
    let mut proxy = ProxyProcess::start(&["--policy", "rr", "-e", &addr]).await;
    let listen = proxy.addr;
    let slow = tokio::spawn(async move { get(listen, "/?delay=3000", &[]).await });
    assert!(eventually(WAIT, || async { b.in_flight() == 1 }).await);
    // One at a time: signals sent together may be delivered as one.
    proxy.signal("HUP");
    let first = eventually(WAIT, || async { proxy.log().len() == 1 }).await;
    assert!(first, "the first SIGHUP's line: {:?}", proxy.log());
    proxy.signal("HUP");
    let second = eventually(WAIT, || async { proxy.log().len() == 2 }).await;
    assert!(second, "the second SIGHUP's line: {:?}", proxy.log());
    let reply = slow.await.unwrap();
    assert_eq!((reply.status, reply.backend()), (200, addr.clone()));
    assert_eq!(proxy.exited(), None, "SIGHUP must not stop the proxy");
    assert_eq!(get(proxy.addr, "/", &[]).await.status, 200);
    let (status, lines) = proxy.terminate().await;
    assert_eq!(status.code(), Some(0), "{lines:?}");
    assert_eq!(lines.len(), 2, "one line per SIGHUP: {lines:?}");
    assert!(
        lines
            .iter()
            .all(|l| l.contains("SIGHUP: nothing to re-read")),
        "{lines:?}"
    );
}

/// Item 11: a zero timeout makes no sense (every request would get 504):
/// refused before serving, one line naming the flag (or the config key)
/// and the range; so is a connection limit out of its range.
#[test]
fn zero_timeouts_are_refused_naming_the_flag() {
    let listen = format!("127.0.0.1:{}", free_port());
    let dir = temp_dir("zero");
    let toml = dir.join("zero.toml");
    std::fs::write(
        &toml,
        format!("listen = \"{listen}\"\n[[cluster]]\npolicy = \"rr\"\nendpoints = [\"127.0.0.1:2\"]\ntimeout = \"0s\"\n"),
    )
    .unwrap();
    let toml = toml.to_str().unwrap().to_string();
    // Each flag on an otherwise valid command line, and the config key.
    let base = ["--listen", listen.as_str(), "-p", "rr", "-e", "127.0.0.1:2"];
    let flags = [
        ("--timeout", "0s", "error: --timeout: `0s` is out of range: accepted a whole number of ms, s, m or h from 1ms to 24h (e.g. 500ms, 10s, 1m)"),
        (
            "--connect-timeout",
            "0ms",
            "error: --connect-timeout: `0ms` is out of range: accepted a whole number of ms, s, m or h from 1ms to 24h (e.g. 500ms, 10s, 1m)",
        ),
        (
            "--header-timeout",
            "0s",
            "error: --header-timeout: `0s` is out of range: accepted a whole number of ms, s, m or h from 1ms to 24h (e.g. 500ms, 10s, 1m)",
        ),
        (
            "--send-timeout",
            "0s",
            "error: --send-timeout: `0s` is out of range: accepted a whole number of ms, s, m or h from 1ms to 24h (e.g. 500ms, 10s, 1m)",
        ),
        (
            "--send-timeout",
            "25h",
            "error: --send-timeout: `25h` is out of range: accepted a whole number of ms, s, m or h from 1ms to 24h (e.g. 500ms, 10s, 1m)",
        ),
        (
            "--tunnel-timeout",
            "0s",
            "error: --tunnel-timeout: `0s` is out of range: accepted a whole number of ms, s, m or h from 1ms to 24h (e.g. 500ms, 10s, 1m)",
        ),
        (
            "--tunnel-timeout",
            "25h",
            "error: --tunnel-timeout: `25h` is out of range: accepted a whole number of ms, s, m or h from 1ms to 24h (e.g. 500ms, 10s, 1m)",
        ),
        (
            "--max-connections",
            "0",
            "error: --max-connections: `0` is out of range: accepted 1..=16777216",
        ),
        (
            "--max-connections",
            "-5",
            "error: --max-connections: `-5` is not a count: accepted 1..=16777216",
        ),
        (
            "--max-abandoned",
            "16777217",
            "error: --max-abandoned: `16777217` is out of range: accepted 0..=16777216",
        ),
        (
            "--max-abandoned",
            "x",
            "error: --max-abandoned: `x` is not a count: accepted 0..=16777216",
        ),
    ];
    let mut cases: Vec<(Vec<&str>, &str)> = flags
        .iter()
        .map(|&(flag, value, expected)| {
            let mut args = base.to_vec();
            args.extend([flag, value]);
            (args, expected)
        })
        .collect();
    cases.push((
        vec!["--config", &toml],
        "timeout: `0s` is out of range: accepted a whole number of ms, s, m or h from 1ms to 24h (e.g. 500ms, 10s, 1m)",
    ));
    for (args, expected) in cases {
        let out = Command::new(BIN)
            .arg("proxy")
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Replaces `path` atomically (write aside, rename over).
fn replace(path: &std::path::Path, text: &str) {
    let aside = path.with_extension("new");
    std::fs::write(&aside, text).unwrap();
    std::fs::rename(&aside, path).unwrap();
}

/// The backends that answer 2n round-robin requests.
async fn answering(proxy: &ProxyProcess, n: usize) -> Vec<String> {
    let mut seen = Vec::new();
    for _ in 0..2 * n {
        let reply = get(proxy.addr, "/", &[]).await;
        assert_eq!(reply.status, 200);
        seen.push(reply.backend());
    }
    seen.sort();
    seen.dedup();
    seen
}

/// Item 7: a file with one bad address (a port out of range) is refused
/// whole, as a line that does not parse is: the pool of 3 stays, and one
/// line names the file's line. (It used to become a pool of the good lines.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_with_one_bad_address_is_refused_whole_naming_its_line() {
    let b = [
        DemoBackend::start("127.0.0.1:0").await.unwrap(),
        DemoBackend::start("127.0.0.1:0").await.unwrap(),
        DemoBackend::start("127.0.0.1:0").await.unwrap(),
    ];
    let addrs: Vec<String> = b.iter().map(|b| b.addr().to_string()).collect();
    let dir = temp_dir("bad-line");
    let file = dir.join("endpoints.txt");
    std::fs::write(&file, format!("{}\n", addrs.join("\n"))).unwrap();
    let file_arg = file.to_str().unwrap().to_string();
    let proxy = ProxyProcess::start(&["--policy", "rr", "--endpoints", &file_arg]).await;
    let mut all = addrs.clone();
    all.sort();
    assert_eq!(answering(&proxy, 3).await, all);

    replace(
        &file,
        &format!("# one good, one bad\n{}\n127.0.0.1:99999\n", addrs[0]),
    );
    let named = eventually(WAIT, || {
        let found = proxy.log().iter().any(|l| l.contains("line 3"));
        async move { found }
    })
    .await;
    assert!(named, "a line naming line 3: {:?}", proxy.log());
    assert_eq!(answering(&proxy, 3).await, all, "the pool of 3 stays");
    let (status, lines) = proxy.terminate().await;
    assert!(status.success());
    assert_eq!(lines.len(), 1, "one line: {lines:?}");
    assert!(lines[0].contains("127.0.0.1:99999"), "{lines:?}");
    assert!(
        lines[0].contains("keeping the current 3 endpoints"),
        "{lines:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Item 7: a file written in two pieces 20 ms apart (`127.0.0.1:910`, then
/// the rest of `:9101`) is applied once, whole: a change is applied only
/// after 100 ms without change. Counted in the proxy's info log, one line
/// per membership applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_written_in_pieces_is_applied_once_whole() {
    let b = [
        DemoBackend::start("127.0.0.1:0").await.unwrap(),
        DemoBackend::start("127.0.0.1:0").await.unwrap(),
    ];
    let [a1, a2] = [b[0].addr().to_string(), b[1].addr().to_string()];
    let dir = temp_dir("pieces");
    let file = dir.join("endpoints.txt");
    std::fs::write(&file, format!("{a1}\n")).unwrap();
    let file_arg = file.to_str().unwrap().to_string();
    let proxy =
        ProxyProcess::start_logging(&["--policy", "rr", "--endpoints", &file_arg], "info").await;
    let applied = |proxy: &ProxyProcess| {
        proxy
            .log()
            .iter()
            .filter(|l| l.contains("endpoints from"))
            .count()
    };
    let before = applied(&proxy);
    // The second endpoint's address, cut in the middle of its port.
    let (head, tail) = a2.split_at(a2.len() - 1);
    {
        use std::io::Write as _;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .unwrap();
        f.write_all(head.as_bytes()).unwrap();
        f.flush().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        f.write_all(format!("{tail}\n").as_bytes()).unwrap();
    }
    let mut both = vec![a1.clone(), a2.clone()];
    both.sort();
    let reached = eventually(WAIT, || {
        let proxy = &proxy;
        let both = both.clone();
        async move { answering(proxy, 2).await == both }
    })
    .await;
    assert!(reached, "the whole file is applied: {:?}", proxy.log());
    let (status, lines) = proxy.terminate().await;
    assert!(status.success());
    let applied_after = lines
        .iter()
        .filter(|l| l.contains("endpoints from"))
        .count();
    assert_eq!(applied_after - before, 1, "applied once: {lines:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Item 11: out of file descriptors (`ulimit -n 48`, 60 idle client
/// connections held open, `--max-connections` above what the limit
/// allows), the failing accepts are logged at most once a second, each
/// line with the count of failures it stands for, instead of 20 warnings a
/// second; once the connections close the proxy serves again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_file_descriptors_accept_errors_back_off_and_are_counted() {
    let b = DemoBackend::start("127.0.0.1:0").await.unwrap();
    let addr = b.addr().to_string();
    let proxy = ProxyProcess::start_as(
        &["--policy", "rr", "-e", &addr, "--max-connections", "1000"],
        "warn",
        Some(48),
    )
    .await;
    let mut held = Vec::new();
    for _ in 0..60 {
        if let Ok(s) = tokio::net::TcpStream::connect(proxy.addr).await {
            held.push(s);
        }
    }
    let accept_lines = |proxy: &ProxyProcess| {
        proxy
            .log()
            .into_iter()
            .filter(|l| l.contains("accept:"))
            .collect::<Vec<_>>()
    };
    let failing = eventually(WAIT, || {
        let n = accept_lines(&proxy).len();
        async move { n > 0 }
    })
    .await;
    assert!(failing, "accepts fail: {:?}", proxy.log());
    // Failing accepts for a while (measuring a rate over an interval: the
    // budget follows the interval measured, however long a busy machine
    // made it, so only a report rate above one a second can fail).
    let first = accept_lines(&proxy).len();
    let started = std::time::Instant::now();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let lines = accept_lines(&proxy);
    let budget = usize::try_from(started.elapsed().as_secs()).unwrap() + 1;
    assert!(
        lines.len() - first <= budget,
        "at most one line a second ({budget} in {:?}): {lines:?}",
        started.elapsed()
    );
    assert!(
        lines
            .iter()
            .all(|l| l.contains("failed accepts since the last report")),
        "{lines:?}"
    );
    drop(held);
    let served = eventually(WAIT, || async {
        common::request(proxy.addr, "GET", "/", &[], "")
            .await
            .is_ok_and(|r| r.status == 200)
    })
    .await;
    assert!(served, "serving again once descriptors are free");
    assert!(proxy.terminate().await.0.success());
}

/// Out of file descriptors for connections to backends: an HTTP/2 client
/// opens 60 streams at once on one connection, each held 3 s by the
/// backend, under `ulimit -n 48`. The connects past the limit are answered
/// 503 at once, and the endpoint is not blamed: counted against it, they
/// ejected it (`--eject-after 2`), and every request after got "no eligible
/// endpoint" for 30 s. Once the streams end, a request is served; and a
/// new client is too, although the connections left idle for reuse hold
/// every descriptor: the failed accept closes them (else the client, and
/// the admin listener, would wait for their idle timeout, a minute).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_descriptors_for_backends_the_endpoint_is_not_blamed() {
    let b = DemoBackend::start("127.0.0.1:0").await.unwrap();
    let addr = b.addr().to_string();
    let admin = format!("127.0.0.1:{}", free_port());
    let proxy = ProxyProcess::start_as(
        &[
            "--policy",
            "rr",
            "-e",
            &addr,
            "--eject-after",
            "2",
            "--admin",
            &admin,
            "--max-connections",
            "1000",
        ],
        "warn",
        Some(48),
    )
    .await;
    let tcp = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
    let (h2, connection) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(connection);
    let mut h2 = h2.ready().await.unwrap();
    let mut answers = Vec::new();
    for _ in 0..60 {
        let request = http::Request::get("http://held/?delay=3000")
            .body(())
            .unwrap();
        let (answer, _) = h2.send_request(request, true).unwrap();
        answers.push(answer);
        h2 = h2.ready().await.unwrap();
    }
    let mut statuses = std::collections::BTreeMap::new();
    for answer in answers {
        let response = tokio::time::timeout(WAIT, answer).await.unwrap().unwrap();
        let status = response.status().as_u16();
        let mut body = response.into_body();
        let mut text = Vec::new();
        while let Some(chunk) = body.data().await {
            text.extend_from_slice(&chunk.unwrap());
        }
        if status == 503 {
            assert_eq!(
                String::from_utf8_lossy(&text),
                "the proxy is out of connections: try again later\n"
            );
        }
        *statuses.entry(status).or_insert(0) += 1;
    }
    assert!(statuses.get(&200).is_some_and(|&n| n > 0), "{statuses:?}");
    assert!(statuses.get(&503).is_some_and(|&n| n > 0), "{statuses:?}");
    assert_eq!(
        statuses.keys().copied().collect::<Vec<_>>(),
        [200, 503],
        "{statuses:?}"
    );
    // The endpoint still serves.
    let request = http::Request::get("http://held/").body(()).unwrap();
    let (answer, _) = h2.send_request(request, true).unwrap();
    let response = tokio::time::timeout(WAIT, answer).await.unwrap().unwrap();
    assert_eq!(response.status(), 200, "{:?}", proxy.log());
    let fresh = common::request(proxy.addr, "GET", "/", &[], "").await;
    assert!(
        fresh.as_ref().is_ok_and(|r| r.status == 200),
        "a new client: {:?} {:?}",
        fresh.map(|r| r.status),
        proxy.log()
    );
    let metrics = get(admin.parse().unwrap(), "/metrics", &[]).await.body;
    assert!(
        metrics.contains(&format!(
            "loadring_endpoint_healthy{{endpoint=\"{addr}\"}} 1"
        )),
        "{metrics}"
    );
    assert!(
        proxy
            .log()
            .iter()
            .any(|l| l.contains("out of local resources, answered 503")),
        "{:?}",
        proxy.log()
    );
    assert!(proxy.terminate().await.0.success());
}
