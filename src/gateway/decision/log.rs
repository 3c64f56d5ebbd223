//! The decision log: one JSON line per decision, for operators to find why a request was refused
//! (by the `decision_id` the consumer quotes) and to read what shadow mode would have refused.
//! A line is made on the request's thread in a buffer of that thread's own and appended to a
//! buffer shared with the log's writer, which takes what has gathered, a few dozen times a second,
//! and writes it on a thread of its own. When `queue` lines wait or are being written, a line is
//! dropped and counted, never waited for. Configured fields are masked, and a line longer than
//! its bound is cut to the fields that identify the decision.

use super::{Caller, Decision, DecisionId, EvidenceSource, EvidenceUsed, Mode, Stage, Taken};
use crate::config::model::{DecisionLogSettings, DecisionLogTarget};
use crate::gateway::reject::Reject;
use crate::scheme::evaluation::DecidedBy;
use crate::telemetry::Metrics;
use serde::{Serialize, Serializer};
use serde_json::{json, Value};
use std::cell::RefCell;
use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// What a masked field says instead.
const MASKED: &str = "[masked]";
/// How long the writer lets lines gather after writing what had come.
const GATHER: Duration = Duration::from_millis(20);
/// The most a thread's own line buffer keeps between lines (a longer line's is given back).
const KEPT_SCRATCH: usize = 64 << 10;
/// The most the writer's buffer keeps between batches (a burst's is given back once written).
const KEPT_BATCH: usize = 1 << 20;

/// The lines waiting for the writer, and what it has written.
#[derive(Default)]
struct Pending {
    bytes: Vec<u8>,
    /// Lines in `bytes`, and lines the writer has taken and not yet written: together at most
    /// `queue`.
    lines: usize,
    writing: usize,
    /// Lines appended since the log was opened, and lines the writer has finished with.
    appended: u64,
    done: u64,
    /// The log is dropped: the writer writes what is left and ends.
    closed: bool,
}

/// What the request threads and the writer share.
#[derive(Default)]
struct Shared {
    pending: Mutex<Pending>,
    /// Lines have come (or the log closed): the writer wakes.
    arrived: Condvar,
    /// The writer finished with a batch.
    written: Condvar,
}

impl Shared {
    fn pending(&self) -> MutexGuard<'_, Pending> {
        // A panic elsewhere while the lock was held leaves whole lines behind: go on with them.
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The writer of the decision log; dropping it lets its thread write out what is queued and end.
pub struct DecisionLog {
    shared: Arc<Shared>,
    settings: DecisionLogSettings,
    metrics: Metrics,
}

impl DecisionLog {
    /// Open the log (a file is created or appended to) and start its writer.
    pub fn open(settings: &DecisionLogSettings, metrics: Metrics) -> Result<Self, String> {
        let out: Box<dyn Write + Send> = match &settings.target {
            DecisionLogTarget::Stdout => Box::new(std::io::stdout()),
            DecisionLogTarget::File(path) => Box::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .map_err(|e| format!("the decision log {}: {e}", path.display()))?,
            ),
        };
        let shared = Arc::new(Shared::default());
        let theirs = shared.clone();
        let written = metrics.decision_log.with_label_values(&["written"]);
        let failed = metrics.decision_log.with_label_values(&["failed"]);
        std::thread::Builder::new()
            .name("decision-log".into())
            .spawn(move || {
                let mut out = out;
                // Whole lines only are taken, and written in one go: the lines of two writers
                // (before and after a reload) do not mix.
                let mut batch = Vec::new();
                loop {
                    let (lines, closed) = {
                        let mut p = theirs.pending();
                        while p.bytes.is_empty() && !p.closed {
                            p = theirs
                                .arrived
                                .wait(p)
                                .unwrap_or_else(PoisonError::into_inner);
                        }
                        std::mem::swap(&mut p.bytes, &mut batch);
                        p.writing = std::mem::take(&mut p.lines);
                        (p.writing, p.closed)
                    };
                    if lines > 0 {
                        match out.write_all(&batch).and_then(|()| out.flush()) {
                            Ok(()) => written.inc_by(lines as u64),
                            Err(_) => failed.inc_by(lines as u64),
                        }
                        batch.clear();
                        if batch.capacity() > KEPT_BATCH {
                            batch = Vec::new();
                        }
                        let mut p = theirs.pending();
                        p.done += lines as u64;
                        p.writing = 0;
                        drop(p);
                        theirs.written.notify_all();
                    }
                    if closed && theirs.pending().bytes.is_empty() {
                        break;
                    }
                    // A busy gateway wakes this thread a few dozen times a second, not once per
                    // request.
                    std::thread::sleep(GATHER);
                }
            })
            .map_err(|e| format!("the decision log's writer: {e}"))?;
        Ok(DecisionLog {
            shared,
            settings: settings.clone(),
            metrics,
        })
    }

    /// Write out every line queued so far, waiting at most `within` (at the end of a graceful
    /// shutdown: the process exits after it, and the lines it holds would be lost). A writer
    /// that cannot write (a stalled pipe) does not hold it past the deadline.
    pub fn flush(&self, within: Duration) {
        let deadline = Instant::now() + within;
        let mut p = self.shared.pending();
        let target = p.appended;
        self.shared.arrived.notify_one();
        while p.done < target {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            p = match self.shared.written.wait_timeout(p, left) {
                Ok((p, _)) => p,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    /// Queue the line of a decision whose answer had `status`, after `duration`.
    pub fn write(&self, d: &Decision, status: u16, duration: Duration) {
        thread_local! {
            static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
        }
        // A thread whose own buffer is gone (it is ending) makes the line in a new one.
        let queued =
            SCRATCH.try_with(|line| self.queue(&mut line.borrow_mut(), d, status, duration));
        if queued.is_err() {
            self.queue(&mut Vec::new(), d, status, duration);
        }
    }

    /// Make the line in `line` and append it to what the writer takes, or drop it when `queue`
    /// lines wait.
    fn queue(&self, line: &mut Vec<u8>, d: &Decision, status: u16, duration: Duration) {
        line.clear();
        line_into(line, d, status, duration, &self.settings);
        let mut p = self.shared.pending();
        if p.lines + p.writing >= self.settings.queue {
            drop(p);
            self.metrics
                .decision_log
                .with_label_values(&["dropped"])
                .inc();
        } else {
            let first = p.lines == 0;
            p.bytes.extend_from_slice(line);
            p.lines += 1;
            p.appended += 1;
            drop(p);
            if first {
                self.shared.arrived.notify_one();
            }
        }
        if line.capacity() > KEPT_SCRATCH {
            *line = Vec::new();
        }
    }
}

impl Drop for DecisionLog {
    fn drop(&mut self) {
        self.shared.pending().closed = true;
        self.shared.arrived.notify_one();
    }
}

fn millis(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

/// A line of the log as it is written: borrowed from the decision, serialized at once (no
/// intermediate JSON tree on the request's path).
#[derive(Serialize)]
struct Line<'a> {
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
    fn write(&self, buf: &mut Vec<u8>) {
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

/// Whether no byte of `s` needs escaping in JSON (a quote, a backslash, a control character);
/// checked without stopping at the first, with vector instructions.
fn plain(s: &str) -> bool {
    s.bytes().fold(0u8, |any, b| {
        any | u8::from((b < b' ') | (b == b'"') | (b == b'\\'))
    }) == 0
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
struct Rfc3339(SystemTime);

impl Rfc3339 {
    fn bytes(&self) -> [u8; 30] {
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
    fn of(d: &'a Decision, answered: Option<(u16, Duration)>) -> Self {
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
    let start = buf.len();
    let of = Line::of(d, Some((status, duration)));
    match settings.mask.is_empty() {
        true => of.write(buf),
        false => {
            let mut v = serde_json::to_value(&of).unwrap_or_default();
            for field in &settings.mask {
                mask(&mut v, field);
            }
            let _ = serde_json::to_writer(&mut *buf, &v);
        }
    }
    if buf.len() - start >= settings.max_line_bytes {
        buf.truncate(start);
        let v = serde_json::to_value(&of).unwrap_or_default();
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
        let mut cut = serde_json::Map::new();
        for key in keep {
            if let Some(value) = v.get(key) {
                cut.insert(key.into(), value.clone());
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

#[cfg(test)]
mod tests {
    use super::{to_json, DecisionLog, Line, Rfc3339};
    use crate::config::model::{DecisionLogSettings, DecisionLogTarget};
    use crate::gateway::decision::{
        Assessed, Decision, Evaluated, EvidenceSource, EvidenceUsed, Mode, Taken,
    };
    use crate::gateway::reject::{Reject, Unavailable};
    use crate::peers::registry::RegistryFailure;
    use crate::scheme::evaluation::{DecidedBy, Decision as Verdict, DenyReason, Evaluation};
    use crate::scheme::evidence::AccessRequest;
    use crate::telemetry::Metrics;
    use std::sync::Arc;
    use std::time::{Duration, UNIX_EPOCH};
    use time::format_description::well_known::Rfc3339 as Format;
    use time::OffsetDateTime;

    #[test]
    fn times_are_written_as_rfc3339_in_utc_with_nanoseconds() {
        // The epoch, leap days, the turn of centuries and of the year 2100, and now.
        let secs = [
            0,
            951_782_400,
            951_868_800,
            4_107_542_400,
            4_102_444_799,
            1_795_500_000,
        ];
        for (i, secs) in secs.into_iter().enumerate() {
            let at = UNIX_EPOCH + Duration::new(secs, 7 + 123_456_789 * i as u32);
            let ours = String::from_utf8(Rfc3339(at).bytes().to_vec()).unwrap();
            let parsed = OffsetDateTime::parse(&ours, &Format).unwrap();
            assert_eq!(parsed, OffsetDateTime::from(at), "{ours}");
        }
        let now = std::time::SystemTime::now();
        let ours = String::from_utf8(Rfc3339(now).bytes().to_vec()).unwrap();
        assert_eq!(
            OffsetDateTime::parse(&ours, &Format).unwrap(),
            OffsetDateTime::from(now)
        );
    }

    /// Every shape of line, with strings that need escaping in every field that can carry one.
    fn decisions() -> Vec<Decision> {
        let odd = "C1\"\\\u{1}\n\u{7f}é\u{2028}";
        let mut full = Decision::new();
        // A backslash alone, a quote alone, a control character alone.
        full.method = "G\\ET".into();
        full.route = "containers\"read".into();
        full.path = format!("/api/containers/{odd}");
        full.mode = Mode::Shadow;
        full.called_by_party("EU.EORI.NL000000001".into());
        if let Some(c) = full.caller.as_mut() {
            c.acting_for = Some(odd.into());
        }
        full.values = vec![
            Taken {
                name: "identifiers".into(),
                template: "{path.id}".into(),
                value: odd.into(),
            },
            Taken {
                name: "attributes".into(),
                template: "*".into(),
                value: "\t".into(),
            },
        ];
        full.mask = Some(AccessRequest {
            policy_issuer: "EU.EORI.NL000000005".into(),
            access_subject: "EU.EORI.NL000000001".into(),
            service_providers: vec!["EU.EORI.NL000000003".into()],
            resource_type: "CONTAINER".into(),
            identifiers: vec![odd.into(), "C2".into()],
            attributes: vec![],
            actions: vec!["iSHARE.READ".into()],
            required_licences: vec!["ISHARE.0001".into()],
            ..AccessRequest::default()
        });
        let places = vec![
            DecidedBy {
                step: 0,
                policy_set: Some(0),
                policy: Some(1),
                rule: Some(2),
                part: Some(odd.into()),
            },
            DecidedBy::default(),
            DecidedBy {
                step: 12,
                policy_set: Some(0),
                policy: Some(13),
                rule: Some(2),
                part: Some("conditions.allOf[1]".into()),
            },
            DecidedBy {
                step: 1,
                policy_set: Some(4),
                ..DecidedBy::default()
            },
        ];
        full.assessed = Some(assessed(EvidenceSource::Given { from: odd.into() }, places));
        full.shadow_denied(&Reject::NotFound);
        full.decided_in = Some(Duration::from_micros(1234));
        let mut by_header = full.clone();
        by_header.assessed = Some(assessed(EvidenceSource::Header, Vec::new()));
        let mut by_registry = Decision::new();
        by_registry.assessed = Some(Assessed {
            cache_hit: true,
            ..assessed(
                EvidenceSource::Registry {
                    registry: "EU.EORI.NL000000004".into(),
                },
                Vec::new(),
            )
        });
        let mut refused = Decision::new();
        let failure = RegistryFailure::Answer {
            registry: "EU.EORI.NL000000004".into(),
            problem: odd.into(),
        };
        refused.refused(&Reject::Unavailable(Unavailable::Registry(failure)));
        vec![full, by_header, by_registry, refused, Decision::new()]
    }

    fn assessed(source: EvidenceSource, decided_by: Vec<DecidedBy>) -> Assessed {
        let evaluation = Evaluation {
            decision: Verdict::Deny(DenyReason::NoPolicy),
            decided_by,
        };
        let evidence = EvidenceUsed {
            source,
            issuers: vec!["EU.EORI.NL000000005".into(), "a\"b".into()],
            signers: vec!["EU.EORI.NL000000004".into()],
        };
        Assessed {
            evaluated: Arc::new(Evaluated::new(evaluation, evidence)),
            cache_hit: false,
        }
    }

    #[test]
    fn a_line_is_written_byte_for_byte_as_serde_json_writes_it() {
        for (i, d) in decisions().iter().enumerate() {
            for answered in [None, Some((403, Duration::from_nanos(1_500_001)))] {
                let of = Line::of(d, answered);
                let mut ours = Vec::new();
                of.write(&mut ours);
                let serde = serde_json::to_string(&of).unwrap();
                assert_eq!(String::from_utf8(ours).unwrap(), serde, "decision {i}");
            }
        }
    }

    #[test]
    fn a_registry_answer_not_addressed_to_us_is_said_in_the_line_with_both_audiences() {
        let mut d = Decision::new();
        let problem = "the answer is addressed to 2f5c6d0e-user (aud), not to EU.EORI.NL000000003";
        let failure = RegistryFailure::Answer {
            registry: "EU.EORI.NL000000004".into(),
            problem: problem.into(),
        };
        d.refused(&Reject::Unavailable(Unavailable::Registry(failure)));
        let line = to_json(&d);
        assert_eq!(line["reason"], "registry_garbled");
        assert_eq!(
            line["description"],
            "the authorisation registry's answer is not usable evidence; the gateway's log and \
             decision log say why"
        );
        assert_eq!(
            line["detail"],
            format!("the answer of EU.EORI.NL000000004 is not usable evidence: {problem}")
        );
        // A refusal whose answer says it all has no detail.
        let mut d = Decision::new();
        d.refused(&Reject::NotFound);
        assert!(to_json(&d).get("detail").is_none());
    }

    #[test]
    fn the_writer_writes_whole_lines_in_order_and_counts_what_a_full_queue_drops() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("decisions.log");
        let settings = DecisionLogSettings {
            target: DecisionLogTarget::File(path.clone()),
            mask: Vec::new(),
            max_line_bytes: 16 * 1024,
            queue: 1,
        };
        let metrics = Metrics::new();
        let log = DecisionLog::open(&settings, metrics.clone()).unwrap();
        let count = |outcome: &str| metrics.decision_log.with_label_values(&[outcome]).get();
        // One line waits at most: a burst keeps the first and drops the rest until the writer
        // has taken it.
        let sent: Vec<Decision> = (0..500).map(|_| Decision::new()).collect();
        for d in &sent {
            log.write(d, 200, Duration::from_millis(1));
        }
        log.flush(Duration::from_secs(10));
        let (written, dropped) = (count("written"), count("dropped"));
        assert_eq!(written + dropped, 500);
        assert!(
            written >= 1 && dropped >= 1,
            "{written} written, {dropped} dropped"
        );
        // After the burst, each line waits alone again and is written; dropping the log writes
        // out what it holds.
        let last = Decision::new();
        log.write(&last, 403, Duration::ZERO);
        drop(log);
        let text = (0..500)
            .map(|_| {
                std::thread::sleep(Duration::from_millis(10));
                std::fs::read_to_string(&path).unwrap()
            })
            .find(|t| t.contains(last.id.as_str()) && count("written") == written + 1)
            .expect("the last line, written and counted when the log was dropped");
        let ids: Vec<String> = text
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .map(|v| v["decision_id"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(ids.len() as u64, written + 1);
        assert_eq!(ids.first().map(String::as_str), Some(sent[0].id.as_str()));
        assert_eq!(ids.last().map(String::as_str), Some(last.id.as_str()));
        let order: Vec<usize> = ids[..ids.len() - 1]
            .iter()
            .map(|id| sent.iter().position(|d| d.id.as_str() == id).unwrap())
            .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
        assert_eq!(count("failed"), 0);
    }
}
