//! The path normaliser on arbitrary request paths: it may refuse, never panic; what it accepts is in
//! normal form (normalising it again changes nothing) and carries no dot segment or empty segment.
#![no_main]

use ishare_gateway::request::path::normalize_path;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(raw) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(path) = normalize_path(raw) {
        assert!(path.starts_with('/'));
        assert_eq!(normalize_path(&path).as_deref(), Ok(path.as_str()));
        let inner = path.trim_end_matches('/');
        assert!(inner
            .split('/')
            .skip(1)
            .all(|s| !s.is_empty() && s != "." && s != ".."));
    }
});
