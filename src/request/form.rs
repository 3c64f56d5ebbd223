//! A `_method` field in a request body: Rails, Laravel, Symfony and Express's method-override read
//! it from a form (`application/x-www-form-urlencoded`, `multipart/form-data`) and Laravel also
//! from JSON, and then run the request as that method, whatever the request's own. The body is
//! scanned as it streams past, in constant memory, by the rules the loosest of those readers
//! apply: names percent-decoded and folded as query keys are (`_Method`, `%5Fmethod`, `_method[]`),
//! part headers unfolded, JSON keys unescaped at any depth.

use super::query::same_name;

/// The longest part-header block of a multipart body that is read; a longer one is refused, as a
/// name past the limit could not be seen.
pub const MAX_PART_HEADERS: usize = 8 * 1024;

/// A name longer than this (as written) is not `_method` in any spelling: `_method` percent-encoded
/// throughout, with brackets after it, fits.
const MAX_NAME: usize = 64;

/// What the scan of a body found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finding {
    /// A field named `_method`.
    MethodOverride,
    /// A part's headers longer than [`MAX_PART_HEADERS`].
    PartHeadersTooLong,
}

/// A body being scanned for a `_method` field, chunk by chunk.
pub struct MethodFieldScan {
    readers: Vec<Reader>,
}

enum Reader {
    Form(FormReader),
    Multipart(MultipartReader),
    Json(JsonReader),
}

impl MethodFieldScan {
    /// A scan of bodies of the given `Content-Type` values (every one, as a backend may read any),
    /// or None when none is a form or JSON.
    pub fn for_content_types<'a>(values: impl Iterator<Item = &'a [u8]>) -> Option<Self> {
        let readers: Vec<Reader> = values.filter_map(reader_for).collect();
        (!readers.is_empty()).then_some(MethodFieldScan { readers })
    }

    /// Read the next chunk; what it showed, if anything.
    pub fn feed(&mut self, chunk: &[u8]) -> Option<Finding> {
        self.readers.iter_mut().find_map(|r| match r {
            Reader::Form(f) => f.feed(chunk),
            Reader::Multipart(m) => m.feed(chunk),
            Reader::Json(j) => j.feed(chunk),
        })
    }

    /// The body ended: what its last bytes showed, if anything.
    pub fn finish(&mut self) -> Option<Finding> {
        self.readers.iter_mut().find_map(|r| match r {
            Reader::Form(f) => f.finish(),
            // A part whose headers never ended, or a JSON string, holds no field.
            Reader::Multipart(_) | Reader::Json(_) => None,
        })
    }
}

fn reader_for(value: &[u8]) -> Option<Reader> {
    let text = std::str::from_utf8(value).ok()?;
    let mut parts = text.split(';');
    let media = parts.next()?.trim().to_ascii_lowercase();
    match media.as_str() {
        "application/x-www-form-urlencoded" => Some(Reader::Form(FormReader::default())),
        "multipart/form-data" => {
            let boundary = parts.find_map(|p| {
                let (k, v) = p.split_once('=')?;
                k.trim()
                    .eq_ignore_ascii_case("boundary")
                    .then(|| v.trim().trim_matches('"').to_string())
            })?;
            Some(Reader::Multipart(MultipartReader::new(&boundary)))
        }
        m if m == "application/json" || (m.starts_with("application/") && m.ends_with("+json")) => {
            Some(Reader::Json(JsonReader::default()))
        }
        _ => None,
    }
}

/// Whether a name as a framework reads it (decoded) is `_method`: folded as query keys are, and
/// without what follows a `[` (`_method[]` is the same field to PHP and Rack).
fn is_method(decoded: &str) -> bool {
    let base = decoded.split('[').next().unwrap_or_default();
    same_name(base) == "_method"
}

/// `%XX` decoded (a malformed one left as it is) and `+` read as a space.
fn form_decode(raw: &[u8]) -> String {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let hex = raw
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (raw[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `name=value&…` (and `;` as a separator, as older readers take it).
#[derive(Default)]
struct FormReader {
    name: Vec<u8>,
    too_long: bool,
    in_value: bool,
}

impl FormReader {
    fn feed(&mut self, chunk: &[u8]) -> Option<Finding> {
        for &b in chunk {
            match (self.in_value, b) {
                (true, b'&' | b';') => self.in_value = false,
                (true, _) => {}
                (false, b'=' | b'&' | b';') => {
                    let found = self.end_name();
                    if found.is_some() {
                        return found;
                    }
                    self.in_value = b == b'=';
                }
                (false, _) if self.name.len() < MAX_NAME => self.name.push(b),
                (false, _) => self.too_long = true,
            }
        }
        None
    }

    fn end_name(&mut self) -> Option<Finding> {
        let found = !self.too_long && is_method(&form_decode(&self.name));
        self.name.clear();
        self.too_long = false;
        found.then_some(Finding::MethodOverride)
    }

    fn finish(&mut self) -> Option<Finding> {
        if self.in_value {
            return None;
        }
        self.end_name()
    }
}

/// Lines of a multipart body: after each boundary line, the part's headers up to an empty line,
/// unfolded, whose `Content-Disposition` names the field.
struct MultipartReader {
    /// `--boundary`
    delimiter: Vec<u8>,
    /// The current line, as far as it is kept: in part headers up to [`MAX_PART_HEADERS`] in all,
    /// elsewhere as long as it could still be a boundary line.
    line: Vec<u8>,
    line_kept: bool,
    /// The part-header block read so far (lines joined by `\n`), while in one.
    headers: Option<Vec<u8>>,
    ended: bool,
}

impl MultipartReader {
    fn new(boundary: &str) -> Self {
        MultipartReader {
            delimiter: format!("--{boundary}").into_bytes(),
            line: Vec::new(),
            line_kept: true,
            headers: None,
            ended: false,
        }
    }

    fn feed(&mut self, chunk: &[u8]) -> Option<Finding> {
        for &b in chunk {
            if self.ended {
                return None;
            }
            if b == b'\n' {
                let found = self.end_line();
                if found.is_some() {
                    return found;
                }
                continue;
            }
            let room = match &self.headers {
                Some(block) => MAX_PART_HEADERS.saturating_sub(block.len()),
                None => self.delimiter.len() + 4,
            };
            if self.line.len() < room {
                self.line.push(b);
            } else if self.headers.is_some() {
                return Some(Finding::PartHeadersTooLong);
            } else {
                self.line_kept = false;
            }
        }
        None
    }

    fn end_line(&mut self) -> Option<Finding> {
        let mut line = std::mem::take(&mut self.line);
        let kept = std::mem::replace(&mut self.line_kept, true);
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        if let Some(mut block) = self.headers.take() {
            if !line.is_empty() {
                if !block.is_empty() {
                    block.push(b'\n');
                }
                block.extend_from_slice(&line);
                self.headers = Some(block);
                return None;
            }
            return names_method(&block).then_some(Finding::MethodOverride);
        }
        if kept {
            if let Some(rest) = line.strip_prefix(self.delimiter.as_slice()) {
                let rest = rest.trim_ascii_end();
                if rest == b"--" {
                    self.ended = true;
                } else if rest.is_empty() {
                    self.headers = Some(Vec::new());
                }
            }
        }
        None
    }
}

/// Whether a part-header block (lines joined by `\n`, continuation lines folded in) has a
/// `Content-Disposition` whose `name` (or `name*`) is `_method`.
fn names_method(block: &[u8]) -> bool {
    let text = String::from_utf8_lossy(block);
    let mut headers: Vec<String> = Vec::new();
    for line in text.split('\n') {
        match (line.starts_with([' ', '\t']), headers.last_mut()) {
            (true, Some(last)) => last.push_str(line),
            _ => headers.push(line.to_string()),
        }
    }
    headers.iter().any(|h| {
        let Some((name, value)) = h.split_once(':') else {
            return false;
        };
        name.trim().eq_ignore_ascii_case("content-disposition")
            && parameters(value).any(|(k, v)| {
                let k = k.to_ascii_lowercase();
                match k.as_str() {
                    "name" => is_method(&v),
                    "name*" => is_method(&form_decode(
                        v.rsplit_once('\'')
                            .map_or(v.as_str(), |(_, encoded)| encoded)
                            .as_bytes(),
                    )),
                    _ => false,
                }
            })
    })
}

/// The `key=value` parameters after the first `;` of a header value, quoted values unquoted.
fn parameters(value: &str) -> impl Iterator<Item = (String, String)> + '_ {
    let mut items = Vec::new();
    let (mut current, mut quoted, mut escaped) = (String::new(), false, false);
    for c in value.chars() {
        match (quoted, escaped, c) {
            (true, true, _) => {
                current.push(c);
                escaped = false;
            }
            (true, false, '\\') => escaped = true,
            (_, false, '"') => quoted = !quoted,
            (false, _, ';') => items.push(std::mem::take(&mut current)),
            _ => current.push(c),
        }
    }
    items.push(current);
    items.into_iter().skip(1).filter_map(|item| {
        let (k, v) = item.split_once('=')?;
        Some((k.trim().to_string(), v.trim().to_string()))
    })
}

/// JSON strings, unescaped, and whether one is followed by `:` (a key), at any depth.
#[derive(Default)]
struct JsonReader {
    in_string: bool,
    /// After `\`; after `\u`, the hex digits read.
    escape: Option<Vec<u8>>,
    string: String,
    too_long: bool,
    /// The last string ended was `_method` and only white space followed it.
    candidate: bool,
}

impl JsonReader {
    fn feed(&mut self, chunk: &[u8]) -> Option<Finding> {
        for &b in chunk {
            if !self.in_string {
                match b {
                    b'"' => {
                        self.in_string = true;
                        self.string.clear();
                        self.too_long = false;
                        self.candidate = false;
                    }
                    b':' if self.candidate => return Some(Finding::MethodOverride),
                    b' ' | b'\t' | b'\r' | b'\n' => {}
                    _ => self.candidate = false,
                }
                continue;
            }
            match self.escape.as_mut() {
                Some(hex) if hex.is_empty() && b == b'u' => hex.push(b),
                Some(hex) if !hex.is_empty() => {
                    hex.push(b);
                    if hex.len() == 5 {
                        let unit = std::str::from_utf8(&hex[1..])
                            .ok()
                            .and_then(|h| u32::from_str_radix(h, 16).ok());
                        self.push(unit.and_then(char::from_u32).unwrap_or('\u{FFFD}'));
                        self.escape = None;
                    }
                }
                Some(_) => {
                    self.escape = None;
                    self.push(match b {
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        other => other as char,
                    });
                }
                None if b == b'\\' => self.escape = Some(Vec::new()),
                None if b == b'"' => {
                    self.in_string = false;
                    self.candidate = !self.too_long && is_method(&self.string);
                }
                None => self.push(b as char),
            }
        }
        None
    }

    fn push(&mut self, c: char) {
        if self.string.len() < MAX_NAME {
            self.string.push(c);
        } else {
            self.too_long = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a scan of `body` of `content_type` finds, fed `step` bytes at a time.
    fn scan(content_type: &str, body: &str, step: usize) -> Option<Finding> {
        let mut scan = MethodFieldScan::for_content_types([content_type.as_bytes()].into_iter())
            .expect("a scanned type");
        body.as_bytes()
            .chunks(step.max(1))
            .find_map(|c| scan.feed(c))
            .or_else(|| scan.finish())
    }

    fn found_in_every_split(content_type: &str, body: &str) -> bool {
        let whole = scan(content_type, body, body.len());
        (1..body.len().max(2)).all(|step| scan(content_type, body, step) == whole)
            && whole == Some(Finding::MethodOverride)
    }

    const FORM: &str = "application/x-www-form-urlencoded";

    #[test]
    fn a_form_field_named_method_in_any_spelling_is_found_wherever_the_chunks_split() {
        for body in [
            "_method=DELETE",
            "a=1&_method=DELETE",
            "a=1&_METHOD=delete&b=2",
            "a=1;_method=PUT",
            "%5Fmethod=DELETE",
            "_meth%6Fd=DELETE",
            "+_method=DELETE",
            "_method%5B%5D=DELETE",
            "_method[]=DELETE",
            "a=x&_method",
            ".method=PATCH",
        ] {
            assert!(found_in_every_split(FORM, body), "{body}");
        }
        for body in [
            "a=_method",
            "method=DELETE",
            "x_method=DELETE",
            "a=1&b=_method%3DDELETE",
            "_methods=DELETE",
        ] {
            assert_eq!(scan(FORM, body, 1), None, "{body}");
            assert_eq!(scan(FORM, body, body.len()), None, "{body}");
        }
        let long = format!("{}_method=DELETE", "%20".repeat(30));
        assert_eq!(
            scan(FORM, &long, 7),
            None,
            "a name beyond the bound is another name"
        );
    }

    #[test]
    fn a_multipart_part_named_method_is_found_and_file_contents_are_not_read_as_parts() {
        let ct = "multipart/form-data; boundary=XyZ";
        let part = |disposition: &str, content: &str| {
            format!("--XyZ\r\nContent-Disposition: {disposition}\r\n\r\n{content}\r\n")
        };
        for disposition in [
            "form-data; name=\"_method\"",
            "form-data; name=_method",
            "FORM-DATA; NAME=\"_Method\"",
            "form-data; filename=\"a;b\"; name=\"_method\"",
            "form-data; name*=utf-8''%5Fmethod",
            "form-data;\r\n name=\"_method\"",
        ] {
            let body = format!(
                "{}{}--XyZ--\r\n",
                part("form-data; name=\"a\"", "1"),
                part(disposition, "DELETE")
            );
            assert!(found_in_every_split(ct, &body), "{disposition}");
        }
        // A file that holds a part-like text is content, not a part.
        let inner = "Content-Disposition: form-data; name=\"_method\"\r\n\r\nDELETE";
        let body = format!(
            "{}--XyZ--\r\n",
            part("form-data; name=\"f\"; filename=\"x\"", inner)
        );
        assert_eq!(scan(ct, &body, 5), None);
        // The boundary parameter quoted, in another case of its name.
        let body = format!("{}--XyZ--\r\n", part("form-data; name=\"_method\"", "PUT"));
        assert_eq!(
            scan("Multipart/Form-Data; Boundary=\"XyZ\"", &body, 3),
            Some(Finding::MethodOverride)
        );
    }

    #[test]
    fn part_headers_beyond_the_bound_are_refused() {
        let body = format!(
            "--B\r\nContent-Disposition: form-data; filename=\"{}\"; name=\"_method\"\r\n\r\nx\r\n--B--",
            "a".repeat(MAX_PART_HEADERS)
        );
        assert_eq!(
            scan("multipart/form-data; boundary=B", &body, 1000),
            Some(Finding::PartHeadersTooLong)
        );
    }

    #[test]
    fn a_json_key_named_method_is_found_at_any_depth_in_any_escaping() {
        let json = "application/json; charset=utf-8";
        for body in [
            r#"{"_method":"DELETE"}"#,
            r#"{"a":{"b":[{"_method" : "PUT"}]}}"#,
            r#"{"\u005fmethod":"DELETE"}"#,
            r#"{"_Method":"DELETE"}"#,
        ] {
            assert!(found_in_every_split(json, body), "{body}");
        }
        for body in [
            r#"{"a":"_method"}"#,
            r#"["_method", 1]"#,
            r#"{"a":"\"_method\":"}"#,
        ] {
            assert_eq!(scan(json, body, 1), None, "{body}");
        }
        assert!(found_in_every_split(
            "application/vnd.api+json",
            r#"{"_method":1}"#
        ));
    }

    #[test]
    fn other_types_are_not_scanned() {
        assert!(MethodFieldScan::for_content_types([&b"text/plain"[..]].into_iter()).is_none());
        assert!(MethodFieldScan::for_content_types(std::iter::empty()).is_none());
    }
}
