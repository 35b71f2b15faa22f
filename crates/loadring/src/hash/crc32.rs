//! CRC-32 (IEEE 802.3, zlib's `crc32`): nginx's key and point hash,
//! HAProxy's `crc32`, twemproxy's `crc32a` and (cut to 15 bits) `crc32`.

/// The reflected IEEE polynomial.
const POLY: u32 = 0xedb8_8320;

/// One entry per byte value: the register after eight shifts.
const TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut bit = 0;
        while bit < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            bit += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
};

/// The CRC-32 register after `data`, from `state` (not inverted): lets a
/// prefix be hashed once and continued many times (nginx's point names).
#[inline]
pub(crate) fn crc32_update(mut state: u32, data: &[u8]) -> u32 {
    for &b in data {
        state = (state >> 8) ^ TABLE[((state ^ u32::from(b)) & 0xff) as usize];
    }
    state
}

/// The initial register of [`crc32_update`].
pub(crate) const CRC32_INIT: u32 = 0xffff_ffff;

/// CRC-32 as zlib computes it.
///
/// ```
/// assert_eq!(loadring::hash::crc32(b"123456789"), 0xcbf4_3926);
/// ```
pub fn crc32(data: &[u8]) -> u32 {
    !crc32_update(CRC32_INIT, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_check_values() {
        // The CRC catalogue's check value for CRC-32 (ISO-HDLC).
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
        assert_eq!(crc32(b""), 0);
        // zlib: crc32 of "The quick brown fox jumps over the lazy dog".
        assert_eq!(
            crc32(b"The quick brown fox jumps over the lazy dog"),
            0x414f_a339
        );
    }

    #[test]
    fn continuing_equals_hashing_at_once() {
        let state = crc32_update(CRC32_INIT, b"1234");
        assert_eq!(!crc32_update(state, b"56789"), 0xcbf4_3926);
    }
}
