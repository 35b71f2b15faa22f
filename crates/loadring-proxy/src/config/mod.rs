//! What the proxy runs: listeners, clusters (a policy over endpoints, a key,
//! retries, timeouts, health) and routes, from flags or a TOML file.
//!
//! Everything is validated here, before anything listens: a bad value is
//! one [`ConfigError`](crate::ConfigError) naming its place
//! (`cluster `api`: policy: ...`).
//!
//! * `types`: what an embedder builds (`ProxyConfig`, `ClusterConfig`, ...)
//!   and the defaults;
//! * `ejection`: the policy a cluster's balancer runs, the proxy's passive
//!   ejection added as its lifecycle;
//! * `naming`: errors name a config key or a command-line flag;
//! * `settings`: the numeric settings' ranges, and how a value typed for
//!   one is read;
//! * `validate`: ranges and cross-field checks;
//! * `load` and `raw`: the TOML file and the endpoints files.

mod ejection;
mod load;
mod naming;
mod raw;
mod settings;
mod types;
mod validate;

pub use naming::Naming;
pub use types::*;
pub(crate) use validate::check_backend_addr;

pub(crate) use crate::error::ConfigError;
