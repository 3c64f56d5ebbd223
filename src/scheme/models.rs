//! Serde models of the scheme's payloads: common claims, party records, trusted list, certificate
//! validation, userinfo and the OAuth token response. Tolerant where real producers differ from the
//! documents (alternative member names, extra members, both nestings of party payloads); unknown members
//! are kept so a record round-trips unchanged.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};
use time::format_description::well_known::Rfc3339;
use time::macros::format_description;
use time::{Date, OffsetDateTime, PrimitiveDateTime};

/// An ISO 8601 timestamp as the scheme writes them (with or without a trailing `Z`; no zone means UTC).
/// The original text is kept so that a record serialises back exactly as it was read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemeTime {
    text: String,
    unix: i64,
}

impl SchemeTime {
    pub fn parse(text: &str) -> Option<Self> {
        let t = text.trim();
        let unix = if let Ok(dt) = OffsetDateTime::parse(t, &Rfc3339) {
            dt.unix_timestamp()
        } else if let Ok(dt) = PrimitiveDateTime::parse(
            t.trim_end_matches(['Z', 'z']),
            format_description!(
                "[year]-[month]-[day]T[hour]:[minute]:[second][optional [.[subsecond]]]"
            ),
        ) {
            dt.assume_utc().unix_timestamp()
        } else if let Ok(d) = Date::parse(t, format_description!("[year]-[month]-[day]")) {
            d.midnight().assume_utc().unix_timestamp()
        } else {
            return None;
        };
        Some(SchemeTime {
            text: text.to_string(),
            unix,
        })
    }

    /// The canonical form we emit: RFC 3339 in UTC with a trailing `Z`.
    pub fn from_unix(unix: i64) -> Self {
        let dt = OffsetDateTime::from_unix_timestamp(unix).unwrap_or(OffsetDateTime::UNIX_EPOCH);
        let text = dt
            .format(&Rfc3339)
            .unwrap_or_else(|_| "1970-01-01T00:00:00Z".into());
        SchemeTime { text, unix }
    }

    pub fn unix(&self) -> i64 {
        self.unix
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl Serialize for SchemeTime {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for SchemeTime {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        SchemeTime::parse(&s)
            .ok_or_else(|| serde::de::Error::custom(format!("not an ISO 8601 timestamp: {s:?}")))
    }
}

/// A member the gateway does not decide on: read when it has the expected type, else left out
/// (producers differ: `loa` as text, `null` for a name, …).
fn lenient<'de, D: Deserializer<'de>, T: serde::de::DeserializeOwned>(
    d: D,
) -> Result<Option<T>, D::Error> {
    Ok(serde_json::from_value(Value::deserialize(d)?).ok())
}

/// Text the gateway does not decide on: anything else reads as empty.
fn lenient_text<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(lenient(d)?.unwrap_or_default())
}

/// A date the gateway decides on: absent, `null` or empty means none; anything else must be a date.
fn optional_time<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SchemeTime>, D::Error> {
    match Option::<String>::deserialize(d)? {
        None => Ok(None),
        Some(text) if text.trim().is_empty() => Ok(None),
        Some(text) => SchemeTime::parse(&text).map(Some).ok_or_else(|| {
            serde::de::Error::custom(format!("not an ISO 8601 timestamp: {text:?}"))
        }),
    }
}

/// Read a nested member of a payload, naming the member (`prefix` + its path) when it cannot be read.
fn member<T: serde::de::DeserializeOwned, E: serde::de::Error>(
    prefix: &str,
    value: Value,
) -> Result<T, E> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let at = match (prefix.is_empty(), path.as_str()) {
            (true, _) => path.clone(),
            (false, ".") => prefix.to_string(),
            (false, _) => format!("{prefix}.{path}"),
        };
        E::custom(format!("{at}: {}", e.inner()))
    })
}

/// The claims every signed response token of the scheme carries, around a payload `T`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Claims<T> {
    pub iss: String,
    pub sub: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aud: Option<String>,
    pub jti: String,
    pub iat: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbf: Option<i64>,
    pub exp: i64,
    #[serde(flatten)]
    pub payload: T,
}

/// `adherence` of a party record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Adherence {
    pub status: String,
    #[serde(
        default,
        deserialize_with = "optional_time",
        skip_serializing_if = "Option::is_none"
    )]
    pub start_date: Option<SchemeTime>,
    #[serde(
        default,
        deserialize_with = "optional_time",
        skip_serializing_if = "Option::is_none"
    )]
    pub end_date: Option<SchemeTime>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Adherence {
    /// `Active`, with `now` inside `[start_date, end_date)`; an absent end date is open-ended.
    pub fn is_active_at(&self, now: i64) -> bool {
        self.status.eq_ignore_ascii_case("active")
            && self.start_date.as_ref().is_none_or(|s| s.unix() <= now)
            && self.end_date.as_ref().is_none_or(|e| now < e.unix())
    }
}

/// One certification (role) of a party. Members the gateway does not decide on (`loa`, …) stay in
/// `extra` as they came.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Certification {
    pub role: String,
    #[serde(
        default,
        deserialize_with = "optional_time",
        skip_serializing_if = "Option::is_none"
    )]
    pub start_date: Option<SchemeTime>,
    #[serde(
        default,
        deserialize_with = "optional_time",
        skip_serializing_if = "Option::is_none"
    )]
    pub end_date: Option<SchemeTime>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Certification {
    pub fn is_valid_at(&self, now: i64) -> bool {
        self.start_date.as_ref().is_none_or(|s| s.unix() <= now)
            && self.end_date.as_ref().is_none_or(|e| now < e.unix())
    }
}

/// A certificate registered for a party at the scheme owner.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PartyCertificate {
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub subject_name: Option<String>,
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub certificate_type: Option<String>,
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub enabled_from: Option<SchemeTime>,
    /// Base64 DER of the certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub x5c: Option<String>,
    /// SHA-256 thumbprint, hex; producers write `x5t#s256` or `x5t#S256`.
    #[serde(
        default,
        rename = "x5t#s256",
        alias = "x5t#S256",
        skip_serializing_if = "Option::is_none"
    )]
    pub x5t_s256: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// An authorisation registry named in a party record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthRegistryRef {
    #[serde(default, alias = "authorizationRegistryID")]
    pub id: String,
    #[serde(
        default,
        alias = "authorizationRegistryName",
        deserialize_with = "lenient_text"
    )]
    pub name: String,
    #[serde(default, alias = "authorizationRegistryUrl")]
    pub url: String,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "dataspaceID",
        deserialize_with = "lenient"
    )]
    pub dataspace_id: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "dataspaceName",
        deserialize_with = "lenient"
    )]
    pub dataspace_name: Option<String>,
    /// The service provider the data owner designated this registry for (3.0, RFC056); None:
    /// for every one.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "serviceProviderPartyId",
        deserialize_with = "lenient"
    )]
    pub service_provider: Option<String>,
}

/// A party record (`party_info`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PartyInfo {
    pub party_id: String,
    #[serde(default, deserialize_with = "lenient_text")]
    pub party_name: String,
    pub adherence: Adherence,
    #[serde(default)]
    pub certifications: Vec<Certification>,
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub capability_url: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub certificates: Vec<PartyCertificate>,
    /// `auth_registries` in the documents.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub auth_registries: Vec<AuthRegistryRef>,
    /// `authregistery` in production satellites, with other member names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub authregistery: Vec<AuthRegistryRef>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl PartyInfo {
    /// The authorisation registries of this party, from whichever member the producer used.
    pub fn registries(&self) -> impl Iterator<Item = &AuthRegistryRef> {
        self.auth_registries.iter().chain(self.authregistery.iter())
    }
}

/// The payload of a `party_token`: nested as `party_info` (schema) or flat (example).
#[derive(Clone, Debug, PartialEq)]
pub struct PartyPayload(pub PartyInfo);

impl<'de> Deserialize<'de> for PartyPayload {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut v = Map::<String, Value>::deserialize(d)?;
        let info = match v.remove("party_info") {
            Some(inner) => inner,
            None => Value::Object(v),
        };
        member("party_info", info).map(PartyPayload)
    }
}

impl Serialize for PartyPayload {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Nested<'a> {
            party_info: &'a PartyInfo,
        }
        Nested {
            party_info: &self.0,
        }
        .serialize(s)
    }
}

/// `parties_info`: the matches of a parties search, `count` over all pages, `data` one page.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PartiesInfo {
    pub count: u64,
    pub data: Vec<PartyInfo>,
}

/// The payload of a `parties_token` in the three shapes the documents show: a nested `parties_info`
/// object, `count`/`data` at the top, or `parties_info` as an array (of records, or of count/data pages).
#[derive(Clone, Debug, PartialEq)]
pub struct PartiesPayload(pub PartiesInfo);

impl<'de> Deserialize<'de> for PartiesPayload {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut v = Map::<String, Value>::deserialize(d)?;
        let info = match v.remove("parties_info") {
            Some(Value::Object(obj)) => member("parties_info", Value::Object(obj))?,
            Some(Value::Array(items)) => {
                let mut data = Vec::new();
                let mut count = 0u64;
                for item in items {
                    if item.get("data").is_some() {
                        let page: PartiesInfo = member("parties_info[]", item)?;
                        count = count.max(page.count);
                        data.extend(page.data);
                    } else {
                        data.push(member("parties_info[]", item)?);
                    }
                }
                PartiesInfo {
                    count: count.max(data.len() as u64),
                    data,
                }
            }
            Some(other) => {
                return Err(D::Error::custom(format!(
                    "parties_info must be an object or an array, found {other}"
                )))
            }
            None => member("", Value::Object(v))?,
        };
        Ok(PartiesPayload(info))
    }
}

impl Serialize for PartiesPayload {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Nested<'a> {
            parties_info: &'a PartiesInfo,
        }
        Nested {
            parties_info: &self.0,
        }
        .serialize(s)
    }
}

/// One certificate authority on the scheme owner's trusted list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrustedListEntry {
    #[serde(default)]
    pub subject: String,
    pub certificate_fingerprint: String,
    pub validity: String,
    pub status: String,
}

impl TrustedListEntry {
    /// `valid` and `granted`, in either capitalisation producers use.
    pub fn is_granted(&self) -> bool {
        self.validity.eq_ignore_ascii_case("valid") && self.status.eq_ignore_ascii_case("granted")
    }
}

/// The payload of a `trusted_list_token`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrustedListPayload {
    pub trusted_list: Vec<TrustedListEntry>,
}

/// The payload of a 3.0 `trustedListToken`: `trustedList`, its entries' fingerprint as
/// `certificateFingerprint`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TrustedListPayload3 {
    pub trusted_list: Vec<TrustedListEntry3>,
}

/// A trusted-list entry as 3.0 writes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TrustedListEntry3 {
    #[serde(default)]
    pub subject: String,
    pub certificate_fingerprint: String,
    pub validity: String,
    pub status: String,
}

impl From<TrustedListEntry3> for TrustedListEntry {
    fn from(e: TrustedListEntry3) -> Self {
        TrustedListEntry {
            subject: e.subject,
            certificate_fingerprint: e.certificate_fingerprint,
            validity: e.validity,
            status: e.status,
        }
    }
}

impl From<TrustedListEntry> for TrustedListEntry3 {
    fn from(e: TrustedListEntry) -> Self {
        TrustedListEntry3 {
            subject: e.subject,
            certificate_fingerprint: e.certificate_fingerprint,
            validity: e.validity,
            status: e.status,
        }
    }
}

/// One version of the scheme's specification a scheme owner lists at `/versions`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VersionInfo {
    pub version_name: String,
    pub valid_from: String,
    #[serde(default)]
    pub valid_to: Option<String>,
    pub version_status: String,
}

/// The payload of a `versions_token`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VersionsPayload {
    pub versions_info: Vec<VersionInfo>,
}

/// The answer of `/certificate_validation`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CertificateResponse {
    pub date_time: SchemeTime,
    pub certificate_fingerprint: String,
    pub validity: bool,
}

/// The userinfo payload of an identity provider: the subject, the attributes of the scope, and
/// delegation evidence.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UserInfo {
    pub sub: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delegation_token: Option<Value>,
    #[serde(flatten)]
    pub attributes: Map<String, Value>,
}

/// The OAuth 2.0 token response.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TokenResponse {
    pub access_token: String,
    pub token_type: String,
    #[serde(deserialize_with = "de_seconds")]
    pub expires_in: u64,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl TokenResponse {
    /// A bearer token that expires in `expires_in` seconds.
    pub fn bearer(access_token: String, expires_in: u64) -> Self {
        TokenResponse {
            access_token,
            token_type: "Bearer".into(),
            expires_in,
            extra: Map::new(),
        }
    }
}

/// An integer number of seconds that some producers write as a float.
fn de_seconds<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let v = f64::deserialize(d)?;
    if v.is_finite() && v >= 0.0 {
        Ok(v.floor() as u64)
    } else {
        Err(serde::de::Error::custom(
            "expires_in must be a non-negative number",
        ))
    }
}

#[cfg(test)]
#[path = "models_tests.rs"]
mod tests;
