//! Conditions (3.0) on arbitrary trees and request values. The first line of the input is a
//! condition tree (JSON); each further line is `name value` (a value the route declares; `name`
//! alone: declared, not given). Properties, besides never panicking:
//! - a comparison of two numbers that holds is true to an exact decimal reader (bigdecimal) and a
//!   binary64 reader (Rust's correctly rounded parse) alike;
//! - evidence whose Permit rule carries the tree grants only where the tree holds;
//! - evidence whose Deny rule carries the tree grants only where the tree is evaluable and not met:
//!   a Deny condition that holds, or cannot be evaluated, never lets a request through.
#![no_main]

use bigdecimal::BigDecimal;
use ishare_gateway::scheme::condition::{Condition, ConditionFailure, Operand, Operands, Operator};
use ishare_gateway::scheme::evaluation::evaluate;
use ishare_gateway::scheme::evidence::DelegationEvidence;
use ishare_gateway::scheme::mask::AccessRequest;
use ishare_gateway::scheme::Timestamp;
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};
use std::cmp::Ordering;
use std::str::FromStr;

const NOW: i64 = 1_800_000_000;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut lines = text.split('\n');
    let Ok(tree) = serde_json::from_str::<Value>(lines.next().unwrap_or_default()) else {
        return;
    };
    let operands: Operands = lines
        .map(|l| match l.split_once(' ') {
            Some((name, value)) => (name.to_string(), Some(value.to_string())),
            None => (l.to_string(), None),
        })
        .collect();
    let condition = Condition::read(&tree);
    let checked = condition.check("rules[1].conditions", &operands);
    let _ = checked.as_ref().map_err(ToString::to_string);
    if let (Condition::Compare(c), Ok(())) = (&condition, &checked) {
        exact_where_it_holds(c.operator, operands[&c.left].as_deref().unwrap(), &c.right);
    }
    let permitted = |rules: Value| {
        let evidence: DelegationEvidence = serde_json::from_value(evidence(rules)).unwrap();
        let decided = evaluate(&evidence, &request(&operands), Timestamp::from_secs(NOW));
        decided.is_permit()
    };
    if permitted(json!([{"effect": "Permit", "conditions": tree}])) {
        assert_eq!(checked, Ok(()), "a Permit rule granted where its condition does not hold");
    }
    if permitted(json!([{"effect": "Permit"}, {"effect": "Deny", "conditions": tree}])) {
        assert!(
            matches!(checked, Err(ConditionFailure::NotMet { .. })),
            "a Deny rule let a request through where its condition {checked:?}"
        );
    }
});

/// A comparison that holds between two numbers is true to both readers.
fn exact_where_it_holds(operator: Operator, value: &str, right: &Operand) {
    let right = match right {
        Operand::Text(t) => t.clone(),
        Operand::Number(n) => n.to_string(),
    };
    let (Ok(a), Ok(b)) = (BigDecimal::from_str(value), BigDecimal::from_str(&right)) else {
        return;
    };
    let (Ok(x), Ok(y)) = (value.parse::<f64>(), right.parse::<f64>()) else {
        return;
    };
    let expected = match operator {
        Operator::LessThan => Ordering::Less,
        Operator::GreaterThan => Ordering::Greater,
        Operator::Equal => Ordering::Equal,
        Operator::NotEqual => {
            assert!(a != b && x != y, "{value} notEqual {right} held");
            return;
        }
    };
    assert_eq!(a.cmp(&b), expected, "{value} {operator:?} {right} (decimal)");
    assert_eq!(x.partial_cmp(&y), Some(expected), "{value} {operator:?} {right} (binary64)");
}

fn evidence(rules: Value) -> Value {
    json!({
        "notBefore": NOW - 10, "notOnOrAfter": NOW + 600,
        "policyIssuer": "did:ishare:EU.NL.NTRNL-10000005",
        "target": {"accessSubject": "did:ishare:EU.NL.NTRNL-10000001"},
        "policySets": [{"policies": [{
            "target": {
                "resource": {"type": "CONTAINER", "identifiers": ["*"], "attributes": ["*"]},
                "actions": ["iSHARE.READ"],
                "environment": {"serviceProviders": ["did:ishare:EU.NL.NTRNL-10000003"]}
            },
            "rules": rules
        }]}]
    })
}

fn request(operands: &Operands) -> AccessRequest {
    AccessRequest {
        policy_issuer: "did:ishare:EU.NL.NTRNL-10000005".into(),
        access_subject: "did:ishare:EU.NL.NTRNL-10000001".into(),
        service_providers: vec!["did:ishare:EU.NL.NTRNL-10000003".into()],
        resource_type: "CONTAINER".into(),
        identifiers: vec!["C1".into()],
        attributes: vec!["*".into()],
        actions: vec!["iSHARE.READ".into()],
        operands: operands.clone(),
        ..AccessRequest::default()
    }
}
