//! Locality: `zone_first` (IDC priority) and `local_first` (local priority),
//! wrapping any other policy.
//!
//! A locality policy does not choose endpoints itself. It builds its inner
//! policy once per zone, over that zone's endpoints, and once over all the
//! endpoints; a pick only decides which of these instances serves the
//! request, then delegates. Hashing inner policies therefore place keys on a
//! ring of the zone's endpoints (the same owner as a ring built over that
//! zone alone), bounded ones cap loads relative to the zone's total, and
//! round robins keep one counter per zone.
//!
//! * `zone_first:min_endpoints=K` (default 1): a request from zone `z` is
//!   served by `z`'s instance while at least `K` of `z`'s endpoints are
//!   eligible for it (healthy, not excluded, weight > 0), else by the
//!   instance over all endpoints. The threshold keeps a nearly drained zone
//!   from concentrating its traffic on its last survivors.
//! * `local_first:local_share=P` (0..=100, default 50): a request from zone
//!   `z` is served by `z`'s instance with probability `P%`, else by the
//!   instance over all endpoints (which may also choose `z`'s endpoints, so
//!   the share that stays local is `P% + (100 - P)% * z's share of all`).
//!   When `z` has no eligible endpoint, all endpoints serve. `seed=N` makes
//!   the coin reproducible.
//!
//! A request without a zone, or from a zone no endpoint is in, is served by
//! the instance over all endpoints. Endpoints without a zone are only in
//! that instance. A zone whose endpoints all have weight 0 gets no instance.
//!
//! Cost: a binary search among the zone names, plus (`zone_first`) counting
//! eligible endpoints of the zone up to `K`, or (`local_first`) one random
//! draw, on top of the inner policy's pick.

use std::sync::Arc;

use crate::describe::Layout;
use crate::error::{BuildError, ParseError, PickError, PickErrorKind};
use crate::inflight::pool::Pool;
use crate::policy::{Order, Picker, Policy};
use crate::request::Request;
use crate::util::params::Params;
use crate::util::rng::{Rng, Seed};

/// This policy's generator stream (see [`Rng::new`]).
const STREAM: u64 = 4;

/// Which locality rule, with its parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LocalityRule {
    /// `zone_first`: stay in the zone while it has `min_endpoints` eligible.
    ZoneFirst {
        /// Eligible endpoints the zone needs to serve its own requests.
        min_endpoints: u32,
    },
    /// `local_first`: `local_share` percent of the zone's requests stay in it.
    LocalFirst {
        /// Percent of requests served by the zone's instance, 0..=100.
        local_share: u8,
        /// The coin's seed.
        seed: Seed,
    },
}

impl LocalityRule {
    pub(crate) fn parse_zone_first(params: &mut Params<'_>) -> Result<Self, ParseError> {
        let min_endpoints = params.take_u64("min_endpoints", 1, u64::from(u32::MAX), 1)? as u32;
        Ok(LocalityRule::ZoneFirst { min_endpoints })
    }

    pub(crate) fn parse_local_first(params: &mut Params<'_>) -> Result<Self, ParseError> {
        let local_share = params.take_u64("local_share", 0, 100, 50)? as u8;
        let seed = Seed::parse(params)?;
        Ok(LocalityRule::LocalFirst { local_share, seed })
    }
}

/// A locality rule around the policy it wraps.
#[derive(Debug)]
pub(crate) struct LocalityPolicy {
    pub(crate) name: &'static str,
    pub(crate) rule: LocalityRule,
    pub(crate) inner: Arc<dyn Policy>,
}

impl Policy for LocalityPolicy {
    fn name(&self) -> &str {
        self.name
    }

    fn build(&self, pool: Pool) -> Result<Arc<dyn Picker>, BuildError> {
        let size = self.build_size(&pool);
        if size > MAX_BUILD_SIZE {
            return Err(BuildError::too_large(format!(
                "{} over {}: {} instances (one per zone, one over all) make {size} entries, \
                 more than the limit of {MAX_BUILD_SIZE}",
                self.name,
                self.inner.name(),
                zones(&pool).len() + 1
            )));
        }
        Ok(Arc::new(Locality::new(self.rule, &*self.inner, pool)?))
    }

    /// The inner policy's size over every zone and over all endpoints.
    fn build_size(&self, pool: &Pool) -> u64 {
        zones(pool)
            .iter()
            .map(|(_, members)| self.inner.build_size(&pool.subset(members)))
            .fold(self.inner.build_size(pool), u64::saturating_add)
    }

    fn needs_key(&self) -> bool {
        self.inner.needs_key()
    }

    fn load_factor(&self) -> Option<crate::LoadFactor> {
        self.inner.load_factor()
    }

    fn hash_balance_factor(&self) -> Option<u32> {
        self.inner.hash_balance_factor()
    }

    fn observer(&self, endpoint: &crate::Endpoint) -> Option<Arc<dyn crate::policy::Observer>> {
        self.inner.observer(endpoint)
    }
}

/// The most entries (ring points, table slots) all the instances of one
/// locality policy may hold together: twice the largest single ring.
pub(crate) const MAX_BUILD_SIZE: u64 = 16_777_216;

/// Each zone with its endpoints' indices (in pool order), sorted by name;
/// zones whose endpoints all have weight 0 are left out.
fn zones(pool: &Pool) -> Vec<(&str, Vec<usize>)> {
    let mut zoned: Vec<(&str, usize)> = (0..pool.len())
        .filter_map(|i| pool.endpoint(i).zone().map(|z| (z, i)))
        .collect();
    zoned.sort_unstable();
    zoned
        .chunk_by(|a, b| a.0 == b.0)
        .map(|group| {
            (
                group[0].0,
                group.iter().map(|&(_, i)| i).collect::<Vec<_>>(),
            )
        })
        .filter(|(_, members)| members.iter().any(|&i| pool.weight(i) > 0))
        .collect()
}

/// One zone's endpoints and the inner policy over them.
#[derive(Debug)]
struct Zone {
    name: Box<str>,
    /// The zone's endpoints' indices in the whole pool.
    members: Vec<usize>,
    picker: Arc<dyn Picker>,
}

/// A locality policy over its inner instances.
#[derive(Debug)]
pub(crate) struct Locality {
    rule: LocalityRule,
    pool: Pool,
    /// Sorted by name.
    zones: Vec<Zone>,
    all: Arc<dyn Picker>,
    /// `local_first`'s coin.
    rng: Rng,
}

impl Locality {
    pub(crate) fn new(
        rule: LocalityRule,
        inner: &dyn Policy,
        pool: Pool,
    ) -> Result<Self, BuildError> {
        let mut built = Vec::new();
        for (name, members) in zones(&pool) {
            built.push(Zone {
                name: name.into(),
                picker: inner.build(pool.subset(&members))?,
                members,
            });
        }
        let zones = built;
        let seed = match rule {
            LocalityRule::LocalFirst { seed, .. } => seed,
            // zone_first never draws: a fixed seed spares the entropy.
            LocalityRule::ZoneFirst { .. } => Seed(Some(0)),
        };
        Ok(Locality {
            rule,
            zones,
            all: inner.build(pool.clone())?,
            pool,
            rng: Rng::new(seed, STREAM),
        })
    }

    /// The request's own zone, if it is one of ours.
    #[inline]
    fn zone_of(&self, req: &Request<'_>) -> Option<&Zone> {
        self.zone_named(req.zone?)
    }

    fn zone_named(&self, name: &str) -> Option<&Zone> {
        self.zones
            .binary_search_by(|z| (*z.name).cmp(name))
            .ok()
            .map(|i| &self.zones[i])
    }

    /// Whether at least `min` of the zone's endpoints are eligible for `req`.
    fn has_eligible(zone: &Zone, req: &Request<'_>, min: u32) -> bool {
        let min = min as usize;
        let pool = zone.picker.pool();
        if pool.len() < min {
            return false;
        }
        let mut found = 0;
        for i in 0..pool.len() {
            if pool.eligible(i, req) {
                found += 1;
                if found == min {
                    return true;
                }
            }
        }
        false
    }

    /// The zone instance that serves `req`, if not the one over all;
    /// `coin` decides `local_first`'s share.
    #[inline]
    fn local(&self, req: &Request<'_>, coin: impl FnOnce(u8) -> bool) -> Option<&Zone> {
        let zone = self.zone_of(req)?;
        let stays = match self.rule {
            LocalityRule::ZoneFirst { min_endpoints } => {
                Self::has_eligible(zone, req, min_endpoints)
            }
            LocalityRule::LocalFirst { local_share, .. } => {
                coin(local_share) && Self::has_eligible(zone, req, 1)
            }
        };
        stays.then_some(zone)
    }

    fn flip(&self, local_share: u8) -> bool {
        match local_share {
            0 => false,
            100 => true,
            p => self.rng.below(100) < u64::from(p),
        }
    }
}

impl Picker for Locality {
    fn pool(&self) -> &Pool {
        &self.pool
    }

    #[inline]
    fn pick(&self, req: &Request<'_>) -> Result<usize, PickError> {
        match self.local(req, |share| self.flip(share)) {
            // The zone can empty between the count and the pick: then all
            // endpoints serve, as if it had been empty from the start.
            Some(zone) => match zone.picker.pick(req) {
                Ok(i) => Ok(zone.members[i]),
                Err(e) if e.kind() == PickErrorKind::NoEligibleEndpoint => self.all.pick(req),
                Err(e) => Err(e),
            },
            None => self.all.pick(req),
        }
    }

    fn pick_spilling(&self, req: &Request<'_>) -> Result<(usize, bool), PickError> {
        match self.local(req, |share| self.flip(share)) {
            Some(zone) => match zone.picker.pick_spilling(req) {
                Ok((i, spilled)) => Ok((zone.members[i], spilled)),
                Err(e) if e.kind() == PickErrorKind::NoEligibleEndpoint => {
                    self.all.pick_spilling(req)
                }
                Err(e) => Err(e),
            },
            None => self.all.pick_spilling(req),
        }
    }

    /// The order of the instance that would serve the request, then the
    /// order of the instance over all endpoints.
    fn candidates(self: Arc<Self>, req: &Request<'_>) -> Result<Order, PickError> {
        let all = self.all.clone().candidates(req)?;
        match self.local(req, |share| self.flip(share)) {
            Some(zone) => {
                let members = zone.members.clone();
                let local = zone
                    .picker
                    .clone()
                    .candidates(req)?
                    .map(move |i| members[i]);
                Ok(Box::new(local.chain(all)))
            }
            None => Ok(all),
        }
    }

    fn try_reserve(&self, i: usize) -> bool {
        match self.own_zone(i) {
            Some((zone, j)) => zone.picker.try_reserve(j),
            None => self.all.try_reserve(i),
        }
    }

    /// The owner in the instance that would serve the request; for
    /// `local_first`, which serves a zone's requests by chance, the instance
    /// over all endpoints unless `local_share=100`.
    fn route(&self, req: &Request<'_>) -> Option<Result<usize, PickError>> {
        match self.local(req, |share| share == 100) {
            Some(zone) => Some(zone.picker.route(req)?.map(|i| zone.members[i])),
            None => self.all.route(req),
        }
    }

    /// The cap of the instance serving the endpoint's own zone (the requests
    /// of that zone, the ones that reach it in normal operation); for an
    /// endpoint without a zone, the cap of the instance over all endpoints.
    fn cap(&self, i: usize) -> Option<u64> {
        match self.own_zone(i) {
            Some((zone, j)) => zone.picker.cap(j),
            None => self.all.cap(i),
        }
    }

    /// The inner policy's layout over all endpoints.
    fn layout(&self) -> Option<Layout> {
        self.all.layout()
    }
}

impl Locality {
    /// The zone of endpoint `i` and its index there.
    fn own_zone(&self, i: usize) -> Option<(&Zone, usize)> {
        let name = self.pool.endpoint(i).zone()?;
        let zone = self.zone_named(name)?;
        let j = zone.members.binary_search(&i).ok()?;
        Some((zone, j))
    }
}
