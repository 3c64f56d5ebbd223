//! The local listener: HTTP/1.1 and HTTP/2 without TLS (local clients on loopback), at most
//! `max_connections` at once, the first byte and every request's headers within
//! `header_timeout`, an idle HTTP/2 connection pinged; on shutdown no new connection is taken,
//! the calls in progress finish within `graceful_shutdown_timeout`, and the rest are cut.

use axum::body::Body;
use futures::future::BoxFuture;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

/// Calls at once on one HTTP/2 connection.
const H2_STREAMS: u32 = 64;

/// What answers each request.
pub type Answer =
    Arc<dyn Fn(http::Request<Incoming>) -> BoxFuture<'static, http::Response<Body>> + Send + Sync>;

/// How the listener is bounded.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    pub max_connections: usize,
    pub header_timeout: Duration,
    pub graceful_shutdown_timeout: Duration,
}

/// Serve `listener` until `shutdown` turns true, then drain.
pub async fn serve(
    listener: TcpListener,
    answer: Answer,
    bounds: Bounds,
    mut shutdown: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(bounds.max_connections));
    let mut connections = JoinSet::new();
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            _ = stopped(&mut shutdown) => break,
        };
        while connections.try_join_next().is_some() {}
        // A connection past the limit is closed at once.
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::warn!(
                max = bounds.max_connections,
                "connection refused: the consumer's side holds its most connections"
            );
            continue;
        };
        let answer = answer.clone();
        let mut stop = shutdown.clone();
        connections.spawn(async move {
            let _slot = slot;
            let service = hyper::service::service_fn(move |req| {
                let answer = answer.clone();
                async move { Ok::<_, std::convert::Infallible>(answer(req).await) }
            });
            // A connection that says nothing within the header timeout holds no slot: HTTP/1's
            // header timeout starts only once a request begins.
            let mut first = [0u8; 1];
            match tokio::time::timeout(bounds.header_timeout, stream.peek(&mut first)).await {
                Ok(Ok(n)) if n > 0 => {}
                _ => return,
            }
            let mut builder = Builder::new(TokioExecutor::new());
            builder
                .http1()
                .timer(TokioTimer::new())
                .header_read_timeout(bounds.header_timeout);
            // An HTTP/2 connection is pinged while idle and closed when it does not answer.
            builder
                .http2()
                .timer(TokioTimer::new())
                .keep_alive_interval(Some(bounds.header_timeout))
                .keep_alive_timeout(bounds.header_timeout)
                .max_concurrent_streams(H2_STREAMS);
            let conn = builder.serve_connection(TokioIo::new(stream), service);
            tokio::pin!(conn);
            tokio::select! {
                result = conn.as_mut() => {
                    if let Err(e) = result {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                    return;
                }
                _ = stopped(&mut stop) => conn.as_mut().graceful_shutdown(),
            }
            let _ = conn.await;
        });
    }
    drop(listener);
    let drained = tokio::time::timeout(bounds.graceful_shutdown_timeout, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            left = connections.len(),
            "calls still in progress at the end of the graceful shutdown are cut"
        );
        connections.shutdown().await;
    }
}

/// Until `shutdown` turns true (or its sender is gone).
async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stop| *stop).await;
}
