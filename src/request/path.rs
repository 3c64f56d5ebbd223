//! Request paths: the normal form a path is matched and forwarded in, and the ambiguous forms that
//! are refused rather than guessed at.

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
}
