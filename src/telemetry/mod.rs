//! Metrics (Prometheus) and the access log.

pub mod metrics;

pub use metrics::Metrics;

/// Set up logging: `text` for terminals, `json` for log collectors. `RUST_LOG` overrides the level.
pub fn init_logging(json: bool, level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    use std::io::IsTerminal;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(true)
        .with_ansi(std::io::stdout().is_terminal());
    // A second initialisation (tests, the demo) keeps the first one.
    let _ = if json {
        builder.json().flatten_event(true).try_init()
    } else {
        builder.try_init()
    };
}
