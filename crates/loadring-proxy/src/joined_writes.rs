//! A client connection whose small vectored writes go out as one plain
//! write.
//!
//! hyper writes a response as a vector: its head in one buffer, each
//! piece of its body in others, never copied. On Linux `writev` costs more
//! in the kernel than `send` of the same bytes: the vector is copied in and
//! checked, and the write goes through the file layer (`vfs_writev`)
//! rather than straight to the socket. For the common response, a head and
//! a body of a few hundred bytes, that is most of the difference, while
//! copying them into one buffer costs a few dozen instructions. So a
//! vector of at most [`JOIN_AT_MOST`] bytes is joined in a buffer of the
//! thread's and written with one `send`; a longer one (a large body, where
//! a copy would cost more than it saves) is written as it is.
//!
//! Reads, flushes and shutdowns pass through untouched.

use std::cell::RefCell;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The most bytes a vectored write is joined for: about a page, where a
/// copy starts to cost what it saves.
pub(crate) const JOIN_AT_MOST: usize = 4096;

thread_local! {
    /// The join's buffer, one per thread: a write is over (whole or in
    /// part) before the next one on the thread starts.
    static JOINED: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// `S`, its small vectored writes joined (module docs).
#[derive(Debug)]
pub(crate) struct JoinedWrites<S> {
    inner: S,
}

impl<S> JoinedWrites<S> {
    pub(crate) fn new(inner: S) -> Self {
        JoinedWrites { inner }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for JoinedWrites<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for JoinedWrites<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    /// True whatever `S` says: a long vector still goes out whole, and a
    /// short one joined, never worse than the writer's own flattening.
    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let inner = &mut self.get_mut().inner;
        let pieces = bufs.iter().filter(|b| !b.is_empty()).count();
        let total = bufs
            .iter()
            .map(|b| b.len())
            .fold(0usize, usize::saturating_add);
        if pieces < 2 || total > JOIN_AT_MOST {
            // Nothing to join, or too much: the stream's own vectored
            // write (on a stream without them, tokio's default writes the
            // first piece and the writer comes back for the rest).
            return Pin::new(inner).poll_write_vectored(cx, bufs);
        }
        JOINED.with_borrow_mut(|joined| {
            joined.clear();
            for buf in bufs {
                joined.extend_from_slice(buf);
            }
            // Written in part, it says how much, as a vectored write
            // would: the writer sends the rest of its vector next time.
            Pin::new(inner).poll_write(cx, joined)
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// A call on the stream under the join: "write" or "writev", and the
    /// bytes it took.
    type Call = (&'static str, Vec<u8>);

    /// What the stream under the join saw: each call, plain or vectored,
    /// with its bytes; it accepts at most `accepts` bytes a call.
    struct Recorder {
        calls: Arc<Mutex<Vec<Call>>>,
        accepts: usize,
        vectored: bool,
    }

    impl AsyncWrite for Recorder {
        fn poll_write(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            let n = buf.len().min(self.accepts);
            self.calls
                .lock()
                .unwrap()
                .push(("write", buf[..n].to_vec()));
            Poll::Ready(Ok(n))
        }

        fn poll_write_vectored(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            bufs: &[IoSlice<'_>],
        ) -> Poll<io::Result<usize>> {
            if !self.vectored {
                // As tokio's default for a stream without vectored writes.
                let first = bufs
                    .iter()
                    .find(|b| !b.is_empty())
                    .map_or(&[][..], |b| &b[..]);
                return self.poll_write(cx, first);
            }
            let all: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
            let n = all.len().min(self.accepts);
            self.calls
                .lock()
                .unwrap()
                .push(("writev", all[..n].to_vec()));
            Poll::Ready(Ok(n))
        }

        fn is_write_vectored(&self) -> bool {
            self.vectored
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    /// One vectored write of `pieces` through the join over a recorder;
    /// what it returned and what the recorder saw.
    fn write(pieces: &[&[u8]], accepts: usize, vectored: bool) -> (usize, Vec<Call>) {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let mut joined = JoinedWrites::new(Recorder {
            calls: calls.clone(),
            accepts,
            vectored,
        });
        let bufs: Vec<IoSlice<'_>> = pieces.iter().map(|p| IoSlice::new(p)).collect();
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let Poll::Ready(Ok(n)) = Pin::new(&mut joined).poll_write_vectored(&mut cx, &bufs) else {
            panic!("the recorder is always ready");
        };
        let seen = calls.lock().unwrap().clone();
        (n, seen)
    }

    #[test]
    fn a_short_vector_is_joined_into_one_plain_write() {
        let (n, seen) = write(
            &[b"HTTP/1.1 200 OK\r\n\r\n", b"", b"ok\n"],
            usize::MAX,
            true,
        );
        assert_eq!(n, 22);
        assert_eq!(
            seen,
            vec![("write", b"HTTP/1.1 200 OK\r\n\r\nok\n".to_vec())]
        );
    }

    #[test]
    fn exactly_the_limit_is_joined_and_one_byte_more_is_not() {
        let head = vec![b'h'; 100];
        let body = vec![b'b'; JOIN_AT_MOST - 100];
        let (n, seen) = write(&[&head, &body], usize::MAX, true);
        assert_eq!((n, seen.len(), seen[0].0), (JOIN_AT_MOST, 1, "write"));
        let body = vec![b'b'; JOIN_AT_MOST - 99];
        let (n, seen) = write(&[&head, &body], usize::MAX, true);
        assert_eq!((n, seen.len(), seen[0].0), (JOIN_AT_MOST + 1, 1, "writev"));
        assert_eq!(seen[0].1.len(), JOIN_AT_MOST + 1);
    }

    #[test]
    fn a_single_piece_is_passed_on_as_it_is() {
        let (n, seen) = write(&[b"", b"only"], usize::MAX, true);
        assert_eq!((n, seen), (4, vec![("writev", b"only".to_vec())]));
    }

    /// A partial write of the joined bytes is reported as the vectored
    /// write's count, across the pieces' boundary.
    #[test]
    fn a_partial_write_reports_how_much_of_the_vector_went() {
        let (n, seen) = write(&[b"head", b"body"], 6, true);
        assert_eq!((n, seen), (6, vec![("write", b"headbo".to_vec())]));
    }

    /// hyper queues a response's pieces only for a stream that says it
    /// writes vectors (else it copies every body into its buffer): the
    /// join says so whatever the stream under it does.
    #[test]
    fn the_join_always_takes_vectors() {
        for vectored in [true, false] {
            let joined = JoinedWrites::new(Recorder {
                calls: Arc::default(),
                accepts: usize::MAX,
                vectored,
            });
            assert!(joined.is_write_vectored());
        }
    }

    /// Under a stream without vectored writes, a long vector's first
    /// piece is written plainly (the writer comes back for the rest).
    #[test]
    fn a_long_vector_on_a_plain_stream_writes_its_first_piece() {
        let body = vec![b'b'; JOIN_AT_MOST];
        let (n, seen) = write(&[b"", b"head", &body], usize::MAX, false);
        assert_eq!((n, seen), (4, vec![("write", b"head".to_vec())]));
    }
}
