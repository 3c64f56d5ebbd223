//! Metrics (Prometheus), the access log, and OpenTelemetry tracing.

pub mod metrics;
pub mod otlp;
pub mod trace;
pub mod traceparent;

pub use metrics::Metrics;

use std::io::IsTerminal;

/// `bytes` in lower-case hexadecimal, two digits each, at the start of `out`: the ids made for
/// every request (decision ids, `traceparent`) are written in place, without formatting
/// machinery or the heap.
pub fn write_hex(out: &mut [u8], bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for (digits, b) in out.chunks_exact_mut(2).zip(bytes) {
        digits[0] = HEX[usize::from(b >> 4)];
        digits[1] = HEX[usize::from(b & 0xf)];
    }
}

/// Keeps the log writer's thread flushing; dropping it writes out what is buffered.
#[must_use = "logs buffered in the background are lost when the guard is dropped early"]
pub struct LogGuard {
    _writer: Option<tracing_appender::non_blocking::WorkerGuard>,
}

/// The filter for `level` when `RUST_LOG` is not set. rustls warns about what a peer sent (an IP
/// address as the server name, as wrk and OpenSSL-based clients send it; a warning alert; a message
/// out of order): any client could write such a line with every connection it opens, so they are
/// logged only when `level` names `rustls` (its errors are kept).
fn default_filter(level: &str) -> String {
    if level.contains("rustls") {
        level.to_string()
    } else {
        format!("{level},rustls=error")
    }
}

/// Set up logging: `text` for terminals, `json` for log collectors. `RUST_LOG` overrides the level.
/// With `background_writer`, lines are written by a thread of their own so that request threads
/// do not wait on the output (not for a process that forks to daemonize afterwards: the thread
/// would not survive the fork). Keep the guard until the end of the process.
pub fn init_logging(json: bool, level: &str, background_writer: bool) -> LogGuard {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter(level)));
    let (writer, guard) = if background_writer {
        let (w, g) = tracing_appender::non_blocking::NonBlockingBuilder::default()
            // Back-pressure rather than lost lines when the output cannot keep up.
            .lossy(false)
            .finish(std::io::stdout());
        (
            tracing_subscriber::fmt::writer::BoxMakeWriter::new(w),
            Some(g),
        )
    } else {
        (
            tracing_subscriber::fmt::writer::BoxMakeWriter::new(std::io::stdout),
            None,
        )
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(true)
        .with_writer(writer)
        .with_ansi(std::io::stdout().is_terminal());
    // A second initialisation (tests, the demo) keeps the first one.
    let _ = if json {
        builder.json().flatten_event(true).try_init()
    } else {
        builder.try_init()
    };
    LogGuard { _writer: guard }
}
