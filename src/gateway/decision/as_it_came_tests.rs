//! The decision kept by the request as it came against the whole sequence: over generated
//! requests (methods, paths with encodings and dot segments, queries, hosts, tokens, evidence,
//! a broker's assertion, connection and upgrade headers, headers no stage reads, bodies) and
//! events between them (a token revoked, a registry's policy withdrawn, the decision cache
//! purged, a header's signer distrusted, its chains evaluated anew), the two decide the same,
//! reason for reason, request after request, on evidence from one real decision cache and a
//! header's chains kept as the live gateway keeps them.

use super::*;
use crate::access_token::AccessClaims;
use crate::gateway::as_it_came::{AsItCame, LONGEST, UNREAD};
use crate::gateway::decision::Evaluated;
use crate::gateway::evidence::cache::{DecisionCache, DecisionKey, PurgeScope};
use crate::scheme::evidence_token::EvidenceTokenError;
use crate::scheme::trust::PartyError;
use crate::scheme::vocabulary::EVIDENCE_HEADERS;
use proptest::prelude::*;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::sync::Mutex;

/// Bearer tokens, and whom each names while it is not revoked.
struct Tokens(Mutex<BTreeMap<String, String>>);

#[async_trait]
impl Callers for Tokens {
    fn party(&self, req: &RequestHeader, now: Timestamp) -> Result<arcstr::ArcStr, Reject> {
        let bearers = self.0.lock().unwrap().clone();
        let people = People {
            bearers,
            ..People::default()
        };
        people.party(req, now)
    }

    /// The claims of a bearer token here: whom it names, and the token itself as its id.
    fn credential(&self, req: &RequestHeader, now: Timestamp) -> Option<Arc<AccessClaims>> {
        let party = self.party(req, now).ok()?;
        let token = req
            .headers
            .get(http::header::AUTHORIZATION)?
            .to_str()
            .ok()?;
        Some(Arc::new(AccessClaims {
            iss: String::new(),
            sub: party.to_string(),
            aud: String::new(),
            jti: token.strip_prefix("Bearer ")?.to_string(),
            iat: 0,
            exp: i64::MAX,
            scope: Vec::new(),
        }))
    }

    /// While the token is not revoked.
    fn stands(&self, credential: &Arc<AccessClaims>, _now: Timestamp) -> bool {
        self.0.lock().unwrap().get(&credential.jti) == Some(&credential.sub)
    }

    async fn person(
        &self,
        _req: &RequestHeader,
        _now: Timestamp,
    ) -> Result<Option<Person>, Reject> {
        Ok(None)
    }
}

/// The harness's fakes, with a registry whose policies can be withdrawn, asked through a real
/// decision cache as the live gateway asks; and chains from the header whose signer can be
/// distrusted, each evaluation kept (the same one given while kept) as the live gateway keeps
/// them.
struct Withdrawable {
    fakes: Fakes,
    withdrawn: std::sync::atomic::AtomicBool,
    decisions: DecisionCache,
    distrusted: std::sync::atomic::AtomicBool,
    expired: std::sync::atomic::AtomicBool,
    evaluations: moka::sync::Cache<String, Arc<Evaluated>>,
}

impl Withdrawable {
    fn new(fakes: Fakes, h: &Harness, cache_ttl: Duration) -> Self {
        let mut settings = h.snap.config.delegation.clone();
        settings.cache_ttl = cache_ttl;
        Withdrawable {
            fakes,
            withdrawn: Default::default(),
            decisions: DecisionCache::new(&settings, crate::telemetry::Metrics::new()),
            distrusted: Default::default(),
            expired: Default::default(),
            evaluations: moka::sync::Cache::builder().time_to_live(cache_ttl).build(),
        }
    }
}

#[async_trait]
impl Evidence for Withdrawable {
    async fn consumer_of_broker(
        &self,
        assertion: &str,
        caller: &str,
        now: Timestamp,
    ) -> Result<String, Reject> {
        self.fakes.consumer_of_broker(assertion, caller, now).await
    }

    fn admit_owner(&self, caller: &str, owner: &str) -> Result<(), Reject> {
        self.fakes.admit_owner(caller, owner)
    }

    async fn header(
        &self,
        tokens: &str,
        expected: &Expected<'_>,
        now: Timestamp,
    ) -> Result<Assessed, Reject> {
        let assessed = self.fakes.header(tokens, expected, now).await?;
        // Addressed to the caller, as the live gateway asks of every token.
        let mut subjects = tokens
            .split(',')
            .filter_map(|t| self.fakes.tokens.get(t.trim()));
        if subjects.any(|ev| ev.target.access_subject != expected.caller) {
            let e = EvidenceTokenError::NotForCaller {
                expected: expected.caller.to_string(),
                found: expected.request.access_subject.clone(),
            };
            return Err(EvidenceRefusal::Token(e).into());
        }
        // Signed by the registry `ar`, which the owner did not designate: good only on a route
        // that names it.
        if expected.registry != Some("ar") {
            return Err(EvidenceRefusal::IssuerNotTheOwnersRegistry {
                issuer: crate::scheme::party::PartyId::parse(REGISTRY).expect("an id"),
                owner: expected.request.policy_issuer.clone(),
            }
            .into());
        }
        if self.distrusted.load(Ordering::Relaxed) {
            let party = PartyError::UnknownParty(REGISTRY.into());
            return Err(EvidenceRefusal::Signer(SignerError::Party(party)).into());
        }
        if self.expired.load(Ordering::Relaxed) {
            let evaluated = Arc::new(no_policy(EvidenceSource::Header));
            return Ok(Assessed {
                evaluated,
                ..assessed
            });
        }
        // Kept by the tokens and the request alone, as the live gateway keeps them.
        let asked = format!("{tokens} {:?}", expected.request);
        let evaluated = self.evaluations.get_with(asked, || assessed.evaluated);
        Ok(Assessed {
            evaluated,
            ..assessed
        })
    }

    async fn registry(&self, ask: &RegistryAsk<'_>) -> Result<Assessed, Reject> {
        let key = DecisionKey::of(ask);
        let asked = async {
            let source = EvidenceSource::Registry {
                registry: REGISTRY.into(),
            };
            match self.withdrawn.load(Ordering::Relaxed) {
                true => Ok(no_policy(source)),
                false => Ok((*self.fakes.registry(ask).await?.evaluated).clone()),
            }
        };
        self.decisions.get_or_decide(key, || asked).await
    }
}

/// Everything a decision says but its id, its time, its duration and whether a cache served it.
fn said(decided: &Decided) -> String {
    let d = &decided.decision;
    let next = match &decided.next {
        Next::Forward(f) => format!(
            "forward person={:?} method_field={:?}",
            f.person.is_some(),
            f.method_field.is_some()
        ),
        Next::Refuse(r) => format!("refuse {r:?}"),
        Next::Own(own) => format!("own {own:?}"),
        Next::SignIn => "sign in".into(),
    };
    let routed = decided.routed.as_ref().map(|r| {
        format!(
            "{} {} {:?} {:?} {} body={:?}",
            r.route.name,
            r.path,
            r.captures,
            r.query,
            r.upstream_uri,
            r.body.is_some()
        )
    });
    let evaluated = d.assessed.as_ref().map(|a| format!("{:?}", a.evaluated));
    format!(
        "{} {} {:?} {:?} {} {} {} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {next} {routed:?}",
        d.status(),
        d.reason,
        d.outcome,
        d.stage,
        d.method,
        d.path,
        d.route,
        d.mode,
        d.caller.as_ref().map(|c| (c.kind, &c.id, &c.acting_for)),
        d.values,
        d.mask,
        evaluated,
        d.description,
        d.refusal,
        d.grant,
    )
}

/// A request as generated: method, target, headers, and whether a body follows; and which of
/// the two decides it first (the first one's registry call fills the decision cache).
#[derive(Clone, Debug)]
struct Generated {
    method: &'static str,
    target: String,
    headers: Vec<(&'static str, String)>,
    has_body: bool,
    kept_first: bool,
}

/// What happens between two requests.
#[derive(Clone, Debug)]
enum Step {
    Request(Generated),
    /// The consumer's token no longer names it.
    Revoke,
    /// The owner withdraws its policies (the decision cache still keeps what it decided).
    Withdraw,
    /// The decision cache is purged: of the consumer's decisions, or all.
    Purge(bool),
    /// The signer of the header's chains no longer stands (its record, its certificate).
    Distrust,
    /// The header's chains are evaluated anew (their evaluations evicted).
    Reevaluate,
    /// The header's chains' evidence is no longer in force: evaluated anew, they deny.
    Expire,
    /// Time passes.
    Wait(Duration),
}

fn target() -> impl Strategy<Value = String> {
    let paths = prop::sample::select(vec![
        "/api/containers/C1",
        "/api/containers/C1",
        "/api/containers/C1",
        "/api/mine",
        "/tagged/containers",
        "/tagged/containers",
        "/tagged/containers",
        "/tagged/containers",
        "/tagged/containers",
        "/api/containers/C2",
        "/api/containers/%43%31",
        "/api/containers/c1",
        "//api/containers/C1",
        "/api/./containers/C1",
        "/api/x/../containers/C1",
        "/api/containers/C1%2F",
        "/api/containers/C%001",
        "/api/mine",
        "/api/mine/",
        "/API/mine",
        "/tagged/containers",
        "/shadow/containers/C1",
        "/shadow/containers/C2",
        "/people/containers/C1",
        "/capabilities",
        "/nope",
    ]);
    let queries = prop::sample::select(vec!["", "", "", "?a=1", "?a=1&a=2", "?a=%zz", "?"]);
    (paths, queries).prop_map(|(p, q)| format!("{p}{q}"))
}

fn header() -> impl Strategy<Value = (&'static str, String)> {
    let choose = |name: &'static str, values: Vec<&'static str>| {
        prop::sample::select(values).prop_map(move |v| (name, v.to_string()))
    };
    prop_oneof![
        1 => choose("authorization", vec!["Bearer good", "bearer good", "Basic eA==", "Bearer"]),
        2 => choose("host", vec!["gw.example", "gw.example:8443", "a b", ""]),
        1 => choose("delegation_evidence", vec!["tok-c1", "tok-unknown"]),
        1 => choose("delegationEvidence", vec!["tok-c1"]),
        1 => choose("delegation-evidence", vec!["tok-c1"]),
        1 => choose("service_consumer_assertion", vec!["assertion-of-EU.EORI.NL000000001"]),
        1 => choose("connection", vec!["keep-alive", "authorization", "close, x-other"]),
        1 => choose("upgrade", vec!["websocket"]),
        4 => choose("x-tag", vec!["C1", "C1", "C2", "c1", ""]),
        4 => "[a-z0-9/.]{0,12}".prop_map(|v| ("user-agent", v)),
        4 => "00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]".prop_map(|v| ("traceparent", v)),
        1 => "[a-z0-9]{1,8}".prop_map(|v| ("x-request-id", v)),
        2 => (prop::sample::select(UNREAD.to_vec()), "[ -~]{0,16}"),
    ]
}

/// A header some stage reads.
fn telling() -> impl Strategy<Value = (&'static str, String)> {
    let choose = |name: &'static str, values: Vec<&'static str>| {
        prop::sample::select(values).prop_map(move |v| (name, v.to_string()))
    };
    prop_oneof![
        choose(
            "authorization",
            vec!["Bearer good", "bearer good", "Bearer"]
        ),
        choose("host", vec!["gw.example:8443", "a b"]),
        choose("delegation_evidence", vec!["tok-c1", "tok-unknown"]),
        choose("delegationEvidence", vec!["tok-c1"]),
        choose(
            "service_consumer_assertion",
            vec!["assertion-of-EU.EORI.NL000000001"]
        ),
        choose("connection", vec!["keep-alive", "x-tag", "close, X-Tag"]),
        choose("connection", vec!["X-TAG", "x-other"]),
        choose("upgrade", vec!["websocket"]),
        choose("x-tag", vec!["C1", "C2", "c1"]),
    ]
}

fn request() -> impl Strategy<Value = Generated> {
    let methods = prop::sample::select(vec!["GET", "GET", "GET", "GET", "HEAD", "POST", "DELETE"]);
    let headers = prop::collection::vec(header(), 0..3);
    // Most requests come with a token.
    let bearer = prop::option::weighted(0.85, prop::sample::select(vec!["good", "good", "other"]));
    // Most name the container the tagged route reads.
    let tag = prop::option::weighted(0.9, prop::sample::select(vec!["C1", "C1", "C2"]));
    // Many present evidence, in either name.
    let names = vec!["delegation_evidence", "delegationEvidence"];
    let evidence = prop::option::weighted(0.3, prop::sample::select(names));
    (
        methods,
        target(),
        (headers, bearer, tag, evidence),
        prop::bool::weighted(0.1),
    )
        .prop_map(
            |(method, target, (mut headers, bearer, tag, evidence), has_body)| {
                if let Some(tag) = tag {
                    headers.insert(0, ("x-tag", tag.to_string()));
                }
                if let Some(name) = evidence {
                    headers.insert(0, (name, "tok-c1".to_string()));
                }
                if let Some(token) = bearer {
                    headers.insert(0, ("authorization", format!("Bearer {token}")));
                }
                // Most requests name one Host, as HTTP/1.1 asks.
                if !headers.iter().any(|(n, _)| *n == "host") {
                    headers.insert(0, ("host", "gw.example".into()));
                }
                Generated {
                    method,
                    target,
                    headers,
                    has_body,
                    kept_first: false,
                }
            },
        )
}

/// How a request differs from the one it is drawn beside.
#[derive(Clone, Debug)]
enum Differs {
    /// In a header some stage reads, added.
    Header((&'static str, String)),
    /// In that a body follows, or not.
    Body,
    /// In its evidence's value alone, byte for byte: another chain that grants, one that
    /// does not, the same chain with the space the evidence stage trims.
    Evidence(&'static str),
}

/// Requests drawn from a few alike, so that they come again (each time with an id of its own, which no
/// stage reads), and events between them.
fn steps() -> impl Strategy<Value = Vec<Step>> {
    // A request, and others that differ from it in a header or two, only in that a body
    // follows, or only in their evidence.
    let evidence = ["tok-c1b", "tok-unknown", " tok-c1", "tok-c1 "];
    let variant = prop_oneof![
        6 => telling().prop_map(Differs::Header),
        1 => Just(Differs::Body),
        2 => prop::sample::select(evidence.to_vec()).prop_map(Differs::Evidence),
    ];
    let variants = prop::collection::vec(variant, 0..6);
    let pool = (request(), variants).prop_map(|(base, variants)| {
        let mut pool = vec![base.clone()];
        pool.extend(variants.into_iter().map(|extra| {
            let mut r = base.clone();
            match extra {
                Differs::Header(header) => r.headers.push(header),
                Differs::Body => r.has_body = !r.has_body,
                Differs::Evidence(value) => with_evidence(&mut r, value),
            }
            r
        }));
        pool
    });
    let step = prop_oneof![
        30 => (any::<prop::sample::Index>(), "[a-z0-9]{1,8}", any::<bool>())
            .prop_map(|(i, id, first)| (Some((i, id, first)), None)),
        1 => Just((None, Some(Step::Revoke))),
        1 => Just((None, Some(Step::Withdraw))),
        1 => any::<bool>().prop_map(|all| (None, Some(Step::Purge(all)))),
        1 => Just((None, Some(Step::Distrust))),
        1 => Just((None, Some(Step::Reevaluate))),
        1 => Just((None, Some(Step::Expire))),
    ];
    (pool, prop::collection::vec(step, 1..40)).prop_map(|(pool, order)| {
        let pick = |(i, id, kept_first): (prop::sample::Index, String, bool)| {
            let mut r = i.get(&pool).clone();
            r.headers.push(("x-request-id", id));
            r.kept_first = kept_first;
            Step::Request(r)
        };
        order
            .into_iter()
            .filter_map(|(request, event)| request.map(pick).or(event))
            .collect()
    })
}

/// `r` with `value` in each of its evidence headers, or in one added where it has none.
fn with_evidence(r: &mut Generated, value: &str) {
    let mut found = false;
    for (name, v) in &mut r.headers {
        if EVIDENCE_HEADERS.contains(&*name) {
            *v = value.to_string();
            found = true;
        }
    }
    if !found {
        r.headers.push(("delegation_evidence", value.to_string()));
    }
}

/// One request decided by `decide` at `NOW`, through `kept` or by the whole sequence.
async fn run(
    h: &Harness,
    r: &Generated,
    callers: &dyn Callers,
    evidence: &dyn Evidence,
    kept: Option<&AsItCame>,
) -> Decided {
    run_at(h, r, (callers, evidence), kept, Timestamp::from_secs(NOW)).await
}

/// `run`, at `now`.
async fn run_at(
    h: &Harness,
    r: &Generated,
    (callers, evidence): (&dyn Callers, &dyn Evidence),
    kept: Option<&AsItCame>,
    now: Timestamp,
) -> Decided {
    let mut header = RequestHeader::build(r.method, r.target.as_bytes(), None).expect("a request");
    for (name, value) in &r.headers {
        header
            .append_header(name.to_string(), value.as_str())
            .expect("a header");
    }
    let mut held = Held {
        header: &header,
        has_body: r.has_body,
        body: HeldBody::Unseen,
        described: false,
    };
    let policy = h.snap.policy();
    match kept {
        Some(kept) => {
            kept.decide(&policy, &mut held, callers, evidence, now)
                .await
        }
        None => decide(&policy, Asked::Request(&mut held), callers, evidence, now).await,
    }
}

/// How many requests the kept decisions gave, and how many were looked up and not found.
#[derive(Debug, PartialEq)]
struct Counts {
    given: u64,
    not_found: u64,
    /// Of those given, how many came with evidence in the header.
    given_on_header: u64,
}

/// Run `steps` through both on `h`, comparing every decision; how many requests the kept
/// decisions gave, and how many were looked up and not found.
fn differential(h: &Harness, steps: &[Step]) -> Result<(u64, u64), TestCaseError> {
    differential_within(h, steps, Duration::from_secs(300)).map(|c| (c.given, c.not_found))
}

/// `differential`, with the decision cache keeping a Permit for `cache_ttl`.
fn differential_within(
    h: &Harness,
    steps: &[Step],
    cache_ttl: Duration,
) -> Result<Counts, TestCaseError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let tokens = Tokens(Mutex::new(BTreeMap::from([
            ("good".to_string(), CONSUMER.to_string()),
            ("other".to_string(), BROKER.to_string()),
        ])));
        let mut fakes = Fakes {
            policies: vec![evidence(CONSUMER, &["C1"]), evidence(BROKER, &["C2"])],
            ..Fakes::default()
        };
        for chain in ["tok-c1", "tok-c1b"] {
            fakes
                .tokens
                .insert(chain.into(), evidence(CONSUMER, &["C1"]));
        }
        let registry = Withdrawable::new(fakes, h, cache_ttl);
        let metrics = crate::telemetry::Metrics::new();
        let routes = h.snap.routes.routes();
        let entries = registry.decisions.entries();
        let kept = AsItCame::new(1 << 20, LONGEST, routes, false, entries, &metrics);
        let count = |result| metrics.cache.with_label_values(&["request", result]).get();
        let mut given_on_header = 0;
        for step in steps {
            match step {
                Step::Request(r) => {
                    let before = count("hit");
                    let (whole, given) = match r.kept_first {
                        false => {
                            let whole = run(h, r, &tokens, &registry, None).await;
                            (whole, run(h, r, &tokens, &registry, Some(&kept)).await)
                        }
                        true => {
                            let given = run(h, r, &tokens, &registry, Some(&kept)).await;
                            (run(h, r, &tokens, &registry, None).await, given)
                        }
                    };
                    prop_assert_eq!(said(&whole), said(&given), "{:?}", r);
                    let on_header = r
                        .headers
                        .iter()
                        .any(|(n, _)| ["delegation_evidence", "delegationEvidence"].contains(n));
                    if on_header && count("hit") > before {
                        given_on_header += 1;
                    }
                }
                Step::Revoke => {
                    tokens.0.lock().unwrap().remove("good");
                }
                Step::Withdraw => registry.withdrawn.store(true, Ordering::Relaxed),
                Step::Distrust => registry.distrusted.store(true, Ordering::Relaxed),
                Step::Reevaluate => registry.evaluations.invalidate_all(),
                Step::Expire => registry.expired.store(true, Ordering::Relaxed),
                Step::Purge(all) => {
                    let scope = match all {
                        true => PurgeScope::All,
                        false => PurgeScope::AccessSubject(CONSUMER.into()),
                    };
                    registry.decisions.purge(&scope).await;
                }
                Step::Wait(pause) => tokio::time::sleep(*pause).await,
            }
        }
        Ok(Counts {
            given: count("hit"),
            not_found: count("miss"),
            given_on_header,
        })
    })
}

#[test]
fn a_kept_decision_is_the_one_the_whole_sequence_makes() {
    let h = Harness::new();
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(1024));
    let (given, on_header) = (AtomicU64::new(0), AtomicU64::new(0));
    let outcome = runner.run(&steps(), |steps| {
        let counts = differential_within(&h, &steps, Duration::from_secs(300))?;
        given.fetch_add(counts.given, Ordering::Relaxed);
        on_header.fetch_add(counts.given_on_header, Ordering::Relaxed);
        Ok(())
    });
    let (given, on_header) = (given.into_inner(), on_header.into_inner());
    if let Err(failure) = outcome {
        panic!("{failure}");
    }
    // The generated sequences repeat requests often enough for kept decisions to be given,
    // with evidence in the header too. Kept decisions on the header come from the few sequences
    // whose requests carry evidence to a route that reads it, so their number varies widely from
    // run to run (about 200 on average, with a standard deviation near 45): the floor is a fifth
    // of the average, far enough below it never to fail by chance.
    assert!(given > 100, "only {given} kept decisions were given");
    assert!(
        on_header > 40,
        "only {on_header} kept decisions on the header's evidence"
    );
}

fn get(target: &str, token: &str) -> Step {
    Step::Request(Generated {
        method: "GET",
        target: target.into(),
        headers: vec![
            ("host", "gw.example".into()),
            ("authorization", format!("Bearer {token}")),
        ],
        has_body: false,
        kept_first: false,
    })
}

#[test]
fn a_request_seen_before_is_given_its_decision_until_what_it_rests_on_changes() {
    let grant = get("/api/containers/C1", "good");
    let mine = get("/api/mine", "good");
    // Grants and token-only calls given again; a withdrawn policy still granted while the
    // decision cache keeps its Permit (as the whole sequence grants it), then after the purge
    // the registry's Deny (refusals are never kept); after the token's revocation a 401.
    let steps = [
        grant.clone(),
        grant.clone(),
        grant.clone(),
        mine.clone(),
        mine.clone(),
        mine.clone(),
        Step::Withdraw,
        grant.clone(),
        Step::Purge(false),
        grant.clone(),
        grant,
        Step::Revoke,
        mine.clone(),
        mine,
    ];
    assert_eq!(differential(&Harness::new(), &steps).unwrap(), (5, 6));
}

#[test]
fn a_grant_is_not_given_once_the_decision_cache_let_it_expire() {
    let grant = get("/api/containers/C1", "good");
    let steps = [
        grant.clone(),
        grant.clone(),
        Step::Withdraw,
        Step::Wait(Duration::from_millis(1500)),
        grant.clone(),
        grant,
    ];
    let ttl = Duration::from_secs(1);
    assert_eq!(
        differential_within(&Harness::new(), &steps, ttl).unwrap(),
        Counts {
            given: 1,
            not_found: 3,
            given_on_header: 0
        }
    );
}

#[test]
fn a_decision_on_a_real_token_is_given_until_the_token_expires() {
    let h = Harness::new();
    let tokens = &h.snap.tokens;
    let issued = Timestamp::from_secs(NOW);
    let consumer = crate::scheme::party::PartyId::parse(CONSUMER).expect("an id");
    let token = tokens.issue(&consumer, &[], issued);
    let sessions = crate::gateway::people::sessions::SessionStore::new(None);
    let live = crate::gateway::decision::authenticate::Live {
        tokens,
        login: None,
        sessions: &sessions,
    };
    let Step::Request(mine) = get("/api/mine", &token) else {
        unreachable!("a request")
    };
    let registry = Withdrawable::new(Fakes::default(), &h, Duration::from_secs(300));
    let metrics = crate::telemetry::Metrics::new();
    let kept = AsItCame::new(
        1 << 20,
        LONGEST,
        h.snap.routes.routes(),
        false,
        registry.decisions.entries(),
        &metrics,
    );
    let count = |result| metrics.cache.with_label_values(&["request", result]).get();
    let leeway = h.snap.config.tokens.leeway.as_secs() as i64;
    let last = tokens.lifetime_secs() as i64 + leeway;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let at = |secs: i64| Timestamp::from_secs(NOW + secs);
        let ask = |secs, kept| run_at(&h, &mine, (&live, &registry), kept, at(secs));
        // Kept, and given while the token is valid: its leeway included.
        for secs in [0, 1, last] {
            let (whole, given) = (ask(secs, None).await, ask(secs, Some(&kept)).await);
            assert_eq!(said(&given), said(&whole), "{secs}");
            assert_eq!(given.decision.reason, "authenticated", "{secs}");
        }
        assert_eq!((count("hit"), count("miss")), (2, 1));
        // Before it was issued (less the leeway), the kept decision no longer stands: the
        // request is decided whole (401), and the decision dropped.
        let (whole, given) = (
            ask(-leeway - 1, None).await,
            ask(-leeway - 1, Some(&kept)).await,
        );
        assert_eq!(said(&given), said(&whole));
        assert_eq!(given.decision.reason, "invalid_token", "{}", said(&given));
        assert_eq!((count("hit"), count("miss")), (2, 2));
        // Kept again; past its expiry, the same.
        for secs in [0, 1] {
            assert_eq!(
                ask(secs, Some(&kept)).await.decision.reason,
                "authenticated"
            );
        }
        assert_eq!((count("hit"), count("miss")), (3, 3));
        let (whole, given) = (ask(last + 1, None).await, ask(last + 1, Some(&kept)).await);
        assert_eq!(said(&given), said(&whole));
        assert_eq!(given.decision.reason, "token_expired", "{}", said(&given));
        let again = ask(last + 1, Some(&kept)).await;
        assert_eq!(again.decision.reason, "token_expired");
        assert_eq!((count("hit"), count("miss")), (3, 5));
    });
}

/// Requests through a cache of `bytes` keeping each decision for `longest`, each compared with
/// the whole sequence's decision; the cache, and its hits, misses and evictions.
fn through(
    bytes: u64,
    longest: Duration,
    requests: &[Option<Generated>],
) -> (AsItCame, (u64, u64, u64)) {
    let h = Harness::new();
    let tokens = Tokens(Mutex::new(BTreeMap::from([(
        "good".to_string(),
        CONSUMER.to_string(),
    )])));
    let registry = Withdrawable::new(Fakes::default(), &h, Duration::from_secs(300));
    let metrics = crate::telemetry::Metrics::new();
    let routes = h.snap.routes.routes();
    let entries = registry.decisions.entries();
    let kept = AsItCame::new(bytes, longest, routes, false, entries, &metrics);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        for r in requests {
            let Some(r) = r else {
                tokio::time::sleep(longest + Duration::from_millis(100)).await;
                continue;
            };
            let given = run(&h, r, &tokens, &registry, Some(&kept)).await;
            let whole = run(&h, r, &tokens, &registry, None).await;
            assert_eq!(said(&given), said(&whole), "{r:?}");
            assert_eq!(given.decision.reason, "authenticated", "{}", said(&given));
        }
    });
    let count = |result| metrics.cache.with_label_values(&["request", result]).get();
    let evicted = metrics
        .cache_evictions
        .with_label_values(&["request"])
        .get();
    (kept, (count("hit"), count("miss"), evicted))
}

fn mine(n: usize) -> Option<Generated> {
    match get(&format!("/api/mine?n={n}"), "good") {
        Step::Request(r) => Some(r),
        _ => unreachable!("a request"),
    }
}

#[test]
fn a_decision_is_kept_no_longer_than_the_longest_it_may_be() {
    // Given once; past the longest, looked up and not given, kept again and given again.
    let requests = [mine(0), mine(0), None, mine(0), mine(0)];
    let longest = Duration::from_millis(300);
    let (kept, counts) = through(1 << 20, longest, &requests);
    assert_eq!(counts, (2, 2, 0));
    // One is kept, within its longest; past it, it is swept away though never asked for.
    assert_eq!(kept.sweep(), 0);
    std::thread::sleep(longest + Duration::from_millis(100));
    assert_eq!(kept.sweep(), 1);
    assert_eq!(kept.sweep(), 0);
}

#[test]
fn kept_decisions_take_no_more_room_than_they_are_given() {
    // 200 heads, twice, in 64 KiB, where an entry weighs at least 2 KiB and four times its key
    // (more than 60 bytes here): no more than 28 can be kept at once, so no more are given again.
    let requests: Vec<_> = (0..200).chain(0..200).map(mine).collect();
    let (_, (hits, misses, evicted)) = through(64 << 10, LONGEST, &requests);
    assert!((1..=28).contains(&hits), "{hits} given");
    assert_eq!(misses, 400 - hits);
    assert!(evicted >= 200 - 28, "only {evicted} evicted");
}

#[test]
fn what_is_never_kept_is_decided_whole_every_time() {
    let with = |target: &str, extra: (&'static str, &str), has_body: bool| {
        let mut headers = vec![
            ("host", "gw.example".to_string()),
            ("authorization", "Bearer good".to_string()),
        ];
        headers.push((extra.0, extra.1.to_string()));
        Step::Request(Generated {
            method: "GET",
            target: target.into(),
            headers,
            has_body,
            kept_first: true,
        })
    };
    let never = [
        // A broker's call, a body, a refusal, a shadow denial.
        with(
            "/api/containers/C1",
            (
                "service_consumer_assertion",
                "assertion-of-EU.EORI.NL000000001",
            ),
            false,
        ),
        with("/api/containers/C1", ("x-any", "1"), true),
        with("/api/containers/C2", ("x-any", "1"), false),
        with("/shadow/containers/C2", ("x-any", "1"), false),
    ];
    let steps: Vec<Step> = never.iter().flat_map(|s| [s.clone(), s.clone()]).collect();
    // Heads with a broker's assertion, and bodies, are not even looked up.
    assert_eq!(differential(&Harness::new(), &steps).unwrap(), (0, 4));
    let unseen = with(
        "/api/containers/C1",
        (
            "serviceConsumerAssertion",
            "assertion-of-EU.EORI.NL000000001",
        ),
        false,
    );
    let steps = [unseen.clone(), unseen];
    assert_eq!(differential(&Harness::new(), &steps).unwrap(), (0, 0));
    // The room a key has for evidence is for decisions on it: a head longer than 4 KiB by
    // evidence its route does not read is looked up, and never kept.
    let padded = with(
        "/api/mine",
        ("delegation_evidence", &"x".repeat(5000)),
        false,
    );
    let steps = [padded.clone(), padded];
    assert_eq!(differential(&Harness::new(), &steps).unwrap(), (0, 2));
}

#[test]
fn a_chain_from_the_header_is_judged_again_at_every_hit() {
    let with = |name: &'static str| {
        Step::Request(Generated {
            method: "GET",
            target: "/api/containers/C1".into(),
            headers: vec![
                ("host", "gw.example".into()),
                ("authorization", "Bearer good".into()),
                (name, "tok-c1".into()),
            ],
            has_body: false,
            kept_first: false,
        })
    };
    let (ev, camel) = (with("delegation_evidence"), with("delegationEvidence"));
    // Given again while its chain yields the same evaluation (in either name), not once it is
    // evaluated anew (then kept again), nor once its signer no longer stands or its evidence
    // is no longer in force (then refused).
    let steps = [
        ev.clone(),
        ev.clone(),
        camel.clone(),
        camel,
        Step::Reevaluate,
        ev.clone(),
        ev.clone(),
        Step::Distrust,
        ev.clone(),
        ev.clone(),
    ];
    assert_eq!(differential(&Harness::new(), &steps).unwrap(), (3, 5));
    let steps = [ev.clone(), ev.clone(), Step::Expire, ev.clone(), ev];
    assert_eq!(differential(&Harness::new(), &steps).unwrap(), (1, 3));
}

#[test]
fn a_head_is_given_a_decision_only_on_the_very_evidence_it_was_made_on() {
    let on = |value: &str| {
        let mut r = Generated {
            method: "GET",
            target: "/api/containers/C1".into(),
            headers: vec![
                ("host", "gw.example".into()),
                ("authorization", "Bearer good".into()),
            ],
            has_body: false,
            kept_first: false,
        };
        with_evidence(&mut r, value);
        Step::Request(r)
    };
    let (granted, refused, spaced) = (on("tok-c1"), on("tok-unknown"), on("tok-c1 "));
    // A head that differs from a kept one in its evidence alone is decided whole; refused, it
    // leaves the kept one as it was.
    let steps = [
        granted.clone(),
        granted.clone(),
        refused.clone(),
        refused,
        granted.clone(),
    ];
    assert_eq!(differential(&Harness::new(), &steps).unwrap(), (2, 3));
    // Granted, its decision takes the kept one's place, though the evidence stage reads the same
    // chain in both: the evidence is compared as it came, byte for byte.
    let steps = [
        granted.clone(),
        granted.clone(),
        spaced.clone(),
        spaced,
        granted.clone(),
        granted,
    ];
    assert_eq!(differential(&Harness::new(), &steps).unwrap(), (3, 3));
    // Another chain that grants as much is decided whole the first time too.
    let (c1, c1b) = (on("tok-c1"), on("tok-c1b"));
    let steps = [c1.clone(), c1b.clone(), c1b, c1];
    assert_eq!(differential(&Harness::new(), &steps).unwrap(), (1, 3));
}
