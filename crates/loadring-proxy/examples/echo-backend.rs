//! A demo backend for trying the proxy: answers every request with its own
//! address (see `loadring_proxy::backend` for `?delay=MS`, `?status=CODE`
//! and `/health`).
//!
//! ```text
//! cargo run -p loadring-proxy --example echo-backend -- 127.0.0.1:9001
//! ```

#[tokio::main]
async fn main() {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:9001".to_string());
    let backend = match loadring_proxy::DemoBackend::start(&addr).await {
        Ok(backend) => backend,
        Err(e) => {
            eprintln!("error: {addr}: {e}");
            std::process::exit(2);
        }
    };
    eprintln!("echo-backend on {}", backend.addr());
    let _ = tokio::signal::ctrl_c().await;
}
