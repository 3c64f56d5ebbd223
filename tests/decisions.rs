//! Decisions operators can see, test and roll out, through the binaries: the decision log, the
//! decision id a consumer can quote, shadow mode (said at `check` and start-up, counted, and
//! forwarded), `explain` offline and against the registry, and `test` on the shipped rules.

use crate::support;

use ishare_gateway::access_token::AccessTokens;
use ishare_gateway::scheme::party::PartyId;
use ishare_gateway::scheme::Timestamp;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use support::process::{eventually, GatewayProcess};
use support::shipped::{rules_with_a_shadow_route, shipped_gateway, shipped_offline, Urls};
use support::*;

const BIN: &str = "decisions";

/// The decision an answer names.
fn decision_id(resp: &reqwest::Response) -> String {
    resp.headers()["x-decision-id"]
        .to_str()
        .unwrap()
        .to_string()
}

/// The decision log's lines, parsed.
fn lines(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

async fn line_of(log: &Path, id: &str) -> Value {
    let found = eventually(Duration::from_secs(5), || async {
        lines(log).iter().any(|l| l["decision_id"] == id)
    })
    .await;
    assert!(found, "no line for {id} in {}", log.display());
    lines(log)
        .into_iter()
        .find(|l| l["decision_id"] == id)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_are_logged_quoted_and_shadowed_through_the_binary() {
    let bed = Bed::start(BIN).await;
    let ports = Ports::free();
    let dir = scratch_dir(BIN);
    let rules = rules_with_a_shadow_route(&dir);
    let log = dir.join("decisions.log");
    let shipped_rules = repo().join("policies").display().to_string();
    let config_text = shipped_gateway(&bed.keys.data_dir, &Urls::of_bed(&bed), &ports)
        .replace(&shipped_rules, &rules.display().to_string())
        + &format!(
            "\n[decision_log]\npath = \"{}\"\nmask = [\"caller.acting_for\"]\n",
            log.display()
        );
    let config = dir.join("gateway.toml");
    std::fs::write(&config, &config_text).unwrap();

    // check and start-up say which route is in shadow mode.
    let checked = binary_output(&["check", "--config", config.to_str().unwrap()]);
    let said = printed(&checked);
    assert!(checked.status.success(), "{said}");
    assert!(
        said.contains("warning:")
            && said.contains("containers-shadow")
            && said.contains("NOT enforced"),
        "{said}"
    );
    let mut gateway = GatewayProcess::start("decisions", &config, ports.admin);
    gateway.wait_ready().await;
    let started = gateway.process.output();
    assert!(
        started.contains("containers-shadow") && started.contains("NOT enforced"),
        "{started}"
    );

    let base = format!("http://127.0.0.1:{}", ports.plain);
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let token = access_token(&http, &base, &bed.identity(CONSUMER)).await;
    let get = |path: &str| http.get(format!("{base}{path}")).bearer_auth(&token).send();

    // A permit: the answer and the backend name the same decision, which the log holds.
    let resp = get("/api/containers/C1").await.unwrap();
    let id = decision_id(&resp);
    let (status, body) = status_json(resp).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["headers"]["x-decision-id"], id.as_str(), "{body}");
    let permit = line_of(&log, &id).await;
    assert_eq!(
        (
            &permit["route"],
            &permit["outcome"],
            &permit["reason"],
            &permit["status"]
        ),
        (
            &Value::from("containers-read"),
            &Value::from("forwarded"),
            &Value::from("granted"),
            &Value::from(200)
        ),
        "{permit}"
    );
    assert_eq!(permit["caller"]["id"], CONSUMER);
    assert_eq!(permit["evidence"]["source"], "registry");
    assert_eq!(permit["evidence"]["registry"], AR);
    assert_eq!(permit["evidence"]["issuers"][0], OWNER);
    assert_eq!(
        permit["decided_by"][0],
        "evidence[0].policySets[0].policies[0].rules[0]"
    );
    assert_eq!(permit["mask"]["identifiers"][0], "C1");
    // The same request again: the decision comes from the cache.
    let again = get("/api/containers/C1").await.unwrap();
    let again_id = decision_id(&again);
    assert_ne!(again_id, id);
    assert_eq!(
        line_of(&log, &again_id).await["evidence"]["cache_hit"],
        true
    );

    // A refusal: its body quotes the decision the header names, and the log says why.
    let resp = get("/api/containers/SECRET-1").await.unwrap();
    let id = decision_id(&resp);
    let (status, body) = status_json(resp).await;
    assert_eq!(
        (status, body["decision_id"].as_str()),
        (403, Some(id.as_str()))
    );
    let denied = line_of(&log, &id).await;
    assert_eq!(
        (&denied["outcome"], &denied["reason"], &denied["stage"]),
        (
            &Value::from("denied"),
            &Value::from("denied_by_rule"),
            &Value::from("evaluation")
        ),
        "{denied}"
    );
    // The registry answers the mask with a policy whose rule denies it.
    assert_eq!(
        denied["decided_by"][0],
        "evidence[0].policySets[0].policies[0].rules[0]"
    );

    // Shadow mode: the same Deny is made, logged and counted, and the request is forwarded.
    let resp = get("/shadow/containers/SECRET-1").await.unwrap();
    let id = decision_id(&resp);
    let (status, body) = status_json(resp).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["path"], "/shadow/containers/SECRET-1", "{body}");
    assert!(body["headers"].get("licensepurpose").is_none(), "{body}");
    let shadowed = line_of(&log, &id).await;
    assert_eq!(
        (&shadowed["mode"], &shadowed["outcome"], &shadowed["reason"]),
        (
            &Value::from("shadow"),
            &Value::from("shadow_denied"),
            &Value::from("denied_by_rule")
        ),
        "{shadowed}"
    );
    let metrics = reqwest::get(format!("{}/metrics", gateway.admin))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let counted = metric(
        &metrics,
        "ishare_gateway_requests_total",
        &[("route", "containers-shadow"), ("outcome", "shadow_denied")],
    );
    assert_eq!(counted, 1.0, "{metrics}");
    // The request's form is no decision to shadow: refused there as anywhere.
    let resp = get("/shadow/containers/C1%3B").await.unwrap();
    assert_eq!(resp.status(), 400);

    // Reload (SIGHUP) opens the log again: a log moved away (rotated) is written anew.
    let rotated = dir.join("decisions.log.1");
    std::fs::rename(&log, &rotated).unwrap();
    let generation = gateway.generation().await.unwrap();
    gateway.process.signal(libc::SIGHUP);
    gateway.reload(generation).await;
    let resp = get("/api/containers/C2").await.unwrap();
    let id = decision_id(&resp);
    assert_eq!(line_of(&log, &id).await["status"], 200);
    assert!(lines(&rotated)
        .iter()
        .all(|l| l["decision_id"] != id.as_str()));

    // SIGTERM: what was queued is written before the process ends.
    let resp = get("/api/containers/C3").await.unwrap();
    let last = decision_id(&resp);
    let (status, output) = gateway.terminate().await;
    assert!(status.success(), "{output}");
    assert!(lines(&log)
        .iter()
        .any(|l| l["decision_id"] == last.as_str()));
    bed.stop().await;
}

#[test]
fn the_shipped_rules_pass_their_tests_and_a_wrong_expectation_names_the_stage() {
    let config = offline_shipped_config();
    let junit = scratch_dir(BIN).join("rules.xml");
    let out = binary_output(&[
        "test",
        "--config",
        config.to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
    ]);
    let said = printed(&out);
    assert!(out.status.success(), "{said}");
    assert!(said.contains(" passed, 0 failed"), "{said}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("failures=\"0\""), "{xml}");
    assert!(
        xml.contains("name=\"the owner&apos;s Deny rule keeps SECRET-1 from the consumer\"")
            || xml.contains("name=\"the owner's Deny rule keeps SECRET-1 from the consumer\""),
        "{xml}"
    );

    // A fixture that expects a permit the rules do not give fails, naming the stage and rule.
    let dir = scratch_dir(BIN).join("wrong");
    std::fs::create_dir_all(dir.join("evidence")).unwrap();
    std::fs::copy(
        repo().join("policies/tests/evidence/consumer-reads-containers.json"),
        dir.join("evidence/consumer.json"),
    )
    .unwrap();
    std::fs::write(
        dir.join("wrong.toml"),
        "[[case]]\nname = \"SECRET-1 for the consumer\"\npath = \"/api/containers/SECRET-1\"\ncaller = \"EU.EORI.NL000000001\"\nregistry = \"evidence/consumer.json\"\nstatus = 200\nreason = \"granted\"\n",
    )
    .unwrap();
    let junit = dir.join("wrong.xml");
    let out = binary_output(&[
        "test",
        "--config",
        config.to_str().unwrap(),
        dir.to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
    ]);
    let said = printed(&out);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("FAIL")
            && said.contains("expected 200 granted, got 403 denied_by_rule")
            && said.contains("the evaluation stage decided otherwise")
            && said.contains("evidence[0].policySets[0].policies[0].rules[1]"),
        "{said}"
    );
    assert!(std::fs::read_to_string(&junit)
        .unwrap()
        .contains("failures=\"1\""));
}

/// The shipped configuration with this test binary's key material, for commands that ask no
/// one (the participants' addresses lead nowhere).
fn offline_shipped_config() -> PathBuf {
    let path = scratch_dir(BIN).join("offline.toml");
    std::fs::write(&path, shipped_offline(BIN).0).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_tells_what_the_shipped_rules_decide_offline_and_with_the_registry() {
    let config = offline_shipped_config();
    let evidence = repo().join("policies/tests/evidence/consumer-reads-containers.json");
    let explain = |path: &str, extra: &[&str]| {
        let mut args = vec![
            "explain",
            "--config",
            config.to_str().unwrap(),
            "--path",
            path,
            "--as",
            CONSUMER,
        ];
        args.extend_from_slice(extra);
        binary_output(&args)
    };
    let out = explain(
        "/api/containers/C1",
        &["--evidence", evidence.to_str().unwrap()],
    );
    let said = printed(&out);
    assert!(out.status.success(), "{said}");
    for expected in [
        "route       containers-read",
        "caller      party EU.EORI.NL000000001",
        "identifiers     C1 (from {path.id})",
        "mask        EU.EORI.NL000000001 may iSHARE.READ CONTAINER [C1]",
        "decided by  evidence[0].policySets[0].policies[0].rules[0]",
        "outcome     permitted: forwarded to legacy as /api/containers/C1",
    ] {
        assert!(said.contains(expected), "{expected:?} in\n{said}");
    }
    let out = explain(
        "/api/containers/SECRET-1",
        &["--evidence", evidence.to_str().unwrap(), "--json"],
    );
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (&json["reason"], &json["stage"], &json["decided_by"][0]),
        (
            &Value::from("denied_by_rule"),
            &Value::from("evaluation"),
            &Value::from("evidence[0].policySets[0].policies[0].rules[1]")
        ),
        "{json}"
    );
    // --token: the gateway's own access token names the caller (validated, as the proxy does).
    let keys = prepare_keys(&testbed_config(BIN));
    let key = std::fs::read(keys.data_dir.join(format!("parties/{SP}.key.pem"))).unwrap();
    let tokens = AccessTokens::new(&PartyId::parse(SP).unwrap(), &key, 3600, 5);
    let token = tokens.issue(
        &PartyId::parse(CONSUMER).unwrap(),
        &["iSHARE".to_string()],
        Timestamp::now(),
    );
    let with_token = |token: &str| {
        binary_output(&[
            "explain",
            "--config",
            config.to_str().unwrap(),
            "--path",
            "/api/my/shipments/2026",
            "--token",
            token,
        ])
    };
    let said = printed(&with_token(&token));
    assert!(
        said.contains("caller      party EU.EORI.NL000000001")
            && said.contains("forwarded to legacy as /api/my/shipments/2026"),
        "{said}"
    );
    // `--token -` reads it from standard input, out of sight of the process list.
    let mut piped = Command::new(env!("CARGO_BIN_EXE_ishare-gateway"))
        .args([
            "explain",
            "--config",
            config.to_str().unwrap(),
            "--path",
            "/api/my/shipments/2026",
            "--token",
            "-",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut piped.stdin.take().unwrap(), token.as_bytes()).unwrap();
    let said = printed(&piped.wait_with_output().unwrap());
    assert!(
        said.contains("caller      party EU.EORI.NL000000001"),
        "{said}"
    );
    let said = printed(&with_token("not-a-token"));
    assert!(
        said.contains("refused 401 invalid_token at the authentication stage"),
        "{said}"
    );

    // Offline without evidence for a route that asks the registry: told what to give.
    let out = explain("/api/containers/C1", &[]);
    assert!(!out.status.success());
    assert!(
        printed(&out).contains("--evidence FILE"),
        "{}",
        printed(&out)
    );

    // With --registry: the testbed's registry is asked, as the gateway would.
    let bed = Bed::start(BIN).await;
    let ports = Ports::free();
    let dir = scratch_dir(BIN);
    let live = dir.join("live.toml");
    std::fs::write(
        &live,
        shipped_gateway(&bed.keys.data_dir, &Urls::of_bed(&bed), &ports),
    )
    .unwrap();
    let out = tokio::task::spawn_blocking(move || {
        binary_output(&[
            "explain",
            "--config",
            live.to_str().unwrap(),
            "--path",
            "/api/containers/SECRET-1",
            "--as",
            CONSUMER,
            "--registry",
        ])
    })
    .await
    .unwrap();
    let said = printed(&out);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains(&format!("evidence    the registry {AR}: issued by {OWNER}"))
            && said.contains("refused 403 denied_by_rule at the evaluation stage"),
        "{said}"
    );
    bed.stop().await;
}
