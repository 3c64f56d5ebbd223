//! Every answer and every request, held to the official OpenAPI document of its version
//! (tests/fixtures/ishare-openapi, kept as published): each answer the 3.0 testbed's participants
//! give to a service's caller (capabilities, token, the participant registry's lists and records,
//! the registries' evidence), the gateway's own answers speaking 2.0, 2.1, 2.2 and 3.0, and every
//! request the gateway writes to a registry of each of those versions. The documents' own
//! defects are read around by name (`DEFECTS`), and each is shown to be one: the document as
//! published refuses what conforms. A corrected document fails this test, and its defect leaves
//! the list.
//!
//! 1.9 has no such document (its specification was a web page); the person's sign-in at an
//! identity provider is held to its flow by `tests/login.rs` and `tests/sign_in_attacks.rs`.

use crate::support;

use ishare_gateway::scheme::mask::DelegationBody;
use ishare_gateway::scheme::version::SchemeVersion;
use serde_json::{json, Map, Value};
use std::sync::{Arc, Mutex};
use support::process::GatewayProcess;
use support::served::Served;
use support::*;

const BIN: &str = "official_schemas";

/// The versions the product claims that have an official document.
const VERSIONS: [&str; 4] = ["2.0", "2.1", "2.2", "3.0"];

const REQUEST_BODY_ROOT: &str = "delegation request body: inner members required at the top";
const DATASPACES_TWO_INFOS: &str = "3.0 data spaces token: two infos required";
const OPEN_2_X: &str = "2.x objects open";

/// The official documents' defects this test reads around: what is wrong, and what is held
/// instead.
const DEFECTS: [(&str, &str); 3] = [
    (
        REQUEST_BODY_ROOT,
        "`DelegationRequestBody` (2.x) and `delegationRequestBody` (3.0) list the members of the \
         inner `delegationRequest` as required at the top: a body is held at \
         `…/properties/delegationRequest`, and its top level to hold `delegationRequest` alone",
    ),
    (
        DATASPACES_TWO_INFOS,
        "3.0's `jwtPayloadDataspacesToken` requires both `dataspacesInfo` and, in its second \
         part, `dataspaceInfo`: the payload is held to the skeleton and its `dataspacesInfo` to \
         `dataspacesInfo`",
    ),
    (
        OPEN_2_X,
        "the 2.x documents do not close their objects, so a member written in the wrong place \
         passes them: what the gateway writes to a 2.x peer is held closed (a member a schema \
         does not list is an error)",
    ),
];

/// Where a defect is read around: its entry in `DEFECTS`.
fn around(defect: &str) -> &'static str {
    DEFECTS
        .iter()
        .find(|(name, _)| *name == defect)
        .map(|(name, _)| *name)
        .unwrap_or_else(|| panic!("{defect} is not a listed defect"))
}

fn spec(version: &str) -> String {
    match version {
        "3.0" => "ishare_openapi_spec.yaml".into(),
        v => format!("v{v}/ishare_openapi_spec.yaml"),
    }
}

/// The schema of a path's 200 answer in a document, as a JSON pointer.
fn answer_at(path: &str, method: &str) -> String {
    let path = path.replace('~', "~0").replace('/', "~1");
    format!("/paths/{path}/{method}/responses/200/content/application~1json/schema")
}

/// The schema of a signed answer's payload: 3.0's `jwtPayload…Token`, 2.x's
/// `jwt_payload_…_token`.
fn payload_at(version: &str, name: &str) -> String {
    match version {
        "3.0" => format!("/components/schemas/jwtPayload{name}Token"),
        _ => {
            let mut snake = String::new();
            for c in name.chars() {
                if c.is_ascii_uppercase() && !snake.is_empty() {
                    snake.push('_');
                }
                snake.push(c.to_ascii_lowercase());
            }
            format!("/components/schemas/jwt_payload_{snake}_token")
        }
    }
}

/// What is held to one document: each `(what, pointer, document)`, open or closed.
#[derive(Default)]
struct Held {
    open: Vec<(String, String, Value)>,
    closed: Vec<(String, String, Value)>,
}

impl Held {
    fn add(&mut self, what: String, pointer: String, document: Value) {
        self.open.push((what, pointer, document));
    }

    /// An answer carrying a signed token in `member`: the answer at its path's schema, the
    /// token's payload at `payload`.
    fn signed(
        &mut self,
        what: &str,
        (path, method): (&str, &str),
        body: &Value,
        member: &str,
        payload: String,
    ) {
        self.add(
            format!("{what}: the answer"),
            answer_at(path, method),
            body.clone(),
        );
        let token = body[member]
            .as_str()
            .unwrap_or_else(|| panic!("{what}: no {member} in {body}"));
        self.add(format!("{what}: {member}"), payload, claims(token));
    }
}

/// Each version's document with what is held to it.
#[derive(Default)]
struct Everything(std::collections::BTreeMap<&'static str, Held>);

impl Everything {
    fn of(&mut self, version: &'static str) -> &mut Held {
        self.0.entry(version).or_default()
    }

    /// Every complaint of every document, empty when all hold.
    fn complaints(&self) -> String {
        let mut said = String::new();
        for (version, held) in &self.0 {
            for (items, closed) in [(&held.open, false), (&held.closed, true)] {
                if !items.is_empty() {
                    said += &schema_errors_each(&spec(version), items, closed);
                }
            }
        }
        said
    }
}

async fn get_json(bed: &Bed, url: &str, token: Option<&str>) -> Value {
    let mut request = bed.http.get(url);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let (status, body) = status_json(request.send().await.unwrap()).await;
    assert_eq!(status, 200, "{url}: {body}");
    body
}

/// A token request of the 3.0 consumer at `base` addressed to `audience`: its answer.
async fn token_answer(bed: &Bed, base: &str, audience: &str) -> Value {
    let form = token_form(&bed.identity(CONSUMER3), audience, None);
    let (status, body) = status_json(request_token(&bed.http, base, form).await).await;
    assert_eq!(status, 200, "token at {base}: {body}");
    body
}

/// Every 3.0 testbed participant's answers to a caller: capabilities (anonymous and with a
/// token), its token; the participant registry's lists and records; the registries' evidence.
async fn testbed_answers(bed: &Bed, all: &mut Everything) {
    let held = all.of("3.0");
    for party in [SO3, STELLAR3, SP3, AR3, OWNER3, IDP3, PETCARE_AR3] {
        let base = bed.url(party);
        let capabilities = ("/capabilities", "get");
        let payload = payload_at("3.0", "Capabilities");
        let anonymous = get_json(bed, &format!("{base}/capabilities"), None).await;
        held.signed(
            &format!("{party} /capabilities"),
            capabilities,
            &anonymous,
            "capabilitiesToken",
            payload.clone(),
        );
        let answer = token_answer(bed, &base, party).await;
        held.add(
            format!("{party} /connect/token"),
            answer_at("/connect/token", "post"),
            answer.clone(),
        );
        let token = answer["access_token"].as_str().unwrap();
        let restricted = get_json(bed, &format!("{base}/capabilities"), Some(token)).await;
        held.signed(
            &format!("{party} /capabilities with a token"),
            capabilities,
            &restricted,
            "capabilitiesToken",
            payload,
        );
    }
    let so = bed.url(SO3);
    let token = bed.token(SO3, CONSUMER3).await;
    let lists = [
        (
            "/parties?name=*&pageSize=100",
            "/parties",
            "partiesToken",
            "Parties",
        ),
        (
            &format!("/parties/{CONSUMER3}") as &str,
            "/parties/{partyId}",
            "partyToken",
            "Party",
        ),
        (
            &format!("/parties/{CONSUMER3}/claims"),
            "/parties/{partyId}/claims",
            "claimsToken",
            "Claims",
        ),
        (
            "/frameworks",
            "/frameworks",
            "frameworksToken",
            "Frameworks",
        ),
        (
            "/trustedList",
            "/trustedList",
            "trustedListToken",
            "TrustedList",
        ),
    ];
    for (url, path, member, payload) in lists {
        let body = get_json(bed, &format!("{so}{url}"), Some(&token)).await;
        held.signed(
            &format!("GET {url}"),
            (path, "get"),
            &body,
            member,
            payload_at("3.0", payload),
        );
    }
    // The data spaces: the answer at its schema; its token's payload around the defect.
    let body = get_json(bed, &format!("{so}/dataspaces"), Some(&token)).await;
    held.add(
        "GET /dataspaces: the answer".into(),
        answer_at("/dataspaces", "get"),
        body.clone(),
    );
    let payload = claims(body["dataspacesToken"].as_str().unwrap());
    around(DATASPACES_TWO_INFOS);
    held.add(
        "GET /dataspaces: dataspacesToken".into(),
        "/components/schemas/jwtPayloadSkeleton".into(),
        payload.clone(),
    );
    held.add(
        "GET /dataspaces: dataspacesInfo".into(),
        "/components/schemas/dataspacesInfo".into(),
        payload["dataspacesInfo"].clone(),
    );
    // Evidence: the registry's and the entitled party's own.
    let request = container_read_3(CONSUMER3, "C1");
    let body = DelegationBody::new(request.to_mask(SchemeVersion::V3_0), SchemeVersion::V3_0);
    for registry in [AR3, OWNER3] {
        let token = bed.token(registry, CONSUMER3).await;
        let url = format!("{}/delegation", bed.url(registry));
        let resp = bed
            .http
            .post(&url)
            .bearer_auth(&token)
            .json(&body)
            .send()
            .await
            .unwrap();
        let (status, answer) = status_json(resp).await;
        assert_eq!(status, 200, "{url}: {answer}");
        let payload = payload_at("3.0", "DelegationEvidence");
        held.signed(
            &format!("{registry} /delegation"),
            ("/delegation", "post"),
            &answer,
            "delegationToken",
            payload,
        );
    }
}

/// A registry of each version, answering tokens and "no policy", that records what it is sent.
struct Recorder {
    served: Served,
    forms: Arc<Mutex<Vec<Map<String, Value>>>>,
    bodies: Arc<Mutex<Vec<Value>>>,
}

async fn recorder() -> Recorder {
    use axum::routing::post;
    let forms = Arc::new(Mutex::new(Vec::new()));
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let (f, b) = (forms.clone(), bodies.clone());
    let token = move |axum::Form(form): axum::Form<Vec<(String, String)>>| {
        let form = form
            .into_iter()
            .map(|(k, v)| (k, Value::String(v)))
            .collect();
        f.lock().unwrap().push(form);
        async {
            axum::Json(json!({"access_token": "t", "token_type": "Bearer", "expires_in": 3600}))
        }
    };
    let no_policy = move |axum::Json(body): axum::Json<Value>| {
        b.lock().unwrap().push(body);
        async { (axum::http::StatusCode::NOT_FOUND, axum::Json(json!({}))) }
    };
    let router = axum::Router::new()
        .route("/connect/token", post(token))
        .route("/delegation", post(no_policy));
    Recorder {
        served: Served::start(router).await,
        forms,
        bodies,
    }
}

fn registry_name(version: &str) -> String {
    format!("v{}", version.replace('.', ""))
}

/// A route per version whose evidence the registry of that version is asked for.
fn rules() -> String {
    VERSIONS
        .iter()
        .map(|v| {
            let name = registry_name(v);
            format!(
                "[[route]]\nname = \"{name}\"\nmethods = [\"GET\"]\npath = \"/api/{name}/{{id}}\"\nupstream = \"echo\"\n[route.delegation]\npolicy_issuer = \"{OWNER3}\"\nresource_type = \"CONTAINER\"\nidentifiers = [\"{{path.id}}\"]\nregistry = \"{name}\"\n\n"
            )
        })
        .collect()
}

/// The registries of each version, all at the recorder, each a party of its own.
fn registries(url: &str) -> String {
    VERSIONS
        .iter()
        .enumerate()
        .map(|(i, v)| {
            format!(
                "[[registry]]\nname = \"{}\"\nparty_id = \"did:ishare:EU.NL.NTRNL-1000009{i}\"\nurl = \"{url}\"\nscheme_version = \"{v}\"\nprevious_steps = \"consumer_assertion\"\n\n",
                registry_name(v)
            )
        })
        .collect()
}

/// The gateway as Warehouse 13 of the 3.0 scheme, its own endpoints speaking `version`: its
/// answers; and, speaking 3.0, the requests it writes to the recorder's registry of each version.
async fn gateway(bed: &Bed, version: &'static str, recorder: &Recorder, all: &mut Everything) {
    let (dir, ports) = gateway_dir(
        bed,
        BIN,
        &rules(),
        &registries(&recorder.served.url()),
        |t| {
            let t = t.replace(SO, SO3).replace(SP, SP3).replace(
                "[scheme_owner]\n",
                "[scheme_owner]\nscheme_version = \"3.0\"\n",
            );
            format!("scheme_version = \"{version}\"\n{t}")
        },
    );
    let mut process = GatewayProcess::start(BIN, &dir.join("gateway.toml"), ports.admin);
    process.wait_ready().await;
    let base = format!("http://127.0.0.1:{}", ports.plain);
    let member = match version {
        "3.0" => "capabilitiesToken",
        _ => "capabilities_token",
    };
    let capabilities = ("/capabilities", "get");
    let held = all.of(version);
    let anonymous = get_json(bed, &format!("{base}/capabilities"), None).await;
    let what = format!("the gateway speaking {version}: /capabilities");
    held.signed(
        &what,
        capabilities,
        &anonymous,
        member,
        payload_at(version, "Capabilities"),
    );
    let answer = token_answer(bed, &base, SP3).await;
    let what = format!("the gateway speaking {version}: /connect/token");
    held.add(what, answer_at("/connect/token", "post"), answer.clone());
    let token = answer["access_token"].as_str().unwrap().to_string();
    let restricted = get_json(bed, &format!("{base}/capabilities"), Some(&token)).await;
    let what = format!("the gateway speaking {version}: /capabilities with a token");
    held.signed(
        &what,
        capabilities,
        &restricted,
        member,
        payload_at(version, "Capabilities"),
    );
    if version == "3.0" {
        for v in VERSIONS {
            let url = format!("{base}/api/{}/C1", registry_name(v));
            let (status, body) =
                status_json(bed.http.get(&url).bearer_auth(&token).send().await.unwrap()).await;
            assert_eq!(
                (status, body["reason"].as_str()),
                (403, Some("no_policy")),
                "{v}: {body}"
            );
        }
    }
    let (exit, log) = process.terminate().await;
    assert!(exit.success(), "{log}");
}

/// What the gateway wrote to the registry of each version, in the order asked: a token request
/// (its form, and for 3.0 its client assertion's payload) and a delegation request.
fn written(recorder: &Recorder, all: &mut Everything) {
    let forms = recorder.forms.lock().unwrap().clone();
    let bodies = recorder.bodies.lock().unwrap().clone();
    assert_eq!(
        (forms.len(), bodies.len()),
        (VERSIONS.len(), VERSIONS.len()),
        "{forms:?} {bodies:?}"
    );
    for ((version, form), body) in VERSIONS.into_iter().zip(forms).zip(bodies) {
        let form_at = "/paths/~1connect~1token/post/requestBody/content/application~1x-www-form-urlencoded/schema";
        let what = format!("the gateway to a {version} registry");
        let closed = version != "3.0";
        if closed {
            around(OPEN_2_X);
        }
        let request = body["delegationRequest"].clone();
        let members: Vec<&String> = body.as_object().unwrap().keys().collect();
        assert_eq!(members, ["delegationRequest"], "{what}: {body}");
        around(REQUEST_BODY_ROOT);
        let pointer = match version {
            "3.0" => "/components/schemas/delegationRequestBody/properties/delegationRequest",
            _ => "/components/schemas/DelegationRequestBody/properties/delegationRequest",
        };
        let assertion = claims(form["client_assertion"].as_str().unwrap());
        let held = all.of(version);
        let items = match closed {
            true => &mut held.closed,
            false => &mut held.open,
        };
        items.push((
            format!("{what}: the token request"),
            form_at.into(),
            Value::Object(form),
        ));
        items.push((
            format!("{what}: the delegation request"),
            pointer.into(),
            request,
        ));
        if version == "3.0" {
            items.push((
                format!("{what}: the client assertion"),
                "/components/schemas/jwtPayloadSkeleton".into(),
                assertion,
            ));
        }
    }
}

/// Each listed defect is one: the document as published refuses a document that conforms.
fn each_defect_is_one(all: &Everything) {
    let find = |version: &str, what: &str| {
        let held = &all.0[version];
        held.open
            .iter()
            .chain(&held.closed)
            .find(|(w, _, _)| w.ends_with(what))
            .map(|(_, _, d)| d.clone())
            .unwrap_or_else(|| panic!("{version}: {what} was held"))
    };
    // A body of the gateway's, whole, at the body's schema.
    for (version, pointer) in [
        ("3.0", "/components/schemas/delegationRequestBody"),
        ("2.2", "/components/schemas/DelegationRequestBody"),
    ] {
        let body = json!({"delegationRequest": find(version, "the delegation request")});
        let said = schema_errors_in(&spec(version), pointer, &[body], false);
        assert!(
            said.contains("is a required property"),
            "{REQUEST_BODY_ROOT}: {version}: {said}"
        );
    }
    // The data spaces token's payload, whole, at its schema.
    let payload = find("3.0", "GET /dataspaces: dataspacesToken");
    let said = schema_errors("/components/schemas/jwtPayloadDataspacesToken", &[payload]);
    assert!(
        said.contains("'dataspaceInfo' is a required property"),
        "{DATASPACES_TWO_INFOS}: {said}"
    );
    // A member the 2.x document does not define, where the gateway could misplace it, passes it.
    let mut misplaced = find("2.1", "the delegation request");
    misplaced["previousSteps"] = json!(["a misplaced 3.0 member"]);
    let pointer = "/components/schemas/DelegationRequestBody/properties/delegationRequest";
    let open = schema_errors_in(
        &spec("2.1"),
        pointer,
        std::slice::from_ref(&misplaced),
        false,
    );
    let closed = schema_errors_in(&spec("2.1"), pointer, &[misplaced], true);
    assert_eq!(open, "", "{OPEN_2_X}");
    assert!(closed.contains("previousSteps"), "{OPEN_2_X}: {closed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_and_request_holds_to_the_official_document_of_its_version() {
    let bed = Bed::start_of(testbed_config_of(BIN, "conf/testbed-3.0.toml")).await;
    let recorder = recorder().await;
    let mut all = Everything::default();
    testbed_answers(&bed, &mut all).await;
    for version in VERSIONS {
        gateway(&bed, version, &recorder, &mut all).await;
    }
    written(&recorder, &mut all);
    let counted: Vec<(&str, usize)> = all
        .0
        .iter()
        .map(|(v, held)| (*v, held.open.len() + held.closed.len()))
        .collect();
    // Per version: the gateway's three answers (two of them signed: five documents) and its two
    // requests (three to a 3.0 registry: its client assertion too); for 3.0 also the five
    // documents of each of the testbed's 7 serving parties, 5 lists of two, the data spaces'
    // three and 2 registries' evidence of two.
    assert_eq!(
        counted,
        [
            ("2.0", 7),
            ("2.1", 7),
            ("2.2", 7),
            ("3.0", 5 + 3 + 7 * 5 + 5 * 2 + 3 + 2 * 2)
        ],
        "every answer and request was held"
    );
    assert_eq!(all.complaints(), "");
    each_defect_is_one(&all);
    recorder.served.stop().await.unwrap();
    bed.stop().await;
}
