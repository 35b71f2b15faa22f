//! Lookups by identity: what they cost (counted, never timed) and that they
//! find the member they name through every kind of membership change.

use std::cell::Cell;

use super::Balancer;
use crate::endpoint::{Endpoint, Id};
use crate::request::Request;

thread_local! {
    /// Identity comparisons made by lookups on this thread (see `compared`).
    pub(super) static COMPARED: Cell<u64> = const { Cell::new(0) };
}

fn compared() -> u64 {
    COMPARED.with(Cell::get)
}

/// `n` endpoints on distinct addresses, every fifth one also tagged (an
/// address and a tag make another identity than the address alone).
fn many(n: usize) -> Vec<Endpoint> {
    (0..n)
        .flat_map(|i| {
            let addr = format!("10.{}.{}.{}:{}", i / 65_536, i / 256 % 256, i % 256, 80);
            let plain = Endpoint::new(&addr).unwrap();
            let tagged = (i % 5 == 0).then(|| format!("{addr} tag=t{i}").parse().unwrap());
            std::iter::once(plain).chain(tagged)
        })
        .take(n)
        .collect()
}

fn healthy_marks(b: &Balancer) -> Vec<bool> {
    b.states(crate::clock::now())
        .iter()
        .map(|s| s.healthy)
        .collect()
}

/// Marking each of n members by identity, as a proxy does after every
/// membership change and every round of health checks, costs O(n log n)
/// identity comparisons in all: each lookup is a binary search. A scan per
/// lookup (the quadratic start-up of a proxy over 100,000 endpoints) would
/// make about n²/2 of them, here 8 million against the bound of 200,000.
#[test]
fn marking_every_member_by_identity_costs_n_log_n_comparisons() {
    let n = 4096;
    let endpoints = many(n);
    let b = Balancer::new("rr".parse().unwrap(), endpoints.clone()).unwrap();
    let before = compared();
    // In reverse, so that a scan from the front would pay the most.
    for (i, e) in endpoints.iter().enumerate().rev() {
        b.set_healthy(e.id(), i % 3 != 0).unwrap();
    }
    let made = compared() - before;
    let log2 = u64::from(usize::BITS - n.leading_zeros());
    let bound = 4 * n as u64 * (log2 + 1);
    assert!(
        made >= n as u64,
        "each lookup goes through the index: {made}"
    );
    assert!(
        made <= bound,
        "{made} comparisons to mark {n} members (at most {bound}; a scan per lookup makes ~{})",
        n * n / 2
    );
    let want: Vec<bool> = (0..n).map(|i| i % 3 != 0).collect();
    assert_eq!(healthy_marks(&b), want, "each mark on the member it names");
    for (i, e) in endpoints.iter().enumerate() {
        assert_eq!(b.is_healthy(e.id()), Ok(i % 3 != 0), "{e}");
    }
    // An identity that is no member's is still refused, naming it.
    let unknown = b.set_healthy("10.9.9.9:80", false).unwrap_err();
    assert_eq!(unknown.id(), "10.9.9.9:80");
    assert!(b.is_healthy(Id::new("10.0.0.1:80", Some("t1"))).is_err());
    assert_eq!(b.is_healthy(Id::new("10.0.0.5:80", Some("t5"))), Ok(true));
}

/// The index is the membership's: after an update, an insertion, a removal
/// or a new weight, each identity still names its own member (the index is
/// never one of an earlier membership).
#[test]
fn lookups_follow_every_membership_change() {
    let b = Balancer::new("rr".parse().unwrap(), many(50)).unwrap();
    let check = |b: &Balancer| {
        let endpoints = b.endpoints();
        for (i, e) in endpoints.iter().enumerate() {
            b.set_healthy(e.id(), i % 2 == 0).unwrap();
        }
        let want: Vec<bool> = (0..endpoints.len()).map(|i| i % 2 == 0).collect();
        assert_eq!(healthy_marks(b), want);
        for (i, e) in endpoints.iter().enumerate() {
            assert_eq!(b.is_healthy(e.id()), Ok(i % 2 == 0), "{e}");
        }
    };
    check(&b);
    // Reordered, some gone, some new.
    let mut next = many(70);
    next.reverse();
    next.retain(|e| !e.addr().ends_with(".7:80"));
    assert!(b.update(next.clone()).unwrap());
    check(&b);
    b.insert(Endpoint::new("10.1.0.0:80").unwrap(), ()).unwrap();
    check(&b);
    b.remove(next[3].id()).unwrap();
    assert!(b.is_healthy(next[3].id()).is_err(), "removed");
    check(&b);
    b.set_weight(next[10].id(), 7).unwrap();
    check(&b);
    assert!(!b.update(b.endpoints()).unwrap(), "the same membership");
    check(&b);
}

/// Members removed while their requests run, then all added back in one
/// update, each take their own member again (their loads), as one added
/// back alone does.
#[test]
fn members_added_back_in_one_update_count_their_requests_again() {
    let all = many(300);
    let b = Balancer::new("rr".parse().unwrap(), all.clone()).unwrap();
    let picks: Vec<_> = (0..600).map(|_| b.pick(&Request::new()).unwrap()).collect();
    assert_eq!(b.total_in_flight(), 600);
    assert!(b.update(all[..100].to_vec()).unwrap());
    assert_eq!(b.total_in_flight(), 200, "two each on the 100 kept");
    let mut back = all.clone();
    back.reverse();
    assert!(b.update(back).unwrap());
    assert_eq!(b.total_in_flight(), 600, "the 200 back count theirs again");
    assert!(b.loads().iter().all(|(_, load)| *load == 2));
    drop(picks);
    assert_eq!(b.total_in_flight(), 0);
}
