//! brpc's consistent-hashing rings: `c_murmurhash`, `c_md5`, `c_ketama`.
//!
//! Bit for bit brpc's `ConsistentHashingLoadBalancer`: virtual node `i` of an
//! endpoint hashes `"<addr>-<i>"`; ties between equal points go to the endpoint
//! that sorts first in brpc's `EndPoint` order. Weights are our extension: an
//! endpoint of weight `w` gets `replicas * w` virtual nodes (weight 1 is brpc).
//!
//! **Cost.** A pick hashes the key and finds its point (a bucket index, then
//! a search among a few points). Slow path: when the owner is unhealthy or
//! excluded (or, under a load bound, full), the pick walks points clockwise,
//! skipping runs of one endpoint in one step, until an eligible (non-full)
//! endpoint: `O(entries)` in the worst case (`replicas * W` points, `W` the
//! total weight), e.g. one eligible endpoint among many; under a load bound,
//! when nobody eligible has room, one more `O(n)` pass finds the least-loaded
//! endpoint.

use std::cell::Cell;

use crate::endpoint::Endpoint;
use crate::error::{BuildError, ParseError, ParseErrorKind};
use crate::hash::{md5_le32, md5_words, point_name, Murmur3Prefix};
use crate::inflight::pool::Pool;
use crate::placement::hashing::{RingKeyHash, RingPlacement, Scheme};
use crate::placement::ring::Ring;
use crate::placement::{check_hashed_names, MAX_RING_POINTS};
use crate::policy::Change;
use crate::util::params::Params;

thread_local! {
    static POINTS_HASHED: Cell<u64> = const { Cell::new(0) };
}

/// How many brpc ring points this thread has hashed so far.
///
/// Lets a test outside this crate check that one membership change costs one
/// endpoint's points, not the whole ring's, by counting work instead of
/// timing it. Per thread, so tests running side by side do not mix counts;
/// bumped once per endpoint placed, so it costs nothing measurable.
#[doc(hidden)]
pub fn points_hashed() -> u64 {
    POINTS_HASHED.with(Cell::get)
}

/// Which of brpc's three rings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BrpcHash {
    Murmur3,
    Md5,
    Ketama,
}

/// Parameters of a brpc ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BrpcRing {
    pub(crate) hash: BrpcHash,
    pub(crate) replicas: u32,
}

impl BrpcRing {
    pub(crate) fn parse(hash: BrpcHash, params: &mut Params<'_>) -> Result<Self, ParseError> {
        let replicas = params.take_u64("replicas", 1, MAX_RING_POINTS, 100)? as u32;
        if hash == BrpcHash::Ketama && !replicas.is_multiple_of(4) {
            return Err(ParseError::new(
                ParseErrorKind::Value,
                format!(
                    "{}: replicas={replicas}: c_ketama takes four points per MD5 digest, \
                     so replicas must be a multiple of 4",
                    params.policy()
                ),
            )
            .with_policy("c_ketama")
            .with_key("replicas")
            .with_value(&replicas.to_string())
            .with_accepted("a multiple of 4"));
        }
        Ok(BrpcRing { hash, replicas })
    }

    pub(crate) fn name(&self) -> &'static str {
        match self.hash {
            BrpcHash::Murmur3 => "c_murmurhash",
            BrpcHash::Md5 => "c_md5",
            BrpcHash::Ketama => "c_ketama",
        }
    }

    /// Checks that `pool` makes no more points than the limit.
    fn check_size(&self, pool: &Pool) -> Result<(), BuildError> {
        let points = u64::from(self.replicas).saturating_mul(pool.weight_sum());
        if points > MAX_RING_POINTS {
            return Err(BuildError::too_large(format!(
                "{}: replicas={} times a total weight of {} makes {points} points, more than the limit of {MAX_RING_POINTS}",
                self.name(),
                self.replicas,
                pool.weight_sum()
            )));
        }
        // Murmur3 mixes each address once (`Murmur3Prefix`); MD5 hashes
        // the whole name of every point.
        let names_per_node = match self.hash {
            BrpcHash::Murmur3 => return Ok(()),
            BrpcHash::Md5 => 1,
            BrpcHash::Ketama => 4,
        };
        check_hashed_names(
            self.name(),
            pool.endpoints().iter().map(|e| {
                let nodes = u64::from(self.replicas) * u64::from(e.weight());
                (nodes / names_per_node, e.addr(), e)
            }),
        )
    }

    /// Appends the points of `pool`'s endpoint `owner` to `entries`.
    fn points_of(
        &self,
        pool: &Pool,
        owner: usize,
        entries: &mut Vec<(u32, u32)>,
        buf: &mut Vec<u8>,
    ) {
        let endpoint = pool.endpoint(owner);
        let owner = owner as u32;
        let before = entries.len();
        let nodes = u64::from(self.replicas) * u64::from(endpoint.weight());
        match self.hash {
            BrpcHash::Murmur3 => {
                // Every name starts with "<addr>-": mix that part once.
                buf.clear();
                buf.extend_from_slice(endpoint.addr().as_bytes());
                buf.push(b'-');
                let prefix = Murmur3Prefix::new(buf, 0);
                prefix.hash_decimals(nodes, |h| entries.push((h, owner)));
            }
            BrpcHash::Md5 => {
                for i in 0..nodes {
                    entries.push((md5_le32(point_name(buf, endpoint.addr(), b'-', i)), owner));
                }
            }
            BrpcHash::Ketama => {
                for i in 0..nodes / 4 {
                    let words = md5_words(point_name(buf, endpoint.addr(), b'-', i));
                    entries.extend(words.iter().map(|&w| (w, owner)));
                }
            }
        }
        let hashed = (entries.len() - before) as u64;
        POINTS_HASHED.with(|count| count.set(count.get() + hashed));
    }

    fn key_hash(&self) -> RingKeyHash {
        match self.hash {
            BrpcHash::Murmur3 => RingKeyHash::Murmur3,
            BrpcHash::Md5 | BrpcHash::Ketama => RingKeyHash::Other(|k| u64::from(md5_le32(k))),
        }
    }
}

impl Scheme for BrpcRing {
    type Placement = RingPlacement<u32>;

    fn name(&self) -> &'static str {
        BrpcRing::name(self)
    }

    fn size(&self, pool: &Pool) -> u64 {
        u64::from(self.replicas).saturating_mul(pool.weight_sum())
    }

    /// Builds the ring over `pool` in one batch and one sort.
    fn place(&self, pool: &Pool) -> Result<RingPlacement<u32>, BuildError> {
        self.check_size(pool)?;
        let points = u64::from(self.replicas) * pool.weight_sum();
        let mut entries: Vec<(u32, u32)> = Vec::with_capacity(points as usize);
        let mut buf = Vec::with_capacity(64);
        for owner in 0..pool.len() {
            self.points_of(pool, owner, &mut entries, &mut buf);
        }
        Ok(RingPlacement {
            name: self.name(),
            ring: Ring::build(entries, &brpc_ranks(pool)),
            key_hash: self.key_hash(),
            weighs: true,
        })
    }

    /// An endpoint's points depend on nothing but its address and weight, so
    /// one change removes or merges that endpoint's points alone: no other
    /// endpoint is hashed again, and the ring is not sorted again.
    fn replace(
        &self,
        previous: &RingPlacement<u32>,
        pool: &Pool,
        change: Change,
    ) -> Option<Result<RingPlacement<u32>, BuildError>> {
        if let Err(e) = self.check_size(pool) {
            return Some(Err(e));
        }
        let rank = brpc_ranks(pool);
        let mut buf = Vec::with_capacity(64);
        let mut added = Vec::new();
        let ring = match change {
            Change::Inserted(i) => {
                self.points_of(pool, i, &mut added, &mut buf);
                previous.ring.merge(added, &rank)
            }
            Change::Removed(i) => previous.ring.without_owner(i as u32, true),
            Change::Reweighted(i) => {
                self.points_of(pool, i, &mut added, &mut buf);
                previous
                    .ring
                    .without_owner(i as u32, false)
                    .merge(added, &rank)
            }
        };
        Some(Ok(RingPlacement {
            name: self.name(),
            ring,
            key_hash: self.key_hash(),
            weighs: true,
        }))
    }
}

/// Each pool index's rank in brpc's endpoint order.
fn brpc_ranks(pool: &Pool) -> Vec<u32> {
    let keys: Vec<_> = pool.endpoints().iter().map(Endpoint::brpc_key).collect();
    let mut order: Vec<usize> = (0..pool.len()).collect();
    order.sort_by(|&a, &b| keys[a].cmp(&keys[b]));
    let mut rank = vec![0u32; pool.len()];
    for (r, i) in order.into_iter().enumerate() {
        rank[i] = r as u32;
    }
    rank
}

#[cfg(test)]
mod tests {
    use crate::hash::murmur3_x86_32;

    use proptest::prelude::*;

    use super::*;
    use crate::endpoint::{dedup, Endpoint};

    fn pool(endpoints: Vec<Endpoint>) -> Pool {
        Pool::for_test(endpoints)
    }

    /// brpc's own way: add one server at a time, inserting its points into a
    /// sorted ring (ties by brpc's endpoint order).
    fn one_at_a_time(ring: &BrpcRing, endpoints: &[Endpoint]) -> Vec<(u32, String)> {
        let mut sorted: Vec<(u32, usize)> = Vec::new();
        for (owner, e) in endpoints.iter().enumerate() {
            let nodes = u64::from(ring.replicas) * u64::from(e.weight());
            let mut points = Vec::new();
            match ring.hash {
                BrpcHash::Murmur3 => points.extend(
                    (0..nodes).map(|i| murmur3_x86_32(format!("{}-{i}", e.addr()).as_bytes(), 0)),
                ),
                BrpcHash::Md5 => points
                    .extend((0..nodes).map(|i| md5_le32(format!("{}-{i}", e.addr()).as_bytes()))),
                BrpcHash::Ketama => {
                    for i in 0..nodes / 4 {
                        points.extend(md5_words(format!("{}-{i}", e.addr()).as_bytes()));
                    }
                }
            }
            for p in points {
                let at = sorted.partition_point(|&(q, o)| {
                    q < p || (q == p && endpoints[o].brpc_cmp(e) == std::cmp::Ordering::Less)
                });
                sorted.insert(at, (p, owner));
            }
        }
        sorted
            .into_iter()
            .map(|(p, o)| (p, endpoints[o].addr().to_string()))
            .collect()
    }

    /// 64 cases, unless `PROPTEST_CASES` says how many (`with_cases`
    /// ignores it; tests/common/mod.rs has the same for the other tests).
    fn cases(default: u32) -> ProptestConfig {
        let cases = std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(default);
        ProptestConfig {
            cases,
            ..ProptestConfig::default()
        }
    }

    fn endpoint() -> impl Strategy<Value = Endpoint> {
        let addr = prop_oneof![
            (any::<[u8; 4]>(), 1u16..4)
                .prop_map(|(ip, port)| format!("{}.{}.{}.{}:{port}", ip[0], ip[1], ip[2], ip[3])),
            (0u8..8).prop_map(|n| format!("web{n}")),
            (0u8..4, 80u16..82).prop_map(|(n, port)| format!("10.0.0.{n}:{port}")),
        ];
        (addr, 0u32..3).prop_map(|(a, w)| Endpoint::new(a).unwrap().with_weight(w))
    }

    proptest! {
        #![proptest_config(cases(64))]

        #[test]
        fn the_batch_build_equals_brpcs_one_at_a_time_ring(
            endpoints in proptest::collection::vec(endpoint(), 1..12),
            hash in prop_oneof![Just(BrpcHash::Murmur3), Just(BrpcHash::Md5), Just(BrpcHash::Ketama)],
            replicas in (1u32..6).prop_map(|r| r * 4),
        ) {
            // Keep one endpoint per address: weights differ between duplicates.
            let mut seen = std::collections::HashSet::new();
            let endpoints: Vec<Endpoint> = endpoints.into_iter().filter(|e| seen.insert(e.addr().to_string())).collect();
            let endpoints: Vec<Endpoint> = dedup(endpoints.into_iter().map(|e| (e, ()))).unwrap().into_iter().map(|(e, ())| e).collect();
            let ring = BrpcRing { hash, replicas };
            let pool = pool(endpoints.clone());
            let built = ring.place(&pool).unwrap();
            let batch: Vec<(u32, String)> = (0..built.ring.len())
                .map(|i| (built.ring.point(i), pool.endpoint(built.ring.owner(i)).addr().to_string()))
                .collect();
            prop_assert_eq!(batch, one_at_a_time(&ring, &endpoints));
        }
    }

    #[test]
    fn colliding_points_go_to_the_endpoint_brpc_sorts_first() {
        // Same address twice under different tags: every point collides.
        let a = Endpoint::new("10.0.0.1:80").unwrap().with_tag("b").unwrap();
        let b = Endpoint::new("10.0.0.1:80").unwrap().with_tag("a").unwrap();
        let pool = pool(vec![a, b]);
        let built = BrpcRing {
            hash: BrpcHash::Murmur3,
            replicas: 3,
        }
        .place(&pool)
        .unwrap();
        for i in (0..6).step_by(2) {
            assert_eq!(built.ring.point(i), built.ring.point(i + 1));
            assert_eq!(
                pool.endpoint(built.ring.owner(i)).tag(),
                Some("a"),
                "tag `a` sorts first"
            );
        }
    }

    #[test]
    fn a_ring_too_large_is_an_error_naming_the_sizes() {
        let endpoints: Vec<Endpoint> = (0..100)
            .map(|i| Endpoint::new(format!("h{i}")).unwrap())
            .collect();
        let err = BrpcRing {
            hash: BrpcHash::Murmur3,
            replicas: 100_000,
        }
        .place(&pool(endpoints))
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "c_murmurhash: replicas=100000 times a total weight of 100 makes 10000000 points, more than the limit of 8388608"
        );
    }
}
