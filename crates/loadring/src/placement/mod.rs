//! Consistent hashing: the shared core (`hashing.rs`: plain and bounded
//! picks over any ring or table), the ring, and one file per system whose
//! placement a family reproduces.

pub(crate) mod brpc;
pub(crate) mod dubbo;
pub(crate) mod envoy;
pub(crate) mod haproxy;
pub(crate) mod hashing;
pub(crate) mod ketama;
pub(crate) mod nginx;
pub(crate) mod pixiu;
pub mod ring;
pub(crate) mod twemproxy;

/// More points than this is a typo, not a need (Envoy's largest ring).
pub(crate) const MAX_RING_POINTS: u64 = 8_388_608;

/// The most bytes one build may hash to name its points, counting each
/// point name as the endpoint's name plus [`POINT_SUFFIX`] bytes: names of
/// 235 bytes at the largest ring. The schemes that hash a whole name per
/// point (`"<name>-<i>"` under MD5, xxHash, BLAKE2b) cost the name's length
/// times the points: without this, one endpoint named with a megabyte
/// would make the largest ring hash 8 TB.
pub(crate) const MAX_HASHED_BYTES: u64 = 1 << 31;

/// What a point name adds to the endpoint's name, at most: a separator and
/// the decimal point number.
const POINT_SUFFIX: u64 = 21;

/// Checks that hashing the point names of a build stays within
/// [`MAX_HASHED_BYTES`]: `names` gives, for each endpoint, how many point
/// names it hashes, the name they start with and the endpoint (for the
/// message, which names the longest name).
pub(crate) fn check_hashed_names<'e>(
    policy: &str,
    names: impl IntoIterator<Item = (u64, &'e str, &'e crate::endpoint::Endpoint)>,
) -> Result<(), crate::error::BuildError> {
    let mut bytes = 0u64;
    let mut longest: Option<(&str, &crate::endpoint::Endpoint)> = None;
    for (count, name, endpoint) in names {
        if count == 0 {
            continue;
        }
        let len = name.len() as u64;
        bytes = bytes.saturating_add(count.saturating_mul(len.saturating_add(POINT_SUFFIX)));
        if longest.is_none_or(|(l, _)| name.len() > l.len()) {
            longest = Some((name, endpoint));
        }
    }
    match longest {
        Some((name, endpoint)) if bytes > MAX_HASHED_BYTES => {
            Err(crate::error::BuildError::too_large(format!(
                "{policy}: hashing the point names takes {bytes} bytes ({POINT_SUFFIX} plus the \
                 name's length a point), more than the limit of {MAX_HASHED_BYTES}; the longest \
                 name, {} bytes, is endpoint `{}`'s: accepted shorter names or fewer points",
                name.len(),
                crate::echo::Echo(&endpoint.id().to_string()),
            )))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use crate::{Balancer, Endpoint, POLICY_NAMES};

    /// Whether each policy's layout weighs endpoints (`None`: no layout,
    /// the policy does not place by hash). Dubbo's and pixiu's rings, and
    /// libmemcached's unweighted continuum, give every endpoint the same
    /// number of points whatever its weight; every other scheme sizes its
    /// part by its weight. A locality policy is its inner policy's layout.
    const CASES: &[(&str, Option<bool>)] = &[
        ("c_murmurhash", Some(true)),
        ("c_murmurhash_bl", Some(true)),
        ("c_md5", Some(true)),
        ("c_ketama", Some(true)),
        ("ketama", Some(true)),
        ("ketama:compat=libketama", Some(true)),
        ("ketama:compat=libmemcached", Some(true)),
        ("ketama:compat=libmemcached weighted=false", Some(false)),
        ("ketama:compat=libmemcached_spy weighted=false", Some(false)),
        ("ring_hash", Some(true)),
        ("maglev", Some(true)),
        ("maglev:hash_balance_factor=125", Some(true)),
        ("nginx_hash", Some(true)),
        ("nginx_hash:consistent=true", Some(true)),
        ("haproxy_hash", Some(true)),
        ("haproxy_hash:type=consistent", Some(true)),
        ("twemproxy", Some(true)),
        ("twemproxy:distribution=modula", Some(true)),
        ("dubbo", Some(false)),
        ("dubbo:load_factor=1.25", Some(false)),
        ("pixiu_ring", Some(false)),
        ("rr", None),
        ("random", None),
        ("wrr", None),
        ("swrr", None),
        ("wr", None),
        ("p2c", None),
        ("la", None),
        ("zone_first", None),
        ("zone_first over dubbo", Some(false)),
        ("zone_first over maglev", Some(true)),
        ("local_first over pixiu_ring", Some(false)),
        ("local_first over c_md5", Some(true)),
    ];

    #[test]
    fn every_policy_says_whether_it_weighs_endpoints() {
        for name in POLICY_NAMES {
            assert!(
                CASES
                    .iter()
                    .any(|(spec, _)| spec.split([':', ' ']).next() == Some(name)),
                "{name} has no case"
            );
        }
        for &(spec, weighs) in CASES {
            let endpoint = |addr: &str, weight: u32| {
                let e = Endpoint::new(addr).unwrap().with_weight(weight);
                e.with_zone("z").unwrap()
            };
            let endpoints = vec![endpoint("10.0.0.1:80", 1), endpoint("10.0.0.2:80", 3)];
            let balancer = Balancer::new(spec.parse().unwrap(), endpoints).unwrap();
            let layout = balancer.layout().unwrap();
            assert_eq!(layout.as_ref().map(|l| l.weighs()), weighs, "{spec}");
            let Some(layout) = layout else { continue };
            // Weights 1 and 3: a quarter and three quarters when weighed,
            // halves when not; the placement itself agrees.
            let (fair, around) = if layout.weighs() {
                ([0.25, 0.75], 0.6..0.9)
            } else {
                ([0.5, 0.5], 0.3..0.7)
            };
            assert_eq!(layout.fair_shares(), fair, "{spec}");
            let second = layout.shares()[1].1;
            assert!(around.contains(&second), "{spec}: {second}");
        }
    }
}
