//! The conformance checker against the gateway, against every participant of the testbed, against
//! a participant that gets the scheme wrong on purpose, and (as the binary) holding the testbed to
//! 3.0, which it does not speak.

use crate::support;

use axum::http::{header, Method, StatusCode};
use axum::response::IntoResponse;
use axum::routing::any;
use axum::Json;
use base64::Engine;
use clap::Parser;
use ishare_gateway::cli::conformance::{options, ConformanceArgs};
use ishare_gateway::conformance::{report, run, Outcome, Report};
use ishare_gateway::scheme::capabilities::CapabilitiesInfo;
use ishare_gateway::scheme::jwt::SigningIdentity;
use ishare_gateway::scheme::vocabulary::Role;
use ishare_gateway::scheme::Timestamp;
use serde_json::json;
use std::collections::HashMap;
use std::path::Path;
use support::*;

const BIN: &str = "conformance";

const RULES: &str = r#"
[[route]]
name = "status"
methods = ["GET"]
path = "/status"
upstream = "echo"
auth = "public"

[[route]]
name = "containers-read"
methods = ["GET"]
path = "/api/containers/{id}"
upstream = "echo"
[route.delegation]
policy_issuer = "EU.EORI.NL000000005"
resource_type = "CONTAINER"
identifiers = ["{path.id}"]
"#;

fn mask(kind: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("conf/conformance/{kind}-mask.json"))
        .display()
        .to_string()
}

async fn check(bed: &Bed, role: &str, target: &str, target_id: &str, extra: &[&str]) -> Report {
    let data_dir = bed.keys.data_dir.display().to_string();
    let mut argv = vec![
        "conformance".to_string(),
        "--role".into(),
        role.into(),
        "--target".into(),
        target.into(),
        "--target-id".into(),
        target_id.into(),
        "--testbed".into(),
        data_dir,
    ];
    if role == "authorisation-registry" {
        argv.extend([
            "--permit-mask".into(),
            mask("permit"),
            "--deny-mask".into(),
            mask("deny"),
        ]);
    }
    argv.extend(extra.iter().map(|a| a.to_string()));
    let args = ConformanceArgs::try_parse_from(argv).expect("the arguments parse");
    run(&options(&args).expect("the options hold")).await
}

fn case<'a>(report: &'a Report, name: &str) -> &'a ishare_gateway::conformance::CaseResult {
    report
        .cases
        .iter()
        .find(|c| format!("{}: {}", c.group, c.name) == name)
        .unwrap_or_else(|| panic!("no case {name}:\n{}", report::table(report)))
}

/// No message of a JUnit report says a thing twice (the expected and got columns again in the
/// reason, say).
fn assert_messages_say_each_thing_once(xml: &str) {
    for message in xml.split("message=\"").skip(1) {
        let message = message.split('"').next().unwrap_or_default();
        let parts: Vec<&str> = message.split([':', ',']).map(str::trim).collect();
        for (i, part) in parts.iter().enumerate() {
            assert!(
                !parts[i + 1..].contains(part),
                "{part:?} twice in {message:?}"
            );
        }
    }
}

fn assert_passes(report: &Report, at_least: usize, skipped: &[&str]) {
    let table = report::table(report);
    assert_eq!(report.failures(), 0, "{table}");
    let were_skipped: Vec<String> = report
        .cases
        .iter()
        .filter(|c| c.outcome == Outcome::Skipped)
        .map(|c| format!("{}: {}", c.group, c.name))
        .collect();
    assert_eq!(were_skipped, skipped, "{table}");
    assert!(report.cases.len() >= at_least, "{table}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_passes_as_a_service_provider() {
    let env = Env::start(BIN, RULES, |_| String::new()).await;
    let report = check(
        &env.bed,
        "service-provider",
        &env.url,
        SP,
        &["--broker-resource", "/api/containers/C1"],
    )
    .await;
    assert_passes(&report, 44, &[]);
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    for name in [
        "capabilities: CAPABILITIES WITH A TOKEN",
        "token: VALID ASSERTION",
        "token: INVALID CERTIFICATE",
        "token: UNKNOWN CLIENT ID",
        "token: CLIENT ID NOT ACTIVE",
        "broker: BROKER WITH A CONSUMER ASSERTION",
        "broker: BROKER ASSERTION REPLAYED",
        "broker: BROKER ASSERTION FOR ANOTHER CALLER",
    ] {
        assert_eq!(case(&report, name).outcome, Outcome::Pass, "{name}");
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_testbed_participant_passes_in_its_role() {
    let bed = Bed::start(BIN).await;
    for (role, party, at_least) in [
        ("scheme-owner", SO, 42),
        ("service-provider", SP2, 38),
        ("authorisation-registry", AR, 70),
        ("authorisation-registry", OWNER, 70),
    ] {
        let report = check(&bed, role, &bed.url(party), party, &[]).await;
        // The testbed's service providers offer no broker pattern.
        let skipped: &[&str] = if role == "service-provider" {
            &["broker: BROKER WITH A CONSUMER ASSERTION"]
        } else {
            &[]
        };
        assert_passes(&report, at_least, skipped);
    }
    let idp = "EU.EORI.NL000000007";
    let report = check(
        &bed,
        "identity-provider",
        &bed.url(idp),
        idp,
        &["--person", "jane:jane-testbed-password"],
    )
    .await;
    assert_passes(&report, 54, &[]);
    for name in [
        "authorize: REQUEST OBJECT NOT ENCRYPTED",
        "authorize: PLAIN SCOPE DIFFERS FROM THE REQUEST OBJECT",
        "sign-in: THE SAME CODE AGAIN",
        "sign-in: USERINFO",
    ] {
        assert_eq!(case(&report, name).outcome, Outcome::Pass, "{name}");
    }
    // Without a person to sign in as, the flow is skipped, never passed.
    let report = check(&bed, "identity-provider", &bed.url(idp), idp, &[]).await;
    assert_eq!(case(&report, "sign-in: SIGN IN").outcome, Outcome::Skipped);
    // A service provider is no identity provider: its authorize cases fail, by name.
    let report = check(&bed, "identity-provider", &bed.url(SP2), SP2, &[]).await;
    for name in [
        "authorize: AUTHORIZE",
        "authorize: REQUEST OBJECT NOT ENCRYPTED",
    ] {
        assert_eq!(case(&report, name).outcome, Outcome::Fail, "{name}");
    }
    bed.stop().await;
}

/// A participant that gets the scheme wrong: capabilities signed under a root nobody trusts, a
/// token endpoint that answers 401 for a wrong method and for an assertion without `typ`, and
/// accepts everything else, expired assertions included.
async fn broken_participant(untrusted: SigningIdentity) -> String {
    let capabilities = any(move |method: Method| {
        let untrusted = untrusted.clone();
        async move {
            if method != Method::GET {
                return StatusCode::METHOD_NOT_ALLOWED.into_response();
            }
            let info = CapabilitiesInfo::of_party("iSHARE", SP, Role::ServiceProvider, "", None);
            let token = untrusted
                .sign_token(
                    SP,
                    None,
                    &info.token_claims(ishare_gateway::scheme::version::SchemeVersion::V1_9),
                    Timestamp::now(),
                    30,
                )
                .expect("signing");
            Json(json!({ "capabilities_token": token })).into_response()
        }
    });
    let token = any(|method: Method, body: axum::body::Bytes| async move {
        if method != Method::POST {
            return StatusCode::UNAUTHORIZED.into_response();
        }
        let form: HashMap<String, String> =
            url::form_urlencoded::parse(&body).into_owned().collect();
        let header = form
            .get("client_assertion")
            .and_then(|a| a.split('.').next())
            .and_then(|h| {
                base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .decode(h)
                    .ok()
            })
            .and_then(|h| serde_json::from_slice::<serde_json::Value>(&h).ok())
            .unwrap_or_default();
        if header.get("typ").is_none() {
            return StatusCode::UNAUTHORIZED.into_response();
        }
        (
            [(header::CACHE_CONTROL, "no-store")],
            Json(json!({"access_token": "a.b.c", "token_type": "Bearer", "expires_in": 3600})),
        )
            .into_response()
    });
    let app: axum::Router = axum::Router::new()
        .route("/capabilities", capabilities)
        .route("/connect/token", token);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_participant_fails_and_the_report_names_the_cases() {
    let bed = Bed::start(BIN).await;
    let untrusted = ishare_gateway::testbed::pki::TestPki::shared()
        .party(SP)
        .signing_identity();
    let url = broken_participant(untrusted).await;
    let report = check(&bed, "service-provider", &url, SP, &[]).await;
    let with_reason = |name: &str, got: &str, reason: &str| {
        let c = case(&report, name);
        assert_eq!(c.outcome, Outcome::Fail, "{name}: {c:?}");
        assert!(c.got.starts_with(got), "{name}: {c:?}");
        assert!(c.reason.contains(reason), "{name}: {c:?}");
    };
    with_reason(
        "capabilities: PUBLIC CAPABILITIES",
        "200",
        "capabilities_token: x5c chain",
    );
    const NOT_AS_THE_SCHEME: &str = "refused, but not as the scheme says";
    const SERVED: &str = "served, where the scheme refuses";
    with_reason("token: HTTP WRONG METHOD", "401", NOT_AS_THE_SCHEME);
    with_reason("token: ASSERTION MISSING TYP", "401", NOT_AS_THE_SCHEME);
    with_reason("token: ASSERTION EXPIRED", "200", SERVED);
    with_reason("token: ASSERTION REPLAYED", "200", SERVED);
    with_reason(
        "capabilities: ACCESS TOKEN INVALID SIGNATURE",
        "200",
        SERVED,
    );
    assert_eq!(
        case(&report, "token: VALID ASSERTION").outcome,
        Outcome::Pass,
        "{}",
        report::table(&report)
    );
    assert!(
        report.warnings.iter().any(|w| w.contains("plain HTTP")),
        "{:?}",
        report.warnings
    );
    let xml = report::junit(&report);
    assert!(
        xml.contains(&format!(
            "name=\"ASSERTION EXPIRED\"><failure message=\"expected 400, got 200: {SERVED}\"/>"
        )),
        "{xml}"
    );
    assert_messages_say_each_thing_once(&xml);
    bed.stop().await;
}

/// The testbed's scheme owner behind a satellite with `quirks`, checked as a scheme owner; stop
/// both at the end.
async fn check_satellite(quirks: satellite::Quirks) -> (Bed, satellite::Satellite, Report) {
    let bed = Bed::start(BIN).await;
    let satellite = satellite::Satellite::start(&bed.url(SO), bed.http.clone(), quirks).await;
    let report = check(&bed, "scheme-owner", &satellite.url, SO, &[]).await;
    (bed, satellite, report)
}

/// A satellite (the testbed's scheme owner behind a proxy) that answers a good assertion with a
/// token but without `Cache-Control: no-store`, and accepts the same assertion again: the missing
/// header fails a case of its own, and the replay is still tried, and fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_answer_that_may_be_stored_does_not_hide_a_replay() {
    let (bed, satellite, report) = check_satellite(satellite::Quirks {
        cacheable: true,
        replays_accepted: true,
        ..Default::default()
    })
    .await;
    let table = report::table(&report);
    let valid = case(&report, "token: VALID ASSERTION");
    assert_eq!(valid.outcome, Outcome::Pass, "{table}");
    let no_store = case(&report, "token: CACHE-CONTROL NO-STORE");
    assert_eq!(no_store.outcome, Outcome::Fail, "{table}");
    assert_eq!(no_store.got, "no Cache-Control", "{table}");
    assert!(no_store.reason.contains("RFC 6749 §5.1"), "{table}");
    let replayed = case(&report, "token: ASSERTION REPLAYED");
    assert_eq!(replayed.outcome, Outcome::Fail, "{table}");
    assert!(replayed.got.starts_with("200"), "{table}");
    assert_eq!(
        replayed.reason, "served, where the scheme refuses",
        "{table}"
    );
    satellite.stop().await;
    bed.stop().await;
}

/// A satellite without `/capabilities` that reads the query of `/parties` before its token: one
/// case fails for the missing endpoint and those that need it are not tried; the access-token
/// defects are tried at `/parties?eori=…` instead, and each case of `/parties` and
/// `/trusted_list` has one defect only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_endpoint_fails_one_case_and_its_dependents_are_not_tried() {
    let (bed, satellite, report) = check_satellite(satellite::Quirks {
        missing: vec!["/capabilities"],
        query_before_token: true,
        ..Default::default()
    })
    .await;
    let table = report::table(&report);
    let missing = case(&report, "capabilities: PUBLIC CAPABILITIES");
    assert_eq!(missing.outcome, Outcome::Fail, "{table}");
    assert_eq!(missing.got, "404", "{table}");
    assert_eq!(missing.reason, "not found here", "{table}");
    let dependents: Vec<&str> = report
        .cases
        .iter()
        .filter(|c| c.group == "capabilities" && c.outcome == Outcome::NotTried)
        .inspect(|c| assert_eq!(c.reason, "/capabilities is missing (PUBLIC CAPABILITIES)"))
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(
        dependents,
        [
            "HTTP WRONG METHOD",
            "CAPABILITIES WITH A TOKEN",
            "HTTP WRONG METHOD WITH A TOKEN",
            "ACCESS TOKEN INVALID SIGNATURE",
            "ACCESS TOKEN MISSING SIGNATURE",
            "AUTHORIZATION NOT BEARER",
        ],
        "{table}"
    );
    assert_eq!(report.failures(), 1, "{table}");
    for name in [
        "parties: PARTIES WITHOUT A TOKEN",
        "parties: PARTIES WITHOUT A QUERY",
        "parties: PARTIES BY EORI",
        "parties: ACCESS TOKEN INVALID SIGNATURE",
        "parties: ACCESS TOKEN MISSING SIGNATURE",
        "parties: AUTHORIZATION NOT BEARER",
        "trusted_list: TRUSTED LIST WITHOUT A TOKEN",
        "trusted_list: TRUSTED LIST",
    ] {
        assert_eq!(
            case(&report, name).outcome,
            Outcome::Pass,
            "{name}\n{table}"
        );
    }
    assert!(
        table.ends_with("1 failed, 0 skipped, 6 not tried\n"),
        "{table}"
    );
    let xml = report::junit(&report);
    assert!(
        xml.contains("name=\"CAPABILITIES WITH A TOKEN\"><skipped message=\"not tried: /capabilities is missing (PUBLIC CAPABILITIES)\"/>"),
        "{xml}"
    );
    assert!(
        xml.contains("name=\"PUBLIC CAPABILITIES\"><failure message=\"expected 200, signed capabilities, got 404: not found here\"/>"),
        "{xml}"
    );
    assert_messages_say_each_thing_once(&xml);
    satellite.stop().await;
    bed.stop().await;
}

/// A "broker resource" that serves every defective consumer assertion does not use the broker
/// pattern: one case says so. One that does not serve the good call leaves the defects untried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_without_the_broker_pattern_fails_one_case() {
    let bed = Bed::start(BIN).await;
    let echo = format!("{}/anything", bed.testbed.echo_url);
    let report = check(
        &bed,
        "service-provider",
        &bed.url(SP2),
        SP2,
        &["--broker-resource", &echo],
    )
    .await;
    let table = report::table(&report);
    let broker: Vec<(&str, Outcome)> = report
        .cases
        .iter()
        .filter(|c| c.group == "broker")
        .map(|c| (c.name.as_str(), c.outcome))
        .collect();
    assert_eq!(
        broker,
        [
            ("BROKER WITH A CONSUMER ASSERTION", Outcome::Pass),
            ("BROKER ASSERTION CHECKED", Outcome::Fail),
        ],
        "{table}"
    );
    let checked = case(&report, "broker: BROKER ASSERTION CHECKED");
    assert_eq!(
        checked.reason,
        format!("{echo} served each defective service_consumer_assertion: it does not use the broker pattern"),
        "{table}"
    );
    assert_eq!(report.failures(), 1, "{table}");

    let report = check(
        &bed,
        "service-provider",
        &bed.url(SP2),
        SP2,
        &["--broker-resource", "/no/such/resource"],
    )
    .await;
    let table = report::table(&report);
    assert_eq!(
        case(&report, "broker: BROKER WITH A CONSUMER ASSERTION").outcome,
        Outcome::Fail,
        "{table}"
    );
    let not_tried = report
        .cases
        .iter()
        .filter(|c| c.group == "broker" && c.outcome == Outcome::NotTried)
        .count();
    assert_eq!(not_tried, 5, "{table}");
    assert_eq!(report.failures(), 1, "{table}");
    bed.stop().await;
}

/// `ishare-gateway conformance --scheme-version 3.0` (the real binary) against the testbed's
/// `party` in `role`, acting as the testbed's 1.9 parties; a registry with masks as 3.0 writes
/// them (no service provider named).
async fn held_to_3_0(bed: &Bed, role: &str, party: &str) -> checker::Checked {
    let (target, data_dir) = (bed.url(party), bed.keys.data_dir.display().to_string());
    let mut args = vec![
        "--scheme-version",
        "3.0",
        "--role",
        role,
        "--target",
        &target,
        "--target-id",
        party,
        "--testbed",
        &data_dir,
        "--as",
        CONSUMER,
        "--sp-as",
        SP,
        "--inactive-as",
        INACTIVE,
        "--unknown-as",
        "EU.EORI.NL999999999",
    ];
    let masks = (role == "authorisation-registry")
        .then(|| checker::masks_3_0(&scratch_dir(BIN), OWNER, CONSUMER));
    if let Some([permit, deny]) = &masks {
        args.extend(["--permit-mask", permit, "--deny-mask", deny]);
    }
    checker::run_checker(&args).await
}

/// Held to 3.0, the 1.9 testbed fails: its scheme owner answers in 1.9's members where 3.0's were
/// asked, refuses a search by 3.0's `id` alone and has no `/trustedList`; its registry answers a
/// 3.0 delegation request with `delegation_token`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_to_3_0_the_1_9_testbed_fails_as_one_of_another_version() {
    let bed = Bed::start(BIN).await;
    const OTHER: &str = "was asked: the participant speaks another version of the scheme than 3.0";
    let checked = held_to_3_0(&bed, "participant-registry", SO).await;
    assert!(!checked.success, "{}", checked.output);
    assert!(
        checked
            .title
            .ends_with("as scheme-owner, scheme version 3.0"),
        "{}",
        checked.title
    );
    checked.assert_case(
        "capabilities: PUBLIC CAPABILITIES",
        "FAIL",
        &format!("the answer holds capabilities_token where capabilitiesToken {OTHER}"),
    );
    checked.assert_case(
        "party: PARTY BY ID",
        "FAIL",
        &format!("the answer holds party_token where partyToken {OTHER}"),
    );
    checked.assert_case(
        "party: PARTY BY ALIAS",
        "not tried",
        "our record was not read (PARTY BY ID)",
    );
    checked.assert_case("parties: PARTIES BY ID", "FAIL", "refused");
    assert!(checked.row("parties: PARTIES BY ID").got.starts_with("400"));
    checked.assert_case("trustedList: TRUSTED LIST", "FAIL", "not found here");

    let checked = held_to_3_0(&bed, "authorisation-registry", AR).await;
    assert!(!checked.success, "{}", checked.output);
    checked.assert_case(
        "delegation: PERMIT MASK",
        "FAIL",
        &format!("the answer holds delegation_token where delegationToken {OTHER}"),
    );
    bed.stop().await;
}
