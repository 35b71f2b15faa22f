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

use crate::live;

use std::process::Command;

use live::{Backends, Daemon, Rng, TempDir};

const KEYS_PER_CONFIGURATION: usize = 200;

struct Server {
    addr: String,
    weight: u32,
    id: Option<u32>,
}

struct Configuration {
    hash_type: &'static str,
    function: Option<&'static str>,
    avalanche: bool,
    servers: Vec<Server>,
}

impl Configuration {
    fn random(rng: &mut Rng, backends: &[String]) -> Self {
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
            })
            .collect();
        let function = rng.pick(&[None, Some("sdbm"), Some("djb2"), Some("wt6"), Some("crc32")]);
        Configuration {
            hash_type: rng.pick(&["map-based", "consistent"]),
            function,
            avalanche: function.is_some() && rng.chance(50),
            servers,
        }
    }

    fn spec(&self) -> String {
        let mut spec = format!("haproxy_hash:type={}", self.hash_type);
        if let Some(f) = self.function {
            spec.push_str(&format!(" function={f}"));
        }
        if self.avalanche {
            spec.push_str(" avalanche=true");
        }
        spec
    }

    fn endpoints(&self) -> Vec<String> {
        self.servers
            .iter()
            .map(|s| match s.id {
                Some(id) => format!("{} weight={} hash_key={id}", s.addr, s.weight),
                None => format!("{} weight={}", s.addr, s.weight),
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
                format!("    server s{i} {} weight {}{id}\n", s.addr, s.weight)
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
    let backends = Backends::start(20);
    let mut failures = Vec::new();
    let mut checked = 0;
    for n in 0..live::configurations() {
        let config = Configuration::random(&mut rng, &backends.addrs);
        let keys = live::keys(&mut rng, KEYS_PER_CONFIGURATION, 200, header_safe);
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
        "haproxy: {checked} keys over {} configurations, {} configurations differ",
        live::configurations(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "replay with LOADRING_LIVE_SEED={seed}\n{}",
        failures.join("\n\n")
    );
}
