//! The local handle's bookkeeping, moved here from the unit tests of
//! `balancer/local.rs` and `balancer/local_pick.rs`: the counter slots the
//! handles hold, and the snapshots a handle keeps for the guards of earlier
//! memberships (what makes its guards' pointers sound).

use loadring::{Balancer, Endpoint, Request, LOCAL_SLOTS};

fn balancer(spec: &str) -> Balancer {
    let endpoints = ["a:1", "b:1", "c:1"].map(|a| Endpoint::new(a).unwrap());
    Balancer::new(spec.parse().unwrap(), endpoints).unwrap()
}

/// Each live handle holds a slot of its own; a handle beyond the slots
/// holds none; a dropped handle's slot goes to the next one.
#[test]
fn live_handles_hold_distinct_slots_until_dropped() {
    let balancer = balancer("maglev");
    let mut handles: Vec<_> = (0..LOCAL_SLOTS).map(|_| balancer.local()).collect();
    let mut slots: Vec<Option<u32>> = handles.iter().map(|h| h.counter_slot()).collect();
    slots.sort_unstable();
    let want: Vec<Option<u32>> = (0..LOCAL_SLOTS as u32).map(Some).collect();
    assert_eq!(slots, want);
    assert_eq!(balancer.local().counter_slot(), None, "all taken");
    assert!(format!("{:?}", handles[0]).starts_with("LocalBalancer { balancer: Balancer"));
    let freed = handles.remove(1).counter_slot();
    assert_eq!(
        balancer.local().counter_slot(),
        freed,
        "freed with its handle"
    );
    drop(handles);
    assert_eq!(balancer.local_slots_held(), 0, "every slot free");
}

/// A handle counts in its own slot before and after it renews its
/// snapshot, and its picks are counted where it says.
#[test]
fn a_renewed_snapshot_keeps_the_handles_slot() {
    let balancer = balancer("maglev");
    let handles: Vec<_> = (0..3).map(|_| balancer.local()).collect();
    let last = &handles[2];
    let before = last.pick(&Request::key("k")).unwrap();
    balancer.remove("c:1").unwrap();
    let after = last.pick(&Request::key("k")).unwrap();
    assert_eq!(last.kept_snapshots(), 1);
    assert_eq!(before.counter_slot(), last.counter_slot());
    assert_eq!(after.counter_slot(), last.counter_slot());
    assert!(last.counter_slot().is_some());
    let fifth: Vec<_> = (0..2).map(|_| balancer.local()).collect();
    let shared = fifth[1].pick(&Request::key("k")).unwrap();
    assert_eq!(shared.counter_slot(), None, "a handle without a slot");
    let expected = u64::from(before.addr() == after.addr()) + 1;
    assert_eq!(
        after.in_flight(),
        expected + u64::from(shared.addr() == after.addr())
    );
}

/// A snapshot replaced while a guard of it lives stays until that guard
/// is gone, and the guard still answers from it.
#[test]
fn a_replaced_snapshot_waits_for_its_guards() {
    for spec in ["maglev", "c_murmurhash_bl", "rr"] {
        let balancer = balancer(spec);
        let local = balancer.local();
        let old = local.pick(&Request::key("k")).unwrap();
        let addr = old.addr().to_string();
        balancer.remove(&*addr).unwrap();
        let new = local.pick(&Request::key("k")).unwrap();
        assert_ne!(new.addr(), addr, "{spec}: the new membership");
        assert_eq!(local.kept_snapshots(), 1, "{spec}: kept for the old guard");
        assert_eq!(old.addr(), addr, "{spec}: the old guard reads its snapshot");
        assert_eq!(old.in_flight(), 1, "{spec}");
        drop(old);
        balancer.insert(Endpoint::new(&*addr).unwrap(), ()).unwrap();
        drop(local.pick(&Request::key("k")).unwrap());
        assert_eq!(
            local.kept_snapshots(),
            1,
            "{spec}: the old one let go, the one of `new` kept"
        );
        drop(new);
        balancer.remove("a:1").unwrap();
        drop(local.pick(&Request::key("k")).unwrap());
        assert_eq!(local.kept_snapshots(), 0, "{spec}: no guard left");
        assert_eq!(balancer.total_in_flight(), 0, "{spec}");
    }
}

/// Snapshots without guards are let go at once: many changes under a
/// handle that keeps picking keep nothing.
#[test]
fn changes_without_guards_keep_nothing() {
    let balancer = balancer("c_murmurhash");
    let local = balancer.local();
    let held = local.pick(&Request::key("k")).unwrap();
    for i in 0..100 {
        let addr = format!("d{i}:1");
        balancer.insert(Endpoint::new(&*addr).unwrap(), ()).unwrap();
        drop(local.pick(&Request::key("k")).unwrap());
        balancer.remove(&*addr).unwrap();
    }
    assert_eq!(
        local.kept_snapshots(),
        1,
        "only the snapshot of the held guard"
    );
    drop(held);
}

/// A forgotten guard keeps its snapshot (memory, never a dangling
/// pointer) and its count: the same as a forgotten `Pick`.
#[test]
fn a_forgotten_guard_keeps_its_snapshot() {
    let balancer = balancer("maglev");
    let local = balancer.local();
    std::mem::forget(local.pick(&Request::key("k")).unwrap());
    balancer.remove("a:1").unwrap();
    drop(local.pick(&Request::key("k")).unwrap());
    balancer.remove("b:1").unwrap();
    drop(local.pick(&Request::key("k")).unwrap());
    assert_eq!(local.kept_snapshots(), 1);
}
