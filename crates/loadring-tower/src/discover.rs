//! Membership from a `tower::discover::Discover` stream.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use loadring::{Balancer, BuildError, Endpoint, PolicySpec};
use pin_project_lite::pin_project;
use tower::discover::{Change, Discover};

use crate::error::BoxError;
use crate::service::{LoadRing, Shared};

impl<S, F> LoadRing<S, F> {
    /// A balancing service whose membership follows a `Discover` stream,
    /// and the driver that applies the stream's changes: spawn it
    /// (`tokio::spawn(driver)`); it ends with the stream.
    ///
    /// `to_endpoint` maps each discovery key to the endpoint it stands for
    /// (address, and optionally tag, weight, zone, hash key); it must give the
    /// same identity (address and tag) for the same key, since removals are
    /// found by identity. [`Change::Insert`] becomes [`Balancer::insert`]:
    /// a new endpoint joins (brpc rings merge its points, no rebuild), and a
    /// key already present gets its new service (and weight) while keeping
    /// its in-flight counter. [`Change::Remove`] becomes [`Balancer::remove`]:
    /// the endpoint stops receiving picks at once; requests already sent to
    /// it finish there and release harmlessly. Removing a key that is not a
    /// member is ignored.
    ///
    /// Until the first endpoint arrives the service's `poll_ready` is
    /// pending; once the driver has ended (or was dropped), an empty
    /// membership makes `poll_ready` fail.
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use loadring::Endpoint;
    /// use loadring_tower::LoadRing;
    /// use tower::discover::ServiceList;
    /// use tower::{service_fn, ServiceExt};
    ///
    /// # let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    /// # rt.block_on(async {
    /// let shard = |n: usize| service_fn(move |user: String| async move {
    ///     Ok::<_, Infallible>(format!("{user} on shard {n}"))
    /// });
    /// // Any Discover stream; this one inserts keys 0, 1, 2 and ends.
    /// let discover = ServiceList::new([shard(0), shard(1), shard(2)]);
    /// let (ring, driver) = LoadRing::discover(
    ///     "c_murmurhash_bl".parse()?,
    ///     discover,
    ///     |i: &usize| Endpoint::new(format!("shard-{i}:80")), // a key's endpoint
    ///     |user: &String| Some(user.clone()),                  // a request's key
    /// )?;
    /// tokio::spawn(driver);
    /// let reply = ring.clone().oneshot("user:42".to_string()).await?; // ready once shards arrive
    /// let owner = ring.balancer().route(&loadring::Request::key("user:42"))?.unwrap();
    /// assert_eq!(reply, format!("user:42 on shard {}", &owner.addr()[6..7]));
    /// # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Errors
    /// As [`Balancer::with_backends`].
    pub fn discover<D, M, E>(
        spec: PolicySpec,
        discover: D,
        to_endpoint: M,
        key: F,
    ) -> Result<(Self, Driver<D, M>), BuildError>
    where
        D: Discover<Service = S>,
        M: FnMut(&D::Key) -> Result<Endpoint, E>,
    {
        let balancer = Balancer::with_backends(spec, std::iter::empty())?;
        let shared = Arc::new(Shared::new(balancer, true));
        let driver = Driver {
            discover,
            to_endpoint,
            live: Live(shared.clone()),
        };
        Ok((LoadRing::from_shared(shared, key), driver))
    }
}

/// Marks discovery ended when the driver goes away (completed or dropped).
struct Live<S>(Arc<Shared<S>>);

impl<S> Drop for Live<S> {
    fn drop(&mut self) {
        self.0.discovery_ended();
    }
}

pin_project! {
    /// Applies a `Discover` stream's changes to a [`LoadRing`]'s membership
    /// (see [`LoadRing::discover`]). A future: spawn it. It completes with
    /// `Ok(())` when the stream ends, and with the error of the stream, of
    /// `to_endpoint` or of the membership change that failed.
    #[must_use = "the membership changes only while the driver is polled: spawn it"]
    pub struct Driver<D: Discover, M> {
        #[pin]
        discover: D,
        to_endpoint: M,
        live: Live<D::Service>,
    }
}

impl<D: Discover, M> fmt::Debug for Driver<D, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Driver").finish_non_exhaustive()
    }
}

impl<D, M, E> Future for Driver<D, M>
where
    D: Discover,
    D::Error: Into<BoxError>,
    M: FnMut(&D::Key) -> Result<Endpoint, E>,
    E: Into<BoxError>,
{
    type Output = Result<(), BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let shared = &this.live.0;
        loop {
            let change = match ready!(this.discover.as_mut().poll_discover(cx)) {
                None => {
                    shared.discovery_ended();
                    return Poll::Ready(Ok(()));
                }
                Some(Err(e)) => return Poll::Ready(Err(e.into())),
                Some(Ok(change)) => change,
            };
            let applied: Result<(), BoxError> = match change {
                Change::Insert(key, service) => match (this.to_endpoint)(&key) {
                    Ok(e) => shared
                        .balancer
                        .insert(e, service)
                        .map(drop)
                        .map_err(Into::into),
                    Err(e) => Err(e.into()),
                },
                Change::Remove(key) => match (this.to_endpoint)(&key) {
                    Ok(e) => match shared.balancer.remove(&e) {
                        Ok(()) => Ok(()),
                        Err(e) if e.kind() == loadring::ErrorKind::UnknownEndpoint => Ok(()),
                        Err(other) => Err(other.into()),
                    },
                    Err(e) => Err(e.into()),
                },
            };
            shared.changed();
            if let Err(e) = applied {
                return Poll::Ready(Err(e));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use futures_util::stream;
    use tower::{service_fn, Service, ServiceExt};

    use super::*;
    use crate::ErrorKind;

    /// A stream that fails ends the driver with its error; waiting
    /// services are woken and fail (no endpoint, no discovery) instead of
    /// waiting for ever.
    #[tokio::test]
    async fn a_stream_that_fails_ends_the_driver_and_fails_waiting_services() {
        let svc = service_fn(|_: String| async { Ok::<_, Infallible>("ok") });
        let changes = stream::iter([
            Err::<Change<u32, _>, BoxError>("the registry went away".into()),
            Ok(Change::Insert(1, svc)),
        ]);
        let (mut ring, driver) = LoadRing::discover(
            "rr".parse().unwrap(),
            changes,
            |k: &u32| Endpoint::new(format!("e{k}:80")),
            |_: &String| None::<Vec<u8>>,
        )
        .unwrap();
        let waiting = tokio::spawn({
            let ring = ring.clone();
            async move { ring.oneshot("r".to_string()).await.map(drop) }
        });
        let err = driver.await.unwrap_err();
        assert_eq!(err.to_string(), "the registry went away");
        let err = waiting.await.unwrap().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Pick, "{err}");
        let err = std::future::poll_fn(|cx| ring.poll_ready(cx))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Pick, "{err}");
    }
}
