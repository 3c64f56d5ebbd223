//! The exchange with the provider: the headers of a local call it gets (none of the hop, none of
//! the client's credentials, in any spelling a backend folds together), the call sent (twice at
//! most), and its answer relayed with the slot among the provider's calls held until the body has
//! passed or the call's time is up.

use super::refusal::Refusal;
use crate::gateway::decision_api::forwarded::is_of_the_hop;
use crate::peers::PeerError;
use crate::scheme::jwt::{self, AlgorithmPolicy};
use crate::scheme::same_letters;
use crate::scheme::vocabulary::CREDENTIAL_HEADERS;
use axum::body::Body;
use bytes::Bytes;
use futures::StreamExt;
use http::{HeaderMap, HeaderValue, Response};

/// Credentials of the client's that never reach the provider: we authenticate.
const CLIENT_CREDENTIALS: [&str; 2] = ["authorization", "proxy-authorization"];

/// The call to the provider, as it may be sent twice.
pub struct Call {
    pub method: http::Method,
    pub url: String,
    pub headers: HeaderMap,
    pub body: Bytes,
    pub deadline: tokio::time::Instant,
}

impl Call {
    pub async fn send(
        &self,
        http: &reqwest::Client,
        token: &str,
    ) -> Result<reqwest::Response, PeerError> {
        let left = self
            .deadline
            .saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            return Err(PeerError::Timeout {
                url: self.url.clone(),
            });
        }
        http.request(self.method.clone(), &self.url)
            .headers(self.headers.clone())
            .bearer_auth(token)
            .body(self.body.clone())
            .timeout(left)
            .send()
            .await
            .map_err(|e| PeerError::from_reqwest(&self.url, e))
    }
}

/// The one value of a scheme header under any spelling a backend reads as its name
/// (`delegation_evidence`, `delegationEvidence`, `Delegation-Evidence`), or none; two are refused.
pub fn one_of(headers: &HeaderMap, header: &'static str) -> Result<Option<String>, Refusal> {
    let mut values = headers
        .iter()
        .filter(|(name, _)| same_letters(name.as_str(), header))
        .map(|(_, value)| value);
    match (values.next(), values.next()) {
        (None, _) => Ok(None),
        (Some(v), None) => v
            .to_str()
            .map(|v| Some(v.trim().to_string()))
            .map_err(|_| Refusal::BadHeader { header }),
        (Some(_), Some(_)) => Err(Refusal::Repeated { header }),
    }
}

/// Who a consumer's assertion says it is (its `iss`, unverified: the provider verifies it), for
/// the log.
pub fn issuer_of(assertion: &str) -> Option<String> {
    let decoded = jwt::decode(
        assertion,
        AlgorithmPolicy {
            allow_rs384_rs512: true,
        },
    )
    .ok()?;
    decoded
        .str_claim("iss")
        .map(|iss| iss.chars().take(200).collect())
}

/// The local call's headers the provider gets: not those of the hop (nor those `Connection`
/// names), not the client's credentials nor the scheme's, in any spelling (we authenticate, and
/// attach the scheme's headers ourselves).
pub fn forwarded_headers(from: &HeaderMap) -> HeaderMap {
    let named_by_connection: Vec<String> = from
        .get_all(http::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().to_ascii_lowercase())
        .collect();
    let mut headers = HeaderMap::with_capacity(from.len());
    for (name, value) in from {
        let n = name.as_str();
        let dropped = is_of_the_hop(n)
            || named_by_connection.iter().any(|c| c == n)
            || CLIENT_CREDENTIALS
                .iter()
                .chain(CREDENTIAL_HEADERS.iter())
                .any(|c| same_letters(c, n));
        if !dropped {
            headers.append(name.clone(), value.clone());
        }
    }
    headers
}

/// `value` as the header `name`.
pub fn insert(headers: &mut HeaderMap, name: &'static str, value: &str) -> Result<(), Refusal> {
    let bad = || Refusal::BadHeader { header: name };
    let value = HeaderValue::from_str(value).map_err(|_| bad())?;
    let name = http::HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad())?;
    headers.insert(name, value);
    Ok(())
}

/// Whether the provider refused our token as invalid (RFC 6750 `invalid_token`).
pub fn says_invalid_token(answer: &reqwest::Response) -> bool {
    answer.status() == http::StatusCode::UNAUTHORIZED
        && answer
            .headers()
            .get_all(http::header::WWW_AUTHENTICATE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| v.to_ascii_lowercase().contains("invalid_token"))
}

/// The provider's answer to the local client: its status, its headers but those of the hop, its
/// body as it comes. The slot among the provider's calls is held until the body has passed (or
/// the client went away) and no longer than `deadline`: a client that stops reading holds none.
pub fn relay(
    answer: reqwest::Response,
    slot: tokio::sync::OwnedSemaphorePermit,
    deadline: tokio::time::Instant,
) -> Response<Body> {
    let status = answer.status();
    let mut headers = HeaderMap::with_capacity(answer.headers().len());
    for (name, value) in answer.headers() {
        let n = name.as_str();
        if n == "content-length" || !is_of_the_hop(n) {
            headers.append(name.clone(), value.clone());
        }
    }
    let (passed, released) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        tokio::select! {
            _ = released => {}
            _ = tokio::time::sleep_until(deadline) => {}
        }
        drop(slot);
    });
    let stream = answer.bytes_stream().map(move |chunk| {
        let _held = &passed;
        chunk
    });
    let mut response = Response::new(Body::from_stream(stream));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_provider_gets_no_header_of_the_hop_and_no_credential_of_the_client() {
        let mut from = HeaderMap::new();
        for (name, value) in [
            ("host", "127.0.0.1:8181"),
            ("connection", "keep-alive, X-Secret"),
            ("x-secret", "hop"),
            ("keep-alive", "timeout=5"),
            ("transfer-encoding", "chunked"),
            ("authorization", "Bearer theirs"),
            ("proxy-authorization", "Basic x"),
            ("delegation_evidence", "e"),
            ("delegationevidence", "e"),
            ("delegation-evidence", "e"),
            ("service_consumer_assertion", "a"),
            ("service.consumer.assertion", "a"),
            ("accept", "application/json"),
            ("x-trace", "1"),
            ("x-trace", "2"),
        ] {
            from.append(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_static(value),
            );
        }
        let kept = forwarded_headers(&from);
        let names: Vec<&str> = kept.keys().map(|n| n.as_str()).collect();
        assert_eq!(names, ["accept", "x-trace"]);
        assert_eq!(kept.get_all("x-trace").iter().count(), 2);
    }

    #[test]
    fn a_scheme_header_is_one_value_under_any_of_its_spellings() {
        let header = crate::scheme::vocabulary::EVIDENCE_HEADER;
        let mut headers = HeaderMap::new();
        assert_eq!(one_of(&headers, header), Ok(None));
        headers.insert("delegationevidence", HeaderValue::from_static(" e "));
        assert_eq!(one_of(&headers, header), Ok(Some("e".into())));
        headers.insert("delegation-evidence", HeaderValue::from_static("f"));
        assert_eq!(one_of(&headers, header), Err(Refusal::Repeated { header }));
    }
}
