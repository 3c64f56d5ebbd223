//! The policies (delegation evidence) the testbed's authorisation registry and entitled party hold.

use crate::scheme::evidence::DelegationEvidence;
use std::sync::RwLock;

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
