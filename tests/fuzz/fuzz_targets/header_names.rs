//! The lookup of request header names by their letters (`LetterMap`, which decides the headers a
//! backend never receives): over arbitrary names held and asked about, it finds exactly what a
//! search by `same_letters` finds, with the values of names held alike merged in their order, in
//! any case and past the names the stack holds; a name held is found in any case.
#![no_main]

use ishare_gateway::scheme::{same_letters, LetterMap};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // Every line but the last is a name held, the last a name asked about.
    let mut lines: Vec<&str> = text.split('\n').collect();
    let asked = lines.pop().unwrap_or_default();
    let held = lines;
    let map = LetterMap::new(
        held.iter().enumerate().map(|(i, h)| (*h, vec![i])),
        |v, w| v.extend(w),
    );
    let search = |name: &str| -> Option<Vec<usize>> {
        let found: Vec<usize> = (0..held.len())
            .filter(|&i| same_letters(held[i], name))
            .collect();
        (!found.is_empty()).then_some(found)
    };
    for name in [
        asked.to_string(),
        asked.to_ascii_uppercase(),
        asked.to_ascii_lowercase(),
    ] {
        assert_eq!(map.get(&name).cloned(), search(&name), "asked {name:?}");
    }
    for (i, h) in held.iter().enumerate() {
        let found = map.get(&h.to_ascii_uppercase());
        assert!(found.is_some_and(|v| v.contains(&i)), "held {h:?}");
    }
});
