//! WebSocket through the gateway: an HTTP/1.1 `Upgrade` (any protocol),
//! or HTTP/2's extended CONNECT with `:protocol websocket` (RFC 8441). The
//! handshake goes to the picked backend, as HTTP/1.1 to an `http1` cluster
//! (`101 Switching Protocols` opens the tunnel) or as extended CONNECT to
//! an `h2c` one (a `2xx` does), and once it is open both sides are handed
//! over and bytes are copied both ways. The balancer's guard is held until the tunnel closes,
//! so `loadring_in_flight` and bounded load count open tunnels: a hot room
//! is a hot key, and its load is its open connections.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::downstream::{Io, PendingSwitch, Switched};
use base64::Engine as _;
use http::header::{
    HeaderValue, CONNECTION, CONTENT_LENGTH, SEC_WEBSOCKET_ACCEPT, SEC_WEBSOCKET_KEY,
    SEC_WEBSOCKET_VERSION, UPGRADE,
};
use http::{Method, Request, Response, StatusCode, Version};
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use loadring::{Outcome, Pick};
use tokio_rustls::rustls::crypto::SecureRandom;

use crate::activity::OpenStream;
use crate::clients::ClientLimits;
use crate::cluster::Backend;
use crate::config::BackendProtocol;
use crate::connect::head_fields::Fields;
use crate::connect::request_head::RequestHead;
use crate::connect::UpstreamBody;
use crate::proxy_body::{empty_body, ProxyBody};
use crate::send_limit::SendLimit;
use crate::tunnel_idle::{Noted, Traffic};

/// A client's request to switch protocols, its side of the tunnel to come.
#[derive(Debug)]
pub(crate) struct Tunnel {
    client: ClientSide,
    /// An HTTP/2 client's stream, open until the tunnel closes.
    stream: Option<TunnelStream>,
    asked: Asked,
    /// What the backend speaks.
    to: BackendProtocol,
    /// The `Sec-WebSocket-Accept` the proxy answers an HTTP/1.1 client
    /// itself: its handshake became an HTTP/2 backend's extended CONNECT,
    /// which carries no key.
    accept: Option<HeaderValue>,
}

/// How the client asked for its tunnel.
#[derive(Debug)]
enum Asked {
    /// HTTP/1.1 `Upgrade` to this protocol: passed on as it is, and the
    /// backend's `101` passed back; to an HTTP/2 backend (a WebSocket's
    /// only) made extended CONNECT, its `2xx` answered `101` here.
    Upgrade(HeaderValue),
    /// HTTP/2 extended CONNECT for a WebSocket: an HTTP/1.1 backend gets
    /// the handshake (RFC 6455 4.1) made for it, and its `101` is the
    /// client's `200` (RFC 8441 5); an HTTP/2 one gets the CONNECT.
    Connect,
}

/// Whether a `Connection` header lists `upgrade`.
fn lists_upgrade(fields: &Fields) -> bool {
    fields
        .get_all(&CONNECTION)
        .flat_map(|value| crate::field_list::elements(value.as_bytes()))
        .any(|t| t.eq_ignore_ascii_case(b"upgrade"))
}

/// An HTTP/2 client's extended CONNECT stream, counted open in its
/// connection ([`OpenStream`]) for as long as its tunnel lasts: the
/// connection's service puts it in the request's extensions (which must be
/// `Clone`), and the tunnel takes it from there.
#[derive(Debug, Clone)]
pub(crate) struct TunnelStream {
    _open: Arc<OpenStream>,
}

impl TunnelStream {
    pub(crate) fn new(open: OpenStream) -> Self {
        TunnelStream {
            _open: Arc::new(open),
        }
    }
}

impl Tunnel {
    /// The tunnel `request` asks for, to a backend speaking `to`: HTTP/1.1
    /// with `Connection: upgrade` and an `Upgrade` protocol, or HTTP/2
    /// `CONNECT` with `:protocol websocket`. The latter's method is `GET`
    /// while its key is read (what an HTTP/1.1 backend is sent anyway): a
    /// room is placed alike whichever way it came.
    ///
    /// # Errors
    /// An HTTP/1.1 upgrade to an HTTP/2 backend (501): its protocol's
    /// handshake would have to be translated, and only a WebSocket's is known.
    pub(crate) fn asked(
        request: &mut RequestHead,
        to: BackendProtocol,
    ) -> Result<Option<Tunnel>, &'static str> {
        if request.method == Method::CONNECT {
            // Any other CONNECT was refused before it was routed.
            let websocket = request
                .extensions
                .get::<hyper::ext::Protocol>()
                .is_some_and(crate::target::is_websocket);
            if !websocket {
                return Ok(None);
            }
            request.method = Method::GET;
            return Ok(Some(Tunnel {
                stream: request.extensions.remove(),
                client: ClientSide::of(request),
                asked: Asked::Connect,
                to,
                accept: None,
            }));
        }
        if request.version != Version::HTTP_11 || !lists_upgrade(&request.fields) {
            return Ok(None);
        }
        let Some(protocol) = request
            .fields
            .get(&UPGRADE)
            .and_then(|v| HeaderValue::from_maybe_shared(v.to_shared()).ok())
        else {
            return Ok(None);
        };
        let accept = match to {
            BackendProtocol::Http1 => None,
            // Only a WebSocket's handshake is known, to be made extended
            // CONNECT (RFC 8441) and answered here (RFC 6455 4.2.2).
            BackendProtocol::H2c => {
                let key = request
                    .fields
                    .get(&SEC_WEBSOCKET_KEY)
                    .filter(|_| protocol.as_bytes().eq_ignore_ascii_case(b"websocket"));
                match key {
                    Some(key) => Some(accept_key(key.as_bytes())),
                    None => {
                        return Err("an HTTP/1.1 upgrade to an h2c cluster must be a WebSocket \
                             handshake (Upgrade: websocket with a Sec-WebSocket-Key)")
                    }
                }
            }
        };
        Ok(Some(Tunnel {
            client: ClientSide::of(request),
            stream: None,
            asked: Asked::Upgrade(protocol),
            to,
            accept,
        }))
    }

    /// Whether the backend must have announced extended CONNECT.
    pub(crate) fn needs_extended_connect(&self) -> bool {
        // Every tunnel to an HTTP/2 backend is an extended CONNECT.
        self.to == BackendProtocol::H2c
    }

    /// Whether the backend's answer `status` opened the tunnel.
    pub(crate) fn switched(&self, status: StatusCode) -> bool {
        match self.to {
            BackendProtocol::Http1 => status == StatusCode::SWITCHING_PROTOCOLS,
            BackendProtocol::H2c => status.is_success(),
        }
    }

    /// Puts the upgrade in the request sent to the backend (its headers
    /// hop by hop, the client's were removed with the others): for an
    /// HTTP/2 client, the rest of the HTTP/1.1 handshake too, or the
    /// extended CONNECT again for an HTTP/2 backend. Its other headers
    /// (origin, subprotocols, extensions) pass as they came.
    pub(crate) fn ask(&self, request: &mut RequestHead) {
        let headers = &mut request.fields;
        match (&self.asked, self.to) {
            (_, BackendProtocol::H2c) => {
                // An HTTP/1.1 client's key is answered by the proxy: the
                // CONNECT carries none (RFC 8441 5).
                request.method = Method::CONNECT;
                request
                    .extensions
                    .insert(hyper::ext::Protocol::from_static("websocket"));
                headers.remove(&SEC_WEBSOCKET_KEY);
            }
            (Asked::Upgrade(protocol), BackendProtocol::Http1) => {
                headers.insert(CONNECTION, HeaderValue::from_static("upgrade"));
                headers.insert(UPGRADE, protocol.clone());
            }
            (Asked::Connect, BackendProtocol::Http1) => {
                request.extensions.remove::<hyper::ext::Protocol>();
                headers.insert(CONNECTION, HeaderValue::from_static("upgrade"));
                headers.insert(UPGRADE, HeaderValue::from_static("websocket"));
                // RFC 8441 clients send the version too; a backend that
                // wants another says so in its answer, passed back.
                if !headers.contains(&SEC_WEBSOCKET_VERSION) {
                    headers.insert(SEC_WEBSOCKET_VERSION, HeaderValue::from_static("13"));
                }
                headers.insert(SEC_WEBSOCKET_KEY, handshake_key());
                headers.remove(&SEC_WEBSOCKET_ACCEPT);
            }
        }
    }

    /// Why the backend's answer `status` to the handshake cannot go to the
    /// client, if it cannot: over HTTP/2 a `2xx` answer to CONNECT opens
    /// the tunnel, so a backend that answered `2xx` without switching
    /// (one that ignores upgrades) would open one to nothing. Any other
    /// status passes as a normal response.
    pub(crate) fn unusable(&self, status: StatusCode) -> Option<String> {
        let handshake = matches!(self.asked, Asked::Connect) && self.to == BackendProtocol::Http1;
        (handshake && status.is_success())
            .then(|| format!("answered the WebSocket handshake {status} instead of 101"))
    }

    /// The backend switched (its answer's hop-by-hop headers already
    /// removed; `protocol` its `Upgrade`): answers the client (`101` over
    /// HTTP/1.1, `2xx` over HTTP/2) and copies bytes both ways until either
    /// side closes, `pick` held until then. `clients`' send timeout limits
    /// writes to the client (an HTTP/2 client's stream may be shut while
    /// its socket flows; an HTTP/1.1 client's socket has the same limit
    /// already), and its tunnel timeout how long the tunnel may be quiet.
    pub(crate) fn open(
        self,
        mut response: Response<UpstreamBody>,
        protocol: Option<HeaderValue>,
        pick: Pick<Backend>,
        started: Instant,
        clients: &ClientLimits,
    ) -> Response<ProxyBody> {
        // An HTTP/2 backend's stream is hyper's; an HTTP/1.1 backend's
        // switched connection is the body's.
        let h2_backend = hyper::upgrade::on(&mut response);
        let (mut head, body) = response.into_parts();
        let h1_backend = body.into_upgraded();
        match self.asked {
            Asked::Upgrade(asked) => {
                head.headers
                    .insert(CONNECTION, HeaderValue::from_static("upgrade"));
                head.headers.insert(UPGRADE, protocol.unwrap_or(asked));
                if let Some(accept) = self.accept {
                    // An HTTP/2 backend's 2xx: the client's handshake is
                    // answered as a WebSocket server would.
                    head.status = StatusCode::SWITCHING_PROTOCOLS;
                    head.headers.remove(CONTENT_LENGTH);
                    head.headers.insert(SEC_WEBSOCKET_ACCEPT, accept);
                }
            }
            Asked::Connect => {
                // The client sent no key: nothing to accept. The chosen
                // subprotocol and extensions pass back as they came (an
                // HTTP/2 backend's answer is the client's as it is).
                if self.to == BackendProtocol::Http1 {
                    head.status = StatusCode::OK;
                    head.headers.remove(SEC_WEBSOCKET_ACCEPT);
                }
                head.headers.remove(CONTENT_LENGTH);
            }
        }
        let (client, stream, send_timeout, quiet) = (
            self.client,
            self.stream,
            clients.send_timeout,
            clients.tunnel_timeout,
        );
        tokio::spawn(async move {
            let _open = stream;
            let client = client.switched(send_timeout);
            // The backend's connection is the tunnel's now: never pooled.
            let copied = match h1_backend {
                Some(backend) => match client.await {
                    Ok(client) => Ok(copy_until_either_closes(client, backend, quiet).await),
                    Err(e) => Err(e),
                },
                None => {
                    let backend = async { h2_backend.await.map_err(|e| e.to_string()) };
                    match tokio::try_join!(client, backend) {
                        Ok((client, backend)) => {
                            Ok(
                                copy_until_either_closes(client, TokioIo::new(backend), quiet)
                                    .await,
                            )
                        }
                        Err(e) => Err(e),
                    }
                }
            };
            match copied {
                Ok(closed) => {
                    if let Err(e) = closed {
                        tracing::debug!("tunnel closed: {e}");
                    }
                    // Closed by either side: the endpoint did its part.
                    pick.finish(Outcome::success(started.elapsed()));
                }
                Err(e) => {
                    tracing::debug!("upgrade failed: {e}");
                    pick.finish(Outcome::failure(started.elapsed()));
                }
            }
        });
        Response::from_parts(head, empty_body())
    }
}

/// The client's side of a tunnel: an HTTP/2 stream or an HTTP/1.1
/// connection switched by hyper's server, or an HTTP/1.1 connection of the
/// gateway's own server (downstream/).
enum ClientSide {
    Hyper(OnUpgrade),
    Own(Option<tokio::sync::oneshot::Receiver<Switched>>),
}

impl std::fmt::Debug for ClientSide {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientSide::Hyper(_) => f.write_str("ClientSide::Hyper"),
            ClientSide::Own(_) => f.write_str("ClientSide::Own"),
        }
    }
}

impl ClientSide {
    fn of(request: &mut RequestHead) -> Self {
        match request.extensions.remove::<PendingSwitch>() {
            Some(pending) => ClientSide::Own(pending.take()),
            // hyper's own: what `hyper::upgrade::on` takes of a request.
            None => ClientSide::Hyper(
                request
                    .extensions
                    .remove::<OnUpgrade>()
                    .unwrap_or_else(|| hyper::upgrade::on(Request::new(()))),
            ),
        }
    }

    /// The client's side once switched; hyper's with the send timeout
    /// (the gateway's own connection has it already).
    async fn switched(self, send_timeout: Duration) -> Result<Box<dyn Io>, String> {
        match self {
            ClientSide::Hyper(on) => match on.await {
                Ok(upgraded) => Ok(Box::new(SendLimit::new(
                    TokioIo::new(upgraded),
                    send_timeout,
                ))),
                Err(e) => Err(e.to_string()),
            },
            ClientSide::Own(Some(switched)) => match switched.await {
                Ok(switched) => Ok(Box::new(switched)),
                Err(_) => Err("the client's connection closed before it switched".into()),
            },
            ClientSide::Own(None) => Err("the client's connection was taken before".into()),
        }
    }
}

/// A fresh `Sec-WebSocket-Key`: 16 random bytes in base64 (RFC 6455 4.1),
/// from the operating system's generator that TLS uses.
fn handshake_key() -> HeaderValue {
    static RANDOM: OnceLock<&'static dyn SecureRandom> = OnceLock::new();
    let random = *RANDOM
        .get_or_init(|| tokio_rustls::rustls::crypto::ring::default_provider().secure_random);
    let mut nonce = [0u8; 16];
    if random.fill(&mut nonce).is_err() {
        // The generator failed (never seen once a system has booted). The
        // key proves only that the backend read this handshake (RFC 6455
        // 1.3), so a nonce from std's randomly keyed hasher does.
        use std::hash::BuildHasher;
        let keys = std::collections::hash_map::RandomState::new();
        for (i, half) in nonce.chunks_mut(8).enumerate() {
            half.copy_from_slice(&keys.hash_one(i).to_le_bytes());
        }
    }
    let text = base64::engine::general_purpose::STANDARD.encode(nonce);
    HeaderValue::try_from(text).expect("base64 is a valid header value")
}

/// The `Sec-WebSocket-Accept` for a client's `key` (RFC 6455 4.2.2): the
/// base64 of the SHA-1 of the key and the protocol's GUID.
fn accept_key(key: &[u8]) -> HeaderValue {
    const GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    let mut context = ring::digest::Context::new(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY);
    context.update(key);
    context.update(GUID);
    let text = base64::engine::general_purpose::STANDARD.encode(context.finish());
    HeaderValue::try_from(text).expect("base64 is a valid header value")
}

/// Copies bytes both ways until one side has ended its stream (what it
/// sent passed on, then the other side's writing shut down), then closes
/// both, as nginx ends a tunnel: a WebSocket has no use for a half-closed
/// connection, and a peer that left must not hold the slot. A tunnel that
/// carries nothing either way for `quiet` is closed too (tunnel_idle.rs).
async fn copy_until_either_closes<C, B>(
    client: C,
    backend: B,
    quiet: Duration,
) -> std::io::Result<()>
where
    C: tokio::io::AsyncRead + tokio::io::AsyncWrite,
    B: tokio::io::AsyncRead + tokio::io::AsyncWrite,
{
    use tokio::io::AsyncWriteExt;
    let traffic = Traffic::new();
    let (client_reads, mut client_writes) = tokio::io::split(client);
    let (backend_reads, mut backend_writes) = tokio::io::split(backend);
    let mut client_reads = Noted::new(client_reads, traffic.clone());
    let mut backend_reads = Noted::new(backend_reads, traffic.clone());
    let up = async {
        tokio::io::copy(&mut client_reads, &mut backend_writes).await?;
        backend_writes.shutdown().await
    };
    let down = async {
        tokio::io::copy(&mut backend_reads, &mut client_writes).await?;
        client_writes.shutdown().await
    };
    tokio::select! {
        ended = up => ended,
        ended = down => ended,
        () = traffic.quiet_for(quiet) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("nothing either way for {quiet:?}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upgrade_is_found_among_connections_elements() {
        let with = |values: &[&[u8]]| {
            let mut h = http::HeaderMap::new();
            for v in values {
                h.append(CONNECTION, HeaderValue::from_bytes(v).unwrap());
            }
            lists_upgrade(&Fields::Map(h))
        };
        assert!(with(&[b"Upgrade"]));
        assert!(with(&[b"keep-alive, upgrade"]));
        assert!(with(&[b"keep-alive", b" UPGRADE\t"]));
        // An element that is not ASCII does not hide the others.
        assert!(with(&[b"caf\xc3\xa9, upgrade"]));
        assert!(!with(&[]));
        assert!(!with(&[b"keep-alive, upgraded"]));
        assert!(!with(&[b"keep-alive", b"close"]));
    }

    #[test]
    fn the_accept_key_is_rfc_6455s() {
        // RFC 6455 1.3's example.
        let key = HeaderValue::from_static("dGhlIHNhbXBsZSBub25jZQ==");
        assert_eq!(accept_key(key.as_bytes()), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    }

    #[test]
    fn handshake_keys_are_16_fresh_bytes_in_base64() {
        let keys: Vec<HeaderValue> = (0..4).map(|_| handshake_key()).collect();
        for key in &keys {
            let nonce = base64::engine::general_purpose::STANDARD
                .decode(key.as_bytes())
                .unwrap();
            assert_eq!(nonce.len(), 16, "{key:?}");
        }
        for (i, key) in keys.iter().enumerate() {
            assert!(!keys[i + 1..].contains(key), "{key:?} again");
        }
    }
}
