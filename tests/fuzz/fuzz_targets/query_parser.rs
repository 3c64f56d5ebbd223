//! The query parser on arbitrary queries: it may refuse, never panic; the canonical form it gives the
//! backend parses again, and is itself canonical (the backend reads exactly the pairs decided on).
#![no_main]

use ishare_gateway::request::query::Query;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(raw) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(query) = Query::parse(Some(raw)) {
        let canonical = query.canonical();
        let again = Query::parse(Some(&canonical)).expect("the canonical form parses");
        assert_eq!(again.canonical(), canonical);
        assert!(canonical
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~%=&".contains(&b)));
    }
});
