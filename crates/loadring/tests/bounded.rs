//! Bounded load as a specification: caps hold at every pick, spilled requests
//! follow the ring, counters return to zero whatever the interleaving.

use crate::common;

use std::collections::HashMap;

use loadring::{
    Balancer, Endpoint, LocalBalancer, LocalPick, Pick, PickError, PickErrorKind, PolicySpec,
    Request,
};
use proptest::prelude::*;

/// Six backends of weights 1, 1, 2, 1, 3, 1.
fn universe() -> Vec<Endpoint> {
    [1, 1, 2, 1, 3, 1]
        .iter()
        .enumerate()
        .map(|(i, &w)| {
            Endpoint::new(format!("10.0.0.{}:80", i + 1))
                .unwrap()
                .with_weight(w)
        })
        .collect()
}

#[derive(Debug, Clone)]
enum Op {
    /// `local`: through a [`LocalBalancer`] made before the first step, so
    /// its cached snapshot must follow every update.
    Pick {
        key: u8,
        exclude: Option<u8>,
        local: bool,
    },
    Drop {
        index: u8,
    },
    Update {
        mask: u8,
    },
    Health {
        endpoint: u8,
        healthy: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..4, proptest::option::of(0u8..6), any::<bool>())
            .prop_map(|(key, exclude, local)| Op::Pick { key, exclude, local }),
        3 => any::<u8>().prop_map(|index| Op::Drop { index }),
        1 => (0u8..64).prop_map(|mask| Op::Update { mask }),
        1 => (0u8..6, any::<bool>()).prop_map(|(endpoint, healthy)| Op::Health { endpoint, healthy }),
    ]
}

/// The test's own account of what the balancer should hold.
struct Model<'h> {
    universe: Vec<Endpoint>,
    members: Vec<usize>,
    healthy: [bool; 6],
    /// Bumped when a backend leaves: guards of an older generation no longer count.
    generation: [u32; 6],
    held: Vec<(usize, u32, Guard<'h>)>,
}

/// A guard of either kind: both must count and release alike.
#[allow(dead_code)] // held for their drop
enum Guard<'h> {
    Shared(Pick),
    Local(LocalPick<'h>),
}

impl Guard<'_> {
    fn addr(&self) -> &str {
        match self {
            Guard::Shared(pick) => pick.addr(),
            Guard::Local(pick) => pick.addr(),
        }
    }
}

impl Model<'_> {
    fn index(&self, addr: &str) -> usize {
        self.universe.iter().position(|e| e.addr() == addr).unwrap()
    }

    fn expected_load(&self, i: usize) -> u64 {
        self.held
            .iter()
            .filter(|(e, g, _)| *e == i && *g == self.generation[i])
            .count() as u64
    }
}

fn check_pick<'h>(
    balancer: &Balancer,
    local: Option<&'h LocalBalancer<'_>>,
    model: &mut Model<'h>,
    key: u8,
    exclude: Option<u8>,
) -> Result<(), TestCaseError> {
    let key = format!("key-{key}");
    let excluded_addr = exclude.map(|i| model.universe[i as usize].addr().to_string());
    let excluded: Vec<&str> = excluded_addr.iter().map(String::as_str).collect();
    let req = Request::key(&key).excluding(&excluded);
    let eligible: Vec<usize> = model
        .members
        .iter()
        .copied()
        .filter(|&i| model.healthy[i] && Some(model.universe[i].addr()) != excluded_addr.as_deref())
        .collect();
    // The cap worked out from the model, independently of the library:
    // ceil(F * (total + 1) * w / W) with F = num / den from its decimal text.
    let factor = balancer.spec().unwrap().load_factor().unwrap().to_string();
    let (int, frac) = factor.split_once('.').unwrap_or((&factor, ""));
    let den = 10u128.pow(frac.len() as u32);
    let num = format!("{int}{frac}").parse::<u128>().unwrap();
    let total: u128 = model
        .members
        .iter()
        .map(|&i| u128::from(model.expected_load(i)))
        .sum();
    let weight_sum: u128 = model
        .members
        .iter()
        .map(|&i| u128::from(model.universe[i].weight()))
        .sum();
    let before: HashMap<usize, (u64, u64)> = model
        .members
        .iter()
        .map(|&i| {
            let w = u128::from(model.universe[i].weight());
            let cap = (num * (total + 1) * w).div_ceil(den * weight_sum) as u64;
            let reported = balancer
                .cap(model.universe[i].addr())
                .unwrap()
                .expect("a bounded policy has caps");
            assert_eq!(reported, cap, "the cap of {}", model.universe[i].addr());
            (i, (model.expected_load(i), cap))
        })
        .collect();
    let natural = balancer
        .route(&req)
        .map(|e| e.map(|e| e.addr().to_string()));
    let total_before = balancer.total_in_flight();
    let picked = match local {
        Some(local) => local.pick(&req).map(Guard::Local),
        None => balancer.pick(&req).map(Guard::Shared),
    };
    match picked {
        Ok(pick) => {
            let i = model.index(pick.addr());
            prop_assert!(
                eligible.contains(&i),
                "picked {} which is unhealthy or excluded",
                pick.addr()
            );
            let (load, cap) = before[&i];
            let room_somewhere = eligible.iter().any(|e| before[e].0 < before[e].1);
            if room_somewhere {
                prop_assert!(
                    load < cap,
                    "{} had {load} in flight, its cap was {cap}",
                    pick.addr()
                );
            } else {
                // No room anywhere: the least load relative to its cap,
                // load / cap, compared exactly as load_a * cap_b < load_b * cap_a.
                let lightest = eligible
                    .iter()
                    .map(|e| before[e])
                    .min_by(|a, b| {
                        (u128::from(a.0) * u128::from(b.1))
                            .cmp(&(u128::from(b.0) * u128::from(a.1)))
                    })
                    .unwrap();
                prop_assert_eq!(
                    u128::from(load) * u128::from(lightest.1),
                    u128::from(lightest.0) * u128::from(cap),
                    "the fallback takes the eligible endpoint with the least load for its cap"
                );
            }
            if total_before == 0 {
                prop_assert_eq!(
                    natural.unwrap(),
                    Some(pick.addr().to_string()),
                    "idle: bounded equals plain"
                );
            }
            let generation = model.generation[i];
            model.held.push((i, generation, pick));
        }
        Err(e) if e.kind() == PickErrorKind::NoEndpoints => prop_assert!(model.members.is_empty()),
        Err(e) if e.kind() == PickErrorKind::NoEligibleEndpoint => {
            prop_assert!(eligible.is_empty(), "{eligible:?} were eligible")
        }
        Err(e) => prop_assert!(false, "unexpected error {e}"),
    }
    Ok(())
}

fn run(spec: &str, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let spec: PolicySpec = spec.parse().unwrap();
    let universe = universe();
    let balancer = Balancer::new(spec, universe.clone()).unwrap();
    let local = balancer.local();
    let mut model = Model {
        universe,
        members: (0..6).collect(),
        healthy: [true; 6],
        generation: [0; 6],
        held: Vec::new(),
    };
    for op in ops {
        match op {
            Op::Pick {
                key,
                exclude,
                local: through_local,
            } => {
                let local = through_local.then_some(&local);
                check_pick(&balancer, local, &mut model, key, exclude)?
            }
            Op::Drop { index } => {
                if !model.held.is_empty() {
                    let i = index as usize % model.held.len();
                    drop(model.held.swap_remove(i));
                }
            }
            Op::Update { mask } => {
                let members: Vec<usize> = (0..6).filter(|i| mask & (1 << i) != 0).collect();
                for &back in members.iter().filter(|i| !model.members.contains(i)) {
                    // A backend that comes back starts healthy; it takes its
                    // old member again, counting the requests still held on
                    // it, or starts afresh when none is left.
                    model.healthy[back] = true;
                    if model.expected_load(back) == 0 {
                        model.generation[back] += 1;
                    }
                }
                balancer
                    .update(members.iter().map(|&i| model.universe[i].clone()))
                    .unwrap();
                model.members = members;
            }
            Op::Health { endpoint, healthy } => {
                let i = endpoint as usize;
                let result = balancer.set_healthy(model.universe[i].addr(), healthy);
                if model.members.contains(&i) {
                    prop_assert!(result.is_ok());
                    model.healthy[i] = healthy;
                } else {
                    prop_assert_eq!(
                        result.map_err(|e| e.to_string()),
                        Err(format!("unknown endpoint `{}`", model.universe[i].addr()))
                    );
                }
            }
        }
        // Exact accounting after every step (single thread).
        let loads = balancer.loads();
        for (endpoint, load) in &loads {
            prop_assert_eq!(
                *load,
                model.expected_load(model.index(endpoint.addr())),
                "load of {}",
                endpoint.addr()
            );
        }
        prop_assert_eq!(
            balancer.total_in_flight(),
            loads.iter().map(|(_, l)| l).sum::<u64>()
        );
    }
    model.held.clear();
    prop_assert_eq!(balancer.total_in_flight(), 0);
    prop_assert!(balancer.loads().iter().all(|(_, l)| *l == 0));
    Ok(())
}

proptest! {
    #![proptest_config(common::cases(200))]

    #[test]
    fn caps_hold_and_counters_return_to_zero_murmur(ops in proptest::collection::vec(op(), 1..120)) {
        run("c_murmurhash_bl", ops)?;
    }

    #[test]
    fn caps_hold_and_counters_return_to_zero_ketama(ops in proptest::collection::vec(op(), 1..120)) {
        run("c_ketama:replicas=40 balance=150", ops)?;
    }
}

fn eight() -> Vec<Endpoint> {
    (1..=8)
        .map(|i| Endpoint::new(format!("10.0.0.{i}:80")).unwrap())
        .collect()
}

/// brpc's bounded-load test: a hot key on 8 endpoints, 200 picks held.
#[test]
fn hot_key_is_capped_and_spills_along_the_ring() {
    let balancer = Balancer::new("c_murmurhash_bl".parse().unwrap(), eight()).unwrap();
    let mut held = Vec::new();
    let mut first_use: Vec<String> = Vec::new();
    for _ in 0..200 {
        let pick = balancer.pick(&Request::key("hot")).unwrap();
        if !first_use.iter().any(|a| a == pick.addr()) {
            first_use.push(pick.addr().to_string());
        }
        held.push(pick);
    }
    let per_endpoint = balancer.loads();
    let max = per_endpoint.iter().map(|(_, l)| *l).max().unwrap();
    assert!(
        max <= (125u64 * 200).div_ceil(100 * 8),
        "max {max} exceeds ceil(1.25*200/8) = 32"
    );
    assert!(first_use.len() > 1, "a hot key must spill");

    // The overflow order is the plain ring's choice as endpoints are removed one by one.
    let plain = Balancer::new("c_murmurhash".parse().unwrap(), eight()).unwrap();
    let mut remaining = eight();
    let mut plain_order = Vec::new();
    for _ in 0..first_use.len() {
        let owner = plain
            .route(&Request::key("hot"))
            .unwrap()
            .unwrap()
            .addr()
            .to_string();
        remaining.retain(|e| e.addr() != owner);
        plain_order.push(owner);
        plain.update(remaining.clone()).unwrap();
    }
    assert_eq!(first_use, plain_order);

    // Removing endpoints that hold guards, then releasing, brings the total to 0.
    let kept: Vec<Endpoint> = eight().into_iter().skip(4).collect();
    let on_kept = held
        .iter()
        .filter(|p| kept.iter().any(|e| e.addr() == p.addr()))
        .count() as u64;
    assert!(
        on_kept < held.len() as u64,
        "the test removes endpoints holding guards"
    );
    balancer.update(kept).unwrap();
    assert_eq!(
        balancer.total_in_flight(),
        on_kept,
        "removed endpoints left the total"
    );
    drop(held);
    assert_eq!(balancer.total_in_flight(), 0);
    assert!(balancer.loads().iter().all(|(_, l)| *l == 0));
}

#[test]
fn unchanged_membership_is_a_no_op_and_counters_survive_updates() {
    let balancer = Balancer::new("c_murmurhash_bl".parse().unwrap(), eight()).unwrap();
    assert!(
        !balancer.update(eight()).unwrap(),
        "same membership: nothing rebuilt"
    );
    let pick = balancer.pick(&Request::key("k")).unwrap();
    let addr = pick.addr().to_string();
    let others: Vec<Endpoint> = eight()
        .into_iter()
        .filter(|e| e.addr() != "10.0.0.9:80")
        .chain([Endpoint::new("10.0.0.9:80").unwrap()])
        .collect();
    assert!(balancer.update(others).unwrap());
    let load = balancer
        .loads()
        .into_iter()
        .find(|(e, _)| e.addr() == addr)
        .unwrap()
        .1;
    assert_eq!(
        load, 1,
        "the counter of an endpoint that stays survives the update"
    );
    drop(pick);
    assert_eq!(balancer.total_in_flight(), 0);
}

#[test]
fn health_marks_skip_without_rebuilding_and_all_unhealthy_is_an_error() {
    let balancer = Balancer::new("c_murmurhash_bl".parse().unwrap(), eight()).unwrap();
    let owner = balancer
        .route(&Request::key("k"))
        .unwrap()
        .unwrap()
        .addr()
        .to_string();
    balancer.set_healthy(&owner, false).unwrap();
    let pick = balancer.pick(&Request::key("k")).unwrap();
    assert_ne!(pick.addr(), owner);
    drop(pick);
    for e in eight() {
        balancer.set_healthy(e.addr(), false).unwrap();
    }
    assert_eq!(
        balancer.pick(&Request::key("k")).unwrap_err(),
        PickError::no_eligible_endpoint(8)
    );
    assert_eq!(
        balancer
            .set_healthy("nope", true)
            .map_err(|e| e.id().to_string()),
        Err("nope".to_string())
    );
}
