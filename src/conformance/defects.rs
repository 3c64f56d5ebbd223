//! Client assertions with one defect each: the cases the scheme's conformance tool sends to token
//! endpoints, and inside `previous_steps` to registries.

use crate::scheme::jwt::{SigningError, SigningIdentity, ASSERTION_LIFETIME};
use crate::scheme::Timestamp;
use serde_json::{json, Value};

/// The header and claims of a good client assertion of `identity` for `audience`.
pub fn good_parts(identity: &SigningIdentity, audience: &str, now: Timestamp) -> (Value, Value) {
    let iat = now.secs();
    (
        json!({"alg": "RS256", "typ": "JWT", "x5c": identity.x5c()}),
        json!({
            "iss": identity.party_id().as_str(),
            "sub": identity.party_id().as_str(),
            "aud": audience,
            "jti": uuid::Uuid::new_v4().to_string(),
            "iat": iat,
            "exp": iat + ASSERTION_LIFETIME,
        }),
    )
}

type Edit = fn(&mut Value, &mut Value, &str);

fn remove(v: &mut Value, key: &str) {
    if let Some(o) = v.as_object_mut() {
        o.remove(key);
    }
}

/// Defects made by editing a good assertion's header or claims (`other` is a party id that is
/// neither the client nor the audience).
const EDITS: [(&str, Edit); 18] = [
    ("ASSERTION MISSING TYP", |h, _, _| remove(h, "typ")),
    ("ASSERTION INVALID TYP", |h, _, _| h["typ"] = json!("JOSE")),
    ("ASSERTION MISSING ALG", |h, _, _| remove(h, "alg")),
    ("ASSERTION INVALID ALG", |h, _, _| h["alg"] = json!("HS256")),
    ("ASSERTION MISSING X5C", |h, _, _| remove(h, "x5c")),
    ("ASSERTION INVALID X5C", |h, _, _| {
        h["x5c"] = json!(["bm90IGEgY2VydGlmaWNhdGU="])
    }),
    ("ASSERTION MISSING ISS", |_, c, _| remove(c, "iss")),
    ("ASSERTION INVALID ISS", |_, c, other| {
        c["iss"] = json!(other)
    }),
    ("ASSERTION MISSING SUB", |_, c, _| remove(c, "sub")),
    ("ASSERTION INVALID SUB", |_, c, other| {
        c["sub"] = json!(other)
    }),
    ("ASSERTION MISSING AUD", |_, c, _| remove(c, "aud")),
    ("ASSERTION INVALID AUD", |_, c, other| {
        c["aud"] = json!(other)
    }),
    ("ASSERTION MISSING JTI", |_, c, _| remove(c, "jti")),
    ("ASSERTION MISSING EXP", |_, c, _| remove(c, "exp")),
    ("ASSERTION INVALID EXP", |_, c, _| {
        c["exp"] = json!(c["iat"].as_i64().unwrap_or_default() + 2 * ASSERTION_LIFETIME)
    }),
    ("ASSERTION MISSING IAT", |_, c, _| remove(c, "iat")),
    ("ASSERTION INVALID IAT", |_, c, _| {
        let future = c["iat"].as_i64().unwrap_or_default() + 120;
        c["iat"] = json!(future);
        c["exp"] = json!(future + ASSERTION_LIFETIME);
    }),
    ("ASSERTION EXPIRED", |_, c, _| {
        let past = c["iat"].as_i64().unwrap_or_default() - 300;
        c["iat"] = json!(past);
        c["exp"] = json!(past + ASSERTION_LIFETIME);
    }),
];

/// Every defective assertion of `client` for `audience`, by case name. `foreign` has the client's
/// party id under a root nobody trusts; `other` is a third party's id.
pub fn defective_assertions(
    client: &SigningIdentity,
    foreign: &SigningIdentity,
    audience: &str,
    other: &str,
    now: Timestamp,
) -> Result<Vec<(&'static str, String)>, SigningError> {
    let mut out = Vec::new();
    for (case, edit) in EDITS {
        let (mut header, mut claims) = good_parts(client, audience, now);
        edit(&mut header, &mut claims, other);
        out.push((case, client.sign_parts(&header, &claims)?));
    }
    let (header, claims) = good_parts(client, audience, now);
    let good = client.sign_parts(&header, &claims)?;
    let unsigned = good
        .rsplit_once('.')
        .map(|(input, _)| format!("{input}."))
        .unwrap_or_default();
    out.push(("ASSERTION MISSING SIGNATURE", unsigned));
    out.push((
        "ASSERTION INVALID SIGNATURE",
        foreign.sign_parts(&header, &claims)?,
    ));
    out.push((
        "INVALID CERTIFICATE",
        foreign.client_assertion(audience, now)?,
    ));
    Ok(out)
}
