//! `Backend`: what a pick, a local pick, a route and a candidate show of
//! their endpoint, the one view they all dereference to.

use std::fmt;
use std::sync::Arc;

use crate::endpoint::{Endpoint, Id};
use crate::inflight::member::Member;

/// One member of a balancer: its endpoint, the caller's value for it and
/// its in-flight counter. Every answer to "where does this request go"
/// ([`Pick`](crate::Pick), [`LocalPick`](crate::LocalPick),
/// [`Route`](crate::Route), [`Candidate`](crate::Candidate)) dereferences to
/// the `Backend` it chose, so they all read it the same way; what differs is
/// what each holds (a slot or nothing) and for how long.
///
/// ```
/// use loadring::{Backend, Balancer, Endpoint, Request};
///
/// let backends = ["a:80", "b:80"].map(|a| (Endpoint::new(a).unwrap(), a.len()));
/// let balancer = Balancer::with_backends("c_murmurhash".parse()?, backends)?;
/// let req = Request::key("user:42");
/// let pick = balancer.pick(&req)?;
/// let route = balancer.route(&req)?.expect("a hashing policy routes");
/// let first = balancer.candidates(&req)?.next().expect("one candidate at least");
/// let local = balancer.local();
/// let local_pick = local.pick(&req)?;
/// let views: [&Backend<usize>; 4] = [&pick, &route, &first, &local_pick];
/// for view in views {
///     assert_eq!(view.addr(), pick.addr());
///     assert_eq!(view.id(), pick.endpoint().id());
///     assert_eq!(*view.value(), 4, "the caller's value for the endpoint");
///     assert_eq!(view.in_flight(), 2, "the pick and the local pick hold a slot each");
/// }
/// # Ok::<(), loadring::Error>(())
/// ```
pub struct Backend<T> {
    pub(crate) member: Arc<Member>,
    pub(crate) endpoint: Endpoint,
    pub(crate) value: T,
}

impl<T> Backend<T> {
    /// The endpoint.
    #[inline]
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The endpoint's identity (address and tag), as membership operations
    /// ([`Balancer::remove`](crate::Balancer::remove), ...) take it.
    #[inline]
    pub fn id(&self) -> Id<'_> {
        self.endpoint.id()
    }

    /// The endpoint's address.
    #[inline]
    pub fn addr(&self) -> &str {
        self.endpoint.addr()
    }

    /// The endpoint's tag, if it has one.
    #[inline]
    pub fn tag(&self) -> Option<&str> {
        self.endpoint.tag()
    }

    /// The caller's value for the endpoint (a connection pool, a client, an
    /// address; see [`Balancer::with_backends`](crate::Balancer::with_backends)),
    /// with no lookup.
    #[inline]
    pub fn value(&self) -> &T {
        &self.value
    }

    /// Requests in flight on the endpoint now (a guard's own included).
    #[inline]
    pub fn in_flight(&self) -> u64 {
        self.member.load()
    }
}

impl<T: fmt::Debug> fmt::Debug for Backend<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Backend")
            .field("endpoint", &self.endpoint)
            .field("value", &self.value)
            .field("in_flight", &self.in_flight())
            .finish()
    }
}
