//! A client connection that resets most of the requests it makes, before
//! their answers begin, is closed: the HTTP/2 "rapid reset" attack
//! (CVE-2023-44487).
//!
//! An HTTP/2 client may open a stream and reset it at once, over and over
//! on one connection: each costs it two small frames, and each costs the
//! proxy a pick, a request sent to a backend and the backend's work, which
//! goes on without the client (up to `--max-abandoned`, see
//! `abandoned.rs`). The limit on streams open at once does not bound it,
//! as a reset stream is closed. hyper's HTTP/2 server answers streams reset
//! before it has taken them with `GOAWAY`, not those reset a moment later.
//!
//! So each connection counts the requests its client left before their
//! answers ([`LeftEarly`]); once those are at least [`FLOOD_LEAST`] and
//! more than half of all its requests, it is closed at once (by
//! [`IdleLimit`](crate::idle_limit::IdleLimit), which watches what a
//! connection asks), as Envoy does on its "premature resets". A client
//! that cancels now and then never comes near it; one that resets as many
//! requests as it lets finish is held to twice an honest client's cost.

use crate::activity::Activity;

/// The requests a connection may leave unanswered before the ratio counts.
pub(crate) const FLOOD_LEAST: u64 = 100;

/// Whether `left_early` requests left unanswered out of `requests` close
/// their connection.
pub(crate) fn is_flood(left_early: u64, requests: u64) -> bool {
    // More left than answered (or still running); no sum to overflow.
    left_early >= FLOOD_LEAST && left_early > requests.saturating_sub(left_early)
}

/// A request's mark in its connection's [`Activity`]: its answer, dropped
/// unanswered (its client reset the stream, or left), [notes](Self::note)
/// it as left early. The answer tells, not this: marking a request
/// answered would cost each its own write.
#[derive(Debug, Default)]
pub(crate) struct LeftEarly(
    /// `None` for requests that cannot flood (HTTP/1.1's: a client that
    /// leaves takes its connection with it).
    Option<Activity>,
);

impl LeftEarly {
    pub(crate) fn new(activity: Activity) -> Self {
        LeftEarly(Some(activity))
    }

    /// The request was dropped unanswered: counted, once.
    pub(crate) fn note(&mut self) {
        if let Some(activity) = self.0.take() {
            activity.note_left_early();
        }
    }
}

/// Whether `activity`'s connection is to be closed for its resets: read by
/// [`IdleLimit`](crate::idle_limit::IdleLimit) each time it polls an
/// HTTP/2 connection.
pub(crate) fn floods(activity: &Activity) -> bool {
    is_flood(activity.left_early(), activity.requests())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Version;

    #[test]
    fn a_flood_is_at_least_the_least_and_more_than_half() {
        let cases = [
            // (left early, requests, closes)
            (0, 0, false),
            (99, 99, false),
            (100, 100, true),
            (100, 199, true),
            (100, 200, false),
            (150, 299, true),
            (150, 300, false),
            (1_000, 1_999, true),
            (u64::MAX, u64::MAX, true),
        ];
        for (left, requests, closes) in cases {
            assert_eq!(is_flood(left, requests), closes, "{left} of {requests}");
        }
    }

    #[test]
    fn a_request_noted_counts_once() {
        let activity = Activity::default();
        for _ in 0..3 {
            activity.note(Version::HTTP_2);
        }
        let mut left = LeftEarly::new(activity.clone());
        left.note();
        left.note();
        assert_eq!(activity.left_early(), 1);
        // Dropped without a note (its answer came): not counted.
        drop(LeftEarly::new(activity.clone()));
        assert_eq!(activity.left_early(), 1);
        // A request that cannot flood is not counted.
        LeftEarly::default().note();
        assert_eq!(activity.left_early(), 1);
    }

    #[test]
    fn floods_reads_the_connections_counts() {
        let activity = Activity::default();
        for _ in 0..150 {
            activity.note(Version::HTTP_2);
        }
        for _ in 0..99 {
            activity.note_left_early();
        }
        assert!(!floods(&activity));
        activity.note_left_early();
        assert!(floods(&activity));
    }
}
