//! The hash functions that placement compatibility depends on.
//!
//! Each is the exact function of the system a policy is named after; the
//! request-key hashes are exposed so that callers can compute request codes
//! the way other clients of the same fleet do.

mod blake2b;
mod crc16;
mod crc32;
mod djb2;
mod fnv;
mod full_hash;
mod hsieh;
mod lookup3;
mod md5;
mod murmur2;
mod murmur2_32;
mod murmur3;
mod one_at_a_time;
mod sdbm;
mod wt6;

pub use self::blake2b::blake2b_le32;
pub use self::crc16::twemproxy_crc16;
pub use self::crc32::crc32;
pub(crate) use self::crc32::{crc32_update, CRC32_INIT};
pub use self::djb2::djb2;
pub use self::fnv::{fnv1_32, fnv1_64, fnv1a_32, fnv1a_64};
pub use self::full_hash::haproxy_full_hash;
pub use self::hsieh::hsieh;
pub use self::lookup3::{hashlittle, jenkins};
pub(crate) use self::md5::md5_words;
pub use self::md5::{md5, md5_le32};
pub use self::murmur2::{murmur_hash_2, STD_HASH_SEED};
pub use self::murmur2_32::{murmur2_32, twemproxy_murmur};
pub use self::murmur3::murmur3_x86_32;
pub(crate) use self::murmur3::Murmur3Prefix;
pub use self::one_at_a_time::one_at_a_time;
pub use self::sdbm::sdbm;
pub use self::wt6::wt6;

/// xxHash64 with the given seed (Envoy's `HashUtil::xxHash64`).
#[inline]
pub fn xxhash64(data: &[u8], seed: u64) -> u64 {
    xxhash_rust::xxh64::xxh64(data, seed)
}

/// xxHash32 with the given seed (HAProxy's `XXH32`, the server keys of
/// `hash-key addr` over IPv6 and of `hash-key guid`).
#[inline]
pub(crate) fn xxhash32(data: &[u8], seed: u32) -> u32 {
    xxhash_rust::xxh32::xxh32(data, seed)
}

/// Writes `prefix`, a separator byte and the decimal `n` into `buf`, reusing
/// its allocation: the names of virtual nodes (`"10.0.0.1:80-17"`) are built
/// this way a hundred thousand times per ring build.
pub(crate) fn point_name<'b>(buf: &'b mut Vec<u8>, prefix: &str, sep: u8, n: u64) -> &'b [u8] {
    buf.clear();
    buf.extend_from_slice(prefix.as_bytes());
    buf.push(sep);
    push_decimal(buf, n);
    buf
}

/// Appends the decimal digits of `n` to `buf`.
pub(crate) fn push_decimal(buf: &mut Vec<u8>, n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut v = n;
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    buf.extend_from_slice(&digits[i..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn point_names_are_decimal() {
        let mut buf = Vec::new();
        assert_eq!(
            point_name(&mut buf, "10.0.0.1:80", b'-', 0),
            b"10.0.0.1:80-0"
        );
        assert_eq!(
            point_name(&mut buf, "h", b'_', 18446744073709551615),
            b"h_18446744073709551615"
        );
    }

    #[test]
    fn xxhash32_known_values() {
        // The reference implementation's published values for the empty
        // input: XXH32("", 0) and XXH32("", 1).
        assert_eq!(xxhash32(b"", 0), 0x02cc_5d05);
        assert_eq!(xxhash32(b"", 1), 0x0b2c_b792);
    }

    #[test]
    fn xxhash64_known_values() {
        // Published xxHash64 test values for the empty input.
        assert_eq!(xxhash64(b"", 0), 0xef46db3751d8e999);
        assert_eq!(xxhash64(b"", 1), 0xd5afba1336a3be4b);
    }
}
