//! Test helpers shared by the proxy's library and CLI tests: a raw HTTP/1.1
//! client (one connection per request, every step under a timeout) and
//! readers for the admin endpoints.

#![allow(dead_code)]

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// Any single step of a test may take this long at most.
pub const STEP: Duration = Duration::from_secs(10);

/// How long a wait for an event may take before the test calls it hung; a
/// bound against hanging, not a timing.
pub const WAIT: Duration = Duration::from_secs(30);

/// A response.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The backend that answered (`x-backend`), or "" for proxy answers.
    pub fn backend(&self) -> String {
        self.header("x-backend").unwrap_or("").to_string()
    }
}

/// One request on a fresh connection (`Connection: close`).
pub async fn request(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> std::io::Result<Reply> {
    let mut text = format!("{method} {target} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        text.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        text.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() {
        text.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    text.push_str("\r\n");
    text.push_str(body);
    exchange(addr, &text).await
}

/// `head` (request line and headers, each ending in CRLF, without the
/// blank line) then `body` exactly as given, on a fresh connection.
pub async fn request_raw(addr: SocketAddr, head: &str, body: &str) -> std::io::Result<Reply> {
    exchange(
        addr,
        &format!("{head}Host: {addr}\r\nConnection: close\r\n\r\n{body}"),
    )
    .await
}

/// Sends `text` on a fresh connection and reads the reply to its end.
async fn exchange(addr: SocketAddr, text: &str) -> std::io::Result<Reply> {
    let exchange = async {
        let mut stream = TcpStream::connect(addr).await?;
        stream.write_all(text.as_bytes()).await?;
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await?;
        parse(&raw)
    };
    tokio::time::timeout(STEP, exchange)
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "request timed out"))?
}

/// `body` in chunked encoding, one chunk per part.
pub fn chunked(parts: &[&str]) -> String {
    let mut text: String = parts
        .iter()
        .map(|p| format!("{:x}\r\n{p}\r\n", p.len()))
        .collect();
    text.push_str("0\r\n\r\n");
    text
}

pub async fn get(addr: SocketAddr, target: &str, headers: &[(&str, &str)]) -> Reply {
    request(addr, "GET", target, headers, "")
        .await
        .unwrap_or_else(|e| panic!("GET {target} on {addr}: {e}"))
}

fn parse(raw: &[u8]) -> std::io::Result<Reply> {
    let bad = |why: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, why.to_string());
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| bad("no header end"))?;
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("no status"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_string()
    };
    Ok(Reply {
        status,
        headers,
        body,
    })
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// The value of the series `series` (name and labels exactly as printed).
pub fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

/// Every series of metric `name`, summed.
pub fn metric_sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Polls `check` every 20 ms until it holds; false after `limit`.
pub async fn eventually<F, Fut>(limit: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = Instant::now();
    loop {
        if check().await {
            return true;
        }
        if start.elapsed() > limit {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Reads from `stream` until a whole request head has come (a scripted
/// backend's first step): `false` if the peer closed first.
pub async fn read_head(stream: &mut TcpStream) -> bool {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    true
}

/// A backend that answers every request with a body of a gigabyte, written
/// as fast as it is taken; `ended` counts the answers whose connection the
/// proxy closed before the end.
pub struct EndlessBackend {
    pub addr: SocketAddr,
    pub ended: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl EndlessBackend {
    /// Whether, soon, the proxy closed the connection of one answer.
    pub async fn cut_off(&self) -> bool {
        eventually(WAIT, || async { self.ended.load(SeqCst) == 1 }).await
    }
}

impl Drop for EndlessBackend {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub async fn endless_backend() -> EndlessBackend {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let ended = Arc::new(AtomicU64::new(0));
    let counted = ended.clone();
    let task = tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let ended = counted.clone();
            tokio::spawn(async move {
                if !read_head(&mut stream).await {
                    return;
                }
                let total: u64 = 1 << 30;
                let answer = format!("HTTP/1.1 200 OK\r\ncontent-length: {total}\r\n\r\n");
                if stream.write_all(answer.as_bytes()).await.is_err() {
                    return;
                }
                let piece = vec![b'x'; 64 * 1024];
                let mut sent = 0;
                while sent < total {
                    if stream.write_all(&piece).await.is_err() {
                        ended.fetch_add(1, SeqCst);
                        return;
                    }
                    sent += piece.len() as u64;
                }
            });
        }
    });
    EndlessBackend { addr, ended, task }
}

/// A port free right now on 127.0.0.1.
///
/// Each port is handed out once per test process (a counter walks the
/// range, from an offset of the process id), so that two tests running at
/// once never both get the one a port-0 bind gave back, and it lies below
/// the kernel's ephemeral range, so that no outgoing connection of another
/// test holds it as its local port by the time a server binds it. It is
/// checked free by binding it once.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    // Above the well-known ports and most daemons' defaults; below the
    // ephemeral range (Linux's default starts at 32768).
    let low: u32 = 10_000;
    let high: u32 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse().ok())
        .filter(|&start: &u32| start > low + 1_000)
        .unwrap_or(32_768);
    let span = high - low;
    let offset = std::process::id() % span;
    loop {
        let n = NEXT.fetch_add(1, Relaxed);
        assert!(n < span, "no free loopback port left below {high}");
        let port = u16::try_from(low + (offset + n) % span).expect("below 65536");
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// A child process's stderr, line by line, as it is written.
pub struct StderrLines(std::sync::mpsc::Receiver<String>);

impl StderrLines {
    pub fn follow(stderr: std::process::ChildStderr) -> Self {
        use std::io::BufRead;
        let (line, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in std::io::BufReader::new(stderr).lines() {
                let Ok(l) = l else { break };
                if line.send(l).is_err() {
                    break;
                }
            }
        });
        StderrLines(lines)
    }

    /// The next line, which should be `what`; panics if none comes within
    /// [`WAIT`]. Blocks the thread: call it from a multi-threaded runtime.
    pub fn next(&self, what: &str) -> String {
        tokio::task::block_in_place(|| self.0.recv_timeout(WAIT))
            .unwrap_or_else(|e| panic!("no line on the child's stderr ({what}): {e}"))
    }

    /// Every line left, once the child has exited.
    pub fn rest(self) -> Vec<String> {
        self.0.iter().collect()
    }
}
