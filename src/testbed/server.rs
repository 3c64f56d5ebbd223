//! Serving a router on a bound listener, with TLS or without, HTTP/1.1 and HTTP/2, until shut down.
//! Handlers learn the client's address with `ConnectInfo<SocketAddr>`.

use axum::extract::ConnectInfo;
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

/// Accept connections until `shutdown` turns true; connections in progress are dropped with the
/// returned task.
pub async fn serve(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    router: Router,
    mut shutdown: watch::Receiver<bool>,
) {
    let acceptor = tls.map(TlsAcceptor::from);
    let mut connections = JoinSet::new();
    loop {
        let (stream, client) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    continue;
                }
            },
            _ = shutdown.wait_for(|stop| *stop) => break,
        };
        // Reap finished connections so the set does not grow.
        while connections.try_join_next().is_some() {}
        let service =
            TowerToHyperService::new(router.clone().layer(axum::Extension(ConnectInfo(client))));
        let acceptor = acceptor.clone();
        connections.spawn(async move {
            let builder = Builder::new(TokioExecutor::new());
            let result = match acceptor {
                Some(acceptor) => match acceptor.accept(stream).await {
                    Ok(tls) => {
                        builder
                            .serve_connection_with_upgrades(TokioIo::new(tls), service)
                            .await
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "TLS handshake failed");
                        return;
                    }
                },
                None => {
                    builder
                        .serve_connection_with_upgrades(TokioIo::new(stream), service)
                        .await
                }
            };
            if let Err(e) = result {
                tracing::debug!(error = %e, "connection ended with an error");
            }
        });
    }
}
