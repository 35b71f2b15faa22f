//! djb2: one of HAProxy's `hash-type` functions.

/// Bernstein's djb2 (`h = h * 33 + c` from 5381), unsigned bytes, as
/// HAProxy's `hash_djb2`.
///
/// ```
/// assert_eq!(loadring::hash::djb2(b""), 5381);
/// ```
pub fn djb2(data: &[u8]) -> u32 {
    data.iter().fold(5381u32, |h, &c| {
        (h << 5).wrapping_add(h).wrapping_add(u32::from(c))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // 5381 * 33 + 'a'
        assert_eq!(djb2(b"a"), 177_670);
        // The widely published 32-bit djb2("hello").
        assert_eq!(djb2(b"hello"), 261_238_937);
    }
}
