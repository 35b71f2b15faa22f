//! `loadring proxy` as a child process under faults an operator meets: an
//! idle proxy with an endpoints file, SIGHUP without one. Real sockets on
//! 127.0.0.1, every wait bounded, the child stopped by its pid.

#[path = "../../loadring-proxy/tests/common/mod.rs"]
mod common;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use common::{eventually, free_port, get, StderrLines, WAIT};
use loadring_proxy::DemoBackend;

const BIN: &str = env!("CARGO_BIN_EXE_loadring");

/// A running `loadring proxy`, killed (by its pid) if the test ends early.
struct ProxyProcess {
    child: Option<Child>,
    addr: SocketAddr,
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
        let mut child = Command::new(BIN)
            .args(["proxy", "--listen", &addr.to_string()])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("loadring runs");
        let up = eventually(Duration::from_secs(10), || async {
            tokio::net::TcpStream::connect(addr).await.is_ok()
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

    /// Whether the process has exited (and how), without waiting.
    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.as_mut().unwrap().try_wait().unwrap()
    }

    /// User plus system CPU time so far, in clock ticks (/proc/PID/stat).
    fn cpu_ticks(&self) -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).unwrap();
        // Fields after the command name (which may hold spaces), from field 3.
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        let fields: Vec<&str> = after.split(' ').collect();
        // utime and stime are fields 14 and 15: 12 and 13 from field 3.
        fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
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
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("loadring-faults-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Clock ticks a second (`getconf CLK_TCK`).
fn ticks_per_second() -> u64 {
    let out = Command::new("getconf").arg("CLK_TCK").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// An idle proxy following an endpoints file (`--endpoints` and
/// `--discover file:`) uses under 1 % of a core: CPU ticks counted by the
/// kernel over 3 s of idle, with a proxy on `-e` only as the baseline
/// alongside. (It used to read the file in a loop, woken by the events of
/// its own reads: 60-99 % of a core.)
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
    let window = Duration::from_secs(3);
    let before: Vec<u64> = proxies.iter().map(ProxyProcess::cpu_ticks).collect();
    // Measuring an interval of idle, not waiting for an event.
    tokio::time::sleep(window).await;
    let used: Vec<u64> = proxies
        .iter()
        .zip(&before)
        .map(|(p, b)| p.cpu_ticks() - b)
        .collect();
    // 1 % of a core over the window, and never less than 3 ticks of slack
    // for the kernel's rounding (a tick is 10 ms at CLK_TCK 100).
    let limit = (ticks_per_second() * window.as_secs() / 100).max(3);
    for (what, used) in ["--endpoints", "--discover file:", "-e only"]
        .iter()
        .zip(&used)
    {
        assert!(
            *used <= limit,
            "{what}: {used} ticks in {window:?}, limit {limit} (all: {used:?})"
        );
    }
    for p in proxies {
        assert!(p.terminate().await.status.success());
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
    let log = StderrLines::follow(proxy.child.as_mut().unwrap().stderr.take().unwrap());
    let slow = tokio::spawn(async move { get(listen, "/?delay=3000", &[]).await });
    assert!(eventually(WAIT, || async { b.in_flight() == 1 }).await);
    // One at a time: signals sent together may be delivered as one.
    proxy.signal("HUP");
    let first = log.next("the first SIGHUP's line");
    proxy.signal("HUP");
    let second = log.next("the second SIGHUP's line");
    let reply = slow.await.unwrap();
    assert_eq!((reply.status, reply.backend()), (200, addr.clone()));
    assert_eq!(proxy.exited(), None, "SIGHUP must not stop the proxy");
    assert_eq!(get(proxy.addr, "/", &[]).await.status, 200);
    let out = proxy.terminate().await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let lines = [vec![first, second], log.rest()].concat();
    let stderr = lines.join("\n");
    assert_eq!(lines.len(), 2, "one line per SIGHUP: {stderr}");
    assert!(
        lines
            .iter()
            .all(|l| l.contains("SIGHUP: nothing to re-read")),
        "{stderr}"
    );
}

/// Item 11: a zero timeout makes no sense (every request would get 504):
/// refused before serving, one line naming the flag (or the config key)
/// and the range.
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
    let cases: [(Vec<&str>, &str); 3] = [
        (
            vec![
                "--listen",
                &listen,
                "-p",
                "rr",
                "-e",
                "127.0.0.1:2",
                "--timeout",
                "0s",
            ],
            "error: --timeout: must be more than 0ms",
        ),
        (
            vec![
                "--listen",
                &listen,
                "-p",
                "rr",
                "-e",
                "127.0.0.1:2",
                "--connect-timeout",
                "0ms",
            ],
            "error: --connect-timeout: must be more than 0ms",
        ),
        (vec!["--config", &toml], "timeout: must be more than 0ms"),
    ];
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
