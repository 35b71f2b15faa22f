//! `dubbo` and `pixiu_ring` against small models written from the algorithms
//! as the two systems state them (Dubbo's `ConsistentHashLoadBalance`, gost's
//! `hash/consistent` ring that pixiu builds): a `BTreeMap` of points where a
//! later write replaces an equal point, looked up with `range(h..)`. The
//! models hash with the md-5 and blake2 crates directly and call nothing of
//! loadring.

use crate::common;

use std::collections::{BTreeMap, HashSet};

use blake2::{Blake2b512, Digest as _};
use loadring::{Balancer, Endpoint, PolicySpec, Request};
use md5::Md5;
use proptest::prelude::*;

/// Bytes `4h..4h+4` of a digest as a little-endian u32.
fn le32(d: &[u8], h: usize) -> u32 {
    u32::from_le_bytes([d[4 * h], d[4 * h + 1], d[4 * h + 2], d[4 * h + 3]])
}

/// The first point at or after `h`, else the first point: the owner's index.
fn lookup(ring: &BTreeMap<u32, usize>, h: u32) -> usize {
    let (_, &owner) = ring
        .range(h..)
        .next()
        .or_else(|| ring.iter().next())
        .expect("a ring with points");
    owner
}

/// Dubbo: for each endpoint in order, `nodes / 4` digests `md5(address + i)`,
/// four LE words each, put into the map (a later put replaces).
fn dubbo_ring(endpoints: &[(String, u32)], nodes: u32) -> BTreeMap<u32, usize> {
    let mut ring = BTreeMap::new();
    for (j, (addr, weight)) in endpoints.iter().enumerate() {
        if *weight == 0 {
            continue; // drained: as if not in the list
        }
        for i in 0..nodes / 4 {
            let d = Md5::digest(format!("{addr}{i}").as_bytes());
            for h in 0..4 {
                ring.insert(le32(&d, h), j);
            }
        }
    }
    ring
}

fn dubbo_key(key: &str) -> u32 {
    le32(&Md5::digest(key.as_bytes()), 0)
}

/// pixiu's `H`: the first LE u64 of BLAKE2b-512, cut to u32, mod B.
fn pixiu_hash(s: &str, modulus: u32) -> u32 {
    le32(&Blake2b512::digest(s.as_bytes()), 0) % modulus
}

/// gost: hosts added in order, a host already added is skipped, replica `i`
/// of a host is `H(decimal(i) + host)`, a later write replaces.
fn pixiu_ring(endpoints: &[(String, u32)], replicas: u32, modulus: u32) -> BTreeMap<u32, usize> {
    let mut ring = BTreeMap::new();
    let mut hosts = HashSet::new();
    for (j, (addr, weight)) in endpoints.iter().enumerate() {
        if *weight == 0 || !hosts.insert(addr.clone()) {
            continue;
        }
        for i in 0..replicas {
            ring.insert(pixiu_hash(&format!("{i}{addr}"), modulus), j);
        }
    }
    ring
}

/// A balancer over `endpoints`, each tagged with its index so that two
/// endpoints of one address can be told apart.
fn balancer(spec: &str, endpoints: &[(String, u32)]) -> loadring::Result<Balancer> {
    let spec: PolicySpec = spec.parse()?;
    let list: Vec<Endpoint> = endpoints
        .iter()
        .enumerate()
        .map(|(j, (a, w))| {
            Endpoint::new(a.as_str())
                .unwrap()
                .with_weight(*w)
                .with_tag(format!("t{j}"))
                .unwrap()
        })
        .collect();
    Ok(Balancer::new(spec, list)?)
}

/// The index of the endpoint `key` is picked on (by every path).
fn picked(b: &Balancer, key: &str) -> usize {
    let req = Request::key(key);
    let pick = b.pick(&req).unwrap();
    let route = b.route(&req).unwrap().unwrap();
    assert_eq!(pick.endpoint(), route.endpoint(), "{key}");
    pick.endpoint().tag().unwrap()[1..].parse().unwrap()
}

/// Addresses from a small set, so that some repeat.
fn endpoints(max: usize) -> impl Strategy<Value = Vec<(String, u32)>> {
    let addr = prop_oneof![
        (0u8..6).prop_map(|n| format!("10.0.0.{n}:20880")),
        (any::<[u8; 4]>(), 1u16..65535)
            .prop_map(|(ip, port)| format!("{}.{}.{}.{}:{port}", ip[0], ip[1], ip[2], ip[3])),
    ];
    let weight = prop_oneof![8 => Just(1u32), 1 => Just(0u32), 1 => Just(5u32)];
    proptest::collection::vec((addr, weight), 1..max)
}

/// Any UTF-8 text, ASCII and beyond.
fn keys() -> impl Strategy<Value = Vec<String>> {
    proptest::collection::vec("\\PC{0,16}", 1..40)
}

/// Optionally bounded: with nothing in flight the bound changes no pick.
fn bound() -> impl Strategy<Value = &'static str> {
    prop_oneof![Just(""), Just(" load_factor=1.25")]
}

proptest! {
    #![proptest_config(common::cases(48))]

    #[test]
    fn dubbo_places_keys_like_the_model(
        endpoints in endpoints(12),
        nodes in prop_oneof![Just(160u32), 4u32..=64, 150u32..=170],
        keys in keys(),
        bound in bound(),
    ) {
        let ring = dubbo_ring(&endpoints, nodes);
        let spec = format!("dubbo:nodes={nodes}{bound}");
        if ring.is_empty() {
            prop_assert!(balancer(&spec, &endpoints).is_err(), "every weight is 0");
            return Ok(());
        }
        let b = balancer(&spec, &endpoints).unwrap();
        for key in &keys {
            prop_assert_eq!(picked(&b, key), lookup(&ring, dubbo_key(key)), "key {:?}", key);
        }
    }

    #[test]
    fn pixiu_places_keys_like_the_model(
        endpoints in endpoints(12),
        replicas in prop_oneof![Just(10u32), 1u32..=50],
        modulus in prop_oneof![Just(u32::MAX), Just(1023u32), 1u32..=16, any::<u32>().prop_map(|m| m.max(1))],
        keys in keys(),
        bound in bound(),
    ) {
        let ring = pixiu_ring(&endpoints, replicas, modulus);
        let spec = format!("pixiu_ring:replica_num={replicas} max_vnode_num={modulus}{bound}");
        if ring.is_empty() {
            prop_assert!(balancer(&spec, &endpoints).is_err(), "every weight is 0");
            return Ok(());
        }
        let b = balancer(&spec, &endpoints).unwrap();
        for key in &keys {
            prop_assert_eq!(
                picked(&b, key),
                lookup(&ring, pixiu_hash(key, modulus)),
                "key {:?}", key
            );
        }
    }

    /// One endpoint whose replicas collide among themselves (2,000 replicas
    /// on 1,023 positions): every key still goes to it, and describe gives it
    /// the whole ring.
    #[test]
    fn pixiu_single_endpoint_with_colliding_points(
        replicas in 1000u32..3000,
        keys in keys(),
    ) {
        let endpoints = vec![("192.168.1.1:1001".to_string(), 1)];
        let ring = pixiu_ring(&endpoints, replicas, 1023);
        let b = balancer(&format!("pixiu_ring:replica_num={replicas} max_vnode_num=1023"), &endpoints).unwrap();
        let layout = b.layout().unwrap().unwrap();
        prop_assert_eq!(layout.shares()[0].1, 1.0);
        prop_assert_eq!(layout.entries(), ring.len());
        prop_assert!(ring.len() < replicas as usize, "points collided");
        for key in &keys {
            prop_assert_eq!(picked(&b, key), 0);
        }
    }
}

proptest! {
    #![proptest_config(common::cases(3))]

    /// 1,000 endpoints (160,000 Dubbo points, 10,000 pixiu points, and on
    /// 1,023 positions, pixiu's later endpoints overwriting most earlier ones).
    #[test]
    fn a_thousand_endpoints_place_like_the_models(
        seed in any::<u16>(),
        keys in proptest::collection::vec("\\PC{0,16}", 300),
    ) {
        let endpoints: Vec<(String, u32)> = (0..1000u32)
            .map(|i| (format!("10.{}.{}.{}:{}", seed % 256, i / 256, i % 256, 20880 + seed / 256), 1))
            .collect();
        let dubbo = dubbo_ring(&endpoints, 160);
        let b = balancer("dubbo", &endpoints).unwrap();
        for key in &keys {
            prop_assert_eq!(picked(&b, key), lookup(&dubbo, dubbo_key(key)), "dubbo {:?}", key);
        }
        for modulus in [u32::MAX, 1023] {
            let pixiu = pixiu_ring(&endpoints, 10, modulus);
            let b = balancer(&format!("pixiu_ring:max_vnode_num={modulus}"), &endpoints).unwrap();
            for key in &keys {
                prop_assert_eq!(
                    picked(&b, key),
                    lookup(&pixiu, pixiu_hash(key, modulus)),
                    "pixiu mod {} {:?}", modulus, key
                );
            }
        }
    }
}

/// Every position of a tiny pixiu ring, checked by code (pixiu's `GetHash`
/// of a position) against the model: the wrap past the last point included.
#[test]
fn pixiu_codes_are_ring_positions() {
    let endpoints: Vec<(String, u32)> = ["a:1", "b:2", "c:3"]
        .iter()
        .map(|a| (a.to_string(), 1))
        .collect();
    let ring = pixiu_ring(&endpoints, 3, 13);
    let b = balancer("pixiu_ring:replica_num=3 max_vnode_num=13", &endpoints).unwrap();
    for code in (0..20).chain([u64::from(u32::MAX)]) {
        let got = b.route(&Request::code(code)).unwrap().unwrap();
        let want = lookup(&ring, code as u32);
        assert_eq!(
            got.endpoint().tag(),
            Some(format!("t{want}").as_str()),
            "code {code}"
        );
    }
    let err = b.pick(&Request::code(1 << 32)).unwrap_err().to_string();
    assert!(
        err.contains("pixiu_ring"),
        "codes are u32, the error names the policy: {err}"
    );
    let err = b.pick(&Request::new()).unwrap_err().to_string();
    assert!(err.contains("pixiu_ring"), "{err}");
}

/// describe's share of each endpoint: pixiu's by counting, position by
/// position, where the model sends each of the 1,023 positions; Dubbo's by
/// the arcs of its ring (a point owns the codes after the previous point up
/// to itself, the first point also those after the last one).
#[test]
fn describe_gives_each_endpoint_its_share_of_positions() {
    let endpoints: Vec<(String, u32)> =
        (0..7).map(|i| (format!("192.168.0.{i}:8080"), 1)).collect();
    let ring = pixiu_ring(&endpoints, 10, 1023);
    let mut counts = [0u32; 7];
    for pos in 0..1023 {
        counts[lookup(&ring, pos)] += 1;
    }
    let b = balancer("pixiu_ring:max_vnode_num=1023", &endpoints).unwrap();
    let layout = b.layout().unwrap().unwrap();
    assert_eq!(layout.entries(), ring.len());
    for (j, (e, share)) in layout.shares().iter().enumerate() {
        assert_eq!(e.tag(), Some(format!("t{j}").as_str()));
        let want = f64::from(counts[j]) / 1023.0;
        assert!(
            (share - want).abs() < 1e-12,
            "endpoint {j}: {share} vs {want}"
        );
    }

    let ring = dubbo_ring(&endpoints, 160);
    let points: Vec<(u32, usize)> = ring.iter().map(|(&p, &o)| (p, o)).collect();
    let mut arcs = [0f64; 7];
    for (i, &(p, o)) in points.iter().enumerate() {
        let arc = match i {
            0 => f64::from(u32::MAX - points[points.len() - 1].0) + f64::from(p),
            _ => f64::from(p - points[i - 1].0),
        };
        arcs[o] += arc / f64::from(u32::MAX);
    }
    let b = balancer("dubbo", &endpoints).unwrap();
    let layout = b.layout().unwrap().unwrap();
    assert_eq!(layout.entries(), ring.len());
    for (j, (_, share)) in layout.shares().iter().enumerate() {
        assert!(
            (share - arcs[j]).abs() < 1e-9,
            "endpoint {j}: {share} vs {}",
            arcs[j]
        );
    }
}

/// The name hashed is `hash_key` when an endpoint has one: the reference
/// placements come back with every endpoint reached by another address and
/// named by its recorded one.
#[test]
fn hash_key_names_the_address_the_other_system_hashes() {
    for file in ["dubbo_3.tsv", "pixiu_ring_4.tsv"] {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data")
            .join(file);
        let text = std::fs::read_to_string(path).unwrap();
        let policy = text
            .lines()
            .find_map(|l| l.strip_prefix("# policy: "))
            .unwrap();
        let named: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# endpoint: "))
            .collect();
        let endpoints: Vec<Endpoint> = named
            .iter()
            .enumerate()
            .map(|(i, name)| {
                Endpoint::new(format!("backend-{i}.internal:9000"))
                    .unwrap()
                    .with_hash_key(*name)
                    .unwrap()
            })
            .collect();
        let b = Balancer::new(policy.parse().unwrap(), endpoints).unwrap();
        let mut rows = 0;
        for line in text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
        {
            let (key, want) = line.split_once('\t').unwrap();
            let got = b.route(&Request::key(key)).unwrap().unwrap();
            assert_eq!(got.endpoint().hash_key(), Some(want), "{file}: {key}");
            rows += 1;
        }
        assert!(rows >= 50, "{file}: {rows} rows");
    }
}
