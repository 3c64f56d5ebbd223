//! The rules file as an operator writes one: a header saying where it came from and what to edit,
//! one `[[route]]` per operation, and a comment in place of each operation left out.

use super::document::Document;
use super::routes::{
    one_line, Access, Delegation, Planned, Route, RouteDefaults, Skipped, FALLBACK_RESOURCE_TYPE,
};

/// The whole file.
pub(super) fn rules(
    doc: &Document,
    source: &str,
    defaults: &RouteDefaults,
    planned: &[Planned],
) -> String {
    let mut out = header(doc, source, defaults);
    for p in planned {
        out.push('\n');
        match p {
            Planned::Route(r) => route(&mut out, r, defaults),
            Planned::Skipped(s) => skipped(&mut out, s),
        }
    }
    out
}

fn header(doc: &Document, source: &str, defaults: &RouteDefaults) -> String {
    let mut lines = vec![
        format!(
            "Routes generated from {} {} ({}, {}) by `ishare-gateway routes-from-openapi`:",
            quoted(&comment(&doc.title)),
            comment(&doc.version),
            comment(source),
            doc.format
        ),
        "a starting point. Read and edit every route before use; `ishare-gateway check` validates them.".into(),
        String::new(),
        format!(
            "- upstream: {} must be an [[upstream]] of gateway.toml (--upstream names another).",
            quoted(&comment(&defaults.upstream))
        ),
    ];
    if !doc.bases.is_empty() {
        lines.push(format!(
            "- path: the document's, relative to {}.",
            comment(&doc.bases.join(", "))
        ));
        lines.push(
            "  Where clients call the gateway with that base path, add it to each path.".into(),
        );
    }
    lines.extend(
        [
            format!("- policy_issuer: {} (--policy-issuer), the data owner whose policies decide.", defaults.policy_issuer),
            "- resource_type: the path's last literal segment, upper-cased, other characters as _".into(),
            format!("  (/pets/{{id}} gives PETS; {FALLBACK_RESOURCE_TYPE} where the path has none): use the data owner's types."),
            "- identifiers: the path's parameters in order, each of which the evidence must grant;".into(),
            "  [\"*\"] (all, which only \"*\" in the evidence grants) where the path has none.".into(),
            "- action: from the method (GET, HEAD: READ; POST: CREATE; PUT, PATCH: UPDATE; DELETE: DELETE);".into(),
            format!("  OPTIONS and QUERY name {}. attributes and evidence are the defaults (all; header, registry).", quoted(&defaults_read(defaults))),
            "- auth = \"token\" where the document asks no security (security: []): any participant with".into(),
            "  an access token, no delegation. Make such a route \"public\" only if what it answers is public.".into(),
            "- name: the operationId (characters other than letters, digits, - _ . as -), else the method".into(),
            "  and path; names must be unique in the whole rules directory.".into(),
        ],
    );
    lines
        .iter()
        .map(|l| format!("# {l}").trim_end().to_string() + "\n")
        .collect()
}

fn defaults_read(defaults: &RouteDefaults) -> String {
    crate::scheme::vocabulary::Action::Read.qualified(&defaults.scheme)
}

fn route(out: &mut String, r: &Route, defaults: &RouteDefaults) {
    if let Access::Token = r.access {
        out.push_str(
            "# The document asks no security here: any participant with an access token.\n",
        );
    }
    for (param, capture) in &r.renamed {
        out.push_str(&format!(
            "# The path parameter {{{}}} is the capture {{{capture}}} here.\n",
            comment(param)
        ));
    }
    out.push_str("[[route]]\n");
    push_key(out, "name", &quoted(&r.name));
    if let Some(d) = &r.description {
        push_key(out, "description", &quoted(d));
    }
    push_key(out, "methods", &list(std::slice::from_ref(&r.method)));
    push_key(out, "path", &quoted(&r.path));
    push_key(out, "upstream", &quoted(&defaults.upstream));
    match &r.access {
        Access::Token => push_key(out, "auth", &quoted("token")),
        Access::Delegation(d) => {
            push_key(out, "auth", &quoted("delegation"));
            delegation(out, d, &r.method, defaults);
        }
    }
}

fn delegation(out: &mut String, d: &Delegation, method: &str, defaults: &RouteDefaults) {
    out.push_str("[route.delegation]\n");
    push_key(
        out,
        "policy_issuer",
        &quoted(defaults.policy_issuer.as_str()),
    );
    match &d.resource_type {
        Some(t) => push_key(out, "resource_type", &quoted(t)),
        None => push_key(
            out,
            "resource_type",
            &format!(
                "{}   # the path has no literal segment: name the type",
                quoted(FALLBACK_RESOURCE_TYPE)
            ),
        ),
    }
    push_key(out, "identifiers", &list(&d.identifiers));
    if let Some(action) = &d.action {
        push_key(
            out,
            "action",
            &format!("{}   # {method} gives no action; it reads", quoted(action)),
        );
    }
}

fn skipped(out: &mut String, s: &Skipped) {
    out.push_str(&format!(
        "# Left out: {} {}: {}\n",
        comment(&s.method),
        comment(&s.path),
        comment(&s.why)
    ));
}

fn push_key(out: &mut String, key: &str, value: &str) {
    out.push_str(key);
    out.push_str(" = ");
    out.push_str(value);
    out.push('\n');
}

/// A TOML string, escaped by the TOML writer.
fn quoted(text: &str) -> String {
    toml::Value::String(text.to_string()).to_string()
}

fn list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|i| quoted(i)).collect();
    format!("[{}]", quoted.join(", "))
}

/// Text from the document made safe for a comment: on one line, without control characters.
fn comment(text: &str) -> String {
    one_line(&text.replace(|c: char| c.is_control(), " "))
}
