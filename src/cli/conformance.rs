//! `ishare-gateway conformance …`: run the scheme's conformance cases against a participant and
//! print the table (and JUnit XML with --junit).

use crate::conformance::{self, report, Broker, Masks, Options, Person, Role};
use crate::scheme::jwt::SigningIdentity;
use crate::scheme::mask::{BodyShape, DelegationBody};
use crate::scheme::models::TrustedListEntry;
use crate::scheme::openid::Flow;
use crate::scheme::party::PartyId;
use crate::scheme::trust::{fingerprint, TrustedList};
use crate::scheme::version::SchemeVersion;
use crate::testbed::pki::TestPki;
use crate::tls::{certs_from_pem, outbound_client, OutboundTrust};
use clap::Parser;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The parties of a testbed the checker acts as by default.
struct TestbedParties {
    client: &'static str,
    service_provider: &'static str,
    inactive: &'static str,
    consumer: &'static str,
    /// The party id of the identity issued from the testbed's CA that the scheme owner does not
    /// know.
    unknown: &'static str,
}

/// The testbed of 1.9 (conf/testbed.toml), also for 2.x.
const TESTBED: TestbedParties = TestbedParties {
    client: "EU.EORI.NL000000001",
    service_provider: "EU.EORI.NL000000003",
    inactive: "EU.EORI.NL000000006",
    consumer: "EU.EORI.NL000000002",
    unknown: "EU.EORI.NL999999999",
};

/// The testbed of 3.0 (conf/testbed-3.0.toml).
const TESTBED_3: TestbedParties = TestbedParties {
    client: "did:ishare:EU.NL.NTRNL-10000001",
    service_provider: "did:ishare:EU.NL.NTRNL-10000003",
    inactive: "did:ishare:EU.NL.NTRNL-10000006",
    consumer: "did:ishare:EU.NL.NTRNL-10000002",
    unknown: "did:ishare:EU.NL.NTRNL-99999999",
};

impl ConformanceArgs {
    /// The testbed parties of the version checked.
    fn testbed_parties(&self) -> &'static TestbedParties {
        match self.scheme_version.camel_case() {
            true => &TESTBED_3,
            false => &TESTBED,
        }
    }
}

#[derive(Parser, Debug)]
#[command(name = "conformance")]
pub struct ConformanceArgs {
    /// The role the target is tested in (`participant-registry` is 3.0's name of `scheme-owner`).
    #[arg(long, value_enum)]
    role: Role,
    /// The version of the scheme the target speaks: 1.9 (also 1.10), 2.0, 2.1, 2.2 or 3.0. 3.0
    /// targets are held to its paths, camelCase members, claims, bodies and headers; 2.x are
    /// checked as 1.9, with the OpenID endpoints at /connect from 2.0.
    #[arg(
        long,
        value_name = "VERSION",
        default_value = "1.9",
        value_parser = SchemeVersion::parse
    )]
    scheme_version: SchemeVersion,
    /// The target's base URL.
    #[arg(long, value_name = "URL")]
    target: String,
    /// The target's party id.
    #[arg(long, value_name = "PARTY_ID")]
    target_id: String,
    /// A testbed's data directory: the CA and the default parties to act as (the client
    /// NL000000001, the service provider NL000000003, the inactive NL000000006, and an unknown
    /// party issued from the testbed's CA; with --scheme-version 3.0 those of the 3.0 testbed:
    /// did:ishare:EU.NL.NTRNL-10000001, -10000003, -10000006 and -99999999).
    #[arg(long, value_name = "DIR")]
    testbed: Option<PathBuf>,
    /// The client to test as (for registries: the access subject of the masks).
    #[arg(long = "as", value_name = "PARTY_ID")]
    party: Option<String>,
    #[arg(long, value_name = "FILE")]
    key: Option<PathBuf>,
    #[arg(long, value_name = "FILE")]
    chain: Option<PathBuf>,
    /// The root (PEM) the target's TLS and signed answers must chain to.
    #[arg(long, value_name = "FILE")]
    ca: Option<PathBuf>,
    /// A service provider named in the masks, asking with the client's assertion in previous_steps.
    #[arg(long = "sp-as", value_name = "PARTY_ID")]
    sp: Option<String>,
    #[arg(long, value_name = "FILE")]
    sp_key: Option<PathBuf>,
    #[arg(long, value_name = "FILE")]
    sp_chain: Option<PathBuf>,
    /// A party the scheme owner knows but which is not active.
    #[arg(long = "inactive-as", value_name = "PARTY_ID")]
    inactive: Option<String>,
    #[arg(long, value_name = "FILE")]
    inactive_key: Option<PathBuf>,
    #[arg(long, value_name = "FILE")]
    inactive_chain: Option<PathBuf>,
    /// A party with a trusted certificate that the scheme owner does not know.
    #[arg(long = "unknown-as", value_name = "PARTY_ID")]
    unknown: Option<String>,
    #[arg(long, value_name = "FILE")]
    unknown_key: Option<PathBuf>,
    #[arg(long, value_name = "FILE")]
    unknown_chain: Option<PathBuf>,
    /// A delegation request (JSON, any version's body shape; sent in the version's) the registry
    /// must answer with a Permit. A 3.0 mask names no environment.serviceProviders.
    #[arg(long, value_name = "FILE")]
    permit_mask: Option<PathBuf>,
    /// A delegation request the registry must answer with a Deny (or 404).
    #[arg(long, value_name = "FILE")]
    deny_mask: Option<PathBuf>,
    /// The broker pattern at a service provider: a resource (URL, or a path at the target) that
    /// the consumer of --consumer-as may reach, called by the client for that consumer.
    #[arg(long, value_name = "URL")]
    broker_resource: Option<String>,
    /// The consumer the client acts for as a broker (default with --testbed: NL000000002; 3.0:
    /// did:ishare:EU.NL.NTRNL-10000002).
    #[arg(long = "consumer-as", value_name = "PARTY_ID")]
    consumer: Option<String>,
    #[arg(long, value_name = "FILE")]
    consumer_key: Option<PathBuf>,
    #[arg(long, value_name = "FILE")]
    consumer_chain: Option<PathBuf>,
    /// An identity provider: a person to sign in as on its login page (a form with `username` and
    /// `password`), for the cases of the whole flow (code, token, userinfo).
    #[arg(long, value_name = "USER:PASSWORD")]
    person: Option<String>,
    /// An identity provider: the redirect_uri of the request objects (never called; default
    /// https://localhost/openid_connect1.0/return, from 2.0 https://localhost/return).
    #[arg(long, value_name = "URL")]
    redirect_uri: Option<String>,
    /// The scheme's name: the token scope.
    #[arg(long, default_value = "iSHARE")]
    scheme: String,
    /// Also write the results as JUnit XML.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Seconds to wait for each answer.
    #[arg(long, default_value_t = 10)]
    timeout: u64,
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// A party to act as: `--X-as ID` with `--X-key` and `--X-chain`, or the testbed's files for the
/// id (given or default).
fn identity(
    what: &str,
    id: Option<&str>,
    key: Option<&PathBuf>,
    chain: Option<&PathBuf>,
    testbed: Option<&Path>,
    default_id: &str,
) -> Result<Option<SigningIdentity>, String> {
    let (id, key_pem, chain_pem) = match (key, chain, testbed) {
        (Some(key), Some(chain), _) => {
            let id = id.ok_or(format!("the {what}'s key and chain need its party id"))?;
            (id, read(key)?, read(chain)?)
        }
        (None, None, Some(dir)) => {
            let id = id.unwrap_or(default_id);
            let file = |kind: &str| crate::testbed::keys::party_file(dir, id, kind);
            (id, read(&file("key"))?, read(&file("chain"))?)
        }
        (None, None, None) => return Ok(None),
        _ => return Err(format!("give both the key and the chain of the {what}")),
    };
    let party = PartyId::parse(id).map_err(|e| format!("{what}: {e}"))?;
    SigningIdentity::from_pem(party, &key_pem, &chain_pem)
        .map(Some)
        .map_err(|e| format!("the credentials of the {what} {id}: {e}"))
}

/// A mask from `path`, in the body `version` reads. A 3.0 mask names no service provider: 3.0
/// has no `environment.serviceProviders`, and no case sends a name its version does not have.
fn mask(path: &Path, version: SchemeVersion) -> Result<DelegationBody, String> {
    let given: DelegationBody = serde_json::from_str(&read(path)?)
        .map_err(|e| format!("{}: not a delegation request: {e}", path.display()))?;
    let policies = given.request.policy_sets.iter().flat_map(|s| &s.policies);
    let named = policies
        .filter_map(|p| p.target.environment.as_ref())
        .any(|e| e.service_providers.is_some());
    if version.camel_case() && named {
        return Err(format!(
            "{}: a {version} mask names no service provider (environment.serviceProviders is not {version}'s)",
            path.display()
        ));
    }
    Ok(DelegationBody {
        shape: BodyShape::of(version),
        ..given
    })
}

/// A party whose certificate chains to a trusted root but that the scheme owner does not know:
/// issued on the spot by a testbed's PKI, or given by its files.
fn unknown_party(
    args: &ConformanceArgs,
    testbed: Option<&Path>,
) -> Result<Option<SigningIdentity>, String> {
    match (&args.unknown_key, &args.unknown_chain, testbed) {
        (None, None, Some(dir)) => {
            let pki = crate::testbed::keys::load_pki(dir)
                .map_err(|e| e.to_string())?
                .ok_or(format!("{}: no test PKI there", dir.display()))?;
            let id = args
                .unknown
                .as_deref()
                .unwrap_or(args.testbed_parties().unknown);
            Ok(Some(
                pki.issue_party(id, "Unknown to the scheme owner")
                    .map_err(|e| e.to_string())?
                    .signing_identity(),
            ))
        }
        (key, chain, _) => identity(
            "unknown party",
            args.unknown.as_deref(),
            key.as_ref(),
            chain.as_ref(),
            None,
            args.testbed_parties().unknown,
        ),
    }
}

/// A party with `id` whose certificate `untrusted` issued: a root nobody trusts.
fn untrusted_party(untrusted: &TestPki, id: &PartyId) -> Result<SigningIdentity, String> {
    untrusted
        .issue_party(id.as_str(), "Untrusted")
        .map(|c| c.signing_identity())
        .map_err(|e| format!("cannot make an untrusted test certificate: {e}"))
}

/// The broker pattern, where a resource is given: the consumer the broker acts for, also with a
/// certificate under the untrusted root.
fn broker(
    args: &ConformanceArgs,
    testbed: Option<&Path>,
    untrusted: &TestPki,
) -> Result<Option<Broker>, String> {
    let Some(resource) = &args.broker_resource else {
        return Ok(None);
    };
    let consumer = identity(
        "consumer",
        args.consumer.as_deref(),
        args.consumer_key.as_ref(),
        args.consumer_chain.as_ref(),
        testbed,
        args.testbed_parties().consumer,
    )?
    .ok_or("give the consumer the broker acts for: --consumer-as with --consumer-key and --consumer-chain")?;
    let resource = if resource.starts_with('/') {
        crate::peers::join(&args.target, resource)
    } else {
        resource.clone()
    };
    Ok(Some(Broker {
        resource,
        foreign_consumer: untrusted_party(untrusted, consumer.party_id())?,
        consumer,
    }))
}

/// The scheme's roots, from --ca or the testbed's CA: the trusted list signed answers must chain
/// to, and the PEM the HTTP client trusts.
fn trusted_roots(
    args: &ConformanceArgs,
    testbed: Option<&Path>,
) -> Result<(TrustedList, String), String> {
    let ca_file = args
        .ca
        .clone()
        .or_else(|| testbed.map(|d| d.join("ca.pem")))
        .ok_or("give the scheme's root certificate with --ca ROOT.pem (or --testbed DIR)")?;
    let ca_pem = read(&ca_file)?;
    let roots = certs_from_pem(ca_pem.as_bytes(), "CA").map_err(|e| e.to_string())?;
    let trusted = TrustedList::new(roots.iter().map(|r| TrustedListEntry {
        subject: format!("root from {}", ca_file.display()),
        certificate_fingerprint: fingerprint(r),
        validity: "valid".into(),
        status: "granted".into(),
    }));
    Ok((trusted, ca_pem))
}

/// The Permit and the Deny mask, given both or neither.
fn masks(args: &ConformanceArgs) -> Result<Option<Masks>, String> {
    let version = args.scheme_version;
    match (&args.permit_mask, &args.deny_mask) {
        (Some(permit), Some(deny)) => Ok(Some(Masks {
            permit: mask(permit, version)?,
            deny: mask(deny, version)?,
        })),
        (None, None) => Ok(None),
        _ => Err("give both --permit-mask and --deny-mask".into()),
    }
}

/// The person to sign in as, from USER:PASSWORD.
fn person(args: &ConformanceArgs) -> Result<Option<Person>, String> {
    let Some(p) = &args.person else {
        return Ok(None);
    };
    let (username, password) = p.split_once(':').ok_or("--person is USER:PASSWORD")?;
    Ok(Some(Person {
        username: username.to_string(),
        password: password.to_string(),
    }))
}

/// The run's options from the command line: identities, roots, masks and the HTTP client.
pub fn options(args: &ConformanceArgs) -> Result<Options, String> {
    let testbed = args.testbed.as_deref();
    let parties = args.testbed_parties();
    let client = identity(
        "client",
        args.party.as_deref(),
        args.key.as_ref(),
        args.chain.as_ref(),
        testbed,
        parties.client,
    )?
    .ok_or("give the client to test as: --as PARTY_ID with --key and --chain, or --testbed DIR")?;
    let service_provider = identity(
        "service provider",
        args.sp.as_deref(),
        args.sp_key.as_ref(),
        args.sp_chain.as_ref(),
        testbed,
        parties.service_provider,
    )?;
    let inactive = identity(
        "inactive party",
        args.inactive.as_deref(),
        args.inactive_key.as_ref(),
        args.inactive_chain.as_ref(),
        testbed,
        parties.inactive,
    )?;
    let unknown = unknown_party(args, testbed)?;
    let untrusted = TestPki::generate("Untrusted", time::OffsetDateTime::now_utc())
        .map_err(|e| format!("cannot make the untrusted test PKI: {e}"))?;
    let foreign = untrusted_party(&untrusted, client.party_id())?;
    let broker = broker(args, testbed, &untrusted)?;
    let (trusted, ca_pem) = trusted_roots(args, testbed)?;
    let masks = masks(args)?;
    let http = outbound_client(
        &OutboundTrust {
            ca_pem: Some(ca_pem.into_bytes()),
            system_roots: false,
        },
        Duration::from_secs(args.timeout),
    )
    .map_err(|e| e.to_string())?;
    let redirect_uri = args.redirect_uri.clone().unwrap_or_else(|| {
        let flow = Flow::of(args.scheme_version);
        format!("https://localhost{}", flow.return_path)
    });
    Ok(Options {
        role: args.role,
        version: args.scheme_version,
        target: args.target.clone(),
        target_id: args.target_id.clone(),
        client,
        service_provider,
        unknown,
        inactive,
        foreign,
        trusted,
        masks,
        broker,
        person: person(args)?,
        redirect_uri,
        scheme: args.scheme.clone(),
        http,
    })
}

pub async fn run(args: ConformanceArgs) -> Result<(), String> {
    let options = options(&args)?;
    let result = conformance::run(&options).await;
    print!("{}", report::table(&result));
    if let Some(path) = &args.junit {
        std::fs::write(path, report::junit(&result))
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    match result.failures() {
        0 => Ok(()),
        n => Err(format!(
            "{n} of {} conformance cases failed",
            result.cases.len()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn sent(given: &Value, version: SchemeVersion) -> Result<Value, String> {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), given.to_string()).unwrap();
        mask(file.path(), version).map(|body| serde_json::to_value(body).unwrap())
    }

    fn request(service_providers: Option<&[&str]>) -> Value {
        let mut target = json!({
            "resource": {"type": "CONTAINER", "identifiers": ["C1"]},
            "actions": ["iSHARE.READ"]
        });
        if let Some(sps) = service_providers {
            target["environment"] = json!({"serviceProviders": sps});
        }
        json!({
            "policyIssuer": "did:ishare:EU.NL.NTRNL-10000005",
            "target": {"accessSubject": "did:ishare:EU.NL.NTRNL-10000001"},
            "policySets": [{"policies": [{"target": target, "rules": [{"effect": "Permit"}]}]}]
        })
    }

    #[test]
    fn masks_are_sent_in_the_body_of_the_version_checked() {
        let old = json!({"delegationRequest": request(None), "previous_steps": ["a.b.c"]});
        let as_3_0 = sent(&old, SchemeVersion::V3_0).unwrap();
        assert_eq!(
            as_3_0["delegationRequest"]["previousSteps"],
            json!(["a.b.c"])
        );
        assert!(as_3_0.get("previous_steps").is_none(), "{as_3_0}");
        let mut new = json!({"delegationRequest": request(None)});
        new["delegationRequest"]["previousSteps"] = json!(["a.b.c"]);
        let as_1_9 = sent(&new, SchemeVersion::V1_9).unwrap();
        assert_eq!(as_1_9["previous_steps"], json!(["a.b.c"]));
        assert!(as_1_9["delegationRequest"].get("previousSteps").is_none());
    }

    #[test]
    fn a_3_0_mask_names_no_service_provider() {
        let named =
            json!({"delegationRequest": request(Some(&["did:ishare:EU.NL.NTRNL-10000003"]))});
        let refused = sent(&named, SchemeVersion::V3_0).unwrap_err();
        assert!(
            refused.ends_with(": a 3.0 mask names no service provider (environment.serviceProviders is not 3.0's)"),
            "{refused}"
        );
        assert!(sent(&named, SchemeVersion::V1_9).is_ok());
    }

    #[test]
    fn the_version_is_parsed_and_chooses_the_testbed_parties() {
        let parse = |extra: &[&str]| {
            let base = [
                "conformance",
                "--role",
                "participant-registry",
                "--target",
                "https://so",
            ];
            let argv = base.iter().chain(["--target-id", "x"].iter()).chain(extra);
            ConformanceArgs::try_parse_from(argv)
        };
        let old = parse(&[]).unwrap();
        assert_eq!(
            (old.role, old.scheme_version),
            (Role::SchemeOwner, SchemeVersion::V1_9)
        );
        assert_eq!(old.testbed_parties().client, "EU.EORI.NL000000001");
        let new = parse(&["--scheme-version", "3.0"]).unwrap();
        assert_eq!(
            new.testbed_parties().client,
            "did:ishare:EU.NL.NTRNL-10000001"
        );
        assert_eq!(
            new.testbed_parties().unknown,
            "did:ishare:EU.NL.NTRNL-99999999"
        );
        let wrong = parse(&["--scheme-version", "3"]).unwrap_err().to_string();
        assert!(wrong.contains("\"3\" is not a scheme version"), "{wrong}");
    }
}
