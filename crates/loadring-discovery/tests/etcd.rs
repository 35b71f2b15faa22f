//! The `etcd://` source against a real etcd (Debian's `etcd-server`),
//! started here on 127.0.0.1 with a data directory in a temporary folder
//! and stopped by its pid: a prefix larger than one page of the paged read
//! (with values that are not endpoints, huge or multi-line, and two keys
//! naming one backend) is read whole, in key order; the watch follows puts
//! and deletes. Without etcd the test fails with the command that installs
//! it. Waits are for etcd's answers and the source's reads, bounded
//! only against hanging.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use etcd_client::{Client, Txn, TxnOp};
use loadring_discovery::{Discovery, ReadOutcome, SourceSpec};

const HANG: Duration = Duration::from_secs(60);

struct Etcd {
    child: Child,
    dir: PathBuf,
}

impl Drop for Etcd {
    fn drop(&mut self) {
        // Stopped by its pid: the child this test started.
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// etcd on 127.0.0.1 and a client connected to it.
async fn etcd() -> (Etcd, Client, u16) {
    // A missing daemon fails the test with the command that installs it.
    if Command::new("etcd").arg("--version").output().is_err() {
        panic!("etcd not found: install it with `apt-get install -y etcd-server`");
    }
    let dir = std::env::temp_dir().join(format!("loadring-discovery-etcd-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (client_port, peer_port) = (free_port(), free_port());
    let client_url = format!("http://127.0.0.1:{client_port}");
    let peer_url = format!("http://127.0.0.1:{peer_port}");
    let log = std::fs::File::create(dir.join("etcd.log")).unwrap();
    let child = Command::new("etcd")
        .arg("--name=default")
        .arg(format!("--data-dir={}", dir.join("data").display()))
        .arg(format!("--listen-client-urls={client_url}"))
        .arg(format!("--advertise-client-urls={client_url}"))
        .arg(format!("--listen-peer-urls={peer_url}"))
        .arg(format!("--initial-advertise-peer-urls={peer_url}"))
        .arg(format!("--initial-cluster=default={peer_url}"))
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("start etcd");
    let etcd = Etcd { child, dir };
    // Ready when it answers a read (connecting retries until it listens).
    let client = tokio::time::timeout(HANG, async {
        loop {
            if let Ok(mut c) = Client::connect([client_url.as_str()], None).await {
                if c.get("/", None).await.is_ok() {
                    return c;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("etcd answers");
    (etcd, client, client_port)
}

fn addrs(m: &[loadring::Endpoint]) -> Vec<String> {
    m.iter().map(ToString::to_string).collect()
}

#[tokio::test]
async fn a_prefix_of_several_pages_is_read_whole_and_followed() {
    let (_etcd, mut client, port) = etcd().await;
    // 2,500 endpoints (more than two pages of 1,024), in transactions of
    // 100 puts (etcd takes at most 128 operations in one).
    let key = |i: usize| format!("/pool/api/{i:05}");
    let value = |i: usize| format!("10.0.{}.{}:80", i / 256, i % 256);
    for start in (0..2500).step_by(100) {
        let puts: Vec<TxnOp> = (start..start + 100)
            .map(|i| TxnOp::put(key(i), value(i), None))
            .collect();
        client.txn(Txn::new().and_then(puts)).await.unwrap();
    }
    // Not endpoints (skipped), a duplicate backend (the first key counts),
    // and a key just past the prefix (not read).
    client
        .put("/pool/api/bad-1", "x".repeat(1 << 20), None)
        .await
        .unwrap();
    client
        .put("/pool/api/bad-2", "10.0.0.1:80\nweight=2", None)
        .await
        .unwrap();
    client
        .put("/pool/api/zz-dup", value(7), None)
        .await
        .unwrap();
    client.put("/pool/api0", "10.9.9.9:80", None).await.unwrap();

    let spec: SourceSpec = format!("etcd://127.0.0.1:{port}/pool/api").parse().unwrap();
    let mut d = tokio::time::timeout(HANG, Discovery::start(spec))
        .await
        .expect("a start, not a hang")
        .unwrap();
    let want: Vec<String> = (0..2500).map(value).collect();
    let got = addrs(&d.membership());
    let first_difference = got.iter().zip(&want).position(|(g, w)| g != w);
    assert_eq!(
        (got.len(), first_difference),
        (want.len(), None),
        "{:?}",
        first_difference.map(|i| &got[i])
    );

    // The watch: a put and a delete.
    client.delete(key(0), None).await.unwrap();
    client
        .put("/pool/api/99999", "10.1.0.1:80 weight=3", None)
        .await
        .unwrap();
    let m = tokio::time::timeout(HANG, async {
        loop {
            let m = d.changed().await;
            if m.len() == 2500 && m.last().is_some_and(|e| e.weight() == 3) {
                return m;
            }
        }
    })
    .await
    .expect("the watch's changes");
    assert_eq!(m[0].to_string(), value(1));

    // A refresh reads the whole prefix again: the same membership (the
    // watch's own reads may come first).
    d.refresh();
    tokio::time::timeout(HANG, async {
        loop {
            match d.next_read().await {
                ReadOutcome::Unchanged => return,
                ReadOutcome::Applied => {}
                kept => panic!("{kept:?}"),
            }
        }
    })
    .await
    .expect("the refresh's read");
    assert_eq!(d.membership(), m);
}
