use super::*;
use crate::scheme::evidence::*;
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
        required_licences: vec![],
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
    // Round trip in each shape.
    for body in [endpoint, generic] {
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
    let mask = request().to_mask();
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
            required_licences: vec![],
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
                },
                actions: actions.into_iter().map(String::from).collect(),
                environment: sps.map(|s| PolicyEnvironment {
                    service_providers: Some(s.into_iter().map(String::from).collect()),
                }),
            },
            rules: vec![Rule::permit()],
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
            effect: Effect::Deny,
            target: Some(RuleTarget {
                resource: Some(RuleResource {
                    resource_type: t.map(String::from),
                    identifiers: ids,
                    attributes: attrs,
                }),
                actions: actions.map(|a| a.into_iter().map(String::from).collect()),
            }),
        })
}

fn wrap(policies: Vec<Policy>) -> DelegationEvidence {
    DelegationEvidence {
        not_before: NOW - 1,
        not_on_or_after: NOW + 60,
        policy_issuer: OWNER.into(),
        target: RootTarget {
            access_subject: CONSUMER.into(),
        },
        policy_sets: vec![PolicySet {
            max_delegation_depth: None,
            target: None,
            policies,
        }],
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
    let m = mask.to_mask();
    DelegationEvidence {
        not_before: NOW - 1,
        not_on_or_after: NOW + 60,
        policy_issuer: m.policy_issuer,
        target: m.target,
        policy_sets: m.policy_sets,
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
