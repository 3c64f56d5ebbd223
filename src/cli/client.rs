//! `ishare-gateway client …`: the consumer's side of the scheme on the command line — mint a client
//! assertion, get a token from any participant, look up parties, ask a registry for evidence with a
//! mask, and call a service with a token and evidence — printing decoded tokens readably. Each in
//! the version of the scheme the participant speaks (`--scheme-version`): its paths, members,
//! query parameters, request bodies and header names.

use super::display::describe_jwt;
use crate::peers::{join, party_path, PeerClient, PeerError};
use crate::scheme::jwt::{decode, AlgorithmPolicy, SigningIdentity};
use crate::scheme::mask::{AccessRequest, BodyShape, DelegationBody};
use crate::scheme::models::PartiesPayload;
use crate::scheme::party::PartyId;
use crate::scheme::trust::TrustedList;
use crate::scheme::version::SchemeVersion;
use crate::scheme::vocabulary::{
    member, CAPABILITIES_PATH, DELEGATION_PATH, EVIDENCE_HEADER, EVIDENCE_HEADER_3, PARTIES_PATH,
    TOKEN_PATH, TRUSTED_LIST_PATH, TRUSTED_LIST_PATH_3,
};
use crate::scheme::Timestamp;
use crate::testbed::keys::party_file;
use crate::tls::{outbound_client, OutboundTrust};
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct ClientArgs {
    /// Act as a party of a testbed: the testbed's data directory (holds the keys and the CA).
    #[arg(long, value_name = "DIR", global = true)]
    testbed: Option<PathBuf>,
    /// The party to act as: its party id.
    #[arg(long = "as", value_name = "PARTY_ID", global = true)]
    party: Option<String>,
    /// Private key (PEM) of the party, when not acting as a testbed party.
    #[arg(long, value_name = "FILE", global = true)]
    key: Option<PathBuf>,
    /// Certificate chain (PEM, leaf first) of the party.
    #[arg(long, value_name = "FILE", global = true)]
    chain: Option<PathBuf>,
    /// CA certificate(s) to trust for TLS and to check signed answers against (default with
    /// --testbed: the testbed's CA).
    #[arg(long, value_name = "FILE", global = true)]
    ca: Option<PathBuf>,
    /// The scheme's name: the token scope and the prefix of actions.
    #[arg(long, default_value = "iSHARE", global = true)]
    scheme: String,
    /// Print only the raw token or body, for scripts.
    #[arg(long, global = true)]
    raw: bool,
    /// Seconds to wait for an answer.
    #[arg(long, default_value_t = 10, global = true)]
    timeout: u64,
    /// The party id of the participant asked: the audience of our client assertion (default:
    /// read from the participant's capabilities; needed for those that serve none).
    #[arg(long, value_name = "PARTY_ID", global = true)]
    audience: Option<String>,
    /// The version of the scheme the participant asked speaks: 1.9 (also 1.10), 2.0, 2.1, 2.2
    /// or 3.0 (`/trustedList`, `partyToken`, camelCase delegation requests, `delegationEvidence`).
    #[arg(long, value_name = "VERSION", default_value = "1.9", value_parser = SchemeVersion::parse, global = true)]
    scheme_version: SchemeVersion,
    #[command(subcommand)]
    command: ClientCommand,
}

#[derive(Subcommand, Debug)]
enum ClientCommand {
    /// Mint a client assertion (a signed JWT, valid 30 s) for the party given by --audience.
    Assertion,
    /// Get an access token from a participant.
    Token {
        /// The participant's base URL.
        #[arg(long)]
        url: String,
        #[arg(long, default_value = "/connect/token")]
        token_path: String,
    },
    /// Show a participant's capabilities (with --authenticated, as a token holder).
    Capabilities {
        #[arg(long)]
        url: String,
        #[arg(long)]
        authenticated: bool,
    },
    /// Search the parties at a scheme owner, e.g. `--query eori=* --query active_only=true` (3.0:
    /// `--query alsoKnownAs=EU.EORI.NL000000001`; only the parameters 3.0 defines are sent).
    Parties {
        #[arg(long)]
        url: String,
        #[arg(long = "query", value_name = "KEY=VALUE")]
        query: Vec<String>,
    },
    /// Show one party of a scheme owner.
    Party {
        #[arg(long)]
        url: String,
        #[arg(long)]
        id: String,
    },
    /// Show the trusted list of a scheme owner.
    TrustedList {
        #[arg(long)]
        url: String,
    },
    /// Ask an authorisation registry or entitled party for delegation evidence.
    Evidence(EvidenceArgs),
    /// Call a service with a bearer token (fetched from the service itself unless given).
    Call(CallArgs),
    /// Show any scheme JWT readably.
    Decode { token: String },
}

/// What `client evidence` asks for.
#[derive(Args, Debug)]
struct EvidenceArgs {
    /// The registry's base URL.
    #[arg(long)]
    registry: String,
    /// A whole mask as JSON (either body shape); the options below build one otherwise.
    #[arg(long, value_name = "FILE")]
    mask: Option<PathBuf>,
    /// The policy issuer (data owner).
    #[arg(long)]
    issuer: Option<String>,
    /// The access subject (default: the party we act as).
    #[arg(long)]
    subject: Option<String>,
    #[arg(long = "type")]
    resource_type: Option<String>,
    #[arg(long = "id")]
    identifiers: Vec<String>,
    #[arg(long = "attribute")]
    attributes: Vec<String>,
    /// e.g. iSHARE.READ; repeat for several.
    #[arg(long = "action")]
    actions: Vec<String>,
    /// A service provider named in the mask (not in 3.0, whose masks name none).
    #[arg(long = "service-provider")]
    service_providers: Vec<String>,
    #[arg(long = "licence")]
    licences: Vec<String>,
}

/// What `client call` sends.
#[derive(Args, Debug)]
struct CallArgs {
    url: String,
    #[arg(short = 'X', long, default_value = "GET")]
    method: String,
    #[arg(short = 'd', long)]
    data: Option<String>,
    #[arg(short = 'H', long = "header", value_name = "NAME: VALUE")]
    headers: Vec<String>,
    #[arg(long)]
    token: Option<String>,
    /// A delegation token to send as the delegation_evidence header (3.0: delegationEvidence).
    #[arg(long)]
    evidence: Option<String>,
}

type CliResult = Result<(), String>;

struct Context {
    peer: Option<PeerClient>,
    http: reqwest::Client,
    trusted: Option<TrustedList>,
    raw: bool,
    audience: Option<String>,
    version: SchemeVersion,
}

/// The query parameters of 3.0's party search (and `claimFilter[claimType.property]`, a deep
/// object): any other would be ignored by a 3.0 participant registry, which would then answer an
/// unfiltered page.
const PARTIES_QUERY_3: [&str; 5] = ["id", "alsoKnownAs", "name", "page", "pageSize"];

/// Whether `key` is a parameter of 3.0's party search.
fn searches_3_0(key: &str) -> bool {
    PARTIES_QUERY_3.contains(&key)
        || key
            .strip_prefix("claimFilter[")
            .and_then(|rest| rest.strip_suffix(']'))
            .is_some_and(|property| !property.is_empty() && !property.contains(['[', ']']))
}

fn read(path: &PathBuf) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

fn context(args: &ClientArgs) -> Result<Context, String> {
    let ca_file = args
        .ca
        .clone()
        .or_else(|| args.testbed.as_ref().map(|d| d.join("ca.pem")));
    let ca_pem = ca_file.as_ref().map(read).transpose()?;
    let trusted = ca_pem.as_ref().map(|pem| {
        let roots = crate::tls::certs_from_pem(pem.as_bytes(), "CA").unwrap_or_default();
        TrustedList::new(
            roots
                .iter()
                .map(|r| crate::scheme::models::TrustedListEntry {
                    subject: "CA from --ca".into(),
                    certificate_fingerprint: crate::scheme::trust::fingerprint(r),
                    validity: "valid".into(),
                    status: "granted".into(),
                }),
        )
    });
    let http = outbound_client(
        &OutboundTrust {
            ca_pem: ca_pem.map(String::into_bytes),
            system_roots: false,
        },
        Duration::from_secs(args.timeout),
    )
    .map_err(|e| e.to_string())?;
    let identity = match (&args.party, &args.testbed, &args.key, &args.chain) {
        (Some(party), Some(dir), None, None) => Some((
            party.clone(),
            read(&party_file(dir, party, "key"))?,
            read(&party_file(dir, party, "chain"))?,
        )),
        (Some(party), _, Some(key), Some(chain)) => Some((party.clone(), read(key)?, read(chain)?)),
        (None, _, None, None) => None,
        _ => {
            return Err(
                "give --as PARTY_ID with --testbed DIR, or --as PARTY_ID with --key and --chain"
                    .into(),
            )
        }
    };
    let peer = identity
        .map(|(party, key, chain)| {
            let id = PartyId::parse(&party).map_err(|e| e.to_string())?;
            SigningIdentity::from_pem(id, &key, &chain)
                .map(|identity| PeerClient::new(http.clone(), identity, args.scheme.clone()))
                .map_err(|e| format!("the credentials of {party}: {e}"))
        })
        .transpose()?;
    Ok(Context {
        peer,
        http,
        trusted,
        raw: args.raw,
        audience: args.audience.clone(),
        version: args.scheme_version,
    })
}

impl Context {
    /// 1.9's name, or 3.0's in a 3.0 scheme.
    fn named(&self, before: &'static str, in_3_0: &'static str) -> &'static str {
        match self.version.camel_case() {
            true => in_3_0,
            false => before,
        }
    }

    fn peer(&self) -> Result<&PeerClient, String> {
        self.peer
            .as_ref()
            .ok_or_else(|| "this command acts as a party: give --as PARTY_ID with --testbed DIR (or --key and --chain)".to_string())
    }

    fn show(&self, title: &str, token: &str) {
        if self.raw {
            println!("{token}");
        } else {
            println!("{title}:\n{}", describe_jwt(token, self.trusted.as_ref()));
        }
    }

    /// The party id of the participant at `base_url`: --audience, or else from its capabilities.
    async fn audience_of(&self, base_url: &str) -> Result<String, String> {
        if let Some(audience) = &self.audience {
            return Ok(audience.clone());
        }
        let url = join(base_url, CAPABILITIES_PATH);
        let capabilities = self.named(member::CAPABILITIES, member::CAPABILITIES_3);
        let token = crate::peers::get_signed(&self.http, &url, &[], None, capabilities)
            .await
            .map_err(|e| {
                format!(
                    "cannot learn the party id of {base_url} from its capabilities ({e}): \
                     give it with --audience PARTY_ID"
                )
            })?;
        let jwt = decode(
            &token,
            AlgorithmPolicy {
                allow_rs384_rs512: true,
            },
        )
        .map_err(|e| e.to_string())?;
        let claims = serde_json::Value::Object(jwt.claims);
        claims
            .get("capabilities_info")
            .unwrap_or(&claims)
            .get("party_id")
            .or_else(|| claims.get("iss"))
            .and_then(|v| v.as_str())
            .map(str::to_string)
            .ok_or_else(|| format!("the capabilities of {base_url} name no party_id"))
    }

    async fn access_token(&self, base_url: &str) -> Result<String, String> {
        let audience = self.audience_of(base_url).await?;
        self.peer()?
            .token(&join(base_url, TOKEN_PATH), &audience)
            .await
            .map(|t| t.access_token)
            .map_err(|e| e.to_string())
    }
}

fn origin_of(url: &str) -> Result<String, String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("{url}: {e}"))?;
    Ok(parsed.origin().ascii_serialization())
}

fn peer_err(e: PeerError) -> String {
    e.to_string()
}

/// One party of a scheme owner: `GET /parties/{id}`, or at a satellite without that endpoint
/// (404) the search `/parties?eori={id}`, as the gateway does. In 3.0 `/parties/{id}` (any id or
/// alias) is the scheme's, and its `partyToken` the answer.
async fn show_party(ctx: &Context, url: &str, id: &str) -> CliResult {
    let id = PartyId::parse(id).map_err(|e| e.to_string())?;
    let id = id.as_str();
    let token = ctx.access_token(url).await?;
    let peer = ctx.peer()?;
    if ctx.version.camel_case() {
        let answer = peer
            .get_signed(
                &join(url, &party_path(id)),
                &[],
                Some(&token),
                member::PARTY_3,
            )
            .await
            .map_err(peer_err)?;
        ctx.show(member::PARTY_3, &answer);
        return Ok(());
    }
    match peer
        .get_signed(
            &join(url, &party_path(id)),
            &[],
            Some(&token),
            member::PARTY,
        )
        .await
    {
        Ok(answer) => {
            ctx.show(member::PARTY, &answer);
            return Ok(());
        }
        Err(PeerError::Status { status: 404, .. }) => {}
        Err(e) => return Err(peer_err(e)),
    }
    let answer = peer
        .get_signed(
            &join(url, PARTIES_PATH),
            &[("eori", id)],
            Some(&token),
            member::PARTIES,
        )
        .await
        .map_err(peer_err)?;
    let unreadable = |e: String| format!("the {} of {url}: {e}", member::PARTIES);
    let jwt = decode(
        &answer,
        AlgorithmPolicy {
            allow_rs384_rs512: true,
        },
    )
    .map_err(|e| unreadable(e.to_string()))?;
    let PartiesPayload(found) = jwt.claims_as().map_err(|e| unreadable(e.to_string()))?;
    if !found
        .data
        .iter()
        .any(|p| p.party_id.eq_ignore_ascii_case(id))
    {
        return Err(format!("{url} knows no party {id}"));
    }
    if !ctx.raw {
        println!(
            "{url} has no {}: found by {PARTIES_PATH}?eori={id}",
            party_path(id)
        );
    }
    ctx.show(member::PARTIES, &answer);
    Ok(())
}

pub async fn run(args: ClientArgs) -> CliResult {
    let ctx = context(&args)?;
    match args.command {
        ClientCommand::Assertion => {
            let audience = ctx
                .audience
                .as_deref()
                .ok_or("give the party the assertion is for with --audience PARTY_ID")?;
            let assertion = ctx
                .peer()?
                .identity()
                .client_assertion(audience, Timestamp::now())
                .map_err(|e| e.to_string())?;
            ctx.show("client assertion", &assertion);
        }
        ClientCommand::Token { url, token_path } => {
            let audience = ctx.audience_of(&url).await?;
            let token = ctx
                .peer()?
                .token(&join(&url, &token_path), &audience)
                .await
                .map_err(peer_err)?;
            if ctx.raw {
                println!("{}", token.access_token);
            } else {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&token).unwrap_or_default()
                );
            }
        }
        ClientCommand::Capabilities { url, authenticated } => {
            let token = if authenticated {
                Some(ctx.access_token(&url).await?)
            } else {
                None
            };
            let named = ctx.named(member::CAPABILITIES, member::CAPABILITIES_3);
            let capabilities = crate::peers::get_signed(
                &ctx.http,
                &join(&url, CAPABILITIES_PATH),
                &[],
                token.as_deref(),
                named,
            )
            .await
            .map_err(peer_err)?;
            ctx.show(named, &capabilities);
        }
        ClientCommand::Parties { url, query } => {
            let token = ctx.access_token(&url).await?;
            let pairs: Vec<(&str, &str)> = query
                .iter()
                .map(|q| q.split_once('=').unwrap_or((q.as_str(), "")))
                .collect();
            if let Some((key, _)) = pairs
                .iter()
                .find(|(k, _)| ctx.version.camel_case() && !searches_3_0(k))
            {
                return Err(format!(
                    "{key} is no query parameter of 3.0's party search (a participant registry \
                     of 3.0 would ignore it and answer an unfiltered page): use {} or \
                     claimFilter[<claimType>.<property>]",
                    PARTIES_QUERY_3.join(", ")
                ));
            }
            let named = ctx.named(member::PARTIES, member::PARTIES_3);
            let answer = ctx
                .peer()?
                .get_signed(&join(&url, PARTIES_PATH), &pairs, Some(&token), named)
                .await
                .map_err(peer_err)?;
            ctx.show(named, &answer);
        }
        ClientCommand::Party { url, id } => show_party(&ctx, &url, &id).await?,
        ClientCommand::TrustedList { url } => {
            let token = ctx.access_token(&url).await?;
            let path = ctx.named(TRUSTED_LIST_PATH, TRUSTED_LIST_PATH_3);
            let named = ctx.named(member::TRUSTED_LIST, member::TRUSTED_LIST_3);
            let answer = ctx
                .peer()?
                .get_signed(&join(&url, path), &[], Some(&token), named)
                .await
                .map_err(peer_err)?;
            ctx.show(named, &answer);
        }
        ClientCommand::Evidence(asked) => evidence(&ctx, asked).await?,
        ClientCommand::Call(call) => call_service(&ctx, call).await?,
        ClientCommand::Decode { token } => ctx.show("token", &token),
    }
    Ok(())
}

/// Delegation evidence from a registry or an entitled party, for a mask from a file or the
/// options.
async fn evidence(ctx: &Context, asked: EvidenceArgs) -> CliResult {
    let EvidenceArgs {
        registry,
        mask,
        issuer,
        subject,
        resource_type,
        identifiers,
        attributes,
        actions,
        service_providers,
        licences,
    } = asked;
    let peer = ctx.peer()?;
    let version = ctx.version;
    if version.camel_case() && !service_providers.is_empty() {
        return Err(
            "a 3.0 mask names no service provider: the registry binds evidence to one by the data owner's designation".into(),
        );
    }
    let body = match mask {
        Some(path) => serde_json::from_str::<DelegationBody>(&read(&path)?)
            .map_err(|e| format!("{}: {e}", path.display()))?,
        None => {
            let issuer = issuer.ok_or("give --issuer (the data owner) or --mask")?;
            let resource_type = resource_type.ok_or("give --type or --mask")?;
            if actions.is_empty() {
                return Err("give at least one --action (e.g. iSHARE.READ) or --mask".into());
            }
            let request = AccessRequest {
                policy_issuer: issuer,
                access_subject: subject.unwrap_or_else(|| peer.identity().party_id().to_string()),
                service_providers,
                resource_type,
                identifiers: if identifiers.is_empty() {
                    vec!["*".into()]
                } else {
                    identifiers
                },
                attributes: if attributes.is_empty() {
                    vec!["*".into()]
                } else {
                    attributes
                },
                actions,
                required_licences: licences,
                ..AccessRequest::default()
            };
            DelegationBody::new(request.to_mask(version), version)
        }
    };
    // A mask file in either shape is sent in the registry's.
    let body = DelegationBody {
        shape: BodyShape::of(version),
        ..body
    };
    let token = ctx.access_token(&registry).await?;
    match peer
        .delegation(&join(&registry, DELEGATION_PATH), &token, &body)
        .await
        .map_err(peer_err)?
    {
        Some(evidence) => ctx.show(
            ctx.named(member::DELEGATION, member::DELEGATION_3),
            &evidence,
        ),
        None => {
            return Err("the registry holds no policy for this issuer and subject (404)".into())
        }
    }
    Ok(())
}

/// A call of a service with a bearer token, its answer shown.
async fn call_service(ctx: &Context, call: CallArgs) -> CliResult {
    let CallArgs {
        url,
        method,
        data,
        headers,
        token,
        evidence,
    } = call;
    let token = match token {
        Some(t) => t,
        None => ctx.access_token(&origin_of(&url)?).await?,
    };
    let method = reqwest::Method::from_bytes(method.to_ascii_uppercase().as_bytes())
        .map_err(|_| format!("{method} is not an HTTP method"))?;
    let mut req = ctx.http.request(method.clone(), &url).bearer_auth(&token);
    if let Some(ev) = &evidence {
        req = req.header(ctx.named(EVIDENCE_HEADER, EVIDENCE_HEADER_3), ev);
    }
    for h in &headers {
        let (name, value) = h
            .split_once(':')
            .ok_or_else(|| format!("header {h:?} is not NAME: VALUE"))?;
        req = req.header(name.trim(), value.trim());
    }
    if let Some(d) = data {
        req = req.body(d);
    }
    let resp = req.send().await.map_err(|e| format!("{url}: {e}"))?;
    let status = resp.status();
    let shown: Vec<String> = resp
        .headers()
        .iter()
        .filter(|(n, _)| {
            n.as_str().starts_with("license")
                || n.as_str() == "content-type"
                || n.as_str() == "www-authenticate"
        })
        .map(|(n, v)| format!("{n}: {}", v.to_str().unwrap_or("?")))
        .collect();
    let body = resp.text().await.map_err(|e| format!("{url}: {e}"))?;
    if ctx.raw {
        println!("{body}");
    } else {
        println!("{method} {url} -> {status}");
        for h in shown {
            println!("  {h}");
        }
        let pretty = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| serde_json::to_string_pretty(&v).ok())
            .unwrap_or(body);
        println!("{pretty}");
    }
    if !status.is_success() {
        return Err(format!("the service answered {status}"));
    }
    Ok(())
}
