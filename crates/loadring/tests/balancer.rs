//! The Balancer's contract for hashing policies: errors instead of panics.

use loadring::{Balancer, BuildErrorKind, Endpoint, PickError, Request};

fn ep(text: &str) -> Endpoint {
    text.parse().unwrap()
}

#[test]
fn weight_zero_is_a_member_that_is_never_picked() {
    let balancer =
        Balancer::new("c_murmurhash".parse().unwrap(), [ep("a weight=0"), ep("b")]).unwrap();
    for i in 0..2000u32 {
        assert_eq!(
            balancer
                .pick(&Request::code(u64::from(i) * 2_147_483))
                .unwrap()
                .addr(),
            "b"
        );
    }
    assert_eq!(
        balancer.loads().len(),
        2,
        "a weight-0 endpoint is still a member"
    );
}

#[test]
fn every_weight_zero_is_an_error_and_the_old_membership_stays() {
    let err = Balancer::new(
        "c_md5".parse().unwrap(),
        [ep("a weight=0"), ep("b weight=0")],
    )
    .unwrap_err();
    assert_eq!(err.kind(), BuildErrorKind::AllWeightsZero);
    let balancer = Balancer::new("c_md5".parse().unwrap(), [ep("a")]).unwrap();
    assert_eq!(
        balancer.update([ep("a weight=0")]).unwrap_err().kind(),
        BuildErrorKind::AllWeightsZero
    );
    assert_eq!(balancer.endpoints(), [ep("a")]);
}

#[test]
fn codes_beyond_32_bits_are_errors_not_truncated() {
    let balancer = Balancer::new("c_murmurhash".parse().unwrap(), [ep("a")]).unwrap();
    assert!(balancer.pick(&Request::code(u64::from(u32::MAX))).is_ok());
    let err = balancer.pick(&Request::code(1 << 32)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "request code 4294967296 is out of range for c_murmurhash: accepted 0..=4294967295"
    );
}

#[test]
fn hashing_needs_a_key_and_an_empty_balancer_has_no_endpoints() {
    let balancer = Balancer::new("c_ketama".parse().unwrap(), [ep("a")]).unwrap();
    assert_eq!(
        balancer.pick(&Request::new()).unwrap_err(),
        PickError::missing_key("c_ketama")
    );
    let empty = Balancer::new("c_ketama".parse().unwrap(), []).unwrap();
    assert_eq!(
        empty.pick(&Request::key("k")).unwrap_err(),
        PickError::no_endpoints()
    );
}

#[test]
fn excluded_endpoints_are_skipped_clockwise() {
    let endpoints = [ep("10.0.0.1:80"), ep("10.0.0.2:80"), ep("10.0.0.3:80")];
    let balancer = Balancer::new("c_murmurhash".parse().unwrap(), endpoints).unwrap();
    let first = balancer
        .pick(&Request::key("k"))
        .unwrap()
        .addr()
        .to_string();
    let tried = [first.as_str()];
    let second = balancer
        .pick(&Request::key("k").excluding(&tried))
        .unwrap()
        .addr()
        .to_string();
    assert_ne!(first, second);
    // The same successor as the plain ring without the first endpoint.
    balancer
        .update(
            [ep("10.0.0.1:80"), ep("10.0.0.2:80"), ep("10.0.0.3:80")]
                .into_iter()
                .filter(|e| e.addr() != first),
        )
        .unwrap();
    assert_eq!(balancer.pick(&Request::key("k")).unwrap().addr(), second);
    let all = ["10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80"];
    assert_eq!(
        balancer
            .pick(&Request::key("k").excluding(&all))
            .unwrap_err(),
        PickError::no_eligible_endpoint(2)
    );
}

#[test]
fn conflicting_endpoints_are_rejected() {
    let err = Balancer::new("c_md5".parse().unwrap(), [ep("a"), ep("a weight=2")]).unwrap_err();
    assert!(
        err.to_string()
            .contains("`a` is given twice with different attributes"),
        "{err}"
    );
}
