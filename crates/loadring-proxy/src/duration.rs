//! Durations as flags and config values spell them: `500ms`, `2s`, `1m`.

use std::time::Duration;

/// The syntax, for error messages and docs.
pub const DURATION_SYNTAX: &str =
    "a whole number followed by a unit: ms, s, m or h (e.g. 500ms, 2s, 1m)";

/// Parses `<whole number><unit>` with unit `ms`, `s`, `m` or `h`.
///
/// ```
/// use std::time::Duration;
/// use loadring_proxy::parse_duration;
///
/// assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
/// assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
/// assert!(parse_duration("2").is_err());
/// ```
///
/// # Errors
/// A message naming the text and the accepted syntax.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || format!("`{text}` is not a duration: {DURATION_SYNTAX}");
    let digits_end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits_end);
    if number.is_empty() {
        return Err(bad());
    }
    let n: u64 = number.parse().map_err(|_| bad())?;
    let millis_per_unit: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => return Err(bad()),
    };
    n.checked_mul(millis_per_unit)
        .map(Duration::from_millis)
        .ok_or_else(bad)
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
            let err = parse_duration(bad).unwrap_err();
            assert!(err.contains(&format!("`{bad}`")), "{err}");
        }
        assert!(parse_duration("18446744073709551615h").is_err(), "overflow");
    }
}
