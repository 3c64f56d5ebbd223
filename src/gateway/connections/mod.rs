//! Connections, before HTTP: the limit of open connections per listener (a connection over it is
//! closed at once), TLS handshakes with a deadline, and deadlines for the time a connection may sit
//! idle between requests and the time a request's header may take to arrive — so that neither idle
//! keep-alive connections nor drip-fed headers hold the gateway's sockets. Bodies are read with a
//! per-read timeout set on each request.

pub mod body;
pub mod listener;

use crate::config::model::{Listener, Server};
use crate::telemetry::Metrics;
use async_trait::async_trait;
use futures::task::AtomicWaker;
use pingora::apps::ServerApp;
use pingora::listeners::tls::Acceptor;
use pingora::protocols::l4::stream::Stream as L4Stream;
use pingora::protocols::{
    GetProxyDigest, GetSocketDigest, GetTimingDigest, Peek, Shutdown, Ssl, Stream, UniqueID,
    UniqueIDType, ALPN,
};
use pingora::server::ShutdownWatch;
use prometheus::{IntCounter, IntGauge};
use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How long each phase of a connection may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deadlines {
    /// From the end of one request (or the connection's start) to the first byte of the next.
    pub idle: Duration,
    /// From the first byte of a request to the end of its header.
    pub header: Duration,
    /// The TLS handshake.
    pub handshake: Duration,
    /// Requests in flight on one connection (HTTP/2 streams).
    pub streams: usize,
}

impl Deadlines {
    pub fn of(server: &Server) -> Self {
        Deadlines {
            idle: server.keepalive_timeout,
            header: server.header_timeout,
            handshake: server.handshake_timeout,
            streams: server.h2_max_streams as usize,
        }
    }
}

const IDLE: u8 = 0;
const HEADER: u8 = 1;
/// Reading a body or answering: no deadline here (reads have their own timeout).
const BUSY: u8 = 2;
/// HTTP/2: the header deadline covers only the connection preface.
const H2: u8 = 3;

/// The phase of one connection, which the proxy moves along (`header_read`, `done`: HTTP/1), and
/// what a request may do to the connection it came on: take one of its stream permits (HTTP/2),
/// and close it (`close`: a stream whose body is late).
pub struct Phase {
    phase: AtomicU8,
    since: Mutex<Instant>,
    /// Requests in flight on the connection at most: more than HTTP/2 counts, as it forgets a
    /// stream the client resets while the proxy still works on it.
    streams: Arc<Semaphore>,
    closing: AtomicBool,
    /// The task reading the connection, woken to notice `closing`.
    reader: AtomicWaker,
}

impl Phase {
    fn new(streams: usize) -> Self {
        Phase {
            phase: AtomicU8::new(IDLE),
            since: Mutex::new(Instant::now()),
            streams: Arc::new(Semaphore::new(streams)),
            closing: AtomicBool::new(false),
            reader: AtomicWaker::new(),
        }
    }

    /// A permit for one more request in flight on the connection, or None when it has as many as
    /// it may.
    pub fn stream_permit(&self) -> Option<OwnedSemaphorePermit> {
        self.streams.clone().try_acquire_owned().ok()
    }

    /// Close the connection: its next read fails.
    pub fn close(&self) {
        self.closing.store(true, Ordering::Release);
        self.reader.wake();
    }

    fn set(&self, phase: u8) {
        *self.since.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
        self.phase.store(phase, Ordering::Release);
    }

    /// The request's header has been read: no header deadline until the next request.
    pub fn header_read(&self) {
        if self.phase.load(Ordering::Acquire) != H2 {
            self.set(BUSY);
        }
    }

    /// The request is answered: the connection is idle until the next one.
    pub fn done(&self) {
        if self.phase.load(Ordering::Acquire) != H2 {
            self.set(IDLE);
        }
    }

    fn get(&self) -> (u8, Instant) {
        let since = *self.since.lock().unwrap_or_else(|e| e.into_inner());
        (self.phase.load(Ordering::Acquire), since)
    }
}

/// Counters of connections closed for a deadline.
#[derive(Clone)]
struct Closed {
    idle: IntCounter,
    header: IntCounter,
    body: IntCounter,
}

/// A connection with its deadlines: reads fail with `TimedOut` once the phase's deadline passes.
pub struct Guarded {
    inner: Stream,
    phase: Arc<Phase>,
    deadlines: Deadlines,
    timer: Pin<Box<tokio::time::Sleep>>,
    closed: Closed,
}

impl std::fmt::Debug for Guarded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guarded")
            .field("inner", &self.inner)
            .field("deadlines", &self.deadlines)
            .finish_non_exhaustive()
    }
}

const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0";

impl Guarded {
    fn new(inner: Stream, deadlines: Deadlines, closed: Closed) -> Self {
        let phase = Phase::new(deadlines.streams);
        if inner.selected_alpn_proto() == Some(ALPN::H2) {
            phase.phase.store(H2, Ordering::Release);
        }
        Guarded {
            timer: Box::pin(tokio::time::sleep(deadlines.idle)),
            inner,
            phase: Arc::new(phase),
            deadlines,
            closed,
        }
    }

    /// The phase of the connection a request arrived on (HTTP/1 only).
    pub fn phase_of(stream: &Stream) -> Option<&Phase> {
        stream
            .as_any()
            .downcast_ref::<Guarded>()
            .map(|g| g.phase.as_ref())
    }

    /// The deadline of the current phase, and the counter of connections closed by it.
    fn deadline(&self) -> Option<(Instant, &IntCounter)> {
        match self.phase.get() {
            (IDLE, since) => Some((since + self.deadlines.idle, &self.closed.idle)),
            (HEADER | H2, since) => Some((since + self.deadlines.header, &self.closed.header)),
            _ => None,
        }
    }
}

impl AsyncRead for Guarded {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        this.phase.reader.register(cx.waker());
        if this.phase.closing.load(Ordering::Acquire) {
            this.closed.body.inc();
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "a request body on the connection was late",
            )));
        }
        if let Some((deadline, _)) = this.deadline() {
            let deadline = tokio::time::Instant::from_std(deadline);
            if this.timer.deadline() != deadline {
                this.timer.as_mut().reset(deadline);
            }
            if this.timer.as_mut().poll(cx).is_ready() {
                if let Some((_, closed)) = this.deadline() {
                    closed.inc();
                }
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the connection's deadline passed",
                )));
            }
        }
        let before = buf.filled().len();
        let result = Pin::new(&mut this.inner).poll_read(cx, buf);
        let read = &buf.filled()[before..];
        if matches!(result, Poll::Ready(Ok(()))) && !read.is_empty() {
            let (phase, _) = this.phase.get();
            if phase == IDLE {
                // The first bytes of a request (or of an HTTP/2 connection without TLS).
                this.phase.set(if read.starts_with(H2_PREFACE) {
                    H2
                } else {
                    HEADER
                });
            } else if phase == H2 {
                // The preface arrived: HTTP/2 keeps its own idle timeout from here.
                this.phase.set(BUSY);
            }
        }
        result
    }
}

impl AsyncWrite for Guarded {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[async_trait]
impl Shutdown for Guarded {
    async fn shutdown(&mut self) {
        self.inner.shutdown().await
    }
}

impl UniqueID for Guarded {
    fn id(&self) -> UniqueIDType {
        self.inner.id()
    }
}

impl Ssl for Guarded {
    fn get_ssl(&self) -> Option<&pingora::protocols::tls::TlsRef> {
        self.inner.get_ssl()
    }

    fn get_ssl_digest(&self) -> Option<Arc<pingora::protocols::tls::SslDigest>> {
        self.inner.get_ssl_digest()
    }

    fn selected_alpn_proto(&self) -> Option<ALPN> {
        self.inner.selected_alpn_proto()
    }
}

impl GetTimingDigest for Guarded {
    fn get_timing_digest(&self) -> Vec<Option<pingora::protocols::TimingDigest>> {
        self.inner.get_timing_digest()
    }

    fn get_read_pending_time(&self) -> Duration {
        self.inner.get_read_pending_time()
    }

    fn get_write_pending_time(&self) -> Duration {
        self.inner.get_write_pending_time()
    }
}

impl GetProxyDigest for Guarded {
    fn get_proxy_digest(&self) -> Option<Arc<pingora::protocols::raw_connect::ProxyDigest>> {
        self.inner.get_proxy_digest()
    }
}

impl GetSocketDigest for Guarded {
    fn get_socket_digest(&self) -> Option<Arc<pingora::protocols::SocketDigest>> {
        self.inner.get_socket_digest()
    }
}

#[async_trait]
impl Peek for Guarded {
    async fn try_peek(&mut self, buf: &mut [u8]) -> io::Result<bool> {
        let deadline = self
            .deadline()
            .map_or(Instant::now() + self.deadlines.header, |(d, _)| d);
        let wait = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(wait, self.inner.try_peek(buf)).await {
            Ok(result) => result,
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no request arrived in time",
            )),
        }
    }
}

/// One listening address: its TLS acceptor (None for plain HTTP) and its connection limit.
pub struct Entry {
    pub address: SocketAddr,
    pub tls: Option<Acceptor>,
    permits: Arc<Semaphore>,
    open: IntGauge,
    refused: IntCounter,
    handshake_failed: IntCounter,
    stream_refused: IntCounter,
    closed: Closed,
}

impl Entry {
    pub fn new(listener: &Listener, tls: Option<Acceptor>, metrics: &Metrics) -> Self {
        let name = listener.address.to_string();
        let closed = |reason: &str| {
            metrics
                .connections_closed
                .with_label_values(&[name.as_str(), reason])
        };
        Entry {
            address: listener.address,
            tls,
            permits: Arc::new(Semaphore::new(listener.max_connections)),
            open: metrics.connections.with_label_values(&[name.as_str()]),
            refused: closed("limit"),
            handshake_failed: closed("tls_handshake"),
            stream_refused: closed("stream_limit"),
            closed: Closed {
                idle: closed("idle_timeout"),
                header: closed("header_timeout"),
                body: closed("body_timeout"),
            },
        }
    }

    fn serves(&self, local: &SocketAddr) -> bool {
        serves(self.address, local)
    }
}

impl Entry {
    /// The limit this listener's HTTP/2 streams count against.
    pub fn stream_limit(&self) -> StreamLimit {
        StreamLimit {
            address: self.address,
            permits: self.permits.clone(),
            refused: self.stream_refused.clone(),
        }
    }
}

/// A listener has as many connections and streams open as it may.
#[derive(Debug)]
pub struct ListenerFull;

/// A listener's connection limit as its HTTP/2 streams share it: each open stream holds a permit
/// beside its connection's, so that one connection cannot hold more backend connections than the
/// listener allows connections.
#[derive(Clone)]
pub struct StreamLimit {
    address: SocketAddr,
    permits: Arc<Semaphore>,
    refused: IntCounter,
}

impl StreamLimit {
    /// A permit for a stream that arrived at `local`, or Err when its listener is full (a stream
    /// at an address no listener serves needs none).
    pub fn admit(
        limits: &[StreamLimit],
        local: Option<SocketAddr>,
    ) -> Result<Option<OwnedSemaphorePermit>, ListenerFull> {
        let Some(limit) = local.and_then(|l| limits.iter().find(|s| serves(s.address, &l))) else {
            return Ok(None);
        };
        match limit.permits.clone().try_acquire_owned() {
            Ok(permit) => Ok(Some(permit)),
            Err(_) => {
                limit.refused.inc();
                Err(ListenerFull)
            }
        }
    }
}

/// Whether a listener on `address` takes connections arriving at `local`.
fn serves(address: SocketAddr, local: &SocketAddr) -> bool {
    address.port() == local.port() && (address.ip().is_unspecified() || address.ip() == local.ip())
}

/// Decrements the open-connections gauge when the connection ends.
struct Open(IntGauge);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// (client, local) address: one TCP connection while it is open.
type ConnectionKey = (SocketAddr, SocketAddr);

/// The open connections, by their addresses: how a request (an HTTP/2 stream among many) reaches
/// the connection it came on.
#[derive(Clone, Default)]
pub struct Connections(Arc<Mutex<HashMap<ConnectionKey, Weak<Phase>>>>);

impl Connections {
    /// The connection from `client` to `local`, while it is open.
    pub fn get(&self, client: SocketAddr, local: SocketAddr) -> Option<Arc<Phase>> {
        let open = self.0.lock().unwrap_or_else(|e| e.into_inner());
        open.get(&(client, local)).and_then(Weak::upgrade)
    }

    fn register(&self, key: ConnectionKey, phase: &Arc<Phase>) -> Registered {
        let mut open = self.0.lock().unwrap_or_else(|e| e.into_inner());
        open.insert(key, Arc::downgrade(phase));
        Registered {
            connections: self.clone(),
            key,
        }
    }
}

/// A connection's entry in `Connections`, removed when the connection ends.
struct Registered {
    connections: Connections,
    key: ConnectionKey,
}

impl Drop for Registered {
    fn drop(&mut self) {
        let mut open = self.connections.0.lock().unwrap_or_else(|e| e.into_inner());
        open.remove(&self.key);
    }
}

/// The addresses of a connection's two ends.
fn key_of(stream: &Stream) -> Option<ConnectionKey> {
    let digest = stream.get_socket_digest()?;
    Some((
        *digest.peer_addr()?.as_inet()?,
        *digest.local_addr()?.as_inet()?,
    ))
}

/// An application (the gateway's proxy) behind the connection limits and deadlines of its
/// listeners.
pub struct Guard<A> {
    app: Arc<A>,
    listeners: Vec<Entry>,
    deadlines: Deadlines,
    connections: Connections,
}

impl<A> Guard<A> {
    pub fn new(
        app: A,
        listeners: Vec<Entry>,
        deadlines: Deadlines,
        connections: Connections,
    ) -> Self {
        Guard {
            app: Arc::new(app),
            listeners,
            deadlines,
            connections,
        }
    }

    fn listener_of(&self, stream: &Stream) -> Option<&Entry> {
        let local = *stream.get_socket_digest()?.local_addr()?.as_inet()?;
        self.listeners.iter().find(|l| l.serves(&local))
    }
}

#[async_trait]
impl<A: ServerApp + Send + Sync + 'static> ServerApp for Guard<A> {
    async fn process_new(
        self: &Arc<Self>,
        stream: Stream,
        shutdown: &ShutdownWatch,
    ) -> Option<Stream> {
        let listener = self.listener_of(&stream)?;
        let Ok(_permit) = listener.permits.clone().try_acquire_owned() else {
            listener.refused.inc();
            return None;
        };
        listener.open.inc();
        let _open = Open(listener.open.clone());
        let stream: Stream = match &listener.tls {
            None => stream,
            Some(acceptor) => {
                let l4 = stream.into_any().downcast::<L4Stream>().ok()?;
                match tokio::time::timeout(self.deadlines.handshake, acceptor.tls_handshake(*l4))
                    .await
                {
                    Ok(Ok(tls)) => Box::new(tls),
                    _ => {
                        listener.handshake_failed.inc();
                        return None;
                    }
                }
            }
        };
        let key = key_of(&stream);
        let guarded = Guarded::new(stream, self.deadlines, listener.closed.clone());
        let _registered = key.map(|k| self.connections.register(k, &guarded.phase));
        ServerApp::process_new(&self.app, Box::new(guarded), shutdown).await
    }

    async fn cleanup(&self) {
        ServerApp::cleanup(self.app.as_ref()).await
    }
}

/// The client's address of a request's connection (an IPv4 address mapped into IPv6 as IPv4).
pub fn client_ip(session: &pingora::proxy::Session) -> Option<std::net::IpAddr> {
    session
        .client_addr()
        .and_then(|a| a.as_inet())
        .map(|a| a.ip().to_canonical())
}

/// Whether a request came over TLS.
pub fn is_tls(session: &pingora::proxy::Session) -> bool {
    session.digest().is_some_and(|d| d.ssl_digest.is_some())
}
