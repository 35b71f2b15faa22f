//! Whose turn it is while a request body streams to its backend.
//!
//! The backend's timeout (`--timeout`) is how long it may take to answer.
//! A body larger than the retry buffer (or any body when no retry is
//! allowed, a gRPC call's) streams to the backend as the client sends it,
//! so an upload can take as long as the client takes: timed from the
//! attempt's start, a client uploading slowly but steadily got 504 once
//! the timeout had passed, and the endpoint was blamed for it (counted as
//! failed, towards ejection). nginx reads the whole body before it connects;
//! Envoy starts its route timeout once the whole request has been received.
//!
//! [`Upload`] follows a streamed body: each piece passed from the client to
//! the backend is a step, and so is its end. The backend's time runs from
//! the last step (the attempt's timer, when it runs out, asks
//! [`Upload::left`] and runs again for what is left), so a steady upload is never late and the backend has
//! the whole timeout to answer once the body is sent. No step for the
//! timeout is [`Late::Client`] when the body was waiting for the client
//! (it paused too long: 408, as a body read ahead that stalls, and no
//! verdict on the endpoint), and [`Late::Backend`] otherwise (it stopped
//! reading the body, or did not answer).
//!
//! Only streamed bodies are followed: a request without a body, or one read
//! ahead whole, is timed from its attempt's start as before, and pays
//! nothing for this.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use tokio::time::Instant;

use crate::last_moved::LastMoved;

/// Who was late when an attempt's time ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Late {
    /// The backend: it did not read the body, or did not answer.
    Backend,
    /// The client: the body waited for it.
    Client,
}

/// One streamed body's progress, shared by the body (which steps) and the
/// attempt's timer (which reads).
#[derive(Debug, Clone)]
pub(crate) struct Upload(Arc<Progress>);

#[derive(Debug)]
struct Progress {
    last_step: LastMoved,
    /// The body's last look at the client's stream found nothing yet.
    waiting_for_client: AtomicBool,
}

impl Upload {
    /// An upload whose first step is now.
    pub(crate) fn new() -> Self {
        Upload(Arc::new(Progress {
            last_step: LastMoved::now(),
            waiting_for_client: AtomicBool::new(false),
        }))
    }

    /// What the body's look at the client's stream gave: a piece or the
    /// end is a step, nothing yet is a wait for the client.
    pub(crate) fn looked<T>(&self, polled: &Poll<T>) {
        let waiting = polled.is_pending();
        self.0.waiting_for_client.store(waiting, Ordering::Relaxed);
        if !waiting {
            self.step();
        }
    }

    /// A piece read ahead was passed on.
    pub(crate) fn step(&self) {
        self.0.last_step.mark();
    }

    /// The time the backend has left, `timeout` counted from the last
    /// step; when none is left, who was late. The attempt's timer asks
    /// when it runs out, and runs again for the time left after a step.
    pub(crate) fn left(&self, timeout: Duration) -> Result<Duration, Late> {
        let due = self.0.last_step.at() + timeout;
        let now = Instant::now();
        if due > now {
            return Ok(due - now);
        }
        Err(if self.0.waiting_for_client.load(Ordering::Relaxed) {
            Late::Client
        } else {
            Late::Backend
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUT: Duration = Duration::from_millis(100);

    /// An attempt that never ends, the upload stepped as `steps` says (the
    /// offsets from the start, and whether the body then waits for the
    /// client): when the attempt was late, and who was.
    async fn late_after(steps: &[(Duration, bool)]) -> (Duration, Late) {
        let upload = Upload::new();
        let started = Instant::now();
        let stepping = {
            let upload = upload.clone();
            let steps = steps.to_vec();
            async move {
                for (at, then_waits) in steps {
                    tokio::time::sleep_until(started + at).await;
                    upload.looked(&Poll::Ready(()));
                    if then_waits {
                        upload.looked(&Poll::<()>::Pending);
                    }
                }
                std::future::pending::<()>().await;
            }
        };
        // The attempt's timer as the forwarder runs it, for an attempt that
        // never ends: the whole timeout, then whatever is left.
        let timing = async {
            let mut budget = TIMEOUT;
            loop {
                tokio::time::sleep(budget).await;
                match upload.left(TIMEOUT) {
                    Ok(left) => budget = left,
                    Err(late) => return late,
                }
            }
        };
        tokio::select! {
            late = timing => (started.elapsed(), late),
            () = stepping => unreachable!("stepping never ends"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn with_no_step_the_time_runs_from_the_start() {
        assert_eq!(late_after(&[]).await, (TIMEOUT, Late::Backend));
    }

    #[tokio::test(start_paused = true)]
    async fn a_steady_upload_is_never_late_and_the_backend_then_has_the_whole_timeout() {
        // A piece every 0.9 timeouts for nine timeouts, then the end: the
        // backend does not answer.
        let steps: Vec<_> = (1..=10).map(|i| (TIMEOUT * 9 * i / 10, false)).collect();
        assert_eq!(late_after(&steps).await, (TIMEOUT * 10, Late::Backend));
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_waiting_for_its_client_makes_the_client_late() {
        // Two pieces, then the client sends nothing.
        let steps = [(TIMEOUT / 2, true), (TIMEOUT, true)];
        assert_eq!(late_after(&steps).await, (TIMEOUT * 2, Late::Client));
    }

    #[tokio::test(start_paused = true)]
    async fn the_time_left_counts_from_the_last_step() {
        let upload = Upload::new();
        tokio::time::advance(TIMEOUT * 3 / 10).await;
        assert_eq!(upload.left(TIMEOUT), Ok(TIMEOUT * 7 / 10));
        upload.step();
        assert_eq!(upload.left(TIMEOUT), Ok(TIMEOUT));
        tokio::time::advance(TIMEOUT).await;
        assert_eq!(upload.left(TIMEOUT), Err(Late::Backend));
    }
}
