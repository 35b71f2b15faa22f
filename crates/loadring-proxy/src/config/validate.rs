//! The checks a configuration passes before anything listens: ranges,
//! settings that must go together, references between clusters and routes.
//! Each failure is one [`ConfigError`] naming the key (or flag) at fault.

use loadring::{Echo, Endpoint};
use loadring_discovery::EndpointRejected;

use crate::error::{ConfigError, ConfigErrorKind};

use super::naming::Naming;
use super::settings::{count_setting, duration_range, show};
use super::types::{
    ClusterConfig, ProxyConfig, RouteConfig, MAX_CLUSTERS, MAX_NAME_LEN, MAX_ROUTES,
};

impl ClusterConfig {
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
            return Err(ConfigError::new(
                ConfigErrorKind::Missing,
                format!(
                    "{}: policy `{}` hashes a key: give {} SOURCE ({})",
                    name("key"),
                    self.policy,
                    name("key"),
                    crate::key::KEY_SOURCES
                ),
            )
            .with_setting(name("key")));
        }
        if !is_hashing && !self.key.is_empty() {
            return Err(ConfigError::new(
                ConfigErrorKind::Conflict,
                format!(
                    "{}: policy `{}` does not hash keys: drop {} or pick a hashing policy",
                    name("key"),
                    self.policy,
                    name("key")
                ),
            )
            .with_setting(name("key")));
        }
        if let Some(report) = &self.load_report {
            // Only a bounded policy has a cap for reports to inform.
            if self.policy.report_max_age().is_none() {
                return Err(ConfigError::new(
                    ConfigErrorKind::Conflict,
                    format!(
                        "{} {report}: policy `{}` has no load bound to use reports with: \
                     pick a bounded policy (e.g. c_murmurhash_bl:load_factor=1.25)",
                        name("load_report"),
                        self.policy
                    ),
                )
                .with_setting(name("load_report")));
            }
        }
        if self.discover.is_some() && self.endpoints_file.is_some() {
            return Err(ConfigError::new(
                ConfigErrorKind::Conflict,
                format!(
                    "{} and {}: give one ({} file:PATH follows a file)",
                    name("discover"),
                    name("endpoints_file"),
                    name("discover")
                ),
            )
            .with_setting(name("discover")));
        }
        let endpoints = self.read_endpoints().map_err(|e| {
            e.prefixed(&format!("{} ", name("endpoints_file")))
                .with_setting(name("endpoints_file"))
        })?;
        if endpoints.is_empty() && self.discover.is_none() {
            return Err(ConfigError::new(
                ConfigErrorKind::Missing,
                format!(
                    "no endpoints: give {}, {} or {}",
                    name("endpoints"),
                    name("endpoints_file"),
                    name("discover")
                ),
            )
            .with_setting(name("endpoints")));
        }
        for e in &endpoints {
            check_backend_addr(e).map_err(|e| {
                ConfigError::new(ConfigErrorKind::Value, e.to_string())
                    .with_setting(name("endpoints"))
            })?;
        }
        if let Some(path) = &self.health.path {
            if !path.starts_with('/') || path.parse::<http::uri::PathAndQuery>().is_err() {
                return Err(ConfigError::new(
                    ConfigErrorKind::Value,
                    format!(
                        "{} `{path}`: expected a path starting with `/`",
                        name("health_path")
                    ),
                )
                .with_setting(name("health_path")));
            }
        }
        // Ranges of values set in code (the flags and the config file are
        // read in range, their messages echoing the text as typed).
        for (key, value) in [
            ("health_rise", self.health.rise),
            ("health_fall", self.health.fall),
        ] {
            if value == 0 {
                return Err(ConfigError::new(
                    ConfigErrorKind::Range,
                    format!("{}: must be at least 1", name(key)),
                )
                .with_setting(name(key)));
            }
        }
        for (key, value) in [
            ("health_rise", u64::from(self.health.rise)),
            ("health_fall", u64::from(self.health.fall)),
            ("eject_after", u64::from(self.health.eject_after)),
            ("retry_buffer", self.retry_buffer),
            ("keepalive", self.keepalive as u64),
        ] {
            if let Some(setting) = count_setting(key) {
                setting.check(name(key), value)?;
            }
        }
        let eject_for = self.health.eject_for;
        if self.health.eject_after > 0 && !duration_range("eject_for").contains(&eject_for) {
            return Err(ConfigError::new(
                ConfigErrorKind::Range,
                format!(
                    "{}: {} is out of range: accepted 1ms..=1h",
                    name("eject_for"),
                    show(eject_for)
                ),
            )
            .with_setting(name("eject_for")));
        }
        if self.backend_ca.is_some() && !self.backend_tls {
            return Err(ConfigError::new(
                ConfigErrorKind::Conflict,
                format!(
                    "{}: only with {} (it verifies backends' certificates)",
                    name("backend_ca"),
                    name("backend_tls")
                ),
            )
            .with_setting(name("backend_ca")));
        }
        for (key, value) in [
            ("health_interval", self.health.interval),
            ("timeout", self.timeout),
            ("connect_timeout", self.connect_timeout),
        ] {
            if value.is_zero() {
                return Err(ConfigError::new(
                    ConfigErrorKind::Range,
                    format!("{}: must be more than 0ms", name(key)),
                )
                .with_setting(name(key)));
            }
        }
        Ok(())
    }
}

/// Why no request could ever match `route`, if none could: a request's
/// path has its dot segments resolved and no query before it is routed,
/// and its host is matched whole (no wildcards).
fn never_matched(route: &RouteConfig) -> Option<&'static str> {
    let prefix = route.path_prefix.as_str();
    if prefix.contains(['?', '#']) || prefix.contains(char::is_whitespace) {
        return Some("path_prefix has a character no routed path has (`?`, `#`, white space)");
    }
    // A last segment of `.` may begin one such as `.well-known`.
    let segments: Vec<&str> = prefix.split('/').collect();
    if segments[..segments.len() - 1]
        .iter()
        .any(|s| matches!(*s, "." | ".."))
    {
        return Some(
            "path_prefix has a dot segment (`/./`, `/../`), which paths lose before routing",
        );
    }
    match &route.host {
        Some(host) if host.contains('*') => Some(
            "host has a `*`: a route's host is matched whole, without wildcards \
             (give one route per host)",
        ),
        Some(host) if crate::target::normalize_host(host).is_none() => {
            Some("host is not a host name or address")
        }
        _ => None,
    }
}

/// At most `most` `[[key]]` tables (clusters, routes).
pub(super) fn check_how_many(
    key: &'static str,
    count: usize,
    most: usize,
) -> Result<(), ConfigError> {
    if count <= most {
        return Ok(());
    }
    Err(ConfigError::new(
        ConfigErrorKind::Range,
        format!("{count} [[{key}]] tables: accepted at most {most}"),
    )
    .with_setting(key))
}

/// Why `addr` is not an address to listen on, `HOST:PORT`, if it is not
/// (what the resolver would say about it is left to it).
fn not_host_port(addr: &str) -> Option<&'static str> {
    if addr.trim().is_empty() {
        return Some("is empty");
    }
    let Some((host, port)) = addr.rsplit_once(':') else {
        return Some("has no port");
    };
    // `[::1]` alone: the last colon is the address's own.
    if port.is_empty() || (addr.starts_with('[') && addr.ends_with(']')) {
        return Some("has no port");
    }
    if !crate::target::is_port(port) {
        return Some("has a port that is not a number in 0..=65535");
    }
    if host.is_empty() {
        return Some("has no host");
    }
    let bracketed = host.starts_with('[') && host.ends_with(']');
    if host.contains(':') && !bracketed {
        return Some("has an IPv6 address without brackets");
    }
    None
}

/// Whether every request `later` matches, `earlier` matches too: the
/// same host or none, and a prefix of `later`'s path prefix. Each route
/// comes with its host as requests are compared with it (normalized once:
/// every route is checked against every earlier one).
fn takes_all_of<H: PartialEq>(
    (earlier, earlier_host): (&RouteConfig, &Option<H>),
    (later, later_host): (&RouteConfig, &Option<H>),
) -> bool {
    let hosts_cover = earlier.host.is_none() || earlier_host == later_host;
    hosts_cover && later.path_prefix.starts_with(&earlier.path_prefix)
}

/// An endpoint address the proxy can connect to: `host:port`. Also the
/// check every discovered endpoint passes.
///
/// # Errors
/// Why not, naming the endpoint.
pub(crate) fn check_backend_addr(endpoint: &Endpoint) -> Result<(), EndpointRejected> {
    let addr = endpoint.addr();
    // Port 0 cannot be connected to; a port written with a sign is not one
    // a `Host` field may carry.
    let port_is_one = |a: &http::uri::Authority| {
        a.port()
            .is_some_and(|p| crate::target::is_port(p.as_str()) && p.as_u16() != 0)
    };
    match addr.parse::<http::uri::Authority>() {
        Ok(a) if port_is_one(&a) && !a.host().is_empty() && !addr.contains('@') => Ok(()),
        _ => Err(EndpointRejected::new(
            endpoint,
            "the address must be host:port of an HTTP/1.1 backend, the port in 1..=65535",
        )),
    }
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
                ConfigErrorKind::Missing,
                "no clusters: a config needs at least one [[cluster]]",
            ));
        }
        check_how_many("cluster", self.clusters.len(), MAX_CLUSTERS)?;
        check_how_many("route", self.routes.len(), MAX_ROUTES)?;
        for (key, addr) in [
            ("listen", Some(&self.listen)),
            ("admin", self.admin.as_ref()),
        ] {
            if let Some(why) = addr.and_then(|a| not_host_port(a)) {
                let name = naming.name(key);
                return Err(ConfigError::new(
                    ConfigErrorKind::Value,
                    format!(
                        "{name}: `{}` {why}: accepted HOST:PORT (e.g. 127.0.0.1:8080, [::1]:8080, \
                         0.0.0.0:8080 for every address), the port 0..=65535 (0: any free port)",
                        Echo(addr.map_or("", String::as_str))
                    ),
                )
                .with_setting(name));
            }
        }
        for (i, c) in self.clusters.iter().enumerate() {
            // Named in routes, logs and metrics' labels.
            if c.name.trim().is_empty() || c.name.contains(char::is_control) {
                return Err(ConfigError::new(
                    ConfigErrorKind::Value,
                    format!(
                        "{}: a cluster's name must have a character other than white space, and no control character: `{}`",
                        naming.name("name"),
                        Echo(&c.name)
                    ),
                )
                .with_setting(naming.name("name")));
            }
            if c.name.len() > MAX_NAME_LEN {
                return Err(ConfigError::new(
                    ConfigErrorKind::Range,
                    format!(
                        "{}: `{}` is {} bytes long: accepted a cluster name of at most {MAX_NAME_LEN} bytes",
                        naming.name("name"),
                        Echo(&c.name),
                        c.name.len()
                    ),
                )
                .with_setting(naming.name("name")));
            }
            if self.clusters[..i].iter().any(|o| o.name == c.name) {
                return Err(ConfigError::new(
                    ConfigErrorKind::Conflict,
                    format!("cluster `{}` is defined twice", Echo(&c.name)),
                ));
            }
        }
        for (key, value) in [
            ("header_timeout", self.clients.header_timeout),
            ("send_timeout", self.clients.send_timeout),
            ("tunnel_timeout", self.clients.tunnel_timeout),
        ] {
            if value.is_zero() {
                return Err(ConfigError::new(
                    ConfigErrorKind::Range,
                    format!("{}: must be more than 0ms", naming.name(key)),
                )
                .with_setting(naming.name(key)));
            }
        }
        for (key, value) in [
            ("max_connections", self.clients.max_connections),
            ("max_abandoned", self.clients.max_abandoned),
        ] {
            if let (Some(n), Some(setting)) = (value, count_setting(key)) {
                setting.check(naming.name(key), n as u64)?;
            }
        }
        // With every cluster cancelling the requests whose client leaves,
        // none is read to its end: a limit on them would limit nothing.
        if self.clients.max_abandoned.is_some() && self.clusters.iter().all(|c| c.abort_on_close) {
            let (limit, abort) = (naming.name("max_abandoned"), naming.name("abort_on_close"));
            let every = if self.clusters.len() > 1 {
                " on every cluster"
            } else {
                ""
            };
            return Err(ConfigError::new(
                ConfigErrorKind::Conflict,
                format!(
                    "{limit} with {abort}{every}: every request whose client leaves is then \
                     cancelled, none is read to its end, so {limit} limits nothing: give one or \
                     the other"
                ),
            )
            .with_setting(limit));
        }
        let multi = self.clusters.len() > 1;
        for c in &self.clusters {
            c.validate_as(naming)
                .map_err(|e| if multi { e.in_cluster(&c.name) } else { e })?;
        }
        for r in &self.routes {
            if !self.clusters.iter().any(|c| c.name == r.cluster) {
                return Err(ConfigError::new(
                    ConfigErrorKind::Conflict,
                    format!(
                        "route `{}`: no cluster named `{}`",
                        Echo(&r.path_prefix),
                        Echo(&r.cluster)
                    ),
                ));
            }
            if !r.path_prefix.starts_with('/') {
                return Err(ConfigError::new(
                    ConfigErrorKind::Value,
                    format!(
                        "route `{}`: path_prefix must start with `/`",
                        Echo(&r.path_prefix)
                    ),
                ));
            }
            if let Some(why) = never_matched(r) {
                return Err(ConfigError::new(
                    ConfigErrorKind::Value,
                    format!("route `{}`: {why}", Echo(&r.path_prefix)),
                ));
            }
        }
        let hosts: Vec<_> = self
            .routes
            .iter()
            .map(|r| r.host.as_deref().and_then(crate::target::normalize_host))
            .collect();
        for (i, later) in self.routes.iter().enumerate() {
            let later_host = (later, &hosts[i]);
            if let Some(earlier) = self.routes[..i]
                .iter()
                .zip(&hosts)
                .find(|&earlier| takes_all_of(earlier, later_host))
                .map(|(earlier, _)| earlier)
            {
                return Err(ConfigError::new(
                    ConfigErrorKind::Conflict,
                    format!(
                        "route `{}` (cluster `{}`) is never used: the earlier route `{}` (cluster \
                         `{}`) takes every request it would (the first route that matches wins)",
                        Echo(&later.path_prefix),
                        Echo(&later.cluster),
                        Echo(&earlier.path_prefix),
                        Echo(&earlier.cluster)
                    ),
                ));
            }
        }
        if multi && self.routes.is_empty() {
            return Err(ConfigError::new(
                ConfigErrorKind::Conflict,
                "several clusters but no [[route]]: say which requests go where",
            ));
        }
        // With several clusters requests reach one only through a route:
        // a cluster no route names would be built, checked and followed
        // for nothing.
        if let Some(c) = self
            .clusters
            .iter()
            .find(|c| multi && !self.routes.iter().any(|r| r.cluster == c.name))
        {
            return Err(ConfigError::new(
                ConfigErrorKind::Conflict,
                format!(
                    "cluster `{}`: no [[route]] leads to it (with several clusters, a request \
                     reaches one only through a route)",
                    Echo(&c.name)
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::types::DEFAULT_EJECT_FOR;
    use super::*;

    #[test]
    fn a_backend_address_is_a_host_and_a_port_that_can_be_connected_to() {
        let check = |addr: &str| check_backend_addr(&addr.parse().unwrap()).is_ok();
        for good in [
            "127.0.0.1:1",
            "127.0.0.1:65535",
            "backend.internal:8080",
            "[::1]:80",
        ] {
            assert!(check(good), "{good}");
        }
        for bad in [
            "127.0.0.1:0",
            "127.0.0.1:+80",
            "127.0.0.1:65536",
            "127.0.0.1",
            ":80",
            "user@127.0.0.1:80",
            "::1:80",
        ] {
            assert!(!check(bad), "{bad}");
        }
        let err = check_backend_addr(&"127.0.0.1:0".parse().unwrap()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "endpoint `127.0.0.1:0`: the address must be host:port of an HTTP/1.1 backend, \
             the port in 1..=65535"
        );
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
            "--eject-after: `1001` is out of range: accepted 0 (never) or 1..=1000"
        );
        c.health.eject_after = 1;
        c.health.eject_for = Duration::ZERO;
        assert_eq!(
            c.validate_as(Naming::Flags).unwrap_err().to_string(),
            "--eject-for: 0ms is out of range: accepted 1ms..=1h"
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
}
