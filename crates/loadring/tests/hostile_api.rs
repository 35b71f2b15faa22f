//! The public API under hostile input: empty and enormous memberships,
//! weights of `u32::MAX` on every family, names of a megabyte, keys of 16
//! MB, codes past each hash's range, every endpoint excluded, times at both
//! ends of the clock, latencies of `Duration::MAX`, guards that outlive ten
//! thousand membership changes, load reports past any count, and the
//! parsers and hash functions fed garbage. Each test asserts the error (its
//! kind and message) or a bounded, correct result; the test binary is a
//! debug build, so an arithmetic overflow anywhere is a panic here.
//!
//! Memory is measured by a counting allocator of this test binary: each
//! thread counts what it allocates and frees itself, so tests running side
//! by side do not mix their figures.

use std::time::Duration;

use loadring::hash;
use loadring::{
    orca, parse_duration, Balancer, BuildErrorKind, Endpoint, Id, LoadFactor, LoadReport, Outcome,
    ParseErrorKind, PickErrorKind, PolicySpec, Request,
};
use proptest::prelude::*;

use crate::common;

/// Every family, hashing ones bounded and not, with the lifecycle, the
/// latency policies and the locality wrappers.
const SPECS: &[&str] = &[
    "c_murmurhash",
    "c_murmurhash_bl",
    "c_md5",
    "c_ketama",
    "ketama",
    "ketama:compat=libketama",
    "ketama:weighted=false",
    "ring_hash",
    "ring_hash:hash_balance_factor=150",
    "maglev",
    "maglev:hash_balance_factor=150",
    "nginx_hash",
    "nginx_hash:consistent=true",
    "haproxy_hash",
    "haproxy_hash:type=consistent",
    "twemproxy",
    "twemproxy:distribution=modula",
    "dubbo",
    "pixiu_ring",
    "rr",
    "random",
    "wrr",
    "swrr",
    "wr",
    "p2c",
    "p2c:load=peak_ewma",
    "la",
    "rr:slow_start=10s eject_after=1 eject_for=1h max_eject_for=1h",
    "p2c:slow_start=1h eject_after=1 max_ejection_percent=100",
    "c_murmurhash_bl:eject_after=2 panic_below=50",
    "zone_first over rr",
    "local_first over c_murmurhash",
    "zone_first over la",
    "local_first over p2c:load=peak_ewma",
];

/// The policies whose hash range is 64 bits (every code is one of theirs),
/// and those that place by no hash at all.
const ANY_CODE: &[&str] = &["ring_hash", "maglev"];

fn spec(text: &str) -> PolicySpec {
    text.parse().unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn is_hashing(text: &str) -> bool {
    spec(text).is_hashing()
}

/// `n` endpoints of weight `w`, in zones z0 and z1.
fn endpoints(n: usize, w: u32) -> Vec<Endpoint> {
    (0..n)
        .map(|i| {
            Endpoint::new(format!("10.{}.{}.{}:80", i >> 16, (i >> 8) & 255, i & 255))
                .unwrap()
                .with_weight(w)
                .with_zone(format!("z{}", i % 2))
                .unwrap()
        })
        .collect()
}

/// The requests every policy is asked: no key, the empty key, codes at
/// both ends, a zone, times at both ends of the clock.
fn requests() -> Vec<Request<'static>> {
    vec![
        Request::new(),
        Request::key(""),
        Request::key("k"),
        Request::code(0),
        Request::code(u64::from(u32::MAX)),
        Request::key("k").in_zone("z1"),
        Request::key("k").in_zone("no such zone"),
        Request::new().in_zone(""),
        Request::key("k").at(Duration::ZERO),
        Request::key("k").at(Duration::MAX),
    ]
}

/// The last octet of an address of [`endpoints`].
fn last_octet(addr: &str) -> usize {
    let ip = addr.split(':').next().unwrap();
    ip.rsplit('.').next().unwrap().parse().unwrap()
}

fn one_line(text: &str) {
    assert!(
        !text.is_empty() && !text.contains('\n') && text.len() < 400,
        "{text:?}"
    );
}

// ------------------------------------------------------------- memberships

#[test]
fn every_policy_over_no_endpoints_says_so() {
    for &text in SPECS {
        let b = Balancer::new(spec(text), []).unwrap();
        for req in requests().iter().chain([&Request::code(u64::MAX)]) {
            let err = b.pick(req).unwrap_err();
            assert_eq!(err.kind(), PickErrorKind::NoEndpoints, "{text}");
            assert_eq!(err.to_string(), "no endpoints");
            let err = b.candidates(req).unwrap_err();
            assert_eq!(err.kind(), PickErrorKind::NoEndpoints, "{text}");
            assert_eq!(b.route(req).unwrap_err().kind(), PickErrorKind::NoEndpoints);
            let local = b.local();
            assert_eq!(
                local.pick(req).unwrap_err().kind(),
                PickErrorKind::NoEndpoints
            );
        }
        assert!(b.layout().is_err(), "{text}");
        assert!(b.states(Duration::MAX).is_empty());
        assert!(b.reported_loads_at(Duration::MAX).is_empty());
        assert_eq!(b.total_in_flight(), 0);
        assert_eq!(b.set_healthy("a", false).unwrap_err().id(), "a");
        assert_eq!(
            b.report_load("a", LoadReport::new(1)).unwrap_err().id(),
            "a"
        );
        assert!(b.lifecycle("a", Duration::MAX).is_err());
        assert!(b.remove("a").is_err());
        // An empty update of an empty balancer changes nothing.
        assert!(!b.update([]).unwrap());
    }
}

/// Weights of `u32::MAX` on every endpoint: each family either builds and
/// picks (every sum of weights is 64-bit or wider) or refuses the
/// membership in one line that gives its limit. Equal weights share the
/// picks of the round robins equally.
#[test]
fn weights_of_u32_max_on_every_family() {
    let refused: &[(&str, BuildErrorKind, &str)] = &[
        ("c_murmurhash", BuildErrorKind::TooLarge, "c_murmurhash: replicas=100 times a total weight of 12884901885 makes 1288490188500 points, more than the limit of 8388608"),
        ("c_murmurhash_bl", BuildErrorKind::TooLarge, "c_murmurhash: replicas=100 times a total weight of 12884901885 makes 1288490188500 points, more than the limit of 8388608"),
        ("c_md5", BuildErrorKind::TooLarge, "c_md5: replicas=100 times a total weight of 12884901885 makes 1288490188500 points, more than the limit of 8388608"),
        ("c_ketama", BuildErrorKind::TooLarge, "c_ketama: replicas=100 times a total weight of 12884901885 makes 1288490188500 points, more than the limit of 8388608"),
        ("c_murmurhash_bl:eject_after=2 panic_below=50", BuildErrorKind::TooLarge, "c_murmurhash: replicas=100 times a total weight of 12884901885 makes 1288490188500 points, more than the limit of 8388608"),
        ("nginx_hash:consistent=true", BuildErrorKind::TooLarge, "nginx_hash: weights summing to 12884901885 make 2061584301600 points, more than the limit of 8388608"),
        ("haproxy_hash", BuildErrorKind::Endpoint, "haproxy_hash: endpoint `10.0.0.0:80`: weight=4294967295 is out of range: HAProxy accepts 0..=256"),
        ("haproxy_hash:type=consistent", BuildErrorKind::Endpoint, "haproxy_hash: endpoint `10.0.0.0:80`: weight=4294967295 is out of range: HAProxy accepts 0..=256"),
        ("twemproxy:distribution=modula", BuildErrorKind::TooLarge, "twemproxy: distribution=modula has one slot per unit of weight: weights summing to 12884901885 exceed the limit of 8388608 slots"),
        ("local_first over c_murmurhash", BuildErrorKind::TooLarge, "local_first over c_murmurhash: 3 instances (one per zone, one over all) make 2576980377000 entries, more than the limit of 16777216"),
    ];
    for &text in SPECS {
        let built = Balancer::new(spec(text), endpoints(3, u32::MAX));
        if let Some(&(_, kind, message)) = refused.iter().find(|(s, _, _)| *s == text) {
            let err = built.unwrap_err();
            assert_eq!((err.kind(), err.to_string().as_str()), (kind, message));
            continue;
        }
        let b = built.unwrap_or_else(|e| panic!("{text}: {e}"));
        let mut seen = [0usize; 3];
        for req in requests() {
            for _ in 0..30 {
                match b.pick(&req) {
                    Ok(pick) => {
                        seen[last_octet(pick.addr())] += 1;
                        pick.finish(Outcome::success(Duration::from_millis(1)));
                    }
                    Err(e) => assert_eq!(e.kind(), PickErrorKind::MissingKey, "{text}: {e}"),
                }
            }
        }
        assert_eq!(b.total_in_flight(), 0, "{text}");
        if ["rr", "wrr", "swrr"].contains(&text) {
            assert_eq!(seen, [100, 100, 100], "{text}");
        }
    }
    // Two of u32::MAX and one of 1: the light one is 1 in 2^33 of the
    // sequence, so 3,000 picks never reach it.
    for text in ["wrr", "swrr", "wr", "p2c", "ring_hash", "maglev"] {
        let mut pool = endpoints(2, u32::MAX);
        pool.push(Endpoint::new("light").unwrap());
        let b = Balancer::new(spec(text), pool).unwrap();
        for i in 0..3000u64 {
            let pick = b.pick(&Request::code(i * 1_431_655_765)).unwrap();
            assert_ne!(pick.addr(), "light", "{text} at {i}");
        }
        assert_eq!(b.total_in_flight(), 0);
    }
}

/// Identical endpoints are one member however many times they are given; a
/// conflicting copy is refused however far down the list it comes, and
/// leaves the membership as it was.
#[test]
fn duplicates_are_one_member_however_many() {
    let copies = std::iter::repeat_n(Endpoint::new("a:1").unwrap(), 10_000);
    let b = Balancer::new(
        spec("c_murmurhash"),
        copies.chain([Endpoint::new("b:1").unwrap()]),
    )
    .unwrap();
    assert_eq!(
        b.endpoints(),
        [Endpoint::new("a:1").unwrap(), Endpoint::new("b:1").unwrap()]
    );
    let conflicting = std::iter::repeat_n(Endpoint::new("a:1").unwrap(), 10_000)
        .chain([Endpoint::new("a:1").unwrap().with_weight(2)]);
    let err = b.update(conflicting).unwrap_err();
    assert_eq!(err.kind(), BuildErrorKind::Conflict);
    assert_eq!(
        err.to_string(),
        "endpoint `a:1` is given twice with different attributes: `a:1` and `a:1 weight=2`"
    );
    assert_eq!(b.endpoints().len(), 2);
    // The same address under another tag is another backend.
    let tagged = Endpoint::new("a:1").unwrap().with_tag("t").unwrap();
    b.insert(tagged.clone(), ()).unwrap();
    assert_eq!(b.endpoints().len(), 3);
    assert!(!b.insert(tagged, ()).unwrap(), "the same again: no change");
}

/// A million endpoints of weight 1 cost memory in proportion, as do a
/// hundred thousand under every cheap family: about 600 bytes an endpoint
/// beyond the endpoints given (its member, its counters, the snapshot's
/// copy), measured by this binary's counting allocator.
#[test]
fn a_million_endpoints_cost_memory_in_proportion() {
    let measure = |text: &str, n: usize| -> (isize, Balancer) {
        let pool = endpoints(n, 1);
        let before = alloc::live();
        let b = Balancer::new(spec(text), pool).unwrap();
        ((alloc::live() - before) / n as isize, b)
    };
    let (per_endpoint, b) = measure("rr", 1_000_000);
    assert!(per_endpoint < 1024, "rr: {per_endpoint} bytes an endpoint");
    let pick = b.pick(&Request::new().in_zone("z1")).unwrap();
    assert_eq!(pick.addr(), "10.0.0.0:80");
    drop(pick);
    drop(b);
    for text in [
        "random",
        "wr",
        "wrr",
        "swrr",
        "p2c",
        "p2c:load=peak_ewma",
        "la",
        "c_murmurhash:replicas=1",
        "maglev:table_size=1000003",
        "zone_first over rr",
    ] {
        let (per_endpoint, b) = measure(text, 100_000);
        assert!(
            per_endpoint < 1536,
            "{text}: {per_endpoint} bytes an endpoint"
        );
        drop(b.pick(&Request::code(7)).unwrap());
        assert_eq!(b.total_in_flight(), 0);
    }
}

/// A locality policy builds its inner policy once per zone: `swrr`'s and
/// `wrr`'s precomputed periods (up to 65,536 positions) made every zone of
/// two endpoints weighing 65535 and 1 cost 256 KiB and 130,000 steps to
/// build. A zone's instance now precomputes at most 256 positions; longer
/// periods are computed as the whole pool's are, with the same sequence.
#[test]
fn zones_of_weighted_round_robins_cost_in_proportion_to_their_endpoints() {
    for inner in ["swrr", "wrr"] {
        let pool: Vec<Endpoint> = (0..2000usize)
            .map(|i| {
                Endpoint::new(format!("10.0.{}.{}:80", i / 256, i % 256))
                    .unwrap()
                    .with_zone(format!("z{}", i / 2))
                    .unwrap()
                    .with_weight(if i % 2 == 0 { 65535 } else { 1 })
            })
            .collect();
        let before = alloc::live();
        let b = Balancer::new(spec(&format!("zone_first over {inner}")), pool).unwrap();
        let per_endpoint = (alloc::live() - before) / 2000;
        assert!(
            per_endpoint < 4096,
            "{inner}: {per_endpoint} bytes an endpoint"
        );
        // Zone z7 is 10.0.0.14 (65535) and 10.0.0.15 (1): the light one's
        // turn comes once in 65,536.
        let addrs: Vec<String> = (0..1000)
            .map(|_| {
                let pick = b.pick(&Request::new().in_zone("z7")).unwrap();
                pick.addr().to_string()
            })
            .collect();
        assert!(
            addrs.iter().all(|a| a == "10.0.0.14:80"),
            "{inner}: {:?}",
            addrs.iter().find(|a| *a != "10.0.0.14:80")
        );
    }
    // The same sequence with or without a table: zones of 5, 1, 1 (period 7).
    for (inner, want) in [("swrr", "a a b a c a a"), ("wrr", "a a a a a b c")] {
        let pool = [("a", 5), ("b", 1), ("c", 1), ("x", 1)].map(|(name, w)| {
            let zone = if name == "x" { "other" } else { "z" };
            Endpoint::new(name)
                .unwrap()
                .with_weight(w)
                .with_zone(zone)
                .unwrap()
        });
        let b = Balancer::new(spec(&format!("zone_first over {inner}")), pool).unwrap();
        let seq: Vec<String> = (0..7)
            .map(|_| {
                b.pick(&Request::new().in_zone("z"))
                    .unwrap()
                    .addr()
                    .to_string()
            })
            .collect();
        assert_eq!(seq.join(" "), want, "{inner}");
    }
}

// ------------------------------------------------------------ endpoint text

/// Addresses, tags, zones and hash keys take any text without white space:
/// NUL and other control characters included (they print back and parse
/// again); empty or blank ones are refused naming the field, with the
/// culprit escaped and cut in the message.
#[test]
fn endpoint_fields_take_any_non_blank_text() {
    let nul = Endpoint::new("a\0b:80")
        .unwrap()
        .with_tag("t\0")
        .unwrap()
        .with_zone("\x07")
        .unwrap()
        .with_hash_key("\u{feff}")
        .unwrap();
    assert_eq!(nul.to_string().parse::<Endpoint>().unwrap(), nul);
    let b = Balancer::new(spec("c_md5"), [nul.clone()]).unwrap();
    assert_eq!(b.pick(&Request::key("k")).unwrap().endpoint(), &nul);

    let e = || Endpoint::new("a").unwrap();
    for (err, want) in [
        (
            Endpoint::new("").unwrap_err(),
            "endpoint ``: address is empty",
        ),
        (e().with_tag("").unwrap_err(), "endpoint `a`: tag is empty"),
        (
            e().with_zone("").unwrap_err(),
            "endpoint `a`: zone is empty",
        ),
        (
            e().with_hash_key("").unwrap_err(),
            "endpoint `a`: hash_key is empty",
        ),
        (
            Endpoint::new("a\nb").unwrap_err(),
            "endpoint `a\\nb`: address `a\\nb` contains white space",
        ),
        (
            e().with_tag("x\u{2028}").unwrap_err(),
            "endpoint `a`: tag `x\\u{2028}` contains white space",
        ),
        (
            e().with_zone("\r").unwrap_err(),
            "endpoint `a`: zone `\\r` contains white space",
        ),
    ] {
        assert_eq!(err.kind(), ParseErrorKind::Syntax);
        assert_eq!(err.to_string(), want);
    }
    let huge = format!("{}\n", "h".repeat(1 << 20));
    let err = e().with_hash_key(huge.as_str()).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "endpoint `a`: hash_key `{}... (1048577 characters)` contains white space",
            "h".repeat(40)
        )
    );
}

/// Names of a megabyte build every policy over two endpoints (the schemes
/// that hash the name once per point hash a few hundred megabytes), and
/// pick, route and report in one line.
#[test]
fn names_of_a_megabyte_on_every_policy() {
    let name = "n".repeat(1 << 20);
    for &text in SPECS {
        for field in ["addr", "tag", "zone", "hash_key"] {
            let e = match field {
                "addr" => Endpoint::new(name.as_str()).unwrap(),
                "tag" => Endpoint::new("b:1")
                    .unwrap()
                    .with_tag(name.as_str())
                    .unwrap(),
                "zone" => Endpoint::new("b:1")
                    .unwrap()
                    .with_zone(name.as_str())
                    .unwrap(),
                _ => Endpoint::new("b:1")
                    .unwrap()
                    .with_hash_key(name.as_str())
                    .unwrap(),
            };
            let other = Endpoint::new("c:1").unwrap().with_zone("z").unwrap();
            let b = match Balancer::new(spec(text), [e, other]) {
                Ok(b) => b,
                Err(err) => {
                    // HAProxy's server keys are ids, guids or addresses.
                    assert!(text.starts_with("haproxy_hash"), "{text} {field}: {err}");
                    assert_eq!(err.kind(), BuildErrorKind::Endpoint);
                    one_line(&err.to_string());
                    continue;
                }
            };
            for req in [
                Request::key("k"),
                Request::key("k").in_zone(&name),
                Request::new().in_zone(&name),
            ] {
                match b.pick(&req) {
                    Ok(pick) => pick.finish(Outcome::failure(Duration::MAX)),
                    // No key for a hashing policy; or every endpoint ejected
                    // by the failures (`max_ejection_percent=100`).
                    Err(err) => assert!(
                        matches!(
                            err.kind(),
                            PickErrorKind::MissingKey | PickErrorKind::NoEligibleEndpoint
                        ),
                        "{text} {field}: {err}"
                    ),
                }
            }
            assert_eq!(b.total_in_flight(), 0, "{text} {field}");
            let ids = [Id::new(name.as_str(), None), Id::new("b:1", Some(&name))];
            if let Err(err) = b.pick(&Request::key("k").excluding_ids(&ids)) {
                one_line(&err.to_string());
            }
        }
    }
}

/// The schemes that hash a whole name per point refuse a build whose names
/// would take more than 2^31 bytes to hash (a megabyte name on a ring of
/// eight million points was 8 TB of MD5 or xxHash: hours), in one line that
/// names the longest name; the membership stays as it was, incremental
/// changes included.
#[test]
fn hashing_names_is_bounded_by_2_gib_a_build() {
    let long = |len: usize| {
        Endpoint::new(format!("{}:80", "a".repeat(len - 3)))
            .unwrap()
            .with_zone("z")
            .unwrap()
    };
    let cut = |len: usize| format!("{}... ({len} characters)", "a".repeat(40));
    let cases = [
        (
            "ring_hash:min_ring_size=8388608",
            1 << 20,
            format!(
                "ring_hash: hashing the point names takes 4398240497710 bytes (21 plus the \
                 name's length a point), more than the limit of 2147483648; the longest name, \
                 1048576 bytes, is endpoint `{}`'s: accepted shorter names or fewer points",
                cut(1 << 20)
            ),
        ),
        (
            "c_md5:replicas=4194304",
            1000,
            format!(
                "c_md5: hashing the point names takes 4387241984 bytes (21 plus the name's \
                 length a point), more than the limit of 2147483648; the longest name, 1000 \
                 bytes, is endpoint `{}`'s: accepted shorter names or fewer points",
                cut(1000)
            ),
        ),
        (
            "c_ketama:replicas=4194304",
            4000,
            format!(
                "c_ketama: hashing the point names takes 4242538496 bytes (21 plus the name's \
                 length a point), more than the limit of 2147483648; the longest name, 4000 \
                 bytes, is endpoint `{}`'s: accepted shorter names or fewer points",
                cut(4000)
            ),
        ),
        (
            "dubbo:nodes=4194304",
            4000,
            format!(
                "dubbo: hashing the point names takes 4242538496 bytes (21 plus the name's \
                 length a point), more than the limit of 2147483648; the longest name, 4000 \
                 bytes, is endpoint `{}`'s: accepted shorter names or fewer points",
                cut(4000)
            ),
        ),
        (
            "pixiu_ring:replica_num=4194304",
            1000,
            format!(
                "pixiu_ring: hashing the point names takes 4387241984 bytes (21 plus the name's \
                 length a point), more than the limit of 2147483648; the longest name, 1000 \
                 bytes, is endpoint `{}`'s: accepted shorter names or fewer points",
                cut(1000)
            ),
        ),
    ];
    for (text, len, message) in cases {
        let short = Endpoint::new("b:80").unwrap().with_zone("z").unwrap();
        let err = Balancer::new(spec(text), [long(len), short.clone()]).unwrap_err();
        assert_eq!(err.kind(), BuildErrorKind::TooLarge, "{text}");
        assert_eq!(err.to_string(), message, "{text}");
        // Added to a running balancer (empty: a ring of millions of points
        // takes seconds to build in a debug build), in an update or one at
        // a time, and under a locality policy: refused, nothing changed.
        let b = Balancer::new(spec(text), []).unwrap();
        let err = b.update([long(len), short.clone()]).unwrap_err();
        assert_eq!(err.to_string(), message, "{text}: update");
        let err = b.insert(long(len), ()).unwrap_err();
        assert_eq!(err.kind(), BuildErrorKind::TooLarge, "{text}: insert");
        assert!(
            err.to_string()
                .contains(&format!("the longest name, {len} bytes")),
            "{text}: {err}"
        );
        assert!(b.endpoints().is_empty());
        let zoned = format!("zone_first over {text}");
        assert!(Balancer::new(spec(&zoned), [long(len), short]).is_err());
    }
    // Every endpoint's names count: two of 400 and 401 bytes at 4194304
    // points each, 3.5 GB.
    let err = Balancer::new(spec("c_md5:replicas=4194304"), [long(400), long(401)])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("takes 3535798272 bytes") && err.contains("the longest name, 401 bytes"),
        "{err}"
    );
    // A weight makes points too: an endpoint inserted into a running ring
    // (merged into it, not rebuilt) is refused the same way.
    for text in ["c_md5", "c_ketama"] {
        let b = Balancer::new(spec(text), endpoints(2, 1)).unwrap();
        let heavy = long(2000).with_weight(80_000);
        let err = b.insert(heavy.clone(), ()).unwrap_err();
        let names: u64 = if text == "c_md5" {
            8_000_000
        } else {
            2_000_000
        };
        assert_eq!(
            err.to_string(),
            format!(
                "{text}: hashing the point names takes {} bytes (21 plus the name's length a \
                 point), more than the limit of 2147483648; the longest name, 2000 bytes, is \
                 endpoint `{}`'s: accepted shorter names or fewer points",
                names * 2021 + (if text == "c_md5" { 200 } else { 50 }) * 32,
                cut(2000)
            )
        );
        assert_eq!(b.endpoints(), endpoints(2, 1));
        assert!(
            b.insert(heavy.with_weight(1), ()).unwrap(),
            "one point a replica"
        );
    }
    // c_murmurhash hashes each address once, whatever its points.
    let b = Balancer::new(spec("c_murmurhash:replicas=100000"), [long(1 << 20)]).unwrap();
    assert_eq!(b.layout().unwrap().unwrap().entries(), 100_000);
}

// ----------------------------------------------------------------- requests

/// The empty key and a key of 16 MB place as any other on every hashing
/// policy: the same endpoint every time, the route's and the pick's.
#[test]
fn keys_of_no_bytes_and_of_16_mb_place_like_any_other() {
    let huge = vec![0xa5u8; 16 << 20];
    for &text in SPECS.iter().filter(|t| is_hashing(t)) {
        let b = Balancer::new(spec(text), endpoints(5, 1)).unwrap();
        for key in [&[][..], &huge[..]] {
            let req = Request::key(key);
            let routed = b.route(&req).unwrap().unwrap().addr().to_string();
            let picked = b.pick(&req).unwrap();
            assert_eq!(
                picked.addr(),
                routed,
                "{text}, a key of {} bytes",
                key.len()
            );
        }
        assert_eq!(b.total_in_flight(), 0);
    }
}

/// A code is placed as is when it is within the policy's hash range; past
/// it, the error gives the code and the range (32-bit hashes refuse
/// `u64::MAX`; Envoy's 64-bit ones take it). Policies that place by no
/// hash ignore codes.
#[test]
fn codes_at_the_edges_of_each_hash_range() {
    for &text in SPECS {
        let b = Balancer::new(spec(text), endpoints(3, 1)).unwrap();
        for code in [0, u64::from(u32::MAX)] {
            drop(b.pick(&Request::code(code)).unwrap());
        }
        let wide = !is_hashing(text) || ANY_CODE.contains(&spec(text).name());
        for code in [u64::from(u32::MAX) + 1, u64::MAX] {
            match b.pick(&Request::code(code)) {
                Ok(_) => assert!(wide, "{text} took {code}"),
                Err(err) => {
                    assert!(!wide, "{text}: {err}");
                    assert_eq!(err.kind(), PickErrorKind::CodeOutOfRange);
                    assert_eq!((err.code(), err.max_code()), (Some(code), Some(4294967295)));
                    let scheme = err.policy().unwrap();
                    assert_eq!(
                        err.to_string(),
                        format!(
                            "request code {code} is out of range for {scheme}: accepted 0..=4294967295"
                        )
                    );
                    let err = b.candidates(&Request::code(code)).unwrap_err();
                    assert_eq!(err.kind(), PickErrorKind::CodeOutOfRange);
                }
            }
        }
    }
}

/// Excluding every endpoint, by address, by identity or both, is "no
/// eligible endpoint" with the count, on every policy; candidates are none.
#[test]
fn excluding_every_endpoint_leaves_none_eligible() {
    let pool = endpoints(64, 1);
    let addrs: Vec<&str> = pool.iter().map(Endpoint::addr).collect();
    let ids: Vec<Id> = pool.iter().map(Endpoint::id).collect();
    for &text in SPECS {
        let b = Balancer::new(spec(text), pool.clone()).unwrap();
        for req in [
            Request::key("k").excluding(&addrs),
            Request::code(9).excluding_ids(&ids),
            Request::key("k")
                .excluding(&addrs[..32])
                .excluding_ids(&ids[32..]),
            Request::key("k").excluding(&addrs).in_zone("z0"),
            Request::key("k").excluding(&addrs).at(Duration::MAX),
        ] {
            let err = b.pick(&req).unwrap_err();
            assert_eq!(err.kind(), PickErrorKind::NoEligibleEndpoint, "{text}");
            assert_eq!(err.members(), Some(64), "{text}");
            assert_eq!(b.candidates(&req).unwrap().count(), 0, "{text}");
            assert!(b.local().pick(&req).is_err());
            if is_hashing(text) {
                assert_eq!(
                    b.route(&req).err().map(|e| e.kind()),
                    Some(PickErrorKind::NoEligibleEndpoint)
                );
            }
        }
        assert_eq!(b.total_in_flight(), 0, "{text}");
    }
    // 2,000 endpoints all excluded: each endpoint a pick walks past is
    // compared with the 2,000 entries (quadratic, documented on
    // `Request::excluding`), and the pick still ends.
    let pool = endpoints(2000, 1);
    let addrs: Vec<&str> = pool.iter().map(Endpoint::addr).collect();
    for text in ["c_murmurhash_bl", "maglev", "la", "wrr"] {
        let b = Balancer::new(spec(text), pool.clone()).unwrap();
        let err = b.pick(&Request::key("k").excluding(&addrs)).unwrap_err();
        assert_eq!(err.members(), Some(2000), "{text}");
    }
}

/// A zone no endpoint is in, or the empty zone, falls back to every
/// endpoint under both locality rules.
#[test]
fn zones_that_do_not_exist_fall_back_to_every_endpoint() {
    for text in [
        "zone_first over rr",
        "zone_first:min_endpoints=4294967295 over c_md5",
        "local_first:local_share=100 over p2c",
        "local_first over zone_first over la",
    ] {
        let b = Balancer::new(spec(text), endpoints(4, 1)).unwrap();
        for zone in ["", "nope", "z", "\0", &"z".repeat(1 << 16)] {
            let pick = b.pick(&Request::key("k").in_zone(zone)).unwrap();
            assert!(pick.addr().starts_with("10.0.0."), "{text} {zone:?}");
        }
    }
}

// ------------------------------------------------------------ the clock

/// Requests and outcomes at both ends of the clock, with latencies of
/// `Duration::MAX` and zero, on every policy: picks keep working, every
/// slot is released, and the states read at those times are whole.
#[test]
fn times_and_latencies_at_both_ends_of_the_clock() {
    let times = [
        Duration::ZERO,
        Duration::from_nanos(u64::MAX),
        Duration::MAX,
    ];
    let latencies = [Duration::ZERO, Duration::from_nanos(1), Duration::MAX];
    for &text in SPECS {
        let b = Balancer::new(spec(text), endpoints(3, 1)).unwrap();
        for (k, &at) in times.iter().chain(times.iter().rev()).enumerate() {
            for (j, &latency) in latencies.iter().enumerate() {
                let req = Request::code((k * 3 + j) as u64).at(at);
                match b.pick(&req) {
                    Ok(pick) => {
                        let outcome = if (k + j) % 2 == 0 {
                            Outcome::success(latency)
                        } else {
                            Outcome::failure(latency)
                        };
                        pick.finish(outcome.at(at));
                    }
                    // The lifecycle's ejections may take every endpoint out.
                    Err(e) => assert_eq!(e.kind(), PickErrorKind::NoEligibleEndpoint, "{text}"),
                }
            }
            for state in b.states(at) {
                // An ejection at the end of the clock lasts to its end: read
                // at an earlier time, that is centuries.
                assert!(
                    state.lifecycle.ejected_for != Some(Duration::ZERO),
                    "{text}"
                );
                if let Some(ramp) = state.lifecycle.slow_start {
                    assert!((0.0..1.0).contains(&ramp), "{text}: {ramp}");
                }
            }
        }
        assert_eq!(b.total_in_flight(), 0, "{text}");
        // Back to ordinary times: every policy still picks.
        for i in 0..30u64 {
            let req = Request::code(i).at(Duration::from_secs(i));
            if let Err(e) = b.pick(&req) {
                assert_eq!(e.kind(), PickErrorKind::NoEligibleEndpoint, "{text}");
            }
        }
    }
}

/// An ejection dated at the end of the clock lasts to the end of the clock
/// (its end saturates) and says how long is left; the endpoint is back at
/// the clock's last instant.
#[test]
fn an_ejection_at_the_end_of_the_clock_saturates() {
    let b = Balancer::new(
        spec("rr:eject_after=1 eject_for=1h max_eject_for=1h"),
        endpoints(2, 1),
    )
    .unwrap();
    let end = Duration::from_nanos(u64::MAX);
    let late = end - Duration::from_secs(60);
    let e0 = b
        .candidates(&Request::new().at(late))
        .unwrap()
        .find(|c| c.addr() == "10.0.0.0:80")
        .unwrap();
    e0.reserve()
        .finish(Outcome::failure(Duration::MAX).at(late));
    let view = b.lifecycle("10.0.0.0:80", late).unwrap();
    assert_eq!(view.ejected_for, Some(Duration::from_secs(60)));
    for _ in 0..4 {
        let pick = b.pick(&Request::new().at(late)).unwrap();
        assert_eq!(pick.addr(), "10.0.0.1:80");
    }
    assert_eq!(b.lifecycle("10.0.0.0:80", end).unwrap().ejected_for, None);
    let back: Vec<String> = (0..2)
        .map(|_| {
            b.pick(&Request::new().at(Duration::MAX))
                .unwrap()
                .addr()
                .to_string()
        })
        .collect();
    assert!(back.contains(&"10.0.0.0:80".to_string()), "{back:?}");
}

/// A new endpoint first picked at the clock's last nanoseconds starts its
/// slow start there (it did not: the time was taken for the marks "not
/// picked yet" and "out of slow start", so it skipped the ramp).
#[test]
fn slow_start_at_the_end_of_the_clock_starts_the_ramp() {
    for last in [u64::MAX - 1, u64::MAX] {
        let b = Balancer::new(spec("rr:slow_start=10s"), endpoints(2, 1)).unwrap();
        b.insert(Endpoint::new("new").unwrap(), ()).unwrap();
        let at = Duration::from_nanos(last);
        for _ in 0..3 {
            drop(b.pick(&Request::new().at(at)).unwrap());
        }
        let view = b.lifecycle("new", at).unwrap();
        assert_eq!(view.slow_start, Some(0.1), "first offered at {last} ns");
        assert_eq!(
            b.lifecycle("new", Duration::MAX).unwrap().slow_start,
            Some(0.1)
        );
    }
}

/// Peak EWMA's responses at the end of the clock are measurements like
/// any other (the time was taken for "no response yet", so the next
/// response replaced the estimate instead of averaging with it).
#[test]
fn peak_ewma_measures_responses_at_the_end_of_the_clock() {
    let b = Balancer::new(spec("p2c:load=peak_ewma choices=2"), endpoints(2, 1)).unwrap();
    let end = Duration::MAX;
    for latency in [Duration::from_millis(100), Duration::from_millis(1)] {
        b.candidates(&Request::new().at(end))
            .unwrap()
            .find(|c| c.addr() == "10.0.0.0:80")
            .unwrap()
            .reserve()
            .finish(Outcome::success(latency).at(end));
    }
    // e0's estimate is the 100 ms peak (1 ms at the same instant moves it
    // by nothing); e1 has the default 30 ms: every pick takes e1.
    for _ in 0..10 {
        let pick = b.pick(&Request::new().at(end)).unwrap();
        assert_eq!(pick.addr(), "10.0.0.1:80");
    }
}

// ------------------------------------------------------------------ guards

/// Guards held across ten thousand membership changes, their endpoints
/// removed and added back, dropped in any order: every count returns to 0,
/// and an endpoint added back after its guards are gone starts at 0.
#[test]
fn guards_outlive_ten_thousand_membership_changes() {
    for text in [
        "c_murmurhash_bl:replicas=4",
        "rr",
        "p2c:load=peak_ewma",
        "la",
        "rr:eject_after=1",
    ] {
        let b = Balancer::new(spec(text), endpoints(3, 1)).unwrap();
        let first = b.pick(&Request::key("k").excluding(&["10.0.0.1:80", "10.0.0.2:80"]));
        let first = first.unwrap();
        let mut held = Vec::new();
        for step in 0..10_000usize {
            let pool = endpoints(3, 1);
            let keep = step % 3;
            let members = pool.into_iter().enumerate().filter(|(i, _)| *i != keep);
            b.update(members.map(|(_, e)| e)).unwrap();
            // Never both endpoints of a build out: an ejected endpoint that
            // rejoins with guards still held comes back un-ejected, and the
            // budget of two endpoints is one ejection.
            let pick = b
                .pick(&Request::code(step as u64))
                .unwrap_or_else(|e| panic!("{text}: step {step}: {e}"));
            if step % 7 == 0 {
                held.push(pick);
            } else if step % 5 == 0 {
                pick.finish(Outcome::failure(Duration::from_millis(step as u64)));
            }
            if held.len() > 50 {
                held.drain(..25);
            }
        }
        assert_eq!(
            b.total_in_flight(),
            b.loads().iter().map(|(_, l)| l).sum::<u64>(),
            "{text}"
        );
        drop(held);
        drop(first);
        assert_eq!(b.total_in_flight(), 0, "{text}");
        b.update(endpoints(3, 1)).unwrap();
        assert!(b.loads().iter().all(|(_, l)| *l == 0), "{text}");
    }
}

/// A local handle's guards across ten thousand changes: the handle keeps
/// the snapshot of a guard still alive and no other, and lets it go once
/// the guard is dropped.
#[test]
fn local_guards_outlive_ten_thousand_membership_changes() {
    for text in [
        "c_murmurhash:replicas=4",
        "c_murmurhash_bl:replicas=4",
        "rr",
    ] {
        let b = Balancer::new(spec(text), endpoints(3, 1)).unwrap();
        let local = b.local();
        let old = local.pick(&Request::key("old")).unwrap();
        for step in 0..10_000usize {
            let keep = step % 3;
            b.update(
                endpoints(3, 1)
                    .into_iter()
                    .enumerate()
                    .filter(|(i, _)| *i != keep)
                    .map(|(_, e)| e),
            )
            .unwrap();
            let pick = local.pick(&Request::code(step as u64)).unwrap();
            drop(pick);
        }
        assert_eq!(local.kept_snapshots(), 1, "{text}: the old guard's");
        let member = b.endpoints().iter().any(|e| e.addr() == old.addr());
        assert_eq!(b.total_in_flight(), u64::from(member), "{text}");
        drop(old);
        b.update(endpoints(3, 1)).unwrap();
        drop(local.pick(&Request::key("k")).unwrap());
        assert_eq!(local.kept_snapshots(), 0, "{text}");
        assert!(b.loads().iter().all(|(_, l)| *l == 0), "{text}");
    }
}

// ------------------------------------------------------------ load reports

/// A report's count saturates at the most an ORCA header gives, 2^32 - 1,
/// so that the sums over the endpoints stay within 64 bits: 131,073
/// endpoints reporting 2^46 each (the count's former bound) made the
/// balancer's signed sum wrap to a negative total, and its caps to 1;
/// 262,145 in one zone overflowed the zone's sum.
#[test]
fn report_counts_saturate_and_their_sum_stays_exact() {
    assert_eq!(LoadReport::new(u64::MAX).in_service(), orca::MAX_IN_SERVICE);
    assert_eq!(LoadReport::new(1 << 32).in_service(), orca::MAX_IN_SERVICE);
    assert_eq!(LoadReport::new(7).in_service(), 7);

    // 262,145 endpoints in one zone: the zone's instance sums its members'
    // views (2^46 each passed u64: a panic in a debug build), the instance
    // over all adds the offsets to a signed running sum (it wrapped).
    let n = 262_145;
    let pool: Vec<Endpoint> = endpoints(n, 1)
        .into_iter()
        .map(|e| e.with_zone("z").unwrap())
        .collect();
    let b = Balancer::new(
        spec("zone_first over c_murmurhash_bl:replicas=1"),
        pool.clone(),
    )
    .unwrap();
    let at = Duration::from_secs(1);
    for e in &pool {
        b.report_load(e, LoadReport::new(u64::MAX).at(at)).unwrap();
    }
    let loads = b.reported_loads_at(at);
    assert!(loads.iter().all(|(_, l)| *l == Some(orca::MAX_IN_SERVICE)));
    // Every endpoint equally loaded: a key stays at its owner.
    for req in [
        Request::key("user:42").at(at),
        Request::key("user:42").in_zone("z").at(at),
    ] {
        let owner = b.route(&req).unwrap().unwrap().addr().to_string();
        let pick = b.pick(&req).unwrap();
        assert_eq!(pick.addr(), owner);
        assert!(!pick.spilled());
    }

    // With an outcome, on a local handle's guard, at both ends of the clock.
    let b = Balancer::new(spec("c_murmurhash_bl"), endpoints(2, 1)).unwrap();
    for at in [Duration::ZERO, Duration::MAX] {
        let report = LoadReport::new(u64::MAX).at(at);
        b.pick(&Request::key("k").at(at))
            .unwrap()
            .finish(Outcome::success(Duration::MAX).with_report(report));
        b.local()
            .pick(&Request::key("k").at(at))
            .unwrap()
            .finish(Outcome::failure(Duration::MAX).with_report(report));
    }
    assert_eq!(b.total_in_flight(), 0);
}

/// Hostile ORCA headers: one-line errors of the right kind, never a value
/// that was not written as a number.
#[test]
fn orca_headers_of_hostile_values() {
    let read = |h: &str| orca::in_service(h, "in_flight");
    for (header, kind) in [
        ("TEXT named_metrics.=5", orca::OrcaErrorKind::Missing),
        ("TEXT =5", orca::OrcaErrorKind::Syntax),
        (
            "TEXT named_metrics.in_flight=0x10",
            orca::OrcaErrorKind::Number,
        ),
        (
            "TEXT named_metrics.in_flight=1_000",
            orca::OrcaErrorKind::Number,
        ),
        (
            "TEXT named_metrics.in_flight=-inf",
            orca::OrcaErrorKind::Number,
        ),
        (
            "TEXT named_metrics.in_flight=1e309",
            orca::OrcaErrorKind::Number,
        ),
        (
            "TEXT named_metrics.in_flight=-1e-309",
            orca::OrcaErrorKind::OutOfRange,
        ),
        (
            "TEXT named_metrics.in_flight=\u{0661}",
            orca::OrcaErrorKind::Number,
        ),
        (
            "TEXT named_metrics.in_flight=1\0",
            orca::OrcaErrorKind::Number,
        ),
        (
            r#"JSON {"named_metrics": {"in_flight": "1e400"}}"#,
            orca::OrcaErrorKind::Number,
        ),
        (
            r#"JSON {"named_metrics": {"in_flight": -0.6}}"#,
            orca::OrcaErrorKind::OutOfRange,
        ),
        (
            r#"JSON {"named_metrics": {"in_fligh\ud800": 1}}"#,
            orca::OrcaErrorKind::Syntax,
        ),
        // `\u` takes four hex digits, no sign (`u32::from_str_radix` alone
        // read `+074` as `t`).
        (
            r#"JSON {"named_metrics": {"in_fligh\u+074": 3}}"#,
            orca::OrcaErrorKind::Syntax,
        ),
        (
            r#"JSON {"named_metrics": {"in_fligh\u-074": 3}}"#,
            orca::OrcaErrorKind::Syntax,
        ),
        (
            "JSON {\"named_metrics\": {\"in_flight\": 1}}\0",
            orca::OrcaErrorKind::Syntax,
        ),
        (
            "\u{feff}TEXT named_metrics.in_flight=1",
            orca::OrcaErrorKind::Format,
        ),
    ] {
        let err = read(header).unwrap_err();
        assert_eq!(err.kind(), kind, "{header:?}: {err}");
        one_line(&err.to_string());
    }
    assert_eq!(
        read(r#"JSON {"named_metrics": {"in_fligh\u0074": 3}}"#),
        Ok(3)
    );
    assert_eq!(read("TEXT named_metrics.in_flight=1e-309"), Ok(0));
    assert_eq!(read("TEXT named_metrics.in_flight=-0.0"), Ok(0));
    // At the length limit and one past it.
    let pad = |len: usize| {
        let head = "TEXT named_metrics.in_flight=5,";
        format!("{head}{}", " ".repeat(len - head.len()))
    };
    assert_eq!(read(&pad(orca::MAX_HEADER_LEN)), Ok(5));
    assert_eq!(
        read(&pad(orca::MAX_HEADER_LEN + 1))
            .unwrap_err()
            .to_string(),
        "endpoint-load-metrics: 16385 bytes is too long: accepted up to 16384"
    );
    for metric in ["", " ", "a b", "\0", &"m".repeat(129)] {
        let err = orca::in_service("TEXT", metric).unwrap_err();
        assert_eq!(err.kind(), orca::OrcaErrorKind::Metric);
        one_line(&err.to_string());
    }
}

// ------------------------------------------------------- layouts at limits

/// The largest tables and rings describe themselves: every slot or point
/// counted, the shares summing to one.
#[test]
fn layouts_of_the_largest_tables_and_rings() {
    for (text, entries) in [
        ("maglev:table_size=5000011", 5_000_011),
        ("c_murmurhash:replicas=4194304", 8_388_608),
    ] {
        let b = Balancer::new(spec(text), endpoints(2, 1)).unwrap();
        let layout = b.layout().unwrap().unwrap();
        assert_eq!(layout.entries(), entries, "{text}");
        let total: f64 = layout.shares().iter().map(|(_, s)| s).sum();
        assert!((total - 1.0).abs() < 1e-9, "{text}: {total}");
        assert!(layout
            .shares()
            .iter()
            .all(|(_, s)| (0.45..0.55).contains(s)));
        assert!(layout.max_over_mean().is_finite());
        // One point more is refused.
        let err = Balancer::new(spec(text), endpoints(3, 1)).err();
        if text.starts_with("c_murmurhash") {
            assert_eq!(
                err.unwrap().to_string(),
                "c_murmurhash: replicas=4194304 times a total weight of 3 makes 12582912 \
                 points, more than the limit of 8388608"
            );
        }
    }
}

// ------------------------------------------------------- parsers and hashes

proptest! {
    #![proptest_config(common::cases(2048))]

    /// Any text: a factor in (1, 1000] that prints back to itself, or a
    /// one-line error naming `load_factor` and the range.
    #[test]
    fn load_factors_from_any_text(text in prop_oneof![
        ".{0,30}",
        "[0-9.+-eE]{0,30}",
        "[0-9]{0,25}(\\.[0-9]{0,9})?",
    ]) {
        match text.parse::<LoadFactor>() {
            Ok(f) => {
                prop_assert!(f.as_f64() > 1.0 && f.as_f64() <= 1000.0, "{}", text);
                prop_assert_eq!(f.to_string().parse::<LoadFactor>().unwrap(), f);
            }
            Err(e) => {
                one_line(&e.to_string());
                prop_assert_eq!(e.key(), Some("load_factor"));
                prop_assert!(e.to_string().contains("greater than 1 and at most 1000"), "{}", e);
            }
        }
    }

    /// Any fraction: accepted exactly when it is a decimal of at most six
    /// places in (1, 1000]; caps of any load never panic, never pass
    /// `u64::MAX`, and grow with the load.
    #[test]
    fn load_factor_fractions_and_caps_of_any_size(num in any::<u64>(), den in any::<u64>(),
                                                    total in any::<u64>(), weight in any::<u32>(),
                                                    sum in any::<u64>()) {
        match LoadFactor::new(num, den) {
            Ok(f) => {
                prop_assert!(den > 0 && u128::from(num) > u128::from(den));
                prop_assert!(u128::from(num) <= 1000 * u128::from(den));
                let sum = sum.max(u64::from(weight));
                let cap = f.cap(total, weight, sum);
                prop_assert!(f.cap(total.saturating_sub(1), weight, sum) <= cap);
                if weight > 0 {
                    prop_assert!(cap >= 1);
                }
            }
            Err(e) => one_line(&e.to_string()),
        }
        let f = LoadFactor::new(1000, 1).unwrap();
        let _ = f.cap(total, weight, sum);
    }

    /// Any text and any range, reversed or up to `Duration::MAX`: a
    /// duration inside the range, or a one-line error with the text and
    /// what is accepted.
    #[test]
    fn durations_from_any_text_and_any_range(text in prop_oneof![
        ".{0,24}",
        "[0-9]{0,22}(ms|s|m|h|us|)",
    ], a in any::<u64>(), b in any::<u64>(), max in any::<bool>()) {
        let (start, end) = (Duration::from_millis(a), Duration::from_millis(b));
        let end = if max { Duration::MAX } else { end };
        match parse_duration(&text, start..=end) {
            Ok(d) => prop_assert!(start <= d && d <= end),
            Err(e) => {
                one_line(&e.to_string());
                prop_assert_eq!(e.value(), Some(text.as_str()));
                prop_assert!(e.accepted().is_some_and(|a| a.starts_with("a whole number of ms")));
            }
        }
    }
}

#[test]
fn durations_at_the_edges() {
    let all = Duration::ZERO..=Duration::MAX;
    assert_eq!(
        parse_duration("18446744073709551615ms", all.clone()),
        Ok(Duration::from_millis(u64::MAX))
    );
    for text in [
        "18446744073709551616ms",
        "18446744073709551615s",
        "99999999999999999999999h",
    ] {
        let err = parse_duration(text, all.clone()).unwrap_err();
        assert!(
            err.to_string()
                .starts_with(&format!("`{text}` is out of range")),
            "{err}"
        );
    }
    // A reversed range holds nothing: every duration is out of it.
    let reversed = Duration::from_secs(2)..=Duration::from_secs(1);
    assert_eq!(
        parse_duration("1s", reversed).unwrap_err().to_string(),
        "`1s` is out of range: accepted a whole number of ms, s, m or h from 2s to 1s \
         (e.g. 500ms, 10s, 1m)"
    );
    let huge = "9".repeat(1 << 20) + "ms";
    let err = parse_duration(&huge, all).unwrap_err().to_string();
    assert!(err.len() < 200, "{err}");
}

/// Every public hash function takes the empty input, every short length
/// (each tail of each block size, bytes with the top bit set as C's signed
/// `char` would read them), and 16 MB, and gives the published values
/// where there are some.
#[test]
fn every_hash_function_takes_empty_short_and_huge_inputs() {
    type Hash32 = fn(&[u8]) -> u32;
    let hashes: &[(&str, Hash32)] = &[
        ("blake2b_le32", hash::blake2b_le32),
        ("twemproxy_crc16", hash::twemproxy_crc16),
        ("crc32", hash::crc32),
        ("djb2", hash::djb2),
        ("fnv1_64", hash::fnv1_64),
        ("fnv1a_64", hash::fnv1a_64),
        ("fnv1_32", hash::fnv1_32),
        ("fnv1a_32", hash::fnv1a_32),
        ("hsieh", hash::hsieh),
        ("jenkins", hash::jenkins),
        ("md5_le32", hash::md5_le32),
        ("one_at_a_time", hash::one_at_a_time),
        ("sdbm", hash::sdbm),
        ("twemproxy_murmur", hash::twemproxy_murmur),
        ("wt6", hash::wt6),
        ("hashlittle", |d| hash::hashlittle(d, u32::MAX)),
        ("murmur2_32", |d| hash::murmur2_32(d, u32::MAX)),
        ("murmur3_x86_32", |d| hash::murmur3_x86_32(d, u32::MAX)),
        ("xxhash64", |d| hash::xxhash64(d, u64::MAX) as u32),
        ("murmur_hash_2", |d| hash::murmur_hash_2(d, u64::MAX) as u32),
        ("md5", |d| {
            u32::from_le_bytes(hash::md5(d)[..4].try_into().unwrap())
        }),
    ];
    let huge = vec![0xffu8; 16 << 20];
    for &(name, f) in hashes {
        for fill in [0x00u8, 0x7f, 0x80, 0xff] {
            let bytes = [fill; 130];
            let all: Vec<u32> = (0..=130).map(|len| f(&bytes[..len])).collect();
            let again: Vec<u32> = (0..=130).map(|len| f(&bytes[..len])).collect();
            assert_eq!(all, again, "{name}");
        }
        f(&huge);
    }
    let empty: &[u8] = b"";
    assert_eq!(
        hash::md5(empty),
        *b"\xd4\x1d\x8c\xd9\x8f\x00\xb2\x04\xe9\x80\x09\x98\xec\xf8\x42\x7e"
    );
    assert_eq!(hash::xxhash64(empty, 0), 0xef46_db37_51d8_e999);
    assert_eq!(hash::crc32(empty), 0);
    assert_eq!(hash::murmur3_x86_32(empty, 0), 0);
    assert_eq!(hash::fnv1a_32(empty), 0x811c_9dc5);
    assert_eq!(hash::djb2(empty), 5381);
    assert_eq!(
        hash::haproxy_full_hash(u32::MAX),
        hash::haproxy_full_hash(u32::MAX)
    );
}

// --------------------------------------------------------- memory, measured

/// This test binary's allocator: the system's, with each thread counting
/// the bytes it holds (a thread's figure is its own allocations less its
/// own frees, so tests running side by side do not mix).
mod alloc {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    struct Counting;

    thread_local! {
        static LIVE: Cell<isize> = const { Cell::new(0) };
    }

    fn add(bytes: isize) {
        // During a thread's teardown the counter may be gone: not counted.
        let _ = LIVE.try_with(|live| live.set(live.get() + bytes));
    }

    // SAFETY: every call is passed to the system allocator unchanged.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            add(layout.size() as isize);
            System.alloc(layout)
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            add(-(layout.size() as isize));
            System.dealloc(ptr, layout)
        }
        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            add(layout.size() as isize);
            System.alloc_zeroed(layout)
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            add(new_size as isize - layout.size() as isize);
            System.realloc(ptr, layout, new_size)
        }
    }

    #[global_allocator]
    static COUNTING: Counting = Counting;

    /// The bytes this thread holds (allocated less freed, by this thread).
    pub fn live() -> isize {
        LIVE.with(Cell::get)
    }
}
