//! The core's one error style: every error is an opaque struct whose message
//! is one line, with `kind()` where there are several kinds and accessors
//! for the parts the message quotes.

use loadring::{
    Balancer, Endpoint, Error, ErrorKind, ParseErrorKind, PickError, PickErrorKind, PolicySpec,
    Request,
};

#[test]
fn parse_errors_say_their_kind() {
    let specs = [
        ("", ParseErrorKind::Syntax),
        ("c_md5:replicas", ParseErrorKind::Syntax),
        ("c_md5:replicas=1 replicas=2", ParseErrorKind::Syntax),
        ("rr over c_md5", ParseErrorKind::Syntax),
        ("over rr", ParseErrorKind::Syntax),
        ("round_robbin", ParseErrorKind::UnknownPolicy),
        ("c_md5:foo=1", ParseErrorKind::UnknownKey),
        ("c_md5:replicas=0", ParseErrorKind::Value),
        ("c_ketama:replicas=10", ParseErrorKind::Value),
        ("maglev:table_size=4", ParseErrorKind::Value),
        ("c_murmurhash_bl:load_factor=0.5", ParseErrorKind::Value),
        (
            "c_murmurhash_bl:report_max_age=never",
            ParseErrorKind::Value,
        ),
        (
            "c_murmurhash:load_factor=1.2 balance=130",
            ParseErrorKind::Conflict,
        ),
        ("rr:load_factor=1.2", ParseErrorKind::Conflict),
        ("c_murmurhash:slow_start=10s", ParseErrorKind::Conflict),
        ("c_murmurhash:report_max_age=1s", ParseErrorKind::Conflict),
        (
            "ring_hash:min_ring_size=9 max_ring_size=8",
            ParseErrorKind::Conflict,
        ),
    ];
    for (text, kind) in specs {
        let err = text.parse::<PolicySpec>().unwrap_err();
        assert_eq!(err.kind(), kind, "{text:?}: {err}");
        assert!(!err.to_string().contains('\n'), "{err}");
    }
    let endpoints = [
        ("", ParseErrorKind::Syntax),
        ("weight=2", ParseErrorKind::Syntax),
        ("a:1 weight", ParseErrorKind::Syntax),
        ("a:1 color=red", ParseErrorKind::UnknownKey),
        ("a:1 weight=x", ParseErrorKind::Value),
        ("a:1 weight=4294967296", ParseErrorKind::Value),
    ];
    for (text, kind) in endpoints {
        let err = text.parse::<Endpoint>().unwrap_err();
        assert_eq!(err.kind(), kind, "{text:?}: {err}");
    }
    let err = "round_robbin".parse::<PolicySpec>().unwrap_err();
    assert_eq!(err.value(), Some("round_robbin"));
}

/// Each kind of pick error, its accessors, and its message as it has always
/// read.
#[test]
fn pick_errors_say_their_kind_and_figures() {
    let ring = Balancer::new("c_md5".parse().unwrap(), [Endpoint::new("a:1").unwrap()]).unwrap();
    let err = ring.pick(&Request::new()).unwrap_err();
    assert_eq!(err.kind(), PickErrorKind::MissingKey);
    assert_eq!(
        (err.policy(), err.members(), err.code()),
        (Some("c_md5"), None, None)
    );
    assert_eq!(
        err.to_string(),
        "c_md5 places requests by hash: give the request a key or a code"
    );

    let err = ring.pick(&Request::code(1 << 32)).unwrap_err();
    assert_eq!(err.kind(), PickErrorKind::CodeOutOfRange);
    assert_eq!(err.code(), Some(1 << 32));
    assert_eq!(err.max_code(), Some(u64::from(u32::MAX)));
    assert_eq!(err.policy(), Some("c_md5"));
    assert_eq!(
        err.to_string(),
        "request code 4294967296 is out of range for c_md5: accepted 0..=4294967295"
    );

    ring.set_healthy("a:1", false).unwrap();
    let err = ring.pick(&Request::key("k")).unwrap_err();
    assert_eq!(err.kind(), PickErrorKind::NoEligibleEndpoint);
    assert_eq!(
        (err.members(), err.policy(), err.code()),
        (Some(1), None, None)
    );
    assert_eq!(
        err.to_string(),
        "no eligible endpoint: all 1 endpoints are unhealthy or excluded"
    );
    assert_eq!(err, PickError::no_eligible_endpoint(1));

    ring.remove("a:1").unwrap();
    let err = ring.pick(&Request::key("k")).unwrap_err();
    assert_eq!(err.kind(), PickErrorKind::NoEndpoints);
    assert_eq!((err.members(), err.max_code()), (None, None));
    assert_eq!(err.to_string(), "no endpoints");
}

/// `Error` holds any of them: its message is theirs, its kind the stage.
#[test]
fn any_error_says_its_stage() {
    let balancer = Balancer::new("rr".parse().unwrap(), [Endpoint::new("a:1").unwrap()]).unwrap();

    let err = balancer.remove("b:1").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::UnknownEndpoint);
    let unknown = err.as_unknown_endpoint().unwrap();
    assert_eq!(unknown.id(), "b:1");
    assert_eq!(err.to_string(), "unknown endpoint `b:1`");
    assert!(err.as_parse().is_none() && err.as_build().is_none() && err.as_pick().is_none());

    let err = balancer.set_weight("a:1", 0).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Build);
    assert_eq!(err.to_string(), err.as_build().unwrap().to_string());

    let err: Error = "c_md5:replicas=0".parse::<PolicySpec>().unwrap_err().into();
    assert_eq!(err.kind(), ErrorKind::Parse);
    assert_eq!(err.as_parse().unwrap().key(), Some("replicas"));
    assert_eq!(
        err.to_string(),
        "c_md5: replicas=0 is out of range: accepted 1..=8388608"
    );

    let err: Error = PickError::no_endpoints().into();
    assert_eq!(err.kind(), ErrorKind::Pick);
    assert_eq!(err.as_pick(), Some(&PickError::no_endpoints()));
    assert_eq!(err.to_string(), "no endpoints");
}

/// The policy a spec builds, as its `Debug` shows it: two specs that
/// differ only in how a value is written build the same policy.
fn built(text: &str) -> String {
    let spec: PolicySpec = text.parse().unwrap_or_else(|e| panic!("{text:?}: {e}"));
    format!("{:?}", spec.policy())
}

/// Names, `over`, booleans and choices are read in any ASCII case, each
/// value as its lower-case spelling; a value that is none of them is refused
/// with the accepted values.
#[test]
fn booleans_and_choices_take_any_case_as_names_do() {
    for (any_case, lower) in [
        ("nginx_hash:consistent=TRUE", "nginx_hash:consistent=true"),
        ("nginx_hash:consistent=False", "nginx_hash:consistent=false"),
        (
            "ketama:compat=LIBMEMCACHED weighted=FALSE hash=MD5",
            "ketama:compat=libmemcached weighted=false hash=md5",
        ),
        (
            "haproxy_hash:type=Consistent avalanche=False",
            "haproxy_hash:type=consistent avalanche=false",
        ),
        ("p2c:load=PEAK_EWMA", "p2c:load=peak_ewma"),
        (
            "twemproxy:distribution=MODULA hash=FNV1A_64",
            "twemproxy:distribution=modula hash=fnv1a_64",
        ),
    ] {
        assert_eq!(built(any_case), built(lower), "{any_case}");
    }
    let share: PolicySpec = "c_murmurhash_bl:report_rule=SHARE".parse().unwrap();
    assert!(share.report_share());
    let view: PolicySpec = "c_murmurhash_bl:report_rule=View".parse().unwrap();
    assert!(!view.report_share());

    let err = "nginx_hash:consistent=yes"
        .parse::<PolicySpec>()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "nginx_hash: consistent=yes: accepted true or false"
    );
    assert_eq!(err.accepted(), Some("true or false"));
    assert_eq!(err.value(), Some("yes"));
    let err = "c_murmurhash_bl:report_rule=all"
        .parse::<PolicySpec>()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "c_murmurhash_bl: report_rule=all is not a rule: accepted view or share"
    );
    assert_eq!(err.accepted(), Some("view or share"));
}

/// The canonical text (`as_str`, `Display`: what the command line prints and
/// the proxy reports) is one line: any run of white space the parser takes
/// as a separator is one space, `NAME:key=value key=value`, ` over `
/// between policies; names and values stay as written.
#[test]
fn the_canonical_text_is_one_clean_line() {
    for (input, text) in [
        (
            "c_md5:replicas=10\nload_factor=1.5",
            "c_md5:replicas=10 load_factor=1.5",
        ),
        (
            "c_murmurhash:replicas=10\t\tload_factor=1.5\r\n",
            "c_murmurhash:replicas=10 load_factor=1.5",
        ),
        ("zone_first\tover\nrr", "zone_first over rr"),
        ("c_md5:\u{85}replicas=5", "c_md5:replicas=5"),
        ("c_md5:\u{c}replicas=5\u{b}", "c_md5:replicas=5"),
        (
            "zone_first:min_endpoints=2\u{a0}OVER  C_MD5: replicas=8\u{2003}balance=125",
            "zone_first:min_endpoints=2 over C_MD5:replicas=8 balance=125",
        ),
        ("rr:\n", "rr"),
        (
            "local_first over\u{2028}zone_first over\u{3000}rr",
            "local_first over zone_first over rr",
        ),
    ] {
        let spec: PolicySpec = input.parse().unwrap();
        assert_eq!(spec.as_str(), text, "{input:?}");
        assert_eq!(spec.to_string(), text, "{input:?}");
        assert_eq!(text.parse::<PolicySpec>().unwrap(), spec, "{input:?}");
    }
    let spec: PolicySpec = "zone_first over\tc_md5:replicas=8\nbalance=125"
        .parse()
        .unwrap();
    assert_eq!(
        spec.inner().map(PolicySpec::as_str),
        Some("c_md5:replicas=8 balance=125")
    );
}

/// Maglev's table size is a prime from 2 (the smallest prime) to 5000011
/// (Envoy's `lte`, itself prime): every error about it says so, in its
/// message and in `accepted()`.
#[test]
fn every_maglev_table_size_error_says_a_prime_from_2_to_5000011() {
    for (value, why) in [
        ("1", "is out of range"),
        ("0", "is out of range"),
        ("4", "is not prime"),
        ("65536", "is not prime"),
        ("5000077", "is out of range"),
        ("-7", "is negative"),
        ("x", "is not a whole number"),
        ("", "is empty"),
    ] {
        let err = format!("maglev:table_size={value}")
            .parse::<PolicySpec>()
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "maglev: table_size={value} {why}: accepted a prime from 2 to 5000011 \
                 (e.g. 65537, 131071, 655373)"
            )
        );
        assert_eq!(err.kind(), ParseErrorKind::Value);
        assert_eq!(err.policy(), Some("maglev"));
        assert_eq!(err.key(), Some("table_size"));
        assert_eq!(err.value(), Some(value));
        assert_eq!(err.accepted(), Some("a prime from 2 to 5000011"));
    }
    for size in ["2", "5000011", "65537"] {
        format!("maglev:table_size={size}")
            .parse::<PolicySpec>()
            .unwrap();
    }

    // A table smaller than the pool: the primes from the first large enough.
    let err = loadring::maglev::MaglevTable::build([("a", 1), ("b", 1), ("c", 1), ("d", 1)], 3)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "maglev: table_size=3 is smaller than the 4 endpoints of weight >= 1, \
         which need a slot each: accepted a prime from 5 to 5000011"
    );
    assert_eq!(err.policy(), Some("maglev"));
    assert_eq!(err.key(), Some("table_size"));
    assert_eq!(err.value(), Some("3"));
    assert_eq!(err.accepted(), Some("a prime from 5 to 5000011"));
    let err = loadring::maglev::MaglevTable::build([("a", 1)], 9).unwrap_err();
    assert_eq!(
        err.to_string(),
        "maglev: table_size=9: accepted a prime from 2 to 5000011"
    );
    assert_eq!(err.accepted(), Some("a prime from 2 to 5000011"));
}

/// Every whole number and decimal of a spec follows one rule: ASCII digits
/// (and one `.` in a decimal), leading zeros ignored; no sign, space, `_`,
/// exponent, `0x` or other digits. The error echoes the value and gives the
/// range.
#[test]
fn every_numeric_parameter_reads_numbers_alike() {
    // Leading zeros are ignored, whatever the parameter.
    for (zeros, plain) in [
        ("c_md5:replicas=000000000160", "c_md5:replicas=160"),
        ("c_md5:balance=00000125", "c_md5:balance=125"),
        ("c_md5:balance=0000000000000000000125", "c_md5:balance=125"),
        ("c_md5:load_factor=00001.5", "c_md5:load_factor=1.5"),
        (
            "c_md5:load_factor=0000000000000000000001.25",
            "c_md5:load_factor=1.25",
        ),
        (
            "maglev:hash_balance_factor=00000150",
            "maglev:hash_balance_factor=150",
        ),
        ("random:seed=000000000000000000000000007", "random:seed=7"),
        ("p2c:choices=0003", "p2c:choices=3"),
        (
            "local_first:local_share=00000000080",
            "local_first:local_share=80",
        ),
    ] {
        assert_eq!(built(zeros), built(plain), "{zeros}");
    }
    let hash_balance: PolicySpec = "ring_hash:hash_balance_factor=00000150".parse().unwrap();
    assert_eq!(hash_balance.hash_balance_factor(), Some(150));

    // The same spellings are refused everywhere, naming the value and the range.
    let params = [
        ("c_md5", "replicas", "1..=8388608"),
        ("random", "seed", "0..=18446744073709551615"),
        ("maglev", "table_size", "a prime from 2 to 5000011"),
        ("c_md5", "balance", "an integer percent from 101 to 100000"),
        (
            "c_md5",
            "load_factor",
            "a decimal number greater than 1 and at most 1000 with at most 6 decimals",
        ),
        (
            "maglev",
            "hash_balance_factor",
            "an integer percent from 100 to 100000",
        ),
    ];
    for (policy, key, accepted) in params {
        for bad in [
            "+5", "5_000", "0x10", "1e3", "\u{0665}", "\u{ff15}", "-5", "5s",
        ] {
            let text = format!("{policy}:{key}={bad}");
            let err = text.parse::<PolicySpec>().unwrap_err();
            let message = err.to_string();
            assert_eq!(err.kind(), ParseErrorKind::Value, "{text}: {message}");
            assert_eq!(err.key(), Some(key), "{text}");
            assert_eq!(err.value(), Some(bad), "{text}");
            assert_eq!(err.accepted(), Some(accepted), "{text}");
            assert!(
                message.contains(&format!("{key}={bad}")) && message.contains(accepted),
                "{text}: {message}"
            );
        }
    }
}

/// A lone or non-numeric `-` is no negative number (cargo-mutants: the
/// check that digits follow the sign went unseen).
#[test]
fn only_a_sign_and_digits_are_negative() {
    for (value, why) in [
        ("-5", "is negative"),
        ("-", "is not a whole number"),
        ("-x", "is not a whole number"),
        ("-5x", "is not a whole number"),
    ] {
        let err = format!("c_md5:replicas={value}")
            .parse::<PolicySpec>()
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("c_md5: replicas={value} {why}: accepted 1..=8388608"),
            "{value}"
        );
    }
}

/// Four policies joined by `over` are the most accepted: the fourth is not
/// refused for the count (cargo-mutants: `>` against `>=` went unseen).
#[test]
fn four_policies_joined_by_over_are_not_too_many() {
    let four = "local_first over zone_first over local_first over rr";
    let spec: PolicySpec = four.parse().unwrap();
    assert_eq!(spec.as_str(), four);
    let five = format!("zone_first over {four}");
    let err = five.parse::<PolicySpec>().unwrap_err();
    assert!(
        err.to_string()
            .ends_with("5 policies joined by `over`: accepted at most 4"),
        "{err}"
    );
}

/// Specifications are equal when their canonical texts are, and only then.
#[test]
fn specs_differ_when_their_canonical_texts_do() {
    let spec = |text: &str| text.parse::<PolicySpec>().unwrap();
    assert_eq!(spec("c_md5:replicas=8"), spec("c_md5:\treplicas=8\n"));
    assert_eq!(spec("MAGLEV"), spec("MAGLEV"));
    assert_ne!(spec("c_md5:replicas=8"), spec("c_md5:replicas=9"));
    assert_ne!(spec("rr"), spec("random"));
    assert_ne!(spec("zone_first over rr"), spec("zone_first over random"));
}

/// `with` refuses each bad key or value on its own (cargo-mutants: the
/// checks joined by `&&` instead of `||` went unseen).
#[test]
fn with_refuses_each_bad_key_or_value() {
    let spec: PolicySpec = "c_md5".parse().unwrap();
    assert_eq!(
        spec.with("replicas", 8).unwrap().as_str(),
        "c_md5:replicas=8"
    );
    for (key, value) in [
        ("", "8"),
        ("replicas", ""),
        ("a=b", "8"),
        ("replicas", "8=9"),
        ("repl:icas", "8"),
        ("replicas", "8:9"),
        ("replicas", "8 9"),
        ("rep licas", "8"),
        ("replicas", "8\t"),
    ] {
        let err = spec.with(key, value).unwrap_err();
        assert_eq!(err.kind(), ParseErrorKind::Syntax, "{key:?}={value:?}");
    }
}

/// A policy's bound and c_ketama's replicas are named with the policy, as
/// every other parameter's error is.
#[test]
fn bound_and_replica_errors_begin_with_the_policy() {
    for (text, message) in [
        (
            "c_md5:load_factor=1",
            "c_md5: load_factor=1: expected a decimal number greater than 1 and at most 1000 \
             with at most 6 decimals, e.g. load_factor=1.25",
        ),
        (
            "C_MD5:balance=100",
            "C_MD5: balance=100: expected an integer percent from 101 to 100000, e.g. balance=125",
        ),
        (
            "c_ketama:replicas=101",
            "c_ketama: replicas=101: c_ketama takes four points per MD5 digest, so replicas \
             must be a multiple of 4",
        ),
    ] {
        let err = text.parse::<PolicySpec>().unwrap_err();
        assert_eq!(err.to_string(), message, "{text}");
        assert_eq!(err.kind(), ParseErrorKind::Value, "{text}");
        assert_eq!(
            err.policy(),
            Some(
                text.split(':')
                    .next()
                    .unwrap()
                    .to_ascii_lowercase()
                    .as_str()
            )
        );
    }
}
