//! Route patterns and their matching on arbitrary input: a pattern and a path separated by a newline.
//! Parsing may refuse, matching never panics; a match captures exactly the pattern's captures, and a
//! path that matches is one the normaliser accepts unchanged.
#![no_main]

use ishare_gateway::request::path::normalize_path;
use ishare_gateway::request::pattern::PathPattern;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Some((pattern, path)) = text.split_once('\n') else {
        return;
    };
    let Ok(pattern) = PathPattern::parse(pattern) else {
        return;
    };
    let Ok(path) = normalize_path(path) else {
        return;
    };
    if let Some(captures) = pattern.matches(&path) {
        let mut names: Vec<&str> = pattern.captures().collect();
        names.sort_unstable();
        let got: Vec<&str> = captures.keys().map(String::as_str).collect();
        assert_eq!(got, names);
    }
});
