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
//!
//! This file only dispatches: each family parses its own parameters (with
//! the reader of `util/params.rs`) and builds its own pickers. A family is added
//! by one row of [`FAMILIES`]: [`POLICY_NAMES`] is read from it, and the
//! balancer calls the hot hashing families by their placement's type (see
//! `balancer/engine.rs`), not by family. The crate's test `families` then
//! asks for its row in the README's policy table and for its vector file
//! (or the reason it has none).

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use crate::echo::Echo;
use crate::error::{ParseError, ParseErrorKind};
use crate::placement::brpc::{BrpcHash, BrpcRing};
use crate::placement::dubbo::Dubbo;
use crate::placement::envoy::bound::HashBalance;
use crate::placement::envoy::maglev::Maglev;
use crate::placement::envoy::ring_hash::RingHash;
use crate::placement::hashing::{HashingPolicy, Scheme};
use crate::placement::ketama::Ketama;
use crate::placement::pixiu::PixiuRing;
use crate::policy::locality::{LocalityPolicy, LocalityRule};
use crate::policy::locality_aware::{LaParams, LocalityAware};
use crate::policy::p2c::{P2cParams, P2cPolicy};
use crate::policy::random::Random;
use crate::policy::round_robin::RoundRobin;
use crate::policy::smooth_weighted_round_robin::SmoothWeightedRoundRobin;
use crate::policy::weighted_random::WeightedRandom;
use crate::policy::weighted_round_robin::WeightedRoundRobin;
use crate::policy::{BuildFn, BuiltIn, Policy};
use crate::util::bounded::LoadFactor;
use crate::util::params::Params;
use crate::util::rng::Seed;

type Result<T> = std::result::Result<T, ParseError>;

/// Every policy name, for help texts and errors: the names of the family
/// table, in its order.
pub const POLICY_NAMES: &[&str] = &NAMES;

const NAMES: [&str; FAMILIES.len()] = {
    let mut names = [""; FAMILIES.len()];
    let mut i = 0;
    while i < FAMILIES.len() {
        names[i] = FAMILIES[i].name;
        i += 1;
    }
    names
};

/// The word that joins a locality policy to the policy it wraps.
const OVER: &str = "over";

/// At most this many policies in one `... over ... over ...` chain: nesting
/// multiplies the instances a build makes (one per zone at every level).
pub const MAX_NESTING: usize = 4;

/// What a family does with `load_factor=` and `balance=`.
#[derive(Clone, Copy)]
enum Bound {
    /// Not a hashing family: both keys are errors.
    Unbounded,
    /// A hashing family: bounded if given.
    Optional,
    /// A hashing family bounded by default (`c_murmurhash_bl`).
    Default(LoadFactor),
}

/// How a family parses its parameters (given its default bound).
type ParseFn = fn(&mut Params<'_>, Option<LoadFactor>) -> Result<Arc<dyn Policy>>;

/// How a locality family parses its rule.
type ParseRuleFn = fn(&mut Params<'_>) -> Result<LocalityRule>;

/// A family: its canonical name, and how its parameters become a policy.
struct Family {
    name: &'static str,
    shape: Shape,
}

/// A policy of its own, or a locality rule wrapped around another policy.
#[derive(Clone, Copy)]
enum Shape {
    Policy { bound: Bound, parse: ParseFn },
    Wrapper(ParseRuleFn),
}

impl Family {
    const fn policy(name: &'static str, bound: Bound, parse: ParseFn) -> Self {
        Family {
            name,
            shape: Shape::Policy { bound, parse },
        }
    }

    const fn wrapper(name: &'static str, parse: ParseRuleFn) -> Self {
        Family {
            name,
            shape: Shape::Wrapper(parse),
        }
    }
}

/// A hashing scheme, bounded if `load_factor=` or `balance=` follows its
/// own parameters, or by `default`.
fn hashing<S: Scheme>(
    scheme: S,
    params: &mut Params<'_>,
    default: Option<LoadFactor>,
) -> Result<Arc<dyn Policy>> {
    let bound = params.take_bound()?.or(default);
    Ok(Arc::new(HashingPolicy::new(scheme, bound)))
}

/// An Envoy scheme (`ring_hash`, `maglev`): bounded like [`hashing`], or by
/// Envoy's own rule with `hash_balance_factor=F`, never both.
fn envoy_hashing<S: Scheme>(
    scheme: S,
    params: &mut Params<'_>,
    default: Option<LoadFactor>,
) -> Result<Arc<dyn Policy>> {
    let given = ["load_factor", "balance"]
        .into_iter()
        .find(|key| params.has(key));
    let bound = params.take_bound()?.or(default);
    let Some(text) = params.take("hash_balance_factor") else {
        return Ok(Arc::new(HashingPolicy::new(scheme, bound)));
    };
    let rule = HashBalance::parse(params.policy(), text)?;
    if let Some(key) = given {
        return Err(ParseError::new(
            ParseErrorKind::Conflict,
            format!(
                "{}: give hash_balance_factor (Envoy's rule) or {key} (loadring's cap), not both",
                params.policy()
            ),
        )
        .with_policy(params.policy())
        .with_key("hash_balance_factor"));
    }
    Ok(Arc::new(HashingPolicy::envoy(scheme, rule)))
}

/// A policy without parameters beyond `params`.
fn built_in<P: fmt::Debug + Send + Sync + 'static>(
    name: &'static str,
    params: P,
    build: BuildFn<P>,
) -> Result<Arc<dyn Policy>> {
    Ok(Arc::new(BuiltIn {
        name,
        params,
        build,
    }))
}

/// Every family, by canonical name: one row each. The locality families,
/// which wrap another policy (`... over INNER`), come last.
const FAMILIES: &[Family] = &[
    Family::policy("c_murmurhash", Bound::Optional, |p, b| {
        hashing(BrpcRing::parse(BrpcHash::Murmur3, p)?, p, b)
    }),
    Family::policy(
        "c_murmurhash_bl",
        Bound::Default(LoadFactor::DEFAULT),
        |p, b| hashing(BrpcRing::parse(BrpcHash::Murmur3, p)?, p, b),
    ),
    Family::policy("c_md5", Bound::Optional, |p, b| {
        hashing(BrpcRing::parse(BrpcHash::Md5, p)?, p, b)
    }),
    Family::policy("c_ketama", Bound::Optional, |p, b| {
        hashing(BrpcRing::parse(BrpcHash::Ketama, p)?, p, b)
    }),
    Family::policy("ketama", Bound::Optional, |p, b| {
        hashing(Ketama::parse(p)?, p, b)
    }),
    Family::policy("ring_hash", Bound::Optional, |p, b| {
        envoy_hashing(RingHash::parse(p)?, p, b)
    }),
    Family::policy("maglev", Bound::Optional, |p, b| {
        envoy_hashing(Maglev::parse(p)?, p, b)
    }),
    Family::policy(
        "nginx_hash",
        Bound::Optional,
        crate::placement::nginx::policy,
    ),
    Family::policy(
        "haproxy_hash",
        Bound::Optional,
        crate::placement::haproxy::policy,
    ),
    Family::policy(
        "twemproxy",
        Bound::Optional,
        crate::placement::twemproxy::policy,
    ),
    Family::policy("dubbo", Bound::Optional, |p, b| {
        hashing(Dubbo::parse(p)?, p, b)
    }),
    Family::policy("pixiu_ring", Bound::Optional, |p, b| {
        hashing(PixiuRing::parse(p)?, p, b)
    }),
    Family::policy("rr", Bound::Unbounded, |_, _| {
        built_in("rr", (), |pool, ()| Ok(Arc::new(RoundRobin::new(pool)?)))
    }),
    Family::policy("random", Bound::Unbounded, |p, _| {
        built_in("random", Seed::parse(p)?, |pool, seed| {
            Ok(Arc::new(Random::new(pool, *seed)?))
        })
    }),
    Family::policy("wrr", Bound::Unbounded, |_, _| {
        built_in("wrr", (), |pool, ()| {
            Ok(Arc::new(WeightedRoundRobin::new(pool)?))
        })
    }),
    Family::policy("swrr", Bound::Unbounded, |_, _| {
        built_in("swrr", (), |pool, ()| {
            Ok(Arc::new(SmoothWeightedRoundRobin::new(pool)?))
        })
    }),
    Family::policy("wr", Bound::Unbounded, |p, _| {
        built_in("wr", Seed::parse(p)?, |pool, seed| {
            Ok(Arc::new(WeightedRandom::new(pool, *seed)?))
        })
    }),
    Family::policy("p2c", Bound::Unbounded, |p, _| {
        Ok(Arc::new(P2cPolicy(P2cParams::parse(p)?)))
    }),
    Family::policy("la", Bound::Unbounded, |p, _| {
        Ok(Arc::new(LocalityAware(LaParams::parse(p)?)))
    }),
    Family::wrapper("zone_first", LocalityRule::parse_zone_first),
    Family::wrapper("local_first", LocalityRule::parse_local_first),
];

/// The locality families' names, for messages.
fn wrapper_names() -> Vec<&'static str> {
    FAMILIES
        .iter()
        .filter(|f| matches!(f.shape, Shape::Wrapper(_)))
        .map(|f| f.name)
        .collect()
}

/// A parsed, validated policy specification.
///
/// ```
/// use loadring::{LoadFactor, PolicySpec};
///
/// let spec: PolicySpec = "c_murmurhash:replicas=160 load_factor=1.25".parse()?;
/// assert_eq!(spec.name(), "c_murmurhash");
/// assert!(spec.is_hashing());
/// assert_eq!(spec.load_factor().map(|f| f.to_string()), Some("1.25".into()));
///
/// // The same, built without writing text:
/// let built = PolicySpec::new("c_murmurhash")?
///     .with("replicas", 160)?
///     .with_load_factor(LoadFactor::new(5, 4)?)?;
/// assert_eq!(built.as_str(), "c_murmurhash:replicas=160 load_factor=1.25");
///
/// let err = "c_murmurhash:replica=160".parse::<PolicySpec>().unwrap_err();
/// assert_eq!(err.to_string(),
///     "c_murmurhash: unknown key `replica` (accepted: replicas, load_factor, balance)");
/// assert_eq!(err.key(), Some("replica"));
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
#[derive(Clone, Debug)]
pub struct PolicySpec {
    text: String,
    /// The canonical name: an entry of `POLICY_NAMES`.
    name: &'static str,
    /// The parameters of the outermost policy, as written.
    params: Vec<(String, String)>,
    inner: Option<Box<PolicySpec>>,
    policy: Arc<dyn Policy>,
    /// `report_max_age=`, if given (bounded policies only).
    report_max_age: Option<Duration>,
    /// `report_rule=share` (bounded policies only).
    report_share: bool,
}

/// Two specifications are equal when their canonical texts ([`PolicySpec::as_str`]) are.
impl PartialEq for PolicySpec {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Eq for PolicySpec {}

impl PolicySpec {
    /// The policy `name` with its default parameters.
    ///
    /// # Errors
    /// An unknown name, or a name with parameters (`:` or spaces).
    pub fn new(name: &str) -> Result<Self> {
        if name.contains(':') || name.chars().any(char::is_whitespace) {
            return Err(ParseError::new(
                ParseErrorKind::Syntax,
                format!(
                    "`{}`: a policy name alone is expected here (add parameters with `with`)",
                    Echo(name)
                ),
            ));
        }
        name.parse()
    }

    /// This specification with parameter `key` set to `value` (on the outer
    /// policy of a locality chain).
    ///
    /// # Errors
    /// As parsing the resulting text: an unknown key, a value out of range,
    /// a key given twice; also a key or value with spaces, `=` or `:`.
    pub fn with(&self, key: &str, value: impl fmt::Display) -> Result<Self> {
        let value = value.to_string();
        let bad =
            |s: &str| s.is_empty() || s.contains(['=', ':']) || s.chars().any(char::is_whitespace);
        if bad(key) || bad(&value) {
            return Err(ParseError::new(
                ParseErrorKind::Syntax,
                format!(
                    "{}: `{}={}`: a key and a value are single words without `=` or `:`",
                    self.name,
                    Echo(key),
                    Echo(&value)
                ),
            )
            .with_policy(self.name)
            .with_key(key)
            .with_value(&value));
        }
        let mut params = self.params.clone();
        params.push((key.to_string(), value));
        PolicySpec::assemble(self.name, &params, self.inner.as_deref())
    }

    /// This specification bounded by `factor` (`load_factor=`).
    ///
    /// # Errors
    /// The policy does not hash, or already has a bound.
    pub fn with_load_factor(&self, factor: LoadFactor) -> Result<Self> {
        self.with("load_factor", factor)
    }

    /// This locality policy wrapping `inner` instead of its current inner policy.
    ///
    /// # Errors
    /// The policy is not a locality policy, or the chain gets too deep.
    pub fn over(&self, inner: PolicySpec) -> Result<Self> {
        PolicySpec::assemble(self.name, &self.params, Some(&inner))
    }

    /// Parses the text `name[:params] [over inner]` put together.
    fn assemble(
        name: &str,
        params: &[(String, String)],
        inner: Option<&PolicySpec>,
    ) -> Result<Self> {
        let mut text = canonical(name, params);
        if let Some(inner) = inner {
            text.push_str(&format!(" {OVER} {}", inner.as_str()));
        }
        text.parse()
    }

    /// The policy's canonical (lower-case) name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Whether the policy places requests by hash (needs a key or a code);
    /// for a locality policy, whether the policy it wraps does.
    pub fn is_hashing(&self) -> bool {
        self.policy.needs_key()
    }

    /// The load bound, for bounded hashing policies (for a locality policy,
    /// the bound of the policy it wraps).
    pub fn load_factor(&self) -> Option<LoadFactor> {
        self.policy.load_factor()
    }

    /// Envoy's bound, for `ring_hash` and `maglev` with
    /// `hash_balance_factor=F`: the percent `F` (for a locality policy, that
    /// of the policy it wraps). Such a policy has no [`load_factor`]: its
    /// slots, its spills and its fallback are Envoy's (see the README).
    ///
    /// ```
    /// use loadring::PolicySpec;
    ///
    /// let spec: PolicySpec = "maglev:hash_balance_factor=150".parse()?;
    /// assert_eq!(spec.hash_balance_factor(), Some(150));
    /// assert_eq!(spec.load_factor(), None);
    /// let err = "ring_hash:hash_balance_factor=99".parse::<PolicySpec>().unwrap_err();
    /// assert_eq!(err.key(), Some("hash_balance_factor"));
    /// # Ok::<(), loadring::Error>(())
    /// ```
    ///
    /// [`load_factor`]: PolicySpec::load_factor
    pub fn hash_balance_factor(&self) -> Option<u32> {
        self.policy.hash_balance_factor()
    }

    /// How long a backend's load report counts for a bounded policy
    /// (`report_max_age=`, default [`DEFAULT_REPORT_MAX_AGE`]; for a
    /// locality policy, that of the policy it wraps); `None` for a policy
    /// without a bound, which does not use reports.
    ///
    /// ```
    /// use std::time::Duration;
    /// use loadring::PolicySpec;
    ///
    /// let spec: PolicySpec = "c_murmurhash_bl:report_max_age=250ms".parse()?;
    /// assert_eq!(spec.report_max_age(), Some(Duration::from_millis(250)));
    /// let spec: PolicySpec = "maglev:hash_balance_factor=150".parse()?;
    /// assert_eq!(spec.report_max_age(), Some(Duration::from_secs(1)));
    /// assert_eq!("c_murmurhash".parse::<PolicySpec>()?.report_max_age(), None);
    /// let err = "c_murmurhash:report_max_age=1s".parse::<PolicySpec>().unwrap_err();
    /// assert_eq!(err.key(), Some("report_max_age"));
    /// # Ok::<(), loadring::ParseError>(())
    /// ```
    ///
    /// [`DEFAULT_REPORT_MAX_AGE`]: crate::DEFAULT_REPORT_MAX_AGE
    pub fn report_max_age(&self) -> Option<Duration> {
        if let Some(inner) = &self.inner {
            return inner.report_max_age();
        }
        let bounded =
            self.policy.load_factor().is_some() || self.policy.hash_balance_factor().is_some();
        bounded.then(|| {
            self.report_max_age
                .unwrap_or(crate::inflight::fleet::DEFAULT_REPORT_MAX_AGE)
        })
    }

    /// Whether a bounded policy shares the room a load report shows among
    /// the balancers (`report_rule=share`) instead of counting the report
    /// plus its own change since (`report_rule=view`, the default); for a
    /// locality policy, that of the policy it wraps. See the README's
    /// "Many balancers, one cap".
    ///
    /// ```
    /// use loadring::PolicySpec;
    ///
    /// assert!("c_murmurhash_bl:report_rule=share".parse::<PolicySpec>()?.report_share());
    /// assert!(!"c_murmurhash_bl".parse::<PolicySpec>()?.report_share());
    /// let err = "c_murmurhash_bl:report_rule=all".parse::<PolicySpec>().unwrap_err();
    /// assert_eq!(err.to_string(), "c_murmurhash_bl: report_rule=all is not a rule: accepted view or share");
    /// # Ok::<(), loadring::ParseError>(())
    /// ```
    pub fn report_share(&self) -> bool {
        match &self.inner {
            Some(inner) => inner.report_share(),
            None => self.report_share,
        }
    }

    /// The policy a locality policy wraps (`rr` unless given with `over`);
    /// `None` for other policies.
    pub fn inner(&self) -> Option<&PolicySpec> {
        self.inner.as_deref()
    }

    /// The canonical text of the specification: its names, keys and values
    /// as written, on one line whatever white space separated them (one
    /// space between pairs, none after `:`, ` over ` between policies).
    ///
    /// ```
    /// use loadring::PolicySpec;
    ///
    /// let spec: PolicySpec = "zone_first\tOVER\nc_md5: replicas=8\r\n  balance=125".parse()?;
    /// assert_eq!(spec.as_str(), "zone_first over c_md5:replicas=8 balance=125");
    /// assert_eq!(spec, "zone_first over c_md5:replicas=8 balance=125".parse()?);
    /// # Ok::<(), loadring::ParseError>(())
    /// ```
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The policy it names, to build pickers with.
    pub fn policy(&self) -> &Arc<dyn Policy> {
        &self.policy
    }
}

impl fmt::Display for PolicySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl FromStr for PolicySpec {
    type Err = ParseError;

    /// Splits the chain at every `over` once (linear in the text), then
    /// parses from the innermost policy outwards.
    fn from_str(text: &str) -> Result<Self> {
        let text = text.trim();
        if text.is_empty() {
            return Err(ParseError::new(
                ParseErrorKind::Syntax,
                format!("empty policy (accepted: {})", POLICY_NAMES.join(", ")),
            ));
        }
        let parts = split_over(text);
        if parts.len() > MAX_NESTING {
            return Err(ParseError::new(
                ParseErrorKind::Syntax,
                format!(
                    "`{}`: {} policies joined by `{OVER}`: accepted at most {MAX_NESTING}",
                    Echo(text),
                    parts.len()
                ),
            ));
        }
        let mut inner: Option<PolicySpec> = None;
        for (depth, part) in parts.iter().enumerate().rev() {
            let part = part.trim();
            if part.is_empty() {
                return Err(ParseError::new(
                    ParseErrorKind::Syntax,
                    if depth == 0 {
                        format!(
                            "`{}`: a locality policy ({}) must come before `{OVER}`",
                            Echo(text),
                            wrapper_names().join(", ")
                        )
                    } else {
                        format!(
                            "`{}`: the policy to wrap is missing after `{OVER}`",
                            Echo(text)
                        )
                    },
                ));
            }
            let wraps = depth + 1 < parts.len();
            inner = Some(PolicySpec::parse_one(part, inner.take(), wraps)?);
        }
        inner.ok_or_else(|| ParseError::new(ParseErrorKind::Syntax, "empty policy"))
    }
}

/// The canonical text of one policy: its name and its pairs as written,
/// `NAME[:k=v[ k=v]*]`, whatever white space separated them in the input (a
/// key or a value has none: white space separates words).
fn canonical(name: &str, pairs: &[(String, String)]) -> String {
    let mut text = name.to_string();
    for (i, (k, v)) in pairs.iter().enumerate() {
        text.push(if i == 0 { ':' } else { ' ' });
        text.push_str(k);
        text.push('=');
        text.push_str(v);
    }
    text
}

/// The parts of `A over B over C` (any case of `over`), in order.
fn split_over(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut part_start = 0;
    let mut word_start = None;
    for (i, c) in text.char_indices().chain([(text.len(), ' ')]) {
        match (c.is_whitespace(), word_start) {
            (false, None) => word_start = Some(i),
            (true, Some(start)) => {
                if text[start..i].eq_ignore_ascii_case(OVER) {
                    parts.push(&text[part_start..start]);
                    part_start = i;
                }
                word_start = None;
            }
            _ => {}
        }
    }
    parts.push(&text[part_start.min(text.len())..]);
    parts
}

impl PolicySpec {
    /// Parses one policy (no `over`); `inner` is what follows its `over`,
    /// `wraps` whether there was an `over`.
    fn parse_one(text: &str, inner: Option<PolicySpec>, wraps: bool) -> Result<Self> {
        let mut params = Params::tokenize(text)?;
        let written: Vec<(String, String)> = params.pairs();
        let text = canonical(params.policy(), &written);
        let name = params.policy().to_ascii_lowercase();
        let Some(family) = FAMILIES.iter().find(|f| f.name == name) else {
            return Err(ParseError::new(
                ParseErrorKind::UnknownPolicy,
                format!(
                    "unknown policy `{}` (accepted: {})",
                    Echo(params.policy()),
                    POLICY_NAMES.join(", ")
                ),
            )
            .with_value(params.policy())
            .with_accepted(POLICY_NAMES.join(", ")));
        };
        let (bound, parse) = match family.shape {
            Shape::Policy { bound, parse } => (bound, parse),
            Shape::Wrapper(rule) => {
                return PolicySpec::parse_wrapper(text, params, written, family.name, rule, inner)
            }
        };
        if wraps {
            return Err(ParseError::new(
                ParseErrorKind::Syntax,
                format!(
                    "{name} does not wrap another policy: only {} come before `{OVER}`",
                    wrapper_names().join(" and ")
                ),
            ));
        }
        let default = match bound {
            Bound::Default(factor) => Some(factor),
            Bound::Optional | Bound::Unbounded => None,
        };
        let policy = parse(&mut params, default)?;
        let bounded = policy.load_factor().is_some() || policy.hash_balance_factor().is_some();
        let report_max_age =
            crate::inflight::fleet::take_report_max_age(&mut params, &name, bounded)?;
        let report_share = crate::inflight::fleet::take_report_rule(&mut params, &name, bounded)?;
        let policy = crate::policy::lifecycle::wrap(policy, &mut params)?;
        if let Bound::Unbounded = bound {
            for key in ["load_factor", "balance"] {
                if params.has(key) {
                    return Err(ParseError::new(
 ParseErrorKind::Conflict, format!(
                        "{name}: {key} applies to hashing policies only (c_murmurhash, c_md5, c_ketama, ...)"
                    ))
                    .with_policy(&name)
                    .with_key(key));
                }
            }
        }
        params.finish()?;
        Ok(PolicySpec {
            text,
            name: family.name,
            params: written,
            inner: None,
            policy,
            report_max_age,
            report_share,
        })
    }

    /// Parses locality family `name` (its own canonical text `text`, read
    /// into `params`) wrapped around `inner` (`rr` if none).
    fn parse_wrapper(
        mut text: String,
        mut params: Params<'_>,
        written: Vec<(String, String)>,
        name: &'static str,
        parse_rule: ParseRuleFn,
        inner: Option<PolicySpec>,
    ) -> Result<Self> {
        let rule = parse_rule(&mut params)?;
        for key in ["load_factor", "balance", "report_max_age", "report_rule"] {
            if params.has(key) {
                return Err(ParseError::new(
 ParseErrorKind::Conflict, format!(
                    "{name}: {key} belongs on the inner hashing policy, e.g. `{name} over c_murmurhash:{key}=...`"
                ))
                .with_policy(name)
                .with_key(key));
            }
        }
        params.finish()?;
        let inner = match inner {
            Some(inner) => {
                text.push_str(&format!(" {OVER} {}", inner.text));
                inner
            }
            None => PolicySpec::parse_one("rr", None, false)?,
        };
        Ok(PolicySpec {
            text,
            name,
            params: written,
            policy: Arc::new(LocalityPolicy {
                name,
                rule,
                inner: inner.policy.clone(),
            }),
            inner: Some(Box::new(inner)),
            report_max_age: None,
            report_share: false,
        })
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
        let debug = format!("{:?}", spec.policy());
        assert!(debug.contains("hash: Murmur3, replicas: 100"), "{debug}");
        assert_eq!(spec.load_factor(), None);
        let bl: PolicySpec = "c_murmurhash_bl".parse().unwrap();
        assert_eq!(bl.load_factor(), Some(LoadFactor::DEFAULT));
        let tuned: PolicySpec = "c_murmurhash_bl:balance=150 replicas=160".parse().unwrap();
        assert_eq!(tuned.load_factor().unwrap().to_string(), "1.5");
        let debug = format!("{:?}", tuned.policy());
        assert!(debug.contains("hash: Murmur3, replicas: 160"), "{debug}");
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
            // An empty value is refused by the key that reads it, with
            // what the key accepts; a key the policy lacks, as unknown.
            ("c_md5:replicas=", "replicas= is empty: accepted 1..=8388608"),
            (
                "ketama:replicas=",
                "ketama: unknown key `replicas` (accepted: compat,",
            ),
            (
                "maglev:table_size=",
                "table_size= is empty: accepted a prime from 2 to",
            ),
            ("c_murmurhash:load_factor=", "load_factor=: expected a decimal"),
            ("c_murmurhash:balance=", "balance=: expected an integer percent"),
            (
                "maglev:hash_balance_factor=",
                "hash_balance_factor=: expected an integer percent",
            ),
            (
                "c_murmurhash:eject_after=",
                "eject_after= is empty: accepted 1..=1000",
            ),
            (
                "c_murmurhash:slow_start_aggression=",
                "slow_start_aggression=: accepted a decimal number",
            ),
            ("twemproxy:hash_tag=", "hash_tag=: accepted two ASCII characters"),
            ("twemproxy:hash=", "hash=: accepted one_at_a_time, md5,"),
            ("rr:x=", "rr: unknown key `x` (accepted: none)"),
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
            (
                "dubbo:nodes=0",
                "dubbo: nodes=0 is out of range: accepted 4..=8388608",
            ),
            (
                "dubbo:nodes=3",
                "dubbo: nodes=3 is out of range: accepted 4..=8388608",
            ),
            (
                "dubbo:nodes=abc",
                "dubbo: nodes=abc is not a whole number: accepted 4..=8388608",
            ),
            (
                "dubbo:replicas=160",
                "dubbo: unknown key `replicas` (accepted: nodes, load_factor, balance)",
            ),
            (
                "pixiu_ring:replica_num=0",
                "pixiu_ring: replica_num=0 is out of range: accepted 1..=8388608",
            ),
            (
                "pixiu_ring:max_vnode_num=0",
                "pixiu_ring: max_vnode_num=0 is out of range: accepted 1..=4294967295",
            ),
            (
                "pixiu_ring:max_vnode_num=4294967296",
                "pixiu_ring: max_vnode_num=4294967296 is out of range: accepted 1..=4294967295",
            ),
            (
                "pixiu_ring:replica_num=-1",
                "pixiu_ring: replica_num=-1 is negative: accepted 1..=8388608",
            ),
            (
                "pixiu_ring:nodes=4",
                "pixiu_ring: unknown key `nodes` (accepted: replica_num, max_vnode_num, load_factor, balance)",
            ),
            (":replicas=3", "the policy name is missing"),
            (
                "ring_hash:hash_balance_factor=99",
                "ring_hash: hash_balance_factor=99: expected an integer percent from 100 to 100000",
            ),
            ("maglev:hash_balance_factor=1.5", "maglev: hash_balance_factor=1.5: expected"),
            ("maglev:hash_balance_factor=abc", "maglev: hash_balance_factor=abc: expected"),
            (
                "ring_hash:load_factor=1.5 hash_balance_factor=150",
                "ring_hash: give hash_balance_factor (Envoy's rule) or load_factor (loadring's cap), not both",
            ),
            (
                "maglev:hash_balance_factor=150 balance=150",
                "maglev: give hash_balance_factor (Envoy's rule) or balance (loadring's cap), not both",
            ),
            (
                "c_murmurhash:hash_balance_factor=150",
                "c_murmurhash: unknown key `hash_balance_factor`",
            ),
            (
                "zone_first over ring_hash:hash_balance_factor=150 load_factor=2",
                "not both",
            ),
        ];
        for (input, want) in cases {
            let got = err(input);
            assert!(got.contains(want), "{input:?}: {got:?} lacks {want:?}");
            assert!(!got.contains('\n'), "one line: {got:?}");
        }
    }

    #[test]
    fn dubbo_and_pixiu_take_their_systems_defaults_and_a_bound() {
        let debug = |t: &str| format!("{:?}", t.parse::<PolicySpec>().unwrap().policy());
        assert!(debug("dubbo").contains("nodes: 160"), "{}", debug("dubbo"));
        assert!(debug("dubbo:nodes=162").contains("nodes: 162"));
        let pixiu = debug("pixiu_ring");
        assert!(
            pixiu.contains("replica_num: 10, max_vnode_num: 4294967295"),
            "{pixiu}"
        );
        let tuned = debug("pixiu_ring:replica_num=100 max_vnode_num=1023");
        assert!(
            tuned.contains("replica_num: 100, max_vnode_num: 1023"),
            "{tuned}"
        );
        for text in ["dubbo:load_factor=1.25", "pixiu_ring:balance=125"] {
            let spec: PolicySpec = text.parse().unwrap();
            assert!(spec.is_hashing());
            assert_eq!(spec.load_factor().unwrap().to_string(), "1.25", "{text}");
        }
        assert_eq!("dubbo".parse::<PolicySpec>().unwrap().load_factor(), None);
    }

    #[test]
    fn every_listed_name_parses_to_itself() {
        for name in POLICY_NAMES {
            let spec: PolicySpec = name.to_ascii_uppercase().parse().unwrap();
            assert_eq!(spec.name(), *name);
        }
        // The policy a family builds carries its name (errors name it).
        for name in ["dubbo", "pixiu_ring"] {
            let spec: PolicySpec = name.parse().unwrap();
            assert_eq!(spec.policy().name(), name);
        }
        assert_eq!(
            "c_murmurhash_bl".parse::<PolicySpec>().unwrap().name(),
            "c_murmurhash_bl"
        );
    }

    #[test]
    fn envoys_rule_is_its_own_bound() {
        for text in [
            "ring_hash:hash_balance_factor=100",
            "maglev:table_size=307 hash_balance_factor=100000",
            "zone_first over ring_hash:hash_balance_factor=125",
        ] {
            let spec: PolicySpec = text.parse().unwrap();
            assert!(spec.is_hashing(), "{text}");
            assert_eq!(spec.load_factor(), None, "{text}");
            assert!(spec.hash_balance_factor().is_some(), "{text}");
        }
        let spec: PolicySpec = "maglev:hash_balance_factor=125".parse().unwrap();
        assert_eq!(spec.hash_balance_factor(), Some(125));
        let plain: PolicySpec = "maglev:load_factor=1.25".parse().unwrap();
        assert_eq!(plain.hash_balance_factor(), None);
    }

    #[test]
    fn the_text_is_kept() {
        let spec: PolicySpec = "  c_md5:replicas=8  ".parse().unwrap();
        assert_eq!(spec.as_str(), "c_md5:replicas=8");
    }

    #[test]
    fn long_input_is_cut_in_the_message_and_kept_whole_in_the_error() {
        let long = "a".repeat(5000);
        let spec = format!("c_murmurhash:replicas={long}");
        let error = spec.parse::<PolicySpec>().unwrap_err();
        assert_eq!(
            error.to_string(),
            "c_murmurhash: replicas=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa... (5000 characters) \
             is not a whole number: accepted 1..=8388608"
        );
        assert_eq!(
            error.value(),
            Some(long.as_str()),
            "the accessor keeps it whole"
        );

        let error = long.parse::<PolicySpec>().unwrap_err();
        assert_eq!(error.kind(), ParseErrorKind::UnknownPolicy);
        let message = error.to_string();
        assert!(
            message.starts_with(
                "unknown policy `aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa... (5000 characters)` \
                 (accepted: c_murmurhash, "
            ),
            "{message}"
        );
        assert!(message.len() < 400, "{message}");
        assert_eq!(error.value(), Some(long.as_str()));

        // A policy name not checked yet, in a word that is not key=value.
        assert_eq!(
            err(&format!("{long}:junk")),
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa... (5000 characters): `junk` is not key=value"
        );
        // An unknown key, a value of another reader, a duration.
        assert_eq!(
            err(&format!("c_md5:{}=1", "k".repeat(41))),
            "c_md5: unknown key `kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk... (41 characters)` \
             (accepted: replicas, load_factor, balance)"
        );
        assert_eq!(
            err(&format!("c_md5:load_factor=1.{}", "5".repeat(60))),
            "c_md5: load_factor=1.55555555555555555555555555555555555555... (62 characters): \
             expected a decimal number greater than 1 and at most 1000 with at most 6 decimals, \
             e.g. load_factor=1.25"
        );
        assert_eq!(
            err(&format!("rr:eject_after=3 eject_for={}s", "9".repeat(50))),
            "rr: eject_for=9999999999999999999999999999999999999999... (51 characters) is out of \
             range: accepted a whole number of ms, s, m or h from 1ms to 1h (e.g. 500ms, 10s, 1m)"
        );
        // Forty characters are shown whole.
        let forty = "b".repeat(40);
        assert_eq!(
            err(&format!("c_md5:replicas={forty}")),
            "c_md5: replicas=bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb is not a whole number: \
             accepted 1..=8388608"
        );
    }

    #[test]
    fn many_pairs_take_linear_time() {
        // 100,000 pairs (1.3 MB): a quadratic search for repeated keys made
        // this test take minutes.
        let pairs: Vec<String> = (0..100_000).map(|i| format!("k{i}=1")).collect();
        let text = format!("rr:{}", pairs.join(" "));
        assert_eq!(err(&text), "rr: unknown key `k0` (accepted: none)");
        let repeated = format!("rr:{} k99999=2", pairs.join(" "));
        assert_eq!(err(&repeated), "rr: `k99999` is given twice");
    }

    #[test]
    fn control_characters_are_escaped_in_the_message() {
        assert_eq!(
            err("c_md5:replicas=1\x1b[2J"),
            "c_md5: replicas=1\\u{1b}[2J is not a whole number: accepted 1..=8388608"
        );
        assert_eq!(
            err("c\x1b[2J:replicas=1"),
            "unknown policy `c\\u{1b}[2J` (accepted: c_murmurhash, c_murmurhash_bl, c_md5, \
             c_ketama, ketama, ring_hash, maglev, nginx_hash, haproxy_hash, twemproxy, dubbo, \
             pixiu_ring, rr, random, wrr, swrr, wr, p2c, la, zone_first, local_first)"
        );
        assert_eq!(
            PolicySpec::new("rr\x07:x").unwrap_err().to_string(),
            "`rr\\u{7}:x`: a policy name alone is expected here (add parameters with `with`)"
        );
        let spec = PolicySpec::new("rr").unwrap();
        assert_eq!(
            spec.with("eject_for", "1s\nx").unwrap_err().to_string(),
            "rr: `eject_for=1s\\nx`: a key and a value are single words without `=` or `:`"
        );
    }
}
