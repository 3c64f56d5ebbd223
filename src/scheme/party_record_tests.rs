use super::*;
use serde_json::json;

const NOW: i64 = 1_800_000_000;
const ID: &str = "did:ishare:EU.NL.NTRNL-10000003";

fn claim(kind: &str, status: &str, extra: Value) -> Value {
    let mut c = json!({
        "id": "5ffb4bb9-2020-4045-a922-3bd84e78f709",
        "registrarId": "did:ishare:EU.NL.NTRNL-10000000",
        "type": kind,
        "status": status,
        "startDate": "2025-01-01T00:00:00Z",
        "endDate": "2030-01-01T00:00:00Z"
    });
    c.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    c
}

fn record(claims: Vec<Value>) -> Value {
    json!({"id": ID, "name": "Happy Pets", "alsoKnownAs": ["EU.EORI.NL000000003"], "claims": claims})
}

fn compliant() -> Value {
    claim(
        "frameworkCompliance",
        "active",
        json!({"frameworkId": "iSHARE", "capabilityUrl": "https://sp.example/capabilities"}),
    )
}

#[test]
fn a_3_0_record_counts_only_active_claims_of_the_framework_within_their_dates() {
    let party = read_3_0(
        &record(vec![
            compliant(),
            claim("frameworkRole", "active", json!({"frameworkId": "iSHARE", "roleId": "ServiceProvider"})),
            claim("frameworkRole", "revoked", json!({"frameworkId": "iSHARE", "roleId": "AuthorisationRegistry"})),
            claim("frameworkRole", "active", json!({"frameworkId": "Other", "roleId": "EntitledParty"})),
            claim("x509Certificate", "active", json!({"x5t#s256": "AB01", "x5c": "MII", "subjectName": "CN=x", "certificateType": "eSEAL"})),
            claim("x509Certificate", "revoked", json!({"x5t#s256": "CD02", "x5c": "MII", "subjectName": "CN=y", "certificateType": "eSEAL"})),
            claim("dataspaceMembership", "active", json!({"dataspaceId": "DS"})),
        ]),
        "iSHARE",
    )
    .unwrap();
    assert!(party.is_active_at(NOW));
    assert!(!party.is_active_at(1_900_000_000), "the claim ends in 2030");
    assert!(party.has_role("ServiceProvider", NOW));
    assert!(!party.has_role("AuthorisationRegistry", NOW));
    assert!(!party.has_role("EntitledParty", NOW));
    let thumbprints: Vec<_> = party
        .certificates_at(NOW)
        .map(|c| c.x5t_s256.clone())
        .collect();
    assert_eq!(thumbprints, [Some("AB01".to_string())]);
    assert_eq!(
        party.capability_url.as_deref(),
        Some("https://sp.example/capabilities")
    );
    assert!(party.claims_based());
}

#[test]
fn a_3_0_party_is_named_by_its_id_or_aliases_exactly() {
    let party = read_3_0(&record(vec![compliant()]), "iSHARE").unwrap();
    assert!(party.names(ID));
    assert!(party.names("EU.EORI.NL000000003"));
    for other in [
        "did:ishare:eu.nl.ntrnl-10000003",
        "DID:ISHARE:EU.NL.NTRNL-10000003",
        "eu.eori.nl000000003",
        "did:ishare:EU.NL.NTRNL-1000000*",
        "",
    ] {
        assert!(!party.names(other), "{other}");
    }
}

#[test]
fn without_an_active_compliance_claim_a_party_does_not_adhere() {
    for claims in [
        vec![],
        vec![claim(
            "frameworkCompliance",
            "suspended",
            json!({"frameworkId": "iSHARE"}),
        )],
        vec![claim(
            "frameworkCompliance",
            "active",
            json!({"frameworkId": "Elsewhere"}),
        )],
        vec![claim("frameworkCompliance", "active", json!({}))],
    ] {
        let party = read_3_0(&record(claims.clone()), "iSHARE").unwrap();
        assert!(!party.is_active_at(NOW), "{claims:?}");
    }
}

#[test]
fn malformed_claims_make_the_record_unreadable_not_absent() {
    let mut no_dates = compliant();
    no_dates.as_object_mut().unwrap().remove("endDate");
    let mut bad_date = compliant();
    bad_date["startDate"] = json!("yesterday");
    let no_thumbprint = claim("x509Certificate", "active", json!({"x5c": "MII"}));
    let no_url = claim(
        "authRegistry",
        "active",
        json!({"authRegistryId": "did:ishare:EU.NL.NTRNL-10000004"}),
    );
    for broken in [
        no_dates,
        bad_date,
        no_thumbprint,
        no_url,
        json!("a claim"),
        json!({"status": "active"}),
    ] {
        assert!(
            read_3_0(&record(vec![broken.clone()]), "iSHARE").is_err(),
            "{broken}"
        );
    }
    for broken in [
        json!([]),
        json!({"name": "x", "claims": []}),
        json!({"id": ID}),
    ] {
        assert!(read_3_0(&broken, "iSHARE").is_err(), "{broken}");
    }
}

/// A member of `framework` serving in `dataspaces`.
fn member_of(framework: &str, dataspaces: &[&str]) -> Membership {
    Membership {
        framework: framework.into(),
        dataspaces: dataspaces.iter().map(|d| d.to_string()).collect(),
    }
}

/// The ids of the registries `party` designated for the service provider `sp` in iSHARE.
fn chosen_for(party: &Party, sp: &str) -> Vec<String> {
    let designations = party.designated_for(|x| x == sp, &member_of("iSHARE", &[]), NOW);
    designations.iter().map(|d| d.id.clone()).collect()
}

#[test]
fn the_most_specific_registry_designation_that_fits_is_asked() {
    let registry = |id: &str, extra: Value| {
        let mut fields =
            json!({"authRegistryId": id, "authUrl": format!("https://{id}.example"), "name": id});
        fields
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        claim("authRegistry", "active", fields)
    };
    let sp = "did:ishare:EU.NL.NTRNL-10000003";
    let party = read_3_0(
        &record(vec![
            compliant(),
            registry("default", json!({})),
            registry("framework", json!({"frameworkId": "iSHARE"})),
            registry("dataspace", json!({"dataspaceId": "DS"})),
            registry(
                "other-sp",
                json!({"serviceProviderPartyId": "did:ishare:EU.NL.NTRNL-10000002"}),
            ),
            registry("ours", json!({"serviceProviderPartyId": sp})),
            registry(
                "ours-in-a-dataspace",
                json!({"serviceProviderPartyId": sp, "dataspaceId": "DS"}),
            ),
        ]),
        "iSHARE",
    )
    .unwrap();
    assert_eq!(
        party
            .registry_for(|x| x == sp, &member_of("iSHARE", &[]), NOW)
            .unwrap()
            .id,
        "ours"
    );
    let another = "did:ishare:EU.NL.NTRNL-10000009";
    assert_eq!(
        party
            .registry_for(|x| x == another, &member_of("iSHARE", &[]), NOW)
            .unwrap()
            .id,
        "framework"
    );
    assert_eq!(
        party
            .registry_for(|x| x == another, &member_of("Other", &[]), NOW)
            .unwrap()
            .id,
        "default"
    );
    // Evidence is taken only from the registries chosen for us: never one designated for
    // another service provider, nor a less specific one where a more specific one fits.
    let chosen = |sp: &str| chosen_for(&party, sp);
    assert_eq!(chosen(sp), ["ours", "ours-in-a-dataspace"]);
    assert_eq!(chosen(another), ["framework"]);
    assert_eq!(chosen("did:ishare:EU.NL.NTRNL-10000002"), ["other-sp"]);
    // Serving in the data space: its designation comes before the framework's and the default,
    // after ours.
    let in_ds = member_of("iSHARE", &["DS"]);
    let asked = |sp: &str, ours: &Membership| {
        party
            .registry_for(|x| x == sp, ours, NOW)
            .unwrap()
            .id
            .clone()
    };
    assert_eq!(asked(another, &in_ds), "dataspace");
    assert_eq!(asked(sp, &in_ds), "ours");
    assert_eq!(
        asked(another, &member_of("iSHARE", &["OTHER"])),
        "framework"
    );
}

#[test]
fn a_2_x_record_designates_registries_per_service_provider_or_for_all() {
    let info: PartyInfo = serde_json::from_value(json!({
        "party_id": "EU.EORI.NL000000005",
        "party_name": "Owner",
        "adherence": {"status": "Active", "start_date": "2020-01-01T00:00:00Z", "end_date": "2030-01-01T00:00:00Z"},
        "auth_registries": [
            {"id": "EU.EORI.NL000000041", "name": "North", "url": "https://north.example", "serviceProviderPartyId": "EU.EORI.NL000000003"},
            {"id": "EU.EORI.NL000000042", "name": "South", "url": "https://south.example", "serviceProviderPartyId": "EU.EORI.NL000000002"},
            {"id": "EU.EORI.NL000000043", "name": "Unreachable", "url": ""},
            {"id": "EU.EORI.NL000000044", "name": "Default", "url": "https://default.example", "dataspace_id": "DS"}
        ]
    }))
    .unwrap();
    let party = from_1_9(&info, SchemeVersion::V2_0);
    let chosen = |sp: &str| chosen_for(&party, sp);
    assert_eq!(chosen("EU.EORI.NL000000003"), ["EU.EORI.NL000000041"]);
    assert_eq!(chosen("EU.EORI.NL000000002"), ["EU.EORI.NL000000042"]);
    assert_eq!(chosen("EU.EORI.NL000000009"), ["EU.EORI.NL000000044"]);
    let asked = party.registry_for(
        |x| x == "EU.EORI.NL000000003",
        &member_of("iSHARE", &[]),
        NOW,
    );
    assert_eq!(asked.unwrap().url, "https://north.example");
    // A gateway that names its data spaces reads the data space too: the one designated for ours
    // fits, one for another data space does not, and ours as a service provider still comes first.
    let designated = |sp: &str, spaces: &[&str]| -> Vec<String> {
        let ours = member_of("iSHARE", spaces);
        let chosen = party.designated_for(|x| x == sp, &ours, NOW);
        chosen.iter().map(|d| d.id.clone()).collect()
    };
    assert_eq!(
        designated("EU.EORI.NL000000009", &["DS"]),
        ["EU.EORI.NL000000044"]
    );
    assert!(designated("EU.EORI.NL000000009", &["OTHER"]).is_empty());
    assert_eq!(
        designated("EU.EORI.NL000000003", &["OTHER"]),
        ["EU.EORI.NL000000041"]
    );
}

#[test]
fn a_role_held_in_a_data_space_counts_only_in_ours_and_while_a_member() {
    let membership = |space: &str, end: &str| {
        let mut c = claim(
            "dataspaceMembership",
            "active",
            json!({"dataspaceId": space, "legalAdherence": "yes"}),
        );
        c["endDate"] = json!(end);
        c
    };
    let role = |space: &str| {
        claim(
            "dataspaceRole",
            "active",
            json!({"dataspaceId": space, "roleId": "AuthorisationRegistry"}),
        )
    };
    let party = read_3_0(
        &record(vec![
            compliant(),
            membership("EU.DS.GND.NL.PETCARE", "2030-01-01T00:00:00Z"),
            role("EU.DS.GND.NL.PETCARE"),
            membership("EU.DS.MOB.NL.LOGISTICS", "2026-01-01T00:00:00Z"),
            role("EU.DS.MOB.NL.LOGISTICS"),
            role("EU.DS.AGR.NL.FARMING"),
        ]),
        "iSHARE",
    )
    .unwrap();
    let holds = |spaces: &[&str]| {
        party.holds_role("Authorisation Registry", &member_of("iSHARE", spaces), NOW)
    };
    assert!(
        !party.has_role("AuthorisationRegistry", NOW),
        "not in the framework"
    );
    assert!(holds(&["EU.DS.GND.NL.PETCARE"]));
    assert!(!holds(&[]), "a gateway serving in no data space");
    assert!(!holds(&["EU.DS.MOB.NL.LOGISTICS"]), "its membership ended");
    assert!(
        !holds(&["EU.DS.AGR.NL.FARMING"]),
        "a role without a membership"
    );
    assert!(party.is_member_of("EU.DS.GND.NL.PETCARE", NOW));
    // What it holds of data spaces counts toward the record cache's bound.
    let bare = read_3_0(&record(vec![compliant()]), "iSHARE").unwrap();
    assert!(
        party.weight() >= bare.weight() + 5 * 48,
        "{}",
        party.weight()
    );
    assert!(!party.is_member_of("EU.DS.MOB.NL.LOGISTICS", NOW));
    // A membership without its dates, or a role without its data space, is a broken record.
    let mut undated = membership("EU.DS.GND.NL.PETCARE", "2030-01-01T00:00:00Z");
    undated.as_object_mut().unwrap().remove("startDate");
    let nowhere = claim(
        "dataspaceRole",
        "active",
        json!({"roleId": "ServiceProvider"}),
    );
    for broken in [undated, nowhere] {
        assert!(
            read_3_0(&record(vec![compliant(), broken.clone()]), "iSHARE").is_err(),
            "{broken}"
        );
    }
}

#[test]
fn a_1_9_record_reads_as_it_always_did() {
    let info: PartyInfo = serde_json::from_value(json!({
        "party_id": "EU.EORI.NL000000004",
        "party_name": "Registry",
        "adherence": {"status": "Active", "start_date": "2020-01-01T00:00:00Z", "end_date": "2030-01-01T00:00:00Z"},
        "certifications": [{"role": "AuthorisationRegistry", "start_date": "2020-01-01T00:00:00Z", "end_date": "2030-01-01T00:00:00Z"}],
        "roles": [{"role": "EntitledParty", "start_date": "2020-01-01T00:00:00Z"}],
        "certificates": [{"x5t#s256": "AB01"}],
        "capability_url": ""
    }))
    .unwrap();
    let party = from_1_9(&info, SchemeVersion::V1_9);
    assert!(party.is_active_at(NOW));
    assert!(party.has_role("Authorisation Registry", NOW));
    assert!(party.has_role("entitledparty", NOW));
    assert!(
        !party.has_role("Service Consumer", NOW),
        "a role it does not hold"
    );
    let mut ended = info.clone();
    ended.extra.insert(
        "roles".into(),
        json!([{"role": "EntitledParty", "start_date": "2020-01-01T00:00:00Z", "end_date": "2024-01-01T00:00:00Z"}]),
    );
    assert!(
        !from_1_9(&ended, SchemeVersion::V1_9).has_role("EntitledParty", NOW),
        "an ended role does not count"
    );
    assert!(party.names("eu.eori.nl000000004"));
    assert!(!party.claims_based());
    assert_eq!(party.capability_url, None);
    let mut inactive = info;
    inactive.adherence.status = "NotActive".into();
    assert!(!from_1_9(&inactive, SchemeVersion::V1_9).is_active_at(NOW));
}

#[test]
fn roles_compare_without_case_spaces_or_spelling() {
    for (a, b) in [
        ("AuthorisationRegistry", "authorisationregistry"),
        ("Authorisation Registry", "AuthorisationRegistry"),
        ("AuthorizationRegistry", "AuthorisationRegistry"),
        ("authorization\u{a0}registry", "Authorisation Registry"),
        ("ServiceProvider", "SERVICEPROVIDER"),
    ] {
        assert!(same_role(a, b), "{a} = {b}");
    }
    for (a, b) in [
        ("AuthorisationRegistry", "ServiceProvider"),
        ("AuthorisationRegistr", "AuthorisationRegistry"),
        ("AuthorizationRegistryX", "AuthorisationRegistry"),
        ("Zone", "Sone"),
    ] {
        assert!(!same_role(a, b), "{a} ≠ {b}");
    }
}

#[test]
fn a_name_stands_for_the_record_its_own_lookup_found_and_records_that_disagree_for_no_one() {
    let happy = std::sync::Arc::new(read_3_0(&record(vec![compliant()]), "iSHARE").unwrap());
    let mut aliases = Aliases::default();
    // The alias looked up by itself found the record: it and the record's id stand for it.
    assert!(!aliases.needs_lookup("EU.EORI.NL000000003", &[ID]));
    aliases.found("EU.EORI.NL000000003", Some(&happy));
    assert_eq!(aliases.id_of("EU.EORI.NL000000003"), Ok(ID));
    assert_eq!(aliases.id_of(ID), Ok(ID));
    assert_eq!(aliases.names("EU.EORI.NL000000003", ID), Ok(true));
    // Exactly: another case, or a name no record lists, stands for itself and is never looked up.
    assert_eq!(
        aliases.id_of("eu.eori.nl000000003"),
        Ok("eu.eori.nl000000003")
    );
    assert!(!aliases.needs_lookup("EU.EORI.NL000000009", &[ID]));
    assert_eq!(
        aliases.id_of("EU.EORI.NL000000009"),
        Ok("EU.EORI.NL000000009")
    );

    // A known record lists a name: looked up where that record matters, written till then.
    let rogue = std::sync::Arc::new(Party {
        id: "did:ishare:EU.NL.NTRNL-10000009".into(),
        also_known_as: vec!["did:ishare:EU.NL.NTRNL-10000005".into()],
        ..Party::default()
    });
    aliases.found(&rogue.id, Some(&rogue));
    let owner = "did:ishare:EU.NL.NTRNL-10000005";
    assert!(aliases.needs_lookup(owner, &[&rogue.id]));
    assert!(!aliases.needs_lookup(owner, &[ID]));
    assert_eq!(aliases.id_of(owner), Ok(owner));
    // Its own lookup found another party than the record that lists it: no one's.
    let happy_pets = std::sync::Arc::new(Party {
        id: owner.into(),
        ..Party::default()
    });
    aliases.found(owner, Some(&happy_pets));
    assert_eq!(aliases.id_of(owner), Err(AmbiguousName(owner.into())));
    let mut name = owner.to_string();
    assert!(aliases.resolve(&mut name).is_err());

    // In the other order: the owner found first, then a record that claims its id.
    let mut aliases = Aliases::default();
    aliases.found(owner, Some(&happy_pets));
    assert_eq!(aliases.id_of(owner), Ok(owner));
    aliases.found(&rogue.id, Some(&rogue));
    assert!(aliases.id_of(owner).is_err());
    // A name a record lists that the participant registry does not know is no one's either;
    // nor is one whose lookup found a record that does not list it.
    let mut aliases = Aliases::default();
    aliases.found(ID, Some(&happy));
    aliases.found("EU.EORI.NL000000003", None);
    assert!(aliases.id_of("EU.EORI.NL000000003").is_err());
    aliases.found("EU.EORI.NL000000007", Some(&happy));
    assert!(aliases.id_of("EU.EORI.NL000000007").is_err());
}

/// A 3.0 record of `id` listing `aliases`.
fn known_as(id: &str, aliases: &[&str]) -> Party {
    let mut record = record(vec![compliant()]);
    record["id"] = json!(id);
    record["alsoKnownAs"] = json!(aliases);
    read_3_0(&record, "iSHARE").unwrap()
}

#[test]
fn a_name_is_its_own_partys_or_an_alias_one_record_alone_lists() {
    use std::sync::Arc;
    const OWNER: &str = "did:ishare:EU.NL.NTRNL-10000005";
    const CLAIMANT: &str = "did:ishare:EU.NL.NTRNL-10000001";
    const REGISTRY: &str = "did:ishare:EU.NL.NTRNL-10000004";
    const EORI: &str = "EU.EORI.NL000000005";
    let owner = Arc::new(known_as(OWNER, &[EORI]));
    let claimant = Arc::new(known_as(CLAIMANT, &[EORI, REGISTRY]));
    let registry = known_as(REGISTRY, &[]);
    // The lookup decides where it found the name's own record, or none.
    assert_eq!(
        Named::by_lookup(OWNER, Some(&owner)),
        Some(Named::Party(owner.clone()))
    );
    assert_eq!(Named::by_lookup(OWNER, None), Some(Named::Nobody));
    assert_eq!(
        Named::by_lookup(EORI, Some(&owner)),
        None,
        "an alias is searched"
    );
    // An alias one record alone lists is that record's.
    let alone = [(*owner).clone()];
    assert_eq!(
        Named::by_search(EORI, &owner, &alone, true),
        Named::Party(owner.clone())
    );
    // Listed by two records, it is no one's; a search not read whole proves nothing.
    let both = [(*owner).clone(), (*claimant).clone()];
    assert_eq!(
        Named::by_search(EORI, &claimant, &both, true),
        Named::Contested
    );
    assert_eq!(
        Named::by_search(EORI, &owner, &alone, false),
        Named::Contested
    );
    // A party's own id is that party's, whatever record the lookup answered with.
    let found = [(*claimant).clone(), registry.clone()];
    assert_eq!(
        Named::by_search(REGISTRY, &claimant, &found, true),
        Named::Party(Arc::new(registry))
    );
    // A did:ishare is never the alias of a record of another did:ishare.
    let only_claimant = [(*claimant).clone()];
    assert_eq!(
        Named::by_search(REGISTRY, &claimant, &only_claimant, true),
        Named::Contested
    );
}
