//! Latency-aware policies on a simulated clock: no sleeps, every time is
//! given with `Request::at` and `Outcome::at`.
//!
//! The load: one request per millisecond, round the clock, over four
//! endpoints `e0..e3` that answer in 10 ms, except `e0`, which answers in
//! 100 ms (10×) from 1 s to 3 s. The fair share of each endpoint is 1/4.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::time::Duration;

use loadring::{Balancer, Endpoint, Outcome, Pick, Request};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The scenario's service time of endpoint `addr` for a request placed at `at` ms.
fn service(addr: &str, at: u64, slow: (u64, u64)) -> u64 {
    if addr == "e0" && (slow.0..slow.1).contains(&at) {
        100
    } else {
        10
    }
}

/// Runs `requests` requests (one per ms from t = 0) through `spec` over
/// e0..e3 with e0 slow during `slow` (ms); returns the endpoint each went to.
fn run(spec: &str, requests: u64, slow: (u64, u64)) -> Vec<usize> {
    let endpoints = (0..4).map(|i| Endpoint::new(format!("e{i}")).unwrap());
    let balancer = Balancer::new(spec.parse().unwrap(), endpoints).unwrap();
    let mut due: BinaryHeap<Reverse<(u64, u64)>> = BinaryHeap::new();
    let mut open: HashMap<u64, (Pick, u64)> = HashMap::new();
    let mut placed = Vec::new();
    for t in 0..requests {
        while let Some(&Reverse((end, id))) = due.peek() {
            if end > t {
                break;
            }
            due.pop();
            let (pick, latency) = open.remove(&id).unwrap();
            pick.finish(Outcome::success(ms(latency)).at(ms(end)));
        }
        let pick = balancer.pick(&Request::new().at(ms(t))).unwrap();
        let i: usize = pick.addr()[1..].parse().unwrap();
        let latency = service(pick.addr(), t, slow);
        due.push(Reverse((t + latency, t)));
        open.insert(t, (pick, latency));
        placed.push(i);
    }
    placed
}

/// Requests to e0 among those placed in `from..to` (ms).
fn on_e0(placed: &[usize], from: u64, to: u64) -> usize {
    placed[from as usize..to as usize]
        .iter()
        .filter(|&&i| i == 0)
        .count()
}

/// The most requests e0 gets in any 100 consecutive ones (aligned on
/// hundreds) placed in `from..to` ms.
fn most_per_100(placed: &[usize], from: u64, to: u64) -> usize {
    (from / 100..to / 100)
        .map(|k| on_e0(placed, k * 100, k * 100 + 100))
        .max()
        .unwrap()
}

/// The slow period and what a policy that ignores latency does in it: rr
/// gives e0 exactly its fair quarter (1900 requests from 1.1 s to 3 s: 475).
#[test]
fn round_robin_keeps_sending_its_quarter_to_the_slow_endpoint() {
    let placed = run("rr", 6000, (1000, 3000));
    assert_eq!(on_e0(&placed, 1100, 3000), 475);
}

/// `la` moves traffic off within 50 requests, before any slow response is
/// back: the in-flight punishment starts once the mean age of e0's requests
/// in flight reaches 1.5 × 10 ms (about 30 ms after the slowdown, the mean
/// start lagging by half the elapsed time) and by 50 ms has cut its weight
/// to at most 10/25 of the others' (share ≤ 0.4 / 3.4), so e0 gets at most 6
/// of the requests from 50 to 100 ms. From the 100th request on, it never
/// gets more than 15 of any 100 (its fair share is 25; once only slow
/// samples are left its weight is a tenth of the others', 1/31 of the
/// traffic), and at most 8% over the rest of the slow period. Within 1 to 2 s of the recovery (when its slow samples have
/// left the 1 s window) its share is back within 10% of a quarter.
#[test]
fn la_avoids_a_slowed_endpoint_and_comes_back_after_it_recovers() {
    let placed = run("la:seed=1", 6000, (1000, 3000));
    let early = on_e0(&placed, 1050, 1100);
    assert!(early <= 6, "at most 6 of 50, got {early}");
    let most = most_per_100(&placed, 1100, 3000);
    assert!(most <= 15, "at most 15 of 100, got {most}");
    let during = on_e0(&placed, 1100, 3000);
    assert!(during <= 152, "at most 8% of 1900, got {during}");
    let after = on_e0(&placed, 4000, 5000);
    assert!(
        (225..=275).contains(&after),
        "a quarter of 1000 ± 10%, got {after}"
    );
}

/// Peak-EWMA `p2c` believes the first slow response: from the 100th request
/// after the slowdown on, e0 gets at most 1 of any 100 requests (a probe each
/// time its estimate has decayed back to the others' cost). With
/// `decay=250ms`, the 100 ms peak left after the recovery decays to the
/// others' 10 ms within ln(10) × 250 ms ≈ 0.6 s, and between 1 and 2 s after
/// the recovery e0's share is within 10% of a quarter.
#[test]
fn peak_ewma_avoids_a_slowed_endpoint_and_comes_back_after_it_recovers() {
    let placed = run("p2c:load=peak_ewma decay=250ms seed=1", 6000, (1000, 3000));
    let most = most_per_100(&placed, 1100, 3000);
    assert!(most <= 1, "at most 1 of 100, got {most}");
    let after = on_e0(&placed, 4000, 5000);
    assert!(
        (225..=275).contains(&after),
        "a quarter of 1000 ± 10%, got {after}"
    );
}

/// With no slow period, both policies share the load evenly: e0 gets a
/// quarter ± 10% of the requests from 1 s to 5 s.
#[test]
fn without_a_slow_endpoint_the_share_is_fair() {
    for spec in ["la:seed=1", "p2c:load=peak_ewma decay=250ms seed=1"] {
        let placed = run(spec, 5000, (0, 0));
        let share = on_e0(&placed, 1000, 5000);
        assert!((900..=1100).contains(&share), "{spec}: {share} of 4000");
    }
}
