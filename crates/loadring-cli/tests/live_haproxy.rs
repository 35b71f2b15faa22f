//! HAProxy's `balance hdr(X-Key)` with `hash-type` checked live: a real
//! HAProxy proxies keys to backends that answer with their own address, and
//! every key must have reached the backend `loadring place --policy
//! haproxy_hash...` names.
//!
//! At least 20 random configurations per run: server count 1-20, weights
//! 1-10 (and now and then 0), map-based or consistent, each function (or none, HAProxy's default)
//! with or without avalanche, explicit server ids mixed with automatic ones;
//! 200 keys each, from a seed printed at the start (`LOADRING_LIVE_SEED=N`
//! replays a run). HAProxy must be installed (`apt-get install -y haproxy`).
//!
//! On an HAProxy that has `hash-key` (3.0 and later: Debian's is 2.6, so
//! put a build of your own first in `PATH` to run these), consistent
//! configurations also take each `hash-key` that version has, as
//! `default-server hash-key KEY`: `addr-port` and `addr` (every server on
//! 127.0.0.1, so under `addr` all of them share their nodes' keys and
//! HAProxy's order of equal keys decides), the default `id` where the
//! version's rule for it is known (`hash_key=id-3.0` on 3.0 to 3.3-dev9
//! development builds, `id` from 3.3-dev10; the 3.0 to 3.2 stable releases
//! took the fix at a point release, so neither is assumed there), and on
//! 3.4 and later `id32` and `guid` (some servers without a guid).

use crate::live;

use std::process::Command;

use live::{Backends, Daemon, Rng, TempDir};

const KEYS_PER_CONFIGURATION: usize = 200;

struct Server {
    addr: String,
    weight: u32,
    id: Option<u32>,
    guid: Option<String>,
}

struct Configuration {
    hash_type: &'static str,
    function: Option<&'static str>,
    avalanche: bool,
    /// HAProxy's `hash-key` line, if any.
    hash_key: Option<HashKey>,
    /// loadring's `hash_key=` for it, if not `id`.
    loadring_key: Option<&'static str>,
    servers: Vec<Server>,
}

/// A `hash-key` as HAProxy writes it and as loadring's `hash_key=` does.
#[derive(Clone, Copy)]
struct HashKey {
    haproxy: &'static str,
    loadring: &'static str,
}

/// What a version of HAProxy does with `hash-key`.
struct HashKeys {
    /// Whether it has `hash-type ... none` (2.9 and later).
    has_none: bool,
    /// The values it has whose placement is known.
    keys: Vec<HashKey>,
    /// loadring's `hash_key=` for a consistent backend without `hash-key`,
    /// where it is known.
    default: Option<&'static str>,
}

/// The `hash-key`s of this HAProxy, from `haproxy -v`'s first line
/// (`HAProxy version 3.5-dev5-50872daa6 ...`).
fn hash_keys(version_line: &str) -> HashKeys {
    let key = |haproxy, loadring| HashKey { haproxy, loadring };
    let version = version_line
        .split_whitespace()
        .skip_while(|w| *w != "version")
        .nth(1)
        .unwrap_or("");
    let mut numbers = version.split(|c: char| !c.is_ascii_digit());
    let mut next = || numbers.next().and_then(|n| n.parse::<u32>().ok());
    let (major, minor) = (next().unwrap_or(0), next().unwrap_or(0));
    let dev = version
        .split_once("-dev")
        .and_then(|(_, rest)| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse::<u32>().ok());
    let at_least = |a: u32, b: u32| (major, minor) >= (a, b);
    let has_none = at_least(2, 9);
    if !at_least(3, 0) {
        return HashKeys {
            has_none,
            keys: Vec::new(),
            default: Some("id"),
        };
    }
    let mut keys = vec![key("addr-port", "addr-port"), key("addr", "addr")];
    let id = match dev {
        Some(n) if (major, minor) < (3, 3) || ((major, minor) == (3, 3) && n < 10) => {
            Some("id-3.0")
        }
        Some(_) => Some("id"),
        None if at_least(3, 3) => Some("id"),
        None => None,
    };
    if let Some(id) = id {
        keys.push(key("id", id));
    }
    if at_least(3, 4) {
        keys.extend([key("id32", "id32"), key("guid", "guid")]);
    }
    HashKeys {
        has_none,
        keys,
        default: id,
    }
}

#[test]
fn the_hash_keys_of_each_version() {
    let loadring = |line: &str| -> (Vec<&str>, Option<&str>) {
        let keys = hash_keys(line);
        (keys.keys.iter().map(|k| k.loadring).collect(), keys.default)
    };
    assert_eq!(
        loadring("HAProxy version 2.6.12-1+deb12u1 2023/12/16"),
        (vec![], Some("id"))
    );
    assert!(!hash_keys("HAProxy version 2.8.5 2023/12/07").has_none);
    assert!(hash_keys("HAProxy version 2.9.0 2023/12/05").has_none);
    assert!(hash_keys("HAProxy version 3.3-dev9-1a2b3c 2025/10/10").has_none);
    assert_eq!(
        loadring("HAProxy version 3.2.4 2025/08/13"),
        (vec!["addr-port", "addr"], None)
    );
    assert_eq!(
        loadring("HAProxy version 3.3-dev9-1a2b3c 2025/10/10"),
        (vec!["addr-port", "addr", "id-3.0"], Some("id-3.0"))
    );
    assert_eq!(
        loadring("HAProxy version 3.3-dev10-1a2b3c 2025/10/17"),
        (vec!["addr-port", "addr", "id"], Some("id"))
    );
    assert_eq!(
        loadring("HAProxy version 3.3.1 2025/12/19"),
        (vec!["addr-port", "addr", "id"], Some("id"))
    );
    assert_eq!(
        loadring("HAProxy version 3.5-dev5-50872daa6 2026/08/21"),
        (vec!["addr-port", "addr", "id", "id32", "guid"], Some("id"))
    );
}

impl Configuration {
    fn random(rng: &mut Rng, backends: &[String], hash_keys: &HashKeys) -> Self {
        let mut addrs = backends.to_vec();
        rng.shuffle(&mut addrs);
        let count = rng.range(1, 20) as usize;
        let mut ids: Vec<u32> = (1..=40).collect();
        rng.shuffle(&mut ids);
        let servers = addrs[..count]
            .iter()
            .zip(ids)
            .enumerate()
            .map(|(i, (a, id))| Server {
                addr: a.clone(),
                // Now and then a drained server (weight 0), never the first.
                weight: if i > 0 && rng.chance(10) {
                    0
                } else {
                    rng.range(1, 10) as u32
                },
                id: rng.chance(40).then_some(id),
                guid: None,
            })
            .collect();
        let mut function =
            rng.pick(&[None, Some("sdbm"), Some("djb2"), Some("wt6"), Some("crc32")]);
        if hash_keys.has_none && rng.chance(15) {
            function = Some("none");
        }
        let hash_type = rng.pick(&["map-based", "consistent"]);
        let mut config = Configuration {
            hash_type,
            function,
            avalanche: function.is_some() && rng.chance(50),
            hash_key: None,
            loadring_key: None,
            servers,
        };
        if hash_type != "consistent" {
            return config;
        }
        // Without a `hash-key` line, the version's default rule, when known.
        let explicit =
            !hash_keys.keys.is_empty() && (hash_keys.default.is_none() || rng.chance(70));
        if !explicit {
            config.loadring_key = hash_keys.default.filter(|k| *k != "id");
        } else {
            let key = rng.pick(&hash_keys.keys);
            config.hash_key = Some(key);
            config.loadring_key = Some(key.loadring);
            if key.loadring == "guid" {
                // loadring numbers every server itself under guid, as
                // HAProxy does a configuration without `id`s.
                for (i, server) in config.servers.iter_mut().enumerate() {
                    server.id = None;
                    server.guid = (rng.chance(80))
                        .then(|| format!("srv-{i}.{:x}:g_{}", rng.next_u64(), i * 7));
                }
            }
        }
        config
    }

    fn spec(&self) -> String {
        let mut spec = format!("haproxy_hash:type={}", self.hash_type);
        if let Some(f) = self.function {
            spec.push_str(&format!(" function={f}"));
        }
        if self.avalanche {
            spec.push_str(" avalanche=true");
        }
        if let Some(key) = self.loadring_key {
            spec.push_str(&format!(" hash_key={key}"));
        }
        spec
    }

    fn endpoints(&self) -> Vec<String> {
        self.servers
            .iter()
            .map(|s| match (s.id, &s.guid) {
                (Some(id), _) => format!("{} weight={} hash_key={id}", s.addr, s.weight),
                (None, Some(guid)) => format!("{} weight={} hash_key={guid}", s.addr, s.weight),
                (None, None) => format!("{} weight={}", s.addr, s.weight),
            })
            .collect()
    }

    fn haproxy_cfg(&self, port: u16, pid_file: &std::path::Path) -> String {
        let servers: String = self
            .servers
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let id = s.id.map(|id| format!(" id {id}")).unwrap_or_default();
                let guid = s
                    .guid
                    .as_ref()
                    .map(|g| format!(" guid {g}"))
                    .unwrap_or_default();
                format!("    server s{i} {} weight {}{id}{guid}\n", s.addr, s.weight)
            })
            .collect();
        let mut hash_type = format!("hash-type {}", self.hash_type);
        if let Some(f) = self.function {
            hash_type.push(' ');
            hash_type.push_str(f);
        }
        if self.avalanche {
            hash_type.push_str(" avalanche");
        }
        if let Some(key) = self.hash_key {
            hash_type.push_str(&format!("\n    default-server hash-key {}", key.haproxy));
        }
        format!(
            "global\n\
             \x20   pidfile {}\n\
             \x20   maxconn 256\n\
             defaults\n\
             \x20   mode http\n\
             \x20   timeout connect 5s\n\
             \x20   timeout client 10s\n\
             \x20   timeout server 10s\n\
             frontend front\n\
             \x20   bind 127.0.0.1:{port}\n\
             \x20   default_backend pool\n\
             backend pool\n\
             \x20   balance hdr(X-Key)\n\
             \x20   {hash_type}\n\
             {servers}",
            pid_file.display()
        )
    }
}

/// Keys for `hash-type ... none`, which reads a key as a number: small and
/// huge, signed, zero-padded, followed by other bytes, or no number at all.
fn number_keys(rng: &mut Rng, count: usize) -> Vec<String> {
    (0..count)
        .map(|_| {
            let digits = |rng: &mut Rng, n: u64| -> String {
                (0..n)
                    .map(|_| char::from(b'0' + rng.range(0, 9) as u8))
                    .collect()
            };
            let n = rng.range(1, 25);
            let number = digits(rng, n);
            match rng.range(0, 7) {
                0 => format!("-{number}"),
                1 => format!("+{number}"),
                2 => format!("000{number}"),
                3 => format!("{number}x{}", digits(rng, 3)),
                4 => format!("k{number}"),
                5 => format!("{}", rng.next_u64()),
                _ => number,
            }
        })
        .collect()
}

/// Characters HAProxy hashes as sent: no controls, no `,` or `"` (HAProxy
/// hashes only the first comma-separated element of a header, trimmed:
/// spaces only inside a key).
fn header_safe(c: char) -> bool {
    !c.is_control() && c != ',' && c != '"'
}

#[test]
fn haproxy_places_every_key_where_loadring_does() {
    let haproxy = live::require("haproxy", "haproxy");
    let seed = live::seed("haproxy");
    let mut rng = Rng::new(seed);
    let version = Command::new(&haproxy)
        .arg("-v")
        .output()
        .expect("run haproxy -v");
    let version = String::from_utf8_lossy(&version.stdout);
    let version = version.lines().next().unwrap_or_default();
    let hash_keys = hash_keys(version);
    println!(
        "{version}: hash-key {}",
        if hash_keys.keys.is_empty() {
            "absent".to_string()
        } else {
            hash_keys
                .keys
                .iter()
                .map(|k| k.loadring)
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    let backends = Backends::start(20);
    let mut failures = Vec::new();
    let mut checked = 0;
    let mut by_hash_key: std::collections::BTreeMap<&str, usize> = Default::default();
    for n in 0..live::configurations() {
        let config = Configuration::random(&mut rng, &backends.addrs, &hash_keys);
        let label = match (config.hash_type, config.hash_key) {
            ("consistent", Some(key)) => key.loadring,
            ("consistent", None) => "consistent, no hash-key",
            _ => "map-based",
        };
        *by_hash_key.entry(label).or_default() += 1;
        let keys = if config.function == Some("none") {
            number_keys(&mut rng, KEYS_PER_CONFIGURATION)
        } else {
            live::keys(&mut rng, KEYS_PER_CONFIGURATION, 200, header_safe)
        };
        let dir = TempDir::new("haproxy");
        let cfg = dir.path().join("haproxy.cfg");
        let pid_file = dir.path().join("haproxy.pid");
        let mut text = String::new();
        let (daemon, port) =
            Daemon::start_on_free_port("haproxy", &dir.path().join("haproxy.log"), |port| {
                text = config.haproxy_cfg(port, &pid_file);
                std::fs::write(&cfg, &text).expect("write haproxy.cfg");
                let mut command = Command::new(&haproxy);
                // -db: stay in the foreground, a child of the test, stopped by
                // its pid (HAProxy writes its pid file only when it daemonizes).
                command
                    .arg("-db")
                    .arg("-f")
                    .arg(&cfg)
                    .arg("-p")
                    .arg(&pid_file);
                command
            });
        let observed: Vec<String> = keys.iter().map(|k| live::http_get(port, k)).collect();
        drop(daemon);
        let computed = live::place(&config.spec(), &config.endpoints(), &keys);
        checked += keys.len();
        let what = format!(
            "seed {seed}, configuration {n}: --policy {:?} -e {:?}\nhaproxy.cfg:\n{text}",
            config.spec(),
            config.endpoints()
        );
        if let Some(report) = live::compare(&what, &keys, &observed, &computed) {
            failures.push(report);
        }
    }
    println!(
        "haproxy: {checked} keys over {} configurations ({by_hash_key:?}), {} configurations differ",
        live::configurations(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "replay with LOADRING_LIVE_SEED={seed}\n{}",
        failures.join("\n\n")
    );
}
