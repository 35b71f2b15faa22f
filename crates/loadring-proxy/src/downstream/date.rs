//! The `Date` of the gateway's answers (RFC 9110 6.6.1: a proxy adds one
//! to a response that has none), made once a second per thread.

use std::cell::RefCell;
use std::time::{SystemTime, UNIX_EPOCH};

/// An IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`: always 29 bytes.
const LEN: usize = 29;

struct Cached {
    second: u64,
    text: [u8; LEN],
}

thread_local! {
    static NOW: RefCell<Cached> = const { RefCell::new(Cached { second: u64::MAX, text: [0; LEN] }) };
}

/// Appends `date: <now>\r\n` to `out`.
pub(crate) fn append_field(out: &mut Vec<u8>) {
    let now = SystemTime::now();
    let second = now
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    NOW.with(|cached| {
        let mut cached = cached.borrow_mut();
        if cached.second != second {
            let text = httpdate::fmt_http_date(now);
            if text.len() == LEN {
                cached.text.copy_from_slice(text.as_bytes());
                cached.second = second;
            }
        }
        out.extend_from_slice(b"date: ");
        out.extend_from_slice(&cached.text);
        out.extend_from_slice(b"\r\n");
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_field_is_an_imf_fixdate_that_parses_back_to_now() {
        let before = SystemTime::now();
        let mut out = Vec::new();
        append_field(&mut out);
        let after = SystemTime::now();
        let text = std::str::from_utf8(&out).unwrap();
        let value = text
            .strip_prefix("date: ")
            .unwrap()
            .strip_suffix("\r\n")
            .unwrap();
        assert_eq!(value.len(), LEN);
        assert!(value.ends_with(" GMT"), "{value}");
        let parsed = httpdate::parse_http_date(value).unwrap();
        let second = |t: SystemTime| t.duration_since(UNIX_EPOCH).unwrap().as_secs();
        assert!(second(before) <= second(parsed) && second(parsed) <= second(after));
    }
}
