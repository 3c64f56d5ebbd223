//! What a run calls things in the version of the scheme it checks: the members and claims of
//! signed answers, the broker header, the OpenID flow's endpoints and a party id nobody
//! registers; and the failure of an answer written in another version's names.

use super::options::Options;
use crate::scheme::openid::Flow;
use crate::scheme::version::SchemeVersion;
use crate::scheme::vocabulary::{member, BROKER_HEADER, BROKER_HEADER_3};
use serde_json::{Map, Value};

/// The claims of signed answers 3.0 renamed: 1.9's name, 3.0's.
const CLAIMS: [(&str, &str); 4] = [
    ("capabilities_info", "capabilitiesInfo"),
    ("parties_info", "partiesInfo"),
    ("party_info", "partyInfo"),
    ("trusted_list", "trustedList"),
];

/// A party id that no scheme owner registers, as 1.9 writes ids and as 3.0 does.
const STRANGER: &str = "EU.EORI.NL999999998";
const STRANGER_3: &str = "did:ishare:EU.NL.NTRNL-99999998";

/// The same claim under the other version's name.
fn claim_counterpart(name: &str) -> Option<&'static str> {
    CLAIMS.into_iter().find_map(|(old, new)| match name {
        n if n == old => Some(new),
        n if n == new => Some(old),
        _ => None,
    })
}

impl Options {
    /// The member of a signed answer, given by 1.9's name (`capabilities_token`), as the version
    /// checked writes it (3.0: `capabilitiesToken`).
    pub(super) fn member(&self, name: &'static str) -> &'static str {
        match self.version.camel_case() {
            true => member::counterpart(name).unwrap_or(name),
            false => name,
        }
    }

    /// The header of the broker pattern's consumer assertion.
    pub(super) fn broker_header(&self) -> &'static str {
        match self.version.camel_case() {
            true => BROKER_HEADER_3,
            false => BROKER_HEADER,
        }
    }

    /// The OpenID endpoints and names of the version checked.
    pub(super) fn flow(&self) -> Flow {
        Flow::of(self.version)
    }

    /// A party id that no scheme owner registers, for masks and claims that must name a stranger.
    pub(super) fn stranger(&self) -> &'static str {
        match self.version.camel_case() {
            true => STRANGER_3,
            false => STRANGER,
        }
    }
}

/// The claim of a signed answer's `claims` given by 1.9's name (`parties_info`), as `version`
/// names it (3.0: `partiesInfo`).
pub(super) fn claim_of<'c>(
    claims: &'c Map<String, Value>,
    name: &'static str,
    version: SchemeVersion,
) -> Result<&'c Value, String> {
    let name = match version.camel_case() {
        true => claim_counterpart(name).unwrap_or(name),
        false => name,
    };
    claims
        .get(name)
        .ok_or_else(|| missing(name, "token", version, |n| claims.contains_key(n)))
}

/// Why `name` is not in an answer or token (`holder`) that `has` some names: it holds the other
/// version's name for it instead (the target speaks another version than `version`), or nothing.
pub(super) fn missing(
    name: &str,
    holder: &str,
    version: SchemeVersion,
    has: impl Fn(&str) -> bool,
) -> String {
    let other = member::counterpart(name).or_else(|| claim_counterpart(name));
    match other.filter(|o| has(o)) {
        Some(other) => format!(
            "the {holder} holds {other} where {name} was asked: the participant speaks another version of the scheme than {version}"
        ),
        None => format!("the {holder} has no {name}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_of_the_other_version_says_the_participant_speaks_it() {
        let has = |n: &str| n == "capabilities_token";
        assert_eq!(
            missing("capabilitiesToken", "answer", SchemeVersion::V3_0, has),
            "the answer holds capabilities_token where capabilitiesToken was asked: the participant speaks another version of the scheme than 3.0"
        );
        assert_eq!(
            missing("partyInfo", "token", SchemeVersion::V3_0, |n| n == "party_info"),
            "the token holds party_info where partyInfo was asked: the participant speaks another version of the scheme than 3.0"
        );
        assert_eq!(
            missing("trusted_list_token", "answer", SchemeVersion::V1_9, |_| {
                false
            }),
            "the answer has no trusted_list_token"
        );
    }
}
