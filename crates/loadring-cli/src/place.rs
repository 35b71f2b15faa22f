//! `loadring place`: stream inputs to endpoints, one line each.

use std::io::{self, BufRead, BufWriter, Write};

use loadring::{Balancer, Request};

use crate::endpoints::Target;
use crate::CliError;

/// Reads one key (or, with `--codes`, one decimal request code) per line on
/// stdin and writes `<input>\t<endpoint address>` per line, in order. Each
/// line is one pick; its slot is released before the next line.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    target: Target,
    /// Inputs are decimal request codes used as is, not keys to hash.
    #[arg(long)]
    codes: bool,
    /// The zone requests come from (for zone_first and local_first).
    #[arg(long, value_name = "ZONE")]
    zone: Option<String>,
}

pub fn run(args: Args) -> Result<(), CliError> {
    let (spec, endpoints) = args.target.parse()?;
    let balancer = Balancer::new(spec, endpoints)?;
    let stdin = io::stdin().lock();
    let mut out = BufWriter::with_capacity(64 * 1024, io::stdout().lock());
    match place_all(&balancer, stdin, &mut out, args.codes, args.zone.as_deref()) {
        Ok(()) => finish(out.flush()),
        Err(Failure::Io(e)) => finish(Err(e)),
        Err(Failure::Input(msg)) => {
            finish(out.flush())?;
            Err(CliError(msg))
        }
    }
}

enum Failure {
    Io(io::Error),
    Input(String),
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Self {
        Failure::Io(e)
    }
}

/// A reader that went away (`loadring place | head`) is not an error.
fn finish(result: io::Result<()>) -> Result<(), CliError> {
    match result {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(CliError(format!("output: {e}"))),
        Ok(()) => Ok(()),
    }
}

fn place_all(
    balancer: &Balancer,
    mut input: impl BufRead,
    out: &mut impl Write,
    codes: bool,
    zone: Option<&str>,
) -> Result<(), Failure> {
    let hashing = balancer.policy().needs_key();
    let mut line = String::new();
    let mut number = 0u64;
    loop {
        line.clear();
        if input
            .read_line(&mut line)
            .map_err(|e| Failure::Input(format!("stdin: {e}")))?
            == 0
        {
            return Ok(());
        }
        number += 1;
        let text = line.strip_suffix('\n').unwrap_or(&line);
        let text = text.strip_suffix('\r').unwrap_or(text);
        let mut request = if !hashing {
            Request::new()
        } else if codes {
            let code = text.parse::<u64>().map_err(|_| {
                Failure::Input(format!(
                    "line {number}: `{text}` is not a request code: accepted a decimal integer 0..=18446744073709551615"
                ))
            })?;
            Request::code(code)
        } else {
            Request::key(text)
        };
        if let Some(zone) = zone {
            request = request.in_zone(zone);
        }
        let pick = balancer
            .pick(&request)
            .map_err(|e| Failure::Input(format!("line {number}: {e}")))?;
        out.write_all(text.as_bytes())?;
        out.write_all(b"\t")?;
        out.write_all(pick.addr().as_bytes())?;
        out.write_all(b"\n")?;
    }
}
