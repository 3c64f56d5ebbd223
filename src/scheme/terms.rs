//! What a Permit grants: its licences, its end and how much further it may be delegated, with the
//! values of the scheme's licence headers made once from them.

use super::licence::{guaranteed_by, Licence};
use super::models::SchemeTime;
use super::verdict::Permit;
use super::vocabulary::LICENCE_HEADERS;
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
    pub fn new(text: String) -> Self {
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
    pub fn value(&self, name: &str) -> Option<&LicenceValue> {
        let at = LICENCE_HEADERS
            .iter()
            .position(|n| n.eq_ignore_ascii_case(name))?;
        self.values[at].as_ref()
    }

    /// The licence headers the terms give, by the scheme's names, in their order.
    pub fn headers(&self) -> impl Iterator<Item = (&'static str, &LicenceValue)> {
        (LICENCE_HEADERS.into_iter().zip(&self.values))
            .filter_map(|(name, value)| Some((name, value.as_ref()?)))
    }

    /// What the terms take in memory beyond their licences: their values' bytes and, as
    /// measured with `examples/decision_cache_memory.rs`, the rest.
    pub fn weight(&self) -> usize {
        let values: usize = (self.values.iter().flatten()).map(|v| v.text().len()).sum();
        values + TERMS_OVERHEAD
    }
}
