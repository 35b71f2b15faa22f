//! wt6: Willy Tarreau's hash, one of HAProxy's `hash-type` functions.

/// HAProxy's `hash_wt6`, unsigned bytes.
pub fn wt6(data: &[u8]) -> u32 {
    let mut h0: u32 = 0xa53c_965a;
    let mut h1: u32 = 0x5ca6_953a;
    let mut step0: u32 = 6;
    let mut step1: u32 = 18;
    for &b in data {
        let t = u32::from(b);
        h0 = !(h0 ^ t);
        h1 = !(h1.wrapping_add(t));
        let (a, b) = (h1.rotate_left(step0), h0.rotate_left(step1));
        h0 = a;
        h1 = b;
        let t = ((h0 >> 16) ^ h1) & 0xffff;
        step0 = t & 0x1f;
        step1 = t >> 11;
    }
    h0 ^ h1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_is_the_xor_of_the_seeds() {
        assert_eq!(wt6(b""), 0xa53c_965a ^ 0x5ca6_953a);
    }

    #[test]
    fn one_byte_by_the_definition() {
        let h0 = !(0xa53c_965a_u32 ^ 0x61);
        let h1 = !(0x5ca6_953a_u32 + 0x61);
        assert_eq!(wt6(b"a"), h1.rotate_left(6) ^ h0.rotate_left(18));
    }
}
