//! `loadring`: place keys, describe rings, play with bounded load, simulate policies.

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::Parser;

// mimalloc's per-thread heaps suit the gateway's short-lived per-request
// allocations better than glibc's malloc (BENCHMARKS.md, "Gateway").
#[cfg(feature = "net")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Whether the process started with its stdout (file descriptor 1) closed.
/// Rust's runtime opens `/dev/null` on a closed 0, 1 or 2 before `main`, so
/// this is looked at before it, by a constructor (which glibc and musl run
/// before the runtime's entry point).
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

#[cfg(any(target_os = "linux", target_os = "android"))]
#[used]
#[link_section = ".init_array"]
static LOOK_AT_STDOUT: extern "C" fn() = look_at_stdout;

#[cfg(any(target_os = "linux", target_os = "android"))]
extern "C" fn look_at_stdout() {
    use std::ffi::c_int;
    extern "C" {
        fn fcntl(fd: c_int, cmd: c_int, ...) -> c_int;
    }
    const F_GETFD: c_int = 1;
    // SAFETY: F_GETFD only reads the descriptor's flags; its one failure
    // is EBADF, a descriptor that is not open.
    if unsafe { fcntl(1, F_GETFD) } == -1 {
        STDOUT_CLOSED.store(true, Ordering::Relaxed);
    }
}

fn main() -> ExitCode {
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        loadring_cli::mark_stdout_closed();
    }
    match loadring_cli::Cli::try_parse() {
        Ok(cli) => loadring_cli::run(cli),
        // --help and --version: clap's text on stdout, exit 0, or an
        // `output:` error, exit 2, when it cannot be written (as a
        // command's output).
        Err(e) if !e.use_stderr() => loadring_cli::print_help(&e),
        // No command at all: the help, on stderr, exit 2.
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            e.exit()
        }
        Err(e) => {
            eprintln!("{}", loadring_cli::usage_error(&e));
            ExitCode::from(2)
        }
    }
}
