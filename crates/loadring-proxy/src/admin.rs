//! The admin listener: `GET /` (the live dashboard, see [`crate::dashboard`]),
//! `GET /metrics` (Prometheus text), `GET /status` (JSON: each cluster's
//! policy, key, caps, counters, hash-space shares and endpoints;
//! `?endpoints=N` lists only the N busiest of each cluster) and
//! `GET /history` (JSON: the last five minutes of in-flight counts and
//! spills, see [`crate::history`]).
//!
//! Everything here reads state the request path keeps anyway (the
//! balancer's loads and caps, per-upstream atomics, the layout computed at
//! each membership change): a browser polling the page costs the request
//! path nothing but the balancer snapshot loads any reader makes. The
//! dashboard asks for `/status?endpoints=200`: with a large membership the
//! JSON of the endpoints it does not list is never built.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use loadring::{Endpoint, Layout};
use loadring_discovery::MAX_ENDPOINTS;
use serde_json::{json, Value};

use crate::cluster::Cluster;
use crate::dashboard;
use crate::forward::{local_response, text_body, ProxyBody};
use crate::metrics::Metrics;

const ROUTES: &str = "GET / (dashboard), GET /status, GET /history or GET /metrics";

/// Answers one admin request.
pub fn answer(
    request: &Request<Incoming>,
    clusters: &[Arc<Cluster>],
    metrics: &Metrics,
) -> Response<ProxyBody> {
    let mut response = route(request, clusters, metrics);
    dashboard::secure(response.headers_mut());
    response
}

fn route(
    request: &Request<Incoming>,
    clusters: &[Arc<Cluster>],
    metrics: &Metrics,
) -> Response<ProxyBody> {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return local_response(StatusCode::METHOD_NOT_ALLOWED, ROUTES);
    }
    let path = request.uri().path();
    if let Some(asset) = dashboard::asset(path) {
        return typed(asset.body, asset.content_type);
    }
    match path {
        "/metrics" => typed(
            metrics.render(clusters),
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        ),
        "/history" => typed(
            metrics.history().to_json(clusters).to_string() + "\n",
            "application/json",
        ),
        "/status" => match endpoints_limit(request.uri().query()) {
            Ok(limit) => typed(
                status(clusters, metrics.uptime(), limit).to_string() + "\n",
                "application/json",
            ),
            Err(why) => local_response(StatusCode::BAD_REQUEST, &why),
        },
        _ => local_response(StatusCode::NOT_FOUND, ROUTES),
    }
}

fn typed(body: impl Into<bytes::Bytes>, content_type: &'static str) -> Response<ProxyBody> {
    let mut response = Response::new(text_body(body));
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// The accepted values of `/status?endpoints=`, as its errors give them.
fn accepted() -> String {
    format!("0..={MAX_ENDPOINTS}")
}

/// The most characters of the query an error echoes.
const ECHOED: usize = 64;

fn echo(text: &str) -> String {
    match text.char_indices().nth(ECHOED) {
        Some((at, _)) => format!("{}\u{2026}", &text[..at]),
        None => text.to_string(),
    }
}

/// Reads `/status`'s query: `endpoints=N`, N from 0 to [`MAX_ENDPOINTS`]
/// (decimal digits, no sign), or nothing (`None`: every endpoint). Any
/// other parameter, a value that is not such a count and a second
/// `endpoints` are refused with one line that names the parameter, echoes
/// what was given (at most [`ECHOED`] characters of it, undecoded) and the
/// accepted range.
fn endpoints_limit(query: Option<&str>) -> Result<Option<usize>, String> {
    let mut given: Option<&str> = None;
    let mut limit = None;
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        if name != "endpoints" {
            return Err(format!(
                "{}: not a parameter of /status (`{}`): accepted endpoints={}",
                echo(name),
                echo(pair),
                accepted()
            ));
        }
        if let Some(first) = given {
            return Err(format!(
                "endpoints: given twice (`{}`, then `{}`): accepted once, {}",
                echo(first),
                echo(value),
                accepted()
            ));
        }
        given = Some(value);
        if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!(
                "endpoints: `{}` is not a count: accepted {}",
                echo(value),
                accepted()
            ));
        }
        match value.parse::<usize>() {
            Ok(n) if n <= MAX_ENDPOINTS => limit = Some(n),
            _ => {
                return Err(format!(
                    "endpoints: `{}` is out of range: accepted {}",
                    echo(value),
                    accepted()
                ))
            }
        }
    }
    Ok(limit)
}

/// The status document (docs/proxy.md lists every field). `uptime` is the
/// proxy's age, the time base of the counters' rates. `limit` (`?endpoints=`)
/// lists at most that many endpoints of each cluster, its busiest
/// ([`busiest`]); `None` lists them all. With a single cluster, its
/// `policy`, `key` and `endpoints` are also at the top level.
pub fn status(clusters: &[Arc<Cluster>], uptime: Duration, limit: Option<usize>) -> Value {
    let described: Vec<Value> = clusters.iter().map(|c| describe(c, limit)).collect();
    let mut document = json!({
        "uptime_ms": millis(uptime),
        "clusters": described,
    });
    if let [only] = described.as_slice() {
        for field in ["policy", "key", "endpoints"] {
            document[field] = only[field].clone();
        }
    }
    document
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The positions of the `limit` busiest of `load` (each endpoint's requests
/// in flight and requests, in membership order), in membership order: most
/// in flight first, then most requests, then the first in membership
/// order. Linear on average (a partial selection, not a sort of all).
fn busiest(load: &[(u64, u64)], limit: usize) -> Vec<usize> {
    let n = load.len();
    if limit >= n {
        return (0..n).collect();
    }
    if limit == 0 {
        return Vec::new();
    }
    let mut order: Vec<usize> = (0..n).collect();
    // A total order (the position breaks every tie): the first `limit`
    // after the selection are exactly the busiest.
    order.select_nth_unstable_by(limit - 1, |&a, &b| load[b].cmp(&load[a]).then(a.cmp(&b)));
    order.truncate(limit);
    order.sort_unstable();
    order
}

/// Where each of `wanted` (an endpoint of the snapshot with its position
/// there) is in another list of the membership (`len` long, its `i`-th
/// endpoint `at(i)`): the layout's shares, the reported loads. Both follow
/// membership order, so the same position is tried first; only when a
/// membership change came between the two readings are the names looked
/// up, in a map made once.
fn positions<'a>(
    wanted: &[(usize, &Endpoint)],
    len: usize,
    at: impl Fn(usize) -> &'a Endpoint,
) -> Vec<Option<usize>> {
    let same = |a: &Endpoint, b: &Endpoint| a.addr() == b.addr() && a.tag() == b.tag();
    let mut by_name: Option<HashMap<(&str, Option<&str>), usize>> = None;
    wanted
        .iter()
        .map(|&(i, e)| {
            if i < len && same(at(i), e) {
                return Some(i);
            }
            let by_name = by_name.get_or_insert_with(|| {
                (0..len)
                    .map(|j| {
                        let other = at(j);
                        ((other.addr(), other.tag()), j)
                    })
                    .collect()
            });
            by_name.get(&(e.addr(), e.tag())).copied()
        })
        .collect()
}

fn describe(cluster: &Cluster, limit: Option<usize>) -> Value {
    let balancer = cluster.balancer();
    // One snapshot, one pass: no lookup per endpoint.
    let states = balancer.states(loadring::clock::now());
    let count = states.len();
    let mut in_flight_total = 0u64;
    let mut bounded = false;
    for state in &states {
        in_flight_total += state.in_flight;
        bounded |= state.cap.is_some();
    }
    // The upstreams (their counters) of all, for the requests that break
    // ties between endpoints as busy; of none when none is listed.
    let mut upstreams = if limit == Some(0) {
        Vec::new()
    } else {
        cluster.upstreams_of(states.iter().map(|s| &s.endpoint))
    };
    let shown: Vec<usize> = match limit {
        Some(limit) if limit < count => {
            let load: Vec<(u64, u64)> = states
                .iter()
                .zip(&upstreams)
                .map(|(s, u)| (s.in_flight, u.as_ref().map_or(0, |u| u.served().attempts)))
                .collect();
            busiest(&load, limit)
        }
        _ => (0..count).collect(),
    };
    // From here on, only the endpoints listed.
    let wanted: Vec<(usize, &Endpoint)> = shown.iter().map(|&i| (i, &states[i].endpoint)).collect();
    let layout = cluster.layout();
    let shares: Vec<Option<(f64, f64)>> = match layout.as_deref() {
        Some(l) if !wanted.is_empty() => {
            let fair = l.fair_shares();
            positions(&wanted, l.shares().len(), |j| &l.shares()[j].0)
                .into_iter()
                .map(|at| at.map(|j| (l.shares()[j].1, fair[j])))
                .collect()
        }
        _ => vec![None; wanted.len()],
    };
    // Reports are read only with --load-report; without it every endpoint
    // shows null.
    let reported: Vec<Option<u64>> = if cluster.config().load_report.is_some() && !wanted.is_empty()
    {
        let loads = balancer.reported_loads();
        positions(&wanted, loads.len(), |j| &loads[j].0)
            .into_iter()
            .map(|at| at.and_then(|j| loads[j].1))
            .collect()
    } else {
        vec![None; wanted.len()]
    };
    let endpoints: Vec<Value> = shown
        .iter()
        .zip(shares.iter().zip(&reported))
        .map(|(&i, (share, reported))| {
            let state = &states[i];
            let upstream = upstreams.get_mut(i).and_then(Option::take);
            endpoint_json(state, upstream.as_deref(), *share, *reported)
        })
        .collect();
    let mean = if count == 0 {
        0.0
    } else {
        in_flight_total as f64 / count as f64
    };
    let served = cluster.served();
    json!({
        "name": cluster.name(),
        "policy": cluster.policy().to_string(),
        "key": cluster.key().sources().iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        "bounded": bounded,
        "load_report": cluster.config().load_report.as_ref().map(|r| r.to_string()),
        "in_flight": in_flight_total,
        "in_flight_mean": mean,
        "requests": served.attempts,
        "errors": served.failures,
        "spills": served.spills,
        "layout": layout.as_deref().map(layout_json),
        "endpoint_count": count,
        "endpoints_shown": endpoints.len(),
        "endpoints": endpoints,
    })
}

fn layout_json(l: &Layout) -> Value {
    json!({
        "entries": l.entries(),
        "entry_label": l.entry_label(),
        "deviation": l.deviation(),
        "max_over_mean": l.max_over_mean(),
    })
}

/// One endpoint of `/status`: its state in the snapshot, its upstream's
/// counters and check verdict, its (share, fair share) of the hash space
/// and its reported load.
fn endpoint_json(
    state: &loadring::MemberState,
    upstream: Option<&crate::upstream::Upstream>,
    share: Option<(f64, f64)>,
    reported: Option<u64>,
) -> Value {
    let e = &state.endpoint;
    let served = upstream.map(|u| u.served()).unwrap_or_default();
    // Passive ejection, --eject-after's or the policy's own eject_after=,
    // is the balancer's lifecycle.
    let ejected = state.lifecycle.ejected_for;
    json!({
        "addr": e.addr(),
        "tag": e.tag(),
        "zone": e.zone(),
        "weight": e.weight(),
        "healthy": state.healthy && ejected.is_none(),
        "checked_up": upstream.is_none_or(|u| u.checked_up()),
        "ejected_ms": ejected.map(millis),
        "slow_start": state.lifecycle.slow_start,
        "in_flight": state.in_flight,
        "reported_load": reported,
        "cap": state.cap,
        "requests": served.attempts,
        "errors": served.failures,
        "spills": served.spills,
        "share": share.map(|s| s.0),
        "fair_share": share.map(|s| s.1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ClusterConfig;
    use loadring::Request;

    fn addr(i: usize) -> String {
        format!("127.0.0.1:{}", i + 1)
    }

    fn cluster(policy: &str, n: usize) -> Arc<Cluster> {
        let mut config = ClusterConfig::new("c", policy.parse().unwrap());
        config.endpoints = (0..n).map(|i| addr(i).parse().unwrap()).collect();
        Arc::new(Cluster::new(config).unwrap())
    }

    /// Holds one request in flight on endpoint `i` (a pick that excludes
    /// every other; no attempt counted).
    fn hold(cluster: &Cluster, n: usize, i: usize) -> loadring::Pick<crate::cluster::Backend> {
        let others: Vec<String> = (0..n).filter(|&j| j != i).map(addr).collect();
        let others: Vec<&str> = others.iter().map(String::as_str).collect();
        let pick = cluster
            .balancer()
            .pick(&Request::new().excluding(&others))
            .unwrap();
        assert_eq!(pick.addr(), addr(i));
        pick
    }

    /// Counts `n` attempts on endpoint `i`.
    fn count_requests(cluster: &Cluster, i: usize, n: u64) {
        let endpoint: Endpoint = addr(i).parse().unwrap();
        let upstream = cluster.upstreams_of(std::iter::once(&endpoint))[0]
            .clone()
            .unwrap();
        for _ in 0..n {
            upstream.count_attempt(false);
        }
    }

    fn listed(doc: &Value) -> Vec<String> {
        doc["clusters"][0]["endpoints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["addr"].as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn the_busiest_are_listed_in_membership_order() {
        // In flight / requests: e0 0/0, e1 1/5, e2 0/3, e3 0/0, e4 2/0,
        // e5 1/7. Busiest first: e4 (2 in flight), e5 (1, 7 requests),
        // e1 (1, 5), e2 (0, 3), then e0 before e3 (membership order).
        let c = cluster("rr", 6);
        let clusters = [c.clone()];
        let _held = [
            hold(&c, 6, 4),
            hold(&c, 6, 4),
            hold(&c, 6, 1),
            hold(&c, 6, 5),
        ];
        count_requests(&c, 1, 5);
        count_requests(&c, 5, 7);
        count_requests(&c, 2, 3);
        let by_rank = [4, 5, 1, 2, 0, 3];
        for n in 0..=8 {
            let doc = status(&clusters, Duration::from_secs(1), Some(n));
            let mut want: Vec<usize> = by_rank.iter().copied().take(n).collect();
            want.sort_unstable();
            let want: Vec<String> = want.into_iter().map(addr).collect();
            assert_eq!(listed(&doc), want, "endpoints={n}");
            let cluster = &doc["clusters"][0];
            assert_eq!(cluster["endpoint_count"], 6);
            assert_eq!(cluster["endpoints_shown"], n.min(6));
            // The cluster's figures stay the whole membership's.
            assert_eq!(cluster["in_flight"], 4);
            assert_eq!(cluster["in_flight_mean"], 4.0 / 6.0);
            assert_eq!(cluster["requests"], 15);
            assert_eq!(doc["endpoints"], cluster["endpoints"]);
        }
        // Each listed endpoint's own figures.
        let doc = status(&clusters, Duration::from_secs(1), Some(3));
        let endpoints = doc["endpoints"].as_array().unwrap();
        let figures: Vec<(u64, u64)> = endpoints
            .iter()
            .map(|e| {
                (
                    e["in_flight"].as_u64().unwrap(),
                    e["requests"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(figures, [(1, 5), (2, 0), (1, 7)]);
        // Far more than the membership, and the largest accepted.
        let all = status(&clusters, Duration::from_secs(1), None);
        for n in [7, 100, MAX_ENDPOINTS] {
            assert_eq!(status(&clusters, Duration::from_secs(1), Some(n)), all);
        }
        assert_eq!(all["clusters"][0]["endpoints_shown"], 6);
    }

    #[test]
    fn endpoints_0_lists_none_and_keeps_the_cluster_figures() {
        let c = cluster("rr", 3);
        let _held = hold(&c, 3, 2);
        count_requests(&c, 0, 2);
        let doc = status(&[c], Duration::from_secs(1), Some(0));
        let cluster = &doc["clusters"][0];
        assert_eq!(cluster["endpoints"], json!([]));
        assert_eq!(doc["endpoints"], json!([]));
        assert_eq!(cluster["endpoint_count"], 3);
        assert_eq!(cluster["endpoints_shown"], 0);
        assert_eq!(cluster["in_flight"], 1);
        assert_eq!(cluster["requests"], 2);
        assert_eq!(cluster["bounded"], false);
    }

    /// The partial selection against the obvious way: sort everything.
    #[test]
    fn busiest_agrees_with_a_full_sort() {
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        let mut random = move |bound: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % bound
        };
        for n in [0usize, 1, 2, 7, 50, 1000] {
            // Few distinct values: ties on both counts are the rule.
            let load: Vec<(u64, u64)> = (0..n).map(|_| (random(3), random(4))).collect();
            for limit in [0, 1, 2, n / 2, n.saturating_sub(1), n, n + 1] {
                let mut everyone: Vec<usize> = (0..n).collect();
                everyone
                    .sort_by(|&a, &b| (load[b].0, load[b].1, a).cmp(&(load[a].0, load[a].1, b)));
                let mut want: Vec<usize> = everyone.into_iter().take(limit).collect();
                want.sort_unstable();
                assert_eq!(busiest(&load, limit), want, "n={n} limit={limit}");
            }
        }
    }

    #[test]
    fn without_the_parameter_the_document_is_unchanged_but_for_two_counts() {
        let mut config = ClusterConfig::new("c", "c_murmurhash_bl".parse().unwrap());
        config.endpoints = (0..4).map(|i| addr(i).parse().unwrap()).collect();
        let c = Arc::new(Cluster::new(config).unwrap());
        let doc = status(std::slice::from_ref(&c), Duration::from_millis(1500), None);
        let keys = |v: &Value| -> Vec<String> {
            let mut keys: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
            keys.sort();
            keys
        };
        let sorted = |names: &[&str]| -> Vec<String> {
            let mut names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
            names.sort();
            names
        };
        assert_eq!(
            keys(&doc),
            sorted(&["uptime_ms", "clusters", "policy", "key", "endpoints"])
        );
        assert_eq!(doc["uptime_ms"], 1500);
        let cluster = &doc["clusters"][0];
        assert_eq!(
            keys(cluster),
            sorted(&[
                "name",
                "policy",
                "key",
                "bounded",
                "load_report",
                "in_flight",
                "in_flight_mean",
                "requests",
                "errors",
                "spills",
                "layout",
                "endpoints",
                // New: the whole membership, and how many are listed.
                "endpoint_count",
                "endpoints_shown",
            ])
        );
        assert_eq!(
            keys(&cluster["layout"]),
            sorted(&["entries", "entry_label", "deviation", "max_over_mean"])
        );
        assert_eq!(listed(&doc), [addr(0), addr(1), addr(2), addr(3)]);
        assert_eq!(cluster["endpoint_count"], 4);
        assert_eq!(cluster["endpoints_shown"], 4);
        let layout = c.balancer().layout().unwrap().unwrap();
        for (e, (endpoint, share)) in cluster["endpoints"]
            .as_array()
            .unwrap()
            .iter()
            .zip(layout.shares())
        {
            assert_eq!(
                keys(e),
                sorted(&[
                    "addr",
                    "tag",
                    "zone",
                    "weight",
                    "healthy",
                    "checked_up",
                    "ejected_ms",
                    "slow_start",
                    "in_flight",
                    "reported_load",
                    "cap",
                    "requests",
                    "errors",
                    "spills",
                    "share",
                    "fair_share",
                ])
            );
            assert_eq!(e["addr"], endpoint.addr());
            assert_eq!(e["share"].as_f64(), Some(*share));
            assert_eq!(e["fair_share"], 0.25);
            assert_eq!(e["checked_up"], true);
            assert_eq!(e["reported_load"], Value::Null);
        }
    }

    /// A listed endpoint's share is its own, whichever are listed.
    #[test]
    fn a_listed_endpoint_keeps_its_own_share() {
        let mut config = ClusterConfig::new("c", "c_murmurhash_bl".parse().unwrap());
        config.endpoints = (0..5).map(|i| addr(i).parse().unwrap()).collect();
        let c = Arc::new(Cluster::new(config).unwrap());
        let layout = c.balancer().layout().unwrap().unwrap();
        let share_of = |a: &str| {
            layout
                .shares()
                .iter()
                .find(|(e, _)| e.addr() == a)
                .map(|(_, s)| *s)
        };
        count_requests(&c, 3, 2);
        count_requests(&c, 1, 1);
        let doc = status(&[c], Duration::from_secs(1), Some(2));
        assert_eq!(listed(&doc), [addr(1), addr(3)]);
        for e in doc["endpoints"].as_array().unwrap() {
            assert_eq!(e["share"].as_f64(), share_of(e["addr"].as_str().unwrap()));
            assert_eq!(e["fair_share"], 0.2);
        }
    }

    #[test]
    fn positions_are_found_by_name_when_the_lists_differ() {
        let e = |a: &str| -> Endpoint { a.parse().unwrap() };
        let snapshot = [
            e("a:1"),
            e("b:1"),
            e("c:1"),
            e("b:1").with_tag("t").unwrap(),
        ];
        let wanted: Vec<(usize, &Endpoint)> = snapshot.iter().enumerate().collect();
        // The same order: found in place.
        assert_eq!(
            positions(&wanted, 4, |j| &snapshot[j]),
            [Some(0), Some(1), Some(2), Some(3)]
        );
        // Another membership: `a:1` gone, `b:1` moved, the tag tells the two
        // `b:1` apart.
        let other = [
            e("b:1").with_tag("t").unwrap(),
            e("c:1"),
            e("b:1"),
            e("d:1"),
        ];
        assert_eq!(
            positions(&wanted, 4, |j| &other[j]),
            [None, Some(2), Some(1), Some(0)]
        );
        assert_eq!(positions(&wanted[2..3], 0, |j| &other[j]), [None]);
    }

    #[test]
    fn the_query_is_read_or_refused_in_one_line() {
        for (query, want) in [
            (None, None),
            (Some(""), None),
            (Some("endpoints=0"), Some(0)),
            (Some("endpoints=200"), Some(200)),
            (Some("endpoints=0200&"), Some(200)),
            (Some("endpoints=1048576"), Some(1_048_576)),
        ] {
            assert_eq!(endpoints_limit(query), Ok(want), "{query:?}");
        }
        for (query, why) in [
            (
                "endpoints=abc",
                "endpoints: `abc` is not a count: accepted 0..=1048576",
            ),
            (
                "endpoints=-1",
                "endpoints: `-1` is not a count: accepted 0..=1048576",
            ),
            (
                "endpoints=+5",
                "endpoints: `+5` is not a count: accepted 0..=1048576",
            ),
            (
                "endpoints=2.5",
                "endpoints: `2.5` is not a count: accepted 0..=1048576",
            ),
            (
                "endpoints=",
                "endpoints: `` is not a count: accepted 0..=1048576",
            ),
            (
                "endpoints",
                "endpoints: `` is not a count: accepted 0..=1048576",
            ),
            (
                "endpoints=1048577",
                "endpoints: `1048577` is out of range: accepted 0..=1048576",
            ),
            (
                "endpoints=99999999999999999999999",
                "endpoints: `99999999999999999999999` is out of range: accepted 0..=1048576",
            ),
            (
                "endpoints=5&endpoints=6",
                "endpoints: given twice (`5`, then `6`): accepted once, 0..=1048576",
            ),
            (
                "limit=5",
                "limit: not a parameter of /status (`limit=5`): accepted endpoints=0..=1048576",
            ),
            (
                "endpoints=5&refresh",
                "refresh: not a parameter of /status (`refresh`): accepted endpoints=0..=1048576",
            ),
            (
                "Endpoints=5",
                "Endpoints: not a parameter of /status (`Endpoints=5`): accepted endpoints=0..=1048576",
            ),
        ] {
            assert_eq!(endpoints_limit(Some(query)), Err(why.to_string()), "{query}");
        }
        // A long value is echoed in part.
        let long = format!("endpoints={}", "9".repeat(100));
        assert_eq!(
            endpoints_limit(Some(&long)),
            Err(format!(
                "endpoints: `{}\u{2026}` is out of range: accepted 0..=1048576",
                "9".repeat(64)
            ))
        );
    }
}
