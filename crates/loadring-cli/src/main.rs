//! `loadring`: place keys, describe rings, play with bounded load, simulate policies.

use std::process::ExitCode;

use clap::Parser;

// mimalloc's per-thread heaps suit the gateway's short-lived per-request
// allocations better than glibc's malloc (BENCHMARKS.md, "Gateway").
#[cfg(feature = "net")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    match loadring_cli::Cli::try_parse() {
        Ok(cli) => loadring_cli::run(cli),
        // --help and --version: clap's text on stdout, exit 0; no command
        // at all: the help, on stderr, exit 2.
        Err(e)
            if !e.use_stderr()
                || e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand =>
        {
            e.exit()
        }
        Err(e) => {
            eprintln!("{}", loadring_cli::usage_error(&e));
            ExitCode::from(2)
        }
    }
}
