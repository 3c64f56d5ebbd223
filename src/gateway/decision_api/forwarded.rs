//! The HTTP forms of a request another proxy holds: nginx's `auth_request` subrequest (the
//! original method and target in `X-Original-Method` and `X-Original-URI`) and Envoy's HTTP
//! `ext_authz` check (the original method, the original path after the `/ext_authz` prefix). The
//! request's headers come along; the answer is 200 with the headers the backend receives, or the
//! proxy's refusal with its reason.

use super::{decide, invalid_original, Interface, Verdict, REASON_HEADER};
use crate::gateway::decision::dry_run::DescribedRequest;
use crate::gateway::reject::{Answer, Reject, ServiceRefusal};
use crate::gateway::snapshot::GatewayState;
use crate::scheme::same_letters;
use http::{HeaderMap, Method, Response};

/// nginx's path, and the prefix Envoy's `path_prefix` names.
pub const NGINX_PATH: &str = "/nginx";
pub const EXT_AUTHZ_PREFIX: &str = "/ext_authz";

const ORIGINAL_METHOD: &str = "x-original-method";
const ORIGINAL_URI: &str = "x-original-uri";

/// Headers of the hop between the proxy and the decision service, not of the original request.
const OF_THE_HOP: [&str; 10] = [
    "host",
    "content-length",
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "expect",
];

/// Whether a header is of the hop between the proxy and the decision service.
pub fn is_of_the_hop(name: &str) -> bool {
    OF_THE_HOP.iter().any(|h| h.eq_ignore_ascii_case(name))
}

/// The original request's headers: all the proxy passed on but those of the hop and `skip`.
/// A value that is not text is refused: the stages read headers as text.
fn original_headers(headers: &HeaderMap, skip: &[&str]) -> Result<Vec<(String, String)>, Reject> {
    let mut out = Vec::with_capacity(headers.len());
    for (name, value) in headers {
        let name = name.as_str();
        if is_of_the_hop(name) || skip.contains(&name) {
            continue;
        }
        let value = value
            .to_str()
            .map_err(|_| invalid_original(format!("the header {name:?} is not text")))?;
        out.push((name.to_string(), value.to_string()));
    }
    Ok(out)
}

/// The one value of a header nginx must set.
fn required<'a>(headers: &'a HeaderMap, key: &str) -> Result<&'a str, Reject> {
    let name = match key {
        ORIGINAL_METHOD => "X-Original-Method",
        _ => "X-Original-URI",
    };
    let mut values = headers.get_all(key).iter();
    match (values.next(), values.next()) {
        (Some(v), None) => v.to_str().map(str::trim).map_err(|_| {
            invalid_original(format!("{name} is not text"))
        }),
        (Some(_), Some(_)) => Err(invalid_original(format!("{name} is given more than once"),
        )),
        (None, _) => Err(invalid_original(format!("{name} is missing: nginx sets it with proxy_set_header {name} (see the nginx recipe of the decision service's guide)"),
        )),
    }
}

/// A header that reads as one nginx sets (`X_Original_URI`, `X.Original.URI`, `XOriginalURI`)
/// to a backend that folds names: a client's, passed on by nginx (`underscores_in_headers on`),
/// or sent to the decision service directly. Refused whatever `strip_headers` says: the one
/// nginx sets is what is decided on.
fn look_alike(headers: &HeaderMap) -> Result<(), Reject> {
    let set = [ORIGINAL_METHOD, ORIGINAL_URI];
    let found = headers
        .keys()
        .map(|n| n.as_str())
        .find(|name| !set.contains(name) && set.iter().any(|ours| same_letters(name, ours)));
    match found {
        Some(name) => Err(ServiceRefusal::HeaderNotPassable(name.to_string()).into()),
        None => Ok(()),
    }
}

/// nginx's `auth_request`: the original request from `X-Original-Method` and `X-Original-URI`
/// (`$request_uri`, the raw target, read as the proxy reads a request line); no look-alike of
/// either.
pub async fn nginx(state: &GatewayState, headers: &HeaderMap) -> Response<Vec<u8>> {
    let asked = look_alike(headers)
        .and_then(|()| required(headers, ORIGINAL_METHOD))
        .and_then(|method| {
            let target = required(headers, ORIGINAL_URI)?;
            Ok(DescribedRequest {
                method: method.to_string(),
                target: target.to_string(),
                headers: original_headers(headers, &[ORIGINAL_METHOD, ORIGINAL_URI])?,
                caller: None,
                body: None,
            })
        });
    answer(state, Interface::Nginx, asked).await
}

/// Envoy's HTTP `ext_authz`: the original method, the original path (with its query) after the
/// prefix, and the body when Envoy sends it (`with_request_body`).
pub async fn ext_authz(
    state: &GatewayState,
    method: &Method,
    target: &str,
    headers: &HeaderMap,
    body: Option<Vec<u8>>,
) -> Response<Vec<u8>> {
    let original = target.strip_prefix(EXT_AUTHZ_PREFIX).unwrap_or(target);
    let asked = original_headers(headers, &[]).map(|headers| DescribedRequest {
        method: method.to_string(),
        target: original.to_string(),
        headers,
        caller: None,
        body,
    });
    answer(state, Interface::ExtAuthzHttp, asked).await
}

/// Decide what could be read; answer 200 with the backend's headers, or the refusal.
async fn answer(
    state: &GatewayState,
    interface: Interface,
    asked: Result<DescribedRequest, Reject>,
) -> Response<Vec<u8>> {
    let verdict = match asked {
        Ok(req) => decide(state, interface, req).await,
        Err(refusal) => super::refused_unread(state, interface, refusal),
    };
    respond(verdict)
}

/// 200 with the backend's headers; None if one cannot be sent.
fn allowed(headers: &[(String, String)]) -> Option<Response<Vec<u8>>> {
    let mut response = Response::new(Vec::new());
    let map = response.headers_mut();
    map.insert("cache-control", http::HeaderValue::from_static("no-store"));
    for (name, value) in headers {
        let name = http::HeaderName::from_bytes(name.as_bytes()).ok()?;
        map.insert(name, http::HeaderValue::from_str(value).ok()?);
    }
    Some(response)
}

/// Envoy's header of an allowed answer naming the request headers it removes before the backend.
const ENVOY_REMOVE: &str = "x-envoy-auth-headers-to-remove";

/// The verdict as an HTTP answer: both carry the decision's reason code in X-Decision-Reason. An
/// allowed one tells Envoy what to remove from the request (nginx's recipe clears the same).
pub fn respond(verdict: Verdict) -> Response<Vec<u8>> {
    let reason = verdict.reason();
    let remove = verdict.remove_upstream.join(",");
    let mut response = match verdict.refusal {
        Some(answer) => answer.into_response(),
        None => match allowed(&verdict.upstream_headers) {
            Some(mut response) => {
                if let Ok(value) = http::HeaderValue::from_str(&remove) {
                    if !remove.is_empty() {
                        response.headers_mut().insert(ENVOY_REMOVE, value);
                    }
                }
                response
            }
            // A header the proxy could not send either: no allow without it.
            None => Answer::from(&Reject::Internal).into_response(),
        },
    };
    if let Ok(value) = http::HeaderValue::from_str(reason) {
        response.headers_mut().insert(REASON_HEADER, value);
    }
    response
}
