//! Reference placements: every row of every vector file in `tests/data/` must
//! come back from the balancer as recorded (brpc, Envoy, libketama, and
//! libmemcached observed on live memcached servers, Apache Dubbo,
//! dubbo-go-pixiu).

use std::path::Path;

use loadring::{Balancer, Endpoint, PolicySpec, Request};

struct Vectors {
    policy: String,
    endpoints: Vec<String>,
    codes: bool,
    rows: Vec<(String, String)>,
}

fn load(name: &str) -> Vectors {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut v = Vectors {
        policy: String::new(),
        endpoints: Vec::new(),
        codes: false,
        rows: Vec::new(),
    };
    for line in text.lines() {
        if let Some(p) = line.strip_prefix("# policy: ") {
            v.policy = p.to_string();
        } else if let Some(e) = line.strip_prefix("# endpoint: ") {
            v.endpoints.push(e.to_string());
        } else if let Some(m) = line.strip_prefix("# input: ") {
            v.codes = m == "codes";
        } else if !line.starts_with('#') && !line.is_empty() {
            let (input, want) = line.split_once('\t').expect("input<TAB>endpoint");
            v.rows.push((input.to_string(), want.to_string()));
        }
    }
    assert!(
        !v.policy.is_empty() && !v.endpoints.is_empty() && !v.rows.is_empty(),
        "{name} is incomplete"
    );
    v
}

/// Every row through each way the library answers "where does this go":
/// the shared pick, a local handle's pick, the route without a reservation,
/// and the first candidate of the retry order.
fn check(name: &str) {
    let v = load(name);
    let spec: PolicySpec = v.policy.parse().unwrap_or_else(|e| panic!("{name}: {e}"));
    let endpoints: Vec<Endpoint> = v.endpoints.iter().map(|e| e.parse().unwrap()).collect();
    let balancer = Balancer::new(spec, endpoints).unwrap_or_else(|e| panic!("{name}: {e}"));
    let local = balancer.local();
    let mut wrong = Vec::new();
    for (input, want) in &v.rows {
        let req = if v.codes {
            Request::code(input.parse().unwrap())
        } else {
            Request::key(input.as_str())
        };
        let pick = balancer
            .pick(&req)
            .unwrap_or_else(|e| panic!("{name}: {input}: pick: {e}"));
        let local_pick = local
            .pick(&req)
            .unwrap_or_else(|e| panic!("{name}: {input}: local pick: {e}"));
        let route = balancer
            .route(&req)
            .unwrap_or_else(|e| panic!("{name}: {input}: route: {e}"))
            .expect("a hashing policy routes");
        let first = balancer
            .candidates(&req)
            .unwrap_or_else(|e| panic!("{name}: {input}: candidates: {e}"))
            .next()
            .expect("a first candidate");
        for (path, got) in [
            ("pick", pick.addr()),
            ("local pick", local_pick.addr()),
            ("route", route.addr()),
            ("first candidate", first.addr()),
        ] {
            if got != want {
                wrong.push(format!("{input} -> {got} by {path} (want {want})"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{name}: {} of {} answers differ, first: {:?}",
        wrong.len(),
        4 * v.rows.len(),
        &wrong[..wrong.len().min(5)]
    );
    drop(local);
    assert_eq!(balancer.total_in_flight(), 0);
}

#[test]
fn brpc_c_murmurhash_codes() {
    check("brpc_c_murmurhash_3servers.tsv");
}

#[test]
fn brpc_c_murmurhash_keys() {
    check("brpc_c_murmurhash_keys.tsv");
}

#[test]
fn brpc_c_md5_codes() {
    check("brpc_c_md5_3servers.tsv");
}

#[test]
fn brpc_c_ketama_codes() {
    check("brpc_c_ketama_3servers.tsv");
}

#[test]
fn libketama_servers_keys() {
    check("libketama_servers.tsv");
}

#[test]
fn libmemcached_live_ketama_unweighted() {
    check("libmemcached_live_A_ketama_w111.tsv");
}

#[test]
fn libmemcached_live_ketama_weighted_equal() {
    check("libmemcached_live_C_ketama_weighted_w111.tsv");
}

#[test]
fn libmemcached_live_ketama_weighted_123() {
    check("libmemcached_live_D_ketama_weighted_w123.tsv");
}

#[test]
fn envoy_ring_hash_basic() {
    check("envoy_ring_hash_basic.tsv");
}

#[test]
fn envoy_ring_hash_weighted_tiny() {
    check("envoy_ring_hash_weighted_tiny.tsv");
}

#[test]
fn envoy_maglev_basic() {
    check("envoy_maglev_basic.tsv");
}

#[test]
fn envoy_maglev_names() {
    check("envoy_maglev_names.tsv");
}

#[test]
fn envoy_maglev_weighted() {
    check("envoy_maglev_weighted.tsv");
}

#[test]
fn envoy_maglev_32hosts() {
    check("envoy_maglev_32hosts.tsv");
}

#[test]
fn nginx_live_consistent() {
    check("nginx_live_N1_consistent_3srv.tsv");
}

#[test]
fn nginx_live_modulo() {
    check("nginx_live_N4_modulo_3srv.tsv");
}

#[test]
fn haproxy_live_consistent_sdbm_avalanche() {
    check("haproxy_live_H1_consistent_3srv.tsv");
}

#[test]
fn haproxy_live_consistent_djb2() {
    check("haproxy_live_H3_consistent_djb2_5srv.tsv");
}

#[test]
fn haproxy_live_map_based() {
    check("haproxy_live_H6_map_3srv.tsv");
}

#[test]
fn twemproxy_live_ketama_fnv1a_64() {
    check("twemproxy_live_T1_ketama_fnv1a64_3.tsv");
}

#[test]
fn twemproxy_live_ketama_md5() {
    check("twemproxy_live_T3_ketama_md5_3.tsv");
}

#[test]
fn twemproxy_live_ketama_one_at_a_time() {
    check("twemproxy_live_T4_ketama_one_at_a_time_4.tsv");
}

#[test]
fn twemproxy_live_ketama_named_servers() {
    check("twemproxy_live_T8_ketama_fnv1a64_named.tsv");
}

#[test]
fn twemproxy_live_ketama_hash_tag() {
    check("twemproxy_live_T9_ketama_fnv1a64_hashtag.tsv");
}

#[test]
fn twemproxy_live_modula_md5() {
    check("twemproxy_live_T11_modula_md5_3.tsv");
}

#[test]
fn dubbo_consistent_hash_keys() {
    check("dubbo_3.tsv");
}

#[test]
fn pixiu_ring_hash_keys() {
    check("pixiu_ring_4.tsv");
}
