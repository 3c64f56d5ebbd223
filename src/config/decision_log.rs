//! The `[decision_log]` section: where the gateway writes one JSON line per decision, which of
//! its fields are masked, how long a line may be and how many lines may wait to be written.

use super::defaults as default;
use super::file::DecisionLogFile;
use super::issues::Issues;
use super::model::{DecisionLogSettings, DecisionLogTarget};
use super::values::resolve;
use std::path::Path;

/// The fields of a decision log line that can be masked: the request's path, what names the
/// caller, the values taken from the request, the mask, the evidence's issuers and a refusal's
/// description.
pub const MASKABLE: [&str; 10] = [
    "path",
    "caller",
    "caller.id",
    "caller.acting_for",
    "values",
    "mask",
    "mask.access_subject",
    "mask.identifiers",
    "evidence.issuers",
    "description",
];

/// The shortest bound of a line: what a line without its masked and variable fields takes.
const MIN_LINE_BYTES: usize = 1024;

pub(super) fn build(
    base: &Path,
    f: DecisionLogFile,
    issues: &mut Issues,
) -> Option<DecisionLogSettings> {
    let target = match f.path.as_deref() {
        None | Some("") => {
            issues.add("decision_log.path", "missing: a file, or \"-\" for stdout");
            return None;
        }
        Some("-") => DecisionLogTarget::Stdout,
        Some(p) => DecisionLogTarget::File(resolve(base, Path::new(p))),
    };
    let mask = f.mask.unwrap_or_default();
    for field in &mask {
        if !MASKABLE.contains(&field.as_str()) {
            issues.add(
                "decision_log.mask",
                format!(
                    "{field:?} is not a field that can be masked ({})",
                    MASKABLE.join(", ")
                ),
            );
        }
    }
    let max_line_bytes = f.max_line_bytes.unwrap_or(default::DECISION_LOG_MAX_LINE);
    if max_line_bytes < MIN_LINE_BYTES {
        issues.add(
            "decision_log.max_line_bytes",
            format!("at least {MIN_LINE_BYTES}"),
        );
    }
    let queue = f.queue.unwrap_or(default::DECISION_LOG_QUEUE);
    if queue == 0 {
        issues.add("decision_log.queue", "at least 1");
    }
    Some(DecisionLogSettings {
        target,
        mask,
        max_line_bytes,
        queue,
    })
}
