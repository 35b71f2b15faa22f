//! The running total of a bounded balancer's requests in flight, striped.
//!
//! A bounded pick past its endpoint's least cap needs the total, and every
//! reservation and release of a bounded balancer changes it. Kept in one
//! counter, that is an atomic add per pick and per release on a cache line
//! every picking thread writes: with two threads, the line moves between the
//! cores on every pick. So the total is kept in [`STRIPES`] stripes, each on
//! a line of its own, and a thread adds to the stripe it was given (threads
//! take them in turn): threads on different stripes never write one line.
//!
//! A stripe counts its reservations and its releases in two counters that
//! only grow (a removal's load counts as releases). Reading the total is
//! then several loads, not one, made in an order that never counts more
//! than were in flight: every stripe's reservations first, then every
//! stripe's releases. A reservation made after its stripe was read is
//! missed, a release made after the reservations were read may be counted;
//! so the total read is at most the true total at the moment the last
//! reservation counter was read (a single counter's read is the true total
//! of one moment), and at worst lower by the requests that came and went
//! while it was read. A cap computed from it is never looser than the cap of
//! that moment, which is what the documented concurrency bound needs. The
//! price is on the read: one line per stripe instead of one, only for picks
//! past the least cap.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Acquire, Ordering::Relaxed};

/// Stripes of a total: enough for the threads of a small machine to pick
/// without sharing a line, few enough for a read of the total to stay a
/// handful of loads.
pub(crate) const STRIPES: usize = 4;

/// Requests in flight on a bounded balancer's members.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    stripes: [Stripe; STRIPES],
}

/// One stripe: what the threads given it counted.
#[derive(Debug, Default)]
#[repr(align(64))]
struct Stripe {
    reserved: AtomicU64,
    released: AtomicU64,
}

thread_local! {
    /// This thread's stripe, given at its first count.
    static STRIPE: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// The next stripe to give a thread.
static NEXT_STRIPE: AtomicUsize = AtomicUsize::new(0);

/// The calling thread's stripe.
#[inline]
fn stripe() -> usize {
    STRIPE.with(|stripe| {
        let mine = stripe.get();
        if mine < STRIPES {
            return mine;
        }
        let given = NEXT_STRIPE.fetch_add(1, Relaxed) % STRIPES;
        stripe.set(given);
        given
    })
}

impl Tally {
    /// Adds `delta` to the total: reservations if positive, releases (or a
    /// removed member's load) if negative, in the calling thread's stripe.
    #[inline]
    pub(crate) fn add(&self, delta: i64) {
        let stripe = &self.stripes[stripe()];
        if delta >= 0 {
            stripe.reserved.fetch_add(delta as u64, Relaxed);
        } else {
            stripe.released.fetch_add(delta.unsigned_abs(), Relaxed);
        }
    }

    /// The requests in flight, read in the order of the module's doc.
    #[inline]
    pub(crate) fn total(&self) -> u64 {
        // Acquire keeps every later load (the releases) after this one.
        let reserved = self
            .stripes
            .iter()
            .fold(0u64, |sum, s| sum.wrapping_add(s.reserved.load(Acquire)));
        let released = self
            .stripes
            .iter()
            .fold(0u64, |sum, s| sum.wrapping_add(s.released.load(Relaxed)));
        // Below zero while a release is counted and its reservation was not.
        (reserved.wrapping_sub(released) as i64).max(0) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_total_is_reservations_less_releases() {
        let tally = Tally::default();
        tally.add(1);
        tally.add(1);
        tally.add(3);
        assert_eq!(tally.total(), 5);
        tally.add(-1);
        assert_eq!(tally.total(), 4);
        tally.add(-4);
        assert_eq!(tally.total(), 0);
        tally.add(-1);
        assert_eq!(tally.total(), 0, "never below zero");
    }

    /// Threads count in stripes of their own; the total adds them all.
    #[test]
    fn threads_count_in_their_stripes() {
        let tally = Tally::default();
        std::thread::scope(|s| {
            for _ in 0..6 {
                s.spawn(|| {
                    for _ in 0..1000 {
                        tally.add(1);
                    }
                    for _ in 0..400 {
                        tally.add(-1);
                    }
                });
            }
        });
        assert_eq!(tally.total(), 6 * 600);
        let used = tally
            .stripes
            .iter()
            .filter(|s| s.reserved.load(Relaxed) > 0)
            .count();
        assert!(used >= 2, "six threads all in one stripe");
        let released: u64 = tally.stripes.iter().map(|s| s.released.load(Relaxed)).sum();
        assert_eq!(released, 6 * 400);
    }

    /// While others reserve and release, a read never exceeds the most
    /// that were ever in flight at once.
    #[test]
    fn a_concurrent_read_never_counts_too_many() {
        let tally = Tally::default();
        let most = 2 * 3; // two threads holding at most three each
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    for _ in 0..200_000 {
                        tally.add(3);
                        tally.add(-3);
                    }
                });
            }
            s.spawn(|| {
                for _ in 0..200_000 {
                    assert!(tally.total() <= most, "read {}", tally.total());
                }
            });
        });
        assert_eq!(tally.total(), 0);
    }

    #[test]
    fn stripes_sit_on_lines_of_their_own() {
        assert_eq!(std::mem::align_of::<Stripe>(), 64);
    }
}
