//! `loadring proxy`: the HTTP gateway of `loadring-proxy`, from flags or a
//! TOML config file. Everything is checked before anything listens; a bad
//! value is one `error: ...` line.

use std::path::PathBuf;
use std::time::Duration;

use loadring_proxy::{ClientLimits, ClusterConfig, KeySpec, Naming, Proxy, ProxyConfig, TlsFiles};

use crate::CliError;

/// Serve HTTP/1.1 and HTTP/2 (h2c, or TLS with --tls-cert) on `--listen`, sending each request to the backend the
/// policy picks for its key; see docs/proxy.md.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The address to serve on, `HOST:PORT` (port 0..=65535; 0: any free port).
    #[arg(long, value_name = "HOST:PORT")]
    listen: Option<String>,
    /// The policy, e.g. `c_murmurhash_bl:load_factor=1.25`, `ring_hash`, `rr`.
    #[arg(long, short = 'p', value_name = "SPEC")]
    policy: Option<String>,
    /// A backend: `HOST:PORT[ weight=W][ tag=T][ zone=Z][ hash_key=K]` (repeatable).
    #[arg(long = "endpoint", short = 'e', value_name = "ENDPOINT")]
    endpoint: Vec<String>,
    /// A file of endpoints, one per line (`#` comments); re-read on change and on SIGHUP.
    #[arg(long, value_name = "FILE")]
    endpoints: Option<PathBuf>,
    /// Follow a membership source: file:PATH, dns://NAME:PORT, dns+srv://NAME
    /// (both with ?resolver=IP:PORT), etcd://HOST:PORT/PREFIX.
    #[arg(long, value_name = "SOURCE")]
    discover: Option<String>,
    /// Where the hash key comes from: header:NAME, cookie:NAME, query:NAME,
    /// path, uri, method-uri (pixiu's `METHOD.target`), source-ip
    /// (repeatable or comma-separated: combined, at most 16, none twice).
    #[arg(long, value_name = "SOURCE")]
    key: Vec<String>,
    /// The admin listener (`GET /` the dashboard, `GET /status`, `GET /history`,
    /// `GET /metrics`), `HOST:PORT`.
    #[arg(long, value_name = "HOST:PORT")]
    admin: Option<String>,
    /// Further candidates tried after a connect failure, 0..=4294967295
    /// (each endpoint at most once; default 1).
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    retries: Option<String>,
    /// Request bodies of at most this many bytes are read whole first, so
    /// the request can be retried; bigger ones stream, sent once,
    /// 0..=16777216 (default 65536; 0: every body streams).
    #[arg(long, value_name = "BYTES", allow_hyphen_values = true)]
    retry_buffer: Option<String>,
    /// How long connecting to a backend may take, 1ms to 24h (default 2s).
    #[arg(long, value_name = "DUR", allow_hyphen_values = true)]
    connect_timeout: Option<String>,
    /// How long a backend may take to send its response headers, and the
    /// longest pause in its response body, 1ms to 24h (default 30s).
    #[arg(long, value_name = "DUR", allow_hyphen_values = true)]
    timeout: Option<String>,
    /// A client that leaves cancels its request upstream (the connection to
    /// the backend is closed) instead of the response being read to its end
    /// with the endpoint's slot held (not with --max-abandoned, which limits
    /// the requests read to their end).
    #[arg(long)]
    abort_on_close: bool,
    /// Idle connections to the backends each worker thread keeps for reuse,
    /// over all endpoints; past it the least recently used is closed,
    /// 0..=65536 (default 256; 0: a connection per request).
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    keepalive: Option<String>,
    /// Read each response's ORCA `endpoint-load-metrics` header: `orca` or
    /// `orca:METRIC` (the named metric holding the backend's requests in
    /// service, default in_flight); a bounded policy then caps the fleet's load.
    #[arg(long, value_name = "orca[:METRIC]")]
    load_report: Option<String>,
    /// Active health checks: the path to GET on each backend.
    #[arg(long, value_name = "PATH")]
    health_path: Option<String>,
    /// How often active checks run, 1ms to 24h (default 5s).
    #[arg(long, value_name = "DUR", allow_hyphen_values = true)]
    health_interval: Option<String>,
    /// Passing checks in a row that bring an endpoint back, 1..=1000
    /// (default 2).
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    health_rise: Option<String>,
    /// Failing checks in a row that take an endpoint out, 1..=1000
    /// (default 3).
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    health_fall: Option<String>,
    /// Failed requests in a row that eject an endpoint, 0 (never) or
    /// 1..=1000 (default 5; not with a policy that sets its own
    /// eject_after=).
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    eject_after: Option<String>,
    /// How long an ejected endpoint stays out, 1ms to 1h (default 30s).
    #[arg(long, value_name = "DUR", allow_hyphen_values = true)]
    eject_for: Option<String>,
    /// How long SIGTERM/SIGINT wait for requests in flight, 0ms to 24h
    /// (default 30s).
    #[arg(long, value_name = "DUR", allow_hyphen_values = true)]
    drain_timeout: Option<String>,
    /// How long a client may take to send a request's headers, or to start
    /// its next request on a kept-alive connection, 1ms to 24h (default
    /// 10s).
    #[arg(long, value_name = "DUR", allow_hyphen_values = true)]
    header_timeout: Option<String>,
    /// How long sending a response may be held back because the client reads
    /// nothing; then its connection is closed, or an HTTP/2 stream held back
    /// alone is reset, 1ms to 24h (default 60s).
    #[arg(long, value_name = "DUR", allow_hyphen_values = true)]
    send_timeout: Option<String>,
    /// How long an open tunnel (a WebSocket) may carry nothing either way;
    /// then both its sides are closed, 1ms to 24h (default 1h).
    #[arg(long, value_name = "DUR", allow_hyphen_values = true)]
    tunnel_timeout: Option<String>,
    /// Client connections open at once; beyond, new ones are refused at
    /// once, 1..=16777216 (default: half the file descriptor limit left
    /// after 64).
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    max_connections: Option<String>,
    /// Requests whose client left that are still read to their end, so that
    /// bounded load counts the backends' work; beyond, such a request is
    /// cancelled as with --abort-on-close, 0..=16777216 (default: the
    /// connection limit; 0: all are cancelled; not with --abort-on-close).
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    max_abandoned: Option<String>,
    /// The listener serves TLS (ALPN h2 and http/1.1) with this PEM
    /// certificate chain; with --tls-key. Reloaded on SIGHUP.
    #[arg(long, value_name = "FILE")]
    tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE")]
    tls_key: Option<PathBuf>,
    /// What is spoken to the backends: http1 (default) or h2c (HTTP/2;
    /// gRPC backends need it).
    #[arg(long, value_name = "http1|h2c")]
    backend_protocol: Option<String>,
    /// TLS to the backends, SNI the endpoint's host, the certificate
    /// verified (against --backend-ca, else the system's roots).
    #[arg(long)]
    backend_tls: bool,
    /// The CA certificates (PEM) backends are verified against.
    #[arg(long, value_name = "FILE")]
    backend_ca: Option<PathBuf>,
    /// A TOML file with all of the above and more (several clusters, routes).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

/// The duration given to the flag of config key `key`, in its range; the
/// error echoes it as typed.
fn duration(key: &'static str, value: &Option<String>) -> Result<Option<Duration>, CliError> {
    value
        .as_deref()
        .map(|v| Ok(Naming::Flags.read_duration(key, v)?))
        .transpose()
}

/// The whole number given to the flag of config key `key`, in its range
/// (which fits `T`); the error echoes it and gives the range.
fn count<T: TryFrom<u64>>(
    key: &'static str,
    value: &Option<String>,
) -> Result<Option<T>, CliError> {
    value
        .as_deref()
        .map(|v| {
            let n = Naming::Flags.read_count(key, v)?;
            T::try_from(n)
                .map_err(|_| CliError(format!("{}: `{n}` does not fit", Naming::Flags.name(key))))
        })
        .transpose()
}

impl Args {
    /// Flags given besides `--config` (which takes no others).
    fn other_flags(&self) -> Vec<&'static str> {
        let mut given = Vec::new();
        let options = [
            ("--listen", self.listen.is_some()),
            ("--policy", self.policy.is_some()),
            ("-e", !self.endpoint.is_empty()),
            ("--endpoints", self.endpoints.is_some()),
            ("--discover", self.discover.is_some()),
            ("--key", !self.key.is_empty()),
            ("--admin", self.admin.is_some()),
            ("--retries", self.retries.is_some()),
            ("--retry-buffer", self.retry_buffer.is_some()),
            ("--connect-timeout", self.connect_timeout.is_some()),
            ("--timeout", self.timeout.is_some()),
            ("--abort-on-close", self.abort_on_close),
            ("--keepalive", self.keepalive.is_some()),
            ("--load-report", self.load_report.is_some()),
            ("--health-path", self.health_path.is_some()),
            ("--health-interval", self.health_interval.is_some()),
            ("--health-rise", self.health_rise.is_some()),
            ("--health-fall", self.health_fall.is_some()),
            ("--eject-after", self.eject_after.is_some()),
            ("--eject-for", self.eject_for.is_some()),
            ("--drain-timeout", self.drain_timeout.is_some()),
            ("--header-timeout", self.header_timeout.is_some()),
            ("--send-timeout", self.send_timeout.is_some()),
            ("--tunnel-timeout", self.tunnel_timeout.is_some()),
            ("--max-connections", self.max_connections.is_some()),
            ("--max-abandoned", self.max_abandoned.is_some()),
            ("--tls-cert", self.tls_cert.is_some()),
            ("--tls-key", self.tls_key.is_some()),
            ("--backend-protocol", self.backend_protocol.is_some()),
            ("--backend-tls", self.backend_tls),
            ("--backend-ca", self.backend_ca.is_some()),
        ];
        for (flag, present) in options {
            if present {
                given.push(flag);
            }
        }
        given
    }

    /// The configuration the flags (or the config file) describe, checked.
    fn config(&self) -> Result<ProxyConfig, CliError> {
        if let Some(path) = &self.config {
            let others = self.other_flags();
            if !others.is_empty() {
                return Err(CliError(format!(
                    "--config takes no other flags (put {} in the file)",
                    others.join(", ")
                )));
            }
            return Ok(ProxyConfig::from_file(path)?);
        }
        let listen = self
            .listen
            .clone()
            .ok_or_else(|| CliError("--listen HOST:PORT is required (or --config FILE)".into()))?;
        let policy = self
            .policy
            .as_deref()
            .ok_or_else(|| CliError("--policy SPEC is required (or --config FILE)".into()))?
            .parse()
            .map_err(|e| CliError(format!("--policy: {e}")))?;
        let mut cluster = ClusterConfig::new("default", policy);
        for text in &self.endpoint {
            cluster
                .endpoints
                .push(text.parse().map_err(|e| CliError(format!("-e: {e}")))?);
        }
        cluster.endpoints_file = self.endpoints.clone();
        cluster.discover = self
            .discover
            .as_deref()
            .map(|d| d.parse().map_err(|e| CliError(format!("--discover {e}"))))
            .transpose()?;
        cluster.key = KeySpec::parse(&self.key).map_err(|e| CliError(format!("--key: {e}")))?;
        if let Some(n) = count("retries", &self.retries)? {
            cluster.retries = n;
        }
        if let Some(n) = count("retry_buffer", &self.retry_buffer)? {
            cluster.retry_buffer = n;
        }
        if let Some(d) = duration("connect_timeout", &self.connect_timeout)? {
            cluster.connect_timeout = d;
        }
        if let Some(d) = duration("timeout", &self.timeout)? {
            cluster.timeout = d;
        }
        cluster.abort_on_close = self.abort_on_close;
        if let Some(n) = count("keepalive", &self.keepalive)? {
            cluster.keepalive = n;
        }
        cluster.load_report = self
            .load_report
            .as_deref()
            .map(|r| {
                r.parse()
                    .map_err(|e| CliError(format!("--load-report: {e}")))
            })
            .transpose()?;
        // Active checks run only with a path: their settings without one
        // would be taken and do nothing.
        if self.health_path.is_none() {
            let given = [
                ("--health-interval", self.health_interval.is_some()),
                ("--health-rise", self.health_rise.is_some()),
                ("--health-fall", self.health_fall.is_some()),
            ];
            if let Some((flag, _)) = given.into_iter().find(|(_, given)| *given) {
                return Err(CliError(format!(
                    "{flag}: only with --health-path (the active checks run only with a path)"
                )));
            }
        }
        cluster.health.path = self.health_path.clone();
        if let Some(d) = duration("health_interval", &self.health_interval)? {
            cluster.health.interval = d;
        }
        if let Some(n) = count("health_rise", &self.health_rise)? {
            cluster.health.rise = n;
        }
        if let Some(n) = count("health_fall", &self.health_fall)? {
            cluster.health.fall = n;
        }
        if let Some(n) = count("eject_after", &self.eject_after)? {
            cluster.health.eject_after = n;
        }
        // Before its value is read: whatever it is, it would do nothing.
        if self.eject_for.is_some() && cluster.health.eject_after == 0 {
            return Err(CliError(
                "--eject-for: only with --eject-after 1 or more (--eject-after 0 ejects nothing)"
                    .into(),
            ));
        }
        if let Some(d) = duration("eject_for", &self.eject_for)? {
            cluster.health.eject_for = d;
        }
        if cluster.has_own_ejection() {
            let given = [
                ("--eject-after", self.eject_after.is_some()),
                ("--eject-for", self.eject_for.is_some()),
            ];
            if let Some((flag, _)) = given.into_iter().find(|(_, given)| *given) {
                return Err(CliError(format!(
                    "{flag}: the policy sets its own eject_after=, which is the ejection used; \
                     set one or the other"
                )));
            }
        }
        if let Some(p) = &self.backend_protocol {
            cluster.backend_protocol = p
                .parse()
                .map_err(|e| CliError(format!("--backend-protocol: {e}")))?;
        }
        cluster.backend_tls = self.backend_tls;
        cluster.backend_ca = self.backend_ca.clone();
        let tls = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some(TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
            }),
            (None, None) => None,
            // A usage mistake, exit 2 (`--tls-cert: ...`, exit 1, is for
            // a certificate that cannot be loaded).
            (Some(_), None) => return Err(CliError("--tls-cert needs --tls-key FILE".into())),
            (None, Some(_)) => return Err(CliError("--tls-key needs --tls-cert FILE".into())),
        };
        let drain_timeout = duration("drain_timeout", &self.drain_timeout)?
            .unwrap_or(loadring_proxy::DEFAULT_DRAIN_TIMEOUT);
        let mut clients = ClientLimits::default();
        if let Some(d) = duration("header_timeout", &self.header_timeout)? {
            clients.header_timeout = d;
        }
        if let Some(d) = duration("send_timeout", &self.send_timeout)? {
            clients.send_timeout = d;
        }
        if let Some(d) = duration("tunnel_timeout", &self.tunnel_timeout)? {
            clients.tunnel_timeout = d;
        }
        clients.max_connections = count("max_connections", &self.max_connections)?;
        clients.max_abandoned = count("max_abandoned", &self.max_abandoned)?;
        let config = ProxyConfig {
            listen,
            admin: self.admin.clone(),
            drain_timeout,
            clients,
            clusters: vec![cluster],
            routes: Vec::new(),
            tls,
        };
        config.validate_as(Naming::Flags)?;
        Ok(config)
    }
}

/// Logs go to stderr, one line each; `LOADRING_LOG` (error, warn, info,
/// debug, trace) sets the level, `warn` by default: quiet unless something
/// is wrong.
pub(crate) fn init_logging() {
    let level = std::env::var("LOADRING_LOG")
        .ok()
        .and_then(|l| l.parse::<tracing::Level>().ok())
        .unwrap_or(tracing::Level::WARN);
    let _ = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(false)
        .try_init();
}

pub fn run(args: Args) -> Result<(), CliError> {
    let config = args.config()?;
    // Errors name what the user wrote: the file's keys or the flags.
    let naming = if args.config.is_some() {
        Naming::Keys
    } else {
        Naming::Flags
    };
    // A TLS certificate is re-read on SIGHUP too (by the proxy itself).
    let follows_a_source = config.tls.is_some()
        || config
            .clusters
            .iter()
            .any(|c| c.endpoints_file.is_some() || c.discover.is_some());
    init_logging();
    // Thread per core: this thread's runtime serves clients beside the
    // admin listener, health checks and membership; each other core gets a
    // worker thread with its own runtime and listener (SO_REUSEPORT), so a
    // request and its upstream connection stay on one thread.
    let workers = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError(format!("runtime: {e}")))?;
    runtime.block_on(async move {
        // Installed before binding: from then on SIGTERM and SIGINT drain
        // instead of killing.
        let stop = stop_signal().map_err(|e| CliError(format!("signals: {e}")))?;
        // SIGHUP's default action ends the process: it must never do so.
        let hangups =
            hangup_notice(follows_a_source).map_err(|e| CliError(format!("signals: {e}")))?;
        let any_port = |addr: &str| addr.rsplit_once(':').is_some_and(|(_, port)| port == "0");
        let (listen_any, admin_any) = (
            any_port(&config.listen),
            config.admin.as_deref().is_some_and(any_port),
        );
        let proxy = Proxy::bind_workers(config, naming, workers).await?;
        let serving = proxy.local_addr().map_err(CliError::from)?;
        let admin = proxy.admin_addr();
        if listen_any || admin_any {
            // Port 0 asked for a free port: where it is is only known now,
            // and logged whatever the level.
            let admin = admin.map(|a| format!(", admin on {a}")).unwrap_or_default();
            tracing::warn!("serving on {serving}{admin} (port 0 asked for any free port)");
        } else {
            tracing::info!("serving on {serving}");
        }
        let hangups = tokio::spawn(hangups);
        proxy.serve(stop).await?;
        hangups.abort();
        Ok(())
    })
}

/// Takes SIGHUP from now on. Sources (endpoints files, discovery) re-read
/// themselves on it (the proxy crate's reload module); with none, there is
/// nothing to re-read: each SIGHUP logs one line and the proxy carries on.
pub(crate) fn hangup_notice(
    follows_a_source: bool,
) -> std::io::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut hup = signal(SignalKind::hangup())?;
    Ok(async move {
        while hup.recv().await.is_some() {
            if !follows_a_source {
                tracing::warn!(
                    "SIGHUP: nothing to re-read (no --endpoints file or --discover source); still serving"
                );
            }
        }
    })
}

/// Completes on the first SIGTERM or SIGINT.
pub(crate) fn stop_signal() -> std::io::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {},
            _ = int.recv() => {},
        }
    })
}
