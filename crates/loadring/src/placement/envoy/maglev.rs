//! Envoy's `maglev`: a lookup table of prime size filled from per-host
//! permutations (Eisenbud et al., "Maglev", NSDI 2016, listing 1, weighted).
//!
//! Bit for bit Envoy's `MaglevTable`: hosts sorted by hash key (the endpoint's
//! `hash_key`, else its address); host `i` prefers the slots
//! `(offset + skip * j) mod M` for `j = 0, 1, ...` with
//! `offset = xxHash64(key, 0) mod M` and `skip = xxHash64(key, 1) mod (M - 1) + 1`.
//! Iteration `it = 1, 2, ...` visits the hosts in sorted order; a host takes
//! its next free preferred slot unless `it * w_i < target_i` (normalized `f64`
//! weights), and each take adds `max_w` to its target. A request code `h`
//! lands on slot `h mod M`.
//!
//! The build keeps O(N) state, one `Builder` per host: its current preferred
//! slot, its skip, its weight and its target. The permutations are never
//! stored: the next preferred slot is the current one plus `skip` (mod `M`),
//! which equals Envoy's `(offset + skip * j) mod M` computed in 64 bits for
//! every `j` without forming the product. The table holds endpoint indices,
//! `u16` when the pool has at most 65535 endpoints, else `u32`.
//!
//! Hosts with equal hash keys are ordered by pool order (Envoy breaks that tie
//! by pointer value, i.e. not reproducibly). Weight-0 endpoints get no slot.
//! A table smaller than the number of endpoints of weight >= 1 is an error
//! (Envoy builds it and leaves endpoints without a slot).
//!
//! **Cost.** A pick hashes the key and finds its slot (one multiplication,
//! `code mod M`). Slow path: when the owner is unhealthy or excluded (or,
//! under a load bound, full), the pick walks the following slots, skipping
//! runs of one endpoint in one step, until an eligible (non-full) endpoint:
//! `O(entries)` in the worst case (`M` slots, 65537 by default), e.g. one
//! eligible endpoint among many; under a load bound, when nobody eligible has
//! room, one more `O(n)` pass finds the least-loaded endpoint.
//! Under `hash_balance_factor=` (Envoy's own bound, `placement/envoy/bound.rs`) a
//! full owner's request does not walk: it visits the endpoints in Envoy's
//! pseudo-random order of its hash, `O(n)` plus seeding an MT19937.

use std::cmp::Reverse;
use std::collections::binary_heap::PeekMut;
use std::collections::BinaryHeap;

use crate::echo::Echo;
use crate::error::{BuildError, ParseError, ParseErrorKind};
use crate::hash::xxhash64;
use crate::inflight::pool::Pool;
use crate::placement::hashing::{Placement, Scheme};
use crate::util::params::Params;
use crate::util::whole::read_whole;

/// Envoy's default table size.
pub(crate) const DEFAULT_TABLE_SIZE: u64 = 65_537;
/// Envoy's upper bound on the table size (`lte: 5000011` in its API): about
/// 10 MiB of `u16` slots, 4900 slots per host at 1024 hosts.
pub(crate) const MAX_TABLE_SIZE: u64 = 5_000_011;

/// Parameters of a Maglev table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Maglev {
    pub(crate) table_size: u64,
}

impl Maglev {
    pub(crate) fn parse(params: &mut Params<'_>) -> Result<Self, ParseError> {
        let Some(value) = params.take("table_size") else {
            return Ok(Maglev {
                table_size: DEFAULT_TABLE_SIZE,
            });
        };
        // A whole number by the rule of every number, then a prime: one
        // accepted text for each fault, both ends of its range prime.
        let table_size = read_whole(value, 2, MAX_TABLE_SIZE)
            .and_then(|n| {
                if is_prime(n) {
                    Ok(n)
                } else {
                    Err("is not prime")
                }
            })
            .map_err(|why| {
                params.error("table_size", value, accepted_sizes(2), |accepted| {
                    format!(
                        "table_size={} {why}: accepted {accepted} (e.g. 65537, 131071, 655373)",
                        Echo(value)
                    )
                })
            })?;
        Ok(Maglev { table_size })
    }
}

/// The table sizes accepted from `min` on (a prime itself): both ends of the
/// range are primes, so the range says what is accepted.
fn accepted_sizes(min: u64) -> String {
    format!("a prime from {min} to {MAX_TABLE_SIZE}")
}

impl Scheme for Maglev {
    type Placement = MaglevTable;

    fn name(&self) -> &'static str {
        "maglev"
    }

    fn size(&self, _pool: &Pool) -> u64 {
        self.table_size
    }

    /// Fills the table over `pool` (slots hold pool indices).
    fn place(&self, pool: &Pool) -> Result<MaglevTable, BuildError> {
        MaglevTable::build(
            pool.endpoints().iter().map(|e| (e.hash_name(), e.weight())),
            self.table_size,
        )
        .map_err(|e| BuildError::too_large(e.to_string()))
    }
}

/// Every host of weight >= 1 needs a slot of its own.
fn check_room(hosts: usize, table_size: u64) -> Result<(), ParseError> {
    let hosts = hosts as u64;
    if hosts <= table_size {
        return Ok(());
    }
    let message = format!(
        "maglev: table_size={table_size} is smaller than the {hosts} endpoints of weight >= 1, \
         which need a slot each"
    );
    let err = |message: String| {
        ParseError::new(ParseErrorKind::Value, message)
            .with_policy("maglev")
            .with_key("table_size")
            .with_value(&table_size.to_string())
    };
    Err(match smallest_prime_from(hosts) {
        Some(prime) => {
            let accepted = accepted_sizes(prime);
            err(format!("{message}: accepted {accepted}")).with_accepted(accepted)
        }
        None => err(format!(
            "{message}: no table size fits more than {MAX_TABLE_SIZE} endpoints"
        )),
    })
}

/// The smallest prime `>= n` that is a valid table size.
fn smallest_prime_from(n: u64) -> Option<u64> {
    (n.max(2)..=MAX_TABLE_SIZE).find(|&p| is_prime(p))
}

/// Trial division: table sizes are at most 5000011, so at most 1118 odd divisors.
fn is_prime(n: u64) -> bool {
    if n < 4 {
        return n >= 2;
    }
    if n.is_multiple_of(2) {
        return false;
    }
    let mut d = 3;
    while d * d <= n {
        if n.is_multiple_of(d) {
            return false;
        }
        d += 2;
    }
    true
}

/// A table entry: the index of the owning endpoint in the pool.
trait Slot: Copy + Eq + std::fmt::Debug {
    /// Marks a slot not taken yet during the build (never a pool index).
    const EMPTY: Self;
    fn new(owner: u32) -> Self;
    fn index(self) -> usize;
}

impl Slot for u16 {
    // Pools of up to 65535 endpoints use indices 0..=65534.
    const EMPTY: Self = u16::MAX;
    fn new(owner: u32) -> Self {
        debug_assert!(owner < u32::from(u16::MAX));
        owner as u16
    }
    fn index(self) -> usize {
        usize::from(self)
    }
}

impl Slot for u32 {
    const EMPTY: Self = u32::MAX;
    fn new(owner: u32) -> Self {
        owner
    }
    fn index(self) -> usize {
        self as usize
    }
}

/// The build state of one host: all Maglev needs instead of a permutation.
#[derive(Debug, Clone)]
struct Builder {
    /// The host's next preferred slot, `(offset + skip * next) mod M`.
    slot: u32,
    skip: u32,
    owner: u32,
    /// Normalized weight.
    weight: f64,
    /// Envoy's `target_weight_`: the host skips iteration `it` while `it * weight < target`.
    target: f64,
}

impl Builder {
    /// Takes the host's next free preferred slot.
    #[inline]
    fn take<S: Slot>(&mut self, table: &mut [S]) {
        let size = table.len() as u32;
        // `slot + skip < 2 * M <= 2^24`: no overflow, one subtraction wraps.
        let advance = |slot: u32| {
            let next = slot + self.skip;
            if next >= size {
                next - size
            } else {
                next
            }
        };
        // A free slot exists (the caller counts them) and the host's slots
        // form a full permutation of the table (M prime, 0 < skip < M), so
        // this loop ends.
        while table[self.slot as usize] != S::EMPTY {
            self.slot = advance(self.slot);
        }
        table[self.slot as usize] = S::new(self.owner);
        self.slot = advance(self.slot);
    }

    /// Whether the host takes a slot in iteration `it` (Envoy's test, in f64).
    #[inline]
    fn due(&self, it: u64) -> bool {
        it as f64 * self.weight >= self.target
    }
}

/// Hosts visited per taken slot (`max_w * N`: 1 for equal weights) up to
/// which Envoy's plain scan beats the calendar. Measured at N = 1024,
/// M = 131071: a scan visit costs about 1.2 ns, a calendar take about 75 ns
/// (heap sifts), so they break even near 64.
const SCAN_LIMIT: f64 = 64.0;

/// Builds the table: Envoy's fill order, exactly. `hosts` are (hash key,
/// weight, index) with positive weights, in input order.
fn fill<S: Slot>(hosts: Vec<(&str, u32, u32)>, size: u64) -> Vec<S> {
    if hosts.is_empty() {
        return Vec::new();
    }
    let (mut builders, max_w) = builders(hosts, size);
    let mut table = vec![S::EMPTY; size as usize];
    if max_w * builders.len() as f64 <= SCAN_LIMIT {
        scan(&mut builders, &mut table, max_w);
    } else {
        calendar(&mut builders, &mut table, max_w);
    }
    table
}

/// The hosts' build state in Envoy's order, and the largest normalized weight.
fn builders(mut hosts: Vec<(&str, u32, u32)>, size: u64) -> (Vec<Builder>, f64) {
    // Stable: equal hash keys keep input order.
    hosts.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    let sum = hosts.iter().map(|h| u64::from(h.1)).sum::<u64>() as f64;
    let builders: Vec<Builder> = hosts
        .into_iter()
        .map(|(name, weight, owner)| {
            let key = name.as_bytes();
            Builder {
                slot: (xxhash64(key, 0) % size) as u32,
                skip: (xxhash64(key, 1) % (size - 1) + 1) as u32,
                owner,
                // Envoy: weight * 1.0 / sum.
                weight: f64::from(weight) / sum,
                target: 0.0,
            }
        })
        .collect();
    let max_w = builders.iter().map(|b| b.weight).fold(0.0, f64::max);
    (builders, max_w)
}

/// Envoy's loop: every iteration visits every host.
fn scan<S: Slot>(builders: &mut [Builder], table: &mut [S], max_w: f64) {
    let mut left = table.len();
    let mut it = 1u64;
    loop {
        for b in builders.iter_mut() {
            if !b.due(it) {
                continue;
            }
            b.target += max_w;
            b.take(table);
            left -= 1;
            if left == 0 {
                return;
            }
        }
        it += 1;
    }
}

/// The same fill order when weights are skewed: only due hosts are visited,
/// popped from a heap by (iteration, host), so the cost no longer grows with
/// `max_w / min_w`.
fn calendar<S: Slot>(builders: &mut [Builder], table: &mut [S], max_w: f64) {
    // A host of the largest weight takes a slot in every iteration, so the
    // table is full by iteration M: later iterations never happen.
    let last = table.len() as u64;
    // Keys pack (iteration, host) as `it << 32 | host`: both fit in 32 bits
    // (`it <= M + 1`), and one integer compares faster than a tuple.
    let mut due: BinaryHeap<Reverse<u64>> = (0..builders.len() as u64)
        .map(|i| Reverse(1 << 32 | i))
        .collect();
    for _ in 0..table.len() {
        // The heaviest host is always rescheduled within `last` iterations
        // (see above), so the heap never runs dry before the table is full.
        let mut top = due
            .peek_mut()
            .expect("a host of the largest weight is always due");
        let Reverse(key) = *top;
        let (it, i) = (key >> 32, key & u64::from(u32::MAX));
        let b = &mut builders[i as usize];
        b.target += max_w;
        b.take(table);
        match next_due(b, it, last) {
            // Replacing the top sifts once instead of a pop and a push.
            Some(next) => *top = Reverse(next << 32 | i),
            None => {
                PeekMut::pop(top);
            }
        }
    }
}

/// The first iteration after `it`, up to `last`, in which `b` is due again.
///
/// `due` is monotonic in the iteration, so the answer is found by stepping
/// from the estimate `ceil(target / weight)`, which is off by at most one.
fn next_due(b: &Builder, it: u64, last: u64) -> Option<u64> {
    let estimate = (b.target / b.weight).ceil();
    let mut next = if estimate >= last as f64 {
        last + 1
    } else {
        (estimate as u64).max(it + 1)
    };
    while next > it + 1 && b.due(next - 1) {
        next -= 1;
    }
    while next <= last && !b.due(next) {
        next += 1;
    }
    (next <= last).then_some(next)
}

/// The table: slot `s` is owned by pool index `slots[s]`.
#[derive(Debug)]
enum Slots {
    Narrow(Vec<u16>),
    Wide(Vec<u32>),
}

/// An Envoy-compatible Maglev lookup table (the placement of the `maglev`
/// policy), usable on its own.
///
/// ```
/// use loadring::maglev::MaglevTable;
///
/// // Envoy's MaglevLoadBalancerTest.Basic: six hosts, table size 7.
/// let hosts = ["127.0.0.1:90", "127.0.0.1:91", "127.0.0.1:92",
///              "127.0.0.1:93", "127.0.0.1:94", "127.0.0.1:95"];
/// let table = MaglevTable::build(hosts.iter().map(|h| (*h, 1)), 7)?;
/// let owners: Vec<usize> = (0..7).map(|code| table.lookup(code).unwrap()).collect();
/// assert_eq!(owners, [2, 4, 0, 1, 5, 0, 3]);
/// # Ok::<(), loadring::Error>(())
/// ```
#[derive(Debug)]
pub struct MaglevTable {
    slots: Slots,
    reduce: FastMod,
}

impl MaglevTable {
    /// Fills a table of `table_size` slots (a prime from 2 to 5000011) from
    /// `(hash key, weight)` pairs; slots hold indices into `hosts`. Hosts of
    /// weight 0 get no slot; if every weight is 0 the table is empty.
    ///
    /// Takes O(N log N + M log M) time and, besides the table, O(N) memory.
    ///
    /// # Errors
    /// `table_size` is out of range or not prime, or smaller than the number
    /// of hosts of weight >= 1 (some would get no slot, hence no request;
    /// Envoy accepts that silently). A table at least as large gives each
    /// host a slot: every host is due in the first iteration of the fill.
    pub fn build<'a>(
        hosts: impl IntoIterator<Item = (&'a str, u32)>,
        table_size: u64,
    ) -> Result<Self, ParseError> {
        if !(2..=MAX_TABLE_SIZE).contains(&table_size) || !is_prime(table_size) {
            let accepted = accepted_sizes(2);
            return Err(ParseError::new(
                ParseErrorKind::Value,
                format!("maglev: table_size={table_size}: accepted {accepted}"),
            )
            .with_policy("maglev")
            .with_key("table_size")
            .with_value(&table_size.to_string())
            .with_accepted(accepted));
        }
        let mut count = 0usize;
        let hosts: Vec<(&str, u32, u32)> = hosts
            .into_iter()
            .enumerate()
            .inspect(|_| count += 1)
            .filter(|h| h.1 .1 > 0)
            .map(|(i, (name, weight))| (name, weight, i as u32))
            .collect();
        check_room(hosts.len(), table_size)?;
        let slots = if count <= usize::from(u16::MAX) {
            Slots::Narrow(fill(hosts, table_size))
        } else {
            Slots::Wide(fill(hosts, table_size))
        };
        Ok(MaglevTable {
            slots,
            reduce: FastMod::new(table_size),
        })
    }

    /// Number of slots: the table size, or 0 when no host has weight.
    pub fn len(&self) -> usize {
        match &self.slots {
            Slots::Narrow(v) => v.len(),
            Slots::Wide(v) => v.len(),
        }
    }

    /// Whether the table has no slots (every weight was 0).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The host index owning `slot` (`slot < len()`).
    ///
    /// # Panics
    /// `slot` is out of range.
    #[inline]
    pub fn owner(&self, slot: usize) -> usize {
        match &self.slots {
            Slots::Narrow(v) => v[slot].index(),
            Slots::Wide(v) => v[slot].index(),
        }
    }

    /// The host index owning request code `code`: slot `code mod M`
    /// (`None` for an empty table).
    #[inline]
    pub fn lookup(&self, code: u64) -> Option<usize> {
        if self.is_empty() {
            None
        } else {
            Some(self.owner(self.reduce.rem(code) as usize))
        }
    }

    /// Bytes held by the slots.
    pub fn heap_bytes(&self) -> usize {
        match &self.slots {
            Slots::Narrow(v) => v.capacity() * 2,
            Slots::Wide(v) => v.capacity() * 4,
        }
    }
}

impl Placement for MaglevTable {
    fn name(&self) -> &'static str {
        "maglev"
    }
    fn entries(&self) -> usize {
        MaglevTable::len(self)
    }
    #[inline]
    fn start(&self, code: u64) -> usize {
        self.reduce.rem(code) as usize
    }
    #[inline]
    fn owner(&self, entry: usize) -> usize {
        MaglevTable::owner(self, entry)
    }
    fn max_code(&self) -> u64 {
        u64::MAX
    }
    #[inline]
    fn key_code(&self, key: &[u8]) -> u64 {
        xxhash64(key, 0)
    }
    fn shares(&self, endpoints: usize) -> Vec<f64> {
        let mut counts = vec![0u64; endpoints];
        for entry in 0..self.len() {
            counts[MaglevTable::owner(self, entry)] += 1;
        }
        let size = MaglevTable::len(self) as f64;
        counts.into_iter().map(|c| c as f64 / size).collect()
    }
    fn entry_label(&self) -> &'static str {
        "slots"
    }
}

/// `a mod d` for a fixed `d` by multiplication (Lemire, Kaser and Kurz,
/// "Faster Remainder by Direct Computation", 2019): exact for every 64-bit
/// `a` and `1 < d < 2^64`, several times cheaper than a 64-bit division.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FastMod {
    d: u64,
    /// `ceil(2^128 / d)`.
    magic: u128,
}

impl FastMod {
    /// `d` must be at least 2.
    pub(crate) fn new(d: u64) -> Self {
        debug_assert!(d >= 2);
        FastMod {
            d,
            magic: u128::MAX / u128::from(d) + 1,
        }
    }

    /// `a mod d`.
    #[inline]
    pub(crate) fn rem(&self, a: u64) -> u64 {
        // The fractional part of a / d, as a 128-bit fixed-point number...
        let low = self.magic.wrapping_mul(u128::from(a));
        // ...times d, keeping the integer part: the top 64 bits of the
        // 192-bit product `low * d`.
        let d = u128::from(self.d);
        let bottom = ((low & u128::from(u64::MAX)) * d) >> 64;
        let top = (low >> 64) * d;
        ((bottom + top) >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primes_are_recognized() {
        let primes: Vec<u64> = (0..60).filter(|&n| is_prime(n)).collect();
        assert_eq!(
            primes,
            [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59]
        );
        for p in [65_537, 131_071, 655_373, 5_000_011] {
            assert!(is_prime(p), "{p}");
        }
        // 131073 = 3 * 43691, 5000009 = 7^2 * 67 * 1523, 1022117 = 1009 * 1013.
        for n in [0, 1, 4, 9, 25, 49, 65_536, 131_073, 5_000_009, 1_022_117] {
            assert!(!is_prime(n), "{n}");
        }
    }

    /// The calendar takes slots in exactly the scan's (Envoy's) order,
    /// whatever the weights; the scan itself is checked against a naive
    /// Maglev in tests/envoy_reference.rs.
    #[test]
    fn calendar_equals_scan() {
        let mut x = 7u64;
        let mut next = |bound: u64| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (x >> 33) % bound
        };
        let names: Vec<String> = (0..300).map(|i| format!("host-{i}")).collect();
        for case in 0..60 {
            let n = 1 + next(300) as usize;
            let size = [7u64, 17, 251, 7919, 65_537][case % 5];
            let hosts: Vec<(&str, u32, u32)> = (0..n)
                .map(|i| {
                    let w = match case % 3 {
                        0 => 1,
                        1 => 1 + next(100) as u32,
                        _ if i == 0 => 1 + next(100_000) as u32,
                        _ => 1 + next(3) as u32,
                    };
                    (names[i].as_str(), w, i as u32)
                })
                .collect();
            let (mut a, max_w) = builders(hosts.clone(), size);
            let mut b = a.clone();
            let mut by_scan = vec![u16::EMPTY; size as usize];
            let mut by_calendar = by_scan.clone();
            scan(&mut a, &mut by_scan, max_w);
            calendar(&mut b, &mut by_calendar, max_w);
            let differ = (0..by_scan.len()).find(|&s| by_scan[s] != by_calendar[s]);
            assert_eq!(differ, None, "case {case}: {n} hosts, M={size}");
            assert!(!by_scan.contains(&u16::EMPTY));
        }
    }

    /// Each endpoint needs a slot: a smaller table would leave some endpoints
    /// without requests, silently (through a whole balancer:
    /// `a_maglev_table_smaller_than_the_pool_is_rejected` in the crate's tests).
    #[test]
    fn a_table_smaller_than_the_pool_is_rejected() {
        assert_eq!(
            MaglevTable::build([("a", 1), ("b", 1), ("c", 1)], 2)
                .unwrap_err()
                .to_string(),
            "maglev: table_size=2 is smaller than the 3 endpoints of weight >= 1, \
             which need a slot each: accepted a prime from 3 to 5000011"
        );
    }

    #[test]
    fn fast_mod_equals_the_remainder() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let divisors = [
            2u64,
            3,
            7,
            17,
            65_537,
            131_071,
            655_373,
            5_000_011,
            u64::from(u32::MAX),
            u64::MAX,
        ];
        for &d in &divisors {
            let f = FastMod::new(d);
            for a in [
                0,
                1,
                d - 1,
                d,
                d.wrapping_add(1),
                u64::MAX,
                u64::MAX - 1,
                u64::MAX / d * d,
                u64::MAX / d * d - 1,
            ] {
                assert_eq!(f.rem(a), a % d, "{a} mod {d}");
            }
            for _ in 0..100_000 {
                // splitmix64
                x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
                let mut z = x;
                z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                z ^= z >> 31;
                assert_eq!(f.rem(z), z % d, "{z} mod {d}");
            }
        }
    }
}

#[cfg(test)]
mod param_tests {
    use super::*;
    use crate::spec::PolicySpec;

    #[test]
    fn default_and_explicit_sizes() {
        let spec: PolicySpec = "maglev".parse().unwrap();
        assert_eq!(spec.name(), "maglev");
        assert!(spec.is_hashing());
        for (text, size) in [
            ("maglev:table_size=2", 2),
            ("Maglev:table_size=131071 load_factor=1.25", 131_071),
            ("maglev:table_size=5000011", 5_000_011),
        ] {
            let mut params = Params::tokenize(text).unwrap();
            assert_eq!(
                Maglev::parse(&mut params).unwrap(),
                Maglev { table_size: size }
            );
        }
        let mut params = Params::tokenize("maglev").unwrap();
        assert_eq!(
            Maglev::parse(&mut params).unwrap().table_size,
            DEFAULT_TABLE_SIZE
        );
    }

    #[test]
    fn bad_parameters_name_the_key_and_the_range() {
        let cases = [
            (
                "maglev:table_size=65536",
                "maglev: table_size=65536 is not prime: accepted a prime from 2 to 5000011 (e.g. 65537, 131071, 655373)",
            ),
            (
                "maglev:table_size=1",
                "maglev: table_size=1 is out of range: accepted a prime from 2 to 5000011 (e.g. 65537, 131071, 655373)",
            ),
            (
                "maglev:table_size=0",
                "maglev: table_size=0 is out of range: accepted a prime from 2 to 5000011 (e.g. 65537, 131071, 655373)",
            ),
            (
                // Prime, but past Envoy's cap.
                "maglev:table_size=5000077",
                "maglev: table_size=5000077 is out of range: accepted a prime from 2 to 5000011 (e.g. 65537, 131071, 655373)",
            ),
            (
                "maglev:table_size=-7",
                "maglev: table_size=-7 is negative: accepted a prime from 2 to 5000011 (e.g. 65537, 131071, 655373)",
            ),
            (
                "maglev:replicas=3",
                "maglev: unknown key `replicas` (accepted: table_size, load_factor, balance, hash_balance_factor)",
            ),
        ];
        for (input, want) in cases {
            let got = input.parse::<PolicySpec>().unwrap_err().to_string();
            assert_eq!(got, want, "{input}");
        }
    }

    #[test]
    fn a_size_that_is_not_prime_is_named_by_the_accessors() {
        let err = "MAGLEV:table_size=65536".parse::<PolicySpec>().unwrap_err();
        assert_eq!(err.kind(), crate::ParseErrorKind::Value);
        assert_eq!(err.policy(), Some("maglev"));
        assert_eq!(err.key(), Some("table_size"));
        assert_eq!(err.value(), Some("65536"));
        assert_eq!(err.accepted(), Some("a prime from 2 to 5000011"));
    }
}
