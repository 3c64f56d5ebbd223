//! What a grant tells the consumer: the licence headers of a delegated route's answer, and what
//! the grants of every element of a body's array come to together.

use super::Grant;
use crate::config::model::{Auth, HeaderSource, Route};
use crate::scheme::evaluation::Permit;
use crate::scheme::licence::{guaranteed_by, Licence};
use crate::scheme::models::SchemeTime;
use crate::scheme::vocabulary::LICENCE_HEADERS;
use http::HeaderValue;
use std::borrow::Cow;
use std::sync::Arc;

/// What terms take beyond their licences' and values' bytes (measured with
/// `examples/decision_cache_memory.rs`).
const TERMS_OVERHEAD: usize = 400;

/// What a Permit grants, with its licence headers' values made once: shared by every request its
/// evaluation answers (from the decision cache, or for the same header evidence).
#[derive(Debug, PartialEq)]
pub struct Terms {
    pub licences: Vec<Licence>,
    pub not_on_or_after: i64,
    pub max_delegation_depth: Option<u32>,
    /// The values of `LICENCE_HEADERS`, in their order: none for the purpose when no licence is
    /// guaranteed.
    values: [Option<LicenceValue>; 3],
}

/// A licence header's value: a header value, or the text that cannot be one (a licence
/// identifier with a control character, say).
#[derive(Clone, Debug, PartialEq)]
pub enum LicenceValue {
    Header(HeaderValue),
    NotAHeader(String),
}

impl LicenceValue {
    fn new(text: String) -> Self {
        match HeaderValue::from_maybe_shared(bytes::Bytes::from(text.clone())) {
            Ok(header) => LicenceValue::Header(header),
            Err(_) => LicenceValue::NotAHeader(text),
        }
    }

    /// The value as text (bytes that are not UTF-8 replaced, for the decision service's answer).
    pub fn text(&self) -> Cow<'_, str> {
        match self {
            LicenceValue::Header(h) => String::from_utf8_lossy(h.as_bytes()),
            LicenceValue::NotAHeader(text) => Cow::Borrowed(text),
        }
    }

    pub fn header(&self) -> Option<&HeaderValue> {
        match self {
            LicenceValue::Header(h) => Some(h),
            LicenceValue::NotAHeader(_) => None,
        }
    }
}

impl Terms {
    pub fn new(
        licences: Vec<Licence>,
        not_on_or_after: i64,
        max_delegation_depth: Option<u32>,
    ) -> Self {
        // The licences granted: the identifiers the evidence's expressions guarantee, however
        // they are satisfied (not the branches of an `anyOf`).
        let ids: Vec<&str> = guaranteed_by(&licences).into_iter().collect();
        let purpose = (!ids.is_empty()).then(|| LicenceValue::new(ids.join(", ")));
        let depth = LicenceValue::new(max_delegation_depth.unwrap_or(0).to_string());
        let end = SchemeTime::from_unix(not_on_or_after).as_str().to_string();
        let values = [purpose, Some(depth), Some(LicenceValue::new(end))];
        Terms {
            licences,
            not_on_or_after,
            max_delegation_depth,
            values,
        }
    }

    pub fn of(permit: &Permit) -> Arc<Self> {
        Arc::new(Terms::new(
            permit.licences.clone(),
            permit.not_on_or_after,
            permit.max_delegation_depth,
        ))
    }

    /// The value of a licence header named (in any case) by the scheme, from the evidence.
    fn value(&self, name: &str) -> Option<&LicenceValue> {
        let at = LICENCE_HEADERS
            .iter()
            .position(|n| n.eq_ignore_ascii_case(name))?;
        self.values[at].as_ref()
    }

    /// What the terms take in memory beyond their licences: their values' bytes and, as
    /// measured with `examples/decision_cache_memory.rs`, the rest.
    pub fn weight(&self) -> usize {
        let values: usize = (self.values.iter().flatten()).map(|v| v.text().len()).sum();
        values + TERMS_OVERHEAD
    }
}

impl Grant {
    /// What this grant and `other` (of another element of the body's array) both grant: the
    /// licences of both, the earlier end and the fewer further delegation steps.
    pub fn and(self, other: Grant) -> Grant {
        let (mine, theirs) = (&self.terms, &other.terms);
        let licences = (mine.licences.iter())
            .filter(|l| theirs.licences.contains(l))
            .cloned()
            .collect();
        let depth = match (mine.max_delegation_depth, theirs.max_delegation_depth) {
            (Some(a), Some(b)) => Some(a.min(b)),
            _ => None,
        };
        let end = mine.not_on_or_after.min(theirs.not_on_or_after);
        Grant {
            original_consumer: self.original_consumer,
            terms: Arc::new(Terms::new(licences, end, depth)),
        }
    }

    /// The licence headers of a delegated route: as the rule says, or all three from the evidence
    /// (their names and values then borrowed, not copied).
    pub fn licence_headers<'a>(
        &'a self,
        route: &'a Route,
    ) -> impl Iterator<Item = (Cow<'static, str>, Cow<'a, LicenceValue>)> + 'a {
        let delegated = matches!(route.auth, Auth::Delegation(_));
        let from_evidence = delegated && route.response_headers.is_empty();
        let all = (LICENCE_HEADERS.into_iter().zip(&self.terms.values))
            .filter(move |_| from_evidence)
            .filter_map(|(name, value)| {
                Some((Cow::Borrowed(name), Cow::Borrowed(value.as_ref()?)))
            });
        let configured = (route.response_headers.iter())
            .filter(move |_| delegated)
            .filter_map(|(name, source)| {
                let value = match source {
                    HeaderSource::Literal(v) => Cow::Owned(LicenceValue::new(v.clone())),
                    HeaderSource::Evidence => Cow::Borrowed(self.terms.value(name)?),
                };
                Some((Cow::Owned(name.clone()), value))
            });
        all.chain(configured)
    }
}

#[cfg(test)]
mod tests {
    use super::{Grant, Terms};
    use crate::scheme::licence::Licence;
    use crate::scheme::models::SchemeTime;
    use std::sync::Arc;

    fn grant(terms: Terms) -> Grant {
        Grant {
            original_consumer: None,
            terms: Arc::new(terms),
        }
    }

    fn values(terms: &Terms) -> Vec<Option<(String, bool)>> {
        (terms.values.iter())
            .map(|v| {
                v.as_ref()
                    .map(|v| (v.text().into_owned(), v.header().is_some()))
            })
            .collect()
    }

    #[test]
    fn terms_make_the_licence_headers_once_and_two_grants_give_what_both_grant() {
        let id = |s: &str| Licence::Id(s.into());
        let both = Terms::new(
            vec![id("ISHARE.0001"), id("ISHARE.0002")],
            1_900_000_000,
            Some(2),
        );
        let end = |at| SchemeTime::from_unix(at).as_str().to_string();
        assert_eq!(
            values(&both),
            [
                Some(("ISHARE.0001, ISHARE.0002".into(), true)),
                Some(("2".into(), true)),
                Some((end(1_900_000_000), true)),
            ]
        );
        let one = Terms::new(vec![id("ISHARE.0002")], 1_800_000_000, None);
        let together = grant(both).and(grant(one));
        assert_eq!(together.terms.licences, [id("ISHARE.0002")]);
        assert_eq!(
            values(&together.terms),
            [
                Some(("ISHARE.0002".into(), true)),
                Some(("0".into(), true)),
                Some((end(1_800_000_000), true)),
            ]
        );
        // Nothing guaranteed: no purpose. A licence id that is no header value keeps its text
        // (for the decision service) and makes no header: the answer fails rather than go
        // without it.
        let none = Terms::new(vec![id("ISHARE.0001")], 1_800_000_000, None);
        let disjoint = grant(none).and(together);
        assert_eq!(values(&disjoint.terms)[0], None);
        let broken = Terms::new(vec![id("a\nb")], 1_800_000_000, None);
        assert_eq!(values(&broken)[0], Some(("a\nb".into(), false)));
    }
}
