//! The proxy's errors, in the core's style (regex-automata's): opaque
//! structs, no public fields, `kind()` where there are several kinds and an
//! accessor for each part the message names.
//!
//! * [`ConfigError`]: a configuration that is not acceptable, found before
//!   anything listens;
//! * [`ProxyError`]: why [`Proxy`](crate::Proxy) could not start or serve:
//!   a bad configuration, an address that cannot be bound, a membership
//!   source that cannot start, a worker thread that cannot be spawned.
//!
//! Every message is one line naming the culprit (and the accepted range,
//! where one applies).

use std::fmt;

/// A configuration problem, as one line naming the culprit.
///
/// [`ConfigError::setting`] is the key (or flag) at fault when one is, and
/// [`ConfigError::cluster`] the cluster it belongs to when the message
/// names one.
///
/// ```
/// use loadring_proxy::{ClusterConfig, Naming};
///
/// let mut c = ClusterConfig::new("default", "rr".parse()?);
/// c.endpoints = vec!["127.0.0.1:9001".parse()?];
/// c.health.rise = 0;
/// let err = c.validate_as(Naming::Flags).unwrap_err();
/// assert_eq!(err.setting(), Some("--health-rise"));
/// assert_eq!(err.to_string(), "--health-rise: must be at least 1");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// Boxed: a `Result` carrying one stays one word wide.
    repr: Box<ConfigRepr>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct ConfigRepr {
    message: String,
    setting: Option<String>,
    cluster: Option<String>,
}

impl ConfigError {
    /// An error with its one-line message.
    pub(crate) fn new(message: impl Into<String>) -> Self {
        ConfigError {
            repr: Box::new(ConfigRepr {
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
        self.repr.message = format!("cluster `{name}`: {}", self.repr.message);
        self.repr.cluster = Some(name.to_string());
        self
    }

    /// The same error after `prefix` (a setting, a file), keeping its parts.
    pub(crate) fn prefixed(mut self, prefix: &str) -> Self {
        self.repr.message = format!("{prefix}{}", self.repr.message);
        self
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
        let mut e = ProxyError::new(ProxyErrorKind::Bind, format!("{setting} {addr}: {why}"));
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
        self.repr.message = format!("cluster `{name}`: {}", self.repr.message);
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
