//! # loadring-proxy
//!
//! An HTTP gateway on [`loadring`] (HTTP/1.1 and HTTP/2, cleartext or
//! TLS, gRPC and WebSocket passed through): each request's key (a header, a
//! cookie, a query parameter, the path, the client address, or several of
//! them combined as Envoy combines hash policies) picks a backend with any
//! loadring policy, bounded load included, and the balancer's guard is held
//! until the response body has been sent or the client has gone, so bounded
//! load counts real concurrency.
//!
//! Retries walk the policy's candidates (the ring successor for hashing
//! policies); active health checks and passive ejection move the balancer's
//! health marks; an endpoints file is re-read when it changes; the admin
//! listener serves Prometheus metrics, a JSON status and a live dashboard
//! page.
//!
//! ```no_run
//! use loadring_proxy::{ClusterConfig, KeySpec, Proxy, ProxyConfig};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let mut cluster = ClusterConfig::new("default", "c_murmurhash_bl".parse()?);
//! cluster.endpoints = vec!["127.0.0.1:9001".parse()?, "127.0.0.1:9002".parse()?];
//! cluster.key = KeySpec::parse(&["header:x-user"])?;
//! let config = ProxyConfig {
//!     listen: "127.0.0.1:8080".into(),
//!     admin: Some("127.0.0.1:9900".into()),
//!     drain_timeout: std::time::Duration::from_secs(10),
//!     clients: Default::default(),
//!     clusters: vec![cluster],
//!     routes: vec![],
//!     tls: None,
//! };
//! let proxy = Proxy::bind(config).await?;
//! proxy.serve(async { tokio::signal::ctrl_c().await.ok(); }).await?;
//! # Ok(())
//! # }
//! ```
//!
//! Errors are opaque, in the core's style: a [`ConfigError`] says what is
//! wrong with a configuration ([`ConfigErrorKind`]: an unreadable file,
//! TOML syntax, an unknown key, a missing value, a value not of its form or
//! out of its range, conflicting settings, a policy, TLS material), a
//! [`ProxyError`] why the proxy could not start or serve
//! ([`ProxyErrorKind`]); both name the key or flag at fault.
//!
//! The `loadring proxy` command runs it; `docs/proxy.md` lists every flag
//! and configuration key.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

// Every module is the crate's own: embedders use the items re-exported
// below, so the internals can change without breaking them.
mod abandoned;
mod activity;
mod admin;
#[cfg(feature = "demo")]
mod backend;
mod body;
mod clients;
mod cluster;
mod config;
mod connect;
mod dashboard;
mod downstream;
mod drain;
mod duration;
mod endpoint_counters;
mod endpoints;
mod error;
mod few_headers;
mod field_list;
mod forward;
mod grpc;
mod health;
mod history;
mod hop_by_hop;
mod idle_limit;
mod in_place;
mod joined_writes;
mod key;
mod label_value;
mod last_moved;
mod load_report;
mod metrics;
mod numerals;
mod places;
mod proxy_body;
mod reload;
mod request_body;
mod reset_flood;
mod run_to_end;
mod send_limit;
mod server;
mod slot_timer;
mod stream_send_limit;
mod target;
mod tls;
mod tunnel_idle;
mod upload;
mod upstream;
mod websocket;
mod workers;

pub use clients::ClientLimits;
pub use config::{
    BackendProtocol, ClusterConfig, HealthConfig, Naming, ProxyConfig, RouteConfig, TlsFiles,
    DEFAULT_DRAIN_TIMEOUT, DEFAULT_KEEPALIVE, MAX_CONNECTIONS, MAX_KEEPALIVE, MAX_RETRY_BUFFER,
};
pub use duration::parse_duration;
pub use error::{ConfigError, ConfigErrorKind, ProxyError, ProxyErrorKind};
pub use key::{KeySource, KeySpec};
pub use load_report::LoadReportSpec;
pub use server::{Proxy, MAX_ADMIN_CONNECTIONS};

/// A demo HTTP backend that reports what it served (feature `demo`): for
/// tests, examples and trying the gateway out.
#[cfg(feature = "demo")]
pub use backend::DemoBackend;

/// The gateway's insides, for this crate's tests and benches only: not part
/// of the API, they change without notice.
#[doc(hidden)]
pub mod internals {
    pub use crate::cluster::Cluster;
    pub use crate::key::KeyStyle;
    pub use crate::metrics::Metrics;
    pub use crate::server::Gateway;
}
