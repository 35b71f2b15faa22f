//! Limits on client connections: how long a client may take to send its
//! request headers and to read its answers, how long its tunnels may stay
//! quiet, how many connections may be open at once, how many
//! requests whose client left are still served, and how accept errors
//! (out of file descriptors) are waited out.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long a client may take to send a request's headers by default (and
/// to start the next one on a kept-alive connection).
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long sending to a client may be held back (the client reads
/// nothing) by default: nginx's `send_timeout`.
pub const DEFAULT_SEND_TIMEOUT: Duration = Duration::from_secs(60);
/// How long an open tunnel (a WebSocket) may carry nothing either way by
/// default: HAProxy's usual `timeout tunnel`.
pub const DEFAULT_TUNNEL_TIMEOUT: Duration = Duration::from_secs(3600);
/// File descriptors kept aside from client connections by the default
/// limit: listeners, the endpoints file, logs.
const RESERVED_FDS: u64 = 64;
/// The default limit when the file descriptor limit cannot be read.
const FALLBACK_MAX_CONNECTIONS: usize = 4096;

/// Limits on client connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientLimits {
    /// How long a client may take to send a request's headers, and how
    /// long a connection may ask for nothing: a new one before its first
    /// request, a kept-alive HTTP/1.1 one between requests, an HTTP/2 one
    /// with no stream open (told to go away within two such periods).
    pub header_timeout: Duration,
    /// How long sending to a client may be held back because it reads
    /// nothing; then its connection is closed and its requests abandoned.
    /// An HTTP/2 stream its client holds back alone (its window shut) has
    /// its request abandoned after as long, and within a quarter more.
    pub send_timeout: Duration,
    /// How long an open tunnel (a WebSocket) may carry nothing either way;
    /// then both its sides are closed and its slot released.
    pub tunnel_timeout: Duration,
    /// Client connections open at once; beyond, new ones are refused at
    /// once. `None`: half of the soft file descriptor limit left after a
    /// reserve of 64 (each client connection may need a connection to a
    /// backend too), at least 1; 4096 where the limit cannot be read.
    pub max_connections: Option<usize>,
    /// Requests whose client left that are still read to their end (see
    /// [`ClusterConfig::abort_on_close`](crate::ClusterConfig::abort_on_close)),
    /// over all clusters; beyond, a request whose client leaves is
    /// cancelled as with `abort_on_close`. Each holds a connection to a
    /// backend until its answer ends, and a client can leave requests
    /// faster than backends answer them (an HTTP/2 client resetting its
    /// streams, an HTTP/1.1 client closing and connecting again), so the
    /// limit keeps what they cost bounded. `None`: the connection limit in
    /// force; 0: every such request is cancelled.
    pub max_abandoned: Option<usize>,
}

impl Default for ClientLimits {
    fn default() -> Self {
        ClientLimits {
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            send_timeout: DEFAULT_SEND_TIMEOUT,
            tunnel_timeout: DEFAULT_TUNNEL_TIMEOUT,
            max_connections: None,
            max_abandoned: None,
        }
    }
}

impl ClientLimits {
    /// The connection limit in force.
    pub fn max_connections(&self) -> usize {
        self.max_connections.unwrap_or_else(default_max_connections)
    }

    /// The limit in force on requests whose client left.
    pub fn max_abandoned(&self) -> usize {
        self.max_abandoned.unwrap_or_else(|| self.max_connections())
    }
}

/// Half of the soft file descriptor limit left after a reserve of 64 (each
/// client connection may need a connection to a backend too), at least 1;
/// 4096 where the limit cannot be read.
pub fn default_max_connections() -> usize {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|text| soft_open_files(&text))
        .map_or(FALLBACK_MAX_CONNECTIONS, connections_for_fds)
}

/// The connection limit for a soft file descriptor limit of `fds`.
pub fn connections_for_fds(fds: u64) -> usize {
    usize::try_from((fds.saturating_sub(RESERVED_FDS) / 2).max(1)).unwrap_or(usize::MAX)
}

/// The soft limit of `Max open files` in `/proc/self/limits`' text.
fn soft_open_files(limits: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    let soft = line["Max open files".len()..].split_whitespace().next()?;
    match soft {
        "unlimited" => Some(u64::MAX),
        n => n.parse().ok(),
    }
}

/// Accept errors (out of file descriptors and the like): each waits a
/// little longer, up to a second, and they are logged once a second with
/// their count, instead of a warning each. One per accept loop: the
/// backoff is the loop's own, the log line's rate is the proxy's
/// ([`AcceptLog`]).
#[derive(Debug)]
pub(crate) struct AcceptErrors {
    backoff: Duration,
    log: AcceptLog,
}

const FIRST_BACKOFF: Duration = Duration::from_millis(10);
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// At most one accept warning per interval.
pub(crate) const ACCEPT_LOG_INTERVAL: Duration = Duration::from_secs(1);

impl AcceptErrors {
    pub(crate) fn new(log: AcceptLog) -> Self {
        AcceptErrors {
            backoff: FIRST_BACKOFF,
            log,
        }
    }

    /// Counts `error`, logs when a second has passed since the proxy's
    /// last accept warning, and says how long to wait before accepting
    /// again.
    pub(crate) fn failed(&mut self, error: &std::io::Error) -> Duration {
        if let Some(failures) = self.log.count(Instant::now()) {
            tracing::warn!(
                "accept: {error} ({failures} failed accepts since the last report); retrying with backoff"
            );
        }
        let wait = self.backoff;
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
        wait
    }

    /// An accept succeeded: the next error starts the backoff again.
    pub(crate) fn succeeded(&mut self) {
        self.backoff = FIRST_BACKOFF;
    }
}

/// The rate limit of accept warnings, shared by all of a proxy's accept
/// loops: every worker runs out of file descriptors at the same moment, and
/// the operator should read one line a second for the proxy, not one per
/// worker. Locked only when an accept fails.
#[derive(Debug, Clone, Default)]
pub(crate) struct AcceptLog(Arc<Mutex<Unreported>>);

#[derive(Debug, Default)]
struct Unreported {
    failures: u64,
    last_report: Option<Instant>,
}

impl AcceptLog {
    /// Counts a failed accept at `now`; when a report is due (the first
    /// failure, or a second after the last report), the failures it
    /// stands for, counted from every loop since the last report.
    fn count(&self, now: Instant) -> Option<u64> {
        // A panic while holding the lock left two integers that are still
        // consistent: keep counting.
        let mut unreported = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        unreported.failures += 1;
        let due = unreported
            .last_report
            .is_none_or(|last| now.saturating_duration_since(last) >= ACCEPT_LOG_INTERVAL);
        if !due {
            return None;
        }
        unreported.last_report = Some(now);
        Some(std::mem::take(&mut unreported.failures))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_limit_follows_the_fd_limit() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max open files            1024                 524288               files     \n";
        assert_eq!(soft_open_files(limits), Some(1024));
        // (1024 - 64) / 2
        assert_eq!(connections_for_fds(1024), 480);
        assert_eq!(connections_for_fds(10), 1);
        let unlimited =
            "Max open files            unlimited            unlimited            files\n";
        assert_eq!(soft_open_files(unlimited), Some(u64::MAX));
    }

    #[test]
    fn accept_failures_of_all_loops_share_one_report_a_second() {
        let log = AcceptLog::default();
        let other_worker = log.clone();
        let start = Instant::now();
        assert_eq!(log.count(start), Some(1), "the first failure is reported");
        // The other worker fails a millisecond later: same second, no line.
        assert_eq!(other_worker.count(start + Duration::from_millis(1)), None);
        assert_eq!(log.count(start + Duration::from_millis(999)), None);
        // A second on, one line for the three failures since the last.
        assert_eq!(
            other_worker.count(start + ACCEPT_LOG_INTERVAL),
            Some(3),
            "counts the failures of both workers since the last report"
        );
        assert_eq!(log.count(start + ACCEPT_LOG_INTERVAL), None);
        // A clock read before the last report (another thread's `now`,
        // taken earlier) is not a reason to report.
        assert_eq!(log.count(start), None);
    }
}
