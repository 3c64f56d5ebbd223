//! The identity provider people sign in at, as we call it: our request object, signed and encrypted
//! to the certificate in its party record; the code redeemed at its token endpoint with our client
//! assertion; its tokens verified, both signed by it and issued to us: the id_token with our nonce
//! and about a person (never a party of the scheme), the userinfo token about that same person.
//! What it answers is never quoted in an error: its answers carry codes and tokens.

use super::scheme_owner::TrustStore;
use super::trust::{Trust, TrustError, VerifyError};
use super::{PeerClient, PeerError};
use crate::config::model::LoginSettings;
use crate::scheme::assertion::ASSERTION_TYPE;
use crate::scheme::jwe::{encrypt_to_certificate, JweError};
use crate::scheme::jwt::{
    certificate_from_base64, decode, AlgorithmPolicy, DecodedJwt, JwtError, SigningError,
    ASSERTION_LIFETIME,
};
use crate::scheme::openid::{self, check_id_token, check_issued_to, Flow, IssuedTokenError};
use crate::scheme::party::PartyId;
use crate::scheme::trust::SignerError;
use crate::scheme::vocabulary::member;
use crate::scheme::Timestamp;
use reqwest::StatusCode;
use serde::de::DeserializeOwned;
use serde_json::{json, Map, Value};
use std::time::Duration;

/// Why the identity provider cannot be asked, or gave no usable answer: the person tries later.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderFailure {
    #[error("{0} is not in the scheme owner's register")]
    NotRegistered(PartyId),
    #[error("the party record of {0} has no certificate")]
    NoCertificate(PartyId),
    #[error("the request object cannot be encrypted to it: {0}")]
    Encryption(JweError),
    #[error(transparent)]
    Call(#[from] PeerError),
    #[error("{url} answered {status}")]
    Status { url: String, status: StatusCode },
}

/// Why the identity provider gave no tokens for our code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodeRefusal {
    /// Refused, with its OAuth 2.0 error.
    #[error("{error}: {description}")]
    Refused { error: String, description: String },
    #[error("the token answer has no {0}")]
    Missing(&'static str),
}

/// Why a token of the identity provider (its id_token or userinfo token) is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenRefusal {
    #[error(transparent)]
    Malformed(#[from] JwtError),
    #[error("not signed by a trusted {provider}: {error}")]
    Untrusted {
        provider: PartyId,
        error: SignerError,
    },
    #[error(transparent)]
    NotForUs(#[from] IssuedTokenError),
    #[error("its sub {0} is a party of the scheme, not a person")]
    PartyAsPerson(String),
}

/// Why the userinfo answer is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UserinfoRefusal {
    #[error("{url} answered {status}")]
    Status { url: String, status: StatusCode },
    #[error("the answer has no {0}")]
    NoToken(&'static str),
    #[error("the answer holds {found} where {expected} was asked: the identity provider speaks another version of the scheme than it is configured for")]
    OtherVersion {
        found: &'static str,
        expected: &'static str,
    },
    #[error(transparent)]
    Token(#[from] TokenRefusal),
}

/// Why a sign-in at the identity provider went no further.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentityProviderError {
    #[error(transparent)]
    Unavailable(#[from] ProviderFailure),
    #[error(transparent)]
    CodeRefused(#[from] CodeRefusal),
    #[error(transparent)]
    IdToken(TokenRefusal),
    #[error(transparent)]
    Userinfo(#[from] UserinfoRefusal),
    /// We could not sign our request object or client assertion.
    #[error(transparent)]
    Signing(#[from] SigningError),
    #[error(transparent)]
    SchemeOwner(#[from] TrustError),
}

/// What the token endpoint gave for a code: the person its id_token names, and the access token
/// for their userinfo.
pub struct Redeemed {
    pub sub: String,
    pub access_token: String,
}

/// Signs people in at one identity provider, as our identity.
pub struct IdentityProviderClient {
    peer: PeerClient,
    party: PartyId,
    our_id: PartyId,
    authorize_url: String,
    token_url: String,
    userinfo_url: String,
    flow: Flow,
    redirect_uri: String,
    algorithms: AlgorithmPolicy,
    leeway_secs: f64,
    timeout: Duration,
}

impl IdentityProviderClient {
    /// The provider `settings` name, at their URL, with the endpoints of their scheme version,
    /// which sends people back to `redirect_uri`.
    pub fn new(
        peer: PeerClient,
        settings: &LoginSettings,
        redirect_uri: String,
        algorithms: AlgorithmPolicy,
        leeway: Duration,
        timeout: Duration,
    ) -> Self {
        let flow = Flow::of(settings.scheme_version);
        let at = |path: &str| format!("{}{path}", settings.url.trim_end_matches('/'));
        IdentityProviderClient {
            our_id: peer.identity().party_id().clone(),
            peer,
            party: settings.identity_provider.clone(),
            authorize_url: at(flow.authorize),
            token_url: at(flow.token),
            userinfo_url: at(flow.userinfo),
            flow,
            redirect_uri,
            algorithms,
            leeway_secs: leeway.as_secs_f64(),
            timeout,
        }
    }

    /// Where the browser takes the request object.
    pub fn authorize_url(&self) -> &str {
        &self.authorize_url
    }

    /// The request object of a sign-in for `scope` with `state` and `nonce`, signed by us and
    /// encrypted to the certificate in the provider's party record.
    pub async fn request_object(
        &self,
        scope: &str,
        state: &str,
        nonce: &str,
        trust: &TrustStore,
        now: Timestamp,
    ) -> Result<String, IdentityProviderError> {
        let record = trust
            .party(&self.party)
            .await?
            .ok_or_else(|| ProviderFailure::NotRegistered(self.party.clone()))?;
        let certificate = record
            .certificates_at(now.secs())
            .filter_map(|c| c.x5c.as_deref())
            .find_map(certificate_from_base64)
            .ok_or_else(|| ProviderFailure::NoCertificate(self.party.clone()))?;
        let claims = json!({
            "response_type": openid::CODE_RESPONSE,
            "client_id": self.our_id.as_str(),
            "scope": scope,
            "redirect_uri": self.redirect_uri,
            "state": state,
            "nonce": nonce,
        });
        let signed = self.peer.identity().sign_token(
            self.our_id.as_str(),
            Some(self.party.as_str()),
            &claims,
            now,
            ASSERTION_LIFETIME,
        )?;
        Ok(encrypt_to_certificate(&certificate, &signed).map_err(ProviderFailure::Encryption)?)
    }

    /// `code` redeemed at the token endpoint; the person its id_token names, verified: signed by
    /// the provider, issued to us with `nonce`, and no party of the scheme.
    pub async fn redeem(
        &self,
        code: &str,
        nonce: &str,
        trust: &TrustStore,
        now: Timestamp,
    ) -> Result<Redeemed, IdentityProviderError> {
        let tokens = self.exchange(code, now).await?;
        let id_token = tokens
            .get("id_token")
            .and_then(Value::as_str)
            .ok_or(CodeRefusal::Missing("id_token"))?;
        let refused = IdentityProviderError::IdToken;
        let jwt = self
            .verified(id_token, trust, now)
            .await?
            .map_err(refused)?;
        let sub = check_id_token(
            &jwt,
            self.party.as_str(),
            self.our_id.as_str(),
            nonce,
            self.leeway_secs,
            now,
        )
        .map_err(|e| refused(e.into()))?
        .to_string();
        if let Ok(party) = PartyId::parse(&sub) {
            if trust.party(&party).await?.is_some() {
                return Err(refused(TokenRefusal::PartyAsPerson(sub)));
            }
        }
        let access_token = tokens
            .get("access_token")
            .and_then(Value::as_str)
            .ok_or(CodeRefusal::Missing("access_token"))?;
        Ok(Redeemed {
            sub,
            access_token: access_token.to_string(),
        })
    }

    /// POST the code to the token endpoint with our client assertion.
    async fn exchange(
        &self,
        code: &str,
        now: Timestamp,
    ) -> Result<Map<String, Value>, IdentityProviderError> {
        let assertion = self
            .peer
            .identity()
            .client_assertion(self.party.as_str(), now)?;
        let form = [
            ("grant_type", openid::AUTHORIZATION_CODE),
            ("client_id", self.our_id.as_str()),
            ("client_assertion_type", ASSERTION_TYPE),
            ("client_assertion", assertion.as_str()),
            ("code", code),
            ("redirect_uri", self.redirect_uri.as_str()),
        ];
        let url = &self.token_url;
        let answer = self.send(url, self.peer.http.post(url).form(&form)).await?;
        let status = answer.status();
        let body: Map<String, Value> = read_json(url, answer).await?;
        let member = |name: &str| body.get(name).and_then(Value::as_str);
        match status {
            StatusCode::OK => Ok(body),
            StatusCode::BAD_REQUEST | StatusCode::UNAUTHORIZED => Err(CodeRefusal::Refused {
                error: member("error").unwrap_or("?").to_string(),
                description: member("error_description").unwrap_or_default().to_string(),
            }
            .into()),
            status => Err(ProviderFailure::Status {
                url: url.clone(),
                status,
            }
            .into()),
        }
    }

    /// The person's userinfo token, verified: signed by the provider, issued to us, about `sub`.
    pub async fn userinfo(
        &self,
        access_token: &str,
        sub: &str,
        trust: &TrustStore,
        now: Timestamp,
    ) -> Result<DecodedJwt, IdentityProviderError> {
        let url = &self.userinfo_url;
        let asked = match self.flow.userinfo_by_get {
            true => self.peer.http.get(url),
            false => self.peer.http.post(url),
        };
        let answer = self.send(url, asked.bearer_auth(access_token)).await?;
        if !answer.status().is_success() {
            return Err(UserinfoRefusal::Status {
                url: url.clone(),
                status: answer.status(),
            }
            .into());
        }
        let body: Value = read_json(url, answer).await?;
        let expected = self.flow.userinfo_member;
        let token = match body.get(expected) {
            Some(token) => token.as_str().ok_or(UserinfoRefusal::NoToken(expected))?,
            None => {
                let other = member::counterpart(expected).filter(|o| body.get(*o).is_some());
                return Err(match other {
                    Some(found) => UserinfoRefusal::OtherVersion { found, expected },
                    None => UserinfoRefusal::NoToken(expected),
                }
                .into());
            }
        };
        let refused = |e: TokenRefusal| IdentityProviderError::Userinfo(e.into());
        let jwt = self.verified(token, trust, now).await?.map_err(refused)?;
        let found = check_issued_to(
            &jwt,
            self.party.as_str(),
            self.our_id.as_str(),
            self.leeway_secs,
            now,
        )
        .map_err(|e| refused(e.into()))?;
        if found != sub {
            return Err(refused(
                IssuedTokenError::Subject {
                    expected: sub.to_string(),
                    found: found.to_string(),
                }
                .into(),
            ));
        }
        Ok(jwt)
    }

    /// `token` decoded, and signed by a trusted certificate of the provider. The outer error: the
    /// scheme owner could not tell whom to trust.
    async fn verified(
        &self,
        token: &str,
        trust: &TrustStore,
        now: Timestamp,
    ) -> Result<Result<DecodedJwt, TokenRefusal>, TrustError> {
        let jwt = match decode(token, self.algorithms) {
            Ok(jwt) => jwt,
            Err(e) => return Ok(Err(e.into())),
        };
        match trust.verify_signer(&jwt, &self.party, now).await {
            Ok(_) => Ok(Ok(jwt)),
            Err(VerifyError::Refused(error)) => Ok(Err(TokenRefusal::Untrusted {
                provider: self.party.clone(),
                error,
            })),
            Err(VerifyError::SchemeOwner(e)) => Err(e),
        }
    }

    async fn send(
        &self,
        url: &str,
        request: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, ProviderFailure> {
        super::traced(request)
            .timeout(self.timeout)
            .send()
            .await
            .map_err(|e| PeerError::from_reqwest(url, e).into())
    }
}

/// The JSON of an answer. What it holds is not quoted when it is not the JSON expected: where it
/// went wrong is enough.
async fn read_json<T: DeserializeOwned>(
    url: &str,
    answer: reqwest::Response,
) -> Result<T, ProviderFailure> {
    let bytes = super::bounded_body(url, answer, super::ANSWER_MAX).await?;
    serde_json::from_slice(&bytes).map_err(|e| {
        PeerError::Garbled {
            url: url.to_string(),
            detail: format!(
                "not the JSON expected (line {}, column {})",
                e.line(),
                e.column()
            ),
        }
        .into()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_answer_that_is_not_the_json_expected_is_not_quoted() {
        let secret = "the-code-and-its-tokens";
        let answer = http::Response::new(format!("\"{secret}\""));
        let failure = read_json::<Map<String, Value>>("https://idp.example/token", answer.into())
            .await
            .unwrap_err();
        assert!(
            matches!(failure, ProviderFailure::Call(PeerError::Garbled { .. })),
            "{failure:?}"
        );
        assert!(!failure.to_string().contains(secret), "{failure}");
    }
}
