//! What a command makes of writing its output: a reader that went away
//! early (`loadring place | head`) ends it quietly; any other failure (a
//! full disk, a closed stdout) is an error, `output: ...`, exit 2.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::CliError;

/// Whether file descriptor 1 was closed when the process started (see
/// [`crate::mark_stdout_closed`]).
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

pub(crate) fn mark_stdout_closed() {
    STDOUT_CLOSED.store(true, Ordering::Relaxed);
}

/// Whether the process started with its stdout closed.
pub(crate) fn is_stdout_closed() -> bool {
    STDOUT_CLOSED.load(Ordering::Relaxed)
}

/// The commands' standard output: `std::io::stdout()`, except that every
/// write fails when the process started with its stdout closed (Rust's
/// runtime then puts `/dev/null` in its place, and its stdout takes a
/// closed descriptor's `EBADF` for success besides: either way the output
/// would be thrown away unseen). Writing nothing is no error, as with
/// coreutils.
pub(crate) fn stdout() -> Stdout {
    Stdout(io::stdout().lock())
}

pub(crate) struct Stdout(io::StdoutLock<'static>);

fn closed() -> io::Error {
    io::Error::other("stdout is closed")
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if STDOUT_CLOSED.load(Ordering::Relaxed) {
            return Err(closed());
        }
        self.0.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

/// `result` of writing the output, as the command's.
pub(crate) fn written(result: io::Result<()>) -> Result<(), CliError> {
    match result {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(CliError(format!("output: {e}"))),
        Ok(()) => Ok(()),
    }
}
