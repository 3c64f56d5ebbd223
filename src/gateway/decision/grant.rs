//! What a grant tells the consumer: the licence headers of a delegated route's answer, and what
//! the grants of every element of a body's array come to together.

use super::Grant;
use crate::config::model::{Auth, HeaderSource, Route};
use crate::scheme::licence::guaranteed_by;
use crate::scheme::models::SchemeTime;
use crate::scheme::vocabulary::{
    LICENCE_HEADERS, LICENSE_END_DATE, LICENSE_PURPOSE, LICENSE_SUB_LICENSE,
};
use std::borrow::Cow;

impl Grant {
    /// What this grant and `other` (of another element of the body's array) both grant: the
    /// licences of both, the earlier end and the fewer further delegation steps.
    pub fn and(mut self, other: Grant) -> Grant {
        self.licences.retain(|l| other.licences.contains(l));
        self.not_on_or_after = self.not_on_or_after.min(other.not_on_or_after);
        self.max_delegation_depth = match (self.max_delegation_depth, other.max_delegation_depth) {
            (Some(a), Some(b)) => Some(a.min(b)),
            _ => None,
        };
        self
    }

    /// The licence headers of a delegated route: as the rule says, or all three from the evidence
    /// (their names then borrowed, not copied).
    pub fn licence_headers(&self, route: &Route) -> Vec<(Cow<'static, str>, String)> {
        if !matches!(route.auth, Auth::Delegation(_)) {
            return Vec::new();
        }
        if route.response_headers.is_empty() {
            return LICENCE_HEADERS
                .into_iter()
                .filter_map(|name| Some((Cow::Borrowed(name), self.evidence_header_value(name)?)))
                .collect();
        }
        route
            .response_headers
            .iter()
            .filter_map(|(name, source)| {
                let value = match source {
                    HeaderSource::Literal(v) => Some(v.clone()),
                    HeaderSource::Evidence => self.evidence_header_value(name),
                };
                value.map(|v| (Cow::Owned(name.clone()), v))
            })
            .collect()
    }

    /// The value of a licence header from a grant: the licences granted (the identifiers the
    /// evidence's expressions guarantee, however they are satisfied: not the branches of an
    /// `anyOf`), the allowed further delegation steps, and the end of the evidence's validity.
    fn evidence_header_value(&self, name: &str) -> Option<String> {
        if name.eq_ignore_ascii_case(LICENSE_PURPOSE) {
            let ids: Vec<&str> = guaranteed_by(&self.licences).into_iter().collect();
            (!ids.is_empty()).then(|| ids.join(", "))
        } else if name.eq_ignore_ascii_case(LICENSE_SUB_LICENSE) {
            Some(self.max_delegation_depth.unwrap_or(0).to_string())
        } else if name.eq_ignore_ascii_case(LICENSE_END_DATE) {
            Some(
                SchemeTime::from_unix(self.not_on_or_after)
                    .as_str()
                    .to_string(),
            )
        } else {
            None
        }
    }
}
