//! What `Proxy::bind` says when it cannot start: the kind of error and its
//! culprit as accessors, the one-line message unchanged.

use std::time::Duration;

use loadring_proxy::{ClusterConfig, KeySpec, Naming, Proxy, ProxyConfig, ProxyErrorKind};

fn config(listen: &str) -> ProxyConfig {
    let mut cluster = ClusterConfig::new("default", "rr".parse().unwrap());
    cluster.endpoints = vec!["127.0.0.1:1".parse().unwrap()];
    ProxyConfig {
        listen: listen.into(),
        admin: None,
        drain_timeout: Duration::from_secs(1),
        clients: Default::default(),
        clusters: vec![cluster],
        routes: vec![],
        tls: None,
    }
}

#[tokio::test]
async fn an_address_in_use_is_a_bind_error_naming_the_flag_and_address() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let err = Proxy::bind_as(config(&addr), Naming::Flags)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ProxyErrorKind::Bind, "{err}");
    assert_eq!(err.setting(), Some("--listen"));
    assert_eq!(err.addr(), Some(addr.as_str()));
    assert!(err.config().is_none());
    assert!(
        err.to_string().starts_with(&format!("--listen {addr}: ")),
        "{err}"
    );
    assert!(!err.to_string().contains('\n'), "{err}");

    let mut admin = config("127.0.0.1:0");
    admin.admin = Some(addr.clone());
    let err = Proxy::bind(admin).await.unwrap_err();
    assert_eq!(err.kind(), ProxyErrorKind::Bind, "{err}");
    assert_eq!(err.setting(), Some("admin"));
    assert_eq!(err.addr(), Some(addr.as_str()));
}

/// A second proxy on the first one's address is refused, although both
/// listen with `SO_REUSEPORT` (which would have let the kernel share the
/// port between them, the second taking part of the first's clients).
#[tokio::test]
async fn an_address_another_proxy_listens_on_is_a_bind_error() {
    let first = Proxy::bind_workers(config("127.0.0.1:0"), Naming::Flags, 2)
        .await
        .unwrap();
    let addr = first.local_addr().unwrap().to_string();
    for workers in [1, 2] {
        let err = Proxy::bind_workers(config(&addr), Naming::Flags, workers)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ProxyErrorKind::Bind, "{err}");
        assert_eq!(err.addr(), Some(addr.as_str()));
    }
    // Let go, the address is free again.
    drop(first);
    let again = Proxy::bind_workers(config(&addr), Naming::Flags, 2).await;
    assert!(again.is_ok(), "{:?}", again.err());
}

#[tokio::test]
async fn a_bad_config_is_a_config_error_naming_the_setting() {
    let mut bad = config("127.0.0.1:0");
    bad.clusters[0].key = KeySpec::parse(&["header:x-user"]).unwrap();
    let err = Proxy::bind_as(bad, Naming::Flags).await.unwrap_err();
    assert_eq!(err.kind(), ProxyErrorKind::Config, "{err}");
    assert_eq!(err.setting(), Some("--key"));
    assert_eq!(err.addr(), None);
    assert_eq!(
        err.to_string(),
        "--key: policy `rr` does not hash keys: drop --key or pick a hashing policy"
    );
    let config_error = err.config().expect("the configuration error");
    assert_eq!(config_error.to_string(), err.to_string());
    assert_eq!(config_error.setting(), Some("--key"));
}

#[tokio::test]
async fn a_second_cluster_is_named_in_the_message_and_by_its_accessor() {
    let mut two = config("127.0.0.1:0");
    let mut api = ClusterConfig::new("api", "rr".parse().unwrap());
    api.endpoints = vec!["127.0.0.1:1".parse().unwrap()];
    api.health.fall = 0;
    two.clusters.push(api);
    two.routes = vec![loadring_proxy::RouteConfig {
        host: None,
        path_prefix: "/".into(),
        cluster: "api".into(),
    }];
    let err = Proxy::bind(two).await.unwrap_err();
    assert_eq!(err.kind(), ProxyErrorKind::Config, "{err}");
    assert_eq!(err.cluster(), Some("api"));
    assert_eq!(err.setting(), Some("health_fall"));
    assert_eq!(
        err.to_string(),
        "cluster `api`: health_fall: must be at least 1"
    );
}

#[tokio::test]
async fn a_source_that_cannot_start_is_a_discovery_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("absent.txt");
    let mut follows = config("127.0.0.1:0");
    follows.clusters[0].endpoints.clear();
    follows.clusters[0].discover = Some(loadring_discovery_spec(&missing));
    let err = Proxy::bind_as(follows, Naming::Flags).await.unwrap_err();
    assert_eq!(err.kind(), ProxyErrorKind::Discovery, "{err}");
    assert_eq!(err.setting(), Some("--discover"));
    assert!(err.to_string().starts_with("--discover "), "{err}");
    assert!(
        err.to_string().contains(&missing.display().to_string()),
        "{err}"
    );
}

/// `file:PATH`, read as the config file's `discover` would be.
fn loadring_discovery_spec(path: &std::path::Path) -> loadring_discovery::SourceSpec {
    format!("file:{}", path.display()).parse().unwrap()
}
