//! The decision log: one JSON line per decision, for operators to find why a request was refused
//! (by the `decision_id` the consumer quotes) and to read what shadow mode would have refused.
//! A line is made on the request's thread in a buffer of that thread's own and appended to a
//! buffer shared with the log's writer, which takes what has gathered, a few dozen times a second,
//! and writes it on a thread of its own. When `queue` lines wait or are being written, a line is
//! dropped and counted, never waited for. Configured fields are masked, and a line longer than
//! its bound is cut to the fields that identify the decision.

use super::log_line::line_into;
use super::Decision;
use crate::config::model::{DecisionLogSettings, DecisionLogTarget};
use crate::telemetry::Metrics;
use std::cell::RefCell;
use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

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
        self.write_with(|line, settings| line_into(line, d, status, duration, settings));
    }

    /// Queue a line that `make` writes (one JSON object and its newline) under the log's
    /// settings: the gateway's decisions, and the consumer's side's calls.
    pub fn write_with(&self, make: impl FnOnce(&mut Vec<u8>, &DecisionLogSettings)) {
        thread_local! {
            static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
        }
        let mut make = Some(make);
        // A thread whose own buffer is gone (it is ending) makes the line in a new one.
        let queued = SCRATCH.try_with(|line| {
            if let Some(make) = make.take() {
                self.queue(&mut line.borrow_mut(), make)
            }
        });
        if let (Err(_), Some(make)) = (queued, make) {
            self.queue(&mut Vec::new(), make);
        }
    }

    /// Make the line in `line` and append it to what the writer takes, or drop it when `queue`
    /// lines wait.
    fn queue(&self, line: &mut Vec<u8>, make: impl FnOnce(&mut Vec<u8>, &DecisionLogSettings)) {
        line.clear();
        make(line, &self.settings);
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

#[cfg(test)]
#[path = "log_tests.rs"]
mod tests;
