//! The sections of `gateway.toml` about the scheme and its peers, from their file types to the
//! model: the scheme's name, our identity and its chain, the scheme owner and its pinned root,
//! tokens, outbound trust, registries and delegation; each records its problems with their keys
//! and carries on.

use super::defaults as default;
use super::file::*;
use super::issues::Issues;
use super::model::*;
use super::pem::check_pem_certs;
use super::values::{nonzero, party, resolve, scheme_version, url_of, warn_plain};
use crate::scheme::jwt::SigningIdentity;
use crate::scheme::models::TrustedListEntry;
use crate::scheme::party::PartyId;
use crate::scheme::version::SchemeVersion;
use crate::scheme::vocabulary::{DELEGATION_PATH, TOKEN_PATH};
use crate::tls::OutboundTrust;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

pub(super) fn scheme(scheme: Option<String>, issues: &mut Issues) -> String {
    let scheme = scheme.unwrap_or_else(|| default::SCHEME.into());
    if scheme.is_empty() || scheme.chars().any(|c| c.is_whitespace()) {
        issues.add("scheme", "must be a single word, e.g. iSHARE");
    }
    scheme
}

pub(super) fn identity(base: &Path, id: IdentityFile, issues: &mut Issues) -> Option<Identity> {
    let party_id = issues.check("identity.party_id", party(&id.party_id));
    let key_file = resolve(base, &id.key);
    let chain_file = resolve(base, &id.certificate_chain);
    let read = |p: &Path| std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()));
    let key_pem = issues.check("identity.key", read(&key_file));
    let chain_pem = issues.check("identity.certificate_chain", read(&chain_file));
    let (party_id, key_pem, chain_pem) = (party_id?, key_pem?, chain_pem?);
    let signing = issues.check(
        "identity",
        SigningIdentity::from_pem(party_id.clone(), &key_pem, &chain_pem)
            .map_err(|e| e.to_string()),
    )?;
    issues.check(
        "identity.certificate_chain",
        check_chain(signing.chain_der()),
    )?;
    Some(Identity {
        name: id.name.unwrap_or_else(|| party_id.to_string()),
        party_id,
        signing,
        key_pem,
        key_file,
        chain_file,
    })
}

/// The identity's chain runs from its certificate, each signed by the next, to a self-signed root:
/// satellites that want the whole chain in `x5c` refuse client assertions without the root.
fn check_chain(chain: &[Vec<u8>]) -> Result<(), String> {
    use crate::scheme::trust::rfc4514;
    use x509_parser::prelude::{FromDer, X509Certificate};
    let certs = chain
        .iter()
        .enumerate()
        .map(|(i, der)| {
            X509Certificate::from_der(der)
                .map(|(_, c)| c)
                .map_err(|_| format!("certificate {} is not an X.509 certificate", i + 1))
        })
        .collect::<Result<Vec<_>, _>>()?;
    for (i, pair) in certs.windows(2).enumerate() {
        if pair[0]
            .verify_signature(Some(pair[1].public_key()))
            .is_err()
        {
            return Err(format!(
                "certificate {} ({}) is not signed by certificate {} ({}): the chain runs leaf first, each certificate followed by its issuer",
                i + 1,
                rfc4514(pair[0].subject()),
                i + 2,
                rfc4514(pair[1].subject())
            ));
        }
    }
    let last = certs.last().ok_or("the chain holds no certificate")?;
    if last.issuer() != last.subject() || last.verify_signature(None).is_err() {
        return Err(format!(
            "the chain ends at {}, issued by {}: add the certificates up to the root (satellites refuse client assertions whose x5c lacks it)",
            rfc4514(last.subject()),
            rfc4514(last.issuer())
        ));
    }
    Ok(())
}

/// A party id that the version it is spoken to in does not have: a `did:ishare` before 2.1 (the
/// version that brought it), an EORI where 3.0's parties are `did:ishare` (an EORI is only an
/// alias there). The configuration runs, but the peer at that version would not know the id, or
/// the peer is of another version than configured: say which setting to look at.
pub(super) fn warn_id_of_another_version(
    key: &str,
    id: &str,
    version: SchemeVersion,
    issues: &mut Issues,
) {
    let did = PartyId::is_did_ishare(id);
    let setting = match key.starts_with("registry.") {
        true => "its [[registry]] scheme_version",
        false => "[scheme_owner] scheme_version",
    };
    if did && version < SchemeVersion::V2_1 {
        issues.warn(
            key,
            format!("{id} is a did:ishare, which the scheme has from 2.1, but it is spoken to in {}: if the scheme speaks 3.0, set {setting} = \"3.0\"", version.as_str()),
        );
    } else if !did && version.camel_case() {
        issues.warn(
            key,
            format!("{id} is no did:ishare, while 3.0 names its parties by did:ishare (an EORI is an alias there): use the party's did:ishare, or check {setting}"),
        );
    }
}

/// Whether the identity's root is one the scheme owner trusts, as far as the configuration tells.
pub(super) fn check_root(signing: &SigningIdentity, so: &SchemeOwner, issues: &mut Issues) {
    let Some(root) = signing.chain_der().last() else {
        return;
    };
    let fingerprint = crate::scheme::trust::fingerprint(root);
    let pinned = so.root_fingerprint.as_deref() == Some(fingerprint.as_str());
    let listed = so.trusted_list.as_ref().is_some_and(|entries| {
        crate::scheme::trust::TrustedList::new(entries.clone())
            .get(&fingerprint)
            .is_some_and(TrustedListEntry::is_granted)
    });
    if !pinned && !listed {
        issues.warn(
            "identity.certificate_chain",
            format!(
                "the chain's root ({fingerprint}) is not the scheme owner's pinned root nor on a configured trusted list: it must be on the scheme owner's trusted list, which start-up checks"
            ),
        );
    }
}

/// The root the scheme owner signs under, pinned by fingerprint or by a certificate file.
fn pinned_root(base: &Path, so: &SchemeOwnerFile, issues: &mut Issues) -> Option<String> {
    let from_file = so.root_certificate.as_ref().and_then(|p| {
        let certs = check_pem_certs(&resolve(base, p), "scheme_owner.root_certificate", issues)?;
        if certs.len() != 1 {
            issues.add(
                "scheme_owner.root_certificate",
                "must hold exactly one certificate",
            );
            return None;
        }
        Some(crate::scheme::trust::fingerprint(&certs[0]))
    });
    match (&so.root_fingerprint, from_file) {
        (Some(_), Some(_)) => {
            issues.add(
                "scheme_owner",
                "give root_fingerprint or root_certificate, not both",
            );
            None
        }
        (None, file) => file,
        (Some(fp), None) => {
            let hex: String = fp.chars().filter(|c| *c != ':').collect();
            if hex.len() == 64 && hex.chars().all(|c| c.is_ascii_hexdigit()) {
                Some(hex.to_ascii_uppercase())
            } else {
                issues.add(
                    "scheme_owner.root_fingerprint",
                    "must be the SHA-256 of a certificate: 64 hex digits",
                );
                None
            }
        }
    }
}

pub(super) fn scheme_owner(
    base: &Path,
    so: SchemeOwnerFile,
    issues: &mut Issues,
) -> Option<SchemeOwner> {
    let url = issues.check("scheme_owner.url", url_of(&so.url));
    if let Some(url) = &url {
        warn_plain("scheme_owner.url", url, issues);
    }
    let party_id = issues.check("scheme_owner.party_id", party(&so.party_id));
    let root_fingerprint = pinned_root(base, &so, issues);
    let trusted_list = so.trusted_list_file.as_ref().and_then(|p| {
        let p = resolve(base, p);
        let key = "scheme_owner.trusted_list_file";
        let text = issues.check(
            key,
            std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display())),
        )?;
        issues.check(
            key,
            serde_json::from_str::<Vec<TrustedListEntry>>(&text).map_err(|e| {
                format!(
                    "{}: not a JSON array of trusted-list entries: {e}",
                    p.display()
                )
            }),
        )
    });
    if root_fingerprint.is_none() && trusted_list.is_none() {
        issues.add(
            "scheme_owner",
            "give root_fingerprint or root_certificate (the root the scheme owner signs with), or trusted_list_file",
        );
    }
    let mut positive = |name: &str, value: Option<Duration>, default: Duration| {
        issues
            .check(
                &format!("scheme_owner.{name}"),
                nonzero(value.unwrap_or(default), name),
            )
            .unwrap_or(default)
    };
    let refresh = positive("refresh", so.refresh, default::SCHEME_OWNER_REFRESH);
    let timeout = positive("timeout", so.timeout, default::SCHEME_OWNER_TIMEOUT);
    Some(SchemeOwner {
        url: url?,
        party_id: party_id?,
        root_fingerprint,
        trusted_list,
        refresh,
        party_cache_ttl: so.party_cache_ttl.unwrap_or(default::PARTY_CACHE_TTL),
        timeout,
        party_lookups_per_second: so
            .party_lookups_per_second
            .unwrap_or(default::PARTY_LOOKUPS_PER_SECOND),
        scheme_version: scheme_version("scheme_owner.scheme_version", so.scheme_version, issues)
            .unwrap_or(default::SCHEME_VERSION),
    })
}

pub(super) fn tokens(t: TokensFile, issues: &mut Issues) -> Tokens {
    let mut paths = t
        .paths
        .unwrap_or_else(|| default::TOKEN_PATHS.map(String::from).to_vec());
    for (i, p) in paths.iter().enumerate() {
        if crate::request::path::normalize_path(p).ok().as_deref() != Some(p.as_str()) {
            issues.add(
                format!("tokens.paths[{i}]"),
                format!("{p:?} must be a normal absolute path"),
            );
        }
    }
    if !paths.iter().any(|p| p == TOKEN_PATH) {
        paths.push(TOKEN_PATH.into());
    }
    let leeway = t.clock_leeway.unwrap_or(default::CLOCK_LEEWAY);
    if leeway > default::MAX_CLOCK_LEEWAY {
        issues.add(
            "tokens.clock_leeway",
            "more than 30 s defeats the 30 s lifetime of client assertions",
        );
    }
    Tokens {
        lifetime: issues
            .check(
                "tokens.lifetime",
                nonzero(t.lifetime.unwrap_or(default::TOKEN_LIFETIME), "lifetime"),
            )
            .unwrap_or_default(),
        leeway,
        paths,
        allow_rs384_rs512: t.allow_rs384_rs512.unwrap_or(default::ALLOW_RS384_RS512),
    }
}

pub(super) fn outbound(base: &Path, o: OutboundFile, issues: &mut Issues) -> OutboundTrust {
    OutboundTrust {
        ca_pem: o.ca_file.as_ref().and_then(|p| {
            let p = resolve(base, p);
            check_pem_certs(&p, "outbound.ca_file", issues)?;
            std::fs::read(&p).ok()
        }),
        system_roots: o.system_roots.unwrap_or(o.ca_file.is_none()),
    }
}

/// The configured registries; one that gives no `scheme_version` speaks `scheme`'s.
pub(super) fn registries(
    files: Vec<RegistryFile>,
    scheme: SchemeVersion,
    issues: &mut Issues,
) -> BTreeMap<String, Registry> {
    let mut registries = BTreeMap::new();
    let mut names = BTreeSet::new();
    let mut versions: BTreeMap<PartyId, SchemeVersion> = BTreeMap::new();
    for (i, r) in files.into_iter().enumerate() {
        let key = format!("registry[{i}]");
        let version = scheme_version(&format!("{key}.scheme_version"), r.scheme_version, issues)
            .unwrap_or(scheme);
        let party_id = issues.check(&format!("{key}.party_id"), party(&r.party_id));
        let url = issues.check(&format!("{key}.url"), url_of(&r.url));
        if let Some(url) = &url {
            warn_plain(&format!("{key}.url"), url, issues);
        }
        if r.name == OWNERS_REGISTRY {
            issues.add(
                format!("{key}.name"),
                format!("{OWNERS_REGISTRY:?} is how a route names the registry the data owner designated: give this registry another name"),
            );
        } else if !names.insert(r.name.clone()) {
            issues.add(
                format!("{key}.name"),
                format!("{:?} is defined twice", r.name),
            );
        }
        let previous_steps = match r.previous_steps.as_deref() {
            None | Some("none") => PreviousSteps::None,
            Some("consumer_assertion") => PreviousSteps::ConsumerAssertion,
            Some(other) => {
                issues.add(
                    format!("{key}.previous_steps"),
                    format!("{other:?} is not one of \"none\", \"consumer_assertion\""),
                );
                PreviousSteps::None
            }
        };
        let addresses_us_as = r
            .addresses_us_as
            .and_then(|id| addressed_as(&key, &r.party_id, id, issues));
        if let (Some(party_id), Some(url)) = (party_id, url) {
            if versions
                .insert(party_id.clone(), version)
                .is_some_and(|other| other != version)
            {
                issues.add(
                    format!("{key}.scheme_version"),
                    format!("{party_id} is configured as another registry with another scheme_version: a party's evidence is read in one version"),
                );
            }
            registries.insert(
                r.name.clone(),
                Registry {
                    name: r.name,
                    party_id,
                    url,
                    token_path: r.token_path.unwrap_or_else(|| TOKEN_PATH.into()),
                    delegation_path: r.delegation_path.unwrap_or_else(|| DELEGATION_PATH.into()),
                    scheme_version: version,
                    mask_licences: r.mask_licences.unwrap_or(true),
                    previous_steps,
                    addresses_us_as,
                },
            );
        }
    }
    warn_unlike_settings(&registries, issues);
    registries
}

/// Several `[[registry]]` of one party that it would be asked differently by: a rule naming one
/// gets its settings, but the data owner's registry (`registry = "owner"`) is asked with those of
/// the one at the address the owner's record gives.
fn warn_unlike_settings(registries: &BTreeMap<String, Registry>, issues: &mut Issues) {
    let asked = |r: &Registry| {
        (
            r.token_path.clone(),
            r.delegation_path.clone(),
            r.mask_licences,
            r.previous_steps,
            r.addresses_us_as.clone(),
        )
    };
    let mut seen: BTreeMap<&PartyId, &Registry> = BTreeMap::new();
    for r in registries.values() {
        match seen.get(&r.party_id) {
            Some(first) if asked(first) != asked(r) => issues.warn(
                "registry",
                format!("{:?} and {:?} are the same party ({}) asked with other settings: where a route leaves the choice to the data owner (registry = \"owner\"), the one whose url is the address in the owner's record is used (else {:?})", first.name, r.name, r.party_id, first.name),
            ),
            Some(_) => {}
            None => {
                seen.insert(&r.party_id, r);
            }
        }
    }
}

/// The id a registry addresses the gateway by: one printable token, and a warning that says what
/// it allows.
fn addressed_as(key: &str, registry: &str, id: String, issues: &mut Issues) -> Option<String> {
    let key = format!("{key}.addresses_us_as");
    if id.is_empty() || id.len() > 256 || !id.chars().all(|c| c.is_ascii_graphic()) {
        issues.add(
            key,
            "must be the id the registry writes in aud: 1 to 256 printable characters, no spaces",
        );
        return None;
    }
    issues.warn(
        key,
        format!("the answers of {registry} to the gateway's own calls are taken as addressed to the gateway when their aud is {id:?} (the id that registry keeps for it); evidence a client presents must still be addressed to the gateway's party id"),
    );
    Some(id)
}

pub(super) fn delegation(d: DelegationFile, issues: &mut Issues) -> DelegationSettings {
    let calls = d
        .registry_calls_per_minute
        .unwrap_or(default::REGISTRY_CALLS_PER_MINUTE);
    if calls == 0 {
        issues.add(
            "delegation.registry_calls_per_minute",
            "must be at least 1: with none, no request could be decided at a registry",
        );
    }
    DelegationSettings {
        registry_timeout: d.registry_timeout.unwrap_or(default::REGISTRY_TIMEOUT),
        cache_ttl: d.cache_ttl.unwrap_or(default::DECISION_CACHE_TTL),
        deny_cache_ttl: d.deny_cache_ttl.unwrap_or(default::DENY_CACHE_TTL),
        cache_size: d.cache_size.map_or(default::DECISION_CACHE_SIZE, |s| s.0),
        header_evidence_max_age: d
            .header_evidence_max_age
            .unwrap_or(default::HEADER_EVIDENCE_MAX_AGE),
        registry_calls_per_minute: calls,
        ignored_members: ignored_members(d.ignored_members, issues),
    }
}

/// Members of evidence operators list to drop, per issuer: each a member no version of the
/// scheme defines, written as a generic path.
pub(super) fn ignored_members(
    listed: BTreeMap<String, Vec<String>>,
    issues: &mut Issues,
) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    for (issuer, paths) in listed {
        let key = format!("delegation.ignored_members.{issuer:?}");
        let Some(issuer) = issues.check(&key, party(&issuer)) else {
            continue;
        };
        let kept: Vec<String> = paths
            .into_iter()
            .enumerate()
            .filter_map(|(i, p)| {
                issues.check(
                    &format!("{key}[{i}]"),
                    crate::scheme::evidence::droppable(&p),
                )?;
                Some(p)
            })
            .collect();
        out.insert(issuer.to_string(), kept);
    }
    out
}
