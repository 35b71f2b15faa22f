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
//! that report, minus this balancer's requests on it that completed since,
//! and never below this balancer's own requests in flight on it. The mean of
//! the cap is taken over those loads; an
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
//! up to K times that room there before the next reports say so (a backend
//! held at its cap dips when completions come before the next picks, and
//! each dip is heard by the balancers one report at a time): reports keep
//! keys at their owners and hold the busiest backend's load over time to
//! one balancer's bound, they do not make the worst instant lower
//! (`loadring simulate --balancers K --load-report` measures all three).
//!
//! **`report_rule=share`.** A bounded policy may instead share the room a
//! report shows: each balancer extrapolates the fleet's change on an
//! endpoint since its report from its own, in proportion to its share of
//! the fleet's load, so it reuses the slots its own completions freed and
//! takes its share of the rest of the room (see `fleet_view.rs`). It damps
//! the herd (the worst instant and the busiest backend fall) at the cost of
//! locality: with one or two requests in flight per balancer and backend, a
//! balancer cannot tell a burst of keys from the fleet filling the room, and
//! spills the burst. It assumes the balancers alike (traffic spread evenly
//! over them); one balancer (or one holding the whole view) keeps the
//! view's rule exactly. A backend that never
//! reports is counted as before, by this balancer alone: its load is
//! understated next to the backends that report. A backend that counts
//! differently (queued requests, or only some of its listeners) moves the
//! mean and the caps by as much: the count must be requests in service, the
//! same unit a balancer counts.
//!
//! **A report below this balancer's own count.** A backend's count misses
//! this balancer's requests still on their way to it and those whose
//! responses are on their way back: when requests complete together (clients
//! in step, a burst of short calls), a report can say 0 while this balancer
//! still holds several there. Taken as is, the difference would stay in the
//! view until the next report, a hole the balancer fills with its own picks
//! past the cap. A report tells how many requests the other balancers have
//! there, `reported - this balancer's in flight`, and that is never below
//! 0: the view takes it as 0, so an endpoint's load is never below this
//! balancer's own in flight on it, the count it would use without reports
//! (one balancer's reports then never change a pick).
//!
//! **Cost.** No lock, and `O(1)` in the endpoints: a report is two atomic
//! words per endpoint, written with compare-and-swap, and the balancer keeps
//! the sum of the fresh reports' offsets as reports come, expire and leave
//! with their member, so the mean is this balancer's running total plus
//! that sum (every offset is at least 0; a locality policy's per-zone pickers still sum their zone, `O(zone)`,
//! and take a report's age from its time).
//! A bounded pick reads the endpoint's words next to its in-flight count
//! and reserves by one compare-and-swap against the cap, exact for the view
//! it read. While no endpoint has ever reported, a pick reads one flag more
//! and nothing else. Expiry: the balancer knows when its oldest counted
//! report expires; the first pick at or past that time (the request's
//! [`Request::at`](crate::Request::at), or the process clock, read once in
//! 64 picks of a thread when requests carry no time) sweeps the endpoints
//! once (`O(n)`, about once per `report_max_age=` when reports keep
//! coming). A report thus leaves the view at its age exactly for requests
//! with a time, and within 64 picks of that thread after it otherwise.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use std::time::Duration;

use crate::echo::Echo;
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
    refuse_unbounded(params, name, KEY)?;
    Ok(None)
}

/// The error for `key` given to policy `name`, which has no bound.
fn refuse_unbounded(params: &Params<'_>, name: &str, key: &str) -> Result<(), ParseError> {
    if !params.has(key) {
        return Ok(());
    }
    Err(ParseError::new(
        ParseErrorKind::Conflict,
        format!(
            "{name}: {key} applies to bounded policies only (give load_factor, balance or \
             hash_balance_factor too)"
        ),
    )
    .with_policy(name)
    .with_key(key))
}

/// `report_rule=view|share` of policy `name`, accepted by bounded policies
/// only: whether the policy shares the room a report shows (see
/// `fleet_view.rs`). `view` (the default) counts the fleet view alone.
pub(crate) fn take_report_rule(
    params: &mut Params<'_>,
    name: &str,
    bounded: bool,
) -> Result<bool, ParseError> {
    const KEY: &str = "report_rule";
    if !bounded {
        refuse_unbounded(params, name, KEY)?;
        return Ok(false);
    }
    // In any ASCII case, as every choice of a specification.
    match params.take(KEY) {
        None => Ok(false),
        Some(value) if value.eq_ignore_ascii_case("view") => Ok(false),
        Some(value) if value.eq_ignore_ascii_case("share") => Ok(true),
        Some(value) => Err(params.error(KEY, value, "view or share", |accepted| {
            format!("{KEY}={} is not a rule: accepted {accepted}", Echo(value))
        })),
    }
}

/// What the members and the pools of one balancer share about reports.
#[derive(Debug)]
pub(crate) struct FleetState {
    /// Set once any member has reported: until then a bounded pick's view
    /// is the local count, with nothing more read.
    reported: AtomicBool,
    /// How long a report counts, in µs.
    pub(crate) max_age: AtomicU64,
    /// `report_rule=share`: a pick takes its share of the room a report
    /// shows (see `fleet_view.rs`).
    pub(crate) share: AtomicBool,
    /// The offsets of the counted reports of the members, summed: the
    /// fleet view's total is this balancer's in flight plus this, `O(1)`.
    pub(crate) offsets: AtomicI64,
    /// When the next sweep of expired reports is due (µs): the earliest
    /// time a counted report expires, `u64::MAX` while none is counted.
    /// Kept by `fetch_min` as reports come, recomputed by each sweep.
    next_sweep: AtomicU64,
}

impl Default for FleetState {
    fn default() -> Self {
        FleetState {
            reported: AtomicBool::new(false),
            max_age: AtomicU64::new(micros(DEFAULT_REPORT_MAX_AGE)),
            share: AtomicBool::new(false),
            offsets: AtomicI64::new(0),
            next_sweep: AtomicU64::new(u64::MAX),
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
        // Expiry times change with the age: the next pick sweeps and finds
        // the next one.
        self.next_sweep.store(0, Relaxed);
    }

    /// Whether a report is counted in the sum (it is while a sweep is due
    /// some time; a pick that races a sweep in progress may see none).
    #[inline]
    pub(crate) fn counts_reports(&self) -> bool {
        self.next_sweep.load(Relaxed) != u64::MAX
    }

    /// Whether a sweep may be due at `now` (µs): one read, no claim.
    #[inline]
    pub(crate) fn sweep_due_at(&self, now: u64) -> bool {
        now >= self.next_sweep.load(Relaxed)
    }

    /// Claims the sweep due at `now` (µs), if one is: one caller sweeps,
    /// the others go on. The claimant then calls [`FleetState::swept`].
    pub(crate) fn claim_sweep(&self, now: u64) -> bool {
        let due = self.next_sweep.load(Relaxed);
        now >= due
            && self
                .next_sweep
                .compare_exchange(due, u64::MAX, Relaxed, Relaxed)
                .is_ok()
    }

    /// A sweep found `next` (µs) the earliest time a report still counted
    /// expires (`u64::MAX`: none).
    pub(crate) fn swept(&self, next: u64) {
        self.next_sweep.fetch_min(next, Relaxed);
    }

    /// A report dated `at` is counted: the next sweep is due when it
    /// expires, if no earlier one is.
    pub(crate) fn counted_report(&self, at: Duration) {
        let expires = micros(at)
            .saturating_add(self.max_age.load(Relaxed))
            .saturating_add(1);
        self.next_sweep.fetch_min(expires, Relaxed);
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
    /// `in_service` requests in service on the backend, as it counts them,
    /// up to [`MAX_IN_SERVICE`](crate::orca::MAX_IN_SERVICE) (2^32 - 1, the
    /// most an ORCA header may give): a larger count is taken as that.
    ///
    /// The bound keeps every sum of reports exact: a balancer adds up the
    /// reports of all its endpoints, and 131,073 endpoints reporting 2^46
    /// each would pass 64 bits.
    ///
    /// ```
    /// use loadring::{orca, LoadReport};
    ///
    /// assert_eq!(LoadReport::new(u64::MAX).in_service(), orca::MAX_IN_SERVICE);
    /// ```
    pub fn new(in_service: u64) -> Self {
        LoadReport {
            in_service: in_service.min(crate::orca::MAX_IN_SERVICE),
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

/// Bits of a report's generation in every word of a [`ReportCell`].
const GEN_BITS: u32 = 16;
/// Bits of the payload (time or count) under the generation.
const VALUE_BITS: u32 = 64 - GEN_BITS;
const VALUE_MASK: u64 = (1 << VALUE_BITS) - 1;
/// The state word's flag: the offset is counted in the balancer's sum.
const COUNTED: u64 = 1 << (VALUE_BITS - 1);
/// Bits of the offset in the state word (signed), under the flag.
const OFFSET_BITS: u32 = VALUE_BITS - 1;
const OFFSET_MASK: u64 = (1 << OFFSET_BITS) - 1;
/// The largest offset a word holds.
const MAX_OFFSET: i64 = (1 << (OFFSET_BITS - 1)) - 1;

fn pack(generation: u64, value: u64) -> u64 {
    (generation << VALUE_BITS) | (value & VALUE_MASK)
}

fn generation(word: u64) -> u64 {
    word >> VALUE_BITS
}

/// The signed offset of a state word (two's complement in `OFFSET_BITS`).
fn offset(word: u64) -> i64 {
    let shift = 64 - OFFSET_BITS;
    (((word & OFFSET_MASK) << shift) as i64) >> shift
}

fn counted(word: u64) -> bool {
    word & COUNTED != 0
}

/// Microseconds, saturating at what a word holds (8.9 years).
pub(crate) fn micros(time: Duration) -> u64 {
    u64::try_from(time.as_micros())
        .unwrap_or(u64::MAX)
        .min(VALUE_MASK)
}

/// One endpoint's last report as a pick reads it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Report {
    /// `reported - local`: the view's load is `local + offset`.
    pub(crate) offset: i64,
    /// Whether the offset is counted in the balancer's sum (fresh).
    pub(crate) counted: bool,
    /// The report's time, µs.
    pub(crate) at: u64,
    /// This balancer's in flight on the endpoint when the report arrived,
    /// the requests completing with it included (`report_rule=share`).
    pub(crate) base: u64,
    /// A number in `[0, 1)` drawn once per report from its words, the same
    /// for every pick that reads it (`report_rule=share` rounds with it).
    pub(crate) draw: f64,
}

/// One endpoint's last report, as three atomic words that carry the same
/// generation: the state (the offset, `reported - local` with `local` this
/// balancer's in flight on the endpoint when the report arrived, and
/// whether it is counted in the balancer's sum of offsets), the report's
/// time, and the base (`local` plus the requests completing with the
/// report). Generation 0 means no report yet.
///
/// Writers never wait: a report takes the next generation with a
/// compare-and-swap of the state word, then writes the time and the base
/// unless a later report has taken over (the later one writes its own). A
/// reader that finds the generations apart (a report half written) uses the
/// local count for that pick: it never waits either. Every change of the
/// state word that counts an offset in or out of the sum is one
/// compare-and-swap, followed by the matching add to the sum: the sum is
/// exact once the writers are done, and off by one report's offset while
/// one is between the two steps.
#[derive(Debug, Default)]
pub(crate) struct ReportCell {
    state: AtomicU64,
    at: AtomicU64,
    base: AtomicU64,
}

impl ReportCell {
    /// Records a report of `reported` requests in service, arriving while
    /// this balancer has `local` requests in flight on the endpoint (those
    /// completing with it left out: the report leaves them out too), dated
    /// `at`. The offset is counted in `sum`.
    #[cfg(test)]
    pub(crate) fn publish(&self, reported: u64, local: u64, at: Duration, sum: &AtomicI64) {
        self.publish_base(reported, local, local, at, sum);
    }

    /// [`ReportCell::publish`] with the `base`: `local` plus the requests
    /// completing with the report.
    pub(crate) fn publish_base(
        &self,
        reported: u64,
        local: u64,
        base: u64,
        at: Duration,
        sum: &AtomicI64,
    ) {
        // The other balancers' requests, never below 0 (the module's "a
        // report below this balancer's own count").
        let diff = i128::from(reported) - i128::from(local);
        let diff = diff.clamp(0, i128::from(MAX_OFFSET)) as i64;
        let mut cur = self.state.load(SeqCst);
        let mine = loop {
            // Generation 0 is "never reported": skip it on wrapping.
            let next = (generation(cur) + 1) & ((1 << GEN_BITS) - 1);
            let next = next.max(1);
            let word = pack(next, COUNTED | (diff as u64 & OFFSET_MASK));
            match self.state.compare_exchange_weak(cur, word, SeqCst, Relaxed) {
                Ok(_) => {
                    let old = if counted(cur) { offset(cur) } else { 0 };
                    sum.fetch_add(diff - old, Relaxed);
                    break next;
                }
                Err(now) => cur = now,
            }
        };
        for (word, value) in [(&self.at, micros(at)), (&self.base, base.min(VALUE_MASK))] {
            let new = pack(mine, value);
            let mut cur = word.load(Relaxed);
            while generation(self.state.load(Relaxed)) == mine {
                match word.compare_exchange_weak(cur, new, Relaxed, Relaxed) {
                    Ok(_) => break,
                    Err(now) => cur = now,
                }
            }
        }
    }

    /// Takes the last report's offset out of `sum` if it is counted there
    /// and still the report read as `seen` (any report if `None`).
    pub(crate) fn uncount(&self, seen: Option<u64>, sum: &AtomicI64) {
        let mut cur = self.state.load(SeqCst);
        loop {
            if !counted(cur) || seen.is_some_and(|g| g != generation(cur)) {
                return;
            }
            match self
                .state
                .compare_exchange_weak(cur, cur & !COUNTED, SeqCst, Relaxed)
            {
                Ok(_) => {
                    sum.fetch_sub(offset(cur), Relaxed);
                    return;
                }
                Err(now) => cur = now,
            }
        }
    }

    /// Whether a report was ever recorded.
    #[cfg(test)]
    pub(crate) fn has_report(&self) -> bool {
        generation(self.state.load(Relaxed)) != 0
    }

    /// The last report's offset, whether it is counted, and its time (µs),
    /// if there is one: what the view needs (two words; the base is read
    /// by [`ReportCell::read`] only).
    #[inline]
    pub(crate) fn read_view(&self) -> Option<(i64, bool, u64)> {
        let word = self.state.load(Relaxed);
        let gen = generation(word);
        if gen == 0 {
            return None;
        }
        let at = self.at.load(Relaxed);
        (generation(at) == gen).then(|| (offset(word), counted(word), at & VALUE_MASK))
    }

    /// The last report, whole, if there is one.
    #[inline]
    pub(crate) fn read(&self) -> Option<Report> {
        let word = self.state.load(Relaxed);
        let gen = generation(word);
        if gen == 0 {
            return None;
        }
        let at = self.at.load(Relaxed);
        let base = self.base.load(Relaxed);
        if generation(at) != gen || generation(base) != gen {
            return None;
        }
        Some(Report {
            offset: offset(word),
            counted: counted(word),
            at: at & VALUE_MASK,
            base: base & VALUE_MASK,
            draw: draw(word ^ at.rotate_left(21) ^ base.rotate_left(42)),
        })
    }

    /// Takes the last report out of `sum` if it is counted there and older
    /// than `max_age` at `now` (µs). Returns when the report still counted
    /// expires (µs), if one is. A report half written, or replaced while
    /// this looks (the swap expects the very word read), is left counted
    /// and its expiry returned as due now, for the next sweep.
    pub(crate) fn expire(&self, now: u64, max_age: u64, sum: &AtomicI64) -> Option<u64> {
        let word = self.state.load(SeqCst);
        if !counted(word) {
            return None;
        }
        let at = self.at.load(Relaxed);
        if generation(at) != generation(word) {
            return Some(now);
        }
        let expires = (at & VALUE_MASK).saturating_add(max_age).saturating_add(1);
        if now < expires {
            return Some(expires);
        }
        match self
            .state
            .compare_exchange(word, word & !COUNTED, SeqCst, Relaxed)
        {
            Ok(_) => {
                sum.fetch_sub(offset(word), Relaxed);
                None
            }
            Err(_) => Some(now),
        }
    }

    /// The offset of the last report if it is fresh at `now` (µs) for
    /// `max_age` (µs): dated no more than `max_age` before `now`. `now` is
    /// asked only when there is a report.
    #[inline]
    pub(crate) fn fresh_offset(&self, now: impl FnOnce() -> u64, max_age: u64) -> Option<i64> {
        let (offset, _, at) = self.read_view()?;
        let age = now().saturating_sub(at);
        (age <= max_age).then_some(offset)
    }
}

/// splitmix64's finaliser, as a number in `[0, 1)`.
fn draw(word: u64) -> f64 {
    let mut z = word.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
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

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn words_round_trip_signed_offsets_generations_and_the_flag() {
        for (gen, value) in [(1u64, 0i64), (7, -1), (65535, MAX_OFFSET), (3, -MAX_OFFSET)] {
            for flag in [0, COUNTED] {
                let word = pack(gen, flag | (value as u64 & OFFSET_MASK));
                assert_eq!(
                    (generation(word), offset(word), counted(word)),
                    (gen, value, flag != 0)
                );
            }
        }
    }

    #[test]
    fn a_cell_keeps_the_last_report_and_its_age_and_counts_its_offset() {
        let (cell, sum) = (ReportCell::default(), AtomicI64::new(0));
        assert!(!cell.has_report());
        assert_eq!(cell.fresh_offset(|| 0, 1_000), None, "no report");
        cell.publish(10, 3, ms(5), &sum);
        assert!(cell.has_report());
        let r = cell.read().unwrap();
        assert_eq!((r.offset, r.counted, r.at), (7, true, 5_000));
        assert_eq!(sum.load(Relaxed), 7);
        assert_eq!(cell.fresh_offset(|| 5_000, 0), Some(7));
        assert_eq!(cell.fresh_offset(|| 6_000, 1_000), Some(7), "at the age");
        assert_eq!(cell.fresh_offset(|| 6_001, 1_000), None, "past the age");
        assert_eq!(cell.fresh_offset(|| 0, 0), Some(7), "dated ahead: fresh");
        cell.publish(0, 3, ms(9), &sum);
        assert_eq!(cell.read().unwrap().offset, 0, "no other balancer's load");
        assert_eq!(sum.load(Relaxed), 0, "the new offset replaces the old");
        cell.publish(5, 3, ms(9), &sum);
        assert_eq!(sum.load(Relaxed), 2);
        assert_eq!(with_offset(2, -3), 0, "never below 0");
        assert_eq!(with_offset(3, 4), 7);
    }

    /// A report's generation ties its time and base to its state word: each
    /// report takes the next one, 1 to 2^16 - 1 and round again (0 is
    /// "never reported"), so a generation comes back only after 65,535
    /// newer reports, and the words read back whole across the wrap.
    #[test]
    fn generations_count_up_and_wrap_past_zero() {
        let (cell, sum) = (ReportCell::default(), AtomicI64::new(0));
        let mut last = 0;
        for n in 0..(1u64 << GEN_BITS) + 3 {
            cell.publish_base(n % 50 + 3, 3, 4, Duration::from_micros(n), &sum);
            let gen = generation(cell.state.load(SeqCst));
            let want = if last == (1 << GEN_BITS) - 1 {
                1
            } else {
                last + 1
            };
            assert_eq!(gen, want, "report {n}");
            last = gen;
            let r = cell.read().unwrap();
            assert_eq!(
                (r.offset, r.base, r.at, r.counted),
                ((n % 50) as i64, 4, n, true)
            );
            assert_eq!(sum.load(Relaxed), (n % 50) as i64);
        }
    }

    #[test]
    fn expiry_and_removal_take_the_offset_out_of_the_sum_once() {
        let (cell, sum) = (ReportCell::default(), AtomicI64::new(0));
        cell.publish(12, 2, ms(10), &sum);
        assert_eq!(cell.expire(11_000, 1_000, &sum), Some(11_001));
        assert_eq!(sum.load(Relaxed), 10, "at the age: still counted");
        assert_eq!(cell.expire(11_001, 1_000, &sum), None);
        assert_eq!(sum.load(Relaxed), 0, "past the age");
        assert!(!cell.read().unwrap().counted);
        assert_eq!(cell.expire(11_001, 1_000, &sum), None);
        cell.uncount(None, &sum);
        assert_eq!(sum.load(Relaxed), 0, "out once");
        cell.publish(5, 0, ms(20), &sum);
        assert_eq!(sum.load(Relaxed), 5, "a new report counts again");
        cell.uncount(Some(99), &sum);
        assert_eq!(sum.load(Relaxed), 5, "another generation: left alone");
        cell.uncount(None, &sum);
        assert_eq!(sum.load(Relaxed), 0);
    }

    #[test]
    fn each_report_keeps_its_base_and_draws_its_own_number_below_one() {
        let (cell, sum) = (ReportCell::default(), AtomicI64::new(0));
        cell.publish_base(9, 3, 4, ms(1), &sum);
        let r = cell.read().unwrap();
        assert_eq!((r.offset, r.base), (6, 4));
        let mut draws = Vec::new();
        for n in 0..1_000u64 {
            cell.publish_base(n % 7, n % 5, n % 5 + 1, Duration::from_micros(n), &sum);
            let d = cell.read().unwrap().draw;
            assert!((0.0..1.0).contains(&d), "{d}");
            assert_eq!(cell.read().unwrap().draw, d, "the same for every reader");
            draws.push(d);
        }
        let mean = draws.iter().sum::<f64>() / draws.len() as f64;
        assert!((0.45..0.55).contains(&mean), "mean {mean}");
        let low = draws.iter().filter(|&&d| d < 0.25).count();
        assert!((200..300).contains(&low), "{low} below 0.25");
    }

    /// Generations wrap past 0, which stays "never reported".
    #[test]
    fn generations_skip_zero_when_they_wrap() {
        let (cell, sum) = (ReportCell::default(), AtomicI64::new(0));
        for n in 0..(1u64 << GEN_BITS) + 3 {
            cell.publish(n, 0, Duration::from_micros(n), &sum);
            assert!(cell.has_report(), "after {n} reports");
        }
        let last = (1u64 << GEN_BITS) + 2;
        assert_eq!(cell.fresh_offset(|| last, 0), Some(last as i64));
        assert_eq!(sum.load(Relaxed), last as i64);
    }

    /// Reports and expiries racing from several threads leave a cell whose
    /// words agree, holding one of the reports whole, and a sum that counts
    /// it exactly when its flag says so.
    #[test]
    fn racing_reports_and_expiries_leave_one_whole_report_and_an_exact_sum() {
        for round in 0..50u64 {
            let (cell, sum) = (ReportCell::default(), AtomicI64::new(0));
            std::thread::scope(|s| {
                for t in 0..3u64 {
                    let (cell, sum) = (&cell, &sum);
                    s.spawn(move || {
                        for i in 0..200u64 {
                            // Each report's offset and time agree.
                            let v = t * 1000 + i;
                            cell.publish(2 * v, v, Duration::from_micros(v), sum);
                            if (i + round) % 3 == 0 {
                                cell.expire(v + 500, 100, sum);
                            }
                        }
                    });
                }
            });
            let r = cell.read().expect("words apart");
            assert_eq!(r.offset as u64, r.at, "a torn report");
            let expected = if r.counted { r.offset } else { 0 };
            assert_eq!(sum.load(Relaxed), expected, "sum off");
        }
    }
}
