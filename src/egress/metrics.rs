//! The consumer's side's metrics, beside the scheme's (registry calls, the scheme owner, the
//! decision log) in one registry: our tokens, the evidence we bring, the providers' answers and
//! the calls refused before any was made.

use crate::telemetry::metrics::{counter, gauge_vec, histogram};
use crate::telemetry::Metrics;
use prometheus::{HistogramVec, IntCounterVec, IntGaugeVec};

#[derive(Clone)]
pub struct EgressMetrics {
    /// Our tokens at providers by provider and result (fetched, cached, renewed, failed).
    pub tokens: IntCounterVec,
    /// Evidence brought by route and result (fetched, cached, denied, failed).
    pub evidence: IntCounterVec,
    /// Providers' answers by provider and status.
    pub answers: IntCounterVec,
    /// Calls refused by the consumer's side by reason (none was forwarded).
    pub refusals: IntCounterVec,
    /// Calls in flight by provider.
    pub in_flight: IntGaugeVec,
    /// The time from a call's arrival to the provider's answer's head, by provider.
    pub latency: HistogramVec,
}

impl EgressMetrics {
    pub fn register(metrics: &Metrics) -> Self {
        let r = metrics.registry();
        EgressMetrics {
            tokens: counter(
                r,
                "egress_tokens_total",
                "Our tokens at providers by provider and result (fetched, cached, renewed, failed)",
                &["provider", "result"],
            ),
            evidence: counter(
                r,
                "egress_evidence_total",
                "Delegation evidence we bring, by outgoing route and result (fetched, cached, denied, failed)",
                &["route", "result"],
            ),
            answers: counter(
                r,
                "egress_answers_total",
                "Providers' answers to our calls by provider and status",
                &["provider", "status"],
            ),
            refusals: counter(
                r,
                "egress_refusals_total",
                "Calls the consumer's side refused or could not make, by reason",
                &["reason"],
            ),
            in_flight: gauge_vec(
                r,
                "egress_in_flight",
                "Calls to each provider in flight",
                &["provider"],
            ),
            latency: histogram(
                r,
                "egress_latency_seconds",
                "From a call's arrival to the provider's answer, by provider",
                &["provider"],
            ),
        }
    }
}
