//! The decision-log line of an outgoing call: which route and provider, as which party (and for
//! whom, as a broker), our token (cached, fetched or renewed), the evidence brought (which
//! registry, whose, fetched or kept), and how the call ended. Masked and bounded as the
//! gateway's lines are, in the same log.

use super::refusal::Refusal;
use crate::config::model::DecisionLogSettings;
use crate::gateway::decision::log_line::{value_line_into, Rfc3339};
use serde_json::json;
use std::time::{Duration, SystemTime};

/// The longest path or description written (a line stays within its bound).
const QUOTED: usize = 1024;

/// What is known of a call as it goes.
pub struct Line {
    pub id: String,
    pub at: SystemTime,
    pub method: String,
    /// As it came, until its canonical form is known.
    pub path: String,
    pub consumer: String,
    /// The consumer a broker's call is for, as its assertion says.
    pub acting_for: Option<String>,
    pub route: Option<String>,
    /// The provider's name and party id.
    pub provider: Option<(String, String)>,
    pub token: Option<&'static str>,
    /// The registry, the data owner, and whether the evidence was fetched, kept or denied.
    pub evidence: Option<(String, String, &'static str)>,
    pub refusal: Option<Refusal>,
    /// The id the provider's answer gives its decision (`X-Decision-Id`), to find it there.
    pub provider_decision_id: Option<String>,
}

impl Line {
    pub fn new<B>(req: &http::Request<B>, consumer: &str) -> Self {
        Line {
            id: uuid::Uuid::new_v4().to_string(),
            at: SystemTime::now(),
            method: req.method().as_str().chars().take(32).collect(),
            path: req.uri().path().chars().take(QUOTED).collect(),
            consumer: consumer.to_string(),
            acting_for: None,
            route: None,
            provider: None,
            token: None,
            evidence: None,
            refusal: None,
            provider_decision_id: None,
        }
    }
}

/// The line, appended to `out`.
pub fn write(
    out: &mut Vec<u8>,
    line: &Line,
    status: u16,
    duration: Duration,
    settings: &DecisionLogSettings,
) {
    let time = Rfc3339(line.at).bytes();
    let value = json!({
        "decision_id": line.id,
        "time": std::str::from_utf8(&time).unwrap_or_default(),
        "kind": "egress",
        "route": line.route,
        "method": line.method,
        "path": line.path.chars().take(QUOTED).collect::<String>(),
        "caller": {"id": line.consumer, "acting_for": line.acting_for},
        "provider": line.provider.as_ref().map(|(name, id)| json!({"name": name, "id": id})),
        "token": line.token,
        "evidence": line.evidence.as_ref().map(|(registry, owner, result)| json!({
            "registry": registry,
            "issuers": [owner],
            "result": result,
        })),
        "outcome": if line.refusal.is_some() { "refused" } else { "forwarded" },
        "reason": line.refusal.as_ref().map(Refusal::code),
        "description": line.refusal.as_ref().map(|r| r.to_string().chars().take(QUOTED).collect::<String>()),
        "provider_decision_id": line.provider_decision_id,
        "status": status,
        "duration_ms": duration.as_secs_f64() * 1000.0,
    });
    let keep = [
        "decision_id",
        "time",
        "kind",
        "route",
        "method",
        "provider",
        "outcome",
        "reason",
        "status",
        "duration_ms",
    ];
    value_line_into(out, value, settings, &keep);
}
