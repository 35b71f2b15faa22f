//! The proxy's errors, in the core's style (regex-automata's): opaque
//! structs, no public fields, `kind()` where there are several kinds and an
//! accessor for each part the message names.
//!
//! * [`ConfigError`]: a configuration that is not acceptable, found before
//!   anything listens, its [`ConfigErrorKind`] saying what is wrong;
//! * [`ProxyError`]: why [`Proxy`](crate::Proxy) could not start or serve:
//!   a bad configuration, an address that cannot be bound, a membership
//!   source that cannot start, a worker thread that cannot be spawned.
//!
//! Every message is one line naming the culprit (and the accepted range,
//! where one applies).

use std::fmt;

/// What kind of [`ConfigError`] it is: what went wrong, for a program to
/// match on (the message says it for people).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigErrorKind {
    /// A file cannot be read: the config file (`--config`) or an endpoints
    /// file (`endpoints_file`, `--endpoints`).
    Read,
    /// The TOML does not parse, or a value has the wrong type for its key
    /// (text where a number goes).
    Syntax,
    /// The config file has a key it does not know (a typo, say):
    /// [`ConfigError::setting`] is that key.
    UnknownKey,
    /// A required value is absent: `listen`, a cluster's `policy`, any
    /// cluster, any endpoint, the hash key of a hashing policy, `tls_key`
    /// beside `tls_cert` (or the other way round).
    Missing,
    /// A value that is not of the accepted form: a duration, an endpoint
    /// (or a line of an endpoints file), a key source, a load report, a
    /// discovery source, a backend protocol, a path.
    Value,
    /// A well-formed number or duration outside its accepted range (the
    /// message gives the range): `retry_buffer`, `max_connections`,
    /// `keepalive`, `eject_after`, `eject_for`, `health_rise` of 0, a
    /// timeout of 0ms, a duration over 24h, a negative `retry_buffer`,
    /// `max_connections` or `keepalive`.
    Range,
    /// Settings each acceptable alone that do not go together: a key for a
    /// policy that does not hash, a load report for a policy without a load
    /// bound, `discover` with `endpoints_file`, `backend_ca` without
    /// `backend_tls`, a cluster defined twice, a route to no cluster,
    /// several clusters without routes.
    Conflict,
    /// The policy spec does not parse, or the policy cannot run as the
    /// cluster is set (it refuses the passive ejection's lifecycle keys, or
    /// cannot be built over the endpoints).
    Policy,
    /// TLS material that cannot be used: the listener's certificate or key
    /// (`tls_cert`, `tls_key`: unreadable, not PEM, not a pair), the
    /// backends' CA (`backend_ca`). Found when the proxy starts
    /// ([`Proxy::bind`](crate::Proxy::bind) gives it as
    /// [`ProxyError::config`]).
    Tls,
}

/// A configuration problem, as one line naming the culprit.
///
/// [`ConfigError::kind`] says what went wrong, [`ConfigError::setting`] is
/// the key (or flag) at fault when one is, and [`ConfigError::cluster`] the
/// cluster it belongs to when the message names one.
///
/// ```
/// use loadring_proxy::{ClusterConfig, ConfigErrorKind, Naming, ProxyConfig};
///
/// let mut c = ClusterConfig::new("default", "rr".parse()?);
/// c.endpoints = vec!["127.0.0.1:9001".parse()?];
/// c.health.rise = 0;
/// let err = c.validate_as(Naming::Flags).unwrap_err();
/// assert_eq!(err.kind(), ConfigErrorKind::Range);
/// assert_eq!(err.setting(), Some("--health-rise"));
/// assert_eq!(err.to_string(), "--health-rise: must be at least 1");
///
/// // A typo in a config file.
/// let text = "listen = \"127.0.0.1:8080\"\nlisen = \"x\"\n";
/// let err = ProxyConfig::from_toml(text, std::path::Path::new(".")).unwrap_err();
/// assert_eq!(err.kind(), ConfigErrorKind::UnknownKey);
/// assert_eq!(err.setting(), Some("lisen"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// Boxed: a `Result` carrying one stays one word wide.
    repr: Box<ConfigRepr>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct ConfigRepr {
    kind: ConfigErrorKind,
    message: String,
    setting: Option<String>,
    cluster: Option<String>,
}

impl ConfigError {
    /// An error of `kind` with its one-line message.
    pub(crate) fn new(kind: ConfigErrorKind, message: impl Into<String>) -> Self {
        ConfigError {
            repr: Box::new(ConfigRepr {
                kind,
                message: message.into(),
                setting: None,
                cluster: None,
            }),
        }
    }

    /// Names the key or flag at fault (the message already quotes it).
    pub(crate) fn with_setting(mut self, setting: &str) -> Self {
        self.repr.setting = Some(setting.to_string());
        self
    }

    /// The same error, said of cluster `name`: "cluster `name`: ...".
    pub(crate) fn in_cluster(mut self, name: &str) -> Self {
        self.repr.message = format!("cluster `{}`: {}", loadring::Echo(name), self.repr.message);
        self.repr.cluster = Some(name.to_string());
        self
    }

    /// The same error after `prefix` (a setting, a file), keeping its parts.
    pub(crate) fn prefixed(mut self, prefix: &str) -> Self {
        self.repr.message = format!("{prefix}{}", self.repr.message);
        self
    }

    /// What kind of error it is.
    pub fn kind(&self) -> ConfigErrorKind {
        self.repr.kind
    }

    /// The key of the config file, or the flag of the command line, at
    /// fault, if one is (`health_rise`, `--health-rise`).
    pub fn setting(&self) -> Option<&str> {
        self.repr.setting.as_deref()
    }

    /// The cluster the message names, if it names one.
    pub fn cluster(&self) -> Option<&str> {
        self.repr.cluster.as_deref()
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.repr.message)
    }
}

impl std::error::Error for ConfigError {}

/// What kind of [`ProxyError`] it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProxyErrorKind {
    /// The configuration is not acceptable ([`ProxyError::config`]).
    Config,
    /// An address cannot be bound ([`ProxyError::setting`] names the
    /// listener, [`ProxyError::addr`] the address).
    Bind,
    /// A cluster's membership source cannot start: etcd unreachable, a name
    /// that does not resolve, an unreadable endpoints file.
    Discovery,
    /// A worker thread cannot be spawned.
    Worker,
}

/// Why the proxy could not start or serve, as one line naming the culprit.
///
/// ```
/// use loadring_proxy::{ProxyConfig, ProxyErrorKind, Proxy};
///
/// # async fn run() {
/// let config = ProxyConfig {
///     listen: "127.0.0.1:8080".into(),
///     admin: None,
///     drain_timeout: std::time::Duration::from_secs(1),
///     clients: Default::default(),
///     clusters: vec![],
///     routes: vec![],
///     tls: None,
/// };
/// let err = Proxy::bind(config).await.unwrap_err();
/// assert_eq!(err.kind(), ProxyErrorKind::Config);
/// assert_eq!(err.to_string(), "no clusters: a config needs at least one [[cluster]]");
/// # }
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(run());
/// ```
#[derive(Debug)]
pub struct ProxyError {
    repr: Box<ProxyRepr>,
}

#[derive(Debug)]
struct ProxyRepr {
    kind: ProxyErrorKind,
    message: String,
    setting: Option<String>,
    addr: Option<String>,
    cluster: Option<String>,
    config: Option<ConfigError>,
}

impl ProxyError {
    pub(crate) fn new(kind: ProxyErrorKind, message: impl Into<String>) -> Self {
        ProxyError {
            repr: Box::new(ProxyRepr {
                kind,
                message: message.into(),
                setting: None,
                addr: None,
                cluster: None,
                config: None,
            }),
        }
    }

    /// `setting addr: why`, for a listener that cannot be bound.
    pub(crate) fn bind(setting: &str, addr: &str, why: impl fmt::Display) -> Self {
        let mut e = ProxyError::new(
            ProxyErrorKind::Bind,
            format!("{setting} {}: {why}", loadring::Echo(addr)),
        );
        e.repr.setting = Some(setting.to_string());
        e.repr.addr = Some(addr.to_string());
        e
    }

    pub(crate) fn with_setting(mut self, setting: &str) -> Self {
        self.repr.setting = Some(setting.to_string());
        self
    }

    /// The same error, said of cluster `name`: "cluster `name`: ...".
    pub(crate) fn in_cluster(mut self, name: &str) -> Self {
        self.repr.message = format!("cluster `{}`: {}", loadring::Echo(name), self.repr.message);
        self.repr.cluster = Some(name.to_string());
        self
    }

    /// What kind of error it is.
    pub fn kind(&self) -> ProxyErrorKind {
        self.repr.kind
    }

    /// The key of the config file, or the flag of the command line, at
    /// fault, if one is (`--listen`, `admin`, `--discover`).
    pub fn setting(&self) -> Option<&str> {
        self.repr.setting.as_deref()
    }

    /// The address that could not be bound, for [`ProxyErrorKind::Bind`].
    pub fn addr(&self) -> Option<&str> {
        self.repr.addr.as_deref()
    }

    /// The cluster the message names, if it names one.
    pub fn cluster(&self) -> Option<&str> {
        self.repr.cluster.as_deref()
    }

    /// The configuration error, for [`ProxyErrorKind::Config`].
    pub fn config(&self) -> Option<&ConfigError> {
        self.repr.config.as_ref()
    }
}

impl From<ConfigError> for ProxyError {
    fn from(e: ConfigError) -> Self {
        let mut p = ProxyError::new(ProxyErrorKind::Config, e.to_string());
        p.repr.setting = e.setting().map(str::to_string);
        p.repr.cluster = e.cluster().map(str::to_string);
        p.repr.config = Some(e);
        p
    }
}

impl fmt::Display for ProxyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.repr.message)
    }
}

impl std::error::Error for ProxyError {}
