//! `PolicySpec`: which policy, with which parameters, parsed from brpc's syntax.
//!
//! `name[:key=value[ key=value]*]`, names case-insensitive, e.g.
//! `c_murmurhash:replicas=160 load_factor=1.25`. Unlike brpc, which only logs
//! an unknown key, every unknown key, repeated key, empty value or value out
//! of range is an error naming the key and what it accepts.
//!
//! The locality policies wrap another policy: `OUTER[:params] over INNER`,
//! e.g. `zone_first:min_endpoints=2 over c_murmurhash_bl:load_factor=1.3`
//! or `local_first:local_share=80 over zone_first over rr`; without `over`
//! the inner policy is `rr`.

use std::fmt;
use std::str::FromStr;

use crate::bounded::LoadFactor;
use crate::brpc::{BrpcHash, BrpcRing};
use crate::error::{spec_err, Error, Result};
use crate::hashing::Hashing;
use crate::ketama::Ketama;
use crate::maglev::Maglev;
use crate::policy::locality::{Locality, LocalityRule};
use crate::policy::p2c::{P2c, P2cParams};
use crate::policy::random::Random;
use crate::policy::round_robin::RoundRobin;
use crate::policy::smooth_weighted_round_robin::SmoothWeightedRoundRobin;
use crate::policy::weighted_random::WeightedRandom;
use crate::policy::weighted_round_robin::WeightedRoundRobin;
use crate::policy::Policy;
use crate::pool::Pool;
use crate::ring_hash::RingHash;
use crate::rng::Seed;

/// Every policy name, for help texts and errors.
pub const POLICY_NAMES: &[&str] = &[
    "c_murmurhash",
    "c_murmurhash_bl",
    "c_md5",
    "c_ketama",
    "ketama",
    "ring_hash",
    "maglev",
    "rr",
    "random",
    "wrr",
    "swrr",
    "wr",
    "p2c",
    "zone_first",
    "local_first",
];

/// The word that joins a locality policy to the policy it wraps.
const OVER: &str = "over";

/// A parsed, validated policy specification.
///
/// ```
/// use loadring::PolicySpec;
///
/// let spec: PolicySpec = "c_murmurhash:replicas=160 load_factor=1.25".parse()?;
/// assert_eq!(spec.name(), "c_murmurhash");
/// assert!(spec.is_hashing());
/// assert_eq!(spec.load_factor().map(|f| f.to_string()), Some("1.25".into()));
///
/// let err = "c_murmurhash:replica=160".parse::<PolicySpec>().unwrap_err();
/// assert_eq!(err.to_string(),
///     "c_murmurhash: unknown key `replica` (accepted: replicas, load_factor, balance)");
///
/// // Locality policies wrap another one, hashing and bounded ones included.
/// let zoned: PolicySpec = "zone_first:min_endpoints=2 over c_md5:load_factor=1.3".parse()?;
/// assert_eq!(zoned.name(), "zone_first");
/// assert!(zoned.is_hashing(), "it needs keys for its inner policy");
/// assert_eq!(zoned.inner().map(|p| p.name()), Some("c_md5"));
/// assert_eq!(zoned.load_factor().map(|f| f.to_string()), Some("1.3".into()));
/// assert_eq!(zoned.as_str(), "zone_first:min_endpoints=2 over c_md5:load_factor=1.3");
/// # Ok::<(), loadring::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicySpec {
    text: String,
    /// The canonical name: an entry of `POLICY_NAMES`.
    name: &'static str,
    kind: Kind,
    bound: Option<LoadFactor>,
}

/// The policy families and their parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Brpc(BrpcRing),
    Ketama(Ketama),
    RingHash(RingHash),
    Maglev(Maglev),
    RoundRobin,
    Random(Seed),
    WeightedRoundRobin,
    SmoothWeightedRoundRobin,
    WeightedRandom(Seed),
    P2c(P2cParams),
    Locality(LocalityRule, Box<PolicySpec>),
}

impl Kind {
    /// Whether the family hashes requests (and so takes `load_factor`/`balance` itself).
    fn is_hashing(&self) -> bool {
        match self {
            Kind::Brpc(_) | Kind::Ketama(_) | Kind::RingHash(_) | Kind::Maglev(_) => true,
            Kind::RoundRobin
            | Kind::Random(_)
            | Kind::WeightedRoundRobin
            | Kind::SmoothWeightedRoundRobin
            | Kind::WeightedRandom(_)
            | Kind::P2c(_)
            | Kind::Locality(..) => false,
        }
    }
}

impl PolicySpec {
    /// The policy's canonical (lower-case) name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Whether the policy places requests by hash (needs a key or a code);
    /// for a locality policy, whether the policy it wraps does.
    pub fn is_hashing(&self) -> bool {
        match &self.kind {
            Kind::Locality(_, inner) => inner.is_hashing(),
            kind => kind.is_hashing(),
        }
    }

    /// The load bound, for bounded hashing policies (for a locality policy,
    /// the bound of the policy it wraps).
    pub fn load_factor(&self) -> Option<LoadFactor> {
        match &self.kind {
            Kind::Locality(_, inner) => inner.load_factor(),
            _ => self.bound,
        }
    }

    /// The policy a locality policy wraps (`rr` unless given with `over`);
    /// `None` for other policies.
    pub fn inner(&self) -> Option<&PolicySpec> {
        match &self.kind {
            Kind::Locality(_, inner) => Some(inner),
            _ => None,
        }
    }

    /// The parsed policy family and parameters.
    #[cfg(test)]
    pub(crate) fn kind(&self) -> &Kind {
        &self.kind
    }

    /// The specification as it was written (trimmed).
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Builds the policy over `pool`.
    pub(crate) fn build(&self, pool: Pool) -> Result<Box<dyn Policy>> {
        match &self.kind {
            Kind::Brpc(ring) => Ok(Box::new(Hashing::new(
                ring.build(&pool)?,
                pool,
                self.bound,
            )?)),
            Kind::Ketama(k) => Ok(Box::new(Hashing::new(k.build(&pool)?, pool, self.bound)?)),
            Kind::RingHash(ring) => Ok(Box::new(Hashing::new(
                ring.build(&pool)?,
                pool,
                self.bound,
            )?)),
            Kind::Maglev(table) => Ok(Box::new(Hashing::new(
                table.build(&pool)?,
                pool,
                self.bound,
            )?)),
            Kind::RoundRobin => Ok(Box::new(RoundRobin::new(pool)?)),
            Kind::Random(seed) => Ok(Box::new(Random::new(pool, *seed)?)),
            Kind::WeightedRoundRobin => Ok(Box::new(WeightedRoundRobin::new(pool)?)),
            Kind::SmoothWeightedRoundRobin => Ok(Box::new(SmoothWeightedRoundRobin::new(pool)?)),
            Kind::WeightedRandom(seed) => Ok(Box::new(WeightedRandom::new(pool, *seed)?)),
            Kind::P2c(params) => Ok(Box::new(P2c::new(pool, *params)?)),
            Kind::Locality(rule, inner) => Ok(Box::new(Locality::new(*rule, inner, pool)?)),
        }
    }
}

impl fmt::Display for PolicySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl FromStr for PolicySpec {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        let text = text.trim();
        match split_over(text) {
            None => PolicySpec::parse_one(text, None),
            Some((outer, inner)) => {
                let (outer, inner) = (outer.trim(), inner.trim());
                if outer.is_empty() {
                    return Err(spec_err(format!(
                        "`{}`: a locality policy (zone_first, local_first) must come before `{OVER}`",
                        text.escape_debug()
                    )));
                }
                if inner.is_empty() {
                    return Err(spec_err(format!(
                        "`{}`: the policy to wrap is missing after `{OVER}`",
                        text.escape_debug()
                    )));
                }
                let inner: PolicySpec = inner.parse()?;
                let mut spec = PolicySpec::parse_one(outer, Some(inner))?;
                spec.text = text.to_string();
                Ok(spec)
            }
        }
    }
}

/// Splits `OUTER over INNER` at the first word `over` (any case).
fn split_over(text: &str) -> Option<(&str, &str)> {
    let mut word_start = None;
    for (i, c) in text.char_indices().chain([(text.len(), ' ')]) {
        match (c.is_whitespace(), word_start) {
            (false, None) => word_start = Some(i),
            (true, Some(start)) => {
                if text[start..i].eq_ignore_ascii_case(OVER) {
                    return Some((&text[..start], &text[i..]));
                }
                word_start = None;
            }
            _ => {}
        }
    }
    None
}

impl PolicySpec {
    /// Parses one policy (no `over`); `inner` is what follows its `over`.
    fn parse_one(text: &str, inner: Option<PolicySpec>) -> Result<Self> {
        let mut params = Params::tokenize(text)?;
        let name = params.policy.to_ascii_lowercase();
        let (kind, default_bound) = match name.as_str() {
            "c_murmurhash" => (
                Kind::Brpc(BrpcRing::parse(BrpcHash::Murmur3, &mut params)?),
                None,
            ),
            "c_murmurhash_bl" => (
                Kind::Brpc(BrpcRing::parse(BrpcHash::Murmur3, &mut params)?),
                Some(LoadFactor::DEFAULT),
            ),
            "c_md5" => (
                Kind::Brpc(BrpcRing::parse(BrpcHash::Md5, &mut params)?),
                None,
            ),
            "c_ketama" => (
                Kind::Brpc(BrpcRing::parse(BrpcHash::Ketama, &mut params)?),
                None,
            ),
            "ketama" => (Kind::Ketama(Ketama::parse(&mut params)?), None),
            "ring_hash" => (Kind::RingHash(RingHash::parse(&mut params)?), None),
            "maglev" => (Kind::Maglev(Maglev::parse(&mut params)?), None),
            "rr" => (Kind::RoundRobin, None),
            "random" => (Kind::Random(Seed::parse(&mut params)?), None),
            "wrr" => (Kind::WeightedRoundRobin, None),
            "swrr" => (Kind::SmoothWeightedRoundRobin, None),
            "wr" => (Kind::WeightedRandom(Seed::parse(&mut params)?), None),
            "p2c" => (Kind::P2c(P2cParams::parse(&mut params)?), None),
            "zone_first" | "local_first" => {
                let rule = if name == "zone_first" {
                    LocalityRule::parse_zone_first(&mut params)?
                } else {
                    LocalityRule::parse_local_first(&mut params)?
                };
                let inner = match &inner {
                    Some(inner) => inner.clone(),
                    None => PolicySpec::parse_one("rr", None)?,
                };
                (Kind::Locality(rule, Box::new(inner)), None)
            }
            _ => {
                return Err(spec_err(format!(
                    "unknown policy `{}` (accepted: {})",
                    params.policy,
                    POLICY_NAMES.join(", ")
                )))
            }
        };
        if inner.is_some() && !matches!(kind, Kind::Locality(..)) {
            return Err(spec_err(format!(
                "{name} does not wrap another policy: only zone_first and local_first come before `{OVER}`"
            )));
        }
        let bound = if kind.is_hashing() {
            params.take_bound()?.or(default_bound)
        } else {
            for key in ["load_factor", "balance"] {
                if params.has(key) {
                    return Err(spec_err(match &kind {
                        Kind::Locality(..) => format!(
                            "{name}: {key} belongs on the inner hashing policy, e.g. `{name} over c_murmurhash:{key}=...`"
                        ),
                        _ => format!(
                            "{name}: {key} applies to hashing policies only (c_murmurhash, c_md5, c_ketama, ...)"
                        ),
                    }));
                }
            }
            None
        };
        params.finish()?;
        let name = POLICY_NAMES
            .iter()
            .copied()
            .find(|n| *n == name)
            // The match above accepts only names of POLICY_NAMES (tested below).
            .expect("an accepted policy name is in POLICY_NAMES");
        Ok(PolicySpec {
            text: text.to_string(),
            name,
            kind,
            bound,
        })
    }
}

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
            return Err(spec_err(format!(
                "empty policy (accepted: {})",
                POLICY_NAMES.join(", ")
            )));
        };
        let (policy, rest) = match first.split_once(':') {
            Some((policy, rest)) => (policy, (!rest.is_empty()).then_some(rest)),
            None => (first, None),
        };
        if policy.is_empty() {
            return Err(spec_err(format!(
                "`{}`: the policy name is missing before `:`",
                text.escape_debug()
            )));
        }
        let mut pairs: Vec<(&str, &str)> = Vec::new();
        for word in rest.into_iter().chain(words) {
            let Some((key, value)) = word.split_once('=') else {
                return Err(spec_err(format!("{policy}: `{word}` is not key=value")));
            };
            if key.is_empty() {
                return Err(spec_err(format!(
                    "{policy}: `{word}` has no key before `=`"
                )));
            }
            if value.is_empty() {
                return Err(spec_err(format!("{policy}: `{key}` has an empty value")));
            }
            if pairs.iter().any(|(k, _)| *k == key) {
                return Err(spec_err(format!("{policy}: `{key}` is given twice")));
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
        let bad = |why: &str| {
            spec_err(format!(
                "{}: {key}={value} {why}: accepted {min}..={max}",
                self.policy
            ))
        };
        if !value.bytes().all(|b| b.is_ascii_digit()) {
            return Err(if value.starts_with('-') {
                bad("is negative")
            } else {
                bad("is not a whole number")
            });
        }
        match value.parse::<u64>() {
            Ok(v) if (min..=max).contains(&v) => Ok(v),
            Ok(_) | Err(_) => Err(bad("is out of range")),
        }
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

    /// `true` or `false`, `default` when absent.
    pub(crate) fn take_bool(&mut self, key: &'static str, default: bool) -> Result<bool> {
        match self.take(key) {
            None => Ok(default),
            Some("true") => Ok(true),
            Some("false") => Ok(false),
            Some(v) => Err(spec_err(format!(
                "{}: {key}={v}: accepted true or false",
                self.policy
            ))),
        }
    }

    /// One of `choices` (returned as the matching `&'static str`), `default` when absent.
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
                spec_err(format!(
                    "{}: {key}={value}: accepted {}",
                    self.policy,
                    choices.join(", ")
                ))
            })
    }

    /// Whether `key` was given (without taking it).
    pub(crate) fn has(&self, key: &str) -> bool {
        self.pairs.iter().any(|(k, _)| *k == key)
    }

    /// The policy name as written.
    pub(crate) fn policy(&self) -> &'a str {
        self.policy
    }

    /// `load_factor=F` or `balance=P`, at most one of them.
    fn take_bound(&mut self) -> Result<Option<LoadFactor>> {
        let factor = self
            .take("load_factor")
            .map(|v| LoadFactor::parse_decimal("load_factor", v))
            .transpose()?;
        let percent = self
            .take("balance")
            .map(|v| LoadFactor::parse_percent("balance", v))
            .transpose()?;
        match (factor, percent) {
            (Some(_), Some(_)) => Err(spec_err(format!(
                "{}: give load_factor or balance, not both (balance=125 is load_factor=1.25)",
                self.policy
            ))),
            (f, p) => Ok(f.or(p)),
        }
    }

    fn finish(self) -> Result<()> {
        match self.pairs.first() {
            None => Ok(()),
            Some((key, _)) => {
                let accepted = if self.accepted.is_empty() {
                    "none".to_string()
                } else {
                    self.accepted.join(", ")
                };
                Err(spec_err(format!(
                    "{}: unknown key `{key}` (accepted: {accepted})",
                    self.policy.to_ascii_lowercase()
                )))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        text.parse::<PolicySpec>().unwrap_err().to_string()
    }

    #[test]
    fn names_are_case_insensitive_and_defaults_apply() {
        let spec: PolicySpec = "C_MurmurHash".parse().unwrap();
        assert_eq!(spec.name(), "c_murmurhash");
        assert_eq!(
            spec.kind,
            Kind::Brpc(BrpcRing {
                hash: BrpcHash::Murmur3,
                replicas: 100
            })
        );
        assert_eq!(spec.load_factor(), None);
        let bl: PolicySpec = "c_murmurhash_bl".parse().unwrap();
        assert_eq!(bl.load_factor(), Some(LoadFactor::DEFAULT));
        let tuned: PolicySpec = "c_murmurhash_bl:balance=150 replicas=160".parse().unwrap();
        assert_eq!(tuned.load_factor().unwrap().to_string(), "1.5");
        assert_eq!(
            tuned.kind,
            Kind::Brpc(BrpcRing {
                hash: BrpcHash::Murmur3,
                replicas: 160
            })
        );
    }

    #[test]
    fn every_bad_spec_names_its_culprit() {
        let cases = [
            ("", "empty policy"),
            (
                "round_robbin",
                "unknown policy `round_robbin` (accepted: c_murmurhash,",
            ),
            (
                "c_md5:foo=1",
                "c_md5: unknown key `foo` (accepted: replicas, load_factor, balance)",
            ),
            ("c_md5:replicas=1 replicas=2", "`replicas` is given twice"),
            ("c_md5:replicas=", "`replicas` has an empty value"),
            ("c_md5:replicas", "`replicas` is not key=value"),
            ("c_md5:=3", "has no key"),
            (
                "c_md5:replicas=0",
                "replicas=0 is out of range: accepted 1..=8388608",
            ),
            (
                "c_md5:replicas=-5",
                "replicas=-5 is negative: accepted 1..=8388608",
            ),
            ("c_md5:replicas=ten", "replicas=ten is not a whole number"),
            (
                "c_md5:replicas=99999999999999999999999",
                "is out of range: accepted 1..=8388608",
            ),
            ("c_md5:replicas=8388609", "is out of range"),
            ("c_ketama:replicas=10", "replicas must be a multiple of 4"),
            (
                "c_murmurhash:load_factor=1.0",
                "load_factor=1.0: expected a decimal number greater than 1",
            ),
            ("c_murmurhash_bl:load_factor=0.5", "load_factor=0.5"),
            ("c_murmurhash_bl:load_factor=-2", "load_factor=-2"),
            ("c_murmurhash_bl:load_factor=abc", "load_factor=abc"),
            ("c_murmurhash_bl:load_factor=NaN", "load_factor=NaN"),
            ("c_murmurhash_bl:load_factor=inf", "load_factor=inf"),
            (
                "c_murmurhash_bl:balance=100",
                "balance=100: expected an integer percent from 101",
            ),
            ("c_murmurhash_bl:balance=99.5", "balance=99.5"),
            (
                "c_murmurhash_bl:load_factor=1.2 load_factor=1.3",
                "`load_factor` is given twice",
            ),
            (
                "c_murmurhash:load_factor=1.2 balance=130",
                "give load_factor or balance, not both",
            ),
            (":replicas=3", "the policy name is missing"),
        ];
        for (input, want) in cases {
            let got = err(input);
            assert!(got.contains(want), "{input:?}: {got:?} lacks {want:?}");
            assert!(!got.contains('\n'), "one line: {got:?}");
        }
    }

    #[test]
    fn every_listed_name_parses_to_itself() {
        for name in POLICY_NAMES {
            let spec: PolicySpec = name.to_ascii_uppercase().parse().unwrap();
            assert_eq!(spec.name(), *name);
        }
        assert_eq!(
            "c_murmurhash_bl".parse::<PolicySpec>().unwrap().name(),
            "c_murmurhash_bl"
        );
    }

    #[test]
    fn the_text_is_kept() {
        let spec: PolicySpec = "  c_md5:replicas=8  ".parse().unwrap();
        assert_eq!(spec.as_str(), "c_md5:replicas=8");
    }
}
