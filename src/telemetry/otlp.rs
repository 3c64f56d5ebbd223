//! The OTLP exporter: finished spans wait in a bounded queue off the request path (a full queue
//! drops them, counted), a thread of their own sends them in batches over HTTP/protobuf with the
//! gateway's HTTP client, and what is queued at shutdown is sent within a bound.

use super::Metrics;
use crate::config::model::TracingSettings;
use opentelemetry::Context;
use opentelemetry_http::{HttpClient, HttpError};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, Sampler, SdkTracerProvider, Span, SpanData,
    SpanExporter, SpanProcessor,
};
use opentelemetry_sdk::Resource;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// Finished spans waiting to be sent at most; more are dropped (and counted).
pub const QUEUE: usize = 2048;
/// Spans sent in one request at most.
const BATCH: usize = 512;
/// How long a finished span waits at most before it is sent.
pub const EXPORT_INTERVAL: Duration = Duration::from_secs(1);
/// How long one export may take, its retries included.
pub const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the spans still queued at shutdown may take to be sent.
pub const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest answer read from the collector.
const MAX_ANSWER: usize = 64 * 1024;

/// The exporter as configured: built when the gateway is (so that `check` sees its errors), sending
/// nothing until `start`.
pub struct Exporter(Counting);

impl Exporter {
    pub fn new(
        settings: &TracingSettings,
        http: reqwest::Client,
        metrics: &Metrics,
    ) -> Result<Exporter, String> {
        let otlp = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(Sender(http))
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(settings.otlp_endpoint.as_str())
            .with_timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|e| format!("the OTLP exporter: {e}"))?;
        Ok(Exporter(Counting {
            otlp,
            queued: Arc::new(AtomicUsize::new(0)),
            failing: AtomicBool::new(false),
            endpoint: settings.otlp_endpoint.clone(),
            metrics: metrics.clone(),
        }))
    }

    /// The provider of the gateway's tracer: spans sampled as configured (a parent's decision is
    /// followed), queued and sent by a thread this starts.
    pub fn start(self, settings: &TracingSettings) -> SdkTracerProvider {
        let queued = self.0.queued.clone();
        let metrics = self.0.metrics.clone();
        let config = BatchConfigBuilder::default()
            .with_max_queue_size(QUEUE)
            .with_max_export_batch_size(BATCH)
            .with_scheduled_delay(EXPORT_INTERVAL)
            .build();
        let batches = BatchSpanProcessor::new(self.0, config);
        let resource = Resource::builder()
            .with_service_name(settings.service_name.clone())
            .with_attribute(opentelemetry::KeyValue::new(
                "service.version",
                env!("CARGO_PKG_VERSION"),
            ))
            .build();
        SdkTracerProvider::builder()
            .with_span_processor(Bounded {
                batches,
                queued,
                metrics,
            })
            .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
                settings.sample_ratio,
            ))))
            .with_resource(resource)
            .build()
    }
}

/// The batch processor behind a count of the spans it holds: a span that would find the queue
/// full is dropped here, and counted, before the processor drops it uncounted.
struct Bounded {
    batches: BatchSpanProcessor,
    /// Spans handed to the processor and not yet taken for an export.
    queued: Arc<AtomicUsize>,
    metrics: Metrics,
}

impl std::fmt::Debug for Bounded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bounded")
            .field("queued", &self.queued)
            .finish_non_exhaustive()
    }
}

impl SpanProcessor for Bounded {
    fn on_start(&self, span: &mut Span, cx: &Context) {
        self.batches.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        if self.queued.fetch_add(1, Ordering::AcqRel) >= QUEUE {
            self.queued.fetch_sub(1, Ordering::AcqRel);
            self.metrics.spans.with_label_values(&["dropped"]).inc();
            return;
        }
        self.batches.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.batches.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.batches.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.batches.set_resource(resource);
    }
}

/// The OTLP exporter, counting what it sends and what fails, and saying in the log when the
/// collector stops and starts taking spans (not at every failed batch).
struct Counting {
    otlp: opentelemetry_otlp::SpanExporter,
    queued: Arc<AtomicUsize>,
    failing: AtomicBool,
    endpoint: String,
    metrics: Metrics,
}

impl std::fmt::Debug for Counting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Counting")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

impl SpanExporter for Counting {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len();
        self.queued.fetch_sub(spans, Ordering::AcqRel);
        let result = self.otlp.export(batch).await;
        let outcome = match &result {
            Ok(()) => "exported",
            Err(_) => "failed",
        };
        self.metrics
            .spans
            .with_label_values(&[outcome])
            .inc_by(spans as u64);
        let failed = result.is_err();
        if self.failing.swap(failed, Ordering::Relaxed) != failed {
            match &result {
                Err(e) => {
                    tracing::warn!(endpoint = %self.endpoint, error = %e, "spans cannot be exported; they are dropped until the collector takes them again")
                }
                Ok(()) => tracing::info!(endpoint = %self.endpoint, "spans are exported again"),
            }
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.otlp.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.otlp.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.otlp.set_resource(resource);
    }
}

/// The runtime exports are sent on: the processor's thread waits for them without one.
fn export_runtime() -> Result<&'static tokio::runtime::Runtime, String> {
    static RUNTIME: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("otlp")
                .enable_all()
                .build()
                .map_err(|e| format!("a runtime for OTLP exports: {e}"))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// The gateway's HTTP client (the outbound TLS trust, its timeout), sending on the export runtime.
#[derive(Debug)]
struct Sender(reqwest::Client);

#[async_trait::async_trait]
impl HttpClient for Sender {
    async fn send_bytes(
        &self,
        request: http::Request<bytes::Bytes>,
    ) -> Result<http::Response<bytes::Bytes>, HttpError> {
        let request = reqwest::Request::try_from(request)?;
        let client = self.0.clone();
        let sent = export_runtime()?.spawn(async move {
            let mut response = client.execute(request).await?;
            let status = response.status();
            let mut body = bytes::BytesMut::new();
            while let Some(chunk) = response.chunk().await? {
                if body.len() + chunk.len() > MAX_ANSWER {
                    break;
                }
                body.extend_from_slice(&chunk);
            }
            Ok::<_, reqwest::Error>((status, body.freeze()))
        });
        let (status, body) = sent.await??;
        Ok(http::Response::builder().status(status).body(body)?)
    }
}
