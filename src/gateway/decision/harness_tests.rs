//! Decisions without sockets: a configuration from text; fake callers (the bearer tokens and the
//! session cookies they know, and how often a session is read) behind the `Callers` trait; a fake
//! trust store (the header tokens it knows and what they verify to) and a fake registry (its
//! policies, and how often it is asked) behind the `Evidence` trait; and the one sequence every
//! caller runs (`decision::decide`: a request, or an AuthZEN evaluation by its parts).

use super::authenticate::{CallerArg, Callers, Named};
use super::authorise::{assess_presented, evaluate, no_policy, Evidence, Expected, RegistryAsk};
use super::decide::{decide, Asked, Decided, Next, Own};
use super::evaluation::{Evaluation, Parts};
use super::incoming::{Held, HeldBody};
use super::log_line::{line_into, to_json};
use super::{Assessed, CallerKind, Decision, DecisionId, EvidenceSource, Stage};
use crate::access_token::AccessTokenError;
use crate::config::model::{DecisionLogSettings, DecisionLogTarget};
use crate::config::tests::{write, BASE};
use crate::gateway::people::login::Person;
use crate::gateway::reject::{EvidenceRefusal, Reject, Unavailable};
use crate::gateway::snapshot::{Shared, Snapshot};
use crate::peers::registry_errors::RegistryFailure;
use crate::scheme::evidence::DelegationEvidence;
use crate::scheme::party_record::Aliases;
use crate::scheme::trust::{ChainError, SignerError};
use crate::scheme::Timestamp;
use crate::telemetry::metrics::Outcome;
use async_trait::async_trait;
use pingora::http::RequestHeader;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

const OWNER: &str = "EU.EORI.NL000000005";
const CONSUMER: &str = "EU.EORI.NL000000001";
const BROKER: &str = "EU.EORI.NL000000007";
const REGISTRY: &str = "EU.EORI.NL000000004";
const NOW: i64 = 1_800_000_000;

const RULES: &str = r#"
[[route]]
name = "read"
methods = ["GET"]
path = "/api/containers/{id}"
upstream = "legacy"
[route.delegation]
policy_issuer = "EU.EORI.NL000000005"
resource_type = "CONTAINER"
identifiers = ["{path.id}"]
licences = ["ISHARE.0001"]
registry = "ar"

[[route]]
name = "read-shadow"
methods = ["GET"]
path = "/shadow/containers/{id}"
upstream = "legacy"
mode = "shadow"
[route.delegation]
policy_issuer = "EU.EORI.NL000000005"
resource_type = "CONTAINER"
identifiers = ["{path.id}"]

[[route]]
name = "tagged"
methods = ["GET"]
path = "/tagged/containers"
upstream = "legacy"
[route.delegation]
policy_issuer = "EU.EORI.NL000000005"
resource_type = "CONTAINER"
identifiers = ["{header.x-tag}"]

[[route]]
name = "mine"
path = "/api/mine"
upstream = "legacy"
auth = "token"

[[route]]
name = "people"
methods = ["GET", "POST"]
path = "/people/containers/{id}"
upstream = "legacy"
login = true
[route.delegation]
policy_issuer = "EU.EORI.NL000000005"
resource_type = "CONTAINER"
identifiers = ["{path.id}"]
"#;

/// Sign-in at an identity provider, for the route for people.
const LOGIN: &str = r#"
[login]
identity_provider = "EU.EORI.NL000000009"
url = "https://127.0.0.1:9109"
"#;

/// The fake callers: the parties bearer tokens name, the people session cookies name.
#[derive(Default)]
struct People {
    bearers: BTreeMap<String, String>,
    sessions: BTreeMap<String, String>,
    sessions_read: AtomicUsize,
}

#[async_trait]
impl Callers for People {
    fn party(&self, req: &RequestHeader, _now: Timestamp) -> Result<arcstr::ArcStr, Reject> {
        let token = req
            .headers
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or(Reject::Unauthenticated(AccessTokenError::Missing))?;
        let party = self.bearers.get(token);
        party
            .map(|p| p.as_str().into())
            .ok_or(Reject::Unauthenticated(AccessTokenError::Invalid))
    }

    async fn person(&self, req: &RequestHeader, _now: Timestamp) -> Result<Option<Person>, Reject> {
        self.sessions_read.fetch_add(1, Ordering::Relaxed);
        let cookie = req.headers.get(http::header::COOKIE);
        let sub = cookie
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("session="))
            .and_then(|v| self.sessions.get(v));
        Ok(sub.map(|sub| Person {
            sub: sub.clone(),
            attributes: BTreeMap::new(),
        }))
    }
}

/// The fake trust store and registry.
#[derive(Default)]
struct Fakes {
    /// Header tokens the trust store verifies, and the evidence each carries.
    tokens: BTreeMap<String, DelegationEvidence>,
    /// The registry's policies: evidence by (issuer, subject).
    policies: Vec<DelegationEvidence>,
    registry_calls: AtomicUsize,
    /// Every name looked up at the participant registry.
    looked_up: std::sync::Mutex<Vec<String>>,
}

#[async_trait]
impl Evidence for Fakes {
    async fn consumer_of_broker(
        &self,
        assertion: &str,
        _caller: &str,
        _now: Timestamp,
    ) -> Result<String, Reject> {
        Ok(assertion.trim_start_matches("assertion-of-").to_string())
    }

    fn admit_owner(&self, _caller: &str, _owner: &str) -> Result<(), Reject> {
        Ok(())
    }

    async fn look_up(&self, parties: &[&str], _aliases: &mut Aliases) -> Result<(), Reject> {
        let mut looked_up = self.looked_up.lock().unwrap();
        looked_up.extend(parties.iter().map(|p| p.to_string()));
        Ok(())
    }

    async fn header(
        &self,
        tokens: &str,
        expected: &Expected<'_>,
        now: Timestamp,
    ) -> Result<Assessed, Reject> {
        let untrusted = || {
            let root = ChainError::UntrustedRoot {
                fingerprint: "00".into(),
            };
            Reject::from(EvidenceRefusal::Signer(SignerError::Chain(root)))
        };
        let chain: Vec<_> = tokens
            .split(',')
            .map(|t| self.tokens.get(t.trim()).cloned().ok_or_else(untrusted))
            .collect::<Result<_, _>>()?;
        let source = EvidenceSource::Header;
        Ok(assess_presented(&chain, expected.request, source, now))
    }

    async fn registry(&self, ask: &RegistryAsk<'_>) -> Result<Assessed, Reject> {
        self.registry_calls.fetch_add(1, Ordering::Relaxed);
        let source = EvidenceSource::Registry {
            registry: REGISTRY.into(),
        };
        let found = self.policies.iter().find(|ev| {
            ev.policy_issuer == ask.chain.request.policy_issuer
                && ev.target.access_subject == ask.chain.request.access_subject
        });
        let evaluated = match found {
            Some(ev) => evaluate(
                std::slice::from_ref(ev),
                ask.chain.request,
                source,
                Timestamp::from_secs(NOW),
            ),
            None => no_policy(source),
        };
        Ok(Assessed {
            evaluated: std::sync::Arc::new(evaluated),
            cache_hit: false,
            kept_as: None,
            judged: None,
        })
    }
}

fn evidence(subject: &str, identifiers: &[&str]) -> DelegationEvidence {
    serde_json::from_value(json!({
        "notBefore": NOW - 60,
        "notOnOrAfter": NOW + 3600,
        "policyIssuer": OWNER,
        "target": {"accessSubject": subject},
        "policySets": [{
            "target": {"environment": {"licenses": ["ISHARE.0001"]}},
            "policies": [{
                "target": {
                    "resource": {"type": "CONTAINER", "identifiers": identifiers, "attributes": ["*"]},
                    "actions": ["iSHARE.READ"]
                },
                "rules": [{"effect": "Permit"}]
            }]
        }]
    }))
    .expect("evidence")
}

struct Harness {
    snap: Snapshot,
    fakes: Fakes,
}

impl Harness {
    fn new() -> Self {
        let dir = write(&format!("{BASE}{LOGIN}"), RULES);
        let config = crate::config::load(&dir.join("gateway.toml")).expect("the config loads");
        let _ = std::fs::remove_dir_all(&dir);
        let snap = Snapshot::build(config, None, &Shared::new(Default::default())).unwrap();
        let fakes = Fakes {
            policies: vec![evidence(CONSUMER, &["C1"])],
            ..Fakes::default()
        };
        Harness { snap, fakes }
    }

    /// Decide a request as the proxy reads it off the wire (`described` false: an HTTP/1.1
    /// request names its Host), with `callers`.
    async fn ask(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        callers: &dyn Callers,
        described: bool,
    ) -> Decided {
        let mut header = RequestHeader::build(method, path.as_bytes(), None).expect("a request");
        for (name, value) in headers {
            header
                .append_header(name.to_string(), *value)
                .expect("a header");
        }
        let mut held = Held {
            header: &header,
            has_body: false,
            body: HeldBody::Unseen,
            described,
        };
        let now = Timestamp::from_secs(NOW);
        let asked = Asked::Request(&mut held);
        decide(&self.snap.policy(), asked, callers, &self.fakes, now).await
    }

    /// A GET, described (as `explain` and rule tests describe it), by `caller`.
    async fn decide(
        &self,
        path: &str,
        caller: Option<CallerArg>,
        headers: &[(&str, &str)],
    ) -> Decision {
        let callers = Named {
            caller: caller.as_ref(),
            tokens: &self.snap.tokens,
        };
        self.ask("GET", path, headers, &callers, true)
            .await
            .decision
    }
}

fn consumer() -> Option<CallerArg> {
    Some(CallerArg::As(CONSUMER.into()))
}

#[tokio::test]
async fn a_permit_records_every_stage_from_the_values_to_the_deciding_rule() {
    let h = Harness::new();
    let d = h.decide("/api/containers/C1", consumer(), &[]).await;
    assert_eq!(
        (d.status(), d.reason, d.stage),
        (200, "granted", Stage::Evaluation)
    );
    assert_eq!(d.route, "read");
    let caller = d.caller.as_ref().expect("a caller");
    assert_eq!(
        (caller.kind, caller.id.as_str()),
        (CallerKind::Party, CONSUMER)
    );
    let taken: Vec<(&str, &str, &str)> = d
        .values
        .iter()
        .map(|v| (v.name.as_ref(), &*v.template, &*v.value))
        .collect();
    assert_eq!(
        taken,
        [
            ("policy_issuer", OWNER, OWNER),
            ("resource_type", "CONTAINER", "CONTAINER"),
            ("identifiers", "{path.id}", "C1"),
            ("attributes", "*", "*"),
        ]
    );
    let mask = d.mask.as_ref().expect("a mask");
    assert_eq!(mask.actions, ["iSHARE.READ"]);
    assert_eq!(mask.service_providers, ["EU.EORI.NL000000003"]);
    assert_eq!(mask.required_licences, ["ISHARE.0001"]);
    let used = d.evidence().expect("evidence");
    assert_eq!(
        used.source,
        EvidenceSource::Registry {
            registry: REGISTRY.into()
        }
    );
    assert_eq!(used.issuers, [OWNER]);
    let places: Vec<String> = d.decided_by().iter().map(ToString::to_string).collect();
    // The granting policy's first rule, and the licence expression that grants the route's licence.
    assert_eq!(
        places,
        [
            "evidence[0].policySets[0].policies[0].rules[0]",
            "evidence[0].policySets[0].target.environment.licenses[0]"
        ]
    );
    assert_eq!(d.grant.as_ref().map(|g| g.terms.licences.len()), Some(1));
    assert_eq!(h.fakes.registry_calls.load(Ordering::Relaxed), 1);
}

#[tokio::test]
async fn each_stage_names_itself_when_it_refuses() {
    let h = Harness::new();
    type Case<'a> = (
        &'a str,
        Option<CallerArg>,
        &'a [(&'a str, &'a str)],
        u16,
        &'a str,
        Stage,
    );
    let cases: [Case; 6] = [
        (
            "/api/nothing",
            consumer(),
            &[],
            404,
            "no_route",
            Stage::Route,
        ),
        (
            "/api/containers/C%2e1;x",
            consumer(),
            &[],
            400,
            "ambiguous_request",
            Stage::Route,
        ),
        (
            "/api/mine",
            None,
            &[],
            401,
            "missing_token",
            Stage::Authentication,
        ),
        (
            "/api/containers/C2",
            consumer(),
            &[],
            403,
            "identifier_not_granted",
            Stage::Evaluation,
        ),
        (
            "/api/containers/C1",
            Some(CallerArg::As("EU.EORI.NL000000009".into())),
            &[],
            403,
            "no_policy",
            Stage::Evaluation,
        ),
        (
            "/api/containers/C1",
            consumer(),
            &[("delegation_evidence", "forged")],
            403,
            "evidence_untrusted",
            Stage::Evidence,
        ),
    ];
    for (path, caller, headers, status, reason, stage) in cases {
        let d = h.decide(path, caller, headers).await;
        assert_eq!(
            (d.status(), d.reason, d.stage),
            (status, reason, stage),
            "{path}"
        );
        assert!(d.description.is_some() && d.refusal.is_some(), "{path}");
    }
}

#[tokio::test]
async fn header_evidence_comes_before_the_registry_and_a_broker_acts_for_its_consumer() {
    let mut h = Harness::new();
    h.fakes
        .tokens
        .insert("token-c3".into(), evidence(CONSUMER, &["C3"]));
    let d = h
        .decide(
            "/api/containers/C3",
            consumer(),
            &[("delegation_evidence", "token-c3")],
        )
        .await;
    assert_eq!((d.status(), d.reason), (200, "granted"));
    assert_eq!(
        d.evidence().map(|e| &e.source),
        Some(&EvidenceSource::Header)
    );
    assert_eq!(h.fakes.registry_calls.load(Ordering::Relaxed), 0);
    let assertion = format!("assertion-of-{CONSUMER}");
    let d = h
        .decide(
            "/api/containers/C1",
            Some(CallerArg::As(BROKER.into())),
            &[("service_consumer_assertion", &assertion)],
        )
        .await;
    assert_eq!((d.status(), d.reason), (200, "granted"));
    let caller = d.caller.expect("a caller");
    assert_eq!(
        (caller.id.as_str(), caller.acting_for.as_deref()),
        (BROKER, Some(CONSUMER))
    );
    assert_eq!(
        d.mask.map(|m| m.access_subject.clone()).as_deref(),
        Some(CONSUMER)
    );
}

#[tokio::test]
async fn shadow_mode_records_the_refusal_and_lets_the_request_through() {
    let h = Harness::new();
    let d = h.decide("/shadow/containers/C2", consumer(), &[]).await;
    assert_eq!(d.outcome, Outcome::ShadowDenied);
    assert_eq!((d.status(), d.reason), (200, "identifier_not_granted"));
    assert!(d.grant.is_none() && d.refusal.is_some());
    // Without a token the caller is unknown, and the request still goes on, as no one.
    let d = h.decide("/shadow/containers/C1", None, &[]).await;
    assert_eq!(
        (d.outcome, d.reason),
        (Outcome::ShadowDenied, "missing_token")
    );
    assert!(d.caller.is_none());
    // The request's form is not a decision to shadow: it is refused in either mode.
    let d = h
        .decide("/shadow/containers/C%2e1;x", consumer(), &[])
        .await;
    assert_eq!(
        (d.status(), d.reason, d.outcome),
        (400, "ambiguous_request", Outcome::BadRequest)
    );
    let d = h.decide("/shadow/containers/C1", consumer(), &[]).await;
    assert_eq!((d.outcome, d.reason), (Outcome::Forwarded, "granted"));
}

/// Callers who know a consumer's bearer token and a person's session.
fn people() -> People {
    People {
        bearers: BTreeMap::from([("t-consumer".into(), CONSUMER.into())]),
        sessions: BTreeMap::from([("s-alice".into(), "alice".into())]),
        ..People::default()
    }
}

const HOST: (&str, &str) = ("host", "gateway.example");

#[tokio::test]
async fn the_host_is_read_before_anything_else_and_then_the_gateways_own_endpoints() {
    let h = Harness::new();
    let callers = people();
    for (headers, why) in [
        (&[][..], "no Host"),
        (&[("host", "evil.example/../x")][..], "a path in Host"),
        (&[("host", "..")][..], "dots for a Host"),
        (&[HOST, ("host", "evil.example")][..], "two Hosts"),
    ] {
        for path in ["/connect/token", "/api/containers/C1", "/nowhere"] {
            let decided = h.ask("POST", path, headers, &callers, false).await;
            let d = &decided.decision;
            assert_eq!(
                (d.status(), d.reason),
                (400, "invalid_host"),
                "{why} {path}"
            );
            assert!(matches!(decided.next, Next::Refuse(_)), "{why} {path}");
        }
    }
    // A request another proxy or a command describes may leave its Host out.
    let decided = h.ask("POST", "/connect/token", &[], &callers, true).await;
    assert!(matches!(decided.next, Next::Own(Own::Token)));
    // The gateway's own endpoints come back typed, before any route, caller or evidence is read.
    let own = [
        ("/connect/token", Own::Token, "token"),
        ("/capabilities", Own::Capabilities, "capabilities"),
        (
            "/openid_connect1.0/return",
            Own::SignInReturn,
            "login_return",
        ),
        ("/logout", Own::Logout, "logout"),
    ];
    for (path, endpoint, route) in own {
        let decided = h.ask("GET", path, &[HOST], &callers, false).await;
        assert!(
            matches!(decided.next, Next::Own(e) if e == endpoint),
            "{path}"
        );
        assert_eq!(decided.decision.route, route, "{path}");
        assert!(decided.routed.is_none() && decided.decision.caller.is_none());
    }
    assert_eq!(callers.sessions_read.load(Ordering::Relaxed), 0);
    assert_eq!(h.fakes.registry_calls.load(Ordering::Relaxed), 0);
}

#[tokio::test]
async fn capabilities_names_its_caller_from_the_one_authentication_stage() {
    let h = Harness::new();
    let mut callers = People::default();
    callers.bearers.insert("t1".into(), CONSUMER.into());
    let capabilities = "/capabilities";
    let anonymous = h.ask("GET", capabilities, &[HOST], &callers, false).await;
    assert!(matches!(anonymous.next, Next::Own(Own::Capabilities)));
    assert!(anonymous.decision.caller.is_none());
    let bearer = ("authorization", "Bearer t1");
    let named = h
        .ask("GET", capabilities, &[HOST, bearer], &callers, false)
        .await;
    assert!(matches!(named.next, Next::Own(Own::Capabilities)));
    assert_eq!(named.decision.caller_id(), Some(CONSUMER));
    let forged = ("authorization", "Bearer t2");
    let forged = h
        .ask("GET", capabilities, &[HOST, forged], &callers, false)
        .await;
    assert!(matches!(forged.next, Next::Refuse(_)));
    let d = &forged.decision;
    assert_eq!(
        (d.status(), d.reason, d.stage),
        (401, "invalid_token", Stage::Authentication)
    );
    // With the gateway's own tokens: a repeated Authorization is refused, as on every route.
    let tokens = Named {
        caller: None,
        tokens: &h.snap.tokens,
    };
    let twice = [
        HOST,
        ("authorization", "Bearer a"),
        ("authorization", "Bearer b"),
    ];
    let repeated = h.ask("GET", capabilities, &twice, &tokens, false).await;
    let d = &repeated.decision;
    assert_eq!((d.status(), d.reason), (401, "invalid_token"));
}

#[tokio::test]
async fn on_a_route_for_people_the_session_is_read_and_a_bearer_token_is_not_a_person() {
    let mut h = Harness::new();
    h.fakes.policies.push(evidence("alice", &["C1"]));
    let callers = people();
    let bearer = ("authorization", "Bearer t-consumer");
    let cookie = ("cookie", "session=s-alice");
    // A session and a bearer token: the person calls.
    let decided = h
        .ask(
            "GET",
            "/people/containers/C1",
            &[HOST, cookie, bearer],
            &callers,
            false,
        )
        .await;
    let caller = decided.decision.caller.as_ref().expect("a caller");
    assert_eq!(
        (caller.kind, caller.id.as_str()),
        (CallerKind::Person, "alice")
    );
    let mask = decided.decision.mask.as_ref().expect("a mask");
    assert_eq!(mask.access_subject, "alice");
    let Next::Forward(forward) = &decided.next else {
        panic!("not forwarded: {:?}", decided.decision.reason);
    };
    assert_eq!(
        forward.person.as_ref().map(|p| p.sub.as_str()),
        Some("alice")
    );
    // A person is named by the identity provider: never looked up at the participant registry.
    let looked_up = std::mem::take(&mut *h.fakes.looked_up.lock().unwrap());
    assert!(looked_up.iter().any(|p| p == OWNER), "{looked_up:?}");
    assert!(!looked_up.iter().any(|p| p == "alice"), "{looked_up:?}");
    // A bearer token without a session: the person is sent to sign in, nobody is the caller.
    let decided = h
        .ask(
            "GET",
            "/people/containers/C1",
            &[HOST, bearer],
            &callers,
            false,
        )
        .await;
    assert!(matches!(decided.next, Next::SignIn));
    assert!(decided.decision.caller.is_none() && decided.decision.mask.is_none());
    // A broker's assertion with a person is refused before the session is read.
    let read = callers.sessions_read.load(Ordering::Relaxed);
    let assertion = ("service_consumer_assertion", "assertion-of-x");
    let decided = h
        .ask(
            "GET",
            "/people/containers/C1",
            &[HOST, cookie, assertion],
            &callers,
            false,
        )
        .await;
    let d = &decided.decision;
    assert_eq!(
        (d.status(), d.reason, d.stage),
        (400, "broker_with_person", Stage::Authentication)
    );
    assert_eq!(callers.sessions_read.load(Ordering::Relaxed), read);
    // On a route for parties the session is never read, only the bearer token.
    let decided = h
        .ask(
            "GET",
            "/api/containers/C1",
            &[HOST, cookie],
            &callers,
            false,
        )
        .await;
    assert_eq!(
        (decided.decision.status(), decided.decision.reason),
        (401, "missing_token")
    );
    assert_eq!(callers.sessions_read.load(Ordering::Relaxed), read);
}

#[tokio::test]
async fn the_registry_is_asked_only_for_a_known_caller_on_a_request_of_a_valid_form() {
    let h = Harness::new();
    let callers = people();
    for (path, headers, status, reason) in [
        ("/api/containers/C1", &[HOST][..], 401, "missing_token"),
        (
            "/api/containers/C1",
            &[HOST, ("authorization", "Bearer forged")][..],
            401,
            "invalid_token",
        ),
        (
            "/api/containers/C%2e1;x",
            &[HOST, ("authorization", "Bearer t-consumer")][..],
            400,
            "ambiguous_request",
        ),
    ] {
        let d = h.ask("GET", path, headers, &callers, false).await.decision;
        assert_eq!(
            (d.status(), d.reason),
            (status, reason),
            "{path} {headers:?}"
        );
    }
    // No registry call was spent (nor any of the caller's registry budget, which the live
    // registry takes per call).
    assert_eq!(h.fakes.registry_calls.load(Ordering::Relaxed), 0);
    let d = h
        .ask(
            "GET",
            "/api/containers/C1",
            &[HOST, ("authorization", "Bearer t-consumer")],
            &callers,
            false,
        )
        .await
        .decision;
    assert_eq!((d.status(), d.reason), (200, "granted"));
    assert_eq!(h.fakes.registry_calls.load(Ordering::Relaxed), 1);
}

#[tokio::test]
async fn an_authzen_evaluation_runs_the_delegation_stages_and_is_always_enforced() {
    let h = Harness::new();
    let (conditions, licences) = (BTreeMap::new(), Vec::new());
    let asked = |id| {
        let parts = Parts {
            subject: (CallerKind::Party, CONSUMER),
            resource_type: "CONTAINER",
            id,
            policy_issuer: None,
            attributes: &[],
            route: Some("read-shadow"),
            body: None,
            action: "iSHARE.READ",
            conditions: &conditions,
            licences: &licences,
            delegation_evidence: None,
        };
        Asked::Evaluation(Box::new(
            Evaluation::new(&h.snap.routes, &parts).expect("an evaluation"),
        ))
    };
    let callers = Named {
        caller: Some(&CallerArg::As(CONSUMER.into())),
        tokens: &h.snap.tokens,
    };
    let now = Timestamp::from_secs(NOW);
    let policy = h.snap.policy();
    let granted = decide(&policy, asked("C1"), &callers, &h.fakes, now).await;
    assert!(matches!(granted.next, Next::Forward(_)));
    assert_eq!(
        (granted.decision.reason, &*granted.decision.route),
        ("granted", "read-shadow")
    );
    // The route is in shadow mode; an evaluation is refused all the same.
    let denied = decide(&policy, asked("C2"), &callers, &h.fakes, now).await;
    assert!(matches!(denied.next, Next::Refuse(_)));
    assert_eq!(
        (denied.decision.status(), denied.decision.reason),
        (403, "identifier_not_granted")
    );
    assert_eq!(denied.decision.outcome, Outcome::Denied);
}

/// A decision's line of the log, as text.
fn line(d: &Decision, status: u16, duration: Duration, settings: &DecisionLogSettings) -> String {
    let mut buf = Vec::new();
    line_into(&mut buf, d, status, duration, settings);
    String::from_utf8(buf).unwrap()
}

#[tokio::test]
async fn a_decision_log_line_masks_its_fields_and_keeps_within_its_bound() {
    let h = Harness::new();
    let d = h.decide("/api/containers/C2", consumer(), &[]).await;
    let mut settings = DecisionLogSettings {
        target: DecisionLogTarget::Stdout,
        mask: vec!["caller.id".into(), "mask".into()],
        max_line_bytes: 16 * 1024,
        queue: 1,
    };
    let text = line(&d, 403, Duration::from_millis(3), &settings);
    assert!(text.ends_with('\n') && !text.trim_end().contains('\n'));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["decision_id"], d.id.as_str());
    assert_eq!(v["caller"], json!({"type": "party", "id": "[masked]"}));
    assert_eq!(v["mask"], "[masked]");
    assert_eq!(v["values"][2]["value"], "C2");
    assert_eq!(
        (v["status"].as_u64(), v["reason"].as_str()),
        (Some(403), Some("identifier_not_granted"))
    );
    assert_eq!(v["evidence"]["source"], "registry");
    assert_eq!(v["evidence"]["registry"], REGISTRY);
    assert_eq!(
        v["decided_by"],
        json!(["evidence[0].policySets[0].policies[0]"])
    );
    assert_eq!(to_json(&d)["outcome"], "denied");
    // A line over its bound keeps what identifies the decision.
    settings.mask.clear();
    settings.max_line_bytes = 200;
    let cut: serde_json::Value =
        serde_json::from_str(&line(&d, 403, Duration::ZERO, &settings)).unwrap();
    assert_eq!(cut["truncated"], true);
    assert_eq!(cut["decision_id"], d.id.as_str());
    assert!(cut.get("values").is_none() && cut.get("caller").is_none());
}

#[tokio::test]
async fn the_books_decision_log_table_names_every_field_of_a_line_and_no_other() {
    let page = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/src/reference/decision-log.md"
    ))
    .expect("the decision-log page");
    let documented: BTreeSet<String> = page
        .lines()
        .skip_while(|l| !l.starts_with("| field"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .flat_map(|l| {
            let names = l.split(" | ").next().unwrap_or_default();
            names
                .split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect();
    // A line of a decision made with the registry's evidence, one cut to its bound, and one of a
    // dependency's failure: every field a line may have.
    let h = Harness::new();
    let d = h.decide("/api/containers/C2", consumer(), &[]).await;
    let mut settings = DecisionLogSettings {
        target: DecisionLogTarget::Stdout,
        mask: Vec::new(),
        max_line_bytes: 16 * 1024,
        queue: 1,
    };
    let mut lines = vec![line(&d, 403, Duration::from_millis(3), &settings)];
    settings.max_line_bytes = 200;
    lines.push(line(&d, 403, Duration::ZERO, &settings));
    let mut failed = Decision::new();
    failed.refused(&Reject::Unavailable(Unavailable::Registry(
        RegistryFailure::Answer {
            registry: REGISTRY.into(),
            problem: "not signed".into(),
        },
    )));
    settings.max_line_bytes = 16 * 1024;
    lines.push(line(&failed, 503, Duration::ZERO, &settings));
    let written: BTreeSet<String> = lines
        .iter()
        .flat_map(|text| {
            let v: serde_json::Value = serde_json::from_str(text).unwrap();
            v.as_object().unwrap().keys().cloned().collect::<Vec<_>>()
        })
        .collect();
    let undocumented: Vec<_> = written.difference(&documented).collect();
    assert!(
        undocumented.is_empty(),
        "not in the table: {undocumented:?}"
    );
    let never: Vec<_> = documented.difference(&written).collect();
    assert!(never.is_empty(), "in the table, never written: {never:?}");
}

#[test]
fn decision_ids_are_unique_and_of_one_form() {
    let ids: std::collections::BTreeSet<String> =
        (0..1000).map(|_| DecisionId::next().to_string()).collect();
    assert_eq!(ids.len(), 1000);
    assert!(ids
        .iter()
        .all(|i| i.len() == 32 && i.bytes().all(|b| b.is_ascii_hexdigit())));
}

#[test]
fn decision_ids_share_the_process_prefix_and_count_up() {
    let (a, b) = (DecisionId::next(), DecisionId::next());
    assert_eq!(a.as_str()[..16], b.as_str()[..16]);
    let count = |id: &DecisionId| u64::from_str_radix(&id.as_str()[16..], 16).unwrap();
    assert!(count(&b) > count(&a));
    assert_eq!(serde_json::to_value(a).unwrap(), a.as_str());
}

#[test]
fn logged_values_are_escaped_and_bounded_whichever_way_they_are_copied() {
    for value in [
        "/api/containers/C1",
        "GET",
        "a\"b",
        "it's",
        "back\\slash",
        "tab\there",
        "é/ü",
    ] {
        assert_eq!(
            super::logged(value),
            value.escape_debug().collect::<String>(),
            "{value:?}"
        );
    }
    let long = "a".repeat(300);
    assert_eq!(super::logged(&long), format!("{}…", "a".repeat(256)));
}

#[path = "as_it_came_tests.rs"]
mod as_it_came_tests;
