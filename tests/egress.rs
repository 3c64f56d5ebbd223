//! The consumer's side as operators run it (`ishare-gateway run --config egress.toml`, a child
//! process): a client that knows nothing of iSHARE calls plain paths and reaches the shipped
//! gateway as ABC Trucking, with our token and the evidence a route brings; what fails is answered
//! with its reason and never forwarded; a provider that forgets our token gets a fresh one once;
//! calls to a provider are bounded; SIGHUP reloads, SIGTERM stops after the calls in progress,
//! SIGKILL leaves nothing that stops the next start.

use crate::support;
use axum::extract::State;
use axum::routing::{any, post};
use axum::{Json, Router};
use http::HeaderMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::process::GatewayProcess;
use support::served::Served;
use support::shipped::{shipped_gateway, Urls};
use support::{
    free_port, scratch_dir, shipped_3_0_on_free_ports, status_json, Bed, Ports, AR, AR3, CONSUMER,
    CONSUMER3, OWNER, OWNER3, SO, SO3, SP, SP3,
};

const BIN: &str = "egress";

/// conf/egress.toml as shipped, for the testbed's key material in `data`, calling the provider at
/// `provider` (its base URL) and the testbed's scheme owner and registry; on free ports, its
/// decision log in `log`. The consumer's and the admin listener's ports.
fn shipped_egress(data: &Path, urls: &Urls, provider: &str, log: &Path) -> (String, u16, u16) {
    let (consumer, admin) = (free_port(), free_port());
    let text = std::fs::read_to_string(support::repo().join("conf/egress.toml"))
        .unwrap()
        .replace("../data/testbed", &data.display().to_string())
        .replace("https://127.0.0.1:8443", provider)
        .replace("https://127.0.0.1:9100", urls.of(SO))
        .replace("https://127.0.0.1:9104", urls.of(AR))
        .replace("127.0.0.1:8181", &format!("127.0.0.1:{consumer}"))
        .replace("127.0.0.1:9911", &format!("127.0.0.1:{admin}"))
        .replace(
            "path = \"-\"",
            &format!("path = {:?}", log.display().to_string()),
        );
    (text, consumer, admin)
}

fn written(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// The consumer's side started on `config`, once its admin listener says it is ready.
async fn started(name: &str, config: &Path, admin: u16) -> GatewayProcess {
    let out = support::binary_output(&["check", "--config", config.to_str().unwrap()]);
    assert!(out.status.success(), "{}", support::printed(&out));
    let mut egress = GatewayProcess::start(name, config, admin);
    egress.wait_ready().await;
    egress
}

/// That the consumer's side answered `resp` itself with `status` and `error`; its body.
async fn refused_with(resp: reqwest::Response, status: u16, error: &str) -> serde_json::Value {
    let (got, body) = status_json(resp).await;
    assert_eq!(
        (got, body["error"].as_str()),
        (status, Some(error)),
        "{body}"
    );
    body
}

/// The value of a metric's line starting with `series` (0 when absent).
fn metric(text: &str, series: &str) -> u64 {
    text.lines()
        .find(|l| l.starts_with(series))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The decision log's lines, once `count` are written (bounded wait).
async fn log_lines(log: &Path, count: usize) -> Vec<serde_json::Value> {
    let read = || -> Vec<serde_json::Value> {
        std::fs::read_to_string(log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    };
    let enough =
        support::process::eventually(Duration::from_secs(10), || async { read().len() >= count })
            .await;
    assert!(enough, "{} lines of {count}", read().len());
    read()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_knows_nothing_of_the_scheme_reaches_the_shipped_gateway_as_abc_trucking() {
    let bed = Bed::start(BIN).await;
    let urls = Urls::of_bed(&bed);
    let data = bed.keys.data_dir.clone();
    let dir = scratch_dir(BIN);
    let ports = Ports::free();
    let gateway_config = written(&dir, "gateway.toml", &shipped_gateway(&data, &urls, &ports));
    let mut gateway = GatewayProcess::start("provider", &gateway_config, ports.admin);
    gateway.wait_ready().await;
    let log = dir.join("egress-decisions.log");
    let provider = format!("https://127.0.0.1:{}", ports.tls);
    let (text, port, admin) = shipped_egress(&data, &urls, &provider, &log);
    let config = written(&dir, "egress.toml", &text);
    let egress = started("egress", &config, admin).await;
    let local = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let get = |path: &str| http.get(format!("{local}{path}")).send();

    // Our token alone: Warehouse 13's gateway asks Happy Pets' registry itself.
    let (status, body) = status_json(get("/api/containers/C1").await.unwrap()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["headers"]["x-consumer-party-id"], CONSUMER, "{body}");
    let resp = get("/api/containers/SECRET-1").await.unwrap();
    assert_eq!(
        resp.headers()["x-decision-id"].len(),
        32,
        "the provider's own answer"
    );
    let (status, body) = status_json(resp).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (403, Some("denied_by_rule")),
        "{body}"
    );
    assert!(
        body["error_description"].as_str().unwrap().contains(AR),
        "the reason names the registry that denies: {body}"
    );

    // A credential of the local client's own is not ours: the call goes with our token.
    let resp = http
        .get(format!("{local}/api/containers/C1"))
        .bearer_auth("forged")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);

    // The documents: Warehouse 13 wants evidence from the consumer; we bring it from the
    // owner's registry, once, then kept.
    for _ in 0..2 {
        let (status, body) = status_json(get("/api/containers/C1/documents").await.unwrap()).await;
        assert_eq!(status, 200, "{body}");
    }
    // The registry's Deny is ours: no call is made.
    let resp = get("/api/containers/SECRET-1/documents").await.unwrap();
    let body = refused_with(resp, 403, "registry_denied").await;
    assert!(
        body["error_description"].as_str().unwrap().contains("Deny"),
        "{body}"
    );
    // Evidence the client gives where the route brings its own is refused, not forwarded.
    let resp = http
        .get(format!("{local}/api/containers/C1/documents"))
        .header("Delegation-Evidence", "e30.e30.sig")
        .send()
        .await
        .unwrap();
    refused_with(resp, 400, "evidence_given").await;
    // A path that is none is refused with its reason.
    refused_with(
        get("/api/containers/%2F..%2Fsecret").await.unwrap(),
        400,
        "bad_path",
    )
    .await;

    let text = egress.metrics().await;
    let tokens = "ishare_gateway_egress_tokens_total{provider=\"warehouse-13\",result=";
    assert_eq!(
        metric(&text, &format!("{tokens}\"fetched\"}}")),
        1,
        "{text}"
    );
    assert!(
        metric(&text, &format!("{tokens}\"cached\"}}")) >= 4,
        "{text}"
    );
    let evidence = "ishare_gateway_egress_evidence_total{result=";
    let documents_route = "route=\"container-documents\"";
    assert_eq!(
        metric(&text, &format!("{evidence}\"fetched\",{documents_route}}}")),
        1,
        "{text}"
    );
    assert_eq!(
        metric(&text, &format!("{evidence}\"cached\",{documents_route}}}")),
        1,
        "{text}"
    );
    assert_eq!(
        metric(&text, &format!("{evidence}\"denied\",{documents_route}}}")),
        1,
        "{text}"
    );
    let answers = "ishare_gateway_egress_answers_total{provider=\"warehouse-13\",status=";
    assert_eq!(metric(&text, &format!("{answers}\"200\"}}")), 4, "{text}");
    assert_eq!(metric(&text, &format!("{answers}\"403\"}}")), 1, "{text}");

    // One line per call: which party, which provider, which token and evidence.
    let lines = log_lines(&log, 8).await;
    let documents = lines
        .iter()
        .find(|l| l["path"] == "/api/containers/C1/documents" && l["status"] == 200)
        .unwrap();
    assert_eq!(documents["kind"], "egress");
    assert_eq!(documents["caller"]["id"], CONSUMER);
    assert_eq!(documents["provider"]["id"], SP);
    assert_eq!(documents["evidence"]["registry"], AR);
    assert_eq!(documents["evidence"]["issuers"][0], OWNER);
    assert_eq!(documents["outcome"], "forwarded");
    let denied = lines
        .iter()
        .find(|l| l["reason"] == "registry_denied")
        .unwrap();
    assert_eq!(
        (denied["status"].as_u64(), denied["outcome"].as_str()),
        (Some(403), Some("refused"))
    );

    let (status, output) = egress.terminate().await;
    assert!(
        status.success(),
        "SIGTERM ends it cleanly: {status}\n{output}"
    );

    // A client that calls the moment the consumer's side listens gets its evidence verified: the
    // trusted list is there before the first call.
    let (text, port, admin) = shipped_egress(&data, &urls, &provider, &dir.join("again.log"));
    let config = written(&dir, "egress-again.toml", &text);
    let mut again = GatewayProcess::start("egress-again", &config, admin);
    let url = format!("http://127.0.0.1:{port}/api/containers/C1/documents");
    let first = loop {
        assert!(again.process.exited().is_none(), "{}", again.process.tail());
        if let Ok(resp) = http.get(&url).send().await {
            break status_json(resp).await;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    assert_eq!(first.0, 200, "{}", first.1);
    again.terminate().await;
    gateway.terminate().await;
    bed.stop().await;
}

/// What the stand-in provider saw: the tokens it issued, and each call's bearer token and headers.
#[derive(Default)]
struct Seen {
    issued: usize,
    calls: Vec<(String, HeaderMap)>,
}

/// A provider that issues `t1`, `t2`, … and takes only the latest: an older token is answered 401
/// `invalid_token` (it forgot it), as every token is at `/never`; `/slow` answers after two
/// seconds.
fn forgetful_provider(seen: Arc<Mutex<Seen>>) -> Router {
    async fn token(State(seen): State<Arc<Mutex<Seen>>>) -> Json<serde_json::Value> {
        let mut seen = seen.lock().unwrap();
        seen.issued += 1;
        Json(serde_json::json!({
            "access_token": format!("t{}", seen.issued),
            "token_type": "Bearer",
            "expires_in": 3600,
        }))
    }
    async fn service(
        State(seen): State<Arc<Mutex<Seen>>>,
        uri: http::Uri,
        headers: HeaderMap,
    ) -> (http::StatusCode, HeaderMap, String) {
        let bearer = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let latest = {
            let mut seen = seen.lock().unwrap();
            seen.calls.push((bearer.clone(), headers.clone()));
            format!("Bearer t{}", seen.issued)
        };
        if uri.path() == "/slow" {
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
        let mut answer = HeaderMap::new();
        if bearer != latest || uri.path() == "/never" {
            answer.insert(
                "www-authenticate",
                "Bearer error=\"invalid_token\"".parse().unwrap(),
            );
            return (http::StatusCode::UNAUTHORIZED, answer, "forgotten".into());
        }
        (http::StatusCode::OK, answer, "served".into())
    }
    Router::new()
        .route("/connect/token", post(token))
        .route("/{*rest}", any(service))
        .with_state(seen)
}

/// An egress.toml for the testbed's key material on the `consumer` and `admin` ports, calling only
/// `provider` (3.0, plain HTTP), one call at a time within a second; a broker's route beside the
/// plain one.
fn config_for(
    data: &Path,
    urls: &Urls,
    provider: &str,
    route: &str,
    (consumer, admin): (u16, u16),
) -> String {
    format!(
        r#"
[identity]
party_id = "{CONSUMER}"
key = "{data}/parties/{CONSUMER}.key.pem"
certificate_chain = "{data}/parties/{CONSUMER}.chain.pem"
[scheme_owner]
url = "{so}"
party_id = "{SO}"
root_certificate = "{data}/ca.pem"
[outbound]
ca_file = "{data}/ca.pem"
[consumer]
address = "127.0.0.1:{consumer}"
header_timeout = "1s"
graceful_shutdown_timeout = "5s"
[admin]
address = "127.0.0.1:{admin}"
[[provider]]
name = "forgetful"
party_id = "{SP}"
url = "{provider}"
scheme_version = "3.0"
timeout = "1s"
max_concurrent = 1
[[egress]]
name = "for-others"
path = "/brokered/{{*rest}}"
provider = "forgetful"
broker = true
[[egress]]
name = "{route}"
path = "/{{*rest}}"
provider = "forgetful"
"#,
        data = data.display(),
        so = urls.of(SO),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forgotten_token_is_renewed_once_and_calls_are_bounded_reloaded_and_drained() {
    let bed = Bed::start(BIN).await;
    let urls = Urls::of_bed(&bed);
    let data = bed.keys.data_dir.clone();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let provider = Served::start(forgetful_provider(seen.clone())).await;
    let dir = scratch_dir(BIN);
    let ports = (free_port(), free_port());
    let first_config = config_for(&data, &urls, &provider.url(), "everything", ports);
    let config = written(&dir, "egress.toml", &first_config);
    let mut egress = started("forgetful", &config, ports.1).await;
    let local = format!("http://127.0.0.1:{}", ports.0);
    let http = reqwest::Client::new();
    let forget = || seen.lock().unwrap().issued += 1;
    let bearers = || -> Vec<String> {
        let seen = seen.lock().unwrap();
        seen.calls.iter().map(|(b, _)| b.clone()).collect()
    };

    // A token fetched for the call and refused is the provider's answer: not asked again.
    let resp = http.get(format!("{local}/never")).send().await.unwrap();
    assert_eq!(resp.status(), 401);
    assert_eq!(resp.text().await.unwrap(), "forgotten");
    // The token is kept; the provider then forgets it (it issued t2 since): our next call is
    // refused as invalid_token and sent once more with a fresh token.
    let resp = http.get(format!("{local}/a")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    forget();
    let resp = http.get(format!("{local}/b?x=1")).send().await.unwrap();
    assert_eq!(resp.status(), 200, "sent again with a fresh token");
    assert_eq!(resp.text().await.unwrap(), "served");
    assert_eq!(
        bearers(),
        ["Bearer t1", "Bearer t1", "Bearer t1", "Bearer t3"]
    );
    // Once per ten seconds: a provider that forgets every token costs no token request per call.
    forget();
    let resp = http.get(format!("{local}/c")).send().await.unwrap();
    assert_eq!(
        resp.status(),
        401,
        "renewed a moment ago: the answer is the provider's"
    );
    assert_eq!(bearers()[4..], ["Bearer t3"]);
    assert_eq!(seen.lock().unwrap().issued, 4, "no token asked for");
    let text = egress.metrics().await;
    let renewed = "ishare_gateway_egress_tokens_total{provider=\"forgetful\",result=\"renewed\"}";
    assert_eq!(metric(&text, renewed), 1, "{text}");
    // The provider takes t3 again.
    seen.lock().unwrap().issued = 3;

    // HTTP/2 without TLS, as a local client may speak it.
    let h2 = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let resp = h2.get(format!("{local}/brokered/h2")).send().await.unwrap();
    assert_eq!(resp.version(), http::Version::HTTP_2);
    refused_with(resp, 400, "consumer_assertion_missing").await;

    // A connection that says nothing is closed within the header timeout.
    let mut idle = tokio::net::TcpStream::connect(("127.0.0.1", ports.0))
        .await
        .unwrap();
    let mut buf = [0u8; 1];
    let read = tokio::time::timeout(
        Duration::from_secs(10),
        tokio::io::AsyncReadExt::read(&mut idle, &mut buf),
    )
    .await;
    assert!(matches!(read, Ok(Ok(0))), "{read:?}");

    // As a broker: the consumer's assertion goes in the header the provider's version (3.0)
    // names; without one, no call.
    let assertion = "e30.eyJpc3MiOiJFVS5FT1JJLk5MMDAwMDAwMDAyIn0.c2ln";
    let resp = http
        .get(format!("{local}/brokered/x"))
        .header("service_consumer_assertion", assertion)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    {
        let seen = seen.lock().unwrap();
        let (_, headers) = seen.calls.last().unwrap();
        assert!(headers.get("service_consumer_assertion").is_none());
        assert_eq!(headers["serviceconsumerassertion"], assertion);
    }
    // A consumer's assertion on a route that does not call as a broker is refused, in any
    // spelling.
    let resp = http
        .get(format!("{local}/x"))
        .header("Service-Consumer-Assertion", assertion)
        .send()
        .await
        .unwrap();
    refused_with(resp, 400, "not_a_broker").await;
    let resp = http
        .get(format!("{local}/brokered/x"))
        .send()
        .await
        .unwrap();
    refused_with(resp, 400, "consumer_assertion_missing").await;

    // One call in flight at a time: a second is answered busy at once; the first outlives its
    // timeout.
    let slow = |http: reqwest::Client| {
        let url = format!("{local}/slow");
        tokio::spawn(async move { status_json(http.get(url).send().await.unwrap()).await })
    };
    let first = slow(http.clone());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let resp = http.get(format!("{local}/d")).send().await.unwrap();
    assert_eq!(resp.headers()["retry-after"], "1");
    refused_with(resp, 503, "provider_busy").await;
    let (status, body) = first.await.unwrap();
    assert_eq!(
        (status, body["error"].as_str()),
        (504, Some("provider_timeout")),
        "{body}"
    );

    // SIGHUP takes a new configuration; one that does not load leaves the running one.
    let renamed = config_for(&data, &urls, &provider.url(), "renamed", ports);
    std::fs::write(&config, renamed).unwrap();
    egress.process.signal(libc::SIGHUP);
    let reloads = |outcome: &'static str| {
        let egress = &egress;
        async move {
            let series = format!("ishare_gateway_config_reloads_total{{outcome=\"{outcome}\"}}");
            support::process::eventually(Duration::from_secs(10), || async {
                metric(&egress.metrics().await, &series) == 1
            })
            .await
        }
    };
    assert!(reloads("ok").await, "{}", egress.process.tail());
    std::fs::write(&config, "[[egress]]\nname = \"broken\"\n").unwrap();
    egress.process.signal(libc::SIGHUP);
    assert!(reloads("refused").await, "{}", egress.process.tail());
    let resp = http.get(format!("{local}/e")).send().await.unwrap();
    assert_eq!(resp.status(), 200, "the reloaded configuration serves on");
    assert!(egress.process.output().contains("reload refused"));

    // SIGTERM lets the call in progress finish.
    let first = slow(http.clone());
    tokio::time::sleep(Duration::from_millis(300)).await;
    egress.process.signal(libc::SIGTERM);
    let status = egress.process.wait_exit(Duration::from_secs(10)).await;
    assert!(status.success(), "{status}\n{}", egress.process.tail());
    assert_eq!(first.await.unwrap().0, 504, "answered before the end");

    // SIGKILL leaves nothing that stops the next start on the same ports.
    std::fs::write(&config, &first_config).unwrap();
    let mut killed = started("killed", &config, ports.1).await;
    killed.process.signal(libc::SIGKILL);
    killed.process.wait_exit(Duration::from_secs(10)).await;
    let again = started("again", &config, ports.1).await;
    let resp = http.get(format!("{local}/f")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let (status, output) = again.terminate().await;
    assert!(status.success(), "{status}\n{output}");
    provider.stop().await.unwrap();
    bed.stop().await;
}

/// The port the shipped testbed's `party` serves on, as moved to a free one.
fn port_of(testbed: &str, party: &str) -> i64 {
    let doc: toml::Table = testbed.parse().unwrap();
    doc["party"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"].as_str() == Some(party))
        .and_then(|p| p.get("port"))
        .and_then(toml::Value::as_integer)
        .unwrap_or_else(|| panic!("{party} serves nowhere"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_3_0_consumer_brings_evidence_with_its_context_in_the_header_3_0_names() {
    let dir = scratch_dir(BIN);
    shipped_3_0_on_free_ports(&dir);
    let testbed_text = std::fs::read_to_string(dir.join("testbed-3.0.toml")).unwrap();
    let mut testbed = support::process::testbed_process(&dir.join("testbed-3.0.toml")).await;
    let gateway_config = dir.join("gateway-3.0.toml");
    let gateway_text: toml::Table = std::fs::read_to_string(&gateway_config)
        .unwrap()
        .parse()
        .unwrap();
    let admin = gateway_text["admin"]["address"].as_str().unwrap();
    let mut gateway = GatewayProcess::start(
        "gateway-3.0",
        &gateway_config,
        admin.rsplit(':').next().unwrap().parse().unwrap(),
    );
    gateway.wait_ready().await;
    let public = gateway_text["public_url"].as_str().unwrap();
    let scheme_owner = gateway_text["scheme_owner"]["url"].as_str().unwrap();
    let data = dir.join("data-3.0").display().to_string();
    let (port, admin) = (free_port(), free_port());
    let log = dir.join("egress-3.0.log");
    let text = format!(
        r#"
[identity]
party_id = "{CONSUMER3}"
key = "{data}/parties/{CONSUMER3}.key.pem"
certificate_chain = "{data}/parties/{CONSUMER3}.chain.pem"
[scheme_owner]
url = "{scheme_owner}"
party_id = "{SO3}"
root_certificate = "{data}/ca.pem"
scheme_version = "3.0"
[outbound]
ca_file = "{data}/ca.pem"
[[registry]]
name = "happy-pets"
party_id = "{AR3}"
url = "https://127.0.0.1:{registry}"
[consumer]
address = "127.0.0.1:{port}"
[admin]
address = "127.0.0.1:{admin}"
[decision_log]
path = {log:?}
[[provider]]
name = "warehouse-13"
party_id = "{SP3}"
url = "{public}"
[[egress]]
name = "documents"
path = "/api/containers/{{id}}/documents"
methods = ["GET"]
provider = "warehouse-13"
[egress.evidence]
registry = "happy-pets"
policy_issuer = "{OWNER3}"
resource_type = "CONTAINER"
identifiers = ["{{path.id}}"]
attributes = ["DOCUMENTS"]
conditions = {{ requesterLocation = "{{header.X-Region}}" }}
[[egress]]
name = "warehouse-13"
path = "/{{*rest}}"
provider = "warehouse-13"
"#,
        registry = port_of(&testbed_text, AR3),
        log = log.display().to_string(),
    );
    let config = written(&dir, "egress-3.0.toml", &text);
    let egress = started("egress-3.0", &config, admin).await;
    let http = reqwest::Client::new();
    let get = |path: &str, region: &str| {
        http.get(format!("http://127.0.0.1:{port}{path}"))
            .header("X-Region", region)
            .send()
    };

    // The documents want evidence the consumer brings: asked of the 3.0 registry with the
    // region as the policy's context, evaluated here on its condition, then sent in 3.0's
    // delegationEvidence header.
    let resp = get("/api/containers/C1/documents", "BE").await.unwrap();
    let (status, body) = status_json(resp).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["headers"]["x-consumer-party-id"], CONSUMER3, "{body}");
    let resp = get("/api/containers/C1/documents", "DE").await.unwrap();
    let body = refused_with(resp, 403, "registry_denied").await;
    assert!(
        body["error_description"]
            .as_str()
            .unwrap()
            .contains("conditions"),
        "the condition is named: {body}"
    );
    // The container itself: our token alone, the provider asks the registry.
    let (status, body) = status_json(get("/api/containers/C1", "NL").await.unwrap()).await;
    assert_eq!(status, 200, "{body}");
    let lines = log_lines(&log, 3).await;
    assert_eq!(lines[0]["evidence"]["registry"], AR3, "{}", lines[0]);
    assert_eq!(lines[0]["evidence"]["issuers"][0], OWNER3);

    let (status, output) = egress.terminate().await;
    assert!(status.success(), "{status}\n{output}");
    gateway.terminate().await;
    testbed.kill();
}
