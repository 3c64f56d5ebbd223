//! The validated configuration: what the gateway runs on. Built from the file types (`file.rs`) by
//! the loader (`mod.rs`, with a function per section), which reports every problem at once.

use crate::request::pattern::PathPattern;
use crate::request::template::Template;
use crate::request::Ambiguities;
use crate::scheme::jwt::SigningIdentity;
use crate::scheme::models::TrustedListEntry;
use crate::scheme::party::PartyId;
use crate::scheme::version::SchemeVersion;
use crate::tls::OutboundTrust;
use http::Method;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct Config {
    /// The file it was read from.
    pub source: PathBuf,
    pub scheme: String,
    /// The data spaces the gateway serves in (3.0 ids).
    pub dataspaces: Vec<String>,
    /// The version the gateway's own endpoints speak.
    pub scheme_version: SchemeVersion,
    /// The base URL clients reach the gateway at.
    pub public_url: String,
    pub identity: Identity,
    pub listeners: Vec<Listener>,
    pub scheme_owner: SchemeOwner,
    pub tokens: Tokens,
    pub outbound: OutboundTrust,
    pub upstreams: BTreeMap<String, Upstream>,
    pub registries: BTreeMap<String, Registry>,
    pub delegation: DelegationSettings,
    pub replay: ReplaySettings,
    pub admin: Option<SocketAddr>,
    /// What `POST /purge` callers on the admin listener authenticate with; None: no purges there.
    pub purge_secret: Option<BearerSecret>,
    pub rules_dir: PathBuf,
    pub routes: Vec<Route>,
    pub party_header: http::HeaderName,
    /// Names the consumer a broker acts for, beside the broker in `party_header`.
    pub original_consumer_header: http::HeaderName,
    /// Client headers never passed to the backend.
    pub strip_headers: Vec<http::HeaderName>,
    /// What the backend's `X-Forwarded-For` says.
    pub forwarded_for: ForwardedFor,
    /// Peers (balancers) whose `X-Forwarded-For` is kept and appended to.
    pub trusted_proxies: Vec<ipnet::IpNet>,
    pub server: Server,
    pub log: Log,
    /// What `check` reports and start-up logs without refusing the configuration.
    pub warnings: Vec<super::issues::ConfigIssue>,
    pub login: Option<LoginSettings>,
    pub decision_log: Option<DecisionLogSettings>,
    /// OpenTelemetry tracing, when `[tracing]` is configured.
    pub tracing: Option<TracingSettings>,
    pub decision_api: Option<DecisionApiSettings>,
    /// The certificates the gateway presents or stands on, with when each expires.
    pub certificates: Vec<CertificateExpiry>,
}

/// A certificate the gateway presents (its identity, its listeners' TLS) or stands on (the scheme's
/// root its identity chains to), and when it stops being valid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertificateExpiry {
    /// What it is, as the metric's `certificate` label names it: `identity`, `identity_issuer`,
    /// `scheme_root`, `listener ADDRESS`, `decision_api ADDRESS`.
    pub certificate: String,
    /// Its notAfter (of a chain, the first to expire), in seconds since the epoch.
    pub not_after: i64,
}

/// The decision service: the proxy's decisions answered to other proxies (nginx `auth_request`,
/// Envoy `ext_authz`) and to AuthZEN clients.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecisionApiSettings {
    pub address: SocketAddr,
    /// Envoy's gRPC `ext_authz` (h2c, or TLS as `tls` says).
    pub grpc_address: Option<SocketAddr>,
    pub tls: Option<ListenerTls>,
    /// What AuthZEN callers authenticate with, besides a client certificate when `tls` requires one.
    pub bearer_secret: Option<BearerSecret>,
    /// The largest request body (AuthZEN's JSON).
    pub max_body_bytes: usize,
    /// The most evaluations in one AuthZEN batch.
    pub max_batch: usize,
    /// The longest a request may take, from its header to its answer.
    pub timeout: Duration,
    /// AuthZEN's Policy Decision Point identifier (`https://host[:port]`, no trailing slash), the
    /// base of the discovery document's URLs; None: no discovery document.
    pub policy_decision_point: Option<String>,
}

/// The SHA-256 of the secret AuthZEN callers present; compared in constant time, never logged.
#[derive(Clone, PartialEq, Eq)]
pub struct BearerSecret(pub [u8; 32]);

impl BearerSecret {
    /// Whether `headers` carry the secret as `Authorization: Bearer …` (the scheme's name in any
    /// case, as RFC 9110 has it), compared in constant time: every byte of both digests is read.
    pub fn admits(&self, headers: &http::HeaderMap) -> bool {
        let authorization = headers
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        let presented = crate::access_token::bearer_token(authorization).ok();
        presented.is_some_and(|p| {
            let digest = digest(p.as_bytes());
            digest
                .iter()
                .zip(self.0.iter())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0
        })
    }
}

impl std::fmt::Debug for BearerSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BearerSecret(..)")
    }
}

/// Where decisions are logged, one JSON line each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecisionLogSettings {
    pub target: DecisionLogTarget,
    /// Fields replaced by "[masked]" (`config::decision_log::MASKABLE`).
    pub mask: Vec<String>,
    /// A longer line is cut to its identifying fields and marked `"truncated": true`.
    pub max_line_bytes: usize,
    /// Lines waiting to be written at most; more are dropped and counted.
    pub queue: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecisionLogTarget {
    Stdout,
    File(PathBuf),
}

/// Spans of requests and of the calls made for them, exported over OTLP/HTTP.
#[derive(Clone, Debug, PartialEq)]
pub struct TracingSettings {
    /// The collector's traces endpoint, an http(s) URL.
    pub otlp_endpoint: String,
    pub service_name: String,
    /// The share of new traces recorded, in [0, 1].
    pub sample_ratio: f64,
    /// A client's `traceparent` is continued; otherwise every request starts a trace.
    pub accept_client_context: bool,
    /// The trace context the backend also receives in Zipkin's B3 headers.
    pub b3: B3,
}

/// Whether the backend receives the gateway's trace context in B3 headers too (a client's never
/// reach it while tracing is on).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum B3 {
    /// No B3 headers.
    None,
    /// `b3: {trace id}-{span id}-{sampled}`.
    Single,
    /// `X-B3-TraceId`, `X-B3-SpanId`, `X-B3-Sampled`.
    Multi,
}

/// People sign in at an identity provider (OpenID Connect) for the routes that ask for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoginSettings {
    pub identity_provider: PartyId,
    /// The version the identity provider speaks: its paths, how userinfo is asked and answered.
    pub scheme_version: SchemeVersion,
    /// Where the identity provider sends people back (`/openid_connect1.0/return` in 1.9,
    /// `/return` from 2.0): the gateway's own endpoint, in its own version.
    pub return_path: &'static str,
    /// The identity provider's base URL.
    pub url: String,
    pub scope: String,
    pub session_lifetime: Duration,
    pub cookie_name: String,
    /// The key sessions are sealed with; None: a random one per start (one instance only).
    pub secret: Option<SessionSecret>,
    pub logout_path: String,
    /// Sign-ins started per second at most (each signs a request object).
    pub starts_per_second: u32,
    /// Sign-ins started per minute at most from one client address; 0: no such bound.
    pub starts_per_address_per_minute: u32,
    /// (attribute, header): what the backend receives about the person.
    pub headers: Vec<(String, http::HeaderName)>,
}

/// A 256-bit key, never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct SessionSecret(pub [u8; 32]);

impl std::fmt::Debug for SessionSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionSecret(..)")
    }
}

#[derive(Clone)]
pub struct Identity {
    pub party_id: PartyId,
    pub name: String,
    pub signing: SigningIdentity,
    /// The private key in PEM, from which the access-token key is derived. Never logged.
    pub key_pem: String,
    pub key_file: PathBuf,
    pub chain_file: PathBuf,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity")
            .field("party_id", &self.party_id)
            .field("key_file", &self.key_file)
            .field("chain_file", &self.chain_file)
            .finish_non_exhaustive()
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listener {
    pub address: SocketAddr,
    pub tls: Option<ListenerTls>,
    /// Open connections at most; more are closed at once.
    pub max_connections: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListenerTls {
    pub certificate: PathBuf,
    pub key: PathBuf,
    pub client_auth: Option<ClientAuth>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientAuth {
    pub ca_file: PathBuf,
    pub required: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemeOwner {
    pub url: String,
    pub party_id: PartyId,
    pub root_fingerprint: Option<String>,
    pub trusted_list: Option<Vec<TrustedListEntry>>,
    pub refresh: Duration,
    pub party_cache_ttl: Duration,
    pub timeout: Duration,
    pub party_lookups_per_second: u32,
    /// The scheme owner's version, and every peer's not configured on its own.
    pub scheme_version: SchemeVersion,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tokens {
    pub lifetime: Duration,
    pub leeway: Duration,
    pub paths: Vec<String>,
    pub allow_rs384_rs512: bool,
}

/// Where the jtis of accepted assertions are kept: in memory, or on Redis for several instances.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplaySettings {
    /// None: in memory.
    pub redis: Option<RedisSettings>,
    pub timeout: Duration,
    pub capacity: usize,
}

/// The Redis the instances of a fleet share.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedisSettings {
    pub target: RedisTarget,
    /// From `credentials_file`: an ACL user (None: the default user) and its password.
    pub credentials: Option<RedisCredentials>,
    /// Extra roots for `rediss://` and Sentinel over TLS (PEM).
    pub ca_pem: Option<Vec<u8>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RedisTarget {
    /// One server: `redis://host:port/db` or `rediss://…`, without credentials.
    Server(String),
    /// The master that Sentinels name, found anew when it fails over.
    Sentinel {
        /// `host:port` of each Sentinel.
        nodes: Vec<(String, u16)>,
        master: String,
        db: i64,
        tls: bool,
    },
    /// A Redis Cluster, known by some of its nodes; the rest, and which holds which slot, are
    /// learnt from them.
    Cluster {
        /// `host:port` of each node given.
        nodes: Vec<(String, u16)>,
        tls: bool,
    },
}

#[derive(Clone, PartialEq, Eq)]
pub struct RedisCredentials {
    pub username: Option<String>,
    pub password: String,
}

impl std::fmt::Debug for RedisCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RedisCredentials({:?}, ..)", self.username)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upstream {
    pub name: String,
    pub addresses: Vec<String>,
    pub tls: Option<UpstreamTls>,
    pub host_header: Option<String>,
    pub connect_timeout: Duration,
    pub read_timeout: Duration,
    pub write_timeout: Duration,
    pub health_check: Option<HealthCheck>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct UpstreamTls {
    /// The name the backend's certificate is verified against; never empty.
    pub sni: String,
    /// Roots to verify the backend with instead of the platform's (DER).
    pub ca: Option<Vec<Vec<u8>>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HealthCheckKind {
    Tcp,
    Http { path: String },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HealthCheck {
    pub kind: HealthCheckKind,
    pub interval: Duration,
}

/// The name a route gives the registry the data owner designated for us (as when it names none);
/// no `[[registry]]` may take it.
pub const OWNERS_REGISTRY: &str = "owner";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registry {
    pub name: String,
    pub party_id: PartyId,
    pub url: String,
    pub token_path: String,
    pub delegation_path: String,
    pub scheme_version: SchemeVersion,
    /// Masks sent to it name the route's licences; otherwise the licences are judged on the
    /// evidence only (a registry whose schema refuses `licenses` in a mask, as Keyrock's does).
    pub mask_licences: bool,
    pub previous_steps: PreviousSteps,
    /// The id this registry addresses its answers to the gateway by, where it uses one of its
    /// own (FIWARE Keyrock's user id for the gateway's client): accepted in `aud` of its answers
    /// to the gateway's own calls, never in evidence a client presents.
    pub addresses_us_as: Option<String>,
}

/// What the gateway puts in `previous_steps` when it asks a registry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PreviousSteps {
    /// Nothing: the gateway asks as a service provider named in the mask.
    #[default]
    None,
    /// The consumer's client assertion from its token request, while it lives (30 s).
    ConsumerAssertion,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DelegationSettings {
    pub registry_timeout: Duration,
    pub cache_ttl: Duration,
    pub deny_cache_ttl: Duration,
    /// The decision cache's size in bytes.
    pub cache_size: u64,
    pub header_evidence_max_age: Duration,
    /// Registry calls (decision-cache misses) a caller may cause per minute.
    pub registry_calls_per_minute: u32,
    /// Per issuer (party id): members of its evidence to drop, as generic paths.
    pub ignored_members: BTreeMap<String, Vec<String>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Server {
    pub threads: usize,
    /// Idle threads take over work queued on busy ones (otherwise each thread serves the
    /// connections it accepted).
    pub work_stealing: bool,
    pub h2c: bool,
    /// An idle connection is closed after this (HTTP/1.1 keep-alive and HTTP/2).
    pub keepalive_timeout: Duration,
    /// A request's header must arrive within this from its first byte.
    pub header_timeout: Duration,
    /// Each read of a request body must complete within this.
    pub body_timeout: Duration,
    /// The time a whole request body may take, one second more per `body_min_rate` bytes.
    pub body_deadline: Duration,
    pub body_min_rate: u64,
    /// Concurrent HTTP/2 streams per connection (each also counts against `max_connections`).
    pub h2_max_streams: u32,
    /// A TLS handshake must complete within this.
    pub handshake_timeout: Duration,
    pub grace_period: Duration,
    pub graceful_shutdown_timeout: Duration,
    pub pid_file: Option<PathBuf>,
    pub upgrade_sock: Option<PathBuf>,
}

/// What the backend's `X-Forwarded-For` holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ForwardedFor {
    /// The address the gateway saw, alone: a client's own header is not passed on.
    Replace,
    /// The client's header with the address the gateway saw appended.
    Append,
}

impl ForwardedFor {
    pub fn as_str(self) -> &'static str {
        match self {
            ForwardedFor::Replace => "replace",
            ForwardedFor::Append => "append",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Log {
    pub format: LogFormat,
    pub level: String,
}

/// How a route authenticates and authorises.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Auth {
    /// No token needed.
    Public,
    /// A valid access token of ours.
    Token,
    /// A valid access token and delegation evidence that grants the request.
    Delegation(Box<DelegationRule>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvidenceSources {
    pub header: bool,
    pub registry: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DelegationRule {
    pub policy_issuer: Template,
    pub resource_type: Template,
    pub identifiers: Vec<Template>,
    pub attributes: Vec<Template>,
    /// None: derived from the method (GET → READ, POST → CREATE, PUT/PATCH → UPDATE, DELETE → DELETE).
    pub action: Option<String>,
    pub evidence: EvidenceSources,
    /// A configured registry by name; None (or "owner" in the file): the registry the data owner
    /// designated for us in its party record.
    pub registry: Option<String>,
    pub licences: Vec<String>,
    pub delegation_path: Vec<Template>,
    /// The data owner comes from the request: the caller names it (and may not name itself).
    pub caller_names_owner: bool,
    /// The values of conditions' left operands (3.0), by operand.
    pub conditions: BTreeMap<String, Template>,
    /// Evidence of a 3.0 signer that names no service provider is accepted as ours.
    pub accept_unnamed_service_provider: bool,
    /// The longest a decision of this route is served from the cache (below `[delegation]
    /// cache_ttl`); None: as long as the cache keeps it.
    pub max_decision_age: Option<std::time::Duration>,
}

/// How a response header is set on delegated routes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeaderSource {
    Literal(String),
    /// From the evidence that granted the request.
    Evidence,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// Shared: every decision on the route names it.
    pub name: arcstr::ArcStr,
    pub description: String,
    /// None: every method.
    pub methods: Option<Vec<Method>>,
    pub pattern: PathPattern,
    pub upstream: String,
    pub auth: Auth,
    pub upstream_path: Option<Template>,
    pub advertise: bool,
    pub forward_authorization: bool,
    /// Forms backends read differently that this route lets through (refused otherwise).
    pub accept: Ambiguities,
    /// Protocol upgrades (WebSocket) pass to the backend.
    pub websocket: bool,
    /// Header names as written (HTTP/1.1 answers keep their case).
    pub response_headers: Vec<(String, HeaderSource)>,
    /// The rules file it came from.
    pub source: PathBuf,
    /// The caller is a person with a session ([login]) instead of a token holder.
    pub login: bool,
    /// The backend compares identifiers without case: the path's captures and the query values
    /// the route reads are decided on and forwarded in this case.
    pub identifier_case: Option<crate::request::Case>,
    pub mode: Mode,
    /// What the route's rule reads of a JSON request body, when it reads one.
    pub body: Option<BodyRule>,
}

/// A route whose rule takes values from the JSON request body: the body is read whole (within
/// its bound), decided on and forwarded as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BodyRule {
    /// The largest body read; a larger one is refused (413).
    pub max_bytes: usize,
    /// The most elements of the array `*` stands for; more are refused (413).
    pub max_elements: usize,
    /// Every pointer the rule reads a value at.
    pub pointers: Vec<crate::request::body::BodyPointer>,
    /// Every pointer the rule reads member names at (`{body.keys./POINTER}`).
    pub keys: Vec<crate::request::body::BodyPointer>,
    /// A pointer with `*`, whose array's every element is decided on, if the rule has one.
    pub each: Option<crate::request::body::BodyPointer>,
}

/// Whether a route's decisions are enforced, or only made, logged and counted (the request is
/// forwarded whatever they say).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    #[default]
    Enforce,
    Shadow,
}

/// What a route without a `methods` list takes.
const USUAL_METHODS: [Method; 7] = [
    Method::GET,
    Method::HEAD,
    Method::POST,
    Method::PUT,
    Method::PATCH,
    Method::DELETE,
    Method::OPTIONS,
];

impl Route {
    /// Whether the route takes `method`: one it lists, or without a list one of the usual
    /// methods of an API (not TRACE, which would echo the request and its credentials back, nor
    /// methods of WebDAV or of some servers' own).
    pub fn allows(&self, method: &Method) -> bool {
        match &self.methods {
            Some(listed) => listed.contains(method),
            None => USUAL_METHODS.contains(method),
        }
    }

    /// The methods the route takes, for an `Allow` header.
    pub fn allowed_methods(&self) -> Vec<Method> {
        self.methods
            .clone()
            .unwrap_or_else(|| USUAL_METHODS.to_vec())
    }

    /// Every template of the route: its rule's values and its upstream path.
    fn templates(&self) -> Vec<&Template> {
        let mut templates: Vec<&Template> = self.upstream_path.iter().collect();
        if let Auth::Delegation(rule) = &self.auth {
            templates.extend(Route::rule_templates(rule));
        }
        templates
    }

    /// Every template of a delegation rule.
    pub fn rule_templates(rule: &DelegationRule) -> impl Iterator<Item = &Template> {
        [&rule.policy_issuer, &rule.resource_type]
            .into_iter()
            .chain(&rule.identifiers)
            .chain(&rule.attributes)
            .chain(&rule.delegation_path)
            .chain(rule.conditions.values())
    }

    /// Every request header the route's rule or upstream path reads (lower case).
    pub fn header_names(&self) -> impl Iterator<Item = &str> {
        self.templates()
            .into_iter()
            .flat_map(Template::header_names)
    }

    /// Every query parameter the route's rule or upstream path reads.
    pub fn query_names(&self) -> impl Iterator<Item = &str> {
        self.templates().into_iter().flat_map(Template::query_names)
    }
}

/// The SHA-256 of a secret, as it is kept and compared.
pub fn digest(secret: &[u8]) -> [u8; 32] {
    let digest = ring::digest::digest(&ring::digest::SHA256, secret);
    let mut out = [0u8; 32];
    out.copy_from_slice(digest.as_ref());
    out
}

/// The `route` label of what the gateway answers itself: no configured route may take one of
/// these names, or its counts would mix with the gateway's own.
pub mod own_route {
    /// A request no route matched.
    pub const UNMATCHED: &str = "unmatched";
    pub const TOKEN: &str = "token";
    pub const CAPABILITIES: &str = "capabilities";
    /// The return from the identity provider.
    pub const LOGIN_RETURN: &str = "login_return";
    pub const LOGOUT: &str = "logout";
    /// An AuthZEN question that names no route.
    pub const AUTHZEN: &str = "authzen";
    pub const ALL: [&str; 6] = [
        UNMATCHED,
        TOKEN,
        CAPABILITIES,
        LOGIN_RETURN,
        LOGOUT,
        AUTHZEN,
    ];
}
