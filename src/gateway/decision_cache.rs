//! Decisions made with a registry's evidence, cached per rule and request: a Permit until the
//! evidence's `notOnOrAfter` (at most the configured time), a Deny briefly, an error never.
//! Concurrent misses of one key make one registry call.

use super::reject::Reject;
use crate::config::model::DelegationSettings;
use crate::scheme::evidence::{AccessRequest, Decision};
use crate::scheme::Timestamp;
use crate::telemetry::Metrics;
use moka::Expiry;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a decision is cached by: a looser rule never serves a stricter one.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DecisionKey {
    pub route: String,
    pub request: AccessRequest,
    pub registry: String,
    pub path: Vec<String>,
}

#[derive(Clone)]
struct Cached {
    decision: Arc<Decision>,
    ttl: Duration,
}

struct ByDecision;

impl Expiry<DecisionKey, Cached> for ByDecision {
    fn expire_after_create(&self, _k: &DecisionKey, v: &Cached, _at: Instant) -> Option<Duration> {
        Some(v.ttl)
    }
}

pub struct DecisionCache {
    cache: moka::future::Cache<DecisionKey, Cached>,
    permit_ttl: Duration,
    deny_ttl: Duration,
    metrics: Metrics,
}

impl DecisionCache {
    pub fn new(settings: &DelegationSettings, metrics: Metrics) -> Self {
        DecisionCache {
            cache: moka::future::Cache::builder()
                .max_capacity(settings.cache_capacity)
                .expire_after(ByDecision)
                .build(),
            permit_ttl: settings.cache_ttl,
            deny_ttl: settings.deny_cache_ttl,
            metrics,
        }
    }

    /// The cached decision for `key`, or the one `decide` makes (then cached unless it failed).
    pub async fn get_or_decide(
        &self,
        key: DecisionKey,
        decide: impl Future<Output = Result<Decision, Reject>>,
    ) -> Result<Decision, Reject> {
        let mut hit = true;
        let result = self
            .cache
            .try_get_with(key, async {
                hit = false;
                let decision = decide.await?;
                let ttl = match &decision {
                    Decision::Permit(p) => {
                        let left = (p.not_on_or_after - Timestamp::now().secs()).max(0) as u64;
                        self.permit_ttl.min(Duration::from_secs(left))
                    }
                    Decision::Deny(_) => self.deny_ttl,
                };
                Ok::<_, Reject>(Cached {
                    decision: Arc::new(decision),
                    ttl,
                })
            })
            .await;
        self.metrics.cache_hit("decision", hit);
        result
            .map(|c| (*c.decision).clone())
            .map_err(|e| (*e).clone())
    }
}
