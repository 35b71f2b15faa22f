//! Loading: a TOML config file (its keys mirrored in `raw`)
//! and the endpoints files it names, each error one line naming the file,
//! the line and the key.

use std::path::Path;

use loadring::Endpoint;

use crate::endpoints::parse_endpoints;
use crate::error::{ConfigError, ConfigErrorKind};

use super::raw::RawConfig;
use super::settings::{count_setting, duration_accepted, DURATIONS};
use super::types::{ClusterConfig, ProxyConfig};

impl ClusterConfig {
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
}

/// Reads an endpoints file.
///
/// # Errors
/// An unreadable file or a bad line, naming the file (the caller says
/// which setting it came from).
fn read_endpoints_file(path: &Path) -> Result<Vec<Endpoint>, ConfigError> {
    let text = loadring_discovery::read_text(path)
        .map_err(|e| ConfigError::new(ConfigErrorKind::Read, format!("{}: {e}", path.display())))?;
    parse_endpoints(&text)
        .map_err(|e| ConfigError::new(ConfigErrorKind::Value, format!("{}: {e}", path.display())))
}

impl ProxyConfig {
    /// Reads and validates a TOML config file.
    ///
    /// # Errors
    /// An unreadable file, a TOML error or a bad value, naming the file.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let text = loadring_discovery::read_text(path).map_err(|e| {
            ConfigError::new(
                ConfigErrorKind::Read,
                format!("--config {}: {e}", path.display()),
            )
            .with_setting("--config")
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
        let raw: RawConfig = toml::from_str(text).map_err(|e| toml_error(text, &e))?;
        let config = raw.into_config(base)?;
        config.validate()?;
        Ok(config)
    }
}

/// A TOML error on one line, with its place and its kind. serde words an
/// unknown key and a missing one the same way whatever the format
/// (`unknown field `x`, expected ...`, `missing field `x``), and toml
/// passes its words on: they are the only place the kind is given.
fn toml_error(text: &str, e: &toml::de::Error) -> ConfigError {
    let message = e.message().replace('\n', " ").trim().to_string();
    let field = |prefix: &str| {
        message
            .strip_prefix(prefix)
            .and_then(|rest| rest.split_once('`'))
            .map(|(field, _)| field.to_string())
    };
    let (kind, setting) = if let Some(key) = field("unknown field `") {
        (ConfigErrorKind::UnknownKey, Some(key))
    } else if let Some(key) = field("missing field `") {
        (ConfigErrorKind::Missing, Some(key))
    } else {
        (ConfigErrorKind::Syntax, None)
    };
    let (place, key) = span_hint(text, e.span());
    // A number the TOML itself cannot hold (past 128 bits), or a value of
    // the wrong type for a duration: the setting's range, which serde's
    // words do not give.
    let range = match key {
        _ if kind != ConfigErrorKind::Syntax || message.contains("expected a whole number") => {
            String::new()
        }
        Some(key) if DURATIONS.contains(&key) => {
            format!(": `{key}` accepts {}", duration_accepted(key))
        }
        Some(key) => count_setting(key).map_or(String::new(), |count| {
            format!(": `{key}` accepts a whole number {}", count.accepted())
        }),
        None => String::new(),
    };
    let error = ConfigError::new(kind, message + &range + &place);
    match setting {
        Some(key) => error.with_setting(&key),
        None => error,
    }
}

/// Where a TOML error is: its line, and the key when the error is in a
/// value (`retries = -1`: serde's message names the type, not the key);
/// the key too.
fn span_hint(text: &str, span: Option<std::ops::Range<usize>>) -> (String, Option<&str>) {
    let Some(before) = span.and_then(|span| text.get(..span.start)) else {
        return (String::new(), None);
    };
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let key = before[line_start..]
        .split_once('=')
        .map(|(key, _)| key.trim())
        .filter(|key| !key.is_empty() && key.len() <= 64);
    match key {
        Some(key) => (format!(" (line {line}, key `{key}`)"), Some(key)),
        None => (format!(" (line {line})"), None),
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::Duration;

    use loadring_discovery::SourceSpec;

    use super::super::types::{
        BackendProtocol, TlsFiles, DEFAULT_CONNECT_TIMEOUT, DEFAULT_RETRY_BUFFER,
    };
    use super::*;
    use crate::clients::ClientLimits;

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
                "header_timeout = \"2s\"\nsend_timeout = \"5m\"\ntunnel_timeout = \"10m\"\nmax_connections = 100\nmax_abandoned = 0",
            ),
            Path::new("."),
        )
        .unwrap();
        assert_eq!(limited.clients.header_timeout, Duration::from_secs(2));
        assert_eq!(limited.clients.send_timeout, Duration::from_secs(300));
        assert_eq!(limited.clients.tunnel_timeout, Duration::from_secs(600));
        assert_eq!(limited.clients.max_connections, Some(100));
        assert_eq!(limited.clients.max_abandoned, Some(0));
        assert_eq!(limited.clients.max_abandoned(), 0);
        // Without one, the limit on abandoned requests is the connection limit.
        let connections_only = ProxyConfig::from_toml(
            &TWO_CLUSTERS.replace("drain_timeout = \"5s\"", "max_connections = 7"),
            Path::new("."),
        )
        .unwrap();
        assert_eq!(connections_only.clients.max_abandoned(), 7);
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
                "cluster `users`: retry_buffer: `16777217` is out of range: accepted 0..=16777216",
            ),
            (
                TWO_CLUSTERS.replace("retries = 2", "retries = -2"),
                "cluster `users`: retries: `-2` is not a count: accepted 0..=4294967295",
            ),
            (
                TWO_CLUSTERS.replace("eject_after = 0", "eject_after = \"x\""),
                "(line 17, key `eject_after`)",
            ),
            (
                TWO_CLUSTERS.replace("eject_after = 0", "eject_after = 1001"),
                "eject_after: `1001` is out of range: accepted 0 (never) or 1..=1000",
            ),
            (
                TWO_CLUSTERS.replace("eject_after = 0", "eject_after = 2\neject_for = \"2h\""),
                "eject_for: `2h` is out of range: accepted a whole number of ms, s, m or h from 1ms to 1h",
            ),
            (
                TWO_CLUSTERS.replace("load_factor=1.25", "load_factor=1.25 eject_after=3"),
                "cluster `users`: eject_after: the policy sets its own eject_after=",
            ),
            (
                TWO_CLUSTERS
                    .replace("load_factor=1.25", "eject_after=3")
                    .replace("eject_after = 0", "eject_for = \"2s\""),
                "cluster `users`: eject_for: the policy sets its own eject_after=",
            ),
            (
                format!(
                    "{TWO_CLUSTERS}[[cluster]]\nname = \"spare\"\npolicy = \"rr\"\nendpoints = [\"127.0.0.1:9004\"]\n"
                ),
                "cluster `spare`: no [[route]] leads to it",
            ),
            (
                TWO_CLUSTERS.replace("retry_buffer = 1024", "retry_buffer = -1"),
                "cluster `users`: retry_buffer: `-1` is not a number of bytes: accepted 0..=16777216",
            ),
            (
                TWO_CLUSTERS.replace("timeout = \"2s\"", "timeout = \"0s\""),
                "cluster `users`: timeout: `0s` is out of range: accepted a whole number of ms, s, m or h from 1ms to 24h",
            ),
            (
                TWO_CLUSTERS.replace("timeout = \"2s\"", "connect_timeout = \"0ms\""),
                "cluster `users`: connect_timeout: `0ms` is out of range: accepted a whole number of ms, s, m or h from 1ms to 24h",
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
                "header_timeout: `0s` is out of range: accepted a whole number of ms, s, m or h from 1ms to 24h",
            ),
            (
                TWO_CLUSTERS.replace("drain_timeout = \"5s\"", "send_timeout = \"0ms\""),
                "send_timeout: `0ms` is out of range: accepted a whole number of ms, s, m or h from 1ms to 24h",
            ),
            (
                TWO_CLUSTERS.replace("drain_timeout = \"5s\"", "tunnel_timeout = \"0s\""),
                "tunnel_timeout: `0s` is out of range: accepted a whole number of ms, s, m or h from 1ms to 24h",
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
                TWO_CLUSTERS.replace("drain_timeout = \"5s\"", "max_abandoned = 16777217"),
                "max_abandoned: `16777217` is out of range: accepted 0..=16777216",
            ),
            (
                TWO_CLUSTERS.replace("drain_timeout = \"5s\"", "max_abandoned = -1"),
                "max_abandoned: `-1` is not a count: accepted 0..=16777216",
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

    /// Input a message repeats is cut at 40 characters, with its length,
    /// and its control characters escaped: one short line.
    #[test]
    fn long_input_is_echoed_cut() {
        let long = "x".repeat(300);
        let cut = format!("{}... (300 characters)", "x".repeat(40));
        let cases = [
            (
                TWO_CLUSTERS.replace("header:x-user", &long),
                format!("key source `{cut}`"),
            ),
            (
                TWO_CLUSTERS.replace("cluster = \"static\"", &format!("cluster = \"{long}\"")),
                format!("route `/static/`: no cluster named `{cut}`"),
            ),
            (
                TWO_CLUSTERS
                    .replace("\"users\"", &format!("\"{long}\""))
                    .replace("retry_buffer = 1024", "retry_buffer = 16777217"),
                format!("cluster `{cut}`: retry_buffer"),
            ),
        ];
        for (text, expected) in cases {
            let err = error_of(&text);
            assert!(err.contains(&expected), "{expected:?} not in {err:?}");
            assert!(!err.contains(&"x".repeat(41)), "{err:?}");
        }
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
