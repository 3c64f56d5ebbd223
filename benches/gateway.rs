//! The gateway's own work per request, in this process, against the testbed (started here on
//! loopback): route matching, access-token validation, a delegated request decided from the
//! decision cache, one decided from header evidence already verified once, the whole decision of a
//! request on the cached route (and the allocations it makes, counted), and token issuance.
//! Network and HTTP are left out: the load benchmark (`benches/load.sh`) measures those.

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion};
use ishare_gateway::config::model::{Auth, Config, DecisionLogSettings, DecisionLogTarget};
use ishare_gateway::gateway::decision::authenticate::Live;
use ishare_gateway::gateway::decision::authorise;
use ishare_gateway::gateway::decision::decide::{decide, Asked, Decided, Next};
use ishare_gateway::gateway::decision::incoming::{Held, HeldBody};
use ishare_gateway::gateway::decision::log_line::line_into;
use ishare_gateway::gateway::decision::mask::RequestFacts;
use ishare_gateway::gateway::decision::route::Lookup;
use ishare_gateway::gateway::decision::{logged, logged_method, Decision};
use ishare_gateway::gateway::fleet::replay::ReplayStore;
use ishare_gateway::gateway::proxy::token_endpoint;
use ishare_gateway::gateway::snapshot::{Shared, Snapshot};
use ishare_gateway::peers::PeerClient;
use ishare_gateway::request::query::Query;
use ishare_gateway::request::template::RequestValues;
use ishare_gateway::request::Ambiguities;
use ishare_gateway::scheme::mask::AccessRequest;
use ishare_gateway::scheme::party::PartyId;
use ishare_gateway::scheme::version::SchemeVersion;
use ishare_gateway::scheme::Timestamp;
use ishare_gateway::testbed::config::TestbedConfig;
use ishare_gateway::testbed::keys::{self, TestbedKeys};
use ishare_gateway::testbed::Testbed;
use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::runtime::Runtime;

/// The gateway's allocator, counting the allocations made.
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { mimalloc::MiMalloc.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { mimalloc::MiMalloc.realloc(ptr, layout, size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const CONSUMER: &str = "EU.EORI.NL000000001";
const SP: &str = "EU.EORI.NL000000003";
const AR: &str = "EU.EORI.NL000000004";
const OWNER: &str = "EU.EORI.NL000000005";

/// The testbed and a gateway snapshot configured against it.
struct Bench {
    rt: Runtime,
    testbed: Testbed,
    keys: TestbedKeys,
    snap: Snapshot,
    dir: tempfile::TempDir,
}

/// `n` routes of an API, the delegated ones last.
fn rules(n: usize) -> String {
    let mut text = String::new();
    for i in 0..n {
        text.push_str(&format!(
            "[[route]]\nname = \"r{i}\"\npath = \"/api/v1/things{i}/{{id}}/parts/{{*rest}}\"\nupstream = \"backend\"\nauth = \"token\"\n\n"
        ));
    }
    text.push_str(&format!(
        r#"[[route]]
name = "containers"
methods = ["GET"]
path = "/api/containers/{{id}}"
upstream = "backend"
[route.delegation]
policy_issuer = "{OWNER}"
resource_type = "CONTAINER"
identifiers = ["{{path.id}}"]
registry = "ar"
evidence = ["header", "registry"]
"#
    ));
    text
}

fn gateway_config(dir: &Path, keys: &TestbedKeys, testbed: &Testbed, routes: usize) -> Config {
    let data = keys.data_dir.display();
    std::fs::create_dir_all(dir.join("policies")).unwrap();
    std::fs::write(dir.join("policies/api.toml"), rules(routes)).unwrap();
    let text = format!(
        r#"
[identity]
party_id = "{SP}"
key = "{data}/parties/{SP}.key.pem"
certificate_chain = "{data}/parties/{SP}.chain.pem"
[[listener]]
address = "127.0.0.1:1"
[scheme_owner]
url = "{so}"
party_id = "EU.EORI.NL000000000"
root_certificate = "{data}/ca.pem"
[outbound]
ca_file = "{data}/ca.pem"
[[registry]]
name = "ar"
party_id = "{AR}"
url = "{ar}"
[[upstream]]
name = "backend"
addresses = ["127.0.0.1:9"]
[rules]
directory = "policies"
"#,
        so = testbed.url("EU.EORI.NL000000000").unwrap(),
        ar = testbed.url(AR).unwrap(),
    );
    ishare_gateway::config::load_text(&dir.join("gateway.toml"), &text).unwrap()
}

fn shared() -> Shared {
    Shared::new(BTreeMap::new())
}

/// A replay store of its own, so that the assertions the bench cycles through are each new to it.
fn replay(config: &Config) -> ReplayStore {
    ReplayStore::new(config.replay.capacity, None)
}

impl Bench {
    fn start(routes: usize) -> Bench {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut config = TestbedConfig::load(&root.join("conf/testbed.toml")).unwrap();
        config.data_dir = dir.path().join("testbed");
        for p in &mut config.parties {
            p.port = 0;
        }
        config.echo.port = 0;
        let parties: Vec<(String, String)> = config
            .parties
            .iter()
            .map(|p| (p.id.clone(), p.name.clone()))
            .collect();
        let keys = keys::load_or_generate(&config.data_dir, &parties, &["127.0.0.1"]).unwrap();
        let testbed = rt.block_on(Testbed::start(&config)).unwrap();
        let gateway = gateway_config(&dir.path().join("gateway"), &keys, &testbed, routes);
        let snap = Snapshot::build(gateway.clone(), None, &shared()).unwrap();
        rt.block_on(snap.trust.refresh()).unwrap();
        Bench {
            rt,
            testbed,
            keys,
            snap,
            dir,
        }
    }

    fn identity(&self, party: &str) -> ishare_gateway::scheme::jwt::SigningIdentity {
        self.keys.parties[party].signing_identity()
    }

    /// Delegation evidence for the consumer to read container `id`, from the testbed's registry.
    fn evidence(&self, id: &str) -> String {
        let http = ishare_gateway::tls::outbound_client(
            &ishare_gateway::tls::OutboundTrust {
                ca_pem: Some(std::fs::read(&self.keys.ca_file).unwrap()),
                system_roots: false,
            },
            Duration::from_secs(10),
        )
        .unwrap();
        let peer = PeerClient::new(http, self.identity(CONSUMER), "iSHARE");
        let ar = self.testbed.url(AR).unwrap();
        let request = AccessRequest {
            policy_issuer: OWNER.into(),
            access_subject: CONSUMER.into(),
            service_providers: vec![SP.into()],
            resource_type: "CONTAINER".into(),
            identifiers: vec![id.into()],
            attributes: vec!["*".into()],
            actions: vec!["iSHARE.READ".into()],
            ..AccessRequest::default()
        };
        self.rt
            .block_on(peer.ask_evidence(ar, AR, &request, SchemeVersion::V1_9))
            .unwrap()
            .expect("the testbed's registry holds the policy")
    }

    /// Authorize `GET /api/containers/{id}` for the consumer with these headers.
    fn authorize(&self, id: &str, headers: &http::HeaderMap) -> bool {
        let route = match self
            .snap
            .routes
            .lookup(&http::Method::GET, "/api/containers/x")
        {
            Lookup::Found(route, _) => route,
            _ => unreachable!("the route is configured"),
        };
        let Auth::Delegation(rule) = &route.auth else {
            unreachable!("a delegated route")
        };
        let captures = BTreeMap::from([("id".to_string(), id.to_string())]);
        let query = Query::parse(None).unwrap();
        let facts = RequestFacts {
            method: &http::Method::GET,
            values: RequestValues {
                captures: &captures,
                query: &query,
                headers,
                body: None,
            },
            accepted: Ambiguities::default(),
            caller: CONSUMER,
            person: false,
        };
        let evidence = self.snap.authz.with(&self.snap.trust);
        let mut decision = Decision::new();
        decision.route = route.name.clone();
        let config = &self.snap.config;
        self.rt
            .block_on(authorise::delegation(
                config,
                rule,
                &facts,
                &evidence,
                &mut decision,
                Timestamp::now(),
            ))
            .is_ok()
    }

    /// Decide `GET /api/containers/{id}` as the proxy does, with a bearer token: Host, route,
    /// token, delegation. Whether it goes to the backend.
    fn decide(&self, request: &pingora::http::RequestHeader) -> bool {
        matches!(self.decided(request).next, Next::Forward(_))
    }

    fn decided(&self, request: &pingora::http::RequestHeader) -> Decided {
        let mut held = Held {
            header: request,
            has_body: false,
            body: HeldBody::Unseen,
            described: false,
        };
        let callers = Live {
            tokens: &self.snap.tokens,
            login: None,
            sessions: &self.snap.stores.sessions,
        };
        let evidence = self.snap.authz.with(&self.snap.trust);
        let now = Timestamp::now();
        self.rt.block_on(decide(
            &self.snap.policy(),
            Asked::Request(&mut held),
            &callers,
            &evidence,
            now,
        ))
    }

    fn stop(self) {
        self.rt.block_on(self.testbed.stop());
        drop(self.dir);
    }
}

fn route_matching(c: &mut Criterion) {
    let mut group = c.benchmark_group("route_matching");
    for n in [10usize, 100, 1000] {
        let bench = Bench::start(n);
        let last = format!("/api/v1/things{}/42/parts/a/b", n - 1);
        assert!(matches!(
            bench.snap.routes.lookup(&http::Method::GET, &last),
            Lookup::Found(..)
        ));
        group.bench_with_input(BenchmarkId::new("last of routes", n), &n, |b, _| {
            b.iter(|| {
                bench
                    .snap
                    .routes
                    .lookup(black_box(&http::Method::GET), black_box(&last))
            })
        });
        bench.stop();
    }
    group.finish();
}

fn per_request(c: &mut Criterion) {
    let bench = Bench::start(10);
    let consumer = PartyId::parse(CONSUMER).unwrap();
    let token = bench
        .snap
        .tokens
        .issue(&consumer, &["iSHARE".into()], Timestamp::now());
    let mut group = c.benchmark_group("per_request");
    group.bench_function("access token validation", |b| {
        b.iter(|| {
            bench
                .snap
                .tokens
                .validate(black_box(&token), Timestamp::now())
                .unwrap()
        })
    });

    let none = http::HeaderMap::new();
    assert!(bench.authorize("C1", &none), "the registry permits C1");
    group.bench_function("delegated: decision cache hit", |b| {
        b.iter(|| assert!(bench.authorize(black_box("C1"), &none)))
    });

    // Evidence tokens live 30 s: fetched right before they are used, verified once.
    let mut with_evidence = http::HeaderMap::new();
    with_evidence.insert("delegation_evidence", bench.evidence("C2").parse().unwrap());
    assert!(
        bench.authorize("C2", &with_evidence),
        "the evidence permits C2"
    );
    group.bench_function("delegated: header evidence verified before", |b| {
        b.iter(|| assert!(bench.authorize(black_box("C2"), &with_evidence)))
    });
    let mut request =
        pingora::http::RequestHeader::build("GET", b"/api/containers/C1", None).unwrap();
    request.insert_header("host", "localhost").unwrap();
    request
        .insert_header("authorization", format!("Bearer {token}"))
        .unwrap();
    assert!(bench.decide(&request), "the cached route permits C1");
    group.bench_function("whole decision: bearer token, cached decision", |b| {
        b.iter(|| assert!(bench.decide(black_box(&request))))
    });
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    let rounds = 1000;
    for _ in 0..rounds {
        assert!(bench.decide(&request));
    }
    let made = ALLOCATIONS.load(Ordering::Relaxed) - before;
    println!(
        "per_request/whole decision: {:.1} allocations a request (of {rounds})",
        made as f64 / rounds as f64
    );
    // What every request pays before any check: its decision's id and clock, and the method
    // and path as logs name them.
    group.bench_function("a request's decision value and logged path", |b| {
        b.iter(|| {
            let mut d = Decision::new();
            d.method = logged_method(black_box(&http::Method::GET));
            d.path = logged(black_box("/api/containers/C1/documents")).into();
            d
        })
    });
    // The decision log's line of the cached route's decision, made in a buffer kept between
    // lines as the request threads keep theirs.
    let decision = bench.decided(&request).decision;
    let settings = DecisionLogSettings {
        target: DecisionLogTarget::Stdout,
        mask: Vec::new(),
        max_line_bytes: 16 * 1024,
        queue: 1,
    };
    let mut line = Vec::new();
    group.bench_function("decision log line", |b| {
        b.iter(|| {
            line.clear();
            line_into(
                &mut line,
                black_box(&decision),
                200,
                Duration::ZERO,
                &settings,
            );
            line.len()
        })
    });
    group.finish();
    bench.stop();
}

fn token_issuance(c: &mut Criterion) {
    let bench = Bench::start(10);
    let config = bench.snap.config.clone();
    let identity = bench.identity(CONSUMER);
    // Assertions live 30 s and count once: a pool signed right before the measurement, each used
    // once per fresh replay store.
    let forms: Vec<Vec<u8>> = (0..256)
        .map(|_| {
            let assertion = identity.client_assertion(SP, Timestamp::now()).unwrap();
            url::form_urlencoded::Serializer::new(String::new())
                .append_pair("grant_type", "client_credentials")
                .append_pair("scope", "iSHARE")
                .append_pair("client_id", CONSUMER)
                .append_pair(
                    "client_assertion_type",
                    "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
                )
                .append_pair("client_assertion", &assertion)
                .finish()
                .into_bytes()
        })
        .collect();
    let mut next = forms.iter().cycle();
    let mut group = c.benchmark_group("token_endpoint");
    group.sample_size(30);
    group.bench_function(
        "issue: assertion checked (chain and party cached), token out",
        |b| {
            b.iter_batched(
                || (replay(&config), next.next().unwrap()),
                |(replay, form)| {
                    let issued = bench.rt.block_on(token_endpoint::issue(
                        Some("application/x-www-form-urlencoded"),
                        form,
                        &bench.snap,
                        &replay,
                    ));
                    assert!(issued.is_ok(), "{:?}", issued.err());
                    replay
                },
                BatchSize::SmallInput,
            )
        },
    );
    group.finish();
    bench.stop();
}

criterion_group!(benches, per_request, token_issuance, route_matching);
criterion_main!(benches);
