use super::*;
use crate::scheme::evidence::*;
use crate::scheme::mask::{BodyShape, DelegationBody};
use crate::scheme::version::SchemeVersion;
use crate::scheme::Timestamp;
use proptest::prelude::*;
use serde_json::{json, Value};

const OWNER: &str = "EU.EORI.NL000000005";
const CONSUMER: &str = "EU.EORI.NL000000001";
const SP: &str = "EU.EORI.NL000000003";
const NOW: i64 = 1_700_000_000;

fn evidence(value: Value) -> DelegationEvidence {
    serde_json::from_value(value).expect("evidence parses")
}

/// Evidence from the owner to the consumer granting READ on container C1 (all attributes) at SP.
fn base_evidence() -> Value {
    json!({
        "notBefore": NOW - 10,
        "notOnOrAfter": NOW + 3600,
        "policyIssuer": OWNER,
        "target": {"accessSubject": CONSUMER},
        "policySets": [{
            "maxDelegationDepth": 0,
            "target": {"environment": {"licenses": ["ISHARE.0001"]}},
            "policies": [{
                "target": {
                    "resource": {"type": "CONTAINER", "identifiers": ["C1"], "attributes": ["*"]},
                    "actions": ["iSHARE.READ"],
                    "environment": {"serviceProviders": [SP]}
                },
                "rules": [{"effect": "Permit"}]
            }]
        }]
    })
}

fn request() -> AccessRequest {
    AccessRequest {
        policy_issuer: OWNER.into(),
        access_subject: CONSUMER.into(),
        service_providers: vec![SP.into()],
        resource_type: "CONTAINER".into(),
        identifiers: vec!["C1".into()],
        attributes: vec!["weight".into()],
        actions: vec!["iSHARE.READ".into()],
        ..AccessRequest::default()
    }
}

fn decide(ev: Value, req: &AccessRequest) -> Decision {
    evaluate(&evidence(ev), req, Timestamp::from_secs(NOW))
}

fn deny_code(ev: Value, req: &AccessRequest) -> &'static str {
    match decide(ev, req) {
        Decision::Deny(r) => r.code(),
        Decision::Permit(_) => "permit",
    }
}

#[test]
fn matching_evidence_permits_and_reports_its_licences() {
    match decide(base_evidence(), &request()) {
        Decision::Permit(p) => {
            assert_eq!(p.licences, vec![Licence::Id("ISHARE.0001".into())]);
            assert_eq!(p.not_on_or_after, NOW + 3600);
        }
        other => panic!("expected permit, got {other:?}"),
    }
}

#[test]
fn time_window_is_enforced() {
    let mut ev = base_evidence();
    ev["notBefore"] = json!(NOW + 1);
    assert_eq!(deny_code(ev, &request()), "evidence_not_yet_valid");
    let mut ev = base_evidence();
    ev["notOnOrAfter"] = json!(NOW);
    assert_eq!(deny_code(ev, &request()), "evidence_expired");
    let mut ev = base_evidence();
    ev["notOnOrAfter"] = json!(NOW + 1);
    assert_eq!(deny_code(ev, &request()), "permit");
}

#[test]
fn issuer_and_subject_must_match() {
    let mut ev = base_evidence();
    ev["policyIssuer"] = json!("EU.EORI.NL000000009");
    assert_eq!(deny_code(ev, &request()), "wrong_policy_issuer");
    let mut ev = base_evidence();
    ev["target"]["accessSubject"] = json!("EU.EORI.NL000000009");
    assert_eq!(deny_code(ev, &request()), "wrong_access_subject");
}

#[test]
fn resource_identifiers_attributes_and_actions_must_be_granted() {
    let mut r = request();
    r.resource_type = "PALLET".into();
    assert_eq!(deny_code(base_evidence(), &r), "resource_type_not_granted");
    let mut r = request();
    r.identifiers = vec!["C1".into(), "C2".into()];
    assert_eq!(deny_code(base_evidence(), &r), "identifier_not_granted");
    let mut r = request();
    r.actions = vec!["iSHARE.DELETE".into()];
    assert_eq!(deny_code(base_evidence(), &r), "action_not_granted");
    let mut ev = base_evidence();
    ev["policySets"][0]["policies"][0]["target"]["resource"]["attributes"] = json!(["weight"]);
    let mut r = request();
    r.attributes = vec!["owner".into()];
    assert_eq!(deny_code(ev, &r), "attribute_not_granted");
}

#[test]
fn wildcard_counts_only_on_the_granted_side() {
    let mut ev = base_evidence();
    ev["policySets"][0]["policies"][0]["target"]["resource"]["identifiers"] = json!(["*"]);
    let mut r = request();
    r.identifiers = vec!["anything".into()];
    assert_eq!(deny_code(ev, &r), "permit");
    // A request for "*" is not granted by a list of specific identifiers.
    let mut r = request();
    r.identifiers = vec!["*".into()];
    assert_eq!(deny_code(base_evidence(), &r), "identifier_not_granted");
}

#[test]
fn absent_identifiers_grant_the_whole_type() {
    let mut ev = base_evidence();
    ev["policySets"][0]["policies"][0]["target"]["resource"]
        .as_object_mut()
        .unwrap()
        .remove("identifiers");
    let mut r = request();
    r.identifiers = vec!["C9".into()];
    assert_eq!(deny_code(ev, &r), "permit");
}

#[test]
fn service_providers_when_present_must_contain_us() {
    let mut r = request();
    r.service_providers = vec!["EU.EORI.NL000000002".into()];
    assert_eq!(
        deny_code(base_evidence(), &r),
        "service_provider_not_listed"
    );
    let mut ev = base_evidence();
    ev["policySets"][0]["policies"][0]["target"]
        .as_object_mut()
        .unwrap()
        .remove("environment");
    assert_eq!(deny_code(ev, &r), "permit");
}

#[test]
fn required_licences_must_be_carried() {
    let mut r = request();
    r.required_licences = vec!["ISHARE.0001".into()];
    assert_eq!(deny_code(base_evidence(), &r), "permit");
    r.required_licences = vec!["ISHARE.0002".into()];
    assert_eq!(deny_code(base_evidence(), &r), "licence_missing");
}

#[test]
fn first_rule_must_permit() {
    let mut ev = base_evidence();
    ev["policySets"][0]["policies"][0]["rules"] = json!([{"effect": "Deny"}]);
    assert_eq!(deny_code(ev, &request()), "denied_by_rule");
    let mut ev = base_evidence();
    ev["policySets"][0]["policies"][0]["rules"] = json!([]);
    assert_eq!(deny_code(ev, &request()), "denied_by_rule");
}

#[test]
fn later_deny_rules_restrict_the_default_permit() {
    let mut ev = base_evidence();
    ev["policySets"][0]["policies"][0]["target"]["resource"]["identifiers"] = json!(["*"]);
    ev["policySets"][0]["policies"][0]["rules"] = json!([
        {"effect": "Permit"},
        {"effect": "Deny", "target": {"resource": {"type": "CONTAINER", "identifiers": ["C1"], "attributes": ["weight"]}, "actions": ["iSHARE.READ"]}}
    ]);
    assert_eq!(deny_code(ev.clone(), &request()), "denied_by_rule");
    // Other identifiers and other attributes stay permitted.
    let mut r = request();
    r.identifiers = vec!["C2".into()];
    assert_eq!(deny_code(ev.clone(), &r), "permit");
    let mut r = request();
    r.attributes = vec!["owner".into()];
    assert_eq!(deny_code(ev.clone(), &r), "permit");
    // A denied attribute is denied in every spelling a binder reads as it.
    for (spelling, code) in [
        ("WEIGHT", "denied_by_rule"),
        ("Weight", "denied_by_rule"),
        ("we\u{131}ght", "denied_by_rule"),
        ("weights", "permit"),
    ] {
        let mut r = request();
        r.attributes = vec!["owner".into(), spelling.into()];
        assert_eq!(deny_code(ev.clone(), &r), code, "{spelling}");
    }
    // A Deny rule without attributes or actions covers all of them.
    ev["policySets"][0]["policies"][0]["rules"][1] =
        json!({"effect": "Deny", "target": {"resource": {"identifiers": ["C1"]}}});
    let mut r = request();
    r.attributes = vec!["owner".into()];
    assert_eq!(deny_code(ev, &r), "denied_by_rule");
}

#[test]
fn policy_sets_and_policies_are_permit_overrides() {
    let mut ev = base_evidence();
    let denying = json!({
        "policies": [{
            "target": {"resource": {"type": "CONTAINER", "identifiers": ["C1"], "attributes": ["*"]}, "actions": ["iSHARE.READ"]},
            "rules": [{"effect": "Deny"}]
        }]
    });
    ev["policySets"].as_array_mut().unwrap().insert(0, denying);
    assert_eq!(deny_code(ev, &request()), "permit");
}

#[test]
fn the_closest_policy_names_the_reason() {
    let mut ev = base_evidence();
    let other_type = json!({
        "target": {"resource": {"type": "PALLET"}, "actions": ["iSHARE.READ"]},
        "rules": [{"effect": "Permit"}]
    });
    ev["policySets"][0]["policies"]
        .as_array_mut()
        .unwrap()
        .push(other_type);
    let mut r = request();
    r.actions = vec!["iSHARE.UPDATE".into()];
    assert_eq!(deny_code(ev, &r), "action_not_granted");
}

#[test]
fn no_policies_is_a_deny() {
    let mut ev = base_evidence();
    ev["policySets"] = json!([]);
    assert_eq!(deny_code(ev, &request()), "no_policy");
}

fn hop(issuer: &str, subject: &str, depth: Option<u32>) -> DelegationEvidence {
    let mut ev = base_evidence();
    ev["policyIssuer"] = json!(issuer);
    ev["target"]["accessSubject"] = json!(subject);
    match depth {
        Some(d) => ev["policySets"][0]["maxDelegationDepth"] = json!(d),
        None => {
            ev["policySets"][0]
                .as_object_mut()
                .unwrap()
                .remove("maxDelegationDepth");
        }
    }
    evidence(ev)
}

const BROKER: &str = "EU.EORI.NL000000007";
const SUB: &str = "EU.EORI.NL000000008";

fn chain_code(chain: &[DelegationEvidence]) -> &'static str {
    match evaluate_chain(chain, &request(), Timestamp::from_secs(NOW)) {
        Decision::Deny(r) => r.code(),
        Decision::Permit(_) => "permit",
    }
}

#[test]
fn chains_link_subject_to_issuer() {
    assert_eq!(
        chain_code(&[hop(OWNER, BROKER, Some(1)), hop(BROKER, CONSUMER, None)]),
        "permit"
    );
    assert_eq!(
        chain_code(&[hop(OWNER, BROKER, Some(1)), hop(SUB, CONSUMER, None)]),
        "delegation_chain_broken"
    );
    assert_eq!(chain_code(&[]), "no_evidence");
    assert_eq!(
        chain_code(&[hop(BROKER, BROKER, Some(1)), hop(BROKER, CONSUMER, None)]),
        "wrong_policy_issuer"
    );
}

#[test]
fn max_delegation_depth_counts_down() {
    // Depth 0 or absent on the owner's step: no further step allowed.
    assert_eq!(
        chain_code(&[hop(OWNER, BROKER, Some(0)), hop(BROKER, CONSUMER, None)]),
        "delegation_depth_exceeded"
    );
    assert_eq!(
        chain_code(&[hop(OWNER, BROKER, None), hop(BROKER, CONSUMER, None)]),
        "delegation_depth_exceeded"
    );
    // Owner allows one further step; the broker cannot extend that by claiming more.
    assert_eq!(
        chain_code(&[
            hop(OWNER, BROKER, Some(1)),
            hop(BROKER, SUB, Some(5)),
            hop(SUB, CONSUMER, None)
        ]),
        "delegation_depth_exceeded"
    );
    assert_eq!(
        chain_code(&[
            hop(OWNER, BROKER, Some(2)),
            hop(BROKER, SUB, Some(1)),
            hop(SUB, CONSUMER, None)
        ]),
        "permit"
    );
}

#[test]
fn every_step_of_a_chain_must_grant_the_request() {
    let mut second = hop(BROKER, CONSUMER, None);
    second.policy_sets[0].policies[0].target.actions = vec!["iSHARE.CREATE".into()];
    assert_eq!(
        chain_code(&[hop(OWNER, BROKER, Some(1)), second]),
        "action_not_granted"
    );
}

#[test]
fn both_mask_body_shapes_parse() {
    let mask = json!({
        "policyIssuer": OWNER,
        "target": {"accessSubject": CONSUMER},
        "policySets": {"policies": {"target": {"resource": {"type": "CONTAINER", "identifiers": ["C1"], "attributes": ["*"]}, "actions": ["iSHARE.READ"]}, "rules": [{"effect": "Permit"}]}}
    });
    let endpoint: DelegationBody =
        serde_json::from_value(json!({"delegationRequest": mask, "previous_steps": ["jwt"]}))
            .unwrap();
    assert_eq!(endpoint.shape, BodyShape::Endpoint);
    assert_eq!(endpoint.previous_steps, vec!["jwt".to_string()]);
    assert_eq!(endpoint.request.policy_sets[0].policies.len(), 1);
    let generic: DelegationBody = serde_json::from_value(json!({
        "delegation_mask": {"delegationRequest": mask},
        "delegation_path": [OWNER, CONSUMER],
        "previous_steps": ["jwt"]
    }))
    .unwrap();
    assert_eq!(generic.shape, BodyShape::Generic);
    assert_eq!(generic.request, endpoint.request);
    assert_eq!(generic.delegation_path.len(), 2);
    // 2.x: inside delegationRequest, in snake case (its OpenAPI documents' shape).
    let mut inner = mask.clone();
    inner["previous_steps"] = json!(["jwt"]);
    let nested: DelegationBody =
        serde_json::from_value(json!({"delegationRequest": inner})).unwrap();
    assert_eq!(nested.shape, BodyShape::Nested);
    assert_eq!(nested.previous_steps, vec!["jwt".to_string()]);
    let written = serde_json::to_value(&nested).unwrap();
    assert_eq!(
        written["delegationRequest"]["previous_steps"],
        json!(["jwt"])
    );
    assert!(written.get("previous_steps").is_none(), "{written}");
    for (version, shape) in [
        (SchemeVersion::V1_9, BodyShape::Endpoint),
        (SchemeVersion::V2_0, BodyShape::Nested),
        (SchemeVersion::V2_2, BodyShape::Nested),
        (SchemeVersion::V3_0, BodyShape::Camel),
    ] {
        assert_eq!(BodyShape::of(version), shape, "{version}");
    }
    // Round trip in each shape.
    for body in [endpoint, generic, nested] {
        let again: DelegationBody =
            serde_json::from_value(serde_json::to_value(&body).unwrap()).unwrap();
        assert_eq!(again, body);
    }
    let err = serde_json::from_value::<DelegationBody>(json!({"previous_steps": []})).unwrap_err();
    assert!(err.to_string().contains("no delegationRequest"));
}

#[test]
fn spec_example_evidence_round_trips() {
    let ev = json!({
        "notBefore": 1541058939,
        "notOnOrAfter": 2147483647,
        "policyIssuer": "EU.EORI.NL000000005",
        "target": {"accessSubject": "EU.EORI.NL000000001"},
        "policySets": [{
            "maxDelegationDepth": 0,
            "target": {"environment": {"licenses": ["ISHARE.0001", {"anyOf": ["A", {"allOf": ["B", "C"]}]}]}},
            "policies": [{
                "target": {
                    "resource": {"type": "GS1.CONTAINER", "identifiers": ["180621.ABC1234"], "attributes": ["GS1.CONTAINER.ATTRIBUTE.ETA"]},
                    "actions": ["iSHARE.READ"],
                    "environment": {"serviceProviders": ["EU.EORI.NL000000003"]}
                },
                "rules": [{"effect": "Permit"}, {"effect": "Deny", "target": {"resource": {"type": "GS1.CONTAINER", "identifiers": ["X"]}, "actions": ["iSHARE.READ"]}}]
            }]
        }]
    });
    let parsed = evidence(ev.clone());
    assert_eq!(serde_json::to_value(&parsed).unwrap(), ev);
    let misspelt = json!({"notBefore": 1, "nonOnOrAfter": 2, "policyIssuer": OWNER, "target": {"accessSubject": CONSUMER}, "policySets": []});
    assert_eq!(evidence(misspelt).not_on_or_after, 2);
}

#[test]
fn a_request_becomes_a_mask_with_us_as_service_provider() {
    let mask = request().to_mask(SchemeVersion::V1_9);
    assert_eq!(mask.policy_issuer, OWNER);
    let p = &mask.policy_sets[0].policies[0];
    assert_eq!(
        p.target.environment.as_ref().unwrap().service_providers,
        Some(vec![SP.to_string()])
    );
    assert_eq!(p.rules, vec![Rule::permit()]);
}

// ---- properties ----

fn values() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(prop::sample::select(vec!["a", "b", "c", "*"]), 0..3)
        .prop_map(|v| v.into_iter().map(String::from).collect())
}

fn opt_values() -> impl Strategy<Value = Option<Vec<String>>> {
    prop::option::of(values())
}

fn arb_request() -> impl Strategy<Value = AccessRequest> {
    (
        prop::sample::select(vec!["T1", "T2"]),
        values(),
        values(),
        prop::collection::vec(prop::sample::select(vec!["R", "U", "*"]), 1..3),
        prop::sample::select(vec![SP, "EU.EORI.NL000000002"]),
    )
        .prop_map(|(t, ids, attrs, actions, sp)| AccessRequest {
            policy_issuer: OWNER.into(),
            access_subject: CONSUMER.into(),
            service_providers: vec![sp.into()],
            resource_type: t.into(),
            identifiers: ids,
            attributes: attrs,
            actions: actions.into_iter().map(String::from).collect(),
            ..AccessRequest::default()
        })
}

fn arb_policy() -> impl Strategy<Value = Policy> {
    (
        prop::sample::select(vec!["T1", "T2"]),
        opt_values(),
        opt_values(),
        prop::collection::vec(prop::sample::select(vec!["R", "U", "*"]), 0..3),
        prop::option::of(prop::collection::vec(
            prop::sample::select(vec![SP, "EU.EORI.NL000000002"]),
            0..2,
        )),
    )
        .prop_map(|(t, ids, attrs, actions, sps)| Policy {
            target: PolicyTarget {
                resource: Resource {
                    resource_type: t.into(),
                    identifiers: ids,
                    attributes: attrs,
                    ..Resource::default()
                },
                actions: actions.into_iter().map(String::from).collect(),
                environment: sps.map(|s| PolicyEnvironment {
                    service_providers: Some(s.into_iter().map(String::from).collect()),
                    ..PolicyEnvironment::default()
                }),
                context: None,
                unknown: Unknown::default(),
            },
            rules: vec![Rule::permit()],
            unknown: Unknown::default(),
        })
}

fn arb_deny_rule() -> impl Strategy<Value = Rule> {
    (
        prop::option::of(prop::sample::select(vec!["T1", "T2"])),
        opt_values(),
        opt_values(),
        prop::option::of(prop::collection::vec(
            prop::sample::select(vec!["R", "U"]),
            0..2,
        )),
    )
        .prop_map(|(t, ids, attrs, actions)| Rule {
            target: Some(RuleTarget {
                resource: Some(RuleResource {
                    resource_type: t.map(String::from),
                    identifiers: ids,
                    attributes: attrs,
                    ..RuleResource::default()
                }),
                actions: actions.map(|a| a.into_iter().map(String::from).collect()),
                ..RuleTarget::default()
            }),
            ..Rule::deny()
        })
}

fn wrap(policies: Vec<Policy>) -> DelegationEvidence {
    DelegationEvidence {
        not_before: NOW - 1,
        not_on_or_after: NOW + 60,
        policy_issuer: OWNER.into(),
        target: RootTarget::new(CONSUMER.into()),
        policy_sets: vec![PolicySet {
            policies,
            ..PolicySet::default()
        }],
        unknown: Unknown::default(),
        read_as: ReadAs::default(),
        signer: None,
    }
}

/// The oracle for "within the mask": the request asks for nothing the mask does not name.
fn within(req: &AccessRequest, mask: &AccessRequest) -> bool {
    let subset = |r: &[String], m: &[String]| r.iter().all(|x| m.contains(x));
    req.resource_type == mask.resource_type
        && subset(&req.identifiers, &mask.identifiers)
        && subset(&req.attributes, &mask.attributes)
        && subset(&req.actions, &mask.actions)
        && subset(&req.service_providers, &mask.service_providers)
}

/// Evidence as a registry issues it for a mask: the mask's own policies with a Permit rule.
fn issued_for(mask: &AccessRequest) -> DelegationEvidence {
    let m = mask.to_mask(SchemeVersion::V1_9);
    DelegationEvidence {
        not_before: NOW - 1,
        not_on_or_after: NOW + 60,
        policy_issuer: m.policy_issuer,
        target: m.target,
        policy_sets: m.policy_sets,
        unknown: Unknown::default(),
        read_as: ReadAs::default(),
        signer: None,
    }
}

proptest! {
    #[test]
    fn adding_a_deny_rule_never_widens_access(
        policies in prop::collection::vec(arb_policy(), 1..4),
        which in 0usize..4,
        rule in arb_deny_rule(),
        req in arb_request(),
    ) {
        let before = evaluate(&wrap(policies.clone()), &req, Timestamp::from_secs(NOW));
        let mut restricted = policies;
        let i = which % restricted.len();
        restricted[i].rules.push(rule);
        let after = evaluate(&wrap(restricted), &req, Timestamp::from_secs(NOW));
        prop_assert!(before.is_permit() || !after.is_permit());
    }

    #[test]
    fn evidence_for_a_mask_permits_exactly_the_requests_within_it(
        mask in arb_request(),
        req in arb_request(),
    ) {
        // Masks never carry "*" (it counts only on the granted side), so the oracle is plain inclusion.
        let strip = |v: &mut Vec<String>| v.retain(|x| x != "*");
        let mut mask = mask;
        strip(&mut mask.identifiers);
        strip(&mut mask.attributes);
        strip(&mut mask.actions);
        if mask.actions.is_empty() {
            mask.actions.push("R".into());
        }
        let decision = evaluate(&issued_for(&mask), &req, Timestamp::from_secs(NOW));
        prop_assert_eq!(decision.is_permit(), within(&req, &mask));
    }
}

fn decided_where(chain: &[DelegationEvidence], req: &AccessRequest) -> Vec<String> {
    evaluate_chain_at(chain, req, Timestamp::from_secs(NOW))
        .decided_by
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn the_evaluation_names_the_policy_and_rule_that_decided() {
    // A permit: the first granting policy of every step, by its default rule.
    let mut ev = base_evidence();
    let other_type = json!({
        "target": {"resource": {"type": "PALLET"}, "actions": ["iSHARE.READ"]},
        "rules": [{"effect": "Permit"}]
    });
    ev["policySets"][0]["policies"]
        .as_array_mut()
        .unwrap()
        .insert(0, other_type);
    let permit = decided_where(&[evidence(ev.clone())], &request());
    assert_eq!(permit, ["evidence[0].policySets[0].policies[1].rules[0]"]);
    // A later Deny rule: that rule.
    ev["policySets"][0]["policies"][1]["rules"] = json!([
        {"effect": "Permit"},
        {"effect": "Deny", "target": {"resource": {"identifiers": ["C9"]}}},
        {"effect": "Deny", "target": {"resource": {"identifiers": ["C1"]}}}
    ]);
    let denied = decided_where(&[evidence(ev.clone())], &request());
    assert_eq!(denied, ["evidence[0].policySets[0].policies[1].rules[2]"]);
    // The policy that came closest, without a rule: its target did not cover the request.
    let mut r = request();
    r.actions = vec!["iSHARE.DELETE".into()];
    assert_eq!(
        decided_where(&[evidence(ev)], &r),
        ["evidence[0].policySets[0].policies[1]"]
    );
    // A step that fails before its policies: only the step.
    let chain = [hop(OWNER, BROKER, Some(1)), hop(SUB, CONSUMER, Some(0))];
    assert_eq!(decided_where(&chain, &request()), ["evidence[1]"]);
    assert!(decided_where(&[], &request()).is_empty());
}

// ---- what is not understood, conditions, contexts, licence expressions, 3.0 binding ----

/// The first policy of `ev`.
fn policy(ev: &mut Value) -> &mut Value {
    &mut ev["policySets"][0]["policies"][0]
}

fn deny_at(ev: Value, req: &AccessRequest) -> (&'static str, Vec<String>) {
    let evaluation = evaluate_chain_at(&[evidence(ev)], req, Timestamp::from_secs(NOW));
    let code = match &evaluation.decision {
        Decision::Deny(r) => r.code(),
        Decision::Permit(_) => "permit",
    };
    let places = evaluation.decided_by.iter().map(ToString::to_string);
    (code, places.collect())
}

fn located(value: &str) -> AccessRequest {
    let mut r = request();
    r.operands
        .insert("requesterLocation".into(), Some(value.into()));
    r
}

fn condition(left: &str, op: &str, right: &str) -> Value {
    json!({"leftOperand": left, "operator": op, "rightOperand": right})
}

#[test]
fn a_member_no_version_defines_denies_what_it_is_part_of_and_is_named() {
    type Edit = fn(&mut Value);
    let places: [(&str, Edit); 9] = [
        ("comment", |ev| ev["comment"] = json!("x")),
        ("target.delegate", |ev| {
            ev["target"]["delegate"] = json!("x")
        }),
        ("policySets[0].priority", |ev| {
            ev["policySets"][0]["priority"] = json!(1)
        }),
        ("policySets[0].target.environment.region", |ev| {
            ev["policySets"][0]["target"]["environment"]["region"] = json!("EU")
        }),
        ("policySets[0].policies[0].obligations", |ev| {
            policy(ev)["obligations"] = json!(["log"])
        }),
        ("policySets[0].policies[0].target.resource.except", |ev| {
            policy(ev)["target"]["resource"]["except"] = json!(["C1"])
        }),
        (
            "policySets[0].policies[0].target.environment.regions",
            |ev| policy(ev)["target"]["environment"]["regions"] = json!(["EU"]),
        ),
        ("policySets[0].policies[0].rules[0].validUntil", |ev| {
            policy(ev)["rules"][0]["validUntil"] = json!(0)
        }),
        ("policySets[0].policies[0].rules[1].target.when", |ev| {
            policy(ev)["rules"] = json!([{"effect": "Permit"}, {"effect": "Deny", "target": {"resource": {"identifiers": ["C9"]}, "when": "night"}}])
        }),
    ];
    for (member, edit) in places {
        let mut ev = base_evidence();
        edit(&mut ev);
        let (code, at) = deny_at(ev.clone(), &request());
        assert_eq!(code, "evidence_member_not_understood", "{member}");
        assert_eq!(at.len(), 1);
        assert!(at[0].ends_with(member), "{member}: {at:?}");
        match decide(ev, &request()) {
            Decision::Deny(r) => assert!(r.to_string().contains(member), "{r}"),
            Decision::Permit(_) => unreachable!(),
        }
    }
    // Policies are permit-overrides: another policy that is understood still grants.
    let mut ev = base_evidence();
    let understood = policy(&mut ev).clone();
    policy(&mut ev)["obligations"] = json!(["log"]);
    ev["policySets"][0]["policies"]
        .as_array_mut()
        .unwrap()
        .push(understood);
    assert_eq!(deny_code(ev, &request()), "permit");
}

#[test]
fn members_listed_for_an_issuer_are_dropped_and_nothing_else() {
    let mut written = base_evidence();
    policy(&mut written)["rules"][0]["comment"] = json!("granted by phone");
    policy(&mut written)["description"] = json!("x");
    drop_listed(
        &mut written,
        &["policySets[].policies[].rules[].comment".into()],
    );
    let (code, at) = deny_at(written.clone(), &request());
    assert_eq!(code, "evidence_member_not_understood");
    assert_eq!(at, ["evidence[0].policySets[0].policies[0].description"]);
    drop_listed(
        &mut written,
        &["policySets[].policies[].description".into()],
    );
    assert_eq!(deny_code(written, &request()), "permit");
    // A list written as one object is walked as well.
    let mut single = base_evidence();
    let only = single["policySets"][0].clone();
    single["policySets"] = only;
    single["policySets"]["policies"][0]["note"] = json!(1);
    drop_listed(&mut single, &["policySets[].policies[].note".into()]);
    assert_eq!(deny_code(single, &request()), "permit");
    // Members the scheme defines are never droppable; paths must name an object of the evidence.
    for listed in [
        "policySets[].policies[].rules[].conditions",
        "policySets[].policies[].rules[].effect",
        "policySets[].policies[].target.environment.serviceProviders",
        "policySets[].policies[].target.context.x",
        "policySets.policies.rules.comment",
        "policySets[].policies[].rules[]",
        "policySets[].policies[].rules[].Conditions",
        "policySets[].policies[].target.environment.service_providers",
        "policySets[].policies[].CONTEXT",
    ] {
        assert!(droppable(listed).is_err(), "{listed}");
    }
    assert!(droppable("comment").is_ok());
    assert!(droppable("policySets[].policies[].rules[].target.resource.note").is_ok());
}

/// The conditional Permits and trees the gateway once granted: each is a Deny now, with its reason.
#[test]
fn a_conditional_permit_is_never_an_unconditional_one() {
    let mars = condition("requesterLocation", "equal", "Mars");
    let shapes = [
        (json!(mars), "condition_operand_undefined"),
        (
            json!({"allOf": [mars, condition("requesterLocation", "notEqual", "Mars")]}),
            "condition_operand_undefined",
        ),
        (json!({"anyOf": [mars]}), "condition_operand_undefined"),
        (json!({"anyOf": []}), "condition_malformed"),
        (
            json!({"allOf": [{"anyOf": [mars]}]}),
            "condition_operand_undefined",
        ),
        (
            json!({"leftOperand": "x", "operator": "within", "rightOperand": "EU"}),
            "condition_operator_unknown",
        ),
        (
            json!({"leftOperand": "x", "operator": "equal", "rightOperand": {"in": ["EU"]}}),
            "condition_operand_type",
        ),
        (
            json!({"leftOperand": "x", "operator": "equal"}),
            "condition_malformed",
        ),
        (json!([]), "condition_malformed"),
        (json!(null), "condition_malformed"),
        (
            json!({"anyOf": [mars], "leftOperand": "x", "operator": "equal", "rightOperand": "1"}),
            "condition_malformed",
        ),
    ];
    for (tree, code) in shapes.clone() {
        let mut ev = base_evidence();
        policy(&mut ev)["rules"] = json!([{"effect": "Permit", "conditions": tree}]);
        assert_eq!(deny_code(ev, &request()), code, "{tree}");
    }
    // With the operand declared by the route: the tree decides, and what cannot be evaluated
    // still denies.
    for (tree, expected) in [
        (json!(mars), "condition_not_met"),
        (
            json!({"anyOf": [mars, condition("requesterLocation", "equal", "NL")]}),
            "permit",
        ),
        (
            json!({"allOf": [mars, condition("requesterLocation", "equal", "NL")]}),
            "condition_not_met",
        ),
        (
            json!({"anyOf": [condition("requesterLocation", "equal", "NL"), condition("other", "equal", "1")]}),
            "condition_operand_undefined",
        ),
    ] {
        let mut ev = base_evidence();
        policy(&mut ev)["rules"] = json!([{"effect": "Permit", "conditions": tree}]);
        assert_eq!(deny_code(ev, &located("NL")), expected, "{tree}");
    }
    // A request that does not give the declared value.
    let mut ev = base_evidence();
    policy(&mut ev)["rules"] = json!([{"effect": "Permit", "conditions": mars}]);
    let mut absent = request();
    absent.operands.insert("requesterLocation".into(), None);
    assert_eq!(deny_code(ev, &absent), "condition_value_absent");
}

#[test]
fn the_condition_that_decided_is_named() {
    let mut ev = base_evidence();
    policy(&mut ev)["rules"] = json!([{"effect": "Permit", "conditions": {"allOf": [
        condition("requesterLocation", "equal", "NL"),
        condition("requesterLocation", "notEqual", "NL")
    ]}}]);
    let (code, at) = deny_at(ev.clone(), &located("NL"));
    assert_eq!(code, "condition_not_met");
    assert_eq!(
        at,
        ["evidence[0].policySets[0].policies[0].rules[0].conditions.allOf[1]"]
    );
    policy(&mut ev)["rules"][0]["conditions"] = condition("requesterLocation", "equal", "NL");
    let permit = decided_where(&[evidence(ev)], &located("NL"));
    assert_eq!(
        permit,
        [
            "evidence[0].policySets[0].policies[0].rules[0]",
            "evidence[0].policySets[0].policies[0].rules[0].conditions"
        ]
    );
}

#[test]
fn a_deny_rule_applies_when_its_conditions_hold_or_cannot_be_evaluated() {
    let rules = |tree: Value| {
        let mut ev = base_evidence();
        policy(&mut ev)["rules"] =
            json!([{"effect": "Permit"}, {"effect": "Deny", "conditions": tree}]);
        ev
    };
    let mars = condition("requesterLocation", "equal", "Mars");
    assert_eq!(deny_code(rules(mars.clone()), &located("NL")), "permit");
    assert_eq!(
        deny_code(rules(mars.clone()), &located("Mars")),
        "denied_by_rule"
    );
    assert_eq!(
        deny_code(rules(mars), &request()),
        "condition_operand_undefined"
    );
    // A later Permit rule must hold too (deny-overrides: every rule must permit).
    let mut ev = base_evidence();
    policy(&mut ev)["rules"] = json!([{"effect": "Permit"}, {"effect": "Permit", "conditions": condition("requesterLocation", "equal", "Mars")}]);
    assert_eq!(deny_code(ev, &located("NL")), "condition_not_met");
    // A Permit rule with a target of its own grants only what that target covers.
    let mut ev = base_evidence();
    policy(&mut ev)["rules"] =
        json!([{"effect": "Permit", "target": {"resource": {"identifiers": ["C2"]}}}]);
    assert_eq!(deny_code(ev.clone(), &request()), "denied_by_rule");
    policy(&mut ev)["rules"][0]["target"]["resource"]["identifiers"] = json!(["C1"]);
    assert_eq!(deny_code(ev, &request()), "permit");
}

#[test]
fn a_context_must_be_the_requests_and_its_conditions_hold() {
    let mut ev = base_evidence();
    policy(&mut ev)["target"]["context"] = json!({"requesterLocation": "NL"});
    assert_eq!(deny_code(ev.clone(), &located("NL")), "permit");
    assert_eq!(deny_code(ev.clone(), &located("BE")), "condition_not_met");
    assert_eq!(
        deny_code(ev.clone(), &request()),
        "condition_operand_undefined"
    );
    policy(&mut ev)["target"]["context"] = json!({"requesterLocation": ["NL"]});
    assert_eq!(
        deny_code(ev.clone(), &located("NL")),
        "condition_operand_type"
    );
    policy(&mut ev)["target"]["context"] =
        json!({"conditions": condition("requesterLocation", "notEqual", "NL")});
    assert_eq!(deny_code(ev, &located("NL")), "condition_not_met");
}

#[test]
fn licence_expressions_grant_only_what_they_guarantee_and_malformed_ones_nothing() {
    let mut r = request();
    r.required_licences = vec!["A".into()];
    let with = |licences: Value| {
        let mut ev = base_evidence();
        ev["policySets"][0]["target"]["environment"]["licenses"] = licences;
        ev
    };
    assert_eq!(
        deny_code(with(json!([{"allOf": ["A", "B"]}])), &r),
        "permit"
    );
    assert_eq!(
        deny_code(with(json!([{"anyOf": ["A", "B"]}])), &r),
        "licence_missing"
    );
    assert_eq!(
        deny_code(with(json!([{"anyOf": [{"allOf": ["A", "B"]}, "A"]}])), &r),
        "permit"
    );
    let (code, at) = deny_at(with(json!(["A", {"allOf": ["A"], "anyOf": ["B"]}])), &r);
    assert_eq!(code, "licence_expression_malformed");
    assert_eq!(
        at,
        ["evidence[0].policySets[0].target.environment.licenses[1]"]
    );
    // Malformed even where the route requires no licence: its terms are not known.
    assert_eq!(
        deny_code(with(json!([{"allOf": []}])), &request()),
        "licence_expression_malformed"
    );
    assert_eq!(
        deny_code(with(json!([{"allOf": ["A"], "note": 1}])), &request()),
        "evidence_member_not_understood"
    );
    // The expression that granted the route's licence is named.
    let permit = decided_where(&[evidence(with(json!(["X", {"allOf": ["A", "B"]}])))], &r);
    assert_eq!(
        permit[1..],
        ["evidence[0].policySets[0].target.environment.licenses[1]"]
    );
}

#[test]
fn evidence_of_a_3_0_signer_binds_to_us_only_by_name_designation_or_the_route() {
    let mut ev = base_evidence();
    policy(&mut ev)["target"]
        .as_object_mut()
        .unwrap()
        .remove("environment");
    let mut read = evidence(ev);
    // Before 3.0, a policy that names no service provider may be served by any.
    assert!(evaluate(&read, &request(), Timestamp::from_secs(NOW)).is_permit());
    read.read_as.version = SchemeVersion::V3_0;
    assert_eq!(
        evaluate(&read, &request(), Timestamp::from_secs(NOW)),
        Decision::Deny(DenyReason::ServiceProviderNotNamed)
    );
    let mut accepted = request();
    accepted.unnamed_provider_accepted = true;
    assert!(evaluate(&read, &accepted, Timestamp::from_secs(NOW)).is_permit());
    read.read_as.designated_for_us = true;
    assert!(evaluate(&read, &request(), Timestamp::from_secs(NOW)).is_permit());
    // Named, it must name us, whatever the version.
    let mut named = evidence(base_evidence());
    named.read_as.version = SchemeVersion::V3_0;
    let mut elsewhere = accepted.clone();
    elsewhere.service_providers = vec!["EU.EORI.NL000000002".into()];
    assert_eq!(
        evaluate(&named, &elsewhere, Timestamp::from_secs(NOW)),
        Decision::Deny(DenyReason::ServiceProviderNotListed)
    );
}

#[test]
fn a_3_0_mask_carries_the_routes_values_as_context_and_no_service_providers() {
    let mut r = located("NL");
    r.operands.insert("orderStatus".into(), None);
    let mask = r.to_mask(SchemeVersion::V3_0);
    let target = &mask.policy_sets[0].policies[0].target;
    assert!(target.environment.is_none());
    let written = serde_json::to_value(target).unwrap();
    assert_eq!(written["context"], json!({"requesterLocation": "NL"}));
    let target_of = |version| {
        serde_json::to_value(&r.to_mask(version).policy_sets[0].policies[0].target).unwrap()
    };
    // 2.x masks have neither (their documents' `Policy_request_evidence`); 1.9's name the
    // service providers.
    let older = target_of(SchemeVersion::V2_2);
    assert!(older.get("context").is_none() && older.get("environment").is_none());
    let oldest = target_of(SchemeVersion::V1_9);
    assert_eq!(oldest["environment"]["serviceProviders"], json!([SP]));
}

#[test]
fn what_a_version_does_not_have_is_found() {
    let mut ev = base_evidence();
    policy(&mut ev)["rules"][0]["conditions"] = condition("a", "equal", "b");
    ev["policySets"][0]["target"]["environment"]["licenses"] = json!([{"anyOf": ["A"]}]);
    let read = evidence(ev);
    assert_eq!(
        read.first_beyond(SchemeVersion::V2_1).as_deref(),
        Some("policySets[0].target.environment.licenses[0]")
    );
    assert_eq!(
        read.first_beyond(SchemeVersion::V2_2).as_deref(),
        Some("policySets[0].policies[0].rules[0].conditions")
    );
    assert_eq!(read.first_beyond(SchemeVersion::V3_0), None);
}

#[test]
fn evidence_naming_parties_by_their_aliases_decides_once_resolved_and_not_before() {
    use crate::scheme::party_record::{Aliases, Party};
    let party = |id: &str, alias: &str| Party {
        id: id.into(),
        also_known_as: vec![alias.into()],
        ..Party::default()
    };
    // Each EORI looked up by itself found the record whose alias it is.
    let mut aliases = Aliases::default();
    for (id, alias) in [
        ("did:ishare:EU.NL.NTRNL-000000005", OWNER),
        ("did:ishare:EU.NL.NTRNL-000000001", CONSUMER),
        ("did:ishare:EU.NL.NTRNL-000000003", SP),
    ] {
        aliases.found(alias, Some(&std::sync::Arc::new(party(id, alias))));
    }
    // The request in the records' ids, the evidence in the parties' EORI aliases.
    let mut req = request();
    req.resolve(&aliases).unwrap();
    assert_eq!(req.policy_issuer, "did:ishare:EU.NL.NTRNL-000000005");
    assert_eq!(deny_code(base_evidence(), &req), "wrong_policy_issuer");
    let mut ev = evidence(base_evidence());
    ev.resolve(&aliases).unwrap();
    assert_eq!(ev.target.access_subject, "did:ishare:EU.NL.NTRNL-000000001");
    let decided = evaluate(&ev, &req, Timestamp::from_secs(NOW));
    assert!(matches!(decided, Decision::Permit(_)), "{decided:?}");
    // A service provider listed by a name no record gives is not us.
    let mut other = base_evidence();
    other["policySets"][0]["policies"][0]["target"]["environment"]["serviceProviders"] =
        json!(["eu.eori.nl000000003"]);
    let mut ev = evidence(other);
    ev.resolve(&aliases).unwrap();
    let decided = evaluate(&ev, &req, Timestamp::from_secs(NOW));
    assert!(
        matches!(
            decided,
            Decision::Deny(DenyReason::ServiceProviderNotListed)
        ),
        "{decided:?}"
    );
}
