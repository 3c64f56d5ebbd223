//! Request queries: parsed once into decoded pairs, in the canonical form the backend receives (every
//! character but the unreserved ones percent-encoded, so no backend reads `+` or a reserved
//! character differently), with the forms backends read differently reported for the route to
//! refuse or accept.

use super::{Ambiguities, Ambiguity, ENCODE_ALL_BUT_UNRESERVED};
use crate::reading::names::binding_key;
use crate::reading::text::has_control;
use percent_encoding::utf8_percent_encode;

/// Why a query is refused outright.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    #[error("the query has an invalid percent-encoding")]
    BadEncoding,
    #[error("the query contains control characters")]
    ControlCharacter,
    #[error("the query is not UTF-8 once decoded")]
    NotUtf8,
}

/// One parameter: its name, and its value (None for a bare `?flag`).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Pair {
    key: String,
    value: Option<String>,
}

/// A parsed query.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Query {
    pairs: Vec<Pair>,
    pub ambiguities: Ambiguities,
}

/// Decode a form-urlencoded component strictly: `+` is a space, every `%` starts a valid escape.
fn decode(component: &str) -> Result<String, QueryError> {
    let bytes = component.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = bytes.get(i + 1..i + 3).ok_or(QueryError::BadEncoding)?;
                let s = std::str::from_utf8(hex).map_err(|_| QueryError::BadEncoding)?;
                out.push(u8::from_str_radix(s, 16).map_err(|_| QueryError::BadEncoding)?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    let text = String::from_utf8(out).map_err(|_| QueryError::NotUtf8)?;
    if has_control(&text) {
        return Err(QueryError::ControlCharacter);
    }
    Ok(text)
}

/// A query key as the backends that read it most loosely do: up to a NUL (PHP cuts there), without
/// white space at its edges (PHP drops it, and frameworks trim), with ` ` and `.` read as `_`
/// (PHP), under the key a binder that ignores case reads it by (`reading::names`).
pub(crate) fn same_name(key: &str) -> String {
    let php: String = key
        .split('\0')
        .next()
        .unwrap_or_default()
        .trim()
        .chars()
        .map(|c| if c == ' ' || c == '.' { '_' } else { c })
        .collect();
    binding_key(&php).into_owned()
}

impl Query {
    /// Parse the raw query of a request (without the `?`).
    pub fn parse(raw: Option<&str>) -> Result<Query, QueryError> {
        let mut query = Query::default();
        let Some(raw) = raw.filter(|r| !r.is_empty()) else {
            return Ok(query);
        };
        if raw.contains(';') {
            query.ambiguities.insert(Ambiguity::QuerySemicolon);
        }
        if raw.to_ascii_uppercase().contains("%25") {
            query.ambiguities.insert(Ambiguity::EncodedPercent);
        }
        let mut seen: Vec<String> = Vec::new();
        for part in raw.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = match part.split_once('=') {
                Some((k, v)) => (decode(k)?, Some(decode(v)?)),
                None => (decode(part)?, None),
            };
            if key.contains('[') || key.contains(']') {
                query.ambiguities.insert(Ambiguity::BracketedQueryKey);
            }
            let folded = same_name(&key);
            if folded == "_method" {
                query.ambiguities.insert(Ambiguity::MethodOverride);
            }
            if seen.contains(&folded) {
                query.ambiguities.insert(Ambiguity::RepeatedQueryKey);
            } else {
                seen.push(folded);
            }
            query.pairs.push(Pair { key, value });
        }
        Ok(query)
    }

    /// The value of `name`, when it is given exactly once (a bare `?name` has the empty value)
    /// and no other key reads as the same name to a backend.
    pub fn get(&self, name: &str) -> Option<&str> {
        let folded = same_name(name);
        let mut found = self.pairs.iter().filter(|p| same_name(&p.key) == folded);
        let first = found.next()?;
        (found.next().is_none() && first.key == name).then(|| first.value.as_deref().unwrap_or(""))
    }

    /// The query with the values of the keys in `names` in `case`.
    pub fn recased<'a>(mut self, names: impl Iterator<Item = &'a str>, case: super::Case) -> Query {
        for name in names {
            let folded = same_name(name);
            for pair in self
                .pairs
                .iter_mut()
                .filter(|p| same_name(&p.key) == folded)
            {
                pair.value = pair.value.as_deref().map(|v| case.apply(v));
            }
        }
        self
    }

    /// How many parameters it has.
    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// The canonical form the backend receives: the same pairs in the same order, every character
    /// but the unreserved ones percent-encoded.
    pub fn canonical(&self) -> String {
        let mut out = String::new();
        for pair in &self.pairs {
            if !out.is_empty() {
                out.push('&');
            }
            out.extend(utf8_percent_encode(&pair.key, ENCODE_ALL_BUT_UNRESERVED));
            if let Some(value) = &pair.value {
                out.push('=');
                out.extend(utf8_percent_encode(value, ENCODE_ALL_BUT_UNRESERVED));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ambiguities(raw: &str) -> Ambiguities {
        Query::parse(Some(raw)).unwrap().ambiguities
    }

    #[test]
    fn queries_parse_into_their_canonical_form() {
        let q = Query::parse(Some("id=C1&kind=a+b&path=x%2Fy&flag&e=")).unwrap();
        assert_eq!(q.get("id"), Some("C1"));
        assert_eq!(q.get("kind"), Some("a b"));
        assert_eq!(q.get("path"), Some("x/y"));
        assert_eq!(q.get("flag"), Some(""));
        assert_eq!(q.get("e"), Some(""));
        assert_eq!(q.get("missing"), None);
        assert_eq!(q.canonical(), "id=C1&kind=a%20b&path=x%2Fy&flag&e=");
        assert_eq!(q.ambiguities, Ambiguities::default());
        assert_eq!(
            Query::parse(Some("q=caf%C3%A9&plus=%2B"))
                .unwrap()
                .canonical(),
            "q=caf%C3%A9&plus=%2B"
        );
        assert!(Query::parse(None).unwrap().is_empty());
    }

    #[test]
    fn forms_backends_read_differently_are_reported() {
        let has = |raw: &str, a: Ambiguity| ambiguities(raw).contains(a);
        assert!(has("id=C1&ID=SECRET-1", Ambiguity::RepeatedQueryKey));
        assert!(has("id=C1&id=SECRET-1", Ambiguity::RepeatedQueryKey));
        assert!(has("id=C1&%20id=SECRET-1", Ambiguity::RepeatedQueryKey));
        assert!(has("id=C1&id+=SECRET-1", Ambiguity::RepeatedQueryKey));
        assert!(has(
            "user_id=C1&user.id=SECRET-1",
            Ambiguity::RepeatedQueryKey
        ));
        assert!(has("id[]=C1", Ambiguity::BracketedQueryKey));
        assert!(has("id%5B0%5D=C1", Ambiguity::BracketedQueryKey));
        assert!(has("id=C1;id=SECRET-1", Ambiguity::QuerySemicolon));
        assert!(has("id=SECRET%252e", Ambiguity::EncodedPercent));
        assert!(has("_method=DELETE", Ambiguity::MethodOverride));
        assert!(has("_METHOD+=DELETE", Ambiguity::MethodOverride));
        let repeated = Query::parse(Some("id=C1&id=SECRET-1")).unwrap();
        assert_eq!(repeated.get("id"), None, "a repeated value is never picked");
        let padded = Query::parse(Some("id=C1&%20id=SECRET-1")).unwrap();
        assert_eq!(padded.get("id"), None, "nor one a backend reads twice");
        let other_case = Query::parse(Some("ID=C1")).unwrap();
        assert_eq!(
            other_case.get("id"),
            None,
            "nor a key the backend may not read"
        );
    }

    #[test]
    fn broken_queries_are_refused() {
        assert_eq!(
            Query::parse(Some("id=SECRET-1%00")),
            Err(QueryError::ControlCharacter)
        );
        assert_eq!(
            Query::parse(Some("id=%0d%0a")),
            Err(QueryError::ControlCharacter)
        );
        assert_eq!(Query::parse(Some("id=%zz")), Err(QueryError::BadEncoding));
        assert_eq!(Query::parse(Some("id=%4")), Err(QueryError::BadEncoding));
        assert_eq!(Query::parse(Some("id=%ff")), Err(QueryError::NotUtf8));
    }
}
