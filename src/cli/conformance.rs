//! `ishare-gateway conformance …`: run the scheme's conformance cases against a participant and
//! print the table (and JUnit XML with --junit).

use crate::conformance::{self, report, Broker, Masks, Options, Person, Role};
use crate::scheme::evidence::DelegationBody;
use crate::scheme::jwt::SigningIdentity;
use crate::scheme::models::TrustedListEntry;
use crate::scheme::party::PartyId;
use crate::scheme::trust::{fingerprint, TrustedList};
use crate::testbed::pki::TestPki;
use crate::tls::{certs_from_pem, outbound_client, OutboundTrust};
use clap::Parser;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The testbed's parties the checker acts as by default.
const TESTBED_CLIENT: &str = "EU.EORI.NL000000001";
const TESTBED_SERVICE_PROVIDER: &str = "EU.EORI.NL000000003";
const TESTBED_INACTIVE: &str = "EU.EORI.NL000000006";
const TESTBED_CONSUMER: &str = "EU.EORI.NL000000002";
/// The party id of the identity issued from the testbed's CA that the scheme owner does not know.
const TESTBED_UNKNOWN: &str = "EU.EORI.NL999999999";

#[derive(Parser, Debug)]
#[command(name = "conformance")]
pub struct ConformanceArgs {
    /// The role the target is tested in.
    #[arg(long, value_enum)]
    role: Role,
    /// The target's base URL.
    #[arg(long, value_name = "URL")]
    target: String,
    /// The target's party id.
    #[arg(long, value_name = "PARTY_ID")]
    target_id: String,
    /// A testbed's data directory: the CA and the default parties to act as (the client
    /// NL000000001, the service provider NL000000003, the inactive NL000000006, and an unknown
    /// party issued from the testbed's CA).
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
    /// A delegation request (JSON, either body shape) the registry must answer with a Permit.
    #[arg(long, value_name = "FILE")]
    permit_mask: Option<PathBuf>,
    /// A delegation request the registry must answer with a Deny (or 404).
    #[arg(long, value_name = "FILE")]
    deny_mask: Option<PathBuf>,
    /// The broker pattern at a service provider: a resource (URL, or a path at the target) that
    /// the consumer of --consumer-as may reach, called by the client for that consumer.
    #[arg(long, value_name = "URL")]
    broker_resource: Option<String>,
    /// The consumer the client acts for as a broker (default with --testbed: NL000000002).
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
    /// An identity provider: the redirect_uri of the request objects (never called).
    #[arg(
        long,
        value_name = "URL",
        default_value = "https://localhost/openid_connect1.0/return"
    )]
    redirect_uri: String,
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

fn mask(path: &Path) -> Result<DelegationBody, String> {
    serde_json::from_str(&read(path)?)
        .map_err(|e| format!("{}: not a delegation request: {e}", path.display()))
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
            let id = args.unknown.as_deref().unwrap_or(TESTBED_UNKNOWN);
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
            TESTBED_UNKNOWN,
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
        TESTBED_CONSUMER,
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
    match (&args.permit_mask, &args.deny_mask) {
        (Some(permit), Some(deny)) => Ok(Some(Masks {
            permit: mask(permit)?,
            deny: mask(deny)?,
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
    let client = identity(
        "client",
        args.party.as_deref(),
        args.key.as_ref(),
        args.chain.as_ref(),
        testbed,
        TESTBED_CLIENT,
    )?
    .ok_or("give the client to test as: --as PARTY_ID with --key and --chain, or --testbed DIR")?;
    let service_provider = identity(
        "service provider",
        args.sp.as_deref(),
        args.sp_key.as_ref(),
        args.sp_chain.as_ref(),
        testbed,
        TESTBED_SERVICE_PROVIDER,
    )?;
    let inactive = identity(
        "inactive party",
        args.inactive.as_deref(),
        args.inactive_key.as_ref(),
        args.inactive_chain.as_ref(),
        testbed,
        TESTBED_INACTIVE,
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
    Ok(Options {
        role: args.role,
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
        redirect_uri: args.redirect_uri.clone(),
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
