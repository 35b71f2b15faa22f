//! A label value of the metrics' text exposition, escaped as the format
//! says: prometheus-client's encoder writes a value as given, and label
//! values (endpoint addresses, tags, cluster names) are chosen by whoever
//! registers an endpoint or writes the config. Unescaped, a tag `x"}`
//! broke the whole scrape, `y",cluster="spoof` forged a label, and a
//! cluster name with a newline added series of its own.
//!
//! Escaped when encoded, at scrape time: the request path never sees it.

use prometheus_client::encoding::{EncodeLabelValue, LabelValueEncoder};

/// `value`, written as the inside of a quoted label value (Prometheus 0.0.4
/// and OpenMetrics alike): a backslash as `\\`, a double quote as `\"`, a
/// line feed as `\n`, the rest as is.
pub(crate) struct Escaped<'a>(pub(crate) &'a str);

impl EncodeLabelValue for Escaped<'_> {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        write_escaped(encoder, self.0)
    }
}

fn write_escaped(out: &mut impl std::fmt::Write, value: &str) -> std::fmt::Result {
    let mut rest = value;
    while let Some(at) = rest.find(['\\', '"', '\n']) {
        out.write_str(&rest[..at])?;
        out.write_str(match rest.as_bytes()[at] {
            b'\\' => "\\\\",
            b'"' => "\\\"",
            _ => "\\n",
        })?;
        rest = &rest[at + 1..];
    }
    out.write_str(rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn escaped(value: &str) -> String {
        let mut out = String::new();
        write_escaped(&mut out, value).unwrap();
        out
    }

    #[test]
    fn escaping_follows_the_text_format() {
        assert_eq!(escaped("127.0.0.1:80"), "127.0.0.1:80");
        assert_eq!(escaped("a\"b\\c\nd\re"), "a\\\"b\\\\c\\nd\re");
        assert_eq!(escaped("\\\\\"\n"), "\\\\\\\\\\\"\\n");
    }
}
