//! `proxy` and `register` in a build without the `net` feature (the quick
//! start's `--no-default-features`): the subcommands stay known, so that
//! asking for one says how to get it instead of "unrecognized subcommand".

use crate::CliError;

/// Whatever follows the subcommand: taken as it is, never interpreted.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    _rest: Vec<String>,
}

/// The one-line error for subcommand `name`, with the command that builds it.
pub fn missing(name: &str) -> CliError {
    CliError(format!(
        "`loadring {name}` is not in this build (made with --no-default-features): \
         build the full tool with `cargo install --path crates/loadring-cli` \
         or run `cargo run --release -p loadring-cli -- {name} ...`"
    ))
}
