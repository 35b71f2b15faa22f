//! Bounded load on memcached's ketama continua: every variant takes
//! `load_factor=` / `balance=`, and no endpoint ever goes past its cap.

use loadring::{Balancer, Endpoint, Pick, Request};

/// `ceil(num/den * (total + 1) * w / W)` in integers (design.md).
fn cap(num: u128, den: u128, total: u64, w: u32, weight_sum: u64) -> u64 {
    let top = num * (u128::from(total) + 1) * u128::from(w);
    let bottom = den * u128::from(weight_sum);
    top.div_ceil(bottom) as u64
}

fn endpoints() -> Vec<Endpoint> {
    [
        "10.0.0.1:11211 weight=1",
        "10.0.0.2:11211 weight=2",
        "10.0.0.3:11212 weight=3",
        "cache4 weight=1",
        "[::1]:11211 weight=1",
    ]
    .iter()
    .map(|e| e.parse().unwrap())
    .collect()
}

#[test]
fn caps_hold_on_every_variant() {
    let cases = [
        ("ketama:load_factor=1.25", 125, 100),
        ("ketama:compat=libketama balance=150", 150, 100),
        ("ketama:compat=libmemcached_spy load_factor=1.1", 110, 100),
        ("ketama:weighted=false hash=md5 balance=120", 120, 100),
        (
            "ketama:compat=libmemcached_spy weighted=false load_factor=1.05",
            105,
            100,
        ),
    ];
    for (spec, num, den) in cases {
        let balancer = Balancer::new(spec.parse().unwrap(), endpoints()).unwrap();
        let weights: Vec<(String, u32)> = endpoints()
            .iter()
            .map(|e| (e.addr().to_string(), e.weight()))
            .collect();
        let weight_sum: u64 = weights.iter().map(|(_, w)| u64::from(*w)).sum();
        let hot_owner = balancer
            .route(&Request::key("hot"))
            .unwrap()
            .unwrap()
            .addr()
            .to_string();
        let mut held: Vec<Pick> = Vec::new();
        let mut spilled = 0;
        for i in 0..600u32 {
            // Half the requests hit one key; every fifth pick releases an old one.
            let key = if i % 2 == 0 {
                "hot".to_string()
            } else {
                format!("key:{i}")
            };
            let total = balancer.total_in_flight();
            for (addr, w) in &weights {
                assert_eq!(
                    balancer.cap(addr).unwrap(),
                    Some(cap(num, den, total, *w, weight_sum)),
                    "{spec}: cap of {addr} at total {total}"
                );
            }
            let pick = balancer.pick(&Request::key(key.as_str())).unwrap();
            let w = weights.iter().find(|(a, _)| a == pick.addr()).unwrap().1;
            assert!(
                pick.in_flight() <= cap(num, den, total, w, weight_sum),
                "{spec}: {} holds {} > cap {} at total {total}",
                pick.addr(),
                pick.in_flight(),
                cap(num, den, total, w, weight_sum)
            );
            if key == "hot" && pick.addr() != hot_owner {
                spilled += 1;
            }
            held.push(pick);
            if i % 5 == 4 {
                drop(held.remove((i as usize * 7) % held.len()));
            }
        }
        assert!(spilled > 0, "{spec}: the hot key never spilled over");
        drop(held);
        assert_eq!(balancer.total_in_flight(), 0, "{spec}");
    }
}

#[test]
fn unloaded_bounded_picks_are_the_plain_placement() {
    for compat in ["libketama", "libmemcached", "libmemcached_spy"] {
        let plain = Balancer::new(
            format!("ketama:compat={compat}").parse().unwrap(),
            endpoints(),
        )
        .unwrap();
        let bounded = Balancer::new(
            format!("ketama:compat={compat} load_factor=1.25")
                .parse()
                .unwrap(),
            endpoints(),
        )
        .unwrap();
        assert_eq!(plain.cap("cache4").unwrap(), None);
        for i in 0..500 {
            let key = format!("k{i}");
            // Each pick is released at once: the bound never bites.
            let a = plain.pick(&Request::key(key.as_str())).unwrap();
            let b = bounded.pick(&Request::key(key.as_str())).unwrap();
            assert_eq!(a.addr(), b.addr(), "{compat}: {key}");
        }
    }
}

#[test]
fn codes_are_u32() {
    let balancer = Balancer::new("ketama".parse().unwrap(), endpoints()).unwrap();
    assert!(balancer.pick(&Request::code(u64::from(u32::MAX))).is_ok());
    let err = balancer
        .pick(&Request::code(u64::from(u32::MAX) + 1))
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "request code 4294967296 is out of range for ketama: accepted 0..=4294967295"
    );
}

/// An endpoint name ketama cannot read (a port that is no number) fails the
/// build of a balancer with an error naming the endpoint.
#[test]
fn a_bad_endpoint_name_fails_the_build_naming_it() {
    let spec: loadring::PolicySpec = "ketama".parse().unwrap();
    let err = Balancer::new(spec, ["web:abc".parse::<Endpoint>().unwrap()])
        .unwrap_err()
        .to_string();
    assert!(err.contains("endpoint `web:abc`"), "{err}");
}
