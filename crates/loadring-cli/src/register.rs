//! `loadring register etcd://HOST:PORT/PREFIX --endpoint ENDPOINT --ttl DUR`:
//! puts the endpoint under `PREFIX/` in etcd with a lease kept alive while
//! this runs. If the process dies, the key goes when the lease expires (one
//! TTL later); on SIGTERM or SIGINT it is deleted at once. An unreachable
//! etcd at the start is an error; later outages are ridden out (the key is
//! put again under a new lease once etcd answers).

use std::time::Duration;

use loadring::Endpoint;
use loadring_discovery::{etcd, SourceSpec};
use loadring_proxy::parse_duration;

use crate::CliError;

/// The lease's TTL unless `--ttl` says otherwise.
const DEFAULT_TTL: Duration = Duration::from_secs(10);

/// Register an endpoint in etcd under a lease kept alive while this runs.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Where: etcd://HOST:PORT/PREFIX (the key is PREFIX/<endpoint address>).
    #[arg(value_name = "etcd://HOST:PORT/PREFIX")]
    target: String,
    /// The endpoint line stored: `HOST:PORT[ weight=W][ tag=T][ zone=Z][ hash_key=K]`.
    #[arg(long, short = 'e', value_name = "ENDPOINT")]
    endpoint: String,
    /// The lease's time to live, whole seconds (default 10s): how long a
    /// dead process's endpoint stays in the pool.
    #[arg(long, value_name = "DUR", allow_hyphen_values = true)]
    ttl: Option<String>,
}

pub fn run(args: Args) -> Result<(), CliError> {
    let target = match args.target.parse::<SourceSpec>() {
        Ok(SourceSpec::Etcd(t)) => t,
        Ok(other) => {
            return Err(CliError(format!(
                "`{other}`: register writes to etcd: expected etcd://HOST:PORT/PREFIX"
            )))
        }
        Err(e) => return Err(CliError(e.to_string())),
    };
    let endpoint: Endpoint = args
        .endpoint
        .parse()
        .map_err(|e| CliError(format!("--endpoint: {e}")))?;
    let ttl = match args.ttl.as_deref() {
        None => DEFAULT_TTL,
        Some(v) => parse_duration(v).map_err(|e| CliError(format!("--ttl: {e}")))?,
    };
    if ttl < Duration::from_secs(1) {
        return Err(CliError(format!(
            "--ttl {}: an etcd lease lasts at least 1s",
            args.ttl.unwrap_or_default()
        )));
    }
    crate::proxy::init_logging();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError(format!("runtime: {e}")))?;
    runtime.block_on(async move {
        let stop = crate::proxy::stop_signal().map_err(|e| CliError(format!("signals: {e}")))?;
        etcd::register(&target, &endpoint, ttl, stop)
            .await
            .map_err(|e| CliError(e.to_string()))
    })
}
