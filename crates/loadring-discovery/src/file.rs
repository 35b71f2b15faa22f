//! The endpoints file, followed: re-read on a change seen by a watch of its
//! folder (a file replaced by rename, or a symlink swapped as Kubernetes
//! swaps a ConfigMap's `..data` link, is an event on the folder, not on the
//! old file), on a poll every 250 ms (file systems without events: the text
//! is the fingerprint, an unchanged file is not parsed again), and on
//! [`Discovery::refresh`](crate::Discovery::refresh). A file that cannot be
//! read or parsed keeps the current membership and logs one line saying
//! why (a missing file once, not every poll).
//!
//! A poll first compares the file's metadata (device, inode, length,
//! modification and change times) with the file it read last: the same
//! file, changed long enough before that read that a later write could not
//! share its timestamps (file systems keep them to a tick of up to 2 s),
//! is not read again. An idle proxy following a file of a million
//! endpoints read and compared 12 MB four times a second (4% of a core);
//! now it asks for the metadata alone, and reads the file whole every
//! [`READ_ANYWAY`] (a network file system whose clock runs behind the
//! proxy's could give a change the stamp of the one before). A file changed
//! just before it was read is read on every poll until it has settled, as
//! before.
//!
//! Only events that can change the text count: the opens and closes of the
//! proxy's own reads are events on the folder too, and taking them as
//! nudges made every read trigger the next (a core spent on an idle
//! proxy). A changed text is applied once it has been stable for
//! [`DEBOUNCE`]: an editor's or `echo`'s write in several pieces is not
//! applied half-written. A writer that pauses longer mid-write can still be
//! read half-way; writing a temporary file and renaming it over the old one
//! is the safe way (a rename is atomic).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use notify::Watcher;
use tokio::sync::mpsc;

use crate::{parse_endpoints_checked, EndpointCheck, Membership, Publisher};

/// How often the file is read even without events.
pub const POLL_INTERVAL: Duration = Duration::from_millis(250);

/// How long a changed file must stay unchanged before it is applied.
pub const DEBOUNCE: Duration = Duration::from_millis(100);

/// How long before a read a file's last change must be for its metadata
/// to stand for its text: more than the coarsest timestamps of the file
/// systems a proxy may read from (FAT's 2 s).
pub const SETTLED: Duration = Duration::from_secs(3);

/// How often a poll reads the file whole even when its stamp is the one
/// read last.
pub const READ_ANYWAY: Duration = Duration::from_secs(10);

/// A file's metadata, as a poll compares it. The change time (`ctime`) is
/// set by the kernel on every write and rename and cannot be set back by a
/// program (`touch -d` and `rsync -t` set the modification time only).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Stamp {
    device: u64,
    inode: u64,
    len: u64,
    modified: Option<SystemTime>,
    changed: Option<(i64, i64)>,
}

impl Stamp {
    /// The stamp of the file at `path` (after symlinks), if it can be read.
    pub(crate) fn of(path: &Path) -> Option<Stamp> {
        let meta = std::fs::metadata(path).ok()?;
        #[cfg(unix)]
        let (device, inode, changed) = {
            use std::os::unix::fs::MetadataExt;
            (
                meta.dev(),
                meta.ino(),
                Some((meta.ctime(), meta.ctime_nsec())),
            )
        };
        #[cfg(not(unix))]
        let (device, inode, changed) = (0, 0, None);
        Some(Stamp {
            device,
            inode,
            len: meta.len(),
            modified: meta.modified().ok(),
            changed,
        })
    }

    /// Whether the file's last change came at least [`SETTLED`] before
    /// `read_at`, so that a later change cannot leave the same stamp.
    pub(crate) fn settled_before(&self, read_at: SystemTime) -> bool {
        let Some(modified) = self.modified else {
            return false;
        };
        let changed = match self.changed {
            Some((secs, nanos)) => {
                let Ok(secs) = u64::try_from(secs) else {
                    return false;
                };
                SystemTime::UNIX_EPOCH + Duration::new(secs, u32::try_from(nanos).unwrap_or(0))
            }
            None => modified,
        };
        let last = modified.max(changed);
        last.checked_add(SETTLED).is_some_and(|t| t <= read_at)
    }
}

/// Whether a poll must read the file: unless its stamp is the settled
/// stamp of the text last read (`last`).
pub(crate) fn must_read(last: Option<&Stamp>, now: Option<&Stamp>) -> bool {
    match (last, now) {
        (Some(last), Some(now)) => last != now,
        _ => true,
    }
}

/// Reads and parses the file, each endpoint passing `check`: its
/// membership and its text.
pub(crate) fn read(path: &Path, check: &EndpointCheck) -> Result<(Membership, String), String> {
    let text = crate::read_text(path).map_err(|e| e.to_string())?;
    let membership = parse_endpoints_checked(&text, check.as_ref()).map_err(|e| e.to_string())?;
    Ok((membership, text))
}

/// Follows the file; `last_text` is the text the current membership came from.
pub(crate) async fn follow(path: PathBuf, mut last_text: Option<String>, publisher: Publisher) {
    let (tx, mut events) = mpsc::unbounded_channel::<()>();
    // Dropping the watcher stops it: it lives as long as this task.
    let _watcher = watch_folder(&path, tx);
    let mut poll = tokio::time::interval(POLL_INTERVAL);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut last_problem: Option<String> = None;
    // The stamp of the file `last_text` was read from, once settled.
    let mut last_stamp: Option<Stamp> = None;
    let mut last_read = tokio::time::Instant::now();
    loop {
        let (forced, polled) = tokio::select! {
            _ = poll.tick() => (false, true),
            Some(()) = events.recv() => (false, false),
            () = publisher.refreshed() => (true, false),
        };
        let read_at = SystemTime::now();
        let stamp = stamp_off_the_runtime(&path).await;
        if polled
            && last_read.elapsed() < READ_ANYWAY
            && !must_read(last_stamp.as_ref(), stamp.as_ref())
        {
            continue;
        }
        last_read = tokio::time::Instant::now();
        // Taken before the read: a change after it gives another stamp,
        // and the next poll reads again.
        last_stamp = stamp.filter(|s| s.settled_before(read_at));
        let text = match settled_text(&path, last_text.as_deref(), forced, &mut events).await {
            Ok(text) => text,
            Err(e) => {
                last_stamp = None;
                let problem = e.to_string();
                if forced || last_problem.as_ref() != Some(&problem) {
                    publisher.keep(&problem);
                    last_problem = Some(problem);
                }
                continue;
            }
        };
        last_problem = None;
        if !forced && last_text.as_ref() == Some(&text) {
            continue;
        }
        let parsed = parse_endpoints_checked(&text, publisher.check.as_ref());
        last_text = Some(text);
        match parsed {
            Ok(membership) => {
                publisher.publish(membership);
            }
            Err(e) => publisher.keep(&e.to_string()),
        }
    }
}

/// The file's text once it has stayed the same for [`DEBOUNCE`]; at once
/// when it is the text already applied (`last`) and the read is not
/// `forced`. Events that come while waiting are part of the same change.
async fn settled_text(
    path: &Path,
    last: Option<&str>,
    forced: bool,
    events: &mut mpsc::UnboundedReceiver<()>,
) -> std::io::Result<String> {
    let mut text = read_off_the_runtime(path).await?;
    if !forced && last == Some(text.as_str()) {
        return Ok(text);
    }
    loop {
        tokio::time::sleep(DEBOUNCE).await;
        while events.try_recv().is_ok() {}
        let again = read_off_the_runtime(path).await?;
        if again == text {
            return Ok(text);
        }
        text = again;
    }
}

/// [`read_text`](crate::read_text) on a thread for blocking work: a file
/// system that stalls (a hung network mount) holds that thread, not one of
/// the runtime's workers, which serve requests.
async fn read_off_the_runtime(path: &Path) -> std::io::Result<String> {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || crate::read_text(path))
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(e)))
}

/// [`Stamp::of`] on a thread for blocking work (as the reads).
async fn stamp_off_the_runtime(path: &Path) -> Option<Stamp> {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || Stamp::of(&path))
        .await
        .ok()
        .flatten()
}

/// Whether a folder event may have changed a file's text: not the opening,
/// reading or closing of a file (the proxy's own reads are such events).
fn may_change(event: &notify::Result<notify::Event>) -> bool {
    match event {
        Ok(event) => !matches!(event.kind, notify::EventKind::Access(_)),
        // An overflowed queue may have lost a change.
        Err(_) => true,
    }
}

/// A watch of the file's folder, forwarding each event that may change a
/// file as a nudge; `None`
/// (and polling alone) where the platform cannot watch.
fn watch_folder(path: &Path, tx: mpsc::UnboundedSender<()>) -> Option<notify::RecommendedWatcher> {
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut watcher = notify::recommended_watcher(move |event| {
        if may_change(&event) {
            let _ = tx.send(());
        }
    })
    .ok()?;
    match watcher.watch(&folder, notify::RecursiveMode::NonRecursive) {
        Ok(()) => Some(watcher),
        Err(e) => {
            tracing::info!("cannot watch {}: {e}; polling only", folder.display());
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp(len: u64, modified: u64, changed: i64) -> Stamp {
        Stamp {
            device: 1,
            inode: 7,
            len,
            modified: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(modified)),
            changed: Some((changed, 0)),
        }
    }

    #[test]
    fn a_poll_reads_unless_the_stamp_is_the_settled_one_read_last() {
        let read = stamp(100, 1_000, 1_000);
        assert!(!must_read(Some(&read), Some(&read.clone())));
        // Any difference is a change: the length, either time, another file
        // (a rename or a symlink swapped), a file that cannot be stat'ed.
        assert!(must_read(Some(&read), Some(&stamp(101, 1_000, 1_000))));
        assert!(must_read(Some(&read), Some(&stamp(100, 1_001, 1_001))));
        assert!(must_read(Some(&read), Some(&stamp(100, 1_000, 1_001))));
        let moved = Stamp {
            inode: 8,
            ..read.clone()
        };
        assert!(must_read(Some(&read), Some(&moved)));
        assert!(must_read(Some(&read), None));
        // Nothing settled read yet.
        assert!(must_read(None, Some(&read)));
    }

    #[test]
    fn a_stamp_stands_for_its_text_only_once_settled() {
        let at = |secs: u64| SystemTime::UNIX_EPOCH + Duration::from_secs(secs);
        let s = stamp(100, 1_000, 1_000);
        assert!(s.settled_before(at(1_000 + SETTLED.as_secs())));
        assert!(!s.settled_before(at(1_000 + SETTLED.as_secs() - 1)));
        // The later of the two times counts (`touch -d` sets the
        // modification time back; the change time moves on).
        let touched = stamp(100, 10, 1_000);
        assert!(!touched.settled_before(at(1_001)));
        assert!(touched.settled_before(at(1_000 + SETTLED.as_secs())));
        // Times in the future, or none: never settled.
        assert!(!stamp(100, 5_000, 5_000).settled_before(at(1_000)));
        let unknown = Stamp {
            modified: None,
            ..s.clone()
        };
        assert!(!unknown.settled_before(at(9_999)));
        let before_1970 = stamp(100, 0, -5);
        assert!(!before_1970.settled_before(at(9_999)));
    }

    #[test]
    #[cfg(unix)]
    fn a_real_files_stamp_changes_with_its_text() {
        let dir = std::env::temp_dir().join(format!("loadring-stamp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("endpoints");
        std::fs::write(&path, "10.0.0.1:80\n").unwrap();
        let first = Stamp::of(&path).unwrap();
        assert_eq!(Stamp::of(&path), Some(first.clone()));
        // Replaced by a rename, as an atomic writer does: another inode,
        // whatever the timestamps' tick.
        let next = dir.join("endpoints.new");
        std::fs::write(&next, "10.0.0.2:80\n").unwrap();
        std::fs::rename(&next, &path).unwrap();
        let second = Stamp::of(&path).unwrap();
        assert!(must_read(Some(&first), Some(&second)));
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(Stamp::of(&path), None);
    }
}
