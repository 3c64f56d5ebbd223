//! The gateway in a scheme of iSHARE 3.0, against the testbed run as one (conf/testbed-3.0.toml):
//! did:ishare parties and their aliases, claims-based party records, `/trustedList`, the
//! registry's `delegationToken` with conditions, the data owner's registry designated for us,
//! capabilities as 3.0 writes them (held to the scheme's own OpenAPI schema), and a gateway
//! configured for the other version refused with a reason.

use crate::support;

use ishare_gateway::testbed::config::PartyConfig;
use serde_json::{json, Value};
use support::*;

const BIN: &str = "scheme_3_0";
const CONSUMER_EORI: &str = "EU.EORI.NL000000001";
const OWNER_EORI: &str = "EU.EORI.NL000000005";
const LICENCE: &str = "https://licenses.ishare.eu/general-internal-use/1.0";

fn rules() -> String {
    format!(
        r#"
[[route]]
name = "containers"
methods = ["GET"]
path = "/api/containers/{{id}}"
upstream = "echo"
advertise = true
[route.delegation]
policy_issuer = "{OWNER3}"
resource_type = "CONTAINER"
identifiers = ["{{path.id}}"]
licences = ["{LICENCE}"]
[route.delegation.conditions]
requesterLocation = "{{header.X-Region}}"

[[route]]
name = "people"
methods = ["GET"]
path = "/people/containers/{{id}}"
upstream = "echo"
login = true
[route.delegation]
policy_issuer = "{OWNER3}"
resource_type = "CONTAINER"
identifiers = ["{{path.id}}"]

[[route]]
name = "legacy"
methods = ["GET"]
path = "/api/legacy/{{id}}"
upstream = "echo"
[route.delegation]
policy_issuer = "{OWNER_EORI}"
resource_type = "CONTAINER"
identifiers = ["{{path.id}}"]
[route.delegation.conditions]
requesterLocation = "{{header.X-Region}}"

[[route]]
name = "documents"
methods = ["GET"]
path = "/api/documents/{{id}}"
upstream = "echo"
[route.delegation]
policy_issuer = "{OWNER3}"
resource_type = "CONTAINER"
identifiers = ["{{path.id}}"]
evidence = ["header"]
[route.delegation.conditions]
requesterLocation = "{{header.X-Region}}"
"#
    )
}

/// `[login]` at the testbed's identity provider.
fn login(bed: &Bed) -> String {
    format!(
        "[login]\nidentity_provider = \"{IDP3}\"\nurl = \"{}\"\nscope = \"openid profile company\"\n",
        bed.url(IDP3)
    )
}

async fn bed() -> Bed {
    Bed::start_of(testbed_config_of(BIN, "conf/testbed-3.0.toml")).await
}

/// The gateway as Warehouse 13 of the 3.0 testbed, its scheme owner (and so every peer) 3.0, or
/// `version` where given; people sign in at the testbed's identity provider.
async fn env(version: &str) -> Env {
    env_on(bed().await, version).await
}

/// `env` on the testbed `bed`.
async fn env_on(bed: Bed, version: &str) -> Env {
    let (dir, ports) = dir_on(&bed, version, None);
    Env::launch(bed, dir, &ports).await
}

/// The directory of `env`'s gateway on `bed`, serving in the data space `serving` where given.
fn dir_on(bed: &Bed, version: &str, serving: Option<&str>) -> (std::path::PathBuf, Ports) {
    gateway_dir(bed, BIN, &rules(), &login(bed), |t| {
        let t = t.replace(SO, SO3).replace(SP, SP3).replace(
            "[scheme_owner]\n",
            &format!("[scheme_owner]\nscheme_version = \"{version}\"\n"),
        );
        match serving {
            Some(space) => format!("dataspaces = [\"{space}\"]\n{t}"),
            None => t,
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_3_0_consumer_is_served_on_its_did_and_on_its_alias() {
    let env = env("3.0").await;
    // A token for the consumer's did, and for its EORI alias (signed with the same certificate,
    // whose organizationIdentifier is the did's): the token names the party as its record does.
    let token = env.token(CONSUMER3).await;
    let as_alias = env
        .bed
        .creds(CONSUMER3)
        .credentials
        .identity_for(CONSUMER_EORI);
    let alias = env.token_response(&as_alias.unwrap(), None).await;
    let (status, body) = status_json(alias).await;
    assert_eq!(status, 200, "{body}");
    // The registry the owner designated for us decides, with the route's value as context and
    // the condition it passes on (in NL or BE), and the licence as 3.0 writes it.
    let resp = env
        .bed
        .http
        .get(format!("{}/api/containers/C1", env.url))
        .bearer_auth(&token)
        .header("X-Region", "NL")
        .send()
        .await
        .unwrap();
    let purpose = resp.headers().get("licensepurpose").cloned();
    let (status, body) = status_json(resp).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["headers"]["x-consumer-party-id"], CONSUMER3, "{body}");
    assert_eq!(purpose.unwrap().to_str().unwrap(), LICENCE);
    for (region, status, reason) in [("DE", 403, "condition_not_met"), ("BE", 200, "")] {
        let (got, body) = env
            .get("/api/containers/C2", &token, &[("X-Region", region)])
            .await;
        assert_eq!(got, status, "{region}: {body}");
        if status == 403 {
            assert_eq!(body["reason"], reason, "{body}");
        }
    }
    let (status, body) = env
        .get("/api/containers/SECRET-1", &token, &[("X-Region", "NL")])
        .await;
    assert_refused(status, &body, (403, "denied_by_rule"));
    // Evidence the consumer fetched itself, in 3.0's header: bound to us by the designation,
    // though it names no service provider.
    let evidence = env
        .bed
        .evidence_of(CONSUMER3, AR3, &container_read_3(CONSUMER3, "C3"))
        .await;
    let claims = claims(&evidence);
    assert_eq!(
        claims["sub"], AR3,
        "3.0 evidence names its registry as sub: {claims}"
    );
    let policy = &claims["delegationEvidence"]["policySets"][0]["policies"][0];
    assert!(policy["target"].get("environment").is_none(), "{policy}");
    let with = |region| {
        [
            ("delegationEvidence", evidence.as_str()),
            ("X-Region", region),
        ]
    };
    let (status, body) = env.get("/api/documents/C3", &token, &with("NL")).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = env.get("/api/documents/C3", &token, &with("FR")).await;
    assert_refused(status, &body, (403, "condition_not_met"));
    // A party whose framework compliance ended gets no token.
    let former = env.token_response(&env.bed.identity(FORMER3), None).await;
    let (status, body) = status_json(former).await;
    assert_refused(status, &body, (400, "party_not_active"));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parties_named_by_their_aliases_are_the_parties_their_records_name() {
    let env = env("3.0").await;
    let token = env.token(CONSUMER3).await;
    // Evidence the consumer asked for by the EORI aliases of the data owner and itself: the
    // registry mirrors the mask as asked.
    let mut asked = container_read_3(CONSUMER_EORI, "C4");
    asked.policy_issuer = OWNER_EORI.into();
    let evidence = env.bed.evidence_of(CONSUMER3, AR3, &asked).await;
    let ev = &claims(&evidence)["delegationEvidence"];
    assert_eq!(ev["policyIssuer"], OWNER_EORI, "{ev}");
    assert_eq!(ev["target"]["accessSubject"], CONSUMER_EORI, "{ev}");
    let with = |region| {
        [
            ("delegationEvidence", evidence.as_str()),
            ("X-Region", region),
        ]
    };
    let (status, body) = env.get("/api/documents/C4", &token, &with("NL")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["headers"]["x-consumer-party-id"], CONSUMER3, "{body}");
    let (status, body) = env.get("/api/documents/C4", &token, &with("DE")).await;
    assert_refused(status, &body, (403, "condition_not_met"));
    // Another party presenting it: the consumer's alias is not its name.
    let stellar = env.token(STELLAR3).await;
    let (status, body) = env.get("/api/documents/C4", &stellar, &with("NL")).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["reason"], "evidence_not_for_caller", "{body}");
    // A route naming the data owner by its alias: the registry is asked about the owner's did
    // (whose policy holds the condition), and the decision is made on the owner's did.
    let (status, body) = env
        .get("/api/legacy/C5", &token, &[("X-Region", "BE")])
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = env
        .get("/api/legacy/C5", &token, &[("X-Region", "DE")])
        .await;
    assert_refused(status, &body, (403, "condition_not_met"));
    env.stop().await;
}

/// A party of the 3.0 testbed that is not served, with `roles` and the aliases it claims.
fn claiming(id: &str, name: &str, roles: &[&str], aliases: &[&str]) -> PartyConfig {
    PartyConfig {
        id: id.into(),
        name: name.into(),
        serve: None,
        port: 0,
        roles: roles.iter().map(|r| r.to_string()).collect(),
        status: "Active".into(),
        start_date: None,
        end_date: None,
        registries: Vec::new(),
        also_known_as: aliases.iter().map(|a| a.to_string()).collect(),
        registries_for: Default::default(),
        registries_in: Default::default(),
        dataspaces: Vec::new(),
        dataspace_roles: Default::default(),
        strict: false,
        keyrock: false,
    }
}

/// Evidence `signer` signs now for `aud`: `issuer` lets `subject` read every container at us,
/// and pass it on `depth` steps further.
fn signed_evidence(
    bed: &Bed,
    signer: &str,
    parties: (&str, &str),
    aud: &str,
    depth: u32,
) -> String {
    let environment = json!({"serviceProviders": [SP3]});
    evidence_for(bed, signer, parties, aud, (depth, Some(environment)))
}

/// `signed_evidence`, its policy's `environment` given (3.0's schema has none).
fn evidence_for(
    bed: &Bed,
    signer: &str,
    (issuer, subject): (&str, &str),
    aud: &str,
    (depth, environment): (u32, Option<Value>),
) -> String {
    let now = ishare_gateway::scheme::Timestamp::now().secs();
    let mut target = json!({
        "resource": {"type": "CONTAINER", "identifiers": ["*"], "attributes": ["*"]},
        "actions": ["iSHARE.READ"]
    });
    if let Some(environment) = environment {
        target["environment"] = environment;
    }
    let evidence = json!({
        "notBefore": now - 10, "notOnOrAfter": now + 600,
        "policyIssuer": issuer, "target": {"accessSubject": subject},
        "policySets": [{"maxDelegationDepth": depth, "policies": [{
            "target": target,
            "rules": [{"effect": "Permit"}]
        }]}]
    });
    let claims = json!({"iss": signer, "sub": signer, "aud": aud,
        "jti": uuid::Uuid::new_v4().to_string(), "iat": now, "exp": now + 30,
        "delegationEvidence": evidence});
    bed.identity(signer).sign_raw(&claims).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_stands_only_for_the_party_its_own_lookup_finds() {
    // Records the participant registry signed that claim others' names: a consumer claiming the
    // data owner's did, one claiming the gateway's, a registry claiming the owner's registry's.
    const ROGUE: &str = "did:ishare:EU.NL.NTRNL-10000010";
    const CLAIMANT: &str = "did:ishare:EU.NL.NTRNL-10000011";
    const ROGUE_AR: &str = "did:ishare:EU.NL.NTRNL-10000012";
    let mut config = testbed_config_of("scheme_3_0_aliases", "conf/testbed-3.0.toml");
    config.parties.extend([
        claiming(ROGUE, "Rogue Consumer", &["ServiceConsumer"], &[OWNER3]),
        claiming(CLAIMANT, "Claimant", &["ServiceConsumer"], &[SP3]),
        claiming(
            ROGUE_AR,
            "Rogue Registry",
            &["AuthorisationRegistry"],
            &[AR3],
        ),
    ]);
    let env = env_on(Bed::start_of(config).await, "3.0").await;
    let ambiguous = |(status, body): (u16, Value)| {
        assert_refused(status, &body, (403, "party_name_ambiguous"));
    };
    // The rogue consumer signs evidence as the data owner whose did its record claims.
    let token = env.token(ROGUE).await;
    let forged = signed_evidence(&env.bed, ROGUE, (OWNER3, ROGUE), ROGUE, 0);
    let with = [("delegationEvidence", forged.as_str()), ("X-Region", "NL")];
    ambiguous(env.get("/api/documents/C1", &token, &with).await);
    // Whatever it presents: the data owner's name is no one's while that consumer asks.
    let own = signed_evidence(&env.bed, ROGUE, (ROGUE, ROGUE), ROGUE, 0);
    let with = [("delegationEvidence", own.as_str()), ("X-Region", "NL")];
    ambiguous(env.get("/api/documents/C1", &token, &with).await);
    // A caller whose record claims the gateway's id: whom the evidence must name is no one's.
    let token = env.token(CLAIMANT).await;
    ambiguous(
        env.get("/api/legacy/C5", &token, &[("X-Region", "NL")])
            .await,
    );
    // A registry whose record claims the owner's designated registry's id is not that registry.
    let token = env.token(CONSUMER3).await;
    let posing = signed_evidence(&env.bed, ROGUE_AR, (OWNER3, CONSUMER3), CONSUMER3, 0);
    let with = [("delegationEvidence", posing.as_str()), ("X-Region", "NL")];
    let (status, body) = env.get("/api/documents/C1", &token, &with).await;
    assert_refused(
        status,
        &body,
        (403, "evidence_issuer_not_the_owners_registry"),
    );
    // The consumer is served as ever: its own registry's evidence.
    let evidence = env
        .bed
        .evidence_of(CONSUMER3, AR3, &container_read_3(CONSUMER3, "C1"))
        .await;
    let with = [
        ("delegationEvidence", evidence.as_str()),
        ("X-Region", "NL"),
    ];
    let (status, body) = env.get("/api/documents/C1", &token, &with).await;
    assert_eq!(status, 200, "{body}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_links_through_a_delegate_named_by_its_alias() {
    // Happy Pets lets ABC Trucking read, naming it by its EORI; ABC Trucking, signing with its
    // did, passes it on to Stellar Storage under that same EORI.
    let env = env("3.0").await;
    let step = |signer: &str, parties: (&str, &str), depth: u32| {
        signed_evidence(&env.bed, signer, parties, STELLAR3, depth)
    };
    let chain = [
        step(OWNER3, (OWNER3, CONSUMER_EORI), 1),
        step(CONSUMER3, (CONSUMER_EORI, STELLAR3), 0),
    ]
    .join(",");
    let token = env.token(STELLAR3).await;
    let with = [("delegationEvidence", chain.as_str()), ("X-Region", "NL")];
    let (status, body) = env.get("/api/documents/C1", &token, &with).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["headers"]["x-consumer-party-id"], STELLAR3, "{body}");
    // The same link written as a name no record lists is broken.
    let chain = [
        step(OWNER3, (OWNER3, "EU.EORI.NL000000099"), 1),
        step(CONSUMER3, (CONSUMER_EORI, STELLAR3), 0),
    ]
    .join(",");
    let with = [("delegationEvidence", chain.as_str()), ("X-Region", "NL")];
    let (status, body) = env.get("/api/documents/C1", &token, &with).await;
    assert_refused(status, &body, (403, "delegation_chain_broken"));
    env.stop().await;
}

/// Stellar Storage reads documents of C1 from the Netherlands with `chain` in the header.
async fn read_documents(env: &Env, chain: String) -> (u16, Value) {
    let token = env.token(STELLAR3).await;
    let with = [("delegationEvidence", chain.as_str()), ("X-Region", "NL")];
    env.get("/api/documents/C1", &token, &with).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_later_step_is_bound_to_us_by_the_route_owners_registry_only_where_its_owner_chose_none()
{
    // Happy Pets designated the registry for us. ABC Trucking passes Happy Pets' delegation on
    // to Stellar Storage, both steps signed by that registry and naming no service provider.
    let chain = |bed: &Bed| {
        let step = |parties: (&str, &str), depth: u32| {
            evidence_for(bed, AR3, parties, STELLAR3, (depth, None))
        };
        [step((OWNER3, CONSUMER3), 1), step((CONSUMER3, STELLAR3), 0)].join(",")
    };
    // ABC Trucking chose no registry: the second step is bound to us by Happy Pets' choice.
    let env = env("3.0").await;
    let (status, body) = read_documents(&env, chain(&env.bed)).await;
    assert_eq!(status, 200, "{body}");
    env.stop().await;
    // ABC Trucking chose that registry for another service provider only: not for us.
    let mut config = testbed_config_of(BIN, "conf/testbed-3.0.toml");
    let consumer = config.parties.iter_mut().find(|p| p.id == CONSUMER3);
    let consumer = consumer.expect("ABC Trucking");
    consumer.registries_for = [(FORMER3.to_string(), AR3.to_string())].into();
    let env = env_on(Bed::start_of(config).await, "3.0").await;
    let (status, body) = read_documents(&env, chain(&env.bed)).await;
    assert_refused(status, &body, (403, "service_provider_not_named"));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_naming_ever_new_parties_spends_only_its_own_lookups() {
    let env = env("3.0").await;
    // ABC Trucking's certificate, signing as parties nobody registered: each costs a lookup,
    // a few a minute, then the certificate waits (503) — and others are served on.
    let creds = &env.bed.creds(CONSUMER3).credentials;
    let mut statuses = Vec::new();
    for n in 0..10 {
        let stranger = creds
            .identity_for(&format!("did:ishare:EU.NL.NTRNL-9000{n:04}"))
            .unwrap();
        let (status, body) = status_json(env.token_response(&stranger, None).await).await;
        statuses.push((
            status,
            body["reason"].as_str().unwrap_or_default().to_string(),
        ));
    }
    assert!(statuses[..6].iter().all(|(s, _)| *s != 503), "{statuses:?}");
    assert_eq!(
        statuses.last().unwrap(),
        &(503, "scheme_owner_busy".to_string()),
        "{statuses:?}"
    );
    let (status, body) =
        status_json(env.token_response(&env.bed.identity(STELLAR3), None).await).await;
    assert_eq!(status, 200, "{body}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_signs_in_at_a_3_0_identity_provider() {
    let env = env("3.0").await;
    let mut person = support::people::browser(&env);
    let url = format!("{}/people/containers/C1", env.url);
    let signed = person.sign_in(&url, "jane", "jane-testbed-password").await;
    let signed = signed.unwrap();
    // The gateway posted to the 3.0 /connect/authorize, the provider sent the person back to the
    // 3.0 /return; the code was redeemed at /connect/token with redirect_uri, and the attributes
    // read by GET from /connect/userinfo's userinfoToken (the testbed's 3.0 provider has no other).
    assert!(
        signed
            .return_url
            .starts_with(&format!("{}/return?", env.url)),
        "{}",
        signed.return_url
    );
    assert_eq!(signed.returned.status, 303, "{}", signed.returned.body);
    let landing = signed.landing.expect("back at the page");
    assert_eq!(landing.status, 200, "{}", landing.body);
    let seen: Value = serde_json::from_str(&landing.body).unwrap();
    assert_eq!(seen["headers"]["x-person-id"], "did:ishare:person.jane-doe");
    assert_eq!(seen["headers"]["x-person-company-name"], "ABC Trucking");
    // The 1.9 paths are not ours in 3.0.
    let old = env
        .bed
        .http
        .get(format!(
            "{}/openid_connect1.0/return?code=x&state=y",
            env.url
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(old.status(), 404);
    // The 3.0 provider asks userinfo by GET only, and answers in its own member.
    let by_post = env
        .bed
        .http
        .post(format!("{}/connect/userinfo", env.bed.url(IDP3)))
        .bearer_auth("anything")
        .send()
        .await
        .unwrap();
    assert_eq!(by_post.status(), 405);
    env.stop().await;
}

/// `ishare-gateway client --testbed DIR --as CONSUMER3 ARGS…`: whether it succeeded, its output
/// and its errors.
async fn client(bed: &Bed, args: &[&str]) -> (bool, String, String) {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_ishare-gateway"));
    command
        .args(["client", "--testbed"])
        .arg(&bed.keys.data_dir)
        .args(["--as", CONSUMER3])
        .args(args);
    let out = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_command_speaks_3_0_when_told() {
    let env = env("3.0").await;
    let so = env.bed.url(SO3);
    let v3 = ["--scheme-version", "3.0"];
    // A party found by its alias: its 3.0 record.
    let (ok, out, err) = client(
        &env.bed,
        &[&v3[..], &["party", "--url", &so, "--id", CONSUMER_EORI]].concat(),
    )
    .await;
    assert!(ok, "{err}");
    assert!(
        out.contains("partyToken") && out.contains(CONSUMER3),
        "{out}"
    );
    let (ok, out, err) = client(
        &env.bed,
        &[&v3[..], &["trusted-list", "--url", &so]].concat(),
    )
    .await;
    assert!(ok && out.contains("trustedListToken"), "{out}{err}");
    let (ok, out, err) = client(
        &env.bed,
        &[
            &v3[..],
            &[
                "parties",
                "--url",
                &so,
                "--query",
                &format!("alsoKnownAs={CONSUMER_EORI}"),
            ],
        ]
        .concat(),
    )
    .await;
    assert!(ok && out.contains(CONSUMER3), "{out}{err}");
    // A 1.9 search parameter is never sent to a 3.0 participant registry.
    let (ok, _, err) = client(
        &env.bed,
        &[&v3[..], &["parties", "--url", &so, "--query", "eori=*"]].concat(),
    )
    .await;
    assert!(
        !ok && err.contains("eori is no query parameter of 3.0"),
        "{err}"
    );
    // Spoken as 1.9 to the 3.0 participant registry: refused, with why.
    let (ok, _, err) = client(&env.bed, &["party", "--url", &so, "--id", CONSUMER3]).await;
    assert!(
        !ok && err.contains("another version of the scheme"),
        "{err}"
    );
    // Evidence asked in 3.0's body, answered as delegationToken, sent in 3.0's header.
    let ar = env.bed.url(AR3);
    let (ok, evidence, err) = client(
        &env.bed,
        &[
            &v3[..],
            &[
                "--raw",
                "evidence",
                "--registry",
                &ar,
                "--issuer",
                OWNER3,
                "--type",
                "CONTAINER",
                "--id",
                "C7",
                "--action",
                "iSHARE.READ",
            ],
        ]
        .concat(),
    )
    .await;
    assert!(ok, "{err}");
    let evidence = evidence.trim().to_string();
    assert_eq!(claims(&evidence)["sub"], AR3);
    let (ok, _, err) = client(
        &env.bed,
        &[
            &v3[..],
            &[
                "evidence",
                "--registry",
                &ar,
                "--issuer",
                OWNER3,
                "--type",
                "CONTAINER",
                "--action",
                "iSHARE.READ",
                "--service-provider",
                SP3,
            ],
        ]
        .concat(),
    )
    .await;
    assert!(
        !ok && err.contains("a 3.0 mask names no service provider"),
        "{err}"
    );
    let url = format!("{}/api/documents/C7", env.url);
    let call = |region: &'static str| {
        let evidence = evidence.clone();
        let url = url.clone();
        let bed = &env.bed;
        async move {
            let header = format!("X-Region: {region}");
            client(
                bed,
                &[
                    &v3[..],
                    &["call", &url, "--evidence", &evidence, "-H", &header],
                ]
                .concat(),
            )
            .await
        }
    };
    let (ok, out, err) = call("NL").await;
    assert!(ok && out.contains("-> 200"), "{out}{err}");
    let (ok, out, _) = call("DE").await;
    assert!(!ok && out.contains("condition_not_met"), "{out}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capabilities_are_written_as_3_0_and_hold_to_its_schema() {
    let env = env("3.0").await;
    let token = env.token(CONSUMER3).await;
    let mut infos = Vec::new();
    for bearer in [None, Some(token.as_str())] {
        let mut req = env.bed.http.get(format!("{}/capabilities", env.url));
        if let Some(t) = bearer {
            req = req.bearer_auth(t);
        }
        let (status, body) = status_json(req.send().await.unwrap()).await;
        assert_eq!(status, 200, "{body}");
        assert!(body.get("capabilities_token").is_none(), "{body}");
        let claims = claims(body["capabilitiesToken"].as_str().unwrap());
        assert_eq!(claims["iss"], SP3);
        // Addressed to its caller, or anonymous to the provider itself: 3.0 requires an `aud`.
        assert_eq!(claims["aud"], bearer.map_or(SP3, |_| CONSUMER3), "{claims}");
        let skeleton = "/components/schemas/jwtPayloadSkeleton";
        assert_eq!(schema_errors(skeleton, std::slice::from_ref(&claims)), "");
        infos.push(claims["capabilitiesInfo"].clone());
    }
    // So does every participant of the 3.0 testbed that serves.
    let serving: Vec<_> = [SO3, AR3, SP3, OWNER3, STELLAR3, IDP3]
        .into_iter()
        .filter_map(|party| Some((party, env.bed.testbed.url(party)?)))
        .collect();
    assert!(serving.len() >= 5, "{serving:?}");
    for (party, url) in serving {
        let resp = env
            .bed
            .http
            .get(format!("{url}/capabilities"))
            .send()
            .await
            .unwrap();
        let (status, body) = status_json(resp).await;
        assert_eq!(status, 200, "{party}: {body}");
        let claims = claims(body["capabilitiesToken"].as_str().unwrap());
        assert_eq!(claims["aud"], party, "{claims}");
        let skeleton = "/components/schemas/jwtPayloadSkeleton";
        assert_eq!(
            schema_errors(skeleton, std::slice::from_ref(&claims)),
            "",
            "{party}"
        );
    }
    let identifiers = |info: &Value, list: &str| -> Vec<String> {
        info[list]
            .as_array()
            .into_iter()
            .flatten()
            .map(|s| s["identifier"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        identifiers(&infos[0], "publicServices"),
        ["get-capabilities-token", "request-oauth-token"]
    );
    assert!(infos[0].get("restrictedServices").is_none(), "{}", infos[0]);
    assert_eq!(identifiers(&infos[1], "restrictedServices"), ["containers"]);
    let pointer = "/components/schemas/capabilitiesInfo";
    assert_eq!(schema_errors(pointer, &infos), "", "{infos:?}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_configured_for_1_9_is_not_ready_with_a_3_0_scheme_owner_and_says_why() {
    use support::process::GatewayProcess;
    let bed = bed().await;
    let (dir, ports) = gateway_dir(&bed, BIN, &rules(), &login(&bed), |t| {
        t.replace(SO, SO3).replace(SP, SP3)
    });
    let mut gateway = GatewayProcess::start(BIN, &dir.join("gateway.toml"), ports.admin);
    // The 1.9 trusted list's path is not a 3.0 scheme owner's, whose own path answers: not
    // ready, saying which version the scheme owner appears to speak and what to set.
    let setting = r#"set [scheme_owner] scheme_version = \"3.0\""#;
    let (status, said) = gateway.wait_ready_saying("appears to speak 3.0").await;
    assert_eq!(status, 503, "{said}");
    let said = said.to_string();
    assert!(
        said.contains("trusted list") && said.contains("404") && said.contains(setting),
        "{said}"
    );
    // A request that needs the scheme owner is refused as unavailable, and the log says why.
    let plain = format!("http://127.0.0.1:{}", ports.plain);
    let form = token_form(&bed.identity(CONSUMER3), SP3, None);
    let (status, body) = status_json(request_token(&bed.http, &plain, form).await).await;
    assert_refused(status, &body, (503, "scheme_owner_unavailable"));
    let (_, log) = gateway.terminate().await;
    assert!(log.contains("appears to speak 3.0"), "{log}");
    bed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_3_0_participant_registry_answers_the_3_0_search_and_refuses_what_3_0_does_not_have() {
    let bed = bed().await;
    let so = bed.url(SO3);
    let token = bed.token(SO3, CONSUMER3).await;
    let search = |query: &str| {
        bed.http
            .get(format!("{so}/parties?{query}"))
            .bearer_auth(&token)
            .send()
    };
    let (status, body) = status_json(search("id=EU.EORI.NL000000001").await.unwrap()).await;
    assert_eq!(status, 200, "{body}");
    let info = &claims(body["partiesToken"].as_str().unwrap())["partiesInfo"];
    assert_eq!(
        (&info["totalCount"], &info["data"][0]["id"]),
        (&json!(1), &json!(CONSUMER3))
    );
    let (status, body) = status_json(search("name=*&pageSize=3&page=2").await.unwrap()).await;
    assert_eq!(status, 200, "{body}");
    let info = &claims(body["partiesToken"].as_str().unwrap())["partiesInfo"];
    assert_eq!(
        (&info["currentPage"], &info["pageSize"], &info["count"]),
        (&json!(2), &json!(3), &json!(3))
    );
    let records: Vec<Value> = info["data"].as_array().unwrap().clone();
    assert_eq!(
        schema_errors("/components/schemas/party", &records),
        "",
        "{records:?}"
    );
    // Filtered by claims, as the product's client asks: the parties whose registry is AR3 (the
    // data owner's designation), the service providers by their role, both at once.
    let ids = |body: &Value| -> Vec<String> {
        let info = &claims(body["partiesToken"].as_str().unwrap())["partiesInfo"];
        info["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["id"].as_str().unwrap().to_string())
            .collect()
    };
    let designated = format!("claimFilter%5BauthRegistry.authRegistryId%5D={AR3}");
    let (status, body) = status_json(search(&designated).await.unwrap()).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        ids(&body).contains(&OWNER3.to_string()) && !ids(&body).contains(&SP3.to_string()),
        "{body}"
    );
    let role = "claimFilter%5BframeworkRole.roleId%5D=ServiceProvider";
    let (status, body) = status_json(search(role).await.unwrap()).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        ids(&body).contains(&SP3.to_string()) && !ids(&body).contains(&CONSUMER3.to_string()),
        "{body}"
    );
    let both = format!("{designated}&{role}&name=*");
    let (status, body) = status_json(search(&both).await.unwrap()).await;
    assert_eq!(status, 200, "{body}");
    assert!(!ids(&body).contains(&OWNER3.to_string()), "{body}");
    for wrong in [
        "claimFilter%5B%5D=x",
        "claimFilter%5B.roleId%5D=x",
        "claimFilter%5BroleId%5D=a*b*",
    ] {
        let (status, body) = status_json(search(wrong).await.unwrap()).await;
        assert_eq!(status, 400, "{wrong}: {body}");
    }
    // The parameters 3.0 removed are refused, never ignored into an unfiltered page.
    for removed in [
        "eori=EU.EORI.NL000000001",
        "name=*&active_only=true",
        "name=*&certificate_subject_name=CN%3Dx",
    ] {
        let (status, body) = status_json(search(removed).await.unwrap()).await;
        assert_eq!(status, 400, "{removed}: {body}");
    }
    bed.stop().await;
}

#[tokio::test]
async fn the_testbed_registry_answers_3_0_evidence_that_holds_to_its_schema() {
    let bed = bed().await;
    let evidence = bed
        .evidence_of(CONSUMER3, AR3, &container_read_3(CONSUMER3, "C1"))
        .await;
    let claims = claims(&evidence);
    let pointer = "/components/schemas/jwtPayloadDelegationEvidenceToken/allOf/1/properties/delegationEvidence";
    let found = schema_errors(pointer, std::slice::from_ref(&claims["delegationEvidence"]));
    assert_eq!(found, "", "{claims}");
    let rule = &claims["delegationEvidence"]["policySets"][0]["policies"][0]["rules"][0];
    assert_eq!(
        rule["conditions"]["anyOf"][0]["rightOperand"], "NL",
        "{rule}"
    );
    bed.stop().await;
}

/// The value of `key` in `[table]` of a TOML text.
fn toml_value(text: &str, table: &str, key: &str) -> String {
    let doc: toml::Table = text.parse().unwrap();
    let within = match table {
        "" => &doc,
        t => doc[t].as_table().unwrap(),
    };
    within[key].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_3_0_configuration_runs_as_the_binary_reloads_and_stops() {
    use support::process::GatewayProcess;
    let dir = scratch_dir(BIN);
    shipped_3_0_on_free_ports(&dir);
    let mut testbed = support::process::testbed_process(&dir.join("testbed-3.0.toml")).await;
    let config = dir.join("gateway-3.0.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    let admin = toml_value(&text, "admin", "address");
    let admin_port = admin.rsplit(':').next().unwrap().parse().unwrap();
    let public = toml_value(&text, "", "public_url");
    let mut gateway = GatewayProcess::start("gateway-3.0", &config, admin_port);
    let generation = gateway.wait_ready().await;

    // A token for the did consumer, by the client command in 3.0.
    let data = dir.join("data-3.0");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ishare-gateway"))
        .args(["client", "--testbed"])
        .arg(&data)
        .args([
            "--as",
            CONSUMER3,
            "--scheme-version",
            "3.0",
            "--raw",
            "token",
            "--url",
            &public,
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let token = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let http = client_trusting_from(&data.join("ca.pem"), None);
    let read = |region: &'static str| {
        let request = http
            .get(format!("{public}/api/containers/C1"))
            .bearer_auth(&token)
            .header("X-Region", region);
        async move { status_json(request.send().await.unwrap()).await }
    };
    let (status, body) = read("NL").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["headers"]["x-consumer-party-id"], CONSUMER3);
    let (status, body) = read("DE").await;
    assert_refused(status, &body, (403, "condition_not_met"));

    // A 3.0 consumer signs its client assertion with RS384 or RS512, as 3.0 allows: a token.
    let pem = |kind: &str| {
        std::fs::read_to_string(data.join(format!("parties/{CONSUMER3}.{kind}.pem"))).unwrap()
    };
    let key = pem("key");
    let consumer = ishare_gateway::scheme::party::PartyId::parse(CONSUMER3).unwrap();
    let identity =
        ishare_gateway::scheme::jwt::SigningIdentity::from_pem(consumer, &key, &pem("chain"))
            .unwrap();
    let audience = toml_value(&text, "identity", "party_id");
    for alg in ["RS384", "RS512"] {
        let now = ishare_gateway::scheme::Timestamp::now().secs();
        let header = json!({"alg": alg, "typ": "JWT", "x5c": identity.x5c()});
        let claims = json!({"iss": CONSUMER3, "sub": CONSUMER3, "aud": audience,
            "jti": uuid::Uuid::new_v4().to_string(), "iat": now, "exp": now + 30});
        let form = token_form(&identity, &audience, Some(forge(&header, &claims, &key)));
        let (status, body) = status_json(request_token(&http, &public, form).await).await;
        assert_eq!(status, 200, "{alg}: {body}");
    }

    // SIGHUP: the same configuration again, served on; SIGTERM: a clean stop.
    gateway.reload(generation).await;
    let (status, body) = read("BE").await;
    assert_eq!(status, 200, "{body}");
    let (status, log) = gateway.terminate().await;
    assert!(status.success(), "{log}");
    testbed.kill();
}

/// The 3.0 registry stores only what 3.0 defines: a policy naming its service providers as 1.9
/// did (`environment.serviceProviders`, which 3.0 dropped), or holding a member no version has,
/// is refused with the member named, where stored it would never match.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_3_0_registry_refuses_to_store_members_3_0_does_not_define() {
    let bed = bed().await;
    let token = bed.token(AR3, OWNER3).await;
    let add = |body: Value| {
        bed.http
            .post(format!("{}/policy", bed.url(AR3)))
            .bearer_auth(&token)
            .json(&body)
            .send()
    };
    let policy = |target_extra: Value| {
        let mut target = json!({
            "resource": {"type": "CONTAINER", "identifiers": ["C9"], "attributes": ["*"]},
            "actions": ["iSHARE.READ"]
        });
        if let (Value::Object(t), Value::Object(extra)) = (&mut target, target_extra) {
            t.extend(extra);
        }
        json!({
            "notBefore": 0, "notOnOrAfter": 4102444800i64,
            "policyIssuer": OWNER3, "target": {"accessSubject": CONSUMER3},
            "policySets": [{"policies": [{"target": target, "rules": [{"effect": "Permit"}]}]}]
        })
    };
    for (extra, member) in [
        (
            json!({"environment": {"serviceProviders": [SP3]}}),
            "policySets[0].policies[0].target.environment.serviceProviders",
        ),
        (
            json!({"purpose": "x"}),
            "policySets[0].policies[0].target.purpose",
        ),
    ] {
        let (status, body) = status_json(add(policy(extra)).await.unwrap()).await;
        assert_eq!(status, 400, "{body}");
        let said = body["error_description"].as_str().unwrap_or_default();
        assert!(
            said.starts_with(&format!("{member} is not a member")),
            "{body}"
        );
    }
    let (status, body) = status_json(add(policy(json!({}))).await.unwrap()).await;
    assert_eq!(status, 201, "{body}");
    bed.stop().await;
}

/// The three endpoints 3.0 tags "Participant Registry (Required)" beside the party search: a
/// party's claims, the scheme's data spaces (two in the testbed) and its frameworks, each as the
/// official document has it, paged where it pages, and only to a caller with a token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_3_0_participant_registry_serves_claims_dataspaces_and_frameworks() {
    let bed = bed().await;
    let so = bed.url(SO3);
    let token = bed.token(SO3, CONSUMER3).await;
    let get = |path: &str| {
        bed.http
            .get(format!("{so}{path}"))
            .bearer_auth(&token)
            .send()
    };
    let answer = |body: &Value, member: &str, info: &str| {
        let claims = claims(body[member].as_str().unwrap());
        assert_eq!(
            (&claims["iss"], &claims["aud"]),
            (&json!(SO3), &json!(CONSUMER3))
        );
        claims[info].clone()
    };
    // A party's claims, by any of its identifiers: those of its record.
    let (status, body) = status_json(
        get(&format!("/parties/{CONSUMER_EORI}/claims"))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let claims_info = answer(&body, "claimsToken", "claimsInfo");
    let pointer = "/components/schemas/jwtPayloadClaimsToken/allOf/1/properties/claimsInfo";
    assert_eq!(
        schema_errors(pointer, std::slice::from_ref(&claims_info)),
        ""
    );
    let types: Vec<&str> = claims_info["claims"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert!(
        types.contains(&"frameworkCompliance") && types.contains(&"x509Certificate"),
        "{types:?}"
    );
    let (status, _) = status_json(
        get("/parties/did:ishare:EU.NL.NTRNL-99999999/claims")
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 404);
    // The data spaces: two, one a page. (`jwtPayloadDataspacesToken` requires both
    // `dataspacesInfo` and, in its second part, `dataspaceInfo`: a defect of the document; the
    // answer's `dataspacesInfo` is held to the schema it names.)
    let (status, body) = status_json(get("/dataspaces?pageSize=1&page=2").await.unwrap()).await;
    assert_eq!(status, 200, "{body}");
    let spaces = answer(&body, "dataspacesToken", "dataspacesInfo");
    assert_eq!(
        schema_errors(
            "/components/schemas/dataspacesInfo",
            std::slice::from_ref(&spaces)
        ),
        ""
    );
    assert_eq!(
        (
            &spaces["totalCount"],
            &spaces["count"],
            &spaces["data"][0]["id"]
        ),
        (&json!(2), &json!(1), &json!("EU.DS.GND.NL.PETCARE"))
    );
    // The framework every record's claims name.
    let (status, body) = status_json(get("/frameworks").await.unwrap()).await;
    assert_eq!(status, 200, "{body}");
    let frameworks = answer(&body, "frameworksToken", "frameworksInfo");
    let pointer = "/components/schemas/jwtPayloadFrameworksToken/allOf/1/properties/frameworksInfo";
    assert_eq!(
        schema_errors(pointer, std::slice::from_ref(&frameworks)),
        ""
    );
    let named = &claims_info["claims"][0]["frameworkId"];
    assert_eq!(&frameworks["data"][0]["id"], named, "{frameworks}");
    // Only with a token; only the parameters they have.
    for path in [
        "/dataspaces",
        "/frameworks",
        &format!("/parties/{CONSUMER3}/claims"),
    ] {
        let resp = bed.http.get(format!("{so}{path}")).send().await.unwrap();
        assert_eq!(resp.status(), 401, "{path}");
    }
    for wrong in [
        "/dataspaces?size=20",
        "/frameworks?pageSize=101",
        "/dataspaces?page=0",
    ] {
        let (status, body) = status_json(get(wrong).await.unwrap()).await;
        assert_eq!(status, 400, "{wrong}: {body}");
    }
    bed.stop().await;
}

/// Happy Pets designates a registry for the pet care data space beside its default (here without
/// its designation for Warehouse 13): a gateway serving in that data space asks the registry
/// designated for it, whose evidence binds to it though 3.0 evidence names no service provider;
/// a gateway serving in no data space asks the default, which answers only the service providers
/// it is designated for, and so refuses it. The pet care registry is a registry in its data space
/// only (a `dataspaceRole`): where its record does not say so, it is asked nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_designated_for_a_data_space_we_serve_in_is_asked_and_binds_its_evidence() {
    const PETCARE: &str = "EU.DS.GND.NL.PETCARE";
    for (serving, its_role) in [(Some(PETCARE), true), (None, true), (Some(PETCARE), false)] {
        let mut config = testbed_config_of(BIN, "conf/testbed-3.0.toml");
        let owner = config.parties.iter_mut().find(|p| p.id == OWNER3).unwrap();
        owner.registries_for.clear();
        assert_eq!(
            owner.registries_in.get(PETCARE).map(String::as_str),
            Some(PETCARE_AR3)
        );
        let registry = config
            .parties
            .iter_mut()
            .find(|p| p.id == PETCARE_AR3)
            .unwrap();
        assert!(
            registry.roles.is_empty(),
            "a registry in its data space only"
        );
        if !its_role {
            registry.dataspace_roles.clear();
        }
        let bed = Bed::start_of(config).await;
        let (dir, ports) = dir_on(&bed, "3.0", serving);
        let env = Env::launch(bed, dir, &ports).await;
        let token = env.token(CONSUMER3).await;
        let (status, body) = env
            .get("/api/containers/C1", &token, &[("X-Region", "NL")])
            .await;
        let m = env.metrics().await;
        let asked = |registry: &str| {
            metric(
                &m,
                "ishare_gateway_registry_calls_total",
                &[("registry", registry)],
            )
        };
        match serving {
            Some(_) if its_role => {
                assert_eq!(status, 200, "{body}");
                assert_eq!((asked(PETCARE_AR3), asked(AR3)), (1.0, 0.0), "{m}");
            }
            Some(_) => {
                assert_eq!(status, 403, "{body}");
                assert_eq!(body["reason"], "no_registry", "{body}");
                let said = body["error_description"].as_str().unwrap_or_default();
                assert!(
                    said.contains(&format!(
                        "{PETCARE_AR3} is not an active authorisation registry"
                    )),
                    "{body}"
                );
                assert_eq!((asked(PETCARE_AR3), asked(AR3)), (0.0, 0.0), "{m}");
            }
            None => {
                assert_eq!(status, 502, "{body}");
                assert_eq!(body["reason"], "registry_refused_request", "{body}");
                assert_eq!((asked(PETCARE_AR3), asked(AR3)), (0.0, 1.0), "{m}");
            }
        }
        env.stop().await;
    }
}

/// The same data-space designation through the binary (`ishare-gateway run --config …` with
/// `dataspaces`): only the registry Happy Pets designated for the pet care data space grants
/// Warehouse 13 (its default registry answers only the service providers it is designated for);
/// served on after SIGHUP, stopped cleanly by SIGTERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_serving_in_a_data_space_runs_as_the_binary() {
    use support::process::GatewayProcess;
    let mut config = testbed_config_of(BIN, "conf/testbed-3.0.toml");
    let owner = config.parties.iter_mut().find(|p| p.id == OWNER3).unwrap();
    owner.registries_for.clear();
    let bed = Bed::start_of(config).await;
    let (dir, ports) = dir_on(&bed, "3.0", Some("EU.DS.GND.NL.PETCARE"));
    let mut gateway = GatewayProcess::start(BIN, &dir.join("gateway.toml"), ports.admin);
    let generation = gateway.wait_ready().await;
    let base = format!("http://127.0.0.1:{}", ports.plain);
    let form = token_form(&bed.identity(CONSUMER3), SP3, None);
    let (status, body) = status_json(request_token(&bed.http, &base, form).await).await;
    assert_eq!(status, 200, "{body}");
    let token = body["access_token"].as_str().unwrap().to_string();
    let read = || {
        bed.http
            .get(format!("{base}/api/containers/C1"))
            .bearer_auth(&token)
            .header("X-Region", "NL")
            .send()
    };
    let (status, body) = status_json(read().await.unwrap()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["headers"]["x-consumer-party-id"], CONSUMER3, "{body}");
    gateway.reload(generation).await;
    let (status, body) = status_json(read().await.unwrap()).await;
    assert_eq!(status, 200, "{body}");
    let (status, log) = gateway.terminate().await;
    assert!(status.success(), "{log}");
    bed.stop().await;
}
