//! Many gateways, one ring, against a real etcd (Debian's `etcd-server`),
//! started by the test on 127.0.0.1 with a temporary data directory and
//! stopped by its pid: three `loadring register` processes put their
//! backends under a prefix with 2 s leases; two `loadring proxy --discover
//! etcd://...` processes (one started before any endpoint exists) place
//! 1,000 keys identically, and as `loadring place` does over the same
//! endpoints; a registrar killed with SIGKILL leaves both pools once its
//! lease expires; etcd killed and restarted on its data directory loses
//! nothing (the pools hold through the outage and after it), and both
//! proxies converge again on endpoints registered after the restart. Waits
//! are for events (a log line, an exit, etcd's own answer), bounded only
//! against hanging.

use crate::live;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use live::{
    eventually, place, require, Backends, Daemon, FleetProxy, Loadring, Rng, TempDir, TIMEOUT,
};

const POLICY: &str = "c_murmurhash";
const TTL: Duration = Duration::from_secs(2);

fn etcd_command(etcd: &Path, data: &Path, client: u16, peer: u16) -> Command {
    let client_url = format!("http://127.0.0.1:{client}");
    let peer_url = format!("http://127.0.0.1:{peer}");
    let mut command = Command::new(etcd);
    command
        .arg("--name")
        .arg("default")
        .arg("--data-dir")
        .arg(data)
        .arg("--listen-client-urls")
        .arg(&client_url)
        .arg("--advertise-client-urls")
        .arg(&client_url)
        .arg("--listen-peer-urls")
        .arg(&peer_url)
        .arg("--initial-advertise-peer-urls")
        .arg(&peer_url)
        .arg("--initial-cluster")
        .arg(format!("default={peer_url}"));
    command
}

fn register(target: &str, endpoint: &str, log: &Path) -> Loadring {
    Loadring::spawn(
        &["register", target, "--endpoint", endpoint, "--ttl", "2s"],
        log,
    )
}

/// Both proxies' pools equal `want` (sorted `addr weight=1` lines).
fn pools_are(a: &FleetProxy, b: &FleetProxy, want: &[String]) -> bool {
    a.pool() == want && b.pool() == want
}

fn pool_of(addrs: &[&String]) -> Vec<String> {
    let mut pool: Vec<String> = addrs.iter().map(|a| format!("{a} weight=1")).collect();
    pool.sort();
    pool
}

/// Both proxies place every key as `loadring place` does over `addrs`.
fn agree(a: &FleetProxy, b: &FleetProxy, addrs: &[&String], keys: &[String], when: &str) {
    let through_a = a.placements(keys);
    let through_b = b.placements(keys);
    let endpoints: Vec<String> = addrs.iter().map(|s| s.to_string()).collect();
    let computed = place(POLICY, &endpoints, keys);
    let differ = |x: &[String], y: &[String]| x.iter().zip(y).filter(|(p, q)| p != q).count();
    assert_eq!(
        differ(&through_a, &through_b),
        0,
        "{when}: the two proxies place keys differently"
    );
    assert_eq!(
        differ(&through_a, &computed),
        0,
        "{when}: the proxies differ from loadring place over {addrs:?}"
    );
    let used: std::collections::HashSet<&String> = through_a.iter().collect();
    assert_eq!(used.len(), addrs.len(), "{when}: every endpoint owns keys");
}

#[test]
fn two_proxies_share_one_ring_through_registrar_deaths_and_etcd_restarts() {
    let etcd = require("etcd", "etcd-server");
    require("etcdctl", "etcd-client");
    let dir = TempDir::new("etcd");
    let data = dir.path().join("data");
    let log = dir.path().join("etcd.log");
    let mut peer = 0;
    let (daemon, client) = Daemon::start_on_free_port("etcd", &log, |client| {
        peer = live::free_port();
        etcd_command(&etcd, &data, client, peer)
    });
    let mut daemon = Some(daemon);
    let target = format!("etcd://127.0.0.1:{client}/loadring/test");
    let backends = Backends::start(4);
    let b = &backends.addrs;
    let mut rng = Rng::new(live::seed("etcd"));
    let keys: Vec<String> = (0..1000)
        .map(|i| format!("user-{i}-{}", rng.next_u64() % 1_000_000))
        .collect();

    // Proxy A starts on an empty prefix, B once the registrars are up.
    let a = FleetProxy::start(POLICY, &target, &dir.path().join("proxy-a.log"));
    assert_eq!(a.pool(), Vec::<String>::new());
    let mut registrars: Vec<Loadring> = (0..3)
        .map(|i| register(&target, &b[i], &dir.path().join(format!("reg{i}.log"))))
        .collect();
    let three = pool_of(&[&b[0], &b[1], &b[2]]);
    assert!(
        eventually(TIMEOUT, || a.pool() == three).is_some(),
        "proxy A: {:?}\n{}",
        a.pool(),
        registrars[0].log_text()
    );
    let b_proxy = FleetProxy::start(POLICY, &target, &dir.path().join("proxy-b.log"));
    assert!(eventually(TIMEOUT, || pools_are(&a, &b_proxy, &three)).is_some());
    agree(
        &a,
        &b_proxy,
        &[&b[0], &b[1], &b[2]],
        &keys,
        "three registered",
    );

    // A registrar dies without a word: its lease expires, both drop it.
    registrars[0].kill();
    let two = pool_of(&[&b[1], &b[2]]);
    let took = eventually(TIMEOUT, || pools_are(&a, &b_proxy, &two));
    assert!(
        took.is_some(),
        "never dropped: A {:?}, B {:?}",
        a.pool(),
        b_proxy.pool()
    );
    println!("registrar killed: both pools dropped it after {took:?} (TTL {TTL:?})");
    agree(
        &a,
        &b_proxy,
        &[&b[1], &b[2]],
        &keys,
        "after the registrar's death",
    );

    // etcd killed: once both proxies have found it gone (a warning each),
    // the pools hold through the outage...
    let keeping = |p: &FleetProxy| {
        p.process
            .log_text()
            .matches("; keeping the current 2 endpoints")
            .count()
    };
    let kept_before = (keeping(&a), keeping(&b_proxy));
    drop(daemon.take());
    assert!(
        eventually(TIMEOUT, || keeping(&a) > kept_before.0
            && keeping(&b_proxy) > kept_before.1)
        .is_some(),
        "no proxy noticed the outage:\n{}\n{}",
        a.process.log_text(),
        b_proxy.process.log_text()
    );
    assert!(
        pools_are(&a, &b_proxy, &two),
        "during the outage: A {:?}, B {:?}",
        a.pool(),
        b_proxy.pool()
    );
    // ...and after the restart on the same data directory, for longer than
    // the leases of before the restart could last.
    daemon = Some(Daemon::start_on(
        "etcd",
        &log,
        client,
        etcd_command(&etcd, &data, client, peer),
    ));
    let watched = std::time::Instant::now();
    while watched.elapsed() < 2 * TTL + Duration::from_secs(1) {
        assert!(
            pools_are(&a, &b_proxy, &two),
            "after the restart: A {:?}, B {:?}\n{}",
            a.pool(),
            b_proxy.pool(),
            registrars[1].log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(registrars[1].running() && registrars[2].running());

    // Registrations after the restart reach both: one ring again.
    registrars.push(register(&target, &b[0], &dir.path().join("reg0-again.log")));
    registrars.push(register(&target, &b[3], &dir.path().join("reg3.log")));
    let four = pool_of(&[&b[0], &b[1], &b[2], &b[3]]);
    assert!(
        eventually(TIMEOUT, || pools_are(&a, &b_proxy, &four)).is_some(),
        "after new registrations: A {:?}, B {:?}",
        a.pool(),
        b_proxy.pool()
    );
    agree(
        &a,
        &b_proxy,
        &[&b[0], &b[1], &b[2], &b[3]],
        &keys,
        "after the restart",
    );

    // A graceful stop (SIGTERM) revokes the lease: the key is gone from
    // etcd by the time the registrar has exited, not a TTL later.
    let registrar = registrars.last_mut().expect("registrar of b3");
    let status = Command::new("kill")
        .arg("-TERM")
        .arg(registrar.pid().to_string())
        .status()
        .unwrap();
    assert!(status.success());
    assert!(
        eventually(TIMEOUT, || !registrar.running()).is_some(),
        "the registrar of b3 did not exit after SIGTERM"
    );
    let values = Command::new("etcdctl")
        .args(["--endpoints", &format!("http://127.0.0.1:{client}")])
        .args(["get", "--prefix", "--print-value-only", "/loadring/test"])
        .output()
        .expect("etcdctl runs");
    assert!(values.status.success(), "{values:?}");
    let values = String::from_utf8_lossy(&values.stdout).to_string();
    let registered = |addr: &str| {
        values
            .lines()
            .any(|l| l.split_whitespace().next() == Some(addr))
    };
    assert!(registered(&b[0]), "the prefix read is etcd's: {values}");
    assert!(
        !registered(&b[3]),
        "b3's key outlived its registrar: {values}"
    );
    let three_again = pool_of(&[&b[0], &b[1], &b[2]]);
    let took = eventually(TIMEOUT, || pools_are(&a, &b_proxy, &three_again));
    assert!(took.is_some(), "after SIGTERM: A {:?}", a.pool());

    // SIGHUP: proxy A reads the prefix again (its log says so): the same
    // pool, still serving, and no warning (a re-read asked for is not a
    // problem).
    let warnings = |p: &FleetProxy| p.process.log_text().matches(" WARN ").count();
    let rereads = |p: &FleetProxy| {
        p.process
            .log_text()
            .matches("read again as asked: the same 3 endpoints")
            .count()
    };
    let before = warnings(&a);
    let rereads_before = rereads(&a);
    let hup = Command::new("kill")
        .arg("-HUP")
        .arg(a.process.pid().to_string())
        .status()
        .unwrap();
    assert!(hup.success());
    assert!(
        eventually(TIMEOUT, || rereads(&a) > rereads_before).is_some(),
        "no re-read after SIGHUP: {}",
        a.process.log_text()
    );
    assert!(pools_are(&a, &b_proxy, &three_again));
    agree(
        &a,
        &b_proxy,
        &[&b[0], &b[1], &b[2]],
        &keys[..100],
        "after SIGHUP",
    );
    assert_eq!(warnings(&a), before, "{}", a.process.log_text());
    drop(daemon);
}
