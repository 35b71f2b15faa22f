//! HAProxy's `full_hash`: Thomas Wang's 32-bit integer mix followed by a
//! multiply, the `avalanche` modifier and the key of consistent-hash nodes.

/// HAProxy's `full_hash(a)`.
pub fn haproxy_full_hash(a: u32) -> u32 {
    let mut a = a;
    a = a.wrapping_add(0x7ed5_5d16).wrapping_add(a << 12);
    a = (a ^ 0xc761_c23c) ^ (a >> 19);
    a = a.wrapping_add(0x1656_67b1).wrapping_add(a << 5);
    a = a.wrapping_add(0xd3a2_646c) ^ (a << 9);
    a = a.wrapping_add(0xfd70_46c5).wrapping_add(a << 3);
    a = (a ^ 0xb55a_4f09) ^ (a >> 16);
    a.wrapping_mul(3_221_225_473)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_by_hand() {
        // Each step of the definition on 0, written out.
        let mut a: u32 = 0x7ed5_5d16;
        a = (a ^ 0xc761_c23c) ^ (a >> 19);
        a = a.wrapping_add(0x1656_67b1).wrapping_add(a << 5);
        a = a.wrapping_add(0xd3a2_646c) ^ (a << 9);
        a = a.wrapping_add(0xfd70_46c5).wrapping_add(a << 3);
        a = (a ^ 0xb55a_4f09) ^ (a >> 16);
        assert_eq!(haproxy_full_hash(0), a.wrapping_mul(0xc000_0001));
    }
}
