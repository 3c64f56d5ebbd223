//! Micro benchmarks of the scheme core: client-assertion verification (cold, and with the chain
//! validation cached as the gateway does) and evidence evaluation with 1, 10 and 100 policies.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use ishare_gateway::scheme::assertion::{check_assertion, AssertionRules};
use ishare_gateway::scheme::evaluation::evaluate;
use ishare_gateway::scheme::evidence::DelegationEvidence;
use ishare_gateway::scheme::jwt::RsaKey;
use ishare_gateway::scheme::mask::AccessRequest;
use ishare_gateway::scheme::models::PartyInfo;
use ishare_gateway::scheme::party::PartyId;
use ishare_gateway::scheme::party_record::from_1_9;
use ishare_gateway::scheme::trust::{check_party, validate_chain, TrustedList};
use ishare_gateway::scheme::version::SchemeVersion;
use ishare_gateway::scheme::Timestamp;
use ishare_gateway::testbed::pki::TestPki;
use serde_json::json;
use std::hint::black_box;

const CLIENT: &str = "EU.EORI.NL000000001";
const SERVER: &str = "EU.EORI.NL000000003";

fn assertion_verification(c: &mut Criterion) {
    let pki = TestPki::shared();
    let creds = pki.party(CLIENT);
    let now = Timestamp::now();
    let token = creds
        .signing_identity()
        .client_assertion(SERVER, now)
        .unwrap();
    let trusted = TrustedList::new([pki.trusted_list_entry()]);
    let rules = AssertionRules::new(SERVER);
    let client = PartyId::parse(CLIENT).unwrap();
    let record: PartyInfo = serde_json::from_value(json!({
        "party_id": CLIENT, "party_name": "ABC Trucking",
        "adherence": {"status": "Active", "start_date": "2020-01-01T00:00:00Z", "end_date": "2099-01-01T00:00:00Z"}
    }))
    .unwrap();
    let record = from_1_9(&record, SchemeVersion::V1_9);

    let mut group = c.benchmark_group("client_assertion");
    group.bench_function("cold: decode, chain, signature, party", |b| {
        b.iter(|| {
            let assertion = check_assertion(black_box(&token), Some(&client), &rules, now).unwrap();
            let chain = validate_chain(&assertion.jwt.x5c, &trusted, now).unwrap();
            let key = RsaKey::of_certificate(&chain.leaf_der).unwrap();
            assertion.jwt.verify_signature_with(&key).unwrap();
            check_party(&chain, &client, Some(&record), now).unwrap()
        })
    });
    // The gateway keeps chain validations by chain hash, with the leaf key: a hit leaves decoding,
    // the claim checks, the signature and the party binding.
    let chain = validate_chain(&creds.chain_der, &trusted, now).unwrap();
    let leaf_key = RsaKey::of_certificate(&creds.chain_der[0]).unwrap();
    group.bench_function("chain cached: decode, signature, party", |b| {
        b.iter(|| {
            let assertion = check_assertion(black_box(&token), Some(&client), &rules, now).unwrap();
            assertion.jwt.verify_signature_with(&leaf_key).unwrap();
            check_party(&chain, &client, Some(&record), now).unwrap()
        })
    });
    group.finish();
}

fn evidence_with(policies: usize) -> DelegationEvidence {
    let policy = |i: usize| {
        json!({
            "target": {
                "resource": {"type": "CONTAINER", "identifiers": [format!("C{i}")], "attributes": ["*"]},
                "actions": ["iSHARE.READ"],
                "environment": {"serviceProviders": [SERVER]}
            },
            "rules": [{"effect": "Permit"}, {"effect": "Deny", "target": {"resource": {"attributes": ["secret"]}}}]
        })
    };
    serde_json::from_value(json!({
        "notBefore": 0, "notOnOrAfter": i64::MAX / 2,
        "policyIssuer": "EU.EORI.NL000000005",
        "target": {"accessSubject": CLIENT},
        "policySets": [{"policies": (0..policies).map(policy).collect::<Vec<_>>()}]
    }))
    .unwrap()
}

fn evidence_evaluation(c: &mut Criterion) {
    let mut group = c.benchmark_group("evidence_evaluation");
    for n in [1usize, 10, 100] {
        let ev = evidence_with(n);
        // The matching policy is the last one, so every policy is looked at.
        let request = AccessRequest {
            policy_issuer: "EU.EORI.NL000000005".into(),
            access_subject: CLIENT.into(),
            service_providers: vec![SERVER.into()],
            resource_type: "CONTAINER".into(),
            identifiers: vec![format!("C{}", n - 1)],
            attributes: vec!["weight".into()],
            actions: vec!["iSHARE.READ".into()],
            ..AccessRequest::default()
        };
        let now = Timestamp::from_secs(1_800_000_000);
        assert!(evaluate(&ev, &request, now).is_permit());
        group.bench_with_input(BenchmarkId::new("policies", n), &n, |b, _| {
            b.iter(|| evaluate(black_box(&ev), black_box(&request), now))
        });
    }
    group.finish();
}

criterion_group!(benches, assertion_verification, evidence_evaluation);
criterion_main!(benches);
