//! The decision service through the binary: nginx's `auth_request` with a real nginx in front of
//! the echo backend, Envoy's `ext_authz` in its HTTP and gRPC forms (requests shaped as Envoy sends
//! them), and AuthZEN; each decision logged and counted.

use crate::support;

use envoy_types::pb::envoy::service::auth::v3::authorization_client::AuthorizationClient;
use envoy_types::pb::envoy::service::auth::v3::{
    attribute_context, check_response, AttributeContext, CheckRequest,
};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use support::process::{eventually, ChildProcess, GatewayProcess};
use support::shipped::{rules_with_a_shadow_route, shipped_gateway, Urls};
use support::*;

const BIN: &str = "decision_api";
const SECRET: &str = "0123456789abcdef0123456789abcdef-pep-secret";
/// AuthZEN's endpoints.
const EVALUATION: &str = "/access/v1/evaluation";
const EVALUATIONS: &str = "/access/v1/evaluations";

/// nginx from Debian's nginx-light (what `make test-setup` installs): on the PATH or in /usr/sbin.
fn nginx_binary() -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .chain([PathBuf::from("/usr/sbin")])
        .map(|d| d.join("nginx"))
        .find(|p| p.is_file());
    on_path.unwrap_or_else(|| {
        panic!("nginx is missing: `make test-setup` installs it (Debian's nginx-light)")
    })
}

/// The decision service guide's nginx recipe (the ```nginx block under its heading) with the
/// values it names as the operator's replaced, each of which it writes exactly once; nothing else
/// changes.
fn recipe_with(values: &[(&str, String)]) -> String {
    let guide = page("docs/src/guides/decision-service.md");
    let mut text = page_block(&guide, "## nginx `auth_request`", "```nginx\n", "```").to_string();
    for (theirs, ours) in values {
        assert_eq!(
            text.matches(theirs).count(),
            1,
            "the recipe writes {theirs} once:\n{text}"
        );
        text = text.replace(theirs, ours);
    }
    text
}

/// What Debian's nginx.conf gives the recipe, in `dir`: a process in the foreground, its files
/// and the `http` block that includes the recipe.
fn nginx_main(dir: &Path, recipe: &Path) -> String {
    let (dir, recipe) = (dir.display(), recipe.display());
    format!(
        r#"daemon off;
master_process off;
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/nginx-error.log info;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {dir}/nginx-body;
    proxy_temp_path {dir}/nginx-proxy;
    fastcgi_temp_path {dir}/nginx-fastcgi;
    uwsgi_temp_path {dir}/nginx-uwsgi;
    scgi_temp_path {dir}/nginx-scgi;
    include {recipe};
}}
"#
    )
}

async fn listening(port: u16) -> bool {
    eventually(Duration::from_secs(10), || async move {
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
    })
    .await
}

fn header<'a>(resp: &'a reqwest::Response, name: &str) -> &'a str {
    resp.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

struct Service {
    bed: Bed,
    gateway: GatewayProcess,
    /// http://127.0.0.1:PORT of the decision service
    url: String,
    /// http://127.0.0.1:PORT of the gateway's listener without TLS
    gateway_url: String,
    grpc: u16,
    token: String,
    log: PathBuf,
    dir: PathBuf,
    http: reqwest::Client,
}

impl Service {
    /// The gateway stopped, then the testbed.
    async fn stop(self) {
        self.gateway.terminate().await;
        self.bed.stop().await;
    }
}

/// The `[decision_api]` table for the testbed's key material in `data`, on these ports.
type Table = fn(data: &Path, decisions: u16, grpc: u16) -> String;

/// A route whose evidence's conditions are decided on a value of the request and a constant.
const LOCATED_ROUTE: &str = r#"
[[route]]
name = "containers-located"
methods = ["GET"]
path = "/located/containers/{id}"
upstream = "legacy"
[route.delegation]
policy_issuer = "EU.EORI.NL000000005"
resource_type = "CONTAINER"
identifiers = ["{path.id}"]
[route.delegation.conditions]
requesterLocation = "{header.X-Region}"
tier = "gold"
"#;

/// The identifier AuthZEN's discovery document publishes.
const PDP: &str = "https://pdp.example";

/// Plain HTTP and h2c, AuthZEN callers with the bearer secret, a discovery document.
fn plain(_: &Path, decisions: u16, grpc: u16) -> String {
    format!("address = \"127.0.0.1:{decisions}\"\ngrpc_address = \"127.0.0.1:{grpc}\"\nbearer_secret_file = \"pep.secret\"\npolicy_decision_point = \"{PDP}\"\n")
}

/// TLS on both, every caller with a client certificate of the testbed's CA; no discovery document.
fn mutual_tls(data: &Path, decisions: u16, grpc: u16) -> String {
    let d = data.display();
    format!("address = \"127.0.0.1:{decisions}\"\ngrpc_address = \"127.0.0.1:{grpc}\"\ntls.certificate = \"{d}/tls/server.chain.pem\"\ntls.key = \"{d}/tls/server.key.pem\"\ntls.client_ca = \"{d}/ca.pem\"\ntls.client_auth = \"required\"\n")
}

async fn start(table: Table) -> Service {
    start_with(table, "", &[]).await
}

/// `start`, with `more` after the `[decision_api]` table's keys (more of its keys, then other
/// tables) and `rules` files (name, text) beside the shipped ones.
async fn start_with(table: Table, more: &str, rules: &[(&str, &str)]) -> Service {
    let bed = Bed::start(BIN).await;
    let ports = Ports::free();
    let (decisions, grpc) = (free_port(), free_port());
    let dir = scratch_dir(BIN);
    let log = dir.join("decisions.log");
    std::fs::write(dir.join("pep.secret"), SECRET).unwrap();
    let config = dir.join("gateway.toml");
    let extra_rules = rules;
    let rules = rules_with_a_shadow_route(&dir);
    std::fs::write(rules.join("located.toml"), LOCATED_ROUTE).unwrap();
    for (name, text) in extra_rules {
        std::fs::write(rules.join(name), text).unwrap();
    }
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let text = shipped_gateway(&bed.keys.data_dir, &Urls::of_bed(&bed), &ports)
        .replace(&shipped.display().to_string(), &rules.display().to_string())
        + &format!(
            "\n[decision_log]\npath = \"{}\"\n\n[decision_api]\n{}{more}",
            log.display(),
            table(&bed.keys.data_dir, decisions, grpc)
        );
    std::fs::write(&config, text).unwrap();
    let checked = Command::new(env!("CARGO_BIN_EXE_ishare-gateway"))
        .args(["check", "--config", config.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stderr)
    );
    let mut gateway = GatewayProcess::start(BIN, &config, ports.admin);
    gateway.wait_ready().await;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let base = format!("http://127.0.0.1:{}", ports.plain);
    let token = access_token(&http, &base, &bed.identity(CONSUMER)).await;
    Service {
        bed,
        gateway,
        url: format!("http://127.0.0.1:{decisions}"),
        gateway_url: base,
        grpc,
        token,
        log,
        dir,
        http,
    }
}

/// The licence headers of an answer.
fn licence_headers(resp: &reqwest::Response) -> Vec<(&'static str, String)> {
    ["licensepurpose", "licensesublicense", "licenseenddate"]
        .map(|name| (name, header(resp, name).to_string()))
        .into()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nginx_auth_request_lets_through_what_the_gateway_allows_and_nothing_else() {
    let s = start(plain).await;
    let nginx_port = free_port();
    let decisions = s.url.trim_start_matches("http://").to_string();
    let own = s.gateway_url.trim_start_matches("http://").to_string();
    let echo = s.bed.testbed.echo_url.trim_start_matches("http://");
    let tls = s.bed.keys.data_dir.join("tls");
    let recipe = s.dir.join("ishare-gateway.conf");
    std::fs::write(
        &recipe,
        recipe_with(&[
            ("10.0.0.5:8080", echo.to_string()),
            ("127.0.0.1:9902", decisions),
            ("127.0.0.1:8080", own),
            (
                "listen 443 ssl",
                format!("listen 127.0.0.1:{nginx_port} ssl"),
            ),
            (
                "/etc/nginx/tls/api.example.com.pem",
                tls.join("server.chain.pem").display().to_string(),
            ),
            (
                "/etc/nginx/tls/api.example.com.key",
                tls.join("server.key.pem").display().to_string(),
            ),
        ]),
    )
    .unwrap();
    let conf = s.dir.join("nginx.conf");
    std::fs::write(&conf, nginx_main(&s.dir, &recipe)).unwrap();
    let mut command = Command::new(nginx_binary());
    command.args(["-p", s.dir.to_str().unwrap(), "-c", conf.to_str().unwrap()]);
    let nginx = ChildProcess::spawn("nginx", command);
    assert!(listening(nginx_port).await, "{}", nginx.tail());
    let front = format!("https://127.0.0.1:{nginx_port}");
    let http = client_trusting(&s.bed.keys.data_dir.join("ca.pem"));

    // The gateway's own endpoints through nginx: a token at each of its paths, the capabilities.
    let form = || token_form(&s.bed.identity(CONSUMER), SP, None);
    let mut tokens = Vec::new();
    for path in ["/connect/token", "/oauth2.0/token", "/token"] {
        let resp = http
            .post(format!("{front}{path}"))
            .form(&form())
            .send()
            .await
            .unwrap();
        let (status, body) = status_json(resp).await;
        assert_eq!(
            (status, body["token_type"].as_str()),
            (200, Some("Bearer")),
            "{path}: {body}\n{}",
            nginx.tail()
        );
        tokens.push(body["access_token"].as_str().unwrap().to_string());
    }
    let token = &tokens[0];
    let resp = http
        .get(format!("{front}/capabilities"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    let (status, body) = status_json(resp).await;
    assert_eq!(status, 200, "{body}");
    let capabilities = claims(body["capabilities_token"].as_str().unwrap());
    assert_eq!(
        capabilities["capabilities_info"]["party_id"], SP,
        "{capabilities}"
    );
    let get = |path: &str| http.get(format!("{front}{path}")).bearer_auth(token);

    // Allowed by the registry's evidence: the backend gets the caller and the decision, and how
    // the request came as nginx saw it, never as the client claims; the client gets the licence
    // headers the gateway answers with itself.
    let resp = get("/api/containers/C1")
        .header("X-Consumer-Party-Id", "EU.EORI.FORGED")
        .header("X-Original-URI", "/forged")
        .header("X-Original-Method", "DELETE")
        .header("X-Forwarded-For", "203.0.113.9")
        .header("X-Forwarded-Proto", "gopher")
        .send()
        .await
        .unwrap();
    let id = header(&resp, "x-decision-id").to_string();
    let licences = licence_headers(&resp);
    let (status, body) = status_json(resp).await;
    assert_eq!(status, 200, "{body}\n{}", nginx.tail());
    assert_eq!(body["path"], "/api/containers/C1", "{body}");
    let seen = &body["headers"];
    assert_eq!(seen["x-consumer-party-id"], CONSUMER, "{body}");
    assert_eq!(seen["x-decision-id"], id.as_str(), "{body}");
    assert_eq!(
        (&seen["x-forwarded-for"], &seen["x-forwarded-proto"]),
        (&json!("127.0.0.1"), &json!("https")),
        "{body}"
    );
    for gone in ["authorization", "x-original-uri", "x-original-method"] {
        assert!(seen.get(gone).is_none(), "{gone}: {body}");
    }
    let direct = s
        .http
        .get(format!("{}/api/containers/C1", s.gateway_url))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(direct.status(), 200);
    assert_eq!(licences, licence_headers(&direct));
    assert!(licences.iter().all(|(_, v)| !v.is_empty()), "{licences:?}");
    let line = decision_log_line(&s.log, &id).await;
    assert_eq!(
        (&line["route"], &line["reason"], &line["evidence"]["source"]),
        (
            &json!("containers-read"),
            &json!("granted"),
            &json!("registry")
        ),
        "{line}"
    );

    // Allowed by evidence in the header (a route that reads only the header).
    let evidence = s
        .bed
        .registry_evidence(CONSUMER, &read_request(CONSUMER, "C1", &[SP]))
        .await;
    for name in ["delegation_evidence", "delegationEvidence"] {
        let resp = get("/api/containers/C1/documents")
            .header(name, &evidence)
            .send()
            .await
            .unwrap();
        let (status, body) = status_json(resp).await;
        assert_eq!(status, 200, "{name}: {body}");
        assert_eq!(body["headers"]["x-consumer-party-id"], CONSUMER, "{body}");
        for gone in ["delegation_evidence", "delegationevidence"] {
            assert!(body["headers"].get(gone).is_none(), "{name}: {body}");
        }
    }

    // Denied: 403 with the reason, and the backend is never reached (its JSON is not the answer);
    // what the client claims in X-Original-* is not what is decided on.
    let resp = get("/api/containers/SECRET-1")
        .header("X-Original-URI", "/api/containers/C1")
        .header("X-Original-Method", "GET")
        .send()
        .await
        .unwrap();
    assert_eq!(
        (resp.status().as_u16(), header(&resp, "x-decision-reason")),
        (403, "denied_by_rule")
    );
    let id = header(&resp, "x-decision-id").to_string();
    let text = resp.text().await.unwrap();
    assert!(
        !text.contains("\"headers\""),
        "the backend answered: {text}"
    );
    assert_eq!(decision_log_line(&s.log, &id).await["outcome"], "denied");

    // A client's look-alike of X-Original-URI, which nginx passes on (underscores_in_headers on)
    // and a backend that folds names reads as the one nginx set: refused, the backend not reached.
    let resp = get("/api/containers/C1")
        .header("X_Original_URI", "/api/containers/SECRET-1")
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    assert!(
        status != 200 && !text.contains("\"headers\""),
        "{status}: {text}"
    );
    // At the decision service directly, each spelling that folds into either name nginx sets.
    for name in [
        "X_Original_URI",
        "X.Original.URI",
        "XOriginalURI",
        "x_original_method",
    ] {
        let resp = s
            .http
            .get(format!("{}/nginx", s.url))
            .header("X-Original-URI", "/api/containers/C1")
            .header("X-Original-Method", "GET")
            .header(name, "/api/containers/SECRET-1")
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        let (status, body) = status_json(resp).await;
        assert_refused(status, &body, (400, "header_not_passable"));
        assert!(
            body["error_description"]
                .as_str()
                .unwrap()
                .contains(&name.to_ascii_lowercase()),
            "{name}: {body}"
        );
    }

    // No token: 401, with the challenge.
    let resp = http
        .get(format!("{front}/api/containers/C1"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        (resp.status().as_u16(), header(&resp, "x-decision-reason")),
        (401, "missing_token")
    );
    assert!(header(&resp, "www-authenticate").starts_with("Bearer"));

    // The decision service directly: without X-Original-URI, a 400 that says so.
    let resp = s
        .http
        .get(format!("{}/nginx", s.url))
        .header("X-Original-Method", "GET")
        .send()
        .await
        .unwrap();
    let (status, body) = status_json(resp).await;
    assert_refused(status, &body, (400, "invalid_original_request"));
    assert!(body["error_description"]
        .as_str()
        .unwrap()
        .contains("X-Original-URI"));

    drop(nginx);
    let metrics = reqwest::get(format!("{}/metrics", s.gateway.admin))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let counted = |outcome| {
        metric(
            &metrics,
            "ishare_gateway_decision_api_requests_total",
            &[("interface", "nginx"), ("outcome", outcome)],
        )
    };
    // The registry's permit and the header's, under each of its names; the Deny.
    assert_eq!(
        (counted("allowed"), counted("denied")),
        (3.0, 1.0),
        "{metrics}"
    );

    // A body the decision service does not see, of a type frameworks read a _method field from:
    // refused on a route that does not accept method_override; a body of another type passes.
    let post = |content_type: &'static str| {
        s.http
            .get(format!("{}/nginx", s.url))
            .header("X-Original-URI", "/api/my/shipments/1")
            .header("X-Original-Method", "POST")
            .header("Content-Type", content_type)
            .bearer_auth(&s.token)
            .send()
    };
    for content_type in [
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/json",
    ] {
        let (status, body) = status_json(post(content_type).await.unwrap()).await;
        assert_eq!(
            (status, body["reason"].as_str()),
            (400, Some("ambiguous_request")),
            "{content_type}: {body}"
        );
        assert!(
            body["error_description"]
                .as_str()
                .is_some_and(|d| d.contains("does not see the body")),
            "{body}"
        );
    }
    let resp = post("image/png").await.unwrap();
    assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap());
    s.stop().await;
}

/// An AuthZEN request of a PEP (with the secret, if given): the status and the JSON answer.
async fn ask(s: &Service, path: &str, body: &Value, secret: Option<&str>) -> (u16, Value) {
    let mut req = s.http.post(format!("{}{path}", s.url)).json(body);
    if let Some(secret) = secret {
        req = req.bearer_auth(secret);
    }
    status_json(req.send().await.unwrap()).await
}

/// An AuthZEN request of a PEP with the secret: `body` as written, of `content_type` if given.
async fn ask_text(s: &Service, path: &str, content_type: Option<&str>, body: &str) -> (u16, Value) {
    let mut req = s
        .http
        .post(format!("{}{path}", s.url))
        .bearer_auth(SECRET)
        .body(body.to_string());
    if let Some(content_type) = content_type {
        req = req.header("content-type", content_type);
    }
    status_json(req.send().await.unwrap()).await
}

/// AuthZEN's discovery document at `base`: the status and the JSON answer.
async fn discovery(http: &reqwest::Client, base: &str) -> (u16, Value) {
    let url = format!("{base}/.well-known/authzen-configuration");
    status_json(http.get(url).send().await.unwrap()).await
}

/// The evaluation of the consumer reading container `id` of the data owner, all attributes.
fn container_read(id: &str) -> Value {
    json!({
        "subject": {"type": "party", "id": CONSUMER},
        "resource": {"type": "CONTAINER", "id": id, "properties": {"policy_issuer": OWNER, "attributes": ["*"]}},
        "action": {"name": "iSHARE.READ"},
    })
}

/// Asserts that AuthZEN refuses `body` at `path` as an invalid evaluation, saying `description`.
async fn assert_invalid(s: &Service, path: &str, body: &Value, description: &str) {
    let (status, answer) = ask(s, path, body, Some(SECRET)).await;
    assert_eq!(
        (
            status,
            answer["reason"].as_str(),
            answer["error_description"].as_str()
        ),
        (400, Some("invalid_evaluation"), Some(description)),
        "{body}: {answer}"
    );
}

/// The decisions of a batch's answer, and their reasons.
fn decided(body: &Value) -> Vec<(&Value, &Value)> {
    body["evaluations"]
        .as_array()
        .unwrap_or_else(|| panic!("no evaluations: {body}"))
        .iter()
        .map(|e| (&e["decision"], &e["context"]["reason"]))
        .collect()
}

/// A check as Envoy's HTTP form sends it: the original path after the prefix, the caller's token.
async fn envoy_http(s: &Service, path: &str) -> reqwest::Response {
    s.http
        .get(format!("{}/ext_authz{path}", s.url))
        .header("authorization", format!("Bearer {}", s.token))
        .send()
        .await
        .unwrap()
}

/// A CheckRequest as Envoy sends it: pseudo-headers and the request's headers, lower case.
fn check_request(method: &str, path: &str, headers: &[(&str, &str)]) -> CheckRequest {
    let mut map: std::collections::HashMap<String, String> = headers
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    map.insert(":method".into(), method.into());
    map.insert(":path".into(), path.into());
    map.insert(":authority".into(), "api.example".into());
    CheckRequest {
        attributes: Some(AttributeContext {
            request: Some(attribute_context::Request {
                http: Some(attribute_context::HttpRequest {
                    method: method.into(),
                    path: path.into(),
                    host: "api.example".into(),
                    headers: map,
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
    }
}

/// Envoy's gRPC check of a GET of `path`, with the caller's `Authorization`.
async fn check(
    client: &mut AuthorizationClient<tonic::transport::Channel>,
    path: &str,
    bearer: Option<&str>,
) -> envoy_types::pb::envoy::service::auth::v3::CheckResponse {
    let headers: Vec<(&str, &str)> = bearer.map(|b| ("authorization", b)).into_iter().collect();
    client
        .check(check_request("GET", path, &headers))
        .await
        .unwrap()
        .into_inner()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoy_ext_authz_and_authzen_are_answered_by_the_same_decisions() {
    let s = start(plain).await;
    let bearer = format!("Bearer {}", s.token);

    // Envoy's HTTP form: the original method, the path after the prefix, the allowed headers.
    let resp = s
        .http
        .get(format!("{}/ext_authz/api/containers/C1?x=1", s.url))
        .header("authorization", &bearer)
        .header("x-envoy-expected-rq-timeout-ms", "200")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "x-consumer-party-id"), CONSUMER);
    assert_eq!(header(&resp, "x-decision-reason"), "granted");
    let id = header(&resp, "x-decision-id").to_string();
    assert_eq!(
        decision_log_line(&s.log, &id).await["path"],
        "/api/containers/C1"
    );
    let resp = envoy_http(&s, "/api/containers/SECRET-1").await;
    let (status, body) = status_json(resp).await;
    assert_refused(status, &body, (403, "denied_by_rule"));
    assert!(body["decision_id"].is_string(), "{body}");
    // The proxy's canonical-request rules hold: a path backends read differently is refused.
    let resp = envoy_http(&s, "/api/containers/C1%2F..").await;
    assert_eq!(resp.status(), 400);
    // What the proxy in front passes on must be what was decided on: the target as the gateway
    // would forward it, and no header the gateway never passes.
    for (path, extra, reason) in [
        ("/api/containers/%43%31", None, "not_as_decided"),
        ("/api/containers/C1?id=A+B", None, "not_as_decided"),
        (
            "/api/containers/C1",
            Some(("x-http-method-override", "DELETE")),
            "header_not_passable",
        ),
        (
            "/api/containers/C1",
            Some(("x_consumer_party_id", OWNER)),
            "header_not_passable",
        ),
    ] {
        let mut asked = s
            .http
            .get(format!("{}/ext_authz{path}", s.url))
            .header("authorization", &bearer);
        if let Some((name, value)) = extra {
            asked = asked.header(name, value);
        }
        let (status, body) = status_json(asked.send().await.unwrap()).await;
        assert_eq!(
            (status, body["reason"].as_str()),
            (400, Some(reason)),
            "{path} {extra:?}: {body}"
        );
    }
    // Envoy is told to remove the scheme's credentials and the party headers it does not set.
    let resp = envoy_http(&s, "/api/containers/C1").await;
    assert_eq!(
        header(&resp, "x-envoy-auth-headers-to-remove"),
        "delegation_evidence,delegationevidence,service_consumer_assertion,serviceconsumerassertion,x-original-consumer-party-id,authorization"
    );
    // A route in shadow mode: allowed, and logged as the Deny it is.
    let resp = envoy_http(&s, "/shadow/containers/SECRET-1").await;
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "x-decision-reason"), "denied_by_rule");
    assert!(resp.headers().get("licensepurpose").is_none());
    let id = header(&resp, "x-decision-id").to_string();
    let line = decision_log_line(&s.log, &id).await;
    assert_eq!(
        (&line["mode"], &line["outcome"], &line["status"]),
        (&json!("shadow"), &json!("shadow_denied"), &json!(200)),
        "{line}"
    );
    // A route for people is not decided here.
    let resp = envoy_http(&s, "/people/containers/C1").await;
    let (status, body) = status_json(resp).await;
    assert_refused(status, &body, (403, "route_for_people"));

    // Envoy's gRPC form, with a client of the same definitions.
    let mut grpc = AuthorizationClient::connect(format!("http://127.0.0.1:{}", s.grpc))
        .await
        .unwrap();
    let answer = check(&mut grpc, "/api/containers/C1", Some(&bearer)).await;
    assert_eq!(answer.status.as_ref().unwrap().code, 0, "{answer:?}");
    let Some(check_response::HttpResponse::OkResponse(ok)) = &answer.http_response else {
        panic!("not allowed: {answer:?}");
    };
    let set: Vec<(String, String)> = ok
        .headers
        .iter()
        .filter_map(|h| h.header.as_ref())
        .map(|h| (h.key.clone(), h.value.clone()))
        .collect();
    assert!(
        set.contains(&("x-consumer-party-id".into(), CONSUMER.into())),
        "{set:?}"
    );
    let answer = check(&mut grpc, "/api/containers/SECRET-1", Some(&bearer)).await;
    assert_eq!(answer.status.as_ref().unwrap().code, 7, "{answer:?}");
    let Some(check_response::HttpResponse::DeniedResponse(denied)) = &answer.http_response else {
        panic!("not denied: {answer:?}");
    };
    assert_eq!(denied.status.as_ref().unwrap().code, 403);
    let body: Value = serde_json::from_str(&denied.body).unwrap();
    assert_eq!(body["reason"], "denied_by_rule", "{body}");
    let answer = check(&mut grpc, "/api/containers/C1", None).await;
    assert_eq!(answer.status.as_ref().unwrap().code, 16, "{answer:?}");

    // AuthZEN: the PEP authenticates, and the same delegation stages decide the mask it names.
    let evaluation = container_read;
    let (status, body) = ask(&s, "/access/v1/evaluation", &evaluation("C1"), Some(SECRET)).await;
    assert_eq!((status, &body["decision"]), (200, &json!(true)), "{body}");
    assert_eq!(body["context"]["reason"], "granted", "{body}");
    let id = body["context"]["decision_id"].as_str().unwrap().to_string();
    let line = decision_log_line(&s.log, &id).await;
    assert_eq!(line["mask"]["identifiers"][0], "C1", "{line}");
    let (status, body) = ask(
        &s,
        "/access/v1/evaluation",
        &evaluation("SECRET-1"),
        Some(SECRET),
    )
    .await;
    assert_eq!((status, &body["decision"]), (200, &json!(false)), "{body}");
    assert_eq!(body["context"]["reason"], "denied_by_rule", "{body}");
    // The licences the PEP requires, under either spelling: the registry, asked for a licence
    // its policy does not carry, answers with a Deny.
    for spelling in ["licences", "licenses"] {
        let mut licensed = evaluation("C1");
        licensed["context"] = json!({ spelling: ["ISHARE.0002"] });
        let (status, body) = ask(&s, "/access/v1/evaluation", &licensed, Some(SECRET)).await;
        assert_eq!((status, &body["decision"]), (200, &json!(false)), "{body}");
        assert_eq!(body["context"]["reason"], "denied_by_rule", "{body}");
    }
    for secret in [None, Some("not-the-secret")] {
        let (status, body) = ask(&s, "/access/v1/evaluation", &evaluation("C1"), secret).await;
        assert_refused(status, &body, (401, "pep_unauthenticated"));
    }
    // A route named: its settings apply, but not its shadow mode (a PEP reads `decision`);
    // a route for people is not one to name.
    let mut shadowed = evaluation("SECRET-1");
    shadowed["resource"]["properties"]["route"] = json!("containers-shadow");
    let (status, body) = ask(&s, "/access/v1/evaluation", &shadowed, Some(SECRET)).await;
    assert_eq!((status, &body["decision"]), (200, &json!(false)), "{body}");
    assert_eq!(
        (
            &body["context"]["reason"],
            body["context"].get("shadow_denied")
        ),
        (&json!("denied_by_rule"), None),
        "{body}"
    );
    shadowed["resource"]["properties"]["route"] = json!("people-containers");
    let (status, body) = ask(&s, "/access/v1/evaluation", &shadowed, Some(SECRET)).await;
    assert_refused(status, &body, (400, "invalid_evaluation"));
    let batch = json!({
        "subject": {"type": "party", "id": CONSUMER},
        "action": {"name": "iSHARE.READ"},
        "evaluations": [
            {"resource": evaluation("C2")["resource"]},
            {"resource": evaluation("SECRET-1")["resource"]},
        ],
    });
    let (status, body) = ask(&s, "/access/v1/evaluations", &batch, Some(SECRET)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        decided(&body),
        [
            (&json!(true), &json!("granted")),
            (&json!(false), &json!("denied_by_rule"))
        ],
        "{body}"
    );
    let mut too_many = batch.clone();
    too_many["evaluations"] = Value::Array(vec![json!({}); 101]);
    let (status, body) = ask(&s, "/access/v1/evaluations", &too_many, Some(SECRET)).await;
    assert_refused(status, &body, (400, "invalid_evaluation"));
    let (status, body) = ask(
        &s,
        "/access/v1/evaluation",
        &json!({"subject": {"type": "party", "id": CONSUMER}}),
        Some(SECRET),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert!(body["error_description"]
        .as_str()
        .unwrap()
        .contains("resource is missing"));
    let big = json!({"padding": "x".repeat(70 * 1024)});
    let (status, body) = ask(&s, "/access/v1/evaluation", &big, Some(SECRET)).await;
    assert_refused(status, &body, (413, "body_too_large"));
    assert_eq!(
        discovery(&s.http, &s.url).await.1["access_evaluation_endpoint"],
        format!("{PDP}/access/v1/evaluation")
    );

    // SIGHUP: the next decision is made under the new configuration (the shadow route gone, a new
    // secret), on the same listener.
    std::fs::remove_file(s.dir.join("policies/shadow.toml")).unwrap();
    let renewed = format!("{SECRET}-renewed");
    std::fs::write(s.dir.join("pep.secret"), &renewed).unwrap();
    let generation = s.gateway.generation().await.unwrap();
    s.gateway.reload(generation).await;
    let (status, body) = status_json(envoy_http(&s, "/shadow/containers/SECRET-1").await).await;
    assert_refused(status, &body, (404, "no_route"));
    let old = ask(&s, "/access/v1/evaluation", &evaluation("C1"), Some(SECRET)).await;
    assert_eq!(old.0, 401, "{}", old.1);
    let new = ask(
        &s,
        "/access/v1/evaluation",
        &evaluation("C1"),
        Some(&renewed),
    )
    .await;
    assert_eq!(
        (new.0, &new.1["decision"]),
        (200, &json!(true)),
        "{}",
        new.1
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grpc_check_past_its_deadline_or_too_large_gets_the_tables_refusal() {
    // A registry that accepts connections and never answers: the decision waits for it.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_at = silent.local_addr().unwrap();
    let held = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = silent.accept().await {
            held.push(s);
        }
    });
    let more = format!("timeout = \"500ms\"\n\n[[registry]]\nname = \"silent\"\nparty_id = \"{AR}\"\nurl = \"https://{silent_at}\"\n");
    let slow = r#"
[[route]]
name = "slow"
methods = ["GET"]
path = "/slow/containers/{id}"
upstream = "legacy"
[route.delegation]
policy_issuer = "EU.EORI.NL000000005"
resource_type = "CONTAINER"
identifiers = ["{path.id}"]
registry = "silent"
"#;
    let s = start_with(plain, &more, &[("slow.toml", slow)]).await;
    let bearer = format!("Bearer {}", s.token);
    let mut grpc = AuthorizationClient::connect(format!("http://127.0.0.1:{}", s.grpc))
        .await
        .unwrap();
    let denied = |answer: &envoy_types::pb::envoy::service::auth::v3::CheckResponse| {
        let Some(check_response::HttpResponse::DeniedResponse(denied)) = &answer.http_response
        else {
            panic!("not denied: {answer:?}");
        };
        let body: Value = serde_json::from_str(&denied.body).unwrap();
        (
            answer.status.as_ref().unwrap().code,
            denied.status.as_ref().unwrap().code,
            body["reason"].as_str().unwrap_or_default().to_string(),
        )
    };
    // Past the deadline: the table's decision_timeout, UNAVAILABLE (14), not the transport's
    // CANCELLED.
    let answer = check(&mut grpc, "/slow/containers/C1", Some(&bearer)).await;
    assert_eq!(denied(&answer), (14, 503, "decision_timeout".to_string()));
    // Larger than a head and the body the service reads: the table's 413, RESOURCE_EXHAUSTED (8).
    let mut large = check_request("POST", "/api/containers/C1", &[("authorization", &bearer)]);
    let http = large.attributes.as_mut().unwrap().request.as_mut().unwrap();
    http.http.as_mut().unwrap().raw_body = vec![b'x'; 400 << 10];
    let answer = grpc.check(large).await.unwrap().into_inner();
    assert_eq!(denied(&answer), (8, 413, "body_too_large".to_string()));
    // Counted as refusals of the gRPC interface.
    let metrics = s.gateway.metrics().await;
    let refused = |outcome| {
        metric(
            &metrics,
            "ishare_gateway_decision_api_requests_total",
            &[("interface", "ext_authz_grpc"), ("outcome", outcome)],
        )
    };
    assert_eq!(
        (refused("unavailable"), refused("bad_request")),
        (1.0, 1.0),
        "{metrics}"
    );
    held.abort();
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_client_certificates_required_every_caller_shows_one_and_authzen_needs_no_secret() {
    let s = start(mutual_tls).await;
    let base = s.url.replace("http://", "https://");
    let data = &s.bed.keys.data_dir;
    let ca_pem = std::fs::read(data.join("ca.pem")).unwrap();
    let ca = reqwest::Certificate::from_pem_bundle(&ca_pem).unwrap();
    let key = std::fs::read_to_string(data.join(format!("parties/{SP}.key.pem"))).unwrap();
    let chain = std::fs::read_to_string(data.join(format!("parties/{SP}.chain.pem"))).unwrap();
    let evaluation = json!({
        "subject": {"type": "party", "id": CONSUMER},
        "resource": {"type": "CONTAINER", "id": "C1", "properties": {"policy_issuer": OWNER}},
        "action": {"name": "iSHARE.READ"},
    });

    // Without a client certificate, no handshake.
    let anonymous = reqwest::Client::builder()
        .tls_certs_only(ca.clone())
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let refused = anonymous
        .post(format!("{base}/access/v1/evaluation"))
        .json(&evaluation)
        .send()
        .await;
    assert!(refused.is_err(), "{refused:?}");

    // With one, AuthZEN answers without the bearer secret, and the proxies' forms are decided.
    let pep = reqwest::Client::builder()
        .tls_certs_only(ca)
        .identity(reqwest::Identity::from_pem(format!("{key}{chain}").as_bytes()).unwrap())
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let (status, body) = status_json(
        pep.post(format!("{base}/access/v1/evaluation"))
            .json(&evaluation)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, &body["decision"]), (200, &json!(true)), "{body}");
    let resp = pep
        .get(format!("{base}/ext_authz/api/containers/C1"))
        .bearer_auth(&s.token)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "x-consumer-party-id"), CONSUMER);
    // No policy_decision_point configured: no discovery document, rather than one naming
    // whatever host the caller asked for.
    let (status, body) = discovery(&pep, &base).await;
    assert_refused(status, &body, (404, "no_policy_decision_point"));

    // gRPC over TLS, with the same client certificate.
    let tls = tonic::transport::ClientTlsConfig::new()
        .ca_certificate(tonic::transport::Certificate::from_pem(&ca_pem))
        .identity(tonic::transport::Identity::from_pem(chain, key))
        .domain_name("localhost");
    let channel = tonic::transport::Channel::from_shared(format!("https://127.0.0.1:{}", s.grpc))
        .unwrap()
        .tls_config(tls)
        .unwrap()
        .connect()
        .await
        .unwrap();
    let bearer = format!("Bearer {}", s.token);
    let answer = check(
        &mut AuthorizationClient::new(channel),
        "/api/containers/SECRET-1",
        Some(&bearer),
    )
    .await;
    assert_eq!(answer.status.as_ref().unwrap().code, 7, "{answer:?}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authzen_echoes_the_request_id_on_every_answer() {
    let s = start(plain).await;
    let id = "bfe9eb29-ab87-4ca3-be83-a1d5d8305716";
    let batch = json!({"evaluations": [container_read("C1"), container_read("SECRET-1")]});
    let mut incomplete = container_read("C1");
    incomplete.as_object_mut().unwrap().remove("resource");
    for (path, body, secret, status, reason) in [
        (
            EVALUATION,
            container_read("C1"),
            Some(SECRET),
            200,
            "granted",
        ),
        (
            EVALUATION,
            container_read("SECRET-1"),
            Some(SECRET),
            200,
            "denied_by_rule",
        ),
        (EVALUATIONS, batch, Some(SECRET), 200, "granted"),
        (
            EVALUATION,
            incomplete,
            Some(SECRET),
            400,
            "invalid_evaluation",
        ),
        (
            EVALUATION,
            container_read("C1"),
            None,
            401,
            "pep_unauthenticated",
        ),
    ] {
        let mut req = s
            .http
            .post(format!("{}{path}", s.url))
            .header("x-request-id", id)
            .json(&body);
        if let Some(secret) = secret {
            req = req.bearer_auth(secret);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(header(&resp, "x-request-id"), id, "{path} {body}");
        let (got, answer) = status_json(resp).await;
        let said = [
            &answer["reason"],
            &answer["context"]["reason"],
            &answer["evaluations"][0]["context"]["reason"],
        ];
        assert_eq!(got, status, "{answer}");
        assert!(said.contains(&&json!(reason)), "{reason}: {answer}");
    }
    let resp = s
        .http
        .get(format!("{}/.well-known/authzen-configuration", s.url))
        .header("x-request-id", id)
        .send()
        .await
        .unwrap();
    assert_eq!(header(&resp, "x-request-id"), id);
    assert_eq!(resp.status(), 200);
    // Without one, none is made up.
    let resp = s
        .http
        .post(format!("{}{EVALUATION}", s.url))
        .bearer_auth(SECRET)
        .json(&container_read("C1"))
        .send()
        .await
        .unwrap();
    assert!(resp.headers().get("x-request-id").is_none());
    assert_eq!(status_json(resp).await.1["context"]["reason"], "granted");
    // One too long to echo, or not plain text: refused, and not echoed.
    let long = "a".repeat(129);
    for refused in [long.as_str(), "id\twith-tab", "caf\u{e9}", "two words"] {
        let resp = s
            .http
            .post(format!("{}{EVALUATION}", s.url))
            .bearer_auth(SECRET)
            .header("x-request-id", refused.as_bytes())
            .json(&container_read("C1"))
            .send()
            .await
            .unwrap();
        assert!(resp.headers().get("x-request-id").is_none(), "{refused:?}");
        let (status, body) = status_json(resp).await;
        assert_refused(status, &body, (400, "invalid_request_id"));
    }
    // 128 characters are echoed whole.
    let longest = "b".repeat(128);
    let resp = s
        .http
        .post(format!("{}{EVALUATION}", s.url))
        .bearer_auth(SECRET)
        .header("x-request-id", &longest)
        .json(&container_read("C1"))
        .send()
        .await
        .unwrap();
    assert_eq!(header(&resp, "x-request-id"), longest);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_route_named_the_operands_of_conditions_are_the_routes() {
    let s = start(plain).await;
    let located = |conditions: Value| {
        let mut evaluation = container_read("C1");
        evaluation["resource"]["properties"]["route"] = json!("containers-located");
        evaluation["context"] = json!({ "conditions": conditions });
        evaluation
    };
    let path = "/access/v1/evaluation";
    // The value the route takes from the request, as the PEP gives it: decided.
    let given = located(json!({"requesterLocation": "NL"}));
    let (status, answer) = ask(&s, path, &given, Some(SECRET)).await;
    assert_eq!(
        (status, &answer["decision"]),
        (200, &json!(true)),
        "{answer}"
    );
    // An operand the route does not declare, a value for its constant, none for its request
    // value: each refused by name.
    let route = "the route containers-located";
    let cases = [
        (
            json!({"requesterLocation": "NL", "orderStatus": "paid"}),
            format!("context.conditions.orderStatus: {route} declares no such operand"),
        ),
        (
            json!({"requesterLocation": "NL", "tier": "silver"}),
            format!("context.conditions.tier: {route} fixes it"),
        ),
        (
            json!({}),
            format!("context.conditions.requesterLocation is missing: {route} takes it from {{header.X-Region}}"),
        ),
    ];
    for (conditions, said) in cases {
        assert_invalid(&s, path, &located(conditions), &said).await;
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evaluations_request_without_items_is_answered_as_a_single_evaluation() {
    let s = start(plain).await;
    for items in [None, Some(json!([]))] {
        let with = |mut body: Value| {
            if let Some(items) = &items {
                body["evaluations"] = items.clone();
            }
            body
        };
        let (status, body) = ask(&s, EVALUATIONS, &with(container_read("C1")), Some(SECRET)).await;
        assert_eq!(
            (status, &body["decision"], &body["context"]["reason"]),
            (200, &json!(true), &json!("granted")),
            "{items:?}: {body}"
        );
        assert!(body.get("evaluations").is_none(), "{body}");
        let (status, body) = ask(
            &s,
            EVALUATIONS,
            &with(container_read("SECRET-1")),
            Some(SECRET),
        )
        .await;
        assert_eq!(
            (status, &body["decision"], &body["context"]["reason"]),
            (200, &json!(false), &json!("denied_by_rule")),
            "{items:?}: {body}"
        );
        // Being a single evaluation, one that lacks an entity is an error of the request.
        let mut incomplete = with(container_read("C1"));
        incomplete.as_object_mut().unwrap().remove("action");
        assert_invalid(&s, EVALUATIONS, &incomplete, "action is missing").await;
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_item_that_cannot_be_evaluated_is_denied_with_its_reason_and_the_others_answered() {
    let s = start(plain).await;
    let resource = |id: &str| container_read(id)["resource"].clone();
    let mut unowned = resource("C2");
    unowned["properties"] = json!("archived");
    let batch = |semantic: &str, items: Vec<Value>| {
        json!({
            "subject": {"type": "party", "id": CONSUMER},
            "action": {"name": "iSHARE.READ"},
            "options": {"evaluations_semantic": semantic},
            "evaluations": items,
        })
    };
    let items = vec![
        json!({"resource": resource("C1")}),
        json!({}),
        json!({"resource": unowned}),
        json!({"subject": {"type": "user", "id": "alice"}, "resource": resource("C2")}),
        json!("record-1"),
        json!({"resource": resource("SECRET-1")}),
    ];
    let (status, body) = ask(
        &s,
        EVALUATIONS,
        &batch("execute_all", items.clone()),
        Some(SECRET),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (t, f) = (json!(true), json!(false));
    let (granted, invalid, denied) = (
        json!("granted"),
        json!("invalid_evaluation"),
        json!("denied_by_rule"),
    );
    assert_eq!(
        decided(&body),
        [
            (&t, &granted),
            (&f, &invalid),
            (&f, &invalid),
            (&f, &invalid),
            (&f, &invalid),
            (&f, &denied),
        ],
        "{body}"
    );
    let errors: Vec<(&Value, &str)> = body["evaluations"].as_array().unwrap()[1..5]
        .iter()
        .map(|e| {
            let error = &e["context"]["error"];
            (
                &error["status"],
                error["message"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        errors,
        [
            (&json!(400), "resource is missing"),
            (&json!(400), "resource.properties is not an object"),
            (
                &json!(400),
                "subject.type \"user\": \"party\" or \"person\""
            ),
            (&json!(400), "an evaluation is a JSON object"),
        ],
        "{body}"
    );
    // An item that cannot be evaluated is a denial: deny_on_first_deny ends there.
    let (status, body) = ask(
        &s,
        EVALUATIONS,
        &batch("deny_on_first_deny", items[..3].to_vec()),
        Some(SECRET),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(decided(&body), [(&t, &granted), (&f, &invalid)], "{body}");
    // What is wrong with the request as a whole is still a 400: its defaults, its items' array.
    let mut bad_default = batch("execute_all", items[..1].to_vec());
    bad_default["subject"] = json!(CONSUMER);
    let mut not_an_array = batch("execute_all", Vec::new());
    not_an_array["evaluations"] = json!({"resource": resource("C1")});
    for (body, description) in [
        (bad_default, "subject is not an object"),
        (not_an_array, "evaluations is not an array"),
    ] {
        assert_invalid(&s, EVALUATIONS, &body, description).await;
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_discovery_document_names_the_configured_identifier_never_the_callers_host() {
    let s = start(plain).await;
    for host in [None, Some("attacker.example"), Some("127.0.0.1:1")] {
        let mut req = s
            .http
            .get(format!("{}/.well-known/authzen-configuration", s.url));
        if let Some(host) = host {
            req = req.header("host", host);
        }
        let (status, body) = status_json(req.send().await.unwrap()).await;
        assert_eq!(
            (status, body),
            (
                200,
                json!({
                    "policy_decision_point": PDP,
                    "access_evaluation_endpoint": format!("{PDP}/access/v1/evaluation"),
                    "access_evaluations_endpoint": format!("{PDP}/access/v1/evaluations"),
                })
            ),
            "{host:?}"
        );
    }
    // Without the identifier configured, no document at all (the endpoints keep their default
    // paths); a reload applies.
    let config = s.dir.join("gateway.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace(&format!("policy_decision_point = \"{PDP}\"\n"), ""),
    )
    .unwrap();
    let generation = s.gateway.generation().await.unwrap();
    s.gateway.reload(generation).await;
    let (status, body) = discovery(&s.http, &s.url).await;
    assert_refused(status, &body, (404, "no_policy_decision_point"));
    let (status, body) = ask(&s, EVALUATION, &container_read("C1"), Some(SECRET)).await;
    assert_eq!((status, &body["decision"]), (200, &json!(true)), "{body}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_naming_a_member_twice_is_refused() {
    let s = start(plain).await;
    let subject = format!(r#"{{"type": "party", "id": "{CONSUMER}"}}"#);
    let resource = format!(
        r#"{{"type": "CONTAINER", "id": "C1", "properties": {{"policy_issuer": "{OWNER}", "attributes": ["*"]}}}}"#
    );
    let action = r#"{"name": "iSHARE.READ"}"#;
    let once = format!(r#"{{"subject": {subject}, "resource": {resource}, "action": {action}}}"#);
    let (status, body) = ask_text(&s, EVALUATION, Some("application/json"), &once).await;
    assert_eq!((status, &body["decision"]), (200, &json!(true)), "{body}");
    let other = r#"{"type": "party", "id": "EU.EORI.NL000000009"}"#;
    let twice = [
        (
            EVALUATION,
            format!(
                r#"{{"subject": {subject}, "resource": {resource}, "action": {action}, "subject": {other}}}"#
            ),
        ),
        (
            EVALUATION,
            once.replace(
                r#""policy_issuer":"#,
                r#""policy_issuer": "EU.EORI.NL000000009", "policy_issuer":"#,
            ),
        ),
        (
            EVALUATIONS,
            format!(
                r#"{{"subject": {subject}, "action": {action}, "evaluations": [{{"resource": {resource}, "resource": {resource}}}]}}"#
            ),
        ),
    ];
    for (path, text) in twice {
        let (status, body) = ask_text(&s, path, Some("application/json"), &text).await;
        assert_eq!(
            (status, body["reason"].as_str()),
            (400, Some("duplicate_member")),
            "{text}: {body}"
        );
        assert!(
            body["error_description"]
                .as_str()
                .is_some_and(|d| d.contains("given twice")),
            "{body}"
        );
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_not_sent_as_application_json_is_refused() {
    let s = start(plain).await;
    let text = container_read("C1").to_string();
    for path in [EVALUATION, EVALUATIONS] {
        for content_type in [
            None,
            Some("text/plain"),
            Some("application/x-www-form-urlencoded"),
            Some("application/jsonp"),
        ] {
            let (status, body) = ask_text(&s, path, content_type, &text).await;
            assert_eq!(
                (status, body["reason"].as_str()),
                (400, Some("unsupported_content_type")),
                "{path} {content_type:?}: {body}"
            );
        }
        for content_type in ["application/json; charset=utf-8", "Application/JSON"] {
            let (status, body) = ask_text(&s, path, Some(content_type), &text).await;
            assert_eq!(
                (status, &body["decision"], &body["context"]["reason"]),
                (200, &json!(true), &json!("granted")),
                "{path} {content_type}: {body}"
            );
        }
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entities_and_properties_that_are_not_objects_are_refused() {
    let s = start(plain).await;
    for (entity, member, value, description) in [
        (
            "subject",
            Some("properties"),
            json!("admin"),
            "subject.properties is not an object",
        ),
        (
            "action",
            Some("properties"),
            json!([1]),
            "action.properties is not an object",
        ),
        (
            "action",
            Some("properties"),
            json!(null),
            "action.properties is not an object",
        ),
        (
            "resource",
            Some("properties"),
            json!([OWNER, ["*"]]),
            "resource.properties is not an object",
        ),
        (
            "subject",
            None,
            json!(["party", CONSUMER]),
            "subject is not an object",
        ),
        (
            "context",
            None,
            json!(["ISHARE.0001"]),
            "context is not an object",
        ),
    ] {
        let mut body = container_read("C1");
        match member {
            Some(member) => body[entity][member] = value,
            None => body[entity] = value,
        }
        assert_invalid(&s, EVALUATION, &body, description).await;
        // The same item in a batch: denied with that reason, the batch answered.
        let batch = json!({"evaluations": [container_read("C1"), body]});
        let (status, answer) = ask(&s, EVALUATIONS, &batch, Some(SECRET)).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(
            decided(&answer),
            [
                (&json!(true), &json!("granted")),
                (&json!(false), &json!("invalid_evaluation"))
            ],
            "{answer}"
        );
        assert_eq!(
            answer["evaluations"][1]["context"]["error"]["message"], description,
            "{answer}"
        );
    }
    s.stop().await;
}
