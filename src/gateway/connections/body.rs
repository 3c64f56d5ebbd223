//! Request bodies: a deadline for the whole body that moves on with what arrives (a minimum rate),
//! so that a body dripped byte by byte holds no connection for long; declared lengths over a limit
//! refused before a byte is read; bodies a rule decides on read whole before the decision; and,
//! after an answer of our own, the rest of the body read and discarded within bounds (a lingering
//! close), so that a client still sending reads the answer instead of a reset.

use crate::config::model::{Route, Server};
use crate::gateway::reject::{BodyError, Reject};
use crate::request::form::{Finding, MethodFieldScan};
use crate::request::Ambiguity;
use bytes::Bytes;
use pingora::proxy::Session;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The time a request body may take: `grace`, and a second more for every `min_rate` bytes.
#[derive(Clone, Copy, Debug)]
pub struct BodyClock {
    started: Instant,
    grace: Duration,
    min_rate: u64,
    per_read: Duration,
    received: u64,
}

impl BodyClock {
    pub fn new(server: &Server, now: Instant) -> Self {
        BodyClock {
            started: now,
            grace: server.body_deadline,
            min_rate: server.body_min_rate.max(1),
            per_read: server.body_timeout,
            received: 0,
        }
    }

    /// When the body must be complete, given what has arrived.
    fn deadline(&self) -> Instant {
        let earned = Duration::from_secs_f64(self.received as f64 / self.min_rate as f64);
        self.started + self.grace + earned
    }

    /// Count `bytes` more received; how long the next read may wait, or None once the body is late.
    pub fn next_read(&mut self, bytes: usize, now: Instant) -> Option<Duration> {
        self.received += bytes as u64;
        let left = self.deadline().checked_duration_since(now)?;
        (!left.is_zero()).then(|| left.min(self.per_read))
    }
}

/// The scan a forwarded body gets for a `_method` field (a form's, a multipart part's or a JSON
/// key), which frameworks run as the request's method: on every route that does not accept
/// `method_override`, for a body of a form or JSON type or of none (every Content-Type given is
/// honoured); refused at once when the body could not be read one way (compressed, an ambiguous
/// boundary, JSON in another charset).
pub fn method_field_scan(
    route: &Route,
    req: &pingora::http::RequestHeader,
    has_body: bool,
) -> Result<Option<MethodFieldScan>, Reject> {
    if !has_body || route.accept.contains(Ambiguity::MethodOverride) {
        return Ok(None);
    }
    let values = |name| {
        req.headers
            .get_all(name)
            .into_iter()
            .map(http::HeaderValue::as_bytes)
    };
    MethodFieldScan::for_body(
        values(http::header::CONTENT_TYPE),
        values(http::header::CONTENT_ENCODING),
    )
    .map_err(refusal)
}

/// Scan the next chunk of a forwarded body (None at its end); the refusal when it holds a
/// `_method` field or cannot be read as far as one could be.
pub fn scan_chunk(
    scan: &mut MethodFieldScan,
    chunk: Option<&[u8]>,
    end: bool,
) -> Result<(), Reject> {
    let found = chunk
        .and_then(|c| scan.feed(c))
        .or_else(|| end.then(|| scan.finish()).flatten());
    found.map_or(Ok(()), |f| Err(refusal(f)))
}

fn refusal(found: Finding) -> Reject {
    match found {
        Finding::MethodOverride => Reject::Ambiguous(Ambiguity::MethodOverride),
        Finding::Unreadable(why) => Reject::UnreadableBody(BodyError::Unreadable(why)),
    }
}

/// The error a late body ends a forwarded request with: the client's fault, not the backend's.
pub fn too_slow() -> Box<pingora::Error> {
    pingora::Error::explain(
        pingora::ErrorType::ReadTimedout,
        "the request body arrived slower than the minimum rate",
    )
    .into_down()
}

/// The body deadline of an HTTP/2 stream, whose reads have no timeout: a task that calls `late`
/// when the body is late, unless it arrives (dropped) first.
pub struct Watchdog {
    received: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Watchdog {
    pub fn start(clock: BodyClock, late: impl FnOnce() + Send + 'static) -> Watchdog {
        let received = Arc::new(AtomicU64::new(0));
        let seen = received.clone();
        let task = tokio::spawn(async move {
            loop {
                let clock = BodyClock {
                    received: seen.load(Ordering::Relaxed),
                    ..clock
                };
                let deadline = clock.deadline();
                if deadline <= Instant::now() {
                    late();
                    return;
                }
                tokio::time::sleep_until(deadline.into()).await;
            }
        });
        Watchdog { received, task }
    }

    /// Count `bytes` more of the body received.
    pub fn received(&self, bytes: usize) {
        self.received.fetch_add(bytes as u64, Ordering::Relaxed);
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Read the next chunk of a body the gateway reads itself, within the body's deadline (HTTP/2
/// reads have no timeout of their own).
pub async fn read_chunk(
    session: &mut Session,
    clock: &mut BodyClock,
) -> Result<Option<Bytes>, Reject> {
    let late = || Reject::UnreadableBody(BodyError::Unreadable("the body arrived too slowly"));
    let wait = clock.next_read(0, Instant::now()).ok_or_else(late)?;
    let chunk = match tokio::time::timeout(wait, session.read_request_body()).await {
        Err(_) => return Err(late()),
        Ok(Err(e)) => {
            return Err(Reject::UnreadableBody(BodyError::Unreadable(
                e.etype().as_str(),
            )))
        }
        Ok(Ok(chunk)) => chunk,
    };
    if let Some(c) = &chunk {
        clock.next_read(c.len(), Instant::now());
    }
    Ok(chunk)
}

/// Read a request body of at most `limit` bytes within the body's deadline (an HTTP/2 stream's
/// `watchdog` counting it): a declared length over the limit is refused before anything is read.
pub async fn read_whole(
    session: &mut Session,
    limit: usize,
    clock: &mut BodyClock,
    watchdog: Option<&Watchdog>,
) -> Result<Vec<u8>, Reject> {
    check_declared_length(session, limit)?;
    let mut body = Vec::new();
    while let Some(chunk) = read_chunk(session, clock).await? {
        if body.len() + chunk.len() > limit {
            return Err(Reject::BodyTooLarge);
        }
        if let Some(watchdog) = watchdog {
            watchdog.received(chunk.len());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Read the body a route's rule decides on, whole, before the decision: at most `limit` bytes
/// (never more than pingora keeps of a body to send it again, so that what is forwarded after
/// the decision is this body), with a `100 Continue` first when the client waits for one.
pub async fn read_to_decide(
    session: &mut Session,
    limit: usize,
    clock: &mut BodyClock,
    watchdog: Option<&Watchdog>,
) -> Result<Bytes, Reject> {
    let downstream = session.as_downstream_mut();
    downstream.enable_retry_buffering();
    let expects_continue = downstream
        .req_header()
        .headers
        .get(http::header::EXPECT)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    if expects_continue && downstream.req_header().version == http::Version::HTTP_11 {
        check_declared_length(session, limit)?;
        session
            .as_downstream_mut()
            .write_continue_response()
            .await
            .map_err(|e| Reject::UnreadableBody(BodyError::Unreadable(e.etype().as_str())))?;
    }
    read_whole(session, limit, clock, watchdog)
        .await
        .map(Bytes::from)
}

/// Refuse a body whose declared length is over `limit` before reading any of it.
pub fn check_declared_length(session: &Session, limit: usize) -> Result<(), Reject> {
    let declared = session
        .req_header()
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    match declared {
        Some(length) if length > limit as u64 => Err(Reject::BodyTooLarge),
        _ => Ok(()),
    }
}

/// What is read at most of a body left unread after an answer of our own, and for how long.
const LINGER_BYTES: usize = 16 << 20;
const LINGER_TIME: Duration = Duration::from_secs(5);

/// After an answer of our own, read and discard what is left of the request body (at most
/// LINGER_BYTES, for at most LINGER_TIME, and never beyond the body's own deadline): a client still
/// sending it then reads the answer rather than a reset, over HTTP/1.1 (before the connection
/// closes) and HTTP/2 (before the stream is reset).
pub async fn linger(session: &mut Session, clock: &mut BodyClock) {
    if session.is_body_done() || session.is_body_empty() {
        return;
    }
    let until = Instant::now() + LINGER_TIME;
    let mut left = LINGER_BYTES;
    while left > 0 {
        let now = Instant::now();
        let Some(wait) = clock.next_read(0, now) else {
            return;
        };
        let wait = wait.min(until.saturating_duration_since(now));
        match tokio::time::timeout(wait, session.read_request_body()).await {
            Ok(Ok(Some(chunk))) => {
                clock.next_read(chunk.len(), Instant::now());
                left = left.saturating_sub(chunk.len());
            }
            _ => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clock(now: Instant) -> BodyClock {
        BodyClock {
            started: now,
            grace: Duration::from_secs(10),
            min_rate: 1000,
            per_read: Duration::from_secs(30),
            received: 0,
        }
    }

    #[test]
    fn a_body_has_its_grace_and_a_second_more_per_min_rate_bytes() {
        let start = Instant::now();
        let mut c = clock(start);
        assert_eq!(c.next_read(0, start), Some(Duration::from_secs(10)));
        // A drip earns almost nothing: the grace runs out.
        assert_eq!(
            c.next_read(1, start + Duration::from_secs(9)),
            Some(Duration::from_millis(1001))
        );
        assert_eq!(c.next_read(1, start + Duration::from_secs(11)), None);
        // A steady upload earns its time, each read waiting at most the per-read timeout.
        let mut c = clock(start);
        assert_eq!(
            c.next_read(100_000, start + Duration::from_secs(50)),
            Some(Duration::from_secs(30))
        );
        assert_eq!(c.next_read(0, start + Duration::from_secs(110)), None);
    }
}
