//! The crate's errors, in the core's style (regex-automata's): opaque
//! structs, no public fields, `kind()` where several things can go wrong
//! and an accessor for each part the one-line message names.
//!
//! * [`DiscoveryError`]: a bad source spec, a source that cannot start or
//!   a read that keeps the current membership, a registration that cannot
//!   begin;
//! * [`EndpointLineError`]: a line of an endpoints text that is not an
//!   endpoint, or whose endpoint the consumer's check refuses;
//! * [`EndpointRejected`]: what an [`EndpointCheck`](crate::EndpointCheck)
//!   says of an endpoint it refuses.

use std::fmt;

use loadring::{Endpoint, ParseError};

/// What kind of [`DiscoveryError`] it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DiscoveryErrorKind {
    /// A source spec that does not parse (`zk://x`, `dns://name` without a
    /// port, ...).
    Spec,
    /// A source with no first membership: an unreadable file or a bad
    /// line, a name that does not resolve, etcd unreachable, or a first
    /// membership that fails the consumer's check.
    Start,
    /// [`etcd::register`](crate::etcd::register) cannot register: a lease
    /// under 1 s, or etcd unreachable at the start.
    Register,
    /// A read after the start found a problem (an unreadable file, a bad
    /// line, a failed lookup, etcd down, an endpoint failing the check):
    /// the current membership stays ([`ReadOutcome::Kept`](crate::ReadOutcome::Kept)).
    Read,
}

/// A bad source spec, a source that cannot start, or a registration that
/// cannot begin: one line naming the culprit.
///
/// ```
/// use loadring_discovery::{DiscoveryErrorKind, SourceSpec};
///
/// let err = "zk://x".parse::<SourceSpec>().unwrap_err();
/// assert_eq!(err.kind(), DiscoveryErrorKind::Spec);
/// assert_eq!(err.spec(), Some("zk://x"));
/// assert!(err.to_string().starts_with("`zk://x`: unknown source"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveryError {
    kind: DiscoveryErrorKind,
    spec: Option<String>,
    message: String,
}

impl DiscoveryError {
    pub(crate) fn new(
        kind: DiscoveryErrorKind,
        spec: Option<&str>,
        message: impl Into<String>,
    ) -> Self {
        DiscoveryError {
            kind,
            spec: spec.map(str::to_string),
            message: message.into(),
        }
    }

    /// What kind of error it is.
    pub fn kind(&self) -> DiscoveryErrorKind {
        self.kind
    }

    /// The source spec at fault, as written (for [`DiscoveryErrorKind::Spec`])
    /// or as shown (`file:PATH`, `dns://NAME:PORT`, ...), when one is.
    pub fn spec(&self) -> Option<&str> {
        self.spec.as_deref()
    }
}

impl fmt::Display for DiscoveryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for DiscoveryError {}

/// What an [`EndpointCheck`](crate::EndpointCheck) says of an endpoint it
/// refuses: the endpoint and why, shown as "endpoint `ADDR`: why".
///
/// ```
/// use loadring::Endpoint;
/// use loadring_discovery::EndpointRejected;
///
/// let endpoint: Endpoint = "10.0.0.2:0".parse()?;
/// let err = EndpointRejected::new(&endpoint, "port 0");
/// assert_eq!(err.endpoint().addr(), "10.0.0.2:0");
/// assert_eq!(err.reason(), "port 0");
/// assert_eq!(err.to_string(), "endpoint `10.0.0.2:0`: port 0");
/// # Ok::<(), loadring::ParseError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointRejected {
    /// Boxed: a `Result` carrying one stays one word wide.
    repr: Box<(Endpoint, String)>,
}

impl EndpointRejected {
    /// `endpoint` refused for `reason` (one line, without the endpoint:
    /// the message names it).
    pub fn new(endpoint: &Endpoint, reason: impl Into<String>) -> Self {
        EndpointRejected {
            repr: Box::new((endpoint.clone(), reason.into())),
        }
    }

    /// The endpoint refused.
    pub fn endpoint(&self) -> &Endpoint {
        &self.repr.0
    }

    /// Why, as the check said it.
    pub fn reason(&self) -> &str {
        &self.repr.1
    }
}

impl fmt::Display for EndpointRejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "endpoint `{}`: {}", self.repr.0.addr(), self.repr.1)
    }
}

impl std::error::Error for EndpointRejected {}

/// What kind of [`EndpointLineError`] it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EndpointLineErrorKind {
    /// The line is not an endpoint ([`EndpointLineError::parse_error`]
    /// says why).
    Syntax,
    /// The line is an endpoint the check refuses
    /// ([`EndpointLineError::rejected`]).
    Rejected,
    /// The line is one endpoint more than a membership may have
    /// ([`MAX_ENDPOINTS`](crate::MAX_ENDPOINTS)).
    TooMany,
}

/// A line of an endpoints text ([`parse_endpoints`](crate::parse_endpoints))
/// that is not acceptable, shown as "line N: why".
///
/// ```
/// use loadring_discovery::{parse_endpoints, EndpointLineErrorKind};
///
/// let err = parse_endpoints("# pool\n10.0.0.1:80\n10.0.0.2:80 weight=x\n").unwrap_err();
/// assert_eq!(err.kind(), EndpointLineErrorKind::Syntax);
/// assert_eq!(err.line(), 3);
/// assert!(err.to_string().starts_with("line 3: "));
/// assert_eq!(err.parse_error().map(|e| e.key()), Some(Some("weight")));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointLineError {
    line: usize,
    repr: Box<LineRepr>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum LineRepr {
    Syntax(ParseError),
    Rejected(EndpointRejected),
    TooMany(usize),
}

impl EndpointLineError {
    pub(crate) fn not_an_endpoint(line: usize, e: ParseError) -> Self {
        EndpointLineError {
            line,
            repr: Box::new(LineRepr::Syntax(e)),
        }
    }

    pub(crate) fn refused(line: usize, e: EndpointRejected) -> Self {
        EndpointLineError {
            line,
            repr: Box::new(LineRepr::Rejected(e)),
        }
    }

    pub(crate) fn too_many(line: usize, most: usize) -> Self {
        EndpointLineError {
            line,
            repr: Box::new(LineRepr::TooMany(most)),
        }
    }

    /// What kind of error it is.
    pub fn kind(&self) -> EndpointLineErrorKind {
        match *self.repr {
            LineRepr::Syntax(_) => EndpointLineErrorKind::Syntax,
            LineRepr::Rejected(_) => EndpointLineErrorKind::Rejected,
            LineRepr::TooMany(_) => EndpointLineErrorKind::TooMany,
        }
    }

    /// The line at fault, counted from 1.
    pub fn line(&self) -> usize {
        self.line
    }

    /// Why the line is not an endpoint, for [`EndpointLineErrorKind::Syntax`].
    pub fn parse_error(&self) -> Option<&ParseError> {
        match &*self.repr {
            LineRepr::Syntax(e) => Some(e),
            _ => None,
        }
    }

    /// The check's refusal, for [`EndpointLineErrorKind::Rejected`].
    pub fn rejected(&self) -> Option<&EndpointRejected> {
        match &*self.repr {
            LineRepr::Rejected(e) => Some(e),
            _ => None,
        }
    }
}

impl fmt::Display for EndpointLineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &*self.repr {
            LineRepr::Syntax(e) => write!(f, "line {}: {e}", self.line),
            LineRepr::Rejected(e) => write!(f, "line {}: {e}", self.line),
            LineRepr::TooMany(most) => write!(
                f,
                "line {}: one endpoint more than the {most} a membership may have",
                self.line
            ),
        }
    }
}

impl std::error::Error for EndpointLineError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &*self.repr {
            LineRepr::Syntax(e) => Some(e),
            LineRepr::Rejected(e) => Some(e),
            LineRepr::TooMany(_) => None,
        }
    }
}
