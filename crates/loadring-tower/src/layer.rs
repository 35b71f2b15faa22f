//! A `Layer` that balances one HTTP client over several hosts.

use std::fmt;
use std::task::{Context, Poll};

use http::uri::{Authority, Scheme, Uri};
use loadring::{Balancer, Endpoint, PolicySpec};
use tower_layer::Layer;
use tower_service::Service;

use crate::completion::{OnBodyEnd, OnResponse};
use crate::error::BoxError;
use crate::report::WithReport;
use crate::service::{Keyless, LoadRing};

/// An HTTP client service bound to one endpoint: it sends each request to
/// the endpoint's address (scheme `http` unless the request names one;
/// path and query kept), through a clone of `inner`.
///
/// One pooled client (hyper-util's `Client`) shared by every endpoint, each
/// endpoint a `SetAuthority` over it: what [`LoadRingLayer`] builds.
#[derive(Clone)]
pub struct SetAuthority<S> {
    inner: S,
    authority: Authority,
}

impl<S> fmt::Debug for SetAuthority<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SetAuthority")
            .field("authority", &self.authority)
            .finish_non_exhaustive()
    }
}

impl<S> SetAuthority<S> {
    /// `inner` bound to `endpoint`'s address, which must be a valid URI
    /// authority (`host:port`).
    ///
    /// # Errors
    /// The address is not an authority.
    pub fn new(inner: S, endpoint: &Endpoint) -> Result<Self, http::uri::InvalidUri> {
        Ok(SetAuthority {
            inner,
            authority: endpoint.addr().parse()?,
        })
    }
}

impl<S, B> Service<http::Request<B>> for SetAuthority<S>
where
    S: Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<B>) -> S::Future {
        let mut parts = std::mem::take(req.uri_mut()).into_parts();
        if parts.scheme.is_none() {
            parts.scheme = Some(Scheme::HTTP);
        }
        parts.authority = Some(self.authority.clone());
        if parts.path_and_query.is_none() {
            parts.path_and_query = Some(http::uri::PathAndQuery::from_static("/"));
        }
        // Scheme, authority and path are all set: the parts make a URI.
        *req.uri_mut() = Uri::from_parts(parts).unwrap_or_default();
        self.inner.call(req)
    }
}

/// `text` for an error message: its first 40 characters, control
/// characters escaped, and its length when cut (the core's echo).
fn shown(text: &str) -> String {
    const MOST: usize = 40;
    let head: String = text
        .chars()
        .take(MOST)
        .flat_map(char::escape_debug)
        .collect();
    match text.chars().count() {
        n if n > MOST => format!("{head}... ({n} characters)"),
        _ => head,
    }
}

/// A `tower::Layer` that turns one HTTP client into a [`LoadRing`] over a
/// list of hosts: each endpoint is a [`SetAuthority`] over a clone of the
/// client.
///
/// ```
/// use loadring::Endpoint;
/// use loadring_tower::LoadRingLayer;
///
/// let endpoints = ["127.0.0.1:8081", "127.0.0.1:8082", "127.0.0.1:8083"]
///     .map(|a| Endpoint::new(a).unwrap());
/// // Shard by the `x-user` header, at most 1.25x the mean load per backend.
/// let layer = LoadRingLayer::new(
///     "c_murmurhash_bl:load_factor=1.25".parse()?,
///     endpoints,
///     |req: &http::Request<String>| req.headers().get("x-user").map(|v| v.as_bytes().to_vec()),
/// )?;
/// // tower::ServiceBuilder::new().layer(layer).service(hyper_util_client)
/// # let _ = layer;
/// # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
/// ```
///
/// With [`LoadRingLayer::hold_until_body_end`] and
/// [`LoadRingLayer::load_report`], the services it makes hold each slot
/// until the response body ends and read the endpoints' load reports, as
/// [`LoadRing`]'s methods of the same names do.
#[derive(Clone)]
pub struct LoadRingLayer<F, C = OnResponse> {
    spec: PolicySpec,
    endpoints: Vec<Endpoint>,
    key: F,
    keyless: Keyless,
    completion: C,
}

impl<F, C> fmt::Debug for LoadRingLayer<F, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoadRingLayer")
            .field("spec", &self.spec.as_str())
            .field("endpoints", &self.endpoints)
            .finish_non_exhaustive()
    }
}

impl<F> LoadRingLayer<F> {
    /// A layer running `spec` over `endpoints` (addresses `host:port`).
    ///
    /// # Errors
    /// An address that is not a URI authority; a membership the policy
    /// cannot be built over.
    pub fn new(
        spec: PolicySpec,
        endpoints: impl IntoIterator<Item = Endpoint>,
        key: F,
    ) -> Result<Self, BoxError> {
        let endpoints: Vec<Endpoint> = endpoints.into_iter().collect();
        for e in &endpoints {
            // Named: "invalid uri character" alone did not say which of
            // a thousand endpoints it was.
            e.addr().parse::<Authority>().map_err(|why| {
                format!(
                    "endpoint `{}`: not a URI authority (host:port): {why}",
                    shown(e.addr())
                )
            })?;
        }
        Balancer::new(spec.clone(), endpoints.clone())?;
        Ok(LoadRingLayer {
            spec,
            endpoints,
            key,
            keyless: Keyless::default(),
            completion: OnResponse,
        })
    }
}

impl<F, C> LoadRingLayer<F, C> {
    /// Sets what happens to requests without a key (see [`Keyless`]).
    #[must_use]
    pub fn keyless(mut self, keyless: Keyless) -> Self {
        self.keyless = keyless;
        self
    }

    /// The services hold each response's slot until its body ends (see
    /// [`LoadRing::hold_until_body_end`]).
    pub fn hold_until_body_end(self) -> LoadRingLayer<F, OnBodyEnd> {
        self.completion(OnBodyEnd)
    }

    /// The services read each endpoint's load report from its responses
    /// with `hook` (see [`LoadRing::load_report`]); call it after
    /// [`LoadRingLayer::hold_until_body_end`].
    ///
    /// ```
    /// use loadring::Endpoint;
    /// use loadring_tower::{orca_report, LoadRingLayer};
    ///
    /// let endpoints = ["127.0.0.1:8081", "127.0.0.1:8082"].map(|a| Endpoint::new(a).unwrap());
    /// let layer = LoadRingLayer::new(
    ///     "c_murmurhash_bl:load_factor=1.25".parse()?,
    ///     endpoints,
    ///     |req: &http::Request<String>| req.headers().get("x-user").map(|v| v.as_bytes().to_vec()),
    /// )?
    /// .hold_until_body_end()
    /// .load_report(orca_report("in_flight")?);
    /// # let _ = layer;
    /// # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
    /// ```
    pub fn load_report<H>(self, hook: H) -> LoadRingLayer<F, WithReport<C, H>> {
        let completion = WithReport::new(self.completion, hook);
        LoadRingLayer {
            spec: self.spec,
            endpoints: self.endpoints,
            key: self.key,
            keyless: self.keyless,
            completion,
        }
    }

    fn completion<C2>(self, completion: C2) -> LoadRingLayer<F, C2> {
        LoadRingLayer {
            spec: self.spec,
            endpoints: self.endpoints,
            key: self.key,
            keyless: self.keyless,
            completion,
        }
    }
}

impl<S: Clone, F: Clone, C: Clone> Layer<S> for LoadRingLayer<F, C> {
    type Service = LoadRing<SetAuthority<S>, F, C>;

    fn layer(&self, inner: S) -> Self::Service {
        let backends = self.endpoints.iter().map(|e| {
            let authority = e.addr().parse().expect("checked in LoadRingLayer::new");
            let svc = SetAuthority {
                inner: inner.clone(),
                authority,
            };
            (e.clone(), svc)
        });
        LoadRing::new(self.spec.clone(), backends, self.key.clone())
            .expect("the same membership built in LoadRingLayer::new")
            .keyless(self.keyless)
            .completion(self.completion.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_that_is_no_authority_is_named_in_one_short_line() {
        let key = |_: &http::Request<()>| None::<Vec<u8>>;
        let long = format!("{}\x07:80", "h".repeat(5000));
        for (addr, shown) in [
            (
                "10.0.0.2:80/x",
                "endpoint `10.0.0.2:80/x`: not a URI authority",
            ),
            (
                long.as_str(),
                "endpoint `hhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhh... (5004 characters)`",
            ),
        ] {
            let endpoints = [
                Endpoint::new("10.0.0.1:80").unwrap(),
                Endpoint::new(addr).unwrap(),
            ];
            let err = LoadRingLayer::new("rr".parse().unwrap(), endpoints, key).unwrap_err();
            let message = err.to_string();
            assert!(message.starts_with(shown), "{message}");
            assert!(message.len() < 200 && !message.contains('\n'), "{message}");
        }
    }
}
