//! `loadring`: place keys, describe rings, play with bounded load, simulate policies.

use std::process::ExitCode;

use clap::Parser;

// mimalloc's per-thread heaps suit the gateway's short-lived per-request
// allocations better than glibc's malloc (BENCHMARKS.md, "Gateway").
#[cfg(feature = "net")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    loadring_cli::run(loadring_cli::Cli::parse())
}
