//! The jti replay store: every accepted client assertion's jti, so that none is accepted twice.

use crate::scheme::assertion::JtiStore;
use crate::scheme::Timestamp;
use std::time::{Duration, Instant};

/// The jti replay store of the token endpoint: every accepted assertion's jti, each kept until
/// the time the assertion rules give it (past the longest time it can be accepted).
pub struct ReplayStore {
    seen: moka::sync::Cache<(String, String), Duration>,
}

struct KeepFor;

impl moka::Expiry<(String, String), Duration> for KeepFor {
    fn expire_after_create(
        &self,
        _k: &(String, String),
        keep: &Duration,
        _at: Instant,
    ) -> Option<Duration> {
        Some(*keep)
    }
}

impl Default for ReplayStore {
    fn default() -> Self {
        ReplayStore {
            seen: moka::sync::Cache::builder()
                .max_capacity(10_000_000)
                .expire_after(KeepFor)
                .build(),
        }
    }
}

impl JtiStore for ReplayStore {
    fn remember(&self, issuer: &str, jti: &str, until: f64, now: Timestamp) -> bool {
        let keep = Duration::from_secs_f64((until - now.as_f64()).max(1.0));
        self.seen
            .entry((issuer.to_string(), jti.to_string()))
            .or_insert(keep)
            .is_fresh()
    }
}
