//! A `_method` field in a request body: Rails, Laravel, Symfony and Express's method-override read
//! it from a form (`application/x-www-form-urlencoded`, `multipart/*`) and Laravel also from JSON,
//! and then run the request as that method, whatever the request's own. The body is scanned as it
//! streams past, in constant memory, by the rules the loosest of those readers apply: the type
//! read as PHP and Rack read it (the first word before `;`, `,` or a space; no type at all is a
//! form to Rack; anything naming `json` is JSON to Laravel), names percent-decoded and folded as
//! query keys are (`_Method`, `%5Fmethod`, `_method[]`, `_method%00x`), a multipart part's headers
//! searched whole for the name (quoting, `Content-ID` and header lines each reader takes its own
//! way), JSON keys unescaped at any depth. What cannot be read one way (a compressed body, a
//! boundary that readers cut differently, JSON in another charset) is refused.

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
    /// A body that cannot be read as far as a `_method` field could be: why.
    Unreadable(&'static str),
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
    /// A scan of a body with these `Content-Type` values (every one, as a backend may read any;
    /// none at all is a form) and `Content-Encoding` values: None when no reader takes the body as
    /// a form or JSON; refused when the body could not be read one way.
    pub fn for_body<'a>(
        content_types: impl Iterator<Item = &'a [u8]>,
        content_encodings: impl Iterator<Item = &'a [u8]>,
    ) -> Result<Option<Self>, Finding> {
        let mut readers = Vec::new();
        let mut typed = false;
        for value in content_types {
            typed = true;
            readers.extend(readers_for(value)?);
        }
        if !typed {
            readers.push(Reader::Form(FormReader::default()));
        }
        if readers.is_empty() {
            return Ok(None);
        }
        let encoded = content_encodings
            .flat_map(|v| v.split(|b| *b == b','))
            .any(|e| {
                !e.trim_ascii().is_empty() && !e.trim_ascii().eq_ignore_ascii_case(b"identity")
            });
        if encoded {
            return Err(Finding::Unreadable(
                "a form or JSON body with a Content-Encoding cannot be read for a _method field",
            ));
        }
        Ok(Some(MethodFieldScan { readers }))
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

/// The readers a body of this `Content-Type` gets: the first word as PHP and Rack cut it (at `;`,
/// `,` or white space) a form or `multipart/*`, or any mention of `json`.
fn readers_for(value: &[u8]) -> Result<Vec<Reader>, Finding> {
    let written = String::from_utf8_lossy(value);
    let text = written.to_ascii_lowercase();
    let media = text
        .split([';', ',', ' ', '\t'])
        .find(|word| !word.is_empty())
        .unwrap_or_default();
    let mut readers = Vec::new();
    if media.is_empty() || media == "application/x-www-form-urlencoded" {
        readers.push(Reader::Form(FormReader::default()));
    }
    if media.starts_with("multipart/") {
        readers.push(Reader::Multipart(MultipartReader::new(boundary(
            &written, &text,
        )?)));
    }
    if text.contains("json") {
        let charset = text.split_once("charset=").map(|(_, rest)| {
            rest.split([';', ',', ' '])
                .next()
                .unwrap_or_default()
                .trim_matches('"')
        });
        if charset.is_some_and(|c| c != "utf-8" && c != "utf8") {
            return Err(Finding::Unreadable(
                "a JSON body in a charset other than UTF-8 cannot be read for a _method field",
            ));
        }
        readers.push(Reader::Json(JsonReader::default()));
    }
    Ok(readers)
}

/// The boundary of a multipart type, when every reader finds the same one: named once, of the
/// characters RFC 2046 allows but white space (no `,`, `;` or quote, which readers cut at).
/// `written` is the type as sent, `text` the same in lower case.
fn boundary<'a>(written: &'a str, text: &str) -> Result<&'a str, Finding> {
    const AMBIGUOUS: Finding = Finding::Unreadable(
        "a multipart body whose boundary readers could find differently cannot be read for a _method field",
    );
    if text.matches("boundary").count() != 1 {
        return Err(AMBIGUOUS);
    }
    let at = text.find("boundary").ok_or(AMBIGUOUS)? + "boundary".len();
    let rest = &written[at..];
    let value = rest.trim_start().strip_prefix('=').ok_or(AMBIGUOUS)?.trim();
    let value = value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or(value);
    let allowed = |c: char| c.is_ascii_alphanumeric() || "'()+_-./:=?".contains(c);
    match value.len() {
        1..=70 if value.chars().all(allowed) => Ok(value),
        _ => Err(AMBIGUOUS),
    }
}

/// Whether a name as a framework reads it (decoded) is `_method`: folded as query keys are, and
/// without what follows a `[` (`_method[]` is the same field to PHP and Rack).
fn is_method(decoded: &str) -> bool {
    let base = decoded.split(['[', '\0']).next().unwrap_or_default();
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

/// Lines of a multipart body: after each line that starts with the delimiter (as PHP finds
/// them: after the closing one too), the part's headers up to an empty line, searched whole.
struct MultipartReader {
    /// `--boundary`
    delimiter: Vec<u8>,
    /// The current line, as far as it is kept: in part headers up to [`MAX_PART_HEADERS`] in all,
    /// elsewhere as much as shows whether it starts with the delimiter.
    line: Vec<u8>,
    /// The part-header block read so far (lines joined by `\n`), while in one.
    headers: Option<Vec<u8>>,
}

impl MultipartReader {
    fn new(boundary: &str) -> Self {
        MultipartReader {
            delimiter: format!("--{boundary}").into_bytes(),
            line: Vec::new(),
            headers: None,
        }
    }

    fn feed(&mut self, chunk: &[u8]) -> Option<Finding> {
        for &b in chunk {
            if b == b'\n' {
                if self.end_line() {
                    return Some(Finding::MethodOverride);
                }
                continue;
            }
            let room = match &self.headers {
                Some(block) => MAX_PART_HEADERS.saturating_sub(block.len()),
                None => self.delimiter.len(),
            };
            if self.line.len() < room {
                self.line.push(b);
            } else if self.headers.is_some() {
                return Some(Finding::Unreadable(
                    "a part of the multipart body has headers longer than 8 KiB",
                ));
            }
        }
        None
    }

    /// A line ended: whether it ended a part-header block that names `_method`.
    fn end_line(&mut self) -> bool {
        let mut line = std::mem::take(&mut self.line);
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        if let Some(mut block) = self.headers.take() {
            if line.is_empty() {
                return names_method(&block);
            }
            block.push(b'\n');
            block.extend_from_slice(&line);
            self.headers = Some(block);
        } else if line.starts_with(&self.delimiter) {
            self.headers = Some(Vec::new());
        }
        false
    }
}

/// Whether a part-header block names a field `_method` in any way a reader could take it: the
/// word `_method` (percent-decoded, in any case, `.` read as `_`) anywhere in it, not within a
/// longer name (`payment_method` is another field; `_method[]`, `"_method"`, `_method%00` are it).
fn names_method(block: &[u8]) -> bool {
    let text: Vec<u8> = form_decode(block)
        .bytes()
        .map(|b| match b.to_ascii_lowercase() {
            b'.' => b'_',
            other => other,
        })
        .collect();
    let within_name = |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_');
    text.windows(b"_method".len())
        .enumerate()
        .filter(|(_, w)| *w == b"_method")
        .any(|(at, _)| {
            !within_name(at.checked_sub(1).and_then(|i| text.get(i)))
                && !within_name(text.get(at + b"_method".len()))
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

    fn scan_of(
        content_types: &[&str],
        encodings: &[&str],
    ) -> Result<Option<MethodFieldScan>, Finding> {
        MethodFieldScan::for_body(
            content_types.iter().map(|t| t.as_bytes()),
            encodings.iter().map(|e| e.as_bytes()),
        )
    }

    /// What a scan of `body` of `content_type` finds, fed `step` bytes at a time.
    fn scan(content_type: &str, body: &str, step: usize) -> Option<Finding> {
        let mut scan = scan_of(&[content_type], &[])
            .unwrap()
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
            "_method%00x=DELETE",
            "a=x&_method",
            ".method=PATCH",
        ] {
            assert!(found_in_every_split(FORM, body), "{body}");
        }
        for body in [
            "a=_method",
            "method=DELETE",
            "x_method=DELETE",
            "payment_method=card",
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
    fn the_type_is_read_as_the_loosest_reader_reads_it() {
        let body = "_method=DELETE";
        for content_type in [
            "application/x-www-form-urlencoded, text/plain",
            "application/x-www-form-urlencoded x",
            "Application/X-WWW-Form-Urlencoded ;charset=utf-8",
            "",
            "  ",
        ] {
            assert!(found_in_every_split(content_type, body), "{content_type:?}");
        }
        // No Content-Type at all is a form (Rack).
        let mut untyped = scan_of(&[], &[]).unwrap().unwrap();
        assert_eq!(untyped.feed(body.as_bytes()), Some(Finding::MethodOverride));
        // Anything that mentions json is JSON (Laravel).
        for content_type in [
            "text/json",
            "application/x-json",
            "application/x-www-form-urlencoded; x=/json",
        ] {
            assert!(
                found_in_every_split(content_type, r#"{"_method":"DELETE"}"#),
                "{content_type}"
            );
        }
        // A type that is none of these is not scanned.
        assert!(scan_of(&["text/plain"], &[]).unwrap().is_none());
        assert!(scan_of(&["application/octet-stream", "image/png"], &[])
            .unwrap()
            .is_none());
    }

    #[test]
    fn what_cannot_be_read_one_way_is_refused() {
        let unreadable = |types: &[&str], encodings: &[&str]| {
            matches!(scan_of(types, encodings), Err(Finding::Unreadable(_)))
        };
        assert!(unreadable(&[FORM], &["gzip"]));
        assert!(unreadable(&[], &["br"]));
        assert!(unreadable(&["application/json"], &["identity, deflate"]));
        assert!(!unreadable(&[FORM], &["identity"]));
        assert!(
            !unreadable(&["image/png"], &["gzip"]),
            "not a form: not scanned"
        );
        assert!(unreadable(&["application/json; charset=utf-16le"], &[]));
        for boundary in [
            "multipart/form-data",
            "multipart/form-data; boundary=XyZ,foo",
            "multipart/form-data; boundary=\"a;b\"",
            "multipart/form-data; xboundary=AAA; boundary=BBB",
            "multipart/form-data; boundary=",
            "multipart/form-data; boundary=a b",
        ] {
            assert!(unreadable(&[boundary], &[]), "{boundary}");
        }
    }

    #[test]
    fn a_multipart_part_named_method_is_found_however_its_headers_say_it() {
        let ct = "multipart/form-data; boundary=XyZ";
        let part =
            |headers: &str, content: &str| format!("--XyZ\r\n{headers}\r\n\r\n{content}\r\n");
        for headers in [
            "Content-Disposition: form-data; name=\"_method\"",
            "Content-Disposition: form-data; name=_method",
            "CONTENT-DISPOSITION: FORM-DATA; NAME=\"_Method\"",
            "Content-Disposition: form-data; filename=\"a;b\"; name=\"_method\"",
            "Content-Disposition: form-data; a=x\"y; name=\"_method\"",
            "Content-Disposition: form-data; a='\"'; name=_method; b='\"'",
            "Content-Disposition: form-data; name*=utf-8''%5Fmethod",
            "Content-Disposition: form-data;\r\n name=\"_method\"",
            "Content-Disposition: form-data\r\n; name=\"_method\"",
            "Content-ID: _method",
            "Content-Disposition: form-data; name=\"_method[]\"",
            "Content-Disposition: form-data; name=\".method\"",
        ] {
            let body = format!(
                "{}{}--XyZ--\r\n",
                part("Content-Disposition: form-data; name=\"a\"", "1"),
                part(headers, "DELETE")
            );
            assert!(found_in_every_split(ct, &body), "{headers}");
        }
        // After the closing delimiter, a part PHP still reads.
        let late = format!(
            "--XyZ--\r\n{}",
            part("Content-Disposition: form-data; name=\"_method\"", "PUT")
        );
        assert!(found_in_every_split(ct, &late));
        // multipart/mixed is read as multipart too (Rack).
        assert!(found_in_every_split(
            "multipart/mixed; boundary=XyZ",
            &part("Content-Disposition: form-data; name=\"_method\"", "PUT")
        ));
        // A file that holds a part-like text is content, not a part; other names pass.
        let inner = "Content-Disposition: form-data; name=\"_method\"\r\n\r\nDELETE";
        let body = format!(
            "{}--XyZ--\r\n",
            part(
                "Content-Disposition: form-data; name=\"f\"; filename=\"x\"",
                inner
            )
        );
        assert_eq!(scan(ct, &body, 5), None);
        let body = format!(
            "{}--XyZ--\r\n",
            part(
                "Content-Disposition: form-data; name=\"payment_method\"",
                "card"
            )
        );
        assert_eq!(scan(ct, &body, 5), None);
        // The boundary quoted, in another case of its name, kept in its own case.
        let body = format!(
            "{}--XyZ--\r\n",
            part("Content-Disposition: form-data; name=\"_method\"", "PUT")
        );
        assert_eq!(
            scan("Multipart/Form-Data; Boundary=\"XyZ\"", &body, 3),
            Some(Finding::MethodOverride)
        );
        assert_eq!(scan("multipart/form-data; boundary=xyz", &body, 3), None);
    }

    #[test]
    fn part_headers_beyond_the_bound_are_refused() {
        let body = format!(
            "--B\r\nContent-Disposition: form-data; filename=\"{}\"; name=\"_method\"\r\n\r\nx\r\n--B--",
            "a".repeat(MAX_PART_HEADERS)
        );
        assert!(matches!(
            scan("multipart/form-data; boundary=B", &body, 1000),
            Some(Finding::Unreadable(_))
        ));
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
}
