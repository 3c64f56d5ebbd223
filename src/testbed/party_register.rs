//! The scheme owner's register of the testbed: party records made from the configuration, the
//! trusted list, and the parties search with its filters and paging.

use super::config::PartyConfig;
use super::pki::PartyCredentials;
use crate::peers::trust::{Trust, TrustError, TrustedChain};
use crate::scheme::models::{
    Adherence, AuthRegistryRef, Certification, PartiesInfo, PartyCertificate, PartyInfo,
    SchemeTime, TrustedListEntry,
};
use crate::scheme::party::PartyId;
use crate::scheme::party_record::{from_1_9, read_3_0, Party};
use crate::scheme::trust::{fingerprint, validate_chain, ChainError, TrustedList};
use crate::scheme::version::SchemeVersion;
use crate::scheme::Timestamp;
use async_trait::async_trait;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use x509_parser::prelude::{FromDer, X509Certificate};

/// Parties per page of a search.
pub const PAGE_SIZE: usize = 10;

/// The scheme a register keeps its records in: the version it writes them in, the framework's
/// name, and the register's own id (the registrar of every claim).
#[derive(Clone, Debug)]
pub struct Scheme {
    pub version: SchemeVersion,
    pub framework: String,
    pub registrar: String,
}

/// A party's standing in the scheme's data spaces (3.0): those it is a member of, and the roles
/// it holds in them.
#[derive(Debug, Default)]
pub struct Standing {
    pub dataspaces: Vec<String>,
    pub roles: BTreeMap<String, Vec<String>>,
}

pub struct Register {
    parties: Vec<PartyInfo>,
    /// Each party's other identifiers (3.0 `alsoKnownAs`), by its id.
    aliases: BTreeMap<String, Vec<String>>,
    /// Each party's standing in the data spaces, by its id.
    standing: BTreeMap<String, Standing>,
    /// Answer a name with the first record that lists it, as a careless participant registry
    /// would (`careless_aliases`), not with the party whose own id it is.
    careless: bool,
    scheme: Scheme,
    trusted_entries: Vec<TrustedListEntry>,
    trusted: TrustedList,
}

impl Register {
    pub fn new(
        mut parties: Vec<PartyInfo>,
        (aliases, careless): (BTreeMap<String, Vec<String>>, bool),
        standing: BTreeMap<String, Standing>,
        scheme: Scheme,
        trusted_entries: Vec<TrustedListEntry>,
    ) -> Self {
        parties.sort_by(|a, b| a.party_id.cmp(&b.party_id));
        Register {
            parties,
            aliases,
            standing,
            careless,
            scheme,
            trusted: TrustedList::new(trusted_entries.clone()),
            trusted_entries,
        }
    }

    pub fn version(&self) -> SchemeVersion {
        self.scheme.version
    }

    /// The party `id` names: the one whose own id it is, else (3.0) the one whose alias it is,
    /// exactly; a 1.9 EORI without regard to case. A careless register answers with the first
    /// record that lists it either way.
    pub fn party(&self, id: &str) -> Option<&PartyInfo> {
        let same = |known: &str| match self.scheme.version.camel_case() {
            true => known == id,
            false => known.eq_ignore_ascii_case(id),
        };
        let by_alias = |p: &&PartyInfo| self.aliases_of(&p.party_id).iter().any(|a| same(a));
        match self.careless {
            true => self
                .parties
                .iter()
                .find(|p| same(&p.party_id) || by_alias(p)),
            false => self
                .parties
                .iter()
                .find(|p| same(&p.party_id))
                .or_else(|| self.parties.iter().find(by_alias)),
        }
    }

    /// The id of the party `name` names, by an alias too (3.0); before 3.0, and for a name no
    /// party's, `name` as written.
    pub fn id_of<'a>(&'a self, name: &'a str) -> &'a str {
        match self.scheme.version.camel_case() {
            true => self.party(name).map_or(name, |p| p.party_id.as_str()),
            false => name,
        }
    }

    /// The scheme the register keeps records for: its framework and registrar.
    pub fn scheme(&self) -> &Scheme {
        &self.scheme
    }

    fn aliases_of(&self, id: &str) -> &[String] {
        self.aliases.get(id).map_or(&[], Vec::as_slice)
    }

    /// Whether the party `id` is a member of the data space `space`.
    pub fn is_member(&self, id: &str, space: &str) -> bool {
        self.standing
            .get(id)
            .is_some_and(|s| s.dataspaces.iter().any(|d| d == space))
    }

    /// The 3.0 record (`partyInfo`) of a party: its facts as claims the register made.
    pub fn record_3_0(&self, p: &PartyInfo) -> Value {
        let none = Standing::default();
        let standing = self.standing.get(&p.party_id).unwrap_or(&none);
        record_3_0(p, (self.aliases_of(&p.party_id), standing), &self.scheme)
    }

    /// A party as the register's version reads it.
    fn decided(&self, p: &PartyInfo) -> Party {
        match self.scheme.version.camel_case() {
            true => read_3_0(&self.record_3_0(p), &self.scheme.framework)
                .unwrap_or_else(|_| from_1_9(p, self.scheme.version)),
            false => from_1_9(p, self.scheme.version),
        }
    }

    /// One page (from 1) of `page_size` of the 3.0 search: parties whose id (or, `also_known_as`,
    /// an alias) or name matches, each with at most one `*`; `partiesInfo` with its paging.
    pub fn search_3_0(&self, query: &PartiesQuery3) -> Value {
        let matches: Vec<&PartyInfo> = self
            .parties
            .iter()
            .filter(|p| {
                query.claim_filters.is_empty()
                    || claims_match(&self.record_3_0(p), &query.claim_filters)
            })
            .filter(|p| {
                let aliases = self.aliases_of(&p.party_id);
                query.id.as_ref().is_none_or(|w| {
                    wildcard_match(w, &p.party_id) || aliases.iter().any(|a| wildcard_match(w, a))
                }) && query
                    .also_known_as
                    .as_ref()
                    .is_none_or(|w| aliases.iter().any(|a| wildcard_match(w, a)))
                    && query
                        .name
                        .as_ref()
                        .is_none_or(|w| wildcard_match(w, &p.party_name))
            })
            .collect();
        let total = matches.len() as u64;
        let pages = total.div_ceil(query.page_size).max(1);
        let data: Vec<Value> = matches
            .into_iter()
            .skip(((query.page - 1) * query.page_size) as usize)
            .take(query.page_size as usize)
            .map(|p| self.record_3_0(p))
            .collect();
        serde_json::json!({
            "currentPage": query.page, "pageSize": query.page_size, "totalPages": pages,
            "totalCount": total, "count": data.len(), "data": data,
        })
    }

    pub fn trusted(&self) -> &TrustedList {
        &self.trusted
    }

    pub fn trusted_entries(&self) -> &[TrustedListEntry] {
        &self.trusted_entries
    }

    /// One page of the parties matching `query`, with the count over all pages.
    pub fn search(&self, query: &PartiesQuery, now: i64) -> PartiesInfo {
        let at = query.date_time.unwrap_or(now);
        let matches: Vec<&PartyInfo> = self
            .parties
            .iter()
            .filter(|p| query.matches(p, at))
            .collect();
        let start = (query.page - 1).saturating_mul(PAGE_SIZE as u64) as usize;
        PartiesInfo {
            count: matches.len() as u64,
            data: matches
                .into_iter()
                .skip(start)
                .take(PAGE_SIZE)
                .cloned()
                .collect(),
        }
    }
}

/// The testbed verifies signers as the gateway does, against its own register.
#[async_trait]
impl Trust for Register {
    async fn chain(
        &self,
        x5c: &[Vec<u8>],
        now: Timestamp,
    ) -> Result<Result<Arc<TrustedChain>, ChainError>, TrustError> {
        Ok(validate_chain(x5c, &self.trusted, now)
            .and_then(TrustedChain::new)
            .map(Arc::new))
    }

    async fn party(&self, id: &PartyId) -> Result<Option<Arc<Party>>, TrustError> {
        let record = Register::party(self, id.as_str());
        Ok(record.map(|r| Arc::new(self.decided(r))))
    }
}

/// The 3.0 query of `GET /parties`: `id`, `alsoKnownAs`, `name` (each with at most one `*`),
/// `claimFilter[CLAIMTYPE.PROPERTY]` or `claimFilter[PROPERTY]` (a deep object: a claim of that
/// type, or any claim, whose property matches, with at most one `*`), `page` from 1 and
/// `pageSize` from 1 to 100. A parameter 3.0 does not have is refused: a register that ignored
/// it would answer an unfiltered page.
#[derive(Clone, Debug, PartialEq)]
pub struct PartiesQuery3 {
    pub id: Option<String>,
    pub also_known_as: Option<String>,
    pub name: Option<String>,
    pub claim_filters: Vec<ClaimFilter>,
    pub page: u64,
    pub page_size: u64,
}

/// One `claimFilter` of the 3.0 party search.
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimFilter {
    /// The claim's `type`; None: any claim.
    pub claim_type: Option<String>,
    pub property: String,
    /// The value, with at most one `*`.
    pub pattern: String,
}

impl ClaimFilter {
    /// `claimFilter[KEY]=value`, KEY being `CLAIMTYPE.PROPERTY` or `PROPERTY`.
    fn parse(key: &str, value: &str) -> Result<Self, String> {
        let inside = key
            .strip_prefix("claimFilter[")
            .and_then(|rest| rest.strip_suffix(']'))
            .filter(|k| !k.is_empty() && !k.contains(['[', ']']))
            .ok_or_else(|| {
                format!("{key} is not claimFilter[CLAIMTYPE.PROPERTY] nor claimFilter[PROPERTY]")
            })?;
        let (claim_type, property) = match inside.split_once('.') {
            Some((t, p)) if !t.is_empty() && !p.is_empty() => (Some(t.to_string()), p),
            Some(_) => return Err(format!("{key}: a claim type and a property, both named")),
            None => (None, inside),
        };
        Ok(ClaimFilter {
            claim_type,
            property: property.to_string(),
            pattern: wildcard(value, key)?,
        })
    }
}

/// Whether a 3.0 record has, for every filter, a claim (of its type) whose property matches.
fn claims_match(record: &Value, filters: &[ClaimFilter]) -> bool {
    let claims = record["claims"].as_array().map_or(&[][..], Vec::as_slice);
    filters.iter().all(|f| {
        claims.iter().any(|c| {
            let typed = f
                .claim_type
                .as_deref()
                .is_none_or(|t| c["type"].as_str() == Some(t));
            let value = match &c[f.property.as_str()] {
                Value::String(s) => Some(s.clone()),
                Value::Number(n) => Some(n.to_string()),
                Value::Bool(b) => Some(b.to_string()),
                _ => None,
            };
            typed && value.is_some_and(|v| wildcard_match(&f.pattern, &v))
        })
    })
}

impl PartiesQuery3 {
    pub fn parse(pairs: &[(String, String)]) -> Result<Self, String> {
        let mut q = PartiesQuery3 {
            id: None,
            also_known_as: None,
            name: None,
            claim_filters: Vec::new(),
            page: 1,
            page_size: 10,
        };
        let number = |value: &str, name: &str, max: u64| {
            value
                .parse::<u64>()
                .ok()
                .filter(|n| (1..=max).contains(n))
                .ok_or_else(|| {
                    format!("{name} must be a whole number from 1 to {max}, not {value:?}")
                })
        };
        for (key, value) in pairs {
            let value = value.trim();
            match key.as_str() {
                "id" => q.id = Some(wildcard(value, "id")?),
                "alsoKnownAs" => q.also_known_as = Some(wildcard(value, "alsoKnownAs")?),
                "name" => q.name = Some(wildcard(value, "name")?),
                "page" => q.page = number(value, "page", u64::MAX)?,
                "pageSize" => q.page_size = number(value, "pageSize", 100)?,
                filter if filter.starts_with("claimFilter[") => {
                    q.claim_filters.push(ClaimFilter::parse(filter, value)?)
                }
                other => return Err(format!("{other} is not a parameter of the 3.0 party search (id, alsoKnownAs, name, claimFilter[…], page, pageSize)")),
            }
        }
        if q.id.is_none()
            && q.also_known_as.is_none()
            && q.name.is_none()
            && q.claim_filters.is_empty()
        {
            return Err(
                "give id, alsoKnownAs, name or claimFilter[…] (name=* for all parties)".into(),
            );
        }
        Ok(q)
    }
}

/// The query of `GET /parties`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PartiesQuery {
    pub name: Option<String>,
    pub eori: Option<String>,
    pub certified_only: Option<bool>,
    pub active_only: Option<bool>,
    pub certificate_subject_name: Option<String>,
    pub page: u64,
    pub date_time: Option<i64>,
}

impl PartiesQuery {
    /// Parse the query parameters; at least one known parameter is required, and every given value
    /// must be well-formed. Unknown parameters (real satellites know many more) are ignored.
    pub fn parse(pairs: &[(String, String)]) -> Result<Self, String> {
        let mut q = PartiesQuery {
            page: 1,
            ..Default::default()
        };
        let mut known = 0;
        for (key, value) in pairs {
            let value = value.trim();
            match key.as_str() {
                "name" => q.name = Some(wildcard(value, "name")?),
                "eori" => q.eori = Some(wildcard(value, "eori")?),
                "certified_only" => q.certified_only = boolean(value, "certified_only")?,
                "active_only" => q.active_only = boolean(value, "active_only")?,
                "certificate_subject_name" => q.certificate_subject_name = Some(value.to_string()),
                "page" => {
                    q.page = value
                        .parse::<u64>()
                        .ok()
                        .filter(|p| *p >= 1)
                        .ok_or_else(|| {
                            format!("page must be a whole number from 1, not {value:?}")
                        })?
                }
                "date_time" => {
                    q.date_time = Some(
                        SchemeTime::parse(value)
                            .ok_or_else(|| {
                                format!("date_time {value:?} is not an ISO 8601 timestamp")
                            })?
                            .unix(),
                    )
                }
                _ => continue,
            }
            known += 1;
        }
        if known == 0 {
            return Err(
                "at least one query parameter is required (use name=* or eori=* for all parties)"
                    .into(),
            );
        }
        Ok(q)
    }

    fn matches(&self, p: &PartyInfo, at: i64) -> bool {
        if let Some(pattern) = &self.name {
            if !wildcard_match(pattern, &p.party_name) {
                return false;
            }
        }
        if let Some(pattern) = &self.eori {
            if !wildcard_match(pattern, &p.party_id) {
                return false;
            }
        }
        if let Some(want) = self.certified_only {
            let certified = p.certifications.iter().any(|c| c.is_valid_at(at));
            if certified != want {
                return false;
            }
        }
        if let Some(want) = self.active_only {
            if p.adherence.is_active_at(at) != want {
                return false;
            }
        }
        if let Some(subject) = &self.certificate_subject_name {
            // Answers only together with the party's own identifier, never by subject alone.
            let eori_exact = self
                .eori
                .as_deref()
                .is_some_and(|e| !e.contains('*') && e.eq_ignore_ascii_case(&p.party_id));
            if !eori_exact || !party_has_subject(p, subject) {
                return false;
            }
        }
        true
    }
}

fn wildcard(value: &str, name: &str) -> Result<String, String> {
    if value.is_empty() {
        return Err(format!("{name} must not be empty"));
    }
    if value.matches('*').count() > 1 {
        return Err(format!("{name} may contain a single * wildcard"));
    }
    Ok(value.to_string())
}

fn boolean(value: &str, name: &str) -> Result<Option<bool>, String> {
    match value.to_ascii_lowercase().as_str() {
        "" | "null" => Ok(None),
        "true" => Ok(Some(true)),
        "false" => Ok(Some(false)),
        _ => Err(format!("{name} must be true or false, not {value:?}")),
    }
}

/// Case-insensitive match with at most one `*`.
pub fn wildcard_match(pattern: &str, value: &str) -> bool {
    let (p, v) = (pattern.to_lowercase(), value.to_lowercase());
    match p.split_once('*') {
        None => p == v,
        Some((prefix, suffix)) => {
            v.len() >= prefix.len() + suffix.len() && v.starts_with(prefix) && v.ends_with(suffix)
        }
    }
}

/// A subject name as a set of (attribute, value): attribute names without case and with their
/// common aliases, values trimmed; the order of the attributes does not matter.
fn subject_set(subject: &str) -> BTreeSet<(String, String)> {
    subject
        .split(',')
        .filter_map(|part| part.split_once('='))
        .map(|(k, v)| {
            let key = k.trim().to_ascii_uppercase();
            let key = match key.as_str() {
                "2.5.4.5" | "OID.2.5.4.5" => "SERIALNUMBER".to_string(),
                "2.5.4.97" | "OID.2.5.4.97" => "ORGANIZATIONIDENTIFIER".to_string(),
                _ => key,
            };
            (key, v.trim().to_string())
        })
        .collect()
}

/// Whether `subject` names one of the party's registered certificates.
pub fn party_has_subject(p: &PartyInfo, subject: &str) -> bool {
    let wanted = subject_set(subject);
    !wanted.is_empty()
        && p.certificates
            .iter()
            .filter_map(|c| c.subject_name.as_deref())
            .any(|registered| subject_set(registered) == wanted)
}

/// A certificate's subject in the `KEY=value, …` form of party records.
pub fn subject_name(der: &[u8]) -> String {
    let Ok((_, cert)) = X509Certificate::from_der(der) else {
        return String::new();
    };
    cert.subject()
        .iter_attributes()
        .filter_map(|attr| {
            let key = match attr.attr_type().to_id_string().as_str() {
                "2.5.4.3" => "CN",
                "2.5.4.10" => "O",
                "2.5.4.11" => "OU",
                "2.5.4.6" => "C",
                "2.5.4.7" => "L",
                "2.5.4.8" => "ST",
                "2.5.4.5" => "SERIALNUMBER",
                "2.5.4.97" => "ORGANIZATIONIDENTIFIER",
                _ => return None,
            };
            attr.as_str().ok().map(|v| format!("{key}={v}"))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn date(value: &Option<String>, default: &str) -> Option<SchemeTime> {
    SchemeTime::parse(value.as_deref().unwrap_or(default))
}

/// A party's record in 3.0 form (RFC064): `id`, `name`, `alsoKnownAs` and one claim per fact,
/// each registered by the register: framework compliance (adherence, with the capabilities
/// address), a framework role per role, a membership per data space and a role per role held
/// there, the certificate, and the designated registries.
fn record_3_0(
    p: &PartyInfo,
    (aliases, standing): (&[String], &Standing),
    scheme: &Scheme,
) -> Value {
    let time = |t: &Option<SchemeTime>, default: &str| {
        t.as_ref().map_or(default.to_string(), |t| {
            SchemeTime::from_unix(t.unix()).as_str().to_string()
        })
    };
    let a = &p.adherence;
    let (start, end) = (
        time(&a.start_date, "2020-01-01T00:00:00Z"),
        time(&a.end_date, "2099-12-31T00:00:00Z"),
    );
    let status = match a.status.eq_ignore_ascii_case("active") {
        true => "active",
        false => "inactive",
    };
    let mut n = 0u32;
    let mut claim = |kind: &str, status: &str, fields: Value| {
        n += 1;
        // A stable id per party and claim: the testbed's records do not change between starts.
        let digest = ring::digest::digest(
            &ring::digest::SHA256,
            format!("{}#{n}", p.party_id).as_bytes(),
        );
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(&digest.as_ref()[..16]);
        let mut c = serde_json::json!({
            "id": uuid::Builder::from_random_bytes(bytes).into_uuid().to_string(),
            "registrarId": scheme.registrar, "type": kind, "status": status,
            "startDate": start, "endDate": end,
        });
        if let (Value::Object(c), Value::Object(f)) = (&mut c, fields) {
            c.extend(f);
        }
        c
    };
    let framework = &scheme.framework;
    let mut compliance = serde_json::json!({ "frameworkId": framework });
    if let Some(url) = &p.capability_url {
        compliance["capabilityUrl"] = url.clone().into();
    }
    let mut claims = vec![claim("frameworkCompliance", status, compliance)];
    for c in &p.certifications {
        claims.push(claim(
            "frameworkRole",
            "active",
            serde_json::json!({"frameworkId": framework, "roleId": c.role, "loa": "high",
                "compliancyVerified": "yes", "legalAdherence": "yes"}),
        ));
    }
    for space in &standing.dataspaces {
        claims.push(claim(
            "dataspaceMembership",
            status,
            serde_json::json!({"dataspaceId": space, "legalAdherence": "yes"}),
        ));
    }
    for (space, roles) in &standing.roles {
        for role in roles {
            claims.push(claim(
                "dataspaceRole",
                "active",
                serde_json::json!({"dataspaceId": space, "roleId": role, "loa": "high",
                    "compliancyVerified": "yes", "legalAdherence": "yes"}),
            ));
        }
    }
    for c in &p.certificates {
        claims.push(claim(
            "x509Certificate",
            "active",
            serde_json::json!({"subjectName": c.subject_name, "certificateType": c.certificate_type,
                "x5c": c.x5c, "x5t#s256": c.x5t_s256}),
        ));
    }
    for r in p.registries() {
        let mut designation =
            serde_json::json!({"authRegistryId": r.id, "authUrl": r.url, "name": r.name});
        if let Some(sp) = &r.service_provider {
            designation["serviceProviderPartyId"] = sp.clone().into();
        }
        if let Some(space) = &r.dataspace_id {
            designation["dataspaceId"] = space.clone().into();
        }
        claims.push(claim("authRegistry", "active", designation));
    }
    serde_json::json!({"id": p.party_id, "name": p.party_name, "alsoKnownAs": aliases, "claims": claims})
}

/// The scheme owner's record of a configured party: its adherence, roles, certificate and registries.
pub fn party_record(
    party: &PartyConfig,
    credentials: &PartyCredentials,
    urls: &BTreeMap<String, String>,
    names: &BTreeMap<String, String>,
) -> PartyInfo {
    let start = date(&party.start_date, "2020-01-01T00:00:00Z");
    let end = date(&party.end_date, "2099-12-31T00:00:00Z");
    let leaf = credentials.leaf_der();
    PartyInfo {
        party_id: party.id.clone(),
        party_name: party.name.clone(),
        adherence: Adherence {
            status: party.status.clone(),
            start_date: start.clone(),
            end_date: end.clone(),
            extra: Map::new(),
        },
        certifications: party
            .roles
            .iter()
            .map(|role| Certification {
                role: role.clone(),
                start_date: start.clone(),
                end_date: end.clone(),
                extra: Map::from_iter([("loa".to_string(), 3.into())]),
            })
            .collect(),
        capability_url: urls.get(&party.id).map(|u| format!("{u}/capabilities")),
        certificates: vec![PartyCertificate {
            subject_name: Some(subject_name(leaf)),
            certificate_type: Some("eSEAL".into()),
            enabled_from: start.clone(),
            x5c: Some(STANDARD.encode(leaf)),
            x5t_s256: Some(fingerprint(leaf)),
            extra: Map::new(),
        }],
        auth_registries: party
            .registries_for
            .iter()
            .map(|(sp, id)| (id, Some(sp), None))
            .chain(
                party
                    .registries_in
                    .iter()
                    .map(|(space, id)| (id, None, Some(space))),
            )
            .chain(party.registries.iter().map(|id| (id, None, None)))
            .map(|(id, service_provider, dataspace)| AuthRegistryRef {
                id: id.clone(),
                name: names.get(id).cloned().unwrap_or_default(),
                url: urls.get(id).cloned().unwrap_or_default(),
                dataspace_id: dataspace.cloned(),
                dataspace_name: None,
                service_provider: service_provider.cloned(),
            })
            .collect(),
        authregistery: Vec::new(),
        extra: Map::new(),
    }
}

#[cfg(test)]
#[path = "party_register_tests.rs"]
mod tests;
