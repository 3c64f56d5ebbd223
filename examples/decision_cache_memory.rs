//! Memory per cached decision: fills the gateway's decision cache with distinct Permits, as a
//! delegated route does (one per container id), and prints the resident memory they added.
//!
//!     cargo run --release --example decision_cache_memory -- [DECISIONS]

use ishare_gateway::config::model::DelegationSettings;
use ishare_gateway::gateway::decision::{Evaluated, EvidenceSource, EvidenceUsed};
use ishare_gateway::gateway::evidence::cache::{DecisionCache, DecisionKey};
use ishare_gateway::gateway::reject::Reject;
use ishare_gateway::scheme::licence::Licence;
use ishare_gateway::scheme::mask::AccessRequest;
use ishare_gateway::scheme::verdict::{DecidedBy, Decision, Evaluation, Permit};
use ishare_gateway::scheme::Timestamp;
use ishare_gateway::telemetry::Metrics;
use std::time::Duration;

fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn request(i: usize) -> AccessRequest {
    AccessRequest {
        policy_issuer: "EU.EORI.NL000000005".into(),
        access_subject: "EU.EORI.NL000000001".into(),
        service_providers: vec!["EU.EORI.NL000000003".into()],
        resource_type: "CONTAINER".into(),
        identifiers: vec![format!("CONTAINER-{i:07}")],
        attributes: vec!["*".into()],
        actions: vec!["iSHARE.READ".into()],
        required_licences: vec!["ISHARE.0001".into()],
        ..AccessRequest::default()
    }
}

fn key(request: &AccessRequest) -> DecisionKey<'_> {
    DecisionKey {
        route: "containers-read",
        request,
        registry: "EU.EORI.NL000000004",
        path: &[],
        max_age: None,
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let decisions: usize = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(100_000);
    let settings = DelegationSettings {
        registry_timeout: Duration::from_secs(3),
        cache_ttl: Duration::from_secs(300),
        deny_cache_ttl: Duration::from_secs(10),
        cache_size: 1 << 30,
        header_evidence_max_age: Duration::from_secs(3600),
        registry_calls_per_minute: 600,
        ignored_members: Default::default(),
    };
    let cache = DecisionCache::new(&settings, Metrics::new());
    let not_on_or_after = Timestamp::now().secs() + 3600;
    let before = resident_bytes();
    for i in 0..decisions {
        let permit = Evaluated::new(
            Evaluation {
                decision: Decision::Permit(Permit {
                    licences: vec![Licence::Id("ISHARE.0001".into())],
                    not_on_or_after,
                    max_delegation_depth: None,
                }),
                decided_by: vec![DecidedBy {
                    policy_set: Some(0),
                    policy: Some(0),
                    rule: Some(0),
                    ..DecidedBy::default()
                }],
            },
            EvidenceUsed {
                source: EvidenceSource::Registry {
                    registry: "EU.EORI.NL000000004".into(),
                },
                issuers: vec!["EU.EORI.NL000000005".into()],
                signers: vec!["EU.EORI.NL000000004".into()],
            },
        );
        let asked = request(i);
        let decided = cache
            .get_or_decide(key(&asked), || async { Ok(permit) })
            .await;
        assert!(decided.is_ok(), "a Permit is cached");
    }
    let first = request(0);
    let held = cache
        .get_or_decide(key(&first), || async { Err(Reject::Internal) })
        .await;
    assert!(held.is_ok(), "the first decision is still cached");
    let added = resident_bytes().saturating_sub(before);
    println!(
        "{decisions} cached decisions: {:.1} MiB resident, {:.0} bytes per decision",
        added as f64 / (1 << 20) as f64,
        added as f64 / decisions as f64
    );
}
