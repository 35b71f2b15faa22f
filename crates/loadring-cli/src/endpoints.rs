//! The endpoint and policy options shared by `place` and `describe`, and
//! the endpoint reading that `simulate` shares with them.

use std::path::{Path, PathBuf};

use loadring::{Balancer, Endpoint, PolicySpec};

use crate::CliError;

/// `--policy SPEC`, `-e ENDPOINT...`, `--endpoints FILE`.
#[derive(clap::Args, Debug)]
pub struct Target {
    /// The policy, e.g. `c_murmurhash`, `maglev:table_size=65537`, `c_murmurhash_bl:load_factor=1.25`.
    #[arg(long, short = 'p', value_name = "SPEC")]
    pub policy: String,
    /// An endpoint: `ADDR[ weight=W][ tag=T][ zone=Z][ hash_key=K]` (repeatable).
    #[arg(long = "endpoint", short = 'e', value_name = "ENDPOINT")]
    pub endpoint: Vec<String>,
    /// A file with one endpoint per line (blank lines and lines starting with `#` ignored).
    #[arg(long, value_name = "FILE")]
    pub endpoints: Option<PathBuf>,
}

impl Target {
    /// The parsed policy and endpoints, or the first problem as one line.
    pub fn parse(&self) -> Result<(PolicySpec, Vec<Endpoint>), CliError> {
        let spec: PolicySpec = self
            .policy
            .parse()
            .map_err(|e| CliError(format!("--policy: {e}")))?;
        let endpoints = read(&self.endpoint, self.endpoints.as_deref())?;
        if endpoints.is_empty() {
            return Err(CliError(
                "no endpoints: give -e ENDPOINT (repeatable) or --endpoints FILE".into(),
            ));
        }
        Ok((spec, endpoints))
    }
}

/// The balancer of `spec` over `endpoints`. A problem with the policy found
/// while building it (a Maglev table smaller than the pool) carries the
/// `--policy:` prefix of the problems found while parsing it.
pub fn balancer(spec: PolicySpec, endpoints: Vec<Endpoint>) -> Result<Balancer, CliError> {
    Balancer::new(spec, endpoints).map_err(|e| match e.kind() {
        loadring::BuildErrorKind::TooLarge => CliError(format!("--policy: {e}")),
        _ => CliError(e.to_string()),
    })
}

/// The endpoints of `-e TEXT...` then of `--endpoints FILE` (one per line,
/// blank lines and lines starting with `#` ignored), in order; the first bad one is a
/// one-line error naming the flag (and the file's line).
pub fn read(texts: &[String], file: Option<&Path>) -> Result<Vec<Endpoint>, CliError> {
    read_at_most(texts, file, MAX_ENDPOINTS)
}

/// The most endpoints the commands take, as the proxy's files: 1,048,576.
/// Each costs a balancer some hundreds of bytes, so a file of short lines
/// under [`MAX_FILE_BYTES`] could otherwise take gigabytes.
const MAX_ENDPOINTS: usize = 1 << 20;

/// [`read`], with at most `most` endpoints.
fn read_at_most(
    texts: &[String],
    file: Option<&Path>,
    most: usize,
) -> Result<Vec<Endpoint>, CliError> {
    let mut endpoints = Vec::new();
    for text in texts {
        endpoints.push(
            text.parse::<Endpoint>()
                .map_err(|e| CliError(format!("-e: {e}")))?,
        );
    }
    if let Some(path) = file {
        let content = read_bounded(path)
            .map_err(|e| CliError(format!("--endpoints {}: {e}", path.display())))?;
        // A byte order mark (some editors write one) is not part of the
        // first line.
        let content = content.strip_prefix('\u{feff}').unwrap_or(&content);
        for (n, line) in content.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if endpoints.len() >= most {
                return Err(CliError(format!(
                    "--endpoints {} line {}: one endpoint more than the {most} a command takes",
                    path.display(),
                    n + 1
                )));
            }
            let endpoint = line.parse::<Endpoint>().map_err(|e| {
                CliError(format!(
                    "--endpoints {} line {}: {e}",
                    path.display(),
                    n + 1
                ))
            })?;
            endpoints.push(endpoint);
        }
    }
    Ok(endpoints)
}

/// The most an endpoints file may hold, as for the proxy's: 16 MiB.
const MAX_FILE_BYTES: u64 = 16 << 20;

/// The text of the file at `path`, refused past [`MAX_FILE_BYTES`] (a
/// device such as `/dev/zero`, a log file named by mistake) rather than
/// read until memory runs out. The proxy's reader does the same
/// (`loadring_discovery::read_text`); this one is the CLI's own because
/// `place`, `describe` and `simulate` build without the networked crates.
fn read_bounded(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "more than {} MiB: not a file to read whole",
                MAX_FILE_BYTES >> 20
            ),
        ));
    }
    String::from_utf8(bytes).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not UTF-8 text (byte {})", e.utf8_error().valid_up_to()),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_endpoint_more_than_the_most_is_an_error_naming_its_line() {
        let path = std::env::temp_dir().join(format!("loadring-most-{}.txt", std::process::id()));
        std::fs::write(&path, "10.0.0.2:80\n# two\n10.0.0.3:80\n").unwrap();
        let given = ["10.0.0.1:80".to_string()];
        assert_eq!(read_at_most(&given, Some(&path), 3).unwrap().len(), 3);
        let err = read_at_most(&given, Some(&path), 2).unwrap_err();
        assert_eq!(
            err.0,
            format!(
                "--endpoints {} line 3: one endpoint more than the 2 a command takes",
                path.display()
            )
        );
        std::fs::remove_file(path).unwrap();
    }
}
