//! A router served in plain HTTP on an ephemeral loopback port until stopped: the stand-ins the
//! tests put beside the testbed (collectors, recording proxies, satellites).

use std::net::SocketAddr;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub struct Served {
    pub addr: SocketAddr,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Served {
    pub async fn start(app: axum::Router) -> Served {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(ishare_gateway::testbed::server::serve(
            listener, None, app, stopped,
        ));
        Served { addr, stop, task }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stop serving; an error when the server does not end cleanly within 10 s.
    pub async fn stop(self) -> Result<(), String> {
        let _ = self.stop.send(true);
        match tokio::time::timeout(Duration::from_secs(10), self.task).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(format!("the server's task failed: {e}")),
            Err(_) => Err("the server did not stop within 10 s".into()),
        }
    }
}
