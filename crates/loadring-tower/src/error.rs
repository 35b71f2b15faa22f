//! The service's error: no endpoint could be picked, or the endpoint failed.

use std::fmt;

use loadring::{Endpoint, PickError};

/// A type-erased error, as tower uses them.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why a request through [`LoadRing`](crate::LoadRing) failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// No endpoint could be picked: none at all, or every one unhealthy or
    /// excluded (a retry that tried them all).
    Pick(PickError),
    /// The request had no key and the service was told to reject keyless
    /// requests ([`Keyless::Reject`](crate::Keyless::Reject)).
    MissingKey,
    /// The picked endpoint's service failed (while getting ready or serving
    /// the request).
    Endpoint {
        /// The endpoint that failed; a retry excludes it (see
        /// [`RetryNext`](crate::RetryNext)).
        endpoint: Endpoint,
        /// The endpoint service's own error.
        source: BoxError,
    },
}

impl Error {
    /// The endpoint that failed, for errors of the endpoint's service.
    pub fn endpoint(&self) -> Option<&Endpoint> {
        match self {
            Error::Endpoint { endpoint, .. } => Some(endpoint),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Pick(e) => write!(f, "no endpoint picked: {e}"),
            Error::MissingKey => {
                f.write_str("the request has no key and keyless requests are rejected")
            }
            Error::Endpoint { endpoint, source } => {
                write!(f, "endpoint {} failed: {source}", endpoint.addr())
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Pick(e) => Some(e),
            Error::MissingKey => None,
            Error::Endpoint { source, .. } => Some(&**source),
        }
    }
}

impl From<PickError> for Error {
    fn from(e: PickError) -> Self {
        Error::Pick(e)
    }
}
