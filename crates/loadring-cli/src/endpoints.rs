//! The endpoint and policy options shared by `place` and `describe`.

use std::path::PathBuf;

use loadring::{Endpoint, PolicySpec};

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
    /// A file with one endpoint per line (blank lines and `#` comments ignored).
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
        let mut endpoints = Vec::new();
        for text in &self.endpoint {
            endpoints.push(
                text.parse::<Endpoint>()
                    .map_err(|e| CliError(format!("-e: {e}")))?,
            );
        }
        if let Some(path) = &self.endpoints {
            let file = std::fs::read_to_string(path)
                .map_err(|e| CliError(format!("--endpoints {}: {e}", path.display())))?;
            for (n, line) in file.lines().enumerate() {
                let line = line.trim();
                if line.is_empty() || line.starts_with('#') {
                    continue;
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
        if endpoints.is_empty() {
            return Err(CliError(
                "no endpoints: give -e ENDPOINT (repeatable) or --endpoints FILE".into(),
            ));
        }
        Ok((spec, endpoints))
    }
}
