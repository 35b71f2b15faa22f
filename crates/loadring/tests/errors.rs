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
