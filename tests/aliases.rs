//! A name is one party's, through the binary in a 3.0 scheme whose participant registry answers
//! as a careless one would (`careless_aliases`): Stellar Storage claims the did of the registry
//! Happy Pets designated, ABC Trucking claims Happy Pets' EORI. The claimants get nothing, with a
//! reason that names the name; the victims keep working by their own ids; the decision log names
//! every evidence's signer beside its issuer; and a careful testbed refuses such claims at start.

use crate::support;

use serde_json::{json, Value};
use support::process::GatewayProcess;
use support::*;

const BIN: &str = "aliases";
const OWNER_EORI: &str = "EU.EORI.NL000000005";

fn rules() -> String {
    format!(
        r#"
[[route]]
name = "containers"
methods = ["GET"]
path = "/api/containers/{{id}}"
upstream = "echo"
[route.delegation]
policy_issuer = "{OWNER3}"
resource_type = "CONTAINER"
identifiers = ["{{path.id}}"]
evidence = ["header"]

[[route]]
name = "by-eori"
methods = ["GET"]
path = "/api/legacy/{{id}}"
upstream = "echo"
[route.delegation]
policy_issuer = "{OWNER_EORI}"
resource_type = "CONTAINER"
identifiers = ["{{path.id}}"]
evidence = ["header"]
"#
    )
}

/// The 3.0 testbed with the claims, as a careless participant registry answers them (or, not
/// `careless`, the configuration a careful one refuses).
fn claims(careless: bool) -> ishare_gateway::testbed::config::TestbedConfig {
    let mut config = testbed_config_of(BIN, "conf/testbed-3.0.toml");
    config.careless_aliases = careless;
    for party in &mut config.parties {
        match party.id.as_str() {
            STELLAR3 => {
                party.roles.push("AuthorisationRegistry".into());
                party.also_known_as.push(AR3.into());
            }
            CONSUMER3 => party.also_known_as.push(OWNER_EORI.into()),
            _ => {}
        }
    }
    config
}

struct Scheme {
    bed: Bed,
    gateway: GatewayProcess,
    plain: String,
    token: String,
    log: std::path::PathBuf,
}

async fn start() -> Scheme {
    start_on(claims(true)).await
}

/// The gateway binary on a testbed of `config`.
async fn start_on(config: ishare_gateway::testbed::config::TestbedConfig) -> Scheme {
    let bed = Bed::start_of(config).await;
    let (dir, ports) = gateway_dir(&bed, BIN, &rules(), "", |t| {
        t.replace(SO, SO3).replace(SP, SP3).replace(
            "[scheme_owner]\n",
            "[scheme_owner]\nscheme_version = \"3.0\"\n",
        )
    });
    let log = dir.join("decisions.log");
    let config = dir.join("gateway.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    let with_log = format!("{text}\n[decision_log]\npath = \"{}\"\n", log.display());
    std::fs::write(&config, with_log).unwrap();
    let mut gateway = GatewayProcess::start(BIN, &config, ports.admin);
    gateway.wait_ready().await;
    let plain = format!("http://127.0.0.1:{}", ports.plain);
    let form = token_form(&bed.identity(CONSUMER3), SP3, None);
    let (status, answer) = status_json(request_token(&bed.http, &plain, form).await).await;
    assert_eq!(status, 200, "{answer}");
    let token = answer["access_token"].as_str().unwrap().to_string();
    Scheme {
        bed,
        gateway,
        plain,
        token,
        log,
    }
}

impl Scheme {
    /// Evidence `signer` signs (its certificate) as `iss`: `owner` lets ABC Trucking read every
    /// container at us.
    fn evidence(&self, signer: &str, iss: &str, owner: &str) -> String {
        self.evidence_with_sub(signer, (iss, iss), owner)
    }

    /// `evidence`, its `sub` given.
    fn evidence_with_sub(&self, signer: &str, (iss, sub): (&str, &str), owner: &str) -> String {
        let now = ishare_gateway::scheme::Timestamp::now().secs();
        let claims = json!({
            "iss": iss, "sub": sub, "aud": CONSUMER3, "jti": uuid::Uuid::new_v4().to_string(),
            "iat": now, "exp": now + 30,
            "delegationEvidence": {
                "notBefore": now - 10, "notOnOrAfter": now + 600, "policyIssuer": owner,
                "target": {"accessSubject": CONSUMER3},
                "policySets": [{"policies": [{
                    "target": {"resource": {"type": "CONTAINER", "identifiers": ["*"], "attributes": ["*"]},
                        "actions": ["iSHARE.READ"], "environment": {"serviceProviders": [SP3]}},
                    "rules": [{"effect": "Permit"}]}]}]
            }
        });
        sign_text(self.bed.creds(signer), &claims.to_string())
    }

    async fn get(&self, path: &str, evidence: &str) -> (u16, Value) {
        let resp = self
            .bed
            .http
            .get(format!("{}{path}", self.plain))
            .bearer_auth(&self.token)
            .header("delegationEvidence", evidence)
            .send()
            .await
            .unwrap();
        let id = resp
            .headers()
            .get("x-decision-id")
            .map(|v| v.to_str().unwrap().to_string());
        let (status, mut body) = status_json(resp).await;
        if let (Some(id), Value::Object(o)) = (id, &mut body) {
            o.entry("decision_id").or_insert(json!(id));
        }
        (status, body)
    }

    async fn stop(self) {
        self.gateway.terminate().await;
        self.bed.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_party_claiming_the_designated_registrys_did_gets_nothing_and_the_registry_keeps_working()
{
    let s = start().await;
    // The registry Happy Pets designated signs: granted, and the log names it as the signer.
    let (status, body) = s
        .get("/api/containers/C1", &s.evidence(AR3, AR3, OWNER3))
        .await;
    assert_eq!(status, 200, "{body}");
    let id = body["headers"]["x-decision-id"]
        .as_str()
        .unwrap()
        .to_string();
    let line = decision_log_line(&s.log, &id).await;
    assert_eq!(
        (&line["evidence"]["issuers"], &line["evidence"]["signers"]),
        (&json!([OWNER3]), &json!([AR3])),
        "{line}"
    );
    // Stellar Storage signs as the did it claims: its certificate is not that party's.
    let (status, body) = s
        .get("/api/containers/C1", &s.evidence(STELLAR3, AR3, OWNER3))
        .await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body["error_description"].as_str().unwrap().contains(AR3),
        "{body}"
    );
    // As itself, it is a registry, but not the one Happy Pets designated.
    let (status, body) = s
        .get(
            "/api/containers/C1",
            &s.evidence(STELLAR3, STELLAR3, OWNER3),
        )
        .await;
    assert_refused(
        status,
        &body,
        (403, "evidence_issuer_not_the_owners_registry"),
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_party_claiming_the_owners_eori_gets_nothing_and_the_owner_keeps_working_by_its_did() {
    let s = start().await;
    // Happy Pets' own evidence, on the route that names it by its did: granted.
    let (status, body) = s
        .get("/api/containers/C1", &s.evidence(OWNER3, OWNER3, OWNER3))
        .await;
    assert_eq!(status, 200, "{body}");
    // ABC Trucking's self-issued evidence for the EORI both records list: the name is no one's.
    let forged = s.evidence(CONSUMER3, CONSUMER3, OWNER_EORI);
    let (status, body) = s.get("/api/legacy/C1", &forged).await;
    assert_refused(status, &body, (403, "party_name_ambiguous"));
    assert!(
        body["error_description"]
            .as_str()
            .unwrap()
            .contains(OWNER_EORI),
        "{body}"
    );
    // Signed under the EORI it claims, on the route naming Happy Pets by its did: no one's either.
    let as_eori = s.evidence(CONSUMER3, OWNER_EORI, OWNER_EORI);
    let (status, body) = s.get("/api/containers/C1", &as_eori).await;
    assert_refused(status, &body, (403, "party_name_ambiguous"));
    // Nor can ABC Trucking take a token under it.
    let identity = s.bed.creds(CONSUMER3).credentials.identity_for(OWNER_EORI);
    let form = token_form(&identity.unwrap(), SP3, None);
    let (status, body) = status_json(request_token(&s.bed.http, &s.plain, form).await).await;
    assert_refused(status, &body, (400, "party_name_ambiguous"));
    s.stop().await;
}

#[tokio::test]
async fn a_careful_testbed_refuses_a_record_claiming_another_partys_name() {
    let errors = claims(false).validate().unwrap_err();
    assert!(
        errors
            .iter()
            .any(|e| e.contains(AR3) && e.contains("is the id of")),
        "{errors:?}"
    );
    assert!(
        errors
            .iter()
            .any(|e| e.contains(OWNER_EORI) && e.contains("is an alias of")),
        "{errors:?}"
    );
    assert!(claims(true).validate().is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evidence_tokens_sub_and_iss_are_compared_as_the_parties_they_name() {
    let s = start_on(testbed_config_of(BIN, "conf/testbed-3.0.toml")).await;
    // Happy Pets signs under its EORI alias, its sub its did: one party, granted.
    let both = s.evidence_with_sub(OWNER3, (OWNER_EORI, OWNER3), OWNER3);
    let (status, body) = s.get("/api/containers/C1", &both).await;
    assert_eq!(status, 200, "{body}");
    // A sub naming another party is refused.
    let other = s.evidence_with_sub(OWNER3, (OWNER3, STELLAR3), OWNER3);
    let (status, body) = s.get("/api/containers/C1", &other).await;
    assert_refused(status, &body, (403, "malformed_evidence"));
    s.stop().await;
}
