//! Durations, in specifications and everywhere else the project reads one:
//! a whole number and a unit, `ms`, `s`, `m` or `h` (`500ms`, `10s`, `1m`,
//! `2h`). No fractions, no spaces, no other units: one spelling per value,
//! and an error that shows the accepted form and range.

use std::ops::RangeInclusive;
use std::time::Duration;

use crate::echo::Echo;
use crate::error::{ParseError, ParseErrorKind};
use crate::util::params::Params;

/// The units accepted, longest suffix first (so `ms` is not read as `m`).
const UNITS: &[(&str, u64)] = &[("ms", 1), ("s", 1_000), ("m", 60_000), ("h", 3_600_000)];

/// Why a text is not a duration in range.
enum Fault {
    NoUnit,
    NotWhole,
    OutOfRange,
}

/// The one grammar: `<digits><unit>`, then the range.
fn read(text: &str, range: &RangeInclusive<Duration>) -> Result<Duration, Fault> {
    let (digits, millis_per_unit) = UNITS
        .iter()
        .find_map(|&(unit, ms)| text.strip_suffix(unit).map(|d| (d, ms)))
        .ok_or(Fault::NoUnit)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Fault::NotWhole);
    }
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(millis_per_unit))
        .map(Duration::from_millis)
        .filter(|d| range.contains(d))
        .ok_or(Fault::OutOfRange)
}

/// What is accepted, for error messages.
fn accepted(range: &RangeInclusive<Duration>) -> String {
    format!(
        "a whole number of ms, s, m or h from {} to {} (e.g. 500ms, 10s, 1m)",
        show(*range.start()),
        show(*range.end())
    )
}

/// Reads a duration written `<whole number><unit>`, unit `ms`, `s`, `m` or
/// `h`, that must lie in `range`: the grammar of every duration the policy
/// specifications, the gateway's settings and the command line take.
///
/// ```
/// use std::time::Duration;
/// use loadring::parse_duration;
///
/// let range = Duration::ZERO..=Duration::from_secs(24 * 3600);
/// assert_eq!(parse_duration("500ms", range.clone()), Ok(Duration::from_millis(500)));
/// assert_eq!(parse_duration("2h", range.clone()), Ok(Duration::from_secs(7200)));
///
/// let err = parse_duration("1.5s", range.clone()).unwrap_err();
/// assert_eq!(err.value(), Some("1.5s"));
/// assert_eq!(
///     err.to_string(),
///     "`1.5s` is not a duration: accepted a whole number of ms, s, m or h \
///      from 0ms to 24h (e.g. 500ms, 10s, 1m)"
/// );
/// assert!(parse_duration("25h", range).unwrap_err().to_string().starts_with("`25h` is out of range"));
/// ```
///
/// # Errors
/// A one-line [`ParseError`] naming the text and what is accepted (also
/// given by [`ParseError::value`] and [`ParseError::accepted`]).
pub fn parse_duration(text: &str, range: RangeInclusive<Duration>) -> Result<Duration, ParseError> {
    read(text, &range).map_err(|fault| {
        let accepted = accepted(&range);
        let what = match fault {
            Fault::NoUnit | Fault::NotWhole => "is not a duration",
            Fault::OutOfRange => "is out of range",
        };
        ParseError::new(
            ParseErrorKind::Value,
            format!("`{}` {what}: accepted {accepted}", Echo(text)),
        )
        .with_value(text)
        .with_accepted(accepted)
    })
}

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
    let range = min..=max;
    read(value, &range).map(Some).map_err(|fault| {
        let why = match fault {
            Fault::NoUnit => "has no unit",
            Fault::NotWhole => "is not a whole number with a unit",
            Fault::OutOfRange => "is out of range",
        };
        params.error(key, value, accepted(&range), |accepted| {
            format!("{key}={} {why}: accepted {accepted}", Echo(value))
        })
    })
}

/// A duration in the largest unit that shows it whole.
pub(crate) fn show(d: Duration) -> String {
    let ms = d.as_millis();
    if ms.is_multiple_of(3_600_000) && ms > 0 {
        format!("{}h", ms / 3_600_000)
    } else if ms.is_multiple_of(60_000) && ms > 0 {
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
        assert_eq!(parse("1h"), Ok(Some(Duration::from_secs(3600))));
    }

    #[test]
    fn other_spellings_are_rejected_with_the_form() {
        for (value, why) in [
            ("10", "has no unit"),
            ("1.5s", "is not a whole number"),
            ("s", "is not a whole number"),
            ("-1s", "is not a whole number"),
            ("10us", "is not a whole number"),
            ("10", "has no unit"),
            ("10sec", "has no unit"),
            ("2h", "is out of range"),
            ("61m", "is out of range"),
            ("3601s", "is out of range"),
            ("0ms", "is out of range"),
            ("61m", "is out of range"),
            ("99999999999999999999s", "is out of range"),
        ] {
            let err = parse(value).unwrap_err();
            assert!(err.contains(why), "{value}: {err}");
            assert!(
                err.contains("accepted a whole number of ms, s, m or h from 1ms to 1h"),
                "{value}: {err}"
            );
        }
    }

    #[test]
    fn shown_in_the_largest_whole_unit() {
        assert_eq!(show(Duration::from_millis(1500)), "1500ms");
        assert_eq!(show(Duration::from_secs(90)), "90s");
        assert_eq!(show(Duration::from_secs(300)), "5m");
        assert_eq!(show(Duration::from_secs(5400)), "90m");
        assert_eq!(show(Duration::from_secs(7200)), "2h");
        assert_eq!(show(Duration::ZERO), "0ms");
    }

    const DAY: Duration = Duration::from_secs(24 * 3600);

    #[test]
    fn the_public_parse_reads_every_unit_to_its_bounds() {
        let range = Duration::ZERO..=DAY;
        for (text, expected) in [
            ("0ms", Duration::ZERO),
            ("0h", Duration::ZERO),
            ("250ms", Duration::from_millis(250)),
            ("2s", Duration::from_secs(2)),
            ("3m", Duration::from_secs(180)),
            ("1h", Duration::from_secs(3600)),
            ("24h", DAY),
            ("1440m", DAY),
            ("86400000ms", DAY),
        ] {
            assert_eq!(parse_duration(text, range.clone()), Ok(expected), "{text}");
        }
    }

    #[test]
    fn the_public_parse_names_the_text_and_the_range() {
        let accepted = "a whole number of ms, s, m or h from 1s to 2h (e.g. 500ms, 10s, 1m)";
        let range = Duration::from_secs(1)..=Duration::from_secs(7200);
        for (text, what) in [
            ("", "is not a duration"),
            ("s", "is not a duration"),
            ("2", "is not a duration"),
            ("1.5s", "is not a duration"),
            ("-1s", "is not a duration"),
            ("2 s", "is not a duration"),
            (" 2s", "is not a duration"),
            ("2sec", "is not a duration"),
            ("10us", "is not a duration"),
            ("2H", "is not a duration"),
            ("999ms", "is out of range"),
            ("121m", "is out of range"),
            ("3h", "is out of range"),
            ("18446744073709551615h", "is out of range"),
            ("99999999999999999999999s", "is out of range"),
        ] {
            let err = parse_duration(text, range.clone()).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("`{text}` {what}: accepted {accepted}")
            );
            assert_eq!(err.value(), Some(text));
            assert_eq!(err.accepted(), Some(accepted));
            assert_eq!(err.key(), None);
        }
        assert_eq!(
            parse_duration("1s", range.clone()),
            Ok(Duration::from_secs(1))
        );
        assert_eq!(parse_duration("2h", range), Ok(Duration::from_secs(7200)));
    }
}
