//! `ConfigError::kind()`: each kind produced by a real bad configuration,
//! read as a user writes it (a TOML file, `ClusterConfig` filled in code)
//! or found when the proxy starts (TLS material), never by building the
//! error by hand. The messages themselves are checked where they are made
//! (the config module's tests, the CLI's).

use std::path::Path;

use loadring_proxy::{
    ClusterConfig, ConfigError, ConfigErrorKind, Naming, Proxy, ProxyConfig, ProxyErrorKind,
    TlsFiles,
};

/// A valid file: one `rr` cluster over one endpoint.
const GOOD: &str = "listen = \"127.0.0.1:8080\"\n\
                    [[cluster]]\n\
                    policy = \"rr\"\n\
                    endpoints = [\"127.0.0.1:9001\"]\n";

fn error_of(text: &str) -> ConfigError {
    match ProxyConfig::from_toml(text, Path::new(".")) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => {
            assert!(!e.to_string().contains('\n'), "{e}");
            e
        }
    }
}

/// `GOOD` with `line` added to its cluster.
fn cluster_with(line: &str) -> String {
    format!("{GOOD}{line}\n")
}

/// Each case: the kind, the setting named, the text.
fn check(cases: &[(ConfigErrorKind, Option<&str>, String)]) {
    for (kind, setting, text) in cases {
        let err = error_of(text);
        assert_eq!(err.kind(), *kind, "{err}");
        assert_eq!(err.setting(), *setting, "{err}");
    }
}

#[test]
fn the_good_config_reads() {
    ProxyConfig::from_toml(GOOD, Path::new(".")).unwrap();
}

#[test]
fn an_unreadable_file_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let err = ProxyConfig::from_file(&dir.path().join("absent.toml")).unwrap_err();
    assert_eq!(err.kind(), ConfigErrorKind::Read, "{err}");
    assert_eq!(err.setting(), Some("--config"));

    // An endpoints file the config names.
    let config = dir.path().join("lr.toml");
    std::fs::write(
        &config,
        "listen = \"127.0.0.1:8080\"\n[[cluster]]\npolicy = \"rr\"\nendpoints_file = \"gone.txt\"\n",
    )
    .unwrap();
    let err = ProxyConfig::from_file(&config).unwrap_err();
    assert_eq!(err.kind(), ConfigErrorKind::Read, "{err}");
    assert_eq!(err.setting(), Some("endpoints_file"));
}

#[test]
fn toml_that_does_not_parse_or_a_value_of_the_wrong_type_is_syntax() {
    check(&[
        (
            ConfigErrorKind::Syntax,
            None,
            GOOD.replace("\"127.0.0.1:8080\"", "127.0.0.1:8080"),
        ),
        (
            ConfigErrorKind::Syntax,
            None,
            cluster_with("retries = \"x\""),
        ),
        (ConfigErrorKind::Syntax, None, cluster_with("retries = 2.5")),
        (
            ConfigErrorKind::Syntax,
            None,
            cluster_with("retries = 184467440737095516160000000000000000000000"),
        ),
    ]);
}

#[test]
fn a_key_the_config_does_not_have_is_unknown_and_named() {
    check(&[
        (
            ConfigErrorKind::UnknownKey,
            Some("retry"),
            cluster_with("retry = 1"),
        ),
        (
            ConfigErrorKind::UnknownKey,
            Some("lisen"),
            format!("lisen = \"x\"\n{GOOD}"),
        ),
    ]);
}

#[test]
fn a_required_value_absent_is_missing() {
    check(&[
        (
            ConfigErrorKind::Missing,
            Some("listen"),
            GOOD.replace("listen = \"127.0.0.1:8080\"\n", ""),
        ),
        (
            ConfigErrorKind::Missing,
            Some("policy"),
            GOOD.replace("policy = \"rr\"\n", ""),
        ),
        (
            ConfigErrorKind::Missing,
            None,
            "listen = \"127.0.0.1:8080\"\n".to_string(),
        ),
        (
            ConfigErrorKind::Missing,
            Some("endpoints"),
            GOOD.replace("endpoints = [\"127.0.0.1:9001\"]\n", ""),
        ),
        (
            ConfigErrorKind::Missing,
            Some("key"),
            GOOD.replace("\"rr\"", "\"c_murmurhash\""),
        ),
        (
            ConfigErrorKind::Missing,
            Some("tls_cert"),
            format!("tls_cert = \"gw.crt\"\n{GOOD}"),
        ),
    ]);
}

#[test]
fn a_value_not_of_the_accepted_form_is_value() {
    check(&[
        (
            ConfigErrorKind::Value,
            Some("health_interval"),
            cluster_with("health_path = \"/healthz\"\nhealth_interval = \"fast\""),
        ),
        (
            ConfigErrorKind::Value,
            Some("endpoints"),
            GOOD.replace("127.0.0.1:9001", "localhost"),
        ),
        (
            ConfigErrorKind::Value,
            Some("key"),
            GOOD.replace("\"rr\"", "\"c_murmurhash\"") + "key = \"head:x\"\n",
        ),
        (
            ConfigErrorKind::Value,
            Some("load_report"),
            cluster_with("load_report = \"json\""),
        ),
        (
            ConfigErrorKind::Value,
            Some("backend_protocol"),
            cluster_with("backend_protocol = \"h3\""),
        ),
        (
            ConfigErrorKind::Value,
            Some("discover"),
            GOOD.replace("endpoints = [\"127.0.0.1:9001\"]", "discover = \"zk://x\""),
        ),
        (
            ConfigErrorKind::Value,
            Some("health_path"),
            cluster_with("health_path = \"healthz\""),
        ),
    ]);
}

#[test]
fn an_endpoints_file_with_a_bad_line_is_value() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("pool.txt"),
        "127.0.0.1:1\nnot an endpoint\n",
    )
    .unwrap();
    let text = "listen = \"127.0.0.1:8080\"\n[[cluster]]\npolicy = \"rr\"\nendpoints_file = \"pool.txt\"\n";
    let err = ProxyConfig::from_toml(text, dir.path()).unwrap_err();
    assert_eq!(err.kind(), ConfigErrorKind::Value, "{err}");
    assert_eq!(err.setting(), Some("endpoints_file"));
}

#[test]
fn a_well_formed_value_outside_its_range_is_range() {
    check(&[
        (
            ConfigErrorKind::Range,
            Some("health_interval"),
            cluster_with("health_path = \"/healthz\"\nhealth_interval = \"25h\""),
        ),
        (
            ConfigErrorKind::Range,
            Some("timeout"),
            cluster_with("timeout = \"0ms\""),
        ),
        (
            ConfigErrorKind::Range,
            Some("retry_buffer"),
            cluster_with("retry_buffer = 16777217"),
        ),
        (
            ConfigErrorKind::Range,
            Some("retry_buffer"),
            cluster_with("retry_buffer = -1"),
        ),
        (
            ConfigErrorKind::Range,
            Some("eject_after"),
            cluster_with("eject_after = 1001"),
        ),
        (
            ConfigErrorKind::Range,
            Some("health_rise"),
            cluster_with("health_path = \"/healthz\"\nhealth_rise = 0"),
        ),
        (
            ConfigErrorKind::Range,
            Some("max_connections"),
            format!("max_connections = 0\n{GOOD}"),
        ),
        (
            ConfigErrorKind::Range,
            Some("max_connections"),
            format!("max_connections = -3\n{GOOD}"),
        ),
        (
            ConfigErrorKind::Range,
            Some("retries"),
            cluster_with("retries = -2"),
        ),
        (
            ConfigErrorKind::Range,
            Some("health_fall"),
            cluster_with("health_path = \"/healthz\"\nhealth_fall = 1001"),
        ),
        (
            ConfigErrorKind::Range,
            Some("name"),
            GOOD.replace(
                "[[cluster]]\n",
                &format!("[[cluster]]\nname = \"{}\"\n", "n".repeat(257)),
            ),
        ),
        (
            ConfigErrorKind::Range,
            Some("cluster"),
            format!("{GOOD}{}", "[[cluster]]\npolicy = \"rr\"\n".repeat(1024)),
        ),
    ]);
}

/// Out-of-range values, wrong types and overflowing numbers in the file:
/// one line naming the key, the value as written and the accepted range.
#[test]
fn numbers_and_durations_in_the_file_are_refused_with_their_range() {
    let cases = [
        (
            cluster_with("retries = -2"),
            "cluster `default`: retries: `-2` is not a count: accepted 0..=4294967295",
        ),
        (
            cluster_with("retries = 18446744073709551616"),
            "cluster `default`: retries: `18446744073709551616` is out of range: accepted \
             0..=4294967295",
        ),
        (
            cluster_with("retries = 184467440737095516160000000000000000000000"),
            "integer number overflowed: `retries` accepts a whole number 0..=4294967295 (line 5, \
             key `retries`)",
        ),
        (
            cluster_with("retries = \"x\""),
            "invalid type: string \"x\", expected a whole number 0..=4294967295 (line 5, key \
             `retries`)",
        ),
        (
            cluster_with("health_path = \"/healthz\"\nhealth_rise = 0"),
            "cluster `default`: health_rise: `0` is out of range: accepted 1..=1000",
        ),
        (
            cluster_with("health_path = \"/healthz\"\nhealth_fall = 4294967295"),
            "cluster `default`: health_fall: `4294967295` is out of range: accepted 1..=1000",
        ),
        (
            cluster_with("health_path = \"/healthz\"\nhealth_fall = 2.0"),
            "invalid type: floating point `2.0`, expected a whole number 1..=1000 (line 6, key \
             `health_fall`)",
        ),
        (
            cluster_with("eject_after = -1"),
            "cluster `default`: eject_after: `-1` is not a count: accepted 0 (never) or 1..=1000",
        ),
        // Durations: as typed, not as read (`0100m` is not `6000s`).
        (
            cluster_with("eject_for = \"0100m\""),
            "cluster `default`: eject_for: `0100m` is out of range: accepted a whole number of \
             ms, s, m or h from 1ms to 1h (e.g. 500ms, 10s, 1m)",
        ),
        (
            cluster_with("timeout = \"0s\""),
            "cluster `default`: timeout: `0s` is out of range: accepted a whole number of ms, s, \
             m or h from 1ms to 24h (e.g. 500ms, 10s, 1m)",
        ),
        (
            cluster_with("timeout = 5"),
            "invalid type: integer `5`, expected a string: `timeout` accepts a duration in \
             quotes, a whole number of ms, s, m or h from 1ms to 24h (e.g. \"500ms\") (line 5, \
             key `timeout`)",
        ),
        (
            format!("drain_timeout = \"25h\"\n{GOOD}"),
            "drain_timeout: `25h` is out of range: accepted a whole number of ms, s, m or h from \
             0ms to 24h (e.g. 500ms, 10s, 1m)",
        ),
    ];
    for (text, message) in cases {
        assert_eq!(error_of(&text).to_string(), message, "{text}");
    }
}

/// `abort_on_close` cancels every request whose client leaves: a limit on
/// those read to their end beside it on every cluster would limit nothing.
#[test]
fn max_abandoned_with_abort_on_close_everywhere_conflicts() {
    let one = format!("max_abandoned = 10\n{GOOD}abort_on_close = true\n");
    let err = error_of(&one);
    assert_eq!(err.kind(), ConfigErrorKind::Conflict);
    assert_eq!(err.setting(), Some("max_abandoned"));
    assert_eq!(
        err.to_string(),
        "max_abandoned with abort_on_close: every request whose client leaves is then \
         cancelled, none is read to its end, so max_abandoned limits nothing: give one or the \
         other"
    );
    let two = format!(
        "{one}[[cluster]]\nname = \"b\"\npolicy = \"rr\"\nendpoints = [\"127.0.0.1:9002\"]\n\
         abort_on_close = true\n[[route]]\npath_prefix = \"/b\"\ncluster = \"b\"\n\
         [[route]]\ncluster = \"default\"\n"
    );
    assert_eq!(
        error_of(&two).to_string(),
        "max_abandoned with abort_on_close on every cluster: every request whose client leaves \
         is then cancelled, none is read to its end, so max_abandoned limits nothing: give one \
         or the other"
    );
    // One cluster that reads abandoned requests to their end: the limit is
    // its.
    let some = two.replacen("abort_on_close = true\n", "", 1);
    ProxyConfig::from_toml(&some, Path::new(".")).unwrap();
    // Without abort_on_close, or without a limit, nothing conflicts.
    ProxyConfig::from_toml(&format!("max_abandoned = 10\n{GOOD}"), Path::new(".")).unwrap();
    ProxyConfig::from_toml(&format!("{GOOD}abort_on_close = true\n"), Path::new(".")).unwrap();
}

/// Clusters, routes and names are bounded, each error naming its limit.
#[test]
fn clusters_routes_and_names_have_limits() {
    let cluster = |i: usize| {
        format!("[[cluster]]\nname = \"c{i}\"\npolicy = \"rr\"\nendpoints = [\"127.0.0.1:9001\"]\n")
    };
    let route = |i: usize| {
        format!(
            "[[route]]\npath_prefix = \"/{i}/\"\ncluster = \"c{}\"\n",
            i % 1024
        )
    };
    let config = |clusters: usize, routes: usize| {
        let mut text = "listen = \"127.0.0.1:8080\"\n".to_string();
        text.extend((0..clusters).map(cluster));
        text.extend((0..routes).map(route));
        text
    };
    ProxyConfig::from_toml(&config(1024, 1024), Path::new(".")).unwrap();
    let err = error_of(&config(1025, 1025));
    assert_eq!(
        err.to_string(),
        "1025 [[cluster]] tables: accepted at most 1024"
    );
    assert_eq!(err.kind(), ConfigErrorKind::Range);
    let err = error_of(&config(1024, 4097));
    assert_eq!(
        err.to_string(),
        "4097 [[route]] tables: accepted at most 4096"
    );
    assert_eq!(err.setting(), Some("route"));

    let named = |name: &str| {
        GOOD.replace(
            "[[cluster]]\n",
            &format!("[[cluster]]\nname = \"{name}\"\n"),
        )
    };
    ProxyConfig::from_toml(&named(&"é".repeat(128)), Path::new(".")).unwrap();
    assert_eq!(
        error_of(&named(&"n".repeat(257))).to_string(),
        format!(
            "name: `{}... (257 characters)` is 257 bytes long: accepted a cluster name of at most \
             256 bytes",
            "n".repeat(40)
        )
    );
}

/// The listen and admin addresses are `HOST:PORT`: an empty one or one
/// without a port is named, not left to the resolver's words.
#[test]
fn listen_and_admin_addresses_are_host_and_port() {
    let accepted = "accepted HOST:PORT (e.g. 127.0.0.1:8080, [::1]:8080, 0.0.0.0:8080 for every \
                    address), the port 0..=65535 (0: any free port)";
    for (listen, why) in [
        ("", "is empty"),
        (" ", "is empty"),
        ("127.0.0.1", "has no port"),
        ("127.0.0.1:", "has no port"),
        ("[::1]", "has no port"),
        ("[::1]:", "has no port"),
        (":8080", "has no host"),
        (
            "127.0.0.1:65536",
            "has a port that is not a number in 0..=65535",
        ),
        (
            "127.0.0.1:+80",
            "has a port that is not a number in 0..=65535",
        ),
        ("::1:8080", "has an IPv6 address without brackets"),
    ] {
        let err = error_of(&GOOD.replace("127.0.0.1:8080", listen));
        assert_eq!(
            err.to_string(),
            format!("listen: `{listen}` {why}: {accepted}")
        );
        assert_eq!(err.kind(), ConfigErrorKind::Value);
        assert_eq!(err.setting(), Some("listen"));
    }
    let err = error_of(&format!("admin = \"\"\n{GOOD}"));
    assert_eq!(err.to_string(), format!("admin: `` is empty: {accepted}"));
    for fine in ["0.0.0.0:0", "[::1]:8080", "localhost:8080"] {
        ProxyConfig::from_toml(&GOOD.replace("127.0.0.1:8080", fine), Path::new(".")).unwrap();
    }
}

#[test]
fn settings_that_do_not_go_together_conflict() {
    let two = format!(
        "{GOOD}[[cluster]]\nname = \"b\"\npolicy = \"rr\"\nendpoints = [\"127.0.0.1:9002\"]\n"
    );
    check(&[
        (
            ConfigErrorKind::Conflict,
            Some("key"),
            cluster_with("key = \"header:x-user\""),
        ),
        (
            ConfigErrorKind::Conflict,
            Some("health_interval"),
            cluster_with("health_interval = \"1s\""),
        ),
        (
            ConfigErrorKind::Conflict,
            Some("health_fall"),
            cluster_with("health_fall = 9"),
        ),
        (
            ConfigErrorKind::Conflict,
            Some("eject_for"),
            cluster_with("eject_after = 0\neject_for = \"1h\""),
        ),
        (
            ConfigErrorKind::Conflict,
            Some("load_report"),
            cluster_with("load_report = \"orca\""),
        ),
        (
            ConfigErrorKind::Conflict,
            Some("discover"),
            cluster_with("discover = \"file:pool.txt\"\nendpoints_file = \"pool.txt\""),
        ),
        (
            ConfigErrorKind::Conflict,
            Some("backend_ca"),
            cluster_with("backend_ca = \"ca.pem\""),
        ),
        (ConfigErrorKind::Conflict, None, two.clone()),
        (
            ConfigErrorKind::Conflict,
            None,
            format!("{two}[[route]]\ncluster = \"nope\"\n"),
        ),
        (
            ConfigErrorKind::Conflict,
            None,
            two.replacen("[[cluster]]\n", "[[cluster]]\nname = \"b\"\n", 1),
        ),
        // A route an earlier one leaves nothing to: never used.
        (
            ConfigErrorKind::Conflict,
            None,
            routes(&two, &[(None, "/", "default"), (None, "/api", "b")]),
        ),
        (
            ConfigErrorKind::Conflict,
            None,
            routes(&two, &[(None, "/x", "b"), (None, "/x", "default")]),
        ),
        (
            ConfigErrorKind::Conflict,
            None,
            routes(
                &two,
                &[(None, "/", "default"), (Some("b.example"), "/", "b")],
            ),
        ),
        (
            ConfigErrorKind::Conflict,
            None,
            routes(
                &two,
                &[
                    (Some("B.example:80"), "/", "b"),
                    (Some("b.example"), "/a", "default"),
                ],
            ),
        ),
    ]);
}

/// `two` with `[[route]]`s of (host, path_prefix, cluster).
fn routes(two: &str, routes: &[(Option<&str>, &str, &str)]) -> String {
    let mut text = two.to_string();
    for (host, prefix, cluster) in routes {
        text.push_str("[[route]]\n");
        if let Some(host) = host {
            text.push_str(&format!("host = \"{host}\"\n"));
        }
        text.push_str(&format!(
            "path_prefix = \"{prefix}\"\ncluster = \"{cluster}\"\n"
        ));
    }
    text
}

#[test]
fn a_route_no_request_could_match_is_a_value_error_saying_why() {
    let two = format!(
        "{GOOD}[[cluster]]\nname = \"b\"\npolicy = \"rr\"\nendpoints = [\"127.0.0.1:9002\"]\n"
    );
    for (host, prefix, why) in [
        (
            Some("*.example.com"),
            "/",
            "a route's host is matched whole, without wildcards",
        ),
        (Some(""), "/", "host is not a host name or address"),
        (Some("a b"), "/", "host is not a host name or address"),
        (None, "/a/../b", "path_prefix has a dot segment"),
        (None, "/./a", "path_prefix has a dot segment"),
        (
            None,
            "/a?x=1",
            "path_prefix has a character no routed path has",
        ),
        (
            None,
            "/a b",
            "path_prefix has a character no routed path has",
        ),
    ] {
        let text = routes(&two, &[(host, prefix, "b"), (None, "/", "default")]);
        let err = error_of(&text);
        assert_eq!(err.kind(), ConfigErrorKind::Value, "{err}");
        assert!(
            err.to_string().starts_with(&format!("route `{prefix}`: "))
                && err.to_string().contains(why),
            "{host:?} {prefix}: {err}"
        );
    }
    for name in ["", " ", "a\\nb"] {
        let err = error_of(&GOOD.replace(
            "[[cluster]]\n",
            &format!("[[cluster]]\nname = \"{name}\"\n"),
        ));
        assert_eq!(err.kind(), ConfigErrorKind::Value, "{err}");
        assert_eq!(err.setting(), Some("name"), "{err}");
    }
    // What may begin a real path is fine: `/.well-known` starts with `/.`.
    let fine = routes(
        &two,
        &[
            (None, "/.", "b"),
            (Some("b.example"), "/", "b"),
            (None, "/", "default"),
        ],
    );
    assert!(ProxyConfig::from_toml(&fine, Path::new(".")).is_ok());
    let err = error_of(&routes(
        &two,
        &[(None, "/", "default"), (None, "/api", "b")],
    ));
    assert_eq!(
        err.to_string(),
        "route `/api` (cluster `b`) is never used: the earlier route `/` (cluster `default`) takes \
         every request it would (the first route that matches wins)"
    );
}

#[test]
fn a_policy_that_does_not_parse_or_cannot_run_is_policy() {
    check(&[
        (
            ConfigErrorKind::Policy,
            Some("policy"),
            GOOD.replace("\"rr\"", "\"nope\""),
        ),
        (
            ConfigErrorKind::Policy,
            Some("policy"),
            GOOD.replace("\"rr\"", "\"c_md5:replicas=0\""),
        ),
    ]);
}

/// TLS material is read when the proxy starts: the error is the proxy's
/// `Config` kind, carrying the configuration error of kind `Tls`.
#[tokio::test]
async fn tls_material_that_cannot_be_used_is_tls() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = ClusterConfig::new("default", "rr".parse().unwrap());
    cluster.endpoints = vec!["127.0.0.1:1".parse().unwrap()];
    let base = crate::running::config(vec![cluster], vec![], Default::default());

    let mut listener = base.clone();
    std::fs::write(dir.path().join("gw.crt"), "not a certificate\n").unwrap();
    listener.tls = Some(TlsFiles {
        cert: dir.path().join("gw.crt"),
        key: dir.path().join("gw.key"),
    });
    let err = Proxy::bind_as(listener, Naming::Flags).await.unwrap_err();
    assert_eq!(err.kind(), ProxyErrorKind::Config, "{err}");
    let config = err.config().expect("the configuration error");
    assert_eq!(config.kind(), ConfigErrorKind::Tls, "{err}");
    assert_eq!(config.setting(), Some("--tls-cert"));
    assert_eq!(config.to_string(), err.to_string());

    let mut backends = base;
    backends.clusters[0].backend_tls = true;
    backends.clusters[0].backend_ca = Some(dir.path().join("absent-ca.pem"));
    let err = Proxy::bind(backends).await.unwrap_err();
    let config = err.config().expect("the configuration error");
    assert_eq!(config.kind(), ConfigErrorKind::Tls, "{err}");
    assert_eq!(config.setting(), Some("backend_ca"));
}
