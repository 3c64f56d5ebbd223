//! The gateway's Prometheus metrics, in a registry of its own (one per gateway, so several can run
//! in one process); /metrics serves it together with the process-wide default registry.

use prometheus::{
    exponential_buckets, Encoder, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};
use std::borrow::Cow;
use std::sync::OnceLock;

/// The lookups of one cache (`cache_lookups_total`), by result: its two counters found once, not
/// by their labels at every lookup.
#[derive(Clone)]
pub struct CacheLookups {
    hits: IntCounter,
    misses: IntCounter,
}

impl CacheLookups {
    pub fn count(&self, hit: bool) {
        match hit {
            true => self.hits.inc(),
            false => self.misses.inc(),
        }
    }
}

/// Series of one labelled counter for a few label sets, each found once: a lookup compares keys
/// slot by slot, where the metric's own lookup hashes each label's value. Past `N` sets, a set
/// is found by its labels at each lookup.
pub struct FoundOnce<K, const N: usize> {
    slots: [OnceLock<(K, IntCounter)>; N],
}

impl<K, const N: usize> Default for FoundOnce<K, N> {
    fn default() -> Self {
        FoundOnce {
            slots: std::array::from_fn(|_| OnceLock::new()),
        }
    }
}

impl<K: Copy + PartialEq, const N: usize> FoundOnce<K, N> {
    /// The series of `key`, which `find` finds by its labels.
    pub fn get(&self, key: K, find: impl Fn() -> IntCounter) -> Cow<'_, IntCounter> {
        for slot in &self.slots {
            let (k, series) = slot.get_or_init(|| (key, find()));
            if *k == key {
                return Cow::Borrowed(series);
            }
        }
        Cow::Owned(find())
    }
}

/// What became of a request: the `outcome` label of `requests_total` and of the access log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Forwarded,
    /// Forwarded on a route in shadow mode, though the decision refused it.
    ShadowDenied,
    Local,
    TokenIssued,
    TokenRefused,
    Unauthenticated,
    Denied,
    NotFound,
    MethodNotAllowed,
    BadRequest,
    RateLimited,
    Unavailable,
    UpstreamError,
    InternalError,
    ClientError,
    LoginStarted,
    SignedIn,
    SignedOut,
    LoginRefused,
}

impl Outcome {
    pub const ALL: [Outcome; 19] = [
        Outcome::Forwarded,
        Outcome::ShadowDenied,
        Outcome::Local,
        Outcome::TokenIssued,
        Outcome::TokenRefused,
        Outcome::Unauthenticated,
        Outcome::Denied,
        Outcome::NotFound,
        Outcome::MethodNotAllowed,
        Outcome::BadRequest,
        Outcome::RateLimited,
        Outcome::Unavailable,
        Outcome::UpstreamError,
        Outcome::InternalError,
        Outcome::ClientError,
        Outcome::LoginStarted,
        Outcome::SignedIn,
        Outcome::SignedOut,
        Outcome::LoginRefused,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Forwarded => "forwarded",
            Outcome::ShadowDenied => "shadow_denied",
            Outcome::Local => "local",
            Outcome::TokenIssued => "token_issued",
            Outcome::TokenRefused => "token_refused",
            Outcome::Unauthenticated => "unauthenticated",
            Outcome::Denied => "denied",
            Outcome::NotFound => "not_found",
            Outcome::MethodNotAllowed => "method_not_allowed",
            Outcome::BadRequest => "bad_request",
            Outcome::RateLimited => "rate_limited",
            Outcome::Unavailable => "unavailable",
            Outcome::UpstreamError => "upstream_error",
            Outcome::InternalError => "internal_error",
            Outcome::ClientError => "client_error",
            Outcome::LoginStarted => "login_started",
            Outcome::SignedIn => "signed_in",
            Outcome::SignedOut => "signed_out",
            Outcome::LoginRefused => "login_refused",
        }
    }
}

#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    /// Requests by route name, status and outcome.
    pub requests: IntCounterVec,
    /// Request latency by route name. Never reset: a snapshot keeps its routes' series.
    pub latency: HistogramVec,
    /// Time from a request's arrival to the gateway's decision on it, by route name: what the
    /// gateway adds before the backend is called. Never reset, as `latency`.
    pub decision_latency: HistogramVec,
    /// Token requests by outcome (`issued` or the refusal reason).
    pub tokens: IntCounterVec,
    /// Calls to the scheme owner by endpoint and outcome.
    pub scheme_owner_calls: IntCounterVec,
    /// Cache lookups by cache and result (hit, miss).
    pub cache: IntCounterVec,
    /// Entries evicted from a cache to keep it within its size.
    pub cache_evictions: IntCounterVec,
    /// Purges of cached decisions by scope (policy_issuer, access_subject, all), where they came
    /// from (admin, fleet) and outcome.
    pub purges: IntCounterVec,
    /// Delegation decisions by route, decision and reason.
    pub decisions: IntCounterVec,
    /// Calls to authorisation registries by registry and outcome.
    pub registry_calls: IntCounterVec,
    /// Latency of calls to authorisation registries.
    pub registry_latency: HistogramVec,
    /// Requests refused because their caller spent its budget, by budget (registry_calls).
    pub budget_exhausted: IntCounterVec,
    /// Commands sent to the fleet's Redis by command and outcome (ok, error, timeout).
    pub redis_calls: IntCounterVec,
    /// Latency of commands sent to Redis, by command.
    pub redis_latency: HistogramVec,
    /// Configuration reloads by outcome.
    pub reloads: IntCounterVec,
    /// Lines of the decision log by result (written, dropped: the queue was full, failed: the
    /// write failed).
    pub decision_log: IntCounterVec,
    /// Decisions of the decision service, by interface (nginx, ext_authz_http, ext_authz_grpc,
    /// authzen) and outcome (allowed, shadow_denied, or the refusal's metrics outcome).
    pub decision_api: IntCounterVec,
    /// Age of the trusted list in seconds.
    pub trusted_list_age: IntGauge,
    /// The age past which the trusted list is not used (3 × `refresh`): trust fails closed.
    pub trusted_list_max_age: IntGauge,
    /// Seconds until each certificate the gateway presents or stands on expires, by certificate.
    pub certificate_expiry: IntGaugeVec,
    /// Backends by upstream and health (1 healthy, 0 not).
    pub backend_health: IntGaugeVec,
    /// Open client connections by listener.
    pub connections: IntGaugeVec,
    /// Client connections the gateway closed, by listener and reason (limit, tls_handshake,
    /// idle_timeout, header_timeout).
    pub connections_closed: IntCounterVec,
    /// Finished spans by what became of them (exported, failed, dropped).
    pub spans: IntCounterVec,
}

pub(crate) fn counter(
    registry: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric");
    registry
        .register(Box::new(c.clone()))
        .expect("registered once per registry");
    c
}

pub(crate) fn histogram(
    registry: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
) -> HistogramVec {
    let buckets = exponential_buckets(0.0005, 2.0, 16).expect("valid buckets");
    let h = HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets), labels)
        .expect("valid metric");
    registry
        .register(Box::new(h.clone()))
        .expect("registered once per registry");
    h
}

fn gauge(registry: &Registry, name: &str, help: &str) -> IntGauge {
    let g = IntGauge::new(name, help).expect("valid");
    registry
        .register(Box::new(g.clone()))
        .expect("registered once");
    g
}

pub(crate) fn gauge_vec(
    registry: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
) -> IntGaugeVec {
    let g = IntGaugeVec::new(Opts::new(name, help), labels).expect("valid");
    registry
        .register(Box::new(g.clone()))
        .expect("registered once");
    g
}

/// What clients see of the gateway: their connections and their requests.
struct Traffic {
    connections: IntGaugeVec,
    connections_closed: IntCounterVec,
    requests: IntCounterVec,
    latency: HistogramVec,
    decision_latency: HistogramVec,
}

impl Traffic {
    fn register(registry: &Registry) -> Self {
        Traffic {
            connections: gauge_vec(
                registry,
                "connections",
                "Open client connections by listener",
                &["listener"],
            ),
            connections_closed: counter(
                registry,
                "connections_closed_total",
                "Client connections closed by the gateway, by listener and reason",
                &["listener", "reason"],
            ),
            requests: counter(
                registry,
                "requests_total",
                "Requests by route, status and outcome",
                &["route", "status", "outcome"],
            ),
            latency: histogram(
                registry,
                "request_duration_seconds",
                "Request latency by route",
                &["route"],
            ),
            decision_latency: histogram(
                registry,
                "decision_duration_seconds",
                "Time from a request's arrival to its decision, by route",
                &["route"],
            ),
        }
    }
}

/// Trust in the scheme: the tokens we issue, our calls to the scheme owner and how old its
/// trusted list is.
struct Trust {
    tokens: IntCounterVec,
    scheme_owner_calls: IntCounterVec,
    trusted_list_age: IntGauge,
    trusted_list_max_age: IntGauge,
    certificate_expiry: IntGaugeVec,
}

impl Trust {
    fn register(registry: &Registry) -> Self {
        Trust {
            tokens: counter(
                registry,
                "tokens_total",
                "Token requests by outcome",
                &["outcome"],
            ),
            scheme_owner_calls: counter(
                registry,
                "scheme_owner_calls_total",
                "Calls to the scheme owner",
                &["endpoint", "outcome"],
            ),
            trusted_list_age: gauge(
                registry,
                "trusted_list_age_seconds",
                "Age of the trusted list",
            ),
            trusted_list_max_age: gauge(
                registry,
                "trusted_list_max_age_seconds",
                "Age past which the trusted list is not used and trust fails closed (3 x refresh)",
            ),
            certificate_expiry: gauge_vec(
                registry,
                "certificate_expiry_seconds",
                "Seconds until a certificate the gateway presents or stands on expires (negative: expired), by certificate",
                &["certificate"],
            ),
        }
    }
}

/// Delegation: its decisions, the calls to authorisation registries they take and the callers
/// refused for spending their budget of such calls.
struct Delegation {
    decisions: IntCounterVec,
    registry_calls: IntCounterVec,
    registry_latency: HistogramVec,
    budget_exhausted: IntCounterVec,
}

impl Delegation {
    fn register(registry: &Registry) -> Self {
        Delegation {
            decisions: counter(
                registry,
                "delegation_decisions_total",
                "Delegation decisions",
                &["route", "decision", "reason"],
            ),
            registry_calls: counter(
                registry,
                "registry_calls_total",
                "Calls to authorisation registries",
                &["registry", "outcome"],
            ),
            registry_latency: histogram(
                registry,
                "registry_call_duration_seconds",
                "Latency of registry calls",
                &["registry"],
            ),
            budget_exhausted: counter(
                registry,
                "budget_exhausted_total",
                "Requests refused because their caller spent its budget",
                &["budget"],
            ),
        }
    }
}

/// Where the gateway keeps what it learnt: its caches in memory and the fleet's Redis.
struct Storage {
    cache: IntCounterVec,
    cache_evictions: IntCounterVec,
    purges: IntCounterVec,
    redis_calls: IntCounterVec,
    redis_latency: HistogramVec,
}

impl Storage {
    fn register(registry: &Registry) -> Self {
        Storage {
            cache: counter(
                registry,
                "cache_lookups_total",
                "Cache lookups by cache and result",
                &["cache", "result"],
            ),
            cache_evictions: counter(
                registry,
                "cache_evictions_total",
                "Cache entries evicted to keep a cache within its size",
                &["cache"],
            ),
            purges: counter(
                registry,
                "decision_purges_total",
                "Purges of cached decisions, by scope, origin (admin, fleet) and outcome",
                &["scope", "origin", "outcome"],
            ),
            redis_calls: counter(
                registry,
                "redis_calls_total",
                "Commands sent to Redis, by command and outcome",
                &["command", "outcome"],
            ),
            redis_latency: histogram(
                registry,
                "redis_call_duration_seconds",
                "Latency of commands sent to Redis",
                &["command"],
            ),
        }
    }
}

/// The gateway's own running: its configuration reloads, the health of its backends and the
/// spans it exports.
struct Operation {
    reloads: IntCounterVec,
    backend_health: IntGaugeVec,
    decision_log: IntCounterVec,
    spans: IntCounterVec,
    decision_api: IntCounterVec,
}

impl Operation {
    fn register(registry: &Registry) -> Self {
        Operation {
            reloads: counter(
                registry,
                "config_reloads_total",
                "Configuration reloads by outcome",
                &["outcome"],
            ),
            backend_health: gauge_vec(
                registry,
                "backend_healthy",
                "Backend health by upstream (1 healthy)",
                &["upstream", "backend"],
            ),
            decision_log: counter(
                registry,
                "decision_log_lines_total",
                "Lines of the decision log by result",
                &["result"],
            ),
            spans: counter(
                registry,
                "spans_total",
                "Finished spans by outcome: exported, failed (the collector refused or was unreachable), dropped (the queue was full)",
                &["outcome"],
            ),
            decision_api: counter(
                registry,
                "decision_api_requests_total",
                "Decisions of the decision service by interface and outcome",
                &["interface", "outcome"],
            ),
        }
    }
}

impl Metrics {
    pub fn new() -> Self {
        let registry =
            Registry::new_custom(Some("ishare_gateway".into()), None).expect("valid prefix");
        let Traffic {
            connections,
            connections_closed,
            requests,
            latency,
            decision_latency,
        } = Traffic::register(&registry);
        let Trust {
            tokens,
            scheme_owner_calls,
            trusted_list_age,
            trusted_list_max_age,
            certificate_expiry,
        } = Trust::register(&registry);
        let Delegation {
            decisions,
            registry_calls,
            registry_latency,
            budget_exhausted,
        } = Delegation::register(&registry);
        let Storage {
            cache,
            cache_evictions,
            purges,
            redis_calls,
            redis_latency,
        } = Storage::register(&registry);
        let Operation {
            reloads,
            backend_health,
            decision_log,
            spans,
            decision_api,
        } = Operation::register(&registry);
        Metrics {
            registry,
            requests,
            latency,
            decision_latency,
            tokens,
            scheme_owner_calls,
            cache,
            cache_evictions,
            purges,
            decisions,
            registry_calls,
            registry_latency,
            budget_exhausted,
            redis_calls,
            redis_latency,
            reloads,
            decision_log,
            decision_api,
            trusted_list_age,
            trusted_list_max_age,
            certificate_expiry,
            backend_health,
            connections,
            connections_closed,
            spans,
        }
    }

    /// The lookups of the cache named `cache`.
    pub fn cache_lookups(&self, cache: &str) -> CacheLookups {
        CacheLookups {
            hits: self.cache.with_label_values(&[cache, "hit"]),
            misses: self.cache.with_label_values(&[cache, "miss"]),
        }
    }

    /// The count of entries the cache named `cache` evicted for room.
    pub fn evictions(&self, cache: &str) -> IntCounter {
        self.cache_evictions.with_label_values(&[cache])
    }

    /// A listener for a moka cache that counts the entries evicted for size.
    pub fn on_eviction<K, V>(
        &self,
        cache: &str,
    ) -> impl Fn(std::sync::Arc<K>, V, moka::notification::RemovalCause) + Send + Sync + 'static
    {
        let evicted = self.evictions(cache);
        move |_key, _value, cause| {
            if cause == moka::notification::RemovalCause::Size {
                evicted.inc();
            }
        }
    }

    /// The registry our metrics are in, for another part's to join them.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The text exposition of our metrics and the process-wide ones.
    pub fn render(&self) -> Vec<u8> {
        let mut families = self.registry.gather();
        families.extend(prometheus::gather());
        let mut out = Vec::new();
        // Encoding plain metric families into a Vec cannot fail.
        let _ = TextEncoder::new().encode(&families, &mut out);
        out
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::{FoundOnce, Outcome};
    use prometheus::{IntCounterVec, Opts};
    use std::cell::Cell;

    #[test]
    fn a_label_set_is_found_once_and_counts_in_its_own_series() {
        let vec = IntCounterVec::new(Opts::new("t", "t"), &["status", "outcome"]).unwrap();
        let found: FoundOnce<(u16, Outcome), 2> = FoundOnce::default();
        let finds = Cell::new(0);
        let count = |status: u16, outcome: Outcome| {
            let find = || {
                finds.set(finds.get() + 1);
                vec.with_label_values(&[&status.to_string(), outcome.as_str()])
            };
            found.get((status, outcome), find).inc();
        };
        let series = |status: &str, outcome: Outcome| {
            vec.with_label_values(&[status, outcome.as_str()]).get()
        };
        count(200, Outcome::Forwarded);
        count(200, Outcome::Forwarded);
        count(403, Outcome::Denied);
        count(200, Outcome::Forwarded);
        count(200, Outcome::ShadowDenied);
        assert_eq!(series("200", Outcome::Forwarded), 3);
        assert_eq!(series("403", Outcome::Denied), 1);
        assert_eq!(series("200", Outcome::ShadowDenied), 1);
        // The first two sets were found once each; the third, past the slots, at each count.
        assert_eq!(finds.get(), 3);
        count(200, Outcome::ShadowDenied);
        count(403, Outcome::Denied);
        assert_eq!(finds.get(), 4);
        assert_eq!(series("200", Outcome::ShadowDenied), 2);
        assert_eq!(series("403", Outcome::Denied), 2);
    }

    /// The book's metrics table lists every outcome of `requests_total`, and no other.
    #[test]
    fn the_metrics_table_lists_every_request_outcome() {
        let page = include_str!("../../docs/src/reference/metrics.md");
        let row = page
            .lines()
            .find(|l| l.starts_with("| `ishare_gateway_requests_total`"))
            .expect("the metrics table has requests_total");
        let listed: Vec<&str> = row
            .split_once("`outcome`:")
            .expect("the row lists the outcomes")
            .1
            .split('`')
            .skip(1)
            .step_by(2)
            .collect();
        let emitted: Vec<&str> = Outcome::ALL.iter().map(|o| o.as_str()).collect();
        let missing: Vec<&&str> = emitted.iter().filter(|o| !listed.contains(o)).collect();
        let stale: Vec<&&str> = listed.iter().filter(|o| !emitted.contains(o)).collect();
        assert!(missing.is_empty(), "not in the metrics table: {missing:?}");
        assert!(
            stale.is_empty(),
            "in the metrics table, never emitted: {stale:?}"
        );
    }
}
