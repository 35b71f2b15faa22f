//! The service's error: no endpoint could be picked, or the endpoint failed.

use std::fmt;

use loadring::{Endpoint, PickError};

/// A type-erased error, as tower uses them.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What kind of [`Error`] it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// No endpoint could be picked: none at all, or every one unhealthy or
    /// excluded (a retry that tried them all); [`Error::pick_error`] says
    /// which.
    Pick,
    /// The request had no key and the service was told to reject keyless
    /// requests ([`Keyless::Reject`](crate::Keyless::Reject)).
    MissingKey,
    /// The picked endpoint's service failed (while getting ready or serving
    /// the request): [`Error::endpoint`] is the endpoint, and the endpoint
    /// service's own error is the [source](std::error::Error::source). A
    /// retry excludes that endpoint (see [`RetryNext`](crate::RetryNext)).
    Endpoint,
}

/// Why a request through [`LoadRing`](crate::LoadRing) failed.
///
/// One style with the core's errors: opaque, with [`Error::kind`] and an
/// accessor for each part.
#[derive(Debug)]
pub struct Error {
    repr: Repr,
}

#[derive(Debug)]
enum Repr {
    Pick(PickError),
    MissingKey,
    Endpoint {
        endpoint: Endpoint,
        source: BoxError,
    },
}

impl Error {
    /// A keyless request refused ([`ErrorKind::MissingKey`]).
    pub(crate) fn missing_key() -> Self {
        Error {
            repr: Repr::MissingKey,
        }
    }

    /// `endpoint`'s service failed with `source` ([`ErrorKind::Endpoint`]).
    pub(crate) fn endpoint_failed(endpoint: Endpoint, source: BoxError) -> Self {
        Error {
            repr: Repr::Endpoint { endpoint, source },
        }
    }

    /// What kind of error it is.
    pub fn kind(&self) -> ErrorKind {
        match self.repr {
            Repr::Pick(_) => ErrorKind::Pick,
            Repr::MissingKey => ErrorKind::MissingKey,
            Repr::Endpoint { .. } => ErrorKind::Endpoint,
        }
    }

    /// Why no endpoint was picked, for [`ErrorKind::Pick`].
    pub fn pick_error(&self) -> Option<&PickError> {
        match &self.repr {
            Repr::Pick(e) => Some(e),
            _ => None,
        }
    }

    /// The endpoint that failed, for errors of the endpoint's service.
    pub fn endpoint(&self) -> Option<&Endpoint> {
        match &self.repr {
            Repr::Endpoint { endpoint, .. } => Some(endpoint),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            Repr::Pick(e) => write!(f, "no endpoint picked: {e}"),
            Repr::MissingKey => {
                f.write_str("the request has no key and keyless requests are rejected")
            }
            Repr::Endpoint { endpoint, source } => {
                write!(f, "endpoint {} failed: {source}", endpoint.addr())
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.repr {
            Repr::Pick(e) => Some(e),
            Repr::MissingKey => None,
            Repr::Endpoint { source, .. } => Some(&**source),
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
