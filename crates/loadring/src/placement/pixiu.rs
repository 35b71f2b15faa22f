//! dubbo-go-pixiu's `RingHashing`: `pixiu_ring:replica_num=R max_vnode_num=B`.
//!
//! A `loadring proxy` or Rust client beside the pixiu gateway must send each
//! request to the endpoint pixiu sends it to. This is pixiu's ring (the
//! dubbogo/gost `hash/consistent` ring it builds, gost v1.14.3), endpoints
//! taken in the order of pixiu's cluster configuration:
//!
//! - `replica_num=` and `max_vnode_num=` are pixiu's keys under a cluster's
//!   `consistent:` (defaults 10 and 4294967295). Pixiu reads 0 as "the
//!   default"; loadring rejects 0: leave the key out instead.
//! - `H(s) = LE32(blake2b-512(s)[0..4]) mod B`: the low 32 bits of the
//!   digest's first little-endian u64, then `mod max_vnode_num` (so with the
//!   default, `0xFFFFFFFF` becomes 0).
//! - Endpoint `e` gets the points `H(decimal(i) + name)`, `i` in `0..R` (the
//!   index is a prefix: `0192.168.1.1:1001`). Endpoints are added in order;
//!   one whose name was added before is ignored (it gets no point); an
//!   equal point is overwritten by the later write (a later endpoint, or a
//!   later replica). The ring is the distinct points, ascending.
//! - A key goes to the first point at or after `H(key)`, wrapping. Pixiu's
//!   HTTP key is `METHOD.request-target` (`GET./pixiu?total=1`): the proxy's
//!   key source `method-uri`. A request code is the ring position itself
//!   (pixiu's `GetHash`): any u32, used as is.
//!
//! ## Names, weights, health
//! The name hashed is the endpoint's `hash_key` when it has one, else its
//! address as written (pixiu hashes its endpoint's `ip:port`): set
//! `hash_key` to that text when loadring reaches the endpoint by another
//! address. Pixiu's ring ignores weights; here weight 0 means drained, as if
//! the endpoint were not configured (no points, and it does not make a later
//! endpoint of its name a duplicate), and any other weight only sets the
//! endpoint's cap under a load bound. Pixiu rebuilds its ring over healthy
//! endpoints only; loadring keeps the ring and sends the keys of an
//! unhealthy or excluded endpoint to the next point's endpoint clockwise.
//!
//! ## Bounded load (`load_factor=` / `balance=`)
//! The generic cap along that same clockwise walk (pixiu's ring hashing
//! itself has no bound).
//!
//! ## Not offered: pixiu's `MaglevHashing`
//! Pixiu fills its Maglev table in the order of its endpoints' permutations,
//! which it makes by ranging over a Go map of the endpoints; Go randomizes a
//! map's iteration order on every run, so two pixiu processes of one
//! configuration can fill the table differently. There is no one placement
//! to reproduce.
//!
//! **Cost.** A build hashes `R` BLAKE2b digests per endpoint and sorts the
//! points once; a pick hashes the key with BLAKE2b-512 and finds its point.

use std::collections::HashSet;

use crate::error::{BuildError, ParseError};
use crate::hash::{blake2b_le32, push_decimal};
use crate::inflight::pool::Pool;
use crate::placement::hashing::{Placement, Scheme};
use crate::placement::ring::{later_first, Ring};
use crate::placement::{check_hashed_names, MAX_RING_POINTS};
use crate::util::params::Params;

/// The policy name.
const NAME: &str = "pixiu_ring";
/// gost's `replicationFactor`.
const DEFAULT_REPLICA_NUM: u64 = 10;
/// gost's `maxBucketNum` (`math.MaxUint32`).
const DEFAULT_MAX_VNODE_NUM: u64 = u32::MAX as u64;

/// The parameters of `pixiu_ring`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PixiuRing {
    /// Points per endpoint (before collisions).
    pub(crate) replica_num: u32,
    /// The modulus of every hash: ring positions are `0..max_vnode_num`.
    pub(crate) max_vnode_num: u32,
}

impl PixiuRing {
    pub(crate) fn parse(params: &mut Params<'_>) -> Result<Self, ParseError> {
        let replica_num =
            params.take_u64("replica_num", 1, MAX_RING_POINTS, DEFAULT_REPLICA_NUM)? as u32;
        let max_vnode_num = params.take_u64(
            "max_vnode_num",
            1,
            DEFAULT_MAX_VNODE_NUM,
            DEFAULT_MAX_VNODE_NUM,
        )? as u32;
        Ok(PixiuRing {
            replica_num,
            max_vnode_num,
        })
    }
}

impl Scheme for PixiuRing {
    type Placement = PixiuPlacement;

    fn name(&self) -> &'static str {
        NAME
    }

    fn size(&self, pool: &Pool) -> u64 {
        u64::from(self.replica_num).saturating_mul(pool.weighted_len() as u64)
    }

    fn place(&self, pool: &Pool) -> Result<PixiuPlacement, BuildError> {
        let points = self.size(pool);
        if points > MAX_RING_POINTS {
            return Err(BuildError::too_large(format!(
                "{NAME}: replica_num={} over {} endpoints makes {points} points, more than the limit of {MAX_RING_POINTS}",
                self.replica_num,
                pool.weighted_len() as u64
            )));
        }
        check_hashed_names(
            NAME,
            pool.endpoints().iter().map(|e| {
                let names = if e.weight() == 0 { 0 } else { self.replica_num };
                (u64::from(names), e.hash_name(), e)
            }),
        )?;
        let mut entries: Vec<(u32, u32)> = Vec::with_capacity(points as usize);
        let mut seen: HashSet<&str> = HashSet::with_capacity(pool.len());
        let mut buf = Vec::with_capacity(64);
        for (owner, e) in pool.endpoints().iter().enumerate() {
            // gost's `add` returns early for a host already in its load map.
            if e.weight() == 0 || !seen.insert(e.hash_name()) {
                continue;
            }
            for i in 0..u64::from(self.replica_num) {
                buf.clear();
                push_decimal(&mut buf, i);
                buf.extend_from_slice(e.hash_name().as_bytes());
                entries.push((blake2b_le32(&buf) % self.max_vnode_num, owner as u32));
            }
        }
        Ok(PixiuPlacement {
            ring: Ring::build_distinct(entries, &later_first(pool.len())),
            modulus: self.max_vnode_num,
        })
    }
}

/// Pixiu's ring: positions in `0..modulus`, keys hashed into the same range.
#[derive(Debug)]
pub(crate) struct PixiuPlacement {
    ring: Ring<u32>,
    modulus: u32,
}

impl Placement for PixiuPlacement {
    fn name(&self) -> &'static str {
        NAME
    }
    fn entries(&self) -> usize {
        self.ring.len()
    }
    #[inline]
    fn start(&self, code: u64) -> usize {
        self.ring.locate(code as u32)
    }
    #[inline]
    fn owner(&self, entry: usize) -> usize {
        self.ring.owner(entry)
    }
    fn max_code(&self) -> u64 {
        u64::from(u32::MAX)
    }
    #[inline]
    fn key_code(&self, key: &[u8]) -> u64 {
        u64::from(blake2b_le32(key) % self.modulus)
    }
    /// A key's position is one of `modulus` values: a point owns the
    /// positions after the previous point up to itself, the first point also
    /// those after the last one.
    fn shares(&self, endpoints: usize) -> Vec<f64> {
        // Counted in integers, divided once: no rounding adds up.
        let mut owned = vec![0u64; endpoints];
        let points = self.ring.points();
        let Some(&last) = points.last() else {
            return vec![0.0; endpoints];
        };
        let modulus = u64::from(self.modulus);
        let mut prev = u64::from(last);
        for (i, &p) in points.iter().enumerate() {
            let p = u64::from(p);
            owned[self.ring.owner(i)] += if i == 0 { p + modulus - prev } else { p - prev };
            prev = p;
        }
        owned
            .into_iter()
            .map(|n| n as f64 / modulus as f64)
            .collect()
    }
    fn entry_label(&self) -> &'static str {
        "points"
    }
    /// Pixiu's ring ignores weights: `replica_num` points per endpoint.
    fn weighs(&self) -> bool {
        false
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

    fn ring(replica_num: u32, max_vnode_num: u32) -> PixiuRing {
        PixiuRing {
            replica_num,
            max_vnode_num,
        }
    }

    #[test]
    fn the_index_is_a_prefix() {
        let built = ring(1, u32::MAX)
            .place(&pool(&["192.168.1.1:1001"]))
            .unwrap();
        assert_eq!(
            built.ring.points(),
            &[blake2b_le32(b"0192.168.1.1:1001") % u32::MAX]
        );
    }

    #[test]
    fn a_duplicate_name_is_ignored_unless_the_first_is_drained() {
        let built = ring(10, u32::MAX)
            .place(&pool(&["a:1 tag=x", "a:1 tag=y"]))
            .unwrap();
        assert!((0..built.entries()).all(|i| built.owner(i) == 0));
        let built = ring(10, u32::MAX)
            .place(&pool(&["a:1 tag=x weight=0", "a:1 tag=y"]))
            .unwrap();
        assert!((0..built.entries()).all(|i| built.owner(i) == 1));
    }

    #[test]
    fn sizes_count_live_endpoints_and_the_limit_is_checked_first() {
        let three = pool(&["a:1", "b:1 weight=0", "c:1"]);
        assert_eq!(ring(7, 1023).size(&three), 14);
        let err = ring(4_194_305, u32::MAX).place(&three).unwrap_err();
        assert_eq!(
            err.to_string(),
            "pixiu_ring: replica_num=4194305 over 2 endpoints makes 8388610 points, more than the limit of 8388608"
        );
    }

    /// With 3 positions, a point at 1 owns {0, 1} and a point at 2 owns {2}.
    #[test]
    fn shares_count_positions_modulo_max_vnode_num() {
        let placement = PixiuPlacement {
            ring: Ring::build(vec![(1, 0), (2, 1)], &[0, 1]),
            modulus: 3,
        };
        assert_eq!(placement.shares(2), [2.0 / 3.0, 1.0 / 3.0]);
        let one = PixiuPlacement {
            ring: Ring::build(vec![(5, 0)], &[0]),
            modulus: 9,
        };
        assert_eq!(one.shares(1), [1.0]);
    }
}
