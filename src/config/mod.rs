//! Configuration: `gateway.toml` and the route rules in `policies/*.toml`. The external types
//! (`file.rs`) are kept apart from the validated model (`model.rs`); loading checks everything and
//! reports every problem at once, each with its file and key.

pub mod file;
pub mod model;

use crate::request::pattern::PathPattern;
use crate::request::template::Template;
use crate::scheme::jwt::SigningIdentity;
use crate::scheme::models::TrustedListEntry;
use crate::scheme::party::PartyId;
use crate::scheme::vocabulary::{Action, CAPABILITIES_PATH, DELEGATION_PATH, TOKEN_PATH};
use crate::tls::OutboundTrust;
use file::*;
use model::*;
use serde::de::DeserializeOwned;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One problem in a configuration file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigIssue {
    pub file: PathBuf,
    pub key: String,
    pub message: String,
}

/// Every problem found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigIssue>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, issue) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            if issue.key.is_empty() {
                write!(f, "{}: {}", issue.file.display(), issue.message)?;
            } else {
                write!(
                    f,
                    "{}: {}: {}",
                    issue.file.display(),
                    issue.key,
                    issue.message
                )?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// Collects problems for one file.
struct Issues<'a> {
    file: PathBuf,
    all: &'a mut Vec<ConfigIssue>,
}

impl Issues<'_> {
    fn add(&mut self, key: impl Into<String>, message: impl Into<String>) {
        self.all.push(ConfigIssue {
            file: self.file.clone(),
            key: key.into(),
            message: message.into(),
        });
    }

    /// The value of a check, recording its error.
    fn check<T>(&mut self, key: &str, r: Result<T, String>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(e) => {
                self.add(key, e);
                None
            }
        }
    }
}

/// A key path as written in these files: `upstream[0].speed`.
fn key_of(path: &serde_ignored::Path) -> String {
    use serde_ignored::Path;
    match path {
        Path::Root => String::new(),
        Path::Seq { parent, index } => format!("{}[{index}]", key_of(parent)),
        Path::Map { parent, key } => {
            let p = key_of(parent);
            if p.is_empty() {
                key.clone()
            } else {
                format!("{p}.{key}")
            }
        }
        Path::Some { parent }
        | Path::NewtypeStruct { parent }
        | Path::NewtypeVariant { parent } => key_of(parent),
    }
}

/// Parse TOML into `T`; unknown keys are all reported, not only the first.
fn parse_toml<T: DeserializeOwned>(
    path: &Path,
    text: &str,
    all: &mut Vec<ConfigIssue>,
) -> Option<T> {
    let mut issues = Issues {
        file: path.to_path_buf(),
        all,
    };
    let mut unknown = Vec::new();
    let de = match toml::Deserializer::parse(text) {
        Ok(de) => de,
        Err(e) => {
            issues.add("", e.to_string().trim().replace('\n', " "));
            return None;
        }
    };
    match serde_ignored::deserialize(de, |p| unknown.push(key_of(&p))) {
        Ok(v) => {
            for key in unknown {
                issues.add(key, "unknown key");
            }
            Some(v)
        }
        Err(e) => {
            issues.add("", e.to_string().trim().replace('\n', " "));
            None
        }
    }
}

fn read(path: &Path, all: &mut Vec<ConfigIssue>) -> Option<String> {
    match std::fs::read_to_string(path) {
        Ok(t) => Some(t),
        Err(e) => {
            all.push(ConfigIssue {
                file: path.to_path_buf(),
                key: String::new(),
                message: format!("cannot read: {e}"),
            });
            None
        }
    }
}

fn resolve(base: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

fn socket_addr(text: &str) -> Result<SocketAddr, String> {
    text.parse::<SocketAddr>().or_else(|_| {
        text.to_socket_addrs()
            .map_err(|e| format!("{text:?} is not an address: {e}"))?
            .next()
            .ok_or_else(|| format!("{text:?} resolves to no address"))
    })
}

fn url_of(text: &str) -> Result<String, String> {
    let url = url::Url::parse(text).map_err(|e| format!("{text:?} is not a URL: {e}"))?;
    match url.scheme() {
        "https" | "http" => Ok(text.trim_end_matches('/').to_string()),
        other => Err(format!(
            "{text:?}: the scheme must be https (or http), not {other}"
        )),
    }
}

fn party(text: &str) -> Result<PartyId, String> {
    PartyId::parse(text).map_err(|e| e.to_string())
}

fn header_name(text: &str) -> Result<http::HeaderName, String> {
    http::HeaderName::from_bytes(text.as_bytes())
        .map_err(|_| format!("{text:?} is not a header name"))
}

fn nonzero(d: Duration, what: &str) -> Result<Duration, String> {
    if d.is_zero() {
        Err(format!("{what} must be more than zero"))
    } else {
        Ok(d)
    }
}

/// Load and validate `gateway.toml` and the rules it names.
pub fn load(path: &Path) -> Result<Config, ConfigErrors> {
    let mut all = Vec::new();
    let config = read(path, &mut all)
        .and_then(|text| parse_toml::<GatewayFile>(path, &text, &mut all))
        .and_then(|file| build(path, file, &mut all));
    match config {
        Some(c) if all.is_empty() => Ok(c),
        _ => Err(ConfigErrors(all)),
    }
}

fn build(path: &Path, file: GatewayFile, all: &mut Vec<ConfigIssue>) -> Option<Config> {
    let base = path.parent().unwrap_or(Path::new(".")).to_path_buf();
    let mut issues = Issues {
        file: path.to_path_buf(),
        all,
    };
    let scheme = file.scheme.unwrap_or_else(|| "iSHARE".into());
    if scheme.is_empty() || scheme.chars().any(|c| c.is_whitespace()) {
        issues.add("scheme", "must be a single word, e.g. iSHARE");
    }

    let identity = match file.identity {
        None => {
            issues.add(
                "identity",
                "missing: the gateway's party_id, key and certificate_chain",
            );
            None
        }
        Some(id) => identity(&base, id, &mut issues),
    };

    if file.listeners.is_empty() {
        issues.add("listener", "at least one [[listener]] is needed");
    }
    let mut listeners = Vec::new();
    for (i, l) in file.listeners.into_iter().enumerate() {
        let key = format!("listener[{i}]");
        let address = issues.check(&format!("{key}.address"), socket_addr(&l.address));
        let tls = l.tls.map(|t| {
            let client_auth = match (t.client_ca, t.client_auth.as_deref()) {
                (None, None) => None,
                (None, Some(_)) => {
                    issues.add(format!("{key}.tls.client_auth"), "needs tls.client_ca");
                    None
                }
                (Some(ca), mode) => {
                    let required = match mode {
                        None | Some("optional") => false,
                        Some("required") => true,
                        Some(other) => {
                            issues.add(
                                format!("{key}.tls.client_auth"),
                                format!("{other:?}: use optional or required"),
                            );
                            false
                        }
                    };
                    let ca_file = resolve(&base, &ca);
                    check_pem_certs(&ca_file, &format!("{key}.tls.client_ca"), &mut issues);
                    Some(ClientAuth { ca_file, required })
                }
            };
            let certificate = resolve(&base, &t.certificate);
            let key_file = resolve(&base, &t.key);
            check_pem_certs(&certificate, &format!("{key}.tls.certificate"), &mut issues);
            check_pem_key(&key_file, &format!("{key}.tls.key"), &mut issues);
            ListenerTls {
                certificate,
                key: key_file,
                client_auth,
            }
        });
        if let Some(address) = address {
            listeners.push(Listener { address, tls });
        }
    }

    let scheme_owner = match file.scheme_owner {
        None => {
            issues.add(
                "scheme_owner",
                "missing: url, party_id and root_fingerprint (or trusted_list_file)",
            );
            None
        }
        Some(so) => scheme_owner(&base, so, &mut issues),
    };

    let t = file.tokens;
    let mut paths = t
        .paths
        .unwrap_or_else(|| vec![TOKEN_PATH.into(), "/oauth2.0/token".into(), "/token".into()]);
    for (i, p) in paths.iter().enumerate() {
        if !p.starts_with('/')
            || crate::request::path::normalize_path(p).ok().as_deref() != Some(p.as_str())
        {
            issues.add(
                format!("tokens.paths[{i}]"),
                format!("{p:?} must be a normal absolute path"),
            );
        }
    }
    if !paths.iter().any(|p| p == TOKEN_PATH) {
        paths.push(TOKEN_PATH.into());
    }
    let tokens = Tokens {
        lifetime: issues
            .check(
                "tokens.lifetime",
                nonzero(t.lifetime.unwrap_or(Duration::from_secs(3600)), "lifetime"),
            )
            .unwrap_or_default(),
        leeway: t.clock_leeway.unwrap_or(Duration::from_secs(5)),
        paths,
        allow_rs384_rs512: t.allow_rs384_rs512.unwrap_or(false),
    };
    if tokens.leeway > Duration::from_secs(30) {
        issues.add(
            "tokens.clock_leeway",
            "more than 30 s defeats the 30 s lifetime of client assertions",
        );
    }

    let outbound = OutboundTrust {
        ca_pem: file.outbound.ca_file.as_ref().and_then(|p| {
            let p = resolve(&base, p);
            check_pem_certs(&p, "outbound.ca_file", &mut issues);
            std::fs::read(&p).ok()
        }),
        system_roots: file
            .outbound
            .system_roots
            .unwrap_or(file.outbound.ca_file.is_none()),
    };

    let mut upstreams = BTreeMap::new();
    for (i, u) in file.upstreams.into_iter().enumerate() {
        let key = format!("upstream[{i}]");
        if upstreams.contains_key(&u.name) {
            issues.add(
                format!("{key}.name"),
                format!("{:?} is defined twice", u.name),
            );
        }
        if let Some(up) = upstream(&base, &key, u, &mut issues) {
            upstreams.insert(up.name.clone(), up);
        }
    }

    let mut registries = BTreeMap::new();
    for (i, r) in file.registries.into_iter().enumerate() {
        let key = format!("registry[{i}]");
        let party_id = issues.check(&format!("{key}.party_id"), party(&r.party_id));
        let url = issues.check(&format!("{key}.url"), url_of(&r.url));
        if registries.contains_key(&r.name) {
            issues.add(
                format!("{key}.name"),
                format!("{:?} is defined twice", r.name),
            );
        }
        if let (Some(party_id), Some(url)) = (party_id, url) {
            registries.insert(
                r.name.clone(),
                Registry {
                    name: r.name,
                    party_id,
                    url,
                    token_path: r.token_path.unwrap_or_else(|| TOKEN_PATH.into()),
                    delegation_path: r.delegation_path.unwrap_or_else(|| DELEGATION_PATH.into()),
                },
            );
        }
    }

    let d = file.delegation;
    let delegation = DelegationSettings {
        registry_timeout: d.registry_timeout.unwrap_or(Duration::from_secs(3)),
        cache_ttl: d.cache_ttl.unwrap_or(Duration::from_secs(300)),
        deny_cache_ttl: d.deny_cache_ttl.unwrap_or(Duration::from_secs(10)),
        cache_capacity: d.cache_capacity.unwrap_or(100_000),
        header_evidence_max_age: d
            .header_evidence_max_age
            .unwrap_or(Duration::from_secs(3600)),
    };

    let admin = file
        .admin
        .and_then(|a| issues.check("admin.address", socket_addr(&a.address)));

    let party_header = issues
        .check(
            "forwarding.party_header",
            header_name(
                file.forwarding
                    .party_header
                    .as_deref()
                    .unwrap_or("X-Consumer-Party-Id"),
            ),
        )
        .unwrap_or(http::HeaderName::from_static("x-consumer-party-id"));
    for reserved in [
        "authorization",
        "host",
        crate::scheme::vocabulary::EVIDENCE_HEADER,
        "content-length",
    ] {
        if party_header.as_str() == reserved {
            issues.add(
                "forwarding.party_header",
                format!("{reserved} cannot carry the party id"),
            );
        }
    }

    let s = file.server;
    let server = Server {
        threads: s.threads.unwrap_or(2).max(1),
        h2c: s.h2c.unwrap_or(false),
        grace_period: s.grace_period.unwrap_or(Duration::from_secs(5)),
        graceful_shutdown_timeout: s
            .graceful_shutdown_timeout
            .unwrap_or(Duration::from_secs(5)),
        pid_file: s.pid_file.map(|p| resolve(&base, &p)),
        upgrade_sock: s.upgrade_sock.map(|p| resolve(&base, &p)),
    };
    let log = Log {
        format: match file.log.format.as_deref() {
            None | Some("text") => LogFormat::Text,
            Some("json") => LogFormat::Json,
            Some(other) => {
                issues.add("log.format", format!("{other:?}: use text or json"));
                LogFormat::Text
            }
        },
        level: file.log.level.unwrap_or_else(|| "info".into()),
    };

    let public_url = match &file.public_url {
        Some(u) => issues.check("public_url", url_of(u)),
        None => listeners.first().map(|l| {
            let scheme = if l.tls.is_some() { "https" } else { "http" };
            format!("{scheme}://{}", l.address)
        }),
    }
    .unwrap_or_default();

    let rules_dir = resolve(
        &base,
        &file
            .rules
            .directory
            .unwrap_or_else(|| PathBuf::from("policies")),
    );
    let reserved: Vec<String> = std::iter::once(CAPABILITIES_PATH.to_string())
        .chain(tokens.paths.iter().cloned())
        .collect();
    let routes = load_rules(&rules_dir, &upstreams, &registries, &reserved, issues.all);

    Some(Config {
        source: path.to_path_buf(),
        scheme,
        public_url,
        identity: identity?,
        listeners,
        scheme_owner: scheme_owner?,
        tokens,
        outbound,
        upstreams,
        registries,
        delegation,
        admin,
        rules_dir,
        routes,
        party_header,
        server,
        log,
    })
}

fn check_pem_certs(path: &Path, key: &str, issues: &mut Issues) -> Option<Vec<Vec<u8>>> {
    match std::fs::read(path) {
        Err(e) => {
            issues.add(key, format!("{}: {e}", path.display()));
            None
        }
        Ok(bytes) => match crate::tls::certs_from_pem(&bytes, &path.display().to_string()) {
            Ok(certs) => Some(certs.into_iter().map(|c| c.to_vec()).collect()),
            Err(e) => {
                issues.add(key, e.to_string());
                None
            }
        },
    }
}

fn check_pem_key(path: &Path, key: &str, issues: &mut Issues) {
    match std::fs::read(path) {
        Err(e) => issues.add(key, format!("{}: {e}", path.display())),
        Ok(bytes) => {
            if let Err(e) = crate::tls::key_from_pem(&bytes, &path.display().to_string()) {
                issues.add(key, e.to_string());
            }
        }
    }
}

fn identity(base: &Path, id: IdentityFile, issues: &mut Issues) -> Option<Identity> {
    let party_id = issues.check("identity.party_id", party(&id.party_id));
    let key_file = resolve(base, &id.key);
    let chain_file = resolve(base, &id.certificate_chain);
    let key_pem = issues.check(
        "identity.key",
        std::fs::read_to_string(&key_file).map_err(|e| format!("{}: {e}", key_file.display())),
    );
    let chain_pem = issues.check(
        "identity.certificate_chain",
        std::fs::read_to_string(&chain_file).map_err(|e| format!("{}: {e}", chain_file.display())),
    );
    let (party_id, key_pem, chain_pem) = (party_id?, key_pem?, chain_pem?);
    let signing = issues.check(
        "identity",
        SigningIdentity::from_pem(party_id.clone(), &key_pem, &chain_pem)
            .map_err(|e| e.to_string()),
    )?;
    Some(Identity {
        name: id.name.unwrap_or_else(|| party_id.to_string()),
        party_id,
        signing,
        key_pem,
        key_file,
        chain_file,
    })
}

fn scheme_owner(base: &Path, so: SchemeOwnerFile, issues: &mut Issues) -> Option<SchemeOwner> {
    let url = issues.check("scheme_owner.url", url_of(&so.url));
    let party_id = issues.check("scheme_owner.party_id", party(&so.party_id));
    let pinned_file = so.root_certificate.as_ref().and_then(|p| {
        let certs = check_pem_certs(&resolve(base, p), "scheme_owner.root_certificate", issues)?;
        if certs.len() != 1 {
            issues.add(
                "scheme_owner.root_certificate",
                "must hold exactly one certificate",
            );
            return None;
        }
        Some(crate::scheme::trust::fingerprint(&certs[0]))
    });
    let root_fingerprint = match (so.root_fingerprint, pinned_file) {
        (Some(_), Some(_)) => {
            issues.add(
                "scheme_owner",
                "give root_fingerprint or root_certificate, not both",
            );
            None
        }
        (None, file) => file,
        (Some(fp), None) => {
            let hex: String = fp.chars().filter(|c| *c != ':').collect();
            if hex.len() == 64 && hex.chars().all(|c| c.is_ascii_hexdigit()) {
                Some(hex.to_ascii_uppercase())
            } else {
                issues.add(
                    "scheme_owner.root_fingerprint",
                    "must be the SHA-256 of a certificate: 64 hex digits",
                );
                None
            }
        }
    };
    let trusted_list = so.trusted_list_file.and_then(|p| {
        let p = resolve(base, &p);
        let text = issues.check(
            "scheme_owner.trusted_list_file",
            std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display())),
        )?;
        issues.check(
            "scheme_owner.trusted_list_file",
            serde_json::from_str::<Vec<TrustedListEntry>>(&text).map_err(|e| {
                format!(
                    "{}: not a JSON array of trusted-list entries: {e}",
                    p.display()
                )
            }),
        )
    });
    if root_fingerprint.is_none() && trusted_list.is_none() {
        issues.add(
            "scheme_owner",
            "give root_fingerprint or root_certificate (the root the scheme owner signs with), or trusted_list_file",
        );
    }
    let refresh = issues
        .check(
            "scheme_owner.refresh",
            nonzero(so.refresh.unwrap_or(Duration::from_secs(300)), "refresh"),
        )
        .unwrap_or(Duration::from_secs(300));
    let timeout = issues
        .check(
            "scheme_owner.timeout",
            nonzero(so.timeout.unwrap_or(Duration::from_secs(5)), "timeout"),
        )
        .unwrap_or(Duration::from_secs(5));
    Some(SchemeOwner {
        url: url?,
        party_id: party_id?,
        root_fingerprint,
        trusted_list,
        refresh,
        party_cache_ttl: so.party_cache_ttl.unwrap_or(Duration::from_secs(600)),
        timeout,
    })
}

fn upstream(base: &Path, key: &str, u: UpstreamFile, issues: &mut Issues) -> Option<Upstream> {
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
    let health_check = u.health_check.map(|h| HealthCheck {
        kind: match (h.kind.as_deref(), h.path) {
            (None | Some("tcp"), None) => HealthCheckKind::Tcp,
            (None | Some("http"), Some(path)) => HealthCheckKind::Http { path },
            (Some("http"), None) => {
                issues.add(
                    format!("{key}.health_check.path"),
                    "an http health check needs a path",
                );
                HealthCheckKind::Tcp
            }
            (Some(other), _) => {
                issues.add(
                    format!("{key}.health_check.kind"),
                    format!("{other:?}: use tcp or http"),
                );
                HealthCheckKind::Tcp
            }
        },
        interval: h.interval.unwrap_or(Duration::from_secs(5)),
    });
    Some(Upstream {
        name: u.name,
        addresses: u.addresses,
        tls,
        host_header: u.host_header,
        connect_timeout: u.connect_timeout.unwrap_or(Duration::from_secs(2)),
        read_timeout: u.read_timeout.unwrap_or(Duration::from_secs(30)),
        write_timeout: u.write_timeout.unwrap_or(Duration::from_secs(30)),
        health_check,
    })
}

/// Every `*.toml` of the rules directory, in name order.
fn load_rules(
    dir: &Path,
    upstreams: &BTreeMap<String, Upstream>,
    registries: &BTreeMap<String, Registry>,
    reserved: &[String],
    all: &mut Vec<ConfigIssue>,
) -> Vec<Route> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            all.push(ConfigIssue {
                file: dir.to_path_buf(),
                key: String::new(),
                message: format!("cannot read the rules directory: {e}"),
            });
            return Vec::new();
        }
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    let mut routes = Vec::new();
    let mut names = BTreeSet::new();
    for path in files {
        let Some(doc) = read(&path, all).and_then(|t| parse_toml::<RulesDocument>(&path, &t, all))
        else {
            continue;
        };
        let mut issues = Issues {
            file: path.clone(),
            all,
        };
        for (i, r) in doc.routes.into_iter().enumerate() {
            let key = format!("route[{i}]");
            if !names.insert(r.name.clone()) {
                issues.add(
                    format!("{key}.name"),
                    format!("{:?} is used by another route", r.name),
                );
            }
            if let Some(route) = route(&path, &key, r, upstreams, registries, reserved, &mut issues)
            {
                routes.push(route);
            }
        }
    }
    routes
}

/// A value template whose path captures must exist in the route's pattern.
fn template(
    key: &str,
    text: &str,
    captures: &[String],
    path: &str,
    issues: &mut Issues,
) -> Option<Template> {
    let t = issues.check(key, Template::parse(text))?;
    for name in t.path_names() {
        if !captures.iter().any(|c| c == name) {
            issues.add(
                key,
                format!("{{path.{name}}}: the path {path} has no capture {name}"),
            );
        }
    }
    Some(t)
}

fn route(
    path: &Path,
    key: &str,
    r: RouteFile,
    upstreams: &BTreeMap<String, Upstream>,
    registries: &BTreeMap<String, Registry>,
    reserved: &[String],
    issues: &mut Issues,
) -> Option<Route> {
    let key = format!("{key} ({})", r.name);
    if r.name.is_empty()
        || !r
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        issues.add(
            format!("{key}.name"),
            "use letters, digits, '-', '_' and '.' (it is a metrics label)",
        );
    }
    let pattern = issues.check(&format!("{key}.path"), PathPattern::parse(&r.path));
    if reserved.contains(&r.path) {
        issues.add(
            format!("{key}.path"),
            format!("{} is served by the gateway itself", r.path),
        );
    }
    if !upstreams.contains_key(&r.upstream) {
        issues.add(
            format!("{key}.upstream"),
            format!("no [[upstream]] named {:?}", r.upstream),
        );
    }
    let methods = r.methods.map(|ms| {
        ms.iter()
            .filter_map(|m| {
                issues.check(
                    &format!("{key}.methods"),
                    http::Method::from_bytes(m.to_ascii_uppercase().as_bytes())
                        .map_err(|_| format!("{m:?} is not a method")),
                )
            })
            .collect::<Vec<_>>()
    });
    let captures: Vec<String> = pattern
        .as_ref()
        .map(|p| p.captures().map(str::to_string).collect())
        .unwrap_or_default();
    let template =
        |k: &str, text: &str, issues: &mut Issues| template(k, text, &captures, &r.path, issues);
    let upstream_path = r.upstream_path.as_deref().and_then(|t| {
        if !t.starts_with('/') {
            issues.add(format!("{key}.upstream_path"), "must start with /");
        }
        template(&format!("{key}.upstream_path"), t, issues)
    });
    let auth = match (r.auth.as_deref(), r.delegation) {
        (Some("public"), None) => Auth::Public,
        (None | Some("token"), None) => Auth::Token,
        (None | Some("delegation"), Some(d)) => {
            let dkey = format!("{key}.delegation");
            let evidence = match d.evidence.as_deref() {
                None => EvidenceSources {
                    header: true,
                    registry: true,
                },
                Some(list) => {
                    let mut e = EvidenceSources {
                        header: false,
                        registry: false,
                    };
                    for s in list {
                        match s.as_str() {
                            "header" => e.header = true,
                            "registry" => e.registry = true,
                            other => issues.add(
                                format!("{dkey}.evidence"),
                                format!("{other:?}: use header or registry"),
                            ),
                        }
                    }
                    if !e.header && !e.registry {
                        issues.add(
                            format!("{dkey}.evidence"),
                            "name at least one source: header, registry",
                        );
                    }
                    e
                }
            };
            if let Some(reg) = &d.registry {
                if !registries.contains_key(reg) {
                    issues.add(
                        format!("{dkey}.registry"),
                        format!("no [[registry]] named {reg:?}"),
                    );
                }
            }
            if d.action.is_none() {
                let unmapped: Vec<String> = methods
                    .iter()
                    .flatten()
                    .filter(|m| Action::for_method(m).is_none())
                    .map(|m| m.to_string())
                    .collect();
                if methods.is_none() || !unmapped.is_empty() {
                    issues.add(
                        format!("{dkey}.action"),
                        "give an action, or list only methods that map to one (GET, HEAD, POST, PUT, PATCH, DELETE)",
                    );
                }
            }
            // Absent identifiers or attributes ask for all of them, which only "*" in the evidence grants.
            let list = |k: &str, v: Option<Vec<String>>, issues: &mut Issues| {
                v.unwrap_or_else(|| vec!["*".to_string()])
                    .iter()
                    .enumerate()
                    .filter_map(|(i, s)| template(&format!("{dkey}.{k}[{i}]"), s, issues))
                    .collect::<Vec<_>>()
            };
            let identifiers = list("identifiers", d.identifiers, issues);
            let attributes = list("attributes", d.attributes, issues);
            let delegation_path = d
                .delegation_path
                .iter()
                .enumerate()
                .filter_map(|(i, s)| template(&format!("{dkey}.delegation_path[{i}]"), s, issues))
                .collect();
            let policy_issuer =
                template(&format!("{dkey}.policy_issuer"), &d.policy_issuer, issues);
            let resource_type =
                template(&format!("{dkey}.resource_type"), &d.resource_type, issues);
            Auth::Delegation(Box::new(DelegationRule {
                policy_issuer: policy_issuer?,
                resource_type: resource_type?,
                identifiers,
                attributes,
                action: d.action,
                evidence,
                registry: d.registry,
                licences: d.licences,
                delegation_path,
            }))
        }
        (Some(other), None) => {
            issues.add(
                format!("{key}.auth"),
                format!("{other:?}: use public, token, or delegation with [route.delegation]"),
            );
            return None;
        }
        (Some(other), Some(_)) => {
            issues.add(format!("{key}.auth"), format!("{other:?} with [route.delegation]: a delegation route is auth = \"delegation\""));
            return None;
        }
    };
    let mut response_headers = Vec::new();
    for (name, value) in r.response_headers {
        if issues
            .check(&format!("{key}.response_headers"), header_name(&name))
            .is_none()
        {
            continue;
        }
        let source = if value == "evidence" {
            if !matches!(auth, Auth::Delegation(_)) {
                issues.add(
                    format!("{key}.response_headers.{name}"),
                    "\"evidence\" needs a delegation route",
                );
            }
            HeaderSource::Evidence
        } else {
            if http::HeaderValue::from_str(&value).is_err() {
                issues.add(
                    format!("{key}.response_headers.{name}"),
                    "not a valid header value",
                );
            }
            HeaderSource::Literal(value)
        };
        response_headers.push((name, source));
    }
    Some(Route {
        name: r.name,
        description: r.description.unwrap_or_default(),
        methods,
        pattern: pattern?,
        upstream: r.upstream,
        auth,
        upstream_path,
        advertise: r.advertise,
        forward_authorization: r.forward_authorization,
        response_headers,
        source: path.to_path_buf(),
    })
}
