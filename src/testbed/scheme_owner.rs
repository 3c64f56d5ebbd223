//! The dummy scheme owner: parties, one party, the trusted list, certificate validation, and the
//! test-only assertion generator.

use super::participant::{common_routes, require, token_answer, ApiError, ApiResult, Participant};
use super::party_register::{party_has_subject, PartiesQuery, PartiesQuery3};
use crate::scheme::models::{
    CertificateResponse, PartiesPayload, PartyPayload, SchemeTime, TrustedListPayload,
    TrustedListPayload3, VersionInfo, VersionsPayload,
};
use crate::scheme::trust::{fingerprint, validate_chain};
use crate::scheme::vocabulary::{
    member, DATASPACES_PATH, FRAMEWORKS_PATH, SPEC_VERSION, TRUSTED_LIST_PATH_3,
};
use crate::scheme::Timestamp;
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderMap, Method};
use axum::response::IntoResponse;
use axum::routing::any;
use axum::Router;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

pub fn router(p: Arc<Participant>) -> Router {
    if p.shared.register.version().camel_case() {
        return common_routes()
            .route("/parties", any(parties_3))
            .route("/parties/{party_id}", any(party_3))
            .route("/parties/{party_id}/claims", any(claims_3))
            .route(DATASPACES_PATH, any(dataspaces_3))
            .route(FRAMEWORKS_PATH, any(frameworks_3))
            .route(TRUSTED_LIST_PATH_3, any(trusted_list))
            .route("/testing/generate-jws", any(generate_jws))
            .with_state(p);
    }
    common_routes()
        .route("/parties", any(parties))
        .route("/parties/{party_id}", any(party))
        .route("/trusted_list", any(trusted_list))
        .route("/versions", any(versions))
        .route("/certificate_validation", any(certificate_validation))
        .route("/testing/generate-jws", any(generate_jws))
        .with_state(p)
}

fn query_pairs(raw: Option<String>) -> Vec<(String, String)> {
    url::form_urlencoded::parse(raw.unwrap_or_default().as_bytes())
        .into_owned()
        .collect()
}

/// GET /parties: 401 without a valid token, 400 for no or invalid parameters.
async fn parties(
    State(p): State<Arc<Participant>>,
    method: Method,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> ApiResult {
    require(&method, Method::GET)?;
    let caller = p.authenticate(&headers)?;
    let query = PartiesQuery::parse(&query_pairs(raw))
        .map_err(|e| ApiError::bad_request("invalid_request", e))?;
    let page = p.shared.register.search(&query, Timestamp::now().secs());
    let token = p.sign(Some(&caller.sub), &PartiesPayload(page))?;
    Ok(token_answer(member::PARTIES, token))
}

/// GET /parties/{party_id}: 404 for an unknown party, or when certificate_subject_name is given
/// and names none of its certificates.
async fn party(
    State(p): State<Arc<Participant>>,
    method: Method,
    headers: HeaderMap,
    Path(party_id): Path<String>,
    RawQuery(raw): RawQuery,
) -> ApiResult {
    require(&method, Method::GET)?;
    let caller = p.authenticate(&headers)?;
    let record = p
        .shared
        .register
        .party(&party_id)
        .ok_or_else(|| ApiError::not_found(format!("no party {party_id}")))?;
    for (key, value) in query_pairs(raw) {
        match key.as_str() {
            "date_time" if SchemeTime::parse(&value).is_none() => {
                return Err(ApiError::bad_request(
                    "invalid_request",
                    format!("date_time {value:?} is not an ISO 8601 timestamp"),
                ))
            }
            "certificate_subject_name" if !party_has_subject(record, &value) => {
                return Err(ApiError::not_found(format!(
                    "no certificate of {party_id} has that subject"
                )))
            }
            _ => {}
        }
    }
    let token = p.sign(Some(&caller.sub), &PartyPayload(record.clone()))?;
    Ok(token_answer(member::PARTY, token))
}

/// GET /trusted_list (`trusted_list_token`), or in 3.0 /trustedList (`trustedListToken`, its
/// entries by `certificateFingerprint`).
async fn trusted_list(
    State(p): State<Arc<Participant>>,
    method: Method,
    headers: HeaderMap,
) -> ApiResult {
    require(&method, Method::GET)?;
    let caller = p.authenticate(&headers)?;
    let entries = p.shared.register.trusted_entries();
    let (token, answer_member) = match p.shared.register.version().camel_case() {
        true => {
            let trusted_list = entries.iter().cloned().map(Into::into).collect();
            let payload = TrustedListPayload3 { trusted_list };
            (p.sign(Some(&caller.sub), &payload)?, member::TRUSTED_LIST_3)
        }
        false => {
            let trusted_list = entries.to_vec();
            let payload = TrustedListPayload { trusted_list };
            (p.sign(Some(&caller.sub), &payload)?, member::TRUSTED_LIST)
        }
    };
    Ok(token_answer(answer_member, token))
}

/// GET /parties (3.0): 401 without a valid token, 400 for no, unknown or invalid parameters;
/// `partiesToken` with `partiesInfo`.
async fn parties_3(
    State(p): State<Arc<Participant>>,
    method: Method,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> ApiResult {
    require(&method, Method::GET)?;
    let caller = p.authenticate(&headers)?;
    let query = PartiesQuery3::parse(&query_pairs(raw))
        .map_err(|e| ApiError::bad_request("invalid_request", e))?;
    let info = p.shared.register.search_3_0(&query);
    let token = p.sign(Some(&caller.sub), &json!({ "partiesInfo": info }))?;
    Ok(token_answer(member::PARTIES_3, token))
}

/// GET /parties/{partyId} (3.0): the party any of its identifiers names, 404 for none;
/// `partyToken` with `partyInfo`.
async fn party_3(
    State(p): State<Arc<Participant>>,
    method: Method,
    headers: HeaderMap,
    Path(party_id): Path<String>,
) -> ApiResult {
    let (caller, record) = record_3_0(&p, &method, &headers, &party_id)?;
    let token = p.sign(Some(&caller), &json!({ "partyInfo": record }))?;
    Ok(token_answer(member::PARTY_3, token))
}

/// For a GET with a valid token: its caller, and the 3.0 record of the party any of its
/// identifiers names (404 for none).
fn record_3_0(
    p: &Participant,
    method: &Method,
    headers: &HeaderMap,
    party_id: &str,
) -> Result<(String, Value), ApiError> {
    require(method, Method::GET)?;
    let caller = p.authenticate(headers)?;
    let register = &p.shared.register;
    let record = register
        .party(party_id)
        .ok_or_else(|| ApiError::not_found(format!("no party {party_id}")))?;
    Ok((caller.sub.clone(), register.record_3_0(record)))
}

/// GET /parties/{partyId}/claims (3.0): the claims of the party any of its identifiers names,
/// 404 for none; `claimsToken` with `claimsInfo`.
async fn claims_3(
    State(p): State<Arc<Participant>>,
    method: Method,
    headers: HeaderMap,
    Path(party_id): Path<String>,
) -> ApiResult {
    let (caller, record) = record_3_0(&p, &method, &headers, &party_id)?;
    let token = p.sign(
        Some(&caller),
        &json!({ "claimsInfo": {"claims": record["claims"]} }),
    )?;
    Ok(token_answer(member::CLAIMS_3, token))
}

/// GET /dataspaces (3.0): the scheme's data spaces, a page of them (`page`, `pageSize`; any
/// other parameter is a 400); `dataspacesToken` with `dataspacesInfo`.
async fn dataspaces_3(
    State(p): State<Arc<Participant>>,
    method: Method,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> ApiResult {
    let listed: Vec<Value> = p
        .shared
        .dataspaces
        .iter()
        .map(|d| {
            let mut space = json!({"id": d.id, "title": d.title});
            if let Some(url) = &d.description_url {
                space["dataSpaceDescriptionUrl"] = url.clone().into();
            }
            space
        })
        .collect();
    let answer = (member::DATASPACES_3, "dataspacesInfo");
    list_3(&p, &method, &headers, raw, answer, listed)
}

/// GET /frameworks (3.0): the framework every party's claims name (the scheme's), as a page;
/// `frameworksToken` with `frameworksInfo`.
async fn frameworks_3(
    State(p): State<Arc<Participant>>,
    method: Method,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> ApiResult {
    let owner = p.shared.register.scheme();
    let framework = json!({
        "id": owner.framework,
        "title": format!("{} trust framework", owner.framework),
        "frameworkOwnerId": owner.registrar,
    });
    let answer = (member::FRAMEWORKS_3, "frameworksInfo");
    list_3(&p, &method, &headers, raw, answer, vec![framework])
}

/// A list of 3.0's to a GET with a valid token: the answer's member holding, under `info`, the
/// page of `all` the query asks for.
fn list_3(
    p: &Participant,
    method: &Method,
    headers: &HeaderMap,
    raw: Option<String>,
    (member, info): (&str, &str),
    all: Vec<Value>,
) -> ApiResult {
    require(method, Method::GET)?;
    let caller = p.authenticate(headers)?;
    let page = paged(&query_pairs(raw), all)?;
    let claims = serde_json::Map::from_iter([(info.to_string(), page)]);
    let token = p.sign(Some(&caller.sub), &claims)?;
    Ok(token_answer(member, token))
}

/// One page of `all` as 3.0's lists are paged (`page` from 1, `pageSize` from 1 to 100, 10 by
/// default), with its paging; 400 for another parameter or a number out of range.
fn paged(pairs: &[(String, String)], all: Vec<Value>) -> Result<Value, ApiError> {
    let (mut page, mut size) = (1u64, 10u64);
    for (key, value) in pairs {
        let max = match key.as_str() {
            "page" => u64::MAX,
            "pageSize" => 100,
            other => {
                return Err(ApiError::bad_request(
                    "invalid_request",
                    format!("{other} is not a parameter of this list (page, pageSize)"),
                ))
            }
        };
        let n = value
            .trim()
            .parse::<u64>()
            .ok()
            .filter(|n| (1..=max).contains(n))
            .ok_or_else(|| {
                ApiError::bad_request(
                    "invalid_request",
                    format!("{key} must be a whole number from 1 to {max}, not {value:?}"),
                )
            })?;
        match key.as_str() {
            "page" => page = n,
            _ => size = n,
        }
    }
    let total = all.len() as u64;
    let data: Vec<Value> = all
        .into_iter()
        .skip(usize::try_from(page.saturating_sub(1).saturating_mul(size)).unwrap_or(usize::MAX))
        .take(size as usize)
        .collect();
    Ok(json!({
        "currentPage": page, "pageSize": size, "totalPages": total.div_ceil(size).max(1),
        "totalCount": total, "count": data.len(), "data": data,
    }))
}

/// GET /versions: the specification versions of the scheme, to anyone; with a token, the answer is
/// addressed to its holder (and a token that is not valid is refused with 401).
async fn versions(
    State(p): State<Arc<Participant>>,
    method: Method,
    headers: HeaderMap,
) -> ApiResult {
    require(&method, Method::GET)?;
    let caller = p.optional_caller(&headers)?;
    let payload = VersionsPayload {
        versions_info: vec![VersionInfo {
            version_name: SPEC_VERSION.to_string(),
            valid_from: "2024-01-01T00:00:00Z".to_string(),
            valid_to: None,
            version_status: "Active".to_string(),
        }],
    };
    let token = p.sign(caller.as_ref().map(|c| c.sub.as_str()), &payload)?;
    Ok(token_answer(member::VERSIONS, token))
}

#[derive(Deserialize)]
struct CertificateRequest {
    /// One certificate, base64 DER or PEM.
    #[serde(default)]
    certificate: Option<String>,
    /// A chain, leaf first, base64 DER.
    #[serde(default)]
    x5c: Option<Vec<String>>,
    #[serde(default)]
    date_time: Option<String>,
}

fn body_json<T: for<'de> Deserialize<'de>>(
    headers: &HeaderMap,
    body: &[u8],
) -> Result<T, ApiError> {
    let is_form = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.contains("x-www-form-urlencoded"));
    let value = if is_form {
        let map: serde_json::Map<String, serde_json::Value> = url::form_urlencoded::parse(body)
            .map(|(k, v)| (k.into_owned(), serde_json::Value::String(v.into_owned())))
            .collect();
        serde_json::Value::Object(map)
    } else {
        serde_json::from_slice(body).map_err(|e| {
            ApiError::bad_request("invalid_request", format!("the body is not JSON: {e}"))
        })?
    };
    serde_json::from_value(value)
        .map_err(|e| ApiError::bad_request("invalid_request", e.to_string()))
}

fn der_of(text: &str) -> Result<Vec<u8>, ApiError> {
    crate::scheme::jwt::certificate_from_base64(text)
        .ok_or_else(|| ApiError::bad_request("invalid_request", "the certificate is not base64"))
}

/// POST /certificate_validation: whether a certificate chains to a trusted root and is valid at
/// the time asked (now by default). A lone certificate issued by the testbed's CA is completed with
/// that CA's chain.
async fn certificate_validation(
    State(p): State<Arc<Participant>>,
    method: Method,
    headers: HeaderMap,
    body: bytes::Bytes,
) -> ApiResult {
    require(&method, Method::POST)?;
    p.authenticate(&headers)?;
    let request: CertificateRequest = body_json(&headers, &body)?;
    let mut chain = match (request.x5c, request.certificate) {
        (Some(x5c), _) if !x5c.is_empty() => x5c
            .iter()
            .map(|c| der_of(c))
            .collect::<Result<Vec<_>, _>>()?,
        (_, Some(cert)) => vec![der_of(&cert)?],
        _ => {
            return Err(ApiError::bad_request(
                "invalid_request",
                "give certificate or x5c",
            ))
        }
    };
    let at = match request.date_time.as_deref() {
        None => Timestamp::now(),
        Some(t) => Timestamp::from_secs(
            SchemeTime::parse(t)
                .ok_or_else(|| {
                    ApiError::bad_request("invalid_request", "date_time is not ISO 8601")
                })?
                .unix(),
        ),
    };
    if chain.len() == 1 {
        if let Some(identity) = p.shared.identities.values().next() {
            chain.extend(identity.chain_der().iter().skip(1).cloned());
        }
    }
    let validity = validate_chain(&chain, p.shared.register.trusted(), at).is_ok();
    Ok(axum::Json(CertificateResponse {
        date_time: SchemeTime::from_unix(at.secs()),
        certificate_fingerprint: fingerprint(&chain[0]),
        validity,
    })
    .into_response())
}

#[derive(Deserialize)]
struct GenerateRequest {
    client_id: String,
    #[serde(alias = "aud")]
    audience: String,
}

/// POST /testing/generate-jws (test only): a client assertion signed with a testbed party's key.
async fn generate_jws(
    State(p): State<Arc<Participant>>,
    method: Method,
    headers: HeaderMap,
    body: bytes::Bytes,
) -> ApiResult {
    require(&method, Method::POST)?;
    let request: GenerateRequest = body_json(&headers, &body)?;
    let identity = p.shared.identities.get(&request.client_id).ok_or_else(|| {
        ApiError::bad_request(
            "invalid_request",
            format!("{} is not a testbed party", request.client_id),
        )
    })?;
    if p.shared.register.party(&request.audience).is_none() {
        return Err(ApiError::bad_request(
            "invalid_request",
            format!(
                "the audience {} is not a party of the scheme",
                request.audience
            ),
        ));
    }
    let assertion = identity
        .client_assertion(&request.audience, Timestamp::now())
        .map_err(|e| ApiError::bad_request("invalid_request", e.to_string()))?;
    Ok(axum::Json(json!({ "client_assertion": assertion })).into_response())
}
