//! The library as a proxy embeds it: typed backends, candidates for retries,
//! outcome feedback, identities, a policy written outside the crate, and
//! incremental membership that places keys exactly like a full build.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use loadring::policy::{first_reservable, Observer, Order, Picker, Policy, Pool};
use loadring::{Balancer, BuildError, Endpoint, Id, Outcome, PickError, PolicySpec, Request};
use proptest::prelude::*;

fn ep(text: &str) -> Endpoint {
    text.parse().unwrap()
}

fn keys(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("user:{i}")).collect()
}

// ------------------------------------------------------- a policy from outside

/// Picks the endpoint whose address sorts last (deliberately unlike any
/// built-in policy), falling back in reverse address order; counts outcomes.
#[derive(Debug)]
struct LastByName;

#[derive(Debug)]
struct LastByNamePicker {
    pool: Pool,
    order: Vec<usize>,
}

#[derive(Debug, Default)]
struct Tally {
    successes: AtomicU64,
    failures: AtomicU64,
    latency_ms: AtomicU64,
}

impl Observer for Tally {
    fn observe(&self, outcome: &Outcome) {
        if outcome.is_success() {
            self.successes.fetch_add(1, Relaxed);
        } else {
            self.failures.fetch_add(1, Relaxed);
        }
        self.latency_ms
            .fetch_add(outcome.latency().as_millis() as u64, Relaxed);
    }
}

impl Policy for LastByName {
    fn name(&self) -> &str {
        "last_by_name"
    }

    fn build(&self, pool: Pool) -> Result<Arc<dyn Picker>, BuildError> {
        let mut order: Vec<usize> = (0..pool.len()).collect();
        order.sort_by(|&a, &b| pool.endpoint(b).addr().cmp(pool.endpoint(a).addr()));
        Ok(Arc::new(LastByNamePicker { pool, order }))
    }

    fn observer(&self, _endpoint: &Endpoint) -> Option<Arc<dyn Observer>> {
        Some(Arc::new(Tally::default()))
    }
}

impl Picker for LastByNamePicker {
    fn pool(&self) -> &Pool {
        &self.pool
    }

    fn pick(&self, req: &Request<'_>) -> Result<usize, PickError> {
        first_reservable(self, self.order.iter().copied(), req)
    }

    fn candidates(self: Arc<Self>, _req: &Request<'_>) -> Result<Order, PickError> {
        let order = self.order.clone();
        Ok(Box::new(order.into_iter()))
    }
}

#[test]
fn a_policy_written_outside_the_crate_runs_with_guards_health_and_exclusions() {
    let backends = ["a:1", "c:1", "b:1"].map(|a| (ep(a), a.len()));
    let balancer = Balancer::with_policy(Arc::new(LastByName), backends).unwrap();
    let first = balancer.pick(&Request::new()).unwrap();
    assert_eq!(first.addr(), "c:1");
    assert_eq!(*first.value(), 3);
    assert_eq!(balancer.total_in_flight(), 1);

    balancer.set_healthy("c:1", false).unwrap();
    assert_eq!(balancer.pick(&Request::new()).unwrap().addr(), "b:1");
    let tried = ["b:1"];
    let excluded = balancer.pick(&Request::new().excluding(&tried)).unwrap();
    assert_eq!(excluded.addr(), "a:1");
    let all = ["a:1", "b:1"];
    assert_eq!(
        balancer.pick(&Request::new().excluding(&all)).unwrap_err(),
        PickError::no_eligible_endpoint(3)
    );
    drop((first, excluded));
    assert_eq!(balancer.total_in_flight(), 0);

    let order: Vec<String> = balancer
        .candidates(&Request::new())
        .unwrap()
        .map(|c| c.addr().to_string())
        .collect();
    assert_eq!(order, ["b:1", "a:1"], "unhealthy c is no candidate");
}

#[test]
fn outcomes_reach_the_policys_observer_and_a_plain_drop_reports_nothing() {
    // The observers live in the members, which the policy's pickers see.
    let probe = Arc::new(Probe::default());
    let balancer = Balancer::with_policy(probe.clone(), [(ep("a:1"), ())]).unwrap();
    balancer
        .pick(&Request::new())
        .unwrap()
        .finish(Outcome::success(Duration::from_millis(7)));
    balancer
        .pick(&Request::new())
        .unwrap()
        .finish(Outcome::failure(Duration::from_millis(5)));
    drop(balancer.pick(&Request::new()).unwrap());
    // The third pick saw the two outcomes before it; the plain drop after
    // it reports nothing.
    let seen = (*probe.seen.lock().unwrap()).expect("the picker ran");
    assert_eq!(seen, (1, 1, 12), "successes, failures, total latency in ms");
    assert_eq!(balancer.total_in_flight(), 0, "finish releases the slot");
}

/// A policy whose picker reads its observer back on each pick, to show what
/// a latency-aware policy sees.
#[derive(Debug, Default)]
struct Probe {
    seen: Arc<std::sync::Mutex<Option<(u64, u64, u64)>>>,
}

#[derive(Debug)]
struct ProbePicker {
    pool: Pool,
    seen: Arc<std::sync::Mutex<Option<(u64, u64, u64)>>>,
}

impl Policy for Probe {
    fn name(&self) -> &str {
        "probe"
    }
    fn build(&self, pool: Pool) -> Result<Arc<dyn Picker>, BuildError> {
        Ok(Arc::new(ProbePicker {
            pool,
            seen: self.seen.clone(),
        }))
    }
    fn observer(&self, _endpoint: &Endpoint) -> Option<Arc<dyn Observer>> {
        Some(Arc::new(Tally::default()))
    }
}

impl Picker for ProbePicker {
    fn pool(&self) -> &Pool {
        &self.pool
    }
    fn pick(&self, req: &Request<'_>) -> Result<usize, PickError> {
        let tally = self
            .pool
            .observer::<Tally>(0)
            .expect("a tally per endpoint");
        *self.seen.lock().unwrap() = Some((
            tally.successes.load(Relaxed),
            tally.failures.load(Relaxed),
            tally.latency_ms.load(Relaxed),
        ));
        first_reservable(self, 0..self.pool.len(), req)
    }
    fn candidates(self: Arc<Self>, _req: &Request<'_>) -> Result<Order, PickError> {
        Ok(Box::new(0..self.pool.len()))
    }
}

// ------------------------------------------------------------------ candidates

#[test]
fn candidates_walk_the_ring_each_endpoint_once_owner_first() {
    let endpoints: Vec<Endpoint> = (1..=8).map(|i| ep(&format!("10.0.0.{i}:80"))).collect();
    let balancer = Balancer::new("c_murmurhash".parse().unwrap(), endpoints).unwrap();
    for key in keys(200) {
        let req = Request::key(&key);
        let order: Vec<String> = balancer
            .candidates(&req)
            .unwrap()
            .map(|c| c.addr().to_string())
            .collect();
        assert_eq!(order.len(), 8, "{key}: every endpoint once");
        let mut sorted = order.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), 8, "{key}: no repeats");
        assert_eq!(order[0], balancer.route(&req).unwrap().unwrap().addr());
        // The second candidate is where the key goes once its owner is out:
        // the ring successor, as brpc's excluded servers and Envoy's retry
        // host predicate choose it.
        let tried = [order[0].as_str()];
        let retry = balancer.pick(&req.excluding(&tried)).unwrap();
        assert_eq!(retry.addr(), order[1], "{key}");
    }
}

#[test]
fn candidates_skip_excluded_and_unhealthy_endpoints_and_reserve_under_the_cap() {
    let endpoints: Vec<Endpoint> = ["a:1", "b:1", "c:1", "d:1"].map(ep).to_vec();
    let balancer = Balancer::new("c_md5:load_factor=1.25".parse().unwrap(), endpoints).unwrap();
    balancer.set_healthy("b:1", false).unwrap();
    let tried = ["c:1"];
    let req = Request::key("hot");
    let order: Vec<String> = balancer
        .candidates(&req.excluding(&tried))
        .unwrap()
        .map(|c| c.addr().to_string())
        .collect();
    assert_eq!(order.len(), 2, "{order:?}");
    assert!(!order.contains(&"b:1".to_string()) && !order.contains(&"c:1".to_string()));

    // With 4 endpoints and nothing in flight the cap is ceil(1.25 * 1 / 4) = 1.
    let first = balancer.candidates(&req).unwrap().next().unwrap();
    let held = first.try_reserve().expect("room under the cap");
    assert_eq!(held.in_flight(), 1);
    // Now total 1: cap ceil(1.25 * 2 / 4) = 1, full.
    assert!(
        first.try_reserve().is_none(),
        "the cap holds for candidates too"
    );
    let forced = first.reserve();
    assert_eq!(forced.in_flight(), 2, "reserve ignores the cap");
    drop((held, forced));
    assert_eq!(balancer.total_in_flight(), 0);
}

#[test]
fn candidates_outlive_a_membership_change() {
    let balancer = Balancer::new(
        "c_murmurhash".parse().unwrap(),
        ["a:1", "b:1", "c:1"].map(ep),
    )
    .unwrap();
    let req = Request::key("k");
    let mut candidates = balancer.candidates(&req).unwrap();
    let first = candidates.next().unwrap();
    balancer.update(["x:1"].map(ep)).unwrap();
    let rest: Vec<_> = candidates.collect();
    assert_eq!(
        rest.len(),
        2,
        "the candidates of the membership they came from"
    );
    let pick = first.reserve();
    drop(pick);
    assert_eq!(
        balancer.total_in_flight(),
        0,
        "a removed member's guard is harmless"
    );
}

// -------------------------------------------------------------------- identity

#[test]
fn health_exclusions_and_caps_take_the_identity_not_only_the_address() {
    let balancer = Balancer::new(
        "c_murmurhash_bl".parse().unwrap(),
        [ep("a:1"), ep("a:1 tag=canary"), ep("b:1")],
    )
    .unwrap();
    balancer
        .set_healthy(Id::new("a:1", Some("canary")), false)
        .unwrap();
    assert!(!balancer.is_healthy(Id::new("a:1", Some("canary"))).unwrap());
    assert!(
        balancer.is_healthy("a:1").unwrap(),
        "the untagged a stays healthy"
    );
    assert_eq!(
        balancer
            .set_healthy(Id::new("a:1", Some("nope")), false)
            .map_err(|e| e.id().to_string()),
        Err("a:1 tag=nope".to_string())
    );
    assert!(balancer
        .cap(Id::new("a:1", Some("canary")))
        .unwrap()
        .is_some());

    let canary = balancer
        .candidates(&Request::key("k"))
        .unwrap()
        .find(|c| c.endpoint().tag() == Some("canary"));
    assert!(canary.is_none(), "an unhealthy endpoint is no candidate");
    balancer
        .set_healthy(Id::new("a:1", Some("canary")), true)
        .unwrap();
    let only_canary = balancer
        .pick(&Request::key("k").excluding_ids(&[Id::from("a:1"), Id::from("b:1")]))
        .unwrap();
    assert_eq!(
        (only_canary.addr(), only_canary.tag()),
        ("a:1", Some("canary"))
    );
    drop(only_canary);
    balancer
        .set_healthy(Id::new("a:1", Some("canary")), false)
        .unwrap();

    let only_untagged_a = [Id::from("a:1")];
    for key in keys(100) {
        let pick = balancer
            .pick(&Request::key(&key).excluding_ids(&only_untagged_a))
            .unwrap();
        assert_eq!(pick.endpoint().id(), Id::from("b:1"), "{key}");
    }
}

// -------------------------------------------------------- incremental changes

#[derive(Debug, Clone)]
enum Step {
    Insert(u8, u32),
    Remove(u8),
    Weight(u8, u32),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0u8..12, 1u32..4).prop_map(|(n, w)| Step::Insert(n, w)),
        (0u8..12).prop_map(Step::Remove),
        (0u8..12, 0u32..4).prop_map(|(n, w)| Step::Weight(n, w)),
    ]
}

/// Endpoint `n`: four addresses, each under up to three tags. brpc names
/// points by address alone, so the tags of one address collide on every
/// point and the tie order decides who owns it.
fn endpoint(n: u8) -> Endpoint {
    let e = ep(&format!("10.0.{}.{}:80", n % 2, n % 4));
    match n / 4 {
        0 => e,
        t => e.with_tag(format!("t{t}")).unwrap(),
    }
}

fn owners(balancer: &Balancer, keys: &[String]) -> Vec<Option<String>> {
    keys.iter()
        .map(|k| {
            balancer
                .route(&Request::key(k))
                .ok()
                .flatten()
                .map(|e| e.endpoint().id().to_string())
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 48,
        ..ProptestConfig::default()
    })]

    /// Every one-endpoint change gives the placement of a balancer built
    /// from scratch over the resulting membership, for the rings that merge
    /// incrementally and for those that rebuild.
    #[test]
    fn incremental_changes_place_keys_like_a_full_build(
        spec in prop_oneof![
            Just("c_murmurhash:replicas=8"),
            Just("c_md5:replicas=8"),
            Just("c_ketama:replicas=8"),
            Just("c_murmurhash_bl:replicas=8"),
            Just("maglev:table_size=307"),
        ],
        steps in proptest::collection::vec(step(), 1..20),
    ) {
        let spec: PolicySpec = spec.parse().unwrap();
        let balancer = Balancer::new(spec.clone(), []).unwrap();
        let keys = keys(64);
        for step in steps {
            let result = match step {
                Step::Insert(n, w) => balancer.insert(endpoint(n).with_weight(w), ()).map(|_| ()).map_err(|e| e.to_string()),
                Step::Remove(n) => balancer.remove(&endpoint(n)).map_err(|e| e.to_string()),
                Step::Weight(n, w) => balancer.set_weight(&endpoint(n), w).map_err(|e| e.to_string()),
            };
            let fresh = Balancer::new(spec.clone(), balancer.endpoints());
            match fresh {
                Ok(fresh) => {
                    prop_assert_eq!(owners(&balancer, &keys), owners(&fresh, &keys), "{:?} -> {:?}", step, result);
                    prop_assert_eq!(balancer.layout().ok().flatten(), fresh.layout().ok().flatten());
                }
                Err(e) => prop_assert!(false, "the membership kept must build: {e}"),
            }
        }
    }
}

#[test]
fn a_change_that_leaves_every_weight_zero_is_refused_and_changes_nothing() {
    let balancer = Balancer::new("c_murmurhash".parse().unwrap(), [ep("a:1")]).unwrap();
    assert!(balancer.set_weight("a:1", 0).is_err());
    assert_eq!(balancer.endpoints(), [ep("a:1")]);
    assert!(balancer.remove("zzz").is_err());
    balancer.insert(ep("b:1"), ()).unwrap();
    balancer.remove("a:1").unwrap();
    balancer.remove("b:1").unwrap();
    assert_eq!(
        balancer.pick(&Request::key("k")).unwrap_err(),
        PickError::no_endpoints()
    );
}
