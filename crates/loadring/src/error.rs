//! The errors of the library, one type per stage.
//!
//! * [`ParseError`]: a policy specification, an endpoint or a load factor
//!   that is not acceptable, with the key, the value and what is accepted;
//! * [`BuildError`]: a membership a policy cannot be built over;
//! * [`PickError`]: why a pick found nothing, the only errors a caller on
//!   the request path has to handle;
//! * [`UnknownEndpoint`]: an operation named an endpoint that is not a member.
//!
//! [`Error`] is any of them, for code that does several stages at once (and
//! `?` converts each into it). Every message is one line that names the
//! culprit and, where a range applies, the range that is accepted.

use std::fmt;

use thiserror::Error;

/// A policy specification, endpoint or load factor that is not acceptable.
///
/// The message names the culprit; the accessors give its parts to programs.
///
/// ```
/// use loadring::PolicySpec;
///
/// let err = "c_md5:replicas=0".parse::<PolicySpec>().unwrap_err();
/// assert_eq!(err.policy(), Some("c_md5"));
/// assert_eq!(err.key(), Some("replicas"));
/// assert_eq!(err.value(), Some("0"));
/// assert_eq!(err.accepted(), Some("1..=8388608"));
/// assert_eq!(err.to_string(), "c_md5: replicas=0 is out of range: accepted 1..=8388608");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    message: String,
    policy: Option<String>,
    key: Option<String>,
    value: Option<String>,
    accepted: Option<String>,
}

impl ParseError {
    /// An error with only a message.
    pub(crate) fn new(message: impl Into<String>) -> Self {
        ParseError {
            message: message.into(),
            policy: None,
            key: None,
            value: None,
            accepted: None,
        }
    }

    pub(crate) fn with_policy(mut self, policy: &str) -> Self {
        self.policy = Some(policy.to_ascii_lowercase());
        self
    }

    pub(crate) fn with_key(mut self, key: &str) -> Self {
        self.key = Some(key.to_string());
        self
    }

    pub(crate) fn with_value(mut self, value: &str) -> Self {
        self.value = Some(value.to_string());
        self
    }

    pub(crate) fn with_accepted(mut self, accepted: impl Into<String>) -> Self {
        self.accepted = Some(accepted.into());
        self
    }

    /// The policy whose specification is at fault, lower-case, if known.
    pub fn policy(&self) -> Option<&str> {
        self.policy.as_deref()
    }

    /// The parameter (`replicas`, `weight`, ...) at fault, if one is.
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// The value given for [`ParseError::key`], as written.
    pub fn value(&self) -> Option<&str> {
        self.value.as_deref()
    }

    /// What would have been accepted (a range, a list of choices), if known.
    pub fn accepted(&self) -> Option<&str> {
        self.accepted.as_deref()
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ParseError {}

/// What kind of [`BuildError`] it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuildErrorKind {
    /// Every endpoint has weight 0, so none could ever be picked.
    AllWeightsZero,
    /// Two endpoints share an identity (address and tag) but differ otherwise.
    Conflict,
    /// The policy's structure would exceed a limit (ring points, table size).
    TooLarge,
    /// An endpoint attribute the policy needs is not acceptable to it.
    Endpoint,
}

/// A membership a policy cannot be built over.
///
/// ```
/// use loadring::{Balancer, BuildErrorKind, Endpoint};
///
/// let zero = Endpoint::new("10.0.0.1:80")?.with_weight(0);
/// let err = Balancer::new("rr".parse()?, [zero]).unwrap_err();
/// assert_eq!(err.kind(), BuildErrorKind::AllWeightsZero);
/// # Ok::<(), loadring::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildError {
    kind: BuildErrorKind,
    message: String,
}

impl BuildError {
    /// An error of `kind` with its one-line message.
    pub fn new(kind: BuildErrorKind, message: impl Into<String>) -> Self {
        BuildError {
            kind,
            message: message.into(),
        }
    }

    pub(crate) fn all_weights_zero() -> Self {
        BuildError::new(
            BuildErrorKind::AllWeightsZero,
            "every endpoint has weight 0; at least one needs a weight of 1 or more",
        )
    }

    pub(crate) fn too_large(message: impl Into<String>) -> Self {
        BuildError::new(BuildErrorKind::TooLarge, message)
    }

    /// What kind of error it is.
    pub fn kind(&self) -> BuildErrorKind {
        self.kind
    }
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for BuildError {}

/// Why a pick found no endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum PickError {
    /// The balancer has no endpoints at all.
    #[error("no endpoints")]
    NoEndpoints,
    /// Endpoints exist but every one is unhealthy or excluded.
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
}

/// An operation named an endpoint (address and tag) that is not a member.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unknown endpoint `{0}`")]
pub struct UnknownEndpoint(pub String);

/// Any error of this crate.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum Error {
    /// A specification, endpoint or load factor that is not acceptable.
    #[error(transparent)]
    Parse(#[from] ParseError),
    /// A membership a policy cannot be built over.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// A pick that found no endpoint.
    #[error(transparent)]
    Pick(#[from] PickError),
    /// An operation named an endpoint that is not a member.
    #[error(transparent)]
    UnknownEndpoint(#[from] UnknownEndpoint),
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A parse error with only a message (the key-less cases).
pub(crate) fn spec_err(msg: impl Into<String>) -> ParseError {
    ParseError::new(msg)
}
