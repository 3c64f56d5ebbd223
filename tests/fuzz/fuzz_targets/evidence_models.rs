//! The evidence and mask models and the evaluation on arbitrary JSON: parsing may fail, evaluation
//! and re-serialisation may not panic, and what parses round-trips.
#![no_main]

use ishare_gateway::scheme::evaluation::evaluate;
use ishare_gateway::scheme::evidence::DelegationEvidence;
use ishare_gateway::scheme::mask::{AccessRequest, DelegationBody};
use ishare_gateway::scheme::models::{PartiesPayload, PartyPayload};
use ishare_gateway::scheme::Timestamp;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(ev) = serde_json::from_slice::<DelegationEvidence>(data) {
        let request = AccessRequest {
            policy_issuer: ev.policy_issuer.clone(),
            access_subject: ev.target.access_subject.clone(),
            service_providers: vec!["EU.EORI.NL000000003".into()],
            resource_type: "T".into(),
            identifiers: vec!["a".into()],
            attributes: vec![],
            actions: vec!["iSHARE.READ".into()],
            required_licences: vec!["L".into()],
            ..AccessRequest::default()
        };
        let _ = evaluate(&ev, &request, Timestamp::from_secs(1_800_000_000));
        let again: DelegationEvidence =
            serde_json::from_value(serde_json::to_value(&ev).unwrap()).unwrap();
        assert_eq!(again, ev);
    }
    if let Ok(body) = serde_json::from_slice::<DelegationBody>(data) {
        let again: DelegationBody = serde_json::from_value(serde_json::to_value(&body).unwrap()).unwrap();
        assert_eq!(again, body);
    }
    let _ = serde_json::from_slice::<PartiesPayload>(data);
    let _ = serde_json::from_slice::<PartyPayload>(data);
});
