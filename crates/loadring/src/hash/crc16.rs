//! twemproxy's `crc16`: the CRC-16/XMODEM table step on a register that is
//! never cut back to 16 bits.

/// CRC-16/XMODEM (polynomial 0x1021, not reflected), one entry per byte.
const TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = (i as u32) << 8;
        let mut bit = 0;
        while bit < 8 {
            c = if c & 0x8000 != 0 {
                ((c << 1) ^ 0x1021) & 0xffff
            } else {
                (c << 1) & 0xffff
            };
            bit += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
};

/// twemproxy's `hash_crc16`. The register is a `u32` shifted left by 8 per
/// byte and never masked, so for keys of three bytes or more the result has
/// more than 16 bits; its low 16 bits are always CRC-16/XMODEM.
///
/// ```
/// assert_eq!(loadring::hash::twemproxy_crc16(b"123456789") & 0xffff, 0x31c3);
/// ```
pub fn twemproxy_crc16(data: &[u8]) -> u32 {
    let mut crc: u32 = 0;
    for &b in data {
        crc = (crc << 8) ^ TABLE[(((crc >> 8) ^ u32::from(b)) & 0xff) as usize];
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn low_bits_are_crc16_xmodem() {
        // The CRC catalogue's check value for CRC-16/XMODEM.
        assert_eq!(twemproxy_crc16(b"123456789") & 0xffff, 0x31c3);
        assert_eq!(twemproxy_crc16(b""), 0);
    }

    #[test]
    fn the_register_keeps_its_high_bits() {
        // Two bytes: ((T[b0] << 8) ^ T[..]) fits in 24 bits and is not masked.
        let one = twemproxy_crc16(b"1");
        assert_eq!(one, TABLE[usize::from(b'1')]);
        let two = twemproxy_crc16(b"12");
        assert_eq!(
            two,
            (one << 8) ^ TABLE[(((one >> 8) ^ u32::from(b'2')) & 0xff) as usize]
        );
        assert!(twemproxy_crc16(b"123456789") > 0xffff);
    }
}
