//! Apache Dubbo's `ConsistentHashLoadBalance`: `dubbo:nodes=N`.
//!
//! A Rust client or `loadring proxy` beside Dubbo (Java) or dubbo-go
//! consumers must send each key to the provider they send it to. This is
//! Dubbo 3.3's ring (dubbo-go places string keys identically), endpoints
//! taken in the order given, which must be the order of Dubbo's invoker
//! list:
//!
//! - `nodes=` is Dubbo's `hash.nodes` (default 160). Each endpoint gets
//!   `floor(nodes / 4)` MD5 digests, digest `i` of `name + decimal(i)` (the
//!   index is a suffix, with no separator: `10.0.0.1:208800`), and four
//!   points per digest, `LE32(d[4h..4h+4])` for `h` = 0..3. A `nodes` that is
//!   not a multiple of 4 is rounded down as Dubbo does; below 4 Dubbo makes
//!   no point at all (and fails every call), so loadring accepts `4..=8388608`.
//! - A key hashes to `LE32(md5(key)[0..4])` and goes to the first point at
//!   or after it, wrapping. Dubbo's key is the text of the hashed arguments
//!   (`hash.arguments`, by default the first argument) concatenated.
//! - Points live in a map: an endpoint later in the order overwrites an equal
//!   point of an earlier one (so of two endpoints with one name, the later
//!   owns every point, and the earlier none).
//!
//! ## Names, weights, health
//! The name hashed is the endpoint's `hash_key` when it has one, else its
//! address as written: Dubbo hashes its URL's `host:port`, so set `hash_key`
//! to that text when loadring reaches the provider by another address.
//! Dubbo's consistent hashing ignores weights; here weight 0 means drained,
//! as if the endpoint were not in the list (no points, and it overwrites
//! nothing), and any other weight only sets the endpoint's cap under a load
//! bound. Dubbo's invoker list holds only available providers: loadring keeps
//! the ring and sends the keys of an unhealthy or excluded endpoint to the
//! next point's endpoint clockwise.
//!
//! ## Bounded load (`load_factor=` / `balance=`)
//! The generic cap along that same clockwise walk.
//!
//! **Cost.** A build hashes `floor(nodes / 4)` digests per endpoint and sorts
//! the points once (a radix sort). A pick hashes the key with MD5 and finds
//! its point (a bucket index, then a few points).

use crate::error::{BuildError, ParseError};
use crate::hash::{md5_le32, md5_words, push_decimal};
use crate::inflight::pool::Pool;
use crate::placement::hashing::{RingKeyHash, RingPlacement, Scheme};
use crate::placement::ring::{later_first, Ring};
use crate::placement::{check_hashed_names, MAX_RING_POINTS};
use crate::util::params::Params;

/// The policy name.
const NAME: &str = "dubbo";
/// Dubbo's default `hash.nodes`.
const DEFAULT_NODES: u64 = 160;
/// Dubbo makes `nodes / 4` digests: fewer than 4 nodes make an empty ring.
const MIN_NODES: u64 = 4;

/// The parameters of `dubbo`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Dubbo {
    /// Dubbo's `hash.nodes`.
    pub(crate) nodes: u32,
}

impl Dubbo {
    pub(crate) fn parse(params: &mut Params<'_>) -> Result<Self, ParseError> {
        let nodes = params.take_u64("nodes", MIN_NODES, MAX_RING_POINTS, DEFAULT_NODES)?;
        Ok(Dubbo {
            nodes: nodes as u32,
        })
    }

    /// Digests per endpoint (four points each).
    fn digests(&self) -> u64 {
        u64::from(self.nodes) / 4
    }
}

impl Scheme for Dubbo {
    type Placement = RingPlacement<u32>;

    fn name(&self) -> &'static str {
        NAME
    }

    fn size(&self, pool: &Pool) -> u64 {
        (self.digests() * 4).saturating_mul(pool.weighted_len() as u64)
    }

    fn place(&self, pool: &Pool) -> Result<RingPlacement<u32>, BuildError> {
        let points = self.size(pool);
        if points > MAX_RING_POINTS {
            return Err(BuildError::too_large(format!(
                "{NAME}: nodes={} over {} endpoints makes {points} points, more than the limit of {MAX_RING_POINTS}",
                self.nodes,
                pool.weighted_len() as u64
            )));
        }
        check_hashed_names(
            NAME,
            pool.endpoints().iter().map(|e| {
                let digests = if e.weight() == 0 { 0 } else { self.digests() };
                (digests, e.hash_name(), e)
            }),
        )?;
        let mut entries: Vec<(u32, u32)> = Vec::with_capacity(points as usize);
        let mut buf = Vec::with_capacity(64);
        for (owner, e) in pool.endpoints().iter().enumerate() {
            if e.weight() == 0 {
                continue;
            }
            for i in 0..self.digests() {
                // Dubbo's `address + i`: the index follows with no separator.
                buf.clear();
                buf.extend_from_slice(e.hash_name().as_bytes());
                push_decimal(&mut buf, i);
                let words = md5_words(&buf);
                entries.extend(words.iter().map(|&w| (w, owner as u32)));
            }
        }
        Ok(RingPlacement {
            name: NAME,
            ring: Ring::build_distinct(entries, &later_first(pool.len())),
            key_hash: RingKeyHash::Other(|k| u64::from(md5_le32(k))),
            // Dubbo's ring ignores weights: `nodes` points per endpoint.
            weighs: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoint::Endpoint;

    fn pool(addrs: &[&str]) -> Pool {
        Pool::for_test(
            addrs
                .iter()
                .map(|a| a.parse::<Endpoint>().unwrap())
                .collect(),
        )
    }

    /// Dubbo's points of `10.0.0.1:20880` begin with md5("10.0.0.1:208800").
    #[test]
    fn the_index_is_a_suffix_without_separator() {
        let built = Dubbo { nodes: 4 }
            .place(&pool(&["10.0.0.1:20880"]))
            .unwrap();
        let mut want = md5_words(b"10.0.0.1:208800").to_vec();
        want.sort_unstable();
        want.dedup();
        assert_eq!(built.ring.points(), &want[..]);
    }

    #[test]
    fn a_later_endpoint_of_the_same_name_owns_every_point() {
        let built = Dubbo { nodes: 160 }
            .place(&pool(&["a:1 tag=x", "a:1 tag=y"]))
            .unwrap();
        assert_eq!(built.ring.len(), 160);
        assert!((0..160).all(|i| built.ring.owner(i) == 1));
    }

    /// Sizes count 4 points per digest of the endpoints of weight >= 1 only,
    /// and a ring over the limit is refused before anything is hashed.
    #[test]
    fn sizes_count_live_endpoints_and_the_limit_is_checked_first() {
        let three = pool(&["a:1", "b:1 weight=0", "c:1"]);
        assert_eq!(Dubbo { nodes: 162 }.size(&three), 320);
        assert_eq!(Dubbo { nodes: 4 }.size(&three), 8);
        let err = Dubbo { nodes: 4_194_308 }.place(&three).unwrap_err();
        assert_eq!(
            err.to_string(),
            "dubbo: nodes=4194308 over 2 endpoints makes 8388616 points, more than the limit of 8388608"
        );
    }

    #[test]
    fn weight_zero_makes_no_points_and_nodes_round_down() {
        let built = Dubbo { nodes: 7 }
            .place(&pool(&["a:1", "b:1 weight=0", "c:1 weight=3"]))
            .unwrap();
        assert_eq!(built.ring.len(), 8, "one digest each for a and c");
        assert!((0..8).all(|i| built.ring.owner(i) != 1));
    }
}
