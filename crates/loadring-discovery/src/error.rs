//! The crate's one error: what went wrong as a kind a program can match,
//! the source at fault as an accessor, and one line for people.

use std::fmt;

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
