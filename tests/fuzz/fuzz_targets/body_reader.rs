//! A JSON body as a rule reads it, on arbitrary bytes. Properties, besides never panicking:
//! - a body read is read as serde_json alone reads it: one reading, the one forwarded;
//! - no object of a body read has two member names that Rust's own case mappings (full upper and
//!   lower case, an oracle apart from the binding key) take for one name;
//! - a value taken from it holds no integer beyond 2⁵³ − 1, and what a `*` stands for is bounded.
#![no_main]

use ishare_gateway::request::body::{read_for_rule, read_json, BodyPointer, Reading};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(read) = read_json(data) else {
        return;
    };
    let alone: Value = serde_json::from_slice(data).expect("what is read is JSON");
    assert_eq!(read, alone, "the body is read as serde_json reads it");
    names_are_one_name_each(&read);
    let mut headers = http::HeaderMap::new();
    headers.insert("content-type", "application/json".parse().unwrap());
    let pointers: Vec<BodyPointer> = ["/id", "/*/id", "/0/id", "/items/*/sku"]
        .iter()
        .map(|p| BodyPointer::parse(p).unwrap())
        .collect();
    for pointer in &pointers {
        let each = pointer.array().is_some().then_some(pointer);
        let reading = Reading {
            pointers: std::slice::from_ref(pointer),
            keys: &[],
            each,
            max_elements: 5,
        };
        let Ok(body) = read_for_rule(&headers, data, &reading) else {
            continue;
        };
        assert!(body.elements.is_none_or(|n| (1..=5).contains(&n)));
        let elements: Vec<Option<usize>> = match body.elements {
            Some(n) => (0..n).map(Some).collect(),
            None => vec![None],
        };
        for element in elements {
            let value = pointer.resolve(&body.json, element).expect("resolved when read");
            let at = match element {
                Some(i) => pointer.as_str().replace('*', &i.to_string()),
                None => pointer.as_str().to_string(),
            };
            if body.json.pointer(&at).is_some_and(Value::is_number) {
                let n: i128 = value.parse().expect("a number is taken as an integer");
                assert!(n.unsigned_abs() < 1 << 53, "{value} was taken as an integer");
            }
        }
    }
    let whole = BodyPointer::parse("").unwrap();
    if let Ok(names) = whole.keys(&read, None) {
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
    }
});

fn names_are_one_name_each(value: &Value) {
    match value {
        Value::Array(items) => items.iter().for_each(names_are_one_name_each),
        Value::Object(members) => {
            let names: Vec<&String> = members.keys().collect();
            for (i, a) in names.iter().enumerate() {
                for b in &names[i + 1..] {
                    let one = a.to_lowercase() == b.to_lowercase()
                        || a.to_uppercase() == b.to_uppercase();
                    assert!(!one, "{a:?} and {b:?} are one name, both read");
                }
            }
            members.values().for_each(names_are_one_name_each);
        }
        _ => {}
    }
}
