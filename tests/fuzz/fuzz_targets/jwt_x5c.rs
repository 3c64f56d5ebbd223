//! JWT decoding, x5c parsing, chain validation and the assertion checks on arbitrary input: none of
//! them may panic.
#![no_main]

use ishare_gateway::scheme::assertion::{check_assertion, AssertionRules};
use ishare_gateway::scheme::jwt::{decode, AlgorithmPolicy};
use ishare_gateway::scheme::trust::{validate_chain, TrustedList};
use ishare_gateway::scheme::Timestamp;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let now = Timestamp::from_secs(1_800_000_000);
    let relaxed = AlgorithmPolicy { allow_rs384_rs512: true };
    if let Ok(jwt) = decode(text, relaxed) {
        let _ = jwt.verify_signature();
        let _ = validate_chain(&jwt.x5c, &TrustedList::pinned(&"AB".repeat(32)), now);
    }
    let _ = check_assertion(text, None, &AssertionRules::new("EU.EORI.NL000000003"), now);
    // Raw bytes as a chain of DER certificates split at a marker.
    let chain: Vec<Vec<u8>> = data.split(|b| *b == 0xFF).map(<[u8]>::to_vec).collect();
    let _ = validate_chain(&chain, &TrustedList::default(), now);
});
