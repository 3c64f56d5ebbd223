//! Outbound: clients of the other participants we call — any participant's token and capabilities
//! endpoints, the scheme owner, authorisation registries, the identity provider people sign in
//! at — and their caches.

pub mod forwarded;
pub mod identity_provider;
mod party_lookup;
pub mod registry;
pub mod registry_errors;
pub mod scheme_owner;
pub mod token_cache;
pub mod trust;

use crate::scheme::jwt::SigningIdentity;
use crate::scheme::mask::{AccessRequest, BodyShape, DelegationBody};
use crate::scheme::models::TokenResponse;
use crate::scheme::reason_codes;
use crate::scheme::version::SchemeVersion;
use crate::scheme::Timestamp;
use reqwest::StatusCode;
use serde::de::DeserializeOwned;

/// Why a call to another participant did not give a usable answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PeerError {
    #[error("{url} did not answer in time")]
    Timeout { url: String },
    #[error("{url} is unreachable: {detail}")]
    Unreachable { url: String, detail: String },
    #[error("{url} answered {status}: {body}")]
    Status {
        url: String,
        status: u16,
        body: String,
    },
    #[error("{url} answered something unusable: {detail}")]
    Garbled { url: String, detail: String },
    /// 429: the peer asks to be called again later (`Retry-After`, bounded).
    #[error(
        "{url} answered 429 (too many requests) and asks to be called again in {retry_after} s"
    )]
    Busy { url: String, retry_after: u64 },
    /// 3xx: the gateway follows no redirect (its own assertion, addressed to this peer, would go
    /// to whatever address a redirect names).
    #[error("{url} answered {status}, redirecting to {to}; the gateway follows no redirects: configure the address it redirects to")]
    Redirected {
        url: String,
        status: u16,
        to: String,
    },
}

impl PeerError {
    pub(crate) fn from_reqwest(url: &str, e: reqwest::Error) -> Self {
        // The address is the error's `url`; reqwest's own text would repeat it with its query.
        let e = e.without_url();
        if e.is_timeout() {
            PeerError::Timeout {
                url: url.to_string(),
            }
        } else if e.is_decode() || e.is_body() {
            PeerError::Garbled {
                url: url.to_string(),
                detail: e.to_string(),
            }
        } else {
            let mut detail = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                detail.push_str(": ");
                detail.push_str(&s.to_string());
                source = s.source();
            }
            if detail.contains(UNTRUSTED_CERTIFICATE) {
                detail.push_str(UNTRUSTED_HINT);
            }
            PeerError::Unreachable {
                url: url.to_string(),
                detail,
            }
        }
    }
}

/// How rustls says a server's certificate chain does not verify (`UnknownIssuer`, an expired
/// certificate, another name).
const UNTRUSTED_CERTIFICATE: &str = "invalid peer certificate";

/// What the log says to do about it.
const UNTRUSTED_HINT: &str = " (the gateway does not trust this server's TLS certificate: if a \
    private CA issued it, as in the testbed, set [outbound] ca_file to that CA's certificate)";

impl PeerError {
    /// Whether the peer's TLS certificate was not trusted: an operator's configuration to fix,
    /// not an outage.
    pub fn untrusted_certificate(&self) -> bool {
        matches!(self, PeerError::Unreachable { detail, .. } if detail.contains(UNTRUSTED_CERTIFICATE))
    }
}

reason_codes! {
    PeerError {
        PeerError::Timeout { .. } => "timeout",
        PeerError::Unreachable { .. } => "unreachable",
        PeerError::Status { .. } => "error_status",
        PeerError::Garbled { .. } => "garbled",
        PeerError::Busy { .. } => "busy",
        PeerError::Redirected { .. } => "redirected",
    }
}

/// The longest error body quoted back in an error.
const QUOTE: usize = 300;

/// The most of a peer's answer that is read: the scheme's answers are kilobytes (a page of
/// parties with their certificates some hundreds); a larger one is garbled, not held.
const ANSWER_MAX: usize = 4 << 20;

/// The longest wait a peer's `Retry-After` is taken for, in seconds: a longer one is read as this.
pub const RETRY_AFTER_MAX: u64 = 60;

/// Calls other participants as `identity`.
#[derive(Clone)]
pub struct PeerClient {
    http: reqwest::Client,
    identity: SigningIdentity,
    scheme: String,
    /// The scheme's framework and the data spaces we serve in.
    membership: crate::scheme::party_record::Membership,
}

/// Join a base URL and a path without doubling or losing a slash.
pub fn join(base: &str, path: &str) -> String {
    format!(
        "{}/{}",
        base.trim_end_matches('/'),
        path.trim_start_matches('/')
    )
}

/// The path of one party's record at a scheme owner (which some satellites lack: search
/// `/parties?eori=` there).
pub fn party_path(id: &str) -> String {
    format!("{}/{id}", crate::scheme::vocabulary::PARTIES_PATH)
}

impl PeerClient {
    pub fn new(
        http: reqwest::Client,
        identity: SigningIdentity,
        scheme: impl Into<String>,
    ) -> Self {
        let scheme: String = scheme.into();
        PeerClient {
            http,
            identity,
            membership: crate::scheme::party_record::Membership {
                framework: scheme.clone(),
                dataspaces: Vec::new(),
            },
            scheme,
        }
    }

    /// The same, serving in `dataspaces` (3.0 ids).
    pub fn in_dataspaces(mut self, dataspaces: Vec<String>) -> Self {
        self.membership.dataspaces = dataspaces;
        self
    }

    /// What we are a member of: the framework, and the data spaces we serve in.
    pub fn membership(&self) -> &crate::scheme::party_record::Membership {
        &self.membership
    }

    pub fn identity(&self) -> &SigningIdentity {
        &self.identity
    }

    /// The scheme's name (`iSHARE`): the scope of our token requests and the framework's id.
    pub fn scheme(&self) -> &str {
        &self.scheme
    }

    /// POST a client assertion for `audience` to a token endpoint.
    pub async fn token(&self, token_url: &str, audience: &str) -> Result<TokenResponse, PeerError> {
        let assertion = self
            .identity
            .client_assertion(audience, Timestamp::now())
            .map_err(|e| PeerError::Garbled {
                url: token_url.to_string(),
                detail: format!("cannot sign our client assertion: {e}"),
            })?;
        let form = [
            ("grant_type", "client_credentials"),
            ("scope", self.scheme.as_str()),
            ("client_id", self.identity.party_id().as_str()),
            (
                "client_assertion_type",
                crate::scheme::assertion::ASSERTION_TYPE,
            ),
            ("client_assertion", assertion.as_str()),
        ];
        let resp = traced(self.http.post(token_url).form(&form))
            .send()
            .await
            .map_err(|e| PeerError::from_reqwest(token_url, e))?;
        read(token_url, resp).await
    }

    /// GET a data endpoint and return the JWT in `member` of its JSON answer.
    pub async fn get_signed(
        &self,
        url: &str,
        query: &[(&str, &str)],
        token: Option<&str>,
        member: &str,
    ) -> Result<String, PeerError> {
        get_signed(&self.http, url, query, token, member).await
    }

    /// POST a delegation request. `Ok(None)` when the registry has no policy (404), which is a Deny;
    /// a 404 that is a web page (`text/html`: a server's "no such path") is no registry's answer
    /// but an error status. The answer's member is the one of the body's version:
    /// `delegationToken` for a 3.0 body, `delegation_token` before; the other is garbled, not
    /// guessed.
    pub async fn delegation(
        &self,
        url: &str,
        token: &str,
        body: &DelegationBody,
    ) -> Result<Option<String>, PeerError> {
        let resp = traced(self.http.post(url).bearer_auth(token).json(body))
            .send()
            .await
            .map_err(|e| PeerError::from_reqwest(url, e))?;
        if resp.status() == StatusCode::NOT_FOUND && !is_page(resp.headers()) {
            return Ok(None);
        }
        let answer: serde_json::Value = read(url, resp).await?;
        let member = match body.shape {
            BodyShape::Camel => crate::scheme::vocabulary::member::DELEGATION_3,
            _ => crate::scheme::vocabulary::member::DELEGATION,
        };
        member_of(url, &answer, member).map(Some)
    }

    /// Evidence on `request` from the registry at `base` (party `registry_id`, speaking
    /// `version`), as a consumer asks for it: a fresh token, then the request as a mask.
    /// `Ok(None)` when the registry holds no policy (a Deny).
    pub async fn ask_evidence(
        &self,
        base: &str,
        registry_id: &str,
        request: &AccessRequest,
        version: SchemeVersion,
    ) -> Result<Option<String>, PeerError> {
        let token = self
            .token(
                &join(base, crate::scheme::vocabulary::TOKEN_PATH),
                registry_id,
            )
            .await?
            .access_token;
        self.delegation(
            &join(base, crate::scheme::vocabulary::DELEGATION_PATH),
            &token,
            &DelegationBody::new(request.to_mask(version), version),
        )
        .await
    }
}

/// The JWT in `member` of an answer. An answer that holds the same member under another
/// version's name (`partyToken` for `party_token`) is a peer speaking another version than it is
/// configured for: an error that says so, not a guess.
fn member_of(url: &str, body: &serde_json::Value, member: &str) -> Result<String, PeerError> {
    let garbled = |detail: String| PeerError::Garbled {
        url: url.to_string(),
        detail,
    };
    match body.get(member) {
        Some(serde_json::Value::String(jwt)) => Ok(jwt.clone()),
        Some(_) => Err(garbled(format!("the answer's {member} is not text"))),
        None => match crate::scheme::vocabulary::member::counterpart(member)
            .filter(|other| body.get(*other).is_some())
        {
            Some(other) => Err(garbled(format!(
                "the answer holds {other} where {member} was asked: the peer speaks another version of the scheme than it is configured for"
            ))),
            None => Err(garbled(format!("the answer has no {member}"))),
        },
    }
}

/// Whether an answer is a web page: a server's or a proxy's own error page, not a participant's
/// answer.
fn is_page(headers: &reqwest::header::HeaderMap) -> bool {
    headers
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|t| t.trim().eq_ignore_ascii_case("text/html"))
}

/// How long a 429 asks to wait: `Retry-After` in seconds (or as a date), within 1 s and
/// `RETRY_AFTER_MAX`; 1 s when it says nothing usable.
fn retry_after(headers: &reqwest::header::HeaderMap) -> u64 {
    let text = headers
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .map(str::trim);
    let secs = text.and_then(|t| match t.parse::<u64>() {
        Ok(secs) => Some(secs),
        Err(_) => httpdate::parse_http_date(t).ok().map(|at| {
            at.duration_since(std::time::SystemTime::now())
                .map_or(0, |d| d.as_secs())
        }),
    });
    secs.unwrap_or(1).clamp(1, RETRY_AFTER_MAX)
}

/// The `Location` a redirect names, as printable text of at most `QUOTE` characters.
fn location(headers: &reqwest::header::HeaderMap) -> String {
    let to = headers
        .get(reqwest::header::LOCATION)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .unwrap_or_else(|| "no Location".into());
    to.chars().filter(|c| !c.is_control()).take(QUOTE).collect()
}

/// The JSON of a successful answer; an error status or unreadable JSON is an error.
async fn read<T: DeserializeOwned>(url: &str, resp: reqwest::Response) -> Result<T, PeerError> {
    let status = resp.status();
    if status == StatusCode::TOO_MANY_REQUESTS {
        return Err(PeerError::Busy {
            url: url.to_string(),
            retry_after: retry_after(resp.headers()),
        });
    }
    if status.is_redirection() {
        return Err(PeerError::Redirected {
            url: url.to_string(),
            status: status.as_u16(),
            to: location(resp.headers()),
        });
    }
    let bytes = bounded_body(url, resp, ANSWER_MAX).await?;
    if !status.is_success() {
        let body = String::from_utf8_lossy(&bytes);
        return Err(PeerError::Status {
            url: url.to_string(),
            status: status.as_u16(),
            body: body.chars().take(QUOTE).collect(),
        });
    }
    serde_json::from_slice(&bytes).map_err(|e| PeerError::Garbled {
        url: url.to_string(),
        detail: e.to_string(),
    })
}

/// The body of an answer, at most `limit` bytes of it.
async fn bounded_body(
    url: &str,
    mut resp: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, PeerError> {
    let too_large = || PeerError::Garbled {
        url: url.to_string(),
        detail: format!("the answer is larger than {limit} bytes"),
    };
    if resp.content_length().is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| PeerError::from_reqwest(url, e))?
    {
        if body.len() + chunk.len() > limit {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// GET a data endpoint and return the JWT in `member` of its JSON answer.
pub async fn get_signed(
    http: &reqwest::Client,
    url: &str,
    query: &[(&str, &str)],
    token: Option<&str>,
    member: &str,
) -> Result<String, PeerError> {
    let mut req = http.get(url).query(query);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = traced(req)
        .send()
        .await
        .map_err(|e| PeerError::from_reqwest(url, e))?;
    let body: serde_json::Value = read(url, resp).await?;
    member_of(url, &body, member)
}

/// What a span of a call says of its address: `url.full` without credentials or query, and the
/// server's host and port.
fn url_attributes(text: &str) -> Vec<opentelemetry::KeyValue> {
    use opentelemetry::KeyValue;
    let Ok(mut url) = url::Url::parse(text) else {
        return Vec::new();
    };
    let _ = url.set_username("");
    let _ = url.set_password(None);
    url.set_query(None);
    url.set_fragment(None);
    let mut attributes = Vec::with_capacity(3);
    if let Some(host) = url.host_str() {
        attributes.push(KeyValue::new("server.address", host.to_string()));
    }
    if let Some(port) = url.port_or_known_default() {
        attributes.push(KeyValue::new("server.port", i64::from(port)));
    }
    attributes.push(KeyValue::new("url.full", String::from(url)));
    attributes
}

/// A call made for a traced request carries its trace context: the `traceparent` naming the
/// span of the call (a registry's or the scheme owner's) as its parent.
fn traced(request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
    match crate::telemetry::trace::outgoing() {
        Some(headers) => request.headers(headers),
        None => request,
    }
}
