//! A sorted ring of hash points, built in one batch and laid out for lookup.
//!
//! Points and their owners live in separate arrays (the search touches
//! only points), and a bucket index over the top bits of the hash narrows each
//! lookup to the few points of one bucket, so a lookup costs about one cache
//! miss instead of `log2(points)` of them.

/// A hash value a ring is made of: `u32` (brpc, ketama) or `u64` (Envoy).
pub trait Point: Copy + Ord + Send + Sync + std::fmt::Debug + 'static {
    /// Width in bits.
    const BITS: u32;
    /// Widens to `u64`.
    fn to_u64(self) -> u64;
    /// Narrows a code already checked to fit.
    fn from_u64(v: u64) -> Self;
}

impl Point for u32 {
    const BITS: u32 = 32;
    fn to_u64(self) -> u64 {
        u64::from(self)
    }
    fn from_u64(v: u64) -> Self {
        debug_assert!(v <= u64::from(u32::MAX));
        v as u32
    }
}

impl Point for u64 {
    const BITS: u32 = 64;
    fn to_u64(self) -> u64 {
        self
    }
    fn from_u64(v: u64) -> Self {
        v
    }
}

/// A sorted ring: entry `i` is the point `points[i]` owned by endpoint `owners[i]`.
#[derive(Debug, Clone)]
pub struct Ring<P: Point> {
    points: Vec<P>,
    owners: Vec<u32>,
    /// `index[b]` is the first entry whose point's top bits are `>= b`.
    index: Vec<u32>,
    shift: u32,
}

impl<P: Point> Ring<P> {
    /// Builds the ring from unsorted `(point, owner)` entries with ONE sort.
    ///
    /// Equal points are ordered by `rank[owner]` (the policy's tie-break), so
    /// the result does not depend on the order of `entries`.
    ///
    /// The sort is a radix sort on the points (hash values are uniform, so
    /// their digits spread evenly over the buckets): on 102,400 points, sort
    /// and index take 0.42 ms instead of 2.7 ms with a comparison sort
    /// (BENCHMARKS.md). Its passes alternate between `entries` and the ring's
    /// separate `points` and `owners` arrays, and end in the arrays: no
    /// second buffer of entries, no `unzip` copy. Runs of equal points are
    /// then put in rank order, ties broken by owner index.
    ///
    /// # Panics
    /// `rank` has no entry for some owner (an owner index `>= rank.len()`).
    pub fn build(entries: Vec<(P, u32)>, rank: &[u32]) -> Self {
        assert!(
            entries.iter().all(|e| (e.1 as usize) < rank.len()),
            "every owner needs a rank"
        );
        let (points, mut owners) = radix_sort(entries);
        let mut i = 0;
        while i + 1 < points.len() {
            let p = points[i];
            if points[i + 1] != p {
                i += 1;
                continue;
            }
            let end = i + points[i..].iter().take_while(|&&q| q == p).count();
            // The points of the run are equal: only their owners move.
            owners[i..end].sort_unstable_by_key(|&o| (rank[o as usize], o));
            i = end;
        }
        Self::from_sorted(points, owners)
    }

    /// As [`Ring::build`], then only the first entry of each run of equal
    /// points is kept (the owner `rank` puts first): the ring of systems
    /// whose points live in a map, where an equal point replaces the one
    /// before it (Dubbo's `TreeMap`, pixiu's Go map).
    ///
    /// # Panics
    /// As [`Ring::build`].
    pub fn build_distinct(entries: Vec<(P, u32)>, rank: &[u32]) -> Self {
        let ring = Self::build(entries, rank);
        if ring.points.windows(2).all(|w| w[0] != w[1]) {
            return ring;
        }
        let (mut points, mut owners) = (ring.points, ring.owners);
        let mut kept = 0;
        for i in 0..points.len() {
            if kept == 0 || points[i] != points[kept - 1] {
                points[kept] = points[i];
                owners[kept] = owners[i];
                kept += 1;
            }
        }
        points.truncate(kept);
        owners.truncate(kept);
        Self::from_sorted(points, owners)
    }

    /// This ring with `entries` (unsorted, any owners) merged in: the ring
    /// [`Ring::build`] would make of all entries together, in time linear in
    /// the ring's size, without sorting what is already sorted.
    ///
    /// `rank` is the tie-break of the new membership; it must order the
    /// owners already on the ring as before.
    pub(crate) fn merge(&self, entries: Vec<(P, u32)>, rank: &[u32]) -> Self {
        let added = Ring::build(entries, rank);
        let n = self.len() + added.len();
        let (mut points, mut owners) = (Vec::with_capacity(n), Vec::with_capacity(n));
        // Few entries join many: find each one's place by binary search and
        // copy the run of old entries before it in one go.
        let mut from = 0;
        for (&p, &o) in added.points.iter().zip(&added.owners) {
            let key = (rank[o as usize], o);
            let lo = from + self.points[from..].partition_point(|&q| q < p);
            let at = lo
                + self.points[lo..]
                    .iter()
                    .zip(&self.owners[lo..])
                    .take_while(|(&q, &r)| q == p && (rank[r as usize], r) < key)
                    .count();
            points.extend_from_slice(&self.points[from..at]);
            owners.extend_from_slice(&self.owners[from..at]);
            points.push(p);
            owners.push(o);
            from = at;
        }
        points.extend_from_slice(&self.points[from..]);
        owners.extend_from_slice(&self.owners[from..]);
        self.reindexed(points, owners, &added.points, true)
    }

    /// This ring without the entries of `owner`; with `renumber`, the owners
    /// after it move down by one (the owner left the membership).
    pub(crate) fn without_owner(&self, owner: u32, renumber: bool) -> Self {
        let mut points = Vec::with_capacity(self.len());
        let mut owners = Vec::with_capacity(self.len());
        let mut removed = Vec::new();
        // Few entries leave many: copy the runs between them in one go.
        let mut from = 0;
        for (i, &o) in self.owners.iter().enumerate() {
            if o == owner {
                points.extend_from_slice(&self.points[from..i]);
                owners.extend_from_slice(&self.owners[from..i]);
                removed.push(self.points[i]);
                from = i + 1;
            }
        }
        points.extend_from_slice(&self.points[from..]);
        owners.extend_from_slice(&self.owners[from..]);
        if renumber {
            // Branch-free, so the compiler vectorizes it.
            for o in &mut owners {
                *o -= u32::from(*o > owner);
            }
        }
        self.reindexed(points, owners, &removed, false)
    }

    /// The ring over `points` and `owners`, which are this ring's with the
    /// sorted `changed` points added (`added`) or removed. While the bucket
    /// count stays the same the lookup index is this one's, shifted by the
    /// changed points below each bucket (a few slice-wide adds) instead of
    /// a histogram of every point.
    fn reindexed(&self, points: Vec<P>, owners: Vec<u32>, changed: &[P], added: bool) -> Self {
        if Self::index_bits(points.len()) != Self::index_bits(self.len()) {
            return Self::from_sorted(points, owners);
        }
        let mut index = self.index.clone();
        // index[b] counts the points below bucket b: a changed point in
        // bucket c moves every index[b] with b > c by one.
        let shift_from = |index: &mut [u32], delta: u32| {
            for slot in index {
                *slot = if added { *slot + delta } else { *slot - delta };
            }
        };
        let (mut from, mut delta) = (0, 0u32);
        for &p in changed {
            let to = (p.to_u64() >> self.shift) as usize + 1;
            shift_from(&mut index[from..to], delta);
            from = to;
            delta += 1;
        }
        shift_from(&mut index[from..], delta);
        Ring {
            points,
            owners,
            index,
            shift: self.shift,
        }
    }

    /// Bits of the bucket index for a ring of `len` points.
    fn index_bits(len: usize) -> u32 {
        (usize::BITS - len.max(1).leading_zeros() - 1)
            .clamp(1, 22)
            .min(P::BITS)
    }

    fn from_sorted(points: Vec<P>, owners: Vec<u32>) -> Self {
        // About one bucket per point (a power of two, rounded down) keeps each
        // bucket to one or two points, in the cache line its first point is in.
        let bits = Self::index_bits(points.len());
        let shift = P::BITS - bits;
        // index[b] = how many points lie below bucket b: a histogram of the
        // top bits, then its running sum (no branch per point).
        let mut index = vec![0u32; (1usize << bits) + 1];
        for p in &points {
            index[(p.to_u64() >> shift) as usize + 1] += 1;
        }
        let mut sum = 0;
        for slot in &mut index {
            sum += *slot;
            *slot = sum;
        }
        Ring {
            points,
            owners,
            index,
            shift,
        }
    }

    /// Number of entries (points).
    pub fn len(&self) -> usize {
        self.points.len()
    }

    /// Whether the ring has no points.
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// The entry a hash lands on: the first point `>= hash`, wrapping to 0.
    ///
    /// On an empty ring the answer is 0, which is no entry: check
    /// [`Ring::is_empty`] first.
    #[inline]
    pub fn locate(&self, hash: P) -> usize {
        let b = (hash.to_u64() >> self.shift) as usize;
        let lo = self.index[b] as usize;
        let hi = self.index[b + 1] as usize;
        // Buckets hold one or two points: a short linear scan beats a search.
        let mut i = lo;
        while i < hi && self.points[i] < hash {
            i += 1;
        }
        if i == self.points.len() {
            0
        } else {
            i
        }
    }

    /// The endpoint owning entry `i`.
    ///
    /// # Panics
    /// `i >= len()`.
    #[inline]
    pub fn owner(&self, i: usize) -> usize {
        self.owners[i] as usize
    }

    /// The point of entry `i`.
    ///
    /// # Panics
    /// `i >= len()`.
    pub fn point(&self, i: usize) -> P {
        self.points[i]
    }

    /// The sorted points.
    pub fn points(&self) -> &[P] {
        &self.points
    }

    /// Each endpoint's share of the hash space (brpc's Describe): an entry owns
    /// the arc from the previous point (exclusive) to its own, the first entry
    /// also the wrap-around arc; arcs are divided by the largest hash.
    ///
    /// # Panics
    /// An owner of the ring is `>= endpoints`.
    pub fn shares(&self, endpoints: usize) -> Vec<f64> {
        let mut shares = vec![0.0; endpoints];
        let n = self.points.len();
        if n == 0 {
            return shares;
        }
        let max = if P::BITS == 32 {
            f64::from(u32::MAX)
        } else {
            u64::MAX as f64
        };
        for i in 0..n {
            let here = self.points[i].to_u64();
            let arc = if i == 0 {
                // (last, MAX] plus [0, first]
                let last = self.points[n - 1].to_u64();
                let wrap = if P::BITS == 32 {
                    u64::from(u32::MAX)
                } else {
                    u64::MAX
                } - last;
                wrap as f64 + here as f64
            } else {
                (here - self.points[i - 1].to_u64()) as f64
            };
            shares[self.owners[i] as usize] += arc / max;
        }
        shares
    }
}

/// Ranks for [`Ring::build_distinct`] that put the owner later in the
/// order first among equal points: the later write to a map wins.
pub(crate) fn later_first(len: usize) -> Vec<u32> {
    (0..len as u32).rev().collect()
}

/// Bits per radix digit: 2,048 counters (8 KiB) stay in the L1 cache.
const RADIX_BITS: u32 = 11;

/// Sorts entries by point with a least-significant-digit radix sort, into
/// separate point and owner arrays. Below a few hundred entries a comparison
/// sort is faster.
///
/// `entries` and the two result arrays are the only buffers, one buffer of
/// all entries fewer than sorting into a second buffer and then `unzip`ping
/// (1.3 MB less at its peak for 1,024 endpoints x 160; the memory a build
/// touches for the first time costs page faults, a large part of its time).
fn radix_sort<P: Point>(mut entries: Vec<(P, u32)>) -> (Vec<P>, Vec<u32>) {
    const BUCKETS: usize = 1 << RADIX_BITS;
    const MASK: u64 = BUCKETS as u64 - 1;
    let n = entries.len();
    if n < 512 {
        entries.sort_unstable_by_key(|e| e.0);
        return entries.into_iter().unzip();
    }
    let passes = P::BITS.div_ceil(RADIX_BITS);
    // One read of the input counts the digits of every pass.
    let mut counts = vec![[0u32; BUCKETS]; passes as usize];
    for &(p, _) in &entries {
        let v = p.to_u64();
        for (d, count) in counts.iter_mut().enumerate() {
            count[((v >> (d as u32 * RADIX_BITS)) & MASK) as usize] += 1;
        }
    }
    // A digit every point shares (e.g. small test points) orders nothing.
    let digits = counts
        .iter()
        .enumerate()
        .filter(|(_, count)| count.iter().all(|&c| (c as usize) < n));
    // Passes go back and forth between `entries` and the ring's arrays, so
    // no third buffer is needed: with 3 passes (32-bit points) the last one
    // lands in the ring's arrays.
    let mut points = vec![P::from_u64(0); n];
    let mut owners = vec![0u32; n];
    let mut in_entries = true;
    for (d, count) in digits {
        let shift = d as u32 * RADIX_BITS;
        let bucket = |p: P| ((p.to_u64() >> shift) & MASK) as usize;
        // next[b] = where the next entry of bucket b goes.
        let mut next = [0u32; BUCKETS];
        let mut sum = 0u32;
        for (slot, &c) in next.iter_mut().zip(count) {
            *slot = sum;
            sum += c;
        }
        if in_entries {
            for &(p, o) in &entries {
                let b = bucket(p);
                let at = next[b] as usize;
                next[b] += 1;
                points[at] = p;
                owners[at] = o;
            }
        } else {
            for (&p, &o) in points.iter().zip(&owners) {
                let b = bucket(p);
                entries[next[b] as usize] = (p, o);
                next[b] += 1;
            }
        }
        in_entries = !in_entries;
    }
    if in_entries {
        // An even number of passes (64-bit points, or digits skipped) ended
        // in `entries`.
        for ((p, o), &(q, r)) in points.iter_mut().zip(&mut owners).zip(&entries) {
            *p = q;
            *o = r;
        }
    }
    (points, owners)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Merging an endpoint's points in and taking them out again keeps
    /// the lookup index exactly what a build from scratch makes, also when
    /// the change crosses a power of two of points (the bucket count
    /// changes) and when points collide with others.
    #[test]
    fn incremental_changes_keep_the_index_of_a_full_build() {
        let entries = |owner: u32, n: u32| -> Vec<(u32, u32)> {
            (0..n)
                .map(|k| {
                    (
                        (k * 7919 + owner * 104_729).wrapping_mul(2_654_435_761),
                        owner,
                    )
                })
                .collect()
        };
        let rank: Vec<u32> = (0..8).collect();
        for (before, extra) in [(1000, 24), (1000, 48), (1020, 4), (1024, 4), (8, 1)] {
            let mut all: Vec<(u32, u32)> = (0..4).flat_map(|o| entries(o, before / 4)).collect();
            // A point colliding with one already on the ring.
            all.push((all[0].0, 5));
            let base = Ring::build(all.clone(), &rank);
            let added = entries(6, extra);
            let merged = base.merge(added.clone(), &rank);
            let full = Ring::build(all.iter().copied().chain(added).collect(), &rank);
            assert_eq!(merged.points, full.points, "{before}+{extra}");
            assert_eq!(merged.owners, full.owners, "{before}+{extra}");
            assert_eq!(merged.shift, full.shift, "{before}+{extra}");
            assert_eq!(
                merged.index, full.index,
                "{before}+{extra}: index after merge"
            );
            let removed = merged.without_owner(6, false);
            assert_eq!(removed.points, base.points, "{before}+{extra}");
            assert_eq!(
                removed.index, base.index,
                "{before}+{extra}: index after removal"
            );
            let renumbered = merged.without_owner(2, true);
            let expected: Vec<(u32, u32)> = all
                .iter()
                .chain(&entries(6, extra))
                .filter(|e| e.1 != 2)
                .map(|&(p, o)| (p, if o > 2 { o - 1 } else { o }))
                .collect();
            let rank_after: Vec<u32> = (0..7).collect();
            let full_after = Ring::build(expected, &rank_after);
            assert_eq!(renumbered.points, full_after.points, "{before}+{extra}");
            assert_eq!(renumbered.owners, full_after.owners, "{before}+{extra}");
            assert_eq!(renumbered.index, full_after.index, "{before}+{extra}");
        }
    }

    fn naive<P: Point>(points: &[P], h: P) -> usize {
        points.iter().position(|&p| p >= h).unwrap_or(0)
    }

    #[test]
    fn locate_matches_a_linear_scan() {
        let entries: Vec<(u32, u32)> = (0..1000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761), i % 7))
            .collect();
        let ring = Ring::build(entries, &[0, 1, 2, 3, 4, 5, 6]);
        for h in
            (0..u32::MAX)
                .step_by(9_999_991)
                .chain([0, 1, u32::MAX, ring.point(0), ring.point(999)])
        {
            assert_eq!(ring.locate(h), naive(ring.points(), h), "hash {h}");
        }
    }

    #[test]
    fn exact_match_and_wrap() {
        let ring = Ring::build(vec![(10u64, 0), (20, 1), (u64::MAX - 5, 2)], &[0, 1, 2]);
        assert_eq!(ring.locate(10), 0);
        assert_eq!(ring.locate(11), 1);
        assert_eq!(ring.locate(u64::MAX - 4), 0, "past the last point wraps");
        assert_eq!(ring.owner(2), 2);
    }

    #[test]
    fn build_distinct_keeps_the_first_ranked_owner_of_each_point() {
        // Owner 2 ranks first, then 0, then 1; point 7 is shared by all three.
        let rank = [1, 2, 0];
        let ring = Ring::build_distinct(vec![(7u32, 0), (3, 1), (7, 1), (7, 2), (9, 0)], &rank);
        assert_eq!(ring.points(), &[3, 7, 9]);
        assert_eq!((0..3).map(|i| ring.owner(i)).collect::<Vec<_>>(), [1, 2, 0]);
        assert_eq!(ring.locate(8), 2);
        assert_eq!(ring.locate(10), 0, "wraps");
        // Enough entries for the radix sort, every point twice.
        let entries: Vec<(u32, u32)> = (0..2000u32)
            .map(|i| ((i / 2).wrapping_mul(2_654_435_761), i % 2))
            .collect();
        let ring = Ring::build_distinct(entries, &[1, 0]);
        assert_eq!(ring.len(), 1000);
        assert!((0..1000).all(|i| ring.owner(i) == 1), "owner 1 ranks first");
        for h in (0..u32::MAX).step_by(7_777_777) {
            assert_eq!(ring.locate(h), naive(ring.points(), h), "hash {h}");
        }
    }

    #[test]
    fn ties_follow_rank_not_input_order() {
        let a = Ring::build(vec![(5u32, 0), (5, 1)], &[1, 0]);
        let b = Ring::build(vec![(5u32, 1), (5, 0)], &[1, 0]);
        assert_eq!((a.owner(0), a.owner(1)), (1, 0));
        assert_eq!((b.owner(0), b.owner(1)), (1, 0));
    }

    /// The reference order: a comparison sort by (point, rank, owner).
    fn sorted_naively<P: Point>(mut entries: Vec<(P, u32)>, rank: &[u32]) -> Vec<(P, u32)> {
        entries.sort_by_key(|&(p, o)| (p, rank[o as usize], o));
        entries
    }

    fn entries_of<P: Point>(ring: &Ring<P>) -> Vec<(P, u32)> {
        (0..ring.len())
            .map(|i| (ring.point(i), ring.owner(i) as u32))
            .collect()
    }

    #[test]
    fn radix_build_equals_a_comparison_sort() {
        // Enough entries for the radix path, with many ties (points drawn from
        // a small range) and a rank that is not the owner order.
        let rank: Vec<u32> = (0..37u32).map(|o| (o * 11) % 37).collect();
        let mut s = 12345u64;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        for modulus in [u64::MAX, 1 << 33, 3000, 1 << 20] {
            let wide: Vec<(u64, u32)> = (0..20_000)
                .map(|_| (next() % modulus, (next() % 37) as u32))
                .collect();
            let narrow: Vec<(u32, u32)> = wide.iter().map(|&(p, o)| (p as u32, o)).collect();
            let ring = Ring::build(wide.clone(), &rank);
            assert_eq!(
                entries_of(&ring),
                sorted_naively(wide, &rank),
                "u64 mod {modulus}"
            );
            let ring = Ring::build(narrow.clone(), &rank);
            assert_eq!(
                entries_of(&ring),
                sorted_naively(narrow, &rank),
                "u32 mod {modulus}"
            );
        }
    }

    /// brpc's Describe: a point owns the arc that ends at it, the first point
    /// also the arc that wraps around from the last one.
    #[test]
    fn each_point_owns_the_arc_that_ends_at_it() {
        let max = f64::from(u32::MAX);
        let ring = Ring::build(vec![(20u32, 1), (u32::MAX - 5, 2), (10, 0)], &[0, 1, 2]);
        let shares = ring.shares(3);
        // owner 0 at 10: (MAX - 5, MAX] and [0, 10] = 5 + 10.
        assert_eq!(shares[0], 15.0 / max);
        // owner 1 at 20: (10, 20].
        assert_eq!(shares[1], 10.0 / max);
        // owner 2 at MAX - 5: (20, MAX - 5].
        assert_eq!(shares[2], f64::from(u32::MAX - 25) / max);
    }

    #[test]
    fn shares_sum_to_one() {
        let entries: Vec<(u32, u32)> = (0..300u32)
            .map(|i| (i.wrapping_mul(2_654_435_761), i % 3))
            .collect();
        let ring = Ring::build(entries, &[0, 1, 2]);
        let total: f64 = ring.shares(3).iter().sum();
        assert!((total - 1.0).abs() < 1e-9, "{total}");
    }
}
