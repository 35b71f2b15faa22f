//! A number of places shared by the workers, taken and given back: the
//! client connections open at once, the requests whose client left that
//! are still read to their end. A place taken is a guard; dropping it
//! gives the place back, so one cannot leak.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

/// The places taken now, against the limit.
#[derive(Debug, Clone)]
pub(crate) struct Places {
    taken: Arc<AtomicUsize>,
    limit: usize,
}

/// One place taken; dropping it gives it back.
#[derive(Debug)]
pub(crate) struct Place(Arc<AtomicUsize>);

impl Drop for Place {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

impl Places {
    pub(crate) fn new(limit: usize) -> Self {
        Places {
            taken: Arc::new(AtomicUsize::new(0)),
            limit,
        }
    }

    /// One more place, or `None` with all `limit` taken (always `None`
    /// with a limit of 0).
    pub(crate) fn try_take(&self) -> Option<Place> {
        // Never past the limit, whatever the workers do at once: the count
        // moves only from below the limit.
        self.taken
            .fetch_update(Relaxed, Relaxed, |n| (n < self.limit).then_some(n + 1))
            .ok()
            .map(|_| Place(self.taken.clone()))
    }

    /// The places taken now.
    pub(crate) fn taken(&self) -> usize {
        self.taken.load(Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_counted_against_the_limit() {
        let places = Places::new(2);
        let a = places.try_take().unwrap();
        let _b = places.try_take().unwrap();
        assert!(places.try_take().is_none());
        assert_eq!(places.taken(), 2);
        drop(a);
        assert_eq!(places.taken(), 1);
        assert!(places.try_take().is_some());
    }

    #[test]
    fn a_limit_of_zero_has_no_place() {
        let places = Places::new(0);
        assert!(places.try_take().is_none());
        assert_eq!(places.taken(), 0);
    }

    #[test]
    fn threads_taking_at_once_never_pass_the_limit() {
        let places = Places::new(3);
        let held: Vec<Vec<Place>> = std::thread::scope(|s| {
            let takers: Vec<_> = (0..4)
                .map(|_| s.spawn(|| (0..100).filter_map(|_| places.try_take()).collect()))
                .collect();
            takers.into_iter().map(|t| t.join().unwrap()).collect()
        });
        assert_eq!(held.iter().map(Vec::len).sum::<usize>(), 3);
        assert_eq!(places.taken(), 3);
        drop(held);
        assert_eq!(places.taken(), 0);
    }
}
