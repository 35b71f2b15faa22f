//! # loadring-proxy
//!
//! An HTTP/1.1 gateway on [`loadring`]: each request's key (a header, a
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
//! };
//! let proxy = Proxy::bind(config).await?;
//! proxy.serve(async { tokio::signal::ctrl_c().await.ok(); }).await?;
//! # Ok(())
//! # }
//! ```
//!
//! The `loadring proxy` command runs it; `docs/proxy.md` lists every flag
//! and configuration key.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod admin;
pub mod backend;
pub mod body;
pub mod clients;
pub mod cluster;
pub mod config;
mod connect;
pub mod dashboard;
mod duration;
pub mod endpoint_counters;
pub mod endpoints;
pub mod forward;
pub mod health;
pub mod history;
pub mod key;
pub mod load_report;
pub mod metrics;
mod proxy_body;
pub mod reload;
mod request_body;
pub mod server;
pub mod target;
pub mod upstream;
mod workers;

pub use backend::DemoBackend;
pub use cluster::Cluster;
pub use config::{ClusterConfig, ConfigError, HealthConfig, Naming, ProxyConfig, RouteConfig};
pub use duration::parse_duration;
pub use key::{KeyBytes, KeySource, KeySpec, KeyStyle, RequestKey};
pub use server::{Gateway, Proxy, ProxyError};
