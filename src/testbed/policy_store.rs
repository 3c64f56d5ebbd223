//! The policies (delegation evidence) the testbed's authorisation registry and entitled party hold:
//! the shape every policy and mask must have, the policies file they start with, and the store.

use crate::scheme::evidence::{DelegationEvidence, Effect, PolicySet};
use crate::scheme::party::PartyId;
use crate::scheme::version::SchemeVersion;
use std::path::PathBuf;
use std::sync::RwLock;

/// The policies file cannot be read, or a policy in it is unusable.
#[derive(Debug, thiserror::Error)]
#[error("policies file {path}: {detail}")]
pub struct PolicyFileError {
    pub path: String,
    pub detail: String,
}

/// The problems of a mask or a policy that make it unusable, all at once.
pub fn check_policy_shape(
    policy_issuer: &str,
    access_subject: &str,
    sets: &[PolicySet],
) -> Result<(), String> {
    PartyId::parse(policy_issuer).map_err(|e| format!("policyIssuer: {e}"))?;
    PartyId::parse(access_subject).map_err(|e| format!("target.accessSubject: {e}"))?;
    if sets.is_empty() {
        return Err("policySets is empty".into());
    }
    for (i, set) in sets.iter().enumerate() {
        if set.policies.is_empty() {
            return Err(format!("policySets[{i}].policies is empty"));
        }
        for (j, policy) in set.policies.iter().enumerate() {
            if !policy.rules.iter().any(|r| r.effect == Effect::Permit) {
                return Err(format!(
                    "policySets[{i}].policies[{j}] does not contain a rule with the Effect 'Permit'"
                ));
            }
        }
    }
    Ok(())
}

/// The policies of the file at `path`, each checked for its shape and held to what `version`
/// defines; none without a file.
pub fn load_policies(
    path: Option<&PathBuf>,
    version: SchemeVersion,
) -> Result<Vec<DelegationEvidence>, PolicyFileError> {
    let Some(path) = path else {
        return Ok(Vec::new());
    };
    let err = |detail: String| PolicyFileError {
        path: path.display().to_string(),
        detail,
    };
    let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
    let policies: Vec<DelegationEvidence> =
        serde_json::from_str(&text).map_err(|e| err(e.to_string()))?;
    for (i, p) in policies.iter().enumerate() {
        check_policy_shape(&p.policy_issuer, &p.target.access_subject, &p.policy_sets)
            .map_err(|e| err(format!("policy {i}: {e}")))?;
        if let Some(member) = p.first_undefined_in(version) {
            return Err(err(format!(
                "policy {i}: {member} is not a member of delegation evidence in {}",
                version.as_str()
            )));
        }
    }
    Ok(policies)
}

/// The policies (delegation evidence) a registry holds.
#[derive(Default)]
pub struct PolicyStore {
    policies: RwLock<Vec<DelegationEvidence>>,
}

impl PolicyStore {
    pub fn new(policies: Vec<DelegationEvidence>) -> Self {
        PolicyStore {
            policies: RwLock::new(policies),
        }
    }

    /// The policies from `issuer` to `subject` valid at `now`.
    pub fn matching(&self, issuer: &str, subject: &str, now: i64) -> Vec<DelegationEvidence> {
        self.policies
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|e| {
                e.policy_issuer == issuer
                    && e.target.access_subject == subject
                    && e.not_before <= now
                    && now < e.not_on_or_after
            })
            .cloned()
            .collect()
    }

    /// Every stored policy, in the order added.
    pub fn all(&self) -> Vec<DelegationEvidence> {
        self.policies
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Remove the policy at `index` if it is still `expected` (the list may have changed since it
    /// was shown); whether it was removed.
    pub fn remove(&self, index: usize, expected: &DelegationEvidence) -> bool {
        let mut policies = self.policies.write().unwrap_or_else(|e| e.into_inner());
        if policies.get(index) == Some(expected) {
            policies.remove(index);
            true
        } else {
            false
        }
    }

    pub fn add(&self, evidence: DelegationEvidence) {
        self.policies
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(evidence);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheme::evidence::Rule;
    use crate::scheme::mask::DelegationRequest;
    use serde_json::json;

    fn mask() -> DelegationRequest {
        serde_json::from_value(json!({
            "policyIssuer": "EU.EORI.NL000000005",
            "target": {"accessSubject": "EU.EORI.NL000000001"},
            "policySets": [{"policies": [{
                "target": {"resource": {"type": "CONTAINER", "identifiers": ["C1"], "attributes": ["*"]}, "actions": ["iSHARE.READ"]},
                "rules": [{"effect": "Permit"}]
            }]}]
        }))
        .unwrap()
    }

    #[test]
    fn masks_without_a_permit_rule_are_refused() {
        let mut m = mask();
        m.policy_sets[0].policies[0].rules = vec![Rule::deny()];
        let err = check_policy_shape(&m.policy_issuer, &m.target.access_subject, &m.policy_sets)
            .unwrap_err();
        assert!(err.contains("does not contain a rule with the Effect 'Permit'"));
    }
}
