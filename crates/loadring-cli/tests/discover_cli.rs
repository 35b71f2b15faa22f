//! Bad input to `loadring proxy --discover` and `loadring register`: one
//! line `error: ...` naming the culprit, exit code 2, nothing served. A
//! source with no first membership (etcd not listening, a missing file) is
//! an error at the start.

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_loadring");

/// Only a guard against a command that serves instead of refusing, not a
/// timing: a refusal ends the process long before this.
const HANG: Duration = Duration::from_secs(120);

/// A loopback port nothing listens on right now.
fn closed_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

fn fails(args: &[&str], why: &str) {
    let child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (done, exited) = mpsc::channel();
    std::thread::spawn(move || done.send(child.wait_with_output()));
    let out = match exited.recv_timeout(HANG) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            let _ = Command::new("kill").arg(pid.to_string()).status();
            panic!("{args:?} still runs after {HANG:?}: it must refuse and exit");
        }
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    assert!(
        stderr.starts_with("error: ") && stderr.contains(why),
        "{args:?}: {stderr}"
    );
}

#[test]
fn bad_sources_and_registrations_are_one_line_errors() {
    let etcd = format!("etcd://127.0.0.1:{}/services/api", closed_port());
    let proxy = ["proxy", "--listen", "127.0.0.1:0", "-p", "rr", "--discover"];
    let with = |source: &str| -> Vec<String> {
        proxy
            .iter()
            .map(|s| s.to_string())
            .chain([source.to_string()])
            .collect()
    };
    for (source, why) in [
        (
            "consul://x",
            "--discover `consul://x`: unknown source `consul`",
        ),
        ("dns://api.test", "expected dns://NAME:PORT"),
        ("etcd://127.0.0.1:2379", "expected etcd://HOST:PORT/PREFIX"),
        (
            "file:/nonexistent/loadring/endpoints",
            "--discover file:/nonexistent/loadring/endpoints: ",
        ),
        (
            etcd.as_str(),
            &format!("--discover {etcd}: etcd at 127.0.0.1:"),
        ),
    ] {
        let args = with(source);
        fails(&args.iter().map(String::as_str).collect::<Vec<_>>(), why);
    }
    fails(
        &[
            "proxy",
            "--listen",
            "127.0.0.1:0",
            "-p",
            "rr",
            "--discover",
            "file:/a",
            "--endpoints",
            "/b",
        ],
        "--discover and --endpoints: give one",
    );
    let register = |ttl: &str, target: &str| {
        vec![
            "register".to_string(),
            target.to_string(),
            "--endpoint".into(),
            "127.0.0.1:9".into(),
            "--ttl".into(),
            ttl.into(),
        ]
    };
    for (args, why) in [
        (
            register("500ms", &etcd),
            "--ttl 500ms: an etcd lease lasts at least 1s",
        ),
        (register("2x", &etcd), "--ttl: `2x` is not a duration"),
        (register("25h", &etcd), "--ttl: `25h` is out of range: accepted a whole number of ms, s, m or h from 0ms to 24h"),
        (register("2s", "dns://a.test:80"), "register writes to etcd"),
        (register("2s", &etcd), "etcd at 127.0.0.1:"),
    ] {
        fails(&args.iter().map(String::as_str).collect::<Vec<_>>(), why);
    }
    fails(
        &["register", &etcd, "--endpoint", "127.0.0.1:9 weight=x"],
        "--endpoint: ",
    );
}
