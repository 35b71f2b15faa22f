//! What the proxy runs: listeners, clusters (a policy over endpoints, a key,
//! retries, timeouts, health) and routes, from flags or a TOML file.
//!
//! Everything is validated here, before anything listens: a bad value is
//! one [`ConfigError`] naming its place (`cluster `api`: policy: ...`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use loadring::{Endpoint, PolicySpec};
use loadring_discovery::SourceSpec;
use serde::Deserialize;

use crate::clients::ClientLimits;
use crate::duration::parse_duration;
use crate::endpoints::parse_endpoints;
use crate::key::KeySpec;
use crate::load_report::LoadReportSpec;

pub(crate) use crate::error::ConfigError;

/// Retries by default: one more candidate after a connect failure.
pub const DEFAULT_RETRIES: u32 = 1;
/// Request bodies up to this many bytes are read whole before the first
/// attempt, so that a failed attempt can be retried with them.
pub const DEFAULT_RETRY_BUFFER: u64 = 64 * 1024;
/// The largest `retry_buffer` accepted: each request in flight may hold
/// that much.
pub const MAX_RETRY_BUFFER: u64 = 16 * 1024 * 1024;
/// How long a connection to a backend may take.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
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

impl std::str::FromStr for BackendProtocol {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "http1" => Ok(BackendProtocol::Http1),
            "h2c" => Ok(BackendProtocol::H2c),
            other => Err(format!("`{other}`: accepted http1, h2c")),
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
    /// with the endpoint's slot held.
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

/// `spec` with lifecycle `keys` added: to the innermost policy of a
/// locality chain, where lifecycle keys go.
fn with_keys(spec: &PolicySpec, keys: &[(&str, String)]) -> Result<PolicySpec, ConfigError> {
    if let Some(inner) = spec.inner() {
        let inner = with_keys(inner, keys)?;
        return spec
            .over(inner)
            .map_err(|e| ConfigError::new(e.to_string()));
    }
    keys.iter().try_fold(spec.clone(), |spec, (key, value)| {
        spec.with(key, value).map_err(|e| {
            ConfigError::new(format!(
                "passive ejection (eject_after/eject_for) as the policy's `{key}={value}`: {e}"
            ))
        })
    })
}

/// The most failed requests in a row `eject_after` takes (the lifecycle's
/// range).
pub const MAX_EJECT_AFTER: u32 = 1_000;
/// The longest `eject_for` (the lifecycle's range).
pub const MAX_EJECT_FOR: Duration = Duration::from_secs(3_600);

impl ClusterConfig {
    /// The policy the cluster's balancer runs: the configured one with the
    /// passive ejection of `eject_after`/`eject_for` as its lifecycle's
    /// (`eject_after=N eject_for=DUR`, with `max_eject_for=` the same
    /// duration and `max_ejection_percent=100`: a fixed time and no budget,
    /// as the proxy's ejection has always been); under a locality policy, on
    /// the policy it wraps, whose instances judge each zone on its own (as
    /// its lifecycle keys go there). A policy that sets its own
    /// `eject_after=` keeps its own ejection (Envoy's, in full) and the
    /// proxy's settings are not added; `eject_after = 0` adds nothing.
    ///
    /// ```
    /// use loadring_proxy::ClusterConfig;
    ///
    /// let c = ClusterConfig::new("default", "c_murmurhash".parse()?);
    /// assert_eq!(
    ///     c.balancer_policy()?.as_str(),
    ///     "c_murmurhash:eject_after=5 eject_for=30000ms max_eject_for=30000ms max_ejection_percent=100"
    /// );
    /// let own = ClusterConfig::new("default", "c_murmurhash:eject_after=3".parse()?);
    /// assert_eq!(own.balancer_policy()?.as_str(), "c_murmurhash:eject_after=3");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// The policy refuses the lifecycle's keys (the message names them).
    pub fn balancer_policy(&self) -> Result<PolicySpec, ConfigError> {
        let health = &self.health;
        let own = self
            .policy
            .as_str()
            .split([':', ' '])
            .any(|param| param.starts_with("eject_after="));
        if health.eject_after == 0 || own {
            return Ok(self.policy.clone());
        }
        let eject_for = format!("{}ms", health.eject_for.as_millis());
        let keys = [
            ("eject_after", health.eject_after.to_string()),
            ("eject_for", eject_for.clone()),
            ("max_eject_for", eject_for),
            ("max_ejection_percent", "100".to_string()),
        ];
        with_keys(&self.policy, &keys)
    }

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

    /// The inline endpoints followed by those of the file, read now.
    ///
    /// # Errors
    /// An unreadable file or a bad line, naming the file.
    pub fn read_endpoints(&self) -> Result<Vec<Endpoint>, ConfigError> {
        let mut all = self.endpoints.clone();
        if let Some(path) = &self.endpoints_file {
            all.extend(read_endpoints_file(path)?);
        }
        Ok(all)
    }

    /// Checks what a cluster needs: host:port addresses, a key for a
    /// hashing policy, no key for the others, at least one endpoint.
    /// Errors name the config file's keys (see [`ClusterConfig::validate_as`]).
    ///
    /// # Errors
    /// The first problem, naming the key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_as(Naming::Keys)
    }

    /// [`ClusterConfig::validate`], its errors naming settings as `naming`
    /// says: the config file's keys or the command line's flags.
    ///
    /// # Errors
    /// The first problem, naming the key or flag.
    pub fn validate_as(&self, naming: Naming) -> Result<(), ConfigError> {
        let name = |key| naming.name(key);
        let is_hashing = self.policy.is_hashing();
        if is_hashing && self.key.is_empty() {
            return Err(ConfigError::new(format!(
                "{}: policy `{}` hashes a key: give {} SOURCE ({})",
                name("key"),
                self.policy,
                name("key"),
                crate::key::KEY_SOURCES
            ))
            .with_setting(name("key")));
        }
        if !is_hashing && !self.key.is_empty() {
            return Err(ConfigError::new(format!(
                "{}: policy `{}` does not hash keys: drop {} or pick a hashing policy",
                name("key"),
                self.policy,
                name("key")
            ))
            .with_setting(name("key")));
        }
        if let Some(report) = &self.load_report {
            // Only a bounded policy has a cap for reports to inform.
            if self.policy.report_max_age().is_none() {
                return Err(ConfigError::new(format!(
                    "{} {report}: policy `{}` has no load bound to use reports with: \
                     pick a bounded policy (e.g. c_murmurhash_bl:load_factor=1.25)",
                    name("load_report"),
                    self.policy
                ))
                .with_setting(name("load_report")));
            }
        }
        if self.discover.is_some() && self.endpoints_file.is_some() {
            return Err(ConfigError::new(format!(
                "{} and {}: give one ({} file:PATH follows a file)",
                name("discover"),
                name("endpoints_file"),
                name("discover")
            ))
            .with_setting(name("discover")));
        }
        let endpoints = self.read_endpoints().map_err(|e| {
            e.prefixed(&format!("{} ", name("endpoints_file")))
                .with_setting(name("endpoints_file"))
        })?;
        if endpoints.is_empty() && self.discover.is_none() {
            return Err(ConfigError::new(format!(
                "no endpoints: give {}, {} or {}",
                name("endpoints"),
                name("endpoints_file"),
                name("discover")
            ))
            .with_setting(name("endpoints")));
        }
        for e in &endpoints {
            check_backend_addr(e.addr())
                .map_err(|e| ConfigError::new(e).with_setting(name("endpoints")))?;
        }
        if let Some(path) = &self.health.path {
            if !path.starts_with('/') || path.parse::<http::uri::PathAndQuery>().is_err() {
                return Err(ConfigError::new(format!(
                    "{} `{path}`: expected a path starting with `/`",
                    name("health_path")
                ))
                .with_setting(name("health_path")));
            }
        }
        for (key, value) in [
            ("health_rise", self.health.rise),
            ("health_fall", self.health.fall),
        ] {
            if value == 0 {
                return Err(
                    ConfigError::new(format!("{}: must be at least 1", name(key)))
                        .with_setting(name(key)),
                );
            }
        }
        if self.health.eject_after > MAX_EJECT_AFTER {
            return Err(ConfigError::new(format!(
                "{}: {} failed requests: accepted 0 (never) or 1..={MAX_EJECT_AFTER}",
                name("eject_after"),
                self.health.eject_after
            ))
            .with_setting(name("eject_after")));
        }
        let eject_for = self.health.eject_for;
        if self.health.eject_after > 0
            && (eject_for < Duration::from_millis(1) || eject_for > MAX_EJECT_FOR)
        {
            return Err(ConfigError::new(format!(
                "{}: {eject_for:?}: accepted 1ms..=1h",
                name("eject_for")
            ))
            .with_setting(name("eject_for")));
        }
        if self.retry_buffer > MAX_RETRY_BUFFER {
            return Err(ConfigError::new(format!(
                "{}: {} bytes is more than the limit: accepted 0..={MAX_RETRY_BUFFER}",
                name("retry_buffer"),
                self.retry_buffer
            ))
            .with_setting(name("retry_buffer")));
        }
        if self.keepalive > MAX_KEEPALIVE {
            return Err(ConfigError::new(format!(
                "{}: `{}` is out of range: accepted 0..={MAX_KEEPALIVE}",
                name("keepalive"),
                self.keepalive
            ))
            .with_setting(name("keepalive")));
        }
        if self.backend_ca.is_some() && !self.backend_tls {
            return Err(ConfigError::new(format!(
                "{}: only with {} (it verifies backends' certificates)",
                name("backend_ca"),
                name("backend_tls")
            ))
            .with_setting(name("backend_ca")));
        }
        for (key, value) in [
            ("health_interval", self.health.interval),
            ("timeout", self.timeout),
            ("connect_timeout", self.connect_timeout),
        ] {
            if value.is_zero() {
                return Err(
                    ConfigError::new(format!("{}: must be more than 0ms", name(key)))
                        .with_setting(name(key)),
                );
            }
        }
        Ok(())
    }
}

/// How an error names a setting: as the config file's key or as the
/// command line's flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Naming {
    /// `health_rise`, `endpoints_file`: a TOML config (and code that fills
    /// [`ClusterConfig`] itself, whose fields have those names).
    Keys,
    /// `--health-rise`, `--endpoints`: `loadring proxy`'s flags.
    Flags,
}

impl Naming {
    /// The setting whose config key is `key`, as this naming calls it.
    pub fn name(self, key: &'static str) -> &'static str {
        match self {
            Naming::Keys => key,
            Naming::Flags => match key {
                "key" => "--key",
                "discover" => "--discover",
                "endpoints" => "-e ENDPOINT (repeatable)",
                "endpoints_file" => "--endpoints",
                "health_path" => "--health-path",
                "load_report" => "--load-report",
                "health_rise" => "--health-rise",
                "health_fall" => "--health-fall",
                "health_interval" => "--health-interval",
                "eject_after" => "--eject-after",
                "eject_for" => "--eject-for",
                "timeout" => "--timeout",
                "connect_timeout" => "--connect-timeout",
                "retry_buffer" => "--retry-buffer",
                "keepalive" => "--keepalive",
                "listen" => "--listen",
                "header_timeout" => "--header-timeout",
                "max_connections" => "--max-connections",
                "admin" => "--admin",
                "tls_cert" => "--tls-cert",
                "tls_key" => "--tls-key",
                "backend_protocol" => "--backend-protocol",
                "backend_tls" => "--backend-tls",
                "backend_ca" => "--backend-ca",
                other => other,
            },
        }
    }
}

/// An endpoint address the proxy can connect to: `host:port`.
///
/// # Errors
/// Why not.
pub fn check_backend_addr(addr: &str) -> Result<(), String> {
    match addr.parse::<http::uri::Authority>() {
        Ok(a) if a.port_u16().is_some() && !a.host().is_empty() && !addr.contains('@') => Ok(()),
        _ => Err(format!(
            "endpoint `{addr}`: the address must be host:port of an HTTP/1.1 backend"
        )),
    }
}

/// Reads an endpoints file.
///
/// # Errors
/// An unreadable file or a bad line, naming the file (the caller says
/// which setting it came from).
pub fn read_endpoints_file(path: &Path) -> Result<Vec<Endpoint>, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError::new(format!("{}: {e}", path.display())))?;
    parse_endpoints(&text).map_err(|e| ConfigError::new(format!("{}: {e}", path.display())))
}

impl ProxyConfig {
    /// Checks every cluster and route; errors name the config file's keys.
    ///
    /// # Errors
    /// The first problem.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_as(Naming::Keys)
    }

    /// [`ProxyConfig::validate`], its errors naming settings as `naming`
    /// says.
    ///
    /// # Errors
    /// The first problem.
    pub fn validate_as(&self, naming: Naming) -> Result<(), ConfigError> {
        if self.clusters.is_empty() {
            return Err(ConfigError::new(
                "no clusters: a config needs at least one [[cluster]]",
            ));
        }
        for (i, c) in self.clusters.iter().enumerate() {
            if self.clusters[..i].iter().any(|o| o.name == c.name) {
                return Err(ConfigError::new(format!(
                    "cluster `{}` is defined twice",
                    c.name
                )));
            }
        }
        if self.clients.header_timeout.is_zero() {
            return Err(ConfigError::new(format!(
                "{}: must be more than 0ms",
                naming.name("header_timeout")
            ))
            .with_setting(naming.name("header_timeout")));
        }
        if let Some(n) = self.clients.max_connections {
            if !(1..=MAX_CONNECTIONS).contains(&n) {
                return Err(ConfigError::new(format!(
                    "{}: `{n}` is out of range: accepted 1..={MAX_CONNECTIONS}",
                    naming.name("max_connections")
                ))
                .with_setting(naming.name("max_connections")));
            }
        }
        let multi = self.clusters.len() > 1;
        for c in &self.clusters {
            c.validate_as(naming)
                .map_err(|e| if multi { e.in_cluster(&c.name) } else { e })?;
        }
        for r in &self.routes {
            if !self.clusters.iter().any(|c| c.name == r.cluster) {
                return Err(ConfigError::new(format!(
                    "route `{}`: no cluster named `{}`",
                    r.path_prefix, r.cluster
                )));
            }
            if !r.path_prefix.starts_with('/') {
                return Err(ConfigError::new(format!(
                    "route `{}`: path_prefix must start with `/`",
                    r.path_prefix
                )));
            }
        }
        if multi && self.routes.is_empty() {
            return Err(ConfigError::new(
                "several clusters but no [[route]]: say which requests go where",
            ));
        }
        Ok(())
    }

    /// Reads and validates a TOML config file.
    ///
    /// # Errors
    /// An unreadable file, a TOML error or a bad value, naming the file.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            ConfigError::new(format!("--config {}: {e}", path.display())).with_setting("--config")
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        Self::from_toml(&text, base)
            .map_err(|e| e.prefixed(&format!("--config {}: ", path.display())))
    }

    /// Parses and validates TOML text; relative `endpoints_file` paths are
    /// taken from `base`.
    ///
    /// # Errors
    /// A TOML error or a bad value, on one line.
    pub fn from_toml(text: &str, base: &Path) -> Result<Self, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| {
            ConfigError::new(
                e.message().replace('\n', " ").trim().to_string() + &span_hint(text, e.span()),
            )
        })?;
        let config = raw.into_config(base)?;
        config.validate()?;
        Ok(config)
    }
}

/// Where a TOML error is: its line, and the key when the error is in a
/// value (`retries = -1`: serde's message names the type, not the key).
fn span_hint(text: &str, span: Option<std::ops::Range<usize>>) -> String {
    let Some(before) = span.and_then(|span| text.get(..span.start)) else {
        return String::new();
    };
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let key = before[line_start..]
        .split_once('=')
        .map(|(key, _)| key.trim())
        .filter(|key| !key.is_empty() && key.len() <= 64);
    match key {
        Some(key) => format!(" (line {line}, key `{key}`)"),
        None => format!(" (line {line})"),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    listen: String,
    admin: Option<String>,
    drain_timeout: Option<String>,
    header_timeout: Option<String>,
    /// Signed, so that a negative value is named with its key.
    max_connections: Option<i64>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    #[serde(default)]
    cluster: Vec<RawCluster>,
    #[serde(default)]
    route: Vec<RawRoute>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCluster {
    name: Option<String>,
    policy: String,
    #[serde(default)]
    endpoints: Vec<String>,
    endpoints_file: Option<PathBuf>,
    discover: Option<String>,
    #[serde(default)]
    key: OneOrMany,
    retries: Option<u32>,
    /// Signed, so that a negative value is named with its key.
    retry_buffer: Option<i64>,
    connect_timeout: Option<String>,
    timeout: Option<String>,
    abort_on_close: Option<bool>,
    /// Signed, so that a negative value is named with its key.
    keepalive: Option<i64>,
    health_path: Option<String>,
    health_interval: Option<String>,
    health_rise: Option<u32>,
    health_fall: Option<u32>,
    eject_after: Option<u32>,
    eject_for: Option<String>,
    load_report: Option<String>,
    backend_protocol: Option<String>,
    backend_tls: Option<bool>,
    backend_ca: Option<PathBuf>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRoute {
    host: Option<String>,
    path_prefix: Option<String>,
    cluster: String,
}

#[derive(Deserialize, Default)]
#[serde(untagged)]
enum OneOrMany {
    #[default]
    None,
    One(String),
    Many(Vec<String>),
}

fn duration(key: &str, value: Option<&str>, default: Duration) -> Result<Duration, ConfigError> {
    match value {
        None => Ok(default),
        Some(v) => {
            parse_duration(v).map_err(|e| ConfigError::new(format!("{key}: {e}")).with_setting(key))
        }
    }
}

impl RawConfig {
    fn into_config(self, base: &Path) -> Result<ProxyConfig, ConfigError> {
        let drain_timeout = duration(
            "drain_timeout",
            self.drain_timeout.as_deref(),
            DEFAULT_DRAIN_TIMEOUT,
        )?;
        let clients = ClientLimits {
            header_timeout: duration(
                "header_timeout",
                self.header_timeout.as_deref(),
                crate::clients::DEFAULT_HEADER_TIMEOUT,
            )?,
            max_connections: self
                .max_connections
                .map(|n| {
                    usize::try_from(n).map_err(|_| {
                        ConfigError::new(format!(
                            "max_connections: `{n}` is not a count: accepted 1..={MAX_CONNECTIONS}"
                        ))
                        .with_setting("max_connections")
                    })
                })
                .transpose()?,
        };
        let clusters = self
            .cluster
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                let name = c.name.clone().unwrap_or_else(|| {
                    if i == 0 {
                        "default".to_string()
                    } else {
                        format!("cluster{}", i + 1)
                    }
                });
                c.into_config(name.clone(), base)
                    .map_err(|e| e.in_cluster(&name))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let routes = self
            .route
            .into_iter()
            .map(|r| RouteConfig {
                host: r.host,
                path_prefix: r.path_prefix.unwrap_or_else(|| "/".into()),
                cluster: r.cluster,
            })
            .collect();
        let tls = match (self.tls_cert, self.tls_key) {
            (Some(cert), Some(key)) => Some(TlsFiles {
                cert: base.join(cert),
                key: base.join(key),
            }),
            (None, None) => None,
            (Some(_), None) => {
                return Err(ConfigError::new("tls_cert: needs tls_key").with_setting("tls_cert"))
            }
            (None, Some(_)) => {
                return Err(ConfigError::new("tls_key: needs tls_cert").with_setting("tls_key"))
            }
        };
        Ok(ProxyConfig {
            listen: self.listen,
            admin: self.admin,
            drain_timeout,
            clients,
            clusters,
            routes,
            tls,
        })
    }
}

impl RawCluster {
    fn into_config(self, name: String, base: &Path) -> Result<ClusterConfig, ConfigError> {
        let policy: PolicySpec = self
            .policy
            .parse()
            .map_err(|e| ConfigError::new(format!("policy: {e}")).with_setting("policy"))?;
        let mut c = ClusterConfig::new(name, policy);
        c.endpoints = self
            .endpoints
            .iter()
            .map(|t| t.parse::<Endpoint>())
            .collect::<Result<_, _>>()
            .map_err(|e| ConfigError::new(format!("endpoints: {e}")).with_setting("endpoints"))?;
        c.endpoints_file = self.endpoints_file.map(|p| base.join(p));
        c.discover = self
            .discover
            .map(|d| {
                let spec = d.parse::<SourceSpec>().map_err(|e| {
                    ConfigError::new(format!("discover: {e}")).with_setting("discover")
                })?;
                Ok(match spec {
                    SourceSpec::File(p) => SourceSpec::File(base.join(p)),
                    other => other,
                })
            })
            .transpose()?;
        let keys = match self.key {
            OneOrMany::None => Vec::new(),
            OneOrMany::One(k) => vec![k],
            OneOrMany::Many(k) => k,
        };
        c.key = KeySpec::parse(&keys)
            .map_err(|e| ConfigError::new(format!("key: {e}")).with_setting("key"))?;
        c.retries = self.retries.unwrap_or(DEFAULT_RETRIES);
        c.retry_buffer = match self.retry_buffer {
            None => DEFAULT_RETRY_BUFFER,
            Some(bytes) => u64::try_from(bytes).map_err(|_| {
                ConfigError::new(format!(
                    "retry_buffer: `{bytes}` is not a number of bytes: accepted 0..={MAX_RETRY_BUFFER}"
                )).with_setting("retry_buffer")
            })?,
        };
        c.connect_timeout = duration(
            "connect_timeout",
            self.connect_timeout.as_deref(),
            DEFAULT_CONNECT_TIMEOUT,
        )?;
        c.timeout = duration("timeout", self.timeout.as_deref(), DEFAULT_TIMEOUT)?;
        c.abort_on_close = self.abort_on_close.unwrap_or(false);
        c.keepalive = match self.keepalive {
            None => DEFAULT_KEEPALIVE,
            Some(n) => usize::try_from(n).map_err(|_| {
                ConfigError::new(format!(
                    "keepalive: `{n}` is not a count: accepted 0..={MAX_KEEPALIVE}"
                ))
                .with_setting("keepalive")
            })?,
        };
        c.health = HealthConfig {
            path: self.health_path,
            interval: duration(
                "health_interval",
                self.health_interval.as_deref(),
                DEFAULT_HEALTH_INTERVAL,
            )?,
            rise: self.health_rise.unwrap_or(DEFAULT_HEALTH_RISE),
            fall: self.health_fall.unwrap_or(DEFAULT_HEALTH_FALL),
            eject_after: self.eject_after.unwrap_or(DEFAULT_EJECT_AFTER),
            eject_for: duration("eject_for", self.eject_for.as_deref(), DEFAULT_EJECT_FOR)?,
        };
        c.load_report = self
            .load_report
            .map(|r| {
                r.parse().map_err(|e| {
                    ConfigError::new(format!("load_report: {e}")).with_setting("load_report")
                })
            })
            .transpose()?;
        c.backend_protocol = match self.backend_protocol {
            Some(p) => p.parse().map_err(|e| {
                ConfigError::new(format!("backend_protocol: {e}")).with_setting("backend_protocol")
            })?,
            None => BackendProtocol::Http1,
        };
        c.backend_tls = self.backend_tls.unwrap_or(false);
        c.backend_ca = self.backend_ca.map(|p| base.join(p));
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO_CLUSTERS: &str = r#"
listen = "127.0.0.1:8080"
admin = "127.0.0.1:9900"
drain_timeout = "5s"

[[cluster]]
name = "users"
policy = "c_murmurhash_bl:load_factor=1.25"
endpoints = ["127.0.0.1:9001", "127.0.0.1:9002 weight=2"]
key = ["header:x-user", "cookie:sid"]
retries = 2
retry_buffer = 1024
timeout = "2s"
abort_on_close = true
health_path = "/healthz"
health_interval = "500ms"
eject_after = 0
load_report = "orca:num_requests_running"

[[cluster]]
name = "static"
policy = "rr"
endpoints = ["127.0.0.1:9003"]

[[route]]
path_prefix = "/static/"
cluster = "static"

[[route]]
cluster = "users"
"#;

    #[test]
    fn keepalive_reads_with_its_default() {
        let c = ProxyConfig::from_toml(TWO_CLUSTERS, Path::new(".")).unwrap();
        assert_eq!(c.clusters[0].keepalive, 256);
        let none = TWO_CLUSTERS.replace("retry_buffer = 1024", "keepalive = 0");
        let c = ProxyConfig::from_toml(&none, Path::new(".")).unwrap();
        assert_eq!(c.clusters[0].keepalive, 0);
        assert_eq!(c.clusters[1].keepalive, 256);
    }

    #[test]
    fn a_full_config_reads() {
        let c = ProxyConfig::from_toml(TWO_CLUSTERS, Path::new(".")).unwrap();
        assert_eq!(c.listen, "127.0.0.1:8080");
        assert_eq!(c.drain_timeout, Duration::from_secs(5));
        assert_eq!(c.clients, ClientLimits::default());
        let limited = ProxyConfig::from_toml(
            &TWO_CLUSTERS.replace(
                "drain_timeout = \"5s\"",
                "header_timeout = \"2s\"\nmax_connections = 100",
            ),
            Path::new("."),
        )
        .unwrap();
        assert_eq!(limited.clients.header_timeout, Duration::from_secs(2));
        assert_eq!(limited.clients.max_connections, Some(100));
        assert_eq!(c.clusters.len(), 2);
        let users = &c.clusters[0];
        assert_eq!(users.policy.name(), "c_murmurhash_bl");
        assert_eq!(users.key.sources().len(), 2);
        assert_eq!(users.retries, 2);
        assert_eq!(users.retry_buffer, 1024);
        assert_eq!(c.clusters[1].retry_buffer, DEFAULT_RETRY_BUFFER);
        assert_eq!(users.timeout, Duration::from_secs(2));
        assert!(users.abort_on_close);
        assert!(!c.clusters[1].abort_on_close);
        assert_eq!(users.connect_timeout, DEFAULT_CONNECT_TIMEOUT);
        assert_eq!(users.health.path.as_deref(), Some("/healthz"));
        assert_eq!(users.health.interval, Duration::from_millis(500));
        assert_eq!(users.health.eject_after, 0);
        assert_eq!(
            users.load_report.as_ref().map(|r| r.metric()),
            Some("num_requests_running")
        );
        assert_eq!(c.clusters[1].load_report, None);
        assert_eq!(c.routes[1].path_prefix, "/");
    }

    fn error_of(text: &str) -> String {
        ProxyConfig::from_toml(text, Path::new("."))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn bad_configs_name_the_culprit() {
        let cases = [
            (
                TWO_CLUSTERS.replace("c_murmurhash_bl:", "nope:"),
                "cluster `users`: policy",
            ),
            (
                TWO_CLUSTERS.replace("\"500ms\"", "\"fast\""),
                "health_interval: `fast`",
            ),
            (
                TWO_CLUSTERS.replace("header:x-user", "head:x"),
                "key: key source `head:x`",
            ),
            (
                TWO_CLUSTERS.replace("cluster = \"static\"", "cluster = \"nope\""),
                "no cluster named `nope`",
            ),
            (
                TWO_CLUSTERS.replace("retries = 2", "retries = 2\nretry = 1"),
                "unknown field `retry`",
            ),
            (
                TWO_CLUSTERS.replace("retry_buffer = 1024", "retry_buffer = 16777217"),
                "cluster `users`: retry_buffer: 16777217 bytes is more than the limit: accepted 0..=16777216",
            ),
            (
                TWO_CLUSTERS.replace("retries = 2", "retries = -2"),
                "expected u32 (line 11, key `retries`)",
            ),
            (
                TWO_CLUSTERS.replace("eject_after = 0", "eject_after = \"x\""),
                "(line 17, key `eject_after`)",
            ),
            (
                TWO_CLUSTERS.replace("eject_after = 0", "eject_after = 1001"),
                "eject_after: 1001 failed requests: accepted 0 (never) or 1..=1000",
            ),
            (
                TWO_CLUSTERS.replace("eject_after = 0", "eject_after = 2\neject_for = \"2h\""),
                "eject_for: 7200s: accepted 1ms..=1h",
            ),
            (
                TWO_CLUSTERS.replace("retry_buffer = 1024", "retry_buffer = -1"),
                "cluster `users`: retry_buffer: `-1` is not a number of bytes: accepted 0..=16777216",
            ),
            (
                TWO_CLUSTERS.replace("timeout = \"2s\"", "timeout = \"0s\""),
                "cluster `users`: timeout: must be more than 0ms",
            ),
            (
                TWO_CLUSTERS.replace("timeout = \"2s\"", "connect_timeout = \"0ms\""),
                "cluster `users`: connect_timeout: must be more than 0ms",
            ),
            (
                TWO_CLUSTERS.replace("retry_buffer = 1024", "keepalive = 65537"),
                "cluster `users`: keepalive: `65537` is out of range: accepted 0..=65536",
            ),
            (
                TWO_CLUSTERS.replace("retry_buffer = 1024", "keepalive = -1"),
                "cluster `users`: keepalive: `-1` is not a count: accepted 0..=65536",
            ),
            (
                TWO_CLUSTERS.replace("drain_timeout = \"5s\"", "header_timeout = \"0s\""),
                "header_timeout: must be more than 0ms",
            ),
            (
                TWO_CLUSTERS.replace("drain_timeout = \"5s\"", "max_connections = 0"),
                "max_connections: `0` is out of range: accepted 1..=16777216",
            ),
            (
                TWO_CLUSTERS.replace("drain_timeout = \"5s\"", "max_connections = -3"),
                "max_connections: `-3` is not a count: accepted 1..=16777216",
            ),
            (
                TWO_CLUSTERS.replace("127.0.0.1:9003", "localhost"),
                "endpoint `localhost`",
            ),
            (
                TWO_CLUSTERS.replace("key = [\"header:x-user\", \"cookie:sid\"]", ""),
                "cluster `users`: key: policy `c_murmurhash_bl:load_factor=1.25` hashes a key: give key SOURCE",
            ),
            (
                TWO_CLUSTERS.replace("orca:num_requests_running", "orca:"),
                "cluster `users`: load_report: metric `` is not a metric name: accepted 1 to 128 of A-Z a-z 0-9 _ - . :",
            ),
            (
                TWO_CLUSTERS.replace("orca:num_requests_running", "json"),
                "cluster `users`: load_report: `json` is not a load report source: accepted orca or orca:METRIC",
            ),
            (
                TWO_CLUSTERS.replace("load_report = \"orca:num_requests_running\"", "load_report = 3"),
                "(line 18, key `load_report`)",
            ),
            (
                TWO_CLUSTERS.replace("policy = \"rr\"", "policy = \"rr\"\nload_report = \"orca\""),
                "cluster `static`: load_report orca:in_flight: policy `rr` has no load bound to use reports with: pick a bounded policy (e.g. c_murmurhash_bl:load_factor=1.25)",
            ),
        ];
        for (text, expected) in cases {
            let err = error_of(&text);
            assert!(err.contains(expected), "{expected:?} not in {err:?}");
            assert!(!err.contains('\n'), "{err:?}");
        }
    }

    /// The same problem, named as the config file's key or as the flag.
    #[test]
    fn errors_name_keys_or_flags() {
        let mut c = ClusterConfig::new("default", "rr".parse().unwrap());
        c.endpoints = vec!["127.0.0.1:1".parse().unwrap()];
        c.health.rise = 0;
        assert_eq!(
            c.validate().unwrap_err().to_string(),
            "health_rise: must be at least 1"
        );
        assert_eq!(
            c.validate_as(Naming::Flags).unwrap_err().to_string(),
            "--health-rise: must be at least 1"
        );
        c.health.rise = 1;
        c.health.eject_after = 1001;
        assert_eq!(
            c.validate_as(Naming::Flags).unwrap_err().to_string(),
            "--eject-after: 1001 failed requests: accepted 0 (never) or 1..=1000"
        );
        c.health.eject_after = 1;
        c.health.eject_for = Duration::ZERO;
        assert_eq!(
            c.validate_as(Naming::Flags).unwrap_err().to_string(),
            "--eject-for: 0ns: accepted 1ms..=1h"
        );
        c.health.eject_for = DEFAULT_EJECT_FOR;
        c.endpoints.clear();
        assert_eq!(
            c.validate().unwrap_err().to_string(),
            "no endpoints: give endpoints, endpoints_file or discover"
        );
        assert_eq!(
            c.validate_as(Naming::Flags).unwrap_err().to_string(),
            "no endpoints: give -e ENDPOINT (repeatable), --endpoints or --discover"
        );
    }

    #[test]
    fn a_cluster_may_discover_its_endpoints() {
        let text = |discover: &str| {
            format!(
                "listen = \"127.0.0.1:8080\"\n[[cluster]]\npolicy = \"rr\"\ndiscover = \"{discover}\"\n"
            )
        };
        let c = ProxyConfig::from_toml(
            &text("etcd://127.0.0.1:2379/services/api"),
            Path::new("/etc/lr"),
        )
        .unwrap();
        assert_eq!(
            c.clusters[0]
                .discover
                .as_ref()
                .map(ToString::to_string)
                .as_deref(),
            Some("etcd://127.0.0.1:2379/services/api")
        );
        // No inline endpoints needed; a relative file is taken from the config's folder.
        let c = ProxyConfig::from_toml(&text("file:pool.txt"), Path::new("/etc/lr")).unwrap();
        assert_eq!(
            c.clusters[0].discover,
            Some(SourceSpec::File(PathBuf::from("/etc/lr/pool.txt")))
        );
        let err = ProxyConfig::from_toml(&text("zk://x"), Path::new(".")).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("cluster `default`: discover: `zk://x`: unknown source"),
            "{err}"
        );
        assert_eq!(err.setting(), Some("discover"));
        assert_eq!(err.cluster(), Some("default"));
        let both = format!("{}endpoints_file = \"x\"\n", text("file:y"));
        let err = ProxyConfig::from_toml(&both, Path::new(".")).unwrap_err();
        assert!(
            err.to_string()
                .contains("discover and endpoints_file: give one"),
            "{err}"
        );
        assert_eq!(err.setting(), Some("discover"));
    }

    /// The proxy's passive ejection is the balancer's lifecycle with the
    /// proxy's rules (docs/proxy.md): `eject_after` failures in a row, any
    /// success resetting the count, eject for `eject_for`, every time the
    /// same (no growth), and no budget (every endpoint may be out). The
    /// health mark is untouched: ejection is the lifecycle's own state.
    #[test]
    fn the_proxys_ejection_is_the_lifecycles_with_a_fixed_time_and_no_budget() {
        use loadring::{Balancer, Endpoint, Outcome, Request};
        let addrs = ["10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80"];
        let eject_for = Duration::from_secs(10);
        let balancer = |policy: &str| {
            let mut c = ClusterConfig::new("default", policy.parse().unwrap());
            c.health.eject_after = 2;
            c.health.eject_for = eject_for;
            let endpoints = addrs.map(|a| Endpoint::new(a).unwrap());
            Balancer::new(c.balancer_policy().unwrap(), endpoints).unwrap()
        };
        // One attempt on `addr` at time `t` (the others excluded).
        let attempt = |b: &Balancer, addr: &str, t: Duration, ok: bool| {
            let others: Vec<&str> = addrs.iter().copied().filter(|a| *a != addr).collect();
            let pick = b.pick(&Request::key("k").excluding(&others).at(t)).unwrap();
            assert_eq!(pick.addr(), addr);
            let latency = Duration::from_millis(1);
            let outcome = if ok {
                Outcome::success(latency)
            } else {
                Outcome::failure(latency)
            };
            pick.finish(outcome.at(t));
        };
        let left =
            |b: &Balancer, addr: &str, t: Duration| b.lifecycle(addr, t).unwrap().ejected_for;
        let t0 = Duration::from_secs(100);

        let b = balancer("c_murmurhash");
        let [a, bb, c] = addrs;
        attempt(&b, a, t0, false);
        attempt(&b, a, t0, true);
        attempt(&b, a, t0, false);
        assert_eq!(left(&b, a, t0), None, "a success resets the count");
        attempt(&b, a, t0, false);
        assert_eq!(left(&b, a, t0), Some(eject_for), "two in a row");
        assert_eq!(b.is_healthy(a), Ok(true), "the health mark is untouched");
        for addr in [bb, c] {
            attempt(&b, addr, t0, false);
            attempt(&b, addr, t0, false);
            assert_eq!(left(&b, addr, t0), Some(eject_for), "{addr}: no budget");
        }
        let back = t0 + eject_for;
        assert_eq!(left(&b, a, back), None, "back after eject_for");
        attempt(&b, a, back, false);
        attempt(&b, a, back, false);
        assert_eq!(left(&b, a, back), Some(eject_for), "the same time again");

        // Under a locality policy, on the policy it wraps.
        let zoned = ClusterConfig::new("default", "zone_first over c_murmurhash".parse().unwrap());
        let spec = zoned.balancer_policy().unwrap();
        assert_eq!(
            spec.as_str(),
            "zone_first over c_murmurhash:eject_after=5 eject_for=30000ms max_eject_for=30000ms max_ejection_percent=100"
        );
        Balancer::new(spec, addrs.map(|a| Endpoint::new(a).unwrap())).unwrap();

        // A policy with its own eject_after= keeps Envoy's growth.
        let own = balancer("c_murmurhash:eject_after=1 eject_for=10s");
        attempt(&own, a, t0, false);
        assert_eq!(left(&own, a, t0), Some(eject_for));
        attempt(&own, a, back, false);
        assert_eq!(
            left(&own, a, back),
            Some(2 * eject_for),
            "Envoy's multiplier"
        );
    }

    #[test]
    fn tls_and_backend_protocol_keys_read() {
        let text = "listen = \"127.0.0.1:8443\"\ntls_cert = \"gw.crt\"\ntls_key = \"gw.key\"\n\
                    [[cluster]]\npolicy = \"rr\"\nendpoints = [\"10.0.0.1:50051\"]\n\
                    backend_protocol = \"h2c\"\nbackend_tls = true\nbackend_ca = \"ca.pem\"\n";
        let c = ProxyConfig::from_toml(text, Path::new("/etc/lr")).unwrap();
        assert_eq!(
            c.tls,
            Some(TlsFiles {
                cert: "/etc/lr/gw.crt".into(),
                key: "/etc/lr/gw.key".into()
            })
        );
        let cluster = &c.clusters[0];
        assert_eq!(cluster.backend_protocol, BackendProtocol::H2c);
        assert!(cluster.backend_tls);
        assert_eq!(
            cluster.backend_ca.as_deref(),
            Some(Path::new("/etc/lr/ca.pem"))
        );
        // The defaults.
        let plain = ProxyConfig::from_toml(
            "listen = \"127.0.0.1:8080\"\n[[cluster]]\npolicy = \"rr\"\nendpoints = [\"10.0.0.1:80\"]\n",
            Path::new("/"),
        )
        .unwrap();
        assert_eq!(plain.tls, None);
        assert_eq!(plain.clusters[0].backend_protocol, BackendProtocol::Http1);
        assert!(!plain.clusters[0].backend_tls);
    }

    #[test]
    fn bad_tls_and_protocol_keys_name_themselves() {
        let base = "listen = \"127.0.0.1:8080\"\n";
        let cluster = "[[cluster]]\npolicy = \"rr\"\nendpoints = [\"10.0.0.1:80\"]\n";
        for (text, want) in [
            (
                format!("{base}tls_cert = \"a\"\n{cluster}"),
                "tls_cert: needs tls_key",
            ),
            (
                format!("{base}tls_key = \"a\"\n{cluster}"),
                "tls_key: needs tls_cert",
            ),
            (
                format!("{base}{cluster}backend_protocol = \"h3\"\n"),
                "backend_protocol: `h3`: accepted http1, h2c",
            ),
            (
                format!("{base}{cluster}backend_ca = \"ca.pem\"\n"),
                "backend_ca: only with backend_tls",
            ),
        ] {
            let error = ProxyConfig::from_toml(&text, Path::new("/"))
                .and_then(|c| c.validate().map(|()| c))
                .unwrap_err()
                .to_string();
            assert!(error.contains(want), "{text}: {error}");
        }
    }
}
