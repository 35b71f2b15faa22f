//! The fleet view: bounded loads from the load the backends report.
//!
//! One balancer's cap counts only its own requests. With many balancers
//! (every client of a service, every gateway replica), each sees a small
//! share of the traffic and the sum over the fleet passes the bound by far.
//! A backend knows its own load across every balancer: when it reports it
//! ([`LoadReport`]), the bounded policies (loadring's `load_factor=`,
//! HAProxy's `balance=` rule, Envoy's `hash_balance_factor=`) take an
//! endpoint's load to be
//!
//! ```text
//! load = reported + (this balancer's in flight now - its in flight when the report arrived)
//! ```
//!
//! that is the last report, plus this balancer's picks on the endpoint since
//! that report, minus this balancer's requests on it that completed since
//! (never below 0). The mean of the cap is taken over those loads; an
//! endpoint without a fresh report counts this balancer's requests in flight
//! on it, as without reports. A report older than the policy's
//! `report_max_age=` (default 1 s) is not fresh.
//!
//! **Limits.** Between two reports the view knows nothing of the other
//! balancers: their picks since the report are missing, so the view errs
//! low by the traffic of the others over the age of the report (with a
//! report on every response, a balancer hears a backend about once every K
//! / the backend's completions per second, K balancers). Every balancer that
//! sees room on an endpoint fills it with its own picks, so a fleet can put
//! up to K times that room there before the next reports say so: reports
//! keep keys at their owners, they do not make the peak lower (`loadring
//! simulate --balancers K --load-report` measures both). A backend that never
//! reports is counted as before, by this balancer alone: its load is
//! understated next to the backends that report. A backend that counts
//! differently (queued requests, or only some of its listeners) moves the
//! mean and the caps by as much: the count must be requests in service, the
//! same unit a balancer counts. Requests this balancer sent before a report
//! and the backend had not yet seen are missing from both the report and the
//! picks since it (a short underestimate).
//!
//! **Cost.** No lock: a report is two atomic words per endpoint, written
//! with compare-and-swap; a bounded pick reads them next to the in-flight
//! count and reserves by one compare-and-swap against the cap, exact for
//! the view it read. While no endpoint of the balancer has ever reported,
//! a pick reads one flag more and nothing else; once one has, a pick that
//! needs the mean sums the view over the endpoints (`O(n)`), and a pick
//! reads the clock (the request's [`Request::at`](crate::Request::at), else
//! the process clock) to tell fresh reports from old ones.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use crate::error::{ParseError, ParseErrorKind};
use crate::util::duration::take_duration;
use crate::util::params::Params;

/// How long a report counts when the policy does not say
/// (`report_max_age=`).
pub const DEFAULT_REPORT_MAX_AGE: Duration = Duration::from_secs(1);

/// The least and the greatest `report_max_age=`.
const MAX_AGE_RANGE: (Duration, Duration) = (Duration::from_millis(1), Duration::from_secs(3600));

/// `report_max_age=DUR` of policy `name`, accepted by bounded policies only.
pub(crate) fn take_report_max_age(
    params: &mut Params<'_>,
    name: &str,
    bounded: bool,
) -> Result<Option<Duration>, ParseError> {
    const KEY: &str = "report_max_age";
    if bounded {
        return take_duration(params, KEY, MAX_AGE_RANGE.0, MAX_AGE_RANGE.1);
    }
    if params.has(KEY) {
        return Err(ParseError::new(
            ParseErrorKind::Conflict,
            format!(
                "{name}: {KEY} applies to bounded policies only (give load_factor, balance or \
             hash_balance_factor too)"
            ),
        )
        .with_policy(name)
        .with_key(KEY));
    }
    Ok(None)
}

/// What the members and the pools of one balancer share about reports.
#[derive(Debug)]
pub(crate) struct FleetState {
    /// Set once any member has reported: until then a bounded pick's view
    /// is the local count, with nothing more read.
    reported: AtomicBool,
    /// How long a report counts, in µs.
    pub(crate) max_age: AtomicU64,
}

impl Default for FleetState {
    fn default() -> Self {
        FleetState {
            reported: AtomicBool::new(false),
            max_age: AtomicU64::new(micros(DEFAULT_REPORT_MAX_AGE)),
        }
    }
}

impl FleetState {
    #[inline]
    pub(crate) fn has_reports(&self) -> bool {
        self.reported.load(Relaxed)
    }

    pub(crate) fn set_reported(&self) {
        if !self.reported.load(Relaxed) {
            self.reported.store(true, Relaxed);
        }
    }

    /// How long a report counts.
    pub(crate) fn max_age(&self) -> Duration {
        Duration::from_micros(self.max_age.load(Relaxed))
    }

    pub(crate) fn set_max_age(&self, max_age: Duration) {
        self.max_age.store(micros(max_age), Relaxed);
    }
}

/// A backend's own count of its requests in service, across every balancer
/// that sends it requests, at a time on the balancer's clock.
///
/// Given with an outcome ([`Outcome::with_report`](crate::Outcome::with_report))
/// or on its own ([`Balancer::report_load`](crate::Balancer::report_load)).
///
/// ```
/// use std::time::Duration;
/// use loadring::LoadReport;
///
/// let report = LoadReport::new(12).at(Duration::from_millis(40));
/// assert_eq!(report.in_service(), 12);
/// assert_eq!(report.reported_at(), Duration::from_millis(40));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadReport {
    in_service: u64,
    at: Option<Duration>,
}

impl LoadReport {
    /// `in_service` requests in service on the backend, as it counts them.
    pub fn new(in_service: u64) -> Self {
        LoadReport {
            in_service,
            at: None,
        }
    }

    /// The report is dated `at`, on the clock of the requests'
    /// [`Request::at`](crate::Request::at) (virtual time in a simulation).
    /// Without it, the process clock when the balancer is told.
    #[must_use]
    pub fn at(mut self, at: Duration) -> Self {
        self.at = Some(at);
        self
    }

    /// The backend's requests in service.
    pub fn in_service(&self) -> u64 {
        self.in_service
    }

    /// The report's time: the one given with [`LoadReport::at`], else the
    /// process clock now.
    pub fn reported_at(&self) -> Duration {
        self.at.unwrap_or_else(crate::clock::now)
    }
}

/// Bits of a report's generation in both words of a [`ReportCell`].
const GEN_BITS: u32 = 16;
/// Bits of the payload (offset or time) under the generation.
const VALUE_BITS: u32 = 64 - GEN_BITS;
const VALUE_MASK: u64 = (1 << VALUE_BITS) - 1;
/// The largest offset a word holds (signed, `VALUE_BITS` wide).
const MAX_OFFSET: i64 = (1 << (VALUE_BITS - 1)) - 1;

fn pack(generation: u64, value: u64) -> u64 {
    (generation << VALUE_BITS) | (value & VALUE_MASK)
}

fn generation(word: u64) -> u64 {
    word >> VALUE_BITS
}

/// The signed offset of an offset word (two's complement in `VALUE_BITS`).
fn offset(word: u64) -> i64 {
    let shift = 64 - VALUE_BITS;
    (((word & VALUE_MASK) << shift) as i64) >> shift
}

/// Microseconds, saturating at what a word holds (8.9 years).
pub(crate) fn micros(time: Duration) -> u64 {
    u64::try_from(time.as_micros())
        .unwrap_or(u64::MAX)
        .min(VALUE_MASK)
}

/// One endpoint's last report, as two atomic words that carry the same
/// generation: the offset (`reported - in flight here when it arrived`) and
/// the report's time. Generation 0 means no report yet.
///
/// Writers never wait: a report takes the next generation with a
/// compare-and-swap of the offset word, then writes its time unless a later
/// report has taken over (the later one writes its own). A reader that finds
/// the two generations apart (a report half written) uses the local count
/// for that pick: it never waits either.
#[derive(Debug, Default)]
pub(crate) struct ReportCell {
    offset: AtomicU64,
    at: AtomicU64,
}

impl ReportCell {
    /// Records a report of `reported` requests in service, arriving while
    /// this balancer has `local` requests in flight on the endpoint, dated
    /// `at`.
    pub(crate) fn publish(&self, reported: u64, local: u64, at: Duration) {
        let diff = i128::from(reported) - i128::from(local);
        let diff = diff.clamp(-i128::from(MAX_OFFSET), i128::from(MAX_OFFSET)) as i64;
        let mut cur = self.offset.load(Relaxed);
        let mine = loop {
            // Generation 0 is "never reported": skip it on wrapping.
            let next = (generation(cur) + 1) & ((1 << GEN_BITS) - 1);
            let next = next.max(1);
            let word = pack(next, diff as u64);
            match self
                .offset
                .compare_exchange_weak(cur, word, Relaxed, Relaxed)
            {
                Ok(_) => break next,
                Err(now) => cur = now,
            }
        };
        let word = pack(mine, micros(at));
        let mut cur = self.at.load(Relaxed);
        while generation(self.offset.load(Relaxed)) == mine {
            match self.at.compare_exchange_weak(cur, word, Relaxed, Relaxed) {
                Ok(_) => break,
                Err(now) => cur = now,
            }
        }
    }

    /// Whether a report was ever recorded.
    #[cfg(test)]
    pub(crate) fn has_report(&self) -> bool {
        generation(self.offset.load(Relaxed)) != 0
    }

    /// The offset of the last report if it is fresh at `now` (µs) for
    /// `max_age` (µs): dated no more than `max_age` before `now`. `now` is
    /// asked only when there is a report.
    #[inline]
    pub(crate) fn fresh_offset(&self, now: impl FnOnce() -> u64, max_age: u64) -> Option<i64> {
        let word = self.offset.load(Relaxed);
        let gen = generation(word);
        if gen == 0 {
            return None;
        }
        let at = self.at.load(Relaxed);
        if generation(at) != gen {
            return None;
        }
        let age = now().saturating_sub(at & VALUE_MASK);
        (age <= max_age).then(|| offset(word))
    }
}

/// `local + offset`, never below 0.
#[inline]
pub(crate) fn with_offset(local: u64, offset: i64) -> u64 {
    let load = i128::from(local) + i128::from(offset);
    u64::try_from(load.max(0)).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip_signed_offsets_and_generations() {
        for (gen, value) in [(1u64, 0i64), (7, -1), (65535, MAX_OFFSET), (3, -MAX_OFFSET)] {
            let word = pack(gen, value as u64);
            assert_eq!((generation(word), offset(word)), (gen, value));
        }
    }

    #[test]
    fn a_cell_keeps_the_last_report_and_its_age() {
        let cell = ReportCell::default();
        assert!(!cell.has_report());
        assert_eq!(cell.fresh_offset(|| 0, 1_000), None, "no report");
        cell.publish(10, 3, Duration::from_millis(5));
        assert!(cell.has_report());
        assert_eq!(cell.fresh_offset(|| 5_000, 0), Some(7));
        assert_eq!(cell.fresh_offset(|| 6_000, 1_000), Some(7), "at the age");
        assert_eq!(cell.fresh_offset(|| 6_001, 1_000), None, "past the age");
        assert_eq!(cell.fresh_offset(|| 0, 0), Some(7), "dated ahead: fresh");
        cell.publish(0, 4, Duration::from_millis(9));
        assert_eq!(cell.fresh_offset(|| 9_000, 0), Some(-4));
        assert_eq!(with_offset(3, -4), 0, "never below 0");
        assert_eq!(with_offset(3, 4), 7);
    }

    /// Generations wrap past 0, which stays "never reported".
    #[test]
    fn generations_skip_zero_when_they_wrap() {
        let cell = ReportCell::default();
        for n in 0..(1u64 << GEN_BITS) + 3 {
            cell.publish(n, 0, Duration::from_micros(n));
            assert!(cell.has_report(), "after {n} reports");
        }
        let last = (1u64 << GEN_BITS) + 2;
        assert_eq!(cell.fresh_offset(|| last, 0), Some(last as i64));
    }

    /// Reports racing from several threads leave a cell whose two words
    /// agree, holding one of the reports whole.
    #[test]
    fn racing_reports_leave_one_whole_report() {
        for _ in 0..50 {
            let cell = ReportCell::default();
            std::thread::scope(|s| {
                for t in 0..3u64 {
                    let cell = &cell;
                    s.spawn(move || {
                        for i in 0..200u64 {
                            // Each report's offset and time agree: offset = time.
                            let v = t * 1000 + i;
                            cell.publish(v, 0, Duration::from_micros(v));
                        }
                    });
                }
            });
            let word = cell.offset.load(Relaxed);
            let at = cell.at.load(Relaxed);
            assert_eq!(generation(word), generation(at), "words apart");
            assert_eq!(offset(word) as u64, at & VALUE_MASK, "a torn report");
        }
    }
}
