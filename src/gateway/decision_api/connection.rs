//! The decision service's connections: what it knows of each, and accepting them.

/// What the service knows of a connection.
#[derive(Clone, Copy, Debug)]
pub struct Connection {
    /// The client showed a certificate of `tls.client_ca`, verified in the handshake.
    pub client_certificate: bool,
}

/// The next connection `listener` accepts (without Nagle's delay), or None once `stop` is done.
/// A failed accept (too many open files) is logged and tried again after a pause.
pub async fn next_connection<F>(
    listener: &tokio::net::TcpListener,
    key: &str,
    stop: F,
) -> Option<tokio::net::TcpStream>
where
    F: std::future::Future,
{
    tokio::pin!(stop);
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = &mut stop => return None,
        };
        match accepted {
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                return Some(stream);
            }
            Err(e) => {
                tracing::warn!("{key}: accept: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    }
}
