//! JSON request bodies that rules read: `{body.json./POINTER}` (RFC 6901, `~0` and `~1` escapes,
//! `*` for every element of an array), `{body.keys./POINTER}` (the member names of an object), and
//! the body read one way only before anything is taken
//! from it: JSON by its `Content-Type`, not encoded, as long as its `Content-Length` says, UTF-8,
//! no member named twice, nothing after its value, bounded in depth.

use crate::reading::json::{read_unique_within, JsonProblem};
use crate::reading::number::MAX_SAFE_INTEGER;
use serde_json::Value;
use std::fmt;

/// The deepest nesting of arrays and objects a body read by a rule may have.
pub const MAX_DEPTH: usize = 64;

/// One reference token of a pointer.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    /// A member name, or an array index written in decimal.
    Name(String),
    /// `*`: every element of an array, one decision each.
    Each,
}

/// A JSON Pointer into the request body, with at most one `*` for every element of an array.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BodyPointer {
    text: String,
    tokens: Vec<Token>,
}

impl BodyPointer {
    /// Parse a pointer as written after `body.json.`: empty (the whole body) or `/`-separated
    /// tokens, `~1` for `/` and `~0` for `~` in a name.
    pub fn parse(text: &str) -> Result<Self, String> {
        if !text.is_empty() && !text.starts_with('/') {
            return Err(format!("{text:?}: a JSON pointer starts with /"));
        }
        let mut tokens = Vec::new();
        for raw in text.split('/').skip(1) {
            if raw == "*" {
                tokens.push(Token::Each);
                continue;
            }
            let mut name = String::new();
            let mut chars = raw.chars();
            while let Some(c) = chars.next() {
                match (c, c == '~') {
                    (_, false) => name.push(c),
                    (_, true) => match chars.next() {
                        Some('0') => name.push('~'),
                        Some('1') => name.push('/'),
                        _ => return Err(format!("{text:?}: ~ is written ~0, / is written ~1")),
                    },
                }
            }
            tokens.push(Token::Name(name));
        }
        if tokens.iter().filter(|t| **t == Token::Each).count() > 1 {
            return Err(format!("{text:?}: at most one * in a pointer"));
        }
        Ok(BodyPointer {
            text: text.to_string(),
            tokens,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether a token of the pointer is an array index (`/items/0/id`): where it finds an
    /// array, one element is decided on and the others are not.
    pub fn names_an_index(&self) -> bool {
        self.tokens
            .iter()
            .any(|t| matches!(t, Token::Name(name) if array_index(name).is_some()))
    }

    /// The pointer of the array whose elements `*` stands for, if it has one.
    pub fn array(&self) -> Option<String> {
        let at = self.tokens.iter().position(|t| *t == Token::Each)?;
        Some(
            self.text
                .split('/')
                .take(at + 1)
                .collect::<Vec<_>>()
                .join("/"),
        )
    }

    /// The value at the pointer in `body`, `*` standing for `element`.
    fn locate<'v>(
        &self,
        body: &'v Value,
        element: Option<usize>,
    ) -> Result<&'v Value, BodyValueError> {
        let unresolved = || BodyValueError::Unresolved(self.text.clone());
        let mut at = body;
        for token in &self.tokens {
            at = match (token, at) {
                (Token::Each, Value::Array(items)) => items.get(element.ok_or_else(unresolved)?),
                (Token::Name(name), Value::Object(members)) => members.get(name),
                (Token::Name(index), Value::Array(items)) => {
                    array_index(index).and_then(|i| items.get(i))
                }
                _ => None,
            }
            .ok_or_else(unresolved)?;
        }
        Ok(at)
    }

    /// The value at the pointer in `body`, `*` standing for `element`; a scalar as text.
    pub fn resolve(&self, body: &Value, element: Option<usize>) -> Result<String, BodyValueError> {
        match self.locate(body, element)? {
            Value::String(s) => Ok(s.clone()),
            Value::Bool(b) => Ok(b.to_string()),
            Value::Number(n) if n.is_i64() || n.is_u64() => {
                let safe = n
                    .as_i64()
                    .is_some_and(|i| i.unsigned_abs() <= MAX_SAFE_INTEGER);
                match safe {
                    true => Ok(n.to_string()),
                    false => Err(BodyValueError::UnsafeInteger(self.text.clone())),
                }
            }
            _ => Err(BodyValueError::NotAScalar(self.text.clone())),
        }
    }

    /// The member names of the object at the pointer in `body` (in order, as the mask names
    /// them), `*` standing for `element`.
    pub fn keys(
        &self,
        body: &Value,
        element: Option<usize>,
    ) -> Result<Vec<String>, BodyValueError> {
        match self.locate(body, element)? {
            Value::Object(members) => {
                let mut names: Vec<String> = members.keys().cloned().collect();
                names.sort();
                Ok(names)
            }
            _ => Err(BodyValueError::NotAnObject(self.text.clone())),
        }
    }

    /// How many elements the array before `*` has (None without `*`).
    pub fn elements(&self, body: &Value) -> Result<Option<usize>, BodyValueError> {
        let Some(array) = self.array() else {
            return Ok(None);
        };
        let pointer = BodyPointer::parse(&array).map_err(|_| BodyValueError::Unresolved(array))?;
        let mut at = Some(body);
        for token in &pointer.tokens {
            at = match (token, at) {
                (Token::Name(name), Some(Value::Object(members))) => members.get(name),
                (Token::Name(index), Some(Value::Array(items))) => {
                    array_index(index).and_then(|i| items.get(i))
                }
                _ => None,
            };
        }
        match at {
            Some(Value::Array(items)) => Ok(Some(items.len())),
            _ => Err(BodyValueError::NotAnArray(pointer.text)),
        }
    }
}

/// An array index as RFC 6901 writes it: decimal digits, no leading zero.
fn array_index(token: &str) -> Option<usize> {
    let digits = !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit());
    let canonical = token == "0" || !token.starts_with('0');
    (digits && canonical).then(|| token.parse().ok()).flatten()
}

impl fmt::Display for BodyPointer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Why a value a rule takes from the body is not there to take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyValueError {
    #[error("the body has no value at {0}")]
    Unresolved(String),
    #[error("the body's value at {0} is not a string, an integer or a boolean")]
    NotAScalar(String),
    #[error("the body's integer at {0} is beyond 2^53 - 1, which JavaScript and other binary64 readers read as another number")]
    UnsafeInteger(String),
    #[error("the body has no array at {0}")]
    NotAnArray(String),
    #[error("the body has no object at {0}")]
    NotAnObject(String),
}

/// Why a request body is not read as JSON by a rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyRefusal {
    #[error("the route's rule reads the request body, and the request has none")]
    Missing,
    #[error("the route's rule reads the request body, which was not given with the request to decide: send it (Envoy: with_request_body)")]
    Unseen,
    #[error("the body given to decide on is cut short (x-envoy-auth-partial-body): raise with_request_body.max_request_bytes above the route's max_body_bytes, with allow_partial_message off")]
    Partial,
    #[error("the route's rule reads the request body as JSON; its Content-Type is {0}: send application/json, application/ld+json or another +json type, in UTF-8")]
    NotJsonType(String),
    #[error("the route's rule reads the request body; it is sent with Content-Encoding {0}: send it unencoded")]
    Encoded(String),
    #[error("the body's length ({received} bytes) is not its Content-Length ({declared})")]
    LengthMismatch { declared: String, received: usize },
    #[error("the body is not UTF-8")]
    NotUtf8,
    #[error("the body starts with a byte order mark, which JSON does not")]
    ByteOrderMark,
    #[error("{0}")]
    Json(JsonRefusal),
    #[error(transparent)]
    Value(#[from] BodyValueError),
    #[error("the body's array or object at {0} is empty: there is nothing to decide on")]
    NoElements(String),
    #[error("the body's array or object at {array} has more than {limit} elements or members")]
    TooManyElements { array: String, limit: usize },
    #[error("the body holds the JSON-LD keyword {0}, with which a backend expanding JSON-LD reads other members than the ones decided on: give @context as URLs only, and no other @ keyword")]
    JsonLdKeyword(String),
}

/// A JSON problem, by its kind (for its reason code).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonRefusal(pub JsonProblem);

impl fmt::Display for JsonRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the body {}", self.0)
    }
}

impl BodyRefusal {
    /// The reason code of the refusal.
    pub fn code(&self) -> &'static str {
        match self {
            BodyRefusal::Missing => "body_missing",
            BodyRefusal::Unseen => "body_unseen",
            BodyRefusal::Partial => "body_partial",
            BodyRefusal::NotJsonType(_) => "body_not_json_type",
            BodyRefusal::Encoded(_) => "body_encoded",
            BodyRefusal::LengthMismatch { .. } => "body_length_mismatch",
            BodyRefusal::NotUtf8 | BodyRefusal::ByteOrderMark => "body_not_utf8",
            BodyRefusal::Json(JsonRefusal(
                JsonProblem::NotJson(_) | JsonProblem::InexactNumber(_),
            )) => "body_not_json",
            BodyRefusal::Json(JsonRefusal(JsonProblem::RepeatedMember(_))) => {
                "body_duplicate_member"
            }
            BodyRefusal::Json(JsonRefusal(JsonProblem::Trailing)) => "body_trailing_data",
            BodyRefusal::Json(JsonRefusal(JsonProblem::TooDeep(_))) => "body_too_deep",
            BodyRefusal::Value(BodyValueError::UnsafeInteger(_)) => "body_value_inexact",
            BodyRefusal::Value(_) => "body_value_unresolved",
            BodyRefusal::NoElements(_) => "body_no_elements",
            BodyRefusal::TooManyElements { .. } => "body_too_many_elements",
            BodyRefusal::JsonLdKeyword(_) => "body_json_ld_keyword",
        }
    }

    /// Its HTTP status: 415 for a type or encoding not read, 413 for too many elements or a body
    /// cut short, else 400.
    pub fn status(&self) -> u16 {
        match self {
            BodyRefusal::NotJsonType(_) | BodyRefusal::Encoded(_) => 415,
            BodyRefusal::TooManyElements { .. } | BodyRefusal::Partial => 413,
            _ => 400,
        }
    }
}

/// The headers of a body a rule reads, checked: one JSON `Content-Type` (UTF-8 if it names a
/// charset), no `Content-Encoding` but identity.
pub fn check_headers(headers: &http::HeaderMap) -> Result<(), BodyRefusal> {
    let mut types = headers.get_all(http::header::CONTENT_TYPE).iter();
    let shown = |v: &http::HeaderValue| String::from_utf8_lossy(v.as_bytes()).into_owned();
    match (types.next(), types.next()) {
        (None, _) => return Err(BodyRefusal::NotJsonType("missing".into())),
        (Some(_), Some(_)) => return Err(BodyRefusal::NotJsonType("given twice".into())),
        (Some(value), None) => {
            if !is_json_type(value.as_bytes()) {
                return Err(BodyRefusal::NotJsonType(format!("{:?}", shown(value))));
            }
        }
    }
    for value in headers.get_all(http::header::CONTENT_ENCODING) {
        let encoded = value
            .as_bytes()
            .split(|b| *b == b',')
            .map(<[u8]>::trim_ascii)
            .any(|e| !e.eq_ignore_ascii_case(b"identity"));
        if encoded {
            return Err(BodyRefusal::Encoded(format!("{:?}", shown(value))));
        }
    }
    Ok(())
}

/// Whether a `Content-Type` is JSON: `application/json`, `application/ld+json` or another
/// `application/…+json`, its only charset (if any) UTF-8.
fn is_json_type(value: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(value) else {
        return false;
    };
    let mut parts = text.split(';');
    let essence = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
    let json = essence == "application/json"
        || essence.strip_prefix("application/").is_some_and(|sub| {
            sub.len() > "+json".len()
                && sub.ends_with("+json")
                && sub
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"+.-_".contains(&b))
        });
    let mut charsets = 0;
    let parameters_ok = parts.all(|p| {
        let Some((name, value)) = p.split_once('=') else {
            return false;
        };
        if !name.trim().eq_ignore_ascii_case("charset") {
            return true;
        }
        charsets += 1;
        value.trim().trim_matches('"').eq_ignore_ascii_case("utf-8")
    });
    json && parameters_ok && charsets <= 1
}

/// A body's length against its `Content-Length`, when it names one.
pub fn check_length(headers: &http::HeaderMap, received: usize) -> Result<(), BodyRefusal> {
    let mut declared = headers.get_all(http::header::CONTENT_LENGTH).iter();
    let Some(first) = declared.next() else {
        return Ok(());
    };
    let text = String::from_utf8_lossy(first.as_bytes()).trim().to_string();
    let matches = declared.next().is_none() && text.parse::<usize>().ok() == Some(received);
    match matches {
        true => Ok(()),
        false => Err(BodyRefusal::LengthMismatch {
            declared: text,
            received,
        }),
    }
}

/// A body read for a rule: its JSON value, and how many elements `*` stands for.
#[derive(Clone, Debug, PartialEq)]
pub struct ReadBody {
    pub json: Value,
    pub elements: Option<usize>,
}

/// What a rule reads of a body: every pointer of a value and of member names, the one with `*`
/// (if any), and the most elements its array (and the most members each object) may have.
pub struct Reading<'a> {
    pub pointers: &'a [BodyPointer],
    pub keys: &'a [BodyPointer],
    pub each: Option<&'a BodyPointer>,
    pub max_elements: usize,
}

/// The body of a request with these headers read for a rule: its headers checked, its JSON read,
/// its array (if the rule has `*`) neither empty nor over the bound, and every pointer resolved
/// to a scalar for every element, so that each value the rule takes is there.
pub fn read_for_rule(
    headers: &http::HeaderMap,
    bytes: &[u8],
    reading: &Reading,
) -> Result<ReadBody, BodyRefusal> {
    check_headers(headers)?;
    check_length(headers, bytes.len())?;
    let json = read_json(bytes)?;
    let elements = match reading.each {
        None => None,
        Some(each) => {
            let array = each.array().unwrap_or_default();
            match each.elements(&json)?.unwrap_or_default() {
                0 => return Err(BodyRefusal::NoElements(array)),
                n if n > reading.max_elements => {
                    return Err(BodyRefusal::TooManyElements {
                        array,
                        limit: reading.max_elements,
                    })
                }
                n => Some(n),
            }
        }
    };
    let each: Vec<Option<usize>> = match elements {
        Some(n) => (0..n).map(Some).collect(),
        None => vec![None],
    };
    for element in each {
        for pointer in reading.pointers {
            pointer.resolve(&json, element)?;
        }
        for pointer in reading.keys {
            match pointer.keys(&json, element)?.len() {
                0 => return Err(BodyRefusal::NoElements(pointer.to_string())),
                n if n > reading.max_elements => {
                    return Err(BodyRefusal::TooManyElements {
                        array: pointer.to_string(),
                        limit: reading.max_elements,
                    })
                }
                _ => {}
            }
        }
    }
    Ok(ReadBody { json, elements })
}

/// The body's JSON value, read one way only and no deeper than MAX_DEPTH.
pub fn read_json(bytes: &[u8]) -> Result<Value, BodyRefusal> {
    if bytes.starts_with(b"\xEF\xBB\xBF") {
        return Err(BodyRefusal::ByteOrderMark);
    }
    if std::str::from_utf8(bytes).is_err() {
        return Err(BodyRefusal::NotUtf8);
    }
    let json =
        read_unique_within(bytes, MAX_DEPTH).map_err(|e| BodyRefusal::Json(JsonRefusal(e)))?;
    read_one_way(&json)?;
    Ok(json)
}

/// Refuse what a backend could read as other members than the ones decided on: JSON-LD keywords
/// that rename or replace members (`@id`, `@graph`, a `@context` defining terms in place). Two
/// names a binder reads as one are refused with the JSON itself (`reading::json`).
fn read_one_way(value: &Value) -> Result<(), BodyRefusal> {
    match value {
        Value::Array(items) => items.iter().try_for_each(read_one_way),
        Value::Object(members) => {
            for (name, member) in members {
                let urls_only = match member {
                    Value::String(_) => true,
                    Value::Array(items) => items.iter().all(Value::is_string),
                    _ => false,
                };
                if name.starts_with('@') && (name != "@context" || !urls_only) {
                    return Err(BodyRefusal::JsonLdKeyword(name.clone()));
                }
                read_one_way(member)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(text: &str) -> BodyPointer {
        BodyPointer::parse(text).unwrap()
    }

    #[test]
    fn pointers_resolve_as_rfc_6901_says() {
        let body = json!({"id": "A", "a/b": "slash", "m~n": "tilde", "list": ["x", "y"],
            "n": 7, "t": true, "f": 1.5, "o": {}, "z": null, "": "empty",
            "safe": 9007199254740991u64, "low": -9007199254740991i64,
            "big": 9007199254740993u64, "huge": u64::MAX, "below": -9007199254740992i64});
        assert_eq!(p("/id").resolve(&body, None).as_deref(), Ok("A"));
        assert_eq!(p("/a~1b").resolve(&body, None).as_deref(), Ok("slash"));
        assert_eq!(p("/m~0n").resolve(&body, None).as_deref(), Ok("tilde"));
        assert_eq!(p("/list/1").resolve(&body, None).as_deref(), Ok("y"));
        assert_eq!(p("/n").resolve(&body, None).as_deref(), Ok("7"));
        assert_eq!(p("/t").resolve(&body, None).as_deref(), Ok("true"));
        assert_eq!(p("/").resolve(&body, None).as_deref(), Ok("empty"));
        assert_eq!(
            p("/safe").resolve(&body, None).as_deref(),
            Ok("9007199254740991")
        );
        assert_eq!(
            p("/low").resolve(&body, None).as_deref(),
            Ok("-9007199254740991")
        );
        for unsafe_integer in ["/big", "/huge", "/below"] {
            assert_eq!(
                p(unsafe_integer).resolve(&body, None),
                Err(BodyValueError::UnsafeInteger(unsafe_integer.into()))
            );
        }
        for missing in ["/nope", "/list/2", "/list/01", "/list/-", "/id/x"] {
            assert_eq!(
                p(missing).resolve(&body, None),
                Err(BodyValueError::Unresolved(missing.into()))
            );
        }
        for not_scalar in ["/f", "/o", "/z", "/list", ""] {
            assert_eq!(
                p(not_scalar).resolve(&body, None),
                Err(BodyValueError::NotAScalar(not_scalar.into()))
            );
        }
        assert!(BodyPointer::parse("id").is_err());
        assert!(BodyPointer::parse("/a~2").is_err());
        assert!(BodyPointer::parse("/a~").is_err());
        assert!(BodyPointer::parse("/*/x/*").is_err());
    }

    #[test]
    fn a_star_stands_for_each_element_of_its_array() {
        let body = json!({"entities": [{"id": "A"}, {"id": "B"}, {"name": "C"}]});
        let each = p("/entities/*/id");
        assert_eq!(each.array().as_deref(), Some("/entities"));
        assert_eq!(each.elements(&body), Ok(Some(3)));
        assert_eq!(each.resolve(&body, Some(1)).as_deref(), Ok("B"));
        assert!(each.resolve(&body, Some(2)).is_err());
        assert!(each.resolve(&body, None).is_err());
        let top = p("/*/id");
        assert_eq!(top.array().as_deref(), Some(""));
        assert_eq!(top.elements(&json!([{"id": "A"}])), Ok(Some(1)));
        assert_eq!(top.elements(&json!([])), Ok(Some(0)));
        assert_eq!(
            top.elements(&json!({"id": "A"})),
            Err(BodyValueError::NotAnArray("".into()))
        );
        assert_eq!(p("/id").elements(&body), Ok(None));
        let patch = json!({"temperature": {"value": 20}, "status": "ok"});
        assert_eq!(
            p("").keys(&patch, None),
            Ok(vec!["status".to_string(), "temperature".to_string()])
        );
        assert_eq!(
            p("/status").keys(&patch, None),
            Err(BodyValueError::NotAnObject("/status".into()))
        );
        let keys = [p("")];
        let reading = Reading {
            pointers: &[],
            keys: &keys,
            each: None,
            max_elements: 1,
        };
        let mut headers = http::HeaderMap::new();
        headers.insert("content-type", "application/json".parse().unwrap());
        let read = |bytes: &[u8]| read_for_rule(&headers, bytes, &reading);
        assert!(read(br#"{"a": 1}"#).is_ok());
        assert_eq!(read(b"{}").unwrap_err().code(), "body_no_elements");
        assert_eq!(
            read(br#"{"a": 1, "b": 2}"#).unwrap_err().code(),
            "body_too_many_elements"
        );
        assert_eq!(read(b"[]").unwrap_err().code(), "body_value_unresolved");
    }

    #[test]
    fn only_json_types_in_utf8_and_unencoded_are_read() {
        let headers = |pairs: &[(&str, &str)]| {
            let mut h = http::HeaderMap::new();
            for (n, v) in pairs {
                h.append(
                    http::HeaderName::from_bytes(n.as_bytes()).unwrap(),
                    v.parse().unwrap(),
                );
            }
            h
        };
        for good in [
            "application/json",
            "Application/JSON; charset=utf-8",
            "application/ld+json",
            "application/merge-patch+json",
            "application/json; charset=\"UTF-8\"",
        ] {
            assert_eq!(
                check_headers(&headers(&[("content-type", good)])),
                Ok(()),
                "{good}"
            );
        }
        for bad in [
            "text/plain",
            "application/json; charset=utf-16",
            "application/+json",
            "text/json",
            "application/json; charset=utf-8; charset=latin1",
            "application/jsonx",
        ] {
            let refused = check_headers(&headers(&[("content-type", bad)]));
            assert!(matches!(refused, Err(BodyRefusal::NotJsonType(_))), "{bad}");
        }
        assert!(check_headers(&headers(&[])).is_err());
        let twice = [
            ("content-type", "application/json"),
            ("content-type", "application/json"),
        ];
        assert!(check_headers(&headers(&twice)).is_err());
        let gzip = [
            ("content-type", "application/json"),
            ("content-encoding", "gzip"),
        ];
        assert!(matches!(
            check_headers(&headers(&gzip)),
            Err(BodyRefusal::Encoded(_))
        ));
        let identity = [
            ("content-type", "application/json"),
            ("content-encoding", "identity"),
        ];
        assert_eq!(check_headers(&headers(&identity)), Ok(()));
        assert_eq!(
            check_length(&headers(&[("content-length", "3")]), 3),
            Ok(())
        );
        assert!(check_length(&headers(&[("content-length", "4")]), 3).is_err());
        assert_eq!(check_length(&headers(&[]), 3), Ok(()));
    }

    #[test]
    fn a_body_is_json_read_one_way_only() {
        assert_eq!(read_json(br#"{"id":"A"}"#), Ok(json!({"id": "A"})));
        let code = |bytes: &[u8]| read_json(bytes).unwrap_err().code();
        assert_eq!(code(b"\xEF\xBB\xBF{}"), "body_not_utf8");
        assert_eq!(code(b"{\"id\":\"\xff\"}"), "body_not_utf8");
        assert_eq!(code(br#"{"id":"A","id":"B"}"#), "body_duplicate_member");
        for two_names in [
            br#"{"id":"A","Id":"B"}"#.as_slice(),
            br#"[{"type":"T","id":"A","\u0049D":"B"}]"#,
            br#"{"a":{"ID":"A","iD":"B"}}"#,
            "{\"sku\":\"C1\",\"\u{17F}ku\":\"SECRET-1\"}".as_bytes(),
            "{\"id\":\"C1\",\"\u{131}d\":\"SECRET-1\"}".as_bytes(),
            br#"{"kind":"A","\u212Aind":"B"}"#,
        ] {
            assert_eq!(code(two_names), "body_duplicate_member");
        }
        for keyword in [
            br#"{"@context":{"ident":"@id","id":null},"id":"A","ident":"B"}"#.as_slice(),
            br#"{"id":"A","@id":"B"}"#,
            br#"{"@graph":[{"id":"B"}],"id":"A"}"#,
            br#"[{"id":"A","@context":["https://example.org/c.jsonld",{"id":null}]}]"#,
        ] {
            assert_eq!(code(keyword), "body_json_ld_keyword");
        }
        let contexts = br#"{"id":"A","@context":["https://example.org/c.jsonld"]}"#;
        assert!(read_json(contexts).is_ok(), "a @context of URLs is read");
        assert_eq!(
            code(br#"{"id":"A","\u0069d":"B"}"#),
            "body_duplicate_member"
        );
        assert_eq!(
            code(br#"{"a":{"id":"A","id":"B"}}"#),
            "body_duplicate_member"
        );
        assert_eq!(code(br#"{"id":"A"}{"id":"B"}"#), "body_trailing_data");
        assert_eq!(code(br#"{"id":"A"} x"#), "body_trailing_data");
        assert_eq!(code(br#"{"id":"A""#), "body_not_json");
        assert_eq!(code(br#"{"n":1e400}"#), "body_not_json");
        assert_eq!(code("[".repeat(65).as_bytes()), "body_too_deep");
    }
}
