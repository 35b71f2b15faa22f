//! WebSocket (any HTTP/1.1 `Upgrade`) through the gateway: the upgrade goes
//! to the picked backend, and once it answers `101 Switching Protocols`
//! both sockets are handed over and bytes are copied both ways. The
//! balancer's guard is held until the tunnel closes, so `loadring_in_flight`
//! and bounded load count open tunnels: a hot room is a hot key, and its
//! load is its open connections.

use std::time::Instant;

use http::header::{HeaderMap, HeaderValue, CONNECTION, UPGRADE};
use http::{Request, Response, Version};
use hyper::body::Incoming;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use loadring::{Outcome, Pick};

use crate::cluster::Backend;
use crate::connect::Held;
use crate::proxy_body::{empty_body, ProxyBody};

/// A client's request to switch protocols, its side of the tunnel to come.
#[derive(Debug)]
pub(crate) struct Tunnel {
    client: OnUpgrade,
    protocol: HeaderValue,
}

/// Whether a `Connection` header lists `upgrade`.
fn lists_upgrade(headers: &HeaderMap) -> bool {
    headers
        .get_all(CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
}

impl Tunnel {
    /// The tunnel `request` asks for: HTTP/1.1 with `Connection: upgrade`
    /// and an `Upgrade` protocol.
    pub(crate) fn asked(request: &mut Request<Incoming>) -> Option<Tunnel> {
        if request.version() != Version::HTTP_11 || !lists_upgrade(request.headers()) {
            return None;
        }
        let protocol = request.headers().get(UPGRADE)?.clone();
        Some(Tunnel {
            client: hyper::upgrade::on(request),
            protocol,
        })
    }

    /// Puts the upgrade back in the headers sent to the backend (hop by
    /// hop, they were removed with the others).
    pub(crate) fn ask(&self, headers: &mut HeaderMap) {
        headers.insert(CONNECTION, HeaderValue::from_static("upgrade"));
        headers.insert(UPGRADE, self.protocol.clone());
    }

    /// The backend switched to `protocol` (its `101` answer's `Upgrade`,
    /// its hop-by-hop headers already removed): answers the client `101`
    /// and copies bytes both ways until either side closes, `pick` held
    /// until then.
    pub(crate) fn open(
        self,
        mut response: Response<Incoming>,
        protocol: Option<HeaderValue>,
        held: Held,
        pick: Pick<Backend>,
        started: Instant,
    ) -> Response<ProxyBody> {
        let backend = hyper::upgrade::on(&mut response);
        let (mut head, _) = response.into_parts();
        head.headers
            .insert(CONNECTION, HeaderValue::from_static("upgrade"));
        if let Some(protocol) = protocol {
            head.headers.insert(UPGRADE, protocol);
        }
        let client = self.client;
        tokio::spawn(async move {
            let joined = tokio::try_join!(client, backend);
            // The backend's connection is the tunnel's now: not pooled.
            drop(held);
            match joined {
                Ok((client, backend)) => {
                    if let Err(e) = copy_until_either_closes(client, backend).await {
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

/// Copies bytes both ways until one side has ended its stream (what it
/// sent passed on, then the other side's writing shut down), then closes
/// both, as nginx ends a tunnel: a WebSocket has no use for a half-closed
/// connection, and a peer that left must not hold the slot.
async fn copy_until_either_closes(
    client: hyper::upgrade::Upgraded,
    backend: hyper::upgrade::Upgraded,
) -> std::io::Result<()> {
    use tokio::io::AsyncWriteExt;
    let (mut client_reads, mut client_writes) = tokio::io::split(TokioIo::new(client));
    let (mut backend_reads, mut backend_writes) = tokio::io::split(TokioIo::new(backend));
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
    }
}
