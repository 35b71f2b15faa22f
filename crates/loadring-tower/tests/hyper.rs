//! The tower service against real hyper servers on 127.0.0.1:0.

use crate::common;

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use http_body_util::{BodyExt, Full};
use loadring::{Balancer, Endpoint, LoadReport, PickErrorKind, Request};
use loadring_tower::{
    orca_report, ErrorKind, GuardedBody, Keyless, LoadRing, LoadRingLayer, RetryNext, Served,
};
use tokio::time::timeout;
use tower::discover::Change;
use tower::retry::RetryLayer;
use tower::{Service, ServiceBuilder, ServiceExt};

const SHARDS: [&str; 3] = ["shard-a:80", "shard-b:80", "shard-c:80"];

/// The tests' service: the shared client, keyed by the `x-user` header.
type ShardRing = LoadRing<Upstream, fn(&hyper::Request<Full<Bytes>>) -> Option<Bytes>>;

fn shard_endpoints() -> Vec<Endpoint> {
    SHARDS.iter().map(|a| Endpoint::new(*a).unwrap()).collect()
}

/// A service over `backends` whose endpoint identities are `SHARDS` (names,
/// not addresses: placement depends on them only); each endpoint service
/// connects to its backend on 127.0.0.1.
fn ring(spec: &str, backends: &[Arc<Backend>]) -> ShardRing {
    let client = client();
    let pairs = shard_endpoints()
        .into_iter()
        .zip(backends)
        .map(|(e, b)| (e, b.upstream(&client)));
    LoadRing::new(spec.parse().unwrap(), pairs, user_key as fn(&_) -> _).unwrap()
}

fn owner_name<T>(balancer: &Balancer<T>, key: &str) -> String {
    let owner = balancer.route(&Request::key(key)).unwrap().unwrap();
    let i = SHARDS.iter().position(|s| *s == owner.addr()).unwrap();
    ["a", "b", "c"][i].to_string()
}

/// Every request reaches the endpoint `loadring place` names for its key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn placement_equals_loadring_place() {
    timeout(WAIT, async {
        let (backends, _gate) = backends(&["a", "b", "c"]).await;
        // Literal owners from the command line, run once by hand:
        // see EXPECTED_PLACE.
        let expected = EXPECTED_PLACE;
        let mut svc = ring("c_murmurhash_bl", &backends);
        for (key, owner) in expected {
            let reply = svc
                .ready()
                .await
                .unwrap()
                .call(request("/", Some(key)))
                .await
                .unwrap();
            let name = text(reply.into_body()).await;
            assert_eq!(format!("shard-{name}:80"), *owner, "{key}");
        }
        // Other policies: the owner computed independently by a balancer of
        // the core library over the same endpoints.
        for spec in [
            "c_murmurhash_bl",
            "maglev:load_factor=1.25",
            "ring_hash",
            "ring_hash:hash_balance_factor=150",
            "ketama",
            "c_md5",
            "dubbo",
            "pixiu_ring:load_factor=1.25",
        ] {
            let reference = Balancer::new(spec.parse().unwrap(), shard_endpoints()).unwrap();
            let mut svc = ring(spec, &backends);
            for i in 0..40 {
                let key = format!("user:{i}");
                let reply = svc
                    .ready()
                    .await
                    .unwrap()
                    .call(request("/", Some(&key)))
                    .await
                    .unwrap();
                assert_eq!(
                    text(reply.into_body()).await,
                    owner_name(&reference, &key),
                    "{spec} {key}"
                );
            }
            assert_eq!(svc.balancer().total_in_flight(), 0);
        }
    })
    .await
    .unwrap();
}

/// The output of (run once by hand, with the binary built from this
/// repository's `crates/loadring-cli`, and pasted here):
/// `seq -f 'user:%g' 1 12 | loadring place --policy c_murmurhash_bl -e shard-a:80 -e shard-b:80 -e shard-c:80`
const EXPECTED_PLACE: &[(&str, &str)] = &[
    ("user:1", "shard-c:80"),
    ("user:2", "shard-b:80"),
    ("user:3", "shard-a:80"),
    ("user:4", "shard-c:80"),
    ("user:5", "shard-a:80"),
    ("user:6", "shard-c:80"),
    ("user:7", "shard-c:80"),
    ("user:8", "shard-c:80"),
    ("user:9", "shard-b:80"),
    ("user:10", "shard-a:80"),
    ("user:11", "shard-b:80"),
    ("user:12", "shard-c:80"),
];

/// 30 concurrent requests for one hot key, held at the backends: under
/// `c_murmurhash_bl` (load factor 1.25, 3 endpoints) no backend ever holds
/// more than cap(G + T) + T = ceil(1.25 * 32 / 3) + 2 = 16 of them (G = 30
/// guards, T = 2 picking threads; see `Balancer`'s "Bounded load under
/// concurrency"), where a plain ring would put all 30 on the key's owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_key_never_exceeds_cap_plus_slack() {
    timeout(WAIT, async {
        let (backends, gate) = backends(&["a", "b", "c"]).await;
        let svc = ring("c_murmurhash_bl:load_factor=1.25", &backends);
        let owner = owner_name(svc.balancer(), "viral");
        let calls: Vec<_> = (0..30)
            .map(|_| tokio::spawn(svc.clone().oneshot(request("/hold", Some("viral")))))
            .collect();
        until("30 requests at the backends", || {
            backends.iter().map(|b| b.hits()).sum::<usize>() == 30
        })
        .await;
        let loads: Vec<u64> = svc.balancer().loads().iter().map(|(_, l)| *l).collect();
        assert_eq!(loads.iter().sum::<u64>(), 30, "{loads:?}");
        for (b, load) in backends.iter().zip(&loads) {
            assert!(*load <= 16, "{}: {load} in flight, {loads:?}", b.name);
            assert!(
                b.peak() <= 16,
                "{}: peak {} at the server",
                b.name,
                b.peak()
            );
        }
        let owner_backend = backends.iter().find(|b| b.name == owner).unwrap();
        assert!(
            owner_backend.peak() >= 10,
            "the owner fills up to about its cap (13)"
        );
        gate.open();
        for call in calls {
            let reply = call.await.unwrap().unwrap();
            assert_eq!(reply.status(), 200);
        }
        assert_eq!(svc.balancer().total_in_flight(), 0);
    })
    .await
    .unwrap();
}

/// Default completion: the slot comes back when the response head arrives,
/// even though its body is still streaming.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guard_released_on_response() {
    timeout(WAIT, async {
        let (backends, gate) = backends(&["a", "b", "c"]).await;
        let mut svc = ring("c_murmurhash_bl", &backends);
        let call = svc
            .ready()
            .await
            .unwrap()
            .call(request("/stream", Some("user:7")));
        assert_eq!(svc.balancer().total_in_flight(), 1, "reserved in call");
        let reply = call.await.unwrap();
        assert_eq!(
            svc.balancer().total_in_flight(),
            0,
            "released on the response"
        );
        gate.open();
        assert_eq!(
            text(reply.into_body()).await,
            format!("{} done", owner_name(svc.balancer(), "user:7"))
        );
    })
    .await
    .unwrap();
}

/// `hold_until_body_end`: the slot is held while the body streams and
/// released at its end; dropping an unfinished body releases it too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guard_held_until_body_end() {
    timeout(WAIT, async {
        let (backends, gate) = backends(&["a", "b", "c"]).await;
        let mut svc = ring("c_murmurhash_bl", &backends).hold_until_body_end();
        let owner = owner_name(svc.balancer(), "user:7");

        let reply = svc
            .ready()
            .await
            .unwrap()
            .call(request("/stream", Some("user:7")))
            .await
            .unwrap();
        let served = reply.extensions().get::<Served>().unwrap().0.clone();
        assert_eq!(served.addr(), format!("shard-{owner}:80"));
        assert!(reply.body().is_holding());
        assert_eq!(
            svc.balancer().total_in_flight(),
            1,
            "held while the body streams"
        );
        // A body dropped before its end releases the slot.
        let second = svc
            .ready()
            .await
            .unwrap()
            .call(request("/stream", Some("user:7")))
            .await
            .unwrap();
        assert_eq!(svc.balancer().total_in_flight(), 2);
        drop(second);
        assert_eq!(svc.balancer().total_in_flight(), 1, "dropped body released");
        // The first frame (the backend's name) is read; the body goes on.
        let mut body: GuardedBody<_, _> = reply.into_body();
        let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(first, owner.as_bytes());
        assert!(body.is_holding(), "held after the first frame");
        assert_eq!(svc.balancer().total_in_flight(), 1);
        gate.open();
        assert_eq!(text(body).await, " done");
        assert_eq!(
            svc.balancer().total_in_flight(),
            0,
            "released at the body's end"
        );
    })
    .await
    .unwrap();
}

/// An endpoint that refuses connections: the error names it, and the slot
/// comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guard_released_on_error() {
    timeout(WAIT, async {
        let client = client();
        let dead = Endpoint::new(dead_addr().await.to_string()).unwrap();
        let upstream = loadring_tower::SetAuthority::new(client, &dead).unwrap();
        let mut svc = LoadRing::new(
            "c_murmurhash_bl".parse().unwrap(),
            [(Endpoint::new("shard-a:80").unwrap(), upstream)],
            user_key,
        )
        .unwrap();
        let err = svc
            .ready()
            .await
            .unwrap()
            .call(request("/", Some("user:1")))
            .await
            .unwrap_err();
        assert!(
            err.kind() == ErrorKind::Endpoint
                && err.endpoint().map(|e| e.addr()) == Some("shard-a:80"),
            "{err}"
        );
        assert_eq!(svc.balancer().total_in_flight(), 0, "released on the error");
    })
    .await
    .unwrap();
}

/// A response future dropped before it completes (a timeout, a client gone)
/// releases its slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guard_released_on_cancellation() {
    timeout(WAIT, async {
        let (backends, gate) = backends(&["a", "b", "c"]).await;
        let mut svc = ring("c_murmurhash_bl", &backends);
        let call = svc
            .ready()
            .await
            .unwrap()
            .call(request("/hold", Some("user:3")));
        assert_eq!(svc.balancer().total_in_flight(), 1);
        // Drive the request until it is held at the backend, then drop it.
        let mut call = Box::pin(call);
        tokio::select! {
            _ = &mut call => panic!("the request is held at the backend"),
            _ = until("the request at the backend", || {
                backends.iter().map(|b| b.hits()).sum::<usize>() == 1
            }) => {}
        }
        assert_eq!(svc.balancer().total_in_flight(), 1, "still held");
        drop(call);
        assert_eq!(
            svc.balancer().total_in_flight(),
            0,
            "released on cancellation"
        );
        gate.open();
    })
    .await
    .unwrap();
}

/// Membership from a `Discover` stream changing under traffic: every request
/// is answered, requests in flight on a removed endpoint finish there, and
/// endpoints that stay keep their in-flight counters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discover_mid_traffic_loses_no_request_and_keeps_counters() {
    timeout(WAIT, async {
        let (backends, gate) = backends(&["a", "b", "c", "d"]).await;
        let client = client();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<
            Result<Change<(usize, u32), Upstream>, Infallible>,
        >();
        // Keys: (backend index, weight); the identity depends on the index only.
        let insert = |i: usize, w: u32| {
            tx.send(Ok(Change::Insert((i, w), backends[i].upstream(&client))))
                .unwrap()
        };
        for i in 0..3 {
            insert(i, 1);
        }
        let (svc, driver) = LoadRing::discover(
            "c_murmurhash_bl".parse().unwrap(),
            tokio_stream::wrappers::UnboundedReceiverStream::new(rx),
            |&(i, w): &(usize, u32)| {
                Endpoint::new(format!("shard-{}:80", ["a", "b", "c", "d"][i]))
                    .map(|e| e.with_weight(w))
            },
            user_key,
        )
        .unwrap();
        let driver = tokio::spawn(driver);
        let mut svc2 = svc.clone();
        svc2.ready().await.unwrap();
        until("three endpoints", || svc.balancer().endpoints().len() == 3).await;

        // One request held on a (to be removed) and one on b (stays).
        let key_on = |name: &str| {
            (0..)
                .map(|i| format!("hold:{i}"))
                .find(|k| owner_name_any(svc.balancer(), k) == name)
                .unwrap()
        };
        let held_a = tokio::spawn(svc.clone().oneshot(request("/hold", Some(&key_on("a")))));
        let held_b = tokio::spawn(svc.clone().oneshot(request("/hold", Some(&key_on("b")))));
        until("both held", || {
            backends[0].current.load(SeqCst) == 1 && backends[1].current.load(SeqCst) == 1
        })
        .await;

        // Traffic: 4 clients x 50 requests while the membership changes.
        let done = Arc::new(AtomicUsize::new(0));
        let clients: Vec<_> = (0..4)
            .map(|c| {
                let svc = svc.clone();
                let done = done.clone();
                tokio::spawn(async move {
                    let mut ok = 0;
                    for i in 0..50 {
                        let key = format!("k{c}-{i}");
                        let reply = svc.clone().oneshot(request("/", Some(&key))).await;
                        if reply.is_ok_and(|r| r.status() == 200) {
                            ok += 1;
                        }
                        done.fetch_add(1, SeqCst);
                        tokio::time::sleep(Duration::from_millis(3)).await;
                    }
                    ok
                })
            })
            .collect();
        let addrs = || -> Vec<String> {
            svc.balancer()
                .endpoints()
                .iter()
                .map(|e| e.addr().to_string())
                .collect()
        };
        until("50 done", || done.load(SeqCst) >= 50).await;
        insert(3, 1); // d joins
        until("d in", || addrs().len() == 4).await;
        until("100 done", || done.load(SeqCst) >= 100).await;
        tx.send(Ok(Change::Remove((0, 1)))).unwrap(); // a leaves, a request still on it
        until("a out", || {
            addrs() == ["shard-b:80", "shard-c:80", "shard-d:80"]
        })
        .await;
        until("150 done", || done.load(SeqCst) >= 150).await;
        insert(1, 2); // b again: a new service value and weight, the same member
        until("b reweighted", || {
            svc.balancer().endpoints()[0].weight() == 2
        })
        .await;
        assert!(
            done.load(SeqCst) < 200,
            "the changes came during the traffic"
        );
        let mut ok = 0;
        for c in clients {
            ok += c.await.unwrap();
        }
        assert_eq!(ok, 200, "every request answered");
        assert_eq!(addrs(), ["shard-b:80", "shard-c:80", "shard-d:80"]);

        // Counters: b's held request still counted; a's left the total with a.
        let loads: Vec<u64> = svc.balancer().loads().iter().map(|(_, l)| *l).collect();
        assert_eq!(loads, [1, 0, 0], "b keeps its in-flight request");
        assert_eq!(svc.balancer().total_in_flight(), 1);
        gate.open();
        let a = held_a.await.unwrap().unwrap();
        assert_eq!(
            text(a.into_body()).await,
            "a",
            "the removed endpoint finished its request"
        );
        let b = held_b.await.unwrap().unwrap();
        assert_eq!(text(b.into_body()).await, "b");
        assert_eq!(svc.balancer().total_in_flight(), 0);
        let hits: usize = backends.iter().map(|b| b.hits()).sum();
        assert_eq!(hits, 202, "no request lost or duplicated");
        assert!(backends[3].hits() > 0, "d took traffic after joining");

        drop(tx);
        driver.await.unwrap().unwrap();
    })
    .await
    .unwrap();
}

fn owner_name_any(balancer: &Balancer<Upstream>, key: &str) -> String {
    let owner = balancer.route(&Request::key(key)).unwrap().unwrap();
    owner.addr()[6..7].to_string()
}

/// `poll_ready` waits for discovery's first endpoint; with no discovery
/// running and no endpoint it fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_follows_membership() {
    timeout(WAIT, async {
        let (backends, _gate) = backends(&["a"]).await;
        let (tx, rx) =
            tokio::sync::mpsc::unbounded_channel::<Result<Change<&str, Upstream>, Infallible>>();
        let (mut svc, driver) = LoadRing::discover(
            "c_murmurhash".parse().unwrap(),
            tokio_stream::wrappers::UnboundedReceiverStream::new(rx),
            |k: &&str| Endpoint::new(*k),
            user_key,
        )
        .unwrap();
        let driver = tokio::spawn(driver);
        assert!(
            timeout(Duration::from_millis(100), svc.ready())
                .await
                .is_err(),
            "pending without endpoints"
        );
        let waiting = tokio::spawn({
            let svc = svc.clone();
            async move {
                svc.oneshot(request("/", Some("user:1")))
                    .await
                    .map(|r| r.status())
            }
        });
        tx.send(Ok(Change::Insert(
            "shard-a:80",
            backends[0].upstream(&client()),
        )))
        .unwrap();
        assert_eq!(waiting.await.unwrap().unwrap(), 200, "woken by the insert");
        tx.send(Ok(Change::Remove("shard-a:80"))).unwrap();
        drop(tx);
        driver.await.unwrap().unwrap();
        let err = svc.ready().await.unwrap_err();
        assert!(
            err.kind() == ErrorKind::Pick
                && err.pick_error().map(|e| e.kind()) == Some(PickErrorKind::NoEndpoints),
            "{err}"
        );

        let mut empty = LoadRing::new(
            "rr".parse().unwrap(),
            Vec::<(Endpoint, Upstream)>::new(),
            user_key,
        )
        .unwrap();
        let err = empty.ready().await.unwrap_err();
        assert_eq!(
            err.pick_error().map(|e| e.kind()),
            Some(PickErrorKind::NoEndpoints),
            "{err}"
        );
    })
    .await
    .unwrap();
}

/// `RetryNext` under `tower::retry::Retry`: a failing owner (a 500, or a
/// refused connection) is retried on the key's next candidate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_go_to_the_next_candidate() {
    timeout(WAIT, async {
        let (backends, _gate) = backends(&["a", "b", "c"]).await;
        let ring = ring("c_murmurhash_bl", &backends).hold_until_body_end();
        let order: Vec<usize> = ring
            .balancer()
            .candidates(&Request::key("user:9"))
            .unwrap()
            .map(|c| SHARDS.iter().position(|s| *s == c.addr()).unwrap())
            .collect();
        assert_eq!(order.len(), 3);
        let mut svc = ServiceBuilder::new()
            .layer(RetryLayer::new(RetryNext::new(2)))
            .service(ring.clone());
        let mut send = async || {
            let reply = svc
                .ready()
                .await
                .unwrap()
                .call(request("/", Some("user:9")))
                .await
                .unwrap();
            (reply.status().as_u16(), text(reply.into_body()).await)
        };
        assert_eq!(
            send().await,
            (200, backends[order[0]].name.clone()),
            "the owner"
        );
        backends[order[0]].fail.store(true, SeqCst);
        assert_eq!(
            send().await,
            (200, backends[order[1]].name.clone()),
            "the successor"
        );
        backends[order[1]].fail.store(true, SeqCst);
        assert_eq!(
            send().await,
            (200, backends[order[2]].name.clone()),
            "the third"
        );
        backends[order[2]].fail.store(true, SeqCst);
        assert_eq!(
            send().await,
            (500, backends[order[2]].name.clone()),
            "two retries, then the last answer"
        );
        let hits: Vec<usize> = order.iter().map(|&i| backends[i].hits()).collect();
        assert_eq!(hits, [4, 3, 2], "each attempt once per endpoint");
        assert_eq!(ring.balancer().total_in_flight(), 0);

        // A refused connection is retried too.
        let client = client();
        let dead = Endpoint::new(dead_addr().await.to_string()).unwrap();
        let pairs = shard_endpoints().into_iter().enumerate().map(|(i, e)| {
            let upstream = if i == order[0] {
                loadring_tower::SetAuthority::new(client.clone(), &dead).unwrap()
            } else {
                backends[i].upstream(&client)
            };
            (e, upstream)
        });
        backends[order[1]].fail.store(false, SeqCst);
        let ring = LoadRing::new("c_murmurhash_bl".parse().unwrap(), pairs, user_key)
            .unwrap()
            .hold_until_body_end();
        let reply = ServiceBuilder::new()
            .layer(RetryLayer::new(RetryNext::new(1)))
            .service(ring.clone())
            .oneshot(request("/", Some("user:9")))
            .await
            .unwrap();
        assert_eq!(text(reply.into_body()).await, backends[order[1]].name);
        assert_eq!(ring.balancer().total_in_flight(), 0);
    })
    .await
    .unwrap();
}

/// Requests without a key: spread over every endpoint (hashing policies by
/// a rotating key, others by their own pick), or rejected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyless_requests_spread_or_are_rejected() {
    timeout(WAIT, async {
        let (backends, _gate) = backends(&["a", "b", "c"]).await;
        let mut svc = ring("c_murmurhash_bl", &backends);
        for _ in 0..60 {
            svc.ready()
                .await
                .unwrap()
                .call(request("/", None))
                .await
                .unwrap();
        }
        let hits: Vec<usize> = backends.iter().map(|b| b.hits()).collect();
        assert!(
            hits.iter().all(|&h| h >= 5),
            "spread over all three: {hits:?}"
        );

        let mut rr = ring("rr", &backends);
        for _ in 0..60 {
            rr.ready()
                .await
                .unwrap()
                .call(request("/", None))
                .await
                .unwrap();
        }
        let more: Vec<usize> = backends
            .iter()
            .zip(&hits)
            .map(|(b, h)| b.hits() - h)
            .collect();
        assert_eq!(more, [20, 20, 20], "round robin");

        let mut strict = ring("c_murmurhash_bl", &backends).keyless(Keyless::Reject);
        let err = strict
            .ready()
            .await
            .unwrap()
            .call(request("/", None))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::MissingKey, "{err}");
        assert_eq!(
            backends.iter().map(|b| b.hits()).sum::<usize>(),
            120,
            "nothing sent"
        );
    })
    .await
    .unwrap();
}

/// An endpoint service that never gets ready.
#[derive(Clone)]
struct NeverReady;

impl Service<String> for NeverReady {
    type Response = String;
    type Error = Infallible;
    type Future = std::future::Ready<Result<String, Infallible>>;
    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        std::task::Poll::Pending
    }
    fn call(&mut self, req: String) -> Self::Future {
        std::future::ready(Ok(req))
    }
}

/// The endpoint's readiness is awaited inside the response future with the
/// slot already held: waiting requests count in the endpoint's load (a
/// bounded policy sends the next ones elsewhere), and cancelling a request
/// that is still waiting releases its slot.
#[tokio::test]
async fn endpoint_readiness_is_awaited_with_the_guard_held() {
    let backends = ["a:80", "b:80", "c:80"].map(|a| (Endpoint::new(a).unwrap(), NeverReady));
    let mut svc = LoadRing::new(
        "c_murmurhash_bl:load_factor=1.25".parse().unwrap(),
        backends,
        |k: &String| Some(k.clone()),
    )
    .unwrap();
    let first = svc.ready().await.unwrap().call("viral".to_string());
    let second = svc.ready().await.unwrap().call("viral".to_string());
    let loads: Vec<u64> = svc.balancer().loads().iter().map(|(_, l)| *l).collect();
    // cap = ceil(1.25 * 2 / 3) = 1: the second waiting request spilled.
    assert_eq!(loads.iter().sum::<u64>(), 2);
    assert!(loads.iter().all(|&l| l <= 1), "{loads:?}");
    // NeverReady never is: one poll shows it waits, and dropping the
    // request cancels it.
    assert!(
        futures_util::FutureExt::now_or_never(first).is_none(),
        "still waiting"
    );
    assert_eq!(
        svc.balancer().total_in_flight(),
        1,
        "the cancelled request's slot is back"
    );
    drop(second);
    assert_eq!(svc.balancer().total_in_flight(), 0);
}

/// `load_report(orca_report(..))`: the report in each response reaches the
/// balancer with the outcome (at the response, or at the end of the body
/// with `hold_until_body_end`), and a bounded policy spills a key whose
/// owner reports itself full; a malformed report is ignored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orca_reports_reach_the_balancer_and_move_the_cap() {
    timeout(WAIT, async {
        for hold in [false, true] {
            let (backends, _gate) = backends(&["a", "b", "c"]).await;
            let spec = "c_murmurhash_bl:load_factor=1.25";
            let hook = orca_report("in_flight").unwrap();
            let plain = ring(spec, &backends);
            let owner = owner_name(plain.balancer(), "viral");
            // One other backend sends a report that cannot be read.
            let nan = if owner == "b" { "a" } else { "b" };
            for b in &backends {
                let report = if b.name == owner {
                    "TEXT named_metrics.in_flight=40, cpu_utilization=0.9"
                } else if b.name == nan {
                    "TEXT named_metrics.in_flight=NaN"
                } else {
                    r#"JSON {"named_metrics": {"in_flight": 0}}"#
                };
                *b.report.lock().unwrap() = Some(report.to_string());
            }
            // Two services over the same backends: the completions differ.
            let responses: Vec<String> = if hold {
                let svc = plain.hold_until_body_end().load_report(hook);
                let mut names = Vec::new();
                for _ in 0..2 {
                    let reply = svc
                        .clone()
                        .oneshot(request("/", Some("viral")))
                        .await
                        .unwrap();
                    names.push(text(reply.into_body()).await);
                }
                check_reports(&svc.balancer().reported_loads(), &owner, nan);
                names
            } else {
                let svc = plain.load_report(hook);
                let mut names = Vec::new();
                for _ in 0..2 {
                    let reply = svc
                        .clone()
                        .oneshot(request("/", Some("viral")))
                        .await
                        .unwrap();
                    names.push(text(reply.into_body()).await);
                }
                check_reports(&svc.balancer().reported_loads(), &owner, nan);
                names
            };
            // First: no report yet, the owner. Then the owner reports 40 in
            // service (cap ceil(1.25 x 41 / 3) = 18): the key spills.
            assert_eq!(responses[0], owner, "hold={hold}");
            assert_ne!(responses[1], owner, "hold={hold}: {responses:?}");
        }
    })
    .await
    .unwrap();
}

/// The owner's report is in the view; the malformed one is not.
fn check_reports(loads: &[(Endpoint, Option<u64>)], owner: &str, nan: &str) {
    let load = |name: &str| {
        loads
            .iter()
            .find(|(e, _)| e.addr() == format!("shard-{name}:80"))
            .unwrap()
            .1
    };
    assert_eq!(load(owner), Some(40), "{loads:?}");
    assert_eq!(load(nan), None, "the NaN report is not used: {loads:?}");
}

/// Any function of the response is a hook: here one that reports a fixed
/// count for every response.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closure_is_a_report_hook() {
    timeout(WAIT, async {
        let (backends, _gate) = backends(&["a", "b", "c"]).await;
        let svc = ring("c_murmurhash_bl:load_factor=1.25", &backends)
            .load_report(|_: &hyper::Response<hyper::body::Incoming>| Some(LoadReport::new(7)));
        let owner = owner_name(svc.balancer(), "user:1");
        let reply = svc
            .clone()
            .oneshot(request("/", Some("user:1")))
            .await
            .unwrap();
        assert_eq!(text(reply.into_body()).await, owner);
        let loads = svc.balancer().reported_loads();
        let owned: Vec<_> = loads.iter().filter(|(_, l)| l.is_some()).collect();
        assert_eq!(owned.len(), 1, "{loads:?}");
        assert_eq!(owned[0].0.addr(), format!("shard-{owner}:80"));
        assert_eq!(owned[0].1, Some(7));
    })
    .await
    .unwrap();
}

/// The layer takes the same hook: the services it makes give each
/// response's report to their balancer when the body ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_layer_reads_reports_too() {
    timeout(WAIT, async {
        let (backends, _gate) = backends(&["a", "b"]).await;
        for (b, count) in backends.iter().zip([3, 9]) {
            *b.report.lock().unwrap() = Some(format!("TEXT named_metrics.in_flight={count}"));
        }
        let endpoints: Vec<Endpoint> = backends
            .iter()
            .map(|b| Endpoint::new(b.addr.to_string()).unwrap())
            .collect();
        let layer = LoadRingLayer::new(
            "c_murmurhash_bl:load_factor=1.25".parse().unwrap(),
            endpoints,
            user_key as fn(&_) -> _,
        )
        .unwrap()
        .hold_until_body_end()
        .load_report(orca_report("in_flight").unwrap());
        let svc = ServiceBuilder::new().layer(layer).service(client());
        // Keys until both backends have answered.
        let mut seen = std::collections::HashSet::new();
        for i in 0..64 {
            let reply = svc
                .clone()
                .oneshot(request("/", Some(&format!("user:{i}"))))
                .await
                .unwrap();
            let body = reply.into_body();
            seen.insert(text(body).await);
            if seen.len() == 2 {
                break;
            }
        }
        assert_eq!(seen.len(), 2, "both backends answered");
        let loads = svc.balancer().reported_loads();
        for (b, count) in backends.iter().zip([3u64, 9]) {
            let load = loads
                .iter()
                .find(|(e, _)| e.addr() == b.addr.to_string())
                .unwrap()
                .1;
            assert_eq!(load, Some(count), "{}: {loads:?}", b.name);
        }
    })
    .await
    .unwrap();
}
