//! What a client connection's service saw: how many requests it made,
//! whether they were HTTP/2's, how many of its HTTP/2 streams are open, how
//! many of them its client left before their answers began, and the HTTP/2
//! answers being sent. The connection's limits read it: [`IdleLimit`] (a
//! connection that asks for nothing), [`reset_flood`] (one that resets most
//! of what it asks) and [`Answers`] (one that takes nothing of an answer).
//!
//! [`IdleLimit`]: crate::idle_limit::IdleLimit
//! [`reset_flood`]: crate::reset_flood

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Waker;

use futures_util::task::AtomicWaker;
use http::Version;

use crate::stream_send_limit::Answers;

/// One connection's record, shared by its service and its limits.
#[derive(Debug, Clone, Default)]
pub(crate) struct Activity(Arc<Seen>);

#[derive(Debug, Default)]
struct Seen {
    /// Written by the connection's task only (it calls the service).
    requests: AtomicU64,
    http2: AtomicBool,
    /// HTTP/2 streams not over: one [`OpenStream`] each, dropped on the
    /// stream's own task.
    open_streams: AtomicU64,
    /// Written where a request's answer is dropped: an HTTP/2 stream's
    /// own task.
    left_early: AtomicU64,
    /// The connection's task, woken when a request is left.
    connection: AtomicWaker,
    /// Its HTTP/2 answers being sent, for the send timeout.
    answers: Answers,
}

impl Activity {
    /// One more request, of `version`.
    pub(crate) fn note(&self, version: Version) {
        let seen = &self.0;
        // One writer (the connection's task calls its service): a load and
        // a store, no locked instruction.
        let requests = seen.requests.load(Ordering::Relaxed);
        seen.requests.store(requests + 1, Ordering::Relaxed);
        if version == Version::HTTP_2 {
            seen.http2.store(true, Ordering::Relaxed);
        }
    }

    /// A request whose client left before its answer began; the task
    /// last [registered](Self::wake_on_leaving) is woken to look.
    pub(crate) fn note_left_early(&self) {
        self.0.left_early.fetch_add(1, Ordering::Relaxed);
        self.0.connection.wake();
    }

    /// `waker`'s task is to be woken by the next [`note_left_early`](Self::note_left_early).
    pub(crate) fn wake_on_leaving(&self, waker: &Waker) {
        self.0.connection.register(waker);
    }

    pub(crate) fn requests(&self) -> u64 {
        self.0.requests.load(Ordering::Relaxed)
    }

    pub(crate) fn is_http2(&self) -> bool {
        self.0.http2.load(Ordering::Relaxed)
    }

    /// One more HTTP/2 stream, open until the mark returned is dropped.
    pub(crate) fn open_stream(&self) -> OpenStream {
        self.0.open_streams.fetch_add(1, Ordering::Relaxed);
        OpenStream(self.clone())
    }

    /// The HTTP/2 streams whose [`OpenStream`] is not dropped yet.
    pub(crate) fn open_streams(&self) -> u64 {
        self.0.open_streams.load(Ordering::Relaxed)
    }

    pub(crate) fn left_early(&self) -> u64 {
        self.0.left_early.load(Ordering::Relaxed)
    }

    /// The connection's HTTP/2 answers (stream_send_limit.rs).
    pub(crate) fn answers(&self) -> &Answers {
        &self.0.answers
    }
}

/// One HTTP/2 stream of a connection, counted open until dropped: held by
/// the request's answer until the last of it is sent, or by its tunnel
/// until that closes. An HTTP/2 connection with a stream open is not idle
/// ([`IdleLimit`]): a gRPC stream or a long download may go on for longer
/// than the header timeout without a new request.
///
/// [`IdleLimit`]: crate::idle_limit::IdleLimit
#[derive(Debug)]
pub(crate) struct OpenStream(Activity);

impl OpenStream {
    /// The connection's record.
    pub(crate) fn activity(&self) -> &Activity {
        &self.0
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.0 .0.open_streams.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_is_open_until_its_mark_is_dropped() {
        let activity = Activity::default();
        let first = activity.open_stream();
        let second = activity.open_stream();
        assert_eq!(activity.open_streams(), 2);
        drop(first);
        assert_eq!(activity.open_streams(), 1);
        // Dropped on another thread, as a stream's task may be.
        std::thread::spawn(move || drop(second)).join().unwrap();
        assert_eq!(activity.open_streams(), 0);
    }

    #[test]
    fn a_stream_is_open_until_its_answer_is_dropped_or_has_no_body() {
        use crate::proxy_body::{empty_body, text_body};
        use http_body_util::BodyExt as _;

        let activity = Activity::default();
        let answers = activity.answers();
        let watch = |body| answers.watch(http::Response::new(body), activity.open_stream());
        let long = watch(text_body("long"));
        let endless = futures_util::stream::repeat_with(|| {
            Ok::<_, crate::body::BoxError>(http_body::Frame::data(bytes::Bytes::from_static(b"x")))
        });
        let never_taken = watch(http_body_util::StreamBody::new(endless).boxed_unsync());
        let empty = watch(empty_body());
        // Ended with its head: not counted from then on.
        assert_eq!(activity.open_streams(), 2);
        drop(empty);
        // Both cut (never taken from), their streams still hyper's: still
        // open.
        for _ in 0..=crate::stream_send_limit::QUIET_SWEEPS {
            answers.sweep();
        }
        assert_eq!(answers.sweep().cut, 2);
        assert_eq!(activity.open_streams(), 2);
        drop(never_taken);
        assert_eq!(activity.open_streams(), 1);
        drop(long);
        assert_eq!(activity.open_streams(), 0);
    }
}
