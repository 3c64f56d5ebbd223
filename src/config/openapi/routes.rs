//! What each operation becomes: a route (its name, path pattern and rule), or a reason to leave it
//! out. The rules are deterministic, so that a document gives the same file every time.

use super::document::Operation;
use super::error::OpenApiError;
use crate::config::defaults::TOKEN_PATHS;
use crate::config::model::own_route;
use crate::request::pattern::PathPattern;
use crate::scheme::party::PartyId;
use crate::scheme::vocabulary::{Action, CAPABILITIES_PATH};
use http::Method;
use std::collections::BTreeSet;

/// The resource type of a path without a literal segment (`/{id}`).
pub(super) const FALLBACK_RESOURCE_TYPE: &str = "RESOURCE";

/// What every generated route shares.
#[derive(Debug, Clone)]
pub struct RouteDefaults {
    /// The `[[upstream]]` of gateway.toml the routes forward to.
    pub upstream: String,
    /// The data owner whose policies decide delegated routes.
    pub policy_issuer: PartyId,
    /// The scheme's name (`scheme` in gateway.toml), for the actions no method gives.
    pub scheme: String,
}

/// An operation, as a route or left out.
#[derive(Debug)]
pub(super) enum Planned {
    Route(Route),
    Skipped(Skipped),
}

/// An operation left out, and why.
#[derive(Debug)]
pub(super) struct Skipped {
    pub method: String,
    pub path: String,
    pub why: String,
}

/// A route for one operation.
#[derive(Debug)]
pub(super) struct Route {
    pub name: String,
    pub description: Option<String>,
    pub method: String,
    /// The gateway's pattern: `/pets/{petId}`.
    pub path: String,
    /// Path parameters whose capture has another name: (in the document, in the pattern).
    pub renamed: Vec<(String, String)>,
    pub access: Access,
}

/// Who may call the route.
#[derive(Debug)]
pub(super) enum Access {
    /// The document asks no security: an access token is enough.
    Token,
    Delegation(Delegation),
}

/// The route's `[route.delegation]`.
#[derive(Debug)]
pub(super) struct Delegation {
    /// From the last literal segment; None: the path has none.
    pub resource_type: Option<String>,
    /// `{path.NAME}` for every path parameter, or `*`.
    pub identifiers: Vec<String>,
    /// Named because the method gives none (OPTIONS, QUERY).
    pub action: Option<String>,
}

/// A path template as a pattern: the text and its captures (name in the document, in the pattern).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Pattern {
    pub text: String,
    pub captures: Vec<(String, String)>,
}

/// Every operation planned, route names made unique in document order (and apart from the
/// names the gateway counts its own answers under).
pub(super) fn plan(
    operations: &[Operation],
    defaults: &RouteDefaults,
) -> Result<Vec<Planned>, OpenApiError> {
    let mut names = BTreeSet::from(own_route::ALL.map(String::from));
    operations
        .iter()
        .map(|op| plan_one(op, defaults, &mut names))
        .collect()
}

fn plan_one(
    op: &Operation,
    defaults: &RouteDefaults,
    names: &mut BTreeSet<String>,
) -> Result<Planned, OpenApiError> {
    let pattern = pattern(&op.path).map_err(|reason| OpenApiError::PathTemplate {
        path: op.path.clone(),
        reason,
    })?;
    let method = Method::from_bytes(op.method.as_bytes()).map_err(|_| OpenApiError::Method {
        method: op.method.clone(),
        path: op.path.clone(),
    })?;
    let access = match access(op, &method, &pattern, defaults) {
        Ok(access) => access,
        Err(why) => {
            return Ok(Planned::Skipped(Skipped {
                method: op.method.clone(),
                path: op.path.clone(),
                why,
            }))
        }
    };
    Ok(Planned::Route(Route {
        name: unique(names, route_name(op)),
        description: op
            .summary
            .as_deref()
            .map(one_line)
            .filter(|s| !s.is_empty()),
        method: op.method.clone(),
        renamed: pattern
            .captures
            .iter()
            .filter(|(doc, capture)| doc != capture)
            .cloned()
            .collect(),
        path: pattern.text,
        access,
    }))
}

/// Who may call the operation's route; or why it gets none.
fn access(
    op: &Operation,
    method: &Method,
    pattern: &Pattern,
    defaults: &RouteDefaults,
) -> Result<Access, String> {
    if let Some(why) = left_out(method, &pattern.text) {
        return Err(why);
    }
    if op.open {
        return Ok(Access::Token);
    }
    let action = named_action(method, &defaults.scheme)?;
    Ok(Access::Delegation(delegation(&op.path, pattern, action)))
}

/// Why an operation gets no route, if it gets none: methods a generated file should not open,
/// and the paths the gateway serves itself.
fn left_out(method: &Method, pattern: &str) -> Option<String> {
    if method == Method::TRACE {
        return Some("TRACE echoes the request to the caller, credentials included: write its route by hand if the backend must have it".into());
    }
    if method == Method::CONNECT {
        return Some("CONNECT opens a tunnel, which the gateway does not route".into());
    }
    let reserved = pattern == CAPABILITIES_PATH || TOKEN_PATHS.contains(&pattern);
    reserved.then(|| format!("the gateway serves {pattern} itself"))
}

/// The action a delegated route names: None when the method gives one (GET → READ …); READ for
/// OPTIONS and QUERY, which change nothing; for other methods, why the operation is left out.
fn named_action(method: &Method, scheme: &str) -> Result<Option<String>, String> {
    if Action::for_method(method).is_some() {
        return Ok(None);
    }
    if method == Method::OPTIONS || method.as_str() == "QUERY" {
        return Ok(Some(Action::Read.qualified(scheme)));
    }
    Err(format!(
        "no action follows from {method}: write its route by hand, naming one"
    ))
}

fn delegation(path: &str, pattern: &Pattern, action: Option<String>) -> Delegation {
    let identifiers = if pattern.captures.is_empty() {
        vec!["*".to_string()]
    } else {
        pattern
            .captures
            .iter()
            .map(|(_, capture)| format!("{{path.{capture}}}"))
            .collect()
    };
    Delegation {
        resource_type: resource_type(path),
        identifiers,
        action,
    }
}

/// The path's last literal segment, upper-cased, every character but ASCII letters and digits as
/// `_`: `/pets/{id}` → `PETS`, `/stock-items` → `STOCK_ITEMS`. None for a path without one.
pub(super) fn resource_type(path: &str) -> Option<String> {
    path.split('/')
        .rfind(|s| !s.is_empty() && !s.starts_with('{'))
        .map(|s| {
            s.chars()
                .map(|c| match c.is_ascii_alphanumeric() {
                    true => c.to_ascii_uppercase(),
                    false => '_',
                })
                .collect()
        })
}

/// A document's path template as a pattern: each `{param}` segment a capture named with letters,
/// digits and `_` (other characters as `_`, a name taken twice numbered `_2`, `_3` …). A segment
/// that mixes text and a parameter cannot be expressed: captures are whole segments.
pub(super) fn pattern(path: &str) -> Result<Pattern, String> {
    if !path.starts_with('/') {
        return Err("it does not start with /".into());
    }
    let mut captures: Vec<(String, String)> = Vec::new();
    let mut segments = Vec::new();
    for segment in path.split('/') {
        let param = segment.strip_prefix('{').and_then(|s| s.strip_suffix('}'));
        match param {
            Some(name) if !name.is_empty() && !name.contains(['{', '}']) => {
                let wanted: String = name
                    .chars()
                    .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                    .collect();
                let capture = unique_capture(&captures, wanted);
                segments.push(format!("{{{capture}}}"));
                captures.push((name.to_string(), capture));
            }
            _ if segment.contains(['{', '}']) => {
                return Err(format!(
                    "the segment {segment} is not one whole parameter, and the gateway captures whole segments only"
                ))
            }
            _ => segments.push(segment.to_string()),
        }
    }
    let text = segments.join("/");
    PathPattern::parse(&text)?;
    Ok(Pattern { text, captures })
}

fn unique_capture(taken: &[(String, String)], wanted: String) -> String {
    let free = |name: &String| !taken.iter().any(|(_, c)| c == name);
    std::iter::once(wanted.clone())
        .chain((2..).map(|n| format!("{wanted}_{n}")))
        .find(free)
        .unwrap_or(wanted)
}

/// The route's name: the operationId as a metrics label (letters, digits, `-`, `_`, `.`; runs of
/// other characters as one `-`), or else the method and path (`get-pets-id`, `get-root`).
pub(super) fn route_name(op: &Operation) -> String {
    op.operation_id
        .as_deref()
        .map(label)
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| {
            let path = label(&op.path);
            let path = if path.is_empty() { "root" } else { &path };
            format!("{}-{path}", op.method.to_ascii_lowercase())
        })
}

fn label(text: &str) -> String {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || "-_.".contains(c)))
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("-")
}

/// `wanted`, or `wanted-2`, `wanted-3` … when a route before took it.
pub(super) fn unique(taken: &mut BTreeSet<String>, wanted: String) -> String {
    let name = std::iter::once(wanted.clone())
        .chain((2..).map(|n| format!("{wanted}-{n}")))
        .find(|n| !taken.contains(n))
        .unwrap_or(wanted);
    taken.insert(name.clone());
    name
}

/// Text on one line: runs of white space (line breaks included) as one space.
pub(super) fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
