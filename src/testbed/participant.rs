//! What every dummy participant has and does: its identity, its access tokens, and the endpoints
//! all roles share (capabilities, token, me) and their routes, with the JSON error answers.

use super::config::Serve;
use super::party_register::Register;
use super::policy_store::PolicyStore;
use crate::access_token::{AccessClaims, AccessTokenError, AccessTokens};
use crate::peers::trust::{Trust, VerifyError};
use crate::scheme::assertion::{
    check_assertion, jti_retention, AssertionError, AssertionRules, ClientAssertion, JtiStore,
    MemoryJtiStore, TokenRequest,
};
use crate::scheme::capabilities::{CapabilitiesInfo, Feature};
use crate::scheme::evidence_token::Readers;
use crate::scheme::jwt::{AlgorithmPolicy, DecodedJwt, SigningError, SigningIdentity};
use crate::scheme::models::TokenResponse;
use crate::scheme::openid;
use crate::scheme::party::PartyId;
use crate::scheme::vocabulary::{feature, member, Role, DELEGATION_PATH};
use crate::scheme::Timestamp;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::Router;
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The lifetime of signed response tokens, as the scheme's examples use.
pub const RESPONSE_TOKEN_LIFETIME: i64 = 30;
/// The lifetime of the access tokens the testbed issues.
pub const ACCESS_TOKEN_LIFETIME: u64 = 3600;

/// What all participants share: the register of the scheme owner, every party's signing identity
/// (the testbed holds them all), and the stored policies.
pub struct Shared {
    pub scheme: String,
    /// The scheme's data spaces (3.0).
    pub dataspaces: Vec<super::config::DataspaceConfig>,
    pub register: Register,
    pub identities: BTreeMap<String, SigningIdentity>,
    pub policies: PolicyStore,
    pub leeway_secs: f64,
    pub algorithms: AlgorithmPolicy,
    /// Every participant speaks the testbed's version: RS384 and RS512 from 3.0's.
    pub signers: Arc<Readers>,
}

impl Shared {
    /// How client assertions addressed to `audience` are checked.
    pub fn assertion_rules(&self, audience: &str) -> AssertionRules {
        AssertionRules {
            audience: audience.to_string(),
            leeway_secs: self.leeway_secs,
            algorithms: self.algorithms,
            signers: Some(self.signers.clone()),
        }
    }
}

pub struct Participant {
    pub party_id: PartyId,
    pub name: String,
    pub serve: Serve,
    /// A registry as strict as Keyrock (`PartyConfig::strict`).
    pub strict: bool,
    /// A registry that answers as Keyrock does (`PartyConfig::keyrock`): the tokens it knows.
    pub keyrock: Option<super::keyrock_ways::Known>,
    pub base_url: String,
    pub identity: SigningIdentity,
    pub tokens: AccessTokens,
    pub jti: MemoryJtiStore,
    pub shared: Arc<Shared>,
    /// Requests received, for tests that count calls (GET /testing/stats).
    pub stats: Stats,
}

#[derive(Default)]
pub struct Stats {
    pub token_requests: std::sync::atomic::AtomicU64,
    pub delegation_requests: std::sync::atomic::AtomicU64,
}

/// Why a signed token is not accepted from its signer: refused, or the register could not tell.
pub enum SignedByError {
    Refused(AssertionError),
    Unavailable(ApiError),
}

/// An error answer: a status and `{error, error_description}`.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub error: &'static str,
    pub description: String,
    /// The method to name in `Allow` on a 405.
    pub allow: Option<Method>,
}

impl ApiError {
    pub fn new(status: StatusCode, error: &'static str, description: impl Into<String>) -> Self {
        ApiError {
            status,
            error,
            description: description.into(),
            allow: None,
        }
    }

    pub fn bad_request(error: &'static str, description: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, error, description)
    }

    pub fn unauthorized(e: AccessTokenError) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, e.code(), e.to_string())
    }

    pub fn method_not_allowed(allowed: &Method) -> Self {
        ApiError {
            allow: Some(allowed.clone()),
            ..Self::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                format!("this endpoint answers {allowed} only"),
            )
        }
    }

    pub fn not_found(description: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", description)
    }
}

impl From<SigningError> for ApiError {
    fn from(e: SigningError) -> Self {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "signing_failed",
            e.to_string(),
        )
    }
}

impl From<AssertionError> for ApiError {
    fn from(e: AssertionError) -> Self {
        ApiError::bad_request(e.oauth_error(), format!("{e} ({})", e.code()))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut resp = (
            self.status,
            axum::Json(json!({"error": self.error, "error_description": self.description})),
        )
            .into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            resp.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer error=\"invalid_token\""),
            );
        }
        if let Some(Ok(allowed)) = self.allow.map(|m| HeaderValue::from_str(m.as_str())) {
            resp.headers_mut().insert(header::ALLOW, allowed);
        }
        resp
    }
}

pub type ApiResult = Result<Response, ApiError>;

/// `{member: token}` with status 200.
pub fn token_answer(member: &str, token: String) -> Response {
    let mut body = serde_json::Map::new();
    body.insert(member.to_string(), Value::String(token));
    axum::Json(Value::Object(body)).into_response()
}

pub fn require(method: &Method, allowed: Method) -> Result<(), ApiError> {
    if *method == allowed {
        Ok(())
    } else {
        Err(ApiError::method_not_allowed(&allowed))
    }
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

impl Participant {
    pub fn scheme(&self) -> &str {
        &self.shared.scheme
    }

    /// The bearer token of a request, validated: 401 when missing or invalid.
    pub fn authenticate(
        &self,
        headers: &HeaderMap,
    ) -> Result<std::sync::Arc<AccessClaims>, ApiError> {
        self.tokens
            .validate_header(header_str(headers, header::AUTHORIZATION), Timestamp::now())
            .map_err(ApiError::unauthorized)
    }

    /// The caller of an endpoint open to anyone: `None` without an Authorization header, the
    /// validated token holder with one, 401 when that token is not valid.
    pub fn optional_caller(
        &self,
        headers: &HeaderMap,
    ) -> Result<Option<std::sync::Arc<AccessClaims>>, ApiError> {
        match header_str(headers, header::AUTHORIZATION) {
            None => Ok(None),
            Some(_) => self.authenticate(headers).map(Some),
        }
    }

    /// Sign a response payload for `aud` (none for anonymous callers).
    pub fn sign<T: Serialize>(&self, aud: Option<&str>, payload: &T) -> Result<String, ApiError> {
        self.identity
            .sign_token(
                self.party_id.as_str(),
                aud,
                payload,
                Timestamp::now(),
                RESPONSE_TOKEN_LIFETIME,
            )
            .map_err(ApiError::from)
    }

    /// A client assertion of `client_id` to us: its claims, signer and chain, and its jti never
    /// seen before.
    pub async fn verify_client_assertion(
        &self,
        token: &str,
        client_id: &PartyId,
        now: Timestamp,
    ) -> Result<ClientAssertion, ApiError> {
        let rules = self.shared.assertion_rules(self.party_id.as_str());
        let assertion = check_assertion(token, Some(client_id), &rules, now)?;
        self.verify_signed_by(&assertion.jwt, &assertion.client_id, now)
            .await
            .map_err(|e| match e {
                SignedByError::Refused(e) => ApiError::from(e),
                SignedByError::Unavailable(e) => e,
            })?;
        let until = jti_retention(&assertion, &rules, now);
        if !self
            .jti
            .remember(assertion.client_id.as_str(), &assertion.jti, until, now)
        {
            return Err(AssertionError::Replayed.into());
        }
        Ok(assertion)
    }

    /// The chain of `jwt` is trusted and its leaf is bound to `signer`, an active party.
    pub async fn verify_signed_by(
        &self,
        jwt: &DecodedJwt,
        signer: &PartyId,
        now: Timestamp,
    ) -> Result<(), SignedByError> {
        match self.shared.register.verify_signer(jwt, signer, now).await {
            Ok(_) => Ok(()),
            Err(VerifyError::Refused(e)) => Err(SignedByError::Refused(AssertionError::from(e))),
            Err(VerifyError::SchemeOwner(e)) => Err(SignedByError::Unavailable(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "temporarily_unavailable",
                e.to_string(),
            ))),
        }
    }

    fn role(&self) -> Role {
        match self.serve {
            Serve::SchemeOwner => Role::SchemeOwner,
            Serve::AuthorisationRegistry => Role::AuthorisationRegistry,
            Serve::EntitledParty => Role::EntitledParty,
            Serve::ServiceProvider => Role::ServiceProvider,
            Serve::IdentityProvider => Role::IdentityProvider,
        }
    }

    fn feature(&self, id: &str, name: &str, description: &str, path: &str) -> Feature {
        Feature::at(id, name, description, &self.base_url, path, true)
    }

    /// The capabilities of this participant: public features always, restricted ones to token holders.
    pub fn capabilities(&self, with_restricted: bool) -> CapabilitiesInfo {
        let mut restricted = vec![self.feature(
            feature::ME,
            "me",
            "Returns the client information of the caller",
            "/me",
        )];
        match self.serve {
            Serve::SchemeOwner => restricted.extend([
                self.feature(
                    "2C3D8E5A-0F6B-4D7E-9A1C-3B5D7F9E1A01",
                    "parties",
                    "Searches the parties of the scheme",
                    "/parties",
                ),
                self.feature(
                    "2C3D8E5A-0F6B-4D7E-9A1C-3B5D7F9E1A02",
                    "party",
                    "Retrieves one party",
                    "/parties/{party_id}",
                ),
                self.feature(
                    "2C3D8E5A-0F6B-4D7E-9A1C-3B5D7F9E1A03",
                    "trusted list",
                    "Retrieves the trusted certificate authorities",
                    "/trusted_list",
                ),
                self.feature(
                    "2C3D8E5A-0F6B-4D7E-9A1C-3B5D7F9E1A04",
                    "certificate validation",
                    "Validates a certificate",
                    "/certificate_validation",
                ),
            ]),
            Serve::AuthorisationRegistry | Serve::EntitledParty => restricted.extend([
                self.feature(
                    "3D4E9F6B-1A7C-4E8F-8B2D-4C6E8A0F2B01",
                    "delegation",
                    "Answers a delegation mask with delegation evidence",
                    match self.keyrock {
                        Some(_) => super::keyrock_ways::DELEGATION_PATH,
                        None => DELEGATION_PATH,
                    },
                ),
                self.feature(
                    "3D4E9F6B-1A7C-4E8F-8B2D-4C6E8A0F2B02",
                    "policy",
                    "Adds a policy issued by the caller",
                    match self.keyrock {
                        Some(_) => super::keyrock_ways::POLICY_PATH,
                        None => "/policy",
                    },
                ),
            ]),
            Serve::IdentityProvider => {}
            Serve::ServiceProvider => restricted.push(self.feature(
                "05357B1C-A3C2-4B4F-9E1F-6F2D3A1B0C01",
                "boom access",
                "A test service that answers true",
                "/boom_access",
            )),
        }
        let mut info = CapabilitiesInfo::of_party(
            self.scheme(),
            self.party_id.as_str(),
            self.role(),
            &self.base_url,
            with_restricted.then_some(restricted),
        );
        if self.serve == Serve::IdentityProvider {
            let public = info.supported_versions[0].supported_features[0]
                .public
                .get_or_insert_with(Vec::new);
            let flow = openid::Flow::of(self.shared.register.version());
            for (id, name, description, path) in [
                ("4E5FA07C-2B8D-4F9A-9C3E-5D7F9B1C3D01", "authorize", "Authenticates a person and asks their consent (OpenID Connect, signed and encrypted request object)", flow.authorize),
                ("4E5FA07C-2B8D-4F9A-9C3E-5D7F9B1C3D02", "openid token", "Exchanges an authorization code for an access token and an id_token", flow.token),
                ("4E5FA07C-2B8D-4F9A-9C3E-5D7F9B1C3D03", "userinfo", "Returns the consented attributes of the person, and delegation evidence on request", flow.userinfo),
            ] {
                public.push(Feature::at(id, name, description, &self.base_url, path, false));
            }
        }
        info
    }
}

/// The routes every participant serves.
pub fn common_routes() -> Router<Arc<Participant>> {
    common_routes_but(None)
}

/// `common_routes` without the token endpoint at `taken`, which the role serves itself.
pub fn common_routes_but(taken: Option<&str>) -> Router<Arc<Participant>> {
    let token_paths = ["/connect/token", "/oauth2.0/token", "/token"];
    token_paths
        .into_iter()
        .filter(|path| Some(*path) != taken)
        .fold(Router::new(), |router, path| router.route(path, any(token)))
        .route("/capabilities", any(capabilities))
        .route("/me", any(me))
        .route("/testing/stats", axum::routing::get(stats))
        .fallback(not_found)
}

/// GET /capabilities: public features without a token, restricted ones too with a valid token;
/// 401 for a token that is not valid.
pub async fn capabilities(
    State(p): State<Arc<Participant>>,
    method: Method,
    headers: HeaderMap,
) -> ApiResult {
    require(&method, Method::GET)?;
    let caller = p.optional_caller(&headers)?;
    let info = p.capabilities(caller.is_some());
    let aud = caller.as_ref().map(|c| c.sub.as_str());
    let version = p.shared.register.version();
    if version.camel_case() {
        // 3.0's token skeleton requires `aud`: an anonymous answer is addressed to the party
        // itself, as the gateway's is.
        let token = p.sign(
            aud.or(Some(p.party_id.as_str())),
            &info.token_claims(version),
        )?;
        return Ok(token_answer(member::CAPABILITIES_3, token));
    }
    let token = p.sign(aud, &info.token_claims(version))?;
    Ok(token_answer(member::CAPABILITIES, token))
}

/// POST token: the full client-assertion validation, then an access token.
pub async fn token(
    State(p): State<Arc<Participant>>,
    method: Method,
    headers: HeaderMap,
    body: bytes::Bytes,
) -> ApiResult {
    require(&method, Method::POST)?;
    p.stats
        .token_requests
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let request = TokenRequest::from_body(header_str(&headers, header::CONTENT_TYPE), &body)
        .map_err(|e| ApiError::bad_request("invalid_request", e.to_string()))?;
    let checked = request.check(p.scheme())?;
    let now = Timestamp::now();
    let assertion = p
        .verify_client_assertion(&checked.assertion, &checked.client_id, now)
        .await?;
    let access_token = p.tokens.issue(&assertion.client_id, &checked.scopes, now);
    if let Some(keyrock) = &p.keyrock {
        keyrock.issued(&access_token);
    }
    let mut resp = axum::Json(TokenResponse::bearer(
        access_token,
        p.tokens.lifetime_secs(),
    ))
    .into_response();
    let h = resp.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
    Ok(resp)
}

/// GET /me: the caller's client information.
pub async fn me(
    State(p): State<Arc<Participant>>,
    method: Method,
    headers: HeaderMap,
) -> ApiResult {
    require(&method, Method::GET)?;
    let caller = p.authenticate(&headers)?;
    let record = p.shared.register.party(&caller.sub);
    Ok(axum::Json(json!({
        "client_id": caller.sub,
        "party_name": record.map(|r| r.party_name.clone()),
        "scope": caller.scope,
        "token_issued_at": caller.iat,
        "token_expires_at": caller.exp,
        "served_by": p.party_id.as_str(),
    }))
    .into_response())
}

/// GET /testing/stats (test only): how many token and delegation requests this participant received.
pub async fn stats(State(p): State<Arc<Participant>>) -> Response {
    use std::sync::atomic::Ordering::Relaxed;
    axum::Json(json!({
        "token_requests": p.stats.token_requests.load(Relaxed),
        "delegation_requests": p.stats.delegation_requests.load(Relaxed),
    }))
    .into_response()
}

/// Any path no endpoint claims.
pub async fn not_found() -> Response {
    ApiError::not_found("no such endpoint").into_response()
}
