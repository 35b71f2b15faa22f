//! Durations in specifications: a whole number and a unit, `ms`, `s` or `m`
//! (`500ms`, `10s`, `1m`). No fractions, no spaces, no other units: one
//! spelling per value, and an error that shows the accepted form.

use std::time::Duration;

use crate::error::ParseError;
use crate::util::params::Params;

/// The units accepted, longest suffix first (so `ms` is not read as `m`).
const UNITS: &[(&str, u64)] = &[("ms", 1), ("s", 1_000), ("m", 60_000)];

/// `key=DUR` in `min..=max`, `None` when absent.
pub(crate) fn take_duration(
    params: &mut Params<'_>,
    key: &'static str,
    min: Duration,
    max: Duration,
) -> Result<Option<Duration>, ParseError> {
    let Some(value) = params.take(key) else {
        return Ok(None);
    };
    let accepted = format!(
        "a whole number of ms, s or m from {} to {} (e.g. 500ms, 10s, 1m)",
        show(min),
        show(max)
    );
    let bad = |why: &str| {
        params.error(key, value, accepted.clone(), |accepted| {
            format!("{key}={value} {why}: accepted {accepted}")
        })
    };
    let Some((digits, millis_per_unit)) = UNITS
        .iter()
        .find_map(|&(unit, ms)| value.strip_suffix(unit).map(|d| (d, ms)))
    else {
        return Err(bad("has no unit"));
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad("is not a whole number with a unit"));
    }
    let duration = digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(millis_per_unit))
        .map(Duration::from_millis);
    match duration {
        Some(d) if (min..=max).contains(&d) => Ok(Some(d)),
        _ => Err(bad("is out of range")),
    }
}

/// A duration in the largest unit that shows it whole.
pub(crate) fn show(d: Duration) -> String {
    let ms = d.as_millis();
    if ms.is_multiple_of(60_000) && ms > 0 {
        format!("{}m", ms / 60_000)
    } else if ms.is_multiple_of(1_000) && ms > 0 {
        format!("{}s", ms / 1_000)
    } else {
        format!("{ms}ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(value: &str) -> Result<Option<Duration>, String> {
        let text = format!("rr:d={value}");
        let mut params = Params::tokenize(&text).unwrap();
        take_duration(
            &mut params,
            "d",
            Duration::from_millis(1),
            Duration::from_secs(3600),
        )
        .map_err(|e| e.to_string())
    }

    #[test]
    fn each_unit_reads_as_written() {
        assert_eq!(parse("500ms"), Ok(Some(Duration::from_millis(500))));
        assert_eq!(parse("10s"), Ok(Some(Duration::from_secs(10))));
        assert_eq!(parse("2m"), Ok(Some(Duration::from_secs(120))));
        assert_eq!(parse("1ms"), Ok(Some(Duration::from_millis(1))));
        assert_eq!(parse("60m"), Ok(Some(Duration::from_secs(3600))));
    }

    #[test]
    fn other_spellings_are_rejected_with_the_form() {
        for (value, why) in [
            ("10", "has no unit"),
            ("1.5s", "is not a whole number"),
            ("s", "is not a whole number"),
            ("-1s", "is not a whole number"),
            ("10h", "has no unit"),
            ("0ms", "is out of range"),
            ("61m", "is out of range"),
            ("99999999999999999999s", "is out of range"),
        ] {
            let err = parse(value).unwrap_err();
            assert!(err.contains(why), "{value}: {err}");
            assert!(
                err.contains("accepted a whole number of ms, s or m from 1ms to 60m"),
                "{value}: {err}"
            );
        }
    }

    #[test]
    fn shown_in_the_largest_whole_unit() {
        assert_eq!(show(Duration::from_millis(1500)), "1500ms");
        assert_eq!(show(Duration::from_secs(90)), "90s");
        assert_eq!(show(Duration::from_secs(300)), "5m");
    }
}
