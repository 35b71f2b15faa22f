//! sdbm: HAProxy's default `hash-type` function.

/// sdbm (`h = c + (h << 6) + (h << 16) - h`, i.e. `h * 65599 + c`) from 0,
/// unsigned bytes, as HAProxy's `hash_sdbm`.
///
/// ```
/// assert_eq!(loadring::hash::sdbm(b"ab"), 97 * 65599 + 98);
/// ```
pub fn sdbm(data: &[u8]) -> u32 {
    data.iter().fold(0u32, |h, &c| {
        u32::from(c)
            .wrapping_add(h << 6)
            .wrapping_add(h << 16)
            .wrapping_sub(h)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_multiply_by_65599_plus_byte() {
        assert_eq!(sdbm(b""), 0);
        assert_eq!(sdbm(b"a"), 97);
        let mut h: u32 = 0;
        for &c in b"The quick brown fox \xc3\xa9" {
            h = h.wrapping_mul(65599).wrapping_add(u32::from(c));
        }
        assert_eq!(sdbm(b"The quick brown fox \xc3\xa9"), h);
    }
}
