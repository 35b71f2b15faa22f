//! A client connection that asks for nothing for the header timeout is
//! closed.
//!
//! hyper's header timeout starts with an HTTP/1.1 request's head, and it
//! also limits how long a kept-alive HTTP/1.1 connection waits for its next
//! one. Before the first head, hyper-util reads the first bytes to tell
//! HTTP/2's preface from HTTP/1.1, with no limit, and hyper gives an HTTP/2
//! connection none at all. So a client that connected and sent nothing, or
//! only the start of the preface (`P`, `PRI * HTTP/2.0`), or an HTTP/2
//! client that made one request and then waited, held its connection, and a
//! place of `--max-connections`, for as long as it liked: the slow-loris
//! attack, which the header timeout is there to stop.
//!
//! [`IdleLimit`] closes a connection that has made no request within the
//! header timeout. After an HTTP/1.1 request it steps aside (hyper's timer
//! takes over). An HTTP/2 connection is looked at once a period: one with
//! no stream open and no new stream over a whole period is told to go away
//! (`GOAWAY`). So an idle HTTP/2 connection goes between one and two
//! periods after its last stream ended or its last request came, and a
//! request costs a counter's update, not a timer's. A stream that stays
//! open (a gRPC stream, a long download, a WebSocket) keeps its connection
//! for new requests, as nginx's and Envoy's idle timeouts do; what bounds
//! such a stream is its own limits (`--timeout` on an upload, the send
//! timeout, the tunnel timeout).
//!
//! It also closes an HTTP/2 connection whose client resets most of what it
//! asks (reset_flood.rs), and sweeps an HTTP/2 connection's answers for
//! those its client takes nothing of (stream_send_limit.rs): watching what
//! the connection's client does is this wrapper's one job, and a second
//! wrapper would cost every poll a call.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep};

use crate::activity::Activity;
use crate::drain::Graceful;
use crate::stream_send_limit::QUIET_SWEEPS;

/// How a watched connection ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Ended<T> {
    /// Its own way: the connection's output (an idle HTTP/2 connection
    /// told to go away ends so too).
    Closed(T),
    /// It made no request within the limit: dropped, its socket closed.
    NoRequest,
    /// Its client reset `left` of its `requests` before their answers:
    /// dropped at once, its open streams with it.
    Flooded { left: u64, requests: u64 },
    /// Its client took nothing of any of its `cut` answers for the send
    /// timeout, and asked for nothing new for as long: dropped.
    Stalled { cut: usize },
}

pin_project! {
    /// `conn`, closed when it asks for nothing for `within`, or when its
    /// client floods it with resets.
    #[derive(Debug)]
    pub(crate) struct IdleLimit<C> {
        #[pin]
        conn: C,
        // While the connection is watched; `None` after an HTTP/1.1
        // request, or once an HTTP/2 one was told to go away.
        deadline: Option<Pin<Box<Sleep>>>,
        within: Duration,
        // The requests seen when the deadline was set, and whether an
        // HTTP/2 stream was open then.
        seen: u64,
        streams_were_open: bool,
        activity: Activity,
        // A quarter of the send timeout, when HTTP/2 answers are swept.
        sweep_every: Option<Duration>,
        // Made at the first poll of an HTTP/2 connection.
        sweeps: Option<Pin<Box<Sleep>>>,
        // The requests seen at the last sweep, and the sweeps in a row
        // since one came.
        seen_at_sweep: u64,
        sweeps_without_request: u32,
    }
}

impl<C> IdleLimit<C> {
    pub(crate) fn new(conn: C, within: Duration, activity: Activity) -> Self {
        IdleLimit {
            conn,
            deadline: Some(Box::pin(tokio::time::sleep(within))),
            within,
            seen: 0,
            streams_were_open: false,
            activity,
            sweep_every: None,
            sweeps: None,
            seen_at_sweep: 0,
            sweeps_without_request: 0,
        }
    }

    /// Also cuts the HTTP/2 answers whose client takes nothing of them for
    /// `send_timeout` (stream_send_limit.rs).
    pub(crate) fn cutting_stalled_answers(mut self, send_timeout: Duration) -> Self {
        self.sweep_every = Some(send_timeout / QUIET_SWEEPS);
        self
    }
}

impl<C: Graceful> Future for IdleLimit<C> {
    type Output = Ended<C::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        // Only HTTP/2 requests count as left early: an HTTP/1.1
        // connection costs a flag's load a poll.
        let http2 = this.activity.is_http2();
        if http2 {
            // Before the connection is polled: a request dropped while it
            // is, or later by its stream's task, wakes this one.
            this.activity.wake_on_leaving(cx.waker());
        }
        if let Poll::Ready(out) = this.conn.as_mut().poll(cx) {
            return Poll::Ready(Ended::Closed(out));
        }
        if http2 && crate::reset_flood::floods(this.activity) {
            return Poll::Ready(Ended::Flooded {
                left: this.activity.left_early(),
                requests: this.activity.requests(),
            });
        }
        if let (true, Some(every)) = (http2, *this.sweep_every) {
            let sweeps = this
                .sweeps
                .get_or_insert_with(|| Box::pin(tokio::time::sleep(every)));
            // Until it is polled before its time, so that it wakes this task.
            while sweeps.as_mut().poll(cx).is_ready() {
                let swept = this.activity.answers().sweep();
                let requests = this.activity.requests();
                if requests == *this.seen_at_sweep {
                    *this.sweeps_without_request += 1;
                } else {
                    *this.seen_at_sweep = requests;
                    *this.sweeps_without_request = 0;
                }
                // Nothing but dead streams, and nothing asked for a whole
                // send timeout.
                if swept.only_cut() && *this.sweeps_without_request >= QUIET_SWEEPS {
                    return Poll::Ready(Ended::Stalled { cut: swept.cut });
                }
                sweeps.as_mut().reset(Instant::now() + every);
            }
        }
        let Some(deadline) = this.deadline else {
            return Poll::Pending;
        };
        let requests = this.activity.requests();
        if requests > 0 && !this.activity.is_http2() {
            // HTTP/1.1: hyper's header timeout takes over; every later
            // poll costs one check.
            *this.deadline = None;
            return Poll::Pending;
        }
        if deadline.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        if requests == 0 {
            return Poll::Ready(Ended::NoRequest);
        }
        // Asked during the period, or a stream open at its start or its
        // end (a gRPC stream, a long answer): another period from now, so
        // that a whole period without one passes after the last stream.
        let open = this.activity.open_streams() > 0;
        let was_open = std::mem::replace(this.streams_were_open, open);
        if requests != *this.seen || open || was_open {
            *this.seen = requests;
            deadline.as_mut().reset(Instant::now() + *this.within);
            // Polled to be woken at the new deadline (not yet due).
            let _ = deadline.as_mut().poll(cx);
            return Poll::Pending;
        }
        // HTTP/2, no stream open and no new one for a whole period.
        *this.deadline = None;
        this.conn.as_mut().graceful_shutdown();
        this.conn.poll(cx).map(Ended::Closed)
    }
}

impl<C: Graceful> Graceful for IdleLimit<C> {
    fn graceful_shutdown(self: Pin<&mut Self>) {
        self.project().conn.graceful_shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Version;

    const WITHIN: Duration = Duration::from_millis(100);

    /// A connection that runs until told to go away.
    #[derive(Debug, Default)]
    struct Conn {
        told: bool,
    }

    impl Future for Conn {
        type Output = &'static str;

        fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<&'static str> {
            if self.told {
                Poll::Ready("went away")
            } else {
                Poll::Pending
            }
        }
    }

    impl Graceful for Conn {
        fn graceful_shutdown(mut self: Pin<&mut Self>) {
            self.told = true;
        }
    }

    /// `limit` driven until it ends, `ask` run at the given offsets from
    /// the start; the output and when it came.
    async fn run(
        limit: IdleLimit<Conn>,
        activity: Activity,
        asks: &[(Duration, Version)],
    ) -> (Ended<&'static str>, Duration) {
        let started = Instant::now();
        let asking = async {
            for &(at, version) in asks {
                tokio::time::sleep_until(started + at).await;
                activity.note(version);
            }
            std::future::pending::<()>().await;
        };
        tokio::select! {
            out = limit => (out, started.elapsed()),
            () = asking => unreachable!("asking never ends"),
            // A regression fails here rather than hangs (paused time runs on).
            () = tokio::time::sleep(WITHIN * 100) => panic!("still open after 100 periods"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_that_asks_for_nothing_is_dropped_at_the_deadline() {
        let activity = Activity::default();
        let limit = IdleLimit::new(Conn::default(), WITHIN, activity.clone());
        assert_eq!(run(limit, activity, &[]).await, (Ended::NoRequest, WITHIN));
    }

    #[tokio::test(start_paused = true)]
    async fn after_an_http_1_1_request_the_limit_steps_aside() {
        let activity = Activity::default();
        let mut limit = Box::pin(IdleLimit::new(Conn::default(), WITHIN, activity.clone()));
        activity.note(Version::HTTP_11);
        let waited = tokio::time::timeout(WITHIN * 10, limit.as_mut()).await;
        assert!(waited.is_err(), "still open ten periods later");
        assert!(limit.deadline.is_none(), "its timer went with the request");
    }

    #[tokio::test(start_paused = true)]
    async fn an_http_2_connection_goes_away_after_a_whole_period_without_a_stream() {
        // Asked at once: the first period had a request, the second none.
        let activity = Activity::default();
        let limit = IdleLimit::new(Conn::default(), WITHIN, activity.clone());
        let asks = [(Duration::ZERO, Version::HTTP_2)];
        assert_eq!(
            run(limit, activity, &asks).await,
            (Ended::Closed("went away"), WITHIN * 2)
        );
        // Asked every 0.55 periods up to 2.75: each period up to the one
        // that ends at 3 had a request, the next (3 to 4) none.
        let activity = Activity::default();
        let limit = IdleLimit::new(Conn::default(), WITHIN, activity.clone());
        let asks: Vec<_> = (0..=5)
            .map(|i| (WITHIN * 55 * i / 100, Version::HTTP_2))
            .collect();
        assert_eq!(
            run(limit, activity, &asks).await,
            (Ended::Closed("went away"), WITHIN * 4)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_http_2_connection_goes_away_a_whole_period_after_its_last_stream() {
        for (ends_at, gone_at) in [
            // Open at the checks at 1 to 5, not at 6: the period from 6 to
            // 7 is the first with none open at either end.
            (WITHIN * 55 / 10, WITHIN * 7),
            // Ended just after the check at 5.
            (WITHIN * 5 + Duration::from_millis(1), WITHIN * 7),
            // Ended just before it: the period from 5 to 6 is free.
            (WITHIN * 5 - Duration::from_millis(1), WITHIN * 6),
        ] {
            let activity = Activity::default();
            let limit = IdleLimit::new(Conn::default(), WITHIN, activity.clone());
            activity.note(Version::HTTP_2);
            let stream = activity.open_stream();
            let ending = async move {
                tokio::time::sleep(ends_at).await;
                drop(stream);
                std::future::pending::<()>().await;
            };
            let started = Instant::now();
            let ended = tokio::select! {
                out = limit => (out, started.elapsed()),
                () = ending => unreachable!("ending never ends"),
                // A regression fails here rather than hangs.
                () = tokio::time::sleep(WITHIN * 100) => panic!("still open after 100 periods"),
            };
            assert_eq!(
                ended,
                (Ended::Closed("went away"), gone_at),
                "stream ended at {ends_at:?}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_http_2_connection_with_a_stream_open_stays_open() {
        let activity = Activity::default();
        let mut limit = Box::pin(IdleLimit::new(Conn::default(), WITHIN, activity.clone()));
        activity.note(Version::HTTP_2);
        let _stream = activity.open_stream();
        let waited = tokio::time::timeout(WITHIN * 50, limit.as_mut()).await;
        assert!(waited.is_err(), "still open fifty periods later");
        assert!(!limit.conn.told, "never told to go away");
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_that_ends_first_gives_its_output() {
        let activity = Activity::default();
        let limit = IdleLimit::new(Conn { told: true }, WITHIN, activity.clone());
        assert_eq!(
            run(limit, activity, &[]).await,
            (Ended::Closed("went away"), Duration::ZERO)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_graceful_shutdown_reaches_the_connection() {
        let mut limit = Box::pin(IdleLimit::new(Conn::default(), WITHIN, Activity::default()));
        limit.as_mut().graceful_shutdown();
        assert_eq!(limit.await, Ended::Closed("went away"));
    }

    /// An HTTP/2 connection after `requests` requests, watched on a task
    /// of its own while `leave` of them are left one by one from the
    /// test's: how it ended, if it did.
    async fn left_on_another_task(
        version: Version,
        requests: u64,
        leave: u64,
    ) -> Option<Ended<&'static str>> {
        let activity = Activity::default();
        for _ in 0..requests {
            activity.note(version);
        }
        // A long limit: only the resets may end it.
        let limit = IdleLimit::new(Conn::default(), WITHIN * 1000, activity.clone());
        let mut task = tokio::spawn(limit);
        for _ in 0..leave {
            // Each left while the connection waits, woken by nothing else.
            tokio::task::yield_now().await;
            activity.note_left_early();
        }
        // Paused time: a connection not woken would leave the runtime
        // idle, and the wait would end at once.
        let ended = tokio::time::timeout(WITHIN * 10, &mut task).await;
        task.abort();
        ended.ok().map(Result::unwrap)
    }

    #[tokio::test(start_paused = true)]
    async fn the_reset_that_makes_a_flood_closes_its_connection_at_once() {
        let flooded = |left, requests| Some(Ended::Flooded { left, requests });
        assert_eq!(left_on_another_task(Version::HTTP_2, 150, 99).await, None);
        assert_eq!(
            left_on_another_task(Version::HTTP_2, 150, 100).await,
            flooded(100, 150)
        );
        // 100 of 200 is half, not more.
        assert_eq!(left_on_another_task(Version::HTTP_2, 200, 100).await, None);
        assert_eq!(
            left_on_another_task(Version::HTTP_2, 200, 101).await,
            flooded(101, 200)
        );
    }

    const SEND: Duration = Duration::from_millis(400);

    /// An HTTP/2 connection with one request whose answer its client
    /// takes nothing of, and `then` run beside it: how the connection
    /// ended, and when, if it did within 100 periods.
    async fn stalled_beside(
        then: impl Future<Output = ()>,
        activity: Activity,
    ) -> Option<(Ended<&'static str>, Duration)> {
        // A long idle limit: only the answers may end it.
        let limit = IdleLimit::new(Conn::default(), WITHIN * 1000, activity.clone())
            .cutting_stalled_answers(SEND);
        let started = Instant::now();
        activity.note(Version::HTTP_2);
        let stalled = activity.answers().watch(
            http::Response::new(crate::proxy_body::text_body("never taken")),
            activity.open_stream(),
        );
        let ended = tokio::select! {
            out = limit => Some((out, started.elapsed())),
            () = then => None,
        };
        drop(stalled);
        ended
    }

    #[tokio::test(start_paused = true)]
    async fn an_http_2_connection_with_nothing_but_stalled_answers_is_dropped() {
        // Swept from its first poll every quarter of the send timeout: the
        // first sweep sees the answer, the fifth finds it quiet a fourth
        // time, a whole send timeout after the first.
        assert_eq!(
            stalled_beside(tokio::time::sleep(WITHIN * 100), Activity::default()).await,
            Some((Ended::Stalled { cut: 1 }, SEND * 5 / 4))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_http_2_connection_that_goes_on_asking_stays_open() {
        // A request every half a send timeout: the stalled answer is cut,
        // the connection is not.
        let activity = Activity::default();
        let asking = {
            let activity = activity.clone();
            async move {
                for _ in 0..20 {
                    tokio::time::sleep(SEND / 2).await;
                    activity.note(Version::HTTP_2);
                }
            }
        };
        assert_eq!(stalled_beside(asking, activity).await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn an_http_2_connection_with_an_answer_being_taken_stays_open() {
        use http_body::{Body as _, Frame};
        use http_body_util::BodyExt as _;

        let activity = Activity::default();
        let endless = futures_util::stream::repeat_with(|| {
            Ok::<_, crate::body::BoxError>(Frame::data(bytes::Bytes::from_static(b"x")))
        });
        let mut taken = activity.answers().watch(
            http::Response::new(http_body_util::StreamBody::new(endless).boxed_unsync()),
            activity.open_stream(),
        );
        let taking = async move {
            for _ in 0..20 {
                tokio::time::sleep(SEND / 2).await;
                // A frame taken, as hyper does each time the client opens
                // its window.
                let mut cx = Context::from_waker(std::task::Waker::noop());
                let frame = Pin::new(taken.body_mut()).poll_frame(&mut cx);
                assert!(matches!(frame, Poll::Ready(Some(Ok(_)))));
            }
        };
        assert_eq!(stalled_beside(taking, activity).await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn an_http_1_1_connection_is_never_closed_for_resets() {
        assert_eq!(left_on_another_task(Version::HTTP_11, 150, 150).await, None);
    }
}
