//! The two traits every policy implements, built-in or your own.
//!
//! A [`Policy`] is what a [`PolicySpec`](crate::PolicySpec) names: a family
//! with its parameters (`c_murmurhash` with 160 replicas). For each membership
//! the [`Balancer`](crate::Balancer) asks it to [`build`](Policy::build) a
//! [`Picker`] over a [`Pool`] of endpoints; the picker then serves every pick
//! until the membership changes again. Health, exclusions, in-flight counts
//! and guards belong to the pool and the balancer, so a picker only decides
//! who comes first.
//!
//! A policy written outside this crate runs in a balancer exactly like the
//! built-in ones ([`Balancer::with_policy`](crate::Balancer::with_policy)):
//!
//! ```
//! use std::sync::Arc;
//! use loadring::policy::{first_reservable, Order, Picker, Policy, Pool};
//! use loadring::{Balancer, BuildError, Endpoint, PickError, Request};
//!
//! /// Always the lightest endpoint (least in flight), ties to the first.
//! #[derive(Debug)]
//! struct LeastLoaded;
//!
//! #[derive(Debug)]
//! struct LeastLoadedPicker(Pool);
//!
//! impl Policy for LeastLoaded {
//!     fn name(&self) -> &str { "least_loaded" }
//!     fn build(&self, pool: Pool) -> Result<Arc<dyn Picker>, BuildError> {
//!         Ok(Arc::new(LeastLoadedPicker(pool)))
//!     }
//! }
//!
//! impl LeastLoadedPicker {
//!     fn order(&self) -> Vec<usize> {
//!         let mut order: Vec<usize> = (0..self.0.len()).collect();
//!         order.sort_by_key(|&i| self.0.load(i));
//!         order
//!     }
//! }
//!
//! impl Picker for LeastLoadedPicker {
//!     fn pool(&self) -> &Pool { &self.0 }
//!     fn pick(&self, req: &Request<'_>) -> Result<usize, PickError> {
//!         first_reservable(self, self.order(), req)
//!     }
//!     fn candidates(self: Arc<Self>, _req: &Request<'_>) -> Result<Order, PickError> {
//!         Ok(Box::new(self.order().into_iter()))
//!     }
//! }
//!
//! let endpoints = [Endpoint::new("a:80")?, Endpoint::new("b:80")?];
//! let balancer = Balancer::with_policy(Arc::new(LeastLoaded), endpoints.map(|e| (e, ())))?;
//! let first = balancer.pick(&Request::new())?;
//! let second = balancer.pick(&Request::new())?;
//! assert_ne!(first.addr(), second.addr(), "the second goes to the idle endpoint");
//! # Ok::<(), loadring::Error>(())
//! ```

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use crate::describe::Layout;
use crate::endpoint::Endpoint;
use crate::error::{BuildError, PickError, PickErrorKind};
pub use crate::inflight::observer::Observer;
pub use crate::inflight::pool::Pool;
use crate::request::Request;
use crate::util::bounded::LoadFactor;

pub(crate) mod lifecycle;
pub(crate) mod locality;
pub(crate) mod locality_aware;
pub(crate) mod p2c;
pub(crate) mod peak_ewma;
pub(crate) mod random;
pub(crate) mod round_robin;
pub(crate) mod smooth_weighted_round_robin;
pub(crate) mod weighted_random;
pub(crate) mod weighted_round_robin;

/// A policy's order of preference for one request: pool indices, most
/// preferred first. It may name an endpoint more than once or name
/// ineligible ones; [`Balancer::candidates`](crate::Balancer::candidates)
/// skips repeats and ineligible endpoints.
pub type Order = Box<dyn Iterator<Item = usize> + Send>;

/// A load-balancing policy: a family with its parameters, which builds a
/// [`Picker`] for each membership.
pub trait Policy: Send + Sync + fmt::Debug + 'static {
    /// The policy's name, for messages (`c_murmurhash`, `rr`, ...).
    fn name(&self) -> &str;

    /// Builds the picker over `pool` (never empty: a balancer without
    /// endpoints builds nothing).
    ///
    /// # Errors
    /// A membership the policy cannot serve (too many points, bad attributes).
    fn build(&self, pool: Pool) -> Result<Arc<dyn Picker>, BuildError>;

    /// About how many entries (ring points, table slots, endpoints) a build
    /// over `pool` holds: policies that build many instances (one per zone)
    /// check their sum against a budget before building any. The default is
    /// the pool's size.
    fn build_size(&self, pool: &Pool) -> u64 {
        pool.len() as u64
    }

    /// Whether requests need a key or a code (hashing policies).
    fn needs_key(&self) -> bool {
        false
    }

    /// The load bound, for bounded policies: the balancer then keeps a running
    /// total of the requests in flight, which [`Pool::total_load`] reads.
    fn load_factor(&self) -> Option<LoadFactor> {
        None
    }

    /// For hashing policies bounded by Envoy's own rule
    /// (`hash_balance_factor=F`, see the README), the percent `F`; the
    /// balancer then keeps the running total too.
    fn hash_balance_factor(&self) -> Option<u32> {
        None
    }

    /// Builds the picker for `pool`, which differs from the pool `previous`
    /// was built over by one `change`, reusing what `previous` computed.
    /// `None` (the default) asks for a full [`Policy::build`]. The result must
    /// place every request exactly as a full build would.
    fn rebuild(
        &self,
        _previous: &dyn Picker,
        _pool: &Pool,
        _change: Change,
    ) -> Option<Result<Arc<dyn Picker>, BuildError>> {
        None
    }

    /// The per-endpoint state that learns from outcomes
    /// ([`Pick::finish`](crate::Pick::finish)), if the policy keeps any. It is
    /// made once per backend and survives membership changes, as in-flight
    /// counts do; pickers read it with [`Pool::observer`].
    fn observer(&self, _endpoint: &Endpoint) -> Option<Arc<dyn Observer>> {
        None
    }
}

/// One membership change, as [`Policy::rebuild`] sees it: pool indices are
/// those of the new pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Change {
    /// The endpoint at this index (the last one) is new.
    Inserted(usize),
    /// The endpoint at this index of the previous pool is gone; those after
    /// it moved down by one.
    Removed(usize),
    /// The endpoint at this index changed its weight (and nothing else).
    Reweighted(usize),
}

/// A policy built over one membership. Shared by every picking thread:
/// every method takes `&self`, and `pick` should neither lock nor allocate.
pub trait Picker: Send + Sync + fmt::Debug + Any {
    /// The endpoints it was built over.
    fn pool(&self) -> &Pool;

    /// Chooses an endpoint for `req`, reserves one in-flight slot on it
    /// ([`Pool::reserve`] or [`Pool::try_reserve`]), and returns its index.
    /// It must skip endpoints that are not [`Pool::eligible`].
    ///
    /// # Errors
    /// Nothing eligible; a hashing policy without key or code, or with a
    /// code out of its range.
    fn pick(&self, req: &Request<'_>) -> Result<usize, PickError>;

    /// As [`Picker::pick`], and whether the pick spilled: a bounded pick
    /// that passed over the request's owner (the first eligible endpoint of
    /// its walk) because it was at its cap. The default never spills, as
    /// an unbounded policy.
    ///
    /// # Errors
    /// As [`Picker::pick`].
    fn pick_spilling(&self, req: &Request<'_>) -> Result<(usize, bool), PickError> {
        self.pick(req).map(|i| (i, false))
    }

    /// The order of preference for `req`, lazily: what `pick` would choose
    /// first, then what it would fall back to. Nothing is reserved.
    ///
    /// # Errors
    /// As [`Picker::pick`], except that finding nothing eligible is not an
    /// error here (the order is just empty of eligible endpoints).
    fn candidates(self: Arc<Self>, req: &Request<'_>) -> Result<Order, PickError>;

    /// Reserves a slot on endpoint `index` if the policy admits one more
    /// request there (bounded policies check the cap); the default always does.
    fn try_reserve(&self, index: usize) -> bool {
        self.pool().reserve(index);
        true
    }

    /// For hashing policies, the endpoint the request belongs to with no load
    /// at all (its key's owner, walking past ineligible endpoints), without
    /// reserving anything; `None` for policies that do not place by hash.
    fn route(&self, _req: &Request<'_>) -> Option<Result<usize, PickError>> {
        None
    }

    /// The cap the next pick would apply to endpoint `index`, for bounded
    /// policies: the most requests in flight a bounded pick may leave there
    /// (Envoy's rule admits while `in_flight <= slots`: `slots + 1`).
    fn cap(&self, _index: usize) -> Option<u64> {
        None
    }

    /// How a hashing policy divides the hash space, for `describe`.
    fn layout(&self) -> Option<Layout> {
        None
    }
}

/// The first endpoint of `order` that is eligible for `req` and that `picker`
/// admits ([`Picker::try_reserve`]); its slot is reserved. The default way to
/// pick from an order of preference.
///
/// # Errors
/// [`PickError::no_eligible_endpoint`] when none is.
pub fn first_reservable<P: Picker + ?Sized>(
    picker: &P,
    order: impl IntoIterator<Item = usize>,
    req: &Request<'_>,
) -> Result<usize, PickError> {
    let pool = picker.pool();
    order
        .into_iter()
        .find(|&i| i < pool.len() && pool.eligible(i, req) && picker.try_reserve(i))
        .ok_or_else(|| none_eligible(pool))
}

/// The checks every policy makes on the pool it is built over: some
/// endpoint that can ever be picked.
pub(crate) fn check_pool(pool: &Pool) -> Result<(), BuildError> {
    if pool.weight_sum() == 0 {
        Err(BuildError::all_weights_zero())
    } else {
        Ok(())
    }
}

/// The error of a pick that found every endpoint of `pool` ineligible.
#[cold]
pub(crate) fn none_eligible(pool: &Pool) -> PickError {
    PickError::no_eligible_endpoint(pool.len())
}

/// The order of the policies that have one choice and no second one: the
/// endpoint `pick` would choose (reserved for a moment, then released: the
/// choice advances the policy's sequence like a pick), then pool order after it.
pub(crate) fn first_choice_then_rotation<P: Picker + ?Sized>(
    picker: &P,
    req: &Request<'_>,
) -> Result<Order, PickError> {
    let pool = picker.pool();
    match picker.pick(req) {
        Ok(i) => {
            pool.release(i);
            Ok(rotation(i, pool.len()))
        }
        Err(e) if e.kind() == PickErrorKind::NoEligibleEndpoint => Ok(rotation(0, pool.len())),
        Err(e) => Err(e),
    }
}

/// How a built-in policy builds its picker from its parameters `P`.
pub(crate) type BuildFn<P> = fn(Pool, &P) -> Result<Arc<dyn Picker>, BuildError>;

/// The built-in policies without parameters of their own beyond `P`: a
/// name and a function building the picker.
pub(crate) struct BuiltIn<P> {
    pub(crate) name: &'static str,
    pub(crate) params: P,
    pub(crate) build: BuildFn<P>,
}

impl<P: fmt::Debug> fmt::Debug for BuiltIn<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BuiltIn")
            .field("name", &self.name)
            .field("params", &self.params)
            .finish()
    }
}

impl<P: fmt::Debug + Send + Sync + 'static> Policy for BuiltIn<P> {
    fn name(&self) -> &str {
        self.name
    }

    fn build(&self, pool: Pool) -> Result<Arc<dyn Picker>, BuildError> {
        (self.build)(pool, &self.params)
    }
}

/// Pool order starting at `start` and wrapping around: the fallback order of
/// the policies whose own preference ends with their first choice.
pub(crate) fn rotation(start: usize, len: usize) -> Order {
    Box::new((0..len).map(move |k| (start + k) % len.max(1)))
}

/// Each endpoint's weight divided by the gcd of all weights (LVS's step):
/// the round robins' sequences depend only on these, and their periods are
/// as short as they can be. Weight 0 stays 0.
pub(crate) fn weight_units(pool: &Pool) -> Vec<u64> {
    fn gcd(mut a: u64, mut b: u64) -> u64 {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    }
    let weights = pool.endpoints().iter().map(|e| u64::from(e.weight()));
    let step = weights.clone().fold(0, gcd).max(1);
    weights.map(|w| w / step).collect()
}

/// How many positions of a period a weighted round robin precomputes:
/// `whole` for the balancer's whole pool; for a zone's sub-pool (a locality
/// policy builds one per zone) `per_endpoint` for each of its endpoints, at
/// most `whole`, so that all the zones together cost in proportion to the
/// pool, not to the number of zones.
pub(crate) fn period_table_limit(pool: &Pool, whole: u64, per_endpoint: u64) -> u64 {
    if pool.is_whole() {
        whole
    } else {
        per_endpoint.saturating_mul(pool.len() as u64).min(whole)
    }
}

/// A whole pool of endpoints `e0, e1, ...` with the given weights.
#[cfg(test)]
pub(crate) fn test_pool(weights: &[u32]) -> Pool {
    let endpoints: Vec<Endpoint> = weights
        .iter()
        .enumerate()
        .map(|(i, &w)| Endpoint::new(format!("e{i}")).unwrap().with_weight(w))
        .collect();
    Pool::for_test(endpoints)
}

/// Picks `count` times with guards released at once; the pool indices.
#[cfg(test)]
pub(crate) fn test_picks(picker: &dyn Picker, pool: &Pool, count: usize) -> Vec<usize> {
    (0..count)
        .map(|_| {
            let i = picker.pick(&Request::new()).unwrap();
            pool.release(i);
            i
        })
        .collect()
}
