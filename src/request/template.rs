//! Value templates of rules: literal text with `{path.NAME}`, `{query.NAME}` and `{header.NAME}`
//! taken from the request.

use std::collections::BTreeMap;

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

#[cfg(test)]
mod tests {
    use super::*;

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
