//! The core crate's integration tests, as one test binary: each file of this directory
//! is a module here (`autotests = false` in Cargo.toml), so the crate links
//! one test executable instead of one per file. A new file must be added
//! below; `layout::every_test_file_is_a_module_of_its_main` in the core
//! crate's tests fails until it is.

mod common;

mod balancer;
mod bounded;
mod compat;
mod dubbo_pixiu;
mod embedding;
mod envoy_bounded;
mod envoy_reference;
mod errors;
mod families;
mod fleet;
mod fuzz_parsers;
mod hostile_api;
mod ketama;
mod latency;
mod layers;
mod layout;
mod lifecycle;
mod local;
mod local_slots;
mod policies;
mod proptest_cases;
mod spill;
mod stress;
mod vectors;
