//! nginx's `hash KEY [consistent]` checked live: a real nginx proxies keys to
//! backends that answer with their own address, and every key must have
//! reached the backend `loadring place --policy nginx_hash...` names.
//!
//! At least 20 random configurations per run (server count 1-20, weights
//! 1-10, consistent or not), 200 keys each, from a seed printed at the start
//! (`LOADRING_LIVE_SEED=N` replays a run). nginx must be installed
//! (`apt-get install -y nginx`).

use crate::live;

use std::process::Command;

use live::{Backends, Daemon, Rng, TempDir};

const KEYS_PER_CONFIGURATION: usize = 200;

struct Configuration {
    consistent: bool,
    /// (backend address, weight) in `server` order.
    servers: Vec<(String, u32)>,
}

impl Configuration {
    fn random(rng: &mut Rng, backends: &[String]) -> Self {
        let mut addrs = backends.to_vec();
        rng.shuffle(&mut addrs);
        let count = rng.range(1, 20) as usize;
        let servers = addrs[..count]
            .iter()
            .map(|a| (a.clone(), rng.range(1, 10) as u32))
            .collect();
        Configuration {
            consistent: rng.chance(50),
            servers,
        }
    }

    fn spec(&self) -> String {
        format!("nginx_hash:consistent={}", self.consistent)
    }

    fn endpoints(&self) -> Vec<String> {
        self.servers
            .iter()
            .map(|(a, w)| format!("{a} weight={w}"))
            .collect()
    }

    fn nginx_conf(&self, dir: &std::path::Path, port: u16) -> String {
        let d = dir.display();
        let servers: String = self
            .servers
            .iter()
            .map(|(a, w)| format!("        server {a} weight={w};\n"))
            .collect();
        let consistent = if self.consistent { " consistent" } else { "" };
        format!(
            "daemon off;\n\
             master_process off;\n\
             worker_processes 1;\n\
             pid {d}/nginx.pid;\n\
             error_log {d}/error.log warn;\n\
             events {{ worker_connections 256; }}\n\
             http {{\n\
             \x20   access_log off;\n\
             \x20   client_body_temp_path {d}/body;\n\
             \x20   proxy_temp_path {d}/proxy;\n\
             \x20   fastcgi_temp_path {d}/fastcgi;\n\
             \x20   uwsgi_temp_path {d}/uwsgi;\n\
             \x20   scgi_temp_path {d}/scgi;\n\
             \x20   upstream pool {{\n\
             \x20       hash $http_x_key{consistent};\n\
             {servers}\
             \x20   }}\n\
             \x20   server {{\n\
             \x20       listen 127.0.0.1:{port};\n\
             \x20       location / {{\n\
             \x20           proxy_pass http://pool;\n\
             \x20           proxy_next_upstream off;\n\
             \x20       }}\n\
             \x20   }}\n\
             }}\n"
        )
    }
}

/// Characters an HTTP header value carries through nginx unchanged: no
/// controls (spaces only inside a key: nginx trims the ends).
fn header_safe(c: char) -> bool {
    !c.is_control()
}

#[test]
fn nginx_places_every_key_where_loadring_does() {
    let nginx = live::require("nginx", "nginx");
    let seed = live::seed("nginx");
    let mut rng = Rng::new(seed);
    let backends = Backends::start(20);
    let mut failures = Vec::new();
    let mut checked = 0;
    for n in 0..live::configurations() {
        let config = Configuration::random(&mut rng, &backends.addrs);
        let keys = live::keys(&mut rng, KEYS_PER_CONFIGURATION, 200, header_safe);
        let dir = TempDir::new("nginx");
        let conf = dir.path().join("nginx.conf");
        let mut text = String::new();
        let (daemon, port) =
            Daemon::start_on_free_port("nginx", &dir.path().join("stderr.log"), |port| {
                text = config.nginx_conf(dir.path(), port);
                std::fs::write(&conf, &text).expect("write nginx.conf");
                let mut command = Command::new(&nginx);
                command
                    .arg("-p")
                    .arg(dir.path())
                    .arg("-e")
                    .arg(dir.path().join("error.log"))
                    .arg("-c")
                    .arg(&conf);
                command
            });
        daemon.check_pid_file(&dir.path().join("nginx.pid"));
        let observed: Vec<String> = keys.iter().map(|k| live::http_get(port, k)).collect();
        drop(daemon);
        let computed = live::place(&config.spec(), &config.endpoints(), &keys);
        checked += keys.len();
        let what = format!(
            "seed {seed}, configuration {n}: --policy {:?} -e {:?}\nnginx.conf:\n{text}",
            config.spec(),
            config.endpoints()
        );
        if let Some(report) = live::compare(&what, &keys, &observed, &computed) {
            failures.push(report);
        }
    }
    println!(
        "nginx: {checked} keys over {} configurations, {} configurations differ",
        live::configurations(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "replay with LOADRING_LIVE_SEED={seed}\n{}",
        failures.join("\n\n")
    );
}

/// A daemon that is not installed fails the check, saying how to install it.
#[test]
#[should_panic(
    expected = "loadring-no-such-daemon not found: install it with `apt-get install -y nginx`"
)]
fn a_missing_daemon_fails_with_the_install_command() {
    live::require("loadring-no-such-daemon", "nginx");
}
