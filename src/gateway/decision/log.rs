//! The decision log: one JSON line per decision, for operators to find why a request was refused
//! (by the `decision_id` the consumer quotes) and to read what shadow mode would have refused.
//! Lines are made on the request's thread and written by a thread of their own; when the queue is
//! full a line is dropped and counted, never waited for. Configured fields are masked, and a line
//! longer than its bound is cut to the fields that identify the decision.

use super::Decision;
use crate::config::model::{DecisionLogSettings, DecisionLogTarget};
use crate::telemetry::Metrics;
use serde_json::{json, Value};
use std::io::Write;
use std::sync::mpsc::{sync_channel, RecvTimeoutError, SyncSender, TrySendError};
use std::time::Duration;

/// What a masked field says instead.
const MASKED: &str = "[masked]";
/// How long written lines may wait in the writer's buffer.
const FLUSH_EVERY: Duration = Duration::from_millis(500);

/// The writer of the decision log; dropping the last clone lets its thread write out what is
/// queued and end.
pub struct DecisionLog {
    lines: SyncSender<String>,
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
        let (lines, queue) = sync_channel::<String>(settings.queue);
        let max_line = settings.max_line_bytes;
        let written = metrics.decision_log.with_label_values(&["written"]);
        let failed = metrics.decision_log.with_label_values(&["failed"]);
        std::thread::Builder::new()
            .name("decision-log".into())
            .spawn(move || {
                // Larger than a line: the buffer is written out at a line's end, so the lines of
                // two writers (before and after a reload) do not mix.
                let capacity = (4 * max_line).max(64 << 10);
                let mut out = std::io::BufWriter::with_capacity(capacity, out);
                loop {
                    match queue.recv_timeout(FLUSH_EVERY) {
                        Ok(line) => match out.write_all(line.as_bytes()) {
                            Ok(()) => written.inc(),
                            Err(_) => failed.inc(),
                        },
                        Err(RecvTimeoutError::Timeout) => {
                            let _ = out.flush();
                        }
                        Err(RecvTimeoutError::Disconnected) => break,
                    }
                }
                let _ = out.flush();
            })
            .map_err(|e| format!("the decision log's writer: {e}"))?;
        Ok(DecisionLog {
            lines,
            settings: settings.clone(),
            metrics,
        })
    }

    /// Queue the line of a decision whose answer had `status`, after `duration`.
    pub fn write(&self, d: &Decision, status: u16, duration: Duration) {
        let line = line(d, status, duration, &self.settings);
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) =
            self.lines.try_send(line)
        {
            self.metrics
                .decision_log
                .with_label_values(&["dropped"])
                .inc();
        }
    }
}

fn millis(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

/// The decision as JSON: what `explain --json` prints, and each line of the log before masking.
pub fn to_json(d: &Decision) -> Value {
    let time = time::OffsetDateTime::from(d.at)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default();
    let mask = d.mask.as_ref().map(|m| {
        json!({
            "policy_issuer": m.policy_issuer,
            "access_subject": m.access_subject,
            "service_providers": m.service_providers,
            "resource_type": m.resource_type,
            "identifiers": m.identifiers,
            "attributes": m.attributes,
            "actions": m.actions,
            "licences": m.required_licences,
        })
    });
    let mut v = json!({
        "decision_id": d.id,
        "time": time,
        "route": d.route,
        "mode": d.mode,
        "method": d.method,
        "path": d.path,
        "caller": d.caller,
        "values": d.values,
        "mask": mask,
        "evidence": d.evidence,
        "decided_by": d.decided_by.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "stage": d.stage,
        "outcome": d.outcome.as_str(),
        "reason": d.reason,
        "description": d.description,
        "decision_ms": d.decided_in.map(millis),
    });
    if let Some(object) = v.as_object_mut() {
        object.retain(|_, value| !value.is_null());
    }
    v
}

/// One line of the log: the decision, its answer's status and the request's duration, with the
/// configured fields masked, at most `max_line_bytes` long (with its newline).
pub fn line(
    d: &Decision,
    status: u16,
    duration: Duration,
    settings: &DecisionLogSettings,
) -> String {
    let mut v = to_json(d);
    v["status"] = json!(status);
    v["duration_ms"] = json!(millis(duration));
    for field in &settings.mask {
        mask(&mut v, field);
    }
    let mut text = v.to_string();
    if text.len() >= settings.max_line_bytes {
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
        text = Value::Object(cut).to_string();
    }
    text.push('\n');
    text
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
