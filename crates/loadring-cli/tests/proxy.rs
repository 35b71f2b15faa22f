//! `loadring proxy` as a child process over real sockets on 127.0.0.1:
//! placement against `loadring place`, Envoy-compatible keys against
//! literal codes, endpoints file reloads, SIGTERM drain, bad input. Every
//! wait is bounded.

use crate::common;

use std::collections::HashMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{eventually, free_port, get, StderrLines, WAIT};
use loadring_proxy::DemoBackend;

const BIN: &str = env!("CARGO_BIN_EXE_loadring");

/// A running `loadring proxy`, killed (by its pid) if the test ends early.
struct ProxyProcess {
    child: Option<Child>,
    addr: SocketAddr,
    admin: SocketAddr,
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
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let mut command = Command::new(BIN);
        command
            .args([
                "proxy",
                "--listen",
                &addr.to_string(),
                "--admin",
                &admin.to_string(),
            ])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("loadring runs");
        let up = eventually(Duration::from_secs(10), || async {
            tokio::net::TcpStream::connect(addr).await.is_ok()
                && tokio::net::TcpStream::connect(admin).await.is_ok()
        })
        .await;
        if !up {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "proxy did not start: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        ProxyProcess {
            child: Some(child),
            addr,
            admin,
        }
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

    /// Sends SIGTERM and waits for the exit.
    async fn terminate(mut self) -> Output {
        self.signal("TERM");
        let child = self.child.take().unwrap();
        let waited = tokio::task::spawn_blocking(move || child.wait_with_output());
        tokio::time::timeout(WAIT, waited)
            .await
            .expect("the proxy exits after SIGTERM")
            .unwrap()
            .unwrap()
    }

    async fn status(&self) -> serde_json::Value {
        serde_json::from_str(&get(self.admin, "/status", &[]).await.body).unwrap()
    }
}

/// `base` (the listen and admin flags), an `rr` cluster over one endpoint,
/// then `extra`: a proxy command line wrong in `extra` alone.
fn rr_with<'a>(base: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
    [base, &["--policy", "rr", "-e", "127.0.0.1:1"], extra].concat()
}

async fn backends(n: usize) -> Vec<DemoBackend> {
    let mut all = Vec::new();
    for _ in 0..n {
        all.push(DemoBackend::start("127.0.0.1:0").await.unwrap());
    }
    all
}

/// `loadring place`'s answer for each input line.
fn place(args: &[&str], input: &str) -> HashMap<String, String> {
    let mut child = Command::new(BIN)
        .arg("place")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (k, v) = l.split_once('\t').unwrap();
            (k.to_string(), v.to_string())
        })
        .collect()
}

/// 1,000 keys sent with `--key header:x-user` land where `loadring place`
/// puts them, for brpc's ring and both Envoy policies (weights included).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn placement_equals_loadring_place_for_1000_keys() {
    let b = backends(4).await;
    let endpoints: Vec<String> = b
        .iter()
        .enumerate()
        .map(|(i, b)| format!("{} weight={}", b.addr(), 1 + i % 2))
        .collect();
    let keys: Vec<String> = (0..1000).map(|i| format!("user-{i}")).collect();
    for policy in ["c_murmurhash", "ring_hash", "maglev"] {
        let mut args = vec!["--policy", policy];
        for e in &endpoints {
            args.extend(["-e", e.as_str()]);
        }
        let expected = place(&args, &(keys.join("\n") + "\n"));
        assert_eq!(expected.len(), 1000);
        args.extend(["--key", "header:x-user"]);
        let proxy = ProxyProcess::start(&args).await;
        let mut used = std::collections::HashSet::new();
        for chunk in keys.chunks(50) {
            let replies: Vec<_> = chunk
                .iter()
                .map(|k| {
                    let (addr, k) = (proxy.addr, k.clone());
                    tokio::spawn(async move { (get(addr, "/", &[("x-user", &k)]).await, k) })
                })
                .collect();
            for reply in replies {
                let (reply, key) = reply.await.unwrap();
                assert_eq!(reply.status, 200);
                assert_eq!(reply.backend(), expected[&key], "{policy}: {key}");
                used.insert(reply.backend());
            }
        }
        assert_eq!(used.len(), 4, "{policy}: every backend owns some keys");
        let out = proxy.terminate().await;
        assert!(out.status.success());
    }
}

/// Envoy's hash policies: each source hashed with xxHash64 (seed 0), the
/// running hash rotated left by one and xored with the next. The codes are
/// literal values computed with Python's `xxhash` package:
/// rotl1(xxh64("alice")) ^ xxh64("s-42") = 8520883848048570203 and
/// rotl1(xxh64("alice")) ^ xxh64("127.0.0.1") = 2867879368887727925.
/// A request lands where `loadring place --codes` puts that code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoy_combined_keys_land_where_their_literal_codes_do() {
    let b = backends(5).await;
    let addrs: Vec<String> = b.iter().map(|b| b.addr().to_string()).collect();
    for (key, headers, code) in [
        (
            "header:x-user,cookie:sid",
            vec![("x-user", "alice"), ("cookie", "theme=dark; sid=s-42")],
            "8520883848048570203",
        ),
        (
            "header:x-user,source-ip",
            vec![("x-user", "alice")],
            "2867879368887727925",
        ),
    ] {
        for policy in ["ring_hash", "maglev"] {
            let mut args = vec!["--policy", policy];
            for a in &addrs {
                args.extend(["-e", a.as_str()]);
            }
            let expected = place(
                &[args.as_slice(), &["--codes"]].concat(),
                &format!("{code}\n"),
            );
            args.extend(["--key", key]);
            let proxy = ProxyProcess::start(&args).await;
            let reply = get(proxy.addr, "/", &headers).await;
            assert_eq!(reply.backend(), expected[code], "{policy} {key}");
            drop(proxy);
        }
    }
}

/// `--retries 1`: after a backend is killed (listener and pooled
/// connections gone), no request fails; its keys move to their ring
/// successors, the others stay put.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_backend_costs_no_failed_request_with_retries_1() {
    let mut b = backends(3).await;
    let addrs: Vec<String> = b.iter().map(|b| b.addr().to_string()).collect();
    let mut args = vec![
        "--policy",
        "c_murmurhash",
        "--key",
        "query:u",
        "--retries",
        "1",
    ];
    for a in &addrs {
        args.extend(["-e", a.as_str()]);
    }
    let proxy = ProxyProcess::start(&args).await;
    let mut owners = Vec::new();
    for i in 0..100 {
        let reply = get(proxy.addr, &format!("/?u={i}"), &[]).await;
        assert_eq!(reply.status, 200);
        owners.push(reply.backend());
    }
    let killed = b.remove(0);
    assert!(owners.contains(&addrs[0]));
    killed.kill();
    for (i, owner) in owners.iter().enumerate() {
        let reply = get(proxy.addr, &format!("/?u={i}"), &[]).await;
        assert_eq!(reply.status, 200, "u={i}: {}", reply.body);
        if *owner != addrs[0] {
            assert_eq!(&reply.backend(), owner, "u={i} stays");
        } else {
            assert_ne!(reply.backend(), addrs[0]);
        }
    }
    let out = proxy.terminate().await;
    assert!(out.status.success());
}

/// SIGTERM: the request in flight completes, new connections are refused,
/// exit 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_requests_in_flight_and_exits_zero() {
    let b = backends(1).await;
    let addr = b[0].addr().to_string();
    let proxy = ProxyProcess::start(&["--policy", "rr", "-e", &addr]).await;
    let listen = proxy.addr;
    // Held long enough to be in flight when SIGTERM lands on a busy machine.
    let slow = tokio::spawn(async move { get(listen, "/?delay=3000", &[]).await });
    assert!(eventually(WAIT, || async { b[0].in_flight() == 1 }).await);
    let out = proxy.terminate().await;
    let reply = slow.await.unwrap();
    assert_eq!((reply.status, reply.backend()), (200, addr));
    assert!(out.status.success(), "{out:?}");
    assert_eq!(out.status.code(), Some(0));
    assert!(tokio::net::TcpStream::connect(listen).await.is_err());
    assert_eq!(String::from_utf8_lossy(&out.stderr), "", "quiet by default");
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("loadring-proxy-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Replaces `path` atomically (write aside, rename over).
fn replace(path: &Path, text: &str) {
    let aside = path.with_extension("new");
    std::fs::write(&aside, text).unwrap();
    std::fs::rename(&aside, path).unwrap();
}

fn status_endpoints(status: &serde_json::Value) -> Vec<(String, u64)> {
    status["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["addr"].as_str().unwrap().to_string(),
                e["in_flight"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// The endpoints file is a symlink: swapping it to a new target takes
/// effect, in-flight counts survive; a bad file renamed over it changes
/// nothing and logs one line; SIGHUP re-reads it and does not stop the proxy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_endpoints_file_takes_effect_and_a_bad_edit_changes_nothing() {
    let b = backends(3).await;
    let [a1, a2, a3] = [0, 1, 2].map(|i| b[i].addr().to_string());
    let dir = temp_dir("reload");
    let file = dir.join("endpoints");
    std::fs::write(dir.join("v1.txt"), format!("# two\n{a1}\n{a2}\n")).unwrap();
    std::os::unix::fs::symlink(dir.join("v1.txt"), &file).unwrap();
    let file_arg = file.to_str().unwrap().to_string();
    let proxy = ProxyProcess::start(&[
        "--policy",
        "c_murmurhash",
        "--key",
        "header:x-user",
        "--endpoints",
        &file_arg,
    ])
    .await;
    let mut proxy = proxy;
    let log = StderrLines::follow(proxy.child.as_mut().unwrap().stderr.take().unwrap());
    assert_eq!(
        status_endpoints(&proxy.status().await),
        [(a1.clone(), 0), (a2.clone(), 0)]
    );

    // A slow request held on a1 while the file changes.
    let key = (0..100)
        .map(|i| format!("k{i}"))
        .find(|k| {
            place(
                &["-p", "c_murmurhash", "-e", &a1, "-e", &a2],
                &format!("{k}\n"),
            )[k] == a1
        })
        .unwrap();
    let listen = proxy.addr;
    let held = key.clone();
    // Held through the swap below on a busy machine (and within the
    // client's own 10 s limit on a request).
    let slow = tokio::spawn(async move { get(listen, "/?delay=6000", &[("x-user", &held)]).await });
    assert!(eventually(WAIT, || async { b[0].in_flight() == 1 }).await);

    // Swap the symlink to a file with a1 and a3.
    std::fs::write(dir.join("v2.txt"), format!("{a1}\n{a3}\n")).unwrap();
    let link_aside = dir.join("link.new");
    std::os::unix::fs::symlink(dir.join("v2.txt"), &link_aside).unwrap();
    std::fs::rename(&link_aside, &file).unwrap();
    let expected = vec![(a1.clone(), 1), (a3.clone(), 0)];
    assert!(
        eventually(WAIT, || async {
            status_endpoints(&proxy.status().await) == expected
        })
        .await,
        "never took effect: {:?}",
        status_endpoints(&proxy.status().await)
    );
    let placed_now = place(
        &["-p", "c_murmurhash", "-e", &a1, "-e", &a3],
        "u1\nu2\nu3\nu4\nu5\nu6\n",
    );
    for (k, owner) in &placed_now {
        assert_eq!(
            &get(proxy.addr, "/", &[("x-user", k)]).await.backend(),
            owner
        );
    }

    // A bad file renamed over the link: nothing changes.
    // The warning is the event that the bad file was read.
    replace(&file, &format!("{a1}\n{a2} weight=heavy\n"));
    let first = log.next("the warning about the bad file");
    assert_eq!(status_endpoints(&proxy.status().await), expected);

    // SIGHUP re-reads the file even unchanged (polls skip unchanged text),
    // so the same problem is logged a second time; the proxy keeps serving.
    proxy.signal("HUP");
    let second = log.next("the warning after SIGHUP's re-read");
    assert_eq!(get(proxy.addr, "/", &[("x-user", "u1")]).await.status, 200);
    assert_eq!(status_endpoints(&proxy.status().await).len(), 2);

    assert_eq!(slow.await.unwrap().backend(), a1);
    let out = proxy.terminate().await;
    assert!(out.status.success());
    let lines = [vec![first, second], log.rest()].concat();
    let stderr = lines.join("\n");
    assert_eq!(lines.len(), 2, "one line per bad read: {stderr}");
    for line in &lines {
        assert!(line.contains("WARN"), "{stderr}");
        assert!(line.contains("line 2"), "{stderr}");
        assert!(line.contains("keeping the current 2 endpoints"), "{stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn run(args: &[&str]) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if start.elapsed() > WAIT {
            let _ = child.kill();
            panic!("{args:?} kept running: it should have failed");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Each bad input: exit 2, nothing on stdout, one line `error: ...` naming
/// the culprit, and nothing listening.
#[test]
fn bad_input_fails_cleanly_before_serving() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = busy.local_addr().unwrap().to_string();
    let free = format!("127.0.0.1:{}", free_port());
    let dir = temp_dir("bad-input");
    let bad_toml = dir.join("bad.toml");
    std::fs::write(
        &bad_toml,
        "listen = \"127.0.0.1:1\"\n[[cluster]]\npolicy = \"rr\"\nendpoint = [\"127.0.0.1:2\"]\n",
    )
    .unwrap();
    let zero_rise_toml = dir.join("zero-rise.toml");
    std::fs::write(
        &zero_rise_toml,
        "listen = \"127.0.0.1:1\"\n[[cluster]]\npolicy = \"rr\"\nendpoints = [\"127.0.0.1:2\"]\nhealth_path = \"/healthz\"\nhealth_rise = 0\n",
    )
    .unwrap();
    let zero_rise_toml = zero_rise_toml.to_str().unwrap();
    let broken_toml = dir.join("broken.toml");
    std::fs::write(&broken_toml, "listen = \n").unwrap();
    let empty_file = dir.join("empty.txt");
    std::fs::write(&empty_file, "# nothing yet\n").unwrap();
    let bad_toml = bad_toml.to_str().unwrap();
    let broken_toml = broken_toml.to_str().unwrap();
    let empty_file = empty_file.to_str().unwrap();
    let missing = dir.join("missing.toml");
    let missing = missing.to_str().unwrap();
    let base = ["proxy", "--listen", &free];
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--policy", "nope", "-e", "127.0.0.1:1"],
            "--policy: unknown policy `nope`",
        ),
        (
            vec!["--policy", "c_murmurhash", "-e", "127.0.0.1:1"],
            "--key",
        ),
        (
            vec![
                "--policy",
                "c_murmurhash",
                "-e",
                "127.0.0.1:1",
                "--key",
                "hdr:x",
            ],
            "key source `hdr:x`",
        ),
        (
            vec![
                "--policy",
                "c_murmurhash",
                "-e",
                "127.0.0.1:1",
                "--key",
                "header:",
            ],
            "key source `header:`",
        ),
        (
            vec!["--policy", "rr", "-e", "127.0.0.1:1", "--key", "path"],
            "does not hash keys",
        ),
        (vec!["--policy", "rr", "-e", "127.0.0.1:1 weight=x"], "-e: "),
        (
            vec!["--policy", "rr", "-e", "localhost"],
            "endpoint `localhost`",
        ),
        (vec!["--policy", "rr"], "no endpoints"),
        (
            vec!["--policy", "rr", "--endpoints", empty_file],
            "no endpoints",
        ),
        (
            vec!["--policy", "rr", "-e", "127.0.0.1:1", "--timeout", "5"],
            "--timeout: `5` is not a duration",
        ),
        (
            vec!["--policy", "rr", "-e", "127.0.0.1:1", "--drain-timeout", "25h"],
            "--drain-timeout: `25h` is out of range: accepted a whole number of ms, s, m or h from 0ms to 24h",
        ),
        (
            vec!["--policy", "rr", "-e", "127.0.0.1:1", "--retries", "-1"],
            "--retries: `-1`",
        ),
        (
            vec!["--policy", "c_murmurhash_bl", "--key", "path", "-e", "127.0.0.1:1", "--load-report", "prometheus"],
            "error: --load-report: `prometheus` is not a load report source: accepted orca or orca:METRIC",
        ),
        (
            vec!["--policy", "c_murmurhash_bl", "--key", "path", "-e", "127.0.0.1:1", "--load-report", "orca:in flight"],
            "error: --load-report: metric `in flight` is not a metric name: accepted 1 to 128 of A-Z a-z 0-9 _ - . :",
        ),
        (
            vec!["--policy", "rr", "-e", "127.0.0.1:1", "--load-report", "orca"],
            "error: --load-report orca:in_flight: policy `rr` has no load bound to use reports with: pick a bounded policy (e.g. c_murmurhash_bl:load_factor=1.25)",
        ),
        (
            vec![
                "--policy",
                "rr",
                "-e",
                "127.0.0.1:1",
                "--retry-buffer",
                "64k",
            ],
            "--retry-buffer: `64k` is not a number of bytes: accepted 0..=16777216",
        ),
        (
            vec![
                "--policy",
                "rr",
                "-e",
                "127.0.0.1:1",
                "--retry-buffer",
                "16777217",
            ],
            "--retry-buffer: `16777217` is out of range: accepted 0..=16777216",
        ),
        (
            vec!["--policy", "rr", "-e", "127.0.0.1:1", "--keepalive", "-1"],
            "--keepalive: `-1` is not a count: accepted 0..=65536",
        ),
        (
            vec!["--policy", "rr", "-e", "127.0.0.1:1", "--keepalive", "65537"],
            "--keepalive: `65537` is out of range: accepted 0..=65536",
        ),
        (
            vec![
                "--policy",
                "rr",
                "-e",
                "127.0.0.1:1",
                "--health-path",
                "health",
            ],
            "--health-path `health`",
        ),
        (
            vec!["--policy", "rr", "-e", "127.0.0.1:1", "--admin", &busy],
            &busy,
        ),
    ];
    let mut all: Vec<(Vec<&str>, String)> = cases
        .into_iter()
        .map(|(args, culprit)| ([base.as_slice(), &args].concat(), culprit.to_string()))
        .collect();
    all.push((
        vec![
            "proxy",
            "--listen",
            &busy,
            "--policy",
            "rr",
            "-e",
            "127.0.0.1:1",
        ],
        format!("--listen {busy}"),
    ));
    all.push((
        vec!["proxy", "--config", bad_toml],
        "unknown field `endpoint`".into(),
    ));
    // A config file's problem is named by its key, a flag's by the flag.
    all.push((
        vec!["proxy", "--config", zero_rise_toml],
        "health_rise: `0` is out of range: accepted 1..=1000".into(),
    ));
    all.push((
        rr_with(&base, &["--health-path", "/healthz", "--health-rise", "0"]),
        "--health-rise: `0` is out of range: accepted 1..=1000".into(),
    ));
    // Input echoed cut, control characters escaped: one short line.
    let long = "7".repeat(300);
    all.push((
        rr_with(&base, &["--retries", &long]),
        format!(
            "--retries: `{}... (300 characters)` is out of range",
            "7".repeat(40)
        ),
    ));
    all.push((
        rr_with(&base, &["--timeout", "1s\nerror: fake"]),
        "--timeout: `1s\\nerror: fake`".into(),
    ));
    // Half a certificate pair is a usage mistake (exit 2), not a
    // certificate that cannot be loaded (exit 1).
    all.push((
        rr_with(&base, &["--tls-cert", "gw.crt"]),
        "--tls-cert needs --tls-key FILE".into(),
    ));
    all.push((
        rr_with(&base, &["--tls-key", "gw.key"]),
        "--tls-key needs --tls-cert FILE".into(),
    ));
    // Settings that would do nothing.
    all.push((
        rr_with(&base, &["--health-interval", "1s"]),
        "--health-interval: only with --health-path".into(),
    ));
    all.push((
        rr_with(&base, &["--eject-after", "0", "--eject-for", "1h"]),
        "--eject-for: only with --eject-after 1 or more".into(),
    ));
    // The policy's own ejection is the one used: a flag beside it would be
    // taken and do nothing.
    for flag in [["--eject-after", "2"], ["--eject-for", "1s"]] {
        all.push((
            [
                &base[..],
                &["--policy", "rr:eject_after=3", "-e", "127.0.0.1:1"],
                &flag,
            ]
            .concat(),
            format!("{}: the policy sets its own eject_after=", flag[0]),
        ));
    }
    all.push((
        vec!["proxy", "--config", broken_toml],
        format!("--config {broken_toml}"),
    ));
    all.push((
        vec!["proxy", "--config", missing],
        format!("--config {missing}"),
    ));
    all.push((
        vec!["proxy", "--config", bad_toml, "--policy", "rr"],
        "--config takes no other flags".into(),
    ));
    all.push((
        vec!["proxy", "--policy", "rr", "-e", "127.0.0.1:1"],
        "--listen".into(),
    ));
    // Files without end (a device, a log named by mistake): refused, not
    // read until memory runs out.
    all.push((
        vec!["proxy", "--config", "/dev/zero"],
        "--config /dev/zero: more than 16 MiB".into(),
    ));
    all.push((
        [&base[..], &["--policy", "rr", "--endpoints", "/dev/zero"]].concat(),
        "--endpoints /dev/zero: more than 16 MiB".into(),
    ));
    all.push((
        [
            &base[..],
            &["--policy", "rr", "-e", "127.0.0.1:1", "--backend-tls"],
            &["--backend-ca", "/dev/zero"],
        ]
        .concat(),
        "--backend-ca: /dev/zero: more than 16 MiB".into(),
    ));
    for (args, culprit) in all {
        let out = run(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: one line: {stderr}");
        assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
        assert!(
            stderr.contains(&culprit),
            "{args:?}: `{culprit}` not in {stderr}"
        );
        assert!(
            std::net::TcpStream::connect(&free).is_err(),
            "{args:?}: nothing listens"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The one line `loadring proxy ARGS` fails with (exit 2, nothing served).
fn error_line(args: &[&str]) -> String {
    let out = run(&[&["proxy"], args].concat());
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(out.stdout.is_empty(), "{args:?}");
    assert_eq!(stderr.lines().count(), 1, "{args:?}: one line: {stderr}");
    stderr.trim_end().to_string()
}

/// Hostile or mistaken flags: each refused with one line naming the flag,
/// echoing the value as typed and giving what is accepted.
#[test]
fn flags_are_refused_with_exactly_what_is_wrong() {
    let free = format!("127.0.0.1:{}", free_port());
    let rr = [
        "--listen",
        free.as_str(),
        "--policy",
        "rr",
        "-e",
        "127.0.0.1:1",
    ];
    let hashing = [
        "--listen",
        free.as_str(),
        "--policy",
        "c_murmurhash",
        "-e",
        "127.0.0.1:1",
    ];
    let checks = [&rr[..], &["--health-path", "/healthz"]].concat();
    let duration = |from: &str, to: &str| {
        format!(
            "accepted a whole number of ms, s, m or h from {from} to {to} (e.g. 500ms, 10s, 1m)"
        )
    };
    let address = "accepted HOST:PORT (e.g. 127.0.0.1:8080, [::1]:8080, 0.0.0.0:8080 for every \
                   address), the port 0..=65535 (0: any free port)";
    let cases: Vec<(Vec<&str>, String)> = vec![
        // A limit that --abort-on-close makes meaningless.
        (
            [&rr[..], &["--abort-on-close", "--max-abandoned", "10"]].concat(),
            "--max-abandoned with --abort-on-close: every request whose client leaves is then \
             cancelled, none is read to its end, so --max-abandoned limits nothing: give one or \
             the other"
                .into(),
        ),
        // Counts: 0, negative, huge, not a number.
        (
            [&checks[..], &["--health-rise", "0"]].concat(),
            "--health-rise: `0` is out of range: accepted 1..=1000".into(),
        ),
        (
            [&checks[..], &["--health-fall", "-1"]].concat(),
            "--health-fall: `-1` is not a count: accepted 1..=1000".into(),
        ),
        (
            [&checks[..], &["--health-fall", "18446744073709551616"]].concat(),
            "--health-fall: `18446744073709551616` is out of range: accepted 1..=1000".into(),
        ),
        (
            [&checks[..], &["--health-rise", "4294967295"]].concat(),
            "--health-rise: `4294967295` is out of range: accepted 1..=1000".into(),
        ),
        (
            [&checks[..], &["--health-rise", "two"]].concat(),
            "--health-rise: `two` is not a count: accepted 1..=1000".into(),
        ),
        (
            [&rr[..], &["--retries", "18446744073709551616"]].concat(),
            "--retries: `18446744073709551616` is out of range: accepted 0..=4294967295".into(),
        ),
        (
            [&rr[..], &["--retries", "+1"]].concat(),
            "--retries: `+1` is not a count: accepted 0..=4294967295".into(),
        ),
        (
            [&rr[..], &["--eject-after", "1001"]].concat(),
            "--eject-after: `1001` is out of range: accepted 0 (never) or 1..=1000".into(),
        ),
        // Durations, echoed as typed with the flag's own range.
        (
            [&rr[..], &["--eject-for", "0100m"]].concat(),
            format!(
                "--eject-for: `0100m` is out of range: {}",
                duration("1ms", "1h")
            ),
        ),
        (
            [&rr[..], &["--timeout", "0s"]].concat(),
            format!(
                "--timeout: `0s` is out of range: {}",
                duration("1ms", "24h")
            ),
        ),
        (
            [&rr[..], &["--tunnel-timeout", "0025h"]].concat(),
            format!(
                "--tunnel-timeout: `0025h` is out of range: {}",
                duration("1ms", "24h")
            ),
        ),
        (
            [&checks[..], &["--health-interval", "1.5s"]].concat(),
            format!(
                "--health-interval: `1.5s` is not a duration: {}",
                duration("1ms", "24h")
            ),
        ),
        (
            [&rr[..], &["--drain-timeout", "-1s"]].concat(),
            format!(
                "--drain-timeout: `-1s` is not a duration: {}",
                duration("0ms", "24h")
            ),
        ),
        // Addresses.
        (
            vec!["--listen", "", "--policy", "rr", "-e", "127.0.0.1:1"],
            format!("--listen: `` is empty: {address}"),
        ),
        (
            vec![
                "--listen",
                "127.0.0.1",
                "--policy",
                "rr",
                "-e",
                "127.0.0.1:1",
            ],
            format!("--listen: `127.0.0.1` has no port: {address}"),
        ),
        (
            [&rr[..], &["--admin", ""]].concat(),
            format!("--admin: `` is empty: {address}"),
        ),
        // Key sources.
        (
            [&hashing[..], &["--key", "cookie:a;b"]].concat(),
            "--key: key source `cookie:a;b`: a cookie name cannot hold `;`, which separates \
             cookies; accepted: visible ASCII characters other than ; = ,"
                .into(),
        ),
        (
            [&hashing[..], &["--key", "query:a&b"]].concat(),
            "--key: key source `query:a&b`: a query parameter name cannot hold `&`, which \
             separates parameters; accepted: visible ASCII characters other than \" # & , < = >, \
             and UTF-8 beyond ASCII"
                .into(),
        ),
        (
            [&hashing[..], &["--key", "header:"]].concat(),
            "--key: key source `header:`: the name after `header:` is empty".into(),
        ),
        (
            [&hashing[..], &["--key", "header:x user"]].concat(),
            "--key: key source `header:x user`: a header name cannot hold a space; accepted: \
             letters, digits and ! # $ % & ' * + - . ^ _ ` | ~"
                .into(),
        ),
        (
            [
                &hashing[..],
                &["--key", "header:X-User", "--key", "header:x-user"],
            ]
            .concat(),
            "--key: key source `header:x-user` is given twice (first as `header:X-User`): a \
             source repeated adds nothing to the key"
                .into(),
        ),
        (
            [&hashing[..], &["--key", "path,"]].concat(),
            "--key: in `path,`, key source ``: empty; accepted: header:NAME, cookie:NAME, \
             query:NAME, path, uri, method-uri, source-ip (comma-separated to combine)"
                .into(),
        ),
    ];
    for (args, expected) in cases {
        assert_eq!(error_line(&args), format!("error: {expected}"), "{args:?}");
    }
    let seventeen: Vec<String> = (1..=17).map(|i| format!("header:h{i}")).collect();
    assert_eq!(
        error_line(&[&hashing[..], &["--key", &seventeen.join(",")]].concat()),
        "error: --key: key source `header:h17` is the 17th: accepted at most 16 sources"
    );
}

/// `--help` gives every numeric flag's range.
#[test]
fn help_gives_the_numeric_ranges() {
    let out = run(&["proxy", "--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    for (flag, range) in [
        ("--retries", "0..=4294967295"),
        ("--retry-buffer", "0..=16777216"),
        ("--connect-timeout", "1ms to 24h"),
        ("--timeout", "1ms to 24h"),
        ("--keepalive", "0..=65536"),
        ("--health-interval", "1ms to 24h"),
        ("--health-rise", "1..=1000"),
        ("--health-fall", "1..=1000"),
        ("--eject-after", "0 (never) or 1..=1000"),
        ("--eject-for", "1ms to 1h"),
        ("--drain-timeout", "0ms to 24h"),
        ("--header-timeout", "1ms to 24h"),
        ("--send-timeout", "1ms to 24h"),
        ("--tunnel-timeout", "1ms to 24h"),
        ("--max-connections", "1..=16777216"),
        ("--max-abandoned", "0..=16777216"),
        ("--key", "at most 16"),
    ] {
        let line = help
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{flag} ")))
            .unwrap_or_else(|| panic!("{flag} not in {help}"));
        assert!(line.contains(range), "{flag}: {range} not in {line}");
    }
}

#[test]
fn a_tls_pair_that_cannot_be_loaded_is_one_line_and_exit_1() {
    let dir = std::env::temp_dir().join(format!("loadring-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let junk = dir.join("junk.pem");
    std::fs::write(&junk, "not PEM at all\n").unwrap();
    let missing = dir.join("missing.pem");
    let free = format!("127.0.0.1:{}", free_port());
    let endless = PathBuf::from("/dev/zero");
    for (cert, key) in [(&junk, &junk), (&missing, &junk), (&endless, &endless)] {
        let out = Command::new(BIN)
            .args([
                "proxy",
                "--listen",
                &free,
                "--policy",
                "rr",
                "-e",
                "127.0.0.1:1",
            ])
            .arg("--tls-cert")
            .arg(cert)
            .arg("--tls-key")
            .arg(key)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
        assert!(stderr.starts_with("error: --tls-cert: "), "{stderr}");
        assert!(stderr.contains(&*cert.to_string_lossy()), "{stderr}");
        assert!(
            std::net::TcpStream::connect(&free).is_err(),
            "nothing listens"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--listen` and `--admin` on port 0 take any free port: where they are
/// is logged whatever the level (the first line), and they serve there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn port_0_is_logged_with_the_ports_taken() {
    let mut child = Command::new(BIN)
        .args(["proxy", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"])
        .args(["--policy", "rr", "-e", "127.0.0.1:1"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("loadring runs");
    let log = StderrLines::follow(child.stderr.take().unwrap());
    let line = log.next("where it serves");
    let addr_after = |word: &str| -> SocketAddr {
        let rest = line.split(word).nth(1).expect(word);
        rest.split([',', ' ']).next().unwrap().parse().unwrap()
    };
    let (serving, admin) = (addr_after("serving on "), addr_after("admin on "));
    assert!(line.contains("WARN"), "{line}");
    assert!(line.ends_with("(port 0 asked for any free port)"), "{line}");
    assert_ne!(serving.port(), 0);
    assert_eq!(get(admin, "/status", &[]).await.status, 200);
    assert!(tokio::net::TcpStream::connect(serving).await.is_ok());
    let _ = child.kill();
    let _ = child.wait();
}
