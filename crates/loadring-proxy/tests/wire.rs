//! The raw HTTP/1.1 client of the tests of the gateway's own server: bytes
//! out, answers parsed from the bytes that come back, over any stream. One
//! file for both of its suites: a socket to a running proxy here
//! (`downstream.rs`), an in-memory pipe to one connection in the library's
//! `src/downstream/connection_tests.rs`, which includes this file.
//!
//! Every final answer read is checked to carry exactly one `Date` field, an
//! HTTP date (RFC 9110 6.6.1), and its body is read by RFC 9112 6.3.

// Each suite uses part of it.
#![allow(dead_code)]

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// One answer as it came on the wire.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    /// The head, status line included, without the empty line ending it.
    pub(crate) head: String,
    /// Field names in lower case, values trimmed, in order.
    pub(crate) fields: Vec<(String, String)>,
    /// The body's bytes as they came (chunk framing included).
    pub(crate) wire: Vec<u8>,
    /// The body, decoded.
    pub(crate) body: Vec<u8>,
}

impl Answer {
    /// The values of every field named `name`.
    pub(crate) fn all(&self, name: &str) -> Vec<&str> {
        self.fields
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// The value of the one field named `name`, if any (panics on two).
    pub(crate) fn field(&self, name: &str) -> Option<&str> {
        let all = self.all(name);
        assert!(
            all.len() <= 1,
            "{name} said {} times: {}",
            all.len(),
            self.head
        );
        all.first().copied()
    }

    pub(crate) fn status_line(&self) -> &str {
        self.head.split("\r\n").next().unwrap()
    }

    pub(crate) fn text(&self) -> String {
        lossy(&self.body)
    }

    /// The field names in order, `date` left out (its value changes).
    pub(crate) fn names(&self) -> Vec<&str> {
        self.fields
            .iter()
            .map(|(n, _)| n.as_str())
            .filter(|&n| n != "date")
            .collect()
    }
}

pub(crate) fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A client's end of a connection, with what was read and not yet parsed.
pub(crate) struct Wire<S> {
    pub(crate) io: S,
    pub(crate) buf: Vec<u8>,
    /// How long one read or write may wait before the test fails (a bound
    /// against hanging, not a timing).
    patience: Duration,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Wire<S> {
    pub(crate) fn new(io: S, patience: Duration) -> Wire<S> {
        Wire {
            io,
            buf: Vec::new(),
            patience,
        }
    }

    pub(crate) async fn send(&mut self, bytes: impl AsRef<[u8]>) {
        tokio::time::timeout(self.patience, self.io.write_all(bytes.as_ref()))
            .await
            .expect("the server takes the bytes in time")
            .expect("writing to the server");
        self.io.flush().await.expect("flushing to the server");
    }

    /// Reads more of what the server sends: `false` when it closed.
    pub(crate) async fn more(&mut self) -> bool {
        let mut chunk = [0u8; 16 * 1024];
        let n = tokio::time::timeout(self.patience, self.io.read(&mut chunk))
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "nothing from the server in {:?}; read so far: {:?}",
                    self.patience,
                    lossy(&self.buf)
                )
            })
            .unwrap_or_else(|e| {
                panic!(
                    "reading from the server: {e}; read so far: {:?}",
                    lossy(&self.buf)
                )
            });
        self.buf.extend_from_slice(&chunk[..n]);
        n > 0
    }

    /// The next `n` bytes.
    pub(crate) async fn take(&mut self, n: usize) -> Vec<u8> {
        while self.buf.len() < n {
            assert!(
                self.more().await,
                "the server closed before {n} bytes came: {:?}",
                lossy(&self.buf)
            );
        }
        self.buf.drain(..n).collect()
    }

    /// The next line, its CRLF included (which it must have).
    pub(crate) async fn line(&mut self) -> Vec<u8> {
        loop {
            if let Some(at) = self.buf.windows(2).position(|w| w == b"\r\n") {
                return self.buf.drain(..at + 2).collect();
            }
            assert!(
                self.more().await,
                "the server closed in the middle of a line: {:?}",
                lossy(&self.buf)
            );
        }
    }

    /// The next head, its empty line included.
    pub(crate) async fn head(&mut self) -> String {
        loop {
            if let Some(at) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head: Vec<u8> = self.buf.drain(..at + 4).collect();
                return String::from_utf8(head).expect("a head of ASCII");
            }
            assert!(
                self.more().await,
                "the server closed before a whole head came: {:?}",
                lossy(&self.buf)
            );
        }
    }

    /// The next answer (an interim one included) to a request of `method`.
    pub(crate) async fn answer_to(&mut self, method: &str) -> Answer {
        let raw = self.head().await;
        let head = raw.strip_suffix("\r\n\r\n").unwrap().to_string();
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap();
        assert!(
            status_line.starts_with("HTTP/1.1 "),
            "the status line is HTTP/1.1's: {head:?}"
        );
        let status: u16 = status_line
            .get(9..12)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no status: {head:?}"));
        let fields: Vec<(String, String)> = lines
            .map(|l| {
                let (name, value) = l
                    .split_once(':')
                    .unwrap_or_else(|| panic!("a field line without a colon: {l:?} in {head:?}"));
                assert!(
                    !name.ends_with(' ') && !name.is_empty(),
                    "a field name: {l:?} in {head:?}"
                );
                (name.to_ascii_lowercase(), value.trim().to_string())
            })
            .collect();
        let mut answer = Answer {
            status,
            head,
            fields,
            wire: Vec::new(),
            body: Vec::new(),
        };
        if status >= 200 {
            // RFC 9110 6.6.1: a Date on every final answer, once.
            let dates = answer.all("date");
            assert_eq!(dates.len(), 1, "one Date field: {}", answer.head);
            assert!(
                httpdate::parse_http_date(dates[0]).is_ok(),
                "an HTTP date: {}",
                answer.head
            );
        }
        // RFC 9112 6.3: the body's length.
        let no_body = method == "HEAD" || status < 200 || status == 204 || status == 304;
        let chunked = answer.field("transfer-encoding") == Some("chunked");
        if no_body {
        } else if chunked {
            assert_eq!(answer.field("content-length"), None, "{}", answer.head);
            self.read_chunked(&mut answer).await;
        } else if let Some(length) = answer.field("content-length") {
            let n: usize = length.parse().expect("a length of digits");
            answer.wire = self.take(n).await;
            answer.body = answer.wire.clone();
        } else {
            // Until the close (RFC 9112 6.3, rule 8).
            while self.more().await {}
            answer.wire = std::mem::take(&mut self.buf);
            answer.body = answer.wire.clone();
        }
        answer
    }

    async fn read_chunked(&mut self, answer: &mut Answer) {
        loop {
            let line = self.line().await;
            answer.wire.extend_from_slice(&line);
            let text = lossy(&line[..line.len() - 2]);
            let size = usize::from_str_radix(text.split(';').next().unwrap().trim(), 16)
                .unwrap_or_else(|_| panic!("a chunk size: {text:?}"));
            if size == 0 {
                // Trailers, then the empty line.
                loop {
                    let line = self.line().await;
                    answer.wire.extend_from_slice(&line);
                    if line == b"\r\n" {
                        return;
                    }
                }
            }
            let data = self.take(size + 2).await;
            assert!(data.ends_with(b"\r\n"), "CRLF after a chunk: {data:?}");
            answer.wire.extend_from_slice(&data);
            answer.body.extend_from_slice(&data[..size]);
        }
    }

    /// The server closes its side, with nothing more said.
    pub(crate) async fn closed(&mut self) {
        let more = self.more().await;
        assert!(
            !more && self.buf.is_empty(),
            "bytes instead of the close: {:?}",
            lossy(&self.buf)
        );
    }
}
