//! Austin Appleby's 32-bit MurmurHash2, as twemproxy's `murmur`.

const M: u32 = 0x5bd1_e995;

/// MurmurHash2 (32-bit) of `data` with `seed`: `h = seed ^ len`, 4-byte
/// little-endian blocks, unsigned tail bytes.
pub fn murmur2_32(data: &[u8], seed: u32) -> u32 {
    let mut h = seed ^ data.len() as u32;
    let mut blocks = data.chunks_exact(4);
    for block in &mut blocks {
        let mut k = u32::from_le_bytes([block[0], block[1], block[2], block[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = blocks.remainder();
    if tail.len() == 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h
}

/// twemproxy's `murmur`: MurmurHash2 seeded with `0xdeadbeef * len`.
pub fn twemproxy_murmur(data: &[u8]) -> u32 {
    murmur2_32(data, 0xdead_beef_u32.wrapping_mul(data.len() as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_input() {
        // Seed 0, length 0: every step keeps 0.
        assert_eq!(murmur2_32(b"", 0), 0);
        assert_eq!(twemproxy_murmur(b""), 0);
    }
}
