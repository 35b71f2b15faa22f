//! Fowler–Noll–Vo hashes as twemproxy computes them: over the key's bytes
//! read as C `char` (sign-extended), results cut to 32 bits.

const OFFSET_64: u64 = 0xcbf2_9ce4_8422_2325;
const PRIME_64: u64 = 0x0000_0100_0000_01b3;
const OFFSET_32: u32 = 0x811c_9dc5;
const PRIME_32: u32 = 0x0100_0193;

/// A byte as C's `(uint64_t)(char)c` on platforms where `char` is signed.
#[inline]
fn sign_extended(b: u8) -> u64 {
    b as i8 as i64 as u64
}

/// 64-bit FNV-1 (multiply, then xor), low 32 bits: twemproxy's `fnv1_64`.
pub fn fnv1_64(data: &[u8]) -> u32 {
    let mut h = OFFSET_64;
    for &b in data {
        h = h.wrapping_mul(PRIME_64);
        h ^= sign_extended(b);
    }
    h as u32
}

/// 64-bit FNV-1a (xor, then multiply), low 32 bits: twemproxy's `fnv1a_64`,
/// its default key hash.
///
/// ```
/// // The published FNV-1a 64 of "foobar" is 0x85944171f73967e8.
/// assert_eq!(loadring::hash::fnv1a_64(b"foobar"), 0xf739_67e8);
/// ```
pub fn fnv1a_64(data: &[u8]) -> u32 {
    let mut h = OFFSET_64;
    for &b in data {
        h ^= sign_extended(b);
        h = h.wrapping_mul(PRIME_64);
    }
    h as u32
}

/// 32-bit FNV-1: twemproxy's `fnv1_32`.
pub fn fnv1_32(data: &[u8]) -> u32 {
    let mut h = OFFSET_32;
    for &b in data {
        h = h.wrapping_mul(PRIME_32);
        h ^= sign_extended(b) as u32;
    }
    h
}

/// 32-bit FNV-1a: twemproxy's `fnv1a_32`.
pub fn fnv1a_32(data: &[u8]) -> u32 {
    let mut h = OFFSET_32;
    for &b in data {
        h ^= sign_extended(b) as u32;
        h = h.wrapping_mul(PRIME_32);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_test_vectors() {
        // The FNV reference test suite (ASCII, so the sign plays no part).
        assert_eq!(fnv1_32(b""), 0x811c_9dc5);
        assert_eq!(fnv1_32(b"a"), 0x050c_5d7e);
        assert_eq!(fnv1_32(b"foobar"), 0x31f0_b262);
        assert_eq!(fnv1a_32(b"a"), 0xe40c_292c);
        assert_eq!(fnv1a_32(b"foobar"), 0xbf9c_f968);
        assert_eq!(fnv1_64(b"a"), 0xaf63_bd4c_8601_b7be_u64 as u32);
        assert_eq!(fnv1_64(b"foobar"), 0x340d_8765_a4dd_a9c2_u64 as u32);
        assert_eq!(fnv1a_64(b"a"), 0xaf63_dc4c_8601_ec8c_u64 as u32);
        assert_eq!(fnv1a_64(b"foobar"), 0x8594_4171_f739_67e8_u64 as u32);
        assert_eq!(fnv1a_64(b""), 0xcbf2_9ce4_8422_2325_u64 as u32);
    }

    #[test]
    fn high_bytes_are_sign_extended() {
        // 0x80 xors 0xffffff80, not 0x80: FNV-1a of one byte is (offset ^ sx) * prime.
        assert_eq!(
            fnv1a_32(&[0x80]),
            (OFFSET_32 ^ 0xffff_ff80).wrapping_mul(PRIME_32)
        );
        assert_ne!(fnv1a_32(&[0x80]), (OFFSET_32 ^ 0x80).wrapping_mul(PRIME_32));
        // In 64 bits too: the sign sets bits 8..31, which the low 32 bits keep.
        assert_ne!(fnv1a_64(&[0x80, b'a']), {
            let h = (OFFSET_64 ^ 0x80).wrapping_mul(PRIME_64);
            (h ^ u64::from(b'a')).wrapping_mul(PRIME_64) as u32
        });
    }
}
