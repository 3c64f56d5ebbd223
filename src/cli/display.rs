//! Showing scheme JWTs readably: the header (algorithm, certificate chain), whether the signature
//! and chain verify, and the claims with their times spelled out.

use crate::scheme::jwt::{decode, AlgorithmPolicy};
use crate::scheme::models::SchemeTime;
use crate::scheme::trust::{validate_chain, TrustedList};
use crate::scheme::Timestamp;
use serde_json::Value;
use x509_parser::prelude::{FromDer, X509Certificate};

/// A multi-line description of a JWT. With `trusted`, the chain is checked against it too.
pub fn describe_jwt(token: &str, trusted: Option<&TrustedList>) -> String {
    let mut out = String::new();
    let jwt = match decode(
        token,
        AlgorithmPolicy {
            allow_rs384_rs512: true,
        },
    ) {
        Ok(j) => j,
        Err(e) => return format!("  (not a scheme JWT: {e})\n"),
    };
    out.push_str(&format!(
        "  header: alg {:?}, x5c chain of {}:\n",
        jwt.alg,
        jwt.x5c.len()
    ));
    for der in &jwt.x5c {
        let subject = X509Certificate::from_der(der)
            .map(|(_, c)| c.subject().to_string())
            .unwrap_or_else(|_| "(unparseable)".into());
        out.push_str(&format!("    - {subject}\n"));
    }
    let signature = match jwt.verify_signature() {
        Ok(()) => "valid".to_string(),
        Err(e) => format!("INVALID ({e})"),
    };
    out.push_str(&format!("  signature: {signature}\n"));
    if let Some(trusted) = trusted {
        let chain = match validate_chain(&jwt.x5c, trusted, Timestamp::now()) {
            Ok(_) => "trusted".to_string(),
            Err(e) => format!("NOT trusted ({e})"),
        };
        out.push_str(&format!("  chain: {chain}\n"));
    }
    let mut claims = Value::Object(jwt.claims.clone());
    annotate_times(&mut claims);
    let pretty = serde_json::to_string_pretty(&claims).unwrap_or_default();
    out.push_str("  claims:\n");
    for line in pretty.lines() {
        out.push_str("    ");
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Replace well-known integer time members by `"<n> (<ISO time>)"` for reading.
fn annotate_times(v: &mut Value) {
    match v {
        Value::Object(map) => {
            for (k, val) in map.iter_mut() {
                let is_time = matches!(
                    k.as_str(),
                    "iat" | "exp" | "nbf" | "notBefore" | "notOnOrAfter"
                );
                match val.as_f64() {
                    Some(secs) if is_time => {
                        *val = Value::String(format!(
                            "{} ({})",
                            val,
                            SchemeTime::from_unix(secs.floor() as i64).as_str()
                        ))
                    }
                    _ => annotate_times(val),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(annotate_times),
        _ => {}
    }
}
