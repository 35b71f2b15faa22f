//! The plot's format, named by the file's extension, and the check that the
//! file can be written, made before the run so that a long run does not end
//! in an error.

use std::path::{Path, PathBuf};

use crate::echo::echo;
use crate::CliError;

/// Plot formats by file extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlotFormat {
    Svg,
    Png,
}

/// The plot's file and format, checked before the run: a known extension
/// and a place the file can be written.
pub fn plot_target(path: &Path) -> Result<(PathBuf, PlotFormat), CliError> {
    let shown = echo(&path.display().to_string());
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let format = match ext.as_deref() {
        Some("svg") => PlotFormat::Svg,
        Some("png") => PlotFormat::Png,
        _ => {
            return Err(CliError(format!(
                "--plot {shown}: the file name must end in .svg or .png"
            )))
        }
    };
    if path.is_dir() {
        return Err(CliError(format!(
            "--plot {shown}: is a directory; give a file name ending in .svg or .png"
        )));
    }
    // Open for writing without truncating, and remove the file again if the
    // check created it: the run has not produced anything yet.
    let existed = path.exists();
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| CliError(format!("--plot {shown}: cannot write the plot there: {e}")))?;
    if !existed {
        let _ = std::fs::remove_file(path);
    }
    Ok((path.to_path_buf(), format))
}
