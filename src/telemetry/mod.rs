//! Metrics (Prometheus), the access log, and OpenTelemetry tracing.

pub mod metrics;
pub mod otlp;
pub mod throttle;
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

/// Leaves out pingora's error line for a client that went away or stalled (`Fail to proxy:
/// Downstream …`), which any client could write with every connection it opens. Before its
/// request's head, nothing was asked of the gateway (a head that is too slow is counted in
/// `connections_closed_total`); after it, the request is counted in `requests_total` with the
/// outcome `client_error`. Active unless `RUST_LOG` is set or the level names `pingora_proxy`.
struct ClientGone;

impl ClientGone {
    const TARGET: &'static str = "pingora_proxy";
    const PREFIX: &'static str = "Fail to proxy: Downstream";
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for ClientGone {
    fn event_enabled(
        &self,
        event: &tracing::Event<'_>,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) -> bool {
        if *event.metadata().level() != tracing::Level::ERROR {
            return true;
        }
        let mut line = Line::default();
        event.record(&mut line);
        // pingora logs through the `log` crate: such an event names its target in a field.
        let target = line.target.as_deref().unwrap_or(event.metadata().target());
        !(target == Self::TARGET && line.message.starts_with(Self::PREFIX))
    }
}

/// An error event's message, and its target when it came through the `log` crate.
#[derive(Default)]
struct Line {
    message: String,
    target: Option<String>,
}

impl tracing::field::Visit for Line {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        }
    }

    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        match field.name() {
            "message" => self.message = value.to_string(),
            "log.target" => self.target = Some(value.to_string()),
            _ => {}
        }
    }
}

/// Set up logging: `text` for terminals, `json` for log collectors. `RUST_LOG` overrides the level.
/// With `background_writer`, lines are written by a thread of their own so that request threads
/// do not wait on the output (not for a process that forks to daemonize afterwards: the thread
/// would not survive the fork). Keep the guard until the end of the process.
pub fn init_logging(json: bool, level: &str, background_writer: bool) -> LogGuard {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let from_env = tracing_subscriber::EnvFilter::try_from_default_env().ok();
    let client_gone =
        (from_env.is_none() && !level.contains(ClientGone::TARGET)).then_some(ClientGone);
    let filter =
        from_env.unwrap_or_else(|| tracing_subscriber::EnvFilter::new(default_filter(level)));
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
        builder
            .json()
            .flatten_event(true)
            .finish()
            .with(client_gone)
            .try_init()
    } else {
        builder.finish().with(client_gone).try_init()
    };
    LogGuard { _writer: guard }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use tracing_subscriber::layer::SubscriberExt;

    /// The messages of the events that reach it.
    struct Seen(Arc<Mutex<Vec<String>>>);

    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Seen {
        fn on_event(
            &self,
            event: &tracing::Event<'_>,
            _: tracing_subscriber::layer::Context<'_, S>,
        ) {
            let mut line = Line::default();
            event.record(&mut line);
            self.0.lock().unwrap().push(line.message);
        }
    }

    #[test]
    fn a_client_gone_is_left_out_and_every_other_error_is_logged() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let subscriber = tracing_subscriber::registry()
            .with(Seen(seen.clone()))
            .with(ClientGone);
        tracing::subscriber::with_default(subscriber, || {
            tracing::error!(target: "pingora_proxy", "Fail to proxy: Downstream ConnectionClosed context: while reading request headers");
            tracing::error!(target: "pingora_proxy", "Fail to proxy: Upstream ConnectRefused context: Peer: addr: 127.0.0.1:9");
            tracing::warn!(target: "pingora_proxy", "Fail to proxy: Downstream ReadError, tries: 1, retry: true");
            tracing::error!(target: "ishare_gateway", "Fail to proxy: Downstream");
        });
        assert_eq!(
            *seen.lock().unwrap(),
            [
                "Fail to proxy: Upstream ConnectRefused context: Peer: addr: 127.0.0.1:9",
                "Fail to proxy: Downstream ReadError, tries: 1, retry: true",
                "Fail to proxy: Downstream",
            ]
        );
    }

    #[test]
    fn rustls_warnings_are_left_out_unless_the_level_names_rustls() {
        assert_eq!(default_filter("info"), "info,rustls=error");
        assert_eq!(
            default_filter("debug,pingora_core=warn"),
            "debug,pingora_core=warn,rustls=error"
        );
        assert_eq!(default_filter("info,rustls=warn"), "info,rustls=warn");
    }
}
