//! OpenTelemetry tracing: the gateway's tracer (when `[tracing]` is configured), the spans of the
//! steps a traced request takes (children of the span current where they run), and the trace
//! context sent with the calls made for it. A request is traced while its work runs with its
//! context current (`Step::within`); everything else — an untraced gateway, background work — finds
//! no tracer there, and costs a look at the current context.

use super::otlp::{self, Exporter};
use super::traceparent;
use super::Metrics;
use crate::config::model::TracingSettings;
use futures::future::Either;
use opentelemetry::context::{FutureExt, WithContext};
use opentelemetry::trace::{
    Span as _, SpanContext, SpanKind, Status, TraceContextExt, Tracer, TracerProvider,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider, Span as SdkSpan};
use std::borrow::Cow;
use std::future::Future;
use std::sync::{Mutex, OnceLock};

/// The tracer in a traced request's context: what its steps make their spans with.
struct ActiveTracer(SdkTracer);

/// Tracing as configured. The exporter's thread starts with the first request (after a daemon's
/// fork, which threads do not survive), or with the gateway's maintenance; `shutdown` sends what
/// is queued.
pub struct Tracing {
    settings: TracingSettings,
    exporter: Mutex<Option<Exporter>>,
    started: OnceLock<Option<Started>>,
}

struct Started {
    provider: SdkTracerProvider,
    /// The context every request's trace starts from: the tracer, no span.
    base: Context,
}

impl Tracing {
    /// Tracing for `settings`, its exporter sending through `http` (the outbound client).
    pub fn new(
        settings: TracingSettings,
        http: reqwest::Client,
        metrics: &Metrics,
    ) -> Result<Tracing, String> {
        let exporter = Exporter::new(&settings, http, metrics)?;
        Ok(Tracing {
            settings,
            exporter: Mutex::new(Some(exporter)),
            started: OnceLock::new(),
        })
    }

    pub fn settings(&self) -> &TracingSettings {
        &self.settings
    }

    /// The context a request's trace starts in, starting the exporter the first time.
    pub fn base(&self) -> Option<&Context> {
        self.started
            .get_or_init(|| {
                let exporter = self
                    .exporter
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .take()?;
                let provider = exporter.start(&self.settings);
                let tracer = provider.tracer("ishare-gateway");
                tracing::info!(
                    endpoint = %self.settings.otlp_endpoint,
                    service = %self.settings.service_name,
                    sample_ratio = self.settings.sample_ratio,
                    "spans are exported over OTLP/HTTP"
                );
                Some(Started {
                    provider,
                    base: Context::new().with_value(ActiveTracer(tracer)),
                })
            })
            .as_ref()
            .map(|s| &s.base)
    }

    /// Send the spans still queued, waiting at most `otlp::FLUSH_TIMEOUT`; later spans are not
    /// exported.
    pub fn shutdown(&self) {
        let Some(Some(started)) = self.started.get() else {
            return;
        };
        if let Err(e) = started.provider.shutdown_with_timeout(otlp::FLUSH_TIMEOUT) {
            tracing::warn!(error = %e, "spans still queued at shutdown may be lost");
        }
    }
}

/// A span and the context its children start from.
pub struct Open {
    span: SdkSpan,
    cx: Context,
}

impl Open {
    /// A span under `parent` (a context of a traced request), None if `parent` is not one. Its
    /// `attributes` are made only when the span is recorded (sampled).
    pub fn start(
        parent: &Context,
        name: impl Into<Cow<'static, str>>,
        kind: SpanKind,
        attributes: impl FnOnce() -> Vec<KeyValue>,
    ) -> Option<Open> {
        let tracer = &parent.get::<ActiveTracer>()?.0;
        let mut span = tracer
            .span_builder(name)
            .with_kind(kind)
            .start_with_context(tracer, parent);
        if span.is_recording() {
            span.set_attributes(attributes());
        }
        let cx = parent.with_remote_span_context(span.span_context().clone());
        Some(Open { span, cx })
    }

    /// Whether the span is recorded: what is set on one that is not goes nowhere.
    pub fn is_recording(&self) -> bool {
        self.span.is_recording()
    }

    /// The context of this span's children.
    pub fn context(&self) -> &Context {
        &self.cx
    }

    pub fn span_context(&self) -> &SpanContext {
        self.span.span_context()
    }

    pub fn set(&mut self, attribute: KeyValue) {
        self.span.set_attribute(attribute);
    }

    pub fn rename(&mut self, name: impl Into<Cow<'static, str>>) {
        self.span.update_name(name);
    }

    /// Mark the span failed, `error.type` saying why.
    pub fn fail(&mut self, error_type: impl Into<opentelemetry::Value>) {
        let error_type = error_type.into();
        self.span
            .set_status(Status::error(error_type.as_str().into_owned()));
        self.span
            .set_attribute(KeyValue::new("error.type", error_type));
    }

    pub fn end(mut self) {
        self.span.end();
    }
}

/// Whether spans started under `cx` may be recorded. Sampling follows the parent: the children of
/// a span that is not sampled are not either, so a request that is not recorded makes no span
/// for its steps, and what they call carries the request's own context (not sampled).
pub fn samples_children(cx: &Context) -> bool {
    let parent = cx.span();
    let parent = parent.span_context();
    !parent.is_valid() || parent.is_sampled()
}

/// Whether the current request's steps make spans of their own (it is traced, and recorded).
pub fn steps_recorded() -> bool {
    Context::map_current(|cx| cx.get::<ActiveTracer>().is_some() && samples_children(cx))
}

/// A step of the current request, as a child span of the one current where it starts; nothing
/// when the current context is not a traced request's.
pub struct Step(Option<Open>);

impl Step {
    /// `name` is called only when the request is traced, `attributes` when it is recorded too.
    pub fn start<N: Into<Cow<'static, str>>>(
        kind: SpanKind,
        name: impl FnOnce() -> N,
        attributes: impl FnOnce() -> Vec<KeyValue>,
    ) -> Step {
        Step(Context::map_current(|cx| {
            cx.get::<ActiveTracer>()?;
            if !samples_children(cx) {
                return None;
            }
            Open::start(cx, name(), kind, attributes)
        }))
    }

    /// `work` with this step's span current: the spans its own steps start are children of it.
    pub fn within<F: Future>(&self, work: F) -> Either<WithContext<F>, F> {
        within(self.0.as_ref().map(|o| o.cx.clone()), work)
    }

    /// Add attributes, made only when the step is recorded.
    pub fn record(&mut self, attributes: impl FnOnce() -> Vec<KeyValue>) {
        if let Some(open) = self.0.as_mut().filter(|o| o.is_recording()) {
            open.span.set_attributes(attributes());
        }
    }

    /// End the step with its outcome (`ishare.outcome`), and whether it failed (then also its
    /// `error.type`); `outcome` is called only when the step is recorded.
    pub fn end(self, outcome: impl FnOnce() -> (&'static str, bool)) {
        if let Some(mut open) = self.0 {
            if !open.is_recording() {
                return open.end();
            }
            let (outcome, failed) = outcome();
            open.set(KeyValue::new("ishare.outcome", outcome));
            if failed {
                open.fail(outcome);
            }
            open.end();
        }
    }
}

/// `work` with `cx` current while it runs, if there is one.
pub fn within<F: Future>(cx: Option<Context>, work: F) -> Either<WithContext<F>, F> {
    match cx {
        Some(cx) => Either::Left(work.with_context(cx)),
        None => Either::Right(work),
    }
}

/// The `traceparent` (and `tracestate`) naming the current span, for a call made in a traced
/// request; None outside one.
pub fn outgoing() -> Option<http::HeaderMap> {
    Context::map_current(|cx| {
        cx.get::<ActiveTracer>()?;
        let span = cx.span().span_context().clone();
        // Other participants get the trace's ids, not a client's tracestate: what a client put
        // there is for its own vendors, not for the registry or the scheme owner.
        let mut headers = span.is_valid().then(|| headers_for(&span))?;
        headers.remove(traceparent::TRACESTATE);
        Some(headers)
    })
}

/// The trace context headers that name `span` as the parent of a call.
pub fn headers_for(span: &SpanContext) -> http::HeaderMap {
    let mut headers = http::HeaderMap::with_capacity(2);
    headers.insert(traceparent::TRACEPARENT, traceparent::traceparent(span));
    if let Some(state) = traceparent::tracestate_of(span) {
        headers.insert(traceparent::TRACESTATE, state);
    }
    headers
}
