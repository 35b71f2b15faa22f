//! `Route`: where a hashing policy places a request, with nothing reserved.

use std::fmt;
use std::ops::Deref;
use std::rc::Rc;
use std::sync::Arc;

use crate::balancer::backend::Backend;
use crate::balancer::local_pick::Cached;
use crate::balancer::Snapshot;

/// The endpoint a hashing policy places a request on with no load (see
/// [`Balancer::route`](crate::Balancer::route)): a lookup only, nothing
/// reserved, nothing allocated. It keeps the membership it was answered from
/// alive while it lives, so hold it only as long as the answer is needed
/// (it stays on the thread that asked: neither `Send` nor `Sync`; take
/// [`Backend::endpoint`]'s clone to keep the answer longer or elsewhere).
/// It dereferences to the [`Backend`] chosen.
///
/// ```
/// use loadring::{Balancer, Endpoint, Request};
///
/// let endpoints = ["a:11211", "b:11211"].map(|a| Endpoint::new(a).unwrap());
/// let balancer = Balancer::new("ketama".parse()?, endpoints)?;
/// let route = balancer.route(&Request::key("user:42"))?.expect("ketama places by hash");
/// assert!(["a:11211", "b:11211"].contains(&route.addr()));
/// assert_eq!(route.in_flight(), 0, "nothing reserved");
/// # Ok::<(), loadring::Error>(())
/// ```
pub struct Route<T = ()> {
    snapshot: Holder<T>,
    index: usize,
}

/// What keeps the snapshot of a route alive.
enum Holder<T> {
    /// A read of the balancer's current snapshot (no reference count taken).
    Shared(arc_swap::Guard<Arc<Snapshot<T>>>),
    /// The snapshot cached by a [`LocalBalancer`](crate::LocalBalancer).
    Local(Rc<Cached<T>>),
}

impl<T> Route<T> {
    pub(crate) fn shared(snapshot: arc_swap::Guard<Arc<Snapshot<T>>>, index: usize) -> Self {
        Route {
            snapshot: Holder::Shared(snapshot),
            index,
        }
    }

    pub(crate) fn local(snapshot: Rc<Cached<T>>, index: usize) -> Self {
        Route {
            snapshot: Holder::Local(snapshot),
            index,
        }
    }
}

impl<T> Deref for Route<T> {
    type Target = Backend<T>;

    #[inline]
    fn deref(&self) -> &Backend<T> {
        let snapshot: &Snapshot<T> = match &self.snapshot {
            Holder::Shared(guard) => guard,
            Holder::Local(cached) => &cached.snapshot,
        };
        &snapshot.backends[self.index]
    }
}

impl<T> fmt::Debug for Route<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Route")
            .field("endpoint", self.endpoint())
            .finish_non_exhaustive()
    }
}
