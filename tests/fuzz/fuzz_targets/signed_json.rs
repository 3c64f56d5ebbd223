//! The JSON of a signed token (its header and payload) on arbitrary bytes. Properties, besides
//! never panicking: what is read is serde_json's reading of the text; every number in it is one
//! that an exact decimal reader and a binary64 reader read alike (so the number kept is the number
//! written); no object has two member names Rust's own case mappings take for one.
#![no_main]

use ishare_gateway::reading::json::read_signed;
use ishare_gateway::reading::number::reads_alike;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(read) = read_signed(data) else {
        return;
    };
    let alone: Value = serde_json::from_slice(data).expect("what is read is JSON");
    assert_eq!(read, alone);
    check(&read);
});

fn check(value: &Value) {
    match value {
        Value::Number(n) if n.is_f64() => assert!(reads_alike(&n.to_string()), "{n}"),
        Value::Array(items) => items.iter().for_each(check),
        Value::Object(members) => {
            let names: Vec<&String> = members.keys().collect();
            for (i, a) in names.iter().enumerate() {
                for b in &names[i + 1..] {
                    assert!(
                        a.to_lowercase() != b.to_lowercase() && a.to_uppercase() != b.to_uppercase(),
                        "{a:?} and {b:?}"
                    );
                }
            }
            members.values().for_each(check);
        }
        _ => {}
    }
}
