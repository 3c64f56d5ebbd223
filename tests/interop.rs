//! Interop: a real client library (python-ishare 0.0.3), curl over HTTP/2, a satellite without
//! `/capabilities`, and what start-up and `check` say about configurations real satellites refuse.

use crate::support;

use ishare_gateway::scheme::trust::certificate_subject;
use ishare_gateway::scheme::Timestamp;
use ishare_gateway::testbed::pki::TestPki;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;
use support::*;

const BIN: &str = "interop";

const RULES: &str = r#"
[[route]]
name = "things"
methods = ["GET", "PUT", "POST"]
path = "/api/things/{id}"
upstream = "echo"
advertise = true
[route.delegation]
policy_issuer = "EU.EORI.NL000000005"
resource_type = "THING"
identifiers = ["{path.id}"]
evidence = ["header"]

[[route]]
name = "reports"
methods = ["GET"]
path = "/api/reports"
upstream = "echo"
"#;

/// The tests here start processes (curl, python, the gateway's binary) beside in-process servers;
/// they take turns, so that one test's processes and shutdowns never overlap another's.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Run a program (bounded in time) and return what it wrote.
fn run(
    program: &str,
    args: &[&str],
    envs: &[(&str, String)],
) -> impl std::future::Future<Output = Output> + use<> {
    let mut command = tokio::process::Command::new(program);
    command.args(args).kill_on_drop(true);
    for (k, v) in envs {
        command.env(k, v);
    }
    async move {
        tokio::time::timeout(Duration::from_secs(120), command.output())
            .await
            .expect("the program finishes within two minutes")
            .expect("the program starts")
    }
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_ishare_gets_tokens_capabilities_and_verifies_our_assertions() {
    let _turn = TURN.lock().await;
    let python = interop_python();
    let env = Env::start(BIN, RULES, |_| String::new()).await;
    let keys = env.bed.keys;
    let assertion = env
        .state()
        .current
        .load()
        .peer
        .identity()
        .client_assertion(SO, Timestamp::now())
        .unwrap();
    let path = |p: PathBuf| p.display().to_string();
    let out = run(
        python.to_str().unwrap(),
        &[repo()
            .join("tests/interop/python_ishare_client.py")
            .to_str()
            .unwrap()],
        &[
            ("GATEWAY_URL", env.url.clone()),
            ("GATEWAY_ID", SP.to_string()),
            ("SO_URL", env.bed.url(SO)),
            ("SO_ID", SO.to_string()),
            ("CLIENT_ID", CONSUMER.to_string()),
            ("CLIENT_KEY", path(keys.party_key_file(CONSUMER))),
            ("CLIENT_CHAIN", path(keys.party_chain_file(CONSUMER))),
            ("GATEWAY_CHAIN", path(keys.party_chain_file(SP))),
            ("SO_CHAIN", path(keys.party_chain_file(SO))),
            ("ROOT", path(keys.ca_file.clone())),
            ("GATEWAY_ASSERTION", assertion),
        ],
    )
    .await;
    let report = text(&out);
    let results: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    for check in [
        "gateway_assertion_valid",
        "gateway_token",
        "gateway_capabilities_anonymous",
        "gateway_capabilities_restricted",
        "scheme_owner_versions_anonymous",
        "scheme_owner_versions_restricted",
        "scheme_owner_trusted_list",
        "scheme_owner_verifies_gateway_assertion",
        "scheme_owner_verify_party",
    ] {
        let result = results
            .iter()
            .find(|r| r["check"] == check)
            .unwrap_or_else(|| panic!("no result for {check}:\n{report}"));
        assert_eq!(
            result["ok"], true,
            "{check}: {}\n{report}",
            result["detail"]
        );
    }
    assert!(out.status.success(), "{report}");
    // The token python-ishare got is one of ours, counted as issued.
    let metrics = env.metrics().await;
    assert!(
        metric(
            &metrics,
            "ishare_gateway_tokens_total",
            &[("outcome", "issued")]
        ) >= 1.0,
        "{metrics}"
    );
    env.stop().await;
}

/// `curl --http2` with a request body the gateway answers without reading (401, 403, 404, 405):
/// every answer arrives whole, with curl's exit status 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_over_http2_gets_clean_answers_to_bodies_we_refuse() {
    let _turn = TURN.lock().await;
    let env = Env::start(BIN, RULES, |_| String::new()).await;
    let token = env.token(CONSUMER).await;
    let body = env.dir.join("body.json");
    std::fs::write(
        &body,
        format!("{{\"data\": \"{}\"}}", "x".repeat(16 * 1024)),
    )
    .unwrap();
    let ca = env.bed.keys.ca_file.display().to_string();
    let auth = format!("Authorization: Bearer {token}");
    let cases: [(&str, &str, bool, &str); 4] = [
        ("PUT", "/api/things/T1", true, "403"),
        ("POST", "/api/things/T1", false, "401"),
        ("POST", "/api/nothing/here", true, "404"),
        ("POST", "/api/reports", true, "405"),
    ];
    for (method, path, with_token, expected) in cases {
        for payload in ["{\"a\": 1}".to_string(), format!("@{}", body.display())] {
            for attempt in 0..20 {
                let url = format!("{}{path}", env.url);
                let mut args = vec![
                    "--http2",
                    "-sS",
                    "--cacert",
                    &ca,
                    "-o",
                    "/dev/null",
                    "-w",
                    "%{http_code} %{http_version}",
                    "-X",
                    method,
                    "-H",
                    "Content-Type: application/json",
                    "--data-binary",
                    &payload,
                ];
                if with_token {
                    args.extend(["-H", &auth]);
                }
                args.push(&url);
                let out = run("curl", &args, &[]).await;
                assert!(
                    out.status.success(),
                    "{method} {path} (try {attempt}): curl exit {:?}: {}",
                    out.status.code(),
                    text(&out)
                );
                assert_eq!(
                    String::from_utf8_lossy(&out.stdout),
                    format!("{expected} 2"),
                    "{method} {path}"
                );
            }
        }
    }
    env.stop().await;
}

/// A satellite without `/capabilities` and without `/parties/{party_id}`: the client takes the
/// audience from `--audience`, and finds one party by the search.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_commands_work_at_a_satellite_without_capabilities_or_party_by_id() {
    let _turn = TURN.lock().await;
    let bed = Bed::start(BIN).await;
    let quirks = satellite::Quirks {
        missing: vec!["/capabilities", "/parties/"],
        ..Default::default()
    };
    let proxy = satellite::Satellite::start(&bed.url(SO), bed.http.clone(), quirks).await;
    let satellite = proxy.url.clone();
    let data = bed.keys.data_dir.display().to_string();
    let client = |extra: &[&str]| {
        let mut args = vec!["client", "--testbed", data.as_str(), "--as", CONSUMER];
        args.extend_from_slice(extra);
        run(env!("CARGO_BIN_EXE_ishare-gateway"), &args, &[])
    };

    let out = client(&["trusted-list", "--url", &satellite]).await;
    assert!(!out.status.success());
    assert!(
        text(&out).contains("give it with --audience PARTY_ID"),
        "{}",
        text(&out)
    );

    let subject = certificate_subject(bed.keys.pki.root_der()).unwrap();
    for (command, expected) in [
        (vec!["trusted-list", "--url", &satellite], subject.as_str()),
        (
            vec![
                "parties",
                "--url",
                &satellite,
                "--query",
                "eori=EU.EORI.NL000000005",
            ],
            "Happy Pets",
        ),
        (
            vec!["party", "--url", &satellite, "--id", OWNER],
            "Happy Pets",
        ),
        (
            vec!["party", "--url", &satellite, "--id", OWNER],
            &format!("has no /parties/{OWNER}: found by /parties?eori={OWNER}"),
        ),
        (vec!["token", "--url", &satellite], "access_token"),
    ] {
        let mut extra = command.clone();
        extra.extend(["--audience", SO]);
        let out = client(&extra).await;
        assert!(out.status.success(), "{command:?}: {}", text(&out));
        assert!(
            text(&out).contains(expected),
            "{command:?} shows {expected:?}: {}",
            text(&out)
        );
    }
    let out = client(&[
        "party",
        "--url",
        &satellite,
        "--id",
        "EU.EORI.NL000000077",
        "--audience",
        SO,
    ])
    .await;
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("knows no party EU.EORI.NL000000077"),
        "{}",
        text(&out)
    );
    proxy.stop().await;
    bed.stop().await;
}

/// The gateway in front of a satellite without `/parties/{party_id}`: after one 404 there for a
/// party the search finds, it asks the search alone (one round trip per party, not two).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_remembers_that_a_satellite_has_no_party_by_id() {
    let _turn = TURN.lock().await;
    let bed = Bed::start(BIN).await;
    let quirks = satellite::Quirks {
        missing: vec!["/parties/"],
        ..Default::default()
    };
    let satellite = satellite::Satellite::start(&bed.url(SO), bed.http.clone(), quirks).await;
    let so = bed.url(SO);
    let (dir, ports) = gateway_dir(&bed, BIN, RULES, "", |toml| {
        toml.replace(
            &format!("url = \"{so}\""),
            &format!("url = \"{}\"", satellite.url),
        )
    });
    let env = Env::launch(bed, dir, &ports).await;
    let by_id = || satellite.requests(|p| p.starts_with("/parties/"));
    let search = || satellite.requests(|p| p == "/parties");

    env.token(CONSUMER).await;
    let (by_id_first, search_first) = (by_id(), search());
    assert!(by_id_first >= 1, "/parties/{{id}} was not tried");
    assert!(search_first >= 1, "the search was not tried");

    env.token(SP2).await;
    assert_eq!(by_id(), by_id_first, "/parties/{{id}} asked again");
    assert_eq!(search(), search_first + 1, "one search for the new party");
    env.stop().await;
    satellite.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_testbed_scheme_owner_serves_versions_and_full_subjects() {
    let _turn = TURN.lock().await;
    let bed = Bed::start(BIN).await;
    let token = bed.token(SO, CONSUMER).await;
    // The signed payload of GET `path` at the scheme owner (with `token`, if any), read from
    // `member`; the status otherwise.
    let get = |path: &str, token: Option<&str>, member: &'static str| {
        let mut request = bed.http.get(format!("{}{path}", bed.url(SO)));
        if let Some(t) = token {
            request = request.bearer_auth(t);
        }
        async move {
            let (status, body) = status_json(request.send().await.unwrap()).await;
            match body[member].as_str() {
                Some(jwt) if status == 200 => Ok(claims(jwt)),
                _ => Err(status),
            }
        }
    };

    let anonymous = get("/versions", None, "versions_token").await.unwrap();
    assert_eq!(anonymous["iss"], SO);
    assert!(anonymous.get("aud").is_none(), "{anonymous}");
    assert_eq!(anonymous["versions_info"][0]["version_name"], "2.0");
    assert_eq!(anonymous["versions_info"][0]["version_status"], "Active");
    let addressed = get("/versions", Some(&token), "versions_token")
        .await
        .unwrap();
    assert_eq!(addressed["aud"], CONSUMER);
    assert_eq!(
        get("/versions", Some("not-a-token"), "versions_token").await,
        Err(401)
    );

    // The trusted list names the root by its whole subject, as RFC 4514 writes it.
    let list = get("/trusted_list", Some(&token), "trusted_list_token")
        .await
        .unwrap();
    assert_eq!(
        list["trusted_list"][0]["subject"],
        "CN=Testbed Test Root CA,O=Testbed Test PKI,C=NL"
    );
    // python-ishare's verify_party asks with capitalised booleans.
    let query = format!("/parties?eori={SP}&certified_only=True&active_only=True");
    let parties = get(&query, Some(&token), "parties_token").await.unwrap();
    assert_eq!(parties["parties_info"]["count"], 1);
    bed.stop().await;
}

/// `ishare-gateway check` on one config file: success and what it printed.
async fn check(config: &Path) -> (bool, String) {
    let out = run(
        env!("CARGO_BIN_EXE_ishare-gateway"),
        &["check", "--config", config.to_str().unwrap()],
        &[],
    )
    .await;
    (out.status.success(), text(&out))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_refuses_a_chain_without_its_root_and_warns_of_plain_http() {
    let _turn = TURN.lock().await;
    let bed = Bed::start(BIN).await;
    let data = bed.keys.data_dir.clone();
    let chain = std::fs::read_to_string(bed.keys.party_chain_file(SP)).unwrap();
    let blocks: Vec<&str> = chain
        .split_inclusive("-----END CERTIFICATE-----")
        .filter(|b| b.contains("BEGIN"))
        .collect();
    assert_eq!(blocks.len(), 3, "leaf, intermediate, root");
    let (dir, _) = gateway_dir(&bed, BIN, RULES, "", |t| t);
    std::fs::write(dir.join("no-root.pem"), blocks[..2].concat()).unwrap();
    let config = dir.join("gateway.toml");
    let text = std::fs::read_to_string(&config).unwrap();

    let (ok, report) = check(&config).await;
    assert!(ok, "{report}");
    assert!(!report.contains("warning"), "{report}");

    std::fs::write(
        &config,
        text.replace(
            &format!("{}/parties/{SP}.chain.pem", data.display()),
            &dir.join("no-root.pem").display().to_string(),
        ),
    )
    .unwrap();
    let (ok, report) = check(&config).await;
    assert!(!ok, "{report}");
    assert!(
        report.contains("identity.certificate_chain: the chain ends at CN=Testbed Test Intermediate CA,O=Testbed Test PKI,C=NL, issued by CN=Testbed Test Root CA,O=Testbed Test PKI,C=NL: add the certificates up to the root"),
        "{report}"
    );

    std::fs::write(&config, text.replace(&bed.url(SO), "http://127.0.0.1:9")).unwrap();
    let (ok, report) = check(&config).await;
    assert!(ok, "{report}");
    assert!(
        report.contains("warning: ")
            && report.contains("scheme_owner.url: http://127.0.0.1:9 is plain HTTP"),
        "{report}"
    );
    let _ = std::fs::remove_dir_all(dir);
    bed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_up_says_when_our_own_chain_is_not_trusted() {
    let _turn = TURN.lock().await;
    let bed = Bed::start(BIN).await;
    // An identity from a CA the scheme does not trust, with the scheme's trusted list given as a
    // file: the gateway can verify others, but every participant would refuse its assertions.
    let other = TestPki::generate("Other", time::OffsetDateTime::now_utc()).unwrap();
    let creds = other.issue_party(SP, "Warehouse 13").unwrap();
    let (dir, ports) = gateway_dir(&bed, BIN, RULES, "", |t| t);
    std::fs::write(dir.join("other.key.pem"), &creds.key_pem).unwrap();
    std::fs::write(dir.join("other.chain.pem"), &creds.chain_pem).unwrap();
    std::fs::write(
        dir.join("trusted.json"),
        serde_json::to_string(&[bed.keys.pki.trusted_list_entry()]).unwrap(),
    )
    .unwrap();
    let data = bed.keys.data_dir.display().to_string();
    let config = dir.join("gateway.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace(&format!("{data}/parties/{SP}.key.pem"), "other.key.pem")
            .replace(&format!("{data}/parties/{SP}.chain.pem"), "other.chain.pem")
            .replace(
                &format!("root_certificate = \"{data}/ca.pem\""),
                "trusted_list_file = \"trusted.json\"",
            ),
    )
    .unwrap();
    let (ok, report) = check(&config).await;
    assert!(ok, "{report}");
    assert!(
        report.contains("identity.certificate_chain: the chain's root")
            && report
                .contains("is not the scheme owner's pinned root nor on a configured trusted list"),
        "{report}"
    );

    let gateway = launch(&dir);
    let (status, body) = readiness(&format!("http://127.0.0.1:{}", ports.admin)).await;
    assert_eq!(status, 503, "{body}");
    assert!(
        body["problems"].to_string().contains(
            "the gateway's own certificate chain is not trusted under the scheme owner's trusted list"
        ) && body["problems"].to_string().contains("is not on the trusted list"),
        "{body}"
    );
    tokio::task::spawn_blocking(move || gateway.stop())
        .await
        .unwrap();

    // Without the file, the scheme owner refuses the gateway's own token request: /ready says why.
    std::fs::write(
        &config,
        text.replace(&format!("{data}/parties/{SP}.key.pem"), "other.key.pem")
            .replace(&format!("{data}/parties/{SP}.chain.pem"), "other.chain.pem"),
    )
    .unwrap();
    let gateway = launch(&dir);
    let mut problems = String::new();
    for _ in 0..100 {
        let (status, body) = readiness(&format!("http://127.0.0.1:{}", ports.admin)).await;
        problems = body["problems"].to_string();
        if status == 503 && problems.contains("no trusted list yet: ") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(problems.contains("untrusted_root"), "{problems}");
    tokio::task::spawn_blocking(move || gateway.stop())
        .await
        .unwrap();
    let _ = std::fs::remove_dir_all(dir);
    bed.stop().await;
}
