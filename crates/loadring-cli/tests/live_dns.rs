//! DNS membership against a real dnsmasq (Debian's `dnsmasq`), started by
//! the test on 127.0.0.1 with its configuration in a temporary directory
//! and stopped by its pid: A and AAAA records become `ip:PORT` endpoints;
//! SRV records with weights reach the policy (a proxy places keys as
//! `loadring place` does over the weighted endpoints, and not as over
//! unweighted ones); with dnsmasq stopped the last membership holds once
//! the proxy's lookup has failed; a record set changed (dnsmasq restarted
//! with a new configuration) is picked up when the old one's TTL runs out.
//! Waits are for events, bounded only against hanging.

use crate::live;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use live::{eventually, place, require, Backends, Daemon, FleetProxy, TempDir, TIMEOUT};
use loadring_discovery::Discovery;

const POLICY: &str = "c_murmurhash";
/// The records' TTL (dnsmasq's `local-ttl`).
const TTL: Duration = Duration::from_secs(2);

fn dnsmasq_command(dnsmasq: &Path, dir: &Path, config: &str, port: u16) -> Command {
    let conf = dir.join("dnsmasq.conf");
    // addn-hosts: A records dnsmasq re-reads on SIGHUP, with no restart.
    let hosts = dir.join("hosts");
    if !hosts.exists() {
        std::fs::write(&hosts, "127.0.0.1 pool.test\n").expect("write hosts");
    }
    std::fs::write(
        &conf,
        format!(
            "{config}addn-hosts={}\nlocal-ttl={}\n",
            hosts.display(),
            TTL.as_secs()
        ),
    )
    .expect("write config");
    let mut command = Command::new(dnsmasq);
    command
        .arg("--keep-in-foreground")
        .arg("--no-resolv")
        .arg("--no-hosts")
        .arg(format!("--port={port}"))
        .arg("--listen-address=127.0.0.1")
        .arg("--bind-interfaces")
        .arg(format!("--conf-file={}", conf.display()))
        .arg(format!("--pid-file={}", dir.join("dnsmasq.pid").display()))
        .arg("--log-facility=-");
    command
}

fn port_of(addr: &str) -> &str {
    addr.rsplit_once(':').expect("host:port").1
}

fn srv_records(records: &[(&str, u16)]) -> String {
    let mut config = String::new();
    for (i, (addr, weight)) in records.iter().enumerate() {
        config.push_str(&format!(
            "srv-host=_http._tcp.api.test,b{i}.test,{},0,{weight}\nhost-record=b{i}.test,127.0.0.1\n",
            port_of(addr)
        ));
    }
    // A lower priority (a higher number): a fallback, not a member.
    config.push_str(
        "srv-host=_http._tcp.api.test,fallback.test,9,5,100\nhost-record=fallback.test,127.0.0.1\n",
    );
    config.push_str("host-record=multi.test,127.0.0.1,::1\n");
    config
}

fn sorted(mut pool: Vec<String>) -> Vec<String> {
    pool.sort();
    pool
}

#[test]
fn srv_weights_reach_the_policy_and_a_changed_record_set_is_picked_up_after_the_ttl() {
    let dnsmasq = require("dnsmasq", "dnsmasq");
    let dir = TempDir::new("dns");
    let log = dir.path().join("dnsmasq.log");
    let backends = Backends::start(3);
    let b = &backends.addrs;
    let first = srv_records(&[(&b[0], 10), (&b[1], 30)]);
    let (daemon, port) = Daemon::start_on_free_port("dnsmasq", &log, |port| {
        dnsmasq_command(&dnsmasq, dir.path(), &first, port)
    });
    daemon.check_pid_file(&dir.path().join("dnsmasq.pid"));
    let mut daemon = Some(daemon);
    let resolver = format!("?resolver=127.0.0.1:{port}");

    // A and AAAA: every address with the given port, sorted.
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let addresses = runtime.block_on(async {
        let spec = format!("dns://multi.test:8080{resolver}")
            .parse()
            .expect("spec");
        Discovery::start(spec)
            .await
            .expect("A/AAAA lookup")
            .membership()
    });
    let addresses: Vec<String> = addresses.iter().map(|e| e.to_string()).collect();
    assert_eq!(addresses, ["127.0.0.1:8080", "[::1]:8080"]);
    // A name with no records: no first membership, an error naming it.
    let err = runtime
        .block_on(async {
            let spec = format!("dns://nowhere.test:80{resolver}")
                .parse()
                .expect("spec");
            Discovery::start(spec).await
        })
        .unwrap_err();
    assert!(
        err.to_string().starts_with("dns://nowhere.test:80"),
        "{err}"
    );

    // Records changed with no outage (dnsmasq re-reads its hosts file on
    // SIGHUP): seen once the TTL of the last answer has run out.
    runtime.block_on(async {
        let spec = format!("dns://pool.test:8080{resolver}")
            .parse()
            .expect("spec");
        let mut pool = Discovery::start(spec).await.expect("pool.test");
        assert_eq!(pool.membership().len(), 1);
        std::fs::write(
            dir.path().join("hosts"),
            "127.0.0.1 pool.test\n127.0.0.2 pool.test\n",
        )
        .expect("write hosts");
        let hup = Command::new("kill")
            .arg("-HUP")
            .arg(daemon.as_ref().expect("dnsmasq").pid().to_string())
            .status()
            .expect("kill -HUP");
        assert!(hup.success());
        let changed = std::time::Instant::now();
        let next = tokio::time::timeout(TIMEOUT, pool.changed())
            .await
            .expect("the new record once the old one's TTL ran out");
        let next: Vec<String> = next.iter().map(|e| e.to_string()).collect();
        assert_eq!(next, ["127.0.0.1:8080", "127.0.0.2:8080"]);
        println!(
            "A records changed: seen after {:?} (TTL {TTL:?})",
            changed.elapsed()
        );
    });

    // SRV: the weights reach the policy.
    let source = format!("dns+srv://_http._tcp.api.test{resolver}");
    let proxy = FleetProxy::start(POLICY, &source, &dir.path().join("proxy.log"));
    let weighted = [format!("{} weight=10", b[0]), format!("{} weight=30", b[1])];
    assert_eq!(
        proxy.pool(),
        sorted(weighted.to_vec()),
        "{}",
        proxy.process.log_text()
    );
    let keys: Vec<String> = (0..400).map(|i| format!("user-{i}")).collect();
    let through = proxy.placements(&keys);
    assert_eq!(through, place(POLICY, &weighted, &keys));
    let unweighted = place(POLICY, &[b[0].clone(), b[1].clone()], &keys);
    assert!(
        through
            .iter()
            .zip(&unweighted)
            .filter(|(x, y)| x != y)
            .count()
            > 20,
        "weights change placement (else the check above proves nothing)"
    );
    let on_b1 = through.iter().filter(|a| **a == b[1]).count();
    assert!(
        on_b1 > 200,
        "weight 30 of 40 owns most keys: {on_b1} of 400"
    );

    // dnsmasq stopped: once the TTL has run out and the proxy's lookup has
    // failed (its warning is the event), the membership holds.
    let failed = || proxy.process.log_text().contains("lookup failed: ");
    assert!(!failed(), "{}", proxy.process.log_text());
    drop(daemon.take());
    assert!(
        eventually(TIMEOUT, failed).is_some(),
        "no failed lookup: {}",
        proxy.process.log_text()
    );
    assert_eq!(proxy.pool(), sorted(weighted.to_vec()));
    assert_eq!(proxy.placements(&keys[..50]), through[..50]);

    // Restarted with a new record set: picked up within TTL + 1 s.
    let second = srv_records(&[(&b[1], 20), (&b[2], 20)]);
    daemon = Some(Daemon::start_on(
        "dnsmasq",
        &log,
        port,
        dnsmasq_command(&dnsmasq, dir.path(), &second, port),
    ));
    let next = sorted(vec![
        format!("{} weight=20", b[1]),
        format!("{} weight=20", b[2]),
    ]);
    let took = eventually(TIMEOUT, || proxy.pool() == next);
    assert!(
        took.is_some(),
        "pool: {:?}\n{}",
        proxy.pool(),
        proxy.process.log_text()
    );
    println!("new record set seen {took:?} after dnsmasq's restart (TTL {TTL:?})");
    assert_eq!(proxy.placements(&keys), place(POLICY, &next, &keys));
    drop(daemon);
}
