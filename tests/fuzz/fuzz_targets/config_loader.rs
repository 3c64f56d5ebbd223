//! The configuration loader on arbitrary text: every problem is reported, nothing panics. The text
//! is a gateway.toml (with a rules directory that does not exist) or, after a first line
//! `egress`, a configuration of the consumer's side.
#![no_main]

use ishare_gateway::config;
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = Path::new("/nonexistent/ishare-gateway-fuzz/gateway.toml");
    let errors = match text.strip_prefix("egress\n") {
        Some(egress) => config::egress::load_text(path, egress).err(),
        None => config::load_text(path, text).err(),
    };
    if let Some(errors) = errors {
        assert!(!errors.0.is_empty());
        let _ = errors.to_string();
    }
});
