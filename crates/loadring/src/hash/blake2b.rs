//! BLAKE2b-512 as dubbo-go-pixiu's ring reads it (gost `hash/consistent`).

use blake2::{Blake2b512, Digest};

/// The low 32 bits of the first little-endian u64 of BLAKE2b-512 (the
/// first four digest bytes as a little-endian u32): pixiu's ring hash
/// before its `mod max_vnode_num`.
///
/// ```
/// // blake2b-512("abc") = ba80a53f...
/// assert_eq!(loadring::hash::blake2b_le32(b"abc"), 0x3fa580ba);
/// ```
pub fn blake2b_le32(data: &[u8]) -> u32 {
    let d = Blake2b512::digest(data);
    u32::from_le_bytes([d[0], d[1], d[2], d[3]])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7693 appendix A: BLAKE2b-512("abc") begins BA 80 A5 3F 98 1C 4D 0D.
    #[test]
    fn rfc7693_vector() {
        assert_eq!(blake2b_le32(b"abc"), 0x3fa5_80ba);
        // BLAKE2b-512("") begins 78 6A 02 F7.
        assert_eq!(blake2b_le32(b""), 0xf702_6a78);
    }
}
