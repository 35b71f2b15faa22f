//! MurmurHash3_x86_32, written out because the crates that offer it hash
//! through `io::Read` and cost several times more on the short names that rings
//! hash by the hundred thousand.

/// MurmurHash3_x86_32 of `data` with `seed` (Austin Appleby's reference).
///
/// ```
/// assert_eq!(loadring::hash::murmur3_x86_32(b"10.0.0.1:80-0", 0), 0xd012af39);
/// ```
#[inline]
pub fn murmur3_x86_32(data: &[u8], seed: u32) -> u32 {
    let mut blocks = data.chunks_exact(4);
    let h = body(seed, &mut blocks);
    finish(h, blocks.remainder(), data.len())
}

const C1: u32 = 0xcc9e_2d51;
const C2: u32 = 0x1b87_3593;

#[inline(always)]
fn scramble(k: u32) -> u32 {
    k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2)
}

/// Mixes one whole 4-byte block into the state.
#[inline(always)]
fn mix(h: u32, k: u32) -> u32 {
    (h ^ scramble(k))
        .rotate_left(13)
        .wrapping_mul(5)
        .wrapping_add(0xe654_6b64)
}

/// Mixes in the total length, then avalanches.
#[inline(always)]
fn fmix(mut h: u32, len: usize) -> u32 {
    h ^= len as u32;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^= h >> 16;
    h
}

/// Mixes the whole 4-byte blocks into the state `h`.
#[inline(always)]
fn body(mut h: u32, blocks: &mut std::slice::ChunksExact<'_, u8>) -> u32 {
    for block in blocks {
        h = mix(
            h,
            u32::from_le_bytes([block[0], block[1], block[2], block[3]]),
        );
    }
    h
}

/// Mixes the last 0 to 3 bytes and the total length, then avalanches.
#[inline(always)]
fn finish(mut h: u32, tail: &[u8], len: usize) -> u32 {
    if !tail.is_empty() {
        let mut k = 0u32;
        for (i, &b) in tail.iter().enumerate() {
            k |= u32::from(b) << (8 * i);
        }
        h ^= scramble(k);
    }
    fmix(h, len)
}

/// MurmurHash3_x86_32 of `"<prefix><n>"` for many `n`: the whole 4-byte
/// blocks of the prefix are mixed once, and the rest of each name is built
/// and mixed in registers (a ring build hashes `"<addr>-<i>"` for every
/// virtual node: writing the digits to memory and reading them back as words
/// stalls on store forwarding).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Murmur3Prefix {
    /// The state after the prefix's whole blocks.
    h: u32,
    /// The prefix's bytes after its last whole block, little-endian.
    rest: u32,
    /// How many bytes `rest` holds (0 to 3).
    rest_len: usize,
    len: usize,
}

impl Murmur3Prefix {
    pub(crate) fn new(prefix: &[u8], seed: u32) -> Self {
        let mut blocks = prefix.chunks_exact(4);
        let h = body(seed, &mut blocks);
        let tail = blocks.remainder();
        let rest = tail
            .iter()
            .enumerate()
            .fold(0u32, |k, (i, &b)| k | u32::from(b) << (8 * i));
        Murmur3Prefix {
            h,
            rest,
            rest_len: tail.len(),
            len: prefix.len(),
        }
    }

    /// The hash of the prefix followed by `n` in decimal.
    #[inline]
    pub(crate) fn hash_decimal(&self, n: u64) -> u32 {
        let digits = n.checked_ilog10().unwrap_or(0) as usize + 1;
        let end = self.rest_len + digits;
        if end > 16 {
            return self.hash_decimal_long(n, digits);
        }
        // The bytes after the prefix's whole blocks, little-endian; the bytes
        // past `end` stay zero, as the tail block needs.
        let mut word = u128::from(self.rest);
        let mut v = n;
        for pos in (self.rest_len..end).rev() {
            word |= u128::from(b'0' + (v % 10) as u8) << (8 * pos);
            v /= 10;
        }
        let mut h = self.h;
        let blocks = end / 4;
        for b in 0..blocks {
            h = mix(h, (word >> (32 * b)) as u32);
        }
        if !end.is_multiple_of(4) {
            h ^= scramble((word >> (32 * blocks)) as u32);
        }
        fmix(h, self.len + digits)
    }

    /// Calls `out` with [`hash_decimal`](Self::hash_decimal) of each of
    /// `0..count`, in order: the virtual nodes of one endpoint.
    ///
    /// Faster than one `hash_decimal` per number: names of one length are
    /// hashed by a loop made for that length (no branch on it, no 128-bit
    /// shifts), and the digits before the last are written once per ten names.
    pub(crate) fn hash_decimals(&self, count: u64, mut out: impl FnMut(u32)) {
        let mut lo = 0;
        let mut digits = 1;
        while lo < count {
            // The numbers with `digits` digits: [10^(digits-1), 10^digits), 0 included.
            let hi = count.min(10u64.saturating_pow(digits as u32));
            match self.rest_len + digits {
                1 => self.run::<1>(lo, hi, &mut out),
                2 => self.run::<2>(lo, hi, &mut out),
                3 => self.run::<3>(lo, hi, &mut out),
                4 => self.run::<4>(lo, hi, &mut out),
                5 => self.run::<5>(lo, hi, &mut out),
                6 => self.run::<6>(lo, hi, &mut out),
                7 => self.run::<7>(lo, hi, &mut out),
                8 => self.run::<8>(lo, hi, &mut out),
                // Past 8 bytes (a 100,000th node and more): rare, one by one.
                _ => (lo..hi).for_each(|n| out(self.hash_decimal(n))),
            }
            lo = hi;
            digits += 1;
        }
    }

    /// The hashes of `lo..hi`, numbers whose names end (after the prefix's
    /// whole blocks) at byte `END`, at most 8: they fit one `u64`.
    #[inline(always)]
    fn run<const END: usize>(&self, lo: u64, hi: u64, out: &mut impl FnMut(u32)) {
        let last = 8 * (END - 1);
        let len = self.len + END - self.rest_len;
        let mut n = lo;
        while n < hi {
            // `n` is a multiple of ten (runs start at 0 or a power of ten): up to
            // the next one, only the last digit changes.
            let stop = hi.min(n + 10);
            let mut word = u64::from(self.rest);
            let mut v = n / 10;
            for pos in (self.rest_len..END - 1).rev() {
                word |= u64::from(b'0' + (v % 10) as u8) << (8 * pos);
                v /= 10;
            }
            for ones in 0..stop - n {
                let word = word | (u64::from(b'0') + ones) << last;
                let mut h = self.h;
                for b in 0..END / 4 {
                    h = mix(h, (word >> (32 * b)) as u32);
                }
                if !END.is_multiple_of(4) {
                    // Zero-padded tail block; `checked_shr` only because END = 8
                    // would shift by 64 here, in a branch it never takes.
                    h ^= scramble(word.checked_shr(32 * (END / 4) as u32).unwrap_or(0) as u32);
                }
                out(fmix(h, len));
            }
            n = stop;
        }
    }

    /// `hash_decimal` for numbers too long for one 16-byte word (14 digits
    /// and more): through a buffer.
    #[cold]
    fn hash_decimal_long(&self, n: u64, digits: usize) -> u32 {
        // At most 3 prefix bytes and 20 digits.
        let mut buf = [0u8; 23];
        buf[..4].copy_from_slice(&self.rest.to_le_bytes()[..]);
        let end = self.rest_len + digits;
        let mut v = n;
        for d in buf[self.rest_len..end].iter_mut().rev() {
            *d = b'0' + (v % 10) as u8;
            v /= 10;
        }
        let mut blocks = buf[..end].chunks_exact(4);
        let h = body(self.h, &mut blocks);
        finish(h, blocks.remainder(), self.len + digits)
    }
}

#[cfg(test)]
mod tests {
    use super::{murmur3_x86_32, Murmur3Prefix};

    #[test]
    fn reference_values() {
        // From the SMHasher verification set and widely published tables.
        assert_eq!(murmur3_x86_32(b"", 0), 0);
        assert_eq!(murmur3_x86_32(b"", 1), 0x514e_28b7);
        assert_eq!(murmur3_x86_32(b"", 0xffff_ffff), 0x81f1_6f39);
        assert_eq!(murmur3_x86_32(b"\0\0\0\0", 0), 0x2362_f9de);
        assert_eq!(murmur3_x86_32(b"aaaa", 0x9747_b28c), 0x5a97_808a);
        assert_eq!(murmur3_x86_32(b"abc", 0), 0xb3dd_93fa);
        assert_eq!(murmur3_x86_32(b"Hello, world!", 0x9747_b28c), 0x2488_4cba);
        assert_eq!(
            murmur3_x86_32(b"The quick brown fox jumps over the lazy dog", 0x9747_b28c),
            0x2fa8_26cd
        );
        assert_eq!(murmur3_x86_32(b"10.0.0.1:80-0", 0), 0xd012_af39);
    }

    #[test]
    fn prefix_state_hashes_like_the_whole_name() {
        let prefixes = [
            "",
            "a",
            "ab",
            "abc",
            "h-",
            "10.0.0.1:80-",
            "[::1]:8080-",
            "unix:app.sock_",
        ];
        let numbers = [
            0,
            1,
            9,
            10,
            99,
            100,
            159,
            12345,
            9_999_999,
            9_999_999_999_999,
            10_000_000_000_000,
            123_456_789_012_345,
            u64::MAX,
        ];
        for prefix in prefixes {
            let state = Murmur3Prefix::new(prefix.as_bytes(), 0);
            for n in numbers {
                let name = format!("{prefix}{n}");
                assert_eq!(
                    state.hash_decimal(n),
                    murmur3_x86_32(name.as_bytes(), 0),
                    "{name}"
                );
            }
        }
    }

    #[test]
    fn a_run_of_numbers_hashes_like_one_at_a_time() {
        for prefix in [
            "",
            "a",
            "ab",
            "abc",
            "abcd",
            "10.0.0.1:80-",
            "10.0.4.25:8080-",
        ] {
            let state = Murmur3Prefix::new(prefix.as_bytes(), 7);
            for count in [0u64, 1, 9, 10, 11, 99, 100, 101, 160, 1001, 100_011] {
                let mut run = Vec::new();
                state.hash_decimals(count, |h| run.push(h));
                let one_by_one: Vec<u32> = (0..count).map(|n| state.hash_decimal(n)).collect();
                assert_eq!(run, one_by_one, "{prefix:?} x {count}");
            }
            // Both against the reference, across every length of name.
            let mut run = Vec::new();
            state.hash_decimals(100_011, |h| run.push(h));
            for n in [
                0u64, 5, 9, 10, 57, 99, 100, 999, 1000, 9999, 10_000, 99_999, 100_000, 100_010,
            ] {
                let name = format!("{prefix}{n}");
                assert_eq!(
                    run[n as usize],
                    murmur3_x86_32(name.as_bytes(), 7),
                    "{name}"
                );
            }
        }
    }

    #[test]
    fn seeded_prefix() {
        let seeded = Murmur3Prefix::new(b"abcde", 0x9747_b28c);
        assert_eq!(
            seeded.hash_decimal(42),
            murmur3_x86_32(b"abcde42", 0x9747_b28c)
        );
    }
}
