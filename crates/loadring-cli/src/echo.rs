//! Input echoed in error messages, shortened so that one absurd value (a
//! 64 KiB key, a number of a thousand digits) still gives one readable line.

/// `text` as it is, or its first [`loadring::MAX_ECHO`] characters followed by `...`
/// and how long it was; control characters are escaped so the message stays
/// on one line ([`loadring::Echo`], as a `String`).
pub fn echo(text: &str) -> String {
    loadring::Echo(text).to_string()
}

/// [`echo`] for bytes: invalid UTF-8 shows as U+FFFD, and the length of a
/// cut input is given in bytes ([`loadring::EchoBytes`], as a `String`).
pub fn echo_bytes(bytes: &[u8]) -> String {
    loadring::EchoBytes(bytes).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_echoed_whole() {
        assert_eq!(echo("abc"), "abc");
        assert_eq!(echo("a\nb"), "a\\nb");
        assert_eq!(echo_bytes(b"ab\xffc"), "ab\u{fffd}c");
    }

    #[test]
    fn long_text_is_cut_at_forty_characters() {
        let long = "9".repeat(1000);
        assert_eq!(
            echo(&long),
            format!("{}... (1000 characters)", "9".repeat(40))
        );
        assert_eq!(
            echo_bytes(long.as_bytes()),
            format!("{}... (1000 bytes)", "9".repeat(40))
        );
        assert_eq!(
            echo_bytes(&long.as_bytes()[..50]),
            format!("{}... (50 bytes)", "9".repeat(40))
        );
    }
}
