//! `la`: brpc's locality-aware policy. Each endpoint's share follows the
//! inverse of its measured latency, cut further while its requests in flight
//! are older than its usual latency, so a slow or stuck endpoint loses its
//! traffic within a few requests and wins it back once it answers fast.
//!
//! What it keeps per endpoint (its [`Observer`], fed by
//! [`Pick::finish`](crate::Pick::finish)):
//!
//! - the latencies of its last responses: at most 128 (brpc's queue) and none
//!   older than `window=` (default 1s) before the newest;
//! - the sum and count of the start times of its requests in flight, kept
//!   in step with the guards actually held (a guard dropped without an
//!   outcome, or a choice of `candidates` nobody reserved, would otherwise
//!   leave a start time behind that ages for ever).
//!
//! Its weight, recomputed on every response and whenever a pick lands on it:
//!
//! - `base = SCALE / avg_latency` (the mean latency of the samples, in µs);
//! - in-flight punishment (brpc's `punish_inflight_ratio`, 1.5): when the
//!   mean age of its requests in flight, `now - begin_sum / count`, is at
//!   least 1.5 × `avg_latency`, `weight = base * avg_latency / age`;
//! - never below brpc's `min_weight` (1000), so no endpoint is cut off for
//!   good.
//!
//! An error counts as a response of `max(latency × 1.2, timeout)` (brpc's
//! `punish_error_ratio` and its use of the timeout for calls that no retry
//! will save; `timeout=` default 500ms), added to the newest sample rather
//! than as a sample of its own (as brpc does), so errors raise the mean
//! latency without adding weight. An endpoint with no response yet starts at
//! the mean weight of the endpoints that have some (brpc's initial weight).
//!
//! Selection is brpc's: the weights sit in a complete binary tree whose nodes
//! also hold the sum of their left subtree, a random `dice` below the total
//! walks down in `O(log n)`, and the endpoint it lands on is taken unless
//! its in-flight punishment, recomputed right then, shrinks its weight below
//! the dice's offset in its range (then the walk starts over, at most
//! `4n + 16` times, before falling back to the least loaded endpoint).
//! Weight changes reach the tree as atomic adds along the path to the root.
//!
//! Where it differs from brpc: brpc multiplies the base weight by the
//! endpoint's measured QPS. In a balancer that also sends the traffic, that
//! QPS is the share the balancer itself gave, so the product feeds on itself
//! (an endpoint that got little keeps getting little, which is how a
//! recovered endpoint stays starved); here the share follows latency alone,
//! and the `window=` bound lets a recovered endpoint's old slow samples
//! expire. Endpoint weights are ignored except that weight 0 is never picked
//! (brpc's `la` has no weights either).
//!
//! Cost: a pick is `O(log n)` plus one short lock of the chosen endpoint's
//! state (brpc takes the same lock); a response takes that lock and updates
//! `O(log n)` tree nodes.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use arc_swap::ArcSwap;

use crate::endpoint::Endpoint;
use crate::error::{BuildError, ParseError, PickError};
use crate::inflight::outcome::Outcome;
use crate::inflight::pool::Pool;
use crate::policy::{check_pool, first_choice_then_rotation, none_eligible, Observer, Order};
use crate::policy::{Picker, Policy};
use crate::request::Request;
use crate::util::duration::take_duration;
use crate::util::params::Params;
use crate::util::rng::{Rng, Seed};

/// A weight is `SCALE / avg_latency_us`: 10 ms is 10^8.
const SCALE: i64 = 1_000_000_000_000;
/// brpc's `min_weight`.
pub(crate) const MIN_WEIGHT: i64 = 1_000;
/// The weight of endpoints when none has a response yet (any equal value).
const INITIAL_WEIGHT: i64 = SCALE / 10_000;
/// brpc's latency queue length.
const SAMPLES: usize = 128;
/// brpc's `punish_inflight_ratio`, as a fraction.
const PUNISH_INFLIGHT: (i64, i64) = (3, 2);
/// brpc's `punish_error_ratio`, as a fraction.
const PUNISH_ERROR: (i64, i64) = (6, 5);
/// This policy's generator stream (see [`Rng::new`]).
const STREAM: u64 = 7;
/// The most endpoints one `la` instance weighs: each weighs up to [`SCALE`]
/// (a mean latency of 1 µs), and the tree's sums are 64-bit.
pub(crate) const MAX_ENDPOINTS: usize = (i64::MAX / SCALE) as usize;

/// Refuses pools whose weights could sum past 64 bits (see [`MAX_ENDPOINTS`]).
fn check_len(len: usize) -> Result<(), BuildError> {
    if len <= MAX_ENDPOINTS {
        return Ok(());
    }
    Err(BuildError::too_large(format!(
        "la: {len} endpoints: accepted at most {MAX_ENDPOINTS} (each weighs up to 10^12 in the \
         64-bit sums of its weight tree)"
    )))
}

/// Parameters of `la`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LaParams {
    pub(crate) timeout: Duration,
    pub(crate) window: Duration,
    pub(crate) seed: Seed,
}

impl LaParams {
    pub(crate) fn parse(params: &mut Params<'_>) -> Result<Self, ParseError> {
        let timeout = take_duration(
            params,
            "timeout",
            Duration::from_millis(1),
            Duration::from_secs(3600),
        )?
        .unwrap_or(Duration::from_millis(500));
        let window = take_duration(
            params,
            "window",
            Duration::from_millis(10),
            Duration::from_secs(3600),
        )?
        .unwrap_or(Duration::from_secs(1));
        let seed = Seed::parse(params)?;
        Ok(LaParams {
            timeout,
            window,
            seed,
        })
    }
}

/// The `la` family.
#[derive(Debug)]
pub(crate) struct LocalityAware(pub(crate) LaParams);

impl Policy for LocalityAware {
    fn name(&self) -> &str {
        "la"
    }

    fn build(&self, pool: Pool) -> Result<Arc<dyn Picker>, BuildError> {
        check_pool(&pool)?;
        check_len(pool.len())?;
        let tree = Arc::new(WeightTree::new(pool.len()));
        let states: Vec<Option<&LaState>> = (0..pool.len())
            .map(|i| pool.observer::<LaState>(i))
            .collect();
        let measured: Vec<i64> = states
            .iter()
            .flatten()
            .filter_map(|s| s.measured_weight())
            .collect();
        let initial = if measured.is_empty() {
            INITIAL_WEIGHT
        } else {
            (measured.iter().map(|&w| i128::from(w)).sum::<i128>() / measured.len() as i128) as i64
        };
        for (i, state) in states.iter().enumerate() {
            match state {
                Some(state) => state.attach(&tree, i, initial),
                None => tree.set(i, initial),
            }
        }
        Ok(Arc::new(LocalityAwarePicker {
            rng: Rng::new(self.0.seed, STREAM),
            pool,
            tree,
        }))
    }

    fn observer(&self, _endpoint: &Endpoint) -> Option<Arc<dyn Observer>> {
        Some(Arc::new(LaState::new(self.0)))
    }
}

/// The weights of one build in a complete binary tree (node `i` has children
/// `2i + 1` and `2i + 2`): `left[i]` is the sum of node `i`'s left subtree.
#[derive(Debug)]
struct WeightTree {
    node: Vec<AtomicI64>,
    left: Vec<AtomicI64>,
    total: AtomicI64,
}

impl WeightTree {
    fn new(n: usize) -> Self {
        WeightTree {
            node: (0..n).map(|_| AtomicI64::new(0)).collect(),
            left: (0..n).map(|_| AtomicI64::new(0)).collect(),
            total: AtomicI64::new(0),
        }
    }

    /// Sets node `i`'s weight; the sums on its path move by the difference.
    /// Concurrent sets add their differences, so the sums always end up
    /// those of the last weights written.
    fn set(&self, i: usize, weight: i64) {
        let diff = weight - self.node[i].swap(weight, Relaxed);
        if diff == 0 {
            return;
        }
        let mut child = i;
        while child > 0 {
            let parent = (child - 1) / 2;
            if 2 * parent + 1 == child {
                self.left[parent].fetch_add(diff, Relaxed);
            }
            child = parent;
        }
        self.total.fetch_add(diff, Relaxed);
    }

    /// The node whose range holds `dice`, and the offset of `dice` in it;
    /// `None` when concurrent updates made the walk fall off the tree.
    fn find(&self, mut dice: i64) -> Option<(usize, i64)> {
        let mut i = 0;
        while i < self.node.len() {
            let left = self.left[i].load(Relaxed);
            let own = self.node[i].load(Relaxed);
            if dice < left {
                i = 2 * i + 1;
            } else if dice >= left + own {
                dice -= left + own;
                i = 2 * i + 2;
            } else {
                return Some((i, dice - left));
            }
        }
        None
    }
}

/// One response time, in µs of the caller's clock.
#[derive(Debug, Clone, Copy)]
struct Sample {
    end: i64,
    latency: i64,
}

/// What `la` knows of one endpoint, behind its lock.
#[derive(Debug, Default)]
struct Window {
    samples: VecDeque<Sample>,
    /// In `i128`, as is `begin_sum`: sums of times and latencies the
    /// caller gives (any `Duration`, from any epoch) never overflow.
    latency_sum: i128,
    /// Mean latency of the samples (µs), 0 before any response.
    avg_latency: i64,
    /// `SCALE / avg_latency`, 0 before any response.
    base: i64,
    begin_sum: i128,
    begin_count: i64,
}

/// `la`'s per-endpoint state (its [`Observer`]).
#[derive(Debug)]
pub(crate) struct LaState {
    params: LaParams,
    /// The current weight, as the trees hold it.
    weight: AtomicI64,
    window: Mutex<Window>,
    /// The trees this endpoint is in, with its index in each (a new build
    /// adds one; trees of dropped pickers are pruned then).
    trees: ArcSwap<Vec<(Weak<WeightTree>, usize)>>,
}

fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

impl LaState {
    fn new(params: LaParams) -> Self {
        LaState {
            params,
            weight: AtomicI64::new(0),
            window: Mutex::new(Window::default()),
            trees: ArcSwap::from_pointee(Vec::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Window> {
        self.window.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The weight, if the endpoint has had a response.
    fn measured_weight(&self) -> Option<i64> {
        let w = self.lock();
        (w.base > 0).then(|| self.weight.load(Relaxed))
    }

    /// The current weight.
    #[cfg(test)]
    pub(crate) fn weight(&self) -> i64 {
        self.weight.load(Relaxed)
    }

    /// Puts this endpoint at `index` of `tree`, with `initial` as its weight
    /// if it has had no response yet.
    fn attach(&self, tree: &Arc<WeightTree>, index: usize, initial: i64) {
        let window = self.lock();
        if window.base == 0 {
            self.weight.store(initial, Relaxed);
        }
        let mut trees: Vec<(Weak<WeightTree>, usize)> = self
            .trees
            .load()
            .iter()
            .filter(|(t, _)| t.strong_count() > 0)
            .cloned()
            .collect();
        trees.push((Arc::downgrade(tree), index));
        self.trees.store(Arc::new(trees));
        tree.set(index, self.weight.load(Relaxed));
        drop(window);
    }

    /// Recomputes the weight at `now` (µs) from the base and the in-flight
    /// punishment, and passes it to the trees. Called with the lock held.
    fn reset_weight(&self, w: &Window, now: i64) -> i64 {
        if w.base == 0 {
            return self.weight.load(Relaxed);
        }
        let mut weight = w.base;
        if w.begin_count > 0 && w.avg_latency > 0 {
            let age = i128::from(now) - w.begin_sum / i128::from(w.begin_count);
            let (avg, (up, down)) = (i128::from(w.avg_latency), PUNISH_INFLIGHT);
            if age * i128::from(down) >= avg * i128::from(up) {
                weight = (i128::from(weight) * avg / age) as i64;
            }
        }
        let weight = weight.max(MIN_WEIGHT);
        self.weight.store(weight, Relaxed);
        for (tree, index) in self.trees.load().iter() {
            if let Some(tree) = tree.upgrade() {
                tree.set(*index, weight);
            }
        }
        weight
    }

    /// A pick landed on this endpoint at `offset` of its range at `now`:
    /// with its punishment recomputed, is it still there? If so, its request
    /// is counted in flight. `in_flight` is the endpoint's in-flight count
    /// (the guards): the start times are first brought to that many.
    fn admit(&self, now: i64, offset: i64, in_flight: u64) -> bool {
        let mut w = self.lock();
        reconcile(&mut w, now, in_flight);
        let weight = self.reset_weight(&w, now);
        if weight <= offset {
            return false;
        }
        w.begin_sum += i128::from(now);
        w.begin_count += 1;
        true
    }

    /// Counts a request in flight whatever its weight (the fallback pick).
    fn start(&self, now: i64, in_flight: u64) {
        let mut w = self.lock();
        reconcile(&mut w, now, in_flight);
        w.begin_sum += i128::from(now);
        w.begin_count += 1;
    }

    /// A response that ended at `end` after `latency` (µs), its request
    /// having started at `begin` (µs, rounded as the pick's time was).
    fn record(&self, begin: i64, end: i64, latency: i64, success: bool) {
        let latency = latency.max(1);
        let mut w = self.lock();
        if w.begin_count > 0 {
            w.begin_sum -= i128::from(begin);
            w.begin_count -= 1;
        }
        if success {
            w.samples.push_back(Sample { end, latency });
            w.latency_sum += i128::from(latency);
        } else {
            let timeout = micros(self.params.timeout);
            let punished =
                i128::from(latency) * i128::from(PUNISH_ERROR.0) / i128::from(PUNISH_ERROR.1);
            let punished = i64::try_from(punished).unwrap_or(i64::MAX).max(timeout);
            if w.samples.is_empty() {
                w.samples.push_back(Sample { end, latency: 0 });
            }
            if let Some(last) = w.samples.back_mut() {
                // Saturating (at 292,000 years): the sum stays the samples'.
                let before = last.latency;
                last.latency = before.saturating_add(punished);
                last.end = last.end.max(end);
                let added = last.latency - before;
                w.latency_sum += i128::from(added);
            }
        }
        let newest = w.samples.back().map_or(end, |s| s.end);
        let oldest_kept = newest - micros(self.params.window);
        while w.samples.len() > SAMPLES
            || (w.samples.len() > 1 && w.samples.front().is_some_and(|s| s.end < oldest_kept))
        {
            if let Some(old) = w.samples.pop_front() {
                w.latency_sum -= i128::from(old.latency);
            }
        }
        // The mean of samples that are each at most `i64::MAX`.
        let mean = w.latency_sum / w.samples.len().max(1) as i128;
        w.avg_latency = i64::try_from(mean).unwrap_or(i64::MAX).max(1);
        w.base = (SCALE / w.avg_latency).max(MIN_WEIGHT);
        self.reset_weight(&w, end);
    }
}

/// Brings the start times counted in flight to `in_flight`, the guards
/// actually held. More are counted when guards were dropped without an
/// outcome, or when `candidates` made a choice nobody reserved: the extra
/// ones go, keeping the mean start time. Fewer when requests were reserved
/// through `candidates` without a pick: they are counted as starting `now`
/// (their age is underestimated, never invented).
fn reconcile(w: &mut Window, now: i64, in_flight: u64) {
    let in_flight = i64::try_from(in_flight).unwrap_or(i64::MAX);
    if in_flight == 0 {
        // Also clears what rounding left behind.
        w.begin_sum = 0;
        w.begin_count = 0;
    } else if w.begin_count > in_flight {
        w.begin_sum = w.begin_sum * i128::from(in_flight) / i128::from(w.begin_count);
        w.begin_count = in_flight;
    } else if w.begin_count < in_flight {
        w.begin_sum += i128::from(now) * i128::from(in_flight - w.begin_count);
        w.begin_count = in_flight;
    }
}

impl Observer for LaState {
    fn observe(&self, outcome: &Outcome) {
        let end = outcome.completed_at();
        self.record(
            micros(end.saturating_sub(outcome.latency())),
            micros(end),
            micros(outcome.latency()),
            outcome.is_success(),
        );
    }
}

/// `la` over one membership.
#[derive(Debug)]
struct LocalityAwarePicker {
    pool: Pool,
    tree: Arc<WeightTree>,
    rng: Rng,
}

impl Picker for LocalityAwarePicker {
    fn pool(&self) -> &Pool {
        &self.pool
    }

    fn candidates(self: Arc<Self>, req: &Request<'_>) -> Result<Order, PickError> {
        first_choice_then_rotation(&*self, req)
    }

    fn pick(&self, req: &Request<'_>) -> Result<usize, PickError> {
        let n = self.pool.len();
        let now = micros(req.now());
        for _ in 0..4 * n + 16 {
            let total = self.tree.total.load(Relaxed);
            if total <= 0 {
                break;
            }
            let dice = self.rng.below(total as u64) as i64;
            let Some((i, offset)) = self.tree.find(dice) else {
                continue;
            };
            if !self.pool.eligible(i, req) {
                continue;
            }
            let admitted = match self.pool.observer::<LaState>(i) {
                Some(state) => state.admit(now, offset, self.pool.load(i)),
                None => true,
            };
            if admitted {
                return Ok(self.pool.take(i));
            }
        }
        self.least_loaded(req, now)
    }
}

impl LocalityAwarePicker {
    /// When the walks keep landing on ineligible or punished endpoints.
    #[cold]
    fn least_loaded(&self, req: &Request<'_>, now: i64) -> Result<usize, PickError> {
        let i = self
            .pool
            .least_loaded(req)
            .ok_or_else(|| none_eligible(&self.pool))?;
        if let Some(state) = self.pool.observer::<LaState>(i) {
            state.start(now, self.pool.load(i));
        }
        Ok(self.pool.take(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> LaState {
        LaState::new(LaParams {
            timeout: Duration::from_millis(500),
            window: Duration::from_secs(1),
            seed: Seed(Some(1)),
        })
    }

    /// The most endpoints whose weights, each at most `SCALE`, sum within
    /// 64 bits: one more is refused (a pool that large takes gigabytes, so
    /// the check is tested alone).
    #[test]
    fn pools_whose_weights_could_pass_64_bits_are_refused() {
        assert_eq!(MAX_ENDPOINTS, 9_223_372);
        assert!(i64::try_from(MAX_ENDPOINTS as i128 * i128::from(SCALE)).is_ok());
        assert!(check_len(MAX_ENDPOINTS).is_ok());
        let err = check_len(MAX_ENDPOINTS + 1).unwrap_err();
        assert_eq!(err.kind(), crate::BuildErrorKind::TooLarge);
        assert_eq!(
            err.to_string(),
            "la: 9223373 endpoints: accepted at most 9223372 (each weighs up to 10^12 in the \
             64-bit sums of its weight tree)"
        );
    }

    #[test]
    fn the_tree_finds_each_range_and_follows_updates() {
        let tree = WeightTree::new(5);
        for (i, w) in [10, 20, 30, 40, 50].into_iter().enumerate() {
            tree.set(i, w);
        }
        assert_eq!(tree.total.load(Relaxed), 150);
        // In-order ranges: node order in the tree is 3, 1, 4, 0, 2, so
        // [0, 40) is node 3, [40, 60) node 1, [60, 110) node 4, [110, 120)
        // node 0, [120, 150) node 2.
        for (dice, want) in [
            (0, (3, 0)),
            (39, (3, 39)),
            (40, (1, 0)),
            (59, (1, 19)),
            (60, (4, 0)),
            (110, (0, 0)),
            (119, (0, 9)),
            (120, (2, 0)),
            (149, (2, 29)),
        ] {
            assert_eq!(tree.find(dice), Some(want), "dice {dice}");
        }
        assert_eq!(tree.find(150), None);
        tree.set(3, 0);
        assert_eq!(tree.total.load(Relaxed), 110);
        assert_eq!(tree.find(0), Some((1, 0)), "node 3 has no range left");
    }

    proptest::proptest! {
        /// Every dice below the total lands on exactly one node, and each
        /// node gets as many dice values as its weight, also after updates.
        #[test]
        fn each_node_owns_as_many_dice_as_its_weight(
            weights in proptest::collection::vec(0i64..20, 1..40),
            updates in proptest::collection::vec((0usize..40, 0i64..20), 0..20),
        ) {
            let tree = WeightTree::new(weights.len());
            let mut expected = weights.clone();
            for (i, &w) in weights.iter().enumerate() {
                tree.set(i, w);
            }
            for &(i, w) in &updates {
                let i = i % weights.len();
                tree.set(i, w);
                expected[i] = w;
            }
            let total: i64 = expected.iter().sum();
            proptest::prop_assert_eq!(tree.total.load(Relaxed), total);
            let mut owned = vec![0i64; weights.len()];
            for dice in 0..total {
                let (i, offset) = tree.find(dice).expect("a dice below the total lands");
                proptest::prop_assert!(offset < expected[i]);
                owned[i] += 1;
            }
            proptest::prop_assert_eq!(owned, expected);
            proptest::prop_assert_eq!(tree.find(total), None);
        }
    }

    #[test]
    fn the_weight_is_the_inverse_mean_latency() {
        let s = state();
        s.record(0, 10_000, 10_000, true);
        assert_eq!(s.weight(), SCALE / 10_000);
        s.record(0, 20_000, 30_000, true);
        assert_eq!(s.weight(), SCALE / 20_000, "mean of 10 ms and 30 ms");
    }

    #[test]
    fn an_error_adds_the_timeout_to_the_newest_sample() {
        let s = state();
        s.record(0, 10_000, 10_000, true);
        s.record(10_000, 11_000, 1_000, false);
        // One sample of 10 ms + max(1.2 ms, 500 ms).
        assert_eq!(s.weight(), SCALE / 510_000);
    }

    #[test]
    fn requests_in_flight_too_long_cut_the_weight() {
        let s = state();
        s.record(0, 10_000, 10_000, true);
        let base = SCALE / 10_000;
        assert!(s.admit(100_000, 0, 0));
        // Age 14 ms < 1.5 × 10 ms: no punishment.
        assert!(s.admit(114_000, 0, 1));
        assert_eq!(s.weight(), base);
        // Mean start 107 ms; at 137 ms the age is 30 ms: weight × 10 / 30.
        assert!(s.admit(137_000, 0, 2));
        assert_eq!(s.weight(), base * 10_000 / 30_000);
        // An offset above the punished weight is refused.
        assert!(!s.admit(137_000, base, 3));
        // Nothing in flight any more (guards dropped without an outcome):
        // the start times are forgotten, the weight is whole again.
        assert!(s.admit(500_000, 0, 0));
        assert_eq!(s.weight(), base);
    }

    #[test]
    fn start_times_follow_the_guards_actually_held() {
        let mut w = Window {
            begin_sum: 300,
            begin_count: 3,
            ..Window::default()
        };
        // One of three guards was dropped without an outcome: the mean
        // start (100) stays, the count drops.
        reconcile(&mut w, 1_000, 2);
        assert_eq!((w.begin_sum, w.begin_count), (200, 2));
        // Two reserved through `candidates` without a pick: counted from now.
        reconcile(&mut w, 1_000, 4);
        assert_eq!((w.begin_sum, w.begin_count), (2_200, 4));
    }

    #[test]
    fn times_from_any_epoch_and_huge_latencies_do_not_overflow() {
        // Unix time in µs (about 2^50): 10,000 requests in flight on one
        // endpoint sum their start times past `i64::MAX`.
        let unix = 1_760_000_000_000_000i64;
        let s = state();
        s.record(unix - 10_000, unix, 10_000, true);
        assert!(s.admit(unix, 0, 10_000));
        assert!(s.admit(unix + 1_000, 0, 10_001));
        assert_eq!(s.weight(), SCALE / 10_000, "age 1 ms: no punishment");
        // The caller's largest times and latencies, through the public API.
        let max = micros(Duration::MAX);
        for _ in 0..3 {
            s.record(0, max, max, true);
            s.record(0, max, max, false);
            s.start(max, 3);
            s.admit(max, 0, 1_000_000);
        }
        assert_eq!(
            s.weight(),
            MIN_WEIGHT,
            "the slowest endpoint keeps the floor"
        );
    }

    #[test]
    fn la_takes_extreme_outcomes_through_the_balancer() {
        use crate::{Balancer, Endpoint, Outcome, Request};
        let endpoints = ["e0", "e1"].map(|a| Endpoint::new(a).unwrap());
        let balancer = Balancer::new("la:seed=1".parse().unwrap(), endpoints).unwrap();
        for outcome in [
            Outcome::success(Duration::MAX),
            Outcome::failure(Duration::MAX),
        ] {
            for _ in 0..3 {
                let pick = balancer.pick(&Request::new().at(Duration::MAX)).unwrap();
                pick.finish(outcome.at(Duration::MAX));
            }
        }
        assert!(balancer.pick(&Request::new().at(Duration::MAX)).is_ok());
    }

    #[test]
    fn old_samples_leave_the_window() {
        let s = state();
        s.record(0, 0, 100_000, true);
        s.record(400_000, 500_000, 100_000, true);
        assert_eq!(s.weight(), SCALE / 100_000);
        // 1.2 s: the sample ending at 0 is more than 1 s older.
        s.record(1_190_000, 1_200_000, 10_000, true);
        assert_eq!(s.weight(), SCALE / 55_000, "mean of 100 ms and 10 ms");
    }
}
