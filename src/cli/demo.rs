//! `ishare-gateway demo`: the testbed, its echo backend and the gateway in one process, and a walk
//! through the scheme in the terminal — a token, a call without evidence, with evidence from the
//! header, with evidence from the registry, a denied action, a person's sign-in — then the same
//! scheme as iSHARE 3.0 has it (did:ishare ids, a condition decided, 3.0's header and envelopes),
//! then ready-to-paste commands and the pages to open in a browser.

use super::walk::{
    consumer, heading, party, show, shown, step, CONSUMER, PERSON, PERSON_PAGE, PERSON_PASSWORD,
};
use crate::config;
use crate::gateway::server::{self, RunningGateway};
use crate::peers::{join, PeerClient};
use crate::scheme::mask::{AccessRequest, DelegationBody};
use crate::scheme::version::SchemeVersion;
use crate::scheme::vocabulary::{DELEGATION_PATH, EVIDENCE_HEADER, EVIDENCE_HEADER_3, TOKEN_PATH};
use crate::testbed::config::{Serve, TestbedConfig};
use crate::testbed::person::Browser;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

const OWNER: &str = "EU.EORI.NL000000005";
/// The 3.0 testbed's consumer and data owner.
const CONSUMER_3: &str = "did:ishare:EU.NL.NTRNL-10000001";
const OWNER_3: &str = "did:ishare:EU.NL.NTRNL-10000005";

/// Delegation evidence from the registry, as a signed token: the owner lets ABC Trucking read the
/// documents of container C1 at the service provider.
async fn registry_evidence(
    consumer: &PeerClient,
    registry_url: &str,
    sp: &str,
    scheme: &str,
) -> Result<String, String> {
    let request = AccessRequest {
        policy_issuer: OWNER.into(),
        access_subject: CONSUMER.into(),
        service_providers: vec![sp.to_string()],
        resource_type: "CONTAINER".into(),
        identifiers: vec!["C1".into()],
        attributes: vec!["DOCUMENTS".into()],
        actions: vec![format!("{scheme}.READ")],
        ..AccessRequest::default()
    };
    let registry_token = consumer
        .token(&join(registry_url, TOKEN_PATH), "EU.EORI.NL000000004")
        .await
        .map_err(|e| e.to_string())?
        .access_token;
    consumer
        .delegation(
            &join(registry_url, DELEGATION_PATH),
            &registry_token,
            &DelegationBody::new(request.to_mask(SchemeVersion::V1_9), SchemeVersion::V1_9),
        )
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| "the registry holds no policy for ABC Trucking".to_string())
}

/// Jane Doe signs in at the gateway's page for people, as a browser would, and the backend is told
/// who she is.
async fn person_signs_in(gateway_url: &str, ca: &[u8], n: usize) -> Result<(), String> {
    let page = format!("{gateway_url}{PERSON_PAGE}");
    step(n, "Jane Doe of ABC Trucking opens a page for people in her browser: the same steps, from the command line");
    let mut browser = Browser::new(ca)?;
    let signed = browser.sign_in(&page, PERSON, PERSON_PASSWORD).await?;
    println!("   → GET {page}");
    println!("   ← 200 OK: a page that posts the browser to the identity provider, with a request object");
    println!("     the gateway signed and encrypted to the identity provider (and a fresh state and nonce)");
    println!("   → POST {}", signed.login_page.url);
    println!("   ← 200 OK: the login page (user, password, consent to share profile and company)");
    println!("   → POST the login form as {PERSON}");
    println!("   ← 303 See Other: back to the gateway with a code and the state");
    println!(
        "   → GET {}",
        signed.return_url.split('?').next().unwrap_or_default()
    );
    println!(
        "   ← {}: the code exchanged with the gateway's client assertion, id_token and userinfo verified,",
        signed.returned.status
    );
    println!("     a session opened (a sealed, Secure, HttpOnly cookie)");
    let landing = signed.landing.ok_or_else(|| {
        format!(
            "no session: {}",
            crate::testbed::person::html_text(&signed.returned.body)
        )
    })?;
    println!("   → GET {page} (with the session)");
    println!(
        "   ← {}: the backend's answer; it was told who she is:",
        landing.status
    );
    let seen: Value = serde_json::from_str(&landing.body).map_err(|e| e.to_string())?;
    if let Some(headers) = seen["headers"].as_object() {
        for (name, value) in headers.iter().filter(|(n, _)| n.starts_with("x-person-")) {
            println!("     {name}: {}", value.as_str().unwrap_or_default());
        }
    }
    Ok(())
}

/// The walk through the scheme: ABC Trucking's token and calls, with and without evidence, then a
/// person's sign-in.
async fn walk_through(
    gateway_url: &str,
    sp: &str,
    registry_url: &str,
    data_dir: &Path,
    scheme: &str,
) -> Result<(), String> {
    let (http, consumer) = consumer(data_dir, scheme)?;
    let ca = std::fs::read(data_dir.join("ca.pem")).map_err(|e| e.to_string())?;

    step(1, &format!("ABC Trucking ({CONSUMER}) gets an access token from the gateway with a signed client assertion"));
    let token = consumer
        .token(&join(gateway_url, TOKEN_PATH), sp)
        .await
        .map_err(|e| e.to_string())?;
    println!("   → POST {gateway_url}/connect/token (client_assertion: a 30-second RS256 JWT with its x5c chain)");
    println!("   ← 200 OK: a Bearer token for {} s", token.expires_in);
    let token = token.access_token;

    let documents = format!("{gateway_url}/api/containers/C1/documents");
    step(2, "It asks for the documents of container C1 without delegation evidence: Happy Pets owns them");
    let resp = http
        .get(&documents)
        .bearer_auth(&token)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    show(resp, "GET", &documents).await?;

    step(3, "It gets delegation evidence from the authorisation registry and presents it in the delegation_evidence header");
    let evidence = registry_evidence(&consumer, registry_url, sp, scheme).await?;
    println!("   → POST {registry_url}/delegation (mask: {OWNER} lets {CONSUMER} {scheme}.READ CONTAINER C1 at {sp})");
    println!("   ← 200 OK: a delegation_token signed by the registry, Permit");
    let resp = http
        .get(&documents)
        .bearer_auth(&token)
        .header(EVIDENCE_HEADER, &evidence)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    show(resp, "GET", &documents).await?;

    let container = format!("{gateway_url}/api/containers/C1");
    step(4, "It reads container C1 without evidence: the gateway asks the owner's registry itself (and caches the answer)");
    let resp = http
        .get(&container)
        .bearer_auth(&token)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    show(resp, "GET", &container).await?;

    step(
        5,
        "It tries to update container C1: Happy Pets granted reading only",
    );
    let resp = http
        .put(&container)
        .bearer_auth(&token)
        .body("{\"status\": \"opened\"}")
        .send()
        .await
        .map_err(|e| e.to_string())?;
    show(resp, "PUT", &container).await?;

    person_signs_in(gateway_url, &ca, 6).await
}

/// The same scheme as 3.0 has it: a did:ishare consumer, the registry the data owner designated
/// for us asked with the request's region as context, the Permit rule's condition decided by the
/// gateway, evidence in 3.0's `delegationEvidence` header, and a person's sign-in at a 3.0
/// identity provider.
async fn walk_through_3_0(scheme: &Running) -> Result<(), String> {
    let Running { gateway_url, .. } = scheme;
    let (http, consumer) = party(&scheme.data_dir, CONSUMER_3, &scheme.scheme)?;
    let ca = std::fs::read(scheme.data_dir.join("ca.pem")).map_err(|e| e.to_string())?;
    heading("The same scheme in iSHARE 3.0 (December 2025), beside it:");

    step(7, &format!("ABC Trucking is {CONSUMER_3} now (its certificate names NTRNL-10000001 as organizationIdentifier); it gets a token"));
    let token = consumer
        .token(&join(gateway_url, TOKEN_PATH), &scheme.gateway_party)
        .await
        .map_err(|e| e.to_string())?;
    println!("   → POST {gateway_url}/connect/token (client_id {CONSUMER_3}, the gateway checks the certificate against the party's 3.0 record)");
    println!("   ← 200 OK: a Bearer token for {} s", token.expires_in);
    let token = token.access_token;

    let container = format!("{gateway_url}/api/containers/C1");
    step(8, "It reads container C1 from the Netherlands: Happy Pets' registry (designated for Warehouse 13 in its record) permits on a condition the gateway decides");
    println!("   (the mask carries the region as the policy's context; the Permit rule holds where requesterLocation is NL or BE)");
    for region in ["NL", "DE"] {
        let resp = http
            .get(&container)
            .bearer_auth(&token)
            .header("X-Region", region)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        show(resp, &format!("GET (X-Region: {region})"), &container).await?;
    }

    let documents = format!("{container}/documents");
    step(9, &format!("It asks the registry itself (3.0's request: previousSteps inside delegationRequest) and presents the evidence in the {EVIDENCE_HEADER_3} header"));
    let mut request = AccessRequest {
        policy_issuer: OWNER_3.into(),
        access_subject: CONSUMER_3.into(),
        resource_type: "CONTAINER".into(),
        identifiers: vec!["C1".into()],
        attributes: vec!["DOCUMENTS".into()],
        actions: vec![format!("{}.READ", scheme.scheme)],
        ..AccessRequest::default()
    };
    request
        .operands
        .insert("requesterLocation".into(), Some("BE".into()));
    let evidence = consumer
        .ask_evidence(
            &scheme.registry_url,
            &scheme.registry_party,
            &request,
            SchemeVersion::V3_0,
        )
        .await
        .map_err(|e| e.to_string())?
        .ok_or("the 3.0 registry holds no policy for ABC Trucking")?;
    println!(
        "   → POST {}/delegation (mask: {OWNER_3} lets {CONSUMER_3} READ the documents of C1, context requesterLocation BE)",
        scheme.registry_url
    );
    println!("   ← 200 OK: a delegationToken signed by the registry (its sub the registry), its Permit rule conditioned");
    let resp = http
        .get(&documents)
        .bearer_auth(&token)
        .header(EVIDENCE_HEADER_3, &evidence)
        .header("X-Region", "BE")
        .send()
        .await
        .map_err(|e| e.to_string())?;
    show(resp, "GET (X-Region: BE)", &documents).await?;

    person_signs_in(gateway_url, &ca, 10).await
}

fn try_more(
    gateway_url: &str,
    sp: &str,
    registry_url: &str,
    data_dir: &Path,
    admin: Option<std::net::SocketAddr>,
    registry_admin: Option<String>,
) {
    let program = std::env::current_exe()
        .map(|p| shown(&p))
        .unwrap_or_else(|_| "ishare-gateway".into());
    let c = format!(
        "{program} client --testbed {} --as {CONSUMER}",
        shown(data_dir)
    );
    heading("Try more, from another terminal:");
    println!("  {c} capabilities --url {gateway_url} --authenticated");
    println!("  {c} call {gateway_url}/api/containers/C7");
    println!("  {c} call -X PUT -d '{{}}' {gateway_url}/api/containers/C7");
    println!("  {c} call {gateway_url}/api/containers/SECRET-1");
    println!(
        "  {c} evidence --registry {registry_url} --issuer {OWNER} --type CONTAINER --id C7 --attribute DOCUMENTS --action iSHARE.READ --service-provider {sp} --raw > /tmp/evidence.jwt"
    );
    println!("  {c} call -H \"delegation_evidence: $(cat /tmp/evidence.jwt)\" {gateway_url}/api/containers/C7/documents");
    if let Some(admin) = admin {
        println!("  curl -s http://{admin}/metrics | grep ishare_gateway_requests_total");
    }
    println!("  curl -i http://127.0.0.1:8181/api/containers/C7/documents   (the consumer's side: conf/egress.toml)");
    heading("In a browser (the testbed's certificates come from its own CA, data/testbed/ca.pem):");
    println!("  {gateway_url}{PERSON_PAGE}   sign in as {PERSON} / {PERSON_PASSWORD}; {gateway_url}/logout signs out");
    if let Some(admin_page) = registry_admin {
        println!("  {admin_page}   the registry's policies (admin / admin-testbed-password)");
    }
}

/// A testbed and the gateway in front of its echo backend, running.
struct Running {
    testbed: crate::testbed::Testbed,
    testbed_conf: TestbedConfig,
    gateway: RunningGateway,
    gateway_url: String,
    gateway_party: String,
    registry_url: String,
    registry_party: String,
    admin: Option<std::net::SocketAddr>,
    data_dir: PathBuf,
    scheme: String,
}

impl Running {
    /// The testbed of `testbed_config` (its key material made first) and the gateway of
    /// `gateway_config` as one of its service providers, ready.
    fn start(
        runtime: &tokio::runtime::Runtime,
        testbed_config: &Path,
        gateway_config: PathBuf,
    ) -> Result<Running, String> {
        let mut testbed_conf = TestbedConfig::load(testbed_config).map_err(|e| e.to_string())?;
        // The gateway's files are the testbed's: make them before reading the gateway's config.
        crate::testbed::prepare(&testbed_conf).map_err(|e| e.to_string())?;
        let config = config::load(&gateway_config)
            .map_err(|e| format!("{}:\n{e}", gateway_config.display()))?;
        let gateway_party = config.identity.party_id.to_string();
        // The gateway plays this service provider; the testbed does not run a dummy for it.
        for p in testbed_conf
            .parties
            .iter_mut()
            .filter(|p| p.id == gateway_party)
        {
            p.serve = None;
        }
        let gateway_addresses = config
            .listeners
            .iter()
            .map(|l| l.address)
            .chain(config.admin)
            .chain(config.decision_api.iter().map(|d| d.address))
            .chain(config.decision_api.iter().filter_map(|d| d.grpc_address));
        crate::testbed::launch::ports_free(&testbed_conf)
            .and_then(|()| crate::testbed::launch::free(gateway_addresses))
            .map_err(|e| e.to_string())?;
        println!(
            "Starting the testbed of {} (its test PKI made on the first run)...",
            shown(testbed_config)
        );
        let testbed = runtime
            .block_on(crate::testbed::Testbed::start(&testbed_conf))
            .map_err(|e| e.to_string())?;
        print!("{}", testbed.summary());
        let registry = testbed
            .serving(Serve::AuthorisationRegistry)
            .ok_or("the testbed runs no authorisation registry")?;
        let (registry_url, registry_party) = (registry.url.clone(), registry.party_id.to_string());
        let gateway_url = config.public_url.clone();
        let admin = config.admin;
        println!(
            "Starting the gateway as {gateway_party} at {gateway_url} in front of the echo backend..."
        );
        let built = match server::build(config, gateway_config, None, true) {
            Ok(built) => built,
            Err(e) => {
                runtime.block_on(testbed.stop());
                return Err(e);
            }
        };
        let gateway = RunningGateway::start(built);
        let state = gateway.state.clone();
        let ready = runtime.block_on(async {
            for _ in 0..100 {
                if state.current.load_full().readiness().await.is_ok() {
                    return true;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            false
        });
        let data_dir = testbed.keys.data_dir.clone();
        let scheme = testbed.scheme.clone();
        let running = Running {
            testbed,
            testbed_conf,
            gateway,
            gateway_url,
            gateway_party,
            registry_url,
            registry_party,
            admin,
            data_dir,
            scheme,
        };
        if !ready {
            running.stop(runtime);
            return Err("the gateway did not become ready within 10 s".into());
        }
        Ok(running)
    }

    fn stop(self, runtime: &tokio::runtime::Runtime) {
        self.gateway.stop();
        runtime.block_on(self.testbed.stop());
    }
}

/// The configurations of the demo: a scheme of 1.9 and one of 3.0, each a testbed and a gateway.
pub struct DemoConfigs {
    pub testbed: PathBuf,
    pub gateway: PathBuf,
    pub testbed_3_0: PathBuf,
    pub gateway_3_0: PathBuf,
    /// The consumer's side, in front of the first gateway.
    pub egress: PathBuf,
}

/// Run the demo with the configurations given; serve until Ctrl-C unless `exit`.
pub fn run(configs: DemoConfigs, exit: bool) -> Result<(), String> {
    // Quiet, so the walk-through reads well (RUST_LOG overrides). pingora reports a benign race when
    // it cannot reuse a pooled upstream connection (it opens a new one) at error level.
    let _log = crate::telemetry::init_logging(false, "warn,pingora_core::connectors=off", true);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let first = Running::start(&runtime, &configs.testbed, configs.gateway)?;
    let walked = runtime.block_on(walk_through(
        &first.gateway_url,
        &first.gateway_party,
        &first.registry_url,
        &first.data_dir,
        &first.scheme,
    ));
    let second = match walked {
        Ok(()) => match Running::start(&runtime, &configs.testbed_3_0, configs.gateway_3_0) {
            Ok(second) => Some(second),
            Err(e) => {
                first.stop(&runtime);
                return Err(e);
            }
        },
        Err(_) => None,
    };
    let walked = match &second {
        Some(second) => runtime.block_on(walk_through_3_0(second)),
        None => walked,
    };
    let egress = match &walked {
        Ok(()) => match runtime.block_on(super::demo_egress::walk(&configs.egress, 11)) {
            Ok(running) => Some(running),
            Err(e) => {
                eprintln!("the walk on the consumer's side failed: {e}");
                None
            }
        },
        Err(_) => None,
    };
    let walked = match (walked, &egress) {
        (Ok(()), None) => Err("the walk on the consumer's side failed".to_string()),
        (walked, _) => walked,
    };
    match &walked {
        Ok(()) => {
            try_more(
                &first.gateway_url,
                &first.gateway_party,
                &first.registry_url,
                &first.data_dir,
                first.admin,
                first.testbed_conf.admin.as_ref().map(|_| {
                    format!(
                        "{}{}",
                        first.registry_url,
                        crate::testbed::policy_admin::ADMIN_PATH
                    )
                }),
            );
            if let Some(second) = &second {
                try_more_3_0(second);
            }
            println!(
                "\nThe gateways, the testbeds and the echo backends keep serving. Ctrl-C stops everything."
            );
        }
        Err(e) => eprintln!("the walk-through failed: {e}"),
    }
    if walked.is_ok() && !exit {
        runtime.block_on(super::wait_for_stop());
    }
    println!("\nStopping...");
    if let Some(egress) = egress {
        runtime.block_on(egress.stop());
    }
    if let Some(second) = second {
        second.stop(&runtime);
    }
    first.stop(&runtime);
    walked
}

/// What to try against the scheme of 3.0.
fn try_more_3_0(scheme: &Running) {
    let program = std::env::current_exe()
        .map(|p| shown(&p))
        .unwrap_or_else(|_| "ishare-gateway".into());
    let c = format!(
        "{program} client --testbed {} --as {CONSUMER_3} --scheme-version 3.0",
        shown(&scheme.data_dir)
    );
    let url = &scheme.gateway_url;
    heading("And in the scheme of 3.0:");
    println!("  {c} capabilities --url {url}");
    println!("  {c} call -H 'X-Region: BE' {url}/api/containers/C7");
    println!("  {c} call -H 'X-Region: FR' {url}/api/containers/C7");
    println!(
        "  {c} party --url {} --id EU.EORI.NL000000001",
        scheme
            .testbed
            .serving(Serve::SchemeOwner)
            .map_or("", |p| p.url.as_str())
    );
    println!("  {url}{PERSON_PAGE}   sign in as {PERSON} / {PERSON_PASSWORD} at the 3.0 identity provider");
}
