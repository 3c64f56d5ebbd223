//! The configuration loader on arbitrary text: every problem is reported, nothing panics. The text
//! is a gateway.toml (with a rules directory that does not exist) or, after a first line `rules`,
//! a rules file read by a fixed gateway.toml.
#![no_main]

use ishare_gateway::config;
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = Path::new("/nonexistent/ishare-gateway-fuzz/gateway.toml");
    if let Err(errors) = config::load_text(path, text) {
        assert!(!errors.0.is_empty());
        let _ = errors.to_string();
    }
});
