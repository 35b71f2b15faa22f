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
//!
//! One style for all (regex-automata's): opaque structs, no public fields,
//! `kind()` where there are several kinds (a `#[non_exhaustive]` enum without
//! data) and an accessor for each part the message quotes.

use std::fmt;

use crate::echo::Echo;

/// What kind of [`ParseError`] it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParseErrorKind {
    /// The text is not well formed: empty, a word that is not `key=value`,
    /// a key given twice, `over` in the wrong place, an endpoint that does
    /// not start with its address.
    Syntax,
    /// No policy has this name ([`ParseError::value`]).
    UnknownPolicy,
    /// The policy (or the endpoint) has no such key ([`ParseError::key`]).
    UnknownKey,
    /// A value is not acceptable: not a number, out of range, not a prime
    /// ([`ParseError::accepted`] says what is, when it is known).
    Value,
    /// Keys or values each acceptable alone that do not go together, or a
    /// key that does not apply to this policy.
    Conflict,
}

/// A policy specification, endpoint or load factor that is not acceptable.
///
/// The message names the culprit; [`ParseError::kind`] and the accessors
/// give its parts to programs.
///
/// ```
/// use loadring::{ParseErrorKind, PolicySpec};
///
/// let err = "c_md5:replicas=0".parse::<PolicySpec>().unwrap_err();
/// assert_eq!(err.kind(), ParseErrorKind::Value);
/// assert_eq!(err.policy(), Some("c_md5"));
/// assert_eq!(err.key(), Some("replicas"));
/// assert_eq!(err.value(), Some("0"));
/// assert_eq!(err.accepted(), Some("1..=8388608"));
/// assert_eq!(err.to_string(), "c_md5: replicas=0 is out of range: accepted 1..=8388608");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// Boxed: parse errors are rare, and a `Result` that carries one stays
    /// one word wide.
    repr: Box<ParseRepr>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct ParseRepr {
    kind: ParseErrorKind,
    message: String,
    policy: Option<String>,
    key: Option<String>,
    value: Option<String>,
    accepted: Option<String>,
}

impl ParseError {
    /// An error of `kind` with its one-line message (the accessors' parts
    /// are added with the `with_` methods).
    pub(crate) fn new(kind: ParseErrorKind, message: impl Into<String>) -> Self {
        ParseError {
            repr: Box::new(ParseRepr {
                kind,
                message: message.into(),
                policy: None,
                key: None,
                value: None,
                accepted: None,
            }),
        }
    }

    pub(crate) fn with_policy(mut self, policy: &str) -> Self {
        self.repr.policy = Some(policy.to_ascii_lowercase());
        self
    }

    /// This error, said of `policy`: its message begins `policy: `, as the
    /// other errors about a policy's parameters do.
    pub(crate) fn in_policy(mut self, policy: &str) -> Self {
        let prefix = format!("{policy}: ");
        if !self.repr.message.starts_with(&prefix) {
            self.repr.message.insert_str(0, &prefix);
        }
        self.with_policy(policy)
    }

    pub(crate) fn with_key(mut self, key: &str) -> Self {
        self.repr.key = Some(key.to_string());
        self
    }

    pub(crate) fn with_value(mut self, value: &str) -> Self {
        self.repr.value = Some(value.to_string());
        self
    }

    pub(crate) fn with_accepted(mut self, accepted: impl Into<String>) -> Self {
        self.repr.accepted = Some(accepted.into());
        self
    }

    /// What kind of error it is.
    pub fn kind(&self) -> ParseErrorKind {
        self.repr.kind
    }

    /// The policy whose specification is at fault, lower-case, if known.
    pub fn policy(&self) -> Option<&str> {
        self.repr.policy.as_deref()
    }

    /// The parameter (`replicas`, `weight`, ...) at fault, if one is.
    pub fn key(&self) -> Option<&str> {
        self.repr.key.as_deref()
    }

    /// The value given for [`ParseError::key`], as written.
    pub fn value(&self) -> Option<&str> {
        self.repr.value.as_deref()
    }

    /// What would have been accepted (a range, a list of choices), if known.
    pub fn accepted(&self) -> Option<&str> {
        self.repr.accepted.as_deref()
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.repr.message)
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

/// What kind of [`PickError`] it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PickErrorKind {
    /// The balancer has no endpoints at all.
    NoEndpoints,
    /// Endpoints exist but every one is unhealthy or excluded
    /// ([`PickError::members`] says how many).
    NoEligibleEndpoint,
    /// A request code is larger than the policy's hash space
    /// ([`PickError::code`], [`PickError::max_code`], [`PickError::policy`]).
    CodeOutOfRange,
    /// A hashing policy was asked to pick without a key or a code
    /// ([`PickError::policy`]).
    MissingKey,
}

/// Why a pick found no endpoint.
///
/// [`PickError::kind`] says what went wrong, the accessors give the
/// figures the message quotes. It is small and `Copy`: a pick that fails
/// allocates nothing.
///
/// ```
/// use loadring::{Balancer, Endpoint, PickErrorKind, Request};
///
/// let balancer = Balancer::new("c_ketama".parse()?, [Endpoint::new("10.0.0.1:80")?])?;
/// let err = balancer.pick(&Request::new()).unwrap_err();
/// assert_eq!(err.kind(), PickErrorKind::MissingKey);
/// assert_eq!(err.policy(), Some("c_ketama"));
/// assert_eq!(err.to_string(), "c_ketama places requests by hash: give the request a key or a code");
/// # Ok::<(), loadring::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PickError {
    repr: PickRepr,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PickRepr {
    NoEndpoints,
    NoEligibleEndpoint {
        members: usize,
    },
    CodeOutOfRange {
        code: u64,
        policy: &'static str,
        max: u64,
    },
    MissingKey {
        policy: &'static str,
    },
}

impl PickError {
    /// The balancer has no endpoints at all.
    pub const fn no_endpoints() -> Self {
        PickError {
            repr: PickRepr::NoEndpoints,
        }
    }

    /// Every one of the `members` endpoints the policy could have chosen
    /// from is unhealthy or excluded.
    pub const fn no_eligible_endpoint(members: usize) -> Self {
        PickError {
            repr: PickRepr::NoEligibleEndpoint { members },
        }
    }

    /// Request code `code` is beyond `policy`'s hash space, whose largest
    /// code is `max`.
    pub const fn code_out_of_range(code: u64, policy: &'static str, max: u64) -> Self {
        PickError {
            repr: PickRepr::CodeOutOfRange { code, policy, max },
        }
    }

    /// Hashing policy `policy` was asked to pick without a key or a code.
    pub const fn missing_key(policy: &'static str) -> Self {
        PickError {
            repr: PickRepr::MissingKey { policy },
        }
    }

    /// What kind of error it is.
    pub fn kind(&self) -> PickErrorKind {
        match self.repr {
            PickRepr::NoEndpoints => PickErrorKind::NoEndpoints,
            PickRepr::NoEligibleEndpoint { .. } => PickErrorKind::NoEligibleEndpoint,
            PickRepr::CodeOutOfRange { .. } => PickErrorKind::CodeOutOfRange,
            PickRepr::MissingKey { .. } => PickErrorKind::MissingKey,
        }
    }

    /// How many endpoints the policy could have chosen from, for
    /// [`PickErrorKind::NoEligibleEndpoint`].
    pub fn members(&self) -> Option<usize> {
        match self.repr {
            PickRepr::NoEligibleEndpoint { members } => Some(members),
            _ => None,
        }
    }

    /// The request code as given, for [`PickErrorKind::CodeOutOfRange`].
    pub fn code(&self) -> Option<u64> {
        match self.repr {
            PickRepr::CodeOutOfRange { code, .. } => Some(code),
            _ => None,
        }
    }

    /// The largest code the policy accepts, for
    /// [`PickErrorKind::CodeOutOfRange`].
    pub fn max_code(&self) -> Option<u64> {
        match self.repr {
            PickRepr::CodeOutOfRange { max, .. } => Some(max),
            _ => None,
        }
    }

    /// The hashing policy at fault, for [`PickErrorKind::CodeOutOfRange`]
    /// and [`PickErrorKind::MissingKey`].
    pub fn policy(&self) -> Option<&'static str> {
        match self.repr {
            PickRepr::CodeOutOfRange { policy, .. } | PickRepr::MissingKey { policy } => {
                Some(policy)
            }
            _ => None,
        }
    }
}

impl fmt::Display for PickError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.repr {
            PickRepr::NoEndpoints => f.write_str("no endpoints"),
            PickRepr::NoEligibleEndpoint { members } => write!(
                f,
                "no eligible endpoint: all {members} endpoints are unhealthy or excluded"
            ),
            PickRepr::CodeOutOfRange { code, policy, max } => write!(
                f,
                "request code {code} is out of range for {policy}: accepted 0..={max}"
            ),
            PickRepr::MissingKey { policy } => write!(
                f,
                "{policy} places requests by hash: give the request a key or a code"
            ),
        }
    }
}

impl std::error::Error for PickError {}

/// An operation named an endpoint (address and tag) that is not a member.
///
/// ```
/// use loadring::{Balancer, Endpoint};
///
/// let balancer = Balancer::new("rr".parse()?, [Endpoint::new("10.0.0.1:80")?])?;
/// let err = balancer.remove("10.0.0.9:80").unwrap_err();
/// assert_eq!(err.to_string(), "unknown endpoint `10.0.0.9:80`");
/// # Ok::<(), loadring::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownEndpoint {
    id: String,
}

impl UnknownEndpoint {
    pub(crate) fn new(id: String) -> Self {
        UnknownEndpoint { id }
    }

    /// The identity that was given, written as an endpoint is (`ADDR` or
    /// `ADDR tag=TAG`).
    pub fn id(&self) -> &str {
        &self.id
    }
}

impl fmt::Display for UnknownEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown endpoint `{}`", Echo(&self.id))
    }
}

impl std::error::Error for UnknownEndpoint {}

/// What kind of [`Error`] it is: which stage failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A specification, endpoint or load factor that is not acceptable
    /// ([`Error::as_parse`]).
    Parse,
    /// A membership a policy cannot be built over ([`Error::as_build`]).
    Build,
    /// A pick that found no endpoint ([`Error::as_pick`]).
    Pick,
    /// An operation named an endpoint that is not a member
    /// ([`Error::as_unknown_endpoint`]).
    UnknownEndpoint,
}

/// Any error of this crate: its message is that of the error it holds,
/// [`Error::kind`] says which stage it comes from and the `as_` accessors
/// give that error.
///
/// ```
/// use loadring::{Balancer, Endpoint, ErrorKind};
///
/// let balancer = Balancer::new("rr".parse()?, [Endpoint::new("10.0.0.1:80")?])?;
/// let err = balancer.set_weight("10.0.0.9:80", 2).unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::UnknownEndpoint);
/// assert_eq!(err.as_unknown_endpoint().map(|e| e.id()), Some("10.0.0.9:80"));
/// assert!(err.as_build().is_none());
/// # Ok::<(), loadring::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    repr: Repr,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Repr {
    Parse(ParseError),
    Build(BuildError),
    Pick(PickError),
    UnknownEndpoint(UnknownEndpoint),
}

impl Error {
    /// Which stage the error comes from.
    pub fn kind(&self) -> ErrorKind {
        match self.repr {
            Repr::Parse(_) => ErrorKind::Parse,
            Repr::Build(_) => ErrorKind::Build,
            Repr::Pick(_) => ErrorKind::Pick,
            Repr::UnknownEndpoint(_) => ErrorKind::UnknownEndpoint,
        }
    }

    /// The parse error, for [`ErrorKind::Parse`].
    pub fn as_parse(&self) -> Option<&ParseError> {
        match &self.repr {
            Repr::Parse(e) => Some(e),
            _ => None,
        }
    }

    /// The build error, for [`ErrorKind::Build`].
    pub fn as_build(&self) -> Option<&BuildError> {
        match &self.repr {
            Repr::Build(e) => Some(e),
            _ => None,
        }
    }

    /// The pick error, for [`ErrorKind::Pick`].
    pub fn as_pick(&self) -> Option<&PickError> {
        match &self.repr {
            Repr::Pick(e) => Some(e),
            _ => None,
        }
    }

    /// The unknown endpoint, for [`ErrorKind::UnknownEndpoint`].
    pub fn as_unknown_endpoint(&self) -> Option<&UnknownEndpoint> {
        match &self.repr {
            Repr::UnknownEndpoint(e) => Some(e),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            Repr::Parse(e) => e.fmt(f),
            Repr::Build(e) => e.fmt(f),
            Repr::Pick(e) => e.fmt(f),
            Repr::UnknownEndpoint(e) => e.fmt(f),
        }
    }
}

/// The message is the held error's, so it is not repeated as a source.
impl std::error::Error for Error {}

impl From<ParseError> for Error {
    fn from(e: ParseError) -> Self {
        Error {
            repr: Repr::Parse(e),
        }
    }
}

impl From<BuildError> for Error {
    fn from(e: BuildError) -> Self {
        Error {
            repr: Repr::Build(e),
        }
    }
}

impl From<PickError> for Error {
    fn from(e: PickError) -> Self {
        Error {
            repr: Repr::Pick(e),
        }
    }
}

impl From<UnknownEndpoint> for Error {
    fn from(e: UnknownEndpoint) -> Self {
        Error {
            repr: Repr::UnknownEndpoint(e),
        }
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_endpoint_is_echoed_cut_and_escaped() {
        let long = format!("{} tag=x", "a".repeat(5000));
        let err = UnknownEndpoint::new(long.clone());
        assert_eq!(
            err.to_string(),
            "unknown endpoint `aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa... (5006 characters)`"
        );
        assert_eq!(err.id(), long, "the accessor keeps it whole");
        assert_eq!(
            UnknownEndpoint::new("a\x1b[2J".into()).to_string(),
            "unknown endpoint `a\\u{1b}[2J`"
        );
    }
}
