//! A registry that reads masks as strictly as FIWARE Keyrock does (the testbed's `strict`): a mask
//! with licences, or without the consumer's client assertion in `previous_steps`, is refused, which
//! the gateway reports as the registry's refusal of its request; a registry configured with
//! `mask_licences = false` and `previous_steps = "consumer_assertion"` is asked without licences
//! and with the assertion of the consumer's token request, and answers Permit and Deny (the route's
//! licences judged on the evidence) while that assertion lives.

mod support;

use serde_json::Value;
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

async fn env() -> Env {
    let bed = strict_bed().await;
    let ar = bed.url(AR);
    let extra = format!(
        "[[registry]]\nname = \"ar\"\nparty_id = \"{AR}\"\nurl = \"{ar}\"\n\n[[registry]]\nname = \"strict\"\nparty_id = \"{AR}\"\nurl = \"{ar}\"\nmask_licences = false\nprevious_steps = \"consumer_assertion\"\n\n[[registry]]\nname = \"no-steps\"\nparty_id = \"{AR}\"\nurl = \"{ar}\"\nmask_licences = false\n"
    );
    let (dir, ports) = gateway_dir(&bed, BIN, &rules(), &extra, |t| t);
    Env::launch(bed, dir, &ports).await
}

async fn get(env: &Env, path: &str, token: &str) -> (u16, reqwest::header::HeaderMap, Value) {
    let resp = env
        .bed
        .http
        .get(format!("{}{path}", env.url))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    let headers = resp.headers().clone();
    let (status, body) = status_json(resp).await;
    (status, headers, body)
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
        description.contains("400") && description.contains("licenses"),
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
    assert_eq!(
        (status, body["reason"].as_str()),
        (403, Some("denied_by_rule")),
        "{body}"
    );
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
    assert_eq!(
        (status, body["reason"].as_str()),
        (403, Some("no_policy")),
        "{body}"
    );
    assert_eq!(
        body["error_description"].as_str(),
        Some(format!("the authorisation registry {AR} holds no policy for this request").as_str())
    );
    // The route's licence is not in the mask: the evidence's licences are judged against it.
    let (status, _, body) = get(&env, "/api/special/C1", &token).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (403, Some("licence_missing")),
        "{body}"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_that_wants_previous_steps_refuses_a_mask_without_them() {
    let env = env().await;
    let token = env.token(CONSUMER).await;
    let (status, _, body) = get(&env, "/api/no-steps/C1", &token).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (502, Some("registry_refused_request")),
        "{body}"
    );
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
    // The assertion lived 30 s: the access token still does, but the registry cannot be asked.
    tokio::time::sleep(std::time::Duration::from_secs(31)).await;
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
    assert_eq!(
        (status, body["reason"].as_str()),
        (403, Some("denied_by_rule")),
        "{body}"
    );
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
    assert_eq!(
        (status, body["reason"].as_str()),
        (403, Some("denied_by_rule")),
        "{body}"
    );
    env.stop().await;
}
