//! Numbers written into heads and chunk lines: a `Content-Length` in
//! decimal, a chunk's size in hexadecimal.
//!
//! `write!` would do, through `core::fmt`'s machinery: about 300
//! instructions for one length, on every answer and on every forwarded
//! request with a body (BENCHMARKS.md, *Instructions per request*). The
//! decimal digits are `itoa`'s (the crate `http` writes its numeric
//! header values with); the hexadecimal ones, which it does not write,
//! are made here.

use bytes::BufMut;

/// Appends the decimal digits of `n`.
pub(crate) fn put_decimal(out: &mut impl BufMut, n: u64) {
    out.put_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// Appends the hexadecimal digits of `n`, lower case and without leading
/// zeros (one `0` for zero), as a chunk's size is written.
pub(crate) fn put_hex(out: &mut impl BufMut, n: u64) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut digits = [0u8; 16];
    let mut start = digits.len();
    let mut left = n;
    loop {
        start -= 1;
        // A nibble: an index below 16.
        digits[start] = DIGITS[(left & 0xf) as usize];
        left >>= 4;
        if left == 0 {
            break;
        }
    }
    out.put_slice(&digits[start..]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decimal(n: u64) -> String {
        let mut out = Vec::new();
        put_decimal(&mut out, n);
        String::from_utf8(out).unwrap()
    }

    fn hex(n: u64) -> String {
        let mut out = bytes::BytesMut::new();
        put_hex(&mut out, n);
        String::from_utf8(out.to_vec()).unwrap()
    }

    #[test]
    fn the_edges_are_written_as_rust_formats_them() {
        let cases = [
            (0, "0", "0"),
            (9, "9", "9"),
            (10, "10", "a"),
            (15, "15", "f"),
            (16, "16", "10"),
            (255, "255", "ff"),
            (4096, "4096", "1000"),
            (u64::MAX, "18446744073709551615", "ffffffffffffffff"),
        ];
        for (n, dec, hexadecimal) in cases {
            assert_eq!(decimal(n), dec, "{n}");
            assert_eq!(hex(n), hexadecimal, "{n}");
        }
    }

    #[test]
    fn digits_are_appended_after_what_is_there() {
        let mut out = b"content-length: ".to_vec();
        put_decimal(&mut out, 42);
        put_hex(&mut out, 42);
        assert_eq!(out, b"content-length: 422a");
    }

    proptest! {
        #[test]
        fn any_number_reads_back(n: u64) {
            prop_assert_eq!(decimal(n).parse::<u64>().unwrap(), n);
            prop_assert_eq!(u64::from_str_radix(&hex(n), 16).unwrap(), n);
            prop_assert_eq!(decimal(n), n.to_string());
            prop_assert_eq!(hex(n), format!("{n:x}"));
        }
    }
}
