//! The route rules of `policies/*.toml`: every file of the rules directory in name order, each
//! route checked against the upstreams and registries of `gateway.toml`.

use super::file::*;
use super::issues::{parse_toml, read, Choice, ConfigIssue, Issues};
use super::model::own_route;
use super::model::*;
use super::values::header_name;
use crate::request::pattern::PathPattern;
use crate::request::template::Template;
use crate::scheme::party::PartyId;
use crate::scheme::vocabulary::Action;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// What a route may refer to.
pub(super) struct Known<'a> {
    pub upstreams: &'a BTreeMap<String, Upstream>,
    pub registries: &'a BTreeMap<String, Registry>,
    /// Paths the gateway serves itself.
    pub reserved: &'a [String],
    /// Whether people can sign in ([login]).
    pub login: bool,
}

/// Every `*.toml` of the rules directory, in name order.
pub(super) fn load_rules(dir: &Path, known: &Known, all: &mut Vec<ConfigIssue>) -> Vec<Route> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            all.push(ConfigIssue {
                file: dir.to_path_buf(),
                message: format!("cannot read the rules directory: {e}"),
                ..ConfigIssue::default()
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
            if !names.insert(r.name.clone()) {
                issues.add(
                    format!("route[{i}].name"),
                    format!("{:?} is used by another route", r.name),
                );
            }
            let key = format!("route[{i}] ({})", r.name);
            if let Some(route) = route(&path, &key, r, known, &mut issues) {
                routes.push(route);
            }
        }
    }
    routes
}

/// The value templates of one route: their path captures must exist in its pattern.
struct Templates<'a> {
    captures: Vec<String>,
    path: &'a str,
}

impl Templates<'_> {
    fn parse(&self, key: &str, text: &str, issues: &mut Issues) -> Option<Template> {
        let t = issues.check(key, Template::parse(text))?;
        for name in t.path_names() {
            if !self.captures.iter().any(|c| c == name) {
                issues.add(
                    key,
                    format!(
                        "{{path.{name}}}: the path {} has no capture {name}",
                        self.path
                    ),
                );
            }
        }
        Some(t)
    }

    fn parse_all(&self, key: &str, texts: &[String], issues: &mut Issues) -> Vec<Template> {
        texts
            .iter()
            .enumerate()
            .filter_map(|(i, s)| self.parse(&format!("{key}[{i}]"), s, issues))
            .collect()
    }
}

fn route(
    path: &Path,
    key: &str,
    r: RouteFile,
    known: &Known,
    issues: &mut Issues,
) -> Option<Route> {
    check_name(key, &r.name, issues);
    let pattern = issues.check(&format!("{key}.path"), PathPattern::parse(&r.path));
    check_target(key, &r, known, issues);
    let methods = methods(key, r.methods.as_deref(), issues);
    let templates = Templates {
        captures: pattern
            .as_ref()
            .map(|p| p.captures().map(str::to_string).collect())
            .unwrap_or_default(),
        path: &r.path,
    };
    let upstream_path = r.upstream_path.as_deref().and_then(|t| {
        if !t.starts_with('/') {
            issues.add(format!("{key}.upstream_path"), "must start with /");
        }
        templates.parse(&format!("{key}.upstream_path"), t, issues)
    });
    let auth_kind = r
        .auth
        .and_then(|a| issues.choice(&format!("{key}.auth"), a));
    let auth = auth(
        key,
        auth_kind,
        r.delegation,
        methods.as_deref(),
        &templates,
        known,
        issues,
    )?;
    check_login(key, r.login, &auth, known, issues);
    let response_headers = response_headers(key, r.response_headers, &auth, issues);
    let identifier_case = identifier_case(key, r.identifier_case, &auth, issues);
    let mode = mode(key, r.mode, &auth, r.login, issues);
    let limits = (r.max_body_bytes, r.max_body_elements);
    let body = body_rule(key, limits, &auth, upstream_path.as_ref(), issues);
    let accept = r
        .accept
        .into_iter()
        .filter_map(|a| issues.choice(&format!("{key}.accept"), a))
        .collect();
    Some(Route {
        name: r.name.into(),
        description: r.description.unwrap_or_default(),
        methods,
        pattern: pattern?,
        upstream: r.upstream,
        auth,
        upstream_path,
        advertise: r.advertise,
        forward_authorization: r.forward_authorization,
        accept,
        websocket: r.websocket,
        response_headers,
        source: path.to_path_buf(),
        login: r.login,
        identifier_case,
        mode,
        body,
    })
}

/// What the route's rule reads of the JSON body, if it reads it: its pointers (every `*` over
/// one array), within the route's bounds. The upstream path is made before the body is read, so
/// it reads none.
fn body_rule(
    key: &str,
    (max_body_bytes, max_body_elements): (Option<ByteSize>, Option<usize>),
    auth: &Auth,
    upstream_path: Option<&Template>,
    issues: &mut Issues,
) -> Option<BodyRule> {
    use crate::config::defaults::{ROUTE_MAX_BODY, ROUTE_MAX_BODY_ELEMENTS};
    if upstream_path.is_some_and(|t| t.body_pointers().next().is_some()) {
        issues.add(
            format!("{key}.upstream_path"),
            "cannot take values from the body: the path is made before the body is read",
        );
    }
    let (pointers, keys): (Vec<_>, Vec<_>) = match auth {
        Auth::Delegation(rule) => (
            Route::rule_templates(rule)
                .flat_map(Template::body_pointers)
                .cloned()
                .collect(),
            Route::rule_templates(rule)
                .flat_map(Template::body_key_pointers)
                .cloned()
                .collect(),
        ),
        _ => (Vec::new(), Vec::new()),
    };
    if let Auth::Delegation(rule) = auth {
        check_body_keys(key, rule, issues);
    }
    if pointers.is_empty() && keys.is_empty() {
        for (set, name) in [
            (max_body_bytes.is_some(), "max_body_bytes"),
            (max_body_elements.is_some(), "max_body_elements"),
        ] {
            if set {
                issues.add(
                    format!("{key}.{name}"),
                    "the route's rule reads no {body.json./POINTER} value",
                );
            }
        }
        return None;
    }
    for indexed in pointers.iter().chain(&keys).filter(|p| p.names_an_index()) {
        issues.warn(
            format!("{key}.delegation"),
            format!(
                "the body pointer {indexed} decides on one element of an array: a request whose array has more reaches the backend with the others undecided; * decides on each"
            ),
        );
    }
    let each = pointers
        .iter()
        .chain(&keys)
        .find(|p| p.array().is_some())
        .cloned();
    let arrays: BTreeSet<String> = pointers
        .iter()
        .chain(&keys)
        .filter_map(|p| p.array())
        .collect();
    if arrays.len() > 1 {
        issues.add(
            format!("{key}.delegation"),
            format!(
                "every * stands for the elements of one array; the rule names {}",
                arrays.into_iter().collect::<Vec<_>>().join(" and ")
            ),
        );
    }
    let max_bytes = match max_body_bytes.map(|b| b.0) {
        None => ROUTE_MAX_BODY,
        Some(n) if (1..=ROUTE_MAX_BODY as u64).contains(&n) => n as usize,
        Some(_) => {
            issues.add(
                format!("{key}.max_body_bytes"),
                format!("1 to {ROUTE_MAX_BODY} bytes: a body decided on is held whole"),
            );
            ROUTE_MAX_BODY
        }
    };
    let max_elements = max_body_elements.unwrap_or(ROUTE_MAX_BODY_ELEMENTS);
    if max_elements == 0 || max_elements > 10 * ROUTE_MAX_BODY_ELEMENTS {
        issues.add(
            format!("{key}.max_body_elements"),
            format!(
                "1 to {}: each element is a decision",
                10 * ROUTE_MAX_BODY_ELEMENTS
            ),
        );
    }
    if max_body_elements.is_some() && each.is_none() {
        issues.add(
            format!("{key}.max_body_elements"),
            "the rule's pointers have no *: there are no elements to bound",
        );
    }
    Some(BodyRule {
        max_bytes,
        max_elements,
        pointers,
        keys,
        each,
    })
}

/// `{body.keys./POINTER}` stands for several values: it is a whole `attributes` entry, and in no
/// other value of the rule.
fn check_body_keys(key: &str, rule: &DelegationRule, issues: &mut Issues) {
    let misplaced = Route::rule_templates(rule)
        .filter(|t| t.body_key_pointers().next().is_some())
        .any(|t| {
            t.whole_body_keys().is_none() || !rule.attributes.iter().any(|a| std::ptr::eq(a, t))
        });
    if misplaced {
        issues.add(
            format!("{key}.delegation"),
            "{body.keys./POINTER} names several attributes: it is a whole entry of attributes, and in no other value",
        );
    }
}

/// Whether the route's name can be a metrics label: letters, digits, '-', '_' and '.', and not a
/// name the gateway counts its own answers under.
pub(super) fn check_name(key: &str, name: &str, issues: &mut Issues) {
    let valid = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if !valid {
        issues.add(
            format!("{key}.name"),
            "use letters, digits, '-', '_' and '.' (it is a metrics label)",
        );
    }
    if own_route::ALL.contains(&name) {
        issues.add(
            format!("{key}.name"),
            format!(
                "{name:?} is reserved: the gateway counts its own answers under {} (it is a metrics label)",
                own_route::ALL.join(", ")
            ),
        );
    }
}

/// Whether the route's path is free (not one the gateway serves itself) and its upstream exists.
fn check_target(key: &str, r: &RouteFile, known: &Known, issues: &mut Issues) {
    if known.reserved.contains(&r.path) {
        issues.add(
            format!("{key}.path"),
            format!("{} is served by the gateway itself", r.path),
        );
    }
    if !known.upstreams.contains_key(&r.upstream) {
        issues.add(
            format!("{key}.upstream"),
            format!("no [[upstream]] named {:?}", r.upstream),
        );
    }
}

/// The HTTP methods the route is limited to, if any; each name must be a method.
pub(super) fn methods(
    key: &str,
    names: Option<&[String]>,
    issues: &mut Issues,
) -> Option<Vec<http::Method>> {
    names.map(|ms| {
        ms.iter()
            .filter_map(|m| {
                issues.check(
                    &format!("{key}.methods"),
                    http::Method::from_bytes(m.to_ascii_uppercase().as_bytes())
                        .map_err(|_| format!("{m:?} is not a method")),
                )
            })
            .collect()
    })
}

/// How callers of the route authenticate: `auth` and `[route.delegation]` must agree, a
/// delegation rule going with `auth = "delegation"` (or no `auth`) and only with it.
fn auth(
    key: &str,
    kind: Option<AuthFile>,
    delegation: Option<DelegationRuleFile>,
    methods: Option<&[http::Method]>,
    templates: &Templates,
    known: &Known,
    issues: &mut Issues,
) -> Option<Auth> {
    match (kind, delegation) {
        (Some(AuthFile::Public), None) => Some(Auth::Public),
        (None | Some(AuthFile::Token), None) => Some(Auth::Token),
        (None | Some(AuthFile::Delegation), Some(d)) => {
            let rule = delegation_rule(key, d, methods, templates, known, issues)?;
            Some(Auth::Delegation(Box::new(rule)))
        }
        (Some(AuthFile::Delegation), None) => {
            issues.add(
                format!("{key}.delegation"),
                "auth = \"delegation\" needs [route.delegation]",
            );
            None
        }
        (Some(AuthFile::Public | AuthFile::Token), Some(_)) => {
            issues.add(
                format!("{key}.auth"),
                "a route with [route.delegation] is auth = \"delegation\"",
            );
            None
        }
    }
}

/// Whether a route people sign in for can be: it needs [login] and is not public.
fn check_login(key: &str, login: bool, auth: &Auth, known: &Known, issues: &mut Issues) {
    if login && !known.login {
        issues.add(
            format!("{key}.login"),
            "needs a [login] section naming the identity provider",
        );
    }
    if login && *auth == Auth::Public {
        issues.add(
            format!("{key}.login"),
            "a route people sign in for is not public: leave auth out, or use delegation",
        );
    }
}

/// Whether the route's decisions are enforced. Shadow mode (decide, log, count, forward anyway) is
/// for routes with a decision to make, and not for routes people sign in for (the sign-in is
/// the decision); it is said loudly at every start and check.
fn mode(
    key: &str,
    mode: Option<Choice<Mode>>,
    auth: &Auth,
    login: bool,
    issues: &mut Issues,
) -> Mode {
    let key = format!("{key}.mode");
    let mode = mode
        .and_then(|m| issues.choice(&key, m))
        .unwrap_or_default();
    if mode == Mode::Shadow {
        if *auth == Auth::Public {
            issues.add(key, "a public route has no decision to shadow");
        } else if login {
            issues.add(key, "a route people sign in for cannot be in shadow mode");
        } else {
            issues.warn(
                key,
                "shadow mode: this route's decisions are logged and counted, NOT enforced; every request is forwarded",
            );
        }
    }
    mode
}

/// The case the backend compares identifiers in, if it ignores case; a delegation rule that
/// takes identifiers from headers (passed on as sent) cannot have one.
fn identifier_case(
    key: &str,
    case: Option<Choice<crate::request::Case>>,
    auth: &Auth,
    issues: &mut Issues,
) -> Option<crate::request::Case> {
    let identifier_case = case.and_then(|c| issues.choice(&format!("{key}.identifier_case"), c));
    if let (Some(_), Auth::Delegation(rule)) = (identifier_case, auth) {
        let from_headers = rule
            .identifiers
            .iter()
            .chain(&rule.attributes)
            .chain(std::iter::once(&rule.resource_type))
            .any(|t| {
                t.header_names().next().is_some()
                    || t.body_pointers().next().is_some()
                    || t.body_key_pointers().next().is_some()
            });
        if from_headers {
            issues.add(
                format!("{key}.identifier_case"),
                "covers the path and the query: a rule that takes identifiers from headers or the body (passed on as sent) cannot use it",
            );
        }
    }
    identifier_case
}

/// The `[route.delegation]` rule: where its evidence comes from, which registry it asks, and the
/// templates that take the policy issuer, the resource, its identifiers and attributes and the
/// conditions from the request.
fn delegation_rule(
    key: &str,
    d: DelegationRuleFile,
    methods: Option<&[http::Method]>,
    templates: &Templates,
    known: &Known,
    issues: &mut Issues,
) -> Option<DelegationRule> {
    let key = format!("{key}.delegation");
    let evidence = evidence_sources(&key, d.evidence, issues);
    let registry = rule_registry(&key, d.registry, known, issues);
    check_action(&key, d.action.as_deref(), methods, issues);
    // Absent identifiers or attributes ask for all of them, which only "*" in the evidence grants.
    let all = || vec!["*".to_string()];
    let identifiers = templates.parse_all(
        &format!("{key}.identifiers"),
        &d.identifiers.unwrap_or_else(all),
        issues,
    );
    let attributes = templates.parse_all(
        &format!("{key}.attributes"),
        &d.attributes.unwrap_or_else(all),
        issues,
    );
    let delegation_path = templates.parse_all(
        &format!("{key}.delegation_path"),
        &d.delegation_path,
        issues,
    );
    let policy_issuer = templates.parse(&format!("{key}.policy_issuer"), &d.policy_issuer, issues);
    // A party named as written is a party identifier of some version of the scheme; one that
    // is no id (a name, nothing) would refuse every request as the client's fault.
    let literals = (policy_issuer.iter().map(|t| ("policy_issuer", t)))
        .chain(delegation_path.iter().map(|t| ("delegation_path", t)));
    for (member, literal) in literals.filter(|(_, t)| t.is_literal()) {
        if let Err(e) = PartyId::parse(literal.as_str()) {
            issues.add(
                format!("{key}.{member}"),
                format!("{:?} is not a party identifier: {e}", literal.as_str()),
            );
        }
    }
    let named_by_caller = policy_issuer.as_ref().is_some_and(|t| !t.is_literal());
    if named_by_caller && !d.caller_names_owner {
        issues.add(
            format!("{key}.policy_issuer"),
            "the data owner comes from the request, so the caller can name any owner and present evidence it signed as that owner: set caller_names_owner = true to accept this",
        );
    }
    let resource_type = templates.parse(&format!("{key}.resource_type"), &d.resource_type, issues);
    let conditions = conditions(&key, &d.conditions, templates, issues);
    check_max_decision_age(&key, d.max_decision_age, issues);
    Some(DelegationRule {
        policy_issuer: policy_issuer?,
        resource_type: resource_type?,
        identifiers,
        attributes,
        action: d.action,
        evidence,
        registry,
        licences: d.licences,
        delegation_path,
        caller_names_owner: named_by_caller,
        conditions,
        accept_unnamed_service_provider: d.accept_unnamed_service_provider,
        max_decision_age: d.max_decision_age,
    })
}

/// Where the rule's evidence may come from: the sources listed, at least one, or both when none
/// are.
fn evidence_sources(
    key: &str,
    listed: Option<Vec<Choice<EvidenceSourceFile>>>,
    issues: &mut Issues,
) -> EvidenceSources {
    let Some(list) = listed else {
        return EvidenceSources {
            header: true,
            registry: true,
        };
    };
    let mut e = EvidenceSources {
        header: false,
        registry: false,
    };
    for source in list {
        match issues.choice(&format!("{key}.evidence"), source) {
            Some(EvidenceSourceFile::Header) => e.header = true,
            Some(EvidenceSourceFile::Registry) => e.registry = true,
            None => {}
        }
    }
    if !e.header && !e.registry {
        issues.add(
            format!("{key}.evidence"),
            "name at least one source: header, registry",
        );
    }
    e
}

/// The registry the rule asks, which must be a configured one; None: the one the data owner
/// designated.
fn rule_registry(
    key: &str,
    registry: Option<String>,
    known: &Known,
    issues: &mut Issues,
) -> Option<String> {
    // "owner": the registry the data owner designated for us, as when none is named.
    let registry = registry.filter(|r| r != OWNERS_REGISTRY);
    if let Some(reg) = &registry {
        if !known.registries.contains_key(reg) {
            issues.add(
                format!("{key}.registry"),
                format!("no [[registry]] named {reg:?}"),
            );
        }
    }
    registry
}

/// Whether the rule's action is known for every request: given, or taken from a method the route
/// is limited to.
fn check_action(
    key: &str,
    action: Option<&str>,
    methods: Option<&[http::Method]>,
    issues: &mut Issues,
) {
    if action.is_none() {
        let unmapped = methods.is_none_or(|ms| ms.iter().any(|m| Action::for_method(m).is_none()));
        if unmapped {
            issues.add(
                format!("{key}.action"),
                "give an action, or list only methods that map to one (GET, HEAD, POST, PUT, PATCH, DELETE)",
            );
        }
    }
}

/// The rule's conditions, each a left operand and the template of the value it is compared with.
fn conditions(
    key: &str,
    written: &BTreeMap<String, String>,
    templates: &Templates,
    issues: &mut Issues,
) -> BTreeMap<String, Template> {
    written
        .iter()
        .filter_map(|(operand, text)| {
            let at = format!("{key}.conditions.{operand}");
            if operand.is_empty() || operand == "conditions" {
                issues.add(&at, "not a left operand a condition can name");
                return None;
            }
            Some((operand.clone(), templates.parse(&at, text, issues)?))
        })
        .collect()
}

/// A decision is kept for a second at the least: for less, each request of the route would ask the
/// registry.
fn check_max_decision_age(key: &str, age: Option<std::time::Duration>, issues: &mut Issues) {
    if age.is_some_and(|age| age < std::time::Duration::from_secs(1)) {
        issues.add(
            format!("{key}.max_decision_age"),
            "at least 1s: each request of the route would ask the registry, which its budget of registry_calls_per_minute does not allow for",
        );
    }
}

fn response_headers(
    key: &str,
    headers: BTreeMap<String, String>,
    auth: &Auth,
    issues: &mut Issues,
) -> Vec<(String, HeaderSource)> {
    let mut out = Vec::new();
    for (name, value) in headers {
        let hkey = format!("{key}.response_headers.{name}");
        if issues
            .check(&format!("{key}.response_headers"), header_name(&name))
            .is_none()
        {
            continue;
        }
        let source = if value == "evidence" {
            if !matches!(auth, Auth::Delegation(_)) {
                issues.add(hkey, "\"evidence\" needs a delegation route");
            }
            HeaderSource::Evidence
        } else {
            if http::HeaderValue::from_str(&value).is_err() {
                issues.add(hkey, "not a valid header value");
            }
            HeaderSource::Literal(value)
        };
        out.push((name, source));
    }
    out
}
