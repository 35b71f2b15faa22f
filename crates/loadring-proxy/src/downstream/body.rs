//! A client's request body as the gateway reads it: from hyper's HTTP/2
//! server, or from this module's HTTP/1.1 connection, which reads the body
//! off its socket only when the request's reader asks for more (so a
//! backend that is slow to read holds the client back, and an unread body
//! costs nothing).
//!
//! The connection and the reader share one slot: the reader says it wants
//! a frame, the connection puts one there. Only a request with a body pays
//! for the slot's lock; one without is [`ClientBody::Empty`].

use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;

/// A request body from a client.
#[derive(Debug)]
pub(crate) enum ClientBody {
    /// An HTTP/2 stream's, from hyper.
    Hyper(Incoming),
    /// An HTTP/1.1 body, read by its connection on demand.
    Own(BodyReceiver),
    /// No body.
    Empty,
}

/// Why a client's body could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BodyError {
    #[error(transparent)]
    Hyper(#[from] hyper::Error),
    /// The HTTP/1.1 client broke the body's framing, or left before its end.
    #[error("{0}")]
    Client(String),
}

impl Body for ClientBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        match self.get_mut() {
            ClientBody::Hyper(body) => match Pin::new(body).poll_frame(cx) {
                Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(BodyError::Hyper(e)))),
                Poll::Ready(Some(Ok(frame))) => Poll::Ready(Some(Ok(frame))),
                Poll::Ready(None) => Poll::Ready(None),
                Poll::Pending => Poll::Pending,
            },
            ClientBody::Own(body) => body.poll_frame(cx),
            ClientBody::Empty => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ClientBody::Hyper(body) => body.is_end_stream(),
            ClientBody::Own(body) => body.is_end_stream(),
            ClientBody::Empty => true,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ClientBody::Hyper(body) => body.size_hint(),
            ClientBody::Own(body) => body.size_hint(),
            ClientBody::Empty => SizeHint::with_exact(0),
        }
    }
}

/// The slot between a connection and its request's reader.
#[derive(Debug, Default)]
struct Slot {
    frame: Option<Result<Frame<Bytes>, BodyError>>,
    /// The reader waits for a frame.
    wanted: bool,
    /// The connection put the last frame (or an error): nothing follows.
    ended: bool,
    /// The connection went before the body's end.
    broken: bool,
    /// The reader is gone: the connection stops reading the body.
    dropped: bool,
    reader: Option<Waker>,
    connection: Option<Waker>,
}

#[derive(Debug)]
struct Shared(Mutex<Slot>);

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Slot> {
        // A panic while the lock is held leaves the slot as it was: usable.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The reader's end: a request's body.
#[derive(Debug)]
pub(crate) struct BodyReceiver {
    shared: Arc<Shared>,
    /// Data bytes still to come, when the body has a length.
    remaining: Option<u64>,
    done: bool,
}

/// The connection's end.
#[derive(Debug)]
pub(crate) struct BodySender {
    shared: Arc<Shared>,
}

/// A body of `length` bytes (`None`: chunked), with the connection's end
/// that feeds it.
pub(crate) fn channel(length: Option<u64>) -> (BodySender, BodyReceiver) {
    let shared = Arc::new(Shared(Mutex::new(Slot::default())));
    (
        BodySender {
            shared: shared.clone(),
        },
        BodyReceiver {
            shared,
            remaining: length,
            done: false,
        },
    )
}

impl BodyReceiver {
    fn poll_frame(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        if self.done {
            return Poll::Ready(None);
        }
        let mut slot = self.shared.lock();
        if let Some(frame) = slot.frame.take() {
            slot.wanted = false;
            let waker = slot.connection.take();
            drop(slot);
            if let Some(waker) = waker {
                waker.wake();
            }
            match &frame {
                Ok(frame) => {
                    if let (Some(remaining), Some(data)) = (&mut self.remaining, frame.data_ref()) {
                        *remaining = remaining.saturating_sub(data.len() as u64);
                    }
                }
                Err(_) => self.done = true,
            }
            return Poll::Ready(Some(frame));
        }
        if slot.broken {
            self.done = true;
            return Poll::Ready(Some(Err(BodyError::Client(
                "the client's connection ended before the request body did".into(),
            ))));
        }
        if slot.ended {
            self.done = true;
            return Poll::Ready(None);
        }
        slot.wanted = true;
        if !slot
            .reader
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()))
        {
            slot.reader = Some(cx.waker().clone());
        }
        let waker = slot.connection.take();
        drop(slot);
        if let Some(waker) = waker {
            waker.wake();
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.done || self.remaining == Some(0) && self.shared.lock().frame.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        match self.remaining {
            Some(n) => SizeHint::with_exact(n),
            None => SizeHint::default(),
        }
    }
}

impl Drop for BodyReceiver {
    fn drop(&mut self) {
        let mut slot = self.shared.lock();
        slot.dropped = true;
        let waker = slot.connection.take();
        drop(slot);
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// What the reader of a body asks of its connection.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Demand {
    /// A frame: the slot is empty and the reader waits.
    Frame,
    /// Nothing now (the slot is full, or the reader has not asked).
    Nothing,
    /// The reader is gone.
    Gone,
}

impl BodySender {
    /// What the reader wants; when nothing yet, the connection's task is
    /// woken when that changes.
    pub(crate) fn poll_demand(&self, cx: &mut Context<'_>) -> Demand {
        let mut slot = self.shared.lock();
        if slot.dropped {
            return Demand::Gone;
        }
        if slot.wanted && slot.frame.is_none() {
            return Demand::Frame;
        }
        if !slot
            .connection
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()))
        {
            slot.connection = Some(cx.waker().clone());
        }
        Demand::Nothing
    }

    /// Whether the reader is gone (without waiting for it).
    pub(crate) fn reader_gone(&self) -> bool {
        self.shared.lock().dropped
    }

    /// Hands the reader `frame`; `last`: nothing follows it.
    pub(crate) fn send(&self, frame: Result<Frame<Bytes>, BodyError>, last: bool) {
        let mut slot = self.shared.lock();
        slot.ended |= last || frame.is_err();
        slot.frame = Some(frame);
        slot.wanted = false;
        let waker = slot.reader.take();
        drop(slot);
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// The body is over: the reader gets its end once it has taken what
    /// is in the slot.
    pub(crate) fn end(&self) {
        let mut slot = self.shared.lock();
        slot.ended = true;
        let waker = slot.reader.take();
        drop(slot);
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl Drop for BodySender {
    fn drop(&mut self) {
        let mut slot = self.shared.lock();
        if !slot.ended {
            // The connection went before the body's end: the reader must
            // not take what it has for the whole body.
            slot.broken = true;
        }
        let waker = slot.reader.take();
        drop(slot);
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::task::Waker;

    use super::*;

    fn poll(receiver: &mut BodyReceiver) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        receiver.poll_frame(&mut Context::from_waker(Waker::noop()))
    }

    fn demand(sender: &BodySender) -> Demand {
        sender.poll_demand(&mut Context::from_waker(Waker::noop()))
    }

    fn data(polled: Poll<Option<Result<Frame<Bytes>, BodyError>>>) -> Bytes {
        match polled {
            Poll::Ready(Some(Ok(frame))) => frame.into_data().unwrap(),
            other => panic!("not data: {other:?}"),
        }
    }

    #[test]
    fn the_connection_is_asked_for_a_frame_only_once_the_reader_waits() {
        let (sender, mut receiver) = channel(Some(5));
        assert_eq!(demand(&sender), Demand::Nothing);
        assert!(poll(&mut receiver).is_pending());
        assert_eq!(demand(&sender), Demand::Frame);
        sender.send(Ok(Frame::data(Bytes::from_static(b"he"))), false);
        // Full: nothing more until the reader takes it.
        assert_eq!(demand(&sender), Demand::Nothing);
        assert_eq!(data(poll(&mut receiver)), "he");
        assert_eq!(receiver.size_hint().exact(), Some(3));
        assert!(!receiver.is_end_stream());
        assert!(poll(&mut receiver).is_pending());
        sender.send(Ok(Frame::data(Bytes::from_static(b"llo"))), true);
        assert_eq!(data(poll(&mut receiver)), "llo");
        assert_eq!(receiver.size_hint().exact(), Some(0));
        assert!(matches!(poll(&mut receiver), Poll::Ready(None)));
        assert!(receiver.is_end_stream());
    }

    #[test]
    fn trailers_end_a_chunked_body() {
        let (sender, mut receiver) = channel(None);
        assert_eq!(receiver.size_hint().exact(), None);
        let mut trailers = http::HeaderMap::new();
        trailers.insert("x-sum", http::HeaderValue::from_static("5"));
        sender.send(Ok(Frame::trailers(trailers)), true);
        match poll(&mut receiver) {
            Poll::Ready(Some(Ok(frame))) => {
                assert_eq!(frame.into_trailers().unwrap()["x-sum"], "5");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(poll(&mut receiver), Poll::Ready(None)));
    }

    #[test]
    fn an_end_without_data_ends_the_body() {
        let (sender, mut receiver) = channel(None);
        sender.end();
        assert!(matches!(poll(&mut receiver), Poll::Ready(None)));
    }

    #[test]
    fn a_connection_gone_before_the_end_is_an_error_after_what_it_gave() {
        let (sender, mut receiver) = channel(Some(10));
        sender.send(Ok(Frame::data(Bytes::from_static(b"abc"))), false);
        drop(sender);
        assert_eq!(data(poll(&mut receiver)), "abc");
        assert!(matches!(poll(&mut receiver), Poll::Ready(Some(Err(_)))));
        assert!(matches!(poll(&mut receiver), Poll::Ready(None)));
    }

    #[test]
    fn a_connection_gone_after_the_end_is_no_error() {
        let (sender, mut receiver) = channel(Some(3));
        sender.send(Ok(Frame::data(Bytes::from_static(b"abc"))), true);
        drop(sender);
        assert_eq!(data(poll(&mut receiver)), "abc");
        assert!(matches!(poll(&mut receiver), Poll::Ready(None)));
    }

    #[test]
    fn an_error_ends_the_body() {
        let (sender, mut receiver) = channel(None);
        sender.send(Err(BodyError::Client("broken chunk".into())), false);
        match poll(&mut receiver) {
            Poll::Ready(Some(Err(e))) => assert_eq!(e.to_string(), "broken chunk"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(poll(&mut receiver), Poll::Ready(None)));
    }

    #[test]
    fn a_reader_gone_is_seen_by_the_connection() {
        let (sender, mut receiver) = channel(Some(5));
        assert!(poll(&mut receiver).is_pending());
        assert!(!sender.reader_gone());
        drop(receiver);
        assert!(sender.reader_gone());
        assert_eq!(demand(&sender), Demand::Gone);
    }

    #[test]
    fn the_empty_and_own_bodies_say_their_ends_and_lengths() {
        assert!(ClientBody::Empty.is_end_stream());
        assert_eq!(ClientBody::Empty.size_hint().exact(), Some(0));
        let (_sender, receiver) = channel(Some(7));
        let body = ClientBody::Own(receiver);
        assert!(!body.is_end_stream());
        assert_eq!(body.size_hint().exact(), Some(7));
    }
}
