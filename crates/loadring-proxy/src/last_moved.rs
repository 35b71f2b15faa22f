//! When something last moved, written by one task and read by another: a
//! streamed upload's last piece, a tunnel's last bytes. An `Instant` does
//! not fit an atomic; its distance from a fixed start does.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// The last moment something moved; at first, the moment it was made.
#[derive(Debug)]
pub(crate) struct LastMoved {
    from: Instant,
    /// Nanoseconds after `from`.
    since: AtomicU64,
}

impl LastMoved {
    /// Moved now.
    pub(crate) fn now() -> Self {
        LastMoved {
            from: Instant::now(),
            since: AtomicU64::new(0),
        }
    }

    /// It moved now.
    pub(crate) fn mark(&self) {
        let since = u64::try_from(self.from.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.since.store(since, Ordering::Relaxed);
    }

    /// When it last moved.
    pub(crate) fn at(&self) -> Instant {
        self.from + Duration::from_nanos(self.since.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_last_mark_is_read_back() {
        let moved = LastMoved::now();
        let made = Instant::now();
        assert_eq!(moved.at(), made);
        tokio::time::advance(Duration::from_millis(30)).await;
        assert_eq!(moved.at(), made, "no mark: when it was made");
        moved.mark();
        assert_eq!(moved.at(), made + Duration::from_millis(30));
    }
}
