//! What a pick is asked for: a key or a code, excluded endpoints, a zone.

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
/// use loadring::Request;
///
/// let tried = ["10.0.0.1:80"];
/// let retry = Request::key("user:42").excluding(&tried).in_zone("eu-1");
/// # let _ = retry;
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Request<'a> {
    pub(crate) hash: Hash<'a>,
    pub(crate) excluded: &'a [&'a str],
    pub(crate) zone: Option<&'a str>,
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

    /// Excludes endpoints by address, typically those a retry already tried.
    #[must_use]
    pub fn excluding(mut self, addrs: &'a [&'a str]) -> Self {
        self.excluded = addrs;
        self
    }

    /// The zone the request comes from, for locality policies.
    #[must_use]
    pub fn in_zone(mut self, zone: &'a str) -> Self {
        self.zone = Some(zone);
        self
    }

    /// The zone the request comes from, if any.
    pub fn zone(&self) -> Option<&'a str> {
        self.zone
    }

    #[inline]
    pub(crate) fn excludes(&self, addr: &str) -> bool {
        self.excluded.contains(&addr)
    }
}
