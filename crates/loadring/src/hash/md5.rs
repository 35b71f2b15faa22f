//! MD5 as consistent-hashing rings read it: the digest cut into little-endian words.

use md5::{Digest, Md5};

/// The 16-byte MD5 digest of `data`.
pub fn md5(data: &[u8]) -> [u8; 16] {
    Md5::digest(data).into()
}

/// The first four digest bytes as a little-endian u32: brpc's `c_md5` point and
/// the key hash of ketama rings.
///
/// ```
/// // md5("") = d41d8cd9...
/// assert_eq!(loadring::hash::md5_le32(b""), 0xd98c1dd4);
/// ```
pub fn md5_le32(data: &[u8]) -> u32 {
    let d = md5(data);
    u32::from_le_bytes([d[0], d[1], d[2], d[3]])
}

/// The four little-endian words of the digest, in order (ketama points).
pub(crate) fn md5_words(data: &[u8]) -> [u32; 4] {
    let d = md5(data);
    std::array::from_fn(|j| {
        u32::from_le_bytes([d[4 * j], d[4 * j + 1], d[4 * j + 2], d[4 * j + 3]])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1321_vectors() {
        let hex = |d: [u8; 16]| d.iter().map(|b| format!("{b:02x}")).collect::<String>();
        assert_eq!(hex(md5(b"")), "d41d8cd98f00b204e9800998ecf8427e");
        assert_eq!(hex(md5(b"abc")), "900150983cd24fb0d6963f7d28e17f72");
        assert_eq!(md5_words(b"abc")[0], 0x98500190);
        assert_eq!(md5_words(b"abc")[3], 0x727fe128);
    }
}
