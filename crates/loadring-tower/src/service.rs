//! `LoadRing`: the balancing service, its shared state and response future.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use loadring::{Balancer, BuildError, Endpoint, Id, Pick, PickError, PolicySpec, Request};
use pin_project_lite::pin_project;
use tower::util::Oneshot;
use tower_service::Service;

use crate::completion::{Complete, Guard, OnBodyEnd, OnResponse};
use crate::error::{BoxError, Error};
use crate::report::WithReport;
use crate::retry::Exclusions;

/// What happens to requests for which the key extractor returns `None`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Keyless {
    /// Spread them over the endpoints (the default). A non-hashing policy
    /// (`rr`, `p2c`, ...) picks as it always does. A hashing policy places
    /// each keyless request by a fresh key, a counter shared by the clones
    /// of the service hashed with the policy's own function: the requests
    /// land on endpoints in proportion to their share of the hash space, and
    /// their guards sit on the same counters as keyed requests, so bounded
    /// policies count them against the same caps.
    #[default]
    Spread,
    /// Fail them with an [`Error`] of kind
    /// [`MissingKey`](crate::ErrorKind::MissingKey) without contacting any
    /// endpoint.
    Reject,
}

/// State shared by the clones of a [`LoadRing`] and its discovery driver.
pub(crate) struct Shared<S> {
    pub(crate) balancer: Balancer<S>,
    /// Endpoints in the current membership (read by `poll_ready`).
    len: AtomicUsize,
    /// Whether a discovery driver may still add endpoints.
    discovering: AtomicBool,
    /// Services waiting in `poll_ready` for a first endpoint.
    waiters: Mutex<Vec<Waker>>,
    /// The next key for keyless requests under hashing policies.
    keyless: AtomicU64,
    hashing: bool,
    /// Whether the policy learns from outcomes (only then is latency timed).
    observed: bool,
}

impl<S> Shared<S> {
    pub(crate) fn new(balancer: Balancer<S>, discovering: bool) -> Self {
        let hashing = balancer.policy().needs_key();
        let observed = Endpoint::new("observed.probe")
            .map(|e| balancer.policy().observer(&e).is_some())
            .unwrap_or(false);
        let len = balancer.endpoints().len();
        Shared {
            balancer,
            len: AtomicUsize::new(len),
            discovering: AtomicBool::new(discovering),
            waiters: Mutex::new(Vec::new()),
            keyless: AtomicU64::new(0),
            hashing,
            observed,
        }
    }

    /// Re-reads the membership size after a change and wakes the waiters.
    pub(crate) fn changed(&self) {
        self.len
            .store(self.balancer.endpoints().len(), Ordering::Release);
        self.wake_all();
    }

    /// No more membership changes will come.
    pub(crate) fn discovery_ended(&self) {
        self.discovering.store(false, Ordering::Release);
        self.wake_all();
    }

    fn wake_all(&self) {
        let waiters = std::mem::take(&mut *self.waiters.lock().unwrap_or_else(|e| e.into_inner()));
        for w in waiters {
            w.wake();
        }
    }

    fn poll_ready(&self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        for attempt in 0..2 {
            if self.len.load(Ordering::Acquire) > 0 {
                return Poll::Ready(Ok(()));
            }
            if !self.discovering.load(Ordering::Acquire) {
                return Poll::Ready(Err(PickError::no_endpoints().into()));
            }
            if attempt == 0 {
                let mut waiters = self.waiters.lock().unwrap_or_else(|e| e.into_inner());
                if !waiters.iter().any(|w| w.will_wake(cx.waker())) {
                    waiters.push(cx.waker().clone());
                }
            }
        }
        Poll::Pending
    }
}

/// A tower [`Service`] that sends each request to the endpoint a loadring
/// policy picks for its key, holding an in-flight slot there until the
/// request completes.
///
/// - **Endpoints**: services of type `S`, cheap to clone and internally
///   buffered (hyper-util's `Client`, tonic's `Channel`, a
///   [`SetAuthority`](crate::SetAuthority) over a client, a
///   `tower::buffer::Buffer`). Each request calls a clone of its endpoint's
///   service ([`tower::util::Oneshot`]).
/// - **Keys**: `key: Fn(&Req) -> Option<K>` with `K: AsRef<[u8]>`; the key is
///   hashed by the policy's own hash function, so keys land where
///   `loadring place` (and brpc, Envoy...) put them. Requests without a key
///   follow [`Keyless`].
/// - **Membership**: a fixed list ([`LoadRing::new`]) or a
///   `tower::discover::Discover` stream ([`LoadRing::discover`]); the
///   balancer itself is reachable with [`LoadRing::balancer`] (health,
///   weights, loads).
/// - **Completion**: with [`OnResponse`] (the default) the slot is released
///   when the response arrives; with [`LoadRing::hold_until_body_end`] an HTTP
///   response keeps it until its body ends. Errors and cancellation (dropping
///   the response future) release it too.
///
/// # Readiness
/// A keyed balancer learns a request's endpoint only in `call`, so it cannot
/// wait in `poll_ready` for *that* endpoint to be ready (tower's `Steer`
/// waits for every endpoint instead). The contract:
/// - `poll_ready` is ready as soon as the membership has an endpoint. With
///   discovery and no endpoint yet it is pending (woken when one arrives);
///   with no endpoint and no discovery running (a fixed empty list, or the
///   discovery stream has ended) it fails with
///   an [`Error`] of kind [`Pick`](crate::ErrorKind::Pick), its [`PickError`] of kind
///   [`NoEndpoints`](loadring::PickErrorKind::NoEndpoints).
/// - `call` picks the endpoint and reserves its slot at once, synchronously;
///   the chosen endpoint's own `poll_ready` is awaited inside the response
///   future, with the slot already held, so requests waiting for a busy
///   endpoint count in its load (and a bounded policy sends the next ones
///   elsewhere).
/// - Endpoint services should therefore buffer internally: an endpoint that
///   never becomes ready holds its requests (put a timeout around the
///   service, `tower::timeout`, to bound it).
/// - Each clone of a `LoadRing` shares one balancer: loads, caps and
///   membership are common to all clones. `Clone` is cheap (an `Arc`).
///
/// ```
/// use std::convert::Infallible;
/// use loadring::Endpoint;
/// use loadring_tower::LoadRing;
/// use tower::{service_fn, Service, ServiceExt};
///
/// # let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
/// # rt.block_on(async {
/// // Three endpoint services that answer with their own name.
/// let backends = ["a:80", "b:80", "c:80"].map(|addr| {
///     let svc = service_fn(move |user: String| async move {
///         Ok::<_, Infallible>(format!("{user}@{addr}"))
///     });
///     (Endpoint::new(addr).unwrap(), svc)
/// });
/// let mut ring = LoadRing::new(
///     "c_murmurhash_bl:load_factor=1.25".parse()?,
///     backends,
///     |user: &String| Some(user.clone()),
/// )?;
/// let reply = ring.ready().await?.call("user:42".to_string()).await?;
/// // The key's owner, as `Balancer::route` (and `loadring place`) names it.
/// let owner = ring.balancer().route(&loadring::Request::key("user:42"))?.unwrap();
/// assert_eq!(reply, format!("user:42@{}", owner.addr()));
/// assert_eq!(ring.balancer().total_in_flight(), 0, "released on the response");
/// # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
/// # }).unwrap();
/// ```
pub struct LoadRing<S, F, C = OnResponse> {
    shared: Arc<Shared<S>>,
    key: F,
    keyless: Keyless,
    completion: C,
}

impl<S, F: Clone, C: Clone> Clone for LoadRing<S, F, C> {
    fn clone(&self) -> Self {
        LoadRing {
            shared: self.shared.clone(),
            key: self.key.clone(),
            keyless: self.keyless,
            completion: self.completion.clone(),
        }
    }
}

impl<S, F, C: fmt::Debug> fmt::Debug for LoadRing<S, F, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoadRing")
            .field("balancer", &self.shared.balancer)
            .field("keyless", &self.keyless)
            .field("completion", &self.completion)
            .finish_non_exhaustive()
    }
}

impl<S, F> LoadRing<S, F> {
    /// A balancing service running `spec` over a fixed list of endpoints and
    /// their services (change it later through [`LoadRing::balancer`]).
    ///
    /// # Errors
    /// As [`Balancer::with_backends`]: conflicting endpoints, every weight 0.
    pub fn new(
        spec: PolicySpec,
        backends: impl IntoIterator<Item = (Endpoint, S)>,
        key: F,
    ) -> Result<Self, BuildError> {
        let balancer = Balancer::with_backends(spec, backends)?;
        Ok(Self::from_shared(
            Arc::new(Shared::new(balancer, false)),
            key,
        ))
    }

    /// A balancing service over a balancer built elsewhere: a policy of
    /// your own ([`Balancer::with_policy`]), endpoints already marked
    /// unhealthy, ...
    pub fn with_balancer(balancer: Balancer<S>, key: F) -> Self {
        Self::from_shared(Arc::new(Shared::new(balancer, false)), key)
    }

    pub(crate) fn from_shared(shared: Arc<Shared<S>>, key: F) -> Self {
        LoadRing {
            shared,
            key,
            keyless: Keyless::default(),
            completion: OnResponse,
        }
    }
}

impl<S, F, C> LoadRing<S, F, C> {
    /// Sets what happens to requests without a key (see [`Keyless`]).
    #[must_use]
    pub fn keyless(mut self, keyless: Keyless) -> Self {
        self.keyless = keyless;
        self
    }

    /// Reads each endpoint's own load report from its responses with
    /// `hook` (e.g. [`orca_report`](crate::orca_report)) and gives it to the
    /// balancer with the request's outcome: the bounded policies then cap
    /// the load every client puts on an endpoint, not only this one's (see
    /// `loadring::LoadReport`). Call it after
    /// [`LoadRing::hold_until_body_end`] or [`LoadRing::completion`], which
    /// replace the completion.
    ///
    /// ```
    /// use loadring::Endpoint;
    /// use loadring_tower::{orca_report, LoadRing};
    ///
    /// # type Client = tower::util::BoxCloneService<http::Request<String>, http::Response<String>, std::convert::Infallible>;
    /// # fn client() -> Client { tower::util::BoxCloneService::new(tower::service_fn(|_| async { Ok(http::Response::new(String::new())) })) }
    /// let backends = ["10.0.0.1:80", "10.0.0.2:80"].map(|a| (Endpoint::new(a).unwrap(), client()));
    /// let service = LoadRing::new(
    ///     "c_murmurhash_bl:load_factor=1.25".parse()?,
    ///     backends,
    ///     |req: &http::Request<String>| req.headers().get("x-user").map(|v| v.as_bytes().to_vec()),
    /// )?
    /// .hold_until_body_end()
    /// .load_report(orca_report("in_flight")?);
    /// # let _ = service;
    /// # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
    /// ```
    pub fn load_report<H>(self, hook: H) -> LoadRing<S, F, WithReport<C, H>> {
        let completion = WithReport::new(self.completion, hook);
        LoadRing {
            shared: self.shared,
            key: self.key,
            keyless: self.keyless,
            completion,
        }
    }

    /// Keeps each HTTP response's slot until its body ends (see
    /// [`OnBodyEnd`]); the responses carry a [`GuardedBody`](crate::GuardedBody).
    pub fn hold_until_body_end(self) -> LoadRing<S, F, OnBodyEnd> {
        self.completion(OnBodyEnd)
    }

    /// Sets what the response future does with the guard (see [`Complete`]).
    pub fn completion<C2>(self, completion: C2) -> LoadRing<S, F, C2> {
        LoadRing {
            shared: self.shared,
            key: self.key,
            keyless: self.keyless,
            completion,
        }
    }

    /// The balancer: membership, health, weights, loads and caps, shared by
    /// every clone of this service.
    pub fn balancer(&self) -> &Balancer<S> {
        &self.shared.balancer
    }

    /// Picks an endpoint for a request with this key (`None`: keyless)
    /// excluding `tried`, and reserves its slot.
    fn pick(&self, key: Option<&[u8]>, tried: &[Endpoint]) -> Result<Pick<S>, Error> {
        let counter;
        let req = match key {
            Some(key) => Request::key(key),
            None => match self.keyless {
                Keyless::Reject => return Err(Error::missing_key()),
                Keyless::Spread if self.shared.hashing => {
                    counter = self
                        .shared
                        .keyless
                        .fetch_add(1, Ordering::Relaxed)
                        .to_le_bytes();
                    Request::key(&counter)
                }
                Keyless::Spread => Request::new(),
            },
        };
        let ids: Vec<Id<'_>>;
        let req = if tried.is_empty() {
            req
        } else {
            ids = tried.iter().map(Endpoint::id).collect();
            req.excluding_ids(&ids)
        };
        Ok(self.shared.balancer.pick(&req)?)
    }
}

impl<S, F, C, Req, K> Service<Req> for LoadRing<S, F, C>
where
    S: Service<Req> + Clone,
    S::Error: Into<BoxError>,
    F: Fn(&Req) -> Option<K>,
    K: AsRef<[u8]>,
    Req: Exclusions,
    C: Complete<S::Response, S> + Clone,
{
    type Response = C::Output;
    type Error = Error;
    type Future = ResponseFuture<S, Req, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.shared.poll_ready(cx)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let key = (self.key)(&req);
        let picked = self.pick(key.as_ref().map(AsRef::as_ref), req.tried());
        match picked {
            Ok(pick) => {
                let svc = pick.value().clone();
                let started = self.shared.observed.then(Instant::now);
                ResponseFuture {
                    state: State::Call {
                        call: Oneshot::new(svc, req),
                    },
                    guard: Some(Guard::new(pick, started)),
                    completion: self.completion.clone(),
                }
            }
            Err(error) => ResponseFuture {
                state: State::Failed { error: Some(error) },
                guard: None,
                completion: self.completion.clone(),
            },
        }
    }
}

pin_project! {
    #[project = StateProj]
    enum State<S: Service<Req>, Req> {
        Call { #[pin] call: Oneshot<S, Req> },
        Failed { error: Option<Error> },
    }
}

pin_project! {
    /// The response future of [`LoadRing`]: owns the request's guard, awaits
    /// the endpoint's readiness and then its response. Dropping it (a
    /// cancelled request, a timeout) releases the guard.
    pub struct ResponseFuture<S: Service<Req>, Req, C> {
        #[pin]
        state: State<S, Req>,
        guard: Option<Guard<S>>,
        completion: C,
    }
}

impl<S: Service<Req>, Req, C> fmt::Debug for ResponseFuture<S, Req, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("guard", &self.guard)
            .finish_non_exhaustive()
    }
}

impl<S, Req, C> Future for ResponseFuture<S, Req, C>
where
    S: Service<Req>,
    S::Error: Into<BoxError>,
    C: Complete<S::Response, S>,
{
    type Output = Result<C::Output, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        match this.state.project() {
            StateProj::Failed { error } => Poll::Ready(Err(error
                .take()
                .expect("ResponseFuture polled after completion"))),
            StateProj::Call { call } => {
                let result = std::task::ready!(call.poll(cx));
                let guard = this
                    .guard
                    .take()
                    .expect("ResponseFuture polled after completion");
                Poll::Ready(match result {
                    Ok(response) => Ok(this.completion.complete(guard, response)),
                    Err(source) => {
                        let endpoint = guard.endpoint().clone();
                        guard.failure();
                        Err(Error::endpoint_failed(endpoint, source.into()))
                    }
                })
            }
        }
    }
}
