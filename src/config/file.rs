//! The configuration as operators write it (gateway.toml and policies/*.toml): plain serde types,
//! every field optional where a default exists, closed sets of words as enums. The loader (`mod.rs`)
//! turns them into the validated model (`model.rs`).

use super::issues::Choice;
use super::model::{ForwardedFor, B3};
use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// A size in bytes, written as a number or with a unit (`KiB`, `MiB`, `GiB`, `KB`, `MB`, `GB`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteSize(pub u64);

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Number(u64),
            Text(String),
        }
        let text = match Written::deserialize(d)? {
            Written::Number(n) => return Ok(ByteSize(n)),
            Written::Text(t) => t,
        };
        let t = text.trim();
        let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let (number, unit) = t.split_at(split);
        let factor: u64 = match unit.trim() {
            "" | "B" => 1,
            "KiB" => 1 << 10,
            "MiB" => 1 << 20,
            "GiB" => 1 << 30,
            "KB" => 1_000,
            "MB" => 1_000_000,
            "GB" => 1_000_000_000,
            _ => {
                return Err(serde::de::Error::custom(format!(
                    "{text:?} is not a size such as \"64MiB\""
                )))
            }
        };
        number
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(factor))
            .map(ByteSize)
            .ok_or_else(|| {
                serde::de::Error::custom(format!("{text:?} is not a size such as \"64MiB\""))
            })
    }
}

/// `tls.client_auth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClientAuthMode {
    Optional,
    Required,
}

/// `health_check.kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HealthCheckKindFile {
    Tcp,
    Http,
}

/// `route.auth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AuthFile {
    Public,
    Token,
    Delegation,
}

/// An element of `route.delegation.evidence`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EvidenceSourceFile {
    Header,
    Registry,
}

#[derive(Debug, Default, Deserialize)]
pub struct GatewayFile {
    pub scheme: Option<String>,
    /// The data spaces the gateway serves in (3.0 ids), for the registries data owners designate
    /// per data space.
    #[serde(default)]
    pub dataspaces: Vec<String>,
    /// The version of the scheme the gateway's own endpoints speak (/capabilities, the sign-in of
    /// people): "1.9" … "3.0"; the scheme owner's if not given.
    pub scheme_version: Option<String>,
    /// The address clients reach the gateway at, for the URLs in /capabilities.
    pub public_url: Option<String>,
    pub identity: Option<IdentityFile>,
    #[serde(default, rename = "listener")]
    pub listeners: Vec<ListenerFile>,
    pub scheme_owner: Option<SchemeOwnerFile>,
    #[serde(default)]
    pub tokens: TokensFile,
    #[serde(default)]
    pub outbound: OutboundFile,
    #[serde(default, rename = "upstream")]
    pub upstreams: Vec<UpstreamFile>,
    #[serde(default, rename = "registry")]
    pub registries: Vec<RegistryFile>,
    #[serde(default)]
    pub delegation: DelegationFile,
    #[serde(default)]
    pub replay: ReplayFile,
    pub admin: Option<AdminFile>,
    #[serde(default)]
    pub rules: RulesFile,
    #[serde(default)]
    pub forwarding: ForwardingFile,
    #[serde(default)]
    pub server: ServerFile,
    #[serde(default)]
    pub log: LogFile,
    /// People sign in at an identity provider for the routes that ask for it.
    pub login: Option<LoginFile>,
    /// One JSON line per decision.
    pub decision_log: Option<DecisionLogFile>,
    /// OpenTelemetry spans, exported over OTLP; absent: no tracing.
    pub tracing: Option<TracingFile>,
    /// The decision service: the gateway's decisions for nginx, Envoy and AuthZEN clients.
    pub decision_api: Option<DecisionApiFile>,
}

#[derive(Debug, Default, Deserialize)]
pub struct DecisionApiFile {
    pub address: Option<String>,
    /// Envoy's gRPC ext_authz, on an address of its own.
    pub grpc_address: Option<String>,
    pub tls: Option<ListenerTlsFile>,
    /// A secret AuthZEN callers send as `Authorization: Bearer …`.
    pub bearer_secret_file: Option<PathBuf>,
    pub max_body_bytes: Option<ByteSize>,
    pub max_batch: Option<usize>,
    #[serde(default, with = "humantime_serde")]
    pub timeout: Option<Duration>,
    /// AuthZEN's Policy Decision Point identifier: the https URL PEPs know the service by.
    pub policy_decision_point: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub struct DecisionLogFile {
    /// A file (appended to), or "-" for stdout.
    pub path: Option<String>,
    /// Fields of each line replaced by "[masked]".
    pub mask: Option<Vec<String>>,
    pub max_line_bytes: Option<usize>,
    /// Lines waiting to be written at most; more are dropped and counted.
    pub queue: Option<usize>,
}

#[derive(Debug, Default, Deserialize)]
pub struct TracingFile {
    /// The collector's OTLP/HTTP traces endpoint (protobuf).
    pub otlp_endpoint: Option<String>,
    pub service_name: Option<String>,
    /// The share of new traces recorded, from 0 to 1.
    pub sample_ratio: Option<f64>,
    /// Continue the trace a client's `traceparent` names (else start a new one).
    pub accept_client_context: Option<bool>,
    /// The gateway's trace context in B3 headers too: `none`, `single`, `multi`.
    pub b3: Option<B3>,
}

#[derive(Debug, Default, Deserialize)]
pub struct LoginFile {
    pub identity_provider: Option<String>,
    /// The version of the scheme the identity provider speaks (default: the scheme owner's).
    pub scheme_version: Option<String>,
    /// The identity provider's base URL.
    pub url: Option<String>,
    pub scope: Option<String>,
    #[serde(default, with = "humantime_serde")]
    pub session_lifetime: Option<Duration>,
    pub cookie_name: Option<String>,
    pub session_secret_file: Option<PathBuf>,
    pub logout_path: Option<String>,
    pub starts_per_second: Option<u32>,
    pub starts_per_address_per_minute: Option<u32>,
    /// The attribute each backend header carries (replaces the default set).
    pub headers: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Deserialize)]
pub struct IdentityFile {
    pub party_id: String,
    pub name: Option<String>,
    pub key: PathBuf,
    pub certificate_chain: PathBuf,
}

#[derive(Debug, Deserialize)]
pub struct ListenerFile {
    pub address: String,
    pub tls: Option<ListenerTlsFile>,
    pub max_connections: Option<usize>,
}

#[derive(Debug, Deserialize)]
pub struct ListenerTlsFile {
    pub certificate: PathBuf,
    pub key: PathBuf,
    /// CA certificates that client certificates must chain to; enables client-certificate verification.
    pub client_ca: Option<PathBuf>,
    /// `optional` (default) or `required`, with client_ca.
    pub client_auth: Option<Choice<ClientAuthMode>>,
}

#[derive(Debug, Deserialize)]
pub struct SchemeOwnerFile {
    pub url: String,
    pub party_id: String,
    /// SHA-256 of the root CA certificate the scheme owner signs with.
    pub root_fingerprint: Option<String>,
    /// That root certificate as a PEM file (its fingerprint is pinned), instead of root_fingerprint.
    pub root_certificate: Option<PathBuf>,
    /// A trusted list (JSON array of entries) to use instead of fetching it.
    pub trusted_list_file: Option<PathBuf>,
    #[serde(default, with = "humantime_serde")]
    pub refresh: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub party_cache_ttl: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub timeout: Option<Duration>,
    /// Party records fetched per second at most (and five times that at once).
    pub party_lookups_per_second: Option<u32>,
    /// The version of the scheme the scheme owner speaks, and every peer not configured with
    /// its own (data owners, registries found in party records): "1.9", "2.0", "2.1", "2.2" or
    /// "3.0".
    pub scheme_version: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub struct TokensFile {
    #[serde(default, with = "humantime_serde")]
    pub lifetime: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub clock_leeway: Option<Duration>,
    pub paths: Option<Vec<String>>,
    pub allow_rs384_rs512: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
pub struct OutboundFile {
    pub ca_file: Option<PathBuf>,
    pub system_roots: Option<bool>,
}

#[derive(Debug, Deserialize)]
pub struct UpstreamFile {
    pub name: String,
    pub addresses: Vec<String>,
    #[serde(default)]
    pub tls: bool,
    pub sni: Option<String>,
    pub ca_file: Option<PathBuf>,
    pub host_header: Option<String>,
    #[serde(default, with = "humantime_serde")]
    pub connect_timeout: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub read_timeout: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub write_timeout: Option<Duration>,
    pub health_check: Option<HealthCheckFile>,
}

#[derive(Debug, Deserialize)]
pub struct HealthCheckFile {
    /// `tcp` (default) or `http`.
    pub kind: Option<Choice<HealthCheckKindFile>>,
    /// For `http`: the path to GET; a 2xx answer is healthy.
    pub path: Option<String>,
    #[serde(default, with = "humantime_serde")]
    pub interval: Option<Duration>,
}

#[derive(Debug, Deserialize)]
pub struct RegistryFile {
    pub name: String,
    pub party_id: String,
    pub url: String,
    pub token_path: Option<String>,
    pub delegation_path: Option<String>,
    /// The version of the scheme this registry speaks; the scheme owner's if not given.
    pub scheme_version: Option<String>,
    /// Whether masks sent to it name the route's licences (true if not given).
    pub mask_licences: Option<bool>,
    /// What is sent in `previous_steps`: "none" or "consumer_assertion".
    pub previous_steps: Option<String>,
    /// The id this registry addresses its answers to the gateway by, if not the gateway's.
    pub addresses_us_as: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub struct DelegationFile {
    #[serde(default, with = "humantime_serde")]
    pub registry_timeout: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub cache_ttl: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub deny_cache_ttl: Option<Duration>,
    /// The decision cache's size: `"64MiB"`, `"100MB"`, or a number of bytes.
    pub cache_size: Option<ByteSize>,
    /// The oldest `iat` accepted for evidence in the delegation_evidence header.
    #[serde(default, with = "humantime_serde")]
    pub header_evidence_max_age: Option<Duration>,
    /// Registry calls a caller may cause per minute.
    pub registry_calls_per_minute: Option<u32>,
    /// Members of evidence that no version of the scheme defines, dropped before evaluation for
    /// the issuer (party id) they are listed under, as generic paths
    /// (`policySets[].policies[].rules[].comment`). Any other member not understood denies.
    #[serde(default)]
    pub ignored_members: BTreeMap<String, Vec<String>>,
}

/// Where the jtis of accepted assertions are kept.
#[derive(Debug, Default, Deserialize)]
pub struct ReplayFile {
    pub store: Option<Choice<ReplayStoreKind>>,
    /// `redis://host:port/db` (or `rediss://`) for `store = "redis"` on one server.
    pub url: Option<String>,
    /// `host:port` of Redis Sentinels, instead of `url`: the master they name is used.
    pub sentinels: Option<Vec<String>>,
    /// The master's name at the Sentinels.
    pub master_name: Option<String>,
    /// `host:port` of some nodes of a Redis Cluster, instead of `url`.
    pub cluster: Option<Vec<String>>,
    /// The database on the Sentinels' master.
    pub db: Option<i64>,
    /// TLS to the Sentinels and the master, or to the cluster's nodes.
    pub tls: Option<bool>,
    /// `PASSWORD` or `USER:PASSWORD` (an ACL user), for Redis (and the Sentinels).
    pub credentials_file: Option<PathBuf>,
    /// Extra CA certificates for Redis over TLS.
    pub ca_file: Option<PathBuf>,
    #[serde(default, with = "humantime_serde")]
    pub timeout: Option<Duration>,
    /// The most jtis the memory store holds at once.
    pub capacity: Option<usize>,
}

/// `replay.store`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReplayStoreKind {
    Memory,
    Redis,
}

#[derive(Debug, Deserialize)]
pub struct AdminFile {
    pub address: String,
    /// A file holding the secret `POST /purge` callers send as a bearer token.
    pub purge_secret_file: Option<PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
pub struct RulesFile {
    pub directory: Option<PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
pub struct ForwardingFile {
    pub party_header: Option<String>,
    /// The consumer a broker acts for (the broker pattern).
    pub original_consumer_header: Option<String>,
    /// Client headers never passed to the backend (replaces the default list).
    pub strip_headers: Option<Vec<String>>,
    /// `replace` (the default) or `append` the client's `X-Forwarded-For`.
    pub forwarded_for: Option<Choice<ForwardedFor>>,
    /// Peers whose `X-Forwarded-For` is appended to, whatever `forwarded_for` says.
    pub trusted_proxies: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
pub struct ServerFile {
    pub threads: Option<usize>,
    pub work_stealing: Option<bool>,
    /// Plain listeners also accept HTTP/2 with prior knowledge.
    pub h2c: Option<bool>,
    #[serde(default, with = "humantime_serde")]
    pub keepalive_timeout: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub header_timeout: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub body_timeout: Option<Duration>,
    /// The time a request body may take before it must arrive at `body_min_rate`.
    #[serde(default, with = "humantime_serde")]
    pub body_deadline: Option<Duration>,
    /// Bytes per second that each earn a request body a second more.
    pub body_min_rate: Option<u64>,
    /// Concurrent HTTP/2 streams per connection.
    pub h2_max_streams: Option<u32>,
    #[serde(default, with = "humantime_serde")]
    pub handshake_timeout: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub grace_period: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub graceful_shutdown_timeout: Option<Duration>,
    pub pid_file: Option<PathBuf>,
    pub upgrade_sock: Option<PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
pub struct LogFile {
    /// `text` (default) or `json`.
    pub format: Option<Choice<super::model::LogFormat>>,
    pub level: Option<String>,
}

/// One file of policies/*.toml.
#[derive(Debug, Default, Deserialize)]
pub struct RulesDocument {
    #[serde(default, rename = "route")]
    pub routes: Vec<RouteFile>,
}

#[derive(Debug, Deserialize)]
pub struct RouteFile {
    pub name: String,
    pub description: Option<String>,
    pub methods: Option<Vec<String>>,
    pub path: String,
    pub upstream: String,
    /// `public`, `token` (default) or `delegation`.
    pub auth: Option<Choice<AuthFile>>,
    pub upstream_path: Option<String>,
    #[serde(default)]
    pub advertise: bool,
    #[serde(default)]
    pub forward_authorization: bool,
    /// Forms backends read differently that the route lets through.
    #[serde(default)]
    pub accept: Vec<Choice<crate::request::Ambiguity>>,
    /// Let protocol upgrades (WebSocket) through to the backend.
    #[serde(default)]
    pub websocket: bool,
    pub delegation: Option<DelegationRuleFile>,
    #[serde(default)]
    pub response_headers: BTreeMap<String, String>,
    /// A person signs in at the identity provider ([login]); their session replaces the token.
    #[serde(default)]
    pub login: bool,
    /// `upper` or `lower`: the backend compares identifiers without case.
    pub identifier_case: Option<Choice<crate::request::Case>>,
    /// `enforce` (the default) or `shadow`: decide, log and count, and forward whatever the
    /// decision says.
    pub mode: Option<Choice<super::model::Mode>>,
    /// The largest JSON body a rule that reads the body reads.
    pub max_body_bytes: Option<ByteSize>,
    /// The most elements of the body's array a `*` pointer decides on.
    pub max_body_elements: Option<usize>,
}

#[derive(Debug, Deserialize)]
pub struct DelegationRuleFile {
    pub policy_issuer: String,
    pub resource_type: String,
    pub identifiers: Option<Vec<String>>,
    pub attributes: Option<Vec<String>>,
    pub action: Option<String>,
    pub evidence: Option<Vec<Choice<EvidenceSourceFile>>>,
    pub registry: Option<String>,
    #[serde(default)]
    pub licences: Vec<String>,
    /// Intermediaries between the data owner and the consumer, for evidence chains from the registry.
    #[serde(default)]
    pub delegation_path: Vec<String>,
    /// Accept a data owner taken from the request (the caller names it).
    #[serde(default)]
    pub caller_names_owner: bool,
    /// The value of each left operand conditions in evidence may compare (3.0): a template of
    /// the request's values or a constant. Also sent as the context of a mask to a 3.0 registry.
    #[serde(default)]
    pub conditions: BTreeMap<String, String>,
    /// Accept evidence of a 3.0 signer that names no service provider (3.0 evidence has no
    /// serviceProviders); otherwise it binds to us only where the data owner designated its
    /// registry for us.
    #[serde(default)]
    pub accept_unnamed_service_provider: bool,
    /// The longest a decision of this route is served from the cache.
    #[serde(default, with = "humantime_serde")]
    pub max_decision_age: Option<Duration>,
}

/// A configuration of the consumer's side (`egress.toml`): the party's identity, the scheme's
/// peers, and the outgoing routes a local client's calls take to providers.
#[derive(Debug, Default, Deserialize)]
pub struct EgressFile {
    pub scheme: Option<String>,
    pub identity: Option<IdentityFile>,
    pub scheme_owner: Option<SchemeOwnerFile>,
    #[serde(default)]
    pub tokens: TokensFile,
    #[serde(default)]
    pub outbound: OutboundFile,
    #[serde(default, rename = "registry")]
    pub registries: Vec<RegistryFile>,
    /// Where local clients call.
    pub consumer: Option<ConsumerFile>,
    pub admin: Option<AdminFile>,
    #[serde(default, rename = "provider")]
    pub providers: Vec<ProviderFile>,
    #[serde(default, rename = "egress")]
    pub routes: Vec<EgressRouteFile>,
    #[serde(default)]
    pub log: LogFile,
    /// One JSON line per outgoing call.
    pub decision_log: Option<DecisionLogFile>,
}

/// `[consumer]`: the local listener.
#[derive(Debug, Default, Deserialize)]
pub struct ConsumerFile {
    pub address: Option<String>,
    pub max_connections: Option<usize>,
    pub max_body_bytes: Option<ByteSize>,
    #[serde(default, with = "humantime_serde")]
    pub header_timeout: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub graceful_shutdown_timeout: Option<Duration>,
}

/// `[[provider]]`: a service provider called, and how.
#[derive(Debug, Deserialize)]
pub struct ProviderFile {
    pub name: String,
    pub party_id: String,
    pub url: String,
    pub scheme_version: Option<String>,
    pub token_path: Option<String>,
    #[serde(default, with = "humantime_serde")]
    pub timeout: Option<Duration>,
    pub max_concurrent: Option<usize>,
}

/// `[[egress]]`: local paths mapped to a provider.
#[derive(Debug, Deserialize)]
pub struct EgressRouteFile {
    pub name: String,
    pub path: String,
    pub methods: Option<Vec<String>>,
    pub provider: String,
    /// The local client gives the consumer's `service_consumer_assertion`: we act as its broker.
    pub broker: Option<bool>,
    pub evidence: Option<EgressEvidenceFile>,
}

/// `[egress.evidence]`: delegation evidence we bring, asked of the data owner's registry.
#[derive(Debug, Deserialize)]
pub struct EgressEvidenceFile {
    pub registry: String,
    pub policy_issuer: String,
    pub resource_type: String,
    pub identifiers: Option<Vec<String>>,
    pub attributes: Option<Vec<String>>,
    pub actions: Option<Vec<String>>,
    pub licences: Option<Vec<String>>,
    /// The values of conditions' left operands (3.0), each from the request: the mask's context.
    pub conditions: Option<BTreeMap<String, String>>,
    #[serde(default, with = "humantime_serde")]
    pub cache_ttl: Option<Duration>,
}
