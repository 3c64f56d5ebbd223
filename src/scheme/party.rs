//! Party identifiers: `<scope>.EORI.<number>` (1.9), `did:ishare:<id>` (2.1 on), and the other
//! `<method>:<value>` identifiers 3.0 records list as aliases (`did:web:example.com`,
//! `CoC:123456789`). Identifiers are compared as written; never as patterns.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

const DID_PREFIX: &str = "did:ishare:";
const MAX_LEN: usize = 128;

/// A validated party identifier.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PartyId(String);

/// Why a string is not a party identifier.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PartyIdError {
    #[error("party identifier is empty")]
    Empty,
    #[error("party identifier is longer than {MAX_LEN} characters")]
    TooLong,
    #[error("party identifier {0:?} contains white space or control characters")]
    BadCharacter(String),
    #[error(
        "party identifier {0:?} is neither of the form <scope>.EORI.<number> (e.g. EU.EORI.NL000000001) nor <method>:<value> (did:ishare:EU.NL.NTRNL-10000001, did:web:example.com, CoC:123456789)"
    )]
    UnknownForm(String),
    #[error("party identifier {id:?}: the scope {scope:?} must be two or more ASCII letters")]
    BadScope { id: String, scope: String },
    #[error("party identifier {id:?}: the EORI number must be 1 to 35 ASCII letters or digits")]
    BadNumber { id: String },
    #[error(
        "party identifier {id:?}: the did:ishare identifier must be dot-separated non-empty segments of letters, digits and '-'"
    )]
    BadDid { id: String },
}

impl PartyId {
    pub fn parse(s: &str) -> Result<Self, PartyIdError> {
        if s.is_empty() {
            return Err(PartyIdError::Empty);
        }
        if s.len() > MAX_LEN {
            return Err(PartyIdError::TooLong);
        }
        if s.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(PartyIdError::BadCharacter(s.to_string()));
        }
        if let Some(rest) = s.strip_prefix(DID_PREFIX) {
            let ok = !rest.is_empty()
                && rest.split('.').all(|seg| {
                    !seg.is_empty()
                        && seg
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                });
            return if ok {
                Ok(PartyId(s.to_string()))
            } else {
                Err(PartyIdError::BadDid { id: s.to_string() })
            };
        }
        // A did in another case is no did:ishare and no other method either: refused, not a
        // second name for one party.
        if s.get(..4).is_some_and(|p| p.eq_ignore_ascii_case("did:"))
            && (!s.starts_with("did:")
                || s.get(..DID_PREFIX.len())
                    .is_some_and(|p| p.eq_ignore_ascii_case(DID_PREFIX)))
        {
            return Err(PartyIdError::BadDid { id: s.to_string() });
        }
        if let Some((method, value)) = s.split_once(':') {
            // Letters, digits and `.-_:` after a method of letters and digits: no `*`, `/`, `?`,
            // `#` or `%`, so that an identifier is never a pattern and stays one path segment
            // however a server decodes it.
            let method_ok = method.starts_with(|c: char| c.is_ascii_alphabetic())
                && method.chars().all(|c| c.is_ascii_alphanumeric());
            let value_ok = !value.is_empty()
                && value.starts_with(|c: char| c.is_ascii_alphanumeric())
                && value
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || ".-_:".contains(c));
            return match method_ok && value_ok {
                true => Ok(PartyId(s.to_string())),
                false => Err(PartyIdError::UnknownForm(s.to_string())),
            };
        }
        let mut parts = s.split('.');
        let (Some(scope), Some("EORI"), Some(number), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(PartyIdError::UnknownForm(s.to_string()));
        };
        if scope.len() < 2 || !scope.chars().all(|c| c.is_ascii_alphabetic()) {
            return Err(PartyIdError::BadScope {
                id: s.to_string(),
                scope: scope.to_string(),
            });
        }
        if number.is_empty()
            || number.len() > 35
            || !number.chars().all(|c| c.is_ascii_alphanumeric())
        {
            return Err(PartyIdError::BadNumber { id: s.to_string() });
        }
        Ok(PartyId(s.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether the id is a `did:ishare` (3.0's primary identifier).
    pub fn is_did_ishare(id: &str) -> bool {
        id.starts_with(DID_PREFIX)
    }

    /// Whether a certificate subject identifier (serialNumber or organizationIdentifier) names this
    /// party: the whole identifier, or for the did form its last segment (`NTRNL-10000000` in
    /// `did:ishare:EU.NL.NTRNL-10000000`), compared case-insensitively.
    pub fn matches_subject_identifier(&self, value: &str) -> bool {
        let value = value.trim();
        if value.eq_ignore_ascii_case(&self.0) {
            return true;
        }
        match self.0.strip_prefix(DID_PREFIX) {
            Some(rest) => {
                rest.eq_ignore_ascii_case(value)
                    || rest
                        .rsplit('.')
                        .next()
                        .is_some_and(|last| last.eq_ignore_ascii_case(value))
            }
            None => false,
        }
    }
}

impl fmt::Display for PartyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for PartyId {
    type Err = PartyIdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PartyId::parse(s)
    }
}

impl AsRef<str> for PartyId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for PartyId {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for PartyId {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl Serialize for PartyId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for PartyId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        PartyId::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eori_form_is_accepted() {
        for id in [
            "EU.EORI.NL000000001",
            "EU.EORI.NLSMARTPHON",
            "NL.EORI.DE12345",
        ] {
            assert_eq!(PartyId::parse(id).unwrap().as_str(), id);
        }
    }

    #[test]
    fn did_form_is_accepted() {
        let id = PartyId::parse("did:ishare:EU.NL.NTRNL-10000001").unwrap();
        assert!(id.matches_subject_identifier("NTRNL-10000001"));
        assert!(id.matches_subject_identifier("ntrnl-10000001"));
        assert!(!id.matches_subject_identifier("NTRNL-10000002"));
    }

    #[test]
    fn other_method_value_forms_are_accepted_as_written() {
        for id in [
            "did:web:example.com",
            "did:elsi:LEIXG-724500AZSGBRY55MNS59",
            "CoC:123456789",
        ] {
            assert_eq!(PartyId::parse(id).unwrap().as_str(), id);
        }
        for bad in [
            "did:web:*",
            "CoC:",
            ":123",
            "1x:2",
            "did:web:example.com/path",
            "CoC:12?3",
            "CoC:#1",
            "did:web:%2e%2e",
        ] {
            assert!(
                matches!(PartyId::parse(bad), Err(PartyIdError::UnknownForm(_))),
                "{bad}"
            );
        }
        // A did in another case is refused rather than read as another name.
        for bad in [
            "DID:ishare:EU.NL.NTRNL-1",
            "did:ISHARE:EU.NL.NTRNL-1",
            "Did:web:example.com",
        ] {
            assert!(
                matches!(PartyId::parse(bad), Err(PartyIdError::BadDid { .. })),
                "{bad}"
            );
        }
        // Only the did:ishare form names a certificate's organizationIdentifier by its last part.
        let web = PartyId::parse("did:web:example.com").unwrap();
        assert!(!web.matches_subject_identifier("com"));
    }

    #[test]
    fn malformed_identifiers_are_refused_with_their_reason() {
        assert_eq!(PartyId::parse(""), Err(PartyIdError::Empty));
        assert!(matches!(
            PartyId::parse("EU.EORI"),
            Err(PartyIdError::UnknownForm(_))
        ));
        assert!(matches!(
            PartyId::parse("EU.eori.NL1"),
            Err(PartyIdError::UnknownForm(_))
        ));
        assert!(matches!(
            PartyId::parse("E.EORI.NL1"),
            Err(PartyIdError::BadScope { .. })
        ));
        assert!(matches!(
            PartyId::parse("EU.EORI.NL-1"),
            Err(PartyIdError::BadNumber { .. })
        ));
        assert!(matches!(
            PartyId::parse("EU.EORI.NL 1"),
            Err(PartyIdError::BadCharacter(_))
        ));
        assert!(matches!(
            PartyId::parse("did:ishare:EU..X"),
            Err(PartyIdError::BadDid { .. })
        ));
        assert!(matches!(
            PartyId::parse(&format!("EU.EORI.{}", "1".repeat(200))),
            Err(PartyIdError::TooLong)
        ));
    }

    #[test]
    fn serde_validates() {
        let ok: PartyId = serde_json::from_str("\"EU.EORI.NL000000003\"").unwrap();
        assert_eq!(ok, "EU.EORI.NL000000003");
        let err = serde_json::from_str::<PartyId>("\"nope\"").unwrap_err();
        assert!(err.to_string().contains("neither of the form"));
    }
}
