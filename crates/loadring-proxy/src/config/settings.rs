//! The numeric settings' ranges, and how a value given to one is read: one
//! table, so that a flag, a config key and `--help` give the same range,
//! and every message echoes the value as it was typed.

use std::fmt;
use std::ops::RangeInclusive;
use std::time::Duration;

use loadring::Echo;
use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

use crate::error::{ConfigError, ConfigErrorKind};

use super::ejection::{MAX_EJECT_AFTER, MAX_EJECT_FOR};
use super::naming::Naming;
use super::types::{MAX_CONNECTIONS, MAX_KEEPALIVE, MAX_RETRY_BUFFER};

/// The most checks in a row `health_rise` and `health_fall` take: at the
/// shortest interval (1ms) a second, at the default (5s) 83 minutes. More
/// would never flip an endpoint in any useful time.
pub(crate) const MAX_HEALTH_STREAK: u32 = 1_000;

/// A setting that takes a whole number.
pub(crate) struct Count {
    /// Its config key.
    pub(crate) key: &'static str,
    /// The least value accepted.
    pub(crate) least: u64,
    /// The most.
    pub(crate) most: u64,
    /// What a value is (`` `x` is not a count ``).
    noun: &'static str,
    /// What 0 means, when 0 is accepted apart from the rest of the range
    /// (`eject_after`: `0 (never) or 1..=1000`).
    zero: Option<&'static str>,
}

impl Count {
    /// The range as messages give it.
    pub(crate) fn accepted(&self) -> String {
        match self.zero {
            Some(zero) => format!("0 ({zero}) or 1..={}", self.most),
            None => format!("{}..={}", self.least, self.most),
        }
    }

    /// Whether `n`, set in code, is in the range; the error names the
    /// setting `name`.
    pub(crate) fn check(&self, name: &str, n: u64) -> Result<(), ConfigError> {
        self.read(name, &n.to_string()).map(drop)
    }

    /// `text` (decimal digits only: no sign, no unit, no fraction) in the
    /// range; the error names the setting `name` and echoes `text`.
    fn read(&self, name: &str, text: &str) -> Result<u64, ConfigError> {
        let fail = |kind, what: &str| {
            Err(ConfigError::new(
                kind,
                format!(
                    "{name}: `{}` {what}: accepted {}",
                    Echo(text),
                    self.accepted()
                ),
            )
            .with_setting(name))
        };
        let digits = text.strip_prefix('-').unwrap_or(text);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return fail(ConfigErrorKind::Value, &format!("is not {}", self.noun));
        }
        if text.starts_with('-') {
            // A number, but not a count.
            return fail(ConfigErrorKind::Range, &format!("is not {}", self.noun));
        }
        match text.parse::<u64>() {
            Ok(n) if (self.least..=self.most).contains(&n) => Ok(n),
            _ => fail(ConfigErrorKind::Range, "is out of range"),
        }
    }
}

const fn count(key: &'static str, least: u64, most: u64) -> Count {
    Count {
        key,
        least,
        most,
        noun: "a count",
        zero: None,
    }
}

/// Every whole-number setting, by its config key.
pub(crate) static COUNTS: [Count; 8] = [
    count("retries", 0, u32::MAX as u64),
    Count {
        noun: "a number of bytes",
        ..count("retry_buffer", 0, MAX_RETRY_BUFFER)
    },
    count("keepalive", 0, MAX_KEEPALIVE as u64),
    count("health_rise", 1, MAX_HEALTH_STREAK as u64),
    count("health_fall", 1, MAX_HEALTH_STREAK as u64),
    Count {
        zero: Some("never"),
        ..count("eject_after", 0, MAX_EJECT_AFTER as u64)
    },
    count("max_connections", 1, MAX_CONNECTIONS as u64),
    count("max_abandoned", 0, MAX_CONNECTIONS as u64),
];

// Their places in `COUNTS`, for `Whole`.
pub(super) const RETRIES: usize = 0;
pub(super) const RETRY_BUFFER: usize = 1;
pub(super) const KEEPALIVE: usize = 2;
pub(super) const HEALTH_RISE: usize = 3;
pub(super) const HEALTH_FALL: usize = 4;
pub(super) const EJECT_AFTER: usize = 5;
pub(super) const MAX_CONNECTIONS_: usize = 6;
pub(super) const MAX_ABANDONED: usize = 7;

/// The whole-number setting whose key is `key`.
pub(crate) fn count_setting(key: &str) -> Option<&'static Count> {
    COUNTS.iter().find(|c| c.key == key)
}

/// The range of every duration a setting takes (the gateway's: a day
/// keeps a typo from meaning "forever").
const DAY: Duration = Duration::from_secs(24 * 3600);

/// A setting's range of durations, by its config key: the timeouts and the
/// check interval more than 0ms (0 would fail every request or check),
/// `eject_for` the lifecycle's `1ms..=1h`, `drain_timeout` from 0ms.
pub(crate) fn duration_range(key: &str) -> RangeInclusive<Duration> {
    const MS: Duration = Duration::from_millis(1);
    match key {
        "timeout" | "connect_timeout" | "health_interval" | "header_timeout" | "send_timeout"
        | "tunnel_timeout" => MS..=DAY,
        "eject_for" => MS..=MAX_EJECT_FOR,
        _ => Duration::ZERO..=DAY,
    }
}

/// Every setting that takes a duration, by its config key.
pub(crate) const DURATIONS: [&str; 8] = [
    "drain_timeout",
    "header_timeout",
    "send_timeout",
    "tunnel_timeout",
    "connect_timeout",
    "timeout",
    "health_interval",
    "eject_for",
];

/// What the duration setting `key` accepts, for messages about a value of
/// the wrong type in the config file.
pub(crate) fn duration_accepted(key: &str) -> String {
    let range = duration_range(key);
    format!(
        "a duration in quotes, a whole number of ms, s, m or h from {} to {} (e.g. \"500ms\")",
        show(*range.start()),
        show(*range.end())
    )
}

/// A duration as the config grammar writes it, in the largest unit that
/// shows it whole (`Debug`'s form when it has a part below 1ms).
pub(crate) fn show(d: Duration) -> String {
    if !d.subsec_nanos().is_multiple_of(1_000_000) {
        return format!("{d:?}");
    }
    let ms = d.as_millis();
    match [(3_600_000, "h"), (60_000, "m"), (1_000, "s")]
        .into_iter()
        .find(|&(unit, _)| ms > 0 && ms.is_multiple_of(unit))
    {
        Some((unit, suffix)) => format!("{}{suffix}", ms / unit),
        None => format!("{ms}ms"),
    }
}

/// `text`, given to the duration setting `name` whose config key is `key`,
/// in that setting's range: `Value` when it is no duration, `Range` when it
/// is one outside the range; the message echoes `text` as it was typed.
pub(crate) fn read_duration(key: &str, name: &str, text: &str) -> Result<Duration, ConfigError> {
    loadring::parse_duration(text, duration_range(key)).map_err(|e| {
        // The core says `Value` for both; a text that reads as a duration
        // of any length is one outside the setting's range.
        let kind = if loadring::parse_duration(text, Duration::ZERO..=Duration::MAX).is_ok() {
            ConfigErrorKind::Range
        } else {
            ConfigErrorKind::Value
        };
        ConfigError::new(kind, format!("{name}: {e}")).with_setting(name)
    })
}

impl Naming {
    /// Reads `text`, given to the whole-number setting whose config key is
    /// `key` (`retries`, `retry_buffer`, `keepalive`, `health_rise`,
    /// `health_fall`, `eject_after`, `max_connections`, `max_abandoned`),
    /// in that setting's range: decimal digits, no sign. The error names
    /// the setting as this naming does, echoes `text` and gives the range.
    ///
    /// ```
    /// use loadring_proxy::Naming;
    ///
    /// assert_eq!(Naming::Flags.read_count("health_rise", "3"), Ok(3));
    /// let err = Naming::Flags.read_count("health_rise", "0").unwrap_err();
    /// assert_eq!(err.to_string(), "--health-rise: `0` is out of range: accepted 1..=1000");
    /// let err = Naming::Keys.read_count("retries", "x").unwrap_err();
    /// assert_eq!(err.to_string(), "retries: `x` is not a count: accepted 0..=4294967295");
    /// ```
    ///
    /// # Errors
    /// `text` is not a whole number (`Value`), or one out of range
    /// (`Range`; a negative number too). A key that takes no whole number
    /// is refused as `Value`.
    pub fn read_count(self, key: &'static str, text: &str) -> Result<u64, ConfigError> {
        let name = self.name(key);
        match count_setting(key) {
            Some(setting) => setting.read(name, text),
            None => Err(ConfigError::new(
                ConfigErrorKind::Value,
                format!("{name}: takes no whole number"),
            )
            .with_setting(name)),
        }
    }

    /// Reads `text`, given to the duration setting whose config key is
    /// `key`, in that setting's range (the timeouts and `health_interval`
    /// from 1ms to 24h, `eject_for` from 1ms to 1h, `drain_timeout` from
    /// 0ms to 24h). The error names the setting as this naming does,
    /// echoes `text` as it was typed and gives the range.
    ///
    /// ```
    /// use loadring_proxy::Naming;
    ///
    /// let err = Naming::Flags.read_duration("eject_for", "0100m").unwrap_err();
    /// assert_eq!(
    ///     err.to_string(),
    ///     "--eject-for: `0100m` is out of range: accepted a whole number of ms, s, m or h \
    ///      from 1ms to 1h (e.g. 500ms, 10s, 1m)"
    /// );
    /// ```
    ///
    /// # Errors
    /// `text` is not a duration (`Value`), or one out of range (`Range`).
    pub fn read_duration(self, key: &'static str, text: &str) -> Result<Duration, ConfigError> {
        read_duration(key, self.name(key), text)
    }
}

/// A whole number of the config file, for the setting `COUNTS[S]`: any
/// TOML integer is taken (so that one out of range, a negative one
/// included, is named with the setting's range when it is checked), as its
/// decimal text; any other value is refused naming the range.
pub(super) struct Whole<const S: usize>(String);

impl<const S: usize> Whole<S> {
    /// The value, checked against its setting's range.
    pub(super) fn read(&self) -> Result<u64, ConfigError> {
        Naming::Keys.read_count(COUNTS[S].key, &self.0)
    }
}

impl<'de, const S: usize> Deserialize<'de> for Whole<S> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Digits<const S: usize>;
        impl<const S: usize> Visitor<'_> for Digits<S> {
            type Value = String;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "a whole number {}", COUNTS[S].accepted())
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<String, E> {
                Ok(v.to_string())
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<String, E> {
                Ok(v.to_string())
            }
            fn visit_i128<E: de::Error>(self, v: i128) -> Result<String, E> {
                Ok(v.to_string())
            }
            fn visit_u128<E: de::Error>(self, v: u128) -> Result<String, E> {
                Ok(v.to_string())
            }
        }
        deserializer.deserialize_any(Digits::<S>).map(Whole)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_found_by_key_in_order() {
        for (i, key) in [
            (RETRIES, "retries"),
            (RETRY_BUFFER, "retry_buffer"),
            (KEEPALIVE, "keepalive"),
            (HEALTH_RISE, "health_rise"),
            (HEALTH_FALL, "health_fall"),
            (EJECT_AFTER, "eject_after"),
            (MAX_CONNECTIONS_, "max_connections"),
            (MAX_ABANDONED, "max_abandoned"),
        ] {
            assert_eq!(COUNTS[i].key, key);
            assert!(std::ptr::eq(count_setting(key).unwrap(), &COUNTS[i]));
        }
    }

    #[test]
    fn counts_are_digits_in_range_echoed_as_typed() {
        let read = |key, text| Naming::Flags.read_count(key, text);
        assert_eq!(read("retries", "0"), Ok(0));
        assert_eq!(read("retries", "4294967295"), Ok(4_294_967_295));
        assert_eq!(read("health_fall", "1000"), Ok(1000));
        assert_eq!(read("eject_after", "0"), Ok(0));
        for (key, text, kind, message) in [
            (
                "retries",
                "+1",
                ConfigErrorKind::Value,
                "--retries: `+1` is not a count: accepted 0..=4294967295",
            ),
            (
                "retries",
                "",
                ConfigErrorKind::Value,
                "--retries: `` is not a count: accepted 0..=4294967295",
            ),
            (
                "retries",
                "4294967296",
                ConfigErrorKind::Range,
                "--retries: `4294967296` is out of range: accepted 0..=4294967295",
            ),
            (
                "health_rise",
                "18446744073709551616",
                ConfigErrorKind::Range,
                "--health-rise: `18446744073709551616` is out of range: accepted 1..=1000",
            ),
            (
                "health_fall",
                "-1",
                ConfigErrorKind::Range,
                "--health-fall: `-1` is not a count: accepted 1..=1000",
            ),
            (
                "health_fall",
                "1e3",
                ConfigErrorKind::Value,
                "--health-fall: `1e3` is not a count: accepted 1..=1000",
            ),
            (
                "eject_after",
                "1001",
                ConfigErrorKind::Range,
                "--eject-after: `1001` is out of range: accepted 0 (never) or 1..=1000",
            ),
            (
                "retry_buffer",
                "64k",
                ConfigErrorKind::Value,
                "--retry-buffer: `64k` is not a number of bytes: accepted 0..=16777216",
            ),
        ] {
            let err = read(key, text).unwrap_err();
            assert_eq!(err.to_string(), message);
            assert_eq!(err.kind(), kind, "{err}");
            assert_eq!(err.setting(), Some(Naming::Flags.name(key)));
        }
    }

    #[test]
    fn durations_are_echoed_as_typed_with_their_settings_range() {
        let accepted = |from, to| {
            format!("accepted a whole number of ms, s, m or h from {from} to {to} (e.g. 500ms, 10s, 1m)")
        };
        for (key, text, kind, message) in [
            (
                "timeout",
                "0s",
                ConfigErrorKind::Range,
                format!("timeout: `0s` is out of range: {}", accepted("1ms", "24h")),
            ),
            (
                "send_timeout",
                "0025h",
                ConfigErrorKind::Range,
                format!(
                    "send_timeout: `0025h` is out of range: {}",
                    accepted("1ms", "24h")
                ),
            ),
            (
                "eject_for",
                "61m",
                ConfigErrorKind::Range,
                format!(
                    "eject_for: `61m` is out of range: {}",
                    accepted("1ms", "1h")
                ),
            ),
            (
                "drain_timeout",
                "1H",
                ConfigErrorKind::Value,
                format!(
                    "drain_timeout: `1H` is not a duration: {}",
                    accepted("0ms", "24h")
                ),
            ),
        ] {
            let err = Naming::Keys.read_duration(key, text).unwrap_err();
            assert_eq!(err.to_string(), message);
            assert_eq!(err.kind(), kind, "{err}");
        }
        assert_eq!(
            Naming::Keys.read_duration("drain_timeout", "0ms"),
            Ok(Duration::ZERO)
        );
        assert_eq!(
            Naming::Keys.read_duration("eject_for", "1h"),
            Ok(MAX_EJECT_FOR)
        );
    }
}
