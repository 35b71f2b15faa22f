//! brpc's consistent-hashing rings: `c_murmurhash`, `c_md5`, `c_ketama`.
//!
//! Bit for bit brpc's `ConsistentHashingLoadBalancer`: virtual node `i` of an
//! endpoint hashes `"<addr>-<i>"`; ties between equal points go to the endpoint
//! that sorts first in brpc's `EndPoint` order. Weights are our extension: an
//! endpoint of weight `w` gets `replicas * w` virtual nodes (weight 1 is brpc).

use crate::error::{spec_err, Error, Result};
use crate::hash::{md5_le32, md5_words, murmur3_x86_32, point_name};
use crate::hashing::RingPlacement;
use crate::pool::Pool;
use crate::ring::Ring;
use crate::spec::Params;

/// More points than this is a typo, not a need (Envoy's largest ring).
pub(crate) const MAX_RING_POINTS: u64 = 8_388_608;

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
    pub(crate) fn parse(hash: BrpcHash, params: &mut Params<'_>) -> Result<Self> {
        let replicas = params.take_u64("replicas", 1, MAX_RING_POINTS, 100)? as u32;
        if hash == BrpcHash::Ketama && replicas % 4 != 0 {
            return Err(spec_err(format!(
                "replicas={replicas}: c_ketama takes four points per MD5 digest, so replicas must be a multiple of 4"
            )));
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

    /// Builds the ring over `pool` in one batch and one sort.
    pub(crate) fn build(&self, pool: &Pool) -> Result<RingPlacement<u32>> {
        let replicas = u64::from(self.replicas);
        let points = replicas.saturating_mul(pool.weight_sum());
        if points > MAX_RING_POINTS {
            return Err(Error::Spec(format!(
                "{}: replicas={} times a total weight of {} makes {points} points, more than the limit of {MAX_RING_POINTS}",
                self.name(),
                self.replicas,
                pool.weight_sum()
            )));
        }
        let mut entries: Vec<(u32, u32)> = Vec::with_capacity(points as usize);
        let mut buf = Vec::with_capacity(64);
        for (owner, endpoint) in pool.endpoints().iter().enumerate() {
            let owner = owner as u32;
            let nodes = replicas * u64::from(endpoint.weight());
            match self.hash {
                BrpcHash::Murmur3 => {
                    for i in 0..nodes {
                        let name = point_name(&mut buf, endpoint.addr(), b'-', i);
                        entries.push((murmur3_x86_32(name, 0), owner));
                    }
                }
                BrpcHash::Md5 => {
                    for i in 0..nodes {
                        entries.push((
                            md5_le32(point_name(&mut buf, endpoint.addr(), b'-', i)),
                            owner,
                        ));
                    }
                }
                BrpcHash::Ketama => {
                    for i in 0..nodes / 4 {
                        let words = md5_words(point_name(&mut buf, endpoint.addr(), b'-', i));
                        entries.extend(words.iter().map(|&w| (w, owner)));
                    }
                }
            }
        }
        Ok(RingPlacement {
            name: self.name(),
            ring: Ring::build(entries, &brpc_ranks(pool)),
            key_hash: self.key_hash(),
        })
    }

    fn key_hash(&self) -> fn(&[u8]) -> u64 {
        match self.hash {
            BrpcHash::Murmur3 => |k| u64::from(murmur3_x86_32(k, 0)),
            BrpcHash::Md5 | BrpcHash::Ketama => |k| u64::from(md5_le32(k)),
        }
    }
}

/// Each pool index's rank in brpc's endpoint order.
fn brpc_ranks(pool: &Pool) -> Vec<u32> {
    let mut order: Vec<usize> = (0..pool.len()).collect();
    order.sort_by(|&a, &b| pool.endpoint(a).brpc_cmp(pool.endpoint(b)));
    let mut rank = vec![0u32; pool.len()];
    for (r, i) in order.into_iter().enumerate() {
        rank[i] = r as u32;
    }
    rank
}
