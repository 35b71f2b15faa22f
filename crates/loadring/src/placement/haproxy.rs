//! HAProxy's hash balancing: `haproxy_hash:type=map-based|consistent
//! function=sdbm|djb2|wt6|crc32|none avalanche=true|false
//! hash_key=id|id32|guid|addr|addr-port|id-3.0`.
//!
//! A service that sits beside (or replaces) an HAProxy backend balanced with
//! `balance hdr(...)`, `uri`, `url_param` or `source` keeps every cache warm
//! only if each key reaches the server HAProxy sends it to. This is HAProxy's
//! placement (as of 2.6), parameters named after its `hash-type` line:
//!
//! - `type=` `map-based` (HAProxy's default) or `consistent`;
//! - `function=` `sdbm` (default), `djb2`, `wt6` or `crc32`: the hash of the
//!   key's bytes; or `none` (HAProxy 2.9): the key read as a decimal number
//!   (`-`/`+` then digits, up to the first other byte; 0 without digits;
//!   saturating at the bounds of a 64-bit signed number), its low 32 bits;
//! - `avalanche=` `true` passes that hash through HAProxy's `full_hash`.
//!   Its default follows HAProxy: `hash-type consistent` alone means sdbm
//!   with avalanche, so avalanche defaults to true for `type=consistent`
//!   without `function=`, false otherwise.
//!
//! ## Server ids
//! HAProxy places nodes by each server's numeric `id`. An endpoint's
//! `hash_key` is that id (a whole number from 1); endpoints without one are
//! numbered as HAProxy numbers servers without `id`: a counter starts at 1;
//! a server without an id takes the smallest id not given to another server
//! that is at least the counter, and the counter then moves to one past the
//! id taken, or one past its value for a server with an explicit id. So ids
//! auto, 1, auto, 7 become 2, 1, 4, 7. Give every endpoint its `id` from the
//! HAProxy configuration when in doubt.
//!
//! ## `type=consistent`
//! A server of weight `w` (0..=256, as HAProxy) has `16 * w` nodes, node `j`
//! keyed `full_hash(base + j)` (wrapping), where the server's `base` follows
//! HAProxy's `hash-key` (`hash_key=`, the same for every server, as
//! `default-server hash-key` sets it):
//!
//! - `id` (the default): `id * 4096`, HAProxy's only rule before 3.0 and its
//!   `hash-key id` since;
//! - `id-3.0`: `full_hash(id)`, what HAProxy 3.0 to 3.2 computed for
//!   `hash-key id` (the default there) until a fix of October 2025 went
//!   back to `id * 4096`: a fleet on those releases places keys this way;
//! - `id32` (HAProxy 3.4): `full_hash` of the id's bytes in network order
//!   read as a little-endian number;
//! - `addr` and `addr-port` (HAProxy 3.0): the server's address, so that
//!   proxies listing servers in different orders agree. For IPv4,
//!   `full_hash(p + a)`, with `a` the address's four bytes read as a
//!   little-endian number and `p` 0 for `addr`, `full_hash(port)` for
//!   `addr-port`; for IPv6, `XXH32` of the sixteen bytes seeded with `p`.
//!   Every endpoint must then be `IP:PORT` (or a bare IP, port 0): HAProxy
//!   hashes the address it resolved, which a name does not give;
//! - `guid` (HAProxy 3.4): `XXH32` of the server's `guid` (its `hash_key`
//!   here, 1 to 127 characters of `A-Z a-z 0-9 _ . : -`, unique), seed 0;
//!   an endpoint without one falls back to `id`, and every server's id is
//!   then HAProxy's automatic numbering.
//!
//! "Little-endian" is what HAProxy computes on x86-64 and ARM64 alike. A key goes to the CLOSER of the two
//! nodes around its hash: the first node at or after it (wrapping) and the
//! one before that; an exact tie goes to the node before. Servers that are
//! down leave the tree in HAProxy: an unhealthy endpoint's nodes are passed
//! over by that same lookup. A retry that excludes the chosen server walks on
//! clockwise, node by node, as HAProxy's `avoid` does.
//!
//! ## `type=map-based`
//! Weights are divided by their gcd; a table of `sum` slots is filled one
//! slot at a time, every server adding its reduced weight to a score and the
//! first with the greatest `(score + sum) / sum` taking the slot (and paying
//! `sum`); a key takes slot `hash % sum`. HAProxy rebuilds the table over the
//! servers that are up, so with unhealthy endpoints the key's slot is taken
//! in the table of the healthy ones (built by the first pick that sees that
//! health and kept until it changes; the policy is not rebuilt). Excluded
//! endpoints (retries) are passed over by walking the table slot by slot
//! from there.
//!
//! ## Keys and codes
//! A key is hashed as given: for `balance hdr(name)` HAProxy hashes the
//! first comma-separated element of the header's value, trimmed, so give
//! that. A request code is the 32-bit hash after `avalanche`.
//!
//! ## Bounded load: `balance=P` (HAProxy's `hash-balance-factor P`)
//! HAProxy's own rule, not the generic cap: with `T` requests in flight on
//! the pool, `R = ceil((T + 1) * P / 100)` slots are shared out in endpoint
//! order by weight (with `C_i` the weight of the healthy endpoints before
//! endpoint `i` and `W` the total, endpoint `i` gets
//! `floor(C_(i+1) * R / W) - floor(C_i * R / W)`, at least 1), and an
//! endpoint is eligible while it serves fewer requests than its slots. From
//! the key's node the walk goes on clockwise to the first eligible one.
//! `load_factor=F` is the same rule with `P = 100 * F`. With `type=map-based`
//! (where HAProxy has no bound) the same rule walks the table slot by slot.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, RwLock};

use crate::echo::Echo;
use crate::error::{BuildError, BuildErrorKind, ParseError, ParseErrorKind};
use crate::hash::{crc32, djb2, haproxy_full_hash, sdbm, wt6, xxhash32};
use crate::inflight::pool::Pool;
use crate::placement::hashing::{slot_shares, HashingPolicy, Placement, Scheme};
use crate::placement::ring::Ring;
use crate::policy::Policy;
use crate::request::Request;
use crate::util::bounded::LoadFactor;
use crate::util::params::Params;

type Result<T, E = BuildError> = std::result::Result<T, E>;

/// The policy name.
const NAME: &str = "haproxy_hash";
/// HAProxy's largest server weight.
const MAX_WEIGHT: u32 = 256;
/// Nodes per unit of weight (HAProxy's `BE_WEIGHT_SCALE`).
const NODES_PER_WEIGHT: u32 = 16;
/// Node keys of one server are `id * 4096 + j` (HAProxy's `SRV_EWGHT_RANGE`).
const NODE_RANGE: u32 = 4096;
/// HAProxy's server ids are positive C `int`s.
const MAX_ID: u64 = i32::MAX as u64;
/// The most nodes a consistent tree may have: the rings' limit.
const MAX_NODES: u64 = crate::placement::MAX_RING_POINTS;
/// The most work a map may take to fill: `slots * endpoints` steps.
const MAX_MAP_WORK: u64 = 1 << 28;

/// `hash-type`'s method.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HashType {
    MapBased,
    Consistent,
}

/// `hash-type`'s function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Function {
    Sdbm,
    Djb2,
    Wt6,
    Crc32,
    /// The key read as a decimal number (HAProxy 2.9's `none`).
    None,
}

/// HAProxy's `read_int64`, the "hash" of `function=none`: an optional `-`
/// or `+`, then the decimal digits up to the first other byte (none: 0);
/// beyond the range of an `i64` it saturates. HAProxy keeps the low 32 bits.
fn read_int64(key: &[u8]) -> i64 {
    let (negative, digits) = match key.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, key),
    };
    let mut value: u64 = 0;
    for &b in digits.iter().take_while(|b| b.is_ascii_digit()) {
        match value
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(b - b'0')))
        {
            Some(v) => value = v,
            None => {
                value = u64::MAX;
                break;
            }
        }
    }
    const HALF: u64 = 1 << 63;
    match (negative, value) {
        (true, v) if v > HALF => i64::MIN,
        // Two's complement of `v <= 2^63`, as C's `-i` read back signed.
        (true, v) => (v as i64).wrapping_neg(),
        (false, v) if v >= HALF => i64::MAX,
        (false, v) => v as i64,
    }
}

/// The parameters of `haproxy_hash`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HaproxyHash {
    pub(crate) hash_type: HashType,
    pub(crate) function: Function,
    pub(crate) avalanche: bool,
    pub(crate) server_key: ServerKey,
}

/// HAProxy's `hash-key`: what the nodes of a server are keyed from under
/// `type=consistent`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ServerKey {
    /// `id * 4096`.
    Id,
    /// `full_hash(id)`: HAProxy 3.0 to 3.2's `id`.
    HashedId,
    /// `full_hash(htonl(id))`.
    Id32,
    /// `XXH32(guid, 0)`, or `id` without a guid.
    Guid,
    /// The IP address.
    Addr,
    /// The IP address and the port.
    AddrPort,
}

/// `hash_key=`'s values, HAProxy's names first.
const SERVER_KEYS: [&str; 6] = ["id", "id32", "guid", "addr", "addr-port", "id-3.0"];

/// How a key becomes HAProxy's 32-bit hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct KeyHash {
    function: Function,
    avalanche: bool,
}

impl KeyHash {
    #[inline]
    fn hash(&self, key: &[u8]) -> u32 {
        let h = match self.function {
            Function::Sdbm => sdbm(key),
            Function::Djb2 => djb2(key),
            Function::Wt6 => wt6(key),
            Function::Crc32 => crc32(key),
            Function::None => read_int64(key) as u32,
        };
        if self.avalanche {
            haproxy_full_hash(h)
        } else {
            h
        }
    }
}

impl HaproxyHash {
    pub(crate) fn parse(params: &mut Params<'_>) -> Result<Self, ParseError> {
        let hash_type =
            match params.take_choice("type", &["map-based", "consistent"], "map-based")? {
                "consistent" => HashType::Consistent,
                _ => HashType::MapBased,
            };
        let function_given = params.has("function");
        let function = match params.take_choice(
            "function",
            &["sdbm", "djb2", "wt6", "crc32", "none"],
            "sdbm",
        )? {
            "djb2" => Function::Djb2,
            "wt6" => Function::Wt6,
            "crc32" => Function::Crc32,
            "none" => Function::None,
            _ => Function::Sdbm,
        };
        // HAProxy: `hash-type consistent` alone is sdbm with avalanche; any
        // explicit function, and map-based, go without unless asked.
        let default_avalanche = hash_type == HashType::Consistent && !function_given;
        let avalanche = params.take_bool("avalanche", default_avalanche)?;
        let server_key_given = params.has("hash_key");
        let server_key_text = params.take_choice("hash_key", &SERVER_KEYS, "id")?;
        if server_key_given && hash_type == HashType::MapBased {
            // HAProxy reads `hash-key` for its consistent tree only: a map
            // places keys the same with any value, which would hide a
            // mistaken (or missing) `type=`.
            return Err(ParseError::new(
                ParseErrorKind::Conflict,
                format!(
                    "{}: hash_key={server_key_text} keys the nodes of HAProxy's consistent \
                     tree: accepted with type=consistent only (type=map-based has no nodes)",
                    params.policy()
                ),
            )
            .with_policy(params.policy())
            .with_key("hash_key")
            .with_value(server_key_text)
            .with_accepted("type=consistent"));
        }
        let server_key = match server_key_text {
            "id32" => ServerKey::Id32,
            "guid" => ServerKey::Guid,
            "addr" => ServerKey::Addr,
            "addr-port" => ServerKey::AddrPort,
            "id-3.0" => ServerKey::HashedId,
            _ => ServerKey::Id,
        };
        Ok(HaproxyHash {
            hash_type,
            function,
            avalanche,
            server_key,
        })
    }

    fn key_hash(&self) -> KeyHash {
        KeyHash {
            function: self.function,
            avalanche: self.avalanche,
        }
    }
}

/// `haproxy_hash`, parsed: `bound` is `load_factor=`/`balance=`, or `default`.
pub(crate) fn policy(
    params: &mut Params<'_>,
    default: Option<LoadFactor>,
) -> Result<Arc<dyn Policy>, ParseError> {
    let family = HaproxyHash::parse(params)?;
    let bound = params.take_bound()?.or(default);
    let key_hash = family.key_hash();
    Ok(match family.hash_type {
        HashType::Consistent => Arc::new(HashingPolicy::new(
            ConsistentScheme {
                key_hash,
                server_key: family.server_key,
            },
            bound,
        )),
        HashType::MapBased => Arc::new(HashingPolicy::new(MapScheme(key_hash), bound)),
    })
}

/// `type=consistent` as a scheme.
#[derive(Debug)]
struct ConsistentScheme {
    key_hash: KeyHash,
    server_key: ServerKey,
}

impl Scheme for ConsistentScheme {
    type Placement = ConsistentTree;

    fn name(&self) -> &'static str {
        NAME
    }

    fn size(&self, pool: &Pool) -> u64 {
        pool.weight_sum()
            .saturating_mul(u64::from(NODES_PER_WEIGHT))
    }

    fn place(&self, pool: &Pool) -> Result<ConsistentTree> {
        check_weights(pool)?;
        let nodes = self.size(pool);
        if nodes > MAX_NODES {
            return Err(BuildError::too_large(format!(
                "{NAME}: type=consistent: weights summing to {} make {nodes} nodes \
                 ({NODES_PER_WEIGHT} per unit of weight), more than the limit of {MAX_NODES}",
                pool.weight_sum()
            )));
        }
        let bases = server_bases(pool, self.server_key)?;
        Ok(ConsistentTree::build(pool, &bases, self.key_hash))
    }
}

/// `type=map-based` as a scheme.
#[derive(Debug)]
struct MapScheme(KeyHash);

impl Scheme for MapScheme {
    type Placement = WeightMap;

    fn name(&self) -> &'static str {
        NAME
    }

    fn size(&self, pool: &Pool) -> u64 {
        pool.weight_sum()
    }

    fn place(&self, pool: &Pool) -> Result<WeightMap> {
        check_weights(pool)?;
        // Ids play no part in the map, but a bad one is still an error.
        server_ids(pool)?;
        WeightMap::build(pool, self.0)
    }
}

/// Whether endpoint `i` is up (healthy, of non-zero weight): eligible for a
/// request that excludes nothing.
#[inline]
fn is_up(pool: &Pool, i: usize) -> bool {
    pool.eligible(i, &Request::new())
}

/// An endpoint error of this policy.
fn endpoint_err(message: String) -> BuildError {
    BuildError::new(BuildErrorKind::Endpoint, message)
}

fn check_weights(pool: &Pool) -> Result<()> {
    match pool.endpoints().iter().find(|e| e.weight() > MAX_WEIGHT) {
        Some(e) => Err(endpoint_err(format!(
            "{NAME}: endpoint `{}`: weight={} is out of range: HAProxy accepts 0..={MAX_WEIGHT}",
            Echo(e.addr()),
            e.weight()
        ))),
        None => Ok(()),
    }
}

/// Each endpoint's HAProxy server id: its `hash_key`, or HAProxy's
/// automatic numbering.
pub(crate) fn server_ids(pool: &Pool) -> Result<Vec<u32>> {
    let mut explicit: Vec<Option<u32>> = Vec::with_capacity(pool.len());
    for e in pool.endpoints() {
        explicit.push(match e.hash_key() {
            None => None,
            Some(text) => {
                let id = text.parse::<u64>().ok().filter(|id| {
                    (1..=MAX_ID).contains(id) && text.bytes().all(|b| b.is_ascii_digit())
                });
                match id {
                    Some(id) => Some(id as u32),
                    None => {
                        return Err(endpoint_err(format!(
                            "{NAME}: endpoint `{}`: hash_key={} is not a server id: \
                             accepted a whole number 1..={MAX_ID} (HAProxy's `id`)",
                            Echo(e.addr()),
                            Echo(text)
                        )))
                    }
                }
            }
        });
    }
    let mut used: Vec<u32> = explicit.iter().flatten().copied().collect();
    used.sort_unstable();
    if let Some(w) = used.windows(2).find(|w| w[0] == w[1]) {
        let holders: Vec<&str> = pool
            .endpoints()
            .iter()
            .zip(&explicit)
            .filter(|(_, id)| **id == Some(w[0]))
            .map(|(e, _)| e.addr())
            .collect();
        return Err(endpoint_err(format!(
            "{NAME}: endpoints `{}` and `{}` both have hash_key={}: server ids must be unique",
            Echo(holders[0]),
            Echo(holders[1]),
            w[0]
        )));
    }
    // HAProxy's counter: a server without an id moves it to the id it takes;
    // every server then moves it on by one.
    let mut next: u64 = 1;
    let mut ids = Vec::with_capacity(pool.len());
    for id in explicit {
        let id = match id {
            Some(id) => id,
            None => {
                while next <= MAX_ID && used.binary_search(&(next as u32)).is_ok() {
                    next += 1;
                }
                if next > MAX_ID {
                    return Err(endpoint_err(format!(
                        "{NAME}: no server id left up to {MAX_ID} for automatic numbering"
                    )));
                }
                let id = next as u32;
                let at = used.binary_search(&id).unwrap_or_else(|i| i);
                used.insert(at, id);
                id
            }
        };
        ids.push(id);
        next += 1;
    }
    Ok(ids)
}

/// Each server's `base`: its node `j` is keyed `full_hash(base + j)`.
fn server_bases(pool: &Pool, server_key: ServerKey) -> Result<Vec<u32>> {
    let ids = if server_key == ServerKey::Guid {
        // A guid is no id: every server is numbered by HAProxy.
        (1..=pool.len() as u32).collect()
    } else {
        server_ids(pool)?
    };
    let mut guids: Vec<(&str, usize)> = Vec::new();
    let mut bases = Vec::with_capacity(ids.len());
    for (i, (e, &id)) in pool.endpoints().iter().zip(&ids).enumerate() {
        let by_id = id.wrapping_mul(NODE_RANGE);
        bases.push(match server_key {
            ServerKey::Id => by_id,
            ServerKey::HashedId => haproxy_full_hash(id),
            ServerKey::Id32 => haproxy_full_hash(id.swap_bytes()),
            ServerKey::Guid => match e.hash_key() {
                None => by_id,
                Some(guid) => {
                    check_guid(e.addr(), guid)?;
                    guids.push((guid, i));
                    xxhash32(guid.as_bytes(), 0)
                }
            },
            ServerKey::Addr | ServerKey::AddrPort => {
                let (ip, port) = ip_and_port(e.addr()).ok_or_else(|| {
                    endpoint_err(format!(
                        "{NAME}: endpoint `{}`: hash_key={} hashes the server's address: \
                         accepted IP:PORT, [IPv6]:PORT or a bare IP (HAProxy hashes the \
                         address it resolved, which a name does not give)",
                        Echo(e.addr()),
                        if server_key == ServerKey::Addr {
                            "addr"
                        } else {
                            "addr-port"
                        }
                    ))
                })?;
                let seed = if server_key == ServerKey::AddrPort {
                    haproxy_full_hash(u32::from(port))
                } else {
                    0
                };
                match ip {
                    // `s_addr` as the number a little-endian machine reads.
                    IpAddr::V4(v4) => {
                        haproxy_full_hash(seed.wrapping_add(u32::from_le_bytes(v4.octets())))
                    }
                    IpAddr::V6(v6) => xxhash32(&v6.octets(), seed),
                }
            }
        });
    }
    guids.sort_unstable();
    if let Some(w) = guids.windows(2).find(|w| w[0].0 == w[1].0) {
        let addr = |i: usize| Echo(pool.endpoints()[i].addr());
        return Err(endpoint_err(format!(
            "{NAME}: endpoints `{}` and `{}` both have hash_key={}: guids must be unique",
            addr(w[0].1.min(w[1].1)),
            addr(w[0].1.max(w[1].1)),
            Echo(w[0].0)
        )));
    }
    Ok(bases)
}

/// HAProxy's longest `guid`.
const MAX_GUID_LEN: usize = 127;

/// A guid HAProxy accepts: 1 to 127 of `A-Z a-z 0-9 _ . : -`.
fn check_guid(addr: &str, guid: &str) -> Result<()> {
    let valid = |b: u8| b.is_ascii_alphanumeric() || b"_.:-".contains(&b);
    if (1..=MAX_GUID_LEN).contains(&guid.len()) && guid.bytes().all(valid) {
        return Ok(());
    }
    Err(endpoint_err(format!(
        "{NAME}: endpoint `{}`: hash_key={} is not a guid: accepted 1 to {MAX_GUID_LEN} \
         characters of A-Z a-z 0-9 _ . : - (HAProxy's `guid`)",
        Echo(addr),
        Echo(guid)
    )))
}

/// `IP:PORT`, `[IPv6]:PORT`, or a bare IP (port 0, as a HAProxy server
/// without one).
fn ip_and_port(addr: &str) -> Option<(IpAddr, u16)> {
    if let Ok(socket) = addr.parse::<SocketAddr>() {
        return Some((socket.ip(), socket.port()));
    }
    addr.parse::<IpAddr>().ok().map(|ip| (ip, 0))
}

/// `type=consistent`: HAProxy's tree of nodes and its closest-node lookup.
#[derive(Debug)]
pub(crate) struct ConsistentTree {
    ring: Ring<u32>,
    key_hash: KeyHash,
}

impl ConsistentTree {
    fn build(pool: &Pool, bases: &[u32], key_hash: KeyHash) -> Self {
        let mut nodes = Vec::new();
        for (owner, (e, &base)) in pool.endpoints().iter().zip(bases).enumerate() {
            for j in 0..e.weight() * NODES_PER_WEIGHT {
                let key = haproxy_full_hash(base.wrapping_add(j));
                nodes.push((key, owner as u32));
            }
        }
        let rank: Vec<u32> = (0..pool.len() as u32).collect();
        ConsistentTree {
            ring: Ring::build(nodes, &rank),
            key_hash,
        }
    }

    /// The closer of `prev` and `next` to `h`, ties to `prev`.
    #[inline]
    fn closer(&self, h: u32, prev: usize, next: usize) -> usize {
        let dp = h.wrapping_sub(self.ring.point(prev));
        let dn = self.ring.point(next).wrapping_sub(h);
        if dp <= dn {
            prev
        } else {
            next
        }
    }
}

impl Placement for ConsistentTree {
    fn name(&self) -> &'static str {
        NAME
    }
    fn entries(&self) -> usize {
        self.ring.len()
    }
    #[inline]
    fn start(&self, code: u64) -> usize {
        let h = code as u32;
        let next = self.ring.locate(h);
        let prev = if next == 0 {
            self.ring.len() - 1
        } else {
            next - 1
        };
        self.closer(h, prev, next)
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
        u64::from(self.key_hash.hash(key))
    }
    fn shares(&self, endpoints: usize) -> Vec<f64> {
        // A node serves the hashes closer to it than to either neighbour:
        // half of the arc on each side.
        let mut shares = vec![0.0; endpoints];
        let n = self.ring.len();
        let full = f64::from(u32::MAX) + 1.0;
        for i in 0..n {
            let prev = self.ring.point((i + n - 1) % n);
            let next = self.ring.point((i + 1) % n);
            let here = self.ring.point(i);
            let arcs = if n == 1 {
                full
            } else {
                (f64::from(here.wrapping_sub(prev)) + f64::from(next.wrapping_sub(here))) / 2.0
            };
            shares[self.ring.owner(i)] += arcs / full;
        }
        shares
    }
    fn entry_label(&self) -> &'static str {
        "nodes"
    }

    /// HAProxy's lookup on the tree of the servers that are up: the closer of
    /// the healthy nodes around the hash.
    #[inline]
    fn start_among_healthy(&self, code: u64, pool: &Pool) -> usize {
        let natural = self.start(code);
        let n = self.ring.len();
        let healthy = |entry: usize| is_up(pool, self.ring.owner(entry));
        let h = code as u32;
        let at = self.ring.locate(h);
        let Some(next) = (0..n).map(|k| (at + k) % n).find(|&e| healthy(e)) else {
            return natural;
        };
        let prev = (1..=n)
            .map(|k| (at + n - k) % n)
            .find(|&e| healthy(e))
            .unwrap_or(next);
        self.closer(h, prev, next)
    }

    fn own_cap(&self, factor: LoadFactor, total: u64, owner: usize, pool: &Pool) -> Option<u64> {
        Some(balance_slots(factor, total, owner, pool))
    }

    /// HAProxy never leaves a server without a slot.
    fn own_cap_floor(&self) -> Option<u64> {
        Some(1)
    }
}

/// HAProxy's `chash_server_is_eligible` slots of endpoint `owner`: the
/// `R = ceil((total + 1) * F)` slots shared out by weight in endpoint order
/// over the healthy endpoints, at least 1.
fn balance_slots(factor: LoadFactor, total: u64, owner: usize, pool: &Pool) -> u64 {
    // ceil(F * (total + 1) * w / W) with w = W is ceil(F * (total + 1)).
    let slots = u128::from(factor.cap(total, 1, 1));
    let weight_of = |i: usize| -> u128 {
        if is_up(pool, i) {
            u128::from(pool.weight(i))
        } else {
            0
        }
    };
    let before: u128 = (0..owner).map(weight_of).sum();
    let through = before + weight_of(owner);
    let all: u128 = through + (owner + 1..pool.len()).map(weight_of).sum::<u128>();
    if all == 0 {
        return 1;
    }
    let share = through * slots / all - before * slots / all;
    u64::try_from(share).unwrap_or(u64::MAX).max(1)
}

/// `type=map-based`: HAProxy's weighted table.
#[derive(Debug)]
pub(crate) struct WeightMap {
    /// Each slot's endpoint, all endpoints up.
    slots: Vec<u32>,
    /// Each endpoint's weight divided by the gcd of the weights.
    reduced: Vec<u64>,
    /// The first slot of each endpoint (`u32::MAX` for weight 0).
    first_slot: Vec<u32>,
    key_hash: KeyHash,
    /// The map over the endpoints that were up when some last were not,
    /// kept until their health changes again.
    degraded: RwLock<Option<DegradedMap>>,
}

/// HAProxy's map over the endpoints that are up.
#[derive(Debug)]
struct DegradedMap {
    up: Vec<bool>,
    slots: Vec<u32>,
}

impl WeightMap {
    fn build(pool: &Pool, key_hash: KeyHash) -> Result<Self> {
        let gcd = pool
            .endpoints()
            .iter()
            .map(|e| u64::from(e.weight()))
            .fold(0, gcd)
            .max(1);
        let reduced: Vec<u64> = pool
            .endpoints()
            .iter()
            .map(|e| u64::from(e.weight()) / gcd)
            .collect();
        let total: u64 = reduced.iter().sum();
        if total.saturating_mul(pool.len() as u64) > MAX_MAP_WORK {
            return Err(BuildError::too_large(format!(
                "{NAME}: type=map-based over {} endpoints would have {total} slots (the weights \
                 over their gcd): filling it takes more than {MAX_MAP_WORK} steps; use \
                 type=consistent or weights with a larger common divisor",
                pool.len()
            )));
        }
        let slots: Vec<u32> = MapFill::new(&reduced, |_| true)
            .take(total as usize)
            .map(|i| i as u32)
            .collect();
        let mut first_slot = vec![u32::MAX; pool.len()];
        for (slot, &owner) in slots.iter().enumerate().rev() {
            first_slot[owner as usize] = slot as u32;
        }
        Ok(WeightMap {
            slots,
            reduced,
            first_slot,
            key_hash,
            degraded: RwLock::new(None),
        })
    }
}

/// HAProxy's map filling (`recalc_server_map`): yields the endpoint of each
/// successive slot among the endpoints `usable` accepts.
struct MapFill<'a, F> {
    reduced: &'a [u64],
    usable: F,
    scores: Vec<i64>,
    total: i64,
}

impl<'a, F: Fn(usize) -> bool> MapFill<'a, F> {
    fn new(reduced: &'a [u64], usable: F) -> Self {
        let total = (0..reduced.len())
            .filter(|&i| usable(i))
            .map(|i| reduced[i] as i64)
            .sum();
        MapFill {
            reduced,
            usable,
            scores: vec![0; reduced.len()],
            total,
        }
    }
}

impl<F: Fn(usize) -> bool> Iterator for MapFill<'_, F> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        let tot = self.total;
        if tot == 0 {
            return None;
        }
        let mut best: Option<(usize, i64)> = None;
        for i in 0..self.reduced.len() {
            if self.reduced[i] == 0 || !(self.usable)(i) {
                continue;
            }
            if tot == 1 {
                // HAProxy takes the first usable server without scoring.
                return Some(i);
            }
            self.scores[i] += self.reduced[i] as i64;
            // C's division truncates toward zero, as Rust's does.
            let v = (self.scores[i] + tot) / tot;
            if best.is_none_or(|(_, max)| v > max) {
                best = Some((i, v));
            }
        }
        let (i, _) = best?;
        self.scores[i] -= tot;
        Some(i)
    }
}

impl Placement for WeightMap {
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
        u64::from(self.key_hash.hash(key))
    }
    fn shares(&self, endpoints: usize) -> Vec<f64> {
        slot_shares(&self.slots, endpoints)
    }
    fn entry_label(&self) -> &'static str {
        "slots"
    }

    /// HAProxy's table is rebuilt over the servers that are up: with some
    /// endpoint unhealthy, the key's slot is taken in that table (built on
    /// the first pick that sees this health, kept until the health changes;
    /// nothing of the policy is rebuilt), and the walk starts at that
    /// endpoint's first slot of the full table. Reading every endpoint's
    /// health makes this lookup `O(endpoints)`.
    fn start_among_healthy(&self, code: u64, pool: &Pool) -> usize {
        let natural = self.start(code);
        let up = |i: usize| self.reduced[i] > 0 && is_up(pool, i);
        if (0..pool.len()).all(|i| self.reduced[i] == 0 || up(i)) {
            return natural;
        }
        let owner_in = |map: &DegradedMap| -> Option<usize> {
            if map.slots.is_empty() {
                return None;
            }
            Some(map.slots[(code % map.slots.len() as u64) as usize] as usize)
        };
        let current = |map: &DegradedMap| (0..pool.len()).all(|i| map.up[i] == up(i));
        // A poisoned lock only means a panic elsewhere; the map is whole.
        let cached = self.degraded.read().unwrap_or_else(|e| e.into_inner());
        let owner = match cached.as_ref() {
            Some(map) if current(map) => owner_in(map),
            _ => {
                drop(cached);
                let up: Vec<bool> = (0..pool.len()).map(up).collect();
                let total = (0..pool.len())
                    .filter(|&i| up[i])
                    .map(|i| self.reduced[i])
                    .sum::<u64>();
                let slots = MapFill::new(&self.reduced, |i| up[i])
                    .take(total as usize)
                    .map(|i| i as u32)
                    .collect();
                let map = DegradedMap { up, slots };
                let owner = owner_in(&map);
                *self.degraded.write().unwrap_or_else(|e| e.into_inner()) = Some(map);
                owner
            }
        };
        match owner {
            Some(owner) => self.first_slot[owner] as usize,
            None => natural,
        }
    }

    fn own_cap(&self, factor: LoadFactor, total: u64, owner: usize, pool: &Pool) -> Option<u64> {
        Some(balance_slots(factor, total, owner, pool))
    }

    /// HAProxy never leaves a server without a slot.
    fn own_cap_floor(&self) -> Option<u64> {
        Some(1)
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::test_pool;

    fn ids_of(keys: &[Option<&str>]) -> Result<Vec<u32>> {
        let pool = test_pool(&vec![1; keys.len()]);
        let endpoints: Vec<_> = pool
            .endpoints()
            .iter()
            .zip(keys)
            .map(|(e, k)| match k {
                Some(k) => e.clone().with_hash_key(*k).unwrap(),
                None => e.clone(),
            })
            .collect();
        let pool = crate::inflight::pool::Pool::new(
            endpoints.clone(),
            (0..endpoints.len())
                .map(|i| pool.member(i).clone())
                .collect(),
            false,
            std::sync::Arc::default(),
            std::sync::Arc::default(),
            std::sync::Arc::default(),
        );
        server_ids(&pool)
    }

    #[test]
    fn automatic_ids_skip_explicit_ones() {
        // compat.md's example: auto, 1, auto, 7 -> 2, 1, 4, 7.
        assert_eq!(
            ids_of(&[None, Some("1"), None, Some("7")]).unwrap(),
            [2, 1, 4, 7]
        );
        assert_eq!(ids_of(&[None, None, None]).unwrap(), [1, 2, 3]);
        assert_eq!(ids_of(&[Some("2"), None, None]).unwrap(), [2, 3, 4]);
        assert_eq!(
            ids_of(&[Some("5"), None, Some("2"), None]).unwrap(),
            [5, 3, 2, 6]
        );
    }

    #[test]
    fn bad_ids_name_the_endpoint() {
        for bad in ["abc", "0", "-3", "2147483648", "+4", "1.5"] {
            let err = ids_of(&[Some(bad)]).unwrap_err().to_string();
            assert!(
                err.contains(&format!("endpoint `e0`: hash_key={bad} is not a server id"))
                    && err.contains("1..=2147483647"),
                "{err}"
            );
        }
        let err = ids_of(&[Some("3"), Some("3")]).unwrap_err().to_string();
        assert!(err.contains("`e0` and `e1` both have hash_key=3"), "{err}");
    }

    #[test]
    fn map_of_compat_md() {
        // compat.md: weights 3,1,2,1,1,5,1 give this table.
        let pool = test_pool(&[3, 1, 2, 1, 1, 5, 1]);
        let map = WeightMap::build(
            &pool,
            KeyHash {
                function: Function::Sdbm,
                avalanche: false,
            },
        )
        .unwrap();
        assert_eq!(map.slots, [0, 1, 5, 2, 0, 5, 2, 3, 5, 0, 4, 5, 5, 6]);
        let equal = WeightMap::build(&test_pool(&[4, 4, 4, 4]), map.key_hash).unwrap();
        assert_eq!(equal.slots, [0, 1, 2, 3]);
    }

    #[test]
    fn balance_slots_of_compat_md() {
        // 3 equal servers, P = 125, T = 2: R = 4, slots 1, 1, 2.
        let pool = test_pool(&[1, 1, 1]);
        let f = LoadFactor::parse_percent("balance", "125").unwrap();
        let slots: Vec<u64> = (0..3).map(|i| balance_slots(f, 2, i, &pool)).collect();
        assert_eq!(slots, [1, 1, 2]);
        // T = 0: R = 2, floor(2/3) = 0 becomes 1.
        let slots: Vec<u64> = (0..3).map(|i| balance_slots(f, 0, i, &pool)).collect();
        assert_eq!(slots, [1, 1, 1]);
    }

    #[test]
    fn a_tree_too_large_is_an_error_naming_the_sizes() {
        let scheme = ConsistentScheme {
            key_hash: KeyHash {
                function: Function::Sdbm,
                avalanche: false,
            },
            server_key: ServerKey::Id,
        };
        // 2,048 servers of weight 256: 2048 * 256 * 16 nodes, the limit.
        let most = test_pool(&[256; 2048]);
        assert_eq!(scheme.size(&most), 8_388_608);
        assert!(scheme.place(&most).is_ok());
        let mut weights = vec![256; 2048];
        weights.push(1);
        let err = scheme.place(&test_pool(&weights)).unwrap_err();
        assert_eq!(err.kind(), crate::BuildErrorKind::TooLarge);
        assert_eq!(
            err.to_string(),
            "haproxy_hash: type=consistent: weights summing to 524289 make 8388624 nodes \
             (16 per unit of weight), more than the limit of 8388608"
        );
    }

    #[test]
    fn none_reads_the_key_as_haproxy_s_read_int64() {
        // Each case by HAProxy's rules: sign, digits to the first other
        // byte, saturation at i64's bounds; then the low 32 bits.
        let cases: [(&[u8], i64); 14] = [
            (b"", 0),
            (b"abc", 0),
            (b"42", 42),
            (b"+42", 42),
            (b"-42", -42),
            (b"007x9", 7),
            (b"12 34", 12),
            (b"--5", 0),
            (b"9223372036854775807", i64::MAX),
            (b"9223372036854775808", i64::MAX),
            (b"99999999999999999999999", i64::MAX),
            (b"-9223372036854775808", i64::MIN),
            (b"-9223372036854775809", i64::MIN),
            (b"-99999999999999999999999", i64::MIN),
        ];
        for (key, want) in cases {
            assert_eq!(read_int64(key), want, "{:?}", String::from_utf8_lossy(key));
        }
        let none = KeyHash {
            function: Function::None,
            avalanche: false,
        };
        assert_eq!(none.hash(b"4294967297"), 1, "2^32 + 1 keeps its low bits");
        assert_eq!(none.hash(b"-1"), u32::MAX);
        assert_eq!(none.hash(b"9223372036854775808"), u32::MAX);
        assert_eq!(none.hash(b"-9223372036854775809"), 0);
        let avalanche = KeyHash {
            function: Function::None,
            avalanche: true,
        };
        assert_eq!(avalanche.hash(b"7"), haproxy_full_hash(7));
    }

    fn pool_of(endpoints: &[&str]) -> Pool {
        Pool::for_test(
            endpoints
                .iter()
                .map(|text| text.parse::<crate::Endpoint>().unwrap())
                .collect(),
        )
    }

    fn bases(server_key: ServerKey, endpoints: &[&str]) -> Result<Vec<u32>> {
        server_bases(&pool_of(endpoints), server_key)
    }

    #[test]
    fn server_keys_of_haproxy_s_own_code() {
        // Computed by a C program from HAProxy 3.5-dev5's own `XXH32`
        // (import/xxhash.h), `__full_hash` and `inet_pton`, following
        // `chash_compute_server_key`.
        assert_eq!(
            bases(ServerKey::AddrPort, &["[::1]:80", "[2001:db8::7]:11211"]).unwrap(),
            [259_319_398, 1_599_987_176]
        );
        assert_eq!(
            bases(ServerKey::Addr, &["[::1]:80", "fe80::1:2"]).unwrap(),
            [2_133_800_574, 748_970_572]
        );
        assert_eq!(
            bases(ServerKey::AddrPort, &["10.1.2.3:6379"]).unwrap(),
            [1_854_292_496]
        );
        // id 7 in network order, hashed.
        assert_eq!(
            bases(ServerKey::Id32, &["a hash_key=7"]).unwrap(),
            [2_056_672_031]
        );
        // `id * 4096` and `full_hash(id)` by compat.md's definitions.
        assert_eq!(
            bases(ServerKey::Id, &["a", "b hash_key=9"]).unwrap(),
            [4096, 9 * 4096]
        );
        assert_eq!(
            bases(ServerKey::HashedId, &["a", "b hash_key=9"]).unwrap(),
            [haproxy_full_hash(1), haproxy_full_hash(9)]
        );
        // The port plays no part under `addr`; the address does.
        let addr = bases(
            ServerKey::Addr,
            &["10.0.0.1:80", "10.0.0.1:81", "10.0.0.2:80"],
        )
        .unwrap();
        assert_eq!(addr[0], addr[1]);
        assert_ne!(addr[0], addr[2]);
        // A bare IP is port 0, as a HAProxy server without one.
        assert_eq!(
            bases(ServerKey::AddrPort, &["10.1.2.3"]).unwrap(),
            [haproxy_full_hash(
                haproxy_full_hash(0).wrapping_add(u32::from_le_bytes([10, 1, 2, 3]))
            )]
        );
    }

    #[test]
    fn node_keys_follow_the_base() {
        // Nodes 0 and 17 of `[::1]:80` under addr-port, from the same C
        // program: `full_hash(base + j)`.
        let pool = pool_of(&["[::1]:80 weight=2"]);
        let tree = ConsistentTree::build(
            &pool,
            &[259_319_398],
            KeyHash {
                function: Function::Sdbm,
                avalanche: false,
            },
        );
        let keys: Vec<u32> = (0..tree.ring.len()).map(|i| tree.ring.point(i)).collect();
        assert_eq!(keys.len(), 32);
        assert!(keys.contains(&2_924_929_045) && keys.contains(&2_686_005_571));
    }

    #[test]
    fn hash_key_errors_name_the_endpoint_and_what_is_accepted() {
        let err = bases(ServerKey::Addr, &["cache1:80"]).unwrap_err();
        assert_eq!(err.kind(), BuildErrorKind::Endpoint);
        assert_eq!(
            err.to_string(),
            "haproxy_hash: endpoint `cache1:80`: hash_key=addr hashes the server's address: \
             accepted IP:PORT, [IPv6]:PORT or a bare IP (HAProxy hashes the address it \
             resolved, which a name does not give)"
        );
        let long = "g".repeat(128);
        for bad in ["a+b", "é", "x/y", long.as_str()] {
            let endpoint = format!("10.0.0.1:80 hash_key={bad}");
            let err = match bases(ServerKey::Guid, &[endpoint.as_str()]) {
                Err(err) => err.to_string(),
                Ok(_) => panic!("{bad:?} accepted"),
            };
            assert!(
                err.starts_with("haproxy_hash: endpoint `10.0.0.1:80`: hash_key=")
                    && err.ends_with(
                        "is not a guid: accepted 1 to 127 characters of \
                         A-Z a-z 0-9 _ . : - (HAProxy's `guid`)"
                    ),
                "{bad:?}: {err}"
            );
        }
        assert!(bases(
            ServerKey::Guid,
            &[&format!("a hash_key={}", "g".repeat(127))]
        )
        .is_ok());
        let err = bases(ServerKey::Guid, &["b hash_key=x", "c", "d hash_key=x"]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "haproxy_hash: endpoints `b` and `d` both have hash_key=x: guids must be unique"
        );
    }

    #[test]
    fn every_function_is_read() {
        for (text, want, avalanche) in [
            ("", Function::Sdbm, true),
            (" function=sdbm", Function::Sdbm, false),
            (" function=DJB2", Function::Djb2, false),
            (" function=wt6", Function::Wt6, false),
            (" function=crc32 avalanche=true", Function::Crc32, true),
            (" function=none", Function::None, false),
        ] {
            let spec = format!("haproxy_hash:type=consistent{text}");
            let mut params = Params::tokenize(&spec).unwrap();
            let family = HaproxyHash::parse(&mut params).unwrap();
            assert_eq!(
                (family.function, family.avalanche),
                (want, avalanche),
                "{spec}"
            );
        }
    }

    #[test]
    fn hash_key_is_for_the_consistent_tree() {
        let err = "haproxy_hash:hash_key=addr"
            .parse::<crate::PolicySpec>()
            .unwrap_err();
        assert_eq!(err.kind(), ParseErrorKind::Conflict);
        assert_eq!(
            err.to_string(),
            "haproxy_hash: hash_key=addr keys the nodes of HAProxy's consistent tree: \
             accepted with type=consistent only (type=map-based has no nodes)"
        );
        assert_eq!(err.key(), Some("hash_key"));
        let err = "haproxy_hash:type=consistent hash_key=name"
            .parse::<crate::PolicySpec>()
            .unwrap_err();
        assert_eq!(
            err.accepted(),
            Some("id, id32, guid, addr, addr-port, id-3.0")
        );
        for (text, want) in [
            ("id", ServerKey::Id),
            ("ID32", ServerKey::Id32),
            ("guid", ServerKey::Guid),
            ("addr", ServerKey::Addr),
            ("Addr-Port", ServerKey::AddrPort),
            ("id-3.0", ServerKey::HashedId),
        ] {
            let spec = format!("haproxy_hash:type=consistent hash_key={text}");
            let mut params = Params::tokenize(&spec).unwrap();
            assert_eq!(
                HaproxyHash::parse(&mut params).unwrap().server_key,
                want,
                "{text}"
            );
        }
    }

    #[test]
    fn closest_node_ties_go_to_the_node_before() {
        let tree = ConsistentTree {
            ring: Ring::build(vec![(100, 0), (200, 1)], &[0, 1]),
            key_hash: KeyHash {
                function: Function::Sdbm,
                avalanche: false,
            },
        };
        assert_eq!(tree.start(150), 0, "equal distances: prev");
        assert_eq!(tree.start(151), 1);
        assert_eq!(tree.start(149), 0);
        assert_eq!(tree.start(100), 0, "exact hit");
        // Wrapping: 2^32 - 1 is 101 from 100... and 201 from 200 the other way.
        assert_eq!(tree.start(u64::from(u32::MAX)), 0);
        assert_eq!(tree.start(10), 0);
        // Between 200 and 100 (wrapping): closer to 200 below 2^31 + 150.
        assert_eq!(tree.start(u64::from(u32::MAX / 2)), 1);
    }
}
