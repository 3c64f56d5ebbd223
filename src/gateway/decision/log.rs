//! The decision log: one JSON line per decision, for operators to find why a request was refused
//! (by the `decision_id` the consumer quotes) and to read what shadow mode would have refused.
//! A proxied request's decision is handed to the log's writer as it is (moved, not copied), and
//! the writer makes its line; other lines are made on the caller's thread, in a buffer of that
//! thread's own. The writer takes what has gathered, a few dozen times a second, and writes it
//! on a thread of its own, in the order it came. When `queue` lines wait or are being written, a
//! line is dropped and counted, never waited for. Configured fields are masked, and a line
//! longer than its bound is cut to the fields that identify the decision.

use super::log_line::{line_into, strings_of};
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
/// The most the writer's buffers keep between batches (a burst's are given back once written).
const KEPT_BATCH: usize = 1 << 20;
/// The most queued entries the writer's list keeps room for between batches.
const KEPT_ENTRIES: usize = 1 << 10;

/// A line waiting for the writer.
enum Queued {
    /// A line made by its caller: it ends at this offset of `Pending::made`.
    Made(usize),
    /// A decision whose line the writer makes: it holds at most a line's bound of strings.
    Decision(Box<Handed>),
}

/// A decision, its answer's status and the request's duration.
struct Handed {
    decision: Decision,
    status: u16,
    duration: Duration,
}

/// The lines waiting for the writer, and what it has written.
#[derive(Default)]
struct Pending {
    /// In the order they came; `queued.len()` and the lines the writer has taken and not yet
    /// written (`writing`) are together at most `queue`.
    queued: Vec<Queued>,
    made: Vec<u8>,
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

impl Pending {
    /// Lines waiting or being written.
    fn held(&self) -> usize {
        self.queued.len() + self.writing
    }
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
        Self::start(out, settings, metrics)
    }

    /// Start the writer of lines into `out`.
    fn start(
        out: Box<dyn Write + Send>,
        settings: &DecisionLogSettings,
        metrics: Metrics,
    ) -> Result<Self, String> {
        let shared = Arc::new(Shared::default());
        let writer = Writer {
            shared: shared.clone(),
            settings: settings.clone(),
            out,
            written: metrics.decision_log.with_label_values(&["written"]),
            failed: metrics.decision_log.with_label_values(&["failed"]),
        };
        std::thread::Builder::new()
            .name("decision-log".into())
            .spawn(move || writer.run())
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

    /// Queue the line of a decision whose answer had `status`, after `duration`, made now (the
    /// caller still needs the decision).
    pub fn write(&self, d: &Decision, status: u16, duration: Duration) {
        self.write_with(|line, settings| line_into(line, d, status, duration, settings));
    }

    /// Queue the line of a decision the caller is done with: the writer makes it, off the
    /// request's thread. A decision that would hold more than a line's bound while it waits (or
    /// an amount not known before its line is made) has its line made now instead, and so does
    /// every decision while half the queue or more waits or is being written: a writer that
    /// falls behind making lines gets help from the request threads before lines are dropped.
    pub fn hand_over(&self, decision: Decision, status: u16, duration: Duration) {
        if strings_of(&decision).is_none_or(|n| n >= self.settings.max_line_bytes) {
            return self.write(&decision, status, duration);
        }
        let mut p = self.shared.pending();
        if 2 * p.held() >= self.settings.queue {
            drop(p);
            return self.write(&decision, status, duration);
        }
        p.queued.push(Queued::Decision(Box::new(Handed {
            decision,
            status,
            duration,
        })));
        self.appended(p);
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
        if p.held() < self.settings.queue {
            p.made.extend_from_slice(line);
            let end = p.made.len();
            p.queued.push(Queued::Made(end));
            self.appended(p);
        } else {
            drop(p);
            (self.metrics.decision_log)
                .with_label_values(&["dropped"])
                .inc();
        }
        if line.capacity() > KEPT_SCRATCH {
            *line = Vec::new();
        }
    }

    /// A line was queued: counted, and the writer woken when it is the first to wait.
    fn appended(&self, mut p: MutexGuard<'_, Pending>) {
        p.appended += 1;
        let first = p.queued.len() == 1;
        drop(p);
        if first {
            self.shared.arrived.notify_one();
        }
    }
}

impl Drop for DecisionLog {
    fn drop(&mut self) {
        self.shared.pending().closed = true;
        self.shared.arrived.notify_one();
    }
}

/// The log's writer, on a thread of its own.
struct Writer {
    shared: Arc<Shared>,
    settings: DecisionLogSettings,
    out: Box<dyn Write + Send>,
    written: prometheus::IntCounter,
    failed: prometheus::IntCounter,
}

impl Writer {
    fn run(mut self) {
        // Whole lines only are taken, and each write is of whole lines: the lines of two writers
        // (before and after a reload) do not mix.
        let (mut queued, mut made, mut batch) = (Vec::new(), Vec::new(), Vec::new());
        loop {
            let closed = {
                let mut p = self.shared.pending();
                while p.queued.is_empty() && !p.closed {
                    p = (self.shared.arrived.wait(p)).unwrap_or_else(PoisonError::into_inner);
                }
                std::mem::swap(&mut p.queued, &mut queued);
                std::mem::swap(&mut p.made, &mut made);
                p.writing = queued.len();
                p.closed
            };
            let lines = queued.len();
            if lines > 0 {
                self.write(&mut queued, &made, &mut batch);
                made.clear();
                if made.capacity() > KEPT_BATCH {
                    made = Vec::new();
                }
                if queued.capacity() > KEPT_ENTRIES {
                    queued = Vec::new();
                }
                let mut p = self.shared.pending();
                p.done += lines as u64;
                p.writing = 0;
                drop(p);
                self.shared.written.notify_all();
            }
            if closed && self.shared.pending().queued.is_empty() {
                break;
            }
            // A busy gateway wakes this thread a few dozen times a second, not once per
            // request.
            std::thread::sleep(GATHER);
        }
    }

    /// Write every line taken, in order: the callers' lines as they are in `made` (not copied),
    /// and between them the lines of the decisions handed over, made in `batch`. A decision
    /// whose line could not be made (a panic while making it) is counted as failed.
    fn write(&mut self, queued: &mut Vec<Queued>, made: &[u8], batch: &mut Vec<u8>) {
        // The callers' lines not yet written (`made[start..end]`, `run` of them), and the lines
        // made in `batch`: at most one of the two is not empty.
        let (mut start, mut end, mut run, mut decisions) = (0, 0, 0, 0);
        for line in queued.drain(..) {
            match line {
                Queued::Made(at) => {
                    self.put(batch, std::mem::take(&mut decisions));
                    batch.clear();
                    (end, run) = (at, run + 1);
                }
                Queued::Decision(h) => {
                    self.put(&made[start..end], std::mem::take(&mut run));
                    start = end;
                    let at = batch.len();
                    let make =
                        || line_into(batch, &h.decision, h.status, h.duration, &self.settings);
                    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(make)) {
                        Ok(()) => decisions += 1,
                        Err(_) => {
                            batch.truncate(at);
                            self.failed.inc();
                        }
                    }
                }
            }
        }
        self.put(&made[start..end], run);
        self.put(batch, decisions);
        batch.clear();
        if batch.capacity() > KEPT_BATCH {
            *batch = Vec::new();
        }
    }

    /// Write `lines` whole lines in one go (none when there are none), and count them.
    fn put(&mut self, bytes: &[u8], lines: usize) {
        if lines == 0 {
            return;
        }
        match (self.out.write_all(bytes)).and_then(|()| self.out.flush()) {
            Ok(()) => self.written.inc_by(lines as u64),
            Err(_) => self.failed.inc_by(lines as u64),
        }
    }
}

#[cfg(test)]
#[path = "log_tests.rs"]
mod tests;
