//! The decision as a value. Every request the gateway answers or forwards has one `Decision`,
//! built by named stages (`Stage`): the route and the values taken from the request, the caller,
//! the mask asked, the evidence (from the header or a registry, its issuers, cached or fresh), the
//! policy and rule that decided, and the outcome with its reason. The proxy enforces it; the
//! access log, metrics, the decision log, `explain`, rule tests and shadow mode read it.

pub mod authenticate;
pub mod authorise;
pub mod decide;
pub mod dry_run;
pub mod evaluation;
pub mod grant;
pub mod incoming;
pub mod log;
pub mod log_line;
pub mod mask;
pub mod route;

#[cfg(test)]
mod harness_tests;

pub use crate::config::model::Mode;
use crate::gateway::reject::{Reject, Row};
use crate::scheme::mask::AccessRequest;
use crate::scheme::terms::Terms;
use crate::scheme::verdict::DecidedBy;
use crate::telemetry::metrics::Outcome;
use crate::telemetry::write_hex;
use serde::Serialize;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The longest request value written to a log line.
const LOGGED_LEN: usize = 256;

/// A request value as logs show it: at most LOGGED_LEN bytes, control characters escaped.
pub fn logged(value: &str) -> String {
    // Most values (methods, paths) are short printable ASCII that nothing escapes: copied as
    // they are, without walking them character by character.
    let plain = |b: &u8| matches!(b, b' '..=b'~') && !matches!(b, b'\\' | b'"' | b'\'');
    if value.len() <= LOGGED_LEN && value.as_bytes().iter().all(plain) {
        return value.to_string();
    }
    let mut end = value.len().min(LOGGED_LEN);
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    let mut out: String = value[..end].escape_debug().collect();
    if end < value.len() {
        out.push('…');
    }
    out
}

/// A request's method as logs show it: the standard ones as they are, without a copy.
pub fn logged_method(method: &http::Method) -> std::borrow::Cow<'static, str> {
    use http::Method;
    let standard = [
        (Method::GET, "GET"),
        (Method::POST, "POST"),
        (Method::PUT, "PUT"),
        (Method::DELETE, "DELETE"),
        (Method::PATCH, "PATCH"),
        (Method::HEAD, "HEAD"),
        (Method::OPTIONS, "OPTIONS"),
    ];
    match standard.iter().find(|(m, _)| m == method) {
        Some((_, name)) => (*name).into(),
        None => logged(method.as_str()).into(),
    }
}

/// A decision's identifier, unique across the instances of a fleet: a random prefix per process
/// and a counter. A consumer quotes it (`X-Decision-Id`, `decision_id` in a refusal) and an
/// operator finds the line of the decision log by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecisionId([u8; 32]);

impl DecisionId {
    pub fn next() -> Self {
        static PREFIX: OnceLock<u64> = OnceLock::new();
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let prefix = PREFIX.get_or_init(crate::keyed::random_u64);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let mut id = [0u8; 32];
        write_hex(&mut id[..16], &prefix.to_be_bytes());
        write_hex(&mut id[16..], &n.to_be_bytes());
        DecisionId(id)
    }

    pub fn as_str(&self) -> &str {
        // Always lower-case hexadecimal digits (ASCII).
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

impl Serialize for DecisionId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl fmt::Display for DecisionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The named stages a decision passes, in order. A refusal names the stage that made it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// The request itself: its form, the route it matches, the values the route takes.
    Route,
    /// Who calls: a token holder or a signed-in person (and whom a broker acts for).
    Authentication,
    /// The request in the scheme's terms: the delegation mask asked.
    Mask,
    /// The evidence: from the header, or the data owner's registry.
    Evidence,
    /// The evidence evaluated against the mask.
    Evaluation,
    /// The gateway's own endpoints (token, capabilities, sign-in) and the backend's answer.
    Answer,
}

impl Stage {
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Route => "route",
            Stage::Authentication => "authentication",
            Stage::Mask => "mask",
            Stage::Evidence => "evidence",
            Stage::Evaluation => "evaluation",
            Stage::Answer => "answer",
        }
    }
}

/// Who calls.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Caller {
    #[serde(rename = "type")]
    pub kind: CallerKind,
    /// Shared: a decision given again names its caller without a copy.
    pub id: arcstr::ArcStr,
    /// The consumer a broker acts for (the broker pattern).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acting_for: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CallerKind {
    /// A party with an access token (or a client at the token endpoint).
    Party,
    /// A person signed in through the identity provider.
    Person,
}

/// A value the route's rule took from the request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Taken {
    /// What the value is in the mask: `policy_issuer`, `resource_type`, `identifiers`, …, or
    /// `conditions.<operand>` for a condition's left operand.
    pub name: std::borrow::Cow<'static, str>,
    /// The rule's template, as written.
    #[serde(serialize_with = "text")]
    pub template: Arc<str>,
    /// Shared: a decision given again shares its values.
    #[serde(serialize_with = "text")]
    pub value: Arc<str>,
}

/// Shared text as a string.
fn text<S: serde::Serializer>(value: &Arc<str>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(value)
}

/// Where evidence came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "source", rename_all = "snake_case")]
pub enum EvidenceSource {
    /// The `delegation_evidence` header.
    Header,
    /// The data owner's authorisation registry.
    Registry { registry: String },
    /// A file or a fixture, not verified (explain and rule tests offline).
    Given { from: String },
}

/// The evidence a decision used.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EvidenceUsed {
    #[serde(flatten)]
    pub source: EvidenceSource,
    /// The issuer (`policyIssuer`) of every step, from the data owner on; empty when the registry
    /// holds no policy.
    pub issuers: Vec<String>,
    /// The party whose certificate signed each step (its record's id), where a signature was
    /// verified: a registry, or a data owner signing its own; empty for evidence read unsigned.
    pub signers: Vec<String>,
}

/// What evidence came to: the evaluation, where it was made, and what evidence it read. The
/// decision cache keeps this for registry evidence.
#[derive(Clone, Debug, PartialEq)]
pub struct Evaluated {
    pub evaluation: crate::scheme::verdict::Evaluation,
    pub evidence: EvidenceUsed,
    /// A Permit's terms, made with the evaluation: every request it answers shares them.
    pub terms: Option<Arc<Terms>>,
}

impl Evaluated {
    pub fn new(evaluation: crate::scheme::verdict::Evaluation, evidence: EvidenceUsed) -> Self {
        let terms = match &evaluation.decision {
            crate::scheme::verdict::Decision::Permit(p) => Some(Terms::of(p)),
            crate::scheme::verdict::Decision::Deny(_) => None,
        };
        Evaluated {
            evaluation,
            evidence,
            terms,
        }
    }
}

/// What evidence came to for one request: the evaluation, shared with the decision cache (never
/// copied into the decision), and whether it came from the cache.
#[derive(Clone, Debug)]
pub struct Assessed {
    pub evaluated: Arc<Evaluated>,
    /// Whether the decision (registry) or every verified token (header) came from the cache.
    pub cache_hit: bool,
    /// Where it is kept in the decision cache, where it came from there.
    pub kept_as: Option<KeptAs>,
    /// What the evidence stage found judging a chain from the header whole, for a grant kept
    /// on it.
    pub judged: Option<Arc<Judged>>,
}

/// What the evidence stage found when it judged a chain from the header whole: opaque to the
/// decision, kept with a grant on the chain and handed back to that stage at the grant's next
/// hits (`Evidence::header_stands`), which relies on it while nothing it read changed.
pub struct Judged(pub Box<dyn std::any::Any + Send + Sync>);

impl std::fmt::Debug for Judged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Judged")
    }
}

/// Where an evaluation came from in the decision cache, for a decision kept elsewhere on it.
#[derive(Clone, Debug)]
pub struct KeptAs {
    /// The entry's key.
    pub key: Arc<[u8]>,
    /// When the entry expires at the latest.
    pub until: Instant,
}

/// A permitted request: what the response headers are made from.
#[derive(Clone, Debug, PartialEq)]
pub struct Grant {
    /// The consumer a broker acts for, when it does (the broker pattern).
    pub original_consumer: Option<String>,
    /// What the evidence grants, shared with its evaluation.
    pub terms: Arc<Terms>,
}

/// One request's decision.
#[derive(Clone, Debug)]
pub struct Decision {
    pub id: DecisionId,
    pub at: SystemTime,
    pub method: std::borrow::Cow<'static, str>,
    /// The canonical path the route was matched on (bounded for logs); shared, as `values`.
    pub path: Arc<str>,
    /// The route, or the gateway's own endpoint (`token`, `capabilities`, …), or `unmatched`.
    pub route: arcstr::ArcStr,
    pub mode: Mode,
    pub caller: Option<Caller>,
    pub values: Vec<Taken>,
    /// Shared: a decision given again shares its mask.
    pub mask: Option<Arc<AccessRequest>>,
    /// What the evidence came to, and whether from the cache.
    pub assessed: Option<Assessed>,
    /// The last stage that ran: the one that decided.
    pub stage: Stage,
    pub outcome: Outcome,
    /// The reason code: `granted` (evidence), `authenticated` (a token was enough), `public`, or
    /// the refusal's (or a shadow denial's) reason.
    pub reason: &'static str,
    /// What a refusal says.
    pub description: Option<String>,
    /// The refusal (also on a route in shadow mode, where it is not enforced).
    pub refusal: Option<Reject>,
    /// What a permit grants: licence headers, and whom a broker acts for.
    pub grant: Option<Grant>,
    /// How long the decision took (up to forwarding or answering).
    pub decided_in: Option<Duration>,
}

impl Default for Decision {
    fn default() -> Self {
        Self::new()
    }
}

impl Decision {
    pub fn new() -> Self {
        Self::made(DecisionId::next(), SystemTime::now())
    }

    /// What is left where a request's decision was moved out at its end (to the decision log):
    /// made without the clock or the decisions' counter, its id all zeros.
    pub fn moved_out() -> Self {
        Self::made(DecisionId([b'0'; 32]), UNIX_EPOCH)
    }

    fn made(id: DecisionId, at: SystemTime) -> Self {
        Decision {
            id,
            at,
            method: "".into(),
            // Arc's default makes no allocation, where one from "" does.
            path: Arc::default(),
            route: arcstr::literal!(crate::config::model::own_route::UNMATCHED),
            mode: Mode::Enforce,
            caller: None,
            values: Vec::new(),
            mask: None,
            assessed: None,
            stage: Stage::Route,
            outcome: Outcome::Forwarded,
            reason: "",
            description: None,
            refusal: None,
            grant: None,
            decided_in: None,
        }
    }

    /// The evidence the decision used.
    pub fn evidence(&self) -> Option<&EvidenceUsed> {
        self.assessed.as_ref().map(|a| &a.evaluated.evidence)
    }

    /// Where in the evidence the decision was made.
    pub fn decided_by(&self) -> &[DecidedBy] {
        self.assessed
            .as_ref()
            .map_or(&[], |a| &a.evaluated.evaluation.decided_by)
    }

    /// The caller's id, as the access log names it.
    pub fn caller_id(&self) -> Option<&str> {
        self.caller.as_ref().map(|c| c.id.as_str())
    }

    /// Whether a person called (signed in at an identity provider).
    pub fn caller_is_person(&self) -> bool {
        self.caller
            .as_ref()
            .is_some_and(|c| c.kind == CallerKind::Person)
    }

    /// A party called (with a token, or at the token endpoint).
    pub fn called_by_party(&mut self, id: arcstr::ArcStr) {
        self.caller = Some(Caller {
            kind: CallerKind::Party,
            id,
            acting_for: None,
        });
    }

    /// A signed-in person called.
    pub fn called_by_person(&mut self, sub: &str) {
        self.caller = Some(Caller {
            kind: CallerKind::Person,
            id: sub.into(),
            acting_for: None,
        });
    }

    /// Record a refusal: its outcome, reason and description; its row, for the answer.
    pub fn refused(&mut self, reject: &Reject) -> Row {
        let row = reject.row();
        self.outcome = row.outcome;
        self.reason = row.reason;
        self.description = Some(row.description.clone());
        self.refusal = Some(reject.clone());
        row
    }

    /// A refusal on a route in shadow mode: recorded and counted, and the request goes on.
    pub fn shadow_denied(&mut self, reject: &Reject) {
        self.refused(reject);
        self.outcome = Outcome::ShadowDenied;
    }

    /// The status of the gateway's refusal, or 200 for a request it lets through to the backend.
    pub fn status(&self) -> u16 {
        match (&self.refusal, self.outcome) {
            (_, Outcome::ShadowDenied) | (None, _) => 200,
            (Some(reject), _) => reject.row().status,
        }
    }
}
