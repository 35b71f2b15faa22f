//! The gateway in-process over real sockets on 127.0.0.1: real hyper
//! backends (`DemoBackend`), a raw HTTP client, every wait bounded.

use crate::common;
use crate::running::{start, Running};

use std::time::Duration;

use common::{chunked, eventually, free_port, get, metric, metric_sum, request, request_raw, WAIT};
use loadring_proxy::{ClusterConfig, DemoBackend, KeySpec, Proxy, ProxyConfig};

impl Running {
    async fn in_flight_total(&self) -> f64 {
        metric_sum(&self.metrics().await, "loadring_in_flight")
    }
}

fn cluster(policy: &str, key: &[&str], backends: &[&DemoBackend]) -> ClusterConfig {
    let mut c = ClusterConfig::new("default", policy.parse().unwrap());
    c.endpoints = backends
        .iter()
        .map(|b| b.addr().to_string().parse().unwrap())
        .collect();
    c.key = KeySpec::parse(key).unwrap();
    c
}

/// A key (`x-user`) of each of `n` backends and the backend the proxy
/// sends it to, found by asking the proxy, in the order found.
async fn a_key_of_each(proxy: &Running, n: usize) -> Vec<(String, String)> {
    let mut keys: Vec<(String, String)> = Vec::new();
    for i in 0..200 {
        let key = format!("user{i}");
        let owner = get(proxy.addr, "/", &[("x-user", &key)]).await.backend();
        if keys.iter().all(|(_, o)| *o != owner) {
            keys.push((key, owner));
        }
        if keys.len() == n {
            break;
        }
    }
    assert_eq!(keys.len(), n, "a key of each backend");
    keys
}

/// Waits until `endpoint` has no request in flight: an attempt's outcome
/// reaches the balancer before its in-flight slot is released, so after
/// this the outcomes of the requests sent to it are in.
async fn requests_ended_on(proxy: &Running, endpoint: &str) {
    let in_flight = format!("loadring_in_flight{{endpoint=\"{endpoint}\"}}");
    assert!(
        eventually(WAIT, || async {
            metric(&proxy.metrics().await, &in_flight) == Some(0.0)
        })
        .await,
        "a request on {endpoint} never ended"
    );
}

async fn backends(n: usize) -> Vec<DemoBackend> {
    let mut all = Vec::new();
    for _ in 0..n {
        all.push(DemoBackend::start("127.0.0.1:0").await.unwrap());
    }
    all
}

// Two threads: on a multi-thread runtime the threads share one pool, so the
// count of one pooled connection below holds wherever a request runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwards_method_target_headers_body_and_forwarded_for() {
    let b = backends(1).await;
    let proxy = start(cluster("rr", &[], &[&b[0]])).await;
    let reply = request(
        proxy.addr,
        "POST",
        "/some/path?q=1&r=two",
        &[
            ("x-forwarded-for", "203.0.113.9"),
            ("x-custom", "kept"),
            ("connection", "close, x-private-hop"),
            ("x-private-hop", "dropped"),
            ("te", "trailers"),
        ],
        "the request body",
    )
    .await
    .unwrap();
    assert_eq!(reply.status, 200);
    assert_eq!(reply.backend(), b[0].addr().to_string());
    assert_eq!(reply.body, "the request body", "body streamed both ways");
    assert_eq!(reply.header("x-echo-method"), Some("POST"));
    assert_eq!(reply.header("x-echo-uri"), Some("/some/path?q=1&r=two"));
    assert_eq!(
        reply.header("x-echo-forwarded-for"),
        Some("203.0.113.9, 127.0.0.1")
    );
    assert_eq!(
        reply.header("x-echo-hop"),
        Some(""),
        "hop-by-hop headers removed"
    );
    assert_eq!(
        reply.header("x-echo-host"),
        Some(proxy.addr.to_string().as_str())
    );
    // Upstream connections are kept alive: ten more requests, one connection.
    for _ in 0..10 {
        assert_eq!(get(proxy.addr, "/", &[]).await.status, 200);
    }
    assert_eq!(
        (b[0].requests(), b[0].connections()),
        (11, 1),
        "one pooled connection"
    );
    let status = get(b[0].addr(), "/?status=418", &[]).await;
    assert_eq!(status.status, 418, "the backend itself");
    assert_eq!(
        get(proxy.addr, "/?status=418", &[]).await.status,
        418,
        "statuses pass through"
    );
}

/// 40 concurrent slow requests for one key over 4 equal backends. The cap
/// with 40 in flight is ceil(1.25 * 41 / 4) = 13; with 2 worker threads
/// racing, no backend may see more than 13 + 2 = 15 at once. Envoy's rule
/// (`hash_balance_factor=125`) has ceil(ceil(41 * 1.25) / 4) = 13 slots and
/// admits while at most 13 are in flight: 14 + 2 = 16. A plain ring sends
/// all 40 to the key's owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_key_is_capped_under_bounded_load_and_piles_up_on_a_plain_ring() {
    for (policy, peak) in [
        ("c_murmurhash_bl:load_factor=1.25", Some(15)),
        ("ring_hash:hash_balance_factor=125", Some(16)),
        ("c_murmurhash", None),
    ] {
        let b = backends(4).await;
        let proxy = start(cluster(
            policy,
            &["header:x-user"],
            &[&b[0], &b[1], &b[2], &b[3]],
        ))
        .await;
        let clients: Vec<_> = (0..40)
            .map(|_| {
                let addr = proxy.addr;
                // Held long enough that all 40 overlap even on a busy machine.
                tokio::spawn(async move { get(addr, "/?delay=5000", &[("x-user", "hot")]).await })
            })
            .collect();
        // While they are all in flight, the proxy counts all 40.
        assert!(
            eventually(WAIT, || async { proxy.in_flight_total().await == 40.0 }).await,
            "{policy}: 40 in flight: {}",
            proxy.metrics().await
        );
        for c in clients {
            assert_eq!(c.await.unwrap().status, 200);
        }
        let peaks: Vec<u64> = b.iter().map(|b| b.max_in_flight()).collect();
        let requests: u64 = b.iter().map(|b| b.requests()).sum();
        assert_eq!(requests, 40, "{policy}");
        let metrics = proxy.metrics().await;
        let spilled = metric(&metrics, "loadring_spilled_total").unwrap();
        if let Some(peak) = peak {
            assert!(
                peaks.iter().all(|&p| p <= peak),
                "{policy}: peaks {peaks:?}"
            );
            assert!(
                peaks.iter().filter(|&&p| p > 0).count() >= 3,
                "{policy}: {peaks:?}"
            );
            assert!(
                spilled >= (40 - peak) as f64,
                "{policy}: at most {peak} stay with the owner: {spilled}"
            );
        } else {
            let mut sorted = peaks.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, [0, 0, 0, 40], "{policy}: all on the owner");
            assert_eq!(spilled, 0.0);
        }
        // Every guard released: in flight back to 0 on every endpoint.
        assert!(eventually(WAIT, || async { proxy.in_flight_total().await == 0.0 }).await);
        for backend in &b {
            let series = format!("loadring_in_flight{{endpoint=\"{}\"}}", backend.addr());
            assert_eq!(metric(&metrics, &series).map(|_| ()), Some(()), "{series}");
        }
        assert_eq!(proxy.gateway.clusters()[0].balancer().total_in_flight(), 0);
    }
}

/// Requests without the key are served round robin over the same balancer:
/// 30 of them over 3 equal backends, 10 each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyless_requests_go_round_robin() {
    let b = backends(3).await;
    let proxy = start(cluster(
        "ring_hash",
        &["header:x-user"],
        &[&b[0], &b[1], &b[2]],
    ))
    .await;
    for _ in 0..30 {
        assert_eq!(get(proxy.addr, "/", &[]).await.status, 200);
    }
    let counts: Vec<u64> = b.iter().map(|b| b.requests()).collect();
    assert_eq!(counts, [10, 10, 10]);
}

/// With one retry, a killed backend costs nothing: connections refused (or
/// pooled ones closed) move each request to the ring successor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_backend_costs_no_failed_request_with_one_retry() {
    let mut b = backends(3).await;
    let mut c = cluster("c_murmurhash", &["header:x-user"], &[&b[0], &b[1], &b[2]]);
    c.retries = 1;
    let proxy = start(c).await;
    let mut owners = Vec::new();
    for i in 0..150 {
        let user = format!("user{i}");
        let reply = get(proxy.addr, "/", &[("x-user", &user)]).await;
        assert_eq!(reply.status, 200);
        owners.push(reply.backend());
    }
    let killed = b.remove(1);
    let killed_addr = killed.addr().to_string();
    assert!(
        owners.contains(&killed_addr),
        "some keys lived on the killed backend"
    );
    killed.kill();
    for (i, owner) in owners.iter().enumerate() {
        let user = format!("user{i}");
        let reply = get(proxy.addr, "/", &[("x-user", &user)]).await;
        assert_eq!(reply.status, 200, "{user}: {}", reply.body);
        if *owner != killed_addr {
            assert_eq!(&reply.backend(), owner, "{user}: other keys stay put");
        }
    }
    let metrics = proxy.metrics().await;
    assert!(
        metric(&metrics, "loadring_retries_total").unwrap() >= 1.0,
        "{metrics}"
    );
    let series = format!("loadring_endpoint_healthy{{endpoint=\"{killed_addr}\"}}");
    assert_eq!(
        metric(&metrics, &series),
        Some(0.0),
        "ejected after 5 failures"
    );
}

/// A body of at most `retry_buffer` bytes (announced, or chunked) is read
/// whole and sent again after a connect failure, POST included; a bigger
/// one streams once, so its request is not retried; on a live backend the
/// bigger body arrives whole (what was read ahead, then the rest).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_up_to_the_retry_buffer_are_sent_again_and_bigger_ones_stream_once() {
    // The dead endpoint never listened: no pooled connection to it can be
    // cut under a request (that would be a closed connection, after which
    // a POST is rightly not retried).
    let alive = backends(1).await.remove(0);
    let alive_addr = alive.addr().to_string();
    let dead_addr = format!("127.0.0.1:{}", free_port());
    let mut c = ClusterConfig::new("default", "c_murmurhash".parse().unwrap());
    c.endpoints = vec![dead_addr.parse().unwrap(), alive_addr.parse().unwrap()];
    c.key = KeySpec::parse(&["header:x-user"]).unwrap();
    c.retries = 1;
    c.retry_buffer = 64;
    c.health.eject_after = 0;
    let proxy = start(c).await;
    // A key of each: a GET of a key the dead endpoint owns is retried.
    let (mut on_dead, mut on_alive) = (None, None);
    for i in 0..40 {
        let user = format!("user{i}");
        let retries = metric(&proxy.metrics().await, "loadring_retries_total");
        let reply = get(proxy.addr, "/", &[("x-user", &user)]).await;
        assert_eq!(reply.backend(), alive_addr);
        if metric(&proxy.metrics().await, "loadring_retries_total") > retries {
            on_dead.get_or_insert(user);
        } else {
            on_alive.get_or_insert(user);
        }
    }
    let (on_dead, on_alive) = (on_dead.unwrap(), on_alive.unwrap());
    let retried = metric(&proxy.metrics().await, "loadring_retries_total").unwrap();

    let post = |user: &str| format!("POST /upload HTTP/1.1\r\nx-user: {user}\r\n");
    let sized =
        |user: &str, body: &str| format!("{}Content-Length: {}\r\n", post(user), body.len());
    let chunked_head = |user: &str| format!("{}Transfer-Encoding: chunked\r\n", post(user));
    let small = "s".repeat(64);
    let big = "b".repeat(65);
    let (part1, part2, part3) = ("1".repeat(40), "2".repeat(40), "3".repeat(20));
    let big_parts = format!("{part1}{part2}{part3}");

    for (what, head, body, expected) in [
        (
            "announced, at the limit",
            sized(&on_dead, &small),
            small.clone(),
            &small,
        ),
        (
            "chunked, under the limit",
            chunked_head(&on_dead),
            chunked(&["ab", "cd"]),
            &"abcd".to_string(),
        ),
    ] {
        let reply = request_raw(proxy.addr, &head, &body).await.unwrap();
        assert_eq!(reply.status, 200, "{what}: {}", reply.body);
        assert_eq!(reply.backend(), alive_addr, "{what}");
        assert_eq!(&reply.body, expected, "{what}: the whole body, sent again");
    }
    assert_eq!(
        metric(&proxy.metrics().await, "loadring_retries_total"),
        Some(retried + 2.0)
    );

    for (what, head, body) in [
        (
            "announced, over the limit",
            sized(&on_dead, &big),
            big.clone(),
        ),
        (
            "chunked, over the limit",
            chunked_head(&on_dead),
            chunked(&[&part1, &part2, &part3]),
        ),
    ] {
        let reply = request_raw(proxy.addr, &head, &body).await.unwrap();
        assert_eq!(reply.status, 502, "{what}: sent once: {}", reply.body);
    }
    assert_eq!(
        metric(&proxy.metrics().await, "loadring_retries_total"),
        Some(retried + 2.0),
        "no retry of a streamed body"
    );

    for (what, head, body, expected) in [
        (
            "announced, over the limit",
            sized(&on_alive, &big),
            big.clone(),
            &big,
        ),
        (
            "chunked, over the limit",
            chunked_head(&on_alive),
            chunked(&[&part1, &part2, &part3]),
            &big_parts,
        ),
    ] {
        let reply = request_raw(proxy.addr, &head, &body).await.unwrap();
        assert_eq!(reply.status, 200, "{what}: {}", reply.body);
        assert_eq!(&reply.body, expected, "{what}: read ahead, then the rest");
    }

    // A body the client cannot finish: 400, saying why.
    let reply = request_raw(
        proxy.addr,
        &chunked_head(&on_alive),
        "zz\r\nabc\r\n0\r\n\r\n",
    )
    .await
    .unwrap();
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert!(
        reply
            .body
            .starts_with("the request body could not be read: "),
        "{}",
        reply.body
    );
}

/// A body that is not read ahead streams: the backend gets the request
/// before the body has ended (announced over the limit, or any body when
/// no retry is allowed). One that is read ahead reaches it only whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_not_read_ahead_reach_the_backend_as_they_arrive() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let chunked_head = "Transfer-Encoding: chunked\r\n";
    for (what, retries, length_header, body, streams) in [
        (
            "announced over the limit",
            1,
            "Content-Length: 65\r\n",
            "b".repeat(65),
            true,
        ),
        (
            "chunked, no retry allowed",
            0,
            chunked_head,
            chunked(&["abc"]),
            true,
        ),
        (
            "chunked, read ahead",
            1,
            chunked_head,
            chunked(&["abc"]),
            false,
        ),
    ] {
        let b = backends(1).await;
        let mut c = cluster("rr", &[], &[&b[0]]);
        c.retries = retries;
        c.retry_buffer = 64;
        let proxy = start(c).await;
        let head =
            format!("POST /up HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{length_header}\r\n");
        if !streams {
            // A body that turns bad after its first chunk: the proxy's 400
            // is the event, and a head sent on at once would have reached
            // the backend before the bad chunk did.
            let mut stream = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
            stream.write_all(head.as_bytes()).await.unwrap();
            stream.write_all(b"3\r\nabc\r\n").await.unwrap();
            stream.write_all(b"zz\r\n").await.unwrap();
            let mut reply = String::new();
            tokio::time::timeout(WAIT, stream.read_to_string(&mut reply))
                .await
                .expect("a reply in time")
                .unwrap();
            assert!(
                reply.starts_with("HTTP/1.1 400")
                    && reply.contains("the request body could not be read"),
                "{what}: {reply}"
            );
            assert_eq!(b[0].requests(), 0, "{what}: the backend had the head");
        }
        let mut stream = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
        stream.write_all(head.as_bytes()).await.unwrap();
        if streams {
            assert!(
                eventually(WAIT, || async { b[0].requests() == 1 }).await,
                "{what}: the backend has the request before the body"
            );
        }
        stream.write_all(body.as_bytes()).await.unwrap();
        let mut reply = String::new();
        tokio::time::timeout(Duration::from_secs(10), stream.read_to_string(&mut reply))
            .await
            .expect("a reply in time")
            .unwrap();
        assert!(reply.starts_with("HTTP/1.1 200"), "{what}: {reply}");
        assert_eq!(b[0].requests(), 1, "{what}");
    }
}

/// A client that stops sending a body being read ahead gets 408 after
/// `timeout` of silence; the backend never sees the request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_stalls_while_read_ahead_gets_408() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let b = backends(1).await;
    let mut c = cluster("rr", &[], &[&b[0]]);
    c.timeout = Duration::from_millis(300);
    let proxy = start(c).await;
    let mut stream = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
    let head = "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc";
    stream.write_all(head.as_bytes()).await.unwrap();
    let read = async {
        let mut reply = Vec::new();
        let mut buf = [0; 1024];
        // Until the answer's body, or the connection's end.
        while !String::from_utf8_lossy(&reply).contains("stalled") {
            let n = stream.read(&mut buf).await.unwrap();
            if n == 0 {
                break;
            }
            reply.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&reply).to_string()
    };
    let reply = tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .expect("an answer, not a wait for the rest of the body");
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply}");
    assert!(
        reply.contains("the request body stalled: nothing for 300ms"),
        "{reply}"
    );
    assert_eq!(b[0].requests(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_answer_is_502_and_no_eligible_endpoint_is_503() {
    let b = backends(2).await;
    let mut c = cluster("c_murmurhash", &["header:x-user"], &[&b[0], &b[1]]);
    c.retries = 0;
    c.health.eject_after = 0;
    let proxy = start(c).await;
    let owner = get(proxy.addr, "/", &[("x-user", "k")]).await.backend();
    let (dead, alive): (Vec<_>, Vec<_>) =
        b.into_iter().partition(|b| b.addr().to_string() == owner);
    dead.into_iter().for_each(DemoBackend::kill);
    assert_eq!(
        get(proxy.addr, "/", &[("x-user", "k")]).await.status,
        502,
        "no retry allowed"
    );
    let balancer = proxy.gateway.clusters()[0].balancer();
    for e in balancer.endpoints() {
        balancer.set_healthy(e.id(), false).unwrap();
    }
    assert_eq!(get(proxy.addr, "/", &[("x-user", "k")]).await.status, 503);
    assert_eq!(get(proxy.addr, "/", &[]).await.status, 503, "keyless too");
    drop(alive);
}

/// With `panic_below=` in the policy, a cluster whose endpoints are mostly
/// out (ejected here) serves every request over all of them instead of
/// answering 503; without it, the 503.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_threshold_serves_over_all_endpoints_when_most_are_out() {
    for (policy, panics) in [
        ("c_murmurhash:panic_below=50", true),
        ("c_murmurhash", false),
    ] {
        let b = backends(2).await;
        let mut c = cluster(policy, &["header:x-user"], &[&b[0], &b[1]]);
        c.health.eject_after = 1;
        c.health.eject_for = Duration::from_secs(60);
        let proxy = start(c).await;
        // One failed request on each backend ejects it: a key of each,
        // answered 500.
        for (key, _) in a_key_of_each(&proxy, 2).await {
            let reply = get(proxy.addr, "/?status=500", &[("x-user", &key)]).await;
            assert_eq!(reply.status, 500, "{policy}");
        }
        let metrics = proxy.metrics().await;
        assert_eq!(
            metric_sum(&metrics, "loadring_endpoint_healthy"),
            0.0,
            "{policy}: both ejected: {metrics}"
        );
        let reply = get(proxy.addr, "/", &[("x-user", "anyone")]).await;
        if panics {
            assert_eq!(reply.status, 200, "{policy}: served in panic");
        } else {
            assert_eq!(reply.status, 503, "{policy}: nothing eligible");
        }
    }
}

/// A proxy over two backends (returned: they serve while held) whose
/// ejection is `policy`'s alone (the proxy's own passive ejection off),
/// without retries, keyed by `x-user`; a key each backend owns, with it.
async fn ejecting_by_policy(policy: &str) -> (Vec<DemoBackend>, Running, Vec<(String, String)>) {
    let b = backends(2).await;
    let mut c = cluster(policy, &["header:x-user"], &[&b[0], &b[1]]);
    c.health.eject_after = 0;
    c.retries = 0;
    let proxy = start(c).await;
    let keys = a_key_of_each(&proxy, 2).await;
    (b, proxy, keys)
}

/// The policy's own outlier ejection (its lifecycle keys, fed by each
/// response's outcome) works in the proxy, with Envoy's cap: of two
/// endpoints failing, `max_ejection_percent=50` ejects one and keeps the
/// other serving; with 100 both go and nothing is left (503).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_policys_ejection_applies_with_its_max_ejection_percent() {
    for (percent, second_ejected) in [(50, false), (100, true)] {
        let policy =
            format!("c_murmurhash:eject_after=1 eject_for=60s max_ejection_percent={percent}");
        let (_b, proxy, keys) = ejecting_by_policy(&policy).await;
        let (first, first_owner) = &keys[0];
        let (second, second_owner) = &keys[1];

        // A HEAD: a response with no body to send, its outcome taken at once.
        let reply = request(proxy.addr, "HEAD", "/?status=500", &[("x-user", first)], "")
            .await
            .unwrap();
        assert_eq!(reply.status, 500, "{policy}");
        assert!(
            eventually(WAIT, || async {
                get(proxy.addr, "/", &[("x-user", first)]).await.backend() == *second_owner
            })
            .await,
            "{policy}: {first_owner} ejected, its key on the other endpoint"
        );

        let reply = get(proxy.addr, "/?status=500", &[("x-user", second)]).await;
        assert_eq!(reply.status, 500, "{policy}");
        if second_ejected {
            assert!(
                eventually(WAIT, || async {
                    get(proxy.addr, "/", &[("x-user", second)]).await.status == 503
                })
                .await,
                "{policy}: every endpoint ejected"
            );
        } else {
            requests_ended_on(&proxy, second_owner).await;
            let reply = get(proxy.addr, "/", &[("x-user", second)]).await;
            assert_eq!(
                (reply.status, reply.backend()),
                (200, second_owner.clone()),
                "{policy}: the cap keeps {second_owner} in"
            );
        }
    }
}

/// RFC 9110 15: a status past 599 is invalid, and a client that gets one
/// should take it as a 5xx. The client of the proxy gets it as the backend
/// sent it (as from nginx and HAProxy); the balancer counts the attempt a
/// failure: with `eject_after=1` a 600 or a 999 ejects its endpoint, as a
/// 500 does, and a 499 does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_past_599_passes_on_and_counts_as_a_failure() {
    for (status, ejected) in [(499, false), (500, true), (600, true), (999, true)] {
        let (_b, proxy, keys) =
            ejecting_by_policy("c_murmurhash:eject_after=1 eject_for=60s").await;
        let (key, owner) = &keys[0];
        let (_, other) = &keys[1];
        // A HEAD: a response with no body to send, its outcome taken at once.
        let target = format!("/?status={status}");
        let reply = request(proxy.addr, "HEAD", &target, &[("x-user", key)], "")
            .await
            .unwrap();
        assert_eq!(reply.status, status);
        requests_ended_on(&proxy, owner).await;
        let next = get(proxy.addr, "/", &[("x-user", key)]).await.backend();
        let went_to = if ejected { other } else { owner };
        assert_eq!(&next, went_to, "{status}: ejected {ejected}");
    }
}

/// Active checks (every 100 ms, out after 2 failures, back after 1 pass)
/// and passive ejection (2 failed requests, out for 600 ms) only move
/// health marks: keys leave the endpoint and come back to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_checks_and_ejection_move_the_marks_and_keys_come_back() {
    let b = backends(3).await;
    let mut c = cluster("c_murmurhash", &["header:x-user"], &[&b[0], &b[1], &b[2]]);
    c.health.path = Some("/health".into());
    c.health.interval = Duration::from_millis(100);
    c.health.fall = 2;
    c.health.rise = 1;
    c.health.eject_after = 2;
    c.health.eject_for = Duration::from_millis(600);
    let proxy = start(c).await;
    let owner = get(proxy.addr, "/", &[("x-user", "k")]).await.backend();
    let sick = b.iter().find(|b| b.addr().to_string() == owner).unwrap();
    let healthy_series = format!("loadring_endpoint_healthy{{endpoint=\"{owner}\"}}");

    sick.set_healthy(false);
    assert!(
        eventually(WAIT, || async {
            metric(&proxy.metrics().await, &healthy_series) == Some(0.0)
        })
        .await
    );
    assert_ne!(
        get(proxy.addr, "/", &[("x-user", "k")]).await.backend(),
        owner
    );
    sick.set_healthy(true);
    assert!(
        eventually(WAIT, || async {
            get(proxy.addr, "/", &[("x-user", "k")]).await.backend() == owner
        })
        .await,
        "the key returns to its owner"
    );

    for _ in 0..2 {
        assert_eq!(
            get(proxy.addr, "/?status=500", &[("x-user", "k")])
                .await
                .status,
            500
        );
    }
    assert_eq!(
        metric(&proxy.metrics().await, &healthy_series),
        Some(0.0),
        "ejected"
    );
    assert_ne!(
        get(proxy.addr, "/", &[("x-user", "k")]).await.backend(),
        owner
    );
    assert!(
        eventually(WAIT, || async {
            get(proxy.addr, "/", &[("x-user", "k")]).await.backend() == owner
        })
        .await,
        "back after the ejection"
    );
}

/// Stopping drains: a request in flight completes, new connections are
/// refused, and `serve` returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_finishes_requests_in_flight() {
    let b = backends(1).await;
    let mut proxy = start(cluster("rr", &[], &[&b[0]])).await;
    let addr = proxy.addr;
    let slow = tokio::spawn(async move { get(addr, "/?delay=600", &[]).await });
    assert!(eventually(WAIT, || async { b[0].in_flight() == 1 }).await);
    proxy.stop.take().unwrap().send(()).unwrap();
    let reply = slow.await.unwrap();
    assert_eq!(
        (reply.status, reply.backend()),
        (200, b[0].addr().to_string())
    );
    let task = &mut proxy.task;
    tokio::time::timeout(WAIT, task)
        .await
        .expect("serve returns once drained")
        .unwrap();
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "no longer accepting"
    );
}

/// The guard lives in the response body: while a slow body streams, the
/// backend's handler is done but the proxy still counts the request. A
/// client that leaves mid-body leaves the rest to be drained (the slot held
/// until the backend is done), or with `abort_on_close` releases it at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guard_is_held_until_the_body_is_sent_or_the_client_leaves() {
    for abort_on_close in [false, true] {
        guard_until_sent_or_gone(abort_on_close).await;
    }
}

async fn guard_until_sent_or_gone(abort_on_close: bool) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let b = backends(1).await;
    let mut c = cluster("c_murmurhash_bl", &["header:x-user"], &[&b[0]]);
    c.abort_on_close = abort_on_close;
    let proxy = start(c).await;
    for leave_early in [false, true] {
        let mut stream = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
        // Left with `abort_on_close`: a body of five minutes, so that only
        // the client's leaving can end the slot within the wait below.
        let lines = match (leave_early, abort_on_close) {
            (true, true) => 3000,
            (true, false) => 30,
            (false, _) => 6,
        };
        let head = format!(
            "GET /?drip={lines} HTTP/1.1\r\nHost: x\r\nx-user: k\r\nConnection: close\r\n\r\n"
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut received = Vec::new();
        let mut buf = [0u8; 1024];
        while !String::from_utf8_lossy(&received).contains("line 0") {
            let n = tokio::time::timeout(common::STEP, stream.read(&mut buf))
                .await
                .unwrap()
                .unwrap();
            assert!(n > 0, "closed early");
            received.extend_from_slice(&buf[..n]);
        }
        assert_eq!(b[0].in_flight(), 0, "the backend's handler has returned");
        assert_eq!(
            proxy.in_flight_total().await,
            1.0,
            "the body is still streaming"
        );
        if leave_early && abort_on_close {
            drop(stream);
            assert!(
                eventually(WAIT, || async { proxy.in_flight_total().await == 0.0 }).await,
                "released when the client left, long before the body's end"
            );
        } else if leave_early {
            drop(stream);
            assert!(
                eventually(common::STEP, || async {
                    proxy.in_flight_total().await == 0.0
                })
                .await,
                "released once the body is drained"
            );
        } else {
            tokio::time::timeout(common::STEP, stream.read_to_end(&mut received))
                .await
                .unwrap()
                .unwrap();
            assert!(String::from_utf8_lossy(&received).contains("line 5"));
            assert!(eventually(WAIT, || async { proxy.in_flight_total().await == 0.0 }).await);
        }
    }
}

/// A TOML config with two clusters: routes by host and path prefix, a 404
/// when none matches, series labelled by cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_send_requests_to_their_clusters() {
    let b = backends(3).await;
    let text = format!(
        r#"
listen = "127.0.0.1:0"
admin = "127.0.0.1:0"

[[cluster]]
name = "users"
policy = "c_murmurhash"
endpoints = ["{}", "{}"]
key = "header:x-user"

[[cluster]]
name = "assets"
policy = "rr"
endpoints = ["{}"]

[[route]]
host = "assets.example"
cluster = "assets"

[[route]]
path_prefix = "/static/"
cluster = "assets"

[[route]]
path_prefix = "/api/"
cluster = "users"
"#,
        b[0].addr(),
        b[1].addr(),
        b[2].addr()
    );
    let config = ProxyConfig::from_toml(&text, std::path::Path::new(".")).unwrap();
    let proxy = Proxy::bind(config).await.unwrap();
    let (addr, admin) = (proxy.local_addr().unwrap(), proxy.admin_addr().unwrap());
    let task = tokio::spawn(proxy.serve(std::future::pending()));
    let assets = b[2].addr().to_string();
    assert_eq!(get(addr, "/static/app.js", &[]).await.backend(), assets);
    assert_eq!(
        get(addr, "/api/x", &[("host", "Assets.Example:8080")])
            .await
            .backend(),
        assets
    );
    let user = get(addr, "/api/x", &[("x-user", "u1")]).await.backend();
    assert!(user == b[0].addr().to_string() || user == b[1].addr().to_string());
    assert_eq!(get(addr, "/other", &[]).await.status, 404);
    let metrics = get(admin, "/metrics", &[]).await.body;
    let series =
        format!("loadring_requests_total{{cluster=\"assets\",endpoint=\"{assets}\",code=\"200\"}}");
    assert_eq!(metric(&metrics, &series), Some(2.0), "{metrics}");
    assert_eq!(
        metric(&metrics, "loadring_retries_total{cluster=\"users\"}"),
        Some(0.0)
    );
    let status: serde_json::Value =
        serde_json::from_str(&get(admin, "/status", &[]).await.body).unwrap();
    assert_eq!(status["clusters"][1]["name"], "assets");
    assert_eq!(status["clusters"][0]["policy"], "c_murmurhash");
    task.abort();
}

/// `pixiu_ring` with `--key method-uri`: each request goes to the backend
/// pixiu's ring places `METHOD.request-target` on (the test writes that text
/// from the request it sends and places it with the library's `pixiu_ring`
/// over the same endpoints, which tests/dubbo_pixiu.rs checks against a
/// model of pixiu's ring).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pixiu_ring_with_method_uri_sends_requests_where_pixiu_would() {
    let b = backends(4).await;
    let refs: Vec<&DemoBackend> = b.iter().collect();
    let proxy = start(cluster("pixiu_ring", &["method-uri"], &refs)).await;
    let endpoints: Vec<loadring::Endpoint> = b
        .iter()
        .map(|x| loadring::Endpoint::new(x.addr().to_string()).unwrap())
        .collect();
    let pixiu = loadring::Balancer::new("pixiu_ring".parse().unwrap(), endpoints).unwrap();
    let mut reached = std::collections::HashSet::new();
    for i in 0..48 {
        let method = ["GET", "POST", "PUT", "DELETE"][i % 4];
        let target = match i % 3 {
            0 => format!("/v1/items/{i}"),
            1 => format!("/orders/?id={i}&name=%E8%AE%A2"),
            _ => format!("/pixiu?total={i}"),
        };
        let key = format!("{method}.{target}");
        let want = pixiu
            .route(&loadring::Request::key(key.as_str()))
            .unwrap()
            .unwrap()
            .addr()
            .to_string();
        let reply = request(proxy.addr, method, &target, &[], "").await.unwrap();
        assert_eq!(reply.status, 200, "{key}");
        assert_eq!(reply.backend(), want, "{key}");
        reached.insert(want);
    }
    assert!(
        reached.len() >= 3,
        "keys spread over the backends: {reached:?}"
    );
}

/// The report series of `/metrics` for `endpoint` and `result`.
fn reports(text: &str, endpoint: &str, result: &str) -> f64 {
    metric(
        text,
        &format!("loadring_load_reports_total{{endpoint=\"{endpoint}\",result=\"{result}\"}}"),
    )
    .unwrap_or(0.0)
}

/// `--load-report orca`: every response's report reaches the balancer
/// (shown in `/status`, moving the cap), is removed before the client sees
/// it and is counted; a malformed one is ignored and counted; without the
/// flag the header passes through untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_reports_are_read_removed_counted_and_move_the_cap() {
    let backends = backends(3).await;
    for b in &backends {
        b.set_load_report(true);
    }
    let all: Vec<&DemoBackend> = backends.iter().collect();
    let mut c = cluster("c_murmurhash_bl:load_factor=1.25", &["header:x-user"], &all);
    c.load_report = Some("orca".parse().unwrap());
    let proxy = start(c).await;
    let keys = a_key_of_each(&proxy, 3).await;
    for i in 0..30 {
        let reply = get(proxy.addr, "/", &[("x-user", &format!("user{i}"))]).await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.header("endpoint-load-metrics"), None, "removed");
    }
    let text = proxy.metrics().await;
    let mut ok_total = 0.0;
    for b in &backends {
        let ok = reports(&text, &b.addr().to_string(), "ok");
        // Every request a backend answered came with a report that was used.
        assert_eq!(ok, b.requests() as f64, "{text}");
        ok_total += ok;
        assert_eq!(reports(&text, &b.addr().to_string(), "malformed"), 0.0);
    }
    assert!(ok_total >= 30.0, "{text}");
    let status: serde_json::Value =
        serde_json::from_str(&get(proxy.admin, "/status", &[]).await.body).unwrap();
    assert_eq!(status["clusters"][0]["load_report"], "orca:in_flight");
    for e in status["endpoints"].as_array().unwrap() {
        // One request at a time: each report says 0 others in service.
        assert_eq!(e["reported_load"], 0, "{e}");
        assert_eq!(e["in_flight"], 0, "{e}");
    }

    // A malformed report: ignored (the view keeps the last good one),
    // counted, removed.
    let (key, owner) = &keys[0];
    let owner_backend = backends
        .iter()
        .find(|b| b.addr().to_string() == *owner)
        .unwrap();
    owner_backend.set_load_report_text(Some("TEXT named_metrics.in_flight=lots"));
    let reply = get(proxy.addr, "/", &[("x-user", key)]).await;
    assert_eq!(reply.backend(), *owner);
    assert_eq!(reply.header("endpoint-load-metrics"), None);
    let text = proxy.metrics().await;
    assert_eq!(reports(&text, owner, "malformed"), 1.0, "{text}");

    // The owner reports 60 in service: the proxy's cap (ceil(1.25 x 61 / 3)
    // = 26) sends the key elsewhere while the report is fresh.
    owner_backend.set_load_report_text(Some(r#"JSON {"named_metrics": {"in_flight": 60}}"#));
    let reply = get(proxy.addr, "/", &[("x-user", key)]).await;
    assert_eq!(reply.backend(), *owner, "the report comes with this answer");
    let status: serde_json::Value =
        serde_json::from_str(&get(proxy.admin, "/status", &[]).await.body).unwrap();
    let shown = status["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["addr"] == owner.as_str())
        .unwrap()["reported_load"]
        .clone();
    assert_eq!(shown, 60, "{status}");
    let gauge = |text: &str, addr: &str| {
        metric(
            text,
            &format!("loadring_reported_load{{endpoint=\"{addr}\"}}"),
        )
    };
    let text = proxy.metrics().await;
    assert_eq!(gauge(&text, owner), Some(60.0), "{text}");
    let reply = get(proxy.addr, "/", &[("x-user", key)]).await;
    assert_ne!(
        reply.backend(),
        *owner,
        "spilled from a backend reported full"
    );

    // Without --load-report the proxy leaves the header alone.
    owner_backend.set_load_report_text(None);
    let plain = start(cluster(
        "c_murmurhash_bl:load_factor=1.25",
        &["header:x-user"],
        &all,
    ))
    .await;
    let reply = get(plain.addr, "/", &[("x-user", key)]).await;
    assert_eq!(
        reply.header("endpoint-load-metrics"),
        Some("TEXT named_metrics.in_flight=0")
    );
    let text = plain.metrics().await;
    assert_eq!(
        metric_sum(&text, "loadring_load_reports_total"),
        0.0,
        "{text}"
    );
    assert_eq!(
        gauge(&text, owner),
        None,
        "no series without reports: {text}"
    );
    let status: serde_json::Value =
        serde_json::from_str(&get(plain.admin, "/status", &[]).await.body).unwrap();
    assert_eq!(
        status["clusters"][0]["load_report"],
        serde_json::Value::Null
    );
    assert!(status["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["reported_load"].is_null()));
}

/// A client that leaves before the end of the body: the response is drained
/// and its report still reaches the balancer when the backend is done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drained_response_still_gives_its_report() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let b = backends(1).await;
    b[0].set_load_report(true);
    b[0].set_load_report_text(Some("TEXT named_metrics.in_flight=7"));
    // Reports stay fresh however slow the machine.
    let mut c = cluster(
        "c_murmurhash_bl:load_factor=1.25 report_max_age=60m",
        &["header:x-user"],
        &[&b[0]],
    );
    c.load_report = Some("orca".parse().unwrap());
    let proxy = start(c).await;
    let addr = b[0].addr().to_string();
    let gauge = format!("loadring_reported_load{{endpoint=\"{addr}\"}}");
    let mut stream = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
    let head = "GET /?drip=5 HTTP/1.1\r\nHost: x\r\nx-user: k\r\nConnection: close\r\n\r\n";
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut received = Vec::new();
    let mut buf = [0u8; 1024];
    while !String::from_utf8_lossy(&received).contains("line 0") {
        let n = tokio::time::timeout(common::STEP, stream.read(&mut buf))
            .await
            .unwrap()
            .unwrap();
        assert!(n > 0, "closed early");
        received.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&received).to_ascii_lowercase();
    assert!(!text.contains("endpoint-load-metrics"), "removed: {text}");
    // Still streaming: the report waits for the outcome.
    assert_eq!(metric(&proxy.metrics().await, &gauge), None);
    drop(stream);
    assert!(
        eventually(common::STEP, || async {
            proxy.in_flight_total().await == 0.0
        })
        .await,
        "released once the body is drained"
    );
    let text = proxy.metrics().await;
    assert_eq!(metric(&text, &gauge), Some(7.0), "{text}");
    assert_eq!(reports(&text, &addr, "ok"), 1.0, "{text}");
}
