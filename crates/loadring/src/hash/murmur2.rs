//! libstdc++'s 64-bit `std::_Hash_bytes`: a MurmurHash64A variant.
//!
//! This is what `std::hash<std::string>` computes with GCC's standard library
//! on 64-bit targets (seed [`STD_HASH_SEED`]), and what Envoy's `ring_hash`
//! uses for points when `hash_function: MURMUR_HASH_2` is configured. It is not
//! the reference MurmurHash64A: the tail bytes are folded in as one
//! little-endian word and the first and last mixing steps differ.

/// The seed libstdc++ passes for `std::hash<std::string>` (Envoy's
/// `MurmurHash::STD_HASH_SEED`).
pub const STD_HASH_SEED: u64 = 0xc70f_6907;

const MUL: u64 = 0xc6a4_a793_5bd1_e995;

#[inline]
fn shift_mix(v: u64) -> u64 {
    v ^ (v >> 47)
}

/// libstdc++'s 64-bit `_Hash_bytes(data, len, seed)`.
///
/// ```
/// use loadring::hash::{murmur_hash_2, STD_HASH_SEED};
///
/// // Envoy's own test value for "foo" (`MurmurHash::murmurHash2("foo")`).
/// assert_eq!(murmur_hash_2(b"foo", STD_HASH_SEED), 9631199822919835226);
/// ```
pub fn murmur_hash_2(data: &[u8], seed: u64) -> u64 {
    let mut hash = seed ^ (data.len() as u64).wrapping_mul(MUL);
    let mut words = data.chunks_exact(8);
    for word in &mut words {
        let mut le = [0u8; 8];
        le.copy_from_slice(word);
        let v = shift_mix(u64::from_le_bytes(le).wrapping_mul(MUL)).wrapping_mul(MUL);
        hash ^= v;
        hash = hash.wrapping_mul(MUL);
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        // libstdc++'s load_bytes: the tail as a little-endian integer.
        let v = tail
            .iter()
            .rev()
            .fold(0u64, |acc, &b| (acc << 8) | u64::from(b));
        hash ^= v;
        hash = hash.wrapping_mul(MUL);
    }
    hash = shift_mix(hash).wrapping_mul(MUL);
    shift_mix(hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values printed by `std::_Hash_bytes(s.data(), s.size(), 0xc70f6907)`
    /// (equal to `std::hash<std::string>{}(s)`) from a C++ program built with
    /// g++ 12.2 (Debian) / libstdc++ on x86-64. Lengths cover the empty input, every tail
    /// length 1..=7, whole words, and words plus a tail.
    const LIBSTDCXX: &[(&str, u64)] = &[
        ("", 0x553e_9390_1e46_2a6e),
        ("a", 0x454d_dee4_88c1_ed6b),
        ("ab", 0x4c4d_a6cd_289c_737b),
        ("abc", 0x32d8_2bf8_ed3d_ba39),
        ("abcd", 0xde77_5125_acd5_0b28),
        ("abcde", 0x0b41_619c_0ed2_1531),
        ("abcdef", 0x22c3_8f39_5b70_3657),
        ("abcdefg", 0xdeee_6830_a3af_82af),
        ("abcdefgh", 0x783d_b3e3_8db8_98bb),
        ("abcdefghi", 0xb4ec_9257_851c_8aaf),
        ("127.0.0.1:90_0", 0x4e7f_a1fb_fddf_33c0),
        ("127.0.0.1:90_17", 0x1cbf_4db3_6fd6_5087),
        ("hello world, this is a longer key!", 0xaaad_3226_7fae_7b7f),
        ("foo", 0x85a8_e535_edf1_1e5a),
    ];

    #[test]
    fn matches_libstdcxx() {
        for &(input, want) in LIBSTDCXX {
            assert_eq!(
                murmur_hash_2(input.as_bytes(), STD_HASH_SEED),
                want,
                "{input:?}"
            );
        }
    }

    #[test]
    fn widely_published_values() {
        // std::hash<std::string>{}("") on 64-bit libstdc++.
        assert_eq!(murmur_hash_2(b"", STD_HASH_SEED), 6142509188972423790);
        // Envoy's hash_test.cc: MurmurHash::murmurHash2("foo").
        assert_eq!(murmur_hash_2(b"foo", STD_HASH_SEED), 9631199822919835226);
    }

    #[test]
    fn the_seed_matters() {
        assert_ne!(
            murmur_hash_2(b"foo", 0),
            murmur_hash_2(b"foo", STD_HASH_SEED)
        );
    }
}
