//! A JSON body read one way only, as I-JSON (RFC 7493) asks: an object naming a member twice is
//! refused, where serde_json alone would silently keep the last value and a PEP and the PDP
//! could read different requests from the same text.

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::fmt;

/// Why a body is not JSON read one way only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonProblem {
    /// Not JSON at all (syntax, encoding, nesting too deep, nothing after all).
    NotJson(String),
    /// An object names a member twice.
    RepeatedMember(String),
    /// Something other than white space follows the value (a second value, garbage).
    Trailing,
    /// Arrays and objects nest deeper than the limit.
    TooDeep(usize),
}

impl std::fmt::Display for JsonProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JsonProblem::NotJson(e) => write!(f, "the body is not JSON: {e}"),
            JsonProblem::RepeatedMember(e) => write!(f, "the body is JSON read two ways: {e}"),
            JsonProblem::Trailing => f.write_str("the body holds more after its JSON value"),
            JsonProblem::TooDeep(limit) => {
                write!(
                    f,
                    "the body's arrays and objects nest deeper than {limit} levels"
                )
            }
        }
    }
}

/// The deepest nesting serde_json reads itself.
const SERDE_DEPTH: usize = 128;

/// The value of `bytes`, refused if it is not JSON, holds more after its value, or an object in it
/// names a member twice.
pub fn read_unique(bytes: &[u8]) -> Result<Value, JsonProblem> {
    read_unique_within(bytes, SERDE_DEPTH)
}

/// `read_unique`, refused also when arrays and objects nest deeper than `max_depth` (checked
/// before anything is built).
pub fn read_unique_within(bytes: &[u8], max_depth: usize) -> Result<Value, JsonProblem> {
    if nesting_exceeds(bytes, max_depth) {
        return Err(JsonProblem::TooDeep(max_depth));
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let Unique(value) = Unique::deserialize(&mut de).map_err(|e| match e.classify() {
        // The only data error reading into `Unique` is the visitor's own: a repeated member.
        serde_json::error::Category::Data => JsonProblem::RepeatedMember(e.to_string()),
        _ => JsonProblem::NotJson(e.to_string()),
    })?;
    de.end().map_err(|_| JsonProblem::Trailing)?;
    Ok(value)
}

/// Whether `[` and `{` outside strings open more than `limit` levels at some point.
fn nesting_exceeds(bytes: &[u8], limit: usize) -> bool {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &b in bytes {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// A value whose objects each name a member once.
struct Unique(Value);

impl<'de> Deserialize<'de> for Unique {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(UniqueVisitor)
    }
}

struct UniqueVisitor;

impl<'de> Visitor<'de> for UniqueVisitor {
    type Value = Unique;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Unique, E> {
        Ok(Unique(Value::Bool(v)))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Unique, E> {
        Ok(Unique(Value::from(v)))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Unique, E> {
        Ok(Unique(Value::from(v)))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Unique, E> {
        Ok(Unique(Value::from(v)))
    }

    fn visit_str<E>(self, v: &str) -> Result<Unique, E> {
        Ok(Unique(Value::String(v.to_owned())))
    }

    fn visit_string<E>(self, v: String) -> Result<Unique, E> {
        Ok(Unique(Value::String(v)))
    }

    fn visit_unit<E>(self) -> Result<Unique, E> {
        Ok(Unique(Value::Null))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Unique, A::Error> {
        let mut items = Vec::new();
        while let Some(Unique(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Unique(Value::Array(items)))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Unique, A::Error> {
        let mut members = Map::new();
        while let Some(name) = map.next_key::<String>()? {
            if members.contains_key(&name) {
                return Err(de::Error::custom(format_args!(
                    "the member {name:?} is given twice in one object"
                )));
            }
            let Unique(value) = map.next_value()?;
            members.insert(name, value);
        }
        Ok(Unique(Value::Object(members)))
    }
}

#[cfg(test)]
mod tests {
    use super::{read_unique, read_unique_within, JsonProblem};
    use serde_json::json;

    #[test]
    fn json_is_read_as_serde_json_reads_it() {
        let text = br#"{"a": [1, -2, 2.5, "x", null, true, {"b": {}}], "c": "\u00e9"}"#;
        assert_eq!(
            read_unique(text),
            Ok(json!({"a": [1, -2, 2.5, "x", null, true, {"b": {}}], "c": "é"}))
        );
    }

    #[test]
    fn a_member_named_twice_is_refused_at_any_depth() {
        for text in [
            r#"{"a": 1, "a": 2}"#,
            r#"{"a": {"b": 1, "b": 1}}"#,
            r#"[{"x": 1}, {"y": 1, "y": 2}]"#,
            r#"{"\u0061": 1, "a": 2}"#,
        ] {
            let read = read_unique(text.as_bytes());
            assert!(
                matches!(&read, Err(JsonProblem::RepeatedMember(m)) if m.contains("given twice")),
                "{text}: {read:?}"
            );
        }
        // The same name in two objects is no repetition.
        assert!(read_unique(br#"[{"a": 1}, {"a": 2}]"#).is_ok());
    }

    #[test]
    fn what_is_not_json_is_refused_as_such() {
        for text in ["", "{", "{\"a\": \"\\ud800\"}", "[1,]"] {
            let read = read_unique(text.as_bytes());
            assert!(
                matches!(read, Err(JsonProblem::NotJson(_))),
                "{text}: {read:?}"
            );
        }
        assert!(matches!(
            read_unique(b"\"\xff\""),
            Err(JsonProblem::NotJson(_))
        ));
    }

    #[test]
    fn more_after_the_value_and_deep_nesting_are_refused() {
        for text in ["{\"a\": 1} x", "{\"a\": 1}{\"a\": 2}", "[1] [2]", "1 2"] {
            assert_eq!(
                read_unique(text.as_bytes()),
                Err(JsonProblem::Trailing),
                "{text}"
            );
        }
        assert!(read_unique(b"{\"a\": 1}\r\n\t ").is_ok());
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(read_unique_within(deep(64).as_bytes(), 64).is_ok());
        assert_eq!(
            read_unique_within(deep(65).as_bytes(), 64),
            Err(JsonProblem::TooDeep(64))
        );
        // Brackets inside strings do not nest.
        let quoted = format!("[\"{}\\\"\"]", "[{".repeat(100));
        assert!(read_unique_within(quoted.as_bytes(), 2).is_ok());
    }
}
