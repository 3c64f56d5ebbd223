//! A line of the decision log: the decision's fields written as JSON straight into a buffer (no
//! tree of values in between), the configured fields masked, and a line over its bound cut to the
//! fields that identify the decision.

use super::{Caller, Decision, DecisionId, EvidenceSource, EvidenceUsed, Mode, Stage, Taken};
use crate::config::model::DecisionLogSettings;
use crate::gateway::reject::Reject;
use crate::scheme::verdict::DecidedBy;
use serde::{Serialize, Serializer};
use serde_json::{json, Value};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What a masked field says instead.
const MASKED: &str = "[masked]";

fn millis(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

/// A line of the log as it is written: borrowed from the decision, serialized at once (no
/// intermediate JSON tree on the request's path).
#[derive(Serialize)]
pub(super) struct Line<'a> {
    decision_id: &'a DecisionId,
    time: Rfc3339,
    route: &'a str,
    mode: Mode,
    method: &'a str,
    path: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    caller: Option<&'a Caller>,
    values: &'a [Taken],
    #[serde(skip_serializing_if = "Option::is_none")]
    mask: Option<MaskLine<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    evidence: Option<EvidenceLine<'a>>,
    decided_by: Places<'a>,
    stage: Stage,
    outcome: &'static str,
    reason: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    /// What failed, for the operator, where the answer says only that something did (a
    /// dependency's failure: the registry's status and text, why its answer is not usable).
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    decision_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    duration_ms: Option<f64>,
}

impl Line<'_> {
    /// The line as JSON, exactly as serde_json writes it (field by field, in the struct's order),
    /// written directly: a string that needs no escaping (nearly all) is copied whole instead of
    /// being escaped byte by byte, and a place in the evidence is formatted without allocating.
    pub(super) fn write(&self, buf: &mut Vec<u8>) {
        let mut j = Json {
            buf,
            scratch: String::new(),
        };
        j.raw(b"{\"decision_id\":");
        j.text(self.decision_id.as_str());
        j.raw(b",\"time\":");
        j.text(std::str::from_utf8(&self.time.bytes()).unwrap_or_default());
        j.key_text("route", self.route);
        j.key_serde("mode", &self.mode);
        j.key_text("method", self.method);
        j.key_text("path", self.path);
        if let Some(c) = self.caller {
            j.raw(b",\"caller\":{\"type\":");
            j.serde(&c.kind);
            j.key_text("id", &c.id);
            if let Some(acting_for) = &c.acting_for {
                j.key_text("acting_for", acting_for);
            }
            j.raw(b"}");
        }
        j.raw(b",\"values\":[");
        for (i, v) in self.values.iter().enumerate() {
            j.raw(if i == 0 {
                b"{\"name\":"
            } else {
                b",{\"name\":"
            });
            j.text(&v.name);
            j.key_text("template", &v.template);
            j.key_text("value", &v.value);
            j.raw(b"}");
        }
        j.raw(b"]");
        if let Some(m) = &self.mask {
            j.raw(b",\"mask\":{\"policy_issuer\":");
            j.text(m.policy_issuer);
            j.key_text("access_subject", m.access_subject);
            j.key_list("service_providers", m.service_providers);
            j.key_text("resource_type", m.resource_type);
            j.key_list("identifiers", m.identifiers);
            j.key_list("attributes", m.attributes);
            j.key_list("actions", m.actions);
            j.key_list("licences", m.licences);
            j.raw(b"}");
        }
        if let Some(e) = &self.evidence {
            j.raw(b",\"evidence\":{\"source\":");
            match &e.used.source {
                EvidenceSource::Header => j.text("header"),
                EvidenceSource::Registry { registry } => {
                    j.text("registry");
                    j.key_text("registry", registry);
                }
                EvidenceSource::Given { from } => {
                    j.text("given");
                    j.key_text("from", from);
                }
            }
            j.key_list("issuers", &e.used.issuers);
            j.key_list("signers", &e.used.signers);
            j.raw(if e.cache_hit {
                b",\"cache_hit\":true}"
            } else {
                b",\"cache_hit\":false}"
            });
        }
        j.raw(b",\"decided_by\":[");
        for (i, place) in self.decided_by.0.iter().enumerate() {
            if i > 0 {
                j.raw(b",");
            }
            j.place(place);
        }
        j.raw(b"]");
        j.key_serde("stage", &self.stage);
        j.key_text("outcome", self.outcome);
        j.key_text("reason", self.reason);
        if let Some(description) = self.description {
            j.key_text("description", description);
        }
        if let Some(detail) = &self.detail {
            j.key_text("detail", detail);
        }
        if let Some(ms) = self.decision_ms {
            j.key_serde("decision_ms", &ms);
        }
        if let Some(status) = self.status {
            j.key_serde("status", &status);
        }
        if let Some(ms) = self.duration_ms {
            j.key_serde("duration_ms", &ms);
        }
        j.raw(b"}");
    }
}

/// Whether no byte of `s` needs escaping in JSON (a quote, a backslash, a control character):
/// eight bytes at a time, the last eight read again where the length is not a multiple of
/// eight; a string shorter than a word byte by byte.
pub(super) fn plain(s: &str) -> bool {
    let bytes = s.as_bytes();
    let word = |at: usize| {
        let mut w = [0; 8];
        w.copy_from_slice(&bytes[at..at + 8]);
        needs_escaping(u64::from_le_bytes(w))
    };
    match bytes.len() {
        0..8 => !bytes.iter().any(|&b| b < b' ' || b == b'"' || b == b'\\'),
        len => {
            let whole = (0..len / 8).fold(0, |escaped, i| escaped | word(8 * i));
            whole | word(len - 8) == 0
        }
    }
}

/// Not zero when a byte of `w` is below a space, a quote or a backslash. Each test is the
/// exact "some byte is below n" of bit twiddling (a byte's high bit set after subtracting n
/// from every byte, where it was clear before; a borrow can mark a byte above one found, never
/// a word with none): the byte compared with a space, and its difference from the quote and
/// from the backslash compared with one.
fn needs_escaping(w: u64) -> u64 {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    let below = |v: u64, n: u8| v.wrapping_sub(ONES * u64::from(n)) & !v & HIGH;
    let quote = ONES * u64::from(b'"');
    let backslash = ONES * u64::from(b'\\');
    below(w, b' ') | below(w ^ quote, 1) | below(w ^ backslash, 1)
}

/// JSON written into a line's buffer.
struct Json<'b> {
    buf: &'b mut Vec<u8>,
    /// Where a value written with `Display` is formatted, reused across the line.
    scratch: String,
}

impl Json<'_> {
    fn raw(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// A string: copied between quotes when no byte of it needs escaping (a quote, a backslash,
    /// a control character), else escaped by serde_json.
    fn text(&mut self, s: &str) {
        match plain(s) {
            true => {
                self.buf.reserve(s.len() + 2);
                self.buf.push(b'"');
                self.buf.extend_from_slice(s.as_bytes());
                self.buf.push(b'"');
            }
            false => self.serde(s),
        }
    }

    /// Any other value, as serde_json writes it (writing into a vector cannot fail).
    fn serde<T: Serialize + ?Sized>(&mut self, value: &T) {
        let _ = serde_json::to_writer(&mut *self.buf, value);
    }

    /// A place in the evidence, as its `Display` writes it, digit by digit.
    fn place(&mut self, place: &DecidedBy) {
        if !place.part.as_deref().is_none_or(plain) {
            return self.display(place);
        }
        self.raw(b"\"evidence[");
        self.serde(&place.step);
        for (name, index) in place.indices() {
            if let Some(i) = index {
                self.raw(b"].");
                self.raw(name.as_bytes());
                self.raw(b"[");
                self.serde(&i);
            }
        }
        self.raw(b"]");
        if let Some(part) = &place.part {
            self.raw(b".");
            self.raw(part.as_bytes());
        }
        self.raw(b"\"");
    }

    fn display(&mut self, value: &impl std::fmt::Display) {
        use std::fmt::Write as _;
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        let _ = write!(scratch, "{value}");
        self.text(&scratch);
        self.scratch = scratch;
    }

    fn key(&mut self, key: &str) {
        self.buf.reserve(key.len() + 4);
        self.buf.extend_from_slice(b",\"");
        self.buf.extend_from_slice(key.as_bytes());
        self.buf.extend_from_slice(b"\":");
    }

    fn key_text(&mut self, key: &str, s: &str) {
        self.key(key);
        self.text(s);
    }

    fn key_serde<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) {
        self.key(key);
        self.serde(value);
    }

    fn key_list(&mut self, key: &str, list: &[String]) {
        self.key(key);
        self.raw(b"[");
        for (i, s) in list.iter().enumerate() {
            if i > 0 {
                self.raw(b",");
            }
            self.text(s);
        }
        self.raw(b"]");
    }
}

/// A moment as RFC 3339 in UTC with nanoseconds (`2026-11-24T06:04:51.473222010Z`), written
/// digit by digit: a line is made for every request, and a general formatter costs more than the
/// rest of the line's fields together.
pub struct Rfc3339(pub SystemTime);

impl Rfc3339 {
    pub fn bytes(&self) -> [u8; 30] {
        let since = self.0.duration_since(UNIX_EPOCH).unwrap_or_default();
        let secs = since.as_secs();
        let (days, of_day) = (secs / 86_400, secs % 86_400);
        // Civil date from days since 1970-01-01 (H. Hinnant's days_from_civil, inverted).
        let z = days + 719_468;
        let era = z / 146_097;
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        let year = yoe + era * 400 + u64::from(month <= 2);
        let mut out = *b"0000-00-00T00:00:00.000000000Z";
        let mut put = |at: usize, width: usize, mut value: u64| {
            for i in (at..at + width).rev() {
                out[i] = b'0' + (value % 10) as u8;
                value /= 10;
            }
        };
        put(0, 4, year);
        put(5, 2, month);
        put(8, 2, day);
        put(11, 2, of_day / 3600);
        put(14, 2, of_day % 3600 / 60);
        put(17, 2, of_day % 60);
        put(20, 9, u64::from(since.subsec_nanos()));
        out
    }
}

impl Serialize for Rfc3339 {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let bytes = self.bytes();
        s.serialize_str(std::str::from_utf8(&bytes).unwrap_or_default())
    }
}

/// The mask asked, in the log's words.
#[derive(Serialize)]
struct MaskLine<'a> {
    policy_issuer: &'a str,
    access_subject: &'a str,
    service_providers: &'a [String],
    resource_type: &'a str,
    identifiers: &'a [String],
    attributes: &'a [String],
    actions: &'a [String],
    licences: &'a [String],
}

/// The evidence a decision used, and whether it came from the cache.
#[derive(Serialize)]
struct EvidenceLine<'a> {
    #[serde(flatten)]
    used: &'a EvidenceUsed,
    cache_hit: bool,
}

/// Where the decision was made, as paths into the evidence.
struct Places<'a>(&'a [DecidedBy]);

impl Serialize for Places<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Place<'a>(&'a DecidedBy);
        impl Serialize for Place<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self.0)
            }
        }
        s.collect_seq(self.0.iter().map(Place))
    }
}

impl<'a> Line<'a> {
    pub(super) fn of(d: &'a Decision, answered: Option<(u16, Duration)>) -> Self {
        let time = Rfc3339(d.at);
        Line {
            decision_id: &d.id,
            time,
            route: &d.route,
            mode: d.mode,
            method: &d.method,
            path: &d.path,
            caller: d.caller.as_ref(),
            values: &d.values,
            mask: d.mask.as_ref().map(|m| MaskLine {
                policy_issuer: &m.policy_issuer,
                access_subject: &m.access_subject,
                service_providers: &m.service_providers,
                resource_type: &m.resource_type,
                identifiers: &m.identifiers,
                attributes: &m.attributes,
                actions: &m.actions,
                licences: &m.required_licences,
            }),
            evidence: d.assessed.as_ref().map(|a| EvidenceLine {
                used: &a.evaluated.evidence,
                cache_hit: a.cache_hit,
            }),
            decided_by: Places(d.decided_by()),
            stage: d.stage,
            outcome: d.outcome.as_str(),
            reason: d.reason,
            description: d.description.as_deref(),
            detail: d.refusal.as_ref().and_then(Reject::log_detail),
            decision_ms: d.decided_in.map(millis),
            status: answered.map(|(status, _)| status),
            duration_ms: answered.map(|(_, duration)| millis(duration)),
        }
    }
}

/// The decision as JSON: what `explain --json` prints, and each line of the log before masking.
pub fn to_json(d: &Decision) -> Value {
    serde_json::to_value(Line::of(d, None)).unwrap_or_default()
}

/// One line of the log, appended to `buf`: the decision, its answer's status and the request's
/// duration, with the configured fields masked, at most `max_line_bytes` long (with its newline).
pub fn line_into(
    buf: &mut Vec<u8>,
    d: &Decision,
    status: u16,
    duration: Duration,
    settings: &DecisionLogSettings,
) {
    let of = Line::of(d, Some((status, duration)));
    if settings.mask.is_empty() {
        let start = buf.len();
        of.write(buf);
        if buf.len() - start < settings.max_line_bytes {
            buf.push(b'\n');
            return;
        }
        buf.truncate(start);
    }
    let keep = [
        "decision_id",
        "time",
        "route",
        "mode",
        "method",
        "stage",
        "outcome",
        "reason",
        "status",
        "decision_ms",
        "duration_ms",
    ];
    value_line_into(
        buf,
        serde_json::to_value(&of).unwrap_or_default(),
        settings,
        &keep,
    );
}

/// What the strings of a decision's line come to before escaping, or `None` where a part's size
/// is not known until it is written (a dependency's failure, which the line's `detail` names). A
/// decision handed to the log's writer holds about this much for its line.
pub(super) fn strings_of(d: &Decision) -> Option<usize> {
    if d.refusal.as_ref().is_some_and(|r| r.failure().is_some()) {
        return None;
    }
    let list = |l: &[String]| l.iter().map(String::len).sum::<usize>();
    let mut n = d.route.len() + d.method.len() + d.path.len();
    n += d.description.as_ref().map_or(0, String::len);
    if let Some(c) = &d.caller {
        n += c.id.len() + c.acting_for.as_ref().map_or(0, String::len);
    }
    n += (d.values.iter())
        .map(|v| v.name.len() + v.template.len() + v.value.len())
        .sum::<usize>();
    if let Some(m) = &d.mask {
        n += m.policy_issuer.len() + m.access_subject.len() + m.resource_type.len();
        n += list(&m.service_providers) + list(&m.identifiers) + list(&m.attributes);
        n += list(&m.actions) + list(&m.required_licences);
    }
    if let Some(a) = &d.assessed {
        let e = &a.evaluated.evidence;
        n += list(&e.issuers) + list(&e.signers);
        n += match &e.source {
            EvidenceSource::Header => 0,
            EvidenceSource::Registry { registry } => registry.len(),
            EvidenceSource::Given { from } => from.len(),
        };
    }
    n += (d.decided_by().iter())
        .map(|p| std::mem::size_of::<DecidedBy>() + p.part.as_deref().map_or(0, str::len))
        .sum::<usize>();
    Some(n)
}

/// A line of `v` appended to `buf`, the configured fields masked; one over `max_line_bytes` is
/// cut to the fields in `keep` and says it was.
pub fn value_line_into(
    buf: &mut Vec<u8>,
    mut v: Value,
    settings: &DecisionLogSettings,
    keep: &[&str],
) {
    let start = buf.len();
    for field in &settings.mask {
        mask(&mut v, field);
    }
    let _ = serde_json::to_writer(&mut *buf, &v);
    if buf.len() - start >= settings.max_line_bytes {
        buf.truncate(start);
        let mut cut = serde_json::Map::new();
        for key in keep {
            if let Some(value) = v.get(*key) {
                cut.insert((*key).into(), value.clone());
            }
        }
        cut.insert("truncated".into(), json!(true));
        let _ = serde_json::to_writer(&mut *buf, &Value::Object(cut));
    }
    buf.push(b'\n');
}

/// Replace a field (`name` or `name.member`) by "[masked]", where it is present.
fn mask(v: &mut Value, field: &str) {
    let mut target = Some(v);
    for part in field.split('.') {
        target = target.and_then(|t| t.get_mut(part));
    }
    if let Some(t) = target {
        *t = json!(MASKED);
    }
}
