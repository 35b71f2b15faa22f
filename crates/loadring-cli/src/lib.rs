//! The `loadring` command line as a library: `src/main.rs` parses the
//! arguments and calls [`run`]; the fuzz targets (`fuzz/` at the top of the
//! repository) drive `place`'s and `shell`'s line handling directly
//! ([`place::place_lines`], [`shell::session`]).

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod describe;
mod echo;
mod endpoints;
mod lines;
mod output;
pub mod place;
#[cfg(feature = "net")]
mod proxy;
#[cfg(feature = "net")]
mod register;
pub mod shell;
mod simulate;
#[cfg(not(feature = "net"))]
mod without_net;

/// Which backend gets each request: placement-compatible consistent hashing,
/// bounded loads and the classic load-balancing policies.
#[derive(Parser)]
#[command(name = "loadring", version, about, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Read keys (or request codes) on stdin, print `<input>\t<endpoint>` per line.
    Place(place::Args),
    /// Show each endpoint's share of the hash space and the deviation.
    Describe(describe::Args),
    /// A line protocol on stdin/stdout for playing with bounded load.
    Shell(shell::Args),
    /// Replay one seeded workload against several policies in virtual time:
    /// load, locality and churn side by side.
    #[command(long_about = simulate::LONG_ABOUT)]
    Simulate(Box<simulate::Args>),
    /// An HTTP gateway: each request's key picks its backend with the policy
    /// (bounded load, retries, health checks, metrics).
    #[cfg(feature = "net")]
    Proxy(Box<proxy::Args>),
    /// Keep an endpoint in etcd under a lease while this runs (for
    /// `loadring proxy --discover etcd://...`).
    #[cfg(feature = "net")]
    Register(register::Args),
    /// An HTTP gateway (not in this build: needs the `net` feature).
    #[cfg(not(feature = "net"))]
    #[command(disable_help_flag = true)]
    Proxy(without_net::Args),
    /// Keep an endpoint in etcd under a lease (not in this build: needs the
    /// `net` feature).
    #[cfg(not(feature = "net"))]
    #[command(disable_help_flag = true)]
    Register(without_net::Args),
}

/// An error the command reports as one `error: ...` line and exit code 2.
///
/// Opaque: only the commands make one. It is a carrier, not a
/// `std::error::Error` (the conversion from every `Display` type, which lets
/// `?` turn the libraries' errors into it, rules out its own `Display`); the
/// libraries' typed errors are the ones to match on.
#[derive(Debug)]
pub struct CliError(pub(crate) String);

impl<E: std::fmt::Display> From<E> for CliError {
    fn from(e: E) -> Self {
        CliError(e.to_string())
    }
}

/// A command line clap refuses (an unknown flag, a missing or repeated
/// one, flags that conflict), as one line: clap's own text spans several
/// (the culprit of a missing flag on the second), and every other
/// mistake here is one `error: ...` line.
///
/// ```
/// use clap::Parser;
///
/// let Err(err) = loadring_cli::Cli::try_parse_from(["loadring", "place", "-e", "a"]) else {
///     panic!("--policy is required");
/// };
/// assert_eq!(
///     loadring_cli::usage_error(&err),
///     "error: the following required arguments were not provided: --policy <SPEC> \
///      (loadring place --help lists the flags)"
/// );
/// ```
pub fn usage_error(err: &clap::Error) -> String {
    let text = err.render().to_string();
    // What comes before clap's usage and its pointer to --help.
    let said = text
        .split("\n\nUsage:")
        .next()
        .unwrap_or(&text)
        .split("\n\nFor more information")
        .next()
        .unwrap_or(&text);
    let said = said.split_whitespace().collect::<Vec<_>>().join(" ");
    let said = said.strip_prefix("error: ").unwrap_or(&said);
    match text.split("Usage: ").nth(1) {
        Some(usage) => {
            let command = usage
                .split_whitespace()
                .take_while(|w| !w.starts_with(['[', '<', '-']))
                .map(|w| if w.contains('/') { "loadring" } else { w })
                .collect::<Vec<_>>()
                .join(" ");
            format!("error: {said} ({command} --help lists the flags)")
        }
        None => format!("error: {said} (--help lists the flags)"),
    }
}

/// Tells the commands that the process started with its stdout (file
/// descriptor 1) closed, as in `loadring describe ... >&-`: their output
/// then fails, `error: output: stdout is closed`, exit 2, instead of going
/// nowhere with exit 0.
///
/// `src/main.rs` looks before Rust's runtime starts (on Linux; elsewhere it
/// does not look): the runtime opens `/dev/null` on a closed descriptor 0,
/// 1 or 2, after which a closed stdout cannot be told from `>/dev/null`. A
/// caller that never calls this gets output as `std::io::stdout()` takes it.
pub fn mark_stdout_closed() {
    output::mark_stdout_closed();
}

/// Prints clap's `--help` or `--version` text (`e`) on stdout: exit 0, or
/// an `output:` error line and exit 2 when it cannot be written, as a
/// command's output.
pub fn print_help(e: &clap::Error) -> ExitCode {
    let written = if output::is_stdout_closed() {
        Err(std::io::Error::other("stdout is closed"))
    } else {
        e.print()
    };
    match output::written(written) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {}", error.0);
            ExitCode::from(2)
        }
    }
}

/// Runs the command; a failure is one `error: ...` line and exit code 2
/// (1 for a TLS certificate of `loadring proxy` that cannot be loaded).
pub fn run(cli: Cli) -> ExitCode {
    let result = match cli.command {
        Command::Place(args) => place::run(args),
        Command::Describe(args) => describe::run(args),
        Command::Shell(args) => shell::run(args),
        Command::Simulate(args) => simulate::run(*args),
        #[cfg(feature = "net")]
        Command::Proxy(args) => proxy::run(*args),
        #[cfg(feature = "net")]
        Command::Register(args) => register::run(args),
        #[cfg(not(feature = "net"))]
        Command::Proxy(_) => Err(without_net::missing("proxy")),
        #[cfg(not(feature = "net"))]
        Command::Register(_) => Err(without_net::missing("register")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(CliError(msg)) => {
            eprintln!("error: {msg}");
            // The gateway's certificate that cannot be loaded at start is
            // exit 1 (its documented contract); every other failure 2.
            let tls = msg.starts_with("--tls-cert: ") || msg.starts_with("tls_cert: ");
            ExitCode::from(if tls { 1 } else { 2 })
        }
    }
}
