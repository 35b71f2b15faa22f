//! Envoy's `maglev` and `ring_hash` against deliberately naive references.
//!
//! - Maglev: the paper's listing 1 as Envoy writes it, storing every host's
//!   full permutation (N x M entries, computed with 128-bit products) and
//!   keeping Envoy's `next_` counters. The library's table, which stores no
//!   permutation, must own every slot exactly like it, at table sizes 7,
//!   65537, 131071 and 655373, for random hosts, weights and hash keys.
//! - ring_hash: a ring grown one host at a time, each point inserted into a
//!   sorted `Vec` as it is made. The library's batch-built ring (one sort)
//!   must answer every code like it.
//!
//! Both are compared through the public API only: the owner of slot `s` is
//! the natural owner of code `s`, and a ring is determined by its owner at
//! each point and just past it.

use crate::common;

use loadring::hash::{murmur_hash_2, xxhash64, STD_HASH_SEED};
use loadring::{Balancer, Endpoint, Request};
use proptest::prelude::*;

/// One endpoint of a random host set: (address, weight, optional hash_key).
type Host = (String, u32, Option<String>);

fn endpoints(hosts: &[Host]) -> Vec<Endpoint> {
    hosts
        .iter()
        .map(|(addr, weight, key)| {
            let e = Endpoint::new(addr.clone()).unwrap().with_weight(*weight);
            match key {
                Some(k) => e.with_hash_key(k.clone()).unwrap(),
                None => e,
            }
        })
        .collect()
}

fn name(host: &Host) -> &str {
    host.2.as_deref().unwrap_or(&host.0)
}

fn owner_of(balancer: &Balancer, code: u64) -> String {
    balancer
        .route(&Request::code(code))
        .unwrap()
        .expect("a hashing policy has natural owners")
        .addr()
        .to_string()
}

// ---------------------------------------------------------------- maglev

/// Envoy's `OriginalMaglevTable` fill, with stored permutations. Returns the
/// index (into `hosts`) owning each slot.
fn naive_maglev(hosts: &[Host], m: u64) -> Vec<usize> {
    let sum: u64 = hosts.iter().map(|h| u64::from(h.1)).sum();
    let mut order: Vec<usize> = (0..hosts.len()).filter(|&i| hosts[i].1 > 0).collect();
    // Stable sort by hash key: equal keys keep host order.
    order.sort_by(|&a, &b| name(&hosts[a]).cmp(name(&hosts[b])));
    let permutations: Vec<Vec<u64>> = order
        .iter()
        .map(|&i| {
            let key = name(&hosts[i]).as_bytes();
            let offset = u128::from(xxhash64(key, 0) % m);
            let skip = u128::from(xxhash64(key, 1) % (m - 1) + 1);
            (0..u128::from(m))
                .map(|j| ((offset + skip * j) % u128::from(m)) as u64)
                .collect()
        })
        .collect();
    let weights: Vec<f64> = order
        .iter()
        .map(|&i| f64::from(hosts[i].1) * 1.0 / sum as f64)
        .collect();
    let max_weight = weights.iter().copied().fold(0.0, f64::max);
    let mut target = vec![0.0f64; order.len()];
    let mut next = vec![0usize; order.len()];
    let mut table: Vec<Option<usize>> = vec![None; m as usize];
    let mut index = 0u64;
    let mut iteration: u32 = 1;
    while index < m {
        let mut i = 0;
        while i < order.len() && index < m {
            if f64::from(iteration) * weights[i] < target[i] {
                i += 1;
                continue;
            }
            target[i] += max_weight;
            let mut c = permutations[i][next[i]];
            while table[c as usize].is_some() {
                next[i] += 1;
                c = permutations[i][next[i]];
            }
            table[c as usize] = Some(order[i]);
            next[i] += 1;
            index += 1;
            i += 1;
        }
        iteration += 1;
    }
    table.into_iter().map(|s| s.unwrap()).collect()
}

fn check_maglev(hosts: &[Host], m: u64) -> Result<(), TestCaseError> {
    let want = naive_maglev(hosts, m);
    let balancer = Balancer::new(
        format!("maglev:table_size={m}").parse().unwrap(),
        endpoints(hosts),
    )
    .unwrap();
    let layout = balancer.layout().unwrap().unwrap();
    prop_assert_eq!(layout.entries(), m as usize);
    prop_assert_eq!(layout.entry_label(), "slots");
    for (slot, &owner) in want.iter().enumerate() {
        let got = owner_of(&balancer, slot as u64);
        prop_assert_eq!(&got, &hosts[owner].0, "slot {} of {}", slot, m);
        // Codes beyond the table land on `code mod M`.
        if slot % 997 == 0 {
            let code = u64::MAX - slot as u64;
            let expected = &hosts[want[(code % m) as usize]].0;
            prop_assert_eq!(&owner_of(&balancer, code), expected, "code {}", code);
        }
    }
    Ok(())
}

/// Distinct addresses; weights from `weights`; now and then a hash_key,
/// sometimes shared by two hosts (then pool order breaks the tie).
fn host_set(
    count: std::ops::RangeInclusive<usize>,
    weights: impl Strategy<Value = u32> + Clone,
) -> impl Strategy<Value = Vec<Host>> {
    prop::collection::vec((weights, prop::option::weighted(0.2, 0u8..4)), count)
        .prop_map(|spec| {
            spec.into_iter()
                .enumerate()
                .map(|(i, (w, key))| {
                    (
                        format!("10.{}.{}.{}:{}", i % 7, i / 7 % 256, i % 251, 80 + i % 3),
                        w,
                        key.map(|k| format!("shared-{k}")),
                    )
                })
                .collect::<Vec<Host>>()
        })
        .prop_filter("some weight is positive", |h| h.iter().any(|x| x.1 > 0))
}

/// Weights of every shape: equal, mildly uneven (the per-iteration scan),
/// one host far heavier than the rest (the calendar of due hosts).
fn weights() -> impl Strategy<Value = u32> + Clone {
    prop_oneof![
        Just(1u32),
        0u32..=5,
        prop_oneof![9 => 1u32..=3, 1 => Just(400u32)]
    ]
}

proptest! {
    #![proptest_config(common::cases(256))]
    #[test]
    fn maglev_7_equals_the_naive_table(hosts in host_set(1..=10, weights())) {
        // A table smaller than the weighted hosts is refused (a_table_smaller_than_the_pool_is_rejected).
        prop_assume!(hosts.iter().filter(|h| h.1 > 0).count() <= 7);
        check_maglev(&hosts, 7)?;
    }
}

proptest! {
    #![proptest_config(common::cases(12))]
    #[test]
    fn maglev_65537_equals_the_naive_table(hosts in host_set(1..=40, weights())) {
        check_maglev(&hosts, 65_537)?;
    }
}

proptest! {
    #![proptest_config(common::cases(4))]
    #[test]
    fn maglev_131071_equals_the_naive_table(hosts in host_set(1..=24, weights())) {
        check_maglev(&hosts, 131_071)?;
    }
}

proptest! {
    #![proptest_config(common::cases(2))]
    #[test]
    fn maglev_655373_equals_the_naive_table(hosts in host_set(2..=12, weights())) {
        check_maglev(&hosts, 655_373)?;
    }
}

#[test]
fn maglev_skewed_weights_equal_the_naive_table() {
    // One heavy host among 100: the library fills by its calendar of due
    // hosts, the reference by Envoy's scan over every host in every iteration.
    let mut hosts: Vec<Host> = (0..100)
        .map(|i| (format!("h{i}"), 1 + i % 3, None))
        .collect();
    hosts[17].1 = 5000;
    check_maglev(&hosts, 65_537).unwrap();
    // And the reverse: one light host among heavy ones.
    let mut hosts: Vec<Host> = (0..30).map(|i| (format!("h{i}"), 1000, None)).collect();
    hosts[3].1 = 1;
    check_maglev(&hosts, 7919).unwrap();
}

proptest! {
    #![proptest_config(common::cases(24))]
    /// Many hosts, one holding half the weight or more: the library fills by
    /// its calendar of due hosts (hosts per taken slot > 64), the reference by
    /// Envoy's scan; the light hosts take slots many times, in between.
    #[test]
    fn maglev_one_heavy_among_many_equals_the_naive_table(
        mut hosts in host_set(130..=200, 1u32..=100),
        heavy in any::<prop::sample::Index>(),
        factor in 1u32..=3,
        size in prop::sample::select(vec![251u64, 7919, 65_537]),
    ) {
        let i = heavy.index(hosts.len());
        let rest: u32 = hosts.iter().map(|h| h.1).sum::<u32>() - hosts[i].1;
        hosts[i].1 = rest * factor;
        check_maglev(&hosts, size)?;
    }
}

#[test]
fn maglev_shares_follow_weights() {
    let hosts: Vec<Host> = (1..=4).map(|w| (format!("w{w}"), w, None)).collect();
    let balancer = Balancer::new("maglev".parse().unwrap(), endpoints(&hosts)).unwrap();
    let layout = balancer.layout().unwrap().unwrap();
    assert_eq!(layout.entries(), 65_537);
    let total: f64 = layout.shares().iter().map(|(_, s)| s).sum();
    assert!((total - 1.0).abs() < 1e-12, "{total}");
    for (endpoint, share) in layout.shares() {
        let want = f64::from(endpoint.weight()) / 10.0;
        assert!(
            (share - want).abs() < 0.002,
            "{endpoint}: {share} vs {want}"
        );
    }
}

// ------------------------------------------------------------- ring_hash

/// Envoy's ring grown host by host: each point goes into a sorted Vec at once,
/// after the equal points of earlier hosts. Entries are (point, host index).
fn incremental_ring(hosts: &[Host], min: u64, max: u64, murmur: bool) -> Vec<(u64, usize)> {
    let sum: u64 = hosts.iter().map(|h| u64::from(h.1)).sum();
    let normalized: Vec<f64> = hosts.iter().map(|h| f64::from(h.1) / sum as f64).collect();
    let min_w = normalized
        .iter()
        .copied()
        .filter(|&w| w > 0.0)
        .fold(f64::INFINITY, f64::min);
    let scale = ((min_w * min as f64).ceil() / min_w).min(max as f64);
    let mut ring: Vec<(u64, usize)> = Vec::new();
    let (mut current, mut target) = (0.0f64, 0.0f64);
    for (i, host) in hosts.iter().enumerate() {
        if host.1 == 0 {
            continue;
        }
        target += scale * normalized[i];
        let mut k = 0;
        while current < target {
            let point_name = format!("{}_{k}", name(host));
            let point = if murmur {
                murmur_hash_2(point_name.as_bytes(), STD_HASH_SEED)
            } else {
                xxhash64(point_name.as_bytes(), 0)
            };
            let at = ring.partition_point(|&(p, _)| p <= point);
            ring.insert(at, (point, i));
            k += 1;
            current += 1.0;
        }
    }
    ring
}

fn check_ring(hosts: &[Host], min: u64, max: u64, murmur: bool) -> Result<(), TestCaseError> {
    let ring = incremental_ring(hosts, min, max, murmur);
    let hash = if murmur { "murmur_hash_2" } else { "xx_hash" };
    let spec = format!("ring_hash:min_ring_size={min} max_ring_size={max} hash={hash}");
    let balancer = Balancer::new(spec.parse().unwrap(), endpoints(hosts)).unwrap();
    let layout = balancer.layout().unwrap().unwrap();
    prop_assert_eq!(layout.entries(), ring.len());
    prop_assert_eq!(layout.entry_label(), "points");
    // The owner of code h: the first point >= h (the first host among equal
    // points), wrapping to the first point.
    let want = |h: u64| {
        let i = ring.partition_point(|&(p, _)| p < h);
        ring[if i == ring.len() { 0 } else { i }].1
    };
    let mut codes = vec![0, u64::MAX];
    for &(p, _) in &ring {
        codes.push(p);
        codes.push(p.wrapping_add(1));
    }
    for h in codes {
        prop_assert_eq!(
            owner_of(&balancer, h),
            hosts[want(h)].0.clone(),
            "code {}",
            h
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(common::cases(96))]
    #[test]
    fn ring_hash_batch_equals_one_host_at_a_time(
        hosts in host_set(1..=40, 0u32..=6),
        min in 1u64..=3000,
        extra in 0u64..=3000,
        murmur in any::<bool>(),
    ) {
        check_ring(&hosts, min, min + extra, murmur)?;
    }
}

#[test]
fn ring_hash_defaults_give_1024_points_to_equal_hosts() {
    let hosts: Vec<Host> = (0..16)
        .map(|i| (format!("10.0.0.{i}:80"), 1, None))
        .collect();
    let balancer = Balancer::new("ring_hash".parse().unwrap(), endpoints(&hosts)).unwrap();
    assert_eq!(balancer.layout().unwrap().unwrap().entries(), 1024);
    check_ring(&hosts, 1024, 8_388_608, false).unwrap();
}

#[test]
fn keys_are_hashed_with_xxhash64_under_both_point_hashes() {
    let hosts: Vec<Host> = (0..5).map(|i| (format!("k{i}"), 1, None)).collect();
    for hash in ["xx_hash", "murmur_hash_2"] {
        let spec = format!("ring_hash:hash={hash}");
        let balancer = Balancer::new(spec.parse().unwrap(), endpoints(&hosts)).unwrap();
        for key in ["", "user:42", "a much longer request key than usual"] {
            let by_key = balancer.route(&Request::key(key)).unwrap().unwrap();
            let by_code = balancer
                .route(&Request::code(xxhash64(key.as_bytes(), 0)))
                .unwrap()
                .unwrap();
            assert_eq!(by_key.endpoint(), by_code.endpoint(), "{hash}: {key:?}");
        }
    }
    let balancer = Balancer::new("maglev".parse().unwrap(), endpoints(&hosts)).unwrap();
    for key in ["", "user:42"] {
        assert_eq!(
            balancer
                .route(&Request::key(key))
                .unwrap()
                .unwrap()
                .endpoint(),
            balancer
                .route(&Request::code(xxhash64(key.as_bytes(), 0)))
                .unwrap()
                .unwrap()
                .endpoint()
        );
    }
}

// ---------------------------------------------------------- bounded load

#[test]
fn bounded_maglev_walks_the_following_slots() {
    // Envoy's MaglevLoadBalancerTest.Basic table (tests/data/envoy_maglev_basic.tsv):
    // slots 0..7 are owned by :92 :94 :90 :91 :95 :90 :93.
    let hosts: Vec<Host> = (90..96)
        .map(|p| (format!("127.0.0.1:{p}"), 1, None))
        .collect();
    let balancer = Balancer::new(
        "maglev:table_size=7 balance=125".parse().unwrap(),
        endpoints(&hosts),
    )
    .unwrap();
    // cap = ceil(1.25 * (total + 1) / 6): 1 for totals 0..=3, then 2. Code 0
    // starts at slot 0 each time and walks on past full endpoints.
    let want = [92, 94, 90, 91, 92, 94, 90, 91];
    let mut held = Vec::new();
    for (i, port) in want.iter().enumerate() {
        let pick = balancer.pick(&Request::code(0)).unwrap();
        assert_eq!(pick.addr(), format!("127.0.0.1:{port}"), "pick {i}");
        held.push(pick);
    }
    assert_eq!(balancer.total_in_flight(), want.len() as u64);
    drop(held);
    assert_eq!(balancer.total_in_flight(), 0);
}
