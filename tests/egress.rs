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
use support::{free_port, scratch_dir, status_json, Bed, Ports, AR, CONSUMER, OWNER, SO, SP};

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
    let (status, body) =
        status_json(get("/api/containers/SECRET-1/documents").await.unwrap()).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (403, Some("registry_denied")),
        "{body}"
    );
    assert!(
        body["error_description"].as_str().unwrap().contains("Deny"),
        "{body}"
    );
    // Evidence the client gives where the route brings its own is refused, not forwarded.
    let resp = http
        .get(format!("{local}/api/containers/C1/documents"))
        .header("delegation_evidence", "e30.e30.sig")
        .send()
        .await
        .unwrap();
    let (status, body) = status_json(resp).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("evidence_given")),
        "{body}"
    );
    // A path that is none is refused with its reason.
    let (status, body) = status_json(get("/api/containers/%2F..%2Fsecret").await.unwrap()).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("bad_path")),
        "{body}"
    );

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

    // The first call fetches t1. The provider then forgets it (it issued t2 since): our next
    // call is refused as invalid_token and sent once more with a fresh token.
    let resp = http.get(format!("{local}/a")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    forget();
    let resp = http.get(format!("{local}/b?x=1")).send().await.unwrap();
    assert_eq!(resp.status(), 200, "sent again with a fresh token");
    assert_eq!(resp.text().await.unwrap(), "served");
    assert_eq!(bearers(), ["Bearer t1", "Bearer t1", "Bearer t3"]);
    // A fresh token refused too is the provider's answer: not asked a third time.
    forget();
    let resp = http.get(format!("{local}/never")).send().await.unwrap();
    assert_eq!(resp.status(), 401);
    assert_eq!(resp.text().await.unwrap(), "forgotten");
    assert_eq!(bearers()[3..], ["Bearer t3", "Bearer t5"]);
    let text = egress.metrics().await;
    let renewed = "ishare_gateway_egress_tokens_total{provider=\"forgetful\",result=\"renewed\"}";
    assert_eq!(metric(&text, renewed), 2, "{text}");

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
    let resp = http
        .get(format!("{local}/brokered/x"))
        .send()
        .await
        .unwrap();
    let (status, body) = status_json(resp).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("consumer_assertion_missing")),
        "{body}"
    );

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
    let (status, body) = status_json(resp).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (503, Some("provider_busy")),
        "{body}"
    );
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
