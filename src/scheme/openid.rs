//! The scheme's flow for people: OpenID Connect authorization code, with a request object that the
//! service provider signs (x5c) and encrypts to the identity provider. Its paths, the attribute
//! scopes and what they grant, and the pure checks of the request object, the id_token and the
//! userinfo token (the time is a parameter).

use super::assertion::AssertionError;
use super::jwt::DecodedJwt;
use super::party::PartyId;
use super::version::SchemeVersion;
use super::Timestamp;
use std::collections::BTreeMap;

pub const AUTHORIZE_PATH: &str = "/openid_connect1.0/authorize";
pub const TOKEN_PATH: &str = "/openid_connect1.0/token";
pub const USERINFO_PATH: &str = "/openid_connect1.0/userinfo";
/// The service provider's redirect receiver.
pub const RETURN_PATH: &str = "/openid_connect1.0/return";

/// The flow's endpoints and names as a version of the scheme has them: 1.9's under
/// `/openid_connect1.0` with userinfo by POST; from 2.0 `/connect/authorize`, `/connect/token`,
/// `/connect/userinfo` by GET and the service provider's `/return`; in 3.0 the userinfo answer's
/// member is `userinfoToken`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flow {
    pub authorize: &'static str,
    /// The identity provider's token endpoint, for codes.
    pub token: &'static str,
    pub userinfo: &'static str,
    /// Userinfo is asked by GET (from 2.0); by POST before, with an optional `request`.
    pub userinfo_by_get: bool,
    /// The member of the userinfo answer.
    pub userinfo_member: &'static str,
    /// The service provider's redirect receiver.
    pub return_path: &'static str,
    /// Where the identity provider's sign-in page posts (3.0 names `/login`, for the
    /// conformance tool).
    pub login: &'static str,
}

impl Flow {
    pub fn of(version: SchemeVersion) -> Flow {
        let member = |v: SchemeVersion| match v.camel_case() {
            true => super::vocabulary::member::USERINFO_3,
            false => USERINFO_TOKEN,
        };
        match version.generic_paths() {
            false => Flow {
                authorize: AUTHORIZE_PATH,
                token: TOKEN_PATH,
                userinfo: USERINFO_PATH,
                userinfo_by_get: false,
                userinfo_member: member(version),
                return_path: RETURN_PATH,
                login: "/openid_connect1.0/login",
            },
            true => Flow {
                authorize: "/connect/authorize",
                token: super::vocabulary::TOKEN_PATH,
                userinfo: "/connect/userinfo",
                userinfo_by_get: true,
                userinfo_member: member(version),
                return_path: "/return",
                login: "/login",
            },
        }
    }
}

pub const OPENID_SCOPE: &str = "openid";
pub const AUTHORIZATION_CODE: &str = "authorization_code";
pub const CODE_RESPONSE: &str = "code";
/// The member of a userinfo answer, and the claim beside the attributes that carries evidence.
pub const USERINFO_TOKEN: &str = super::vocabulary::member::USERINFO;
pub const DELEGATION_TOKEN: &str = "delegation_token";

/// The attribute scopes and the attributes each grants.
pub const ATTRIBUTE_SCOPES: [(&str, &[&str]); 3] = [
    ("profile", &["first_name", "last_name", "gender"]),
    ("company", &["company_id", "company_name"]),
    ("email", &["email"]),
];

/// The attributes an attribute scope grants; None for `openid` and unknown scopes.
pub fn attributes_of(scope: &str) -> Option<&'static [&'static str]> {
    ATTRIBUTE_SCOPES
        .iter()
        .find(|(s, _)| *s == scope)
        .map(|(_, attributes)| *attributes)
}

/// The parameters of a form or query, each given once: a key given twice is refused (which of
/// the two counts would be a guess).
pub fn single_params(input: &[u8]) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for (k, v) in url::form_urlencoded::parse(input) {
        if out.insert(k.to_string(), v.to_string()).is_some() {
            return Err(format!("the parameter {k} is given twice"));
        }
    }
    Ok(out)
}

/// The plain parameters of an authorize request beside `request`.
#[derive(Clone, Debug, Default)]
pub struct AuthorizeParams {
    pub response_type: Option<String>,
    pub client_id: Option<String>,
    pub scope: Option<String>,
}

/// What a request object asks for, once checked.
#[derive(Clone, Debug)]
pub struct AuthorizeRequest {
    pub client_id: PartyId,
    /// The attribute scopes asked for, in the order given (known ones only).
    pub attribute_scopes: Vec<String>,
    pub redirect_uri: String,
    pub state: String,
    pub nonce: String,
}

/// Why an authorize request is refused. Until the request object is trusted its `redirect_uri`
/// cannot be, so those refusals are a page; afterwards OIDC's error redirect carries them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("client_id is missing")]
    MissingClientId,
    #[error("client_id is not a party identifier: {0}")]
    InvalidClientId(String),
    #[error("request (the request object) is missing")]
    MissingRequest,
    #[error("the request object: {0}")]
    Claims(#[from] AssertionError),
    #[error("the request object has no redirect_uri")]
    MissingRedirect,
    #[error("redirect_uri {0:?} must be an https URL (or http on a loopback address) without a fragment")]
    BadRedirect(String),
    #[error("the request object has no state")]
    MissingState,
    #[error("{name} is {plain:?} but {inside:?} in the request object")]
    Mismatch {
        name: &'static str,
        plain: String,
        inside: String,
    },
    #[error("response_type must be code")]
    ResponseType,
    #[error("scope must contain openid")]
    NoOpenid,
    #[error("scope must contain an attribute scope (profile, company or email)")]
    NoAttributeScope,
    #[error("the request object has no nonce")]
    MissingNonce,
}

impl RequestError {
    /// Whether the refusal may be sent to the request's redirect_uri (it was signed by the client).
    pub fn redirectable(&self) -> bool {
        matches!(
            self,
            RequestError::Mismatch { .. }
                | RequestError::ResponseType
                | RequestError::NoOpenid
                | RequestError::NoAttributeScope
                | RequestError::MissingNonce
        )
    }

    /// The OAuth error code.
    pub fn oauth_error(&self) -> &'static str {
        match self {
            RequestError::ResponseType => "unsupported_response_type",
            RequestError::NoOpenid | RequestError::NoAttributeScope => "invalid_scope",
            RequestError::Claims(_) => "invalid_request_object",
            RequestError::MissingClientId | RequestError::InvalidClientId(_) => "invalid_client",
            _ => "invalid_request",
        }
    }
}

fn redirect_allowed(uri: &str) -> bool {
    let Ok(url) = url::Url::parse(uri) else {
        return false;
    };
    let loopback = match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(d)) => d == "localhost",
        None => false,
    };
    url.fragment().is_none()
        && url.username().is_empty()
        && url.password().is_none()
        && (url.scheme() == "https" || (url.scheme() == "http" && loopback))
}

/// The client id of the plain parameters.
pub fn client_of(params: &AuthorizeParams) -> Result<PartyId, RequestError> {
    match params.client_id.as_deref() {
        None | Some("") => Err(RequestError::MissingClientId),
        Some(id) => PartyId::parse(id).map_err(|e| RequestError::InvalidClientId(e.to_string())),
    }
}

/// Where an error may be sent for a request object whose signature checked out: its redirect_uri
/// (when acceptable) and state.
pub fn error_redirect_target(jwt: &DecodedJwt) -> Option<(String, String)> {
    let uri = jwt
        .str_claim("redirect_uri")
        .filter(|u| redirect_allowed(u))?;
    let state = jwt.str_claim("state").filter(|s| !s.is_empty())?;
    Some((uri.to_string(), state.to_string()))
}

/// The request claims of a request object whose client-assertion claims (iss = sub = client, aud =
/// the identity provider, exp = iat + 30, jti) and signature were checked: redirect_uri and state,
/// each plain parameter equal to its value inside, response_type `code`, scope with `openid` and an
/// attribute scope, and a nonce.
pub fn check_request_claims(
    jwt: &DecodedJwt,
    client: &PartyId,
    params: &AuthorizeParams,
) -> Result<AuthorizeRequest, RequestError> {
    let claim = |name: &str| {
        jwt.str_claim(name)
            .filter(|v| !v.is_empty())
            .map(str::to_string)
    };
    let redirect_uri = claim("redirect_uri").ok_or(RequestError::MissingRedirect)?;
    if !redirect_allowed(&redirect_uri) {
        return Err(RequestError::BadRedirect(redirect_uri));
    }
    let state = claim("state").ok_or(RequestError::MissingState)?;
    for (name, plain) in [
        ("response_type", &params.response_type),
        ("client_id", &params.client_id),
        ("scope", &params.scope),
    ] {
        let inside = claim(name).unwrap_or_default();
        let plain = plain.clone().unwrap_or_default();
        if plain != inside {
            return Err(RequestError::Mismatch {
                name,
                plain,
                inside,
            });
        }
    }
    if claim("response_type").as_deref() != Some(CODE_RESPONSE) {
        return Err(RequestError::ResponseType);
    }
    let scope = claim("scope").unwrap_or_default();
    let scopes: Vec<&str> = scope.split_whitespace().collect();
    if !scopes.contains(&OPENID_SCOPE) {
        return Err(RequestError::NoOpenid);
    }
    let mut attribute_scopes: Vec<String> = Vec::new();
    for s in scopes.iter().filter(|s| attributes_of(s).is_some()) {
        if !attribute_scopes.iter().any(|a| a == s) {
            attribute_scopes.push(s.to_string());
        }
    }
    if attribute_scopes.is_empty() {
        return Err(RequestError::NoAttributeScope);
    }
    let nonce = claim("nonce").ok_or(RequestError::MissingNonce)?;
    Ok(AuthorizeRequest {
        client_id: client.clone(),
        attribute_scopes,
        redirect_uri,
        state,
        nonce,
    })
}

/// Why an id_token or a userinfo token is not one for us.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IssuedTokenError {
    #[error("iss is {found:?}, not the identity provider {expected}")]
    Issuer { expected: String, found: String },
    #[error("aud does not name us ({0}): the token was issued to someone else")]
    Audience(String),
    #[error("it has no sub")]
    MissingSub,
    #[error("it is about {found}, not the person of the id_token")]
    Subject { expected: String, found: String },
    #[error("it has no {0}")]
    MissingTime(&'static str),
    #[error("it expired")]
    Expired,
    #[error("it is issued in the future")]
    IssuedInFuture,
    #[error("its nonce is not the one of our request")]
    Nonce,
}

/// iss, aud, sub and the times of a token the identity provider issued to `audience`; its sub.
pub fn check_issued_to<'a>(
    jwt: &'a DecodedJwt,
    issuer: &str,
    audience: &str,
    leeway_secs: f64,
    now: Timestamp,
) -> Result<&'a str, IssuedTokenError> {
    let iss = jwt.str_claim("iss").unwrap_or_default();
    if iss != issuer {
        return Err(IssuedTokenError::Issuer {
            expected: issuer.to_string(),
            found: iss.to_string(),
        });
    }
    if jwt.audience_includes(audience) != Some(true) {
        return Err(IssuedTokenError::Audience(audience.to_string()));
    }
    let sub = jwt
        .str_claim("sub")
        .filter(|s| !s.is_empty())
        .ok_or(IssuedTokenError::MissingSub)?;
    let iat = jwt
        .time_claim("iat")
        .ok_or(IssuedTokenError::MissingTime("iat"))?;
    let exp = jwt
        .time_claim("exp")
        .ok_or(IssuedTokenError::MissingTime("exp"))?;
    let now = now.as_f64();
    if iat > now + leeway_secs {
        return Err(IssuedTokenError::IssuedInFuture);
    }
    if now > exp + leeway_secs {
        return Err(IssuedTokenError::Expired);
    }
    Ok(sub)
}

/// An id_token: issued to `audience` by `issuer`, with the nonce we sent; the person's sub.
pub fn check_id_token<'a>(
    jwt: &'a DecodedJwt,
    issuer: &str,
    audience: &str,
    nonce: &str,
    leeway_secs: f64,
    now: Timestamp,
) -> Result<&'a str, IssuedTokenError> {
    let sub = check_issued_to(jwt, issuer, audience, leeway_secs, now)?;
    if jwt.str_claim("nonce") != Some(nonce) {
        return Err(IssuedTokenError::Nonce);
    }
    Ok(sub)
}

#[cfg(test)]
#[path = "openid_tests.rs"]
mod tests;
