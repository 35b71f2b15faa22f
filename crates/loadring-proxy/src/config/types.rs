//! What an embedder builds: the proxy, its clusters, their health
//! settings and routes, with the defaults every field starts from.

use std::path::PathBuf;
use std::time::Duration;

use loadring::{Endpoint, PolicySpec};
use loadring_discovery::SourceSpec;

use crate::clients::ClientLimits;
use crate::error::{ConfigError, ConfigErrorKind};
use crate::key::KeySpec;
use crate::load_report::LoadReportSpec;

/// Retries by default: one more candidate after a connect failure.
pub const DEFAULT_RETRIES: u32 = 1;
/// Request bodies up to this many bytes are read whole before the first
/// attempt, so that a failed attempt can be retried with them.
pub const DEFAULT_RETRY_BUFFER: u64 = 64 * 1024;
/// The largest `retry_buffer` accepted: each request in flight may hold
/// that much.
pub const MAX_RETRY_BUFFER: u64 = 16 * 1024 * 1024;
/// How long a connection to a backend may take: longer than the kernel's
/// first retransmission of a SYN (after 1 s), so that a SYN a backend
/// dropped (its accept queue full under a burst of new connections) costs
/// a second, not the attempt. At 1 s, 10 to 71 of 200 connections opened at
/// once to one backend whose queue overflowed failed as timeouts; at 2 s,
/// none.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a backend may take to send its response headers.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// How often active health checks run.
pub const DEFAULT_HEALTH_INTERVAL: Duration = Duration::from_secs(5);
/// Consecutive passing checks that bring an endpoint back (HAProxy's default).
pub const DEFAULT_HEALTH_RISE: u32 = 2;
/// Consecutive failing checks that take an endpoint out (HAProxy's default).
pub const DEFAULT_HEALTH_FALL: u32 = 3;
/// Consecutive failed requests that eject an endpoint (Envoy's `consecutive_5xx`).
pub const DEFAULT_EJECT_AFTER: u32 = 5;
/// How long an ejected endpoint stays out (Envoy's `base_ejection_time`).
pub const DEFAULT_EJECT_FOR: Duration = Duration::from_secs(30);
/// How long a stopping proxy waits for requests in flight.
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(30);
/// Idle connections to a cluster's backends each worker thread keeps for
/// reuse, over all its endpoints (`keepalive`).
pub const DEFAULT_KEEPALIVE: usize = 256;
/// The most idle connections `keepalive` accepts (each is a file descriptor).
pub const MAX_KEEPALIVE: usize = 65536;
/// The most client connections `max_connections` accepts.
pub const MAX_CONNECTIONS: usize = 1 << 24;
/// The most clusters a configuration may have (each is a balancer, its
/// health checks and its metrics).
pub const MAX_CLUSTERS: usize = 1_024;
/// The most routes a configuration may have: each request is matched
/// against them in order, and each is checked against every earlier one.
pub const MAX_ROUTES: usize = 4_096;
/// The longest cluster name, in bytes (it labels every metric of the
/// cluster and is shown in logs and `/status`).
pub const MAX_NAME_LEN: usize = 256;

/// The whole proxy.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// `HOST:PORT` the proxy serves on.
    pub listen: String,
    /// `HOST:PORT` of the admin listener (`/metrics`, `/status`), if any.
    pub admin: Option<String>,
    /// How long a stopping proxy waits for requests in flight.
    pub drain_timeout: Duration,
    /// Limits on client connections (header timeout, connection count).
    pub clients: ClientLimits,
    /// The clusters, in order.
    pub clusters: Vec<ClusterConfig>,
    /// The routes, tried in order; without routes the single cluster takes
    /// every request.
    pub routes: Vec<RouteConfig>,
    /// The listener's certificate and key: it serves TLS (ALPN `h2` and
    /// `http/1.1`) instead of cleartext.
    pub tls: Option<TlsFiles>,
}

/// A PEM certificate chain and its private key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain, the listener's own first.
    pub cert: PathBuf,
    /// Its private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// What a cluster speaks to its backends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackendProtocol {
    /// HTTP/1.1, a connection per request in flight (pooled).
    #[default]
    Http1,
    /// HTTP/2 (with prior knowledge in cleartext, by ALPN `h2` over TLS):
    /// one connection per endpoint per worker carries every stream.
    /// gRPC backends need it.
    H2c,
}

/// `http1` or `h2c`, as `backend_protocol` and `--backend-protocol` take it.
///
/// ```
/// use loadring_proxy::{BackendProtocol, ConfigErrorKind};
///
/// assert_eq!("h2c".parse::<BackendProtocol>(), Ok(BackendProtocol::H2c));
/// let err = "h3".parse::<BackendProtocol>().unwrap_err();
/// assert_eq!(err.kind(), ConfigErrorKind::Value);
/// assert_eq!(err.to_string(), "`h3`: accepted http1, h2c");
/// ```
impl std::str::FromStr for BackendProtocol {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        match s {
            "http1" => Ok(BackendProtocol::Http1),
            "h2c" => Ok(BackendProtocol::H2c),
            other => Err(ConfigError::new(
                ConfigErrorKind::Value,
                format!("`{}`: accepted http1, h2c", loadring::Echo(other)),
            )),
        }
    }
}

/// One policy over one set of endpoints.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// The cluster's name (`default` from flags).
    pub name: String,
    /// The policy.
    pub policy: PolicySpec,
    /// Endpoints given inline (`-e`, `endpoints = [...]`): fixed.
    pub endpoints: Vec<Endpoint>,
    /// A file of endpoints, watched and re-read on change and on SIGHUP.
    pub endpoints_file: Option<PathBuf>,
    /// A membership source followed (`file:`, `dns://`, `dns+srv://`,
    /// `etcd://`); its endpoints come after the inline ones.
    pub discover: Option<SourceSpec>,
    /// Where the hash key comes from.
    pub key: KeySpec,
    /// Further candidates tried after a connect failure or a connection
    /// closed before a response.
    pub retries: u32,
    /// Request bodies of at most this many bytes are read whole before the
    /// first attempt, so the request can be retried; bigger ones stream and
    /// are sent once. 0: every body streams.
    pub retry_buffer: u64,
    /// How long a connection to a backend may take.
    pub connect_timeout: Duration,
    /// How long a backend may take to send its response headers, and the
    /// longest pause allowed in its response body.
    pub timeout: Duration,
    /// A client that leaves cancels the backend's request (the upstream
    /// connection is closed) instead of the response being read to its end
    /// with the endpoint's slot held. Without it, such requests still go
    /// on only up to the proxy's limit on them
    /// ([`ClientLimits::max_abandoned`](crate::ClientLimits::max_abandoned)).
    pub abort_on_close: bool,
    /// Idle HTTP/1 connections to the backends each worker thread keeps
    /// open for reuse, over all the cluster's endpoints; past it the least
    /// recently used one is closed (nginx's `keepalive`). 0: one connection
    /// per request.
    pub keepalive: usize,
    /// Active and passive health checking.
    pub health: HealthConfig,
    /// Read each response's load report (`--load-report`) and give it to
    /// the balancer, whose bounded cap then counts the whole fleet's load.
    pub load_report: Option<LoadReportSpec>,
    /// What is spoken to the backends.
    pub backend_protocol: BackendProtocol,
    /// TLS to the backends, SNI the endpoint's host, verified against
    /// `backend_ca` or the system's roots.
    pub backend_tls: bool,
    /// The CA certificates (PEM) backends are verified against, instead of
    /// the system's roots.
    pub backend_ca: Option<PathBuf>,
}

/// Active checks and passive ejection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthConfig {
    /// The path active checks GET; `None`: no active checks.
    pub path: Option<String>,
    /// How often active checks run.
    pub interval: Duration,
    /// Consecutive passing checks that mark an endpoint healthy.
    pub rise: u32,
    /// Consecutive failing checks that mark an endpoint unhealthy.
    pub fall: u32,
    /// Consecutive failed requests (no response, or a 5xx) that eject an
    /// endpoint; 0 disables passive ejection.
    pub eject_after: u32,
    /// How long an ejected endpoint stays out.
    pub eject_for: Duration,
}

impl Default for HealthConfig {
    fn default() -> Self {
        HealthConfig {
            path: None,
            interval: DEFAULT_HEALTH_INTERVAL,
            rise: DEFAULT_HEALTH_RISE,
            fall: DEFAULT_HEALTH_FALL,
            eject_after: DEFAULT_EJECT_AFTER,
            eject_for: DEFAULT_EJECT_FOR,
        }
    }
}

/// Which requests go to which cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteConfig {
    /// The `Host` the request must name (port ignored), if any.
    pub host: Option<String>,
    /// The path prefix the request must start with (`/` matches all).
    pub path_prefix: String,
    /// The cluster's name.
    pub cluster: String,
}

impl ClusterConfig {
    /// A cluster with the defaults, before its endpoints and key are set.
    pub fn new(name: impl Into<String>, policy: PolicySpec) -> Self {
        ClusterConfig {
            name: name.into(),
            policy,
            endpoints: Vec::new(),
            endpoints_file: None,
            discover: None,
            key: KeySpec::default(),
            retries: DEFAULT_RETRIES,
            retry_buffer: DEFAULT_RETRY_BUFFER,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            timeout: DEFAULT_TIMEOUT,
            abort_on_close: false,
            keepalive: DEFAULT_KEEPALIVE,
            health: HealthConfig::default(),
            load_report: None,
            backend_protocol: BackendProtocol::Http1,
            backend_tls: false,
            backend_ca: None,
        }
    }
}
