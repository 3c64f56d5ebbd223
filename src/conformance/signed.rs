//! Checks of the signed tokens a participant answers with: form, signature, chain to a trusted
//! root, the signer's certificate naming the issuer, and the claims every response token carries.

use crate::scheme::jwt::{decode, AlgorithmPolicy, DecodedJwt, ASSERTION_LIFETIME};
use crate::scheme::party::PartyId;
use crate::scheme::trust::{validate_chain, TrustedList};
use crate::scheme::Timestamp;

/// How far the issuer's clock may be from ours, in seconds.
const CLOCK_SKEW: f64 = 30.0;

/// Verify a response token of `issuer`, addressed to `audience` when one is given.
pub fn check(
    token: &str,
    trusted: &TrustedList,
    issuer: &str,
    audience: Option<&str>,
    now: Timestamp,
) -> Result<DecodedJwt, String> {
    let jwt = decode(
        token,
        AlgorithmPolicy {
            allow_rs384_rs512: true,
        },
    )
    .map_err(|e| format!("not a scheme JWT: {e}"))?;
    jwt.verify_signature()
        .map_err(|e| format!("signature: {e}"))?;
    let chain = validate_chain(&jwt.x5c, trusted, now).map_err(|e| format!("x5c chain: {e}"))?;
    let iss = jwt.str_claim("iss").ok_or("no iss claim")?;
    if iss != issuer {
        return Err(format!("iss is {iss}, not {issuer}"));
    }
    let party = PartyId::parse(issuer).map_err(|e| format!("iss: {e}"))?;
    if !chain.names(&party) {
        return Err(format!(
            "the signing certificate's subject does not name {issuer}"
        ));
    }
    if let Some(audience) = audience {
        if jwt.audience_includes(audience) != Some(true) {
            return Err(format!("aud does not name us ({audience})"));
        }
    }
    if jwt.str_claim("jti").is_none_or(str::is_empty) {
        return Err("no jti claim".into());
    }
    let iat = jwt.time_claim("iat").ok_or("no numeric iat claim")?;
    let exp = jwt.time_claim("exp").ok_or("no numeric exp claim")?;
    if exp - iat != ASSERTION_LIFETIME as f64 {
        return Err(format!("exp is iat + {}, not iat + 30", exp - iat));
    }
    let now = now.secs() as f64;
    if (iat - now).abs() > CLOCK_SKEW {
        return Err(format!("iat is {:.0} s from our clock", iat - now));
    }
    Ok(jwt)
}
