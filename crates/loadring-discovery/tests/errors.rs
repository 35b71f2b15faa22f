//! The crate's error: a kind a program can match and the source at fault,
//! beside the one line for people.

use std::time::Duration;

use loadring_discovery::{etcd, DiscoveryErrorKind, SourceSpec};

#[tokio::test]
async fn a_lease_under_a_second_is_a_register_error_naming_the_ttl() {
    let Ok(SourceSpec::Etcd(target)) = "etcd://127.0.0.1:9/services/api".parse() else {
        panic!("an etcd spec")
    };
    let endpoint = "10.0.0.1:80".parse().unwrap();
    let err = etcd::register(&target, &endpoint, Duration::from_millis(0), async {})
        .await
        .unwrap_err();
    assert_eq!(err.kind(), DiscoveryErrorKind::Register);
    assert_eq!(err.spec(), None);
    assert_eq!(
        err.to_string(),
        "--ttl 0ns: an etcd lease lasts at least 1s"
    );
}

#[test]
fn a_bad_spec_is_a_spec_error_with_its_text() {
    let err = "dns://api.test".parse::<SourceSpec>().unwrap_err();
    assert_eq!(err.kind(), DiscoveryErrorKind::Spec);
    assert_eq!(err.spec(), Some("dns://api.test"));
    assert!(err.to_string().starts_with("`dns://api.test`: "), "{err}");
}

/// A TTL past etcd's longest lease is refused up front: `Duration::MAX`
/// rounded up to whole seconds overflowed (a panic in a debug build).
#[tokio::test]
async fn a_lease_past_etcds_longest_is_a_register_error_naming_the_range() {
    let Ok(SourceSpec::Etcd(target)) = "etcd://127.0.0.1:9/services/api".parse() else {
        panic!("an etcd spec")
    };
    let endpoint = "10.0.0.1:80".parse().unwrap();
    for ttl in [Duration::MAX, etcd::MAX_TTL + Duration::from_nanos(1)] {
        let err = etcd::register(&target, &endpoint, ttl, async {})
            .await
            .unwrap_err();
        assert_eq!(err.kind(), DiscoveryErrorKind::Register);
        let message = err.to_string();
        assert!(
            message.ends_with(
                ": an etcd lease lasts at most 9000000000s (accepted: 1s..=9000000000s)"
            ),
            "{message}"
        );
    }
}
