//! The one error type of the library.
//!
//! Every message names the culprit (a key, an endpoint, a value) and, where a
//! range applies, the range that is accepted, so that a command line can print
//! it as a single line.

use thiserror::Error;

/// Everything that can go wrong when parsing, building or picking.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum Error {
    /// A policy specification or one of its parameters is not acceptable.
    #[error("{0}")]
    Spec(String),
    /// An endpoint description is not acceptable.
    #[error("{0}")]
    Endpoint(String),
    /// The balancer has no endpoints at all.
    #[error("no endpoints")]
    NoEndpoints,
    /// Every endpoint has weight 0, so none can ever be picked.
    #[error("every endpoint has weight 0; at least one needs a weight of 1 or more")]
    AllWeightsZero,
    /// Endpoints exist but every one is unhealthy or excluded by the request.
    #[error("no eligible endpoint: all {members} endpoints are unhealthy or excluded")]
    NoEligibleEndpoint {
        /// How many endpoints the policy could have chosen from.
        members: usize,
    },
    /// A request code is larger than the policy's hash space.
    #[error("request code {code} is out of range for {policy}: accepted 0..={max}")]
    CodeOutOfRange {
        /// The code as given.
        code: u64,
        /// The policy whose range it exceeds.
        policy: &'static str,
        /// The largest accepted code.
        max: u64,
    },
    /// A hashing policy was asked to pick without a key or a code.
    #[error("{policy} places requests by hash: give the request a key or a code")]
    MissingKey {
        /// The hashing policy.
        policy: &'static str,
    },
    /// An operation named an endpoint that is not a member.
    #[error("unknown endpoint `{0}`")]
    UnknownEndpoint(String),
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

pub(crate) fn spec_err(msg: impl Into<String>) -> Error {
    Error::Spec(msg.into())
}
