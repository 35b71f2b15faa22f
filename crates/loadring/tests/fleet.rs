//! The fleet view of issue 29: a backend reports its requests in service, and
//! bounded policies count an endpoint's load as "its last report plus this
//! balancer's picks on it since that report, minus those that completed
//! since", the local count when the report is older than `report_max_age=`,
//! and never below this balancer's own requests in flight on the endpoint (a
//! report counts the other balancers' requests as at least 0).
//!
//! The model below is written from those words: it keeps, per endpoint, the
//! last report, its time and a count of picks and completions since, and
//! never looks at the balancer's own bookkeeping (which keeps an offset
//! against its in-flight count).

use std::time::Duration;

use loadring::{Balancer, Endpoint, LoadReport, Outcome, Pick, PolicySpec, Request};
use proptest::prelude::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn endpoints(n: usize) -> Vec<Endpoint> {
    (0..n)
        .map(|i| Endpoint::new(format!("e{i}")).unwrap())
        .collect()
}

fn balancer(spec: &str, n: usize) -> Balancer {
    Balancer::new(spec.parse().unwrap(), endpoints(n)).unwrap()
}

/// A pick of `e0` (the other endpoint excluded) at time `at`.
fn pick_e0(b: &Balancer, at: Duration) -> Pick {
    let pick = b
        .pick(&Request::key("k").excluding(&["e1"]).at(at))
        .unwrap();
    assert_eq!(pick.addr(), "e0");
    pick
}

fn e0_view(b: &Balancer, at: Duration) -> Option<u64> {
    b.reported_loads_at(at)[0].1
}

/// Report, picks, completions, and the report ageing past the max age, step
/// by step on one endpoint.
#[test]
fn a_report_plus_picks_since_minus_completions_since_until_it_ages() {
    let b = balancer("c_murmurhash_bl", 2);
    assert_eq!(
        b.reported_loads_at(ms(0))
            .into_iter()
            .map(|(_, l)| l)
            .collect::<Vec<_>>(),
        [None, None],
        "nothing reported yet"
    );
    let before = pick_e0(&b, ms(0));
    b.report_load("e0", LoadReport::new(10).at(ms(1))).unwrap();
    assert_eq!(e0_view(&b, ms(1)), Some(10), "the report alone");
    let p2 = pick_e0(&b, ms(2));
    let p3 = pick_e0(&b, ms(2));
    assert_eq!(e0_view(&b, ms(2)), Some(12), "two picks since");
    drop(p2);
    assert_eq!(e0_view(&b, ms(3)), Some(11), "one of them completed");
    drop(before);
    assert_eq!(
        e0_view(&b, ms(3)),
        Some(10),
        "a request the report counted completed since"
    );
    assert_eq!(e0_view(&b, ms(1001)), Some(10), "1 s old: still fresh");
    assert_eq!(e0_view(&b, ms(1002)), None, "older than 1 s: local count");
    assert_eq!(b.loads()[0].1, 1, "the local count: p3");
    assert_eq!(b.reported_loads_at(ms(2))[1].1, None, "e1 never reported");
    drop(p3);
    assert_eq!(e0_view(&b, ms(4)), Some(9));
}

/// A report that comes with an outcome already leaves its own request out;
/// a report on its own counts every request still held.
#[test]
fn a_report_with_an_outcome_is_one_event_with_the_completion() {
    let b = balancer("c_murmurhash_bl", 2);
    let done = pick_e0(&b, ms(0));
    let other = pick_e0(&b, ms(0));
    done.finish(Outcome::success(ms(1)).with_report(LoadReport::new(4).at(ms(1))));
    assert_eq!(e0_view(&b, ms(1)), Some(4), "4 in service, ours included");
    drop(other);
    assert_eq!(e0_view(&b, ms(1)), Some(3));

    let b = balancer("c_murmurhash_bl", 2);
    let done = pick_e0(&b, ms(0));
    let other = pick_e0(&b, ms(0));
    b.report_load("e0", LoadReport::new(4).at(ms(1))).unwrap();
    assert_eq!(e0_view(&b, ms(1)), Some(4));
    done.finish(Outcome::success(ms(1)));
    assert_eq!(
        e0_view(&b, ms(1)),
        Some(3),
        "a completion after a report on its own lowers the view"
    );
    drop(other);
    assert_eq!(e0_view(&b, ms(1)), Some(2));
}

/// A local handle's guards report the same way.
#[test]
fn a_local_handles_guard_applies_its_report() {
    let b = balancer("c_murmurhash_bl", 2);
    let local = b.local();
    let held = local
        .pick(&Request::key("k").excluding(&["e1"]).at(ms(0)))
        .unwrap();
    let done = local
        .pick(&Request::key("k").excluding(&["e1"]).at(ms(0)))
        .unwrap();
    done.finish(Outcome::success(ms(1)).with_report(LoadReport::new(7).at(ms(1))));
    assert_eq!(e0_view(&b, ms(1)), Some(7));
    drop(held);
    assert_eq!(e0_view(&b, ms(1)), Some(6));
}

/// A backend that counts fewer requests than this balancer has in flight on
/// it (some still on their way there, or their responses on their way back):
/// the view never goes below this balancer's own count, and the picks and
/// completions since move it from there.
#[test]
fn the_view_never_goes_below_this_balancers_own_count() {
    let b = balancer("c_murmurhash_bl", 2);
    let mut held = vec![pick_e0(&b, ms(0)), pick_e0(&b, ms(0)), pick_e0(&b, ms(0))];
    b.report_load("e0", LoadReport::new(1).at(ms(0))).unwrap();
    assert_eq!(e0_view(&b, ms(0)), Some(3), "our 3, not the backend's 1");
    held.pop();
    assert_eq!(e0_view(&b, ms(0)), Some(2));
    held.push(pick_e0(&b, ms(0)));
    held.push(pick_e0(&b, ms(0)));
    assert_eq!(
        e0_view(&b, ms(0)),
        Some(4),
        "not 1 + 2 picks - 1 completion"
    );
    held.clear();
    assert_eq!(e0_view(&b, ms(0)), Some(0));
    b.report_load("e0", LoadReport::new(5).at(ms(1))).unwrap();
    assert_eq!(e0_view(&b, ms(1)), Some(5), "5 of the others: as reported");
}

/// Requests completing together: the first completion's report counts
/// none of its siblings (their backend already finished them), yet this
/// balancer has not heard of them yet. The cap still holds: the hole would
/// let a balancer put its own picks past it until the next report.
#[test]
fn a_report_of_a_burst_of_completions_does_not_open_room_past_the_cap() {
    // Two endpoints, loadring's cap at F = 1.25: ceil(1.25 (T + 1) / 2).
    let b = balancer("c_murmurhash_bl", 2);
    let owned_by_e0 = (0..)
        .map(|n: u32| format!("key-{n}"))
        .find(|k| {
            let route = b.route(&Request::key(k.as_bytes())).unwrap();
            route.is_some_and(|r| r.addr() == "e0")
        })
        .unwrap();
    let mut held: Vec<Pick> = (0..4).map(|_| pick_e0(&b, ms(0))).collect();
    let first = held.remove(0);
    first.finish(Outcome::success(ms(1)).with_report(LoadReport::new(0).at(ms(1))));
    // 3 held on e0; e1 idle. A key owned by e0 must spill once e0 is at
    // ceil(1.25 (T + 1) / 2): T = 3 -> cap 3, so the next pick goes to e1.
    let next = b
        .pick(&Request::key(owned_by_e0.as_bytes()).at(ms(1)))
        .unwrap();
    assert_eq!(next.addr(), "e1", "e0 holds 3 of ours: at its cap");
}

#[test]
fn a_report_for_an_unknown_endpoint_is_an_error() {
    let b = balancer("c_murmurhash_bl", 2);
    let err = b.report_load("e9", LoadReport::new(1)).unwrap_err();
    assert_eq!(err.id(), "e9");
    assert_eq!(err.to_string(), "unknown endpoint `e9`");
    assert!(b.reported_loads().iter().all(|(_, l)| l.is_none()));
}

/// Every bounded policy, in spec form.
const BOUNDED: &[&str] = &[
    "c_murmurhash_bl",
    "c_md5:load_factor=1.25",
    "ketama:balance=150",
    "ring_hash:load_factor=1.5",
    "ring_hash:hash_balance_factor=150",
    "maglev:hash_balance_factor=125",
    "haproxy_hash:type=consistent balance=125",
    "haproxy_hash:type=map-based balance=125",
    "nginx_hash:load_factor=1.5",
    "nginx_hash:consistent=true load_factor=1.5",
    "twemproxy:load_factor=1.5",
    "zone_first over c_murmurhash_bl:report_max_age=10ms",
];

/// The key's owner, then the same pick with the owner reported full: every
/// bounded policy spills it to the other endpoint while the report is
/// fresh, and keeps it at the owner once the report is older than the max
/// age (the local count, 0, is back).
#[test]
fn every_bounded_policy_spills_from_an_endpoint_reported_full() {
    for &spec in BOUNDED {
        let max_age = if spec.contains("10ms") { 10 } else { 1000 };
        for key in ["a", "b", "c", "d"] {
            let b = balancer(spec, 2);
            let req = Request::key(key).at(ms(0));
            let owner = b.route(&req).unwrap().unwrap().addr().to_string();
            let other = if owner == "e0" { "e1" } else { "e0" };
            b.report_load(owner.as_str(), LoadReport::new(100).at(ms(0)))
                .unwrap();
            let fresh = b.pick(&Request::key(key).at(ms(max_age))).unwrap();
            assert_eq!(
                fresh.addr(),
                other,
                "{spec}, key {key}: owner reported full"
            );
            drop(fresh);
            let stale = b.pick(&Request::key(key).at(ms(max_age + 1))).unwrap();
            assert_eq!(
                stale.addr(),
                owner,
                "{spec}, key {key}: the report aged out"
            );
        }
    }
}

/// The mean is taken over the reported loads: an owner reported at 12 next
/// to an endpoint reported at 10 is well below every policy's cap for 22 in
/// flight, so the key stays home (over the local counts, 0 in flight, both
/// would be past the cap and the lighter one, the other, would win).
#[test]
fn the_mean_is_taken_over_the_reported_loads() {
    for &spec in BOUNDED {
        for key in ["a", "b", "c", "d"] {
            let b = balancer(spec, 2);
            let req = Request::key(key).at(ms(0));
            let owner = b.route(&req).unwrap().unwrap().addr().to_string();
            let other = if owner == "e0" { "e1" } else { "e0" };
            b.report_load(owner.as_str(), LoadReport::new(12).at(ms(0)))
                .unwrap();
            b.report_load(other, LoadReport::new(10).at(ms(0))).unwrap();
            assert_eq!(b.pick(&req).unwrap().addr(), owner, "{spec}, key {key}");
        }
    }
}

/// Without a bound, reports change no placement.
#[test]
fn plain_hashing_ignores_reports() {
    let b = balancer("c_murmurhash", 2);
    let req = Request::key("a");
    let owner = b.route(&req).unwrap().unwrap().addr().to_string();
    b.report_load(owner.as_str(), LoadReport::new(1000))
        .unwrap();
    assert_eq!(b.pick(&req).unwrap().addr(), owner);
}

#[test]
fn report_max_age_is_parsed_and_checked() {
    let spec: PolicySpec = "c_murmurhash_bl:report_max_age=250ms".parse().unwrap();
    assert_eq!(spec.report_max_age(), Some(ms(250)));
    let spec: PolicySpec = "haproxy_hash:type=consistent balance=125 report_max_age=2s"
        .parse()
        .unwrap();
    assert_eq!(spec.report_max_age(), Some(ms(2000)));
    let spec: PolicySpec = "zone_first over maglev:hash_balance_factor=150 report_max_age=1m"
        .parse()
        .unwrap();
    assert_eq!(spec.report_max_age(), Some(ms(60_000)));
    assert_eq!(
        "ring_hash:load_factor=1.5"
            .parse::<PolicySpec>()
            .unwrap()
            .report_max_age(),
        Some(loadring::DEFAULT_REPORT_MAX_AGE)
    );
    let range = "accepted a whole number of ms, s, m or h from 1ms to 1h (e.g. 500ms, 10s, 1m)";
    for (text, message) in [
        (
            "c_murmurhash_bl:report_max_age=0ms",
            format!("c_murmurhash_bl: report_max_age=0ms is out of range: {range}"),
        ),
        (
            "c_murmurhash_bl:report_max_age=61m",
            format!("c_murmurhash_bl: report_max_age=61m is out of range: {range}"),
        ),
        (
            "maglev:hash_balance_factor=150 report_max_age=1.5s",
            format!("maglev: report_max_age=1.5s is not a whole number with a unit: {range}"),
        ),
        (
            "c_murmurhash_bl:report_max_age=10",
            format!("c_murmurhash_bl: report_max_age=10 has no unit: {range}"),
        ),
        (
            "c_murmurhash:report_max_age=1s",
            "c_murmurhash: report_max_age applies to bounded policies only (give load_factor, \
             balance or hash_balance_factor too)"
                .to_string(),
        ),
        (
            "rr:report_max_age=1s",
            "rr: report_max_age applies to bounded policies only (give load_factor, balance or \
             hash_balance_factor too)"
                .to_string(),
        ),
        (
            "zone_first:report_max_age=1s over c_murmurhash_bl",
            "zone_first: report_max_age belongs on the inner hashing policy, e.g. \
             `zone_first over c_murmurhash:report_max_age=...`"
                .to_string(),
        ),
    ] {
        let err = text.parse::<PolicySpec>().unwrap_err();
        assert_eq!(err.to_string(), message, "{text}");
        assert_eq!(err.key(), Some("report_max_age"), "{text}");
        assert!(!err.to_string().contains('\n'));
    }
}

#[derive(Debug, Clone)]
enum Op {
    Pick(u8),
    Complete(u8),
    FinishWithReport(u8, u16),
    Report(u8, u16),
    Advance(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => any::<u8>().prop_map(Op::Pick),
        3 => any::<u8>().prop_map(Op::Complete),
        1 => (any::<u8>(), 0u16..40).prop_map(|(i, r)| Op::FinishWithReport(i, r)),
        2 => (any::<u8>(), 0u16..40).prop_map(|(e, r)| Op::Report(e, r)),
        1 => (0u8..30).prop_map(Op::Advance),
    ]
}

const N: usize = 4;
const MAX_AGE_MS: u64 = 50;

/// One endpoint as the issue describes it.
#[derive(Debug, Clone, Default)]
struct Model {
    /// This balancer's requests in flight on it.
    local: u64,
    /// The last report: requests in service, its time, and this balancer's
    /// picks and completions on the endpoint since.
    report: Option<(u64, Duration)>,
    picks_since: u64,
    completed_since: u64,
}

impl Model {
    /// The load bounded policies use at `now`, if the report is fresh.
    fn view(&self, now: Duration) -> Option<u64> {
        let (reported, at) = self.report?;
        if now.saturating_sub(at) > ms(MAX_AGE_MS) {
            return None;
        }
        let load = reported as i64 + self.picks_since as i64 - self.completed_since as i64;
        Some(load.max(self.local as i64) as u64)
    }

    fn load(&self, now: Duration) -> u64 {
        self.view(now).unwrap_or(self.local)
    }

    fn report(&mut self, reported: u64, at: Duration) {
        self.report = Some((reported, at));
        self.picks_since = 0;
        self.completed_since = 0;
    }

    fn complete(&mut self) {
        self.local -= 1;
        self.completed_since += 1;
    }
}

/// The room an endpoint has under a rule, from the rule's words, for
/// equal weights over [`N`] endpoints holding `total` in flight: whether a
/// pick may still add one to an endpoint holding `load`.
#[derive(Debug, Clone, Copy)]
enum Rule {
    /// loadring's cap, F = 1.25: `load + 1 <= ceil(F * (total + 1) / N)`.
    Cap,
    /// Envoy's `hash_balance_factor=150`: acceptable while `load <= slots`,
    /// `slots = max(ceil(ceil((total + 1) * 1.5) / N), 1)`.
    Envoy,
}

impl Rule {
    fn spec(self) -> String {
        let rule = match self {
            Rule::Cap => "c_murmurhash_bl:",
            Rule::Envoy => "maglev:hash_balance_factor=150 ",
        };
        format!("{rule}report_max_age={MAX_AGE_MS}ms")
    }

    fn has_room(self, load: u64, total: u64) -> bool {
        match self {
            Rule::Cap => load < (125 * (total + 1)).div_ceil(100 * N as u64),
            Rule::Envoy => {
                let slots = (150 * (total + 1)).div_ceil(100).div_ceil(N as u64).max(1);
                load <= slots
            }
        }
    }
}

fn check_view_model(rule: Rule, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let b = balancer(&rule.spec(), N);
    let mut model = vec![Model::default(); N];
    let mut held: Vec<(usize, Pick)> = Vec::new();
    let mut now = ms(0);
    for (step, op) in ops.into_iter().enumerate() {
        match op {
            Op::Pick(key) => {
                let loads: Vec<u64> = model.iter().map(|m| m.load(now)).collect();
                let total: u64 = loads.iter().sum();
                let key = [key];
                let pick = b.pick(&Request::key(&key).at(now)).unwrap();
                let i: usize = pick.addr()[1..].parse().unwrap();
                if loads.iter().any(|&l| rule.has_room(l, total)) {
                    prop_assert!(
                        rule.has_room(loads[i], total),
                        "{rule:?} step {step}: picked e{i} at {}, total {total}, loads {loads:?}",
                        loads[i]
                    );
                }
                model[i].local += 1;
                model[i].picks_since += 1;
                held.push((i, pick));
            }
            Op::Complete(k) if !held.is_empty() => {
                let (i, pick) = held.remove(k as usize % held.len());
                drop(pick);
                model[i].complete();
            }
            Op::FinishWithReport(k, r) if !held.is_empty() => {
                let (i, pick) = held.remove(k as usize % held.len());
                pick.finish(Outcome::success(ms(1)).with_report(LoadReport::new(r.into()).at(now)));
                model[i].local -= 1;
                model[i].report(r.into(), now);
            }
            Op::Report(e, r) => {
                let i = e as usize % N;
                b.report_load(format!("e{i}").as_str(), LoadReport::new(r.into()).at(now))
                    .unwrap();
                model[i].report(r.into(), now);
            }
            Op::Advance(d) => now += ms(d.into()),
            Op::Complete(_) | Op::FinishWithReport(..) => {}
        }
        let views: Vec<Option<u64>> = b
            .reported_loads_at(now)
            .into_iter()
            .map(|(_, l)| l)
            .collect();
        let want: Vec<Option<u64>> = model.iter().map(|m| m.view(now)).collect();
        prop_assert_eq!(views, want, "step {}", step);
        let locals: Vec<u64> = b.loads().into_iter().map(|(_, l)| l).collect();
        let want: Vec<u64> = model.iter().map(|m| m.local).collect();
        prop_assert_eq!(locals, want);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// After every step the balancer's view of each endpoint is the
    /// model's, its local counts are the model's, and every pick respects
    /// the rule computed over the model's loads: a pick lands on an
    /// endpoint with room whenever one exists.
    #[test]
    fn the_view_follows_the_issues_words(ops in prop::collection::vec(op(), 1..80)) {
        check_view_model(Rule::Cap, ops)?;
    }

    /// The same under Envoy's rule.
    #[test]
    fn envoys_rule_follows_the_view(ops in prop::collection::vec(op(), 1..80)) {
        check_view_model(Rule::Envoy, ops)?;
    }
}

/// Balancers picking from several threads while reports arrive: every
/// guard released, the view comes back to the last report.
#[test]
fn racing_picks_and_reports_leave_the_view_exact() {
    let b = balancer("c_murmurhash_bl", 4);
    std::thread::scope(|s| {
        for t in 0..3u64 {
            let b = &b;
            s.spawn(move || {
                for i in 0..2000u64 {
                    let key = (t * 10_000 + i).to_string();
                    let pick = b.pick(&Request::key(&key)).unwrap();
                    if i % 7 == 0 {
                        pick.finish(Outcome::success(ms(1)).with_report(LoadReport::new(i % 5)));
                    }
                }
            });
        }
    });
    for i in 0..4 {
        b.report_load(format!("e{i}").as_str(), LoadReport::new(3))
            .unwrap();
    }
    assert!(b.loads().iter().all(|(_, l)| *l == 0));
    assert!(b.reported_loads().iter().all(|(_, l)| *l == Some(3)));
}

/// A removed member's report leaves the mean with it: the balancer keeps
/// the sum of the reports' offsets as reports come, expire and leave.
#[test]
fn a_removed_members_report_leaves_the_mean() {
    let b = balancer("c_murmurhash_bl", 3);
    let req = Request::key("a").at(ms(0));
    let owner = b.route(&req).unwrap().unwrap().addr().to_string();
    let gone = endpoints(3)
        .into_iter()
        .find(|e| e.addr() != owner)
        .unwrap();
    b.report_load(gone.addr(), LoadReport::new(100).at(ms(0)))
        .unwrap();
    let rest: Vec<Endpoint> = endpoints(3).into_iter().filter(|e| *e != gone).collect();
    b.update(rest).unwrap();
    // Over the two left, 0 in flight: the cap, ceil(1.25 (T + 1) / 2), lets
    // the owner hold 2, and the third pick spills (with the removed
    // endpoint's 100 still counted it would allow 64).
    let held: Vec<Pick> = (0..3).map(|_| b.pick(&req).unwrap()).collect();
    let at_owner = held.iter().filter(|p| p.addr() == owner).count();
    assert_eq!(
        at_owner,
        2,
        "{:?}",
        held.iter().map(|p| p.addr()).collect::<Vec<_>>()
    );
}

/// An expired report leaves the mean at its expiry, exactly: the same
/// picks before and after the age tell the two totals apart.
#[test]
fn an_expired_report_leaves_the_mean_at_its_age() {
    for (at, home) in [(1000, 0), (1001, 2)] {
        let b = balancer("c_murmurhash_bl", 3);
        let req = Request::key("a").at(ms(at));
        let owner = b.route(&req).unwrap().unwrap().addr().to_string();
        b.report_load(&owner, LoadReport::new(2).at(ms(0))).unwrap();
        // Fresh: the owner's load is 2 + its picks, the total 2 + the
        // picks, the fleet's cap max(floor(1.25 (T + 1) / 3), ceil((T + 1) / 3))
        // = 1, 2, 2 for T = 2, 3, 4: the owner is full from the first pick.
        // Expired: the local counts, cap ceil(1.25 (T + 1) / 3) = 1, 1, 2
        // for T = 0, 1, 2.
        let held: Vec<Pick> = (0..3).map(|_| b.pick(&req).unwrap()).collect();
        let at_owner = held.iter().filter(|p| p.addr() == owner).count();
        assert_eq!(at_owner, home, "at {at} ms");
    }
}

/// A report only tightens what one balancer sends: an owner that the
/// fleet's view shows with room still takes no more of this balancer's
/// requests than its own cap, ceil(1.25 (T + 1) / 4) on its own total.
#[test]
fn reports_never_let_a_balancer_pass_its_own_cap() {
    let b = balancer("c_murmurhash_bl", 4);
    let req = Request::key("a").at(ms(1));
    let owner = b.route(&req).unwrap().unwrap().addr().to_string();
    let other = endpoints(4)
        .into_iter()
        .find(|e| e.addr() != owner)
        .unwrap();
    b.report_load(&owner, LoadReport::new(0).at(ms(0))).unwrap();
    b.report_load(other.addr(), LoadReport::new(8).at(ms(0)))
        .unwrap();
    // The view: total 8 + picks, the fleet's cap max(floor(1.25 (T + 1) / 4),
    // ceil((T + 1) / 4)) = 3 at T = 8 and 9, and the owner at 0 then 1: room
    // for both picks. Its own cap: 1 at T = 0 and at T = 1.
    let held: Vec<Pick> = (0..2).map(|_| b.pick(&req).unwrap()).collect();
    let at_owner = held.iter().filter(|p| p.addr() == owner).count();
    assert_eq!(at_owner, 1);
    assert!(
        held.iter().all(|p| p.addr() != other.addr()),
        "{other:?} is full"
    );
}

#[test]
fn report_rule_is_parsed_and_checked() {
    for (text, share) in [
        ("c_murmurhash_bl", false),
        ("c_murmurhash_bl:report_rule=view", false),
        ("c_murmurhash_bl:report_rule=share", true),
        // In any ASCII case, as every choice of a spec.
        ("c_murmurhash_bl:report_rule=Share", true),
        ("c_murmurhash_bl:report_rule=VIEW", false),
        ("maglev:hash_balance_factor=150 report_rule=share", true),
        (
            "zone_first over ring_hash:load_factor=1.5 report_rule=share",
            true,
        ),
    ] {
        let spec: PolicySpec = text.parse().unwrap();
        assert_eq!(spec.report_share(), share, "{text}");
    }
    for (text, message) in [
        (
            "c_murmurhash_bl:report_rule=shared",
            "c_murmurhash_bl: report_rule=shared is not a rule: accepted view or share",
        ),
        (
            "c_murmurhash:report_rule=share",
            "c_murmurhash: report_rule applies to bounded policies only (give load_factor, \
             balance or hash_balance_factor too)",
        ),
        (
            "local_first:report_rule=share over c_murmurhash_bl",
            "local_first: report_rule belongs on the inner hashing policy, e.g. \
             `local_first over c_murmurhash:report_rule=...`",
        ),
    ] {
        let err = text.parse::<PolicySpec>().unwrap_err();
        assert_eq!(err.to_string(), message, "{text}");
        assert_eq!(err.key(), Some("report_rule"), "{text}");
    }
}

/// With `report_rule=share`, a balancer that holds the whole load (its
/// reports are its own count) places every request as the view does.
#[test]
fn the_share_rule_is_the_view_for_the_whole_load() {
    let view = balancer("c_murmurhash_bl", 4);
    let share = balancer("c_murmurhash_bl:report_rule=share", 4);
    let mut held: Vec<(Pick, Pick)> = Vec::new();
    for n in 0..200u32 {
        let at = ms(u64::from(n));
        let key = format!("k{}", n % 7);
        let a = view.pick(&Request::key(&key).at(at)).unwrap();
        let b = share.pick(&Request::key(&key).at(at)).unwrap();
        assert_eq!(a.addr(), b.addr(), "pick {n}");
        held.push((a, b));
        if n % 3 == 0 {
            let (a, b) = held.remove((n as usize * 7) % held.len());
            // The backend's count is this balancer's own, less the one done.
            let report = |bal: &Balancer, addr: &str| {
                let own = bal
                    .loads()
                    .iter()
                    .find(|(e, _)| e.addr() == addr)
                    .unwrap()
                    .1;
                LoadReport::new(own - 1).at(at)
            };
            let (ra, rb) = (report(&view, a.addr()), report(&share, b.addr()));
            a.finish(Outcome::success(ms(1)).with_report(ra));
            b.finish(Outcome::success(ms(1)).with_report(rb));
        }
    }
}
