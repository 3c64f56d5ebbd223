//! The capabilities payload: who a party is, its roles, and the features it offers per version.

use super::version::SchemeVersion;
use super::vocabulary::{self, feature};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// One offered feature (endpoint).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Feature {
    pub id: String,
    pub feature: String,
    pub description: String,
    pub url: String,
    /// Given for features that need a token; omitted for the token endpoint itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_endpoint: Option<String>,
}

impl Feature {
    /// A feature at `base` + `path`; a feature that needs a token names the token endpoint.
    pub fn at(
        id: &str,
        name: &str,
        description: &str,
        base: &str,
        path: &str,
        needs_token: bool,
    ) -> Self {
        Feature {
            id: id.to_string(),
            feature: name.to_string(),
            description: description.to_string(),
            url: format!("{base}{path}"),
            token_endpoint: needs_token.then(|| format!("{base}{}", vocabulary::TOKEN_PATH)),
        }
    }

    /// This feature as a service of `version` (2.1 and later).
    fn service(&self, version: SchemeVersion) -> Value {
        let framework = operation_id(&self.id, &self.url, version);
        let mut service = Map::new();
        let identifier = framework.unwrap_or(&self.feature);
        service.insert("identifier".into(), identifier.into());
        service.insert("title".into(), self.feature.clone().into());
        service.insert("description".into(), self.description.clone().into());
        service.insert("endpointURL".into(), self.url.clone().into());
        if let Some(token) = &self.token_endpoint {
            service.insert("tokenEndpoint".into(), token.clone().into());
        }
        service.insert("status".into(), "active".into());
        let (kind, version) = match framework {
            Some(_) => (
                "framework-defined",
                serde_json::json!({
                    "capabilityVersion": version.as_str(),
                    "compliesWithFrameworkVersions": [version.as_str()]
                }),
            ),
            None => (
                "self-defined",
                serde_json::json!({"capabilityVersion": "1.0"}),
            ),
        };
        service.insert("serviceType".into(), kind.into());
        service.insert("version".into(), version);
        Value::Object(service)
    }

    /// The features every participant offers publicly: its capabilities and its token endpoint.
    pub fn common(base: &str) -> Vec<Feature> {
        vec![
            Feature::at(
                feature::CAPABILITIES,
                "capabilities",
                "Retrieves the capabilities of this party",
                base,
                vocabulary::CAPABILITIES_PATH,
                true,
            ),
            Feature::at(
                feature::ACCESS_TOKEN,
                "access token",
                "Obtains an access token with a client assertion",
                base,
                vocabulary::TOKEN_PATH,
                false,
            ),
        ]
    }
}

/// The operationId of the scheme's 3.0 OpenAPI document for a feature of the scheme: the common
/// features by their id, the others by their path.
fn operation_id(id: &str, url: &str, version: SchemeVersion) -> Option<&'static str> {
    let path = url::Url::parse(url).ok().map(|u| u.path().to_string());
    let service = match (id, path.as_deref()) {
        (feature::CAPABILITIES, _) => Service::Capabilities,
        (feature::ACCESS_TOKEN, _) => Service::Token,
        (_, Some(vocabulary::DELEGATION_PATH)) => Service::Delegation,
        (_, Some(vocabulary::PARTIES_PATH)) => Service::Parties,
        (_, Some(vocabulary::TRUSTED_LIST_PATH_3 | vocabulary::TRUSTED_LIST_PATH)) => {
            Service::TrustedList
        }
        _ => return None,
    };
    Some(service.operation_id(version))
}

/// The scheme's own services, which a capabilities answer identifies by the operationId of the
/// version's document: 3.0 names them, 2.1 and 2.2 give their paths.
#[derive(Clone, Copy)]
enum Service {
    Capabilities,
    Token,
    Delegation,
    Parties,
    TrustedList,
}

impl Service {
    fn operation_id(self, version: SchemeVersion) -> &'static str {
        match (self, version.camel_case()) {
            (Service::Capabilities, true) => "get-capabilities-token",
            (Service::Token, true) => "request-oauth-token",
            (Service::Delegation, true) => "request-delegation-evidence",
            (Service::Parties, true) => "get-parties-list-token",
            (Service::TrustedList, true) => "get-trusted-list",
            (Service::Capabilities, false) => "/capabilities",
            (Service::Token, false) => "/connect/token",
            (Service::Delegation, false) => "/delegation",
            (Service::Parties, false) => "/parties",
            (Service::TrustedList, false) => "/trusted_list",
        }
    }
}

/// The identifier of the token service in a capabilities answer of `version` (2.1 and later).
pub fn token_service(version: SchemeVersion) -> &'static str {
    Service::Token.operation_id(version)
}

/// Features by access level.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SupportedFeatures {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public: Option<Vec<Feature>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restricted: Option<Vec<Feature>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private: Option<Vec<Feature>>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SupportedVersion {
    pub version: String,
    pub supported_features: Vec<SupportedFeatures>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Role {
    pub role: String,
}

/// The capabilities of a party. The roles member is named after the scheme (`ishare_roles` for
/// iSHARE, `scheme_roles` in the neutral specification); any `*_roles` member is read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapabilitiesInfo {
    pub scheme: String,
    pub party_id: String,
    pub roles: Vec<Role>,
    pub supported_versions: Vec<SupportedVersion>,
}

impl CapabilitiesInfo {
    /// The capabilities of a party in one role at `base`: the common public features, and the
    /// restricted ones (for token holders; None for anonymous callers), in the version we support.
    pub fn of_party(
        scheme: &str,
        party_id: &str,
        role: vocabulary::Role,
        base: &str,
        restricted: Option<Vec<Feature>>,
    ) -> Self {
        CapabilitiesInfo {
            scheme: scheme.to_string(),
            party_id: party_id.to_string(),
            roles: vec![Role {
                role: role.as_str().to_string(),
            }],
            supported_versions: vec![SupportedVersion {
                version: vocabulary::SPEC_VERSION.to_string(),
                supported_features: vec![SupportedFeatures {
                    public: Some(Feature::common(base)),
                    restricted,
                    private: None,
                }],
            }],
        }
    }

    fn roles_member(&self) -> String {
        format!("{}_roles", self.scheme.to_lowercase())
    }

    /// The members of the payload as a JSON object.
    pub fn to_map(&self) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("party_id".into(), Value::String(self.party_id.clone()));
        m.insert(
            self.roles_member(),
            serde_json::to_value(&self.roles).unwrap_or(Value::Null),
        );
        m.insert(
            "supported_versions".into(),
            serde_json::to_value(&self.supported_versions).unwrap_or(Value::Null),
        );
        m
    }

    /// The claims of a capabilities token as `version` writes them: 3.0's `capabilitiesInfo`
    /// and 2.1's and 2.2's `capabilities_info` of services ([`Self::services`]); before, the
    /// payload nested as `capabilities_info` (what scheme clients read) and its members at the top
    /// as well (the generic reference's shape), its features listed under that version.
    pub fn token_claims(&self, version: SchemeVersion) -> Map<String, Value> {
        if version.capabilities_as_services() {
            let name = match version.camel_case() {
                true => "capabilitiesInfo",
                false => "capabilities_info",
            };
            return Map::from_iter([(name.to_string(), self.services(version))]);
        }
        let mut written = self.clone();
        for v in &mut written.supported_versions {
            v.version = version.as_str().to_string();
        }
        let mut m = written.to_map();
        m.insert("capabilities_info".into(), Value::Object(written.to_map()));
        m
    }

    /// The payload as services (2.1 and later): no party id or roles, `publicServices` and (for
    /// token holders) `restrictedServices`. A service of the scheme's own (capabilities, token,
    /// delegation …) is identified by its operationId in the version's OpenAPI document and is
    /// framework-defined; any other by its name, self-defined.
    pub fn services(&self, version: SchemeVersion) -> Value {
        let services = |features: &[Feature]| -> Value {
            features.iter().map(|f| f.service(version)).collect()
        };
        let mut public = Vec::new();
        let mut restricted = Vec::new();
        for f in self
            .supported_versions
            .iter()
            .flat_map(|v| v.supported_features.iter())
        {
            public.extend(f.public.iter().flatten().cloned());
            restricted.extend(f.restricted.iter().flatten().cloned());
        }
        let mut info = Map::new();
        info.insert("publicServices".into(), services(&public));
        if !restricted.is_empty() {
            info.insert("restrictedServices".into(), services(&restricted));
        }
        Value::Object(info)
    }

    /// Every feature of every version and level, for lookups by clients.
    pub fn features(&self) -> impl Iterator<Item = &Feature> {
        self.supported_versions
            .iter()
            .flat_map(|v| v.supported_features.iter())
            .flat_map(|f| {
                [&f.public, &f.restricted, &f.private]
                    .into_iter()
                    .flatten()
                    .flatten()
            })
    }
}

impl Serialize for CapabilitiesInfo {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_map().serialize(s)
    }
}

impl<'de> Deserialize<'de> for CapabilitiesInfo {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut m = Map::<String, Value>::deserialize(d)?;
        if let Some(Value::Object(inner)) = m.remove("capabilities_info") {
            m = inner;
        }
        let party_id = m
            .get("party_id")
            .and_then(Value::as_str)
            .ok_or_else(|| D::Error::custom("capabilities lack party_id"))?
            .to_string();
        let (scheme, roles) = match m.iter().find(|(k, _)| k.ends_with("_roles")) {
            Some((k, v)) => (
                k.trim_end_matches("_roles").to_string(),
                serde_json::from_value(v.clone()).map_err(D::Error::custom)?,
            ),
            None => (String::new(), Vec::new()),
        };
        let supported_versions = serde_json::from_value(
            m.remove("supported_versions")
                .unwrap_or(Value::Array(vec![])),
        )
        .map_err(D::Error::custom)?;
        Ok(CapabilitiesInfo {
            scheme,
            party_id,
            roles,
            supported_versions,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn example() -> Value {
        json!({
            "party_id": "EU.EORI.NL000000003",
            "scheme_roles": [{"role": "ServiceProvider"}],
            "supported_versions": [{
                "version": "1.10",
                "supported_features": [{
                    "public": [
                        {"id": "A51D413F-B3CC-477D-96C4-E37A9003BFE3", "feature": "capabilities", "description": "Retrieves capabilities", "url": "https://sp.example/capabilities", "token_endpoint": "https://sp.example/connect/token"},
                        {"id": "49F6E662-F055-4AAC-96B2-E833FA5F5414", "feature": "access token", "description": "Obtains an access token", "url": "https://sp.example/connect/token"}
                    ],
                    "restricted": [
                        {"id": "05357B1C-0000-0000-0000-000000000000", "feature": "boom access", "description": "A service", "url": "https://sp.example/boom_access", "token_endpoint": "https://sp.example/connect/token"}
                    ]
                }]
            }]
        })
    }

    #[test]
    fn spec_example_round_trips() {
        let c: CapabilitiesInfo = serde_json::from_value(example()).unwrap();
        assert_eq!(c.scheme, "scheme");
        assert_eq!(c.features().count(), 3);
        assert_eq!(serde_json::to_value(&c).unwrap(), example());
    }

    #[test]
    fn roles_member_follows_the_scheme_name_and_the_token_nests_a_copy() {
        let mut c: CapabilitiesInfo = serde_json::from_value(example()).unwrap();
        c.scheme = "iSHARE".into();
        let claims = Value::Object(c.token_claims(SchemeVersion::V2_0));
        assert_eq!(claims["ishare_roles"][0]["role"], "ServiceProvider");
        assert_eq!(
            claims["capabilities_info"]["ishare_roles"][0]["role"],
            "ServiceProvider"
        );
        let back: CapabilitiesInfo = serde_json::from_value(claims).unwrap();
        assert_eq!(back.scheme, "ishare");
        assert_eq!(back.roles, c.roles);
        // The features under the version written.
        for (written, given) in back.supported_versions.iter().zip(&c.supported_versions) {
            assert_eq!(written.version, "2.0");
            assert_eq!(written.supported_features, given.supported_features);
        }
    }

    #[test]
    fn from_2_1_capabilities_are_services_named_by_the_versions_operation_ids() {
        let c = CapabilitiesInfo::of_party(
            "iSHARE",
            "EU.EORI.NL000000003",
            vocabulary::Role::ServiceProvider,
            "https://sp.example",
            None,
        );
        for (version, member, token) in [
            (SchemeVersion::V2_1, "capabilities_info", "/connect/token"),
            (SchemeVersion::V2_2, "capabilities_info", "/connect/token"),
            (
                SchemeVersion::V3_0,
                "capabilitiesInfo",
                "request-oauth-token",
            ),
        ] {
            let claims = c.token_claims(version);
            assert_eq!(claims.keys().collect::<Vec<_>>(), [member]);
            let public = claims[member]["publicServices"].as_array().unwrap();
            let ids: Vec<&str> = public
                .iter()
                .map(|s| s["identifier"].as_str().unwrap())
                .collect();
            assert!(ids.contains(&token), "{version:?}: {ids:?}");
            assert_eq!(token_service(version), token);
            assert_eq!(
                public[0]["version"]["compliesWithFrameworkVersions"],
                serde_json::json!([version.as_str()])
            );
        }
        let older = c.token_claims(SchemeVersion::V1_9);
        assert_eq!(older["supported_versions"][0]["version"], "1.9");
    }
}
