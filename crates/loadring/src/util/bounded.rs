//! Bounded loads (Mirrokni, Thorup, Zadimoghaddam): the exact integer cap.
//!
//! `cap(e) = ceil(F * (total + 1) * w_e / W)`: `total` is the load of the
//! current members, the `+ 1` the request being placed, `W` the sum of member
//! weights. `F` is kept as the rational its decimal text spells, so the cap
//! involves no floating point and agrees with every other implementation that
//! does the same arithmetic.
//!
//! **Cost.** The cap is a few integer multiplications; a pick reads the
//! shared total only when its endpoint is above its cap at total 0. The slow
//! path is the bounded walk of the hashing policies (`O(entries)` when many
//! endpoints are full or ineligible, then `O(n)` for the least-loaded
//! fallback), documented with each placement.

use std::fmt;

use std::str::FromStr;

use crate::echo::Echo;
use crate::error::{ParseError, ParseErrorKind};
use crate::util::whole::read_whole;

type Result<T> = std::result::Result<T, ParseError>;

/// The largest accepted load factor: beyond it a bound bounds nothing.
const MAX_FACTOR: u64 = 1000;
/// At most this many decimals, so that every product fits in 128 bits.
const MAX_DECIMALS: usize = 6;

/// A load factor `F > 1`, exact: `num / den`.
#[derive(Clone, Copy, Debug)]
pub struct LoadFactor {
    num: u64,
    den: u64,
}

impl LoadFactor {
    /// brpc's and the course's default, 1.25.
    pub const DEFAULT: LoadFactor = LoadFactor { num: 125, den: 100 };

    /// The factor `num / den`, which must be greater than 1, at most 1000,
    /// and a decimal of at most six decimals (`5 / 4` is 1.25; `4 / 3` is not
    /// accepted, so that every factor prints exactly as it computes).
    ///
    /// ```
    /// use loadring::LoadFactor;
    ///
    /// let f = LoadFactor::new(5, 4)?;
    /// assert_eq!(f, "1.25".parse()?);
    /// assert_eq!(f.cap(0, 1, 3), 1);
    /// assert_eq!(f.to_string(), "1.25");
    /// assert!(LoadFactor::new(1, 1).is_err(), "a factor of 1 bounds everything to the mean");
    /// assert!(LoadFactor::new(4, 3).is_err(), "1.333... has no exact decimal");
    /// # Ok::<(), loadring::ParseError>(())
    /// ```
    ///
    /// # Errors
    /// A factor of 1 or less, above 1000, or a `den` of 0 or above 1,000,000.
    pub fn new(num: u64, den: u64) -> Result<Self> {
        let accepted = format!(
            "num/den greater than 1 and at most {MAX_FACTOR}, with at most {MAX_DECIMALS} decimals"
        );
        let scale = 10u128.pow(MAX_DECIMALS as u32);
        let scaled = u128::from(num) * scale;
        let fits = den > 0
            && num > den
            && u128::from(num) <= u128::from(MAX_FACTOR) * u128::from(den)
            && scaled.is_multiple_of(u128::from(den));
        if fits {
            let num = u64::try_from(scaled / u128::from(den)).unwrap_or(u64::MAX);
            Ok(LoadFactor {
                num,
                den: scale as u64,
            })
        } else {
            Err(ParseError::new(
                ParseErrorKind::Value,
                format!("load factor {num}/{den} is out of range: accepted {accepted}"),
            )
            .with_key("load_factor")
            .with_value(&format!("{num}/{den}"))
            .with_accepted(accepted))
        }
    }

    /// Parses `load_factor=F`: a decimal in (1, 1000] with at most 6 decimals.
    pub(crate) fn parse_decimal(key: &str, text: &str) -> Result<Self> {
        let bad = || {
            let accepted = format!(
                "a decimal number greater than 1 and at most {MAX_FACTOR} with at most {MAX_DECIMALS} decimals"
            );
            ParseError::new(
                ParseErrorKind::Value,
                format!("{key}={}: expected {accepted}, e.g. {key}=1.25", Echo(text)),
            )
            .with_key(key)
            .with_value(text)
            .with_accepted(accepted)
        };
        // The whole part by the rule of every number of a spec (leading
        // zeros ignored); the decimals are digits, at most MAX_DECIMALS.
        let (int, frac) = text.split_once('.').unwrap_or((text, ""));
        if frac.len() > MAX_DECIMALS
            || !frac.bytes().all(|b| b.is_ascii_digit())
            || (text.contains('.') && frac.is_empty())
        {
            return Err(bad());
        }
        let int = read_whole(int, 0, MAX_FACTOR).map_err(|_| bad())?;
        let den = 10u64.pow(frac.len() as u32);
        let frac: u64 = if frac.is_empty() {
            0
        } else {
            frac.parse().map_err(|_| bad())?
        };
        let num = int * den + frac;
        if num <= den || num > MAX_FACTOR * den {
            return Err(bad());
        }
        Ok(LoadFactor { num, den })
    }

    /// Parses `balance=P`: an integer percent in 101..=100000 (HAProxy, Envoy).
    pub(crate) fn parse_percent(key: &str, text: &str) -> Result<Self> {
        let bad = || {
            let accepted = format!("an integer percent from 101 to {}", MAX_FACTOR * 100);
            ParseError::new(
                ParseErrorKind::Value,
                format!("{key}={}: expected {accepted}, e.g. {key}=125", Echo(text)),
            )
            .with_key(key)
            .with_value(text)
            .with_accepted(accepted)
        };
        let num = read_whole(text, 101, MAX_FACTOR * 100).map_err(|_| bad())?;
        Ok(LoadFactor { num, den: 100 })
    }

    /// The cap of an endpoint of weight `weight` among members of total weight
    /// `weight_sum` holding `total` requests, counting the one being placed.
    #[inline]
    pub fn cap(&self, total: u64, weight: u32, weight_sum: u64) -> u64 {
        if weight_sum == 0 {
            return 0;
        }
        let top = u128::from(self.num) * (u128::from(total) + 1) * u128::from(weight);
        let bottom = u128::from(self.den) * u128::from(weight_sum);
        // Both fit in 64 bits in all practical cases, where the division is cheap.
        if let (Ok(t), Ok(b)) = (u64::try_from(top), u64::try_from(bottom)) {
            t.div_ceil(b)
        } else {
            let c = top.div_ceil(bottom);
            u64::try_from(c).unwrap_or(u64::MAX)
        }
    }

    /// The cap under loads the backends report for a whole fleet of
    /// balancers: `max(floor(F * (total + 1) * w / W), ceil((total + 1) * w / W))`.
    ///
    /// [`LoadFactor::cap`] rounds up, which adds up to one request to every
    /// cap. One balancer sees its own requests, and its caps rounded up are
    /// the rule every other implementation applies. Under a fleet's reports
    /// the same request is the whole fleet's margin: at 4 in flight per
    /// backend, `ceil(1.25 * 33 / 8) = 6` lets the owner of a hot key hold
    /// 1.5 times the mean, where the factor promised 1.25. So the fleet's
    /// cap is rounded down, and never below the endpoint's fair share
    /// rounded up: the members' caps then still add up to at least
    /// `total + 1`, room for every request when all are eligible (the
    /// capacity argument of the rounded-up cap). It is at most
    /// [`LoadFactor::cap`] and grows with `total` as it does.
    #[inline]
    pub(crate) fn fleet_cap(&self, total: u64, weight: u32, weight_sum: u64) -> u64 {
        if weight_sum == 0 {
            return 0;
        }
        let share = (u128::from(total) + 1) * u128::from(weight);
        let top = u128::from(self.num) * share;
        let bottom = u128::from(self.den) * u128::from(weight_sum);
        // As in `cap`: 64-bit division in all practical cases.
        if let (Ok(top), Ok(bottom), Ok(share)) = (
            u64::try_from(top),
            u64::try_from(bottom),
            u64::try_from(share),
        ) {
            return (top / bottom).max(share.div_ceil(weight_sum));
        }
        let fair = share.div_ceil(u128::from(weight_sum));
        u64::try_from((top / bottom).max(fair)).unwrap_or(u64::MAX)
    }

    /// The factor as a float, for display.
    pub fn as_f64(&self) -> f64 {
        self.num as f64 / self.den as f64
    }
}

/// Equal factors are equal whatever the decimals they were written with.
impl PartialEq for LoadFactor {
    fn eq(&self, other: &Self) -> bool {
        u128::from(self.num) * u128::from(other.den) == u128::from(other.num) * u128::from(self.den)
    }
}

impl Eq for LoadFactor {}

/// Parses the decimal form of `load_factor=` (e.g. `1.25`).
impl FromStr for LoadFactor {
    type Err = ParseError;

    fn from_str(text: &str) -> Result<Self> {
        LoadFactor::parse_decimal("load_factor", text)
    }
}

impl fmt::Display for LoadFactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let int = self.num / self.den;
        let mut frac = self.num % self.den;
        let mut den = self.den;
        if frac == 0 {
            return write!(f, "{int}");
        }
        while frac.is_multiple_of(10) {
            frac /= 10;
            den /= 10;
        }
        let width = den.ilog10() as usize;
        write!(f, "{int}.{frac:0width$}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_course_walk_through_caps() {
        // Three equal nodes, balance 125: caps 1,1,2,2,3,3,3 for totals 0..=6.
        let f = LoadFactor::parse_percent("balance", "125").unwrap();
        let caps: Vec<u64> = (0..7).map(|t| f.cap(t, 1, 3)).collect();
        assert_eq!(caps, [1, 1, 2, 2, 3, 3, 3]);
        assert_eq!(f, LoadFactor::parse_decimal("load_factor", "1.25").unwrap());
    }

    #[test]
    fn weighted_caps_are_exact() {
        let f = LoadFactor::parse_decimal("load_factor", "1.5").unwrap();
        // ceil(1.5 * 10 * 3 / 4) = ceil(11.25) = 12
        assert_eq!(f.cap(9, 3, 4), 12);
        // ceil(1.5 * 10 * 1 / 4) = ceil(3.75) = 4
        assert_eq!(f.cap(9, 1, 4), 4);
        assert_eq!(f.cap(9, 0, 4), 0, "weight 0 has no room");
    }

    #[test]
    fn huge_values_do_not_overflow() {
        // (total + 1) * weight = 2^40 * 2^30 = 2^70, past 64 bits, with a
        // cap that is not: 2 * 2^70 / 2^40 = 2^31, above the fair share 2^30.
        let two = LoadFactor::parse_decimal("load_factor", "2").unwrap();
        assert_eq!(two.fleet_cap((1 << 40) - 1, 1 << 30, 1 << 40), 1 << 31);
        assert_eq!(two.cap((1 << 40) - 1, 1 << 30, 1 << 40), 1 << 31);
        let f = LoadFactor::parse_decimal("load_factor", "1000").unwrap();
        assert_eq!(f.cap(u64::MAX - 1, u32::MAX, u64::from(u32::MAX)), u64::MAX);
        assert_eq!(
            f.fleet_cap(u64::MAX - 1, u32::MAX, u64::from(u32::MAX)),
            u64::MAX
        );
    }

    #[test]
    fn fleet_caps_round_down_but_never_below_the_fair_share() {
        let f = LoadFactor::DEFAULT;
        // 8 endpoints, 32 in flight: 1.25 * 33 / 8 = 5.16, rounded down to 5
        // (the local cap rounds up to 6).
        assert_eq!(f.fleet_cap(32, 1, 8), 5);
        assert_eq!(f.cap(32, 1, 8), 6);
        // 8 endpoints, 8 in flight: 1.25 * 9 / 8 = 1.41 rounds down to 1,
        // below the fair share 9 / 8, rounded up: 2.
        assert_eq!(f.fleet_cap(8, 1, 8), 2);
        // Exact products are not rounded: 1.25 * 8 / 4 = 2.5 -> 2; 1.25 * 16 / 4 = 5.
        assert_eq!(f.fleet_cap(7, 1, 4), 2);
        assert_eq!(f.fleet_cap(15, 1, 4), 5);
        // Weighted: floor(1.5 * 10 * 3 / 4) = 11; fair share ceil(30 / 4) = 8.
        let f = LoadFactor::parse_decimal("load_factor", "1.5").unwrap();
        assert_eq!(f.fleet_cap(9, 3, 4), 11);
        assert_eq!(f.fleet_cap(9, 0, 4), 0, "weight 0 has no room");
        assert_eq!(f.fleet_cap(9, 1, 0), 0);
    }

    /// The properties the bounded walk relies on: at most the local cap,
    /// growing with the total, and room for every request over the members.
    #[test]
    fn fleet_caps_hold_every_request_and_grow_with_the_total() {
        for factor in ["1.01", "1.25", "1.5", "2", "3.7"] {
            let f = LoadFactor::parse_decimal("load_factor", factor).unwrap();
            for weights in [
                &[1u32, 1, 1][..],
                &[1, 2, 3, 4],
                &[5],
                &[1, 1, 1, 1, 1, 1, 1, 100],
            ] {
                let sum: u64 = weights.iter().map(|&w| u64::from(w)).sum();
                for total in 0..200u64 {
                    let caps: Vec<u64> = weights
                        .iter()
                        .map(|&w| f.fleet_cap(total, w, sum))
                        .collect();
                    assert!(
                        caps.iter().sum::<u64>() > total,
                        "{factor} {weights:?} at {total}: {caps:?} cannot hold {}",
                        total + 1
                    );
                    for (&w, &cap) in weights.iter().zip(&caps) {
                        assert!(cap <= f.cap(total, w, sum), "{factor} w={w} at {total}");
                        assert!(
                            cap <= f.fleet_cap(total + 1, w, sum),
                            "{factor} w={w} at {total}"
                        );
                        // Never past F times the share unless the share itself is.
                        let share = (total + 1) as f64 * f64::from(w) / sum as f64;
                        assert!(
                            cap as f64 <= (f.as_f64() * share).max(share.ceil()) + 1e-9,
                            "{factor} w={w} at {total}: {cap}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn bad_factors_name_the_key_and_range() {
        for bad in [
            "1.0",
            "1",
            "0.5",
            "-2",
            "abc",
            "NaN",
            "inf",
            "",
            "1.",
            ".5",
            "1.2345678",
            "1000.5",
            "1e3",
        ] {
            let err = LoadFactor::parse_decimal("load_factor", bad)
                .unwrap_err()
                .to_string();
            assert!(err.starts_with(&format!("load_factor={bad}:")), "{err}");
            assert!(err.contains("greater than 1"), "{err}");
        }
        for bad in ["100", "99.5", "0", "-125", "abc", "", "100001"] {
            let err = LoadFactor::parse_percent("balance", bad)
                .unwrap_err()
                .to_string();
            assert!(err.starts_with(&format!("balance={bad}:")), "{err}");
            assert!(err.contains("from 101"), "{err}");
        }
    }

    #[test]
    fn display_round_trips() {
        for text in ["1.25", "2", "1.000001", "1.5", "999.9"] {
            assert_eq!(
                LoadFactor::parse_decimal("f", text).unwrap().to_string(),
                text
            );
        }
    }

    /// Each rejection rule alone, and the edges that are accepted.
    #[test]
    fn each_rule_of_the_decimal_and_percent_forms_at_its_edge() {
        let ok = |t: &str| LoadFactor::parse_decimal("load_factor", t).is_ok();
        assert!(ok("1.000001") && !ok("1.0000001"), "six decimals at most");
        assert!(ok("1000") && !ok("1000.000001"), "at most 1000");
        assert!(ok("999.5") && !ok("01000.5"), "at most 1000, zeros or not");
        // Leading zeros are ignored, however many, as in every number of a
        // spec (they counted against a length limit here and nowhere else).
        assert!(ok("00001.5") && ok("0000000000000000000000001.5"));
        assert!(!ok("1.") && !ok(".5") && !ok("1.2.3") && !ok("1,5"));
        // Each alone: what Rust's integer parser would take on its own (a
        // sign, a trailing dot on a factor that is otherwise fine).
        assert!(ok("2") && !ok("2."), "no trailing dot");
        assert!(ok("2.5") && !ok("+2.5") && !ok("2.+5"), "digits only");
        assert!(ok("1.000001") && !ok("1.000000"), "greater than 1");
        let pct = |t: &str| LoadFactor::parse_percent("balance", t).is_ok();
        assert!(!pct("100") && pct("101"), "above 100");
        assert!(pct("100000") && !pct("100001"), "at most 100000");
        assert!(
            pct("0000101") && pct("00000101") && pct("0000000000000000000000101"),
            "leading zeros ignored"
        );
        assert!(!pct("99999999999999999999999"), "past u64: out of range");
        assert!(!pct("+125") && !pct("12 5"));
    }

    #[test]
    fn factors_are_equal_by_value_not_by_text() {
        let f = |t: &str| LoadFactor::parse_decimal("load_factor", t).unwrap();
        assert_eq!(f("1.5"), f("1.50"), "the same factor written two ways");
        assert_eq!(
            f("1.5"),
            LoadFactor::parse_percent("balance", "150").unwrap()
        );
        assert_ne!(f("1.25"), f("1.5"));
        assert_ne!(f("1.000001"), f("1.00001"), "one millionth apart");
    }

    #[test]
    fn the_float_view_and_the_text_of_a_factor() {
        let f = |t: &str| LoadFactor::parse_decimal("load_factor", t).unwrap();
        assert_eq!(f("1.25").as_f64(), 1.25);
        assert_eq!(f("3").as_f64(), 3.0);
        assert_eq!(
            LoadFactor::parse_percent("balance", "150")
                .unwrap()
                .as_f64(),
            1.5
        );
        assert_eq!(f("1.500").to_string(), "1.5");
        assert_eq!(f("2.000").to_string(), "2");
        assert_eq!(f("1.125").to_string(), "1.125");
        assert_eq!(f("1.050").to_string(), "1.05");
        assert_eq!(f("1.000001").to_string(), "1.000001");
        assert_eq!(LoadFactor::new(21, 20).unwrap().to_string(), "1.05");
    }
}
