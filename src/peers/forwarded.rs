//! Consumers' client assertions kept from their token requests, to forward in `previous_steps` to
//! registries that want one (`[[registry]] previous_steps = "consumer_assertion"`): the latest of
//! each consumer, until its `exp`. In memory: in a fleet, the instance that issued the token holds
//! it. The gateway never signs one itself.

use crate::scheme::Timestamp;
use std::time::Duration;

/// The bytes of assertions held at once (an assertion with its x5c chain is a few KiB); past it,
/// the least used go first.
const CAPACITY_BYTES: u64 = 64 * 1024 * 1024;

/// The latest assertion of each consumer, while it lives. Kept across reloads, as the other
/// stores are; the token endpoint keeps one only while some registry wants it.
pub struct ForwardedAssertions {
    held: moka::sync::Cache<String, (String, f64)>,
}

impl Default for ForwardedAssertions {
    fn default() -> Self {
        ForwardedAssertions {
            // Assertions live 30 s; an entry outlives none by more than this.
            held: moka::sync::Cache::builder()
                .weigher(|consumer: &String, (assertion, _): &(String, f64)| {
                    u32::try_from(consumer.len() + assertion.len()).unwrap_or(u32::MAX)
                })
                .max_capacity(CAPACITY_BYTES)
                .time_to_live(Duration::from_secs(60))
                .build(),
        }
    }
}

impl ForwardedAssertions {
    /// Keep `assertion` of `consumer`, valid until `exp`.
    pub fn keep(&self, consumer: &str, assertion: &str, exp: f64) {
        self.held
            .insert(consumer.to_string(), (assertion.to_string(), exp));
    }

    /// The assertion of `consumer` that has not expired at `now`.
    pub fn of(&self, consumer: &str, now: Timestamp) -> Option<String> {
        self.held
            .get(consumer)
            .filter(|(_, exp)| now.as_f64() < *exp)
            .map(|(assertion, _)| assertion)
    }
}
