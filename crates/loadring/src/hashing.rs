//! Consistent hashing over any placement (ring or table), plain or bounded.

use std::sync::Arc;

use crate::bounded::LoadFactor;
use crate::describe::Layout;
use crate::error::{Error, Result};
use crate::load::Member;
use crate::policy::Policy;
use crate::pool::Pool;
use crate::request::{Hash, Request};
use crate::ring::{Point, Ring};

/// What a consistent-hashing scheme contributes: entries in walk order
/// (ring points or table slots), each owned by one endpoint of the pool.
pub(crate) trait Placement: Send + Sync + std::fmt::Debug + 'static {
    /// The policy name, for errors.
    fn name(&self) -> &'static str;
    /// Number of entries; 0 only when every endpoint has weight 0.
    fn entries(&self) -> usize;
    /// The entry a code lands on (`code <= max_code()`, `entries() > 0`).
    fn start(&self, code: u64) -> usize;
    /// The pool index owning `entry`.
    fn owner(&self, entry: usize) -> usize;
    /// The largest request code.
    fn max_code(&self) -> u64;
    /// The code of a key, with the scheme's own hash.
    fn key_code(&self, key: &[u8]) -> u64;
    /// Each endpoint's share of the hash space.
    fn shares(&self, endpoints: usize) -> Vec<f64>;
    /// What an entry is called in `describe` ("points", "slots").
    fn entry_label(&self) -> &'static str;

    /// The entry a code lands on given the endpoints' health, for schemes
    /// whose lookup itself leaves unhealthy endpoints out (HAProxy takes the
    /// closest node among the servers that are up). By default the plain
    /// lookup: the walk then skips unhealthy endpoints.
    #[inline]
    fn start_among_healthy(&self, code: u64, _pool: &Pool) -> usize {
        self.start(code)
    }

    /// The scheme's own bounded-load cap of endpoint `owner` with `total`
    /// requests in flight (HAProxy's `hash-balance-factor` slots), or `None`
    /// for the generic cap of [`LoadFactor::cap`]. A scheme with its own rule
    /// also gives [`Placement::own_cap_floor`].
    fn own_cap(
        &self,
        _factor: LoadFactor,
        _total: u64,
        _owner: usize,
        _pool: &Pool,
    ) -> Option<u64> {
        None
    }

    /// For a scheme with its own cap rule, a cap that [`Placement::own_cap`]
    /// never goes below whatever the total (an endpoint below it needs no
    /// look at the total); `None` for the generic cap.
    fn own_cap_floor(&self) -> Option<u64> {
        None
    }
}

/// A ring placement: a sorted [`Ring`] plus the key hash of its scheme.
#[derive(Debug)]
pub(crate) struct RingPlacement<P: Point> {
    pub(crate) name: &'static str,
    pub(crate) ring: Ring<P>,
    pub(crate) key_hash: fn(&[u8]) -> u64,
}

impl<P: Point> Placement for RingPlacement<P> {
    fn name(&self) -> &'static str {
        self.name
    }
    fn entries(&self) -> usize {
        self.ring.len()
    }
    #[inline]
    fn start(&self, code: u64) -> usize {
        self.ring.locate(P::from_u64(code))
    }
    #[inline]
    fn owner(&self, entry: usize) -> usize {
        self.ring.owner(entry)
    }
    fn max_code(&self) -> u64 {
        if P::BITS == 32 {
            u64::from(u32::MAX)
        } else {
            u64::MAX
        }
    }
    #[inline]
    fn key_code(&self, key: &[u8]) -> u64 {
        (self.key_hash)(key)
    }
    fn shares(&self, endpoints: usize) -> Vec<f64> {
        self.ring.shares(endpoints)
    }
    fn entry_label(&self) -> &'static str {
        "points"
    }
}

/// A hashing policy: the placement, its pool, and an optional load bound.
#[derive(Debug)]
pub(crate) struct Hashing<T: Placement> {
    placement: T,
    pool: Pool,
    bound: Option<LoadFactor>,
    /// All weights equal: one cap serves every endpoint of a pick.
    uniform: bool,
    /// Bounded: each endpoint's cap at total 0, the least cap it can have.
    floors: Vec<u64>,
}

impl<T: Placement> Hashing<T> {
    pub(crate) fn new(placement: T, pool: Pool, bound: Option<LoadFactor>) -> Result<Self> {
        if placement.entries() == 0 {
            return Err(if pool.is_empty() {
                Error::NoEndpoints
            } else {
                Error::AllWeightsZero
            });
        }
        let own_floor = placement.own_cap_floor();
        let own_rule = bound.is_some() && own_floor.is_some();
        let uniform = !own_rule
            && pool
                .endpoints()
                .windows(2)
                .all(|w| w[0].weight() == w[1].weight());
        let floors = match bound {
            Some(_) if own_rule => vec![own_floor.unwrap_or(0); pool.len()],
            Some(factor) => (0..pool.len())
                .map(|i| factor.cap(0, pool.weight(i), pool.weight_sum()))
                .collect(),
            None => Vec::new(),
        };
        Ok(Hashing {
            placement,
            pool,
            bound,
            uniform,
            floors,
        })
    }

    #[inline]
    fn start(&self, req: &Request<'_>) -> Result<usize> {
        let code = match req.hash {
            Hash::Key(key) => self.placement.key_code(key),
            Hash::Code(code) if code <= self.placement.max_code() => code,
            Hash::Code(code) => {
                return Err(Error::CodeOutOfRange {
                    code,
                    policy: self.placement.name(),
                    max: self.placement.max_code(),
                })
            }
            Hash::None => {
                return Err(Error::MissingKey {
                    policy: self.placement.name(),
                })
            }
        };
        Ok(self.placement.start_among_healthy(code, &self.pool))
    }

    /// The cap of endpoint `owner`: the scheme's own rule if it has one.
    #[inline]
    fn cap_of(&self, factor: LoadFactor, total: u64, owner: usize) -> u64 {
        self.placement
            .own_cap(factor, total, owner, &self.pool)
            .unwrap_or_else(|| factor.cap(total, self.pool.weight(owner), self.pool.weight_sum()))
    }

    /// The owners met walking clockwise from `start` over every entry once,
    /// each run of consecutive entries of one endpoint reported once (the
    /// walk's answer for an entry depends only on its owner, so a run needs
    /// one look, not one per entry).
    #[inline]
    fn walk(&self, start: usize) -> Walk<'_, T> {
        Walk {
            placement: &self.placement,
            entry: start,
            left: self.placement.entries(),
            last: usize::MAX,
        }
    }

    /// The first eligible entry's owner, clockwise from `start`.
    fn first_eligible(&self, start: usize, req: &Request<'_>) -> Option<usize> {
        self.walk(start)
            .find(|&owner| self.pool.eligible(owner, req))
    }

    /// The bounded walk: the first eligible entry whose endpoint is below its
    /// cap, reserved by compare-and-swap; else the least-loaded eligible one.
    fn pick_bounded(
        &self,
        start: usize,
        req: &Request<'_>,
        factor: LoadFactor,
    ) -> Result<&Arc<Member>> {
        let weight_sum = self.pool.weight_sum();
        // The total and the uniform cap, read at the first endpoint that needs
        // them: most picks never do.
        let mut at_total: Option<(u64, u64)> = None;
        for owner in self.walk(start) {
            if self.pool.eligible(owner, req) {
                let member = self.pool.member(owner);
                // Caps grow with the total, so an endpoint below its cap
                // at total 0 is below its cap whatever the total: the
                // shared total (a cache line every picking thread writes)
                // need not be read.
                let floor = self.floors[owner];
                if member.try_reserve(floor) {
                    return Ok(member);
                }
                let (total, uniform_cap) = *at_total.get_or_insert_with(|| {
                    let total = self.pool.total_load();
                    (total, factor.cap(total, self.pool.weight(0), weight_sum))
                });
                let cap = if self.uniform {
                    uniform_cap
                } else {
                    self.cap_of(factor, total, owner)
                };
                if cap > floor && member.try_reserve(cap) {
                    return Ok(member);
                }
            }
        }
        match self.pool.least_loaded(req) {
            Some(i) => Ok(self.pool.take(i)),
            None => Err(Error::NoEligibleEndpoint {
                members: self.pool.len(),
            }),
        }
    }
}

impl<T: Placement> Policy for Hashing<T> {
    #[inline]
    fn pick(&self, req: &Request<'_>) -> Result<&Arc<Member>> {
        let start = self.start(req)?;
        match self.bound {
            Some(factor) => self.pick_bounded(start, req, factor),
            None => match self.first_eligible(start, req) {
                Some(i) => Ok(self.pool.take(i)),
                None => Err(Error::NoEligibleEndpoint {
                    members: self.pool.len(),
                }),
            },
        }
    }

    fn natural(&self, req: &Request<'_>) -> Option<Result<&Arc<Member>>> {
        let found = self.start(req).and_then(|start| {
            self.first_eligible(start, req)
                .ok_or(Error::NoEligibleEndpoint {
                    members: self.pool.len(),
                })
        });
        Some(found.map(|i| self.pool.member(i)))
    }

    fn cap(&self, member: &Member) -> Option<u64> {
        let factor = self.bound?;
        let i = (0..self.pool.len()).find(|&i| std::ptr::eq(&**self.pool.member(i), member))?;
        Some(self.cap_of(factor, self.pool.total_load(), i))
    }

    fn layout(&self) -> Option<Layout> {
        Some(Layout::new(
            self.pool.endpoints(),
            self.placement.shares(self.pool.len()),
            self.placement.entries(),
            self.placement.entry_label(),
        ))
    }
}

/// The clockwise walk of [`Hashing::walk`].
struct Walk<'a, T> {
    placement: &'a T,
    entry: usize,
    left: usize,
    last: usize,
}

impl<T: Placement> Iterator for Walk<'_, T> {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        while self.left > 0 {
            let owner = self.placement.owner(self.entry);
            self.left -= 1;
            self.entry += 1;
            if self.entry == self.placement.entries() {
                self.entry = 0;
            }
            if owner != self.last {
                self.last = owner;
                return Some(owner);
            }
        }
        None
    }
}
