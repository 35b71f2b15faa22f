//! twemproxy's (nutcracker's) key distribution: `twemproxy:distribution=ketama|modula
//! hash=... hash_tag=XY`.
//!
//! A client that reads and writes a memcached or Redis pool directly while
//! others go through twemproxy must put every key on the server twemproxy
//! puts it on. Parameters mirror the keys of a twemproxy pool:
//!
//! - `distribution=` `ketama` (default) or `modula`;
//! - `hash=` one of twemproxy's twelve: `fnv1a_64` (default), `fnv1_64`,
//!   `fnv1_32`, `fnv1a_32`, `md5`, `crc16`, `crc32` (libmemcached's 15-bit
//!   CRC), `crc32a` (the full CRC-32), `one_at_a_time`, `murmur`, `hsieh`,
//!   `jenkins`; all are twemproxy's exact variants (bytes above 0x7f read as
//!   C `char` where twemproxy does so);
//! - `hash_tag=XY`: two ASCII characters; a key holding X and, after it, Y
//!   with something in between is hashed by that part only (`{user1}.name`
//!   and `{user1}.mail` land together).
//!
//! ## Servers
//! A server's name is its endpoint's `hash_key` (twemproxy's
//! `host:port:weight NAME`), else its address as written, but just the host
//! when the port is 11211. Servers are ordered by name as twemproxy orders
//! them (shorter names first, then byte by byte), whatever the order of the
//! endpoints; two servers may not share a name. With one server, or a key
//! (or tag) that is empty, the hash is 0.
//!
//! A request code is the 32-bit hash twemproxy computes (after the tag),
//! used as is.
//!
//! ## `distribution=ketama`
//! A server of weight `w` among `n` servers of total weight `W` gets
//! `floor(f32(f32(f32(w/W * 160) / 4) * n)) * 4` points, every step in f32 as
//! twemproxy computes it (weights 1 and 100 give the first server no point),
//! four per MD5 digest of `"<name>-<k>"`, that text cut to 272 bytes as
//! twemproxy's buffer cuts it (so the points of a server named with 272
//! bytes or more repeat). A key goes to the first point at or after its
//! hash, wrapping; equal points go to the server first in name order.
//!
//! ## `distribution=modula`
//! Each server, in name order, repeated `weight` times; a key takes slot
//! `hash % W`.
//!
//! ## Health and bounded load
//! twemproxy does not reroute a failed server's keys unless `auto_eject_hosts`
//! is on, and then rebuilds its distribution without it (moving keys of the
//! others too under `modula`, and a few under `ketama` when weights differ,
//! since every server's point count depends on the server count); loadring
//! never rebuilds for health: the keys of an unhealthy or excluded endpoint
//! walk on to the next point (ketama) or the next slot (modula, i.e. the next
//! server in name order), and every other key stays where it is. Weight 0 is
//! "drained": as if the server were not in the pool. `load_factor=`/`balance=`
//! apply the generic cap along that same walk.

use std::sync::Arc;

use crate::echo::Echo;
use crate::error::{BuildError, BuildErrorKind, ParseError};
use crate::hash::{
    crc32, fnv1_32, fnv1_64, fnv1a_32, fnv1a_64, hsieh, jenkins, md5_le32, md5_words,
    one_at_a_time, twemproxy_crc16, twemproxy_murmur,
};
use crate::inflight::pool::Pool;
use crate::placement::hashing::{slot_shares, HashingPolicy, Placement, Scheme};
use crate::placement::ketama::libmemcached_digests;
use crate::placement::ring::Ring;
use crate::placement::MAX_RING_POINTS;
use crate::policy::Policy;
use crate::util::bounded::LoadFactor;
use crate::util::params::Params;

type Result<T, E = BuildError> = std::result::Result<T, E>;

/// The policy name.
const NAME: &str = "twemproxy";
/// The longest point name twemproxy hashes: its buffer for them holds 273
/// bytes, the terminating zero included (observed on nutcracker 0.5.0:
/// longer names are cut to this length).
const MAX_POINT_NAME: usize = 272;
/// The port twemproxy leaves out of default server names.
const DEFAULT_PORT_SUFFIX: &str = ":11211";

/// The names of `hash=`, in twemproxy's documentation order.
const HASH_NAMES: &[&str] = &[
    "one_at_a_time",
    "md5",
    "crc16",
    "crc32",
    "crc32a",
    "fnv1_64",
    "fnv1a_64",
    "fnv1_32",
    "fnv1a_32",
    "hsieh",
    "murmur",
    "jenkins",
];

/// `distribution=`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Distribution {
    Ketama,
    Modula,
}

/// The parameters of `twemproxy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Twemproxy {
    pub(crate) distribution: Distribution,
    /// An index into `HASH_NAMES`.
    hash: usize,
    hash_tag: Option<[u8; 2]>,
}

/// twemproxy's hash `i` of `HASH_NAMES`.
fn hash_function(i: usize) -> fn(&[u8]) -> u32 {
    match HASH_NAMES[i] {
        "one_at_a_time" => one_at_a_time,
        "md5" => md5_le32,
        "crc16" => twemproxy_crc16,
        // libmemcached's crc32: 15 bits of the CRC.
        "crc32" => |k| (crc32(k) >> 16) & 0x7fff,
        "crc32a" => crc32,
        "fnv1_64" => fnv1_64,
        "fnv1a_64" => fnv1a_64,
        "fnv1_32" => fnv1_32,
        "fnv1a_32" => fnv1a_32,
        "hsieh" => hsieh,
        "murmur" => twemproxy_murmur,
        _ => jenkins,
    }
}

impl Twemproxy {
    pub(crate) fn parse(params: &mut Params<'_>) -> Result<Self, ParseError> {
        let distribution =
            match params.take_choice("distribution", &["ketama", "modula"], "ketama")? {
                "modula" => Distribution::Modula,
                _ => Distribution::Ketama,
            };
        let hash_name = params.take_choice("hash", HASH_NAMES, "fnv1a_64")?;
        let hash = HASH_NAMES.iter().position(|n| *n == hash_name).unwrap_or(0);
        let hash_tag = match params.take("hash_tag") {
            None => None,
            Some(tag) => match tag.as_bytes() {
                &[x, y] if x.is_ascii_graphic() && y.is_ascii_graphic() => Some([x, y]),
                _ => {
                    return Err(params.error(
                        "hash_tag",
                        tag,
                        "two ASCII characters, the tag's start and end, e.g. hash_tag={}",
                        |accepted| format!("hash_tag={}: accepted {accepted}", Echo(tag)),
                    ))
                }
            },
        };
        Ok(Twemproxy {
            distribution,
            hash,
            hash_tag,
        })
    }
}

/// `twemproxy`, parsed: `bound` is `load_factor=`/`balance=`, or `default`.
pub(crate) fn policy(
    params: &mut Params<'_>,
    default: Option<LoadFactor>,
) -> Result<Arc<dyn Policy>, ParseError> {
    let family = Twemproxy::parse(params)?;
    let bound = params.take_bound()?.or(default);
    Ok(match family.distribution {
        Distribution::Ketama => Arc::new(HashingPolicy::new(KetamaScheme(family), bound)),
        Distribution::Modula => Arc::new(HashingPolicy::new(ModulaScheme(family), bound)),
    })
}

impl Twemproxy {
    /// The key hash over the servers of `pool`.
    fn key_hash(&self, servers: &ServerOrder) -> KeyHash {
        KeyHash {
            hash: hash_function(self.hash),
            hash_tag: self.hash_tag,
            single: servers.order.len() == 1,
        }
    }
}

/// `distribution=ketama` as a scheme.
#[derive(Debug)]
struct KetamaScheme(Twemproxy);

impl Scheme for KetamaScheme {
    type Placement = Continuum;

    fn name(&self) -> &'static str {
        NAME
    }

    fn size(&self, pool: &Pool) -> u64 {
        // At most 160 points per server on average, whatever the weights.
        160 * pool.len() as u64
    }

    fn place(&self, pool: &Pool) -> Result<Continuum> {
        let servers = ServerOrder::of(pool)?;
        Continuum::build(pool, &servers, self.0.key_hash(&servers))
    }
}

/// `distribution=modula` as a scheme.
#[derive(Debug)]
struct ModulaScheme(Twemproxy);

impl Scheme for ModulaScheme {
    type Placement = Modula;

    fn name(&self) -> &'static str {
        NAME
    }

    fn size(&self, pool: &Pool) -> u64 {
        pool.weight_sum()
    }

    fn place(&self, pool: &Pool) -> Result<Modula> {
        let servers = ServerOrder::of(pool)?;
        Modula::build(pool, &servers, self.0.key_hash(&servers))
    }
}

/// A server's name: its `hash_key`, else the address, without `:11211`.
pub(crate) fn server_name(e: &crate::endpoint::Endpoint) -> &str {
    match e.hash_key() {
        Some(name) => name,
        None => e
            .addr()
            .strip_suffix(DEFAULT_PORT_SUFFIX)
            .unwrap_or(e.addr()),
    }
}

/// The servers (endpoints of non-zero weight) in twemproxy's name order.
struct ServerOrder {
    /// Pool indices, in name order.
    order: Vec<usize>,
    /// Each pool index's place in that order (the tie-break of equal points).
    rank: Vec<u32>,
}

impl ServerOrder {
    fn of(pool: &Pool) -> Result<Self> {
        let mut order: Vec<usize> = (0..pool.len()).filter(|&i| pool.weight(i) > 0).collect();
        let name = |i: usize| server_name(pool.endpoint(i)).as_bytes();
        order.sort_by(|&a, &b| {
            let (a, b) = (name(a), name(b));
            a.len().cmp(&b.len()).then_with(|| a.cmp(b))
        });
        if let Some(w) = order.windows(2).find(|w| name(w[0]) == name(w[1])) {
            return Err(BuildError::new(
                BuildErrorKind::Endpoint,
                format!(
                    "{NAME}: endpoints `{}` and `{}` are both named `{}`: twemproxy needs unique \
                 server names (set hash_key= on one of them)",
                    Echo(pool.endpoint(w[0]).addr()),
                    Echo(pool.endpoint(w[1]).addr()),
                    Echo(server_name(pool.endpoint(w[0])))
                ),
            ));
        }
        let mut rank = vec![u32::MAX; pool.len()];
        for (r, &i) in order.iter().enumerate() {
            rank[i] = r as u32;
        }
        Ok(ServerOrder { order, rank })
    }
}

/// How twemproxy hashes a key: the tag, then the function.
#[derive(Clone, Copy, Debug)]
struct KeyHash {
    hash: fn(&[u8]) -> u32,
    hash_tag: Option<[u8; 2]>,
    /// One server: twemproxy does not hash at all.
    single: bool,
}

impl KeyHash {
    #[inline]
    fn code(&self, key: &[u8]) -> u64 {
        if self.single {
            return 0;
        }
        let text = match self.hash_tag {
            Some(tag) => tagged(key, tag),
            None => key,
        };
        if text.is_empty() {
            return 0;
        }
        u64::from((self.hash)(text))
    }
}

/// The part of `key` between the first `tag[0]` and the first `tag[1]` after
/// it, if both exist and something lies between; else the whole key.
fn tagged(key: &[u8], tag: [u8; 2]) -> &[u8] {
    let Some(start) = key.iter().position(|&b| b == tag[0]) else {
        return key;
    };
    let inner = &key[start + 1..];
    match inner.iter().position(|&b| b == tag[1]) {
        Some(end) if end > 0 => &inner[..end],
        _ => key,
    }
}

/// `distribution=ketama`.
#[derive(Debug)]
pub(crate) struct Continuum {
    ring: Ring<u32>,
    key_hash: KeyHash,
}

impl Continuum {
    fn build(pool: &Pool, servers: &ServerOrder, key_hash: KeyHash) -> Result<Self> {
        let n = u32::try_from(servers.order.len()).unwrap_or(u32::MAX);
        let total = pool.weight_sum();
        let digests: u64 = servers
            .order
            .iter()
            .map(|&i| u64::from(libmemcached_digests(pool.weight(i), total, n)))
            .sum();
        if digests * 4 > MAX_RING_POINTS {
            return Err(BuildError::too_large(format!(
                "{NAME}: {} endpoints make {} points, more than the limit of {MAX_RING_POINTS}",
                pool.len(),
                digests * 4
            )));
        }
        let mut entries = Vec::with_capacity(digests as usize * 4);
        let mut text = Vec::with_capacity(MAX_POINT_NAME + 1);
        for &i in &servers.order {
            let name = server_name(pool.endpoint(i));
            for k in 0..libmemcached_digests(pool.weight(i), total, n) {
                text.clear();
                text.extend_from_slice(name.as_bytes());
                text.push(b'-');
                text.extend_from_slice(k.to_string().as_bytes());
                text.truncate(MAX_POINT_NAME);
                entries.extend(md5_words(&text).iter().map(|&p| (p, i as u32)));
            }
        }
        Ok(Continuum {
            ring: Ring::build(entries, &servers.rank),
            key_hash,
        })
    }
}

impl Placement for Continuum {
    fn name(&self) -> &'static str {
        NAME
    }
    fn entries(&self) -> usize {
        self.ring.len()
    }
    #[inline]
    fn start(&self, code: u64) -> usize {
        self.ring.locate(code as u32)
    }
    #[inline]
    fn owner(&self, entry: usize) -> usize {
        self.ring.owner(entry)
    }
    fn max_code(&self) -> u64 {
        u64::from(u32::MAX)
    }
    #[inline]
    fn key_code(&self, key: &[u8]) -> u64 {
        self.key_hash.code(key)
    }
    fn shares(&self, endpoints: usize) -> Vec<f64> {
        self.ring.shares(endpoints)
    }
    fn entry_label(&self) -> &'static str {
        "points"
    }
}

/// `distribution=modula`.
#[derive(Debug)]
pub(crate) struct Modula {
    slots: Vec<u32>,
    key_hash: KeyHash,
}

impl Modula {
    fn build(pool: &Pool, servers: &ServerOrder, key_hash: KeyHash) -> Result<Self> {
        if pool.weight_sum() > MAX_RING_POINTS {
            return Err(BuildError::too_large(format!(
                "{NAME}: distribution=modula has one slot per unit of weight: weights summing \
                 to {} exceed the limit of {MAX_RING_POINTS} slots",
                pool.weight_sum()
            )));
        }
        let slots = servers
            .order
            .iter()
            .flat_map(|&i| std::iter::repeat_n(i as u32, pool.weight(i) as usize))
            .collect();
        Ok(Modula { slots, key_hash })
    }
}

impl Placement for Modula {
    fn name(&self) -> &'static str {
        NAME
    }
    fn entries(&self) -> usize {
        self.slots.len()
    }
    #[inline]
    fn start(&self, code: u64) -> usize {
        (code % self.slots.len() as u64) as usize
    }
    #[inline]
    fn owner(&self, entry: usize) -> usize {
        self.slots[entry] as usize
    }
    fn max_code(&self) -> u64 {
        u64::from(u32::MAX)
    }
    #[inline]
    fn key_code(&self, key: &[u8]) -> u64 {
        self.key_hash.code(key)
    }
    fn shares(&self, endpoints: usize) -> Vec<f64> {
        slot_shares(&self.slots, endpoints)
    }
    fn entry_label(&self) -> &'static str {
        "slots"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_tags_take_the_first_pair_only() {
        let tag = *b"{}";
        assert_eq!(tagged(b"{user1}.name", tag), b"user1");
        assert_eq!(tagged(b"a{b}c{d}", tag), b"b");
        assert_eq!(tagged(b"{}x", tag), b"{}x", "empty tag: the whole key");
        assert_eq!(tagged(b"x{y", tag), b"x{y", "no end: the whole key");
        assert_eq!(tagged(b"x}y{z", tag), b"x}y{z", "end before start");
        assert_eq!(tagged(b"{}{a}", tag), b"{}{a}", "no retry further on");
        assert_eq!(tagged(b"a:b:c", *b"::"), b"b");
    }

    #[test]
    fn every_hash_name_has_its_function() {
        // twemproxy's crc32 is the 15-bit libmemcached one, crc32a the full CRC.
        let crc = HASH_NAMES.iter().position(|n| *n == "crc32").unwrap();
        let crca = HASH_NAMES.iter().position(|n| *n == "crc32a").unwrap();
        assert_eq!(hash_function(crca)(b"123456789"), 0xcbf4_3926);
        assert_eq!(
            hash_function(crc)(b"123456789"),
            (0xcbf4_3926 >> 16) & 0x7fff
        );
        let distinct: std::collections::HashSet<u32> = (0..HASH_NAMES.len())
            .map(|i| hash_function(i)(b"some key"))
            .collect();
        assert_eq!(
            distinct.len(),
            HASH_NAMES.len(),
            "twelve different functions"
        );
    }

    #[test]
    fn points_per_server_in_f32() {
        // compat.md: 25 equal servers get 156 points each; weights 1,100 give
        // the first server none.
        assert_eq!(libmemcached_digests(1, 25, 25) * 4, 156);
        assert_eq!(libmemcached_digests(1, 101, 2), 0);
    }
}
