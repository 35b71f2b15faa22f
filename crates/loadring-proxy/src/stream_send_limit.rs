//! An HTTP/2 answer its client takes nothing of for the send timeout is
//! cut off, and a connection left with nothing but such answers is closed.
//!
//! [`SendLimit`](crate::send_limit::SendLimit) watches the client's socket,
//! and that is all an HTTP/1.1 client can hold back. An HTTP/2 client can
//! keep its socket moving and one stream's flow-control window shut (it
//! never sends that stream a `WINDOW_UPDATE`), or the whole connection's.
//! hyper's server then stops asking that stream's body for more, so nothing
//! in the body sees the time go by: the request kept its place at the
//! endpoint, the connection to the backend and the backend's worker for as
//! long as the client liked, one such stream for each of the 200 a
//! connection may open.
//!
//! So every HTTP/2 answer's body is shared with its connection's
//! [`Answers`], which the connection's limit
//! ([`IdleLimit`](crate::idle_limit::IdleLimit)) looks at every quarter of
//! the send timeout ([`Answers::sweep`]). An answer hyper has not asked for
//! more of over [`QUIET_SWEEPS`] sweeps in a row, a whole send timeout, and
//! that is not waiting for its backend, is taken from hyper and dropped:
//! what the backend still owes goes as when a client leaves (read to its
//! end or cancelled, `--max-abandoned`), and the stream ends with an error
//! (a reset) if hyper ever asks again. nginx and Varnish apply their send
//! timeout to such a stream the same way.
//!
//! A stream that was cut still takes one of its connection's streams, and
//! what hyper holds of it, until its client resets it or leaves. A
//! connection whose every answer was cut and that asked for nothing new
//! for a send timeout is therefore closed, as an HTTP/1.1 connection is
//! when its socket is held back: that is a client whose connection window
//! is shut, or one that tried to keep a connection of dead streams (at
//! most its 200 streams, while it goes on asking).
//!
//! A body costs a lock each time hyper asks it for more, and its answer a
//! place in the connection's list: this is HTTP/2's only.

use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::Response;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;

use crate::body::BoxError;
use crate::proxy_body::ProxyBody;

/// The sweeps in a row that must see an answer take nothing before it is
/// cut: sweeps come a quarter of the send timeout apart, so an answer is
/// cut between one and one and a quarter send timeouts after its client
/// last took from it.
pub(crate) const QUIET_SWEEPS: u32 = 4;

/// The client took nothing of the answer for the send timeout.
#[derive(Debug, thiserror::Error)]
#[error("the client took nothing of this answer for the send timeout")]
pub(crate) struct AnswerCut;

/// One client connection's HTTP/2 answers still being sent.
#[derive(Debug, Default)]
pub(crate) struct Answers(Mutex<Vec<Watched>>);

/// An answer as the sweeps see it.
#[derive(Debug)]
struct Watched {
    /// Gone when hyper has dropped the answer's body.
    answer: Weak<Shared>,
    /// The body's polls at the last sweep; `None` before the first.
    polls_seen: Option<u64>,
    /// The sweeps since then that found them the same.
    quiet: u32,
}

/// What a sweep found, after it cut what it had to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Swept {
    /// Answers being sent.
    pub(crate) open: usize,
    /// Answers cut, by this sweep or an earlier one, whose streams hyper
    /// still holds.
    pub(crate) cut: usize,
}

impl Swept {
    /// Nothing but cut answers: the connection serves nothing.
    pub(crate) fn only_cut(self) -> bool {
        self.open == 0 && self.cut > 0
    }
}

#[derive(Debug)]
struct Shared(Mutex<Sending>);

#[derive(Debug)]
struct Sending {
    /// Taken when the answer is cut.
    body: Option<ProxyBody>,
    /// The times hyper asked for more.
    polls: u64,
    /// The body's last answer was `Pending`: it waits for its backend, not
    /// for the client.
    waits_for_backend: bool,
    /// Its last frame is out.
    ended: bool,
    cut: bool,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing held under these locks can be left half-updated by a panic.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Answers {
    /// `response`, its body watched from now on, `keep` held with it until
    /// hyper drops it (the stream's mark that counts it open). A body that
    /// has ended already (a 204, an answer to HEAD) has nothing to hold
    /// back: `keep` is dropped at once, its stream ending with its head.
    pub(crate) fn watch<K: Send + 'static>(
        &self,
        response: Response<ProxyBody>,
        keep: K,
    ) -> Response<ProxyBody> {
        if response.body().is_end_stream() {
            return response;
        }
        let (head, body) = response.into_parts();
        let shared = Arc::new(Shared(Mutex::new(Sending {
            body: Some(body),
            polls: 0,
            waits_for_backend: false,
            ended: false,
            cut: false,
        })));
        let mut watched = lock(&self.0);
        if watched.len() == watched.capacity() {
            // Answers done since the last sweep make room before the list
            // grows: it stays within twice the answers open at once.
            watched.retain(|w| w.answer.strong_count() > 0);
        }
        watched.push(Watched {
            answer: Arc::downgrade(&shared),
            polls_seen: None,
            quiet: 0,
        });
        drop(watched);
        Response::from_parts(
            head,
            WatchedBody {
                shared,
                _keep: keep,
            }
            .boxed_unsync(),
        )
    }

    /// Looks at every answer: one its client took nothing of for
    /// [`QUIET_SWEEPS`] sweeps in a row (not waiting for its backend) is
    /// cut, its body dropped.
    pub(crate) fn sweep(&self) -> Swept {
        let mut swept = Swept::default();
        // Dropped after the locks: a body's drop may hand its backend's
        // rest to a task of its own.
        let mut cut_bodies = Vec::new();
        lock(&self.0).retain_mut(|watched| {
            let Some(shared) = watched.answer.upgrade() else {
                return false;
            };
            let mut sending = lock(&shared.0);
            if sending.cut {
                swept.cut += 1;
                return true;
            }
            if sending.ended {
                return false;
            }
            if sending.waits_for_backend || watched.polls_seen != Some(sending.polls) {
                watched.polls_seen = Some(sending.polls);
                watched.quiet = 0;
                swept.open += 1;
                return true;
            }
            watched.quiet += 1;
            if watched.quiet < QUIET_SWEEPS {
                swept.open += 1;
                return true;
            }
            sending.cut = true;
            cut_bodies.extend(sending.body.take());
            swept.cut += 1;
            true
        });
        drop(cut_bodies);
        swept
    }
}

/// An HTTP/2 answer's body, shared with its connection's [`Answers`].
#[derive(Debug)]
struct WatchedBody<K> {
    shared: Arc<Shared>,
    _keep: K,
}

impl<K> Body for WatchedBody<K> {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let mut sending = lock(&self.shared.0);
        let sending = &mut *sending;
        sending.polls = sending.polls.wrapping_add(1);
        let Some(body) = sending.body.as_mut() else {
            // Cut: an error, so that hyper resets the stream rather than
            // end it as if the answer were whole.
            return Poll::Ready(sending.cut.then(|| Err(AnswerCut.into())));
        };
        let frame = Pin::new(&mut *body).poll_frame(cx);
        sending.waits_for_backend = frame.is_pending();
        if let Poll::Ready(frame) = &frame {
            sending.ended = frame.is_none() || body.is_end_stream();
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        let sending = lock(&self.shared.0);
        match &sending.body {
            Some(body) => body.is_end_stream(),
            // Not for a cut answer: hyper would end its stream as whole.
            None => !sending.cut,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &lock(&self.shared.0).body {
            Some(body) => body.size_hint(),
            None => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    use crate::proxy_body::{empty_body, text_body};

    /// A body that yields a byte each time it is asked, or waits, as told;
    /// it says when it is dropped.
    #[derive(Debug)]
    struct Endless {
        waits: Arc<AtomicBool>,
        dropped: Arc<AtomicBool>,
    }

    impl Body for Endless {
        type Data = Bytes;
        type Error = BoxError;

        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
            if self.waits.load(Ordering::SeqCst) {
                return Poll::Pending;
            }
            Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"x")))))
        }
    }

    impl Drop for Endless {
        fn drop(&mut self) {
            self.dropped.store(true, Ordering::SeqCst);
        }
    }

    struct Answer {
        body: ProxyBody,
        waits: Arc<AtomicBool>,
        dropped: Arc<AtomicBool>,
    }

    impl Answer {
        /// Asks the body for a frame, as hyper does when the client's
        /// window has room.
        fn ask(&mut self) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
            let mut cx = Context::from_waker(std::task::Waker::noop());
            Pin::new(&mut self.body).poll_frame(&mut cx)
        }
    }

    /// An endless answer watched by `answers`.
    fn watched(answers: &Answers) -> Answer {
        let waits = Arc::new(AtomicBool::new(false));
        let dropped = Arc::new(AtomicBool::new(false));
        let body = Endless {
            waits: waits.clone(),
            dropped: dropped.clone(),
        }
        .boxed_unsync();
        let response = answers.watch(Response::new(body), ());
        Answer {
            body: response.into_body(),
            waits,
            dropped,
        }
    }

    fn open(open: usize) -> Swept {
        Swept { open, cut: 0 }
    }

    #[test]
    fn an_answer_never_asked_for_is_cut_at_the_fourth_quiet_sweep() {
        let answers = Answers::default();
        let mut answer = watched(&answers);
        // The first sweep sees it; the next three find it quiet.
        for _ in 0..QUIET_SWEEPS {
            assert_eq!(answers.sweep(), open(1));
            assert!(!answer.dropped.load(Ordering::SeqCst));
        }
        assert_eq!(answers.sweep(), Swept { open: 0, cut: 1 });
        assert!(answer.dropped.load(Ordering::SeqCst), "its backend's side");
        assert!(!answer.body.is_end_stream(), "not ended as if whole");
        match answer.ask() {
            Poll::Ready(Some(Err(e))) => assert!(e.is::<AnswerCut>(), "{e}"),
            other => panic!("{other:?}"),
        }
        // Still counted while hyper holds it, and no more once dropped.
        assert!(answers.sweep().only_cut());
        drop(answer);
        assert_eq!(answers.sweep(), Swept::default());
    }

    #[test]
    fn an_answer_taken_from_between_sweeps_is_never_cut() {
        let answers = Answers::default();
        let mut answer = watched(&answers);
        for _ in 0..QUIET_SWEEPS * 5 {
            assert!(answer.ask().is_ready());
            assert_eq!(answers.sweep(), open(1));
        }
        // Its quiet sweeps count from the one that saw its last frame
        // taken.
        for _ in 1..QUIET_SWEEPS {
            assert_eq!(answers.sweep(), open(1));
        }
        assert_eq!(answers.sweep(), Swept { open: 0, cut: 1 });
    }

    #[test]
    fn an_answer_waiting_for_its_backend_is_the_backends_to_bound() {
        let answers = Answers::default();
        let mut answer = watched(&answers);
        answer.waits.store(true, Ordering::SeqCst);
        assert!(answer.ask().is_pending());
        for _ in 0..QUIET_SWEEPS * 5 {
            assert_eq!(answers.sweep(), open(1));
        }
        // Once its backend has sent, the client's quiet counts again.
        answer.waits.store(false, Ordering::SeqCst);
        assert!(answer.ask().is_ready());
        for _ in 0..QUIET_SWEEPS {
            assert_eq!(answers.sweep(), open(1));
        }
        assert_eq!(answers.sweep(), Swept { open: 0, cut: 1 });
    }

    #[test]
    fn a_cut_answer_among_open_ones_leaves_its_connection_serving() {
        let answers = Answers::default();
        let stalled = watched(&answers);
        let mut flowing = watched(&answers);
        for _ in 0..QUIET_SWEEPS {
            assert!(flowing.ask().is_ready());
            assert_eq!(answers.sweep(), open(2));
        }
        assert!(flowing.ask().is_ready());
        let swept = answers.sweep();
        assert_eq!(swept, Swept { open: 1, cut: 1 });
        assert!(!swept.only_cut());
        assert!(stalled.dropped.load(Ordering::SeqCst));
        assert!(!flowing.dropped.load(Ordering::SeqCst));
    }

    #[test]
    fn ended_and_dropped_answers_leave_the_list() {
        let answers = Answers::default();
        // A body with nothing in it is not watched at all.
        let empty = answers.watch(Response::new(empty_body()), ());
        assert!(empty.body().is_end_stream());
        let mut short = answers
            .watch(Response::new(text_body("done")), ())
            .into_body();
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert!(matches!(
            Pin::new(&mut short).poll_frame(&mut cx),
            Poll::Ready(Some(Ok(_)))
        ));
        assert!(short.is_end_stream());
        let gone = watched(&answers);
        drop(gone);
        assert_eq!(lock(&answers.0).len(), 2);
        // Ended: nothing left to hold back, never cut.
        for _ in 0..QUIET_SWEEPS * 2 {
            assert_eq!(answers.sweep(), Swept::default());
        }
        assert_eq!(lock(&answers.0).len(), 0);
    }

    #[test]
    fn the_list_makes_room_from_answers_done_before_it_grows() {
        let answers = Answers::default();
        // One answer in ten still open: 100 of 1,000.
        let mut kept = Vec::new();
        for i in 0..1_000 {
            let answer = watched(&answers);
            if i % 10 == 0 {
                kept.push(answer);
            }
        }
        let list = lock(&answers.0);
        assert_eq!(
            list.iter().filter(|w| w.answer.strong_count() > 0).count(),
            kept.len(),
            "every open answer is still watched"
        );
        // Within twice the answers open, rounded up to a power of two.
        assert!(list.capacity() <= 256, "{}", list.capacity());
    }

    #[test]
    fn a_watched_body_tells_its_size_until_it_is_cut() {
        let answers = Answers::default();
        let body = answers
            .watch(Response::new(text_body("four")), ())
            .into_body();
        // hyper gives an HTTP/2 answer without a length this one.
        assert_eq!(body.size_hint().exact(), Some(4));
        let answer = watched(&answers);
        for _ in 0..=QUIET_SWEEPS {
            answers.sweep();
        }
        assert!(answer.dropped.load(Ordering::SeqCst));
        assert_eq!(answer.body.size_hint().exact(), None);
    }

    #[test]
    fn a_connection_with_no_answers_is_not_one_of_cut_answers_only() {
        let answers = Answers::default();
        assert_eq!(answers.sweep(), Swept::default());
        assert!(!answers.sweep().only_cut());
        assert!(!Swept { open: 1, cut: 1 }.only_cut());
        assert!(Swept { open: 0, cut: 1 }.only_cut());
    }
}
