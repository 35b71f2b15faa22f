//! The `file:` source sees the two ways configuration management replaces
//! a file: an atomic replace (write aside, rename over) and a symlink swap
//! (the Kubernetes ConfigMap pattern: `endpoints -> ..data/endpoints`,
//! `..data -> ..v1`, and `..data` renamed to point at `..v2`). A bad edit
//! or a missing file keeps the membership; a refresh re-reads.

use std::path::{Path, PathBuf};
use std::time::Duration;

use loadring_discovery::{Discovery, DiscoveryErrorKind, Membership, ReadOutcome, SourceSpec};

fn temp_dir(label: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let dir = std::env::temp_dir().join(format!(
        "loadring-discovery-{label}-{}-{nanos}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn addrs(m: &Membership) -> Vec<String> {
    m.iter().map(ToString::to_string).collect()
}

/// The next membership (the poll is 250 ms; events come sooner). The
/// bound only guards against hanging.
async fn next(d: &mut Discovery) -> Vec<String> {
    let m = tokio::time::timeout(Duration::from_secs(30), d.changed())
        .await
        .expect("a change, not a hang");
    addrs(&m)
}

/// Waits for the source's next read that `wanted` accepts, skipping the
/// others (polls may decide things in between); the bound only guards
/// against hanging.
async fn read_until(d: &mut Discovery, wanted: impl Fn(&ReadOutcome) -> bool) -> ReadOutcome {
    tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let outcome = d.next_read().await;
            if wanted(&outcome) {
                return outcome;
            }
        }
    })
    .await
    .expect("the read, not a hang")
}

/// Whether a read kept the membership for a reason containing `why`.
fn kept_for(why: &'static str) -> impl Fn(&ReadOutcome) -> bool {
    move |o| matches!(o, ReadOutcome::Kept(reason) if reason.to_string().contains(why))
}

fn replace(path: &Path, text: &str) {
    let aside = path.with_extension("tmp");
    std::fs::write(&aside, text).unwrap();
    std::fs::rename(&aside, path).unwrap();
}

#[tokio::test]
async fn an_atomic_replace_is_seen_and_a_bad_edit_keeps_the_membership() {
    let dir = temp_dir("replace");
    let file = dir.join("endpoints");
    std::fs::write(&file, "10.0.0.1:80\n10.0.0.2:80 weight=2\n").unwrap();
    let spec: SourceSpec = format!("file:{}", file.display()).parse().unwrap();
    let mut d = Discovery::start(spec).await.unwrap();
    assert_eq!(
        addrs(&d.membership()),
        ["10.0.0.1:80", "10.0.0.2:80 weight=2"]
    );

    replace(&file, "# resized\n10.0.0.2:80 weight=3\n10.0.0.3:80\n");
    assert_eq!(next(&mut d).await, ["10.0.0.2:80 weight=3", "10.0.0.3:80"]);

    // A bad line, then the file gone: each read says why it keeps the
    // membership, and nothing is published.
    let kept = ["10.0.0.2:80 weight=3", "10.0.0.3:80"];
    replace(&file, "10.0.0.4:80 weight=x\n");
    read_until(&mut d, kept_for("line 1: ")).await;
    assert_eq!(addrs(&d.membership()), kept);
    std::fs::remove_file(&file).unwrap();
    read_until(&mut d, kept_for("No such file")).await;
    assert_eq!(addrs(&d.membership()), kept);

    // Back, with the same text as before the bad edit: read, and still no
    // news (the membership did not change); then a real change.
    std::fs::write(&file, "# resized\n10.0.0.2:80 weight=3\n10.0.0.3:80\n").unwrap();
    let back = read_until(&mut d, |o| !matches!(o, ReadOutcome::Kept(_))).await;
    assert_eq!(back, ReadOutcome::Unchanged);
    assert_eq!(addrs(&d.membership()), kept);
    replace(&file, "10.0.0.5:80\n");
    assert_eq!(next(&mut d).await, ["10.0.0.5:80"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_configmap_symlink_swap_is_seen() {
    let dir = temp_dir("configmap");
    let unix = std::os::unix::fs::symlink::<&str, PathBuf>;
    std::fs::create_dir(dir.join("..v1")).unwrap();
    std::fs::write(dir.join("..v1/endpoints"), "10.0.1.1:80\n").unwrap();
    unix("..v1", dir.join("..data")).unwrap();
    unix("..data/endpoints", dir.join("endpoints")).unwrap();
    let spec: SourceSpec = format!("file:{}", dir.join("endpoints").display())
        .parse()
        .unwrap();
    let mut d = Discovery::start(spec).await.unwrap();
    assert_eq!(addrs(&d.membership()), ["10.0.1.1:80"]);

    // What the kubelet does: a new folder, a new link renamed over `..data`.
    std::fs::create_dir(dir.join("..v2")).unwrap();
    std::fs::write(dir.join("..v2/endpoints"), "10.0.1.1:80\n10.0.1.2:80\n").unwrap();
    unix("..v2", dir.join("..data_tmp")).unwrap();
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
    std::fs::remove_dir_all(dir.join("..v1")).unwrap();
    assert_eq!(next(&mut d).await, ["10.0.1.1:80", "10.0.1.2:80"]);

    // An edit in place inside `..v2` (no event in the watched folder): the
    // poll sees it; refresh() asks for a read at once (SIGHUP in the proxy).
    std::fs::write(dir.join("..v2/endpoints"), "10.0.1.3:80\n").unwrap();
    d.refresh();
    assert_eq!(next(&mut d).await, ["10.0.1.3:80"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn no_first_membership_is_an_error_naming_the_source() {
    let err = Discovery::start("file:/nonexistent/loadring/endpoints".parse().unwrap())
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("file:/nonexistent/loadring/endpoints: "),
        "{err}"
    );
    assert_eq!(err.kind(), DiscoveryErrorKind::Start);
    assert_eq!(err.spec(), Some("file:/nonexistent/loadring/endpoints"));
    let dir = temp_dir("bad");
    std::fs::write(dir.join("e"), "10.0.0.1:80\nnot an endpoint\n").unwrap();
    let err = Discovery::start(format!("file:{}", dir.join("e").display()).parse().unwrap())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("line 2"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A refresh (SIGHUP in the proxy) reads the file even when its text has
/// not changed: a read that publishes nothing.
#[tokio::test]
async fn a_refresh_reads_an_unchanged_file_and_publishes_nothing() {
    let dir = temp_dir("refresh");
    let file = dir.join("endpoints");
    std::fs::write(&file, "10.0.2.1:80\n").unwrap();
    let spec: SourceSpec = format!("file:{}", file.display()).parse().unwrap();
    let mut d = Discovery::start(spec).await.unwrap();
    d.refresh();
    assert_eq!(read_until(&mut d, |_| true).await, ReadOutcome::Unchanged);
    assert_eq!(addrs(&d.membership()), ["10.0.2.1:80"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A check the consumer gives (the proxy's: an address it can connect to)
/// is held line by line: an endpoint that parses but fails it is named by
/// the line the source read it from, at the start and on a later read,
/// and the membership stays. The line travels with the parse: nothing
/// reads the file again to find it.
#[tokio::test]
async fn an_endpoint_failing_the_check_is_named_by_its_line() {
    let check: loadring_discovery::EndpointCheck = std::sync::Arc::new(|e| {
        if e.addr().ends_with(":0") {
            Err(loadring_discovery::EndpointRejected::new(e, "port 0"))
        } else {
            Ok(())
        }
    });
    let dir = temp_dir("checked");
    let file = dir.join("endpoints");
    let spec: SourceSpec = format!("file:{}", file.display()).parse().unwrap();
    let spec_text = spec.to_string();

    std::fs::write(&file, "10.0.0.1:80\n\n# spare\n10.0.0.2:0\n").unwrap();
    let err = Discovery::start_checked(spec.clone(), check.clone())
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .ends_with(": line 4: endpoint `10.0.0.2:0`: port 0"),
        "{err}"
    );

    std::fs::write(&file, "10.0.0.1:80\n10.0.0.2:80\n").unwrap();
    let mut d = Discovery::start_checked(spec, check).await.unwrap();
    let kept = ["10.0.0.1:80", "10.0.0.2:80"];
    assert_eq!(addrs(&d.membership()), kept);
    // The bad line moves; each read names where it is now.
    replace(&file, "# one bad\n10.0.0.3:80\n10.0.0.4:0\n");
    let ReadOutcome::Kept(why) = read_until(&mut d, |o| matches!(o, ReadOutcome::Kept(_))).await
    else {
        unreachable!("waited for a kept read")
    };
    assert_eq!(why.to_string(), "line 3: endpoint `10.0.0.4:0`: port 0");
    assert_eq!(why.kind(), loadring_discovery::DiscoveryErrorKind::Read);
    assert_eq!(why.spec(), Some(spec_text.as_str()));
    assert_eq!(addrs(&d.membership()), kept);
    replace(&file, "10.0.0.4:0\n10.0.0.3:80\n");
    read_until(&mut d, kept_for("line 1: endpoint `10.0.0.4:0`")).await;
    assert_eq!(addrs(&d.membership()), kept);
    // Without the check, the same text is a membership.
    let mut unchecked = Discovery::start(format!("file:{}", file.display()).parse().unwrap())
        .await
        .unwrap();
    assert_eq!(
        addrs(&unchecked.membership()),
        ["10.0.0.4:0", "10.0.0.3:80"]
    );
    drop(unchecked);
    replace(&file, "10.0.0.3:80\n");
    assert_eq!(next(&mut d).await, ["10.0.0.3:80"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A FIFO renamed over the file (something a writer may do by mistake, or
/// on purpose) is refused at once and the membership kept; the follower
/// goes on and sees the next real file. Opening it used to wait for a
/// writer for ever, on the runtime's thread.
#[cfg(unix)]
#[tokio::test]
async fn a_fifo_swapped_in_keeps_the_membership_and_the_follower_goes_on() {
    let dir = temp_dir("fifo");
    let file = dir.join("endpoints");
    std::fs::write(&file, "10.0.0.1:80\n").unwrap();
    let spec: SourceSpec = format!("file:{}", file.display()).parse().unwrap();
    let mut d = Discovery::start(spec).await.unwrap();
    let fifo = dir.join("fifo");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo (coreutils)");
    std::fs::rename(&fifo, &file).unwrap();
    read_until(&mut d, kept_for("a FIFO, not a file to read whole")).await;
    assert_eq!(addrs(&d.membership()), ["10.0.0.1:80"]);
    replace(&file, "10.0.0.2:80\n");
    assert_eq!(next(&mut d).await, ["10.0.0.2:80"]);
    let _ = std::fs::remove_dir_all(&dir);
}
