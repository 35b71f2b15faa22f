//! memcached's ketama continua: `ketama:compat=libketama|libmemcached|libmemcached_spy`.
//!
//! A service that shares a memcached pool with PHP, Python or C clients must
//! put every key on the server they put it on, or it reads misses and writes
//! duplicates. Each variant here is the continuum of one client library, down
//! to its float32 arithmetic:
//!
//! - `libketama` (last.fm's C library): a server of weight `w` among `n`
//!   servers of total weight `W` gets `floorf(f32(w/W) * 40.0 * n)` MD5
//!   digests (the product in f64, then rounded to f32), digest `k` hashing
//!   `"<addr>-<k>"` with the address exactly as written.
//! - `libmemcached` (`MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED`): the same idea with
//!   every step in f32, `floor(f32(f32(f32(pct*160)/4)*n) + 1e-10) * 4` points,
//!   so weights 1,1,1,10,12 give 7,7,7,80,95 digests where exact arithmetic
//!   gives 8,8,8,80,96; names `"<host>:<port>-<i>"`, but `"<host>-<i>"` when the
//!   port is 11211.
//! - `libmemcached_spy` (`MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA_SPY`):
//!   as `libmemcached`, names `"/<host>:<port>-<i>"` (port always written).
//! - `weighted=false` (libmemcached's plain `MEMCACHED_BEHAVIOR_KETAMA`, both
//!   libmemcached variants): 100 names per server whatever its weight, ONE
//!   point per name, names and keys hashed with `hash=` (`one_at_a_time`, the
//!   libmemcached default, or `md5`).
//!
//! Every weighted variant takes four points per digest, `LE32(d[4j..4j+4])`,
//! and hashes keys to `LE32(md5(key)[0..4])`. Equal points go to the server
//! listed first. Request codes are u32.
//!
//! ## Addresses
//! Point names are built from the endpoint's `hash_key` when it has one, else
//! its address (set `hash_key` to the name the other clients were configured
//! with, e.g. `cache1.example.com:11211` when this service connects by IP).
//! `libketama` uses that text as is: its server file has no notion of a
//! default port. The libmemcached variants split it into host and port the way
//! libmemcached holds a server: `HOST:PORT`; `HOST` alone or a bare IPv6
//! address (two or more colons, no brackets) has libmemcached's default port
//! 11211; `[V6]:PORT` and `[V6]` drop the brackets (libmemcached keeps the
//! bare address as the host name); `unix:PATH` is a Unix-socket server, whose
//! host is the path and port 0 (from libmemcached's source; not observed on a
//! live client). Anything else (`web:abc`, port 0) is an error.
//!
//! ## Weight 0
//! libmemcached turns a weight of 0 into 1, so no client shares our meaning of
//! 0 ("drain this server"). An endpoint of weight 0 here is as if absent: no
//! points, and not counted in `n` or `W`, so draining a server places every
//! key exactly as the other clients do once it is removed from their lists.
//! With `weighted=false` every other weight is ignored by the continuum (as in
//! libmemcached) but still sets the endpoint's cap under a load bound.
//!
//! **Cost.** A pick hashes the key and finds its point (a bucket index, then
//! a search among a few points). Slow path: when the owner is unhealthy or
//! excluded (or, under a load bound, full), the pick walks points clockwise,
//! skipping runs of one endpoint in one step, until an eligible (non-full)
//! endpoint: `O(entries)` in the worst case (about `160 * n` points for the
//! weighted continua, `100 * n` with `weighted=false`), e.g. one eligible
//! endpoint among many; under a load bound, when nobody eligible has room,
//! one more `O(n)` pass finds the least-loaded endpoint.

use crate::echo::Echo;
use crate::error::{BuildError, BuildErrorKind, ParseError, ParseErrorKind};
use crate::hash::{md5_le32, md5_words, one_at_a_time, point_name};
use crate::inflight::pool::Pool;
use crate::placement::hashing::{RingKeyHash, RingPlacement, Scheme};
use crate::placement::ring::Ring;
use crate::placement::{check_hashed_names, MAX_RING_POINTS};
use crate::util::params::Params;

/// libmemcached's `MEMCACHED_DEFAULT_PORT`, the port its names leave out.
const DEFAULT_PORT: u16 = 11211;
/// libmemcached's `MEMCACHED_POINTS_PER_SERVER` (unweighted continuum).
const UNWEIGHTED_POINTS: u64 = 100;

/// Which client library's continuum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Compat {
    Libketama,
    Libmemcached,
    LibmemcachedSpy,
}

/// The hash of names and keys in libmemcached's unweighted continuum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeyHash {
    Md5,
    OneAtATime,
}

/// Parameters of a ketama continuum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ketama {
    pub(crate) compat: Compat,
    pub(crate) weighted: bool,
    /// Only for `weighted == false`; weighted continua always use MD5.
    pub(crate) hash: KeyHash,
}

impl Ketama {
    pub(crate) fn parse(params: &mut Params<'_>) -> Result<Self, ParseError> {
        let policy = params.policy().to_ascii_lowercase();
        let compat = match params.take_choice(
            "compat",
            &["libketama", "libmemcached", "libmemcached_spy"],
            "libmemcached",
        )? {
            "libketama" => Compat::Libketama,
            "libmemcached" => Compat::Libmemcached,
            _ => Compat::LibmemcachedSpy,
        };
        let weighted = params.take_bool("weighted", true)?;
        if compat == Compat::Libketama && !weighted {
            return Err(ParseError::new(
 ParseErrorKind::Conflict, format!(
                "{policy}: weighted=false is libmemcached's unweighted continuum and has no \
                 libketama counterpart (libketama always weights servers by memory): use \
                 compat=libmemcached weighted=false, or equal endpoint weights with compat=libketama"
            ))
            .with_policy(&policy)
            .with_key("weighted")
            .with_value("false")
            .with_accepted("true"));
        }
        if params.has("hash") && weighted {
            let value = params.take("hash").unwrap_or_default();
            let variant = match compat {
                Compat::Libketama => "compat=libketama",
                Compat::Libmemcached | Compat::LibmemcachedSpy => "weighted ketama",
            };
            return Err(ParseError::new(
                ParseErrorKind::Conflict,
                format!(
                    "{policy}: hash={} only applies with weighted=false (a libmemcached variant): \
                 {variant} hashes point names and keys with md5",
                    Echo(value)
                ),
            )
            .with_policy(&policy)
            .with_key("hash")
            .with_value(value)
            .with_accepted("weighted=false"));
        }
        let hash = match params.take_choice("hash", &["md5", "one_at_a_time"], "one_at_a_time")? {
            "md5" => KeyHash::Md5,
            _ => KeyHash::OneAtATime,
        };
        Ok(Ketama {
            compat,
            weighted,
            hash,
        })
    }

    pub(crate) fn name(&self) -> &'static str {
        "ketama"
    }

    /// The text point names start with (`"<prefix>-<i>"`) for a server.
    fn prefix(&self, name: &str) -> Result<String, BuildError> {
        if self.compat == Compat::Libketama {
            return Ok(name.to_string());
        }
        let (host, port) = host_port(name)?;
        Ok(match self.compat {
            Compat::LibmemcachedSpy => format!("/{host}:{port}"),
            _ if port == DEFAULT_PORT => host.to_string(),
            _ => format!("{host}:{port}"),
        })
    }

    /// How many names each endpoint hashes (digests when weighted, points when
    /// not); 0 for endpoints of weight 0, which take no part.
    fn names_per_endpoint(&self, pool: &Pool) -> Vec<u64> {
        let servers = pool.weighted_len();
        // More servers than u32 cannot exist in a pool (and no C client has them).
        let servers = u32::try_from(servers).unwrap_or(u32::MAX);
        let total = pool.weight_sum();
        pool.endpoints()
            .iter()
            .map(|e| match (e.weight(), self.weighted, self.compat) {
                (0, _, _) => 0,
                (_, false, _) => UNWEIGHTED_POINTS,
                (w, true, Compat::Libketama) => u64::from(libketama_digests(w, total, servers)),
                (w, true, _) => u64::from(libmemcached_digests(w, total, servers)),
            })
            .collect()
    }

    /// Builds the continuum over `pool` in one batch and one sort.
    fn build(&self, pool: &Pool) -> Result<RingPlacement<u32>, BuildError> {
        let prefixes = pool
            .endpoints()
            .iter()
            .map(|e| self.prefix(e.hash_name()))
            .collect::<Result<Vec<_>, _>>()?;
        let names = self.names_per_endpoint(pool);
        let per_name = if self.weighted { 4 } else { 1 };
        let points: u64 = names.iter().sum::<u64>() * per_name;
        if points > MAX_RING_POINTS {
            return Err(BuildError::too_large(format!(
                "{}: {} endpoints make {points} points, more than the limit of {MAX_RING_POINTS}",
                self.name(),
                pool.len()
            )));
        }
        check_hashed_names(
            self.name(),
            names
                .iter()
                .zip(&prefixes)
                .zip(pool.endpoints())
                .map(|((&count, prefix), e)| (count, prefix.as_str(), e)),
        )?;
        let point_hash = self.key_hash();
        let mut entries: Vec<(u32, u32)> = Vec::with_capacity(points as usize);
        let mut buf = Vec::with_capacity(64);
        for (owner, (prefix, &count)) in prefixes.iter().zip(&names).enumerate() {
            let owner = owner as u32;
            for i in 0..count {
                let name = point_name(&mut buf, prefix, b'-', i);
                if self.weighted {
                    entries.extend(md5_words(name).iter().map(|&p| (p, owner)));
                } else {
                    // Key hashes here are u32 widened: narrowing is exact.
                    entries.push((point_hash(name) as u32, owner));
                }
            }
        }
        // libmemcached sorts equal points by server index; libketama's order of
        // equal points is its qsort's, and no vector shows one differing.
        let rank: Vec<u32> = (0..pool.len() as u32).collect();
        Ok(RingPlacement {
            name: self.name(),
            ring: Ring::build(entries, &rank),
            key_hash: RingKeyHash::Other(point_hash),
            // libmemcached's unweighted continuum: 100 points per server.
            weighs: self.weighted,
        })
    }

    /// The hash of keys (and of unweighted point names).
    fn key_hash(&self) -> fn(&[u8]) -> u64 {
        match (self.weighted, self.hash) {
            (false, KeyHash::OneAtATime) => |k| u64::from(one_at_a_time(k)),
            _ => |k| u64::from(md5_le32(k)),
        }
    }
}

impl Scheme for Ketama {
    type Placement = RingPlacement<u32>;

    fn name(&self) -> &'static str {
        Ketama::name(self)
    }

    fn size(&self, pool: &Pool) -> u64 {
        let per_name = if self.weighted { 4 } else { 1 };
        self.names_per_endpoint(pool).iter().sum::<u64>() * per_name
    }

    fn place(&self, pool: &Pool) -> Result<RingPlacement<u32>, BuildError> {
        self.build(pool)
    }
}

/// libketama's digest count: `floorf(pct * 40.0 * (float)n)` with
/// `pct = (float)w / (float)W`. The product is computed in f64 (the literal
/// `40.0` is a double) and rounded to f32 by `floorf`'s parameter.
pub(crate) fn libketama_digests(weight: u32, total: u64, servers: u32) -> u32 {
    let pct = weight as f32 / total as f32;
    let product = f64::from(pct) * 40.0 * f64::from(servers as f32);
    (product as f32).floor() as u32
}

/// libmemcached's digest count (its points divided by 4):
/// `floor((float)(pct * 160 / 4 * (float)n + 0.0000000001))`, `pct` as
/// libketama's. Every step but the last addition is f32; that one is f64 in
/// C (a double literal), but adding 1e-10 and rounding back to f32 cannot move
/// a positive f32 across an integer, so it equals the same expression in f32 throughout.
pub(crate) fn libmemcached_digests(weight: u32, total: u64, servers: u32) -> u32 {
    let pct = weight as f32 / total as f32;
    let t = pct * 160.0 / 4.0 * servers as f32;
    ((f64::from(t) + 1e-10) as f32).floor() as u32
}

/// The host and port libmemcached holds for a server written as `name`.
fn host_port(name: &str) -> Result<(&str, u16), BuildError> {
    let bad = |why: String| {
        BuildError::new(
            BuildErrorKind::Endpoint,
            format!(
                "ketama: endpoint `{}`: {why} (libmemcached names servers by HOST, HOST:PORT, \
             [IPv6]:PORT or unix:PATH)",
                Echo(name)
            ),
        )
    };
    let port = |text: &str| match text.parse::<u16>() {
        Ok(p) if p > 0 && text.bytes().all(|b| b.is_ascii_digit()) => Ok(p),
        _ => Err(bad(format!(
            "port `{}` is not a number in 1..=65535",
            Echo(text)
        ))),
    };
    if let Some(path) = name.strip_prefix("unix:") {
        return if path.is_empty() {
            Err(bad("the socket path is empty".into()))
        } else {
            Ok((path, 0))
        };
    }
    if let Some(rest) = name.strip_prefix('[') {
        let Some((host, after)) = rest.split_once(']') else {
            return Err(bad("`[` without a closing `]`".into()));
        };
        if host.is_empty() {
            return Err(bad("the IPv6 address in brackets is empty".into()));
        }
        return match after {
            "" => Ok((host, DEFAULT_PORT)),
            _ => match after.strip_prefix(':') {
                Some(p) => Ok((host, port(p)?)),
                None => Err(bad(format!("`{}` after `]` is not `:PORT`", Echo(after)))),
            },
        };
    }
    match name.matches(':').count() {
        0 => Ok((name, DEFAULT_PORT)),
        1 => {
            // One colon: split_once cannot fail.
            let (host, p) = name.split_once(':').unwrap_or((name, ""));
            if host.is_empty() {
                return Err(bad("the host before `:` is empty".into()));
            }
            Ok((host, port(p)?))
        }
        // A bare IPv6 address: libmemcached's default port.
        _ => Ok((name, DEFAULT_PORT)),
    }
}

#[cfg(test)]
mod tests {
    use std::fmt::Write as _;

    use md5::{Digest, Md5};

    use super::*;
    use crate::hash::md5;
    use crate::placement::hashing::Placement;
    use crate::PolicySpec;

    fn ketama(spec: &str) -> Ketama {
        let mut params = crate::util::params::Params::tokenize(spec).unwrap();
        let ketama = Ketama::parse(&mut params).unwrap();
        params.finish().unwrap();
        ketama
    }

    fn pool(endpoints: &[&str]) -> Pool {
        Pool::for_test(endpoints.iter().map(|e| e.parse().unwrap()).collect())
    }

    const LIBKETAMA_SERVERS: [&str; 8] = [
        "10.0.1.1:11211 weight=600",
        "10.0.1.2:11211 weight=300",
        "10.0.1.3:11211 weight=200",
        "10.0.1.4:11211 weight=350",
        "10.0.1.5:11211 weight=1000",
        "10.0.1.6:11211 weight=800",
        "10.0.1.7:11211 weight=950",
        "10.0.1.8:11211 weight=100",
    ];

    /// libketama's own test (`ketama_test` piped through `md5sum`): an empty
    /// line (its `ketama_error()`, empty on success), then for keys "0" ..
    /// "999999" the line `"<key hash> <chosen point> <server>"`, all decimal.
    #[test]
    fn libketama_checksum_over_a_million_keys() {
        let pool = pool(&LIBKETAMA_SERVERS);
        let ring = ketama("ketama:compat=libketama").build(&pool).unwrap();
        let mut digest = Md5::new();
        digest.update(b"\n");
        let mut key = String::with_capacity(8);
        let mut line = String::with_capacity(64);
        for k in 0..1_000_000u32 {
            key.clear();
            write!(key, "{k}").unwrap();
            let hash = ring.key_code(key.as_bytes());
            let entry = ring.start(hash);
            let addr = pool.endpoint(ring.owner(entry)).addr();
            line.clear();
            writeln!(line, "{hash} {} {addr}", ring.ring.point(entry)).unwrap();
            digest.update(line.as_bytes());
        }
        let hex: String = digest
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(hex, "5672b131391f5aa2b280936aec1eea74");
    }

    fn counts(f: fn(u32, u64, u32) -> u32, weights: &[u32]) -> Vec<u32> {
        let total = weights.iter().map(|&w| u64::from(w)).sum();
        weights
            .iter()
            .map(|&w| f(w, total, weights.len() as u32))
            .collect()
    }

    #[test]
    fn float32_steps_lose_digests_in_libmemcached_only() {
        let weights = [1, 1, 1, 10, 12];
        // Exact: floor(w / W * 40 * n) in integers.
        let exact: Vec<u32> = weights.iter().map(|&w| w * 40 * 5 / 25).collect();
        assert_eq!(exact, [8, 8, 8, 80, 96]);
        // compat.md; also what libmemcached's and libketama's expressions give
        // compiled with gcc on x86-64.
        assert_eq!(counts(libmemcached_digests, &weights), [7, 7, 7, 80, 95]);
        assert_eq!(counts(libketama_digests, &weights), [8, 8, 8, 80, 96]);
        // ... because libketama rounds its f64 product to f32 before flooring:
        // 0.04f * 40.0 * 5 = 7.99999982 in f64 rounds to 8.0f.
        assert_eq!((f64::from(1f32 / 25f32) * 40.0 * 5.0).floor(), 7.0);

        let endpoints: Vec<String> = weights
            .iter()
            .enumerate()
            .map(|(i, w)| format!("10.0.0.{i}:11211 weight={w}"))
            .collect();
        let endpoints: Vec<&str> = endpoints.iter().map(String::as_str).collect();
        let pool = pool(&endpoints);
        let memcached = ketama("ketama").build(&pool).unwrap();
        assert_eq!(memcached.entries(), 4 * (7 + 7 + 7 + 80 + 95));
        let libketama = ketama("ketama:compat=libketama").build(&pool).unwrap();
        assert_eq!(libketama.entries(), 4 * (8 + 8 + 8 + 80 + 96));
    }

    #[test]
    fn libketama_test_servers_digest_counts() {
        // libketama's expression compiled with gcc over its ketama.servers.
        let weights = [600, 300, 200, 350, 1000, 800, 950, 100];
        assert_eq!(
            counts(libketama_digests, &weights),
            [44, 22, 14, 26, 74, 59, 70, 7]
        );
        // Weights 1,2,3: libmemcached's 160 points per server on average.
        assert_eq!(counts(libmemcached_digests, &[1, 2, 3]), [20, 40, 60]);
    }

    /// The points a server contributes, sorted, recomputed from its names.
    fn points_of(ring: &RingPlacement<u32>, owner: usize) -> Vec<u32> {
        let mut points: Vec<u32> = (0..ring.entries())
            .filter(|&i| ring.owner(i) == owner)
            .map(|i| ring.ring.point(i))
            .collect();
        points.sort_unstable();
        points
    }

    fn md5_points(names: impl IntoIterator<Item = String>) -> Vec<u32> {
        let mut points: Vec<u32> = names
            .into_iter()
            .flat_map(|n| {
                let d = md5(n.as_bytes());
                (0..4).map(move |j| {
                    u32::from_le_bytes([d[4 * j], d[4 * j + 1], d[4 * j + 2], d[4 * j + 3]])
                })
            })
            .collect();
        points.sort_unstable();
        points
    }

    #[test]
    fn point_names_follow_each_library() {
        // Two servers of equal weight: 40 digests each in every weighted variant.
        let cases: [(&str, &str, [&str; 2]); 6] = [
            ("compat=libketama", "a:11211", ["a:11211-", "b:5000-"]),
            ("compat=libmemcached", "a:11211", ["a-", "b:5000-"]),
            (
                "compat=libmemcached_spy",
                "a:11211",
                ["/a:11211-", "/b:5000-"],
            ),
            ("compat=libketama", "a", ["a-", "b:5000-"]),
            ("compat=libmemcached", "a", ["a-", "b:5000-"]),
            ("compat=libmemcached_spy", "a", ["/a:11211-", "/b:5000-"]),
        ];
        for (params, first, prefixes) in cases {
            let ring = ketama(&format!("ketama:{params}"))
                .build(&pool(&[first, "b:5000"]))
                .unwrap();
            for (owner, prefix) in prefixes.iter().enumerate() {
                let want = md5_points((0..40).map(|k| format!("{prefix}{k}")));
                assert_eq!(points_of(&ring, owner), want, "{params} {first}: {prefix}");
            }
        }
    }

    #[test]
    fn hash_key_names_the_server() {
        let ring = ketama("ketama")
            .build(&pool(&["10.0.0.9:11211 hash_key=cache1:11211"]))
            .unwrap();
        let want = md5_points((0..40).map(|k| format!("cache1-{k}")));
        assert_eq!(points_of(&ring, 0), want);
    }

    #[test]
    fn addresses_split_like_libmemcached() {
        let cases = [
            ("10.0.0.1:11211", ("10.0.0.1", 11211)),
            ("10.0.0.1:80", ("10.0.0.1", 80)),
            ("cache1", ("cache1", 11211)),
            ("[::1]:11211", ("::1", 11211)),
            ("[::1]:5000", ("::1", 5000)),
            ("[fe80::1]", ("fe80::1", 11211)),
            ("fe80::1", ("fe80::1", 11211)),
            ("unix:/run/memcached.sock", ("/run/memcached.sock", 0)),
        ];
        for (name, want) in cases {
            assert_eq!(host_port(name).unwrap(), want, "{name}");
        }
        let k = ketama("ketama");
        assert_eq!(k.prefix("[::1]:11211").unwrap(), "::1");
        assert_eq!(k.prefix("[::1]:5000").unwrap(), "::1:5000");
        assert_eq!(k.prefix("unix:/s").unwrap(), "/s:0");
        let spy = ketama("ketama:compat=libmemcached_spy");
        assert_eq!(spy.prefix("[::1]").unwrap(), "/::1:11211");
        let libketama = ketama("ketama:compat=libketama");
        assert_eq!(libketama.prefix("[::1]:11211").unwrap(), "[::1]:11211");
        assert_eq!(libketama.prefix("web:abc").unwrap(), "web:abc");

        let bad = [
            ("web:abc", "port `abc` is not a number in 1..=65535"),
            ("web:0", "port `0`"),
            ("web:65536", "port `65536`"),
            ("web:+80", "port `+80`"),
            (":11211", "the host before `:` is empty"),
            ("[::1", "without a closing `]`"),
            ("[::1]x", "`x` after `]` is not `:PORT`"),
            ("[]:80", "brackets is empty"),
            ("unix:", "socket path is empty"),
        ];
        for (name, want) in bad {
            let got = host_port(name).unwrap_err().to_string();
            assert!(got.contains(want), "{name}: {got}");
            assert!(got.contains(&format!("`{name}`")), "{name}: {got}");
        }
    }

    #[test]
    fn unweighted_is_100_single_points_per_server() {
        for (hash, f) in [
            ("one_at_a_time", one_at_a_time as fn(&[u8]) -> u32),
            ("md5", md5_le32),
        ] {
            let k = ketama(&format!("ketama:weighted=false hash={hash}"));
            // Weights do not matter; weight 0 still drains.
            let ring = k
                .build(&pool(&["a:11211 weight=7", "b:11300", "c weight=0"]))
                .unwrap();
            assert_eq!(ring.entries(), 200, "{hash}");
            for (owner, prefix) in ["a-", "b:11300-"].iter().enumerate() {
                let mut want: Vec<u32> = (0..100)
                    .map(|i| f(format!("{prefix}{i}").as_bytes()))
                    .collect();
                want.sort_unstable();
                assert_eq!(points_of(&ring, owner), want, "{hash} {prefix}");
            }
            assert_eq!(ring.key_code(b"some key"), u64::from(f(b"some key")));
        }
        let spy = ketama("ketama:compat=libmemcached_spy weighted=false")
            .build(&pool(&["a"]))
            .unwrap();
        let mut want: Vec<u32> = (0..100)
            .map(|i| one_at_a_time(format!("/a:11211-{i}").as_bytes()))
            .collect();
        want.sort_unstable();
        assert_eq!(points_of(&spy, 0), want);
        // Weighted variants hash keys with md5.
        let weighted = ketama("ketama").build(&pool(&["a"])).unwrap();
        assert_eq!(weighted.key_code(b"k"), u64::from(md5_le32(b"k")));
    }

    #[test]
    fn weight_zero_is_as_if_removed() {
        for compat in ["libketama", "libmemcached", "libmemcached_spy"] {
            let k = ketama(&format!("ketama:compat={compat}"));
            let with = k
                .build(&pool(&["a weight=3", "z weight=0", "b weight=5"]))
                .unwrap();
            let without = k.build(&pool(&["a weight=3", "b weight=5"])).unwrap();
            assert_eq!(points_of(&with, 1), Vec::<u32>::new(), "{compat}");
            assert_eq!(points_of(&with, 0), points_of(&without, 0), "{compat}");
            assert_eq!(points_of(&with, 2), points_of(&without, 1), "{compat}");
        }
    }

    #[test]
    fn equal_points_go_to_the_server_listed_first() {
        // The same name twice (via hash_key) gives identical points.
        let k = ketama("ketama");
        let ring = k
            .build(&pool(&["b:1 hash_key=same", "a:1 hash_key=same"]))
            .unwrap();
        for i in (0..ring.entries()).step_by(2) {
            assert_eq!(ring.ring.point(i), ring.ring.point(i + 1));
            assert_eq!((ring.owner(i), ring.owner(i + 1)), (0, 1));
        }
    }

    #[test]
    fn every_variant_rejects_bad_parameters() {
        let cases = [
            (
                "ketama:compat=libmemcache",
                "ketama: compat=libmemcache: accepted libketama, libmemcached, libmemcached_spy",
            ),
            (
                "ketama:weighted=no",
                "ketama: weighted=no: accepted true or false",
            ),
            (
                "ketama:compat=libketama weighted=false",
                "ketama: weighted=false is libmemcached's unweighted continuum and has no \
                 libketama counterpart",
            ),
            (
                "ketama:compat=libketama hash=md5",
                "ketama: hash=md5 only applies with weighted=false (a libmemcached variant): \
                 compat=libketama hashes point names and keys with md5",
            ),
            (
                "ketama:hash=one_at_a_time",
                "hash=one_at_a_time only applies with weighted=false",
            ),
            (
                "ketama:compat=libmemcached weighted=true hash=md5",
                "weighted ketama hashes point names and keys with md5",
            ),
            (
                "ketama:compat=libmemcached_spy hash=md5",
                "hash=md5 only applies with weighted=false",
            ),
            (
                "ketama:weighted=false hash=crc32",
                "ketama: hash=crc32: accepted md5, one_at_a_time",
            ),
            (
                "ketama:compat=libmemcached_spy weighted=false hash=fnv1a",
                "hash=fnv1a: accepted md5, one_at_a_time",
            ),
            (
                "ketama:replicas=160",
                "ketama: unknown key `replicas` (accepted: compat, weighted, hash, load_factor, balance)",
            ),
            (
                "ketama:compat=libketama points=3",
                "unknown key `points`",
            ),
            ("ketama:load_factor=1", "load_factor=1: expected a decimal"),
            ("ketama:compat=libketama balance=90", "balance=90"),
            (
                "ketama:weighted=false load_factor=1.2 balance=120",
                "give load_factor or balance, not both",
            ),
            (
                "ketama:compat=",
                "compat=: accepted libketama, libmemcached, libmemcached_spy",
            ),
            ("ketama:weighted=", "weighted=: accepted true or false"),
            ("ketama:weighted=false weighted=true", "`weighted` is given twice"),
        ];
        for (spec, want) in cases {
            let got = spec.parse::<PolicySpec>().unwrap_err().to_string();
            assert!(got.contains(want), "{spec}: {got:?} lacks {want:?}");
            assert!(!got.contains('\n'), "one line: {got:?}");
        }
    }

    #[test]
    fn conflicts_name_the_key_through_the_accessors() {
        for (spec, key, value, accepted) in [
            (
                "ketama:compat=libketama weighted=false",
                "weighted",
                "false",
                "true",
            ),
            (
                "ketama:compat=libketama hash=md5",
                "hash",
                "md5",
                "weighted=false",
            ),
            (
                "KETAMA:hash=one_at_a_time",
                "hash",
                "one_at_a_time",
                "weighted=false",
            ),
        ] {
            let err = spec.parse::<PolicySpec>().unwrap_err();
            assert_eq!(err.kind(), crate::ParseErrorKind::Conflict, "{spec}");
            assert_eq!(err.policy(), Some("ketama"), "{spec}");
            assert_eq!(err.key(), Some(key), "{spec}");
            assert_eq!(err.value(), Some(value), "{spec}");
            assert_eq!(err.accepted(), Some(accepted), "{spec}");
        }
    }

    #[test]
    fn parameters_and_defaults() {
        assert_eq!(
            ketama("KETAMA"),
            Ketama {
                compat: Compat::Libmemcached,
                weighted: true,
                hash: KeyHash::OneAtATime
            }
        );
        let k = ketama("ketama:compat=LibMemcached_Spy weighted=false hash=MD5");
        assert_eq!(
            (k.compat, k.weighted, k.hash),
            (Compat::LibmemcachedSpy, false, KeyHash::Md5)
        );
        let bounded: PolicySpec = "ketama:compat=libketama balance=150".parse().unwrap();
        assert_eq!(bounded.name(), "ketama");
        assert!(bounded.is_hashing());
        assert_eq!(bounded.load_factor().unwrap().to_string(), "1.5");
    }
}
