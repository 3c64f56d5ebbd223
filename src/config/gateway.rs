//! `gateway.toml` from its file types to the validated model: one function per section, each
//! recording its problems with their keys and carrying on, so that every problem is reported at once.

use super::defaults as default;
use super::file::*;
use super::issues::{ConfigIssue, Issues};
use super::model::*;
use super::pem::{check_pem_certs, listener_tls};
use super::rules::{load_rules, Known};
use super::scheme_sections::{
    check_root, delegation, identity, outbound, registries, scheme, scheme_owner, tokens,
    warn_id_of_another_version,
};
use super::values::{nonzero, resolve, scheme_version, socket_addr, url_of, warn_platform_roots};
use crate::scheme::vocabulary::CAPABILITIES_PATH;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub(super) fn build(path: &Path, file: GatewayFile, all: &mut Vec<ConfigIssue>) -> Option<Config> {
    let base = path.parent().unwrap_or(Path::new(".")).to_path_buf();
    let mut issues = Issues {
        file: path.to_path_buf(),
        all,
    };
    let issues = &mut issues;
    let participants = participant_urls(&file);
    let scheme = scheme(file.scheme, issues);
    let mut dataspaces: Vec<String> = Vec::new();
    for (i, space) in file.dataspaces.into_iter().enumerate() {
        let key = format!("dataspaces[{i}]");
        match crate::scheme::party_record::dataspace_id_problem(&space) {
            Some(problem) => issues.add(key, problem),
            None if dataspaces.contains(&space) => {
                issues.add(key, format!("{space} is listed twice"))
            }
            None => dataspaces.push(space),
        }
    }
    let identity = required_identity(&base, file.identity, issues);
    let listeners = listeners(&base, file.listeners, issues);
    let scheme_owner = required_scheme_owner(&base, file.scheme_owner, issues);
    if let (Some(id), Some(so)) = (&identity, &scheme_owner) {
        check_root(&id.signing, so, issues);
    }
    let tokens = tokens(file.tokens, issues);
    let outbound = outbound(&base, file.outbound, issues);
    if outbound.ca_pem.is_none() {
        for (key, url) in &participants {
            warn_platform_roots(key, url, issues);
        }
    }
    let upstreams = upstreams(&base, file.upstreams, issues);
    let peers_version = scheme_owner
        .as_ref()
        .map_or(default::SCHEME_VERSION, |so| so.scheme_version);
    let own_version =
        scheme_version("scheme_version", file.scheme_version, issues).unwrap_or(peers_version);
    let registries = registries(file.registries, peers_version, issues);
    if let Some(so) = &scheme_owner {
        let ids = [(
            "scheme_owner.party_id".to_string(),
            so.party_id.as_str(),
            so.scheme_version,
        )]
        .into_iter()
        .chain(identity.iter().map(|id| {
            (
                "identity.party_id".into(),
                id.party_id.as_str(),
                so.scheme_version,
            )
        }))
        .chain(registries.iter().map(|(name, r)| {
            (
                format!("registry.{name}.party_id"),
                r.party_id.as_str(),
                r.scheme_version,
            )
        }));
        for (key, id, version) in ids {
            warn_id_of_another_version(&key, id, version, issues);
        }
    }
    let delegation = delegation(file.delegation, issues);
    let replay = super::redis::replay(&base, file.replay, issues);
    let services = services(&base, file.admin, file.decision_api, &listeners, issues);
    let forwarding = super::forwarding::build(file.forwarding, issues);
    let mut strip_headers = forwarding.strip_headers;
    let party_headers = forwarding.party_headers;
    let server = server(&base, file.server, issues);
    let log = log(file.log, issues);
    let public_url = public_url(file.public_url.as_deref(), &listeners, issues);
    let versions = (peers_version, own_version);
    let login = file
        .login
        .and_then(|l| super::login::build(&base, l, replay.redis.is_some(), versions, issues));
    let tracing = file.tracing.map(|t| super::tracing::build(t, issues));
    strip_login_headers(&mut strip_headers, login.as_ref());
    let decision_log = file
        .decision_log
        .and_then(|f| super::decision_log::build(&base, f, issues));
    let rules_dir = rules_directory(&base, file.rules);
    let reserved = reserved_paths(&tokens, login.as_ref());
    let known = Known {
        upstreams: &upstreams,
        registries: &registries,
        reserved: &reserved,
        login: login.is_some(),
    };
    let routes = load_rules(&rules_dir, &known, issues.all);
    let certificates = super::pem::certificate_expiries(
        identity.as_ref(),
        &listeners,
        services.decision_api.as_ref(),
        issues,
    );
    Some(Config {
        source: path.to_path_buf(),
        scheme,
        dataspaces,
        scheme_version: own_version,
        public_url,
        identity: identity?,
        listeners,
        scheme_owner: scheme_owner?,
        tokens,
        outbound,
        upstreams,
        registries,
        delegation,
        replay,
        admin: services.admin,
        purge_secret: services.purge_secret,
        rules_dir,
        routes,
        party_header: party_headers.clone()?.0,
        original_consumer_header: party_headers?.1,
        strip_headers,
        forwarded_for: forwarding.forwarded_for,
        trusted_proxies: forwarding.trusted_proxies,
        server,
        log,
        warnings: Vec::new(),
        login,
        decision_log,
        tracing,
        decision_api: services.decision_api,
        certificates,
    })
}

/// The gateway's own identity, which the configuration must give.
fn required_identity(
    base: &Path,
    file: Option<IdentityFile>,
    issues: &mut Issues,
) -> Option<Identity> {
    match file {
        Some(id) => identity(base, id, issues),
        None => {
            issues.add(
                "identity",
                "missing: the gateway's party_id, key and certificate_chain",
            );
            None
        }
    }
}

/// The scheme owner the gateway trusts, which the configuration must give.
fn required_scheme_owner(
    base: &Path,
    file: Option<SchemeOwnerFile>,
    issues: &mut Issues,
) -> Option<SchemeOwner> {
    match file {
        Some(so) => scheme_owner(base, so, issues),
        None => {
            issues.add(
                "scheme_owner",
                "missing: url, party_id and root_fingerprint (or trusted_list_file)",
            );
            None
        }
    }
}

/// The listeners beside the proxy's: the admin listener, the secret `POST /purge` callers on it
/// authenticate with, and the decision service.
struct Services {
    admin: Option<SocketAddr>,
    purge_secret: Option<BearerSecret>,
    decision_api: Option<DecisionApiSettings>,
}

/// The admin listener and the decision service, each checked to listen on an address no
/// listener of the proxy's takes.
fn services(
    base: &Path,
    admin: Option<AdminFile>,
    decision_api: Option<DecisionApiFile>,
    listeners: &[Listener],
    issues: &mut Issues,
) -> Services {
    let purge_secret = admin
        .as_ref()
        .and_then(|a| a.purge_secret_file.as_ref())
        .and_then(|p| {
            super::decision_api::bearer_secret(&resolve(base, p), "admin.purge_secret_file", issues)
        });
    let admin = admin.and_then(|a| issues.check("admin.address", socket_addr(&a.address)));
    if let Some(open) = admin.filter(|a| a.ip().is_unspecified()) {
        let purge = match purge_secret {
            Some(_) => ", and may try secrets at /purge",
            None => "",
        };
        issues.warn(
            "admin.address",
            format!("{open} listens on every interface: whoever reaches it reads /metrics and /ready{purge}; bind it to 127.0.0.1 or a private address, or let only the scrapers reach it (a firewall, a Kubernetes NetworkPolicy)"),
        );
    }
    let decision_api = decision_api.and_then(|f| super::decision_api::build(base, f, issues));
    let service_addresses: Vec<(String, SocketAddr)> = admin
        .map(|a| ("admin.address".to_string(), a))
        .into_iter()
        .chain(decision_api.iter().flat_map(super::decision_api::addresses))
        .collect();
    distinct_addresses(listeners, &service_addresses, issues);
    Services {
        admin,
        purge_secret,
        decision_api,
    }
}

/// The rules directory, as configured or by default, resolved against the configuration file's
/// directory.
fn rules_directory(base: &Path, rules: RulesFile) -> PathBuf {
    resolve(
        base,
        &rules
            .directory
            .unwrap_or_else(|| PathBuf::from(default::RULES_DIRECTORY)),
    )
}

/// The configured addresses of the participants the gateway calls, with their keys: the scheme
/// owner, the registries and the identity provider.
fn participant_urls(file: &GatewayFile) -> Vec<(String, String)> {
    let scheme_owner = file
        .scheme_owner
        .iter()
        .map(|so| ("scheme_owner.url".to_string(), so.url.clone()));
    let registries = file
        .registries
        .iter()
        .enumerate()
        .map(|(i, r)| (format!("registry[{i}].url"), r.url.clone()));
    let login = file
        .login
        .iter()
        .filter_map(|l| Some(("login.url".to_string(), l.url.clone()?)));
    scheme_owner.chain(registries).chain(login).collect()
}

/// A client's copy of a header that speaks for a signed-in person never reaches a backend: those
/// headers join the ones stripped.
fn strip_login_headers(strip_headers: &mut Vec<http::HeaderName>, login: Option<&LoginSettings>) {
    for (_, header) in login.iter().flat_map(|l| &l.headers) {
        if !strip_headers.contains(header) {
            strip_headers.push(header.clone());
        }
    }
}

/// The paths the gateway serves itself, which no route may take: the capabilities, the token
/// endpoints and, with [login], the return from the identity provider and the logout.
fn reserved_paths(tokens: &Tokens, login: Option<&LoginSettings>) -> Vec<String> {
    std::iter::once(CAPABILITIES_PATH.to_string())
        .chain(tokens.paths.iter().cloned())
        .chain(
            login
                .iter()
                .flat_map(|l| [l.return_path.to_string(), l.logout_path.clone()]),
        )
        .collect()
}

fn listeners(base: &Path, files: Vec<ListenerFile>, issues: &mut Issues) -> Vec<Listener> {
    if files.is_empty() {
        issues.add("listener", "at least one [[listener]] is needed");
    }
    let mut listeners = Vec::new();
    for (i, l) in files.into_iter().enumerate() {
        let key = format!("listener[{i}]");
        let address = issues.check(&format!("{key}.address"), socket_addr(&l.address));
        let tls = l.tls.map(|t| listener_tls(base, &key, t, issues));
        if let Some(address) = address {
            listeners.push(Listener {
                address,
                tls,
                max_connections: l.max_connections.unwrap_or(default::MAX_CONNECTIONS).max(1),
            });
        }
    }
    listeners
}

/// Every listener and the admin listener on an address of its own: two on one port of one host
/// cannot both bind (pingora would even hand one socket to both, mixing their connections).
fn distinct_addresses(
    listeners: &[Listener],
    services: &[(String, SocketAddr)],
    issues: &mut Issues,
) {
    let named = listeners
        .iter()
        .enumerate()
        .map(|(i, l)| (format!("listener[{i}].address"), l.address))
        .chain(services.iter().cloned());
    let mut seen: Vec<(String, SocketAddr)> = Vec::new();
    for (key, address) in named {
        let clash = seen.iter().find(|(_, other)| overlaps(*other, address));
        if let Some((other_key, other)) = clash {
            issues.add(
                key.as_str(),
                format!("{address} overlaps {other_key} ({other}): each listener needs an address of its own"),
            );
        }
        seen.push((key, address));
    }
}

/// Whether two listen addresses cannot both be bound: one port (not 0, which the system picks), and
/// one address, or an unspecified one covering the other (`[::]` covers IPv4 too, as Linux binds
/// it by default; `0.0.0.0` covers IPv4 only).
pub(super) fn overlaps(a: SocketAddr, b: SocketAddr) -> bool {
    let covers = |wide: SocketAddr, other: SocketAddr| {
        wide.ip().is_unspecified() && (wide.is_ipv6() || other.is_ipv4())
    };
    a.port() == b.port() && a.port() != 0 && (a.ip() == b.ip() || covers(a, b) || covers(b, a))
}

fn upstreams(
    base: &Path,
    files: Vec<UpstreamFile>,
    issues: &mut Issues,
) -> BTreeMap<String, Upstream> {
    let mut upstreams = BTreeMap::new();
    for (i, u) in files.into_iter().enumerate() {
        let key = format!("upstream[{i}]");
        if upstreams.contains_key(&u.name) {
            issues.add(
                format!("{key}.name"),
                format!("{:?} is defined twice", u.name),
            );
        }
        let up = upstream(base, &key, u, issues);
        upstreams.insert(up.name.clone(), up);
    }
    upstreams
}

fn upstream(base: &Path, key: &str, u: UpstreamFile, issues: &mut Issues) -> Upstream {
    if u.addresses.is_empty() {
        issues.add(format!("{key}.addresses"), "at least one address is needed");
    }
    for (i, a) in u.addresses.iter().enumerate() {
        issues.check(&format!("{key}.addresses[{i}]"), socket_addr(a));
    }
    if !u.tls && (u.sni.is_some() || u.ca_file.is_some()) {
        issues.add(format!("{key}.tls"), "sni and ca_file need tls = true");
    }
    let tls = u.tls.then(|| {
        let host = u.addresses.first().map(|a| {
            a.rsplit_once(':')
                .map(|(h, _)| h.trim_start_matches('[').trim_end_matches(']').to_string())
                .unwrap_or_else(|| a.clone())
        });
        let sni = u.sni.clone().or(host).unwrap_or_default();
        if sni.is_empty() {
            issues.add(
                format!("{key}.sni"),
                "the name to verify the backend's certificate against is needed",
            );
        }
        let ca = u
            .ca_file
            .as_ref()
            .and_then(|p| check_pem_certs(&resolve(base, p), &format!("{key}.ca_file"), issues));
        UpstreamTls { sni, ca }
    });
    let health_check = u.health_check.map(|h| health_check(key, h, issues));
    Upstream {
        name: u.name,
        addresses: u.addresses,
        tls,
        host_header: u.host_header,
        connect_timeout: u.connect_timeout.unwrap_or(default::CONNECT_TIMEOUT),
        read_timeout: u.read_timeout.unwrap_or(default::READ_TIMEOUT),
        write_timeout: u.write_timeout.unwrap_or(default::WRITE_TIMEOUT),
        health_check,
    }
}

fn health_check(key: &str, h: HealthCheckFile, issues: &mut Issues) -> HealthCheck {
    let kind = h
        .kind
        .and_then(|k| issues.choice(&format!("{key}.health_check.kind"), k));
    let kind = match (kind, h.path) {
        (None | Some(HealthCheckKindFile::Tcp), None) => HealthCheckKind::Tcp,
        (None | Some(HealthCheckKindFile::Http), Some(path)) => HealthCheckKind::Http { path },
        (Some(HealthCheckKindFile::Http), None) => {
            issues.add(
                format!("{key}.health_check.path"),
                "an http health check needs a path",
            );
            HealthCheckKind::Tcp
        }
        (Some(HealthCheckKindFile::Tcp), Some(_)) => {
            issues.add(
                format!("{key}.health_check.path"),
                "a tcp health check has no path",
            );
            HealthCheckKind::Tcp
        }
    };
    HealthCheck {
        kind,
        interval: h.interval.unwrap_or(default::HEALTH_CHECK_INTERVAL),
    }
}

fn server(base: &Path, s: ServerFile, issues: &mut Issues) -> Server {
    let mut positive = |name: &str, value: Option<Duration>, default: Duration| {
        issues
            .check(
                &format!("server.{name}"),
                nonzero(value.unwrap_or(default), name),
            )
            .unwrap_or(default)
    };
    Server {
        threads: s.threads.unwrap_or(default::THREADS).max(1),
        work_stealing: s.work_stealing.unwrap_or(default::WORK_STEALING),
        h2c: s.h2c.unwrap_or(default::H2C),
        keepalive_timeout: positive(
            "keepalive_timeout",
            s.keepalive_timeout,
            default::KEEPALIVE_TIMEOUT,
        ),
        header_timeout: positive("header_timeout", s.header_timeout, default::HEADER_TIMEOUT),
        body_timeout: positive("body_timeout", s.body_timeout, default::BODY_TIMEOUT),
        body_deadline: positive("body_deadline", s.body_deadline, default::BODY_DEADLINE),
        body_min_rate: s.body_min_rate.unwrap_or(default::BODY_MIN_RATE).max(1),
        h2_max_streams: s.h2_max_streams.unwrap_or(default::H2_MAX_STREAMS).max(1),
        handshake_timeout: positive(
            "handshake_timeout",
            s.handshake_timeout,
            default::HANDSHAKE_TIMEOUT,
        ),
        grace_period: s.grace_period.unwrap_or(default::GRACE_PERIOD),
        graceful_shutdown_timeout: s
            .graceful_shutdown_timeout
            .unwrap_or(default::GRACEFUL_SHUTDOWN_TIMEOUT),
        pid_file: s.pid_file.map(|p| resolve(base, &p)),
        upgrade_sock: s.upgrade_sock.map(|p| resolve(base, &p)),
    }
}

pub(super) fn log(l: LogFile, issues: &mut Issues) -> Log {
    Log {
        format: l
            .format
            .and_then(|f| issues.choice("log.format", f))
            .unwrap_or(LogFormat::Text),
        level: l.level.unwrap_or_else(|| default::LOG_LEVEL.into()),
    }
}

/// Where clients reach the gateway: as configured, or the first listener.
fn public_url(configured: Option<&str>, listeners: &[Listener], issues: &mut Issues) -> String {
    match configured {
        Some(u) => issues.check("public_url", url_of(u)),
        None => listeners.first().map(|l| {
            let scheme = if l.tls.is_some() { "https" } else { "http" };
            format!("{scheme}://{}", l.address)
        }),
    }
    .unwrap_or_default()
}
