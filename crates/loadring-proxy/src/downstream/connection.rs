//! One HTTP/1.1 client connection, served on its own task: a head read,
//! its request handed to the gateway, the answer written, and again while
//! the connection is kept alive.
//!
//! While a request is in flight the connection reads only what that
//! request needs: its body, when its reader asks for more (and the
//! client, if it sent `Expect: 100-continue`, is told to go on at the
//! first such ask); after the body, nothing but the client's close, which
//! leaves the request (as hyper and nginx do: an answer would have nowhere
//! to go). Bytes of a next request (pipelined) wait in the buffer.
//!
//! The connection closes after an answer when the client or the gateway
//! (draining) asks, when an HTTP/1.0 client's answer has no length, when
//! the request's body was not read to its end (its rest would be read as
//! the next request), and after any refusal of a head or broken body.

use std::future::{poll_fn, Future};
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use http::{Method, Response};
use http_body::{Body, Frame};
use tokio::io::AsyncWriteExt;
use tokio::sync::oneshot;
use tokio_util::io::poll_read_buf;

use super::body::{channel, BodyError, BodySender, ClientBody, Demand};
use super::encode::{self, Asked, Framing};
use super::head::{self, BodyLength, Head, Refusal};
use super::prefixed::Prefixed;
use super::upgrade::{Io, PendingSwitch, Switched};
use super::Handler;
use crate::connect::answer_head::{AnswerHead, Answered};
use crate::connect::decode::{self, Decoder, Step};
use crate::connect::fields::worth_parsing;
use crate::drain::Graceful;
use crate::proxy_body::ProxyBody;

/// HTTP/2's connection preface (RFC 9113 3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Bytes of body at least this large are written from their own buffer,
/// not copied behind the head.
const WRITE_APART: usize = 16 * 1024;
/// The most bytes of an unread request body read past to keep its
/// connection (nginx reads past any length, for its lingering time).
const DISCARD_AT_MOST: usize = 64 * 1024;
/// The most buffer a kept-alive connection keeps between requests.
const KEEP_AT_MOST: usize = 16 * 1024;
/// Answer bytes gathered before a write.
const GATHER: usize = 32 * 1024;

/// A served HTTP/1.1 connection: a future that ends with it, or with the
/// connection and its first bytes when they are HTTP/2's preface.
pub(crate) struct H1Connection<S> {
    run: Pin<Box<dyn Future<Output = Ending<S>> + Send>>,
    stop: Arc<AtomicBool>,
}

impl<S> std::fmt::Debug for H1Connection<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("H1Connection").finish_non_exhaustive()
    }
}

impl<S: Io> H1Connection<S> {
    /// Serves `io` for `peer`, its requests answered by `gateway`; a head
    /// must come whole within `header_timeout` of the wait for it.
    pub(crate) fn new<H: Handler>(
        io: S,
        gateway: Arc<H>,
        peer: SocketAddr,
        header_timeout: Duration,
    ) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let served = Served {
            io,
            buf: BytesMut::with_capacity(8 * 1024),
            out: Vec::with_capacity(1024),
            gateway,
            peer,
            header_timeout,
            stop: stop.clone(),
        };
        H1Connection {
            run: Box::pin(served.run()),
            stop,
        }
    }
}

/// How a served connection ended: closed (or failed), or handed on with
/// its first bytes as HTTP/2's.
pub(crate) type Ending<S> = io::Result<Option<(S, Bytes)>>;

impl<S> Future for H1Connection<S> {
    type Output = Ending<S>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.run.as_mut().poll(cx)
    }
}

impl<S> Graceful for H1Connection<S> {
    /// Ends the connection once its request in flight (if any) is
    /// answered; an idle one at its next poll (the drain polls it next).
    fn graceful_shutdown(self: Pin<&mut Self>) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

struct Served<S, H> {
    io: S,
    buf: BytesMut,
    out: Vec<u8>,
    gateway: Arc<H>,
    peer: SocketAddr,
    header_timeout: Duration,
    stop: Arc<AtomicBool>,
}

/// How the wait for a head ended without one.
enum NoHead {
    /// The client closed, or the gateway stopped, between requests.
    Closed,
    /// The connection's first bytes are HTTP/2's preface.
    H2,
    Refused(Refusal),
    Failed(io::Error),
}

/// A request body being read off the connection for its reader.
struct Feeding {
    sender: BodySender,
    decoder: Decoder,
    /// `100 Continue` is to be written before the body is read (bytes
    /// of it left to write).
    continue_due: &'static [u8],
    /// `100 Continue` was due when the final answer's head went out, and
    /// was not written: the client may never send the body.
    continue_withheld: bool,
    /// The body's end was handed on.
    done: bool,
    /// The body's framing broke, or the client closed in its middle: the
    /// connection cannot carry another request.
    broken: bool,
}

impl<S: Io, H: Handler> Served<S, H> {
    async fn run(mut self) -> io::Result<Option<(S, Bytes)>> {
        let mut first = true;
        loop {
            let head = match crate::slot_timer::timeout(self.header_timeout, self.read_head(first))
                .await
            {
                Err(_) => {
                    no_request(self.peer, self.header_timeout);
                    return Ok(None);
                }
                Ok(Ok(head)) => head,
                Ok(Err(NoHead::Closed)) => return Ok(None),
                Ok(Err(NoHead::H2)) => return Ok(Some((self.io, self.buf.freeze()))),
                Ok(Err(NoHead::Failed(e))) => return Err(e),
                Ok(Err(NoHead::Refused(refusal))) => {
                    self.refuse(&refusal).await?;
                    return Ok(None);
                }
            };
            first = false;
            match self.exchange(head).await? {
                Next::Request => self.trim(),
                Next::Close => {
                    let _ = self.io.shutdown().await;
                    return Ok(None);
                }
                Next::Linger => {
                    self.linger().await;
                    return Ok(None);
                }
                Next::Switch(send, read) => {
                    switch(self.io, send, read);
                    return Ok(None);
                }
            }
        }
    }

    /// Between requests, gives back what a large answer or head made the
    /// buffers grow to: a kept-alive connection waits with a few
    /// kilobytes, however much it carried before.
    fn trim(&mut self) {
        if self.out.capacity() > KEEP_AT_MOST {
            self.out = Vec::with_capacity(1024);
        }
        if self.buf.is_empty() && self.buf.capacity() > KEEP_AT_MOST {
            self.buf = BytesMut::with_capacity(8 * 1024);
        }
    }

    /// The next head, its bytes taken off the buffer; on a connection's
    /// `first`, HTTP/2's preface instead.
    async fn read_head(&mut self, first: bool) -> Result<Head, NoHead> {
        // Where the search for the head's end goes on from.
        let mut scanned = None;
        loop {
            if first {
                let seen = &self.buf[..self.buf.len().min(H2_PREFACE.len())];
                if !seen.is_empty() && H2_PREFACE.starts_with(seen) {
                    if seen.len() == H2_PREFACE.len() {
                        return Err(NoHead::H2);
                    }
                    // Not a whole preface yet, and no HTTP/1.1 head either.
                    self.read_more().await?;
                    continue;
                }
            }
            // Empty lines before a request line are skipped (RFC 9112 2.2).
            let lead = self
                .buf
                .iter()
                .take_while(|&&b| b == b'\r' || b == b'\n')
                .count();
            if lead > 0 {
                self.buf.advance(lead);
                scanned = None;
            }
            if !self.buf.is_empty() {
                if worth_parsing(&self.buf, scanned) {
                    match head::parse(&mut self.buf) {
                        Ok(Some(head)) => return Ok(head),
                        Ok(None) => {}
                        Err(refusal) => return Err(NoHead::Refused(refusal)),
                    }
                }
                scanned = Some(self.buf.len());
            }
            self.read_more().await?;
        }
    }

    /// Reads more of a head; an idle connection (nothing read of a next
    /// request) ends when the gateway stops.
    async fn read_more(&mut self) -> Result<(), NoHead> {
        make_room(&mut self.buf);
        let (io, buf, stop) = (&mut self.io, &mut self.buf, &self.stop);
        let read = poll_fn(|cx| {
            if buf.is_empty() && stop.load(Ordering::SeqCst) {
                return Poll::Ready(Ok(0));
            }
            poll_read_buf(Pin::new(&mut *io), cx, buf)
        })
        .await;
        match read {
            Ok(0) => Err(NoHead::Closed),
            Ok(_) => Ok(()),
            Err(e) => Err(NoHead::Failed(e)),
        }
    }

    /// Answers a head refused, and closes.
    #[cold]
    async fn refuse(&mut self, refusal: &Refusal) -> io::Result<()> {
        tracing::debug!("client {}: {}", self.peer, refusal.why);
        let text = format!("{}\n", refusal.why);
        let mut response = Response::new(());
        *response.status_mut() = refusal.status;
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        let (parts, ()) = response.into_parts();
        let parts = AnswerHead::from(parts);
        self.out.clear();
        let asked = Asked {
            head: false,
            version: http::Version::HTTP_11,
            keep_alive: false,
        };
        encode::head(&mut self.out, &parts, Some(text.len() as u64), asked);
        self.out.extend_from_slice(text.as_bytes());
        self.io.write_all(&self.out).await?;
        self.io.flush().await?;
        self.linger().await;
        Ok(())
    }

    /// Closes the sending side, then reads what the client still sends
    /// (the rest of a head too large, say) until it closes too, at most
    /// [`DISCARD_AT_MOST`] bytes within the header timeout: a socket
    /// closed with unread bytes is reset, and the reset can reach the
    /// client before it read the answer (nginx's lingering close).
    async fn linger(&mut self) {
        if self.io.shutdown().await.is_err() {
            return;
        }
        let (io, buf) = (&mut self.io, &mut self.buf);
        let drain = async {
            let mut read = 0usize;
            while read <= DISCARD_AT_MOST {
                buf.clear();
                make_room(buf);
                match poll_fn(|cx| poll_read_buf(Pin::new(&mut *io), cx, buf)).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => read += n,
                }
            }
        };
        let _ = crate::slot_timer::timeout(self.header_timeout, drain).await;
    }

    /// One request forwarded and answered.
    async fn exchange(&mut self, head: Head) -> io::Result<Next> {
        let Head {
            mut request,
            body: length,
            keep_alive,
            expects_continue,
            asks_upgrade,
            te_trailers,
        } = head;
        let asked_head = request.method == Method::HEAD;
        let version = request.version;
        let (body, mut feeding) = match length {
            BodyLength::Known(0) => (ClientBody::Empty, None),
            BodyLength::Known(n) => feed(Some(n), decode::Framing::Length(n), expects_continue),
            BodyLength::Chunked => feed(None, decode::Framing::Chunked, expects_continue),
        };
        let switch = asks_upgrade.then(|| {
            let (send, pending) = PendingSwitch::new();
            request.extensions.insert(pending);
            send
        });
        let mut handling = self.gateway.answer(request, body, self.peer);
        let answered = {
            let (io, buf) = (&mut self.io, &mut self.buf);
            poll_fn(|cx| {
                if let Poll::Ready(response) = Pin::new(&mut handling).poll(cx) {
                    return Poll::Ready(Ok(Some(response)));
                }
                if let Some(feeding) = feeding.as_mut().filter(|f| !f.done) {
                    if let Poll::Ready(Err(e)) = feeding.poll_feed(cx, io, buf) {
                        return Poll::Ready(Err(e));
                    }
                }
                if feeding.as_ref().is_some_and(|f| !f.done) {
                    return Poll::Pending;
                }
                poll_client_left(cx, io, buf).map(|r| r.map(|()| None))
            })
            .await
        };
        let response = match answered {
            Ok(Some(response)) => response,
            // The client left (or its socket failed): the request goes
            // with `handling`, dropped here.
            Ok(None) => return Ok(Next::Close),
            Err(e) => return Err(e),
        };
        drop(handling);
        let stopping = self.stop.load(Ordering::SeqCst);
        let Answered {
            head: parts,
            mut body,
        } = response;
        // A body left unread that cannot be read past closes the
        // connection: the answer says so (RFC 9110 10.1.1).
        let unreadable = feeding.as_ref().is_some_and(Feeding::cannot_be_read_past);
        if let Some(feeding) = feeding.as_mut() {
            // A 1xx comes before the final answer or not at all (RFC 9110
            // 15.2): a client still waiting for `100 Continue` has its
            // answer now, and sends its body or leaves.
            feeding.withhold_continue();
        }
        let asked = Asked {
            head: asked_head,
            version,
            keep_alive: keep_alive && !stopping && !unreadable,
        };
        self.out.clear();
        let (framing, keep_alive) =
            encode::head(&mut self.out, &parts, body.size_hint().exact(), asked);
        let ended = match framing {
            Framing::Switch => {
                self.flush_out().await?;
                return Ok(match switch {
                    Some(send) => Next::Switch(send, self.buf.split().freeze()),
                    None => Next::Close,
                });
            }
            Framing::Empty => {
                drop(body);
                self.flush_out().await?;
                true
            }
            framing => {
                let ended = self
                    .write_body(framing, &mut body, &mut feeding, te_trailers)
                    .await?;
                // The answer is out: its body goes now (its slot released,
                // its backend's connection given back or closed), not after
                // the rest of the request's body is read past below, which
                // may wait the whole header timeout for a client that stopped
                // sending it.
                drop(body);
                ended
            }
        };
        if !keep_alive || !ended || self.stop.load(Ordering::SeqCst) {
            let unread = feeding.as_ref().is_some_and(|f| !f.decoder.is_done());
            return Ok(if unread { Next::Linger } else { Next::Close });
        }
        let body_read = match &mut feeding {
            None => true,
            Some(feeding) if feeding.broken => false,
            Some(feeding) if feeding.decoder.is_done() => true,
            Some(feeding) => self.discard_rest(feeding).await,
        };
        Ok(if body_read {
            Next::Request
        } else {
            Next::Linger
        })
    }

    /// Reads past what is left of a request body nobody read (the answer
    /// came without it: a 404, a refusal), so that the connection can
    /// carry the next request, as nginx discards it: at most
    /// [`DISCARD_AT_MOST`] bytes, within the header timeout. `false` when
    /// the connection must close instead: a longer body, a slower client,
    /// or one still waiting for `100 Continue` (it may never send it).
    async fn discard_rest(&mut self, feeding: &mut Feeding) -> bool {
        if feeding.continue_withheld {
            return false;
        }
        let (io, buf, decoder) = (&mut self.io, &mut self.buf, &mut feeding.decoder);
        let discard = async {
            let mut discarded = 0usize;
            loop {
                match decoder.step(buf) {
                    Ok(Step::Data(data)) => {
                        discarded += data.len();
                        if discarded > DISCARD_AT_MOST {
                            return false;
                        }
                    }
                    Ok(Step::Trailers(_) | Step::End) => return true,
                    Ok(Step::More) => {
                        make_room(buf);
                        match poll_fn(|cx| poll_read_buf(Pin::new(&mut *io), cx, buf)).await {
                            Ok(0) | Err(_) => return false,
                            Ok(_) => {}
                        }
                    }
                    Err(_) => return false,
                }
            }
        };
        crate::slot_timer::timeout(self.header_timeout, discard)
            .await
            .unwrap_or(false)
    }

    /// Writes `body` framed as `framing`, reading the request's body on
    /// for its reader meanwhile. `false` when the body broke off (the
    /// client sees it cut: the connection closes).
    async fn write_body(
        &mut self,
        framing: Framing,
        body: &mut ProxyBody,
        feeding: &mut Option<Feeding>,
        te_trailers: bool,
    ) -> io::Result<bool> {
        let mut left = match framing {
            Framing::Length(n) => n,
            _ => u64::MAX,
        };
        loop {
            let next = {
                let (io, buf, out) = (&mut self.io, &mut self.buf, &self.out);
                poll_fn(|cx| {
                    let still_feeding = feeding.as_mut().filter(|f| !f.done);
                    let watch_client = still_feeding.is_none();
                    if let Some(feeding) = still_feeding {
                        if let Poll::Ready(Err(e)) = feeding.poll_feed(cx, io, buf) {
                            return Poll::Ready(Err(e));
                        }
                    }
                    match Pin::new(&mut *body).poll_frame(cx) {
                        Poll::Pending => {
                            // While the answer's body is awaited, an answer
                            // whose client left is dropped (its request
                            // abandoned), as one before its head. A part in
                            // hand is written first: a client gone fails the
                            // write, and one that only stopped sending reads
                            // it. (The client's socket is polled only to wait
                            // on it: once a request, not once a part.)
                            if watch_client {
                                match poll_client_left(cx, io, buf) {
                                    Poll::Ready(Ok(())) => {
                                        return Poll::Ready(Ok(Polled::ClientLeft))
                                    }
                                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                                    Poll::Pending => {}
                                }
                            }
                            if out.is_empty() {
                                Poll::Pending
                            } else {
                                Poll::Ready(Ok(Polled::Flush))
                            }
                        }
                        Poll::Ready(None) => Poll::Ready(Ok(Polled::End)),
                        Poll::Ready(Some(Ok(frame))) => Poll::Ready(Ok(Polled::Frame(frame))),
                        Poll::Ready(Some(Err(e))) => {
                            tracing::debug!("answer body: {e}");
                            Poll::Ready(Ok(Polled::Broken))
                        }
                    }
                })
                .await?
            };
            match next {
                Polled::ClientLeft => return Ok(false),
                Polled::Flush => self.flush_out().await?,
                Polled::Broken => {
                    self.flush_out().await?;
                    return Ok(false);
                }
                Polled::End => {
                    match framing {
                        Framing::Chunked => encode::last_chunk(&mut self.out, None),
                        // Shorter than its length: the client must see it cut.
                        Framing::Length(_) if left > 0 => {
                            self.flush_out().await?;
                            return Ok(false);
                        }
                        _ => {}
                    }
                    self.flush_out().await?;
                    return Ok(framing != Framing::UntilClose);
                }
                Polled::Frame(frame) => match frame.into_data() {
                    Ok(data) => {
                        if data.is_empty() {
                            continue;
                        }
                        let mut data = data;
                        if let Framing::Length(_) = framing {
                            // More than its length: what fits goes, then the
                            // connection closes.
                            if data.len() as u64 > left {
                                data.truncate(usize::try_from(left).unwrap_or(usize::MAX));
                                self.out.extend_from_slice(&data);
                                self.flush_out().await?;
                                tracing::debug!("answer body longer than its Content-Length: cut");
                                return Ok(false);
                            }
                            left -= data.len() as u64;
                        }
                        if framing == Framing::Chunked {
                            encode::chunk_size(&mut self.out, data.len());
                        }
                        self.put(data).await?;
                        if framing == Framing::Chunked {
                            self.out.extend_from_slice(b"\r\n");
                        }
                        if self.out.len() >= GATHER {
                            self.flush_out().await?;
                        }
                    }
                    Err(frame) => {
                        if let (Framing::Chunked, Ok(trailers)) = (framing, frame.into_trailers()) {
                            let trailers = te_trailers.then_some(&trailers);
                            encode::last_chunk(&mut self.out, trailers);
                            self.flush_out().await?;
                            return Ok(true);
                        }
                    }
                },
            }
        }
    }

    /// Adds `data` to what is to be written: copied when small, written
    /// from its own buffer when not.
    async fn put(&mut self, data: Bytes) -> io::Result<()> {
        if data.len() < WRITE_APART {
            self.out.extend_from_slice(&data);
            return Ok(());
        }
        self.flush_out().await?;
        self.io.write_all(&data).await
    }

    async fn flush_out(&mut self) -> io::Result<()> {
        if !self.out.is_empty() {
            self.io.write_all(&self.out).await?;
            self.out.clear();
        }
        self.io.flush().await
    }
}

/// Hands a switched connection to its tunnel, with the bytes read past
/// the head.
#[inline(never)]
fn switch<S: Io>(io: S, send: oneshot::Sender<Switched>, read: Bytes) {
    let io: Box<dyn Io> = Box::new(io);
    let _ = send.send(Prefixed::new(read, io));
}

#[cold]
fn no_request(peer: SocketAddr, within: Duration) {
    tracing::debug!("client {peer}: no request in {within:?}");
}

/// What follows an exchange.
enum Next {
    Request,
    Close,
    /// Close, the client's request body not read to its end (see
    /// `linger`).
    Linger,
    /// The connection goes to the tunnel, with the bytes read past the
    /// head.
    Switch(oneshot::Sender<Switched>, Bytes),
}

/// A frame of the answer's body, or what to do instead.
enum Polled {
    Frame(Frame<Bytes>),
    /// None is ready: write what was gathered first.
    Flush,
    End,
    Broken,
    ClientLeft,
}

/// A request body of `length` (chunked: `None`) read as `framing`.
fn feed(
    length: Option<u64>,
    framing: decode::Framing,
    expects_continue: bool,
) -> (ClientBody, Option<Feeding>) {
    let (sender, receiver) = channel(length);
    let feeding = Feeding {
        sender,
        decoder: Decoder::new(framing),
        continue_due: if expects_continue {
            b"HTTP/1.1 100 Continue\r\n\r\n"
        } else {
            b""
        },
        continue_withheld: false,
        done: false,
        broken: false,
    };
    (ClientBody::Own(receiver), Some(feeding))
}

impl Feeding {
    /// Drops a `100 Continue` not written yet: the final answer's head
    /// goes out now.
    fn withhold_continue(&mut self) {
        if !self.continue_due.is_empty() {
            self.continue_due = b"";
            self.continue_withheld = true;
        }
    }

    /// Whether the rest of the body, which nobody reads, will not be read
    /// past after the answer (see `discard_rest`): it broke, or it is
    /// longer than that allows, or its client still waits for `100
    /// Continue`. A body whose reader is still there may yet be read.
    fn cannot_be_read_past(&self) -> bool {
        if self.broken {
            return true;
        }
        if self.decoder.is_done() || !(self.done || self.sender.reader_gone()) {
            return false;
        }
        !self.continue_due.is_empty()
            || self
                .decoder
                .remaining()
                .is_some_and(|left| left > DISCARD_AT_MOST as u64)
    }

    /// Hands the body's reader what it asks for, reading the connection as
    /// needed. Pending until there is nothing more to do now.
    // Out of line: most requests have no body, and their path through the
    // connection's loop stays the shorter for it (the instruction cache).
    #[inline(never)]
    fn poll_feed<S: Io>(
        &mut self,
        cx: &mut Context<'_>,
        io: &mut S,
        buf: &mut BytesMut,
    ) -> Poll<io::Result<()>> {
        loop {
            if self.done {
                return Poll::Pending;
            }
            match self.sender.poll_demand(cx) {
                Demand::Nothing => return Poll::Pending,
                Demand::Gone => {
                    // Nobody reads the rest: it is read past after the
                    // answer, or the connection closes (discard_rest).
                    self.done = true;
                    return Poll::Pending;
                }
                Demand::Frame => {}
            }
            while !self.continue_due.is_empty() {
                if !buf.is_empty() {
                    // The client did not wait: no need to tell it.
                    self.continue_due = b"";
                    break;
                }
                match Pin::new(&mut *io).poll_write(cx, self.continue_due) {
                    Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                    Poll::Ready(Ok(n)) => self.continue_due = &self.continue_due[n..],
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Pending => return Poll::Pending,
                }
                if self.continue_due.is_empty() {
                    if let Poll::Ready(Err(e)) = Pin::new(&mut *io).poll_flush(cx) {
                        return Poll::Ready(Err(e));
                    }
                }
            }
            match self.decoder.step(buf) {
                Ok(Step::Data(data)) => {
                    let last = self.decoder.is_done();
                    self.sender.send(Ok(Frame::data(data)), last);
                    self.done = last;
                }
                Ok(Step::Trailers(trailers)) => {
                    self.sender.send(Ok(Frame::trailers(trailers)), true);
                    self.done = true;
                }
                Ok(Step::End) => {
                    self.sender.end();
                    self.done = true;
                }
                Ok(Step::More) => {
                    make_room(buf);
                    match poll_read_buf(Pin::new(&mut *io), cx, buf) {
                        Poll::Ready(Ok(0)) => {
                            self.sender.send(
                                Err(BodyError::Client(
                                    "the client closed its connection in the middle of the \
                                     request body"
                                        .into(),
                                )),
                                true,
                            );
                            self.done = true;
                            self.broken = true;
                        }
                        Poll::Ready(Ok(_)) => {}
                        Poll::Ready(Err(e)) => {
                            self.sender
                                .send(Err(BodyError::Client(e.to_string())), true);
                            self.done = true;
                            self.broken = true;
                        }
                        Poll::Pending => return Poll::Pending,
                    }
                }
                Err(e) => {
                    self.sender
                        .send(Err(BodyError::Client(e.to_string())), true);
                    self.done = true;
                    self.broken = true;
                }
            }
        }
    }
}

/// Watches a connection whose request is read whole for its client's
/// close: `Ready(Ok(()))` when it closed. Bytes that come meanwhile (a
/// next request, pipelined) are kept, up to a head's worth.
fn poll_client_left<S: Io>(
    cx: &mut Context<'_>,
    io: &mut S,
    buf: &mut BytesMut,
) -> Poll<io::Result<()>> {
    loop {
        if !buf.is_empty() {
            // A next request is here: the client is not gone (and what it
            // sends more waits for its turn).
            return Poll::Pending;
        }
        make_room(buf);
        match poll_read_buf(Pin::new(&mut *io), cx, buf) {
            Poll::Ready(Ok(0)) => return Poll::Ready(Ok(())),
            Poll::Ready(Ok(_)) => {}
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        }
    }
}

/// Room in `buf` for a read: a new buffer only when less than a
/// kilobyte is left (heads split off it share its memory until their
/// requests are done, so it cannot always be reused in place).
fn make_room(buf: &mut BytesMut) {
    if buf.capacity() - buf.len() < 1024 {
        buf.reserve(8 * 1024);
    }
}

#[cfg(test)]
#[path = "connection_tests.rs"]
mod tests;
