//! Re-reading a cluster's endpoints file: on a change seen by a watch of
//! its folder (a file replaced by rename or a symlink swapped is an event
//! there, not on the old file), on a poll every 250 ms (for file systems
//! without events), and on SIGHUP. A file that cannot be read or parsed
//! keeps the current pool and logs one line saying why.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::Watcher;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::cluster::Cluster;
use crate::endpoints::parse_endpoints;

/// How often the file is read even without events.
pub const POLL_INTERVAL: Duration = Duration::from_millis(250);

/// Starts watching the cluster's endpoints file, if it has one. This
/// installs a SIGHUP handler for the process (tokio's): from then on SIGHUP
/// re-reads the file instead of ending the process.
pub fn spawn_endpoint_reloads(cluster: Arc<Cluster>) -> Option<JoinHandle<()>> {
    let path = cluster.config().endpoints_file.clone()?;
    let (tx, mut events) = mpsc::unbounded_channel::<()>();
    let watcher = watch_folder(&path, tx);
    Some(tokio::spawn(async move {
        // Dropping the watcher stops it: it lives as long as this task.
        let _watcher = watcher;
        let mut hangups = hangups();
        let mut poll = tokio::time::interval(POLL_INTERVAL);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut reloader = Reloader {
            cluster,
            path,
            last_text: None,
            last_problem: None,
        };
        // The pool was built from the file as it is now.
        reloader.last_text = std::fs::read_to_string(&reloader.path).ok();
        loop {
            let forced = tokio::select! {
                _ = poll.tick() => false,
                Some(()) = events.recv() => false,
                Some(()) = next_hangup(&mut hangups) => true,
            };
            reloader.reload(forced);
        }
    }))
}

fn hangups() -> Option<tokio::signal::unix::Signal> {
    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok()
}

async fn next_hangup(signal: &mut Option<tokio::signal::unix::Signal>) -> Option<()> {
    match signal {
        Some(s) => s.recv().await,
        None => std::future::pending().await,
    }
}

/// A watch of the file's folder, forwarding any event as a nudge; `None`
/// (and polling alone) where the platform cannot watch.
fn watch_folder(path: &Path, tx: mpsc::UnboundedSender<()>) -> Option<notify::RecommendedWatcher> {
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut watcher = notify::recommended_watcher(move |_event| {
        let _ = tx.send(());
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

struct Reloader {
    cluster: Arc<Cluster>,
    path: PathBuf,
    /// The text last acted on: an unchanged file is not parsed again.
    last_text: Option<String>,
    /// The last read error logged, so a missing file logs once.
    last_problem: Option<String>,
}

impl Reloader {
    fn reload(&mut self, forced: bool) {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) => {
                let problem = e.to_string();
                if self.last_problem.as_ref() != Some(&problem) {
                    self.warn_kept(&problem);
                    self.last_problem = Some(problem);
                }
                return;
            }
        };
        self.last_problem = None;
        if !forced && self.last_text.as_ref() == Some(&text) {
            return;
        }
        self.last_text = Some(text.clone());
        let endpoints = match parse_endpoints(&text) {
            Ok(endpoints) => endpoints,
            Err(e) => return self.warn_kept(&e),
        };
        if endpoints.is_empty() {
            return self.warn_kept("no endpoints");
        }
        let mut all = self.cluster.config().endpoints.clone();
        all.extend(endpoints);
        match self.cluster.set_endpoints(all) {
            Ok(true) => tracing::info!(
                cluster = self.cluster.name(),
                "endpoints reloaded from {}: {} endpoints",
                self.path.display(),
                self.cluster.balancer().endpoints().len()
            ),
            Ok(false) => {}
            Err(e) => self.warn_kept(&e),
        }
    }

    fn warn_kept(&self, why: &str) {
        tracing::warn!(
            cluster = self.cluster.name(),
            "endpoints file {}: {why}; keeping the current {} endpoints",
            self.path.display(),
            self.cluster.balancer().endpoints().len()
        );
    }
}
