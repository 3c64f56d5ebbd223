//! Path patterns of routes: `/api/containers/{id}` or `/files/{*path}`, matched against normalised
//! paths, with percent-decoded captures.

use std::collections::BTreeMap;

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

/// A normalised path in segments, split once for every pattern it is matched against.
pub struct SplitPath<'a> {
    pub parts: Vec<&'a str>,
    trailing: bool,
}

impl<'a> SplitPath<'a> {
    pub fn new(path: &'a str) -> Self {
        SplitPath {
            parts: path.split('/').filter(|s| !s.is_empty()).collect(),
            trailing: path.len() > 1 && path.ends_with('/'),
        }
    }
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
        let normalized = super::path::normalize_path(text).map_err(|e| e.to_string())?;
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
        self.matches_split(&SplitPath::new(path))
    }

    /// The literal segments the pattern starts with (before its first capture).
    pub fn literal_prefix(&self) -> impl Iterator<Item = &str> {
        self.segments.iter().map_while(|s| match s {
            Segment::Literal(l) => Some(l.as_str()),
            _ => None,
        })
    }

    /// Match a path split once for all the patterns it is tried against.
    pub fn matches_split(&self, path: &SplitPath) -> Option<BTreeMap<String, String>> {
        let (parts, trailing) = (&path.parts, path.trailing);
        // The literals first: most patterns fail there, before any capture is decoded.
        let literals_match = self.segments.iter().enumerate().all(|(i, seg)| match seg {
            Segment::Literal(l) => parts.get(i) == Some(&l.as_str()),
            _ => true,
        });
        if !literals_match {
            return None;
        }
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

    /// `path` (which the pattern matches) with the segments its captures take in `case`.
    pub fn recase_captures(&self, path: &str, case: super::Case) -> String {
        let variable = |i: usize| match self.segments.get(i) {
            Some(Segment::Literal(_)) => false,
            Some(_) => true,
            None => matches!(self.segments.last(), Some(Segment::Rest(_))),
        };
        let mut out = String::with_capacity(path.len());
        for (i, part) in path.split('/').skip(1).enumerate() {
            out.push('/');
            match variable(i) {
                true => out.push_str(&case.apply(part)),
                false => out.push_str(part),
            }
        }
        out
    }

    /// Literal segments first: a more specific pattern wins over a broader one.
    pub fn specificity(&self) -> (usize, bool) {
        let literals = self
            .segments
            .iter()
            .filter(|s| matches!(s, Segment::Literal(_)))
            .count();
        let no_rest = !self.segments.iter().any(|s| matches!(s, Segment::Rest(_)));
        (literals, no_rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
