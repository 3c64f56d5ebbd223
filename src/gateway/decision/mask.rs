//! The mask: the request in the scheme's terms, taken from the route's delegation rule and the
//! request's values, each bounded and refused where backends would read it otherwise.

use super::{Decision, Stage, Taken};
use crate::config::model::{Config, DelegationRule};
use crate::gateway::reject::{MissingValue, Reject, RuleValue};
use crate::reading::text::has_control;
use crate::request::template::{RequestValues, Template};
use crate::request::{value_ambiguities, Ambiguities};
use crate::scheme::mask::AccessRequest;
use crate::scheme::party::PartyId;
use crate::scheme::vocabulary::Action;
use http::Method;

/// The longest value a rule takes from a request (an identifier, the data owner …): decisions are
/// cached by these values, so their size is bounded.
const MAX_VALUE_LEN: usize = 256;

/// What the delegation stages know of the request.
pub struct RequestFacts<'a> {
    pub method: &'a Method,
    pub values: RequestValues<'a>,
    /// The ambiguous forms the route accepts in the values its rule reads.
    pub accepted: Ambiguities,
    /// The authenticated caller (from the access token, or a person's session).
    pub caller: &'a str,
    /// The caller is a person, named by an identity provider: never looked up at the
    /// participant registry.
    pub person: bool,
}

/// A value a rule takes from the request, as decisions are made on it: present and not empty, at
/// most MAX_VALUE_LEN bytes, without a control character, and in no form backends read
/// differently (unless the route accepts it). Recorded in the decision.
pub(super) fn rule_value(
    t: &Template,
    value: RuleValue,
    facts: &RequestFacts,
    d: &mut Decision,
) -> Result<String, Reject> {
    optional_value(t, value, value.mask_name().into(), facts, d)?.ok_or_else(|| {
        MissingValue::Absent {
            value,
            template: t.as_str().to_string(),
        }
        .into()
    })
}

/// `rule_value` for a value the request may lack (None).
fn optional_value(
    t: &Template,
    value: RuleValue,
    name: std::borrow::Cow<'static, str>,
    facts: &RequestFacts,
    d: &mut Decision,
) -> Result<Option<String>, Reject> {
    let Some(rendered) = t.render(&facts.values).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    taken(t, value, name, rendered, facts, d).map(Some)
}

/// A value rendered from the request, checked as `rule_value` says, and recorded.
fn taken(
    t: &Template,
    value: RuleValue,
    name: std::borrow::Cow<'static, str>,
    rendered: String,
    facts: &RequestFacts,
    d: &mut Decision,
) -> Result<String, Reject> {
    if rendered.is_empty() {
        return Err(MissingValue::Absent {
            value,
            template: t.as_str().to_string(),
        }
        .into());
    }
    if rendered.len() > MAX_VALUE_LEN {
        return Err(Reject::ValueTooLong {
            value,
            limit: MAX_VALUE_LEN,
        });
    }
    if has_control(&rendered) {
        return Err(Reject::ControlInValue(value));
    }
    if let Some(a) = value_ambiguities(&rendered).first_not_in(facts.accepted) {
        return Err(Reject::Ambiguous(a));
    }
    d.values.push(Taken {
        name,
        template: t.text(),
        value: rendered.as_str().into(),
    });
    Ok(rendered)
}

/// The attributes of the mask: each template's value, or every member name a whole
/// `{body.keys./POINTER}` stands for.
fn attributes(
    rule: &DelegationRule,
    facts: &RequestFacts,
    d: &mut Decision,
) -> Result<Vec<String>, Reject> {
    let mut attributes = Vec::new();
    for t in &rule.attributes {
        if t.whole_body_keys().is_none() {
            attributes.push(rule_value(t, RuleValue::Attribute, facts, d)?);
            continue;
        }
        let absent = || MissingValue::Absent {
            value: RuleValue::Attribute,
            template: t.as_str().to_string(),
        };
        for name in t.render_each(&facts.values).ok_or_else(absent)? {
            let mask_name = RuleValue::Attribute.mask_name().into();
            attributes.push(taken(t, RuleValue::Attribute, mask_name, name, facts, d)?);
        }
    }
    Ok(attributes)
}

/// The mask stage: the request in the scheme's terms, and its data owner. The decision records
/// the mask once the stages that read it are done (`delegation`).
pub(super) fn mask(
    config: &Config,
    rule: &DelegationRule,
    facts: &RequestFacts,
    subject: &str,
    d: &mut Decision,
) -> Result<(AccessRequest, PartyId), Reject> {
    d.stage = Stage::Mask;
    let mut render = |t: &Template, value: RuleValue| rule_value(t, value, facts, d);
    let policy_issuer = render(&rule.policy_issuer, RuleValue::DataOwner)?;
    let owner = PartyId::parse(&policy_issuer).map_err(MissingValue::InvalidDataOwner)?;
    let action = match &rule.action {
        Some(a) => a.clone(),
        None => Action::for_method(facts.method)
            .ok_or(MissingValue::NoAction)?
            .qualified(&config.scheme),
    };
    let resource_type = render(&rule.resource_type, RuleValue::ResourceType)?;
    let mut renders = |ts: &[Template], value| -> Result<Vec<String>, Reject> {
        ts.iter().map(|t| render(t, value)).collect()
    };
    let identifiers = renders(&rule.identifiers, RuleValue::Identifier)?;
    let attributes = attributes(rule, facts, d)?;
    // A condition's operand the request lacks is not a refusal here: only a condition on it is.
    let operands = rule
        .conditions
        .iter()
        .map(|(operand, t)| {
            let name = format!("conditions.{operand}").into();
            let value = optional_value(t, RuleValue::ConditionOperand, name, facts, d)?;
            Ok((operand.clone(), value))
        })
        .collect::<Result<_, Reject>>()?;
    let request = AccessRequest {
        policy_issuer,
        access_subject: subject.to_string(),
        service_providers: vec![config.identity.party_id.to_string()],
        resource_type,
        identifiers,
        attributes,
        actions: vec![action],
        required_licences: rule.licences.clone(),
        operands,
        unnamed_provider_accepted: rule.accept_unnamed_service_provider,
    };
    Ok((request, owner))
}
