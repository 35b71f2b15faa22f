//! The gateway's tests, as one test binary: each file of this directory
//! is a module here (`autotests = false` in Cargo.toml), so the crate links
//! one test executable instead of one per file. A new file must be added
//! below; `layout::every_test_file_is_a_module_of_its_main` in the core
//! crate's tests fails until it is.

mod common;
mod running;
mod wire;

mod abandoned;
mod config_errors;
mod dashboard;
mod downstream;
mod errors;
mod faults;
mod gateway;
mod grpc;
mod tls;
mod upstream;
mod websocket;
mod websocket_h2;
