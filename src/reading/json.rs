//! JSON read one way only, as I-JSON (RFC 7493) asks: an object naming a member twice is
//! refused — also under two names a binder reads as one (`names`), where serde_json alone would
//! silently keep the last value and a PEP and the PDP, or a signer and the gateway, could read
//! different documents from the same text. In a signed token (`read_signed`) every number is also
//! one that reads alike as a decimal and as binary64 (`number::reads_alike`), so that the value
//! kept is the value written.

use super::names::binding_key;
use super::number;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;

/// Why a text is not JSON read one way only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonProblem {
    /// Not JSON at all (syntax, encoding, nesting too deep, nothing after all).
    NotJson(String),
    /// An object names a member twice (or under two names a binder reads as one), or names a
    /// member serde_json reads as an instruction (`$serde_json::private::RawValue`): an object
    /// read two ways.
    RepeatedMember(String),
    /// Something other than white space follows the value (a second value, garbage).
    Trailing,
    /// Arrays and objects nest deeper than the limit.
    TooDeep(usize),
    /// A number that a decimal reader and a binary64 reader read as two numbers.
    InexactNumber(String),
}

/// What is wrong, said of the JSON's subject ("the body …", "the evidence …").
impl std::fmt::Display for JsonProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JsonProblem::NotJson(e) => write!(f, "is not JSON: {e}"),
            JsonProblem::RepeatedMember(e) => write!(f, "is JSON read two ways: {e}"),
            JsonProblem::Trailing => f.write_str("holds more after its JSON value"),
            JsonProblem::TooDeep(limit) => {
                write!(f, "nests arrays and objects deeper than {limit} levels")
            }
            JsonProblem::InexactNumber(n) => write!(
                f,
                "holds the number {n}, which a binary64 reader (JavaScript, Go) reads as another \
                 number: write it as the shortest decimal of the number meant"
            ),
        }
    }
}

/// How serde_json's own tokens begin: an object whose member is named so is read by serde_json
/// (with its `raw_value` or `arbitrary_precision` feature) as the value the member holds.
const SERDE_TOKEN: &str = "$serde_json::private::";

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
    read(bytes, max_depth, false)
}

/// A signed token's JSON (its header or payload), read as `read_unique` reads it, every number in
/// it also one that reads alike to every reader.
pub fn read_signed(bytes: &[u8]) -> Result<Value, JsonProblem> {
    read(bytes, SERDE_DEPTH, true)
}

fn read(bytes: &[u8], max_depth: usize, exact: bool) -> Result<Value, JsonProblem> {
    let numbers = scan(bytes, max_depth, exact).ok_or(JsonProblem::TooDeep(max_depth))?;
    let reader = Reader {
        numbers: exact.then(|| RefCell::new(numbers.into_iter())),
        inexact: RefCell::new(None),
    };
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = Seed(&reader).deserialize(&mut de).map_err(|e| {
        if let Some(n) = reader.inexact.borrow_mut().take() {
            return JsonProblem::InexactNumber(n);
        }
        match e.classify() {
            // The only other data error of the visitor is its own: a repeated member.
            serde_json::error::Category::Data => JsonProblem::RepeatedMember(e.to_string()),
            _ => JsonProblem::NotJson(e.to_string()),
        }
    })?;
    de.end().map_err(|_| JsonProblem::Trailing)?;
    Ok(value)
}

/// One pass over the text outside strings: None when `[` and `{` open more than `limit` levels
/// at some point; else, when `numbers` is asked for, the text of every number in document order
/// (the order serde_json visits them in), so that a number read as binary64 can be held to the
/// text it was written as.
fn scan(bytes: &[u8], limit: usize, numbers: bool) -> Option<Vec<&str>> {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    let mut found = Vec::new();
    let mut number_from: Option<usize> = None;
    for (i, &b) in bytes.iter().enumerate() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        let in_number = matches!(b, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E');
        match (number_from, in_number) {
            (None, true) if numbers && (b == b'-' || b.is_ascii_digit()) => number_from = Some(i),
            (Some(from), false) => {
                found.push(std::str::from_utf8(&bytes[from..i]).unwrap_or_default());
                number_from = None;
            }
            _ => {}
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return None;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    if let Some(from) = number_from {
        found.push(std::str::from_utf8(&bytes[from..]).unwrap_or_default());
    }
    Some(found)
}

/// What a read keeps across the values it visits: the numbers' texts still to come (when they
/// must read alike), and the first that does not.
struct Reader<'t> {
    numbers: Option<RefCell<std::vec::IntoIter<&'t str>>>,
    inexact: RefCell<Option<String>>,
}

impl Reader<'_> {
    /// The next number's text, held to the binary64 serde_json read it as: refused unless both
    /// are one number.
    fn number<E: de::Error>(&self, read: f64) -> Result<(), E> {
        let Some(numbers) = &self.numbers else {
            return Ok(());
        };
        let text = numbers.borrow_mut().next().unwrap_or_default();
        match number::reads_as(text, read) {
            true => Ok(()),
            false => {
                let shown: String = text.chars().take(number::MAX_LEN).collect();
                *self.inexact.borrow_mut() = Some(shown);
                Err(E::custom("an inexact number"))
            }
        }
    }

    /// An integer serde_json holds exactly: its text is passed over.
    fn integer(&self) {
        if let Some(numbers) = &self.numbers {
            numbers.borrow_mut().next();
        }
    }
}

/// A value whose objects each name a member once, under every name a binder folds together.
struct Seed<'r, 't>(&'r Reader<'t>);

impl<'de> DeserializeSeed<'de> for Seed<'_, '_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed<'_, '_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        self.0.integer();
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        self.0.integer();
        Ok(Value::from(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        self.0.number(v)?;
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(Seed(self.0))? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut members = Map::new();
        let mut keys: HashSet<String> = HashSet::new();
        while let Some(name) = map.next_key::<String>()? {
            if name.starts_with(SERDE_TOKEN) {
                return Err(de::Error::custom(format!(
                    "the member {name:?} is serde_json's own token: a binder built with its \
                     raw_value or arbitrary_precision feature reads the object as another value"
                )));
            }
            if !keys.insert(binding_key(&name).into_owned()) {
                let first = members
                    .keys()
                    .find(|k| binding_key(k) == binding_key(&name))
                    .cloned()
                    .unwrap_or_default();
                return Err(de::Error::custom(match first == name {
                    true => format!("the member {name:?} is given twice in one object"),
                    false => format!(
                        "the members {first:?} and {name:?} of one object are one name to a \
                         binder that ignores case"
                    ),
                }));
            }
            let value = map.next_value_seed(Seed(self.0))?;
            members.insert(name, value);
        }
        Ok(Value::Object(members))
    }
}

#[cfg(test)]
mod tests {
    use super::{read_signed, read_unique, read_unique_within, JsonProblem};
    use serde_json::json;

    #[test]
    fn json_is_read_as_serde_json_reads_it() {
        let text = br#"{"a": [1, -2, 2.5, "x", null, true, {"b": {}}], "c": "\u00e9"}"#;
        assert_eq!(
            read_unique(text),
            Ok(json!({"a": [1, -2, 2.5, "x", null, true, {"b": {}}], "c": "é"}))
        );
        assert_eq!(read_signed(text), read_unique(text));
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
    fn a_member_serde_json_reads_as_its_own_token_is_refused() {
        // serde_json with `raw_value` reads the first as {"id": "SECRET-1"}.
        for text in [
            r#"{"$serde_json::private::RawValue": "{\"id\": \"SECRET-1\"}"}"#,
            r#"[{"id": "C1"}, {"$serde_json::private::Number": "1e999"}]"#,
        ] {
            let read = read_unique(text.as_bytes());
            assert!(
                matches!(&read, Err(JsonProblem::RepeatedMember(m)) if m.contains("serde_json's own token")),
                "{text}: {read:?}"
            );
        }
        // In a value it is text like any other.
        assert!(read_unique(br#"{"note": "$serde_json::private::RawValue"}"#).is_ok());
    }

    #[test]
    fn two_names_a_binder_folds_together_are_one_member() {
        for text in [
            r#"{"sku": "C1", "ſku": "SECRET-1"}"#,
            r#"{"id": "C1", "ıd": "SECRET-1"}"#,
            r#"{"id": "C1", "İd": "SECRET-1"}"#,
            r#"{"kind": "a", "\u212Aind": "b"}"#,
            r#"{"temp": 1, "TEMP": 2}"#,
            r#"{"effect": "Deny", "Effect": "Permit"}"#,
        ] {
            let read = read_unique(text.as_bytes());
            assert!(
                matches!(&read, Err(JsonProblem::RepeatedMember(m)) if m.contains("one name")),
                "{text}: {read:?}"
            );
            assert!(read_signed(text.as_bytes()).is_err(), "{text}");
        }
    }

    #[test]
    fn a_signed_token_holds_only_numbers_that_read_alike() {
        for text in [
            r#"{"rightOperand": 0.09999999999999999999}"#,
            r#"{"n": 18446744073709551617}"#,
            r#"{"n": [1, 2, 1e-400]}"#,
            r#"{"a": "1.5", "n": 0.10000000000000000001}"#,
        ] {
            assert!(
                matches!(
                    read_signed(text.as_bytes()),
                    Err(JsonProblem::InexactNumber(_))
                ),
                "{text}"
            );
        }
        assert!(read_signed(br#"{"n": 1e400}"#).is_err());
        let alike = br#"{"a": "0.0999999999999999999", "n": [0.1, 2.5e-3, -0, 9007199254740993, 1700000000.5]}"#;
        assert!(read_signed(alike).is_ok());
        // Outside signed tokens, numbers are what serde_json makes of them.
        assert!(read_unique(br#"{"n": 0.09999999999999999999}"#).is_ok());
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
