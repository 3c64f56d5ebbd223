//! The capabilities payload: who a party is, its roles, and the features it offers per version.

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

    /// This feature as a 3.0 service.
    fn service_3_0(&self) -> Value {
        let framework = operation_id(&self.id, &self.url);
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
                serde_json::json!({"capabilityVersion": "3.0", "compliesWithFrameworkVersions": ["3.0"]}),
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
fn operation_id(id: &str, url: &str) -> Option<&'static str> {
    let by_id = match id {
        feature::CAPABILITIES => Some("get-capabilities-token"),
        feature::ACCESS_TOKEN => Some("request-oauth-token"),
        _ => None,
    };
    let path = url::Url::parse(url).ok().map(|u| u.path().to_string());
    by_id.or(match path.as_deref() {
        Some(vocabulary::DELEGATION_PATH) => Some("request-delegation-evidence"),
        Some(vocabulary::PARTIES_PATH) => Some("get-parties-list-token"),
        Some(vocabulary::TRUSTED_LIST_PATH_3) => Some("get-trusted-list"),
        _ => None,
    })
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

    /// The claims of a `capabilities_token`: the payload nested as `capabilities_info` (what scheme
    /// clients read) and its members at the top as well (the generic reference's shape).
    pub fn token_claims(&self) -> Map<String, Value> {
        let mut m = self.to_map();
        m.insert("capabilities_info".into(), Value::Object(self.to_map()));
        m
    }

    /// The payload as 3.0 writes it (`capabilitiesInfo`): no party id or roles, and the features
    /// as services, `publicServices` and (for token holders) `restrictedServices`. A service of
    /// the scheme's own (capabilities, token, delegation …) is identified by its operationId in
    /// the scheme's OpenAPI document and is framework-defined; any other by its name, self-defined.
    pub fn to_3_0(&self) -> Value {
        let services =
            |features: &[Feature]| -> Value { features.iter().map(Feature::service_3_0).collect() };
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

    /// The claims of a 3.0 `capabilitiesToken`: `capabilitiesInfo`.
    pub fn token_claims_3_0(&self) -> Map<String, Value> {
        Map::from_iter([("capabilitiesInfo".to_string(), self.to_3_0())])
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
        let claims = Value::Object(c.token_claims());
        assert_eq!(claims["ishare_roles"][0]["role"], "ServiceProvider");
        assert_eq!(
            claims["capabilities_info"]["ishare_roles"][0]["role"],
            "ServiceProvider"
        );
        let back: CapabilitiesInfo = serde_json::from_value(claims).unwrap();
        assert_eq!(back.scheme, "ishare");
        assert_eq!(
            (back.roles, back.supported_versions),
            (c.roles, c.supported_versions)
        );
    }
}
