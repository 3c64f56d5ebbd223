//! The request to decide as its caller holds it: the decision's seam for the request and its
//! body (`Incoming`), and a request held whole (`Held`), as another proxy, a command or a test
//! describes it. The proxy's own, read off the connection, is in `proxy/`.

use crate::gateway::reject::Reject;
use crate::request::body::BodyRefusal;
use async_trait::async_trait;
use bytes::Bytes;
use pingora::http::RequestHeader;

/// A request to decide as its caller holds it: the sequence's third seam, beside `Callers` and
/// `Evidence`. Its head is read first; its body only once the route stage has found a rule that
/// reads it and the authentication stage a caller who may call (pingora's `request_filter`
/// contract: the proxy reads it off the session then; the decision service, `explain` and rule
/// tests hold it as bytes).
#[async_trait]
pub trait Incoming: Send {
    fn header(&self) -> &RequestHeader;

    /// Whether a body follows (a form or JSON one may hold a `_method` field).
    fn has_body(&self) -> bool;

    /// Read off the wire (an HTTP/1.1 request names its `Host`), or described by another proxy
    /// or a command, which may leave the `Host` out.
    fn described(&self) -> bool;

    /// The body whole, of at most `limit` bytes: the bytes decided on, which are the bytes
    /// forwarded. Asked only of a request a body follows.
    async fn body(&mut self, limit: usize) -> Result<Bytes, Reject>;
}

/// A request held whole: described by another proxy, a command or a test.
pub struct Held<'a> {
    pub header: &'a RequestHeader,
    /// Whether a body follows, given or not.
    pub has_body: bool,
    pub body: HeldBody<'a>,
    /// Described, or (a test or benchmark of the proxy's decision) read off the wire.
    pub described: bool,
}

/// The body of a described request, as far as it was given.
pub enum HeldBody<'a> {
    /// Not given.
    Unseen,
    /// Given whole.
    Given(&'a [u8]),
    /// Given, and not as it is: why it cannot be decided on.
    Refused(Reject),
}

#[async_trait]
impl Incoming for Held<'_> {
    fn header(&self) -> &RequestHeader {
        self.header
    }

    fn has_body(&self) -> bool {
        self.has_body
    }

    fn described(&self) -> bool {
        self.described
    }

    async fn body(&mut self, _limit: usize) -> Result<Bytes, Reject> {
        match &self.body {
            HeldBody::Unseen => Err(Reject::Body(BodyRefusal::Unseen)),
            HeldBody::Given(bytes) => Ok(Bytes::copy_from_slice(bytes)),
            HeldBody::Refused(reject) => Err(reject.clone()),
        }
    }
}
