//! The endpoints file, followed: re-read on a change seen by a watch of its
//! folder (a file replaced by rename, or a symlink swapped as Kubernetes
//! swaps a ConfigMap's `..data` link, is an event on the folder, not on the
//! old file), on a poll every 250 ms (file systems without events: the text
//! is the fingerprint, an unchanged file is not parsed again), and on
//! [`Discovery::refresh`](crate::Discovery::refresh). A file that cannot be
//! read or parsed keeps the current membership and logs one line saying
//! why (a missing file once, not every poll).
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
use std::time::Duration;

use notify::Watcher;
use tokio::sync::mpsc;

use crate::{parse_endpoints_checked, EndpointCheck, Membership, Publisher};

/// How often the file is read even without events.
pub const POLL_INTERVAL: Duration = Duration::from_millis(250);

/// How long a changed file must stay unchanged before it is applied.
pub const DEBOUNCE: Duration = Duration::from_millis(100);

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
    loop {
        let forced = tokio::select! {
            _ = poll.tick() => false,
            Some(()) = events.recv() => false,
            () = publisher.refreshed() => true,
        };
        let text = match settled_text(&path, last_text.as_deref(), forced, &mut events).await {
            Ok(text) => text,
            Err(e) => {
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
