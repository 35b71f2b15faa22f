//! A wavelet matrix: the k-th smallest value among a prefix of a sequence,
//! in `O(log n)` time and `n log n` bits.
//!
//! Weighted round robin needs "the k-th endpoint, in index order, among the
//! `a` heaviest ones" for any `a` and `k`, lock-free and without storing one
//! list per distinct weight (that would be quadratic in the number of
//! endpoints). Storing the endpoint indices in descending weight order and
//! asking for the k-th smallest value among the first `a` is that question.
//!
//! Navarro and Claude's layout: level `l` stores bit `l` of every value
//! (most significant level first) after a stable partition of the previous
//! level by its bit, zeros first; a query descends one level per bit, keeping
//! the range of the values still in play with two rank queries per level.

/// Bits packed 64 per word, with the number of ones before each word.
#[derive(Debug, Clone)]
struct RankBits {
    words: Vec<u64>,
    /// `ones[w]`: ones in `words[..w]`; one entry more than `words`.
    ones: Vec<u32>,
}

impl RankBits {
    fn new(bits: impl ExactSizeIterator<Item = bool>) -> Self {
        let mut words = vec![0u64; bits.len().div_ceil(64)];
        for (i, bit) in bits.enumerate() {
            words[i / 64] |= u64::from(bit) << (i % 64);
        }
        let mut ones = Vec::with_capacity(words.len() + 1);
        let mut sum = 0u32;
        ones.push(0);
        for w in &words {
            sum += w.count_ones();
            ones.push(sum);
        }
        RankBits { words, ones }
    }

    /// Zeros among the first `i` bits.
    #[inline]
    fn rank0(&self, i: usize) -> usize {
        let (w, b) = (i / 64, i % 64);
        let partial = if b == 0 {
            0
        } else {
            (self.words[w] & ((1u64 << b) - 1)).count_ones()
        };
        i - (self.ones[w] + partial) as usize
    }
}

/// A sequence of `u32` values answering prefix order-statistic queries.
#[derive(Debug, Clone)]
pub(crate) struct Wavelet {
    /// Most significant bit first.
    levels: Vec<RankBits>,
    /// Zeros on each level (where the ones start after the partition).
    zeros: Vec<usize>,
    len: usize,
}

impl Wavelet {
    /// Builds the matrix of `values` (any `u32`s).
    pub(crate) fn new(values: &[u32]) -> Self {
        let max = values.iter().copied().max().unwrap_or(0);
        let bits = (u32::BITS - max.leading_zeros()).max(1);
        let mut cur = values.to_vec();
        let mut levels = Vec::with_capacity(bits as usize);
        let mut zeros = Vec::with_capacity(bits as usize);
        for l in (0..bits).rev() {
            levels.push(RankBits::new(cur.iter().map(|v| (v >> l) & 1 == 1)));
            let (mut zero, one): (Vec<u32>, Vec<u32>) =
                cur.iter().partition(|&&v| (v >> l) & 1 == 0);
            zeros.push(zero.len());
            zero.extend(one);
            cur = zero;
        }
        Wavelet {
            levels,
            zeros,
            len: values.len(),
        }
    }

    /// The `k`-th smallest (0-based) of the first `prefix` values.
    ///
    /// `k < prefix <= len`, checked by the caller (a weighted round robin
    /// position always decodes into its own active set).
    #[inline]
    pub(crate) fn kth_smallest(&self, prefix: usize, mut k: usize) -> u32 {
        debug_assert!(k < prefix && prefix <= self.len);
        let (mut lo, mut hi) = (0usize, prefix);
        let mut value = 0u32;
        let top = self.levels.len() - 1;
        for (depth, (bits, &zeros)) in self.levels.iter().zip(&self.zeros).enumerate() {
            let (z_lo, z_hi) = (bits.rank0(lo), bits.rank0(hi));
            let in_zeros = z_hi - z_lo;
            if k < in_zeros {
                lo = z_lo;
                hi = z_hi;
            } else {
                k -= in_zeros;
                lo = zeros + (lo - z_lo);
                hi = zeros + (hi - z_hi);
                value |= 1 << (top - depth);
            }
        }
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn naive(values: &[u32], prefix: usize, k: usize) -> u32 {
        let mut v = values[..prefix].to_vec();
        v.sort_unstable();
        v[k]
    }

    #[test]
    fn small_examples() {
        let values = [5, 0, 3, 7, 1, 6, 2, 4];
        let w = Wavelet::new(&values);
        assert_eq!(w.kth_smallest(1, 0), 5);
        assert_eq!(w.kth_smallest(3, 0), 0);
        assert_eq!(w.kth_smallest(3, 1), 3);
        assert_eq!(w.kth_smallest(3, 2), 5);
        assert_eq!(
            (0..8).map(|k| w.kth_smallest(8, k)).collect::<Vec<_>>(),
            [0, 1, 2, 3, 4, 5, 6, 7]
        );
        let single = Wavelet::new(&[0]);
        assert_eq!(single.kth_smallest(1, 0), 0);
    }

    proptest! {
        #[test]
        fn agrees_with_sorting(values in proptest::collection::vec(0u32..3000, 1..300),
                               picks in proptest::collection::vec((any::<prop::sample::Index>(), any::<prop::sample::Index>()), 1..20)) {
            let w = Wavelet::new(&values);
            for (p, k) in picks {
                let prefix = p.index(values.len()) + 1;
                let k = k.index(prefix);
                prop_assert_eq!(w.kth_smallest(prefix, k), naive(&values, prefix, k));
            }
        }
    }
}
