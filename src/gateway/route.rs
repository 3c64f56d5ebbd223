//! The route table: path normalisation, path patterns with captures, value templates, and choosing
//! the rule for a method and path.

use crate::config::model::Route;
use http::Method;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Why a request path is refused before routing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("the path does not start with /")]
    NotAbsolute,
    #[error("the path has an invalid percent-encoding")]
    BadEncoding,
    #[error("the path contains an encoded slash, backslash or NUL, which is ambiguous")]
    EncodedSeparator,
    #[error("the path climbs above the root with ..")]
    AboveRoot,
    #[error("the path contains control characters")]
    ControlCharacter,
    #[error("the path has an empty, . or .. segment with parameters (;), which backends read differently")]
    DotSegmentWithParameters,
}

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// Normalise a request path (RFC 3986 §6.2.2): decode percent-encoded unreserved characters and
/// upper-case the rest, remove `.` and `..` segments, and collapse repeated slashes. An encoded `/`,
/// `\` or NUL, a malformed escape, a control character, or `..` above the root is refused rather
/// than guessed at.
pub fn normalize_path(raw: &str) -> Result<String, PathError> {
    if !raw.starts_with('/') {
        return Err(PathError::NotAbsolute);
    }
    let bytes = raw.as_bytes();
    let mut decoded = String::with_capacity(raw.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' {
            let hex = bytes.get(i + 1..i + 3).ok_or(PathError::BadEncoding)?;
            let s = std::str::from_utf8(hex).map_err(|_| PathError::BadEncoding)?;
            let v = u8::from_str_radix(s, 16).map_err(|_| PathError::BadEncoding)?;
            if matches!(v, b'/' | b'\\' | 0) {
                return Err(PathError::EncodedSeparator);
            }
            if is_unreserved(v) {
                decoded.push(v as char);
            } else {
                decoded.push('%');
                decoded.push_str(&s.to_ascii_uppercase());
            }
            i += 3;
        } else if b.is_ascii_control() || b == b' ' {
            return Err(PathError::ControlCharacter);
        } else if b == b'\\' {
            return Err(PathError::EncodedSeparator);
        } else {
            decoded.push(b as char);
            i += 1;
        }
    }
    // `..;x` is `..` to servlet containers but a plain name to us: refuse the ambiguity.
    for seg in decoded.split('/') {
        let params_at = [seg.find(';'), seg.to_ascii_uppercase().find("%3B")]
            .into_iter()
            .flatten()
            .min();
        if let Some(at) = params_at {
            if matches!(&seg[..at], "" | "." | "..") {
                return Err(PathError::DotSegmentWithParameters);
            }
        }
    }
    let ends_with_slash = decoded.len() > 1 && decoded.ends_with('/');
    let mut out: Vec<&str> = Vec::new();
    let segments: Vec<&str> = decoded.split('/').filter(|s| !s.is_empty()).collect();
    let last = segments.len().saturating_sub(1);
    let mut trailing = ends_with_slash;
    for (idx, seg) in segments.iter().enumerate() {
        match *seg {
            "." => trailing |= idx == last,
            ".." => {
                out.pop().ok_or(PathError::AboveRoot)?;
                trailing |= idx == last;
            }
            s => out.push(s),
        }
    }
    let mut path = String::with_capacity(decoded.len());
    for seg in &out {
        path.push('/');
        path.push_str(seg);
    }
    if path.is_empty() || trailing {
        path.push('/');
    }
    Ok(path)
}

/// Decode a normalised path segment for use as a value (`%20` → space).
fn decode_segment(seg: &str) -> String {
    percent_encoding::percent_decode_str(seg)
        .decode_utf8_lossy()
        .into_owned()
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Segment {
    Literal(String),
    Capture(String),
    /// `{*name}`: the rest of the path, one or more segments.
    Rest(String),
}

/// A path pattern: `/api/containers/{id}` or `/files/{*path}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathPattern {
    text: String,
    segments: Vec<Segment>,
    trailing_slash: bool,
}

impl PathPattern {
    pub fn parse(text: &str) -> Result<Self, String> {
        if !text.starts_with('/') {
            return Err("the path must start with /".into());
        }
        let normalized = normalize_path(text).map_err(|e| e.to_string())?;
        if normalized != text {
            return Err(format!(
                "the path is not in normal form; write {normalized}"
            ));
        }
        let parts: Vec<&str> = text.split('/').filter(|s| !s.is_empty()).collect();
        let mut segments = Vec::new();
        let mut names = Vec::new();
        for (i, part) in parts.iter().enumerate() {
            let seg = match part.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
                Some(inner) => {
                    let (rest, name) = match inner.strip_prefix('*') {
                        Some(n) => (true, n),
                        None => (false, inner),
                    };
                    if name.is_empty()
                        || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    {
                        return Err(format!(
                            "capture {part} must be named with letters, digits and _"
                        ));
                    }
                    if names.contains(&name) {
                        return Err(format!("capture {name} appears twice"));
                    }
                    names.push(name);
                    if rest {
                        if i != parts.len() - 1 {
                            return Err(format!("{part} must be the last segment"));
                        }
                        Segment::Rest(name.to_string())
                    } else {
                        Segment::Capture(name.to_string())
                    }
                }
                None if part.contains('{') || part.contains('}') => {
                    return Err(format!(
                        "segment {part} mixes text and a capture; a capture is a whole segment"
                    ))
                }
                None => Segment::Literal(part.to_string()),
            };
            segments.push(seg);
        }
        Ok(PathPattern {
            text: text.to_string(),
            trailing_slash: text.len() > 1 && text.ends_with('/'),
            segments,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub fn captures(&self) -> impl Iterator<Item = &str> {
        self.segments.iter().filter_map(|s| match s {
            Segment::Capture(n) | Segment::Rest(n) => Some(n.as_str()),
            Segment::Literal(_) => None,
        })
    }

    /// Match a normalised path; the captures are percent-decoded.
    pub fn matches(&self, path: &str) -> Option<BTreeMap<String, String>> {
        let trailing = path.len() > 1 && path.ends_with('/');
        let parts: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let mut captures = BTreeMap::new();
        for (i, seg) in self.segments.iter().enumerate() {
            match seg {
                Segment::Literal(l) => {
                    if parts.get(i) != Some(&l.as_str()) {
                        return None;
                    }
                }
                Segment::Capture(name) => {
                    captures.insert(name.clone(), decode_segment(parts.get(i)?));
                }
                Segment::Rest(name) => {
                    if parts.len() <= i {
                        return None;
                    }
                    let rest: Vec<String> = parts[i..].iter().map(|s| decode_segment(s)).collect();
                    captures.insert(name.clone(), rest.join("/"));
                    return Some(captures);
                }
            }
        }
        (parts.len() == self.segments.len() && trailing == self.trailing_slash).then_some(captures)
    }

    /// Literal segments first: a more specific pattern wins over a broader one.
    fn specificity(&self) -> (usize, bool) {
        let literals = self
            .segments
            .iter()
            .filter(|s| matches!(s, Segment::Literal(_)))
            .count();
        let no_rest = !self.segments.iter().any(|s| matches!(s, Segment::Rest(_)));
        (literals, no_rest)
    }
}

/// What must be escaped in a value put into a path (a `/` from a `{*rest}` capture stays a separator).
const PATH_VALUE: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'`')
    .add(b'{')
    .add(b'}')
    .add(b'\\');

/// A part of a value template.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    Literal(String),
    Path(String),
    Query(String),
    Header(String),
}

/// A value written in a rule: literal text with `{path.NAME}` (or just `{NAME}`), `{query.NAME}` and
/// `{header.NAME}` taken from the request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    text: String,
    parts: Vec<Part>,
}

/// What a template may draw on.
pub struct RequestValues<'a> {
    pub captures: &'a BTreeMap<String, String>,
    pub query: Option<&'a str>,
    pub headers: &'a http::HeaderMap,
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
                None => Part::Path(inner.to_string()),
                Some((kind, _)) => {
                    return Err(format!("{text:?}: {{{inner}}} must be {{path.NAME}}, {{query.NAME}} or {{header.NAME}}, not {kind}"))
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
            text: text.to_string(),
            parts,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The request headers the template reads.
    pub fn header_names(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Header(n) => Some(n.as_str()),
            _ => None,
        })
    }

    /// The path captures the template uses, to check them against the route's pattern.
    pub fn path_names(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Path(n) => Some(n.as_str()),
            _ => None,
        })
    }

    /// The value for a request; None when a query parameter or header it names is absent (or not
    /// UTF-8, or given twice: a value must be unambiguous).
    pub fn render(&self, values: &RequestValues) -> Option<String> {
        self.render_with(values, |v| v.to_string())
    }

    /// The template as a path for the backend: inserted values are percent-encoded again.
    pub fn render_path(&self, values: &RequestValues) -> Option<String> {
        self.render_with(values, |v| {
            percent_encoding::utf8_percent_encode(v, PATH_VALUE).to_string()
        })
    }

    fn render_with(
        &self,
        values: &RequestValues,
        encode: impl Fn(&str) -> String,
    ) -> Option<String> {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Literal(l) => out.push_str(l),
                Part::Path(n) => out.push_str(&encode(values.captures.get(n)?)),
                Part::Query(n) => {
                    let mut found =
                        url::form_urlencoded::parse(values.query.unwrap_or("").as_bytes())
                            .filter(|(k, _)| k == n)
                            .map(|(_, v)| v.into_owned());
                    let v = found.next()?;
                    if found.next().is_some() {
                        return None;
                    }
                    out.push_str(&encode(&v));
                }
                Part::Header(n) => {
                    let mut all = values.headers.get_all(n.as_str()).iter();
                    let v = all.next()?.to_str().ok()?;
                    if all.next().is_some() {
                        return None;
                    }
                    out.push_str(&encode(v.trim()));
                }
            }
        }
        Some(out)
    }
}

/// What the table says about a request.
pub enum Lookup {
    Found(Arc<Route>, BTreeMap<String, String>),
    /// The path is routed, but not for this method; the methods that are.
    MethodNotAllowed(Vec<Method>),
    NotFound,
}

/// The routes, most specific first.
#[derive(Clone, Debug, Default)]
pub struct RouteTable {
    routes: Vec<Arc<Route>>,
}

impl RouteTable {
    pub fn new(routes: Vec<Route>) -> Self {
        let mut routes: Vec<Arc<Route>> = routes.into_iter().map(Arc::new).collect();
        // Stable: among equally specific routes, file order decides.
        routes.sort_by_key(|r| std::cmp::Reverse(r.pattern.specificity()));
        RouteTable { routes }
    }

    pub fn routes(&self) -> &[Arc<Route>] {
        &self.routes
    }

    pub fn lookup(&self, method: &Method, path: &str) -> Lookup {
        let mut allowed = Vec::new();
        for route in &self.routes {
            if let Some(captures) = route.pattern.matches(path) {
                if route.allows(method) {
                    return Lookup::Found(route.clone(), captures);
                }
                allowed.extend(route.methods.iter().flatten().cloned());
            }
        }
        if allowed.is_empty() {
            Lookup::NotFound
        } else {
            allowed.dedup();
            Lookup::MethodNotAllowed(allowed)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_normalised() {
        let n = |p| normalize_path(p);
        assert_eq!(n("/a/b").unwrap(), "/a/b");
        assert_eq!(n("//a///b").unwrap(), "/a/b");
        assert_eq!(n("/a/./b/../c").unwrap(), "/a/c");
        assert_eq!(n("/a/%62").unwrap(), "/a/b");
        assert_eq!(n("/a/%2e%2E/b").unwrap(), "/b");
        assert_eq!(n("/a/%7e%20x").unwrap(), "/a/~%20x");
        assert_eq!(n("/a/b/").unwrap(), "/a/b/");
        assert_eq!(n("/a/b/.").unwrap(), "/a/b/");
        assert_eq!(n("/").unwrap(), "/");
        assert_eq!(n("/a/..").unwrap(), "/");
    }

    #[test]
    fn ambiguous_paths_are_refused() {
        assert_eq!(normalize_path("/a%2Fb"), Err(PathError::EncodedSeparator));
        assert_eq!(normalize_path("/a%5cb"), Err(PathError::EncodedSeparator));
        assert_eq!(normalize_path("/a\\b"), Err(PathError::EncodedSeparator));
        assert_eq!(normalize_path("/a%00"), Err(PathError::EncodedSeparator));
        assert_eq!(normalize_path("/a%zz"), Err(PathError::BadEncoding));
        assert_eq!(normalize_path("/a%4"), Err(PathError::BadEncoding));
        assert_eq!(normalize_path("/../etc/passwd"), Err(PathError::AboveRoot));
        assert_eq!(
            normalize_path("/a/%2e%2e/%2e%2e/x"),
            Err(PathError::AboveRoot)
        );
        assert_eq!(normalize_path("a/b"), Err(PathError::NotAbsolute));
        assert_eq!(normalize_path("/a\tb"), Err(PathError::ControlCharacter));
        for bad in [
            "/a/..;/b",
            "/a/.;x/b",
            "/a/..%3b/b",
            "/a/;x/b",
            "/a/%2e%2e;/b",
        ] {
            assert_eq!(
                normalize_path(bad),
                Err(PathError::DotSegmentWithParameters),
                "{bad}"
            );
        }
        assert_eq!(normalize_path("/a;v=1/b").unwrap(), "/a;v=1/b");
    }

    #[test]
    fn patterns_capture_segments_and_rests() {
        let p = PathPattern::parse("/api/containers/{id}").unwrap();
        assert_eq!(p.matches("/api/containers/C1").unwrap()["id"], "C1");
        assert_eq!(p.matches("/api/containers/C%201").unwrap()["id"], "C 1");
        assert!(p.matches("/api/containers").is_none());
        assert!(p.matches("/api/containers/C1/x").is_none());
        assert!(p.matches("/api/containers/C1/").is_none());
        let rest = PathPattern::parse("/files/{*path}").unwrap();
        assert_eq!(rest.matches("/files/a/b/c").unwrap()["path"], "a/b/c");
        assert!(rest.matches("/files").is_none());
        assert!(PathPattern::parse("/a/{*r}/b").is_err());
        assert!(PathPattern::parse("/a/x{id}").is_err());
        assert!(PathPattern::parse("/a/{id}/{id}").is_err());
        assert!(PathPattern::parse("/a//b").is_err());
    }

    #[test]
    fn templates_render_from_the_request() {
        let mut captures = BTreeMap::new();
        captures.insert("id".to_string(), "C1".to_string());
        let mut headers = http::HeaderMap::new();
        headers.insert("x-owner", "EU.EORI.NL000000005".parse().unwrap());
        let values = RequestValues {
            captures: &captures,
            query: Some("kind=box&dup=1&dup=2"),
            headers: &headers,
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
    }
}
