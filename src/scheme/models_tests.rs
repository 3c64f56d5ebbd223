use super::*;
use serde_json::json;

fn party_record() -> Value {
    json!({
        "party_id": "EU.EORI.NL000000001",
        "party_name": "ABC Trucking",
        "adherence": {"status": "Active", "start_date": "2018-04-26T00:00:00", "end_date": "2029-07-25T00:00:00Z"},
        "certifications": [{"role": "AuthorisationRegistry", "start_date": "2018-01-04T00:00:00", "end_date": "2029-02-02T00:00:00", "loa": 3}],
        "capability_url": "https://ar.example/capabilities"
    })
}

#[test]
fn timestamps_with_and_without_zone_parse() {
    assert_eq!(
        SchemeTime::parse("2018-04-26T00:00:00").unwrap().unix(),
        1524700800
    );
    assert_eq!(
        SchemeTime::parse("2018-04-26T00:00:00Z").unwrap().unix(),
        1524700800
    );
    assert_eq!(
        SchemeTime::parse("2018-04-26T02:00:00+02:00")
            .unwrap()
            .unix(),
        1524700800
    );
    assert_eq!(
        SchemeTime::parse("2018-04-26T00:00:00.000Z")
            .unwrap()
            .unix(),
        1524700800
    );
    assert_eq!(SchemeTime::parse("2018-04-26").unwrap().unix(), 1524700800);
    assert!(SchemeTime::parse("yesterday").is_none());
    assert_eq!(
        SchemeTime::from_unix(1524700800).as_str(),
        "2018-04-26T00:00:00Z"
    );
}

#[test]
fn party_record_round_trips() {
    let v = party_record();
    let p: PartyInfo = serde_json::from_value(v.clone()).unwrap();
    assert!(p.adherence.is_active_at(1_700_000_000));
    assert!(!p.adherence.is_active_at(1_900_000_000));
    assert_eq!(serde_json::to_value(&p).unwrap(), v);
}

#[test]
fn party_payload_nested_and_flat() {
    let nested: PartyPayload =
        serde_json::from_value(json!({"party_info": party_record()})).unwrap();
    let flat: PartyPayload = serde_json::from_value(party_record()).unwrap();
    assert_eq!(nested, flat);
    assert_eq!(
        serde_json::to_value(&nested).unwrap()["party_info"],
        party_record()
    );
}

#[test]
fn parties_payload_in_all_three_shapes() {
    let nested: PartiesPayload =
        serde_json::from_value(json!({"parties_info": {"count": 11, "data": [party_record()]}}))
            .unwrap();
    let flat: PartiesPayload =
        serde_json::from_value(json!({"count": 11, "data": [party_record()]})).unwrap();
    let array: PartiesPayload =
        serde_json::from_value(json!({"parties_info": [party_record()]})).unwrap();
    let array_of_pages: PartiesPayload =
        serde_json::from_value(json!({"parties_info": [{"count": 11, "data": [party_record()]}]}))
            .unwrap();
    assert_eq!(nested.0.count, 11);
    assert_eq!(nested, flat);
    assert_eq!(nested, array_of_pages);
    assert_eq!(array.0.count, 1);
    assert_eq!(array.0.data, nested.0.data);
    let out = serde_json::to_value(&nested).unwrap();
    assert_eq!(out["parties_info"]["count"], 11);
}

#[test]
fn production_satellite_member_names_are_read() {
    let mut v = party_record();
    v["certificates"] = json!([{"subject_name": "CN=ABC", "x5t#S256": "AB12"}]);
    v["authregistery"] = json!([{"authorizationRegistryID": "EU.EORI.NL000000004", "authorizationRegistryName": "AR", "authorizationRegistryUrl": "https://ar.example"}]);
    v["total_count"] = json!(1);
    let p: PartyInfo = serde_json::from_value(v).unwrap();
    assert_eq!(p.certificates[0].x5t_s256.as_deref(), Some("AB12"));
    let ar: Vec<_> = p.registries().collect();
    assert_eq!(ar[0].id, "EU.EORI.NL000000004");
    assert_eq!(ar[0].url, "https://ar.example");
    assert_eq!(p.extra["total_count"], 1);
}

#[test]
fn trusted_list_entry_status_is_case_insensitive() {
    let e: TrustedListEntry = serde_json::from_value(json!({
        "subject": "CN=iSHARETestCA,OU=Test,O=iSHARE,C=NL",
        "certificate_fingerprint": "A78FDF7BA13BBD95C6236972DD003FAE07F4E447B791B6EF6737AD22F0B61862",
        "validity": "Valid", "status": "Granted"
    }))
    .unwrap();
    assert!(e.is_granted());
    let withdrawn = TrustedListEntry {
        status: "withdrawn".into(),
        ..e
    };
    assert!(!withdrawn.is_granted());
}

#[test]
fn token_response_tolerates_float_and_extra_members() {
    let t: TokenResponse = serde_json::from_value(
        json!({"access_token": "abc", "token_type": "Bearer", "expires_in": 3600.0, "scope": "iSHARE"}),
    )
    .unwrap();
    assert_eq!(t.expires_in, 3600);
    assert_eq!(t.extra["scope"], "iSHARE");
}

#[test]
fn certificate_response_and_userinfo_round_trip() {
    let c = json!({"date_time": "2024-01-01T00:00:00Z", "certificate_fingerprint": "AB", "validity": true});
    let parsed: CertificateResponse = serde_json::from_value(c.clone()).unwrap();
    assert_eq!(serde_json::to_value(parsed).unwrap(), c);
    let u = json!({"sub": "user-1", "first_name": "Jane", "company_id": "EU.EORI.NL000000001", "delegation_token": {"delegationEvidence": {}}});
    let parsed: UserInfo = serde_json::from_value(u.clone()).unwrap();
    assert_eq!(parsed.attributes["first_name"], "Jane");
    assert_eq!(serde_json::to_value(parsed).unwrap(), u);
}

/// A party record as a real satellite writes it (jomco/fiware-ishare-satellite): `loa` as text,
/// an empty `capability_url`, milliseconds in times, `registrar_id`, `roles`.
fn satellite_record() -> Value {
    json!({
        "party_id": "EU.EORI.NL000000001",
        "party_name": "ABC Trucking",
        "registrar_id": "EU.EORI.NL000000000",
        "capability_url": "",
        "adherence": {"status": "Active", "start_date": "2024-01-01T00:00:00.000Z", "end_date": "2099-01-01T00:00:00.000Z"},
        "certifications": [{"role": "ServiceConsumer", "start_date": "2024-01-01T00:00:00Z", "end_date": "2099-01-01T00:00:00Z", "loa": "High"}],
        "roles": [{"role": "AuthorisationRegistry", "start_date": "2024-01-01T00:00:00Z", "end_date": "", "loa": "High", "compliancy_verified": "yes"}],
        "certificates": [{"subject_name": "C=NL,O=ABC,serialNumber=EU.EORI.NL000000001", "certificate_type": "PKIo", "enabled_from": "2026-11-22T07:59:04.600Z", "x5c": "AAAA", "x5t#S256": "ab12"}],
        "agreements": [{"type": "Terms of Use", "status": "Accepted"}],
        "authregistery": [{"authorizationRegistryID": "EU.EORI.NL000000004", "authorizationRegistryName": null, "authorizationRegistryUrl": "https://ar.example"}]
    })
}

#[test]
fn a_satellites_record_is_read_where_it_differs_from_the_documents() {
    let p: PartyInfo = serde_json::from_value(satellite_record()).unwrap();
    assert!(p.adherence.is_active_at(1_800_000_000));
    assert_eq!(p.certifications[0].extra["loa"], "High");
    let read = crate::scheme::party_record::from_1_9(&p, Default::default());
    assert!(read.has_role("AuthorisationRegistry", 1_800_000_000));
    assert_eq!(p.certificates[0].x5t_s256.as_deref(), Some("ab12"));
    assert_eq!(p.registries().next().unwrap().url, "https://ar.example");
    let mut odd = satellite_record();
    odd["party_name"] = Value::Null;
    odd["certificates"][0]["enabled_from"] = json!(12);
    odd["certificates"][0]["subject_name"] = json!(["C=NL"]);
    assert!(serde_json::from_value::<PartyInfo>(odd).is_ok());
}

#[test]
fn a_member_the_gateway_decides_on_is_named_when_it_cannot_be_read() {
    let mut bad = satellite_record();
    bad["certifications"][0]["end_date"] = json!("soon");
    let e = serde_json::from_value::<PartyPayload>(json!({"party_info": bad})).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("party_info.certifications[0].end_date: "),
        "{e}"
    );
}
