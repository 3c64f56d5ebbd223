//! The versions of the scheme a peer may speak, and what each changes for a service provider:
//! which signing algorithms, what an evidence token's `sub` says, which members evidence may carry,
//! and whether evidence that names no service provider binds to us.

use std::fmt;

/// A version of the scheme, as configured per peer (`scheme_version`). Ordered: a later version
/// is greater.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SchemeVersion {
    /// 1.9 and 1.10: EORI ids, RS256, `delegation_evidence`, licences as strings.
    #[default]
    V1_9,
    /// 2.0: the rich party record, generic paths.
    V2_0,
    /// 2.1: RS384 and RS512; an evidence token's `sub` is its issuer.
    V2_1,
    /// 2.2: licences as `allOf`/`anyOf` expressions.
    V2_2,
    /// 3.0: conditions in rules, `context` in policy targets, no `serviceProviders`.
    V3_0,
}

/// Every version, in order, for messages and documentation.
pub const ALL: [SchemeVersion; 5] = [
    SchemeVersion::V1_9,
    SchemeVersion::V2_0,
    SchemeVersion::V2_1,
    SchemeVersion::V2_2,
    SchemeVersion::V3_0,
];

impl SchemeVersion {
    /// `1.9` (also `1.10`), `2.0`, `2.1`, `2.2` or `3.0`.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "1.9" | "1.10" => Ok(SchemeVersion::V1_9),
            "2.0" => Ok(SchemeVersion::V2_0),
            "2.1" => Ok(SchemeVersion::V2_1),
            "2.2" => Ok(SchemeVersion::V2_2),
            "3.0" => Ok(SchemeVersion::V3_0),
            other => Err(format!(
                "{other:?} is not a scheme version: use one of {}",
                ALL.map(|v| format!("\"{v}\"")).join(", ")
            )),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SchemeVersion::V1_9 => "1.9",
            SchemeVersion::V2_0 => "2.0",
            SchemeVersion::V2_1 => "2.1",
            SchemeVersion::V2_2 => "2.2",
            SchemeVersion::V3_0 => "3.0",
        }
    }

    /// Endpoints at the generic paths (`/connect/token`, `/connect/authorize`, `/connect/userinfo`)
    /// rather than under `/oauth2.0` and `/openid_connect1.0` (from 2.0).
    pub fn generic_paths(self) -> bool {
        self >= SchemeVersion::V2_0
    }

    /// Capabilities as services (`publicServices`, `restrictedServices`), each identified by the
    /// operationId of the version's own document (from 2.1); before, features per version.
    pub fn capabilities_as_services(self) -> bool {
        self >= SchemeVersion::V2_1
    }

    /// A policy's target may name the service providers it is for (`environment.serviceProviders`:
    /// before 3.0, which dropped it).
    pub fn policies_name_service_providers(self) -> bool {
        self < SchemeVersion::V3_0
    }

    /// RS384 and RS512 beside RS256 (from 2.1).
    pub fn signs_with_rs384_rs512(self) -> bool {
        self >= SchemeVersion::V2_1
    }

    /// An evidence token's `sub` is its issuer (from 2.1); before, the access subject.
    pub fn evidence_sub_is_issuer(self) -> bool {
        self >= SchemeVersion::V2_1
    }

    /// Licences may be `allOf`/`anyOf` expressions (from 2.2); before, identifiers only.
    pub fn licence_expressions(self) -> bool {
        self >= SchemeVersion::V2_2
    }

    /// A mask's policies name the service providers asking (`target.environment.serviceProviders`):
    /// 1.9's. The 2.0 to 2.2 documents give a mask's policy target its resource and actions
    /// only (`Policy_request_evidence`), 3.0's a `context`.
    pub fn masks_name_service_providers(self) -> bool {
        self < SchemeVersion::V2_0
    }

    /// Rules may carry `conditions` and policy targets a `context` (3.0).
    pub fn conditions(self) -> bool {
        self >= SchemeVersion::V3_0
    }

    /// Paths, answers' members, claims and headers are written in camelCase (`/trustedList`,
    /// `partyToken`), and party records are made of claims (3.0).
    pub fn camel_case(self) -> bool {
        self >= SchemeVersion::V3_0
    }

    /// A policy without `environment.serviceProviders` may be served by any service provider
    /// (before 3.0, whose evidence has no such member and so binds by no absence).
    pub fn binds_by_absence(self) -> bool {
        self < SchemeVersion::V3_0
    }
}

impl fmt::Display for SchemeVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_as_written_and_order_by_release() {
        for v in ALL {
            assert_eq!(SchemeVersion::parse(v.as_str()), Ok(v));
        }
        assert_eq!(SchemeVersion::parse("1.10"), Ok(SchemeVersion::V1_9));
        for bad in ["3", "v3.0", "3.0.0", "", "2.x"] {
            assert!(SchemeVersion::parse(bad).is_err(), "{bad}");
        }
        assert!(ALL.windows(2).all(|w| w[0] < w[1]));
        assert!(!SchemeVersion::V2_0.signs_with_rs384_rs512());
        assert!(SchemeVersion::V2_1.signs_with_rs384_rs512());
        assert!(SchemeVersion::V2_2.binds_by_absence());
        assert!(!SchemeVersion::V3_0.binds_by_absence());
    }
}
