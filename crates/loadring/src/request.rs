//! What a pick is asked for: a key or a code, excluded endpoints, a zone.

use std::time::Duration;

use crate::endpoint::Id;

/// How a request names its place on a hash ring.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Hash<'a> {
    /// No key: only non-hashing policies can place it.
    #[default]
    None,
    /// A key, hashed with the policy's own hash function.
    Key(&'a [u8]),
    /// A request code (already a hash), used as is.
    Code(u64),
}

/// One request to place. Borrowing only, so a pick allocates nothing.
///
/// ```
/// use loadring::{Id, Request};
///
/// let tried = ["10.0.0.1:80"];
/// let retry = Request::key("user:42").excluding(&tried).in_zone("eu-1");
/// # let _ = retry;
/// // One tagged endpoint of an address, not the others at that address:
/// let tried = [Id::new("10.0.0.1:80", Some("canary"))];
/// let retry = Request::key("user:42").excluding_ids(&tried);
/// # let _ = retry;
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Request<'a> {
    pub(crate) hash: Hash<'a>,
    pub(crate) excluded: &'a [&'a str],
    pub(crate) excluded_ids: &'a [Id<'a>],
    pub(crate) zone: Option<&'a str>,
    /// When the request is placed, if the caller says (see [`Request::at`]).
    pub(crate) at: Option<Duration>,
}

impl<'a> Request<'a> {
    /// A request with neither key nor code (for round robin, random, p2c...).
    pub fn new() -> Self {
        Request::default()
    }

    /// A request placed by `key`, hashed with the policy's own hash function.
    pub fn key<K: AsRef<[u8]> + ?Sized>(key: &'a K) -> Self {
        Request {
            hash: Hash::Key(key.as_ref()),
            ..Request::default()
        }
    }

    /// A request placed by a precomputed hash `code` (brpc's request code,
    /// Envoy's hash). Each policy checks it against its hash range.
    pub fn code(code: u64) -> Self {
        Request {
            hash: Hash::Code(code),
            ..Request::default()
        }
    }

    /// Excludes endpoints by address (every tag at each address), typically
    /// those a retry already tried.
    ///
    /// Each endpoint a pick considers is looked up in the list, one
    /// comparison per entry: a pick costs up to the endpoints it walks past
    /// times the entries. Meant for the few endpoints a retry tried; a list
    /// of every endpoint of a pool of `n` makes a pick that finds none
    /// `O(n²)` (3,000 endpoints: about 0.1 s in a debug build).
    #[must_use]
    pub fn excluding(mut self, addrs: &'a [&'a str]) -> Self {
        self.excluded = addrs;
        self
    }

    /// Excludes endpoints by identity (address and tag): an [`Id`] without a
    /// tag excludes only the untagged endpoint at its address. Each lookup
    /// compares with every entry, as [`Request::excluding`]'s does.
    #[must_use]
    pub fn excluding_ids(mut self, ids: &'a [Id<'a>]) -> Self {
        self.excluded_ids = ids;
        self
    }

    /// The zone the request comes from, for locality policies.
    #[must_use]
    pub fn in_zone(mut self, zone: &'a str) -> Self {
        self.zone = Some(zone);
        self
    }

    /// Places the request at time `at` (a [`Duration`] since the caller's own
    /// epoch) for the policies that follow latency and for slow start and
    /// ejection: a simulator or a test gives its virtual time here and on
    /// [`Outcome::at`](crate::Outcome::at). Without it, those policies read
    /// the process clock ([`clock::now`](crate::clock::now)); policies that
    /// keep no time ignore it.
    ///
    /// ```
    /// use std::time::Duration;
    /// use loadring::{Balancer, Endpoint, Outcome, Request};
    ///
    /// // e0 is ejected after one failure, for 10 s of the caller's time.
    /// let endpoints = ["e0", "e1"].map(|a| Endpoint::new(a).unwrap());
    /// let balancer = Balancer::new("rr:eject_after=1 eject_for=10s".parse()?, endpoints)?;
    /// let t = Duration::from_secs;
    /// let pick = balancer.pick(&Request::new().at(t(0)))?;
    /// assert_eq!(pick.addr(), "e0");
    /// pick.finish(Outcome::failure(Duration::from_millis(3)).at(t(0)));
    /// for _ in 0..4 {
    ///     assert_eq!(balancer.pick(&Request::new().at(t(9)))?.addr(), "e1");
    /// }
    /// assert_eq!(balancer.pick(&Request::new().at(t(10)))?.addr(), "e0", "back at 10 s");
    /// # Ok::<(), loadring::Error>(())
    /// ```
    #[must_use]
    pub fn at(mut self, at: Duration) -> Self {
        self.at = Some(at);
        self
    }

    /// The time the request is placed at: the one given with [`Request::at`],
    /// else the process clock now.
    pub fn now(&self) -> Duration {
        self.at.unwrap_or_else(crate::clock::now)
    }

    /// The zone the request comes from, if any.
    pub fn zone(&self) -> Option<&'a str> {
        self.zone
    }

    /// Whether the request excludes any endpoint.
    #[inline]
    pub(crate) fn excludes_any(&self) -> bool {
        !self.excluded.is_empty() || !self.excluded_ids.is_empty()
    }

    /// Whether the endpoint with this identity is excluded.
    #[inline]
    pub(crate) fn excludes(&self, addr: &str, tag: Option<&str>) -> bool {
        (!self.excluded.is_empty() && self.excluded.contains(&addr))
            || (!self.excluded_ids.is_empty() && self.excluded_ids.contains(&Id::new(addr, tag)))
    }
}
