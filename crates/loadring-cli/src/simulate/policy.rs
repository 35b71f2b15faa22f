//! A policy as the user wrote it and as it runs: shared by the flags, the
//! scenarios and the engines, below all of them.

use loadring::PolicySpec;

/// A policy to simulate: as the user wrote it, and as it runs.
#[derive(Debug)]
pub struct Policy {
    /// The spec as given (shown in the table, the JSON and the plot).
    pub name: String,
    /// What runs: the spec, plus `seed=` from `--seed` for a randomized
    /// policy given none, so that the run replays exactly.
    pub spec: PolicySpec,
}
