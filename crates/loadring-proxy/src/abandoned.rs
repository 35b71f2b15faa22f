//! Requests whose client left before their answer ended: each goes on
//! (read to its end, so that the balancer counts the backend's work) in a
//! place of the proxy's limit on them, or is cancelled when none is free,
//! as `abort_on_close` would.

use prometheus_client::metrics::counter::Counter;

use crate::places::{Place, Places};

/// One cluster's view of the proxy-wide places for abandoned requests.
#[derive(Debug, Clone)]
pub(crate) struct Abandoning {
    places: Places,
    /// The cluster's `loadring_abandoned_cancelled_total`.
    cancelled: Counter,
}

impl Abandoning {
    pub(crate) fn new(places: Places, cancelled: Counter) -> Self {
        Abandoning { places, cancelled }
    }

    /// A place for one more request to go on without its client, or
    /// `None` (counted) when the request is to be cancelled.
    pub(crate) fn place(&self) -> Option<Place> {
        let place = self.places.try_take();
        if place.is_none() {
            self.cancelled.inc();
        }
        place
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_the_limit_a_request_is_cancelled_and_counted() {
        let cancelled = Counter::default();
        let abandoning = Abandoning::new(Places::new(1), cancelled.clone());
        let first = abandoning.place();
        assert!(first.is_some());
        assert_eq!(cancelled.get(), 0);
        assert!(abandoning.place().is_none());
        assert_eq!(cancelled.get(), 1);
        drop(first);
        assert!(abandoning.place().is_some());
        assert_eq!(cancelled.get(), 1);
    }
}
