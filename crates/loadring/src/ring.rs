//! A sorted ring of hash points, built in one batch and laid out for lookup.
//!
//! Points and their owners live in separate arrays (the binary search touches
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
    pub fn build(mut entries: Vec<(P, u32)>, rank: &[u32]) -> Self {
        entries.sort_unstable_by_key(|&(p, o)| (p, rank[o as usize]));
        let (points, owners): (Vec<P>, Vec<u32>) = entries.into_iter().unzip();
        Self::from_sorted(points, owners)
    }

    fn from_sorted(points: Vec<P>, owners: Vec<u32>) -> Self {
        // About two buckets per point keeps each bucket to one or two points.
        let bits = (usize::BITS - (points.len().max(1) * 2).leading_zeros() - 1)
            .clamp(1, 22)
            .min(P::BITS);
        let shift = P::BITS - bits;
        let buckets = 1usize << bits;
        let mut index = Vec::with_capacity(buckets + 1);
        let mut i = 0usize;
        for b in 0..buckets as u64 {
            while i < points.len() && (points[i].to_u64() >> shift) < b {
                i += 1;
            }
            index.push(i as u32);
        }
        index.push(points.len() as u32);
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
    /// The ring must not be empty.
    #[inline]
    pub fn locate(&self, hash: P) -> usize {
        let b = (hash.to_u64() >> self.shift) as usize;
        let lo = self.index[b] as usize;
        let hi = self.index[b + 1] as usize;
        let mut i = lo;
        // Buckets hold about two points: a short linear scan beats a search.
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
    #[inline]
    pub fn owner(&self, i: usize) -> usize {
        self.owners[i] as usize
    }

    /// The point of entry `i`.
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn ties_follow_rank_not_input_order() {
        let a = Ring::build(vec![(5u32, 0), (5, 1)], &[1, 0]);
        let b = Ring::build(vec![(5u32, 1), (5, 0)], &[1, 0]);
        assert_eq!((a.owner(0), a.owner(1)), (1, 0));
        assert_eq!((b.owner(0), b.owner(1)), (1, 0));
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
