//! The parts of an HTTP request that rules decide on, as pure code: the canonical form of the path
//! and the query (what a rule decides on is exactly what the backend receives), route path
//! patterns, value templates, cookies, JSON bodies read one way only (and the values rules take
//! from them), and the `_method` fields of bodies. Config and gateway both build on these.

/// The headers that carry a trace context: W3C's, and Zipkin's B3, single (`b3`) and multiple
/// (`X-B3-*`). A client's never reach the backend when tracing is on (they would name a trace the
/// gateway did not choose), and none, in any spelling, is a header the gateway is configured to
/// set.
pub const TRACE_HEADERS: [&str; 8] = [
    "traceparent",
    "tracestate",
    "b3",
    "x-b3-traceid",
    "x-b3-spanid",
    "x-b3-parentspanid",
    "x-b3-sampled",
    "x-b3-flags",
];

pub mod body;
pub mod form;
pub mod path;
pub mod pattern;
pub mod query;
pub mod template;

use crate::reading::text;
use serde::Deserialize;
use std::fmt;

/// Every cookie of a request (`name=value`, trimmed), across all its Cookie headers.
pub fn cookies(headers: &http::HeaderMap) -> impl Iterator<Item = &str> {
    headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .map(str::trim)
        .filter(|pair| !pair.is_empty())
}

/// Why a header that may be given once cannot be read one way only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderProblem {
    NotText,
    Repeated,
    Empty,
}

/// The value of a header that may be given at most once (credentials, evidence): None when it is
/// absent.
pub fn single_header(
    headers: &http::HeaderMap,
    name: impl http::header::AsHeaderName,
) -> Result<Option<&str>, HeaderProblem> {
    let mut all = headers.get_all(name).iter();
    match (all.next(), all.next()) {
        (None, _) => Ok(None),
        (Some(v), None) => visible_text(v.as_bytes())
            .map(Some)
            .ok_or(HeaderProblem::NotText),
        (Some(_), Some(_)) => Err(HeaderProblem::Repeated),
    }
}

/// A header value as text when every byte is visible ASCII or a tab, as `HeaderValue::to_str`
/// asks; checked without stopping at the first byte, so that evidence headers of kilobytes are
/// checked with vector instructions, and once: text of such bytes needs no UTF-8 check.
pub fn visible_text(value: &[u8]) -> Option<&str> {
    // One compare for the visible range (0x20..=0x7e moves to 0..0x5f), ORed into one byte.
    let invisible = value.iter().fold(0u8, |any, &b| {
        any | u8::from((b.wrapping_sub(b' ') >= 0x5f) & (b != b'\t'))
    });
    match invisible {
        // SAFETY: every byte is a tab or in 0x20..=0x7e: ASCII, which is UTF-8 as it stands.
        0 => Some(unsafe { std::str::from_utf8_unchecked(value) }),
        _ => None,
    }
}

/// The name of a cookie as `cookies` gives it.
pub fn cookie_name(cookie: &str) -> &str {
    cookie.split_once('=').map_or(cookie, |(name, _)| name)
}

/// The values of the cookies named `name`: more than one when a client sends it twice.
pub fn cookie_values<'a>(
    headers: &'a http::HeaderMap,
    name: &'a str,
) -> impl Iterator<Item = &'a str> {
    cookies(headers)
        .filter_map(|c| c.split_once('='))
        .filter(move |(k, _)| *k == name)
        .map(|(_, v)| v.trim())
}

/// A form of request that backends read in different ways, so that a decision made on one reading
/// could let another reach the backend. Refused unless the route accepts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ambiguity {
    /// `;` in a path segment: servlet containers cut it off as a path parameter.
    PathParameters,
    /// `%25`: decoded twice by some backends.
    EncodedPercent,
    /// A path segment ending in `.`: dropped by some servers and suffix matchers.
    TrailingDot,
    /// White space at the start or end of a segment or value: trimmed by some backends.
    EdgeWhitespace,
    /// `,` in a value a rule reads: a list to some backends.
    Comma,
    /// A query key given more than once (in any letter case).
    RepeatedQueryKey,
    /// A query key with brackets (`id[]`, `id[0]`): an array or map to some backends.
    BracketedQueryKey,
    /// `;` in the query: a separator to some backends.
    QuerySemicolon,
    /// A character that shows nothing (zero-width, bidirectional controls, spaces beyond ASCII)
    /// in a value the rule reads: one identifier to a person, another to the backend.
    Invisible,
    /// A letter beyond ASCII in a value the rule reads: full-width and look-alike letters that
    /// some backends fold into ASCII (`ＳECRET-1`).
    NonAscii,
    /// A `_method` query parameter or body field (form, multipart part, JSON key): the method to
    /// some frameworks (Laravel, Rails, Express middleware), whatever the request's own.
    MethodOverride,
    /// An encoded `?`, `#` or `&` in a value the rule reads: a query, a fragment or another
    /// parameter to a backend that decodes before it splits (an encoded `;` counts as a path
    /// parameter).
    EncodedDelimiter,
    /// A `.` or `..` segment in a value the rule reads (`C1/../SECRET-1`): resolved by a backend
    /// that builds a path or a file name of it.
    DotSegment,
    /// A body on a GET or HEAD request: content without a defined meaning (RFC 9110 §9.3.1),
    /// which some backends read (search APIs, GraphQL over GET) and the decision did not.
    BodyOnRead,
}

impl Ambiguity {
    const ALL: [Ambiguity; 14] = [
        Ambiguity::PathParameters,
        Ambiguity::EncodedPercent,
        Ambiguity::TrailingDot,
        Ambiguity::EdgeWhitespace,
        Ambiguity::Comma,
        Ambiguity::RepeatedQueryKey,
        Ambiguity::BracketedQueryKey,
        Ambiguity::QuerySemicolon,
        Ambiguity::Invisible,
        Ambiguity::NonAscii,
        Ambiguity::EncodedDelimiter,
        Ambiguity::MethodOverride,
        Ambiguity::DotSegment,
        Ambiguity::BodyOnRead,
    ];

    fn bit(self) -> u16 {
        1 << (self as u16)
    }

    /// The word a route's `accept` list names it by.
    pub fn as_str(self) -> &'static str {
        match self {
            Ambiguity::PathParameters => "path_parameters",
            Ambiguity::EncodedPercent => "encoded_percent",
            Ambiguity::TrailingDot => "trailing_dot",
            Ambiguity::EdgeWhitespace => "edge_whitespace",
            Ambiguity::Comma => "comma",
            Ambiguity::RepeatedQueryKey => "repeated_query_key",
            Ambiguity::BracketedQueryKey => "bracketed_query_key",
            Ambiguity::QuerySemicolon => "query_semicolon",
            Ambiguity::Invisible => "invisible",
            Ambiguity::NonAscii => "non_ascii",
            Ambiguity::EncodedDelimiter => "encoded_delimiter",
            Ambiguity::MethodOverride => "method_override",
            Ambiguity::DotSegment => "dot_segment",
            Ambiguity::BodyOnRead => "body_on_read",
        }
    }
}

impl fmt::Display for Ambiguity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Ambiguity::PathParameters => "a path parameter (;), or a ; in a value the rule reads",
            Ambiguity::EncodedPercent => "an encoded percent sign (%25)",
            Ambiguity::TrailingDot => "a path segment ending in a dot",
            Ambiguity::EdgeWhitespace => "white space at the start or end of a value",
            Ambiguity::Comma => "a comma in a value the rule reads",
            Ambiguity::RepeatedQueryKey => "a query parameter given more than once",
            Ambiguity::BracketedQueryKey => "a query parameter name with brackets",
            Ambiguity::QuerySemicolon => "a semicolon in the query",
            Ambiguity::Invisible => "an invisible character in a value the rule reads",
            Ambiguity::NonAscii => "a character beyond ASCII in a value the rule reads",
            Ambiguity::EncodedDelimiter => "an encoded ?, # or & in a value the rule reads",
            Ambiguity::MethodOverride => {
                "a _method parameter (in the query, a form or a JSON body), read as the method by \
                 some frameworks"
            }
            Ambiguity::DotSegment => "a . or .. segment in a value the rule reads",
            Ambiguity::BodyOnRead => "a body on a GET or HEAD request",
        })
    }
}

/// The letter case a backend that compares identifiers without case is given them in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Case {
    Upper,
    Lower,
}

impl Case {
    /// `value` with its ASCII letters in this case (other characters are left as they are).
    pub fn apply(self, value: &str) -> String {
        match self {
            Case::Upper => value.to_ascii_uppercase(),
            Case::Lower => value.to_ascii_lowercase(),
        }
    }
}

/// A set of ambiguities.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Ambiguities(u16);

impl Ambiguities {
    pub fn insert(&mut self, a: Ambiguity) {
        self.0 |= a.bit();
    }

    pub fn contains(self, a: Ambiguity) -> bool {
        self.0 & a.bit() != 0
    }

    pub fn union(self, other: Ambiguities) -> Ambiguities {
        Ambiguities(self.0 | other.0)
    }

    /// The first ambiguity of `self` that `accepted` does not hold.
    pub fn first_not_in(self, accepted: Ambiguities) -> Option<Ambiguity> {
        Ambiguity::ALL
            .into_iter()
            .find(|a| self.contains(*a) && !accepted.contains(*a))
    }
}

impl FromIterator<Ambiguity> for Ambiguities {
    fn from_iter<I: IntoIterator<Item = Ambiguity>>(iter: I) -> Self {
        let mut set = Ambiguities::default();
        for a in iter {
            set.insert(a);
        }
        set
    }
}

/// The ambiguities of a value a rule reads, whatever part of the request it comes from (the
/// path's own forms are found on the raw path): a comma, white space at its edges, a delimiter, a
/// percent sign (decoded again by some), a trailing dot, a `.` or `..` segment, characters beyond
/// ASCII and invisible ones. Control characters are no ambiguity: no value may hold one
/// (`reading::text::has_control`).
pub fn value_ambiguities(value: &str) -> Ambiguities {
    let mut found = Ambiguities::default();
    if value.contains(',') {
        found.insert(Ambiguity::Comma);
    }
    // Each segment of a value a backend may build a path of, as the path's own segments are.
    let segments = || value.split(['/', '\\']);
    if segments().any(|s| s.starts_with(char::is_whitespace) || s.ends_with(char::is_whitespace)) {
        found.insert(Ambiguity::EdgeWhitespace);
    }
    if value.contains(['?', '#', '&']) {
        found.insert(Ambiguity::EncodedDelimiter);
    }
    if value.contains(';') {
        found.insert(Ambiguity::PathParameters);
    }
    if value.contains('%') {
        found.insert(Ambiguity::EncodedPercent);
    }
    if segments().any(|s| s.ends_with('.') && s != "." && s != "..") {
        found.insert(Ambiguity::TrailingDot);
    }
    if segments().any(|s| s == "." || s == "..") {
        found.insert(Ambiguity::DotSegment);
    }
    if !value.is_ascii() {
        found.insert(Ambiguity::NonAscii);
        if value.chars().any(text::is_invisible) {
            found.insert(Ambiguity::Invisible);
        }
    }
    found
}

/// Whether a `Host` value is a host name or an address, with an optional port (RFC 9110 §7.2): no
/// path, user, percent-encoding or other character a backend might build a URL or a file name of.
pub fn valid_host(value: &str) -> bool {
    let (host, port) = match value.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') || host.ends_with(']') => (host, Some(port)),
        _ => (value, None),
    };
    let port_ok =
        port.is_none_or(|p| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()));
    let host_ok = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(literal) => literal.parse::<std::net::Ipv6Addr>().is_ok(),
        None => {
            let name = host.strip_suffix('.').unwrap_or(host);
            !name.is_empty()
                && name.len() <= 253
                && name.split('.').all(|label| {
                    let bytes = label.as_bytes();
                    bytes.first().is_some_and(u8::is_ascii_alphanumeric)
                        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
                        && bytes
                            .iter()
                            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
                })
        }
    };
    port_ok && host_ok
}

/// Percent-encode everything but the unreserved characters (RFC 3986 §2.3): the canonical way to
/// write a value, which every backend decodes the same.
pub const ENCODE_ALL_BUT_UNRESERVED: &percent_encoding::AsciiSet =
    &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'.')
        .remove(b'_')
        .remove(b'~');

#[cfg(test)]
mod tests {
    use super::{valid_host, value_ambiguities, visible_text, Ambiguity};

    #[test]
    fn visible_text_agrees_with_header_value_on_every_byte() {
        let long = "a".repeat(6000);
        for b in 0..=255u8 {
            for at in [0, 17, 5999] {
                let mut bytes = long.clone().into_bytes();
                bytes[at] = b;
                let agreed = http::HeaderValue::from_bytes(&bytes)
                    .ok()
                    .and_then(|v| v.to_str().ok().map(str::to_owned));
                assert_eq!(
                    visible_text(&bytes).map(str::to_owned),
                    agreed,
                    "{b:#x} at {at}"
                );
            }
        }
        assert_eq!(visible_text(b""), Some(""));
    }

    #[test]
    fn values_that_read_as_another_identifier_are_ambiguous() {
        let has = |v: &str, a: Ambiguity| value_ambiguities(v).contains(a);
        assert_eq!(value_ambiguities("SECRET-1"), Default::default());
        assert!(has("\u{FF33}ECRET-1", Ambiguity::NonAscii));
        assert!(!has("\u{FF33}ECRET-1", Ambiguity::Invisible));
        assert!(has("SECRET-1\u{200B}", Ambiguity::Invisible));
        assert!(has("SE\u{00AD}CRET-1", Ambiguity::Invisible));
        assert!(has("SECRET-1\u{3000}", Ambiguity::Invisible));
        for delimiter in ["SECRET-1?x=1", "SECRET-1#x", "A&id=SECRET-1"] {
            assert!(has(delimiter, Ambiguity::EncodedDelimiter), "{delimiter}");
        }
        assert!(has("SECRET-1;v=2", Ambiguity::PathParameters));
        assert!(has("caf\u{e9}", Ambiguity::NonAscii));
        assert!(has("SECRET-1.", Ambiguity::TrailingDot));
        assert!(has("SECRET-1./x", Ambiguity::TrailingDot));
        assert!(has("SECRET-1 /x", Ambiguity::EdgeWhitespace));
        assert!(has("SECRET%2D1", Ambiguity::EncodedPercent));
        for dots in ["C1/../SECRET-1", "./SECRET-1", "C1\\..\\SECRET-1", ".."] {
            assert!(has(dots, Ambiguity::DotSegment), "{dots}");
        }
        assert!(!has("v1.2/a.b", Ambiguity::DotSegment));
        assert!(has("SECRET-1\u{2028}", Ambiguity::Invisible));
        assert!(has("SECRET-1\u{A0}", Ambiguity::Invisible));
    }

    #[test]
    fn a_host_is_a_name_or_an_address_with_an_optional_port() {
        for good in [
            "api.example.com",
            "api.example.com:8443",
            "127.0.0.1",
            "127.0.0.1:80",
            "[::1]",
            "[::1]:9000",
            "localhost",
            "api.example.com.",
            "my_host.internal",
        ] {
            assert!(valid_host(good), "{good}");
        }
        for bad in [
            "",
            "evil.example/../x",
            "evil.example?x",
            "user@evil.example",
            "evil%2eexample",
            "evil example",
            "a.example:",
            "a.example:80a",
            "a.example:123456",
            "::1",
            "[not-an-address]",
            "a.example:80:80",
            "..",
            ".",
            "-",
            "a..example",
            "-a.example",
        ] {
            assert!(!valid_host(bad), "{bad}");
        }
    }
}
