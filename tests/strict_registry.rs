//! A registry that reads masks as strictly as FIWARE Keyrock does (the testbed's `strict`): a mask
//! with licences, or without the consumer's client assertion in `previous_steps`, is refused, which
//! the gateway reports as the registry's refusal of its request; a registry configured with
//! `mask_licences = false` and `previous_steps = "consumer_assertion"` is asked without licences
//! and with the assertion of the consumer's token request, and answers Permit and Deny (the route's
//! licences judged on the evidence) while that assertion lives. The registry itself refuses, each
//! with its error text, members its request schema does not name, previous steps that are not a
//! live signed client assertion of the mask's party addressed to the caller, and a caller with one
//! that is not the mask's first service provider.

use crate::support;

use ishare_gateway::scheme::version::SchemeVersion;
use ishare_gateway::scheme::Timestamp;
use serde_json::{json, Value};
use support::shipped::{shipped_gateway, Urls};
use support::*;

const BIN: &str = "strict_registry";
/// A consumer without any policy at the registry.
const NOBODY: &str = "EU.EORI.NL000000101";

fn rules() -> String {
    let route = |name: &str, path: &str, delegation: &str| {
        format!("[[route]]\nname = \"{name}\"\nmethods = [\"GET\"]\npath = \"{path}\"\nupstream = \"echo\"\n[route.delegation]\nresource_type = \"CONTAINER\"\nidentifiers = [\"{{path.id}}\"]\npolicy_issuer = \"{OWNER}\"\n{delegation}\n\n")
    };
    [
        route(
            "licensed",
            "/api/licensed/{id}",
            "licences = [\"ISHARE.0001\"]\nregistry = \"ar\"",
        ),
        route(
            "unlicensed-mask",
            "/api/containers/{id}",
            "licences = [\"ISHARE.0001\"]\nregistry = \"strict\"",
        ),
        route("no-steps", "/api/no-steps/{id}", "registry = \"no-steps\""),
        route(
            "other-licence",
            "/api/special/{id}",
            "licences = [\"ISHARE.0002\"]\nregistry = \"strict\"",
        ),
    ]
    .concat()
}

/// The testbed with its registry strict.
async fn strict_bed() -> Bed {
    let mut config = testbed_config(BIN);
    for party in &mut config.parties {
        party.strict |= party.id == AR;
    }
    Bed::start_of(config).await
}

/// The routes' registries: the testbed's, as it is, as strict, and strict without previous steps.
fn registries(bed: &Bed) -> String {
    let ar = bed.url(AR);
    format!(
        "[[registry]]\nname = \"ar\"\nparty_id = \"{AR}\"\nurl = \"{ar}\"\n\n[[registry]]\nname = \"strict\"\nparty_id = \"{AR}\"\nurl = \"{ar}\"\nmask_licences = false\nprevious_steps = \"consumer_assertion\"\n\n[[registry]]\nname = \"no-steps\"\nparty_id = \"{AR}\"\nurl = \"{ar}\"\nmask_licences = false\n"
    )
}

async fn env() -> Env {
    let bed = strict_bed().await;
    let (dir, ports) = gateway_dir(&bed, BIN, &rules(), &registries(&bed), |t| t);
    Env::launch(bed, dir, &ports).await
}

async fn get(env: &Env, path: &str, token: &str) -> (u16, reqwest::header::HeaderMap, Value) {
    get_bearing(&env.bed.http, &format!("{}{path}", env.url), token).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_that_refuses_licences_in_a_mask_is_said_to_refuse_the_request() {
    let env = env().await;
    let token = env.token(CONSUMER).await;
    let (status, _, body) = get(&env, "/api/licensed/C1", &token).await;
    assert_eq!(
        (status, body["error"].as_str(), body["reason"].as_str()),
        (502, Some("bad_gateway"), Some("registry_refused_request")),
        "{body}"
    );
    let description = body["error_description"].as_str().unwrap_or_default();
    assert!(
        description.contains("400")
            && description.contains(
                "delegationRequest.policySets[0].target is not a member the schema names"
            ),
        "the registry's status and error text are said: {body}"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_asked_without_licences_permits_and_denies_on_the_evidence() {
    let env = env().await;
    let token = env.token(CONSUMER).await;
    let (status, headers, body) = get(&env, "/api/containers/C1", &token).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(headers["licensepurpose"], "ISHARE.0001");
    let (status, _, body) = get(&env, "/api/containers/SECRET-1", &token).await;
    assert_refused(status, &body, (403, "denied_by_rule"));
    // The registry's own answers are said to be the registry's.
    assert_eq!(
        body["error_description"].as_str(),
        Some(
            format!("the authorisation registry {AR} denies this request: the rule of its evidence is Deny")
                .as_str()
        )
    );
    let nobody = env.token(NOBODY).await;
    let (status, _, body) = get(&env, "/api/containers/C1", &nobody).await;
    assert_refused(status, &body, (403, "no_policy"));
    assert_eq!(
        body["error_description"].as_str(),
        Some(format!("the authorisation registry {AR} holds no policy for this request").as_str())
    );
    // The route's licence is not in the mask: the evidence's licences are judged against it.
    let (status, _, body) = get(&env, "/api/special/C1", &token).await;
    assert_refused(status, &body, (403, "licence_missing"));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_that_wants_previous_steps_refuses_a_mask_without_them() {
    let env = env().await;
    let token = env.token(CONSUMER).await;
    let (status, _, body) = get(&env, "/api/no-steps/C1", &token).await;
    assert_refused(status, &body, (502, "registry_refused_request"));
    assert!(
        body["error_description"]
            .as_str()
            .is_some_and(|d| d.contains("previous_steps")),
        "{body}"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_consumers_assertion_a_new_token_is_asked_for() {
    let env = env().await;
    let token = env.token(CONSUMER).await;
    let (status, _, body) = get(&env, "/api/containers/C1", &token).await;
    assert_eq!(status, 200, "{body}");
    // The assertion lived 30 s: the access token still does, but the registry cannot be asked,
    // not even with the assertion the data owner sent with a token request of its own just now.
    tokio::time::sleep(std::time::Duration::from_secs(31)).await;
    env.token(OWNER).await;
    let (status, headers, body) = get(&env, "/api/containers/C2", &token).await;
    assert_eq!(
        (status, body["error"].as_str(), body["reason"].as_str()),
        (
            401,
            Some("invalid_token"),
            Some("previous_steps_unavailable")
        ),
        "{body}"
    );
    assert!(headers.contains_key("www-authenticate"));
    // A new token request brings a new assertion.
    let token = env.token(CONSUMER).await;
    let (status, _, body) = get(&env, "/api/containers/C2", &token).await;
    assert_ne!(status, 401, "{body}");
    assert_ne!(body["reason"].as_str(), Some("previous_steps_unavailable"));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_routes_get_permit_and_deny_from_a_strict_registry() {
    let bed = strict_bed().await;
    let dir = scratch_dir(BIN);
    let ports = Ports::free();
    let settings =
        "name = \"testbed-ar\"\nmask_licences = false\nprevious_steps = \"consumer_assertion\"";
    let toml = shipped_gateway(&bed.keys.data_dir, &Urls::of_bed(&bed), &ports)
        .replace("name = \"testbed-ar\"", settings);
    assert!(toml.contains("previous_steps = \"consumer_assertion\""));
    std::fs::write(dir.join("gateway.toml"), toml).unwrap();
    let env = Env::launch(bed, dir, &ports).await;
    let token = env.token(CONSUMER).await;
    // containers-read asks the registry of the data owner's record, as its [[registry]] says.
    let (status, _, body) = get(&env, "/api/containers/C1", &token).await;
    assert_eq!(status, 200, "{body}");
    let (status, _, body) = get(&env, "/api/containers/SECRET-1", &token).await;
    assert_refused(status, &body, (403, "denied_by_rule"));
    // containers-update names the registry: the policy grants reading only.
    let resp = env
        .bed
        .http
        .put(format!("{}/api/containers/C1", env.url))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    let (status, body) = status_json(resp).await;
    assert_refused(status, &body, (403, "denied_by_rule"));
    env.stop().await;
}

/// The consumer's reading of C1 for the service providers `sps`, with `steps` in previous_steps, as
/// the body of a delegation request.
fn ask_for(sps: &[&str], steps: &[&str]) -> Value {
    let mask = read_request(CONSUMER, "C1", sps).to_mask(SchemeVersion::default());
    json!({"delegationRequest": mask, "previous_steps": steps})
}

/// POST /delegation at the strict registry as `caller`: the status, and the error text or the
/// evidence's first effect.
async fn ask(bed: &Bed, caller: &str, body: &Value) -> (u16, String) {
    let token = bed.token(AR, caller).await;
    let resp = bed
        .http
        .post(format!("{}/delegation", bed.url(AR)))
        .bearer_auth(token)
        .json(body)
        .send()
        .await
        .unwrap();
    let (status, answer) = status_json(resp).await;
    let said = match answer["delegation_token"].as_str() {
        Some(token) => claims(token)["delegationEvidence"]["policySets"][0]["policies"][0]["rules"]
            [0]["effect"]
            .as_str()
            .map(str::to_string),
        None => answer["error_description"].as_str().map(str::to_string),
    };
    (status, said.unwrap_or_else(|| answer.to_string()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_the_request_schema_does_not_name_are_refused_by_their_path() {
    let bed = strict_bed().await;
    let policy = "/delegationRequest/policySets/0/policies/0";
    for (at, member, path) in [
        ("", "delegation_mask", "delegation_mask".to_string()),
        (
            "/delegationRequest",
            "notBefore",
            "delegationRequest.notBefore".into(),
        ),
        (
            "/delegationRequest/policySets/0",
            "maxDelegationDepth",
            "delegationRequest.policySets[0].maxDelegationDepth".into(),
        ),
        (
            policy,
            "priority",
            "delegationRequest.policySets[0].policies[0].priority".into(),
        ),
        (
            &format!("{policy}/target"),
            "context",
            "delegationRequest.policySets[0].policies[0].target.context".into(),
        ),
        (
            &format!("{policy}/rules/0"),
            "conditions",
            "delegationRequest.policySets[0].policies[0].rules[0].conditions".into(),
        ),
    ] {
        let mut body = ask_for(&[SP], &[]);
        body.pointer_mut(at).unwrap()[member] = json!({});
        let (status, said) = ask(&bed, CONSUMER, &body).await;
        assert_eq!(
            (status, said),
            (400, format!("the body does not hold to the delegation request schema: {path} is not a member the schema names (additionalProperties: false)")),
        );
    }
    // The mask without them is answered.
    assert_eq!(
        ask(&bed, CONSUMER, &ask_for(&[SP], &[])).await,
        (200, "Permit".into())
    );
    bed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_previous_step_is_a_live_signed_assertion_of_the_masks_party_addressed_to_the_caller() {
    let bed = strict_bed().await;
    let now = Timestamp::now();
    let consumer = bed.identity(CONSUMER);
    let good = consumer.client_assertion(SP, now).unwrap();
    assert_eq!(
        ask(&bed, SP, &ask_for(&[SP], &[&good])).await,
        (200, "Permit".into())
    );
    let (header, claims) = assertion_parts(bed.creds(CONSUMER), SP);
    let evidence = bed
        .registry_evidence(CONSUMER, &read_request(CONSUMER, "C1", &[SP]))
        .await;
    for (step, said) in [
        (
            consumer.client_assertion(AR, now).unwrap(),
            format!("client assertion aud must be exactly {SP:?} (invalid_aud)"),
        ),
        (
            bed.identity(SP2).client_assertion(SP, now).unwrap(),
            format!("the assertion is from {SP2}, not from the mask's accessSubject or policyIssuer (invalid_delegation_assertion_pair)"),
        ),
        (
            consumer.client_assertion(SP, Timestamp::from_secs(now.secs() - 60)).unwrap(),
            "client assertion has expired (assertion_expired)".into(),
        ),
        (
            forge(&header, &claims, &bed.creds(SP2).key_pem),
            "the JWT signature does not verify with the key of the first x5c certificate (invalid_signature)".into(),
        ),
        (
            evidence,
            "this registry takes client assertions only, not delegation evidence (not_a_client_assertion)".into(),
        ),
    ] {
        let (status, text) = ask(&bed, SP, &ask_for(&[SP], &[&step])).await;
        assert_eq!((status, text), (400, format!("previous_steps: {said}")));
    }
    bed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_masks_first_service_provider_may_ask_with_a_client_assertion() {
    let bed = strict_bed().await;
    let step = bed
        .identity(CONSUMER)
        .client_assertion(SP2, Timestamp::now())
        .unwrap();
    let (status, said) = ask(&bed, SP2, &ask_for(&[SP, SP2], &[&step])).await;
    assert_eq!(
        (status, said),
        (400, format!("{SP2} brings a client assertion in previous_steps but is not the mask's first service provider ({SP}), the only other party that may ask (client_id_not_allowed)"))
    );
    assert_eq!(
        ask(&bed, SP2, &ask_for(&[SP2, SP], &[&step])).await,
        (200, "Permit".into())
    );
    // Without an assertion a service provider named in the mask may not ask.
    let (status, said) = ask(&bed, SP2, &ask_for(&[SP2], &[])).await;
    assert_eq!(
        (status, said),
        (400, format!("{SP2} is neither the policyIssuer nor the accessSubject of the mask, and previous_steps holds no client assertion (client_id_not_allowed)"))
    );
    bed.stop().await;
}

/// The binary in front of the strict registry, which wants the consumer's consent in
/// `previous_steps`: the process and its plain listener.
async fn binary(bed: &Bed) -> (support::process::GatewayProcess, String) {
    binary_in_front(bed, BIN, &rules(), &registries(bed)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_forwards_its_consumers_consent_and_its_own_to_a_registry_that_wants_previous_steps(
) {
    let bed = strict_bed().await;
    let (gateway, plain) = binary(&bed).await;
    let get = |token: String, id: &'static str, consent: String| {
        let request = bed
            .http
            .get(format!("{plain}/api/containers/{id}"))
            .bearer_auth(token)
            .header("service_consumer_assertion", consent);
        async move { status_json(request.send().await.unwrap()).await }
    };
    // The consumer's consent, addressed to the broker, then the broker's own assertion from its
    // token request, addressed to us: a chain the registry follows to the consumer.
    let consent = || {
        bed.identity(CONSUMER)
            .client_assertion(SP2, Timestamp::now())
            .unwrap()
    };
    let broker = bed.token_at(&plain, SP2).await;
    let (status, body) = get(broker.clone(), "C1", consent()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["headers"]["x-original-consumer-party-id"], CONSUMER,
        "{body}"
    );
    let (status, body) = get(broker, "SECRET-1", consent()).await;
    assert_refused(status, &body, (403, "denied_by_rule"));
    // A broker token another instance issued (one key: its tokens are good here), so that this
    // one holds no assertion of the broker: refused, worded for the broker, though the
    // consumer's assertion of an unrelated token request is held here (never forwarded for a
    // broker's request).
    let (other, other_plain) = binary(&bed).await;
    let elsewhere = bed.token_at(&other_plain, NOBODY).await;
    let _ = bed.token_at(&plain, CONSUMER).await;
    let to_nobody = bed
        .identity(CONSUMER)
        .client_assertion(NOBODY, Timestamp::now());
    let (status, body) = get(elsewhere, "C2", to_nobody.unwrap()).await;
    assert_refused(status, &body, (401, "previous_steps_unavailable"));
    let said = body["error_description"].as_str().unwrap();
    assert!(
        said.contains("consumer you act for") && said.contains(NOBODY),
        "{said}"
    );
    other.terminate().await;
    gateway.terminate().await;
    bed.stop().await;
}
