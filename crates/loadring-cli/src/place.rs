//! `loadring place`: stream inputs to endpoints, one line each.

use std::io::{self, BufRead, BufWriter, Write};

use loadring::{Balancer, Request};

use crate::echo::echo_bytes;
use crate::endpoints::Target;
use crate::lines::{read_line, Line, MAX_LINE};
use crate::output::written;
use crate::CliError;

/// Reads one key (or, with `--codes`, one decimal request code) per line on
/// stdin and writes `<input>\t<endpoint address>` per line, in order. Each
/// line is one pick; its slot is released before the next line.
///
/// A key is the bytes of its line before the `\n` (any bytes, UTF-8 or not),
/// less one `\r` at its end (so CRLF files place the same keys), and is echoed
/// back byte for byte. A line holds at most 65536 bytes before its `\n`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    target: Target,
    /// Inputs are request codes used as is, not keys to hash: decimal digits
    /// only (no sign, no spaces), 0..=18446744073709551615 or the policy's range.
    #[arg(long)]
    codes: bool,
    /// The zone requests come from (for zone_first and local_first).
    #[arg(long, value_name = "ZONE")]
    zone: Option<String>,
}

pub fn run(args: Args) -> Result<(), CliError> {
    let (spec, endpoints) = args.target.parse()?;
    if let Some(zone) = &args.zone {
        // A zone only means something to a locality policy, and an endpoint
        // cannot be in the empty zone: either would be taken and do nothing.
        if spec.inner().is_none() {
            return Err(CliError(format!(
                "--zone: only with a locality policy (zone_first or local_first over another), \
                 not {}",
                spec.name()
            )));
        }
        if zone.is_empty() {
            return Err(CliError(
                "--zone: empty; give the zone requests come from".into(),
            ));
        }
    }
    let balancer = crate::endpoints::balancer(spec, endpoints)?;
    let stdin = io::BufReader::with_capacity(64 * 1024, io::stdin().lock());
    let mut out = BufWriter::with_capacity(64 * 1024, crate::output::stdout());
    match place_all(&balancer, stdin, &mut out, args.codes, args.zone.as_deref()) {
        Ok(()) => written(out.flush()),
        Err(Failure::Io(e)) => written(Err(e)),
        Err(Failure::Input(msg)) => {
            written(out.flush())?;
            Err(CliError(msg))
        }
    }
}

/// Places every line of `input` as `place` does, writing to `out`; the
/// first bad line stops it with the one-line message `place` prints after
/// `error: `. (The command's loop, for the fuzz targets.)
pub fn place_lines(
    balancer: &Balancer,
    input: impl BufRead,
    out: &mut impl Write,
    codes: bool,
    zone: Option<&str>,
) -> Result<(), String> {
    place_all(balancer, input, out, codes, zone).map_err(|failure| match failure {
        Failure::Io(e) => format!("output: {e}"),
        Failure::Input(msg) => msg,
    })
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

fn place_all(
    balancer: &Balancer,
    mut input: impl BufRead,
    out: &mut impl Write,
    codes: bool,
    zone: Option<&str>,
) -> Result<(), Failure> {
    let hashing = balancer.policy().needs_key();
    // One thread places every line, each guard dropped at once: the local
    // handle's picks skip the shared reference counts.
    let local = balancer.local();
    let mut line = Vec::new();
    let mut number = 0u64;
    loop {
        number += 1;
        let status = read_line(&mut input, &mut line, MAX_LINE)
            .map_err(|e| Failure::Input(format!("line {number}: stdin: {e}")))?;
        match status {
            Line::End => return Ok(()),
            Line::TooLong => {
                return Err(Failure::Input(format!(
                    "line {number}: longer than {MAX_LINE} bytes (the longest input line accepted)"
                )))
            }
            Line::Complete => {}
        }
        let text = line.strip_suffix(b"\r").unwrap_or(&line);
        let code = if codes {
            Some(
                request_code(text)
                    .map_err(|why| Failure::Input(format!("line {number}: {why}")))?,
            )
        } else {
            None
        };
        let mut request = match code {
            Some(code) if hashing => Request::code(code),
            _ if hashing => Request::key(text),
            _ => Request::new(),
        };
        if let Some(zone) = zone {
            request = request.in_zone(zone);
        }
        let pick = local
            .pick(&request)
            .map_err(|e| Failure::Input(format!("line {number}: {e}")))?;
        out.write_all(text)?;
        out.write_all(b"\t")?;
        out.write_all(pick.addr().as_bytes())?;
        out.write_all(b"\n")?;
    }
}

/// A request code: decimal digits only, whatever the policy (a sign, a space
/// or a letter is a mistake in the input, not a code).
fn request_code(text: &[u8]) -> Result<u64, String> {
    let digits = !text.is_empty() && text.iter().all(u8::is_ascii_digit);
    // Digits are ASCII, so the text is UTF-8 when they are all there is.
    let parsed = std::str::from_utf8(text)
        .ok()
        .filter(|_| digits)
        .map(str::parse::<u64>);
    match parsed {
        Some(Ok(code)) => Ok(code),
        _ => Err(format!(
            "`{}` is not a request code: accepted decimal digits only, 0..={}",
            echo_bytes(text),
            u64::MAX
        )),
    }
}
