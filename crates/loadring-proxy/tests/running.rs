//! A proxy under test: bound on ports of its own on 127.0.0.1 (admin
//! included), served on a task until it is dropped or told to stop.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use loadring_proxy::internals::Gateway;
use loadring_proxy::{ClientLimits, ClusterConfig, Naming, Proxy, ProxyConfig, RouteConfig};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::common::{eventually, get, metric_sum, WAIT};

/// A proxy serving on a task of this runtime (aborted when dropped).
pub struct Running {
    pub addr: SocketAddr,
    pub admin: SocketAddr,
    pub gateway: Arc<Gateway>,
    /// Sending (or dropping) it begins the graceful stop.
    pub stop: Option<oneshot::Sender<()>>,
    pub task: JoinHandle<()>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Running {
    /// The admin listener's `/metrics` text.
    pub async fn metrics(&self) -> String {
        get(self.admin, "/metrics", &[]).await.body
    }

    /// Waits until the requests in flight, over every endpoint, are `n`;
    /// fails with the metrics if they are not in time.
    pub async fn wait_in_flight(&self, n: f64) {
        let reached = eventually(WAIT, || async {
            metric_sum(&self.metrics().await, "loadring_in_flight") == n
        })
        .await;
        assert!(reached, "in flight: not {n}\n{}", self.metrics().await);
    }
}

/// A configuration of `clusters` and `routes` on 127.0.0.1 ports the
/// system picks, with an admin listener.
pub fn config(
    clusters: Vec<ClusterConfig>,
    routes: Vec<RouteConfig>,
    clients: ClientLimits,
) -> ProxyConfig {
    ProxyConfig {
        listen: "127.0.0.1:0".into(),
        admin: Some("127.0.0.1:0".into()),
        drain_timeout: Duration::from_secs(5),
        clients,
        clusters,
        routes,
        tls: None,
    }
}

/// One cluster, no routes, default client limits, served.
pub async fn start(cluster: ClusterConfig) -> Running {
    serve(config(vec![cluster], vec![], ClientLimits::default()), 1).await
}

/// `config` bound with `workers` threads serving clients (this runtime's
/// task the first) and served.
pub async fn serve(config: ProxyConfig, workers: usize) -> Running {
    let proxy = Proxy::bind_workers(config, Naming::Keys, workers)
        .await
        .expect("proxy binds");
    let (addr, admin) = (proxy.local_addr().unwrap(), proxy.admin_addr().unwrap());
    let gateway = proxy.gateway().clone();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        proxy
            .serve(async {
                let _ = stopped.await;
            })
            .await
            .unwrap();
    });
    Running {
        addr,
        admin,
        gateway,
        stop: Some(stop),
        task,
    }
}
