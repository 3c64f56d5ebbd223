//! A party as the gateway decides on it, whichever version's record it was read from: its
//! identifiers, when it adheres to the framework, its roles (in the framework, and in the data
//! spaces it is a member of), the certificates registered for it, the authorisation registries it
//! designated and its capabilities address. Read from a 1.9/2.x `party_info` (`PartyInfo`) or a
//! 3.0 claims-based `partyInfo` (RFC064), where every fact is a claim of its own with a status and
//! a validity, and only `active` claims within their dates count.

use super::models::{PartyInfo, SchemeTime};
use super::party::PartyId;
use super::version::SchemeVersion;
use serde_json::{Map, Value};
use std::collections::HashMap;

/// A period: from (inclusive) until (exclusive), each open when absent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Span {
    pub from: Option<i64>,
    pub until: Option<i64>,
}

impl Span {
    pub fn contains(&self, now: i64) -> bool {
        self.from.is_none_or(|f| f <= now) && self.until.is_none_or(|u| now < u)
    }
}

/// A certificate registered for the party.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegisteredCertificate {
    /// SHA-256 of the DER, hex (any case).
    pub x5t_s256: Option<String>,
    /// Base64 DER (1.9/2.x records; 3.0's `x5c` is kept for encryption to the party).
    pub x5c: Option<String>,
    pub valid: Span,
}

/// An authorisation registry the party designated, and for what (3.0: the most specific
/// designation that fits is the one to ask).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Designation {
    pub id: String,
    pub name: String,
    pub url: String,
    /// For this service provider only (3.0 `serviceProviderPartyId`).
    pub service_provider: Option<String>,
    pub dataspace: Option<String>,
    pub framework: Option<String>,
    pub valid: Span,
}

/// What a service provider is a member of, for the designations that fit it: the scheme's
/// framework (its name, `iSHARE`) and the data spaces it serves in (3.0 ids).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Membership {
    pub framework: String,
    pub dataspaces: Vec<String>,
}

/// Why a data space id is not of 3.0's form (`<continent>.DS.<sector>.<country>.<name>`: two
/// letters, `DS`, three letters, two letters, a name of up to 15 letters and digits).
pub fn dataspace_id_problem(id: &str) -> Option<String> {
    let parts: Vec<&str> = id.split('.').collect();
    let letters = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_uppercase());
    let fits = matches!(parts.as_slice(), [continent, "DS", sector, country, name]
        if letters(continent, 2) && letters(sector, 3) && letters(country, 2)
            && (1..=15).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric()));
    (!fits).then(|| {
        format!("{id:?} is not <continent>.DS.<sector>.<country>.<name> (EU.DS.MOB.NL.LOGISTICS)")
    })
}

impl Designation {
    /// Whether the data owner chose this registry for us: for this service provider (`is_us`),
    /// or for a data space we serve in. Its evidence then binds to us though 3.0's names no
    /// service provider.
    pub fn for_us(&self, is_us: impl Fn(&str) -> bool, ours: &Membership) -> bool {
        match &self.service_provider {
            Some(sp) => is_us(sp),
            None => self
                .dataspace
                .as_ref()
                .is_some_and(|space| ours.dataspaces.contains(space)),
        }
    }

    /// How specific the designation is: for one service provider, a data space, a framework, or
    /// the party's default.
    pub fn specificity(&self) -> u8 {
        match (&self.service_provider, &self.dataspace, &self.framework) {
            (Some(_), _, _) => 3,
            (None, Some(_), _) => 2,
            (None, None, Some(_)) => 1,
            (None, None, None) => 0,
        }
    }
}

/// A party record, as decided on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Party {
    /// The identifier the record is kept under (3.0: `id`, its did:ishare).
    pub id: String,
    /// Its other identifiers (3.0 `alsoKnownAs`).
    pub also_known_as: Vec<String>,
    pub name: String,
    /// The version of the record it was read from.
    pub version: SchemeVersion,
    /// When the party adheres to the framework (1.9 `adherence`; 3.0 `frameworkCompliance`).
    pub adherence: Vec<Span>,
    /// Its roles in the framework, each with its validity.
    pub roles: Vec<(String, Span)>,
    /// The data spaces it is a member of, each with its validity (3.0 `dataspaceMembership`).
    pub memberships: Vec<(String, Span)>,
    /// Its roles in a data space: the data space, the role and its validity (3.0
    /// `dataspaceRole`). Such a role counts only where that data space is ours and only while
    /// the party is a member of it.
    pub dataspace_roles: Vec<(String, String, Span)>,
    pub certificates: Vec<RegisteredCertificate>,
    pub registries: Vec<Designation>,
    pub capability_url: Option<String>,
}

impl Party {
    /// Whether `id` is this party: its identifier or one it is also known as, exactly; a 1.9/2.x
    /// EORI without regard to case, as those records were always matched.
    pub fn names(&self, id: &str) -> bool {
        let same = |known: &str| match self.version.camel_case() {
            true => known == id,
            false => known.eq_ignore_ascii_case(id),
        };
        same(&self.id) || self.also_known_as.iter().any(|a| same(a))
    }

    /// Whether the party adheres to the framework at `now`.
    pub fn is_active_at(&self, now: i64) -> bool {
        self.adherence.iter().any(|s| s.contains(now))
    }

    /// Whether the party holds `role` at `now` (role names compared without case and spaces,
    /// "authorization" read as "authorisation").
    pub fn has_role(&self, role: &str, now: i64) -> bool {
        self.roles
            .iter()
            .any(|(r, span)| same_role(r, role) && span.contains(now))
    }

    /// Whether the party holds `role` at `now` for a service provider that is a member of `ours`:
    /// as a role in the framework, or as a role in one of our data spaces while it is a member of
    /// that data space.
    pub fn holds_role(&self, role: &str, ours: &Membership, now: i64) -> bool {
        self.has_role(role, now)
            || self.dataspace_roles.iter().any(|(space, r, span)| {
                same_role(r, role)
                    && span.contains(now)
                    && ours.dataspaces.contains(space)
                    && self.is_member_of(space, now)
            })
    }

    /// Whether the party is a member of the data space `space` at `now`.
    pub fn is_member_of(&self, space: &str, now: i64) -> bool {
        self.memberships
            .iter()
            .any(|(s, span)| s == space && span.contains(now))
    }

    /// Whether the record is 3.0's, made of claims: a certificate is then bound to the party
    /// by its claim's `x5t#s256` alone (1.9/2.x records also by `x5c`, and where they register
    /// none, by the subject naming the party).
    pub fn claims_based(&self) -> bool {
        self.version.conditions()
    }

    /// The certificates registered for the party and valid at `now`.
    pub fn certificates_at(&self, now: i64) -> impl Iterator<Item = &RegisteredCertificate> {
        self.certificates
            .iter()
            .filter(move |c| c.valid.contains(now))
    }

    /// The registries the party designated that hold at `now`.
    pub fn registries_at(&self, now: i64) -> impl Iterator<Item = &Designation> {
        self.registries
            .iter()
            .filter(move |r| r.valid.contains(now))
    }

    /// The registries this party chose for its delegations at the service provider `is_us`
    /// names, a member of `ours` (its framework and data spaces), at `now`: of the designations
    /// that fit, those of the highest specificity, in the record's order. From a 3.0 record a
    /// designation fits when it is for this service provider or none, for one of our data spaces
    /// or none (one for a data space not ours fits only where it names this service provider),
    /// and for our framework or none; the most specific are for this service provider, then for
    /// a data space, then for the framework, then the party's default. From a 1.9/2.x record
    /// (whose `auth_registries` name a data space but no framework), the same holds where we
    /// serve in data spaces; a gateway that names none cannot tell one data space from another,
    /// and there every designation listed with an address fits but one for another service
    /// provider, one for ours first. A designation for another service provider never fits: the
    /// data owner chose another registry for it.
    pub fn designated_for(
        &self,
        is_us: impl Fn(&str) -> bool,
        ours: &Membership,
        now: i64,
    ) -> Vec<&Designation> {
        let claims = self.claims_based();
        let in_our_space = |d: &Designation| {
            d.dataspace
                .as_ref()
                .is_none_or(|space| ours.dataspaces.contains(space))
        };
        let spaces_told = claims || !ours.dataspaces.is_empty();
        let fits = |d: &&Designation| {
            !d.url.is_empty()
                && d.service_provider.as_deref().is_none_or(&is_us)
                && (!spaces_told || in_our_space(d) || d.service_provider.is_some())
                && d.framework.as_deref().is_none_or(|f| f == ours.framework)
        };
        let rank = |d: &Designation| match spaces_told {
            true => d.specificity(),
            false => u8::from(d.service_provider.is_some()),
        };
        let fitting: Vec<&Designation> = self.registries_at(now).filter(fits).collect();
        let top = fitting.iter().map(|d| rank(d)).max();
        fitting
            .into_iter()
            .filter(|d| Some(rank(d)) == top)
            .collect()
    }

    /// The registry to ask about this party's delegations for the service provider `is_us` names
    /// as a member of `ours` at `now`: the first of those it chose ([`Party::designated_for`]).
    pub fn registry_for(
        &self,
        is_us: impl Fn(&str) -> bool,
        ours: &Membership,
        now: i64,
    ) -> Option<&Designation> {
        self.designated_for(is_us, ours, now).into_iter().next()
    }

    /// What the record holds in memory, roughly (for the cache's bound).
    pub fn weight(&self) -> usize {
        let texts = self.id.len()
            + self.name.len()
            + self.also_known_as.iter().map(String::len).sum::<usize>()
            + self.roles.iter().map(|(r, _)| r.len() + 32).sum::<usize>()
            + (self.memberships.iter())
                .map(|(space, _)| space.len() + 32)
                .sum::<usize>()
            + (self.dataspace_roles.iter())
                .map(|(space, role, _)| space.len() + role.len() + 48)
                .sum::<usize>();
        let certificates: usize = self
            .certificates
            .iter()
            .map(|c| c.x5c.as_ref().map_or(0, String::len) + 96)
            .sum();
        let registries: usize = self
            .registries
            .iter()
            .map(|r| r.id.len() + r.name.len() + r.url.len() + 96)
            .sum();
        texts + certificates + registries + 256
    }
}

/// Whether two role names are the same, compared without case and spaces, and with
/// "authorization" read as "authorisation".
pub fn same_role(a: &str, b: &str) -> bool {
    // Without spaces, non-ASCII or a `z`, normalising only lowers the case: compare in place.
    let plain = |s: &str| {
        s.bytes()
            .all(|c| c.is_ascii_graphic() && c != b'z' && c != b'Z')
    };
    if plain(a) && plain(b) {
        a.eq_ignore_ascii_case(b)
    } else {
        normalise_role(a) == normalise_role(b)
    }
}

fn normalise_role(role: &str) -> String {
    role.chars()
        .filter(|c| !c.is_whitespace())
        .flat_map(char::to_lowercase)
        .collect::<String>()
        .replace("authorization", "authorisation")
}

/// A 1.9/2.x record (`version` 1.9 to 2.2), as real satellites write them too.
pub fn from_1_9(record: &PartyInfo, version: SchemeVersion) -> Party {
    let span = |from: &Option<SchemeTime>, until: &Option<SchemeTime>| Span {
        from: from.as_ref().map(SchemeTime::unix),
        until: until.as_ref().map(SchemeTime::unix),
    };
    let a = &record.adherence;
    let adherence = match a.status.eq_ignore_ascii_case("active") {
        true => vec![span(&a.start_date, &a.end_date)],
        false => Vec::new(),
    };
    let mut roles: Vec<(String, Span)> = record
        .certifications
        .iter()
        .map(|c| (c.role.clone(), span(&c.start_date, &c.end_date)))
        .collect();
    // 2.0's `roles[]`, whose dates must be dates when given.
    if let Some(Value::Array(listed)) = record.extra.get("roles") {
        for r in listed {
            let date = |k: &str| r.get(k).and_then(Value::as_str).and_then(SchemeTime::parse);
            if let Some(role) = r.get("role").and_then(Value::as_str) {
                let valid = Span {
                    from: date("start_date").map(|d| d.unix()),
                    until: date("end_date").map(|d| d.unix()),
                };
                roles.push((role.to_string(), valid));
            }
        }
    }
    Party {
        id: record.party_id.clone(),
        also_known_as: Vec::new(),
        name: record.party_name.clone(),
        version,
        adherence,
        roles,
        memberships: Vec::new(),
        dataspace_roles: Vec::new(),
        certificates: record
            .certificates
            .iter()
            .filter(|c| c.x5c.is_some() || c.x5t_s256.is_some())
            .map(|c| RegisteredCertificate {
                x5t_s256: c.x5t_s256.clone(),
                x5c: c.x5c.clone(),
                valid: Span::default(),
            })
            .collect(),
        registries: record
            .registries()
            .map(|r| Designation {
                id: r.id.clone(),
                name: r.name.clone(),
                url: r.url.clone(),
                service_provider: r.service_provider.clone(),
                dataspace: r.dataspace_id.clone(),
                framework: None,
                valid: Span::default(),
            })
            .collect(),
        capability_url: record.capability_url.clone().filter(|u| !u.is_empty()),
    }
}

/// Why a 3.0 record cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the 3.0 party record {0}")]
pub struct RecordError(String);

/// The most aliases a 3.0 record may list: each may cost a lookup when a decision meets it.
pub const MAX_ALIASES: usize = 64;

/// A 3.0 `partyInfo`: `id`, `name`, `alsoKnownAs` and `claims`. Of the claims, only those with
/// status `active` within their dates count, and of the framework's ones only those of
/// `framework` (the scheme's name): `frameworkCompliance` (adherence, and the capabilities
/// address), `frameworkRole`, `x509Certificate` (by its `x5t#s256`) and `authRegistry`; of any
/// data space, `dataspaceMembership` and `dataspaceRole`. Other claim types say nothing the
/// gateway decides on. A claim of a known type that is malformed
/// (no dates where the scheme requires them, dates that are no dates) makes the record unreadable:
/// it is not read as absent.
pub fn read_3_0(info: &Value, framework: &str) -> Result<Party, RecordError> {
    let o = info
        .as_object()
        .ok_or_else(|| RecordError("is not an object".into()))?;
    let id = text(o, "id").ok_or_else(|| RecordError("has no id".into()))?;
    let also_known_as = aliases(o, &id)?;
    let claims = o
        .get("claims")
        .and_then(Value::as_array)
        .ok_or_else(|| RecordError(format!("of {id} has no claims")))?;
    let mut party = Party {
        name: text(o, "name").unwrap_or_default(),
        id,
        also_known_as,
        version: SchemeVersion::V3_0,
        adherence: Vec::new(),
        roles: Vec::new(),
        memberships: Vec::new(),
        dataspace_roles: Vec::new(),
        certificates: Vec::new(),
        registries: Vec::new(),
        capability_url: None,
    };
    for (i, claim) in claims.iter().enumerate() {
        read_claim(&mut party, i, claim, framework)?;
    }
    Ok(party)
}

/// The string member `k` of a 3.0 object, if it has one.
fn text(o: &Map<String, Value>, k: &str) -> Option<String> {
    o.get(k).and_then(Value::as_str).map(str::to_string)
}

/// The record's `alsoKnownAs`: a list of ids, absent or null when it has none, and no longer than
/// `MAX_ALIASES`.
fn aliases(o: &Map<String, Value>, id: &str) -> Result<Vec<String>, RecordError> {
    let also_known_as = match o.get("alsoKnownAs") {
        None | Some(Value::Null) => Vec::new(),
        Some(v) => serde_json::from_value::<Vec<String>>(v.clone()).map_err(|_| {
            RecordError(format!(
                "of {id} has an alsoKnownAs that is not a list of ids"
            ))
        })?,
    };
    if also_known_as.len() > MAX_ALIASES {
        return Err(RecordError(format!(
            "of {id} lists {} aliases, more than the {MAX_ALIASES} a record may",
            also_known_as.len()
        )));
    }
    Ok(also_known_as)
}

/// The `i`th claim of the record, added to `party` when it is of a type the gateway decides on,
/// active, and (for the framework's own types) of `framework`.
fn read_claim(
    party: &mut Party,
    i: usize,
    claim: &Value,
    framework: &str,
) -> Result<(), RecordError> {
    let at = |what: &str| RecordError(format!("of {}: claims[{i}] {what}", party.id));
    let c = claim.as_object().ok_or_else(|| at("is not an object"))?;
    let kind = text(c, "type").ok_or_else(|| at("has no type"))?;
    if !matches!(
        kind.as_str(),
        "frameworkCompliance"
            | "frameworkRole"
            | "dataspaceMembership"
            | "dataspaceRole"
            | "x509Certificate"
            | "authRegistry"
    ) {
        return Ok(());
    }
    let valid = validity(c, &at)?;
    if text(c, "status").as_deref() != Some("active") {
        return Ok(());
    }
    let of_framework = || text(c, "frameworkId").as_deref() == Some(framework);
    match kind.as_str() {
        "frameworkCompliance" if of_framework() => {
            if valid.from.is_none() || valid.until.is_none() {
                return Err(at("(frameworkCompliance) has no startDate and endDate"));
            }
            party.adherence.push(valid);
            if party.capability_url.is_none() {
                party.capability_url = text(c, "capabilityUrl");
            }
        }
        "frameworkRole" if of_framework() => {
            let role = text(c, "roleId").ok_or_else(|| at("(frameworkRole) has no roleId"))?;
            party.roles.push((role, valid));
        }
        "dataspaceMembership" => {
            let space = text(c, "dataspaceId")
                .ok_or_else(|| at("(dataspaceMembership) has no dataspaceId"))?;
            if valid.from.is_none() || valid.until.is_none() {
                return Err(at("(dataspaceMembership) has no startDate and endDate"));
            }
            party.memberships.push((space, valid));
        }
        "dataspaceRole" => {
            let space =
                text(c, "dataspaceId").ok_or_else(|| at("(dataspaceRole) has no dataspaceId"))?;
            let role = text(c, "roleId").ok_or_else(|| at("(dataspaceRole) has no roleId"))?;
            party.dataspace_roles.push((space, role, valid));
        }
        "x509Certificate" => {
            let thumbprint = text(c, "x5t#s256")
                .or_else(|| text(c, "x5t#S256"))
                .ok_or_else(|| at("(x509Certificate) has no x5t#s256"))?;
            party.certificates.push(RegisteredCertificate {
                x5t_s256: Some(thumbprint),
                x5c: text(c, "x5c"),
                valid,
            });
        }
        "authRegistry" => {
            let registry = text(c, "authRegistryId")
                .ok_or_else(|| at("(authRegistry) has no authRegistryId"))?;
            party.registries.push(Designation {
                id: registry,
                name: text(c, "name").unwrap_or_default(),
                url: text(c, "authUrl").ok_or_else(|| at("(authRegistry) has no authUrl"))?,
                service_provider: text(c, "serviceProviderPartyId"),
                dataspace: text(c, "dataspaceId"),
                framework: text(c, "frameworkId"),
                valid,
            });
        }
        _ => {}
    }
    Ok(())
}

/// When a claim holds: from its `startDate` until its `endDate`, each absent, null or a date;
/// `at` makes the error of a date that is no date.
fn validity(
    c: &Map<String, Value>,
    at: &impl Fn(&str) -> RecordError,
) -> Result<Span, RecordError> {
    let date = |k: &str| -> Result<Option<i64>, RecordError> {
        match c.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => SchemeTime::parse(s)
                .map(|t| Some(t.unix()))
                .ok_or_else(|| at(&format!("has a {k} that is no date: {s:?}"))),
            Some(_) => Err(at(&format!("has a {k} that is no date"))),
        }
    };
    Ok(Span {
        from: date("startDate")?,
        until: date("endDate")?,
    })
}

/// Whom a name stands for (3.0), as the participant registry's records prove it: a name is a
/// party's if it is that party's own id (whatever record the lookup by it answered), or an alias
/// that a search by it (as an id and as an alias) finds on one record alone. A `did:ishare` is
/// never an alias of a record whose id is another `did:ishare`. A name records claim otherwise
/// is contested: no one's.
#[derive(Clone, Debug, PartialEq)]
pub enum Named {
    Party(std::sync::Arc<Party>),
    /// The participant registry knows no party by it.
    Nobody,
    /// Records disagree on whom it names.
    Contested,
}

impl Named {
    /// What the lookup of `name` by itself (`/parties/{name}`) found, where that decides: no
    /// record, or the record whose own id it is. None for a record that lists it as an alias:
    /// only a search can prove that it is no other party's.
    pub fn by_lookup(name: &str, record: Option<&std::sync::Arc<Party>>) -> Option<Named> {
        match record {
            None => Some(Named::Nobody),
            Some(r) if r.id == name => Some(Named::Party(r.clone())),
            Some(_) => None,
        }
    }

    /// The name `name`, which the lookup answered with `record` (listing it as an alias), judged
    /// by the records a search by it found (`complete`: every page of them): the party whose own
    /// id it is, else `record` where that record alone lists it.
    pub fn by_search(
        name: &str,
        record: &std::sync::Arc<Party>,
        found: &[Party],
        complete: bool,
    ) -> Named {
        if let Some(own) = found.iter().find(|p| p.id == name) {
            return Named::Party(std::sync::Arc::new(own.clone()));
        }
        let mut holders: Vec<&str> = found
            .iter()
            .filter(|p| p.names(name))
            .map(|p| p.id.as_str())
            .collect();
        holders.sort_unstable();
        holders.dedup();
        let did_of_another = PartyId::is_did_ishare(name) && PartyId::is_did_ishare(&record.id);
        match complete && !did_of_another && holders == [record.id.as_str()] {
            true => Named::Party(record.clone()),
            false => Named::Contested,
        }
    }
}

/// What the names of the parties a decision meets stand for (3.0). A name stands for the id of
/// the record its own lookup at the participant registry found (`/parties/{name}`), and for
/// nothing else: another record listing it in `alsoKnownAs` never makes it that party's. Records
/// that disagree — a known record lists a name whose own lookup found another party, or found
/// none — make the name ambiguous, and a decision on it is refused. A name not looked up compares
/// as written: it equals no party's id but that party's own, which is always looked up with its
/// record.
#[derive(Clone, Debug, Default)]
pub struct Aliases {
    /// The records found in this decision.
    records: Vec<std::sync::Arc<Party>>,
    /// A name to the id its own lookup found; None where records disagree.
    ids: HashMap<Box<str>, Option<Box<str>>>,
}

/// Records of the participant registry that disagree on whom a name names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the participant registry's records disagree on whom {0} names")]
pub struct AmbiguousName(pub String);

impl Aliases {
    /// What the lookup of `name` by itself found: `record`, or no party (None).
    pub fn found(&mut self, name: &str, record: Option<&std::sync::Arc<Party>>) {
        // A record found for a name it does not list is a disagreement too.
        let record = match record {
            Some(r) if !r.names_listed().any(|n| n == name) => {
                self.ids.insert(name.into(), None);
                return;
            }
            other => other,
        };
        let Some(record) = record else {
            // A known record lists a name the participant registry does not know.
            if self.claimed(name).next().is_some() {
                self.ids.insert(name.into(), None);
            }
            return;
        };
        let agrees = self.claimed(name).all(|id| id == record.id);
        let id = agrees.then(|| record.id.as_str().into());
        self.ids.insert(name.into(), id);
        if self.records.iter().any(|r| r.id == record.id) {
            return;
        }
        // A record's id names it (the participant registry keeps it under that id too).
        let own = self
            .ids
            .entry(record.id.as_str().into())
            .or_insert_with(|| Some(record.id.as_str().into()));
        if own.as_deref() != Some(record.id.as_str()) {
            *own = None;
        }
        // The new record's names that another party's lookup found disagree from now on.
        for listed in record.names_listed() {
            if let Some(entry) = self.ids.get_mut(listed) {
                if entry.as_deref().is_some_and(|other| other != record.id) {
                    *entry = None;
                }
            }
        }
        self.records.push(record.clone());
    }

    /// The ids of the known records that list `name` (as their id or an alias).
    fn claimed<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.records
            .iter()
            .filter(move |r| r.names_listed().any(|n| n == name))
            .map(|r| r.id.as_str())
    }

    /// Whether `name` was looked up in this decision.
    pub fn looked_up(&self, name: &str) -> bool {
        self.ids.contains_key(name)
    }

    /// Whether `name` should be looked up to be compared: not looked up yet, and the record of
    /// one of the parties `listed_by` (their ids) lists it. (Any other name is never looked up:
    /// it compares as written.)
    pub fn needs_lookup(&self, name: &str, listed_by: &[&str]) -> bool {
        !self.looked_up(name) && self.claimed(name).any(|id| listed_by.contains(&id))
    }

    /// The id `name` stands for: the one its lookup found, or `name` as written where it was not
    /// looked up; an error where records disagree.
    pub fn id_of<'a>(&'a self, name: &'a str) -> Result<&'a str, AmbiguousName> {
        match self.ids.get(name) {
            Some(Some(id)) => Ok(id),
            Some(None) => Err(AmbiguousName(name.to_string())),
            None => Ok(name),
        }
    }

    /// `name` replaced by the id it stands for.
    pub fn resolve(&self, name: &mut String) -> Result<(), AmbiguousName> {
        let id = self.id_of(name)?;
        if id != name.as_str() {
            *name = id.to_string();
        }
        Ok(())
    }

    /// Whether `name` stands for the same party as `id` (an error where records disagree).
    pub fn names(&self, name: &str, id: &str) -> Result<bool, AmbiguousName> {
        Ok(self.id_of(name)? == self.id_of(id)?)
    }
}

impl Party {
    /// The names this record lists: its id and its aliases.
    fn names_listed(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.id.as_str()).chain(self.also_known_as.iter().map(String::as_str))
    }
}

#[cfg(test)]
#[path = "party_record_tests.rs"]
mod tests;
