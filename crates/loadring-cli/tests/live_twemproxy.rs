//! twemproxy (nutcracker) checked live in front of real memcached servers:
//! each key is written through nutcracker, then found on exactly one
//! memcached, which must be the one `loadring place --policy twemproxy...`
//! names.
//!
//! At least 20 random configurations per run: server count 1-20, weights
//! 1-10, ketama or modula, each of the twelve hash functions, hash tags,
//! server names or none; 200 keys each, from a seed printed at the start
//! (`LOADRING_LIVE_SEED=N` replays a run). nutcracker and memcached must be
//! installed (`apt-get install -y nutcracker memcached`).

use crate::live;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;

use live::{Daemon, Rng, TempDir, TIMEOUT};

const KEYS_PER_CONFIGURATION: usize = 200;
/// memcached's longest key.
const MAX_KEY: usize = 250;

const HASHES: &[&str] = &[
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

const TAGS: &[&str] = &["{}", "[]", "()", "<>", "::", "||", "$%", "ab"];

/// A memcached the test runs, with a connection to look keys up.
struct Memcached {
    addr: String,
    conn: BufReader<TcpStream>,
    _daemon: Daemon,
}

impl Memcached {
    fn start(binary: &Path, dir: &Path, i: usize) -> Memcached {
        let log = dir.join(format!("memcached-{i}.log"));
        let (daemon, port) = Daemon::start_on_free_port("memcached", &log, |port| {
            let mut command = Command::new(binary);
            command
                .args([
                    "-l",
                    "127.0.0.1",
                    "-U",
                    "0",
                    "-m",
                    "8",
                    "-t",
                    "1",
                    "-c",
                    "64",
                ])
                .args(["-p", &port.to_string()]);
            // memcached refuses to run as root unless told which user to be
            // (and ignores this when not root).
            command.args(["-u", "root"]);
            command
        });
        let addr = format!("127.0.0.1:{port}");
        Memcached {
            conn: connect(&addr),
            addr,
            _daemon: daemon,
        }
    }

    fn flush(&mut self) {
        assert_eq!(request(&mut self.conn, b"flush_all\r\n"), "OK");
    }

    fn holds(&mut self, key: &str) -> bool {
        let reply = request(&mut self.conn, format!("get {key}\r\n").as_bytes());
        if reply == "END" {
            return false;
        }
        assert!(reply.starts_with("VALUE "), "get {key:?}: {reply}");
        let data = read_line(&mut self.conn);
        let end = read_line(&mut self.conn);
        assert_eq!((data.as_str(), end.as_str()), ("x", "END"), "get {key:?}");
        true
    }
}

fn connect(addr: &str) -> BufReader<TcpStream> {
    let conn = TcpStream::connect_timeout(&addr.parse().expect("address"), TIMEOUT)
        .unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
    conn.set_read_timeout(Some(TIMEOUT)).expect("timeout");
    conn.set_write_timeout(Some(TIMEOUT)).expect("timeout");
    BufReader::new(conn)
}

fn read_line(conn: &mut BufReader<TcpStream>) -> String {
    let mut line = Vec::new();
    conn.read_until(b'\n', &mut line).expect("read a reply");
    String::from_utf8_lossy(&line).trim_end().to_string()
}

/// Sends one command, returns the first line of the reply.
fn request(conn: &mut BufReader<TcpStream>, command: &[u8]) -> String {
    conn.get_mut().write_all(command).expect("send a command");
    read_line(conn)
}

struct Server {
    /// Index into the memcached instances.
    memcached: usize,
    weight: u32,
    name: Option<String>,
}

struct Configuration {
    distribution: &'static str,
    hash: &'static str,
    hash_tag: Option<&'static str>,
    servers: Vec<Server>,
}

impl Configuration {
    fn random(rng: &mut Rng, instances: usize) -> Self {
        let mut order: Vec<usize> = (0..instances).collect();
        rng.shuffle(&mut order);
        let count = rng.range(1, 20) as usize;
        let named = rng.chance(40);
        let servers = order[..count]
            .iter()
            .enumerate()
            .map(|(i, &m)| Server {
                memcached: m,
                weight: rng.range(1, 10) as u32,
                // Names of several lengths, unique by their index; some long.
                name: named.then(|| {
                    if rng.chance(20) {
                        let long = format!("n{i}-{}", "x".repeat(120));
                        long[..rng.range(70, 120) as usize].to_string()
                    } else {
                        format!("{}{i}", &"cache-server-node"[..rng.range(1, 17) as usize])
                    }
                }),
            })
            .collect();
        Configuration {
            distribution: rng.pick(&["ketama", "modula"]),
            hash: rng.pick(HASHES),
            hash_tag: rng.chance(30).then(|| rng.pick(TAGS)),
            servers,
        }
    }

    fn spec(&self) -> String {
        let mut spec = format!(
            "twemproxy:distribution={} hash={}",
            self.distribution, self.hash
        );
        if let Some(tag) = self.hash_tag {
            spec.push_str(&format!(" hash_tag={tag}"));
        }
        spec
    }

    fn endpoints(&self, memcached: &[Memcached]) -> Vec<String> {
        self.servers
            .iter()
            .map(|s| {
                let addr = &memcached[s.memcached].addr;
                match &s.name {
                    Some(name) => format!("{addr} weight={} hash_key={name}", s.weight),
                    None => format!("{addr} weight={}", s.weight),
                }
            })
            .collect()
    }

    fn yaml(&self, port: u16, memcached: &[Memcached]) -> String {
        let servers: String = self
            .servers
            .iter()
            .map(|s| {
                let addr = &memcached[s.memcached].addr;
                match &s.name {
                    Some(name) => format!("   - {addr}:{} {name}\n", s.weight),
                    None => format!("   - {addr}:{}\n", s.weight),
                }
            })
            .collect();
        let tag = self
            .hash_tag
            .map(|t| format!("  hash_tag: \"{t}\"\n"))
            .unwrap_or_default();
        format!(
            "pool:\n\
             \x20 listen: 127.0.0.1:{port}\n\
             \x20 hash: {}\n\
             \x20 distribution: {}\n\
             {tag}\
             \x20 auto_eject_hosts: false\n\
             \x20 timeout: 5000\n\
             \x20 servers:\n\
             {servers}",
            self.hash, self.distribution
        )
    }

    /// Two servers, the light one (7 digests, one-digit point numbers)
    /// named with 268 to 300 bytes: its point names reach, fill or overflow
    /// twemproxy's 272-byte limit on them.
    fn long_name(rng: &mut Rng, instances: usize) -> Self {
        let a = rng.range(0, instances as u64 - 1) as usize;
        let b = (a + 1) % instances;
        Configuration {
            distribution: "ketama",
            hash: rng.pick(HASHES),
            hash_tag: None,
            servers: vec![
                Server {
                    memcached: a,
                    weight: 1,
                    name: Some("b".repeat(rng.range(268, 300) as usize)),
                },
                Server {
                    memcached: b,
                    weight: 10,
                    name: Some("heavy".into()),
                },
            ],
        }
    }

    /// Random keys, some carrying the hash tag (with an empty inside too).
    fn keys(&self, rng: &mut Rng) -> Vec<String> {
        let memcached_safe = |c: char| !c.is_control() && c != ' ';
        let mut keys = live::keys(rng, KEYS_PER_CONFIGURATION, MAX_KEY, memcached_safe);
        if let Some(tag) = self.hash_tag {
            let (x, y) = tag.split_at(1);
            for key in keys.iter_mut().skip(15) {
                if rng.chance(40) && key.len() + 12 <= MAX_KEY {
                    let inner = ["", "u1", "user:42", "é", "x"][rng.range(0, 4) as usize];
                    let at = key
                        .char_indices()
                        .map(|(i, _)| i)
                        .nth(rng.range(0, 3) as usize);
                    let at = at.unwrap_or(key.len());
                    key.insert_str(at, &format!("{x}{inner}{y}"));
                }
            }
            keys.sort();
            keys.dedup();
        }
        keys
    }
}

fn write_through(proxy: &mut BufReader<TcpStream>, key: &str) {
    let reply = request(proxy, format!("set {key} 0 0 1\r\nx\r\n").as_bytes());
    assert_eq!(reply, "STORED", "set {key:?} through nutcracker");
}

#[test]
fn twemproxy_places_every_key_where_loadring_does() {
    let nutcracker = live::require("nutcracker", "nutcracker");
    let memcached_bin: PathBuf = live::require("memcached", "memcached");
    let seed = live::seed("twemproxy");
    let mut rng = Rng::new(seed);
    let dir = TempDir::new("twemproxy");
    let mut memcached: Vec<Memcached> = (0..20)
        .map(|i| Memcached::start(&memcached_bin, dir.path(), i))
        .collect();
    let mut failures = Vec::new();
    let mut checked = 0;
    // The random configurations, then one with a very long server name.
    for n in 0..=live::configurations() {
        let config = if n < live::configurations() {
            Configuration::random(&mut rng, memcached.len())
        } else {
            Configuration::long_name(&mut rng, memcached.len())
        };
        let keys = config.keys(&mut rng);
        for m in memcached.iter_mut() {
            m.flush();
        }
        let conf = dir.path().join(format!("nutcracker-{n}.yml"));
        let pid_file = dir.path().join(format!("nutcracker-{n}.pid"));
        let log = dir.path().join(format!("nutcracker-{n}.log"));
        let mut text = String::new();
        let (daemon, port) = Daemon::start_on_free_port(
            "nutcracker",
            &dir.path().join(format!("nutcracker-{n}.out")),
            |port| {
                text = config.yaml(port, &memcached);
                std::fs::write(&conf, &text).expect("write nutcracker.yml");
                // In the foreground, a child of the test stopped by its pid
                // (nutcracker 0.5.0 writes its pid file only when it daemonizes).
                let mut command = Command::new(&nutcracker);
                command
                    .arg("-c")
                    .arg(&conf)
                    .arg("-p")
                    .arg(&pid_file)
                    .arg("-o")
                    .arg(&log)
                    // Its stats port too, on loopback only.
                    .args(["-a", "127.0.0.1", "-s", &live::free_port().to_string()]);
                command
            },
        );
        let mut proxy = connect(&format!("127.0.0.1:{port}"));
        for key in &keys {
            write_through(&mut proxy, key);
        }
        drop(proxy);
        drop(daemon);
        let used: Vec<usize> = config.servers.iter().map(|s| s.memcached).collect();
        let observed: Vec<String> = keys
            .iter()
            .map(|key| {
                let mut holders: Vec<String> = Vec::new();
                for &m in &used {
                    if memcached[m].holds(key) {
                        holders.push(memcached[m].addr.clone());
                    }
                }
                match holders.as_slice() {
                    [one] => one.clone(),
                    [] => "<on no server>".to_string(),
                    many => format!("<on {} servers>", many.len()),
                }
            })
            .collect();
        let endpoints = config.endpoints(&memcached);
        let computed = live::place(&config.spec(), &endpoints, &keys);
        checked += keys.len();
        let what = format!(
            "seed {seed}, configuration {n}: --policy {:?} -e {endpoints:?}\nnutcracker.yml:\n{text}",
            config.spec()
        );
        if let Some(report) = live::compare(&what, &keys, &observed, &computed) {
            failures.push(report);
        }
    }
    println!(
        "twemproxy: {checked} keys over {} configurations, {} configurations differ",
        live::configurations() + 1,
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "replay with LOADRING_LIVE_SEED={seed}\n{}",
        failures.join("\n\n")
    );
}
