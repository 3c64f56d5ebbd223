//! JWT decoding, x5c parsing, chain validation, the assertion checks and an evidence token's
//! reading and claims on arbitrary input: none of them may panic, and an evidence token's claims
//! read once and checked later say what the whole check says then.
#![no_main]

use ishare_gateway::scheme::assertion::{check_assertion, AssertionRules};
use ishare_gateway::scheme::evidence_token::{
    check_token_claims, read_evidence_token, ClaimTimes, EvidenceTokenRules, Readers,
};
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
        let _ = read_evidence_token(&jwt, &Readers::default());
        let rules = EvidenceTokenRules {
            leeway_secs: 5.0,
            max_age_secs: 3600.0,
        };
        let read = ClaimTimes::read(&jwt);
        for at in [0.0, 1_799_999_999.5, 1_800_000_000.0, 1e300, f64::NAN] {
            let at = Timestamp::from_secs_f64(at);
            let kept = read
                .as_ref()
                .map_err(Clone::clone)
                .and_then(|c| c.check(&rules, at));
            assert_eq!(kept, check_token_claims(&jwt, &rules, at));
        }
    }
    let _ = check_assertion(text, None, &AssertionRules::new("EU.EORI.NL000000003"), now);
    // Raw bytes as a chain of DER certificates split at a marker.
    let chain: Vec<Vec<u8>> = data.split(|b| *b == 0xFF).map(<[u8]>::to_vec).collect();
    let _ = validate_chain(&chain, &TrustedList::default(), now);
});
