//! What a grant tells the consumer: the licence headers of a delegated route's answer (from its
//! terms, `scheme/terms.rs`), and what the grants of every element of a body's array come to
//! together.

use super::Grant;
use crate::config::model::{Auth, HeaderSource, Route};
use crate::scheme::terms::{LicenceValue, Terms};
use std::borrow::Cow;
use std::sync::Arc;

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
        let all = (self.terms.headers())
            .filter(move |_| from_evidence)
            .map(|(name, value)| (Cow::Borrowed(name), Cow::Borrowed(value)));
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
    use crate::scheme::vocabulary::LICENCE_HEADERS;
    use std::sync::Arc;

    fn grant(terms: Terms) -> Grant {
        Grant {
            original_consumer: None,
            terms: Arc::new(terms),
        }
    }

    fn values(terms: &Terms) -> Vec<Option<(String, bool)>> {
        (LICENCE_HEADERS.iter())
            .map(|name| {
                terms
                    .value(name)
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
