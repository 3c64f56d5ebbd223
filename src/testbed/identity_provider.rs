//! The dummy identity provider: a person signs in on its page and consents to the attribute scopes
//! a service provider asks for (authorize, with a request object the service provider signs and
//! encrypts to us); the service provider exchanges the code with its client assertion (token) and
//! reads the person's attributes (userinfo), with delegation evidence about the person when it asks.

use super::config::UserConfig;
use super::lockout::Lockout;
use super::participant::{
    common_routes_but, require, token_answer, ApiError, ApiResult, Participant, SignedByError,
};
use super::registry::mirror;
use crate::html::{escape, page};
use crate::scheme::assertion::{check_assertion, ASSERTION_TYPE};
use crate::scheme::jwe::{is_encrypted, random_value, Decryption, JweError};
use crate::scheme::mask::DelegationRequest;
use crate::scheme::models::TokenResponse;
use crate::scheme::openid::{
    self, attributes_of, check_request_claims, client_of, error_redirect_target, AuthorizeParams,
    AuthorizeRequest, Flow, RequestError,
};
use crate::scheme::party::PartyId;
use crate::scheme::vocabulary::DELEGATION_EVIDENCE_CLAIM;
use crate::scheme::Timestamp;
use axum::extract::{ConnectInfo, RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::any;
use axum::Router;
use moka::sync::Cache;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a person has to sign in.
const LOGIN_TIME: Duration = Duration::from_secs(600);
/// Wrong passwords allowed on one sign-in before it must start again.
const LOGIN_ATTEMPTS: u32 = 5;
/// The lifetime of the access tokens for userinfo.
const ACCESS_LIFETIME: Duration = Duration::from_secs(300);
/// Sign-ins, codes and access tokens held at once (each kind).
const CAPACITY: u64 = 10_000;

/// A sign-in in progress: the checked request, and the wrong passwords so far.
struct Login {
    request: AuthorizeRequest,
    /// Where its form is posted.
    action: &'static str,
    client_name: String,
    failures: AtomicU32,
}

/// What a code, then an access token, stands for.
struct Grant {
    user: UserConfig,
    client_id: String,
    scopes: Vec<String>,
    nonce: String,
    redirect_uri: String,
    auth_time: i64,
    issued: std::time::Instant,
}

pub struct IdentityProvider {
    p: Arc<Participant>,
    /// The endpoints and names of the testbed's version.
    flow: Flow,
    decryption: Decryption,
    users: Vec<UserConfig>,
    logins: Cache<String, Arc<Login>>,
    codes: Cache<String, Arc<Grant>>,
    code_lifetime: Duration,
    tokens: Cache<String, Arc<Grant>>,
    lockout: Lockout,
}

fn bounded<V: Send + Sync + Clone + 'static>(ttl: Duration) -> Cache<String, V> {
    Cache::builder()
        .max_capacity(CAPACITY)
        .time_to_live(ttl)
        .build()
}

pub fn router(
    p: Arc<Participant>,
    key_pem: &str,
    users: Vec<UserConfig>,
    code_lifetime: Duration,
) -> Result<Router, String> {
    let flow = Flow::of(p.shared.register.version());
    let idp = Arc::new(IdentityProvider {
        flow,
        decryption: Decryption::from_pem(key_pem.as_bytes()).map_err(|e| e.to_string())?,
        p: p.clone(),
        users,
        logins: bounded(LOGIN_TIME),
        codes: bounded(code_lifetime),
        code_lifetime,
        tokens: bounded(ACCESS_LIFETIME),
        lockout: Lockout::default(),
    });
    // From 2.0 codes are exchanged at the participant's own /connect/token, beside the client
    // credentials grant.
    let own = Router::new()
        .route(flow.authorize, any(authorize))
        .route(flow.login, any(login))
        .route(flow.token, any(code_or_credentials))
        .route(flow.userinfo, any(userinfo))
        .with_state(idp);
    Ok(common_routes_but(Some(flow.token)).with_state(p).merge(own))
}

/// POST token: a code exchanged (`grant_type=authorization_code`), or the participant's token
/// for client credentials at the same path.
async fn code_or_credentials(
    State(idp): State<Arc<IdentityProvider>>,
    method: Method,
    headers: HeaderMap,
    body: bytes::Bytes,
) -> ApiResult {
    let grant = openid::single_params(&body)
        .ok()
        .and_then(|form| form.get("grant_type").cloned());
    match grant.as_deref() == Some(openid::AUTHORIZATION_CODE) {
        true => token(State(idp), method, body).await,
        false => super::participant::token(State(idp.p.clone()), method, headers, body).await,
    }
}

/// A form's parameters, each given once.
type Form = BTreeMap<String, String>;

fn value(form: &Form, name: &str) -> Option<String> {
    form.get(name).cloned()
}

/// An error page a person reads.
fn error_page(status: StatusCode, error: &str, description: &str) -> Response {
    let body = format!(
        r#"<p class="error" id="error" data-error="{e}">{d}</p><p class="note">Error code: <code>{e}</code>. Go back to the service and start again.</p>"#,
        e = escape(error),
        d = escape(description),
    );
    (status, no_store(), Html(page("Sign-in refused", &body))).into_response()
}

/// Not cached, and never shown inside another site's frame.
fn no_store() -> [(header::HeaderName, HeaderValue); 4] {
    [
        (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        (header::PRAGMA, HeaderValue::from_static("no-cache")),
        (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
        (
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static("frame-ancestors 'none'"),
        ),
    ]
}

/// `uri` with `params` added to its query.
fn with_query(uri: &str, params: &[(&str, &str)]) -> String {
    match url::Url::parse(uri) {
        Ok(mut url) => {
            url.query_pairs_mut().extend_pairs(params);
            url.to_string()
        }
        Err(_) => uri.to_string(),
    }
}

/// Send the browser back to the service provider (303: the next request is a GET).
fn back_to(uri: &str, params: &[(&str, &str)]) -> Response {
    (
        StatusCode::SEE_OTHER,
        [(header::LOCATION, with_query(uri, params))],
        no_store(),
    )
        .into_response()
}

/// OIDC's error redirect.
fn error_redirect(uri: &str, state: &str, error: &str, description: &str) -> Response {
    back_to(
        uri,
        &[
            ("error", error),
            ("error_description", description),
            ("state", state),
        ],
    )
}

impl IdentityProvider {
    /// The person the form's user name and password name (None: a wrong one), or, while the user
    /// name or the client's address waits after wrong passwords, the login page saying until when.
    fn check_password(
        &self,
        form: &Form,
        client: IpAddr,
        login_id: &str,
        login: &Login,
    ) -> Result<Option<&UserConfig>, Box<Response>> {
        let username = value(form, "username").unwrap_or_default();
        let password = value(form, "password").unwrap_or_default();
        let digest = |p: &str| ring::digest::digest(&ring::digest::SHA256, p.as_bytes());
        let right = || {
            self.users.iter().find(|u| {
                u.username == username && digest(&u.password).as_ref() == digest(&password).as_ref()
            })
        };
        self.lockout
            .attempt(&username, client, Instant::now(), right)
            .map_err(|locked| {
                let page = login_page(
                    StatusCode::TOO_MANY_REQUESTS,
                    login_id,
                    login,
                    Some(&locked.message()),
                );
                Box::new((locked.retry_after(), page).into_response())
            })
    }

    /// Check an authorize request up to the login page: the page, or the refusal to answer.
    async fn check_authorize(&self, form: &Form) -> Result<Login, Response> {
        let page = |status, e: RequestError| error_page(status, e.oauth_error(), &e.to_string());
        let params = AuthorizeParams {
            response_type: value(form, "response_type"),
            client_id: value(form, "client_id"),
            scope: value(form, "scope"),
        };
        let client = client_of(&params).map_err(|e| page(StatusCode::BAD_REQUEST, e))?;
        let Some(record) = self.p.shared.register.party(client.as_str()) else {
            return Err(error_page(
                StatusCode::BAD_REQUEST,
                "invalid_client",
                &format!("the client {client} is not a party of the scheme"),
            ));
        };
        let client_name = record.party_name.clone();
        let request = value(form, "request")
            .filter(|r| !r.is_empty())
            .ok_or_else(|| page(StatusCode::BAD_REQUEST, RequestError::MissingRequest))?;
        if !is_encrypted(&request) {
            return Err(error_page(
                StatusCode::BAD_REQUEST,
                "invalid_request_object",
                "the request object must be signed and then encrypted to the identity provider (a JWE); this one is not encrypted",
            ));
        }
        let jws = self.decryption.decrypt(&request).map_err(|e| {
            let why = match e {
                JweError::Compressed | JweError::Algorithm(_) => e.to_string(),
                _ => "it cannot be decrypted with the identity provider's key".into(),
            };
            error_page(
                StatusCode::BAD_REQUEST,
                "invalid_request_object",
                &format!("the request object: {why}"),
            )
        })?;
        let now = Timestamp::now();
        let rules = self.p.shared.assertion_rules(self.p.party_id.as_str());
        let assertion = check_assertion(&jws, Some(&client), &rules, now)
            .map_err(|e| page(StatusCode::BAD_REQUEST, RequestError::Claims(e)))?;
        match self.p.verify_signed_by(&assertion.jwt, &client, now).await {
            Ok(()) => {}
            Err(SignedByError::Refused(e)) => {
                return Err(error_page(
                    StatusCode::BAD_REQUEST,
                    "invalid_request_object",
                    &format!("the request object is not signed by a trusted {client}: {e}"),
                ))
            }
            Err(SignedByError::Unavailable(e)) => {
                return Err(error_page(e.status, e.error, &e.description))
            }
        }
        let until = assertion.exp + rules.leeway_secs;
        if !crate::scheme::assertion::JtiStore::remember(
            &self.p.jti,
            client.as_str(),
            &assertion.jti,
            until,
            now,
        ) {
            return Err(error_page(
                StatusCode::BAD_REQUEST,
                "invalid_request_object",
                "the request object was used before",
            ));
        }
        match check_request_claims(&assertion.jwt, &client, &params) {
            Ok(request) => Ok(Login {
                request,
                client_name,
                action: self.flow.login,
                failures: AtomicU32::new(0),
            }),
            Err(e) => match error_redirect_target(&assertion.jwt) {
                Some((uri, state)) if e.redirectable() => Err(error_redirect(
                    &uri,
                    &state,
                    e.oauth_error(),
                    &e.to_string(),
                )),
                _ => Err(page(StatusCode::BAD_REQUEST, e)),
            },
        }
    }
}

/// The sign-in and consent form.
fn login_page(
    status: StatusCode,
    login_id: &str,
    login: &Login,
    problem: Option<&str>,
) -> Response {
    let request = &login.request;
    let scopes: String = request
        .attribute_scopes
        .iter()
        .map(|s| {
            let names = attributes_of(s).unwrap_or_default().join(", ").replace('_', " ");
            format!(
                r#"<label><input type="checkbox" name="scope" value="{s}" checked> <span><b>{s}</b>: {names}</span></label>"#,
                s = escape(s),
                names = escape(&names),
            )
        })
        .collect();
    let problem = problem
        .map(|p| format!(r#"<p class="error" id="error">{}</p>"#, escape(p)))
        .unwrap_or_default();
    let body = format!(
        r#"{problem}<p><b>{name}</b> (<code>{client}</code>) asks you to sign in and to share:</p>
<form method="post" action="{action}">
<input type="hidden" name="login_id" value="{login_id}">
<fieldset><legend>Consent</legend>{scopes}</fieldset>
<label for="username">User name</label><input type="text" id="username" name="username" autocomplete="username" required>
<label for="password">Password</label><input type="password" id="password" name="password" autocomplete="current-password" required>
<button type="submit" id="allow" name="decision" value="allow">Sign in and share</button><button type="submit" id="deny" class="secondary" name="decision" value="deny" formnovalidate>Cancel</button>
</form>
<p class="note">Testbed identity provider: test people only.</p>"#,
        name = escape(&login.client_name),
        client = escape(request.client_id.as_str()),
        action = login.action,
        login_id = escape(login_id),
    );
    (status, no_store(), Html(page("Sign in", &body))).into_response()
}

/// GET or POST authorize: the checked request's login page, or its refusal.
async fn authorize(
    State(idp): State<Arc<IdentityProvider>>,
    method: Method,
    RawQuery(query): RawQuery,
    body: bytes::Bytes,
) -> Response {
    let input = match method {
        Method::GET => query.unwrap_or_default().into_bytes(),
        Method::POST => body.to_vec(),
        _ => return ApiError::method_not_allowed(&Method::POST).into_response(),
    };
    let form = match openid::single_params(&input) {
        Ok(form) => form,
        Err(e) => return error_page(StatusCode::BAD_REQUEST, "invalid_request", &e),
    };
    match idp.check_authorize(&form).await {
        Ok(login) => {
            let login_id = random_value();
            let login = Arc::new(login);
            idp.logins.insert(login_id.clone(), login.clone());
            login_page(StatusCode::OK, &login_id, &login, None)
        }
        Err(refusal) => refusal,
    }
}

/// POST login: the person's answer on the login page.
async fn login(
    State(idp): State<Arc<IdentityProvider>>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    method: Method,
    body: bytes::Bytes,
) -> Response {
    if method != Method::POST {
        return ApiError::method_not_allowed(&Method::POST).into_response();
    }
    let mut consented = Vec::new();
    let mut form = Form::new();
    for (k, v) in url::form_urlencoded::parse(&body) {
        if k == "scope" {
            consented.push(v.to_string());
        } else {
            form.insert(k.to_string(), v.to_string());
        }
    }
    let login_id = value(&form, "login_id").unwrap_or_default();
    let Some(login) = idp.logins.get(&login_id) else {
        return error_page(
            StatusCode::BAD_REQUEST,
            "login_expired",
            "this sign-in expired or is finished",
        );
    };
    let request = &login.request;
    if value(&form, "decision").as_deref() != Some("allow") {
        idp.logins.invalidate(&login_id);
        return error_redirect(
            &request.redirect_uri,
            &request.state,
            "access_denied",
            "the person cancelled the sign-in",
        );
    }
    let user = match idp.check_password(&form, client.ip(), &login_id, &login) {
        Ok(user) => user,
        Err(refusal) => return *refusal,
    };
    let Some(user) = user else {
        let failures = login.failures.fetch_add(1, Ordering::Relaxed) + 1;
        if failures >= LOGIN_ATTEMPTS {
            idp.logins.invalidate(&login_id);
            return error_redirect(
                &request.redirect_uri,
                &request.state,
                "access_denied",
                "too many wrong passwords",
            );
        }
        return login_page(
            StatusCode::UNAUTHORIZED,
            &login_id,
            &login,
            Some("Wrong user name or password."),
        );
    };
    let scopes: Vec<String> = request
        .attribute_scopes
        .iter()
        .filter(|s| consented.contains(s))
        .cloned()
        .collect();
    if idp.logins.remove(&login_id).is_none() {
        return error_page(
            StatusCode::BAD_REQUEST,
            "login_expired",
            "this sign-in expired or is finished",
        );
    }
    if scopes.is_empty() {
        return error_redirect(
            &request.redirect_uri,
            &request.state,
            "access_denied",
            "the person shared none of the attributes asked for",
        );
    }
    let code = random_value();
    idp.codes.insert(
        code.clone(),
        Arc::new(Grant {
            user: user.clone(),
            client_id: request.client_id.to_string(),
            scopes,
            nonce: request.nonce.clone(),
            redirect_uri: request.redirect_uri.clone(),
            auth_time: Timestamp::now().secs(),
            issued: std::time::Instant::now(),
        }),
    );
    back_to(
        &request.redirect_uri,
        &[("code", &code), ("state", &request.state)],
    )
}

fn invalid_grant(description: &str) -> ApiError {
    ApiError::bad_request("invalid_grant", description)
}

/// POST token: an authorization code (once, while fresh) for the client it was issued to, with
/// that client's assertion: an access token for userinfo and a signed id_token. Only that client
/// uses the code up.
async fn token(
    State(idp): State<Arc<IdentityProvider>>,
    method: Method,
    body: bytes::Bytes,
) -> ApiResult {
    require(&method, Method::POST)?;
    let form =
        openid::single_params(&body).map_err(|e| ApiError::bad_request("invalid_request", e))?;
    let field = |name: &'static str| {
        value(&form, name)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| ApiError::bad_request("invalid_request", format!("{name} is missing")))
    };
    if field("grant_type")? != openid::AUTHORIZATION_CODE {
        return Err(ApiError::bad_request(
            "unsupported_grant_type",
            "grant_type must be authorization_code",
        ));
    }
    let client_id = PartyId::parse(&field("client_id")?)
        .map_err(|e| ApiError::bad_request("invalid_client", e.to_string()))?;
    if field("client_assertion_type")? != ASSERTION_TYPE {
        return Err(ApiError::bad_request(
            "invalid_request",
            format!("client_assertion_type must be {ASSERTION_TYPE}"),
        ));
    }
    let code = field("code")?;
    let now = Timestamp::now();
    idp.p
        .verify_client_assertion(&field("client_assertion")?, &client_id, now)
        .await?;
    let unknown = || invalid_grant("the code is unknown, expired or used already");
    let issued_to = idp.codes.get(&code).ok_or_else(unknown)?.client_id.clone();
    if issued_to != client_id.as_str() {
        // Refused, and left to its own client: another party cannot spoil the person's sign-in.
        return Err(invalid_grant("the code was issued to another client"));
    }
    let grant = idp.codes.remove(&code).ok_or_else(unknown)?;
    if grant.issued.elapsed() >= idp.code_lifetime {
        return Err(invalid_grant("the code expired"));
    }
    if field("redirect_uri")? != grant.redirect_uri {
        return Err(invalid_grant(
            "redirect_uri is not the one of the authorize request",
        ));
    }
    let id_token = idp
        .p
        .identity
        .sign_token(
            &grant.user.sub,
            Some(client_id.as_str()),
            &json!({"nonce": grant.nonce, "auth_time": grant.auth_time, "acr": "urn:ishare:testbed:password"}),
            now,
            super::participant::RESPONSE_TOKEN_LIFETIME,
        )
        .map_err(ApiError::from)?;
    let access_token = random_value();
    idp.tokens.insert(access_token.clone(), grant);
    let mut answer = serde_json::to_value(TokenResponse::bearer(
        access_token,
        ACCESS_LIFETIME.as_secs(),
    ))
    .unwrap_or_default();
    answer["id_token"] = Value::String(id_token);
    Ok((no_store(), axum::Json(answer)).into_response())
}

/// GET or POST userinfo (from 2.0 GET only): the consented attributes of the person, and with a
/// `request` (1.9: a JWT of the client holding a delegation mask about the person) their
/// delegation evidence.
async fn userinfo(
    State(idp): State<Arc<IdentityProvider>>,
    method: Method,
    headers: HeaderMap,
    body: bytes::Bytes,
) -> ApiResult {
    match idp.flow.userinfo_by_get {
        true => require(&method, Method::GET)?,
        false if method != Method::GET && method != Method::POST => {
            return Err(ApiError::method_not_allowed(&Method::POST));
        }
        false => {}
    }
    let invalid = || ApiError::unauthorized(crate::access_token::AccessTokenError::Invalid);
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let bearer = crate::access_token::bearer_token(authorization).map_err(|_| invalid())?;
    let grant = idp.tokens.get(bearer).ok_or_else(invalid)?;
    let now = Timestamp::now();
    let mut claims = Map::new();
    for scope in &grant.scopes {
        for name in attributes_of(scope).unwrap_or_default() {
            if let Some(v) = grant.user.attributes.get(*name) {
                claims.insert(name.to_string(), Value::String(v.clone()));
            }
        }
    }
    let form =
        openid::single_params(&body).map_err(|e| ApiError::bad_request("invalid_request", e))?;
    if let Some(request) = value(&form, "request") {
        let evidence = idp.delegation(&grant, &request, now).await?;
        claims.insert(
            openid::DELEGATION_TOKEN.to_string(),
            Value::String(evidence),
        );
    }
    let token = idp
        .p
        .identity
        .sign_token(
            &grant.user.sub,
            Some(&grant.client_id),
            &claims,
            now,
            super::participant::RESPONSE_TOKEN_LIFETIME,
        )
        .map_err(ApiError::from)?;
    Ok(token_answer(idp.flow.userinfo_member, token))
}

impl IdentityProvider {
    /// The delegation evidence about the person a client asks for: `request` is a JWT of the
    /// client (the claims of a client assertion to us, and `delegationRequest`, whose access subject
    /// is the person); the answer mirrors it from the testbed's policies, signed by us.
    async fn delegation(
        &self,
        grant: &Grant,
        request: &str,
        now: Timestamp,
    ) -> Result<String, ApiError> {
        let client = PartyId::parse(&grant.client_id)
            .map_err(|e| ApiError::bad_request("invalid_request", e.to_string()))?;
        let assertion = self
            .p
            .verify_client_assertion(request, &client, now)
            .await?;
        let mask: DelegationRequest = assertion
            .jwt
            .claims
            .get("delegationRequest")
            .cloned()
            .ok_or_else(|| {
                ApiError::bad_request("invalid_request", "request has no delegationRequest")
            })
            .and_then(|m| {
                serde_json::from_value(m).map_err(|e| {
                    ApiError::bad_request("invalid_request", format!("delegationRequest: {e}"))
                })
            })?;
        if mask.target.access_subject != grant.user.sub {
            return Err(ApiError::bad_request(
                "invalid_request",
                format!(
                    "the mask's accessSubject must be the signed-in person ({})",
                    grant.user.sub
                ),
            ));
        }
        let stored =
            self.p
                .shared
                .policies
                .matching(&mask.policy_issuer, &grant.user.sub, now.secs());
        let evidence = mirror(&mask, &stored, now.secs());
        self.p
            .identity
            .sign_token(
                &grant.user.sub,
                Some(&grant.client_id),
                &json!({ DELEGATION_EVIDENCE_CLAIM: evidence }),
                now,
                super::participant::RESPONSE_TOKEN_LIFETIME,
            )
            .map_err(ApiError::from)
    }
}
