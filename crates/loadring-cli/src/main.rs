//! `loadring`: place keys, describe rings, play with bounded load, simulate policies.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    loadring_cli::run(loadring_cli::Cli::parse())
}
