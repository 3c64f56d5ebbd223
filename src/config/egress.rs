//! `egress.toml`, the consumer's side: the party we call as, the scheme's peers we trust and ask
//! (the scheme owner, registries), the local listener legacy clients call, the providers called,
//! and the outgoing routes between them. Built from its file types as `gateway.toml` is, section
//! by section, every problem reported at once with its key.

use super::defaults::{self as default, egress as limits};
use super::file::{ConsumerFile, EgressEvidenceFile, EgressFile, EgressRouteFile, ProviderFile};
use super::gateway::log;
use super::issues::{ConfigErrors, ConfigIssue, Issues};
use super::model::{DecisionLogSettings, Identity, Log, Registry, SchemeOwner, Tokens};
use super::rules::{check_name, methods};
use super::scheme_sections::{
    check_root, identity, outbound, registries, scheme, scheme_owner, tokens,
};
use super::values::{
    nonzero, party, scheme_version, socket_addr, url_of, warn_plain, warn_platform_roots,
};
use crate::request::path::normalize_path;
use crate::request::pattern::PathPattern;
use crate::request::template::Template;
use crate::scheme::party::PartyId;
use crate::scheme::version::SchemeVersion;
use crate::scheme::vocabulary::{Action, TOKEN_PATH};
use crate::tls::OutboundTrust;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The validated `egress.toml`.
#[derive(Clone)]
pub struct EgressConfig {
    pub source: PathBuf,
    pub scheme: String,
    pub identity: Identity,
    pub scheme_owner: SchemeOwner,
    pub tokens: Tokens,
    pub outbound: OutboundTrust,
    pub registries: BTreeMap<String, Registry>,
    pub consumer: Consumer,
    pub admin: Option<SocketAddr>,
    pub providers: BTreeMap<String, Provider>,
    /// In the order of the file (of equally specific paths, the first is taken).
    pub routes: Vec<EgressRoute>,
    pub log: Log,
    pub decision_log: Option<DecisionLogSettings>,
    pub warnings: Vec<ConfigIssue>,
}

/// `[consumer]`: where local clients call, and its bounds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Consumer {
    pub address: SocketAddr,
    pub max_connections: usize,
    pub max_body_bytes: usize,
    pub header_timeout: Duration,
    pub graceful_shutdown_timeout: Duration,
}

/// `[[provider]]`: a service provider, the version it speaks and how it is called.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Provider {
    pub name: String,
    pub party_id: PartyId,
    /// Its base URL: a local path is called below it.
    pub url: String,
    pub scheme_version: SchemeVersion,
    pub token_path: String,
    /// The most one call may take, its token and evidence and the answer's body included.
    pub timeout: Duration,
    /// Calls to it at once; more are answered 503 at once.
    pub max_concurrent: usize,
}

/// `[[egress]]`: local paths (and methods) taken to a provider.
#[derive(Clone, Debug)]
pub struct EgressRoute {
    pub name: String,
    pub path: PathPattern,
    pub methods: Option<Vec<http::Method>>,
    pub provider: String,
    /// The local client gives the consumer's assertion: the call is made as its broker.
    pub broker: bool,
    pub evidence: Option<EvidenceAsk>,
}

/// `[egress.evidence]`: what we ask the data owner's registry for before the call.
#[derive(Clone, Debug)]
pub struct EvidenceAsk {
    pub registry: String,
    pub policy_issuer: PartyId,
    pub resource_type: String,
    /// Each from the request's path, query or headers.
    pub identifiers: Vec<Template>,
    pub attributes: Vec<String>,
    /// None: the one the method needs (`<scheme>.READ` for GET).
    pub actions: Option<Vec<String>>,
    pub licences: Vec<String>,
    /// Conditions' left operands (3.0), each from the request: the mask's context, and the
    /// values the evidence's conditions are held against.
    pub operands: Vec<(String, Template)>,
    /// The longest evidence is kept (never past its own end).
    pub cache_ttl: Duration,
}

/// Whether a configuration's text is one of the consumer's side: it has outgoing routes.
pub fn is_egress(text: &str) -> bool {
    text.parse::<toml::Table>()
        .is_ok_and(|t| t.contains_key("egress"))
}

/// Load and validate an `egress.toml`.
pub fn load(path: &Path) -> Result<EgressConfig, ConfigErrors> {
    super::read_then(path, load_text)
}

/// Validate the text of an `egress.toml` that lives at `path` (its relative paths are found from
/// there).
pub fn load_text(path: &Path, text: &str) -> Result<EgressConfig, ConfigErrors> {
    super::validated(path, text, build, |c: &mut EgressConfig, warnings| {
        c.warnings = warnings
    })
}

fn build(path: &Path, file: EgressFile, all: &mut Vec<ConfigIssue>) -> Option<EgressConfig> {
    let base = path.parent().unwrap_or(Path::new(".")).to_path_buf();
    let mut issues = Issues {
        file: path.to_path_buf(),
        all,
    };
    let issues = &mut issues;
    let scheme = scheme(file.scheme, issues);
    let identity = match file.identity {
        Some(id) => identity(&base, id, issues),
        None => {
            issues.add(
                "identity",
                "missing: the party_id, key and certificate_chain we call as",
            );
            None
        }
    };
    let scheme_owner = match file.scheme_owner {
        Some(so) => scheme_owner(&base, so, issues),
        None => {
            issues.add("scheme_owner", "missing: url, party_id and root_fingerprint (or root_certificate): the evidence of registries is trusted through it");
            None
        }
    };
    if let (Some(id), Some(so)) = (&identity, &scheme_owner) {
        check_root(&id.signing, so, issues);
    }
    let peers_version = scheme_owner
        .as_ref()
        .map_or(default::SCHEME_VERSION, |so| so.scheme_version);
    let tokens = tokens(file.tokens, issues);
    let outbound = outbound(&base, file.outbound, issues);
    let registries = registries(file.registries, peers_version, issues);
    if outbound.ca_pem.is_none() {
        for (i, p) in file.providers.iter().enumerate() {
            warn_platform_roots(&format!("provider[{i}].url"), &p.url, issues);
        }
    }
    let consumer = consumer(file.consumer, identity.as_ref(), issues);
    let admin = file
        .admin
        .and_then(|a| issues.check("admin.address", socket_addr(&a.address)));
    if let (Some(c), Some(a)) = (&consumer, admin) {
        if super::gateway::overlaps(c.address, a) {
            issues.add("admin.address", format!("{a} is the consumer's address"));
        }
    }
    // Routes are checked against every provider the file names: one with a problem of its own
    // is reported once, not again at each route.
    let declared: BTreeSet<String> = file.providers.iter().map(|p| p.name.clone()).collect();
    let providers = providers(file.providers, peers_version, issues);
    let routes = routes(file.routes, &declared, &registries, &scheme, issues);
    let log = log(file.log, issues);
    let decision_log = file
        .decision_log
        .and_then(|f| super::decision_log::build(&base, f, issues));
    Some(EgressConfig {
        source: path.to_path_buf(),
        scheme,
        identity: identity?,
        scheme_owner: scheme_owner?,
        tokens,
        outbound,
        registries,
        consumer: consumer?,
        admin,
        providers,
        routes,
        log,
        decision_log,
        warnings: Vec::new(),
    })
}

fn consumer(
    file: Option<ConsumerFile>,
    identity: Option<&Identity>,
    issues: &mut Issues,
) -> Option<Consumer> {
    let Some(c) = file else {
        issues.add(
            "consumer",
            "missing: the address local clients call (e.g. address = \"127.0.0.1:8181\")",
        );
        return None;
    };
    let address = match c.address {
        Some(a) => issues.check("consumer.address", socket_addr(&a))?,
        None => {
            issues.add(
                "consumer.address",
                "missing: the address local clients call",
            );
            return None;
        }
    };
    if !address.ip().is_loopback() {
        let party = identity.map_or("us".to_string(), |id| id.party_id.to_string());
        issues.warn(
            "consumer.address",
            format!("{address} is not a loopback address: every call that reaches it is made as {party}, with our token and evidence; let only our own clients reach it"),
        );
    }
    let mut positive = |name: &str, value: Option<Duration>, default: Duration| {
        issues
            .check(
                &format!("consumer.{name}"),
                nonzero(value.unwrap_or(default), name),
            )
            .unwrap_or(default)
    };
    let header_timeout = positive("header_timeout", c.header_timeout, limits::HEADER_TIMEOUT);
    let graceful_shutdown_timeout = c
        .graceful_shutdown_timeout
        .unwrap_or(limits::GRACEFUL_SHUTDOWN_TIMEOUT);
    let max_body = c.max_body_bytes.map_or(limits::MAX_BODY_BYTES, |b| b.0);
    let max_body_bytes = issues
        .check(
            "consumer.max_body_bytes",
            usize::try_from(max_body)
                .map_err(|_| format!("{max_body} is more than this machine can hold")),
        )
        .unwrap_or(0);
    Some(Consumer {
        address,
        max_connections: c.max_connections.unwrap_or(limits::MAX_CONNECTIONS).max(1),
        max_body_bytes,
        header_timeout,
        graceful_shutdown_timeout,
    })
}

fn providers(
    files: Vec<ProviderFile>,
    peers_version: SchemeVersion,
    issues: &mut Issues,
) -> BTreeMap<String, Provider> {
    let mut providers = BTreeMap::new();
    for (i, p) in files.into_iter().enumerate() {
        let key = format!("provider[{i}]");
        check_name(&key, &p.name, issues);
        let party_id = issues.check(&format!("{key}.party_id"), party(&p.party_id));
        let url = issues.check(&format!("{key}.url"), url_of(&p.url).and_then(base_url));
        if let Some(url) = &url {
            warn_plain(&format!("{key}.url"), url, issues);
        }
        let version = scheme_version(&format!("{key}.scheme_version"), p.scheme_version, issues)
            .unwrap_or(peers_version);
        let token_path = p.token_path.unwrap_or_else(|| TOKEN_PATH.into());
        if normalize_path(&token_path).ok().as_deref() != Some(token_path.as_str()) {
            issues.add(
                format!("{key}.token_path"),
                format!("{token_path:?} must be a normal absolute path"),
            );
        }
        let timeout = issues
            .check(
                &format!("{key}.timeout"),
                nonzero(p.timeout.unwrap_or(limits::PROVIDER_TIMEOUT), "timeout"),
            )
            .unwrap_or(limits::PROVIDER_TIMEOUT);
        let max_concurrent = p.max_concurrent.unwrap_or(limits::MAX_CONCURRENT);
        if max_concurrent == 0 {
            issues.add(format!("{key}.max_concurrent"), "at least 1");
        }
        let (Some(party_id), Some(url)) = (party_id, url) else {
            continue;
        };
        let provider = Provider {
            name: p.name.clone(),
            party_id,
            url,
            scheme_version: version,
            token_path,
            timeout,
            max_concurrent: max_concurrent.max(1),
        };
        if providers.insert(p.name.clone(), provider).is_some() {
            issues.add(
                format!("{key}.name"),
                format!("{:?} is defined twice", p.name),
            );
        }
    }
    providers
}

/// A provider's base URL: a local path is called below it, so it has no query, fragment or
/// credentials.
fn base_url(text: String) -> Result<String, String> {
    let url = url::Url::parse(&text).map_err(|e| e.to_string())?;
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!("{text:?}: a base URL has no query or fragment"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "{text:?}: a base URL holds no credentials (we authenticate with our token)"
        ));
    }
    Ok(text)
}

fn routes(
    files: Vec<EgressRouteFile>,
    providers: &BTreeSet<String>,
    registries: &BTreeMap<String, Registry>,
    scheme: &str,
    issues: &mut Issues,
) -> Vec<EgressRoute> {
    if files.is_empty() {
        issues.add(
            "egress",
            "no outgoing route: add an [[egress]] with a path and a provider",
        );
    }
    let mut names = BTreeSet::new();
    let mut routes: Vec<EgressRoute> = Vec::new();
    for (i, r) in files.into_iter().enumerate() {
        let key = format!("egress[{i}]");
        check_name(&key, &r.name, issues);
        if !names.insert(r.name.clone()) {
            issues.add(
                format!("{key}.name"),
                format!("{:?} is defined twice", r.name),
            );
        }
        let path = issues.check(&format!("{key}.path"), PathPattern::parse(&r.path));
        let methods = methods(&key, r.methods.as_deref(), issues);
        if !providers.contains(&r.provider) {
            issues.add(
                format!("{key}.provider"),
                format!("no [[provider]] named {:?}", r.provider),
            );
        }
        let broker = r.broker.unwrap_or(false);
        let evidence = r.evidence.and_then(|e| {
            let ask = evidence(&key, e, path.as_ref(), methods.as_deref(), registries, scheme, issues);
            if broker {
                issues.add(format!("{key}.evidence"), "a broker's call is decided for the consumer it acts for, whose evidence we cannot ask for: the provider asks the data owner's registry itself");
            }
            ask
        });
        let Some(path) = path else { continue };
        if let Some(other) = routes.iter().find(|o| {
            o.path == path
                && match (&o.methods, &methods) {
                    (Some(a), Some(b)) => a.iter().any(|m| b.contains(m)),
                    _ => true,
                }
        }) {
            issues.add(
                format!("{key}.path"),
                format!(
                    "{} is the path of egress route {:?} too, for the same methods",
                    r.path, other.name
                ),
            );
        }
        routes.push(EgressRoute {
            name: r.name,
            path,
            methods,
            provider: r.provider,
            broker,
            evidence,
        });
    }
    routes
}

fn evidence(
    key: &str,
    e: EgressEvidenceFile,
    path: Option<&PathPattern>,
    methods: Option<&[http::Method]>,
    registries: &BTreeMap<String, Registry>,
    scheme: &str,
    issues: &mut Issues,
) -> Option<EvidenceAsk> {
    let key = format!("{key}.evidence");
    if !registries.contains_key(&e.registry) {
        issues.add(
            format!("{key}.registry"),
            format!("no [[registry]] named {:?}", e.registry),
        );
    }
    let policy_issuer = issues.check(&format!("{key}.policy_issuer"), party(&e.policy_issuer));
    if e.resource_type.trim().is_empty() {
        issues.add(
            format!("{key}.resource_type"),
            "missing: the type of the resource asked for",
        );
    }
    let captures: Vec<&str> = path.map(|p| p.captures().collect()).unwrap_or_default();
    let mut value = |at: String, text: &str| {
        let template = issues.check(&at, Template::parse(text))?;
        if template.body_pointers().next().is_some() || template.whole_body_keys().is_some() {
            issues.add(&at, "the evidence is asked before the call: take values from the path, the query or the headers, not the body");
            return None;
        }
        if let Some(name) = template.path_names().find(|n| !captures.contains(n)) {
            issues.add(&at, format!("the path has no {{{name}}}"));
            return None;
        }
        Some(template)
    };
    let identifiers = e
        .identifiers
        .unwrap_or_else(|| vec!["*".into()])
        .iter()
        .enumerate()
        .filter_map(|(j, text)| value(format!("{key}.identifiers[{j}]"), text))
        .collect();
    let operands = e
        .conditions
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(name, text)| {
            let template = value(format!("{key}.conditions.{name}"), &text)?;
            Some((name, template))
        })
        .collect();
    let actions = e.actions;
    if actions.is_none() {
        let unmapped = methods.is_none_or(|ms| ms.iter().any(|m| Action::for_method(m).is_none()));
        if unmapped {
            issues.add(
                format!("{key}.actions"),
                format!("give the actions, or limit the route's methods to those with one ({scheme}.READ for GET and HEAD, CREATE for POST, UPDATE for PUT and PATCH, DELETE for DELETE)"),
            );
        }
    }
    let cache_ttl = issues
        .check(
            &format!("{key}.cache_ttl"),
            nonzero(
                e.cache_ttl.unwrap_or(limits::EVIDENCE_CACHE_TTL),
                "cache_ttl",
            ),
        )
        .unwrap_or(limits::EVIDENCE_CACHE_TTL);
    Some(EvidenceAsk {
        registry: e.registry,
        policy_issuer: policy_issuer?,
        resource_type: e.resource_type,
        identifiers,
        attributes: e.attributes.unwrap_or_else(|| vec!["*".into()]),
        actions,
        licences: e.licences.unwrap_or_default(),
        operands,
        cache_ttl,
    })
}
