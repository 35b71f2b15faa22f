//! The TOML file's shape, key for key, and its conversion into the
//! configuration types (durations parsed, relative paths taken from the
//! file's folder, defaults filled in).

use std::path::{Path, PathBuf};
use std::time::Duration;

use loadring::{Endpoint, PolicySpec};
use loadring_discovery::SourceSpec;
use serde::Deserialize;

use crate::clients::ClientLimits;
use crate::error::{ConfigError, ConfigErrorKind};
use crate::key::KeySpec;
use crate::load_report::LoadReportSpec;

use super::settings::{
    read_duration, Whole, EJECT_AFTER, HEALTH_FALL, HEALTH_RISE, KEEPALIVE, MAX_ABANDONED,
    MAX_CONNECTIONS_, RETRIES, RETRY_BUFFER,
};
use super::types::*;
use super::validate::check_how_many;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    listen: String,
    admin: Option<String>,
    drain_timeout: Option<String>,
    header_timeout: Option<String>,
    send_timeout: Option<String>,
    tunnel_timeout: Option<String>,
    max_connections: Option<Whole<MAX_CONNECTIONS_>>,
    max_abandoned: Option<Whole<MAX_ABANDONED>>,
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
    retries: Option<Whole<RETRIES>>,
    retry_buffer: Option<Whole<RETRY_BUFFER>>,
    connect_timeout: Option<String>,
    timeout: Option<String>,
    abort_on_close: Option<bool>,
    keepalive: Option<Whole<KEEPALIVE>>,
    health_path: Option<String>,
    health_interval: Option<String>,
    health_rise: Option<Whole<HEALTH_RISE>>,
    health_fall: Option<Whole<HEALTH_FALL>>,
    eject_after: Option<Whole<EJECT_AFTER>>,
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

/// The duration setting `key`, in its range, or `default`.
fn duration(key: &str, value: Option<&str>, default: Duration) -> Result<Duration, ConfigError> {
    value.map_or(Ok(default), |v| read_duration(key, key, v))
}

/// A whole-number setting, in its range, or `default`.
fn whole<const S: usize, T: TryFrom<u64>>(
    value: Option<&Whole<S>>,
    default: T,
) -> Result<T, ConfigError> {
    match value {
        None => Ok(default),
        // The range checked fits the field.
        Some(v) => Ok(T::try_from(v.read()?).unwrap_or(default)),
    }
}

impl RawConfig {
    pub(super) fn into_config(self, base: &Path) -> Result<ProxyConfig, ConfigError> {
        // Before each is read: a file of a million clusters is refused at once.
        check_how_many("cluster", self.cluster.len(), MAX_CLUSTERS)?;
        check_how_many("route", self.route.len(), MAX_ROUTES)?;
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
            send_timeout: duration(
                "send_timeout",
                self.send_timeout.as_deref(),
                crate::clients::DEFAULT_SEND_TIMEOUT,
            )?,
            tunnel_timeout: duration(
                "tunnel_timeout",
                self.tunnel_timeout.as_deref(),
                crate::clients::DEFAULT_TUNNEL_TIMEOUT,
            )?,
            max_connections: self
                .max_connections
                .as_ref()
                .map(|n| whole(Some(n), 0))
                .transpose()?,
            max_abandoned: self
                .max_abandoned
                .as_ref()
                .map(|n| whole(Some(n), 0))
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
                return Err(
                    ConfigError::new(ConfigErrorKind::Missing, "tls_cert: needs tls_key")
                        .with_setting("tls_cert"),
                )
            }
            (None, Some(_)) => {
                return Err(
                    ConfigError::new(ConfigErrorKind::Missing, "tls_key: needs tls_cert")
                        .with_setting("tls_key"),
                )
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
        let policy: PolicySpec = self.policy.parse().map_err(|e| {
            ConfigError::new(ConfigErrorKind::Policy, format!("policy: {e}")).with_setting("policy")
        })?;
        let mut c = ClusterConfig::new(name, policy);
        c.endpoints = self
            .endpoints
            .iter()
            .map(|t| t.parse::<Endpoint>())
            .collect::<Result<_, _>>()
            .map_err(|e| {
                ConfigError::new(ConfigErrorKind::Value, format!("endpoints: {e}"))
                    .with_setting("endpoints")
            })?;
        c.endpoints_file = self.endpoints_file.map(|p| base.join(p));
        c.discover = self
            .discover
            .map(|d| {
                let spec = d.parse::<SourceSpec>().map_err(|e| {
                    ConfigError::new(ConfigErrorKind::Value, format!("discover: {e}"))
                        .with_setting("discover")
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
        c.key = KeySpec::parse(&keys).map_err(|e| e.prefixed("key: ").with_setting("key"))?;
        c.retries = whole(self.retries.as_ref(), DEFAULT_RETRIES)?;
        c.retry_buffer = whole(self.retry_buffer.as_ref(), DEFAULT_RETRY_BUFFER)?;
        c.connect_timeout = duration(
            "connect_timeout",
            self.connect_timeout.as_deref(),
            DEFAULT_CONNECT_TIMEOUT,
        )?;
        c.timeout = duration("timeout", self.timeout.as_deref(), DEFAULT_TIMEOUT)?;
        c.abort_on_close = self.abort_on_close.unwrap_or(false);
        c.keepalive = whole(self.keepalive.as_ref(), DEFAULT_KEEPALIVE)?;
        // Active checks run only with a path: their settings without one
        // would be taken and do nothing.
        if self.health_path.is_none() {
            let given = [
                ("health_interval", self.health_interval.is_some()),
                ("health_rise", self.health_rise.is_some()),
                ("health_fall", self.health_fall.is_some()),
            ];
            if let Some((key, _)) = given.into_iter().find(|(_, given)| *given) {
                return Err(ConfigError::new(
                    ConfigErrorKind::Conflict,
                    format!(
                        "{key}: only with health_path (the active checks run only with a path)"
                    ),
                )
                .with_setting(key));
            }
        }
        let eject_after = whole(self.eject_after.as_ref(), DEFAULT_EJECT_AFTER)?;
        if self.eject_for.is_some() && eject_after == 0 {
            return Err(ConfigError::new(
                ConfigErrorKind::Conflict,
                "eject_for: only with eject_after 1 or more (eject_after = 0 ejects nothing)",
            )
            .with_setting("eject_for"));
        }
        if c.has_own_ejection() {
            let given = [
                ("eject_after", self.eject_after.is_some()),
                ("eject_for", self.eject_for.is_some()),
            ];
            if let Some((key, _)) = given.into_iter().find(|(_, given)| *given) {
                return Err(ConfigError::new(
                    ConfigErrorKind::Conflict,
                    format!(
                        "{key}: the policy sets its own eject_after=, which is the ejection \
                         used; set one or the other"
                    ),
                )
                .with_setting(key));
            }
        }
        c.health = HealthConfig {
            path: self.health_path,
            interval: duration(
                "health_interval",
                self.health_interval.as_deref(),
                DEFAULT_HEALTH_INTERVAL,
            )?,
            rise: whole(self.health_rise.as_ref(), DEFAULT_HEALTH_RISE)?,
            fall: whole(self.health_fall.as_ref(), DEFAULT_HEALTH_FALL)?,
            eject_after,
            eject_for: duration("eject_for", self.eject_for.as_deref(), DEFAULT_EJECT_FOR)?,
        };
        c.load_report = self
            .load_report
            .map(|r| {
                r.parse::<LoadReportSpec>()
                    .map_err(|e| e.prefixed("load_report: ").with_setting("load_report"))
            })
            .transpose()?;
        c.backend_protocol = match self.backend_protocol {
            Some(p) => p.parse().map_err(|e: ConfigError| {
                e.prefixed("backend_protocol: ")
                    .with_setting("backend_protocol")
            })?,
            None => BackendProtocol::Http1,
        };
        c.backend_tls = self.backend_tls.unwrap_or(false);
        c.backend_ca = self.backend_ca.map(|p| base.join(p));
        Ok(c)
    }
}
