//! Input echoed in error messages, shortened so that one absurd value (a
//! policy name of 5,000 characters, a 64 KiB key) still gives one readable
//! line: the README's limit "input echoed in an error message: 40
//! characters, cut, with the input's length". The CLI, the proxy and the
//! discovery crates show their input through it too.
//!
//! A basic type at the top of `src/`, not in `util/`: the errors and the
//! endpoint, the lowest layer, show input through it too.

use std::fmt;

/// The most characters of an input an error message repeats.
pub const MAX_ECHO: usize = 40;

/// Text the user gave, as an error message shows it: whole, or its first
/// [`MAX_ECHO`] characters followed by `... (N characters)`; control
/// characters are escaped (as `char::escape_debug` does) so that the message
/// stays on one line.
///
/// Only the message is cut: an error's accessors keep the value whole.
///
/// Every error of this crate shows input this way; a policy, a backend type
/// or a tool of your own can do the same.
///
/// ```
/// use loadring::Echo;
///
/// assert_eq!(Echo("10.0.0.1:80").to_string(), "10.0.0.1:80");
/// assert_eq!(Echo("a\nb").to_string(), "a\\nb");
/// let long = "9".repeat(1000);
/// assert_eq!(Echo(&long).to_string(), format!("{}... (1000 characters)", "9".repeat(40)));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Echo<'a>(pub &'a str);

impl fmt::Display for Echo<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut chars = self.0.chars();
        for c in chars.by_ref().take(MAX_ECHO) {
            write!(f, "{}", c.escape_debug())?;
        }
        let rest = chars.count();
        if rest > 0 {
            write!(f, "... ({} characters)", MAX_ECHO + rest)?;
        }
        Ok(())
    }
}

/// Bytes the user gave (a memcached key, an etcd value), as an error
/// message shows them: [`Echo`] of their first characters, invalid UTF-8
/// shown as U+FFFD, and the length in bytes when cut.
///
/// ```
/// use loadring::EchoBytes;
///
/// assert_eq!(EchoBytes(b"ab\xffc").to_string(), "ab\u{fffd}c");
/// let long = vec![b'9'; 1000];
/// assert_eq!(EchoBytes(&long).to_string(), format!("{}... (1000 bytes)", "9".repeat(40)));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct EchoBytes<'a>(pub &'a [u8]);

impl fmt::Display for EchoBytes<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A character is at most 4 bytes: this head holds the characters shown.
        let bytes = self.0;
        let head = String::from_utf8_lossy(&bytes[..bytes.len().min(4 * MAX_ECHO)]);
        for c in head.chars().take(MAX_ECHO) {
            write!(f, "{}", c.escape_debug())?;
        }
        if head.chars().count() > MAX_ECHO || bytes.len() > 4 * MAX_ECHO {
            write!(f, "... ({} bytes)", bytes.len())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn echo(text: &str) -> String {
        Echo(text).to_string()
    }

    #[test]
    fn short_text_is_shown_whole() {
        assert_eq!(echo(""), "");
        assert_eq!(echo("c_murmurhash"), "c_murmurhash");
        assert_eq!(echo("10.0.0.1:80"), "10.0.0.1:80");
    }

    #[test]
    fn forty_characters_are_shown_whole() {
        let forty = "0123456789012345678901234567890123456789";
        assert_eq!(forty.len(), 40);
        assert_eq!(echo(forty), "0123456789012345678901234567890123456789");
    }

    #[test]
    fn forty_one_characters_are_cut_with_the_length() {
        let forty_one = "0123456789012345678901234567890123456789X";
        assert_eq!(
            echo(forty_one),
            "0123456789012345678901234567890123456789... (41 characters)"
        );
        assert_eq!(
            echo(&"a".repeat(5000)),
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa... (5000 characters)"
        );
    }

    #[test]
    fn characters_are_counted_not_bytes() {
        // 40 two-byte characters: 80 bytes, shown whole.
        let forty = "é".repeat(40);
        assert_eq!(echo(&forty), forty);
        // 41 of them: cut between characters, never inside one.
        assert_eq!(
            echo(&"é".repeat(41)),
            "éééééééééééééééééééééééééééééééééééééééé... (41 characters)"
        );
        assert_eq!(
            echo(&"日本".repeat(30)),
            "日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本... (60 characters)"
        );
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(echo("a\nb"), "a\\nb");
        assert_eq!(echo("a\x1b[2J"), "a\\u{1b}[2J");
        assert_eq!(echo("tab\there\r"), "tab\\there\\r");
        // Escaping does not count against the 40: characters of the input do.
        let text = format!("{}\n{}", "a".repeat(39), "b".repeat(10));
        assert_eq!(
            echo(&text),
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\\n... (50 characters)"
        );
    }
}
