//! Retries on the next candidate, composing with `tower::retry::Retry`.

use std::future::{ready, Ready};

use loadring::Endpoint;
use tower::retry::Policy;

use crate::completion::Served;
use crate::error::Error;

/// Requests that can name the endpoints earlier attempts already tried; the
/// service excludes them from the pick (the pick walks on to the next
/// candidate: the ring successor for hashing policies).
///
/// Implemented for `http::Request<B>`, which carries them as a [`Tried`]
/// extension. Request types that are never retried implement it with the
/// default method: `impl loadring_tower::Exclusions for MyRequest {}`.
pub trait Exclusions {
    /// The endpoints to exclude; none by default.
    fn tried(&self) -> &[Endpoint] {
        &[]
    }
}

impl<B> Exclusions for http::Request<B> {
    #[inline]
    fn tried(&self) -> &[Endpoint] {
        self.extensions()
            .get::<Tried>()
            .map_or(&[], |t| t.0.as_slice())
    }
}

impl Exclusions for String {}
impl Exclusions for &'static str {}
impl Exclusions for Vec<u8> {}
impl Exclusions for u64 {}
impl Exclusions for () {}

/// The endpoints earlier attempts of an HTTP request went to, in its
/// extensions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tried(pub Vec<Endpoint>);

/// A `tower::retry::Policy` that retries an HTTP request on the next
/// candidate: after an endpoint error (an [`Error`] of kind [`Endpoint`](crate::ErrorKind::Endpoint)) or a `5xx`
/// response marked [`Served`] (see
/// [`LoadRing::hold_until_body_end`](crate::LoadRing::hold_until_body_end)),
/// the endpoint that failed joins the request's [`Tried`] extension, and
/// the next attempt's pick excludes it. For hashing policies the next
/// attempt goes to the key's ring successor (or further on, under bounded
/// load); errors that name no endpoint (nothing left to pick) are not
/// retried.
///
/// Requests are cloned before each attempt, so their body must be `Clone`
/// (`Full<Bytes>`, `String`, `()`); each request gets up to `retries` more
/// attempts (at most the number of endpoints minus one is useful).
///
/// ```
/// use loadring_tower::RetryNext;
/// use tower::retry::RetryLayer;
///
/// let layer = RetryLayer::new(RetryNext::new(2)); // the owner, then two successors
/// # let _ = layer;
/// ```
#[derive(Debug, Clone, Copy)]
pub struct RetryNext {
    retries: usize,
}

impl RetryNext {
    /// A policy allowing each request `retries` retries.
    pub fn new(retries: usize) -> Self {
        RetryNext { retries }
    }
}

impl<B: Clone, RB> Policy<http::Request<B>, http::Response<RB>, Error> for RetryNext {
    type Future = Ready<()>;

    fn retry(
        &mut self,
        req: &mut http::Request<B>,
        result: &mut Result<http::Response<RB>, Error>,
    ) -> Option<Self::Future> {
        if self.retries == 0 {
            return None;
        }
        let failed = match result {
            Err(e) => e.endpoint()?.clone(),
            Ok(response) if response.status().is_server_error() => {
                response.extensions().get::<Served>()?.0.clone()
            }
            Ok(_) => return None,
        };
        self.retries -= 1;
        req.extensions_mut()
            .get_or_insert_default::<Tried>()
            .0
            .push(failed);
        Some(ready(()))
    }

    fn clone_request(&mut self, req: &http::Request<B>) -> Option<http::Request<B>> {
        if self.retries == 0 {
            return None;
        }
        let mut clone = http::Request::new(req.body().clone());
        *clone.method_mut() = req.method().clone();
        *clone.uri_mut() = req.uri().clone();
        *clone.version_mut() = req.version();
        *clone.headers_mut() = req.headers().clone();
        *clone.extensions_mut() = req.extensions().clone();
        Some(clone)
    }
}
