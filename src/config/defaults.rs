//! Every default of `gateway.toml` and the rules, in one place. The configuration reference page
//! (`reference/` writes it) shows these, which a test holds it to (`documented`).

use super::model::ForwardedFor;
use crate::scheme::version::SchemeVersion;
use std::time::Duration;

pub const SCHEME: &str = "iSHARE";

pub const SCHEME_OWNER_REFRESH: Duration = Duration::from_secs(300);
pub const PARTY_CACHE_TTL: Duration = Duration::from_secs(600);
pub const SCHEME_OWNER_TIMEOUT: Duration = Duration::from_secs(5);
pub const PARTY_LOOKUPS_PER_SECOND: u32 = 20;
/// The version the scheme owner, and every peer without its own, speaks.
pub const SCHEME_VERSION: SchemeVersion = SchemeVersion::V1_9;

pub const TOKEN_LIFETIME: Duration = Duration::from_secs(3600);
pub const CLOCK_LEEWAY: Duration = Duration::from_secs(5);
/// The most clock leeway allowed: more defeats the 30 s lifetime of client assertions.
pub const MAX_CLOCK_LEEWAY: Duration = Duration::from_secs(30);
pub const TOKEN_PATHS: [&str; 3] = ["/connect/token", "/oauth2.0/token", "/token"];
pub const ALLOW_RS384_RS512: bool = false;
pub const REPLAY_CAPACITY: usize = 1_000_000;
pub const REPLAY_STORE: &str = "memory";
pub const REPLAY_TIMEOUT: Duration = Duration::from_millis(500);

pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
pub const HEALTH_CHECK_INTERVAL: Duration = Duration::from_secs(5);

pub const REGISTRY_TIMEOUT: Duration = Duration::from_secs(3);
pub const DECISION_CACHE_TTL: Duration = Duration::from_secs(300);
pub const DENY_CACHE_TTL: Duration = Duration::from_secs(10);
/// 64 MiB.
pub const DECISION_CACHE_SIZE: u64 = 64 << 20;
pub const HEADER_EVIDENCE_MAX_AGE: Duration = Duration::from_secs(3600);
/// Registry calls (decision-cache misses) a caller may cause per minute.
pub const REGISTRY_CALLS_PER_MINUTE: u32 = 600;

pub const RULES_DIRECTORY: &str = "policies";
pub const PARTY_HEADER: &str = "X-Consumer-Party-Id";
pub const ORIGINAL_CONSUMER_HEADER: &str = "X-Original-Consumer-Party-Id";
/// Client headers the backend never receives: method and path overrides, forwarding details a
/// client could forge (host, scheme, address), and the client certificate or user that a proxy in
/// front would vouch for.
pub const STRIP_HEADERS: [&str; 32] = [
    "X-HTTP-Method-Override",
    "X-HTTP-Method",
    "X-Method-Override",
    "X-Original-Method",
    "X-Forwarded-Method",
    "X-Override-Method",
    "X-Original-URL",
    "X-Original-URI",
    "X-Rewrite-URL",
    "Forwarded",
    "X-Forwarded-Host",
    "X-Forwarded-Port",
    "X-Forwarded-Prefix",
    "X-Forwarded-Ssl",
    "X-Forwarded-Scheme",
    "X-Url-Scheme",
    "Front-End-Https",
    "X-Real-IP",
    "Client-IP",
    "True-Client-IP",
    "X-Client-IP",
    "X-Cluster-Client-IP",
    "X-Original-Forwarded-For",
    "X-Forwarded-Client-Cert",
    "X-SSL-Client-Cert",
    "X-Client-Cert",
    "X-ARR-ClientCert",
    "X-Remote-User",
    "Remote-User",
    "X-Forwarded-User",
    "X-Auth-Request-User",
    "X-Forwarded-Email",
];

pub const FORWARDED_FOR: ForwardedFor = ForwardedFor::Replace;

pub const THREADS: usize = 2;
pub const H2C: bool = false;
pub const WORK_STEALING: bool = false;
pub const MAX_CONNECTIONS: usize = 10_000;
pub const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(60);
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
pub const BODY_TIMEOUT: Duration = Duration::from_secs(30);
pub const BODY_DEADLINE: Duration = Duration::from_secs(30);
/// Bytes per second.
pub const BODY_MIN_RATE: u64 = 1024;
pub const H2_MAX_STREAMS: u32 = 100;
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
pub const GRACE_PERIOD: Duration = Duration::from_secs(5);
pub const GRACEFUL_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

pub const LOG_LEVEL: &str = "info";
pub const DECISION_LOG_MAX_LINE: usize = 16 * 1024;
pub const DECISION_LOG_QUEUE: usize = 10_000;
/// The largest JSON body a route's rule reads, by default and at most (what the proxy holds of
/// a body to forward it as decided), and the most elements of its array decided on.
pub const ROUTE_MAX_BODY: usize = 64 * 1024;
pub const ROUTE_MAX_BODY_ELEMENTS: usize = 100;
/// The decision service's largest request body, its largest AuthZEN batch, its deadline.
pub const DECISION_API_MAX_BODY: usize = 64 * 1024;
pub const DECISION_API_MAX_BATCH: usize = 100;
pub const DECISION_API_TIMEOUT: Duration = Duration::from_secs(10);

pub const OTLP_ENDPOINT: &str = "http://127.0.0.1:4318/v1/traces";
pub const SERVICE_NAME: &str = "ishare-gateway";
pub const SAMPLE_RATIO: f64 = 1.0;
pub const ACCEPT_CLIENT_CONTEXT: bool = true;

pub const LOGIN_SCOPE: &str = "openid profile";
pub const SESSION_LIFETIME: Duration = Duration::from_secs(8 * 3600);
pub const COOKIE_NAME: &str = "__Host-ishare-session";
pub const LOGOUT_PATH: &str = "/logout";
pub const LOGIN_STARTS_PER_SECOND: u32 = 50;
pub const LOGIN_STARTS_PER_ADDRESS_PER_MINUTE: u32 = 30;
/// (attribute, header) the backend receives about a person.
pub const PERSON_HEADERS: [(&str, &str); 7] = [
    ("sub", "X-Person-Id"),
    ("first_name", "X-Person-First-Name"),
    ("last_name", "X-Person-Last-Name"),
    ("gender", "X-Person-Gender"),
    ("company_id", "X-Person-Company-Id"),
    ("company_name", "X-Person-Company-Name"),
    ("email", "X-Person-Email"),
];

/// The consumer's side (`egress.toml`): the local listener, each provider, the evidence kept.
pub mod egress {
    use std::time::Duration;

    pub const MAX_CONNECTIONS: usize = 1024;
    /// 1 MiB: a request body is held until the provider's answer (a call is sent again once).
    pub const MAX_BODY_BYTES: u64 = 1 << 20;
    pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
    pub const GRACEFUL_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);
    pub const PROVIDER_TIMEOUT: Duration = Duration::from_secs(30);
    pub const MAX_CONCURRENT: usize = 64;
    pub const EVIDENCE_CACHE_TTL: Duration = Duration::from_secs(300);
}

/// Every default as the configuration reference writes it: (key, value).
pub fn documented() -> Vec<(&'static str, String)> {
    let text = |v: &str| format!("\"{v}\"");
    let time = |d: Duration| format!("\"{}\"", humantime::format_duration(d));
    let size = |bytes: u64| format!("\"{}MiB\"", bytes >> 20);
    vec![
        ("scheme", text(SCHEME)),
        ("scheme_owner.refresh", time(SCHEME_OWNER_REFRESH)),
        ("scheme_owner.party_cache_ttl", time(PARTY_CACHE_TTL)),
        ("scheme_owner.scheme_version", text(SCHEME_VERSION.as_str())),
        ("scheme_owner.timeout", time(SCHEME_OWNER_TIMEOUT)),
        (
            "scheme_owner.party_lookups_per_second",
            PARTY_LOOKUPS_PER_SECOND.to_string(),
        ),
        ("tokens.lifetime", time(TOKEN_LIFETIME)),
        ("tokens.clock_leeway", time(CLOCK_LEEWAY)),
        (
            "tokens.paths",
            format!("[{}]", TOKEN_PATHS.map(text).join(", ")),
        ),
        ("tokens.allow_rs384_rs512", ALLOW_RS384_RS512.to_string()),
        ("replay.store", text(REPLAY_STORE)),
        ("replay.timeout", time(REPLAY_TIMEOUT)),
        ("replay.capacity", REPLAY_CAPACITY.to_string()),
        ("upstream.connect_timeout", time(CONNECT_TIMEOUT)),
        ("upstream.read_timeout", time(READ_TIMEOUT)),
        ("upstream.write_timeout", time(WRITE_TIMEOUT)),
        (
            "upstream.health_check.interval",
            time(HEALTH_CHECK_INTERVAL),
        ),
        ("delegation.registry_timeout", time(REGISTRY_TIMEOUT)),
        ("delegation.cache_ttl", time(DECISION_CACHE_TTL)),
        ("delegation.deny_cache_ttl", time(DENY_CACHE_TTL)),
        ("delegation.cache_size", size(DECISION_CACHE_SIZE)),
        (
            "delegation.header_evidence_max_age",
            time(HEADER_EVIDENCE_MAX_AGE),
        ),
        (
            "delegation.registry_calls_per_minute",
            REGISTRY_CALLS_PER_MINUTE.to_string(),
        ),
        ("rules.directory", text(RULES_DIRECTORY)),
        ("forwarding.party_header", text(PARTY_HEADER)),
        (
            "forwarding.original_consumer_header",
            text(ORIGINAL_CONSUMER_HEADER),
        ),
        (
            "forwarding.strip_headers",
            format!("[{}]", STRIP_HEADERS.map(text).join(", ")),
        ),
        ("forwarding.forwarded_for", text(FORWARDED_FOR.as_str())),
        ("forwarding.trusted_proxies", "[]".to_string()),
        ("server.threads", THREADS.to_string()),
        ("server.work_stealing", WORK_STEALING.to_string()),
        ("server.h2c", H2C.to_string()),
        ("listener.max_connections", MAX_CONNECTIONS.to_string()),
        ("server.keepalive_timeout", time(KEEPALIVE_TIMEOUT)),
        ("server.header_timeout", time(HEADER_TIMEOUT)),
        ("server.body_timeout", time(BODY_TIMEOUT)),
        ("server.body_deadline", time(BODY_DEADLINE)),
        ("server.body_min_rate", BODY_MIN_RATE.to_string()),
        ("server.h2_max_streams", H2_MAX_STREAMS.to_string()),
        ("server.handshake_timeout", time(HANDSHAKE_TIMEOUT)),
        ("server.grace_period", time(GRACE_PERIOD)),
        (
            "server.graceful_shutdown_timeout",
            time(GRACEFUL_SHUTDOWN_TIMEOUT),
        ),
        ("log.level", text(LOG_LEVEL)),
        ("decision_log.mask", "[]".to_string()),
        (
            "decision_log.max_line_bytes",
            DECISION_LOG_MAX_LINE.to_string(),
        ),
        ("decision_log.queue", DECISION_LOG_QUEUE.to_string()),
        ("tracing.otlp_endpoint", text(OTLP_ENDPOINT)),
        ("tracing.service_name", text(SERVICE_NAME)),
        ("tracing.sample_ratio", format!("{SAMPLE_RATIO:?}")),
        (
            "tracing.accept_client_context",
            ACCEPT_CLIENT_CONTEXT.to_string(),
        ),
        ("tracing.b3", text("none")),
        (
            "decision_api.max_body_bytes",
            DECISION_API_MAX_BODY.to_string(),
        ),
        ("decision_api.max_batch", DECISION_API_MAX_BATCH.to_string()),
        ("decision_api.timeout", time(DECISION_API_TIMEOUT)),
        ("login.scope", text(LOGIN_SCOPE)),
        ("login.session_lifetime", time(SESSION_LIFETIME)),
        ("login.cookie_name", text(COOKIE_NAME)),
        ("login.logout_path", text(LOGOUT_PATH)),
        (
            "login.starts_per_second",
            LOGIN_STARTS_PER_SECOND.to_string(),
        ),
        (
            "login.starts_per_address_per_minute",
            LOGIN_STARTS_PER_ADDRESS_PER_MINUTE.to_string(),
        ),
    ]
}
