//! nginx_hash, haproxy_hash and twemproxy beyond the recorded placements:
//! bad parameters, unavailable endpoints, bounded loads, describe.
//!
//! Expected placements here are worked out by hand or with zlib's CRC-32 from
//! the daemons' documented algorithms, never taken from this crate's output.

use loadring::{Balancer, Endpoint, Pick, PickErrorKind, PolicySpec, Request};
use proptest::prelude::*;

fn endpoints(list: &[&str]) -> Vec<Endpoint> {
    list.iter().map(|e| e.parse().unwrap()).collect()
}

fn balancer(spec: &str, list: &[&str]) -> Balancer {
    Balancer::new(spec.parse().unwrap(), endpoints(list)).unwrap()
}

fn place(b: &Balancer, key: &str) -> String {
    b.pick(&Request::key(key)).unwrap().addr().to_string()
}

const THREE: [&str; 3] = ["127.0.0.1:9001", "127.0.0.1:9002", "127.0.0.1:9003"];

#[test]
fn every_bad_parameter_names_its_key_and_what_it_accepts() {
    let cases = [
        (
            "nginx_hash:consistent=yes",
            "nginx_hash: consistent=yes: accepted true or false",
        ),
        (
            "nginx_hash:hash=crc32",
            "nginx_hash: unknown key `hash` (accepted: consistent, load_factor, balance)",
        ),
        ("nginx_hash:balance=100", "balance=100: expected an integer percent from 101"),
        (
            "haproxy_hash:type=ring",
            "haproxy_hash: type=ring: accepted map-based, consistent",
        ),
        (
            "haproxy_hash:function=md5",
            "haproxy_hash: function=md5: accepted sdbm, djb2, wt6, crc32, none",
        ),
        (
            "haproxy_hash:avalanche=on",
            "haproxy_hash: avalanche=on: accepted true or false",
        ),
        (
            "haproxy_hash:type=consistent load_factor=0.9",
            "load_factor=0.9: expected a decimal number greater than 1",
        ),
        (
            "haproxy_hash:type=consistent hash_key=name",
            "haproxy_hash: hash_key=name: accepted id, id32, guid, addr, addr-port, id-3.0",
        ),
        (
            "haproxy_hash:hash_key=addr",
            "haproxy_hash: hash_key=addr keys the nodes of HAProxy's consistent tree: accepted with type=consistent only (type=map-based has no nodes)",
        ),        (
            "haproxy_hash:hash_type=consistent",
            "haproxy_hash: unknown key `hash_type` (accepted: type, function, avalanche, hash_key, load_factor, balance)",
        ),
        (
            "twemproxy:distribution=random",
            "twemproxy: distribution=random: accepted ketama, modula",
        ),
        (
            "twemproxy:hash=sha1",
            "twemproxy: hash=sha1: accepted one_at_a_time, md5, crc16, crc32, crc32a, fnv1_64, \
             fnv1a_64, fnv1_32, fnv1a_32, hsieh, murmur, jenkins",
        ),
        (
            "twemproxy:hash_tag=x",
            "twemproxy: hash_tag=x: accepted two ASCII characters",
        ),
        (
            "twemproxy:hash_tag={}}",
            "twemproxy: hash_tag={}}: accepted two ASCII characters",
        ),
        (
            "twemproxy:hash_tag=«»",
            "twemproxy: hash_tag=«»: accepted two ASCII characters",
        ),
        (
            "twemproxy:modula=true",
            "twemproxy: unknown key `modula` (accepted: distribution, hash, hash_tag, load_factor, balance)",
        ),
    ];
    for (spec, want) in cases {
        let got = spec.parse::<PolicySpec>().unwrap_err().to_string();
        assert!(got.contains(want), "{spec:?}: {got:?} lacks {want:?}");
        assert!(!got.contains('\n'), "one line: {got:?}");
    }
}

#[test]
fn every_bad_endpoint_names_the_endpoint() {
    let cases: [(&str, &[&str], &str); 7] = [
        (
            "haproxy_hash",
            &["10.0.0.1:80 hash_key=web1"],
            "haproxy_hash: endpoint `10.0.0.1:80`: hash_key=web1 is not a server id: \
             accepted a whole number 1..=2147483647 (HAProxy's `id`)",
        ),
        (
            "haproxy_hash:type=consistent",
            &["10.0.0.1:80 hash_key=0"],
            "endpoint `10.0.0.1:80`: hash_key=0 is not a server id",
        ),
        (
            "haproxy_hash:type=consistent",
            &["10.0.0.1:80 hash_key=-2"],
            "endpoint `10.0.0.1:80`: hash_key=-2 is not a server id",
        ),
        (
            "haproxy_hash",
            &["10.0.0.1:80 hash_key=4", "10.0.0.2:80 hash_key=4"],
            "haproxy_hash: endpoints `10.0.0.1:80` and `10.0.0.2:80` both have hash_key=4",
        ),
        (
            "haproxy_hash:type=consistent",
            &["10.0.0.1:80 weight=257"],
            "haproxy_hash: endpoint `10.0.0.1:80`: weight=257 is out of range: HAProxy accepts 0..=256",
        ),
        (
            "twemproxy",
            &["10.0.0.1:11211", "10.0.0.2:11211 hash_key=10.0.0.1"],
            "twemproxy: endpoints `10.0.0.1:11211` and `10.0.0.2:11211` are both named `10.0.0.1`",
        ),
        (
            "nginx_hash:consistent=true",
            &["10.0.0.1:80 hash_key=cache", "10.0.0.2:80 hash_key=cache"],
            "nginx_hash: endpoints `10.0.0.1:80` and `10.0.0.2:80` are both named `cache`",
        ),
    ];
    for (spec, list, want) in cases {
        let got = Balancer::new(spec.parse().unwrap(), endpoints(list))
            .unwrap_err()
            .to_string();
        assert!(
            got.contains(want),
            "{spec:?} {list:?}: {got:?} lacks {want:?}"
        );
        assert!(!got.contains('\n'), "one line: {got:?}");
    }
}

#[test]
fn tables_too_large_to_build_are_errors() {
    let err = Balancer::new(
        "twemproxy:distribution=modula".parse().unwrap(),
        endpoints(&["a weight=4000000000", "b"]),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("twemproxy: distribution=modula has one slot per unit of weight")
            && err.contains("limit of 8388608 slots"),
        "{err}"
    );
    let many: Vec<Endpoint> = (0..1100)
        .map(|i| {
            format!("10.0.{}.{}:80 weight={}", i / 256, i % 256, 255 + i % 2)
                .parse()
                .unwrap()
        })
        .collect();
    let err = Balancer::new("haproxy_hash".parse().unwrap(), many)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("haproxy_hash: type=map-based over 1100 endpoints"),
        "{err}"
    );
}

#[test]
fn defaults_follow_the_daemons() {
    // `hash-type consistent` alone is sdbm with avalanche: the recorded H1
    // placement; map-based defaults to no avalanche.
    let explicit = balancer(
        "haproxy_hash:type=consistent function=sdbm avalanche=true",
        &THREE,
    );
    let implicit = balancer("haproxy_hash:type=consistent", &THREE);
    let plain = balancer("haproxy_hash:type=consistent function=sdbm", &THREE);
    let keys: Vec<String> = (0..200).map(|i| format!("key{i}")).collect();
    let of = |b: &Balancer| keys.iter().map(|k| place(b, k)).collect::<Vec<_>>();
    assert_eq!(of(&explicit), of(&implicit));
    assert_ne!(of(&plain), of(&implicit));
    // nginx's `hash KEY` without `consistent` is the modulo.
    let modulo = balancer("nginx_hash:consistent=false", &THREE);
    assert_eq!(of(&modulo), of(&balancer("nginx_hash", &THREE)));
    // twemproxy's defaults: ketama and fnv1a_64.
    let tw = balancer("twemproxy:distribution=ketama hash=fnv1a_64", &THREE);
    assert_eq!(of(&tw), of(&balancer("twemproxy", &THREE)));
}

#[test]
fn nginx_modulo_rehashes_like_nginx_when_its_server_is_down() {
    // zlib: key "0" -> ((crc32 >> 16) & 0x7fff) % 3 = 2; tries 1, 2, 3, 4
    // ("10", "20", "30", "40" prefixed) give 2, 1, 1, 0.
    let b = balancer("nginx_hash", &THREE);
    assert_eq!(place(&b, "0"), "127.0.0.1:9003");
    b.set_healthy("127.0.0.1:9003", false).unwrap();
    assert_eq!(
        place(&b, "0"),
        "127.0.0.1:9002",
        "the re-hash, not the next server"
    );
    b.set_healthy("127.0.0.1:9002", false).unwrap();
    assert_eq!(place(&b, "0"), "127.0.0.1:9001");
    // Key "1": natural 1, try 1 gives 0.
    b.set_healthy("127.0.0.1:9002", true).unwrap();
    b.set_healthy("127.0.0.1:9003", true).unwrap();
    let tried = ["127.0.0.1:9002"];
    let pick = b.pick(&Request::key("1").excluding(&tried)).unwrap();
    assert_eq!(pick.addr(), "127.0.0.1:9001");
}

#[test]
fn nginx_modulo_falls_back_to_round_robin() {
    // A code has no key to re-hash: round robin among the available at once.
    let b = balancer("nginx_hash", &THREE);
    let code = 0x0002_0000; // ((code >> 16) & 0x7fff) % 3 = 2
    assert_eq!(
        b.pick(&Request::code(code)).unwrap().addr(),
        "127.0.0.1:9003"
    );
    b.set_healthy("127.0.0.1:9003", false).unwrap();
    let seen: std::collections::BTreeSet<String> = (0..6)
        .map(|_| b.pick(&Request::code(code)).unwrap().addr().to_string())
        .collect();
    assert_eq!(
        seen.into_iter().collect::<Vec<_>>(),
        ["127.0.0.1:9001", "127.0.0.1:9002"],
        "round robin over the two available"
    );
    // Nothing available: an error, not a panic.
    let all = THREE;
    assert!(matches!(
        b.pick(&Request::key("0").excluding(&all)),
        Err(e) if e.kind() == PickErrorKind::NoEligibleEndpoint
    ));
    assert!(matches!(
        b.pick(&Request::code(1 << 32)),
        Err(e) if e.kind() == PickErrorKind::CodeOutOfRange
    ));
}

#[test]
fn haproxy_map_is_rebuilt_over_the_servers_that_are_up() {
    // sdbm("a") = 97, sdbm("b") = 98. Equal weights: the map is [0, 1, 2].
    let b = balancer("haproxy_hash", &THREE);
    assert_eq!(place(&b, "a"), "127.0.0.1:9002"); // 97 % 3 = 1
    assert_eq!(place(&b, "b"), "127.0.0.1:9003"); // 98 % 3 = 2
    b.set_healthy("127.0.0.1:9002", false).unwrap();
    // HAProxy's map over the two up: [9001, 9003].
    assert_eq!(place(&b, "a"), "127.0.0.1:9003"); // 97 % 2 = 1
    assert_eq!(
        place(&b, "b"),
        "127.0.0.1:9001",
        "98 % 2 = 0: HAProxy moves it too"
    );
    // Another server down: the map over the two others, then all up again.
    b.set_healthy("127.0.0.1:9002", true).unwrap();
    b.set_healthy("127.0.0.1:9001", false).unwrap();
    assert_eq!(place(&b, "b"), "127.0.0.1:9002"); // [9002, 9003], 98 % 2 = 0
    b.set_healthy("127.0.0.1:9001", true).unwrap();
    assert_eq!(place(&b, "b"), "127.0.0.1:9003");
    // Excluded (a retry) is not down: the map stays, the walk moves on.
    let tried = ["127.0.0.1:9002"];
    let pick = b.pick(&Request::key("a").excluding(&tried)).unwrap();
    assert_eq!(pick.addr(), "127.0.0.1:9003", "the next slot");
}

#[test]
fn haproxy_consistent_takes_the_closest_healthy_node() {
    let b = balancer("haproxy_hash:type=consistent", &THREE);
    let keys: Vec<String> = (0..2000).map(|i| format!("k{i}")).collect();
    let natural: Vec<String> = keys.iter().map(|k| place(&b, k)).collect();
    let down = "127.0.0.1:9002";
    let tried = [down];
    // A retry that excludes the server (it is up) walks on clockwise.
    let walked: Vec<String> = keys
        .iter()
        .map(|k| {
            b.pick(&Request::key(k.as_str()).excluding(&tried))
                .unwrap()
                .addr()
                .to_string()
        })
        .collect();
    b.set_healthy(down, false).unwrap();
    let mut moved_back = 0;
    for ((k, was), walked) in keys.iter().zip(&natural).zip(&walked) {
        let now = place(&b, k);
        if was != down {
            // Fewer nodes cannot bring another one closer.
            assert_eq!(&now, was, "{k}");
            assert_eq!(walked, was, "{k}");
        } else {
            assert_ne!(now, down);
            if &now != walked {
                moved_back += 1;
            }
        }
    }
    // Down servers leave HAProxy's tree: their keys go to the closer
    // neighbour, often the one counter-clockwise, where a walk goes clockwise.
    assert!(moved_back > 50, "{moved_back}");
}

#[test]
fn twemproxy_orders_servers_by_name_not_by_position() {
    let list = [
        "127.0.0.1:11311 weight=2",
        "127.0.0.1:11312",
        "127.0.0.1:11313 weight=3",
        "127.0.0.1:11314",
    ];
    let mut reversed = list;
    reversed.reverse();
    for spec in [
        "twemproxy",
        "twemproxy:distribution=modula hash=crc16",
        "twemproxy:hash=hsieh",
    ] {
        let a = balancer(spec, &list);
        let b = balancer(spec, &reversed);
        for i in 0..500 {
            let key = format!("key:{i}");
            assert_eq!(place(&a, &key), place(&b, &key), "{spec} {key}");
        }
    }
}

#[test]
fn twemproxy_hash_tags_keep_tagged_keys_together() {
    let b = balancer("twemproxy:hash_tag={}", &THREE);
    for user in 0..100 {
        let name = place(&b, &format!("{{user{user}}}.name"));
        assert_eq!(place(&b, &format!("{{user{user}}}.mail")), name);
        assert_eq!(place(&b, &format!("x{{user{user}}}")), name);
    }
    // Modula with md5 and the tag: the slot of md5("u1") alone.
    let m = balancer("twemproxy:distribution=modula hash=md5 hash_tag={}", &THREE);
    let direct = balancer("twemproxy:distribution=modula hash=md5", &THREE);
    assert_eq!(place(&m, "a{u1}b"), place(&direct, "u1"));
}

#[test]
fn twemproxy_modula_is_weighted_slots_in_name_order() {
    // md5("a") begins 0c c1 75 b9: LE32 = 0xb975c10c = 3111502092;
    // 3111502092 % 4 = 0 -> the first slot; % 3 = 0.
    let b = balancer(
        "twemproxy:distribution=modula hash=md5",
        &["10.0.0.2:11211 weight=3", "10.0.0.1:11211"],
    );
    // Names "10.0.0.1" < "10.0.0.2": slots [.1, .2, .2, .2].
    assert_eq!(place(&b, "a"), "10.0.0.1:11211");
    // Drained (weight 0): as if absent.
    let d = balancer(
        "twemproxy:distribution=modula hash=md5",
        &["10.0.0.2:11211 weight=3", "10.0.0.1:11211 weight=0"],
    );
    assert_eq!(place(&d, "a"), "10.0.0.2:11211");
}

#[test]
fn describe_shares_sum_to_one() {
    for spec in [
        "nginx_hash",
        "nginx_hash:consistent=true",
        "haproxy_hash",
        "haproxy_hash:type=consistent",
        "twemproxy",
        "twemproxy:distribution=modula",
    ] {
        let b = balancer(
            spec,
            &[
                "10.0.0.1:80 weight=1",
                "10.0.0.2:80 weight=2",
                "10.0.0.3:80 weight=5",
            ],
        );
        let layout = b.layout().unwrap().unwrap();
        let shares: Vec<f64> = layout.shares().iter().map(|(_, s)| *s).collect();
        let sum: f64 = shares.iter().sum();
        assert!((sum - 1.0).abs() < 1e-6, "{spec}: {sum}");
        // The heaviest endpoint has the largest share.
        assert!(
            shares[2] > shares[0] && shares[2] > shares[1],
            "{spec}: {shares:?}"
        );
        assert!(layout.entries() > 0);
    }
    // nginx's modulo over 32768 values, weights 1 and 2: exactly 10923 and 21845.
    let b = balancer("nginx_hash", &["a", "b weight=2"]);
    let layout = b.layout().unwrap().unwrap();
    assert!((layout.shares()[0].1 - 10923.0 / 32768.0).abs() < 1e-12);
}

/// Every family with a bound: held picks of one hot key never take an
/// endpoint past its cap (HAProxy's slots for haproxy_hash).
#[test]
fn bounded_picks_respect_the_cap() {
    for spec in [
        "nginx_hash:load_factor=1.25",
        "nginx_hash:consistent=true balance=150",
        "haproxy_hash:type=consistent balance=125",
        "haproxy_hash:load_factor=1.5",
        "twemproxy:load_factor=1.2",
        "twemproxy:distribution=modula balance=130",
    ] {
        let b = balancer(
            spec,
            &[
                "10.0.0.1:80",
                "10.0.0.2:80 weight=2",
                "10.0.0.3:80",
                "10.0.0.4:80",
            ],
        );
        let mut held: Vec<Pick> = Vec::new();
        for i in 0..60 {
            let before: Vec<(String, u64)> = b
                .loads()
                .iter()
                .map(|(e, l)| (e.addr().to_string(), *l))
                .collect();
            let caps: Vec<u64> = before
                .iter()
                .map(|(a, _)| b.cap(a).unwrap().unwrap())
                .collect();
            let pick = b.pick(&Request::key("hot")).unwrap();
            let at = before.iter().position(|(a, _)| a == pick.addr()).unwrap();
            assert!(
                before[at].1 < caps[at],
                "{spec}, pick {i}: {} at load {} with cap {}",
                pick.addr(),
                before[at].1,
                caps[at]
            );
            held.push(pick);
        }
        let spread = b.loads().iter().filter(|(_, l)| *l > 0).count();
        assert!(
            spread >= 3,
            "{spec}: a hot key spills over ({spread} endpoints)"
        );
        drop(held);
        assert_eq!(b.total_in_flight(), 0);
    }
}

#[test]
fn load_factor_and_balance_are_the_same_haproxy_rule() {
    let a = balancer("haproxy_hash:type=consistent balance=125", &THREE);
    let b = balancer("haproxy_hash:type=consistent load_factor=1.25", &THREE);
    let (mut ha, mut hb) = (Vec::new(), Vec::new());
    for _ in 0..30 {
        let (pa, pb) = (
            a.pick(&Request::key("hot")).unwrap(),
            b.pick(&Request::key("hot")).unwrap(),
        );
        assert_eq!(pa.addr(), pb.addr());
        ha.push(pa);
        hb.push(pb);
    }
}

/// HAProxy's consistent lookup restated from its definition with the
/// public hash functions: nodes `full_hash(id * 4096 + j)`, a key's hash
/// `full_hash(sdbm(key))`, the closer of the nearest node clockwise and the
/// nearest counter-clockwise, ties counter-clockwise.
fn haproxy_closest_by_brute_force(weights: &[u32], key: &str) -> usize {
    use loadring::hash::{haproxy_full_hash, sdbm};
    let nodes: Vec<(u32, usize)> = weights
        .iter()
        .enumerate()
        .flat_map(|(i, &w)| {
            let id = i as u32 + 1;
            (0..16 * w).map(move |j| (haproxy_full_hash(id * 4096 + j), i))
        })
        .collect();
    let h = haproxy_full_hash(sdbm(key.as_bytes()));
    let (next_key, next) = *nodes.iter().min_by_key(|(p, _)| p.wrapping_sub(h)).unwrap();
    let before = nodes
        .iter()
        .filter(|(p, _)| h.wrapping_sub(*p) > 0)
        .min_by_key(|(p, _)| h.wrapping_sub(*p));
    match before {
        Some(&(prev_key, prev)) if h.wrapping_sub(prev_key) <= next_key.wrapping_sub(h) => prev,
        _ => next,
    }
}

/// nginx's `hash` without `consistent`, restated: the server whose range of
/// cumulative weight holds `((crc32(key) >> 16) & 0x7fff) % total`.
fn nginx_modulo_by_definition(weights: &[u32], key: &str) -> usize {
    let h = (loadring::hash::crc32(key.as_bytes()) >> 16) & 0x7fff;
    let mut w = h % weights.iter().sum::<u32>();
    for (i, &weight) in weights.iter().enumerate() {
        if w < weight {
            return i;
        }
        w -= weight;
    }
    unreachable!("w < total")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn haproxy_consistent_is_the_closest_node(
        weights in proptest::collection::vec(1u32..5, 1..6),
        keys in proptest::collection::vec("\\PC{0,16}", 20),
    ) {
        let list: Vec<String> = weights.iter().enumerate()
            .map(|(i, w)| format!("s{i} weight={w}")).collect();
        let b = Balancer::new(
            "haproxy_hash:type=consistent".parse().unwrap(),
            list.iter().map(|e| e.parse::<Endpoint>().unwrap()),
        ).unwrap();
        for key in &keys {
            let want = format!("s{}", haproxy_closest_by_brute_force(&weights, key));
            prop_assert_eq!(place(&b, key), want, "{:?}", key);
        }
    }

    #[test]
    fn nginx_modulo_is_the_weight_range(
        weights in proptest::collection::vec(1u32..10, 1..8),
        keys in proptest::collection::vec("\\PC{0,16}", 20),
    ) {
        let list: Vec<String> = weights.iter().enumerate()
            .map(|(i, w)| format!("s{i} weight={w}")).collect();
        let b = Balancer::new(
            "nginx_hash".parse().unwrap(),
            list.iter().map(|e| e.parse::<Endpoint>().unwrap()),
        ).unwrap();
        for key in &keys {
            let want = format!("s{}", nginx_modulo_by_definition(&weights, key));
            prop_assert_eq!(place(&b, key), want, "{:?}", key);
        }
    }

    /// twemproxy orders servers by name: any order of the same endpoints
    /// places every key alike.
    #[test]
    fn twemproxy_ignores_endpoint_order(
        weights in proptest::collection::vec(1u32..6, 1..7),
        rotate in 0usize..7,
        modula in any::<bool>(),
        keys in proptest::collection::vec("[a-z0-9:{}]{1,12}", 20),
    ) {
        let spec = if modula { "twemproxy:distribution=modula hash=fnv1a_32" } else { "twemproxy:hash=crc32a" };
        let mut list: Vec<String> = weights.iter().enumerate()
            .map(|(i, w)| format!("10.0.0.{}:11211 weight={w}", i + 1)).collect();
        let a = Balancer::new(spec.parse().unwrap(), list.iter().map(|e| e.parse::<Endpoint>().unwrap())).unwrap();
        let len = list.len();
        list.rotate_left(rotate % len);
        list.reverse();
        let b = Balancer::new(spec.parse().unwrap(), list.iter().map(|e| e.parse::<Endpoint>().unwrap())).unwrap();
        for key in &keys {
            prop_assert_eq!(place(&a, key), place(&b, key));
        }
    }

    /// Any membership, any health, any exclusion: a pick is an eligible
    /// endpoint, or an error when none is.
    #[test]
    fn picks_are_eligible(
        weights in proptest::collection::vec(1u32..6, 1..8),
        down in proptest::collection::vec(any::<bool>(), 8),
        excluded in 0usize..9,
        key in "\\PC{0,12}",
        family in 0usize..6,
    ) {
        let spec = [
            "nginx_hash", "nginx_hash:consistent=true", "haproxy_hash",
            "haproxy_hash:type=consistent function=crc32", "twemproxy:hash=murmur",
            "twemproxy:distribution=modula hash=jenkins",
        ][family];
        let list: Vec<String> = weights.iter().enumerate()
            .map(|(i, w)| format!("10.0.0.{}:80 weight={w}", i + 1)).collect();
        let b = Balancer::new(spec.parse().unwrap(), list.iter().map(|e| e.parse::<Endpoint>().unwrap())).unwrap();
        for (i, d) in down.iter().take(weights.len()).enumerate() {
            b.set_healthy(&format!("10.0.0.{}:80", i + 1), !d).unwrap();
        }
        let tried = format!("10.0.0.{}:80", excluded + 1);
        let tried = [tried.as_str()];
        let eligible: Vec<String> = (0..weights.len())
            .filter(|&i| !down[i] && i != excluded)
            .map(|i| format!("10.0.0.{}:80", i + 1))
            .collect();
        match b.pick(&Request::key(key.as_str()).excluding(&tried)) {
            Ok(p) => prop_assert!(eligible.iter().any(|e| e == p.addr()), "{} not eligible", p.addr()),
            Err(e) => {
                prop_assert!(eligible.is_empty(), "{e}");
                let none_eligible = e.kind() == PickErrorKind::NoEligibleEndpoint;
                prop_assert!(none_eligible);
            }
        }
    }
}
