//! The scheme's fixed words, each written once: roles, paths, the members that carry signed answers,
//! claim and header names, actions, the ids of the common capabilities features, and the version.

use http::Method;

/// The token endpoint real clients use (`urljoin(base, "/connect/token")`), whatever else is offered.
pub const TOKEN_PATH: &str = "/connect/token";
/// Every participant's capabilities endpoint.
pub const CAPABILITIES_PATH: &str = "/capabilities";
/// The delegation endpoint of authorisation registries and entitled parties.
pub const DELEGATION_PATH: &str = "/delegation";
/// The scheme owner's party search and its trusted list (3.0: `/trustedList`).
pub const PARTIES_PATH: &str = "/parties";
pub const TRUSTED_LIST_PATH: &str = "/trusted_list";
pub const TRUSTED_LIST_PATH_3: &str = "/trustedList";
/// 3.0's participant registry: the scheme's data spaces and its frameworks (a party's claims are
/// at `/parties/{partyId}/claims`).
pub const DATASPACES_PATH: &str = "/dataspaces";
pub const FRAMEWORKS_PATH: &str = "/frameworks";

/// The version of the specification our capabilities list.
pub const SPEC_VERSION: &str = "2.0";

/// The claim of a delegation token that holds the evidence.
pub const DELEGATION_EVIDENCE_CLAIM: &str = "delegationEvidence";

/// The request header carrying delegation evidence (one or more delegation tokens), as 1.9 to
/// 2.2 name it, and as 3.0 does. Both are read, whatever version the consumer speaks; a request
/// may carry one of them.
pub const EVIDENCE_HEADER: &str = "delegation_evidence";
pub const EVIDENCE_HEADER_3: &str = "delegationEvidence";
pub const EVIDENCE_HEADERS: [&str; 2] = [EVIDENCE_HEADER, EVIDENCE_HEADER_3];
/// The request header carrying the original consumer's client assertion (the broker pattern),
/// as 1.9 to 2.2 name it, and as 3.0 does.
pub const BROKER_HEADER: &str = "service_consumer_assertion";
pub const BROKER_HEADER_3: &str = "serviceConsumerAssertion";
pub const BROKER_HEADERS: [&str; 2] = [BROKER_HEADER, BROKER_HEADER_3];
/// Every name of the scheme's credentials in a request.
pub const CREDENTIAL_HEADERS: [&str; 4] = [
    EVIDENCE_HEADER,
    EVIDENCE_HEADER_3,
    BROKER_HEADER,
    BROKER_HEADER_3,
];
/// The licence headers of a service answer (and the purpose a consumer asks for).
pub const LICENSE_PURPOSE: &str = "LicensePurpose";
pub const LICENSE_SUB_LICENSE: &str = "LicenseSubLicense";
pub const LICENSE_END_DATE: &str = "LicenseEndDate";
pub const LICENCE_HEADERS: [&str; 3] = [LICENSE_PURPOSE, LICENSE_SUB_LICENSE, LICENSE_END_DATE];

/// The JSON member each signed answer comes in, and (`_3`) 3.0's name of it.
pub mod member {
    pub const CAPABILITIES: &str = "capabilities_token";
    pub const CAPABILITIES_3: &str = "capabilitiesToken";
    pub const PARTIES: &str = "parties_token";
    pub const PARTIES_3: &str = "partiesToken";
    pub const PARTY: &str = "party_token";
    pub const PARTY_3: &str = "partyToken";
    pub const TRUSTED_LIST: &str = "trusted_list_token";
    pub const TRUSTED_LIST_3: &str = "trustedListToken";
    pub const DELEGATION: &str = "delegation_token";
    pub const DELEGATION_3: &str = "delegationToken";
    pub const USERINFO: &str = "userinfo_token";
    pub const USERINFO_3: &str = "userinfoToken";
    pub const VERSIONS: &str = "versions_token";
    /// 3.0's participant registry only: a party's claims, the data spaces and the frameworks.
    pub const CLAIMS_3: &str = "claimsToken";
    pub const DATASPACES_3: &str = "dataspacesToken";
    pub const FRAMEWORKS_3: &str = "frameworksToken";

    /// The same member under the other versions' name: `partyToken` for `party_token`, and back.
    pub fn counterpart(member: &str) -> Option<&'static str> {
        [
            (CAPABILITIES, CAPABILITIES_3),
            (PARTIES, PARTIES_3),
            (PARTY, PARTY_3),
            (TRUSTED_LIST, TRUSTED_LIST_3),
            (DELEGATION, DELEGATION_3),
            (USERINFO, USERINFO_3),
        ]
        .into_iter()
        .find_map(|(old, new)| match member {
            m if m == old => Some(new),
            m if m == new => Some(old),
            _ => None,
        })
    }
}

/// The ids of the features every participant lists (from the scheme's examples).
pub mod feature {
    pub const CAPABILITIES: &str = "A51D413F-B3CC-477D-96C4-E37A9003BFE3";
    pub const ACCESS_TOKEN: &str = "49F6E662-F055-4AAC-96B2-E833FA5F5414";
    pub const ME: &str = "105D19C7-BB2A-4B5A-A1B3-5AB1D2E5A6F1";
}

/// A role of a party, as party records and capabilities write it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    SchemeOwner,
    ServiceConsumer,
    ServiceProvider,
    EntitledParty,
    AuthorisationRegistry,
    IdentityProvider,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::SchemeOwner => "SchemeOwner",
            Role::ServiceConsumer => "ServiceConsumer",
            Role::ServiceProvider => "ServiceProvider",
            Role::EntitledParty => "EntitledParty",
            Role::AuthorisationRegistry => "AuthorisationRegistry",
            Role::IdentityProvider => "IdentityProvider",
        }
    }
}

/// The actions of the scheme, written `<scheme>.<ACTION>` (`iSHARE.READ`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Read,
    Create,
    Update,
    Delete,
}

impl Action {
    /// The action a request needs by default, by its method: GET/HEAD read, POST creates, PUT/PATCH
    /// update, DELETE deletes; other methods have none.
    pub fn for_method(method: &Method) -> Option<Action> {
        match *method {
            Method::GET | Method::HEAD => Some(Action::Read),
            Method::POST => Some(Action::Create),
            Method::PUT | Method::PATCH => Some(Action::Update),
            Method::DELETE => Some(Action::Delete),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Action::Read => "READ",
            Action::Create => "CREATE",
            Action::Update => "UPDATE",
            Action::Delete => "DELETE",
        }
    }

    /// The action as evidence writes it for `scheme`.
    pub fn qualified(self, scheme: &str) -> String {
        format!("{scheme}.{}", self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_map_to_the_scheme_actions() {
        let action = |m: Method| Action::for_method(&m).map(|a| a.qualified("iSHARE"));
        assert_eq!(action(Method::GET).as_deref(), Some("iSHARE.READ"));
        assert_eq!(action(Method::HEAD).as_deref(), Some("iSHARE.READ"));
        assert_eq!(action(Method::POST).as_deref(), Some("iSHARE.CREATE"));
        assert_eq!(action(Method::PUT).as_deref(), Some("iSHARE.UPDATE"));
        assert_eq!(action(Method::PATCH).as_deref(), Some("iSHARE.UPDATE"));
        assert_eq!(action(Method::DELETE).as_deref(), Some("iSHARE.DELETE"));
        assert_eq!(action(Method::OPTIONS), None);
    }
}
