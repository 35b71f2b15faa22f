//! The `loadring` command line's tests, as one test binary: each file of this directory
//! is a module here (`autotests = false` in Cargo.toml), so the crate links
//! one test executable instead of one per file. A new file must be added
//! below; `layout::every_test_file_is_a_module_of_its_main` in the core
//! crate's tests fails until it is.

mod live;
// The gateway's test helpers (demo backends, a raw HTTP client), shared.
#[cfg(feature = "net")]
#[path = "../../loadring-proxy/tests/common/mod.rs"]
mod common;

mod cli;
#[cfg(feature = "net")]
mod discover_cli;
#[cfg(feature = "net")]
mod fleet_load;
mod fuzz_lines;
#[cfg(feature = "net")]
mod live_dns;
#[cfg(feature = "net")]
mod live_etcd;
mod live_haproxy;
mod live_nginx;
mod live_twemproxy;
#[cfg(feature = "net")]
mod proxy;
#[cfg(feature = "net")]
mod proxy_faults;
mod simulate;
mod simulate_fleet;
mod simulate_scenario;
