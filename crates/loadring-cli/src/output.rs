//! What a command makes of writing its output: a reader that went away
//! early (`loadring place | head`) ends it quietly; any other failure (a
//! full disk) is an error, `output: ...`, exit 2.

use std::io;

use crate::CliError;

/// `result` of writing the output, as the command's.
pub(crate) fn written(result: io::Result<()>) -> Result<(), CliError> {
    match result {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(CliError(format!("output: {e}"))),
        Ok(()) => Ok(()),
    }
}
