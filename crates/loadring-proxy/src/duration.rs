//! Durations as the gateway's flags and config values spell them: the
//! core's one grammar (`500ms`, `2s`, `1m`, `1h`), over the range every
//! gateway setting accepts.

use std::ops::RangeInclusive;
use std::time::Duration;

/// Every gateway duration (timeouts, intervals, ejection, drain, lease TTL)
/// lies in this range; each setting of the proxy's is read in its own part
/// of it (`config::settings`: the timeouts from 1ms, `eject_for` to 1h).
/// A day is far beyond any sensible timeout, and a bound keeps a typo from
/// meaning "forever".
const RANGE: RangeInclusive<Duration> = Duration::ZERO..=Duration::from_secs(24 * 3600);

/// Parses `<whole number><unit>` with unit `ms`, `s`, `m` or `h`, from 0ms
/// to 24h: [`loadring::parse_duration`] over the gateway's range.
///
/// ```
/// use std::time::Duration;
/// use loadring_proxy::parse_duration;
///
/// assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
/// assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
/// assert!(parse_duration("2").is_err());
/// assert!(parse_duration("25h").is_err());
/// ```
///
/// # Errors
/// A one-line message naming the text and the accepted form and range.
pub fn parse_duration(text: &str) -> Result<Duration, loadring::ParseError> {
    loadring::parse_duration(text, RANGE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(parse_duration("0ms"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("3m"), Ok(Duration::from_secs(180)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("24h"), Ok(Duration::from_secs(24 * 3600)));
    }

    #[test]
    fn the_range_is_named_and_held() {
        let accepted = "accepted a whole number of ms, s, m or h from 0ms to 24h";
        for (bad, what) in [
            ("2x", "is not a duration"),
            ("25h", "is out of range"),
            ("1441m", "is out of range"),
        ] {
            let err = parse_duration(bad).unwrap_err().to_string();
            assert!(
                err.starts_with(&format!("`{bad}` {what}: {accepted}")),
                "{err}"
            );
            assert!(!err.contains('\n'), "{err}");
        }
    }

    #[test]
    fn rejects_what_it_cannot_read() {
        for bad in [
            "",
            "s",
            "2",
            "1.5s",
            "-1s",
            "2 s",
            "2sec",
            "10us",
            "99999999999999999999s",
        ] {
            let err = parse_duration(bad).unwrap_err().to_string();
            assert!(err.contains(&format!("`{bad}`")), "{err}");
        }
        assert!(parse_duration("18446744073709551615h").is_err(), "overflow");
    }
}
