//! The `[tracing]` section: where spans are exported (an OTLP/HTTP collector), under which service
//! name, the share of new traces recorded, whether a client's trace is continued, and whether the
//! backend gets the trace context in B3 headers too.

use super::defaults as default;
use super::file::TracingFile;
use super::issues::Issues;
use super::model::{TracingSettings, B3};

pub(super) fn build(t: TracingFile, issues: &mut Issues) -> TracingSettings {
    let otlp_endpoint = t
        .otlp_endpoint
        .and_then(|e| issues.check("tracing.otlp_endpoint", endpoint(&e)))
        .unwrap_or_else(|| default::OTLP_ENDPOINT.to_string());
    let service_name = match t.service_name {
        Some(name) if name.trim().is_empty() => {
            issues.add("tracing.service_name", "must not be empty");
            default::SERVICE_NAME.to_string()
        }
        Some(name) => name,
        None => default::SERVICE_NAME.to_string(),
    };
    let sample_ratio = t.sample_ratio.unwrap_or(default::SAMPLE_RATIO);
    if !(0.0..=1.0).contains(&sample_ratio) {
        issues.add(
            "tracing.sample_ratio",
            format!("{sample_ratio} is not a share from 0 (none) to 1 (every new trace)"),
        );
    }
    TracingSettings {
        otlp_endpoint,
        service_name,
        sample_ratio: sample_ratio.clamp(0.0, 1.0),
        accept_client_context: t
            .accept_client_context
            .unwrap_or(default::ACCEPT_CLIENT_CONTEXT),
        b3: t.b3.unwrap_or(B3::None),
    }
}

/// The collector's endpoint: an http(s) URL with a host, and without credentials (the endpoint is
/// named in the log; the collector's headers come from `OTEL_EXPORTER_OTLP_HEADERS`).
fn endpoint(text: &str) -> Result<String, String> {
    let url = url::Url::parse(text).map_err(|e| format!("{text:?} is not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "{text:?}: an OTLP/HTTP endpoint is http:// or https://, not {}:",
            url.scheme()
        ));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(format!("{text:?} names no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "{text:?} holds credentials: the endpoint takes none"
        ));
    }
    Ok(text.to_string())
}
