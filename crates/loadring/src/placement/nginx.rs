//! nginx's `hash` directive of an `upstream` block: `nginx_hash:consistent=true|false`.
//!
//! A service beside (or replacing) an nginx that balances with
//! `hash $key [consistent];` keeps every cache warm only if each key reaches
//! the server nginx sends it to. This is nginx's placement (as of 1.22),
//! endpoints taken in the order given, which must be the order of the
//! `server` lines. A server's name is its endpoint's `hash_key`, else its
//! address exactly as written (nginx hashes the text of the `server` line,
//! not the address it resolves to: write `cache1:11211`, not its IP, if
//! that is what nginx's configuration says). Two endpoints may not share a
//! name. Keys and codes are CRC-32 (zlib's) of the key's bytes; nginx trims
//! the spaces around a header value before hashing it, `loadring` hashes the
//! key it is given.
//!
//! ## `consistent=true` (`hash KEY consistent`, Cache::Memcached::Fast's ring)
//! The name is split at its last `:` when only digits follow (`host`,
//! `port`); otherwise, and for `unix:PATH`, the port is empty and the host
//! the whole name (the path). A server of weight `w` gets `160 * w` points:
//! starting from `prev = 0`, each point is
//! `crc32(host + "\0" + port + LE32(prev))` and becomes the next `prev`.
//! Points are sorted (equal points: the earlier server first) and each point
//! equal to the one before it is dropped. A key goes to the first point at
//! or after its CRC-32, wrapping. An unhealthy or excluded endpoint's keys
//! walk on point by point (nginx stops after 20 points and falls back to
//! round robin; walking on agrees with it whenever one of those points
//! belongs to an available server, and stays deterministic).
//!
//! ## `consistent=false` (`hash KEY`, Cache::Memcached's modulo)
//! `h = (crc32(key) >> 16) & 0x7fff`; the key goes to the server whose
//! range of weight `[c_i, c_i + w_i)` (in endpoint order) holds
//! `h % total_weight`. When that server is unhealthy or excluded, nginx's
//! re-hash is followed exactly: try `n` = 1, 2, ... 20 adds
//! `(crc32(decimal(n) + key) >> 16) & 0x7fff` to the running `h` and takes
//! the server at `h % total_weight`; after 20 tries, round robin (weighted,
//! from a counter shared by the policy's picks) among the available
//! endpoints. A request given as a code (the key's CRC-32) has no key to
//! re-hash: it goes round robin at once if its server is unavailable.
//! nginx serves requests whose key is empty round robin; `loadring` places
//! the empty key like any other.
//!
//! ## Bounded load (`load_factor=` / `balance=`)
//! The generic cap. `consistent=true` walks the ring from the key's point;
//! `consistent=false` walks the re-hash sequence (the natural server, then
//! tries 1..=20), then every endpoint in order from the natural one; the
//! first available endpoint below its cap takes the request, else the least
//! loaded available one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use crate::describe::Layout;
use crate::echo::Echo;
use crate::error::{BuildError, BuildErrorKind, ParseError, PickError};
use crate::hash::{crc32, crc32_update, CRC32_INIT};
use crate::inflight::fleet_view::FleetView;
use crate::inflight::pool::Pool;
use crate::placement::hashing::{HashingPolicy, RingKeyHash, RingPlacement, Scheme};
use crate::placement::ring::Ring;
use crate::policy::{check_pool, none_eligible, Order, Picker, Policy};
use crate::request::{Hash, Request};
use crate::util::bounded::LoadFactor;
use crate::util::params::Params;

type Result<T, E = BuildError> = std::result::Result<T, E>;

/// The policy name.
const NAME: &str = "nginx_hash";
/// Points per unit of weight on nginx's consistent ring.
const POINTS_PER_WEIGHT: u64 = 160;
/// nginx's re-hash tries after the first choice (`hp->tries > 20`).
const REHASH_TRIES: u32 = 20;
/// nginx's ring of points is bounded like every other ring here.
const MAX_POINTS: u64 = crate::placement::MAX_RING_POINTS;

/// The parameters of `nginx_hash`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NginxHash {
    pub(crate) consistent: bool,
}

impl NginxHash {
    pub(crate) fn parse(params: &mut Params<'_>) -> Result<Self, ParseError> {
        Ok(NginxHash {
            consistent: params.take_bool("consistent", false)?,
        })
    }
}

/// `nginx_hash`, parsed: `bound` is `load_factor=`/`balance=`, or `default`.
pub(crate) fn policy(
    params: &mut Params<'_>,
    default: Option<LoadFactor>,
) -> Result<Arc<dyn Policy>, ParseError> {
    let family = NginxHash::parse(params)?;
    let bound = params.take_bound()?.or(default);
    Ok(if family.consistent {
        Arc::new(HashingPolicy::new(ConsistentRing, bound))
    } else {
        Arc::new(ModuloPolicy { bound })
    })
}

/// `consistent=true` as a scheme.
#[derive(Debug)]
struct ConsistentRing;

impl Scheme for ConsistentRing {
    type Placement = RingPlacement<u32>;

    fn name(&self) -> &'static str {
        NAME
    }

    fn size(&self, pool: &Pool) -> u64 {
        pool.weight_sum().saturating_mul(POINTS_PER_WEIGHT)
    }

    fn place(&self, pool: &Pool) -> Result<RingPlacement<u32>> {
        check_unique_names(pool)?;
        consistent_ring(pool)
    }
}

/// `consistent=false`: builds a [`NginxModulo`] per membership.
#[derive(Debug)]
struct ModuloPolicy {
    bound: Option<LoadFactor>,
}

impl Policy for ModuloPolicy {
    fn name(&self) -> &str {
        NAME
    }

    fn build(&self, pool: Pool) -> Result<Arc<dyn Picker>> {
        check_unique_names(&pool)?;
        Ok(Arc::new(NginxModulo::new(pool, self.bound)?))
    }

    fn needs_key(&self) -> bool {
        true
    }

    fn load_factor(&self) -> Option<LoadFactor> {
        self.bound
    }
}

fn check_unique_names(pool: &Pool) -> Result<()> {
    let mut seen: HashMap<&str, &str> = HashMap::with_capacity(pool.len());
    for e in pool.endpoints() {
        if let Some(first) = seen.insert(e.hash_name(), e.addr()) {
            return Err(BuildError::new(
                BuildErrorKind::Endpoint,
                format!(
                    "{NAME}: endpoints `{}` and `{}` are both named `{}`: give each its own \
                 hash_key (nginx would share that name's keys between them)",
                    Echo(first),
                    Echo(e.addr()),
                    Echo(e.hash_name())
                ),
            ));
        }
    }
    Ok(())
}

/// nginx's `host` and `port` of a server name (`ngx_http_upstream_init_chash`).
pub(crate) fn host_and_port(name: &str) -> (&str, &str) {
    let bytes = name.as_bytes();
    if bytes.len() >= 5 && bytes[..5].eq_ignore_ascii_case(b"unix:") {
        return (&name[5..], "");
    }
    for (i, &c) in bytes.iter().enumerate().rev() {
        if c == b':' {
            return (&name[..i], &name[i + 1..]);
        }
        if !c.is_ascii_digit() {
            break;
        }
    }
    (name, "")
}

/// The consistent ring: `160 * weight` chained CRC-32 points per server,
/// sorted, equal points after the first dropped.
fn consistent_ring(pool: &Pool) -> Result<RingPlacement<u32>> {
    let points: u64 = pool.weight_sum().saturating_mul(POINTS_PER_WEIGHT);
    if points > MAX_POINTS {
        return Err(BuildError::too_large(format!(
            "{NAME}: weights summing to {} make {points} points, more than the limit of {MAX_POINTS}",
            pool.weight_sum()
        )));
    }
    let mut entries: Vec<(u32, u32)> = Vec::with_capacity(points as usize);
    for (owner, e) in pool.endpoints().iter().enumerate() {
        let (host, port) = host_and_port(e.hash_name());
        let mut base = crc32_update(CRC32_INIT, host.as_bytes());
        base = crc32_update(base, b"\0");
        base = crc32_update(base, port.as_bytes());
        let mut prev: u32 = 0;
        for _ in 0..u64::from(e.weight()) * POINTS_PER_WEIGHT {
            let point = !crc32_update(base, &prev.to_le_bytes());
            entries.push((point, owner as u32));
            prev = point;
        }
    }
    // Equal points: the earlier server first, then only the first is kept.
    entries.sort_unstable();
    entries.dedup_by_key(|e| e.0);
    let rank: Vec<u32> = (0..pool.len() as u32).collect();
    Ok(RingPlacement {
        name: NAME,
        ring: Ring::build(entries, &rank),
        key_hash: RingKeyHash::Other(|k| u64::from(crc32(k))),
        weighs: true,
    })
}

/// nginx's 15-bit hash of a key (or of a re-hash try's text).
#[inline]
fn short_hash(crc: u32) -> u32 {
    (crc >> 16) & 0x7fff
}

/// `consistent=false`: nginx's weighted modulo with its re-hash sequence.
#[derive(Debug)]
pub(crate) struct NginxModulo {
    pool: Pool,
    /// `ends[i]` = the sum of the weights of endpoints `0..=i`.
    ends: Vec<u64>,
    bound: Option<LoadFactor>,
    /// The round robin that follows 20 failed re-hash tries.
    round_robin: AtomicU64,
}

/// The servers nginx tries for one request, in order: the natural one, then
/// the re-hash tries (only with a key).
struct Tries<'a> {
    modulo: &'a NginxModulo,
    key: Option<&'a [u8]>,
    acc: u32,
    next_try: u32,
}

impl Iterator for Tries<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        if self.next_try > REHASH_TRIES {
            return None;
        }
        let n = self.next_try;
        self.next_try += 1;
        if n > 0 {
            let key = self.key?;
            // crc32(decimal(n) + key), the digits hashed first (n <= 20).
            let digits = [b'0' + (n / 10) as u8, b'0' + (n % 10) as u8];
            let digits = if n < 10 { &digits[1..] } else { &digits[..] };
            let state = crc32_update(CRC32_INIT, digits);
            let crc = !crc32_update(state, key);
            self.acc = self.acc.wrapping_add(short_hash(crc));
        }
        Some(self.modulo.server_at(self.acc))
    }
}

impl NginxModulo {
    fn new(pool: Pool, bound: Option<LoadFactor>) -> Result<Self> {
        check_pool(&pool)?;
        let ends = pool
            .endpoints()
            .iter()
            .scan(0u64, |sum, e| {
                *sum += u64::from(e.weight());
                Some(*sum)
            })
            .collect();
        Ok(NginxModulo {
            pool,
            ends,
            bound,
            round_robin: AtomicU64::new(0),
        })
    }

    fn total_weight(&self) -> u64 {
        self.pool.weight_sum()
    }

    /// The endpoint whose weight range holds `h % total_weight`.
    #[inline]
    fn server_at(&self, h: u32) -> usize {
        let w = u64::from(h) % self.total_weight();
        self.ends.partition_point(|&end| end <= w)
    }

    /// The key's CRC-32 (its code) and the key itself when there is one.
    fn code<'r>(&self, req: &Request<'r>) -> Result<(u32, Option<&'r [u8]>), PickError> {
        match req.hash {
            Hash::Key(key) => Ok((crc32(key), Some(key))),
            Hash::Code(code) => match u32::try_from(code) {
                Ok(code) => Ok((code, None)),
                Err(_) => Err(PickError::code_out_of_range(
                    code,
                    NAME,
                    u64::from(u32::MAX),
                )),
            },
            Hash::None => Err(PickError::missing_key(NAME)),
        }
    }

    fn tries<'a>(&'a self, crc: u32, key: Option<&'a [u8]>) -> Tries<'a> {
        Tries {
            modulo: self,
            key,
            acc: short_hash(crc),
            next_try: 0,
        }
    }

    /// nginx's fallback: weighted round robin, the first available endpoint
    /// from the counter's position on.
    fn round_robin(&self, req: &Request<'_>) -> Option<usize> {
        let turn = self.round_robin.fetch_add(1, Relaxed) % self.total_weight();
        let from = self.ends.partition_point(|&end| end <= turn);
        let n = self.pool.len();
        (0..n)
            .map(|k| (from + k) % n)
            .find(|&i| self.pool.eligible(i, req))
    }

    /// Every endpoint in order from `from`, wrapping.
    fn in_order(&self, from: usize) -> impl Iterator<Item = usize> + '_ {
        let n = self.pool.len();
        (0..n).map(move |k| (from + k) % n)
    }

    /// The order of preference: nginx's tries (the natural server, then
    /// the re-hash tries when there is a key), then every endpoint in order
    /// from the natural one.
    fn order<'a>(&'a self, crc: u32, key: Option<&'a [u8]>) -> impl Iterator<Item = usize> + 'a {
        let natural = self.server_at(short_hash(crc));
        self.tries(crc, key).chain(self.in_order(natural))
    }

    /// The generic cap of endpoint `i` with `total` in flight.
    fn cap_at(&self, view: &FleetView<'_>, factor: LoadFactor, total: u64, i: usize) -> u64 {
        view.cap(factor, total, i)
    }

    /// Reserves a slot on `i` under its cap at `total` (reported loads
    /// only tighten it: [`FleetView::try_reserve_bounded`]).
    fn try_reserve_under(
        &self,
        view: &FleetView<'_>,
        factor: LoadFactor,
        total: u64,
        i: usize,
    ) -> bool {
        view.try_reserve_bounded(i, self.cap_at(view, factor, total, i), factor)
    }

    fn pick_bounded(
        &self,
        crc: u32,
        key: Option<&[u8]>,
        req: &Request<'_>,
        factor: LoadFactor,
    ) -> Result<usize, PickError> {
        let view = FleetView::new(&self.pool, req.at);
        let mut total = None;
        for i in self.order(crc, key) {
            if !self.pool.eligible(i, req) {
                continue;
            }
            let total = *total.get_or_insert_with(|| view.total_load());
            if self.try_reserve_under(&view, factor, total, i) {
                return Ok(i);
            }
        }
        let least = (0..self.pool.len())
            .filter(|&i| self.pool.eligible(i, req))
            .min_by_key(|&i| view.load(i));
        match least {
            Some(i) => Ok(self.pool.take(i)),
            None => Err(none_eligible(&self.pool)),
        }
    }
}

impl Picker for NginxModulo {
    fn pool(&self) -> &Pool {
        &self.pool
    }

    fn pick(&self, req: &Request<'_>) -> Result<usize, PickError> {
        let (crc, key) = self.code(req)?;
        if let Some(factor) = self.bound {
            return self.pick_bounded(crc, key, req, factor);
        }
        let chosen = self
            .tries(crc, key)
            .find(|&i| self.pool.eligible(i, req))
            .or_else(|| self.round_robin(req));
        match chosen {
            Some(i) => Ok(self.pool.take(i)),
            None => Err(none_eligible(&self.pool)),
        }
    }

    fn candidates(self: Arc<Self>, req: &Request<'_>) -> Result<Order, PickError> {
        let (crc, key) = self.code(req)?;
        let order: Vec<usize> = self.order(crc, key).collect();
        Ok(Box::new(order.into_iter()))
    }

    fn try_reserve(&self, i: usize) -> bool {
        let view = FleetView::new(&self.pool, None);
        match self.bound {
            Some(factor) => self.try_reserve_under(&view, factor, view.total_load(), i),
            None => {
                self.pool.reserve(i);
                true
            }
        }
    }

    fn route(&self, req: &Request<'_>) -> Option<Result<usize, PickError>> {
        Some(self.code(req).and_then(|(crc, key)| {
            self.order(crc, key)
                .find(|&i| self.pool.eligible(i, req))
                .ok_or_else(|| none_eligible(&self.pool))
        }))
    }

    fn cap(&self, i: usize) -> Option<u64> {
        let view = FleetView::new(&self.pool, None);
        Some(self.cap_at(&view, self.bound?, view.total_load(), i))
    }

    fn layout(&self) -> Option<Layout> {
        // Exact: the 32768 values of the 15-bit hash, each to its server.
        let mut shares = vec![0.0; self.pool.len()];
        for h in 0..=0x7fffu32 {
            shares[self.server_at(h)] += 1.0 / 32768.0;
        }
        Some(Layout::new(
            self.pool.endpoints(),
            shares,
            self.total_weight() as usize,
            "slots",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_split_like_nginx() {
        assert_eq!(host_and_port("127.0.0.1:9001"), ("127.0.0.1", "9001"));
        assert_eq!(host_and_port("cache1"), ("cache1", ""));
        assert_eq!(host_and_port("cache1:"), ("cache1", ""));
        assert_eq!(host_and_port("[::1]:80"), ("[::1]", "80"));
        assert_eq!(host_and_port("web:abc"), ("web:abc", ""));
        assert_eq!(host_and_port("unix:/tmp/a.sock"), ("/tmp/a.sock", ""));
        assert_eq!(host_and_port("UNIX:/tmp/a.sock"), ("/tmp/a.sock", ""));
        assert_eq!(host_and_port("12345"), ("12345", ""));
    }

    #[test]
    fn short_hash_is_fifteen_bits() {
        assert_eq!(short_hash(0xcbf4_3926), 0x4bf4);
        assert_eq!(short_hash(u32::MAX), 0x7fff);
    }
}
