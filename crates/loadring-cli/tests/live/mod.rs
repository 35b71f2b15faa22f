//! What the live cross-checks share: the seed, a temporary directory, free
//! loopback ports, daemons started as children and stopped by their pid,
//! backends that answer with their own address, and `loadring place`.
//!
//! Every daemon runs in the foreground as a child of the test, with its
//! configuration, pid file and log in a temporary directory, listening on
//! 127.0.0.1 only; a guard kills it by its pid when the test ends, passes
//! or fails.

#![allow(dead_code)] // each test binary uses part of this module

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long any single wait may take: a daemon starting, a reply arriving.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// Random configurations per daemon per run (`LOADRING_LIVE_CONFIGS`
/// overrides, never below the default).
pub fn configurations() -> usize {
    std::env::var("LOADRING_LIVE_CONFIGS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20)
}

/// The run's seed: `LOADRING_LIVE_SEED` if set, else from the clock; printed
/// so that a failing run can be replayed.
pub fn seed(daemon: &str) -> u64 {
    let seed = match std::env::var("LOADRING_LIVE_SEED") {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("LOADRING_LIVE_SEED={v}: expected a whole number")),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1),
    };
    println!("{daemon} live check: seed {seed} (replay with LOADRING_LIVE_SEED={seed})");
    seed
}

/// splitmix64: a small generator whose sequence is fixed by its seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.range(1, 100) <= percent
    }

    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.range(0, items.len() as u64 - 1) as usize]
    }

    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.range(0, i as u64) as usize;
            items.swap(i, j);
        }
    }
}

/// Text pieces keys are made of: ASCII, multi-byte UTF-8, digits.
const PIECES: &[&str] = &[
    "a",
    "b",
    "Z",
    "0",
    "7",
    "9",
    "-",
    "_",
    ".",
    ":",
    "/",
    "!",
    "~",
    "@",
    "#",
    "$",
    "%",
    "^",
    "&",
    "*",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "<",
    ">",
    "=",
    "+",
    "?",
    "|",
    ";",
    "'",
    "`",
    "é",
    "ü",
    "ß",
    "ж",
    "λ",
    "日本",
    "中",
    "한",
    "🙂",
    "🚀",
    "\u{7ff}",
    "\u{800}",
    "\u{ffff}",
    "\u{10000}",
    "\u{10ffff}",
    "user",
    "key",
    "session",
    "42",
    " ",
    "a b",
];

/// Random keys: mostly short (every tail length of the 4- and 12-byte block
/// hashes), some long, with UTF-8. `allowed` filters characters a daemon's
/// protocol cannot carry; `max_len` bounds the bytes.
pub fn keys(
    rng: &mut Rng,
    count: usize,
    max_len: usize,
    allowed: impl Fn(char) -> bool,
) -> Vec<String> {
    let mut keys: Vec<String> = Vec::with_capacity(count);
    // Boundary keys first: one to thirteen bytes, and the longest accepted.
    for len in 1..=13 {
        keys.push(ascii_run(rng, len, &allowed));
    }
    keys.push(ascii_run(rng, max_len, &allowed));
    keys.push("é".repeat(max_len / 2));
    while keys.len() < count {
        let len = match rng.range(0, 9) {
            0 => rng.range(30, max_len as u64 / 2),
            _ => rng.range(1, 24),
        } as usize;
        let mut key = String::new();
        while key.len() < len {
            let piece = if rng.chance(50) {
                ascii_run(rng, 1, &allowed)
            } else {
                rng.pick(PIECES).to_string()
            };
            if piece.chars().all(&allowed) && key.len() + piece.len() <= max_len {
                key.push_str(&piece);
            } else if key.len() + 1 > max_len {
                break;
            }
        }
        if !key.is_empty() && !keys.contains(&key) {
            keys.push(key);
        }
    }
    // Spaces only inside a key: proxies trim the ends of a header value.
    for key in keys.iter_mut() {
        *key = key.trim_matches(' ').to_string();
    }
    keys.retain(|k| !k.is_empty() && k.chars().all(&allowed));
    let mut seen = std::collections::HashSet::new();
    keys.retain(|k| seen.insert(k.clone()));
    keys
}

/// `len` random printable ASCII characters that `allowed` accepts.
fn ascii_run(rng: &mut Rng, len: usize, allowed: &impl Fn(char) -> bool) -> String {
    let mut s = String::with_capacity(len);
    while s.len() < len {
        let c = char::from(rng.range(0x21, 0x7e) as u8);
        if allowed(c) {
            s.push(c);
        }
    }
    s
}

/// A fresh directory under the system's temporary directory, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(label: &str) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir = std::env::temp_dir().join(format!(
            "loadring-live-{label}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A loopback port nothing listens on right now, never handed out twice in
/// this test process (see `common::free_port`).
pub fn free_port() -> u16 {
    crate::common::free_port()
}

/// The path of a daemon's binary, or a failure saying how to install it.
pub fn require(binary: &str, package: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs = std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/local/sbin", "/sbin"].map(PathBuf::from));
    for dir in dirs {
        let candidate = dir.join(binary);
        if candidate.is_file() {
            return candidate;
        }
    }
    panic!("{binary} not found: install it with `apt-get install -y {package}`");
}

/// A daemon running as a child of the test, killed by its pid on drop.
pub struct Daemon {
    name: String,
    child: Child,
    log: PathBuf,
}

impl Daemon {
    /// Starts a daemon on a free loopback port: `command` writes its
    /// configuration for a port and returns its command line. A daemon that
    /// does not come up (say another process took the port between its
    /// release and the daemon's bind) is tried again on another port, three
    /// times at most. Output goes to `log`.
    pub fn start_on_free_port(
        name: &str,
        log: &Path,
        mut command: impl FnMut(u16) -> Command,
    ) -> (Daemon, u16) {
        let mut failures = Vec::new();
        for _ in 0..3 {
            let port = free_port();
            match Daemon::try_start(name, command(port), log, port) {
                Ok(daemon) => return (daemon, port),
                Err(why) => failures.push(why),
            }
        }
        panic!("{name} would not start:\n{}", failures.join("\n"));
    }

    /// Starts a daemon on a given port (a restart on the port it had).
    pub fn start_on(name: &str, log: &Path, port: u16, command: Command) -> Daemon {
        Daemon::try_start(name, command, log, port).unwrap_or_else(|why| panic!("{why}"))
    }

    /// Starts `command` (stdout and stderr to `log`) and waits until it
    /// accepts connections on 127.0.0.1:`port`.
    fn try_start(
        name: &str,
        mut command: Command,
        log: &Path,
        port: u16,
    ) -> Result<Daemon, String> {
        let out = std::fs::File::create(log).expect("create log");
        let err = out.try_clone().expect("clone log");
        let child = command
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("start {name}: {e}"));
        let mut daemon = Daemon {
            name: name.to_string(),
            child,
            log: log.to_path_buf(),
        };
        // On an error the daemon is dropped: killed by its pid.
        daemon.wait_for(port).map(|()| daemon)
    }

    fn wait_for(&mut self, port: u16) -> Result<(), String> {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!(
                    "{} exited at start ({status}):\n{}",
                    self.name,
                    self.log_text()
                ));
            }
            if TcpStream::connect_timeout(
                &([127, 0, 0, 1], port).into(),
                Duration::from_millis(200),
            )
            .is_ok()
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "{} did not listen on 127.0.0.1:{port} within {TIMEOUT:?}:\n{}",
                    self.name,
                    self.log_text()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Checks the daemon's own pid file names the process we started.
    pub fn check_pid_file(&self, pid_file: &Path) {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Ok(text) = std::fs::read_to_string(pid_file) {
                if let Ok(pid) = text.trim().parse::<u32>() {
                    assert_eq!(
                        pid,
                        self.pid(),
                        "{}: pid file {}",
                        self.name,
                        pid_file.display()
                    );
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "{}: no pid in {}",
                self.name,
                pid_file.display()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // The child's pid: never a search by name.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// HTTP backends in this process, each answering any request with its own
/// address `127.0.0.1:PORT` as the body.
pub struct Backends {
    pub addrs: Vec<String>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Backends {
    pub fn start(count: usize) -> Backends {
        let stop = Arc::new(AtomicBool::new(false));
        let mut addrs = Vec::new();
        let mut threads = Vec::new();
        for _ in 0..count {
            let listener = TcpListener::bind("127.0.0.1:0").expect("bind a backend");
            let addr = listener.local_addr().expect("backend address").to_string();
            addrs.push(addr.clone());
            let stop = stop.clone();
            threads.push(std::thread::spawn(move || {
                for conn in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    if let Ok(conn) = conn {
                        // One thread per connection: a proxy may keep an idle
                        // connection open while it opens another.
                        let addr = addr.clone();
                        std::thread::spawn(move || answer(conn, &addr));
                    }
                }
            }));
        }
        Backends {
            addrs,
            stop,
            threads,
        }
    }
}

/// Reads one request's head and answers with `addr`; the connection stays
/// open for more requests (a keepalive proxy reuses it) until closed.
fn answer(conn: TcpStream, addr: &str) -> std::io::Result<()> {
    // The answer goes out in several writes: no Nagle delay between them.
    conn.set_nodelay(true)?;
    conn.set_read_timeout(Some(TIMEOUT))?;
    conn.set_write_timeout(Some(TIMEOUT))?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut writer = conn;
    loop {
        let mut line = String::new();
        let mut saw_request = false;
        loop {
            line.clear();
            let mut raw = Vec::new();
            if reader.read_until(b'\n', &mut raw)? == 0 {
                return Ok(());
            }
            line.push_str(&String::from_utf8_lossy(&raw));
            if line == "\r\n" || line == "\n" {
                break;
            }
            saw_request = true;
        }
        if !saw_request {
            continue;
        }
        write!(
            writer,
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{addr}",
            addr.len()
        )?;
        writer.flush()?;
    }
}

impl Drop for Backends {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake each accept loop so that it sees the flag.
        for addr in &self.addrs {
            let _ = TcpStream::connect_timeout(&addr.parse().expect("address"), TIMEOUT);
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Sends `GET /` with header `X-Key: key` to 127.0.0.1:`port`; the body of
/// the answer (the backend's address).
pub fn http_get(port: u16, key: &str) -> String {
    let mut conn = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), TIMEOUT)
        .unwrap_or_else(|e| panic!("connect to the proxy on {port}: {e}"));
    conn.set_read_timeout(Some(TIMEOUT)).expect("timeout");
    conn.set_write_timeout(Some(TIMEOUT)).expect("timeout");
    let mut request = Vec::new();
    request.extend_from_slice(b"GET / HTTP/1.1\r\nHost: loadring.test\r\nX-Key: ");
    request.extend_from_slice(key.as_bytes());
    request.extend_from_slice(b"\r\nConnection: close\r\n\r\n");
    // No half-close after the request: nginx takes it for a client that gave up.
    conn.write_all(&request).expect("send the request");
    let mut response = Vec::new();
    conn.read_to_end(&mut response)
        .unwrap_or_else(|e| panic!("read the answer for key {key:?}: {e}"));
    let text = String::from_utf8_lossy(&response).to_string();
    match text.split_once("\r\n\r\n") {
        Some((head, body)) if head.starts_with("HTTP/1.1 200") => body.to_string(),
        _ => format!(
            "<no answer from a backend: {:?}>",
            text.lines().next().unwrap_or("")
        ),
    }
}

/// `GET path` on 127.0.0.1:`port` (an admin listener): the body, or `None`
/// without a 200 answer.
pub fn http_get_path(port: u16, path: &str) -> Option<String> {
    let mut conn =
        TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(2)).ok()?;
    conn.set_read_timeout(Some(TIMEOUT)).ok()?;
    write!(
        conn,
        "GET {path} HTTP/1.1\r\nHost: loadring.test\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = Vec::new();
    conn.read_to_end(&mut response).ok()?;
    let text = String::from_utf8_lossy(&response).to_string();
    match text.split_once("\r\n\r\n") {
        Some((head, body)) if head.starts_with("HTTP/1.1 200") => Some(body.to_string()),
        _ => None,
    }
}

/// A `loadring` child process (a proxy, a registrar), killed by its pid on
/// drop; its stderr goes to `log`.
pub struct Loadring {
    child: Child,
    log: PathBuf,
}

impl Loadring {
    pub fn spawn(args: &[&str], log: &Path) -> Loadring {
        let out = std::fs::File::create(log).expect("create log");
        let child = Command::new(env!("CARGO_BIN_EXE_loadring"))
            .args(args)
            .env("LOADRING_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(out)
            .spawn()
            .expect("run loadring");
        Loadring {
            child,
            log: log.to_path_buf(),
        }
    }

    /// Kills it now (SIGKILL: no goodbye), by its pid.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether it is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Loadring {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A `loadring proxy` (hash key from header `X-Key`) following `source`.
pub struct FleetProxy {
    pub process: Loadring,
    pub port: u16,
    pub admin: u16,
}

impl FleetProxy {
    pub fn start(policy: &str, source: &str, log: &Path) -> FleetProxy {
        let (port, admin) = (free_port(), free_port());
        let (listen, admin_addr) = (format!("127.0.0.1:{port}"), format!("127.0.0.1:{admin}"));
        let mut process = Loadring::spawn(
            &[
                "proxy",
                "--listen",
                &listen,
                "--admin",
                &admin_addr,
                "--policy",
                policy,
                "--key",
                "header:x-key",
                "--discover",
                source,
            ],
            log,
        );
        let deadline = Instant::now() + TIMEOUT;
        while http_get_path(admin, "/status").is_none() {
            assert!(
                process.running() && Instant::now() < deadline,
                "loadring proxy --discover {source} did not serve /status:\n{}",
                process.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        FleetProxy {
            process,
            port,
            admin,
        }
    }

    /// The pool in `/status`: `addr weight=W` per endpoint, sorted.
    pub fn pool(&self) -> Vec<String> {
        let Some(body) = http_get_path(self.admin, "/status") else {
            return vec!["<no status>".into()];
        };
        let status: serde_json::Value = serde_json::from_str(&body).expect("status JSON");
        let mut pool: Vec<String> = status["endpoints"]
            .as_array()
            .expect("endpoints")
            .iter()
            .map(|e| {
                format!(
                    "{} weight={}",
                    e["addr"].as_str().unwrap_or("?"),
                    e["weight"]
                )
            })
            .collect();
        pool.sort();
        pool
    }

    /// Each key's backend, through this proxy.
    pub fn placements(&self, keys: &[String]) -> Vec<String> {
        keys.iter().map(|k| http_get(self.port, k)).collect()
    }
}

/// Polls `check` every 20 ms until it holds or `within` has passed; whether
/// it held, and when.
pub fn eventually(within: Duration, mut check: impl FnMut() -> bool) -> Option<Duration> {
    let start = Instant::now();
    loop {
        if check() {
            return Some(start.elapsed());
        }
        if start.elapsed() > within {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `loadring place --policy spec -e ...` over `keys`: each key's endpoint.
pub fn place(spec: &str, endpoints: &[String], keys: &[String]) -> Vec<String> {
    let mut args = vec!["place".to_string(), "--policy".into(), spec.into()];
    for e in endpoints {
        args.push("-e".into());
        args.push(e.clone());
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_loadring"))
        .args(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run loadring place");
    let mut stdin = child.stdin.take().expect("stdin");
    let input: String = keys.iter().map(|k| format!("{k}\n")).collect();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(input.as_bytes());
    });
    let out = child.wait_with_output().expect("loadring place output");
    writer.join().expect("stdin writer");
    assert!(
        out.status.success(),
        "loadring {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("UTF-8 output");
    let placed: Vec<String> = text
        .lines()
        .zip(keys)
        .map(|(line, key)| {
            let (input, endpoint) = line.split_once('\t').expect("input<TAB>endpoint");
            assert_eq!(input, key, "place echoes its input");
            endpoint.to_string()
        })
        .collect();
    assert_eq!(placed.len(), keys.len(), "one line per key");
    placed
}

/// Compares one configuration's observed and computed placements; the
/// report of the differences, if any.
pub fn compare(
    what: &str,
    keys: &[String],
    observed: &[String],
    computed: &[String],
) -> Option<String> {
    let wrong: Vec<String> = keys
        .iter()
        .zip(observed.iter().zip(computed))
        .filter(|(_, (o, c))| o != c)
        .map(|(k, (o, c))| format!("  key {k:?}: daemon {o}, loadring {c}"))
        .collect();
    if wrong.is_empty() {
        None
    } else {
        Some(format!(
            "{what}: {} of {} keys differ:\n{}",
            wrong.len(),
            keys.len(),
            wrong[..wrong.len().min(8)].join("\n")
        ))
    }
}
