//! Capabilities as services, as 2.1, 2.2 (`capabilities_info`) and 3.0 (`capabilitiesInfo`) write
//! them: public services to anyone, restricted ones only to a caller with a token, each service
//! held to the scheme's schema, and the token service listed under the operationId clients look
//! it up by in the version's document.

use super::names::claim_of;
use crate::scheme::version::SchemeVersion;
use serde_json::{Map, Value};
use std::collections::BTreeSet;

const STATUSES: [&str; 2] = ["active", "deprecated"];
const SERVICE_TYPES: [&str; 3] = ["framework-defined", "dataspace-defined", "self-defined"];
/// The members every service has, as text.
const REQUIRED: [&str; 5] = [
    "identifier",
    "title",
    "endpointURL",
    "status",
    "serviceType",
];

/// The services of `capabilitiesInfo` under `key`, none when absent.
fn services<'a>(
    info: &'a Map<String, Value>,
    key: &str,
) -> Result<Vec<&'a Map<String, Value>>, String> {
    match info.get(key) {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, s)| s.as_object().ok_or(format!("{key}[{i}] is not an object")))
            .collect(),
        Some(_) => Err(format!("{key} is not an array")),
    }
}

fn absolute_url(text: &str) -> bool {
    url::Url::parse(text).is_ok_and(|u| u.has_host())
}

/// One service as the scheme's schema has it: its text members, status and type from their
/// closed sets, URLs that are URLs, and a `version` with `capabilityVersion` (and for a
/// framework-defined service the framework versions it complies with).
fn service(s: &Map<String, Value>) -> Result<&str, String> {
    let text = |k: &str| s.get(k).and_then(Value::as_str).filter(|v| !v.is_empty());
    if let Some(k) = REQUIRED.iter().find(|k| text(k).is_none()) {
        return Err(format!("no {k} (text)"));
    }
    let identifier = text("identifier").unwrap_or_default();
    let status = text("status").unwrap_or_default();
    if !STATUSES.contains(&status) {
        return Err(format!(
            "status {status:?} is neither active nor deprecated"
        ));
    }
    let kind = text("serviceType").unwrap_or_default();
    if !SERVICE_TYPES.contains(&kind) {
        return Err(format!(
            "serviceType {kind:?} is not one of {SERVICE_TYPES:?}"
        ));
    }
    for k in ["endpointURL", "tokenEndpoint", "endpointDescription"] {
        match s.get(k) {
            None => {}
            Some(Value::String(u)) if absolute_url(u) => {}
            Some(v) => return Err(format!("{k} {v} is not an absolute URL")),
        }
    }
    let version = s
        .get("version")
        .and_then(Value::as_object)
        .ok_or("no version (an object)")?;
    if version
        .get("capabilityVersion")
        .and_then(Value::as_str)
        .is_none()
    {
        return Err("version has no capabilityVersion (text)".into());
    }
    let framework_versions = version
        .get("compliesWithFrameworkVersions")
        .and_then(Value::as_array);
    if kind == "framework-defined" && framework_versions.is_none_or(|v| v.is_empty()) {
        return Err("a framework-defined service without compliesWithFrameworkVersions".into());
    }
    let texts = |v: &Value| v.as_array().is_some_and(|a| a.iter().all(Value::is_string));
    for (k, holder) in [
        ("compliesWithFrameworkVersions", version),
        ("compliesWithDataspaceVersions", version),
        ("methods", s),
    ] {
        if holder.get(k).is_some_and(|v| !texts(v)) {
            return Err(format!("{k} is not a list of text"));
        }
    }
    Ok(identifier)
}

/// The services of a capabilities token of 2.1 or later: what was verified, or what is wrong.
pub(super) fn check(
    claims: &Map<String, Value>,
    version: SchemeVersion,
    with_token: bool,
) -> Result<String, String> {
    let info = claim_of(claims, "capabilities_info", version)?
        .as_object()
        .ok_or("capabilitiesInfo is not an object")?;
    let public = services(info, "publicServices")?;
    let restricted = services(info, "restrictedServices")?;
    if !with_token && !restricted.is_empty() {
        return Err("restrictedServices listed to a caller without a token".into());
    }
    let mut identifiers = BTreeSet::new();
    for (key, list) in [
        ("publicServices", &public),
        ("restrictedServices", &restricted),
    ] {
        for (i, s) in list.iter().enumerate() {
            let identifier = service(s).map_err(|e| format!("{key}[{i}]: {e}"))?;
            if !identifiers.insert(identifier) {
                return Err(format!(
                    "{key}[{i}]: the identifier {identifier} is listed twice"
                ));
            }
        }
    }
    let token_service = crate::scheme::capabilities::token_service(version);
    if !public
        .iter()
        .any(|s| s.get("identifier").and_then(Value::as_str) == Some(token_service))
    {
        return Err(format!(
            "publicServices list no {token_service} (the token service's operationId)"
        ));
    }
    let name = match version.camel_case() {
        true => "capabilitiesInfo",
        false => "capabilities_info",
    };
    Ok(format!(
        "{name}: {} public and {} restricted services as {}'s schema has them, {token_service} among them",
        public.len(),
        restricted.len(),
        version.as_str()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheme::capabilities::{CapabilitiesInfo, Feature};
    use crate::scheme::vocabulary::Role;
    use serde_json::json;

    fn checked(claims: Value, with_token: bool) -> Result<String, String> {
        let claims = claims.as_object().cloned().unwrap_or_default();
        check(&claims, SchemeVersion::V3_0, with_token)
    }

    fn written(restricted: bool) -> Value {
        let base = "https://sp.example";
        let restricted = restricted.then(|| {
            vec![Feature::at(
                "X-1",
                "boom access",
                "A service",
                base,
                "/boom",
                true,
            )]
        });
        let info = CapabilitiesInfo::of_party(
            "iSHARE",
            "did:ishare:EU.NL.NTRNL-1",
            Role::ServiceProvider,
            base,
            restricted,
        );
        Value::Object(info.token_claims(crate::scheme::version::SchemeVersion::V3_0))
    }

    #[test]
    fn capabilities_as_3_0_writes_them_pass() {
        let anonymous = checked(written(false), false).unwrap();
        assert!(
            anonymous.contains("2 public and 0 restricted"),
            "{anonymous}"
        );
        assert!(checked(written(true), true).is_ok());
    }

    #[test]
    fn each_departure_from_the_schema_is_named() {
        assert_eq!(
            checked(written(true), false).unwrap_err(),
            "restrictedServices listed to a caller without a token"
        );
        let mut no_title = written(false);
        no_title["capabilitiesInfo"]["publicServices"][1]
            .as_object_mut()
            .unwrap()
            .remove("title");
        assert_eq!(
            checked(no_title, false).unwrap_err(),
            "publicServices[1]: no title (text)"
        );
        let mut status = written(false);
        status["capabilitiesInfo"]["publicServices"][0]["status"] = json!("Active");
        assert!(checked(status, false)
            .unwrap_err()
            .contains("neither active nor deprecated"));
        let mut unversioned = written(false);
        unversioned["capabilitiesInfo"]["publicServices"][0]["version"] =
            json!({"capabilityVersion": "3.0"});
        assert!(checked(unversioned, false)
            .unwrap_err()
            .contains("without compliesWithFrameworkVersions"));
        let mut no_token_service = written(false);
        no_token_service["capabilitiesInfo"]["publicServices"][1]["identifier"] = json!("token");
        assert!(checked(no_token_service, false)
            .unwrap_err()
            .contains("list no request-oauth-token"));
        let old = json!({"capabilities_info": {"publicServices": []}});
        assert!(checked(old, false)
            .unwrap_err()
            .contains("speaks another version of the scheme than 3.0"));
    }
}
