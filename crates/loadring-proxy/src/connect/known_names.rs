//! The names every message is asked about, noted as its head is read.

use crate::hop_by_hop;

/// The names every message is asked about (its framing, its hop-by-hop
/// fields; a request's host, gRPC content type and `X-Forwarded-For`),
/// each a bit: a head notes which it has as its fields are noted (by
/// their length first), and a question about a name it lacks is answered
/// without a scan.
pub(crate) struct Known;

impl Known {
    pub(crate) const TRANSFER_ENCODING: u16 = 1 << 0;
    pub(crate) const CONTENT_LENGTH: u16 = 1 << 1;
    pub(crate) const CONNECTION: u16 = 1 << 2;
    /// The other hop-by-hop names ([`crate::hop_by_hop::HOP_BY_HOP`]).
    pub(crate) const OTHER_HOP_BY_HOP: u16 = 1 << 3;
    pub(crate) const HOST: u16 = 1 << 4;
    pub(crate) const CONTENT_TYPE: u16 = 1 << 5;
    pub(crate) const X_FORWARDED_FOR: u16 = 1 << 6;
    /// Any name `RawFields::strip_hop_by_hop` removes without being told.
    pub(crate) const HOP_BY_HOP: u16 =
        Known::TRANSFER_ENCODING | Known::CONNECTION | Known::OTHER_HOP_BY_HOP;

    /// The bit of `name` (in any case): 0 for a name not known, and for
    /// the other hop-by-hop names their common bit.
    pub(crate) fn bit(name: &[u8]) -> u16 {
        let is = |known: &[u8]| is_named(name, known);
        match name.len() {
            17 if is(b"transfer-encoding") => Known::TRANSFER_ENCODING,
            14 if is(b"content-length") => Known::CONTENT_LENGTH,
            10 if is(b"connection") => Known::CONNECTION,
            4 if is(b"host") => Known::HOST,
            12 if is(b"content-type") => Known::CONTENT_TYPE,
            15 if is(b"x-forwarded-for") => Known::X_FORWARDED_FOR,
            2 | 7 | 10 | 16 | 18 | 19 if hop_by_hop::is_hop_by_hop_spelling(name) => {
                Known::OTHER_HOP_BY_HOP
            }
            _ => 0,
        }
    }
}

/// Whether the field name `name` is `known` in any case, where `known` is
/// lower-case letters, digits and `-`, and `name` token characters (RFC
/// 9110 5.6.2), as a parse of a head leaves them.
///
/// Every byte is compared with its `0x20` bit set, which folds an upper
/// case letter onto its lower case; of the bytes that fold onto a letter, a
/// digit or `-`, the token characters are the letter's two cases, the
/// digit and `-` alone (the others are control characters). Without a
/// branch per byte, as `eq_ignore_ascii_case` has: a few instructions for
/// `content-length`, where that takes seventy.
pub(crate) fn is_named(name: &[u8], known: &[u8]) -> bool {
    name.len() == known.len()
        && name
            .iter()
            .zip(known)
            .fold(0, |differ, (&a, &b)| differ | ((a | 0x20) ^ b))
            == 0
}

/// Whether the field name `name` is `lower` in any case, where `lower` is
/// a name in lower case (as a `HeaderName` spells it): any token, where
/// [`is_named`] takes letters, digits and `-` alone. Each byte of `name`
/// is lower-cased without a branch, then compared.
pub(crate) fn is_spelled(name: &[u8], lower: &[u8]) -> bool {
    name.len() == lower.len()
        && name
            .iter()
            .zip(lower)
            .fold(0, |differ, (&a, &b)| differ | (a.to_ascii_lowercase() ^ b))
            == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `is_named` agrees with `eq_ignore_ascii_case` on every pair of
    /// a known name and a token of its length that differs from it in
    /// one byte, and on its spellings.
    #[test]
    fn is_named_is_a_case_blind_comparison_for_tokens() {
        let tchar = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
        for known in [
            &b"transfer-encoding"[..],
            b"content-length",
            b"connection",
            b"te",
            b"x-9",
        ] {
            for at in 0..known.len() {
                for byte in (0..=255u8).filter(|&b| tchar(b)) {
                    let mut name = known.to_vec();
                    name[at] = byte;
                    assert_eq!(
                        is_named(&name, known),
                        name.eq_ignore_ascii_case(known),
                        "{:?} {:?}",
                        String::from_utf8_lossy(&name),
                        String::from_utf8_lossy(known)
                    );
                }
            }
            assert!(is_named(&known.to_ascii_uppercase(), known));
            assert!(!is_named(&known[1..], known));
            // Two bytes off by the same bit: their differences must not
            // cancel out.
            for (i, j) in (0..known.len()).flat_map(|i| (i + 1..known.len()).map(move |j| (i, j))) {
                let mut name = known.to_vec();
                name[i] ^= 1;
                name[j] ^= 1;
                assert!(
                    !is_named(&name, known),
                    "{:?}",
                    String::from_utf8_lossy(&name)
                );
            }
        }
    }

    /// `is_spelled` agrees with `eq_ignore_ascii_case` on every name of
    /// any byte at any place of a lower-case name (tokens `is_named` does
    /// not take among them: `_`, `^`, `~`).
    #[test]
    fn is_spelled_is_a_case_blind_comparison_with_a_lower_case_name() {
        for lower in [&b"x-forwarded-for"[..], b"x_key", b"a^b~c", b"host", b"x"] {
            for at in 0..lower.len() {
                for byte in 0..=255u8 {
                    let mut name = lower.to_vec();
                    name[at] = byte;
                    assert_eq!(
                        is_spelled(&name, lower),
                        name.eq_ignore_ascii_case(lower),
                        "{:?} {:?}",
                        String::from_utf8_lossy(&name),
                        String::from_utf8_lossy(lower)
                    );
                }
            }
            assert!(is_spelled(&lower.to_ascii_uppercase(), lower));
            assert!(!is_spelled(&lower[1..], lower));
            let mut longer = lower.to_vec();
            longer.push(b'a');
            assert!(!is_spelled(&longer, lower));
        }
    }

    /// Each known name has its own bit in any spelling, and names of the
    /// same lengths none.
    #[test]
    fn each_known_name_has_its_bit_and_its_neighbours_none() {
        for (name, bit) in [
            (&b"Transfer-Encoding"[..], Known::TRANSFER_ENCODING),
            (b"content-LENGTH", Known::CONTENT_LENGTH),
            (b"Connection", Known::CONNECTION),
            (b"HOST", Known::HOST),
            (b"Content-Type", Known::CONTENT_TYPE),
            (b"X-Forwarded-For", Known::X_FORWARDED_FOR),
            (b"Keep-Alive", Known::OTHER_HOP_BY_HOP),
            (b"te", Known::OTHER_HOP_BY_HOP),
            (b"transfer-encodinh", 0),
            (b"content-lengtg", 0),
            (b"connectiom", 0),
            (b"hose", 0),
            (b"x-request-id", 0),
            (b"x-forwarded-fox", 0),
            (b"tf", 0),
            (b"x-mailer-ip", 0),
        ] {
            assert_eq!(Known::bit(name), bit, "{:?}", String::from_utf8_lossy(name));
        }
    }

    #[test]
    fn every_hop_by_hop_spelling_has_a_bit() {
        for name in crate::hop_by_hop::HOP_BY_HOP
            .iter()
            .chain([&http::header::TRANSFER_ENCODING])
        {
            let upper = name.as_str().to_ascii_uppercase();
            assert_ne!(
                Known::bit(upper.as_bytes()) & Known::HOP_BY_HOP,
                0,
                "{name}"
            );
        }
        assert_eq!(Known::bit(b"Content-Length"), Known::CONTENT_LENGTH);
        for other in [&b"x-backend"[..], b"date", b"content-lengtj", b""] {
            assert_eq!(Known::bit(other), 0);
        }
    }
}
