//! The `key=value` reader every policy family parses its parameters with.
//!
//! `name[:key=value[ key=value]*]`: the pairs are taken one by one by the
//! family's parser; whatever is left at the end is an unknown key. Each error
//! names the policy, the key, the value and what is accepted.
//!
//! One rule for every value of every family:
//!
//! * words are separated by any run of white space (`char::is_whitespace`);
//!   the canonical text (`PolicySpec::as_str`) has one space between them;
//! * booleans (`true`, `false`) and choices (`compat=libketama`, ...) are
//!   read in any ASCII case, as policy names are, each as its lower-case
//!   spelling; keys are lower-case, exactly;
//! * numbers are ASCII decimal digits (`read_whole`), with one `.` in a
//!   decimal, leading zeros ignored (`05` is 5): no sign, `_`, exponent,
//!   `0x` or other digits. Each error echoes the value and gives the range.

use std::collections::HashSet;

use crate::echo::Echo;
use crate::error::{ParseError, ParseErrorKind};
use crate::util::bounded::LoadFactor;
use crate::util::whole::read_whole;

type Result<T> = std::result::Result<T, ParseError>;

/// The `key=value` pairs of a specification, taken one by one by the
/// policy's parser; whatever is left at the end is an unknown key.
#[derive(Debug)]
pub(crate) struct Params<'a> {
    policy: &'a str,
    pairs: Vec<(&'a str, &'a str)>,
    accepted: Vec<&'static str>,
}

impl<'a> Params<'a> {
    pub(crate) fn tokenize(text: &'a str) -> Result<Self> {
        let mut words = text.split_whitespace();
        let Some(first) = words.next() else {
            return Err(ParseError::new(ParseErrorKind::Syntax, "empty policy"));
        };
        let (policy, rest) = match first.split_once(':') {
            Some((policy, rest)) => (policy, (!rest.is_empty()).then_some(rest)),
            None => (first, None),
        };
        if policy.is_empty() {
            return Err(ParseError::new(
                ParseErrorKind::Syntax,
                format!("`{}`: the policy name is missing before `:`", Echo(text)),
            ));
        }
        let mut pairs: Vec<(&str, &str)> = Vec::new();
        // The keys so far, to find a repeat in constant time: a scan of
        // `pairs` made a text of 50,000 pairs take seconds (quadratic).
        let mut keys: HashSet<&str> = HashSet::new();
        for word in rest.into_iter().chain(words) {
            let Some((key, value)) = word.split_once('=') else {
                return Err(ParseError::new(
                    ParseErrorKind::Syntax,
                    format!("{}: `{}` is not key=value", Echo(policy), Echo(word)),
                )
                .with_policy(policy)
                .with_value(word)
                .with_accepted("key=value"));
            };
            if key.is_empty() {
                return Err(ParseError::new(
                    ParseErrorKind::Syntax,
                    format!("{}: `{}` has no key before `=`", Echo(policy), Echo(word)),
                )
                .with_policy(policy)
                .with_value(word));
            }
            // An empty value is the family's to refuse, when it reads the
            // key: its error then says what the key accepts (and a key the
            // family does not know is refused as unknown).
            if !keys.insert(key) {
                return Err(ParseError::new(
                    ParseErrorKind::Syntax,
                    format!("{}: `{}` is given twice", Echo(policy), Echo(key)),
                )
                .with_policy(policy)
                .with_key(key));
            }
            pairs.push((key, value));
        }
        Ok(Params {
            policy,
            pairs,
            accepted: Vec::new(),
        })
    }

    /// The raw value of `key`, if given; records `key` as accepted.
    pub(crate) fn take(&mut self, key: &'static str) -> Option<&'a str> {
        self.accepted.push(key);
        let i = self.pairs.iter().position(|(k, _)| *k == key)?;
        Some(self.pairs.remove(i).1)
    }

    /// An integer in `min..=max`, `default` when absent.
    pub(crate) fn take_u64(
        &mut self,
        key: &'static str,
        min: u64,
        max: u64,
        default: u64,
    ) -> Result<u64> {
        let Some(value) = self.take(key) else {
            return Ok(default);
        };
        read_whole(value, min, max).map_err(|why| {
            self.error(key, value, format!("{min}..={max}"), |accepted| {
                format!("{key}={} {why}: accepted {accepted}", Echo(value))
            })
        })
    }

    /// An integer in `min..=max`, `None` when absent.
    pub(crate) fn take_opt_u64(
        &mut self,
        key: &'static str,
        min: u64,
        max: u64,
    ) -> Result<Option<u64>> {
        let given = self.has(key);
        let value = self.take_u64(key, min, max, min)?;
        Ok(given.then_some(value))
    }

    /// `true` or `false` in any ASCII case (as [`Params::take_choice`]),
    /// `default` when absent.
    pub(crate) fn take_bool(&mut self, key: &'static str, default: bool) -> Result<bool> {
        let Some(value) = self.take(key) else {
            return Ok(default);
        };
        if value.eq_ignore_ascii_case("true") {
            Ok(true)
        } else if value.eq_ignore_ascii_case("false") {
            Ok(false)
        } else {
            Err(self.error(key, value, "true or false", |accepted| {
                format!("{key}={}: accepted {accepted}", Echo(value))
            }))
        }
    }

    /// One of `choices` in any ASCII case (returned as the matching
    /// `&'static str`, lower-case), `default` when absent.
    pub(crate) fn take_choice(
        &mut self,
        key: &'static str,
        choices: &[&'static str],
        default: &'static str,
    ) -> Result<&'static str> {
        let Some(value) = self.take(key) else {
            return Ok(default);
        };
        choices
            .iter()
            .copied()
            .find(|c| c.eq_ignore_ascii_case(value))
            .ok_or_else(|| {
                self.error(key, value, choices.join(", "), |accepted| {
                    format!("{key}={}: accepted {accepted}", Echo(value))
                })
            })
    }

    /// An error about `key=value` of this policy: `message` gets the
    /// accepted text and is prefixed with the policy name (a known name by
    /// then, shown as written; `message` shows the value through `Echo`).
    pub(crate) fn error(
        &self,
        key: &str,
        value: &str,
        accepted: impl Into<String>,
        message: impl FnOnce(&str) -> String,
    ) -> ParseError {
        let accepted = accepted.into();
        ParseError::new(
            ParseErrorKind::Value,
            format!("{}: {}", self.policy, message(&accepted)),
        )
        .with_policy(self.policy)
        .with_key(key)
        .with_value(value)
        .with_accepted(accepted)
    }

    /// Moves the pairs whose key is one of `keys` to a reader of their own
    /// (the endpoint lifecycle's keys, which every family accepts).
    pub(crate) fn split_off(&mut self, keys: &[&str]) -> Params<'a> {
        let (taken, kept) = self.pairs.iter().partition(|(k, _)| keys.contains(k));
        self.pairs = kept;
        Params {
            policy: self.policy,
            pairs: taken,
            accepted: Vec::new(),
        }
    }

    /// Whether `key` was given (without taking it).
    pub(crate) fn has(&self, key: &str) -> bool {
        self.pairs.iter().any(|(k, _)| *k == key)
    }

    /// The pairs not taken yet, as written.
    pub(crate) fn pairs(&self) -> Vec<(String, String)> {
        self.pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// The policy name as written.
    pub(crate) fn policy(&self) -> &'a str {
        self.policy
    }

    /// `load_factor=F` or `balance=P`, at most one of them.
    pub(crate) fn take_bound(&mut self) -> Result<Option<LoadFactor>> {
        let factor = self
            .take("load_factor")
            .map(|v| LoadFactor::parse_decimal("load_factor", v))
            .transpose()
            .map_err(|e| e.in_policy(self.policy))?;
        let percent = self
            .take("balance")
            .map(|v| LoadFactor::parse_percent("balance", v))
            .transpose()
            .map_err(|e| e.in_policy(self.policy))?;
        match (factor, percent) {
            (Some(_), Some(_)) => Err(ParseError::new(
                ParseErrorKind::Conflict,
                format!(
                    "{}: give load_factor or balance, not both (balance=125 is load_factor=1.25)",
                    self.policy
                ),
            )
            .with_policy(self.policy)
            .with_key("balance")),
            (f, p) => Ok(f.or(p)),
        }
    }

    pub(crate) fn finish(self) -> Result<()> {
        match self.pairs.first() {
            None => Ok(()),
            Some((key, _)) => {
                let accepted = if self.accepted.is_empty() {
                    "none".to_string()
                } else {
                    self.accepted.join(", ")
                };
                Err(ParseError::new(
                    ParseErrorKind::UnknownKey,
                    format!(
                        "{}: unknown key `{}` (accepted: {accepted})",
                        self.policy.to_ascii_lowercase(),
                        Echo(key)
                    ),
                )
                .with_policy(self.policy)
                .with_key(key)
                .with_accepted(accepted))
            }
        }
    }
}
