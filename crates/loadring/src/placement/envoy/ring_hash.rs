//! Envoy's `ring_hash`: a ketama-style ring of `xxHash64("<key>_<k>")` points.
//!
//! Bit for bit Envoy's `RingHashLoadBalancer::Ring`: weights are normalized
//! (`w_i = weight_i / sum`), the ring is scaled so the lightest host gets a
//! whole number of points (`scale = min(ceil(min_w * min_ring_size) / min_w,
//! max_ring_size)`), and walking the hosts in order a running `f64` target
//! `target += scale * w_i` decides how many points each host emits. Point `k`
//! of a host hashes `"<hash_name>_<k>"` (the endpoint's `hash_key`, else its
//! address) with xxHash64 (seed 0) or, with `hash=murmur_hash_2`, libstdc++'s
//! `std::hash<std::string>`.
//!
//! Request keys are always hashed with xxHash64 (seed 0), also with
//! `hash=murmur_hash_2`: in Envoy the request hash comes from the route's hash
//! policy (header, cookie, source IP), which uses xxHash64 whatever function
//! built the ring; only the ring points change.
//!
//! Envoy sorts points with `std::sort`, which leaves equal points in no
//! defined order; we order them by host (the first host in pool order wins).
//! The whole ring is built in one batch and sorted once. Weight-0 endpoints
//! get no points (Envoy has no weight 0).
//!
//! **Cost.** A pick hashes the key and finds its point (a bucket index, then
//! a search among a few points). Slow path: when the owner is unhealthy or
//! excluded (or, under a load bound, full), the pick walks points clockwise,
//! skipping runs of one endpoint in one step, until an eligible (non-full)
//! endpoint: `O(entries)` in the worst case (between `min_ring_size` and
//! `max_ring_size` points), e.g. one eligible endpoint among many; under a
//! load bound, when nobody eligible has room, one more `O(n)` pass finds the
//! least-loaded endpoint.
//! Under `hash_balance_factor=` (Envoy's own bound, `placement/envoy/bound.rs`) a
//! full owner's request does not walk: it visits the endpoints in Envoy's
//! pseudo-random order of its hash, `O(n)` plus seeding an MT19937.

use crate::error::{BuildError, ParseError, ParseErrorKind};
use crate::hash::{murmur_hash_2, point_name, xxhash64, STD_HASH_SEED};
use crate::inflight::pool::Pool;
use crate::placement::check_hashed_names;
use crate::placement::hashing::{RingKeyHash, RingPlacement, Scheme};
use crate::placement::ring::Ring;
use crate::util::params::Params;

/// Envoy's upper bound on both ring sizes (`lte: 8388608` in its API).
pub(crate) const MAX_RING_SIZE: u64 = 8_388_608;

/// The hash of ring points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PointHash {
    /// xxHash64, seed 0 (Envoy's default `XX_HASH`).
    XxHash,
    /// libstdc++'s `_Hash_bytes`, seed 0xc70f6907 (Envoy's `MURMUR_HASH_2`).
    MurmurHash2,
}

/// Parameters of an Envoy ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RingHash {
    pub(crate) min_ring_size: u64,
    pub(crate) max_ring_size: u64,
    pub(crate) hash: PointHash,
}

impl RingHash {
    pub(crate) fn parse(params: &mut Params<'_>) -> Result<Self, ParseError> {
        let min_ring_size = params.take_u64("min_ring_size", 1, MAX_RING_SIZE, 1024)?;
        let max_ring_size = params.take_u64("max_ring_size", 1, MAX_RING_SIZE, MAX_RING_SIZE)?;
        if min_ring_size > max_ring_size {
            let accepted = format!("1 <= min_ring_size <= max_ring_size <= {MAX_RING_SIZE}");
            return Err(ParseError::new(
                ParseErrorKind::Conflict,
                format!(
                    "{}: min_ring_size={min_ring_size} is greater than max_ring_size={max_ring_size}: \
                     accepted {accepted}",
                    params.policy()
                ),
            )
            .with_policy(params.policy())
            .with_key("min_ring_size")
            .with_value(&min_ring_size.to_string())
            .with_accepted(accepted));
        }
        let hash = match params.take_choice("hash", &["xx_hash", "murmur_hash_2"], "xx_hash")? {
            "murmur_hash_2" => PointHash::MurmurHash2,
            _ => PointHash::XxHash,
        };
        Ok(RingHash {
            min_ring_size,
            max_ring_size,
            hash,
        })
    }

    /// Builds the ring over `pool`: every point in one batch, one sort.
    fn build(&self, pool: &Pool) -> Result<RingPlacement<u64>, BuildError> {
        let sum = pool.weight_sum() as f64;
        // Envoy's normalized weights: weight * 1.0 / sum, in f64.
        let normalized = |w: u32| f64::from(w) / sum;
        let min_w = pool
            .endpoints()
            .iter()
            .filter(|e| e.weight() > 0)
            .map(|e| normalized(e.weight()))
            .fold(f64::INFINITY, f64::min);
        let mut entries: Vec<(u64, u32)> = Vec::new();
        if min_w.is_finite() {
            let scale =
                ((min_w * self.min_ring_size as f64).ceil() / min_w).min(self.max_ring_size as f64);
            // scale <= max_ring_size, so the ring holds at most that many
            // points plus one for rounding in the running sum.
            // Each endpoint hashes its name for each of its points: at
            // most its share of the scale, rounded up, and one more for the
            // running sum's rounding.
            check_hashed_names(
                "ring_hash",
                pool.endpoints().iter().map(|e| {
                    let points = if e.weight() == 0 {
                        0
                    } else {
                        (scale * normalized(e.weight())).ceil() as u64 + 1
                    };
                    (points, e.hash_name(), e)
                }),
            )?;
            entries.reserve(scale.ceil() as usize + 1);
            let mut buf = Vec::with_capacity(64);
            let mut current = 0.0f64;
            let mut target = 0.0f64;
            for (owner, endpoint) in pool.endpoints().iter().enumerate() {
                if endpoint.weight() == 0 {
                    continue;
                }
                target += scale * normalized(endpoint.weight());
                let mut k = 0u64;
                while current < target {
                    let name = point_name(&mut buf, endpoint.hash_name(), b'_', k);
                    let point = match self.hash {
                        PointHash::XxHash => xxhash64(name, 0),
                        PointHash::MurmurHash2 => murmur_hash_2(name, STD_HASH_SEED),
                    };
                    entries.push((point, owner as u32));
                    k += 1;
                    current += 1.0;
                }
            }
        }
        let rank: Vec<u32> = (0..pool.len() as u32).collect();
        Ok(RingPlacement {
            name: "ring_hash",
            ring: Ring::build(entries, &rank),
            key_hash: RingKeyHash::XxHash64,
            weighs: true,
        })
    }
}

impl Scheme for RingHash {
    type Placement = RingPlacement<u64>;

    fn name(&self) -> &'static str {
        "ring_hash"
    }

    /// Envoy's scale (see `build`), plus one point per host for rounding.
    fn size(&self, pool: &Pool) -> u64 {
        let sum = pool.weight_sum() as f64;
        let min_w = pool
            .endpoints()
            .iter()
            .filter(|e| e.weight() > 0)
            .map(|e| f64::from(e.weight()) / sum)
            .fold(f64::INFINITY, f64::min);
        if !min_w.is_finite() {
            return 0;
        }
        let scale =
            ((min_w * self.min_ring_size as f64).ceil() / min_w).min(self.max_ring_size as f64);
        scale.ceil() as u64 + pool.len() as u64
    }

    fn place(&self, pool: &Pool) -> Result<RingPlacement<u64>, BuildError> {
        self.build(pool)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::PolicySpec;

    #[test]
    fn defaults() {
        let mut params = Params::tokenize("ring_hash").unwrap();
        assert_eq!(
            RingHash::parse(&mut params).unwrap(),
            RingHash {
                min_ring_size: 1024,
                max_ring_size: 8_388_608,
                hash: PointHash::XxHash
            }
        );
        let spec: PolicySpec =
            "RING_HASH:hash=murmur_hash_2 min_ring_size=6 max_ring_size=6 balance=150"
                .parse()
                .unwrap();
        assert_eq!(spec.name(), "ring_hash");
        assert!(spec.is_hashing());
        assert_eq!(spec.load_factor().unwrap().to_string(), "1.5");
    }

    #[test]
    fn bad_parameters_name_the_key_and_the_range() {
        let cases = [
            (
                "ring_hash:min_ring_size=0",
                "ring_hash: min_ring_size=0 is out of range: accepted 1..=8388608",
            ),
            (
                "ring_hash:max_ring_size=0",
                "ring_hash: max_ring_size=0 is out of range: accepted 1..=8388608",
            ),
            (
                "ring_hash:min_ring_size=8388609",
                "ring_hash: min_ring_size=8388609 is out of range: accepted 1..=8388608",
            ),
            (
                "ring_hash:max_ring_size=9000000",
                "ring_hash: max_ring_size=9000000 is out of range: accepted 1..=8388608",
            ),
            (
                "ring_hash:min_ring_size=2048 max_ring_size=1024",
                "ring_hash: min_ring_size=2048 is greater than max_ring_size=1024: \
                 accepted 1 <= min_ring_size <= max_ring_size <= 8388608",
            ),
            (
                "ring_hash:hash=md5",
                "ring_hash: hash=md5: accepted xx_hash, murmur_hash_2",
            ),
            (
                "ring_hash:replicas=100",
                "ring_hash: unknown key `replicas` (accepted: min_ring_size, max_ring_size, hash, load_factor, balance, hash_balance_factor)",
            ),
        ];
        for (input, want) in cases {
            let got = input.parse::<PolicySpec>().unwrap_err().to_string();
            assert_eq!(got, want, "{input}");
        }
    }

    #[test]
    fn sizes_in_the_wrong_order_are_named_by_the_accessors() {
        let err = "ring_hash:min_ring_size=2048 max_ring_size=1024"
            .parse::<PolicySpec>()
            .unwrap_err();
        assert_eq!(err.kind(), crate::ParseErrorKind::Conflict);
        assert_eq!(err.policy(), Some("ring_hash"));
        assert_eq!(err.key(), Some("min_ring_size"));
        assert_eq!(err.value(), Some("2048"));
        assert_eq!(
            err.accepted(),
            Some("1 <= min_ring_size <= max_ring_size <= 8388608")
        );
    }
}
