//! Request paths: the canonical form a path is matched and forwarded in, the forms that are refused
//! rather than guessed at, and those a route must accept explicitly.

use super::{Ambiguities, Ambiguity};

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

/// A path in canonical form, and the ambiguous forms it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NormalPath {
    pub path: String,
    pub ambiguities: Ambiguities,
}

fn push_escaped(out: &mut String, b: u8) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.push('%');
    out.push(HEX[(b >> 4) as usize] as char);
    out.push(HEX[(b & 0xF) as usize] as char);
}

/// Normalise a request path (RFC 3986 §6.2.2) into the canonical form that is matched and forwarded:
/// percent-encoded unreserved characters decoded, other escapes upper-cased, bytes beyond ASCII
/// percent-encoded, `.` and `..` segments removed, repeated slashes collapsed. An encoded `/`, `\`
/// or NUL, a malformed escape, a control character, or `..` above the root is refused; forms that
/// backends read differently (path parameters, `%25`, trailing dots, white space at a segment's
/// edge) are reported for the route to refuse or accept.
pub fn canonical_path(raw: &str) -> Result<NormalPath, PathError> {
    if !raw.starts_with('/') {
        return Err(PathError::NotAbsolute);
    }
    let bytes = raw.as_bytes();
    let mut decoded = String::with_capacity(raw.len());
    let mut ambiguities = Ambiguities::default();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' {
            let hex = bytes.get(i + 1..i + 3).ok_or(PathError::BadEncoding)?;
            let s = std::str::from_utf8(hex).map_err(|_| PathError::BadEncoding)?;
            let v = u8::from_str_radix(s, 16).map_err(|_| PathError::BadEncoding)?;
            match v {
                b'/' | b'\\' | 0 => return Err(PathError::EncodedSeparator),
                v if v.is_ascii_control() => return Err(PathError::ControlCharacter),
                b'%' => ambiguities.insert(Ambiguity::EncodedPercent),
                _ => {}
            }
            if is_unreserved(v) {
                decoded.push(v as char);
            } else {
                push_escaped(&mut decoded, v);
            }
            i += 3;
        } else if b.is_ascii_control() || b == b' ' {
            return Err(PathError::ControlCharacter);
        } else if b == b'\\' {
            return Err(PathError::EncodedSeparator);
        } else if !b.is_ascii() {
            push_escaped(&mut decoded, b);
            i += 1;
        } else {
            decoded.push(b as char);
            i += 1;
        }
    }
    for seg in decoded.split('/') {
        ambiguities = ambiguities.union(segment_ambiguities(seg)?);
    }
    let path = match is_normal(&decoded) {
        true => decoded,
        false => remove_dot_segments(&decoded)?,
    };
    Ok(NormalPath { path, ambiguities })
}

/// Whether a decoded path is already as `remove_dot_segments` leaves it: no segment empty, `.`
/// or `..` (but for the empty one after a trailing slash). Most are, and are kept as they are.
fn is_normal(decoded: &str) -> bool {
    let inner = decoded.strip_suffix('/').unwrap_or(decoded);
    inner
        .split('/')
        .skip(1)
        .all(|seg| !matches!(seg, "" | "." | ".."))
}

/// [`canonical_path`] without the ambiguities it reports.
pub fn normalize_path(raw: &str) -> Result<String, PathError> {
    canonical_path(raw).map(|p| p.path)
}

/// What one segment (escaped as in the canonical form) holds that backends read differently.
fn segment_ambiguities(seg: &str) -> Result<Ambiguities, PathError> {
    let mut found = Ambiguities::default();
    let params_at = [seg.find(';'), seg.find("%3B")].into_iter().flatten().min();
    if let Some(at) = params_at {
        // `..;x` is `..` to servlet containers but a plain name to us: never guessed.
        if matches!(&seg[..at], "" | "." | "..") {
            return Err(PathError::DotSegmentWithParameters);
        }
        found.insert(Ambiguity::PathParameters);
    }
    if seg.len() > 1 && seg.ends_with('.') && seg != ".." {
        found.insert(Ambiguity::TrailingDot);
    }
    let value = percent_encoding::percent_decode_str(seg).decode_utf8_lossy();
    if value.starts_with(char::is_whitespace) || value.ends_with(char::is_whitespace) {
        found.insert(Ambiguity::EdgeWhitespace);
    }
    Ok(found)
}

/// Remove `.` and `..` segments and empty segments; a trailing slash (or a final dot segment)
/// stays a trailing slash.
fn remove_dot_segments(decoded: &str) -> Result<String, PathError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_kept_as_it_is_is_the_one_dot_segments_removed_give() {
        let paths = [
            "/", "/a", "/a/", "/a/b", "/a/b/", "//", "//a", "/a//b", "/a//", "/.", "/./", "/..",
            "/a/.", "/a/..", "/a/./b", "/a/../b", "/a/b/..", "/.a", "/a./", "/..a/b", "/a/...",
        ];
        for path in paths {
            let removed = remove_dot_segments(path);
            if is_normal(path) {
                assert_eq!(removed.as_deref(), Ok(path), "{path}");
            } else {
                assert_ne!(removed.as_deref(), Ok(path), "{path}");
            }
        }
    }

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
}
