//! Value templates of rules: literal text with `{path.NAME}`, `{query.NAME}`, `{header.NAME}` and
//! `{body.json./POINTER}` taken from the request.

use super::body::BodyPointer;
use super::path::normalize_path;
use super::query::Query;
use super::ENCODE_ALL_BUT_UNRESERVED;
use percent_encoding::utf8_percent_encode;
use std::collections::BTreeMap;

/// Why a template gives no path for the backend.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    #[error("the request lacks {0} (or gives it twice), which the route's upstream path needs")]
    Missing(String),
    #[error("{0} is not usable as a path segment")]
    NotASegment(String),
}

/// A part of a value template.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    Literal(String),
    Path(String),
    Query(String),
    Header(String),
    Body(BodyPointer),
    /// `{body.keys./POINTER}`: the member names of an object of the body, each a value.
    BodyKeys(BodyPointer),
}

/// A value written in a rule: literal text with `{path.NAME}` (or just `{NAME}`), `{query.NAME}`,
/// `{header.NAME}` and `{body.json./POINTER}` taken from the request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    /// As written; shared with every decision that records a value taken with it.
    text: std::sync::Arc<str>,
    parts: Vec<Part>,
}

/// What a template may draw on.
pub struct RequestValues<'a> {
    pub captures: &'a BTreeMap<String, String>,
    pub query: &'a Query,
    pub headers: &'a http::HeaderMap,
    /// The JSON body, on a route whose rule reads it.
    pub body: Option<BodyValues<'a>>,
}

/// The JSON body a template reads, and the element of its array that `*` stands for.
#[derive(Clone, Copy, Debug)]
pub struct BodyValues<'a> {
    pub json: &'a serde_json::Value,
    pub element: Option<usize>,
}

impl Template {
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut parts = Vec::new();
        let mut rest = text;
        while let Some(open) = rest.find('{') {
            if open > 0 {
                parts.push(Part::Literal(rest[..open].to_string()));
            }
            let close = rest[open..]
                .find('}')
                .ok_or_else(|| format!("{text:?}: {{ without }}"))?
                + open;
            let inner = &rest[open + 1..close];
            let part = match inner.split_once('.') {
                Some(("path", n)) => Part::Path(n.to_string()),
                Some(("query", n)) => Part::Query(n.to_string()),
                Some(("header", n)) => Part::Header(n.to_ascii_lowercase()),
                Some(("body", pointer)) => {
                    let parse = |p| BodyPointer::parse(p).map_err(|e| format!("{text:?}: {e}"));
                    match (pointer.strip_prefix("json."), pointer.strip_prefix("keys.")) {
                        (Some(pointer), _) => Part::Body(parse(pointer)?),
                        (_, Some(pointer)) => Part::BodyKeys(parse(pointer)?),
                        _ => {
                            return Err(format!(
                                "{text:?}: {{{inner}}}: the body is read as {{body.json./POINTER}} or {{body.keys./POINTER}}"
                            ))
                        }
                    }
                }
                None => Part::Path(inner.to_string()),
                Some((kind, _)) => {
                    return Err(format!("{text:?}: {{{inner}}} must be {{path.NAME}}, {{query.NAME}}, {{header.NAME}} or {{body.json./POINTER}}, not {kind}"))
                }
            };
            if matches!(&part, Part::Path(n) | Part::Query(n) | Part::Header(n) if n.is_empty()) {
                return Err(format!("{text:?}: empty name in {{{inner}}}"));
            }
            parts.push(part);
            rest = &rest[close + 1..];
        }
        if rest.contains('}') {
            return Err(format!("{text:?}: }} without {{"));
        }
        if !rest.is_empty() {
            parts.push(Part::Literal(rest.to_string()));
        }
        Ok(Template {
            text: text.into(),
            parts,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The template as written, shared.
    pub fn text(&self) -> std::sync::Arc<str> {
        self.text.clone()
    }

    /// Whether the template is plain text, taking nothing from the request.
    pub fn is_literal(&self) -> bool {
        self.parts.iter().all(|p| matches!(p, Part::Literal(_)))
    }

    /// The request headers the template reads.
    pub fn header_names(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Header(n) => Some(n.as_str()),
            _ => None,
        })
    }

    /// The query parameters the template reads.
    pub fn query_names(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Query(n) => Some(n.as_str()),
            _ => None,
        })
    }

    /// The pointers into the JSON body the template reads values at.
    pub fn body_pointers(&self) -> impl Iterator<Item = &BodyPointer> {
        self.parts.iter().filter_map(|p| match p {
            Part::Body(pointer) => Some(pointer),
            _ => None,
        })
    }

    /// The pointers into the JSON body the template reads member names at.
    pub fn body_key_pointers(&self) -> impl Iterator<Item = &BodyPointer> {
        self.parts.iter().filter_map(|p| match p {
            Part::BodyKeys(pointer) => Some(pointer),
            _ => None,
        })
    }

    /// The pointer of a template that is `{body.keys./POINTER}` and nothing else.
    pub fn whole_body_keys(&self) -> Option<&BodyPointer> {
        match self.parts.as_slice() {
            [Part::BodyKeys(pointer)] => Some(pointer),
            _ => None,
        }
    }

    /// The values for a request: the member names a whole `{body.keys./POINTER}` stands for, or
    /// the one value `render` gives.
    pub fn render_each(&self, values: &RequestValues) -> Option<Vec<String>> {
        match (self.whole_body_keys(), values.body) {
            (Some(pointer), Some(body)) => pointer.keys(body.json, body.element).ok(),
            (Some(_), None) => None,
            (None, _) => self.render(values).map(|v| vec![v]),
        }
    }

    /// The path captures the template uses, to check them against the route's pattern.
    pub fn path_names(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Path(n) => Some(n.as_str()),
            _ => None,
        })
    }

    /// The template as a path for the backend. Every inserted value is percent-encoded: a path
    /// capture keeps its `/` separators (its segments are those of the canonical request path); a
    /// query or header value is one segment: not empty, `.` or `..`, and without `/` or `\` (which
    /// some backends would decode into separators). The result is in canonical form, so the backend
    /// reads exactly the values the rule rendered.
    pub fn render_path(&self, values: &RequestValues) -> Result<String, RenderError> {
        let mut out = String::new();
        for part in &self.parts {
            let missing = || RenderError::Missing(part.to_string());
            match part {
                Part::Literal(l) => out.push_str(l),
                Part::Path(n) => {
                    let value = values.captures.get(n).ok_or_else(missing)?;
                    let segments: Vec<String> = value
                        .split('/')
                        .map(|s| utf8_percent_encode(s, ENCODE_ALL_BUT_UNRESERVED).to_string())
                        .collect();
                    out.push_str(&segments.join("/"));
                }
                // Never in an upstream path: the path is made before the body is read.
                Part::Body(_) | Part::BodyKeys(_) => return Err(missing()),
                Part::Query(_) | Part::Header(_) => {
                    let value = self.value_of(part, values).ok_or_else(missing)?;
                    if matches!(value, "" | "." | "..") || value.contains(['/', '\\']) {
                        return Err(RenderError::NotASegment(part.to_string()));
                    }
                    out.extend(utf8_percent_encode(value, ENCODE_ALL_BUT_UNRESERVED));
                }
            }
        }
        if normalize_path(&out).ok().as_deref() != Some(out.as_str()) {
            return Err(RenderError::NotASegment(self.text.to_string()));
        }
        Ok(out)
    }

    /// The request's value for a query or header part: given exactly once, and text.
    fn value_of<'v>(&self, part: &Part, values: &'v RequestValues) -> Option<&'v str> {
        match part {
            Part::Query(n) => values.query.get(n),
            Part::Header(n) => {
                let mut all = values.headers.get_all(n.as_str()).iter();
                let v = all.next()?.to_str().ok()?;
                all.next().is_none().then(|| v.trim())
            }
            Part::Literal(_) | Part::Path(_) | Part::Body(_) | Part::BodyKeys(_) => None,
        }
    }

    /// The value for a request; None when a query parameter or header it names is absent (or not
    /// text, or given twice: a value must be unambiguous).
    pub fn render(&self, values: &RequestValues) -> Option<String> {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Literal(l) => out.push_str(l),
                Part::Path(n) => out.push_str(values.captures.get(n)?),
                Part::Query(_) | Part::Header(_) => out.push_str(self.value_of(part, values)?),
                Part::Body(pointer) => {
                    let body = values.body?;
                    out.push_str(&pointer.resolve(body.json, body.element).ok()?);
                }
                // Several values, never one: `render_each`.
                Part::BodyKeys(_) => return None,
            }
        }
        Some(out)
    }
}

impl std::fmt::Display for Part {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Part::Literal(l) => f.write_str(l),
            Part::Path(n) => write!(f, "{{path.{n}}}"),
            Part::Query(n) => write!(f, "{{query.{n}}}"),
            Part::Header(n) => write!(f, "{{header.{n}}}"),
            Part::Body(pointer) => write!(f, "{{body.json.{pointer}}}"),
            Part::BodyKeys(pointer) => write!(f, "{{body.keys.{pointer}}}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_render_from_the_request() {
        let mut captures = BTreeMap::new();
        captures.insert("id".to_string(), "C1".to_string());
        let mut headers = http::HeaderMap::new();
        headers.insert("x-owner", "EU.EORI.NL000000005".parse().unwrap());
        let query = Query::parse(Some("kind=box&dup=1&dup=2")).unwrap();
        let values = RequestValues {
            captures: &captures,
            query: &query,
            headers: &headers,
            body: None,
        };
        let r = |t: &str| Template::parse(t).unwrap().render(&values);
        assert_eq!(
            r("urn:{path.id}:{query.kind}").as_deref(),
            Some("urn:C1:box")
        );
        assert_eq!(r("{id}").as_deref(), Some("C1"));
        assert_eq!(
            r("{header.X-Owner}").as_deref(),
            Some("EU.EORI.NL000000005")
        );
        assert_eq!(r("{query.missing}"), None);
        assert_eq!(r("{query.dup}"), None, "ambiguous values are not used");
        assert!(Template::parse("{cookie.x}").is_err());
        assert!(Template::parse("{path.id").is_err());
        assert!(Template::parse("a}b").is_err());
        assert!(Template::parse("{body./id}").is_err());
        assert!(Template::parse("{body.json.id}").is_err());
    }

    #[test]
    fn body_values_render_from_the_element_decided_on() {
        let captures = BTreeMap::new();
        let headers = http::HeaderMap::new();
        let query = Query::parse(None).unwrap();
        let json = serde_json::json!({"type": "Container", "entities": [{"id": "A"}, {"id": "B"}]});
        let values = |element| RequestValues {
            captures: &captures,
            query: &query,
            headers: &headers,
            body: Some(BodyValues {
                json: &json,
                element,
            }),
        };
        let t = Template::parse("urn:{body.json./type}:{body.json./entities/*/id}").unwrap();
        assert_eq!(
            t.render(&values(Some(1))).as_deref(),
            Some("urn:Container:B")
        );
        assert_eq!(t.render(&values(None)), None);
        assert_eq!(t.body_pointers().count(), 2);
        assert_eq!(
            t.as_str(),
            "urn:{body.json./type}:{body.json./entities/*/id}"
        );
    }

    #[test]
    fn upstream_paths_insert_values_as_whole_segments() {
        let mut captures = BTreeMap::new();
        captures.insert("id".to_string(), "C 1".to_string());
        captures.insert("rest".to_string(), "a/b c".to_string());
        let mut headers = http::HeaderMap::new();
        headers.insert("x-tenant", "../../admin".parse().unwrap());
        headers.insert("x-dot", "..".parse().unwrap());
        let query = Query::parse(Some("version=../../admin&v=2&twice=1&twice=2")).unwrap();
        let values = RequestValues {
            captures: &captures,
            query: &query,
            headers: &headers,
            body: None,
        };
        let p = |t: &str| Template::parse(t).unwrap().render_path(&values);
        assert_eq!(p("/v2/{id}/{rest}").as_deref(), Ok("/v2/C%201/a/b%20c"));
        assert_eq!(
            p("/t/{header.X-Tenant}/x"),
            Err(RenderError::NotASegment("{header.x-tenant}".into()))
        );
        assert_eq!(
            p("/v/{query.version}"),
            Err(RenderError::NotASegment("{query.version}".into()))
        );
        assert_eq!(p("/v{query.v}/x").as_deref(), Ok("/v2/x"));
        assert_eq!(
            p("/t/{header.X-Dot}/x"),
            Err(RenderError::NotASegment("{header.x-dot}".into()))
        );
        assert_eq!(
            p("/v/{query.missing}"),
            Err(RenderError::Missing("{query.missing}".into()))
        );
        assert_eq!(
            p("/v/{query.twice}"),
            Err(RenderError::Missing("{query.twice}".into()))
        );
    }
}
