//! Endpoints: the backends a policy chooses among.

use std::fmt;
use std::str::FromStr;

use crate::echo::Echo;
use crate::error::{BuildError, BuildErrorKind, ParseError, ParseErrorKind};

type Result<T, E = ParseError> = std::result::Result<T, E>;

/// One backend: an address plus the attributes policies read.
///
/// The text form is `ADDR[ weight=W][ tag=T][ zone=Z][ hash_key=K]`; `ADDR` is any
/// name without white space (`10.0.0.1:80`, `[::1]:80`, `unix:app.sock`, `web1`).
///
/// ```
/// use loadring::Endpoint;
///
/// let e: Endpoint = "10.0.0.1:80 weight=3 zone=eu-1".parse()?;
/// assert_eq!(e.addr(), "10.0.0.1:80");
/// assert_eq!(e.weight(), 3);
/// assert_eq!(e.zone(), Some("eu-1"));
/// assert_eq!(e.to_string(), "10.0.0.1:80 weight=3 zone=eu-1");
/// # Ok::<(), loadring::Error>(())
/// ```
///
/// Two endpoints are the same backend when their address and tag are equal;
/// [`Balancer`](crate::Balancer) keeps the in-flight counter and the health of a
/// backend across updates by that identity.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Endpoint {
    addr: String,
    weight: u32,
    tag: Option<String>,
    zone: Option<String>,
    hash_key: Option<String>,
}

impl Endpoint {
    /// An endpoint of weight 1 with no tag, zone or hash key.
    ///
    /// # Errors
    /// An empty address, or one containing white space.
    pub fn new(addr: impl Into<String>) -> Result<Self> {
        let addr = addr.into();
        check_word("address", &addr, &addr)?;
        Ok(Endpoint {
            addr,
            weight: 1,
            tag: None,
            zone: None,
            hash_key: None,
        })
    }

    /// Sets the weight. Weight 0 keeps the endpoint a member that is never picked.
    #[must_use]
    pub fn with_weight(mut self, weight: u32) -> Self {
        self.weight = weight;
        self
    }

    /// Sets the tag (part of the endpoint's identity, like brpc's server tag).
    ///
    /// # Errors
    /// An empty tag or one with white space.
    pub fn with_tag(mut self, tag: impl Into<String>) -> Result<Self> {
        let tag = tag.into();
        check_word("tag", &tag, &self.addr)?;
        self.tag = Some(tag);
        Ok(self)
    }

    /// Sets the zone that locality policies compare with the request's zone.
    ///
    /// # Errors
    /// An empty zone or one with white space.
    pub fn with_zone(mut self, zone: impl Into<String>) -> Result<Self> {
        let zone = zone.into();
        check_word("zone", &zone, &self.addr)?;
        self.zone = Some(zone);
        Ok(self)
    }

    /// Sets the name hashed in place of the address (Envoy's `hash_key`).
    ///
    /// # Errors
    /// An empty hash key or one with white space.
    pub fn with_hash_key(mut self, hash_key: impl Into<String>) -> Result<Self> {
        let key = hash_key.into();
        check_word("hash_key", &key, &self.addr)?;
        self.hash_key = Some(key);
        Ok(self)
    }

    /// The address as given.
    pub fn addr(&self) -> &str {
        &self.addr
    }
    /// The weight (default 1).
    pub fn weight(&self) -> u32 {
        self.weight
    }
    /// The tag, if any.
    pub fn tag(&self) -> Option<&str> {
        self.tag.as_deref()
    }
    /// The zone, if any.
    pub fn zone(&self) -> Option<&str> {
        self.zone.as_deref()
    }
    /// The explicit hash key, if any.
    pub fn hash_key(&self) -> Option<&str> {
        self.hash_key.as_deref()
    }
    /// The name hashing policies hash: the explicit hash key, else the address.
    pub fn hash_name(&self) -> &str {
        self.hash_key.as_deref().unwrap_or(&self.addr)
    }

    /// The endpoint's identity: address and tag.
    pub fn id(&self) -> Id<'_> {
        Id::new(self.addr(), self.tag())
    }

    /// Whether `other` is the same backend (same address and tag).
    pub fn same_backend(&self, other: &Endpoint) -> bool {
        self.addr == other.addr && self.tag == other.tag
    }

    /// brpc's order of endpoints, used to break ties between equal ring points:
    /// IPv4 endpoints first, by the four address bytes read as a little-endian
    /// u32 (the last octet is the most significant), then port, then tag; every
    /// other address after them, by its bytes, then tag.
    #[cfg(test)]
    pub(crate) fn brpc_cmp(&self, other: &Endpoint) -> std::cmp::Ordering {
        self.brpc_key().cmp(&other.brpc_key())
    }

    /// A key whose order is [`Endpoint::brpc_cmp`]'s, to sort many endpoints
    /// with one address parse each.
    pub(crate) fn brpc_key(&self) -> (bool, (u32, u16), &[u8], Option<&str>) {
        match parse_ipv4(&self.addr) {
            Some(ip) => (false, ip, &[], self.tag()),
            None => (true, (0, 0), self.addr.as_bytes(), self.tag()),
        }
    }

    #[cfg(test)]
    fn brpc_cmp_by_parts(&self, other: &Endpoint) -> std::cmp::Ordering {
        use std::cmp::Ordering;
        match (parse_ipv4(&self.addr), parse_ipv4(&other.addr)) {
            (Some(a), Some(b)) => a.cmp(&b).then_with(|| self.tag.cmp(&other.tag)),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => self
                .addr
                .as_bytes()
                .cmp(other.addr.as_bytes())
                .then_with(|| self.tag.cmp(&other.tag)),
        }
    }
}

/// `a.b.c.d[:port]` as (little-endian u32 of the octets, port).
fn parse_ipv4(addr: &str) -> Option<(u32, u16)> {
    let (ip, port) = match addr.rsplit_once(':') {
        Some((ip, port)) => (ip, port.parse::<u16>().ok()?),
        None => (addr, 0),
    };
    let ip: std::net::Ipv4Addr = ip.parse().ok()?;
    Some((u32::from_le_bytes(ip.octets()), port))
}

fn check_word(what: &str, value: &str, addr: &str) -> Result<()> {
    // Echoed: a value with a newline must not break the error's one line,
    // nor one of 5,000 characters make it 5,000 long.
    let addr = Echo(addr);
    if value.is_empty() {
        return Err(ParseError::new(
            ParseErrorKind::Syntax,
            format!("endpoint `{addr}`: {what} is empty"),
        ));
    }
    if value.chars().any(char::is_whitespace) {
        return Err(ParseError::new(
            ParseErrorKind::Syntax,
            format!(
                "endpoint `{addr}`: {what} `{}` contains white space",
                Echo(value)
            ),
        ));
    }
    Ok(())
}

impl FromStr for Endpoint {
    type Err = ParseError;

    fn from_str(text: &str) -> Result<Self> {
        let mut words = text.split_whitespace();
        let Some(addr) = words.next() else {
            return Err(ParseError::new(
                ParseErrorKind::Syntax,
                "empty endpoint: expected ADDR[ weight=W][ tag=T][ zone=Z][ hash_key=K]",
            ));
        };
        if addr.contains('=') {
            return Err(ParseError::new(
                ParseErrorKind::Syntax,
                format!(
                    "endpoint `{}` must start with its address, not `{}`",
                    Echo(text.trim()),
                    Echo(addr)
                ),
            ));
        }
        let mut endpoint = Endpoint::new(addr)?;
        let mut seen: Vec<&str> = Vec::new();
        for word in words {
            let Some((key, value)) = word.split_once('=') else {
                return Err(ParseError::new(
                    ParseErrorKind::Syntax,
                    format!(
                        "endpoint `{}`: `{}` is not KEY=VALUE (keys: weight, tag, zone, hash_key)",
                        Echo(addr),
                        Echo(word)
                    ),
                ));
            };
            if seen.contains(&key) {
                return Err(ParseError::new(
                    ParseErrorKind::Syntax,
                    format!("endpoint `{}`: `{}` is given twice", Echo(addr), Echo(key)),
                ));
            }
            seen.push(key);
            endpoint = match key {
                "weight" => endpoint.with_weight(parse_weight(addr, value)?),
                "tag" => endpoint.with_tag(value)?,
                "zone" => endpoint.with_zone(value)?,
                "hash_key" => endpoint.with_hash_key(value)?,
                _ => {
                    return Err(ParseError::new(
                        ParseErrorKind::UnknownKey,
                        format!(
                            "endpoint `{}`: unknown attribute `{}` (accepted: weight, tag, zone, hash_key)",
                            Echo(addr),
                            Echo(key)
                        ),
                    )
                    .with_key(key)
                    .with_value(value)
                    .with_accepted("weight, tag, zone, hash_key"))
                }
            };
        }
        Ok(endpoint)
    }
}

fn parse_weight(addr: &str, value: &str) -> Result<u32> {
    let (shown_addr, shown) = (Echo(addr), Echo(value));
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ParseError::new(
            ParseErrorKind::Value,
            format!(
                "endpoint `{shown_addr}`: weight `{shown}` is not an integer in 0..=4294967295"
            ),
        )
        .with_key("weight")
        .with_value(value)
        .with_accepted("0..=4294967295"));
    }
    value.parse::<u32>().map_err(|_| {
        ParseError::new(
            ParseErrorKind::Value,
            format!("endpoint `{shown_addr}`: weight `{shown}` is out of range 0..=4294967295"),
        )
        .with_key("weight")
        .with_value(value)
        .with_accepted("0..=4294967295")
    })
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.addr)?;
        if self.weight != 1 {
            write!(f, " weight={}", self.weight)?;
        }
        if let Some(tag) = &self.tag {
            write!(f, " tag={tag}")?;
        }
        if let Some(zone) = &self.zone {
            write!(f, " zone={zone}")?;
        }
        if let Some(key) = &self.hash_key {
            write!(f, " hash_key={key}")?;
        }
        Ok(())
    }
}

/// Removes repeated endpoints, keeping the first of each backend in order.
///
/// Two identical endpoints are one; the same backend (address and tag) given
/// twice with different attributes is an error naming it.
pub(crate) fn dedup<T>(
    endpoints: impl IntoIterator<Item = (Endpoint, T)>,
) -> Result<Vec<(Endpoint, T)>, BuildError> {
    use std::collections::hash_map::{Entry, HashMap};
    let all: Vec<(Endpoint, T)> = endpoints.into_iter().collect();
    // The map borrows each identity from `all`: no address or tag is copied
    // to look it up (a build of 1,024 endpoints made 2,048 such copies).
    let mut repeats = Vec::new();
    let mut first: HashMap<Id<'_>, usize> = HashMap::with_capacity(all.len());
    for (i, (e, _)) in all.iter().enumerate() {
        match first.entry(e.id()) {
            Entry::Vacant(slot) => {
                slot.insert(i);
            }
            Entry::Occupied(seen) if all[*seen.get()].0 == *e => repeats.push(i),
            Entry::Occupied(seen) => {
                return Err(BuildError::new(
                    BuildErrorKind::Conflict,
                    format!(
                        "endpoint `{}` is given twice with different attributes: `{}` and `{}`",
                        Echo(&e.addr),
                        Echo(&all[*seen.get()].0.to_string()),
                        Echo(&e.to_string())
                    ),
                ))
            }
        }
    }
    drop(first);
    if repeats.is_empty() {
        return Ok(all);
    }
    // `repeats` is in increasing order, as `all` is walked.
    let mut repeats = repeats.into_iter().peekable();
    Ok(all
        .into_iter()
        .enumerate()
        .filter(|(i, _)| repeats.next_if_eq(i).is_none())
        .map(|(_, kept)| kept)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cmp::Ordering;

    fn parse(s: &str) -> Result<Endpoint> {
        s.parse()
    }

    #[test]
    fn plain_address_has_weight_one() {
        let e = parse("10.0.0.1:80").unwrap();
        assert_eq!(
            (e.addr(), e.weight(), e.tag(), e.zone(), e.hash_key()),
            ("10.0.0.1:80", 1, None, None, None)
        );
    }

    #[test]
    fn all_attributes_parse_and_print_back() {
        let text = "[::1]:80 weight=0 tag=canary zone=eu hash_key=web-1";
        let e = parse(text).unwrap();
        assert_eq!(e.weight(), 0);
        assert_eq!(e.tag(), Some("canary"));
        assert_eq!(e.hash_name(), "web-1");
        assert_eq!(e.to_string(), text);
    }

    #[test]
    fn errors_name_the_culprit() {
        let cases = [
            ("", "empty endpoint"),
            (
                "a weight=x",
                "weight `x` is not an integer in 0..=4294967295",
            ),
            ("a weight=-1", "weight `-1` is not an integer"),
            (
                "a weight=4294967296",
                "weight `4294967296` is out of range 0..=4294967295",
            ),
            ("a weight=", "weight `` is not an integer"),
            (
                "a colour=red",
                "unknown attribute `colour` (accepted: weight, tag, zone, hash_key)",
            ),
            ("a weight=1 weight=2", "`weight` is given twice"),
            ("a zone=", "zone is empty"),
            ("a junk", "`junk` is not KEY=VALUE"),
            ("weight=3", "must start with its address"),
        ];
        for (input, want) in cases {
            let err = parse(input).unwrap_err().to_string();
            assert!(err.contains(want), "{input:?}: {err:?} lacks {want:?}");
        }
        let err = parse("a weight=-1").unwrap_err();
        assert_eq!(
            (err.key(), err.value(), err.accepted()),
            (Some("weight"), Some("-1"), Some("0..=4294967295"))
        );
    }

    #[test]
    fn long_input_is_cut_in_the_message_and_kept_whole_in_the_error() {
        let long = "a".repeat(5000);
        let err = parse(&format!("a weight={long}")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "endpoint `a`: weight `aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa... (5000 characters)` \
             is not an integer in 0..=4294967295"
        );
        assert_eq!(
            err.value(),
            Some(long.as_str()),
            "the accessor keeps it whole"
        );
        let err = parse(&format!("{long} foo=1")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "endpoint `aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa... (5000 characters)`: unknown \
             attribute `foo` (accepted: weight, tag, zone, hash_key)"
        );
        assert_eq!(
            parse(&format!("a weight={}", "9".repeat(41)))
                .unwrap_err()
                .to_string(),
            "endpoint `a`: weight `9999999999999999999999999999999999999999... (41 characters)` \
             is out of range 0..=4294967295"
        );
        assert_eq!(
            parse(&format!("a zone=eu {long}")).unwrap_err().to_string(),
            "endpoint `a`: `aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa... (5000 characters)` is not \
             KEY=VALUE (keys: weight, tag, zone, hash_key)"
        );
        // The whole text of a line that does not start with an address.
        assert_eq!(
            parse(&format!("weight=1 tag={}", "t".repeat(40)))
                .unwrap_err()
                .to_string(),
            "endpoint `weight=1 tag=ttttttttttttttttttttttttttt... (53 characters)` must start \
             with its address, not `weight=1`"
        );
        // Forty characters are shown whole.
        let forty = "x".repeat(40);
        assert_eq!(
            parse(&format!("{forty} foo=1")).unwrap_err().to_string(),
            "endpoint `xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx`: unknown attribute `foo` \
             (accepted: weight, tag, zone, hash_key)"
        );
        // A build error quotes whole endpoints: each is cut alone.
        let conflict = [
            (parse(&long).unwrap(), ()),
            (parse(&format!("{long} weight=2")).unwrap(), ()),
        ];
        assert_eq!(
            dedup(conflict).unwrap_err().to_string(),
            "endpoint `aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa... (5000 characters)` is given \
             twice with different attributes: `aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa... \
             (5000 characters)` and `aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa... (5009 characters)`"
        );
    }

    #[test]
    fn control_characters_are_escaped_in_the_message() {
        assert_eq!(
            parse("a\x1b[2J foo=1").unwrap_err().to_string(),
            "endpoint `a\\u{1b}[2J`: unknown attribute `foo` (accepted: weight, tag, zone, hash_key)"
        );
        assert_eq!(
            parse("a weight=1\x1b[2J").unwrap_err().to_string(),
            "endpoint `a`: weight `1\\u{1b}[2J` is not an integer in 0..=4294967295"
        );
        assert_eq!(
            parse("a \x07=1").unwrap_err().to_string(),
            "endpoint `a`: unknown attribute `\\u{7}` (accepted: weight, tag, zone, hash_key)"
        );
        assert_eq!(
            Endpoint::new("a")
                .unwrap()
                .with_zone("eu\n1")
                .unwrap_err()
                .to_string(),
            "endpoint `a`: zone `eu\\n1` contains white space"
        );
        assert_eq!(
            Endpoint::new("a\u{1b}")
                .unwrap()
                .with_tag("")
                .unwrap_err()
                .to_string(),
            "endpoint `a\\u{1b}`: tag is empty"
        );
    }

    #[test]
    fn dedup_keeps_the_first_of_each_backend_in_order() {
        let list = ["a", "b", "a", "c", "b", "a tag=x"]
            .into_iter()
            .enumerate()
            .map(|(i, s)| (parse(s).unwrap(), i));
        let kept: Vec<(String, usize)> = dedup(list)
            .unwrap()
            .into_iter()
            .map(|(e, i)| (e.to_string(), i))
            .collect();
        let want = [("a", 0), ("b", 1), ("c", 3), ("a tag=x", 5)].map(|(s, i)| (s.to_string(), i));
        assert_eq!(kept, want);
        let conflict = ["a", "b", "a", "a weight=2"].map(|s| (parse(s).unwrap(), ()));
        assert_eq!(
            dedup(conflict).unwrap_err().to_string(),
            "endpoint `a` is given twice with different attributes: `a` and `a weight=2`"
        );
    }

    #[test]
    fn identical_endpoints_are_one_and_conflicts_are_errors() {
        let list = ["a", "b", "a"].map(|s| (parse(s).unwrap(), ()));
        assert_eq!(dedup(list).unwrap().len(), 2);
        let conflict = [parse("a").unwrap(), parse("a weight=2").unwrap()].map(|e| (e, ()));
        assert!(dedup(conflict)
            .unwrap_err()
            .to_string()
            .contains("given twice with different attributes"));
        let tagged = [parse("a").unwrap(), parse("a tag=x").unwrap()].map(|e| (e, ()));
        assert_eq!(
            dedup(tagged).unwrap().len(),
            2,
            "a tag makes another backend"
        );
    }

    #[test]
    fn brpc_order_puts_last_octet_first() {
        let a = parse("10.0.0.2:80").unwrap();
        let b = parse("11.0.0.1:80").unwrap();
        assert_eq!(a.brpc_cmp_by_parts(&b), Ordering::Greater);
        // 10.0.0.2 has last octet 2 > 1: sorts after 11.0.0.1.
        assert_eq!(a.brpc_cmp(&b), Ordering::Greater);
        let p1 = parse("10.0.0.1:80").unwrap();
        let p2 = parse("10.0.0.1:81").unwrap();
        assert_eq!(p1.brpc_cmp(&p2), Ordering::Less);
        let name = parse("web1").unwrap();
        assert_eq!(p1.brpc_cmp(&name), Ordering::Less);
        // The sort key orders as the comparison of the parts does.
        let all = [
            "10.0.0.2:80",
            "11.0.0.1:80",
            "10.0.0.1:80",
            "10.0.0.1:81",
            "10.0.0.1:80 tag=b",
            "10.0.0.1:80 tag=a",
            "web1",
            "web2 tag=x",
            "web2",
            "[::1]:80",
            "1.2.3.4",
        ]
        .map(|t| parse(t).unwrap());
        for a in &all {
            for b in &all {
                assert_eq!(a.brpc_cmp(b), a.brpc_cmp_by_parts(b), "{a} vs {b}");
            }
        }
    }
}

/// An endpoint's identity: its address and its tag. Two endpoints with the
/// same identity are the same backend (they share in-flight counts and
/// health); an address may host several backends under different tags.
///
/// ```
/// use loadring::{Endpoint, Id};
///
/// let e: Endpoint = "10.0.0.1:80 tag=canary".parse()?;
/// assert_eq!(e.id(), Id::new("10.0.0.1:80", Some("canary")));
/// assert_ne!(e.id(), Id::from("10.0.0.1:80"), "an untagged id names the untagged endpoint");
/// # Ok::<(), loadring::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Id<'a> {
    addr: &'a str,
    tag: Option<&'a str>,
}

impl<'a> Id<'a> {
    /// The identity of the endpoint at `addr` with `tag`.
    pub fn new(addr: &'a str, tag: Option<&'a str>) -> Self {
        Id { addr, tag }
    }

    /// The address.
    pub fn addr(&self) -> &'a str {
        self.addr
    }

    /// The tag, if any.
    pub fn tag(&self) -> Option<&'a str> {
        self.tag
    }
}

/// The untagged endpoint at this address.
impl<'a> From<&'a str> for Id<'a> {
    fn from(addr: &'a str) -> Self {
        Id::new(addr, None)
    }
}

/// The untagged endpoint at this address.
impl<'a> From<&'a String> for Id<'a> {
    fn from(addr: &'a String) -> Self {
        Id::new(addr, None)
    }
}

impl<'a> From<&'a Endpoint> for Id<'a> {
    fn from(endpoint: &'a Endpoint) -> Self {
        endpoint.id()
    }
}

impl std::fmt::Display for Id<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.tag {
            Some(tag) => write!(f, "{} tag={tag}", self.addr),
            None => f.write_str(self.addr),
        }
    }
}
