//! Bob Jenkins' one-at-a-time hash: libmemcached's default key hash.

/// Jenkins one-at-a-time, as libmemcached's `hashkit_one_at_a_time`.
///
/// ```
/// assert_eq!(loadring::hash::one_at_a_time(b"a"), 0xca2e9442);
/// ```
pub fn one_at_a_time(data: &[u8]) -> u32 {
    let mut h: u32 = 0;
    for &b in data {
        // libmemcached reads the key as `const char *`: bytes above 0x7f are
        // sign-extended before they are added.
        h = h.wrapping_add(b as i8 as i32 as u32);
        h = h.wrapping_add(h << 10);
        h ^= h >> 6;
    }
    h = h.wrapping_add(h << 3);
    h ^= h >> 11;
    h = h.wrapping_add(h << 15);
    h
}

#[cfg(test)]
mod tests {
    use super::one_at_a_time;

    #[test]
    fn published_values() {
        // Wikipedia's "Jenkins hash function" example.
        assert_eq!(
            one_at_a_time(b"The quick brown fox jumps over the lazy dog"),
            0x519e_91f5
        );
        assert_eq!(one_at_a_time(b"a"), 0xca2e_9442);
        assert_eq!(one_at_a_time(b""), 0);
    }
}
