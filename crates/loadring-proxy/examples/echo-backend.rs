//! A demo backend for trying the proxy: answers every request with its own
//! address (see `loadring_proxy::DemoBackend` for `?delay=MS`, `?status=CODE`
//! and `/health`). `--load-report` makes every answer carry its count of
//! requests in service in ORCA's `endpoint-load-metrics` header, for
//! `loadring proxy --load-report orca`.
//!
//! ```text
//! cargo run -p loadring-proxy --example echo-backend -- 127.0.0.1:9001 [--load-report]
//! ```

#[tokio::main]
async fn main() {
    let mut addr = "127.0.0.1:9001".to_string();
    let mut load_report = false;
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--load-report" => load_report = true,
            flag if flag.starts_with('-') => {
                eprintln!("error: unknown flag `{flag}`: accepted --load-report");
                std::process::exit(2);
            }
            _ => addr = arg,
        }
    }
    let backend = match loadring_proxy::DemoBackend::start(&addr).await {
        Ok(backend) => backend,
        Err(e) => {
            eprintln!("error: {addr}: {e}");
            std::process::exit(2);
        }
    };
    backend.set_load_report(load_report);
    eprintln!("echo-backend on {}", backend.addr());
    let _ = tokio::signal::ctrl_c().await;
}
