//! How an error names a setting: the config file's key, or the command
//! line's flag.

/// How an error names a setting: as the config file's key or as the
/// command line's flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Naming {
    /// `health_rise`, `endpoints_file`: a TOML config (and code that fills
    /// [`ClusterConfig`](crate::ClusterConfig) itself, whose fields have those names).
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
                "policy" => "--policy",
                "retries" => "--retries",
                "abort_on_close" => "--abort-on-close",
                "drain_timeout" => "--drain-timeout",
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
                "send_timeout" => "--send-timeout",
                "tunnel_timeout" => "--tunnel-timeout",
                "max_connections" => "--max-connections",
                "max_abandoned" => "--max-abandoned",
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
