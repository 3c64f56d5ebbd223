//! What a strict registry (`strict = true`) checks beyond the others, as FIWARE Keyrock's
//! `/ar/delegation` does (`controllers/authregistry/authregistry.js` of ging/fiware-idm): the body
//! against its request schema (`delegationRequestSchema.json`), and who may ask with a client
//! assertion in `previous_steps` (`is_valid_prev_steps`).

use crate::scheme::mask::DelegationRequest;
use serde_json::Value;

/// What a place in a delegation request body must hold.
enum Shape {
    /// An object with no member but these (`additionalProperties: false`), of which the
    /// `required` ones must be there.
    Object {
        members: &'static [(&'static str, Shape)],
        required: &'static [&'static str],
    },
    /// An array of items of a shape: at least `min` of them, each distinct if `unique`.
    Array {
        items: &'static Shape,
        min: usize,
        unique: bool,
    },
    /// A string of one or more characters, none of them white space (`^\S+$`), nor a `*` unless
    /// `star` (a resource type: `^[^\s\*]+$`).
    Text { star: bool },
    /// Any string (a service provider).
    String,
    /// One of these strings (a rule's effect).
    OneOf(&'static [&'static str]),
}

/// An object of these members, the `required` ones among them.
const fn object(
    members: &'static [(&'static str, Shape)],
    required: &'static [&'static str],
) -> Shape {
    Shape::Object { members, required }
}

/// An array of at least `min` items of a shape, repeats allowed.
const fn list(items: &'static Shape, min: usize) -> Shape {
    Shape::Array {
        items,
        min,
        unique: false,
    }
}

const TEXT: Shape = Shape::Text { star: true };
/// `identifiers`, `attributes` and `actions`: distinct texts, at least one.
const NAMES: Shape = Shape::Array {
    items: &TEXT,
    min: 1,
    unique: true,
};
/// A resource's members; a policy's target requires its type and identifiers, a rule's none.
const RESOURCE: &[(&str, Shape)] = &[
    ("type", Shape::Text { star: false }),
    ("identifiers", NAMES),
    ("attributes", NAMES),
];

/// A rule: its effect, and for a Deny rule the part of the policy's target it denies. Keyrock's
/// schema writes these members under the rule's `additionalProperties`, which Ajv 6 reads as a
/// schema of unknown keywords and so lets any member pass; the testbed holds rules to what that
/// schema names.
const RULE: Shape = object(
    &[
        ("effect", Shape::OneOf(&["Permit", "Deny"])),
        (
            "target",
            object(
                &[("resource", object(RESOURCE, &[])), ("actions", NAMES)],
                &["resource"],
            ),
        ),
    ],
    &["effect"],
);

/// A policy: its target (no `context`, an environment of service providers only) and rules.
const POLICY: Shape = object(
    &[
        (
            "target",
            object(
                &[
                    ("resource", object(RESOURCE, &["type", "identifiers"])),
                    ("actions", NAMES),
                    (
                        "environment",
                        object(
                            &[("serviceProviders", list(&Shape::String, 1))],
                            &["serviceProviders"],
                        ),
                    ),
                ],
                &["resource", "actions"],
            ),
        ),
        ("rules", list(&RULE, 1)),
    ],
    &["target", "rules"],
);

/// The body: `delegationRequest` beside `delegation_path` and `previous_steps` (the delegation
/// endpoint's shape; neither `delegation_mask` nor 3.0's members inside the request). A policy
/// set holds policies only: no `maxDelegationDepth`, no `target` (and so no licences).
const BODY: Shape = object(
    &[
        (
            "delegationRequest",
            object(
                &[
                    ("policyIssuer", TEXT),
                    (
                        "target",
                        object(&[("accessSubject", TEXT)], &["accessSubject"]),
                    ),
                    (
                        "policySets",
                        list(&object(&[("policies", list(&POLICY, 1))], &["policies"]), 1),
                    ),
                ],
                &["policyIssuer", "target", "policySets"],
            ),
        ),
        ("delegation_path", list(&TEXT, 0)),
        ("previous_steps", list(&TEXT, 0)),
    ],
    &["delegationRequest"],
);

/// Where the body departs from Keyrock's request schema: the first place, by its path, and how.
pub fn outside_schema(body: &Value) -> Option<String> {
    departure(body, &BODY, "")
}

fn departure(value: &Value, shape: &Shape, at: &str) -> Option<String> {
    let place = if at.is_empty() { "the body" } else { at };
    match shape {
        Shape::Object { members, required } => {
            let Value::Object(object) = value else {
                return Some(format!("{place} must be an object"));
            };
            let path = |name: &str| match at.is_empty() {
                true => name.to_string(),
                false => format!("{at}.{name}"),
            };
            if let Some(unknown) = object
                .keys()
                .find(|k| !members.iter().any(|(name, _)| name == k))
            {
                return Some(format!(
                    "{} is not a member the schema names (additionalProperties: false)",
                    path(unknown)
                ));
            }
            if let Some(missing) = required.iter().find(|name| !object.contains_key(**name)) {
                return Some(format!("{place} lacks {missing}, a required member"));
            }
            members
                .iter()
                .find_map(|(name, shape)| departure(object.get(*name)?, shape, &path(name)))
        }
        Shape::Array { items, min, unique } => {
            let Value::Array(array) = value else {
                return Some(format!("{place} must be an array"));
            };
            if array.len() < *min {
                return Some(format!("{place} must hold at least {min} item"));
            }
            if let Some((i, _)) = array
                .iter()
                .enumerate()
                .find(|(i, v)| *unique && array[..*i].contains(v))
            {
                return Some(format!("{at}[{i}] repeats an earlier item (uniqueItems)"));
            }
            array
                .iter()
                .enumerate()
                .find_map(|(i, v)| departure(v, items, &format!("{at}[{i}]")))
        }
        Shape::Text { star } => match value.as_str() {
            Some(s)
                if !s.is_empty()
                    && !s.chars().any(|c| c.is_whitespace() || (!star && c == '*')) =>
            {
                None
            }
            _ if *star => Some(format!("{place} must be a string without white space")),
            _ => Some(format!("{place} must be a string without white space or *")),
        },
        Shape::String => match value.is_string() {
            true => None,
            false => Some(format!("{place} must be a string")),
        },
        Shape::OneOf(allowed) => match value.as_str() {
            Some(s) if allowed.contains(&s) => None,
            _ => Some(format!("{place} must be one of {}", allowed.join(", "))),
        },
    }
}

/// The party that may ask with a client assertion in `previous_steps`: the first service provider
/// of the first policy that names any (Keyrock's `is_valid_prev_steps`: `environment_provider`).
fn first_service_provider(mask: &DelegationRequest) -> Option<&str> {
    mask.policy_sets
        .iter()
        .flat_map(|set| &set.policies)
        .find_map(|policy| {
            policy
                .target
                .environment
                .as_ref()?
                .service_providers
                .as_ref()
        })
        .and_then(|sps| sps.first())
        .map(String::as_str)
}

/// Whether `caller` may ask a strict registry about `mask`, as Keyrock's `_query_evidences`
/// decides: the mask's policy issuer and access subject may; anyone else only with a client
/// assertion in `previous_steps` (each checked as the other registries do), and then only as the
/// mask's first service provider (`environment_provider !== user_assertion` is refused). Keyrock
/// skips this check when `previous_steps` is absent; the testbed does not.
pub fn caller_may_ask(
    caller: &str,
    mask: &DelegationRequest,
    with_steps: bool,
) -> Result<(), String> {
    if caller == mask.policy_issuer || caller == mask.target.access_subject {
        return Ok(());
    }
    match (with_steps, first_service_provider(mask)) {
        (false, _) => Err(format!("{caller} is neither the policyIssuer nor the accessSubject of the mask, and previous_steps holds no client assertion (client_id_not_allowed)")),
        (true, Some(sp)) if sp == caller => Ok(()),
        (true, Some(sp)) => Err(format!("{caller} brings a client assertion in previous_steps but is not the mask's first service provider ({sp}), the only other party that may ask (client_id_not_allowed)")),
        (true, None) => Err(format!("{caller} brings a client assertion in previous_steps but the mask names no service provider, the only other party that may ask (client_id_not_allowed)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body() -> Value {
        json!({
            "delegationRequest": {
                "policyIssuer": "EU.EORI.NL000000005",
                "target": {"accessSubject": "EU.EORI.NL000000001"},
                "policySets": [{"policies": [{
                    "target": {
                        "resource": {"type": "CONTAINER", "identifiers": ["C1"], "attributes": ["*"]},
                        "actions": ["iSHARE.READ"],
                        "environment": {"serviceProviders": ["EU.EORI.NL000000003", "EU.EORI.NL000000002"]}
                    },
                    "rules": [{"effect": "Permit"}, {"effect": "Deny", "target": {"resource": {"identifiers": ["SECRET-1"]}}}]
                }]}]
            },
            "previous_steps": ["a.b.c"]
        })
    }

    /// The body with `edit` made: what the schema says of it.
    fn said(edit: impl FnOnce(&mut Value)) -> Option<String> {
        let mut b = body();
        edit(&mut b);
        outside_schema(&b)
    }

    #[test]
    fn a_body_of_the_schemas_members_passes() {
        assert_eq!(outside_schema(&body()), None);
    }

    /// A pointer into the first policy of the body.
    fn in_policy(rest: &str) -> String {
        format!("/delegationRequest/policySets/0/policies/0{rest}")
    }

    #[test]
    fn a_member_the_schema_does_not_name_is_refused_by_its_path() {
        let policy = "delegationRequest.policySets[0].policies[0]";
        for (pointer, member, path) in [
            (
                String::new(),
                "delegation_mask",
                "delegation_mask".to_string(),
            ),
            (
                "/delegationRequest".into(),
                "notBefore",
                "delegationRequest.notBefore".into(),
            ),
            (
                "/delegationRequest".into(),
                "previousSteps",
                "delegationRequest.previousSteps".into(),
            ),
            (
                "/delegationRequest/target".into(),
                "serviceProvider",
                "delegationRequest.target.serviceProvider".into(),
            ),
            (
                "/delegationRequest/policySets/0".into(),
                "target",
                "delegationRequest.policySets[0].target".into(),
            ),
            (
                "/delegationRequest/policySets/0".into(),
                "maxDelegationDepth",
                "delegationRequest.policySets[0].maxDelegationDepth".into(),
            ),
            (in_policy(""), "id", format!("{policy}.id")),
            (
                in_policy("/target"),
                "context",
                format!("{policy}.target.context"),
            ),
            (
                in_policy("/target/resource"),
                "owner",
                format!("{policy}.target.resource.owner"),
            ),
            (
                in_policy("/target/environment"),
                "licenses",
                format!("{policy}.target.environment.licenses"),
            ),
            (
                in_policy("/rules/1"),
                "conditions",
                format!("{policy}.rules[1].conditions"),
            ),
            (
                in_policy("/rules/1/target/resource"),
                "scope",
                format!("{policy}.rules[1].target.resource.scope"),
            ),
        ] {
            let found = said(|b| {
                b.pointer_mut(&pointer).unwrap()[member] = json!(["ISHARE.0001"]);
            });
            assert_eq!(
                found,
                Some(format!(
                    "{path} is not a member the schema names (additionalProperties: false)"
                )),
                "{pointer} {member}"
            );
        }
    }

    #[test]
    fn required_members_counts_and_strings_are_held_to_the_schema() {
        let policy = "delegationRequest.policySets[0].policies[0]";
        for (pointer, value, expected) in [
            (
                in_policy("/target"),
                json!({"resource": {"type": "CONTAINER", "identifiers": ["C1"]}}),
                format!("{policy}.target lacks actions, a required member"),
            ),
            (
                in_policy("/target/actions"),
                json!([]),
                format!("{policy}.target.actions must hold at least 1 item"),
            ),
            (
                in_policy("/target/resource/identifiers"),
                json!(["C1", "C1"]),
                format!(
                    "{policy}.target.resource.identifiers[1] repeats an earlier item (uniqueItems)"
                ),
            ),
            (
                in_policy("/target/resource/type"),
                json!("*"),
                format!("{policy}.target.resource.type must be a string without white space or *"),
            ),
            (
                "/delegationRequest/policyIssuer".into(),
                json!("EU EORI"),
                "delegationRequest.policyIssuer must be a string without white space".into(),
            ),
            (
                in_policy("/rules/0/effect"),
                json!("Allow"),
                format!("{policy}.rules[0].effect must be one of Permit, Deny"),
            ),
        ] {
            assert_eq!(
                said(|b| *b.pointer_mut(&pointer).unwrap() = value),
                Some(expected)
            );
        }
        assert_eq!(
            said(|b| *b = json!({"previous_steps": []})),
            Some("the body lacks delegationRequest, a required member".into())
        );
    }

    #[test]
    fn with_a_client_assertion_only_the_first_service_provider_may_ask_besides_the_masks_parties() {
        let mask: DelegationRequest =
            serde_json::from_value(body()["delegationRequest"].clone()).unwrap();
        for party in ["EU.EORI.NL000000005", "EU.EORI.NL000000001"] {
            assert_eq!(caller_may_ask(party, &mask, false), Ok(()));
        }
        assert_eq!(caller_may_ask("EU.EORI.NL000000003", &mask, true), Ok(()));
        let refused = caller_may_ask("EU.EORI.NL000000002", &mask, true).unwrap_err();
        assert!(
            refused.contains("not the mask's first service provider (EU.EORI.NL000000003)"),
            "{refused}"
        );
        let refused = caller_may_ask("EU.EORI.NL000000003", &mask, false).unwrap_err();
        assert!(
            refused.contains("previous_steps holds no client assertion"),
            "{refused}"
        );
    }
}
