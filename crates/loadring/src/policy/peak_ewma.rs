//! Peak EWMA: a latency estimate per endpoint that jumps up at once and
//! decays slowly, as Finagle, linkerd and tower use it for `p2c`
//! (`p2c:load=peak_ewma`).
//!
//! Each endpoint keeps an estimate `est` of its round-trip time and the time
//! `at` it was last set. Read at time `now`, the estimate is
//! `est * exp(-(now - at) / decay)`: it decays towards zero while the
//! endpoint gets no responses, so an endpoint avoided for being slow is tried
//! again after a while instead of being starved for good. A response of
//! latency `rtt` at `now` then sets it:
//!
//! - to `rtt` if `rtt` is above the decayed estimate (the peak: one slow
//!   response is believed at once);
//! - else to the moving average `est * d + rtt * (1 - d)`, with
//!   `d = exp(-(now - at) / decay)`: the longer since the last response, the
//!   more the new one counts.
//!
//! This is tower's and Finagle's rule when no pick reads the estimate between
//! two responses; there, every read also stores the decayed value and moves
//! `at`, so how often an endpoint is compared changes its estimate. Here a
//! read changes nothing (the pick path only loads two atomics), which keeps
//! picks free of writes and the estimate independent of how often it is read.
//!
//! Until its first response an endpoint's estimate is `default_rtt`, without
//! decay; the first response replaces it. The cost `p2c` compares is
//! `estimate * (in_flight + 1) / weight` (tower's `rtt * (pending + 1)`,
//! relative to weight as in-flight `p2c` is). Failures count with their
//! latency like successes.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::Duration;

use crate::clock::nanos;
use crate::inflight::outcome::Outcome;
use crate::policy::Observer;

/// `at` of an endpoint that has had no response yet.
const NEVER: u64 = u64::MAX;

/// `decay=` and `default_rtt=` of `p2c:load=peak_ewma`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PeakEwmaConfig {
    pub(crate) decay: Duration,
    pub(crate) default_rtt: Duration,
}

impl PeakEwmaConfig {
    /// Finagle's and linkerd's decay time.
    pub(crate) const DEFAULT_DECAY: Duration = Duration::from_secs(10);
    /// linkerd's default round-trip time for an endpoint not yet measured.
    pub(crate) const DEFAULT_RTT: Duration = Duration::from_millis(30);
}

/// The peak-EWMA estimate of one endpoint (its [`Observer`]).
#[derive(Debug)]
pub(crate) struct PeakEwma {
    decay_ns: f64,
    /// `est` in nanoseconds, as `f64` bits.
    estimate: AtomicU64,
    /// When `est` was set, in nanoseconds; [`NEVER`] before any response.
    at: AtomicU64,
    /// Serializes updates (reads take no lock).
    update: Mutex<()>,
}

impl PeakEwma {
    pub(crate) fn new(config: PeakEwmaConfig) -> Self {
        PeakEwma {
            decay_ns: nanos(config.decay) as f64,
            estimate: AtomicU64::new((nanos(config.default_rtt) as f64).to_bits()),
            at: AtomicU64::new(NEVER),
            update: Mutex::new(()),
        }
    }

    /// The estimate at `now` (nanoseconds), decayed since it was set.
    #[inline]
    pub(crate) fn estimate(&self, now: u64) -> f64 {
        let at = self.at.load(Relaxed);
        let estimate = f64::from_bits(self.estimate.load(Relaxed));
        if at == NEVER {
            return estimate;
        }
        estimate * self.decay_since(at, now)
    }

    /// `exp(-(now - at) / decay)`.
    #[inline]
    fn decay_since(&self, at: u64, now: u64) -> f64 {
        (-(now.saturating_sub(at) as f64) / self.decay_ns).exp()
    }

    /// Records a response of latency `rtt` at `now` (both nanoseconds).
    pub(crate) fn record(&self, rtt: u64, now: u64) {
        // A completion at the end of the clock (`Duration::MAX` saturates to
        // u64::MAX ns) must not store [`NEVER`]: it is taken as the last
        // time before it.
        let now = now.min(NEVER - 1);
        let _serial = self.update.lock().unwrap_or_else(|e| e.into_inner());
        let rtt = rtt as f64;
        let at = self.at.load(Relaxed);
        let next = if at == NEVER {
            rtt
        } else {
            let d = self.decay_since(at, now);
            let estimate = f64::from_bits(self.estimate.load(Relaxed));
            let decayed = estimate * d;
            if rtt > decayed {
                rtt
            } else {
                decayed + rtt * (1.0 - d)
            }
        };
        self.estimate.store(next.to_bits(), Relaxed);
        self.at
            .store(now.max(if at == NEVER { 0 } else { at }), Relaxed);
    }
}

impl Observer for PeakEwma {
    fn observe(&self, outcome: &Outcome) {
        self.record(nanos(outcome.latency()), nanos(outcome.completed_at()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn ewma(decay_ms: u64) -> PeakEwma {
        PeakEwma::new(PeakEwmaConfig {
            decay: Duration::from_millis(decay_ms),
            default_rtt: Duration::from_millis(30),
        })
    }

    fn close(got: f64, want: f64) {
        assert!((got - want).abs() < 1.0, "{got} != {want}");
    }

    #[test]
    fn the_default_holds_until_the_first_response_replaces_it() {
        let e = ewma(1000);
        close(e.estimate(0), 30.0 * MS as f64);
        close(e.estimate(5000 * MS), 30.0 * MS as f64);
        e.record(10 * MS, 100 * MS);
        close(e.estimate(100 * MS), 10.0 * MS as f64);
    }

    #[test]
    fn a_peak_is_believed_at_once_and_decays_by_e_per_decay_time() {
        let e = ewma(1000);
        e.record(10 * MS, 0);
        e.record(100 * MS, 1);
        close(e.estimate(1), 100.0 * MS as f64);
        // One decay time later: 100 ms / e = 36.787944 ms.
        close(e.estimate(1 + 1000 * MS), 36_787_944.1);
        // Two: 100 / e^2 = 13.533528 ms.
        close(e.estimate(1 + 2000 * MS), 13_533_528.3);
    }

    /// Responses at the end of the clock are measured ones: a lower one
    /// right after a peak, at the same instant, leaves the peak.
    #[test]
    fn a_response_at_the_end_of_the_clock_is_a_measured_one() {
        let e = ewma(1000);
        e.record(100 * MS, u64::MAX);
        e.record(MS, u64::MAX);
        close(e.estimate(u64::MAX), 100.0 * MS as f64);
    }

    #[test]
    fn a_lower_response_moves_the_average_by_the_elapsed_share() {
        let e = ewma(1000);
        e.record(100 * MS, 0);
        // 1 s later: d = 1/e; 100/e + 10 (1 - 1/e) = 36.787944 + 6.321206.
        e.record(10 * MS, 1000 * MS);
        close(e.estimate(1000 * MS), 43_109_149.8);
        // Right after: d = 1, the estimate does not move.
        e.record(MS, 1000 * MS);
        close(e.estimate(1000 * MS), 43_109_149.8);
    }
}
