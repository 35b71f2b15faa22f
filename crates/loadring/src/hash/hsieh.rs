//! Paul Hsieh's SuperFastHash, as twemproxy's `hsieh`.

/// Little-endian 16-bit read.
#[inline]
fn le16(d: &[u8]) -> u32 {
    u32::from(d[0]) | (u32::from(d[1]) << 8)
}

/// SuperFastHash from the starting value `init` (Hsieh's original starts at
/// the length; twemproxy at 0), with twemproxy's treatment of tails: the
/// third byte of a 3-byte tail is a C `char` (sign-extended) before `<< 18`,
/// a 1-byte tail is unsigned.
fn super_fast_hash(data: &[u8], init: u32) -> u32 {
    if data.is_empty() {
        return 0;
    }
    let mut hash = init;
    let mut blocks = data.chunks_exact(4);
    for block in &mut blocks {
        hash = hash.wrapping_add(le16(&block[0..2]));
        let tmp = (le16(&block[2..4]) << 11) ^ hash;
        hash = (hash << 16) ^ tmp;
        hash = hash.wrapping_add(hash >> 11);
    }
    let tail = blocks.remainder();
    match tail.len() {
        3 => {
            hash = hash.wrapping_add(le16(&tail[0..2]));
            hash ^= hash << 16;
            hash ^= (tail[2] as i8 as i32 as u32) << 18;
            hash = hash.wrapping_add(hash >> 11);
        }
        2 => {
            hash = hash.wrapping_add(le16(tail));
            hash ^= hash << 11;
            hash = hash.wrapping_add(hash >> 17);
        }
        1 => {
            hash = hash.wrapping_add(u32::from(tail[0]));
            hash ^= hash << 10;
            hash = hash.wrapping_add(hash >> 1);
        }
        _ => {}
    }
    hash ^= hash << 3;
    hash = hash.wrapping_add(hash >> 5);
    hash ^= hash << 4;
    hash = hash.wrapping_add(hash >> 17);
    hash ^= hash << 25;
    hash = hash.wrapping_add(hash >> 6);
    hash
}

/// twemproxy's `hsieh`: SuperFastHash started at 0; 0 for the empty key.
pub fn hsieh(data: &[u8]) -> u32 {
    super_fast_hash(data, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hsiehs_original_start_gives_the_published_value() {
        // SuperFastHash("Hello World!") with Hsieh's start (the length), as
        // published with the `sfhash`/`hsieh-hash` crates: 1774740540.
        let data = b"Hello World!";
        assert_eq!(super_fast_hash(data, data.len() as u32), 1_774_740_540);
    }

    #[test]
    fn empty_is_zero_and_the_tail_sign_matters() {
        assert_eq!(hsieh(b""), 0);
        // A 3-byte tail with a high third byte differs from an unsigned read.
        let signed = hsieh(&[b'a', b'b', 0x80]);
        let mut h = le16(b"ab");
        h ^= h << 16;
        h ^= 0x80 << 18;
        h = h.wrapping_add(h >> 11);
        h ^= h << 3;
        h = h.wrapping_add(h >> 5);
        h ^= h << 4;
        h = h.wrapping_add(h >> 17);
        h ^= h << 25;
        h = h.wrapping_add(h >> 6);
        assert_ne!(signed, h, "the third byte is sign-extended");
    }
}
