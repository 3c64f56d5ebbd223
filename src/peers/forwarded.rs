//! Consumers' client assertions kept from their token requests, to forward in `previous_steps` to
//! registries that want one (`[[registry]] previous_steps = "consumer_assertion"`): the latest of
//! each consumer, until its `exp`. In memory, and in a fleet also in the fleet's shared store, so
//! that whichever instance a request reaches can forward the assertion another instance took. The
//! gateway never signs one itself.

use crate::scheme::Timestamp;
use async_trait::async_trait;
use std::sync::Arc;
use std::time::Duration;

/// The bytes of assertions held at once (an assertion with its x5c chain is a few KiB); past it,
/// the least used go first.
const CAPACITY_BYTES: u64 = 64 * 1024 * 1024;

/// The fleet's shared store of assertions (its Redis): each kept until its `exp`.
#[async_trait]
pub trait SharedAssertions: Send + Sync {
    /// Keep `assertion` of `consumer` for `ttl`.
    async fn put(&self, consumer: &str, assertion: &str, ttl: Duration) -> Result<(), String>;
    /// The assertion of `consumer`, while it is kept.
    async fn get(&self, consumer: &str) -> Result<Option<String>, String>;
}

/// The latest assertion of each consumer, while it lives. Kept across reloads, as the other
/// stores are; the token endpoint keeps one only while some registry wants it.
pub struct ForwardedAssertions {
    held: moka::sync::Cache<String, (String, f64)>,
    shared: Option<Arc<dyn SharedAssertions>>,
}

impl ForwardedAssertions {
    /// In memory, and in `shared` when the gateway is one of a fleet.
    pub fn new(shared: Option<Arc<dyn SharedAssertions>>) -> Self {
        ForwardedAssertions {
            // Assertions live 30 s; an entry outlives none by more than this.
            held: moka::sync::Cache::builder()
                .weigher(|consumer: &String, (assertion, _): &(String, f64)| {
                    u32::try_from(consumer.len() + assertion.len()).unwrap_or(u32::MAX)
                })
                .max_capacity(CAPACITY_BYTES)
                .time_to_live(Duration::from_secs(60))
                .build(),
            shared,
        }
    }

    /// Keep `assertion` of `consumer`, valid until `exp`, here and in the shared store. A shared
    /// store that fails leaves the assertion held here only: the caller is told why.
    pub async fn keep(
        &self,
        consumer: &str,
        assertion: &str,
        exp: f64,
        now: Timestamp,
    ) -> Result<(), String> {
        self.held
            .insert(consumer.to_string(), (assertion.to_string(), exp));
        let Some(shared) = &self.shared else {
            return Ok(());
        };
        let ttl = Duration::from_secs_f64((exp - now.as_f64()).max(0.001));
        shared.put(consumer, assertion, ttl).await
    }

    /// The assertion of `consumer` that has not expired at `now`: held here, or else in the
    /// shared store. An error: the shared store did not answer.
    pub async fn of(&self, consumer: &str, now: Timestamp) -> Result<Option<String>, String> {
        let here = self
            .held
            .get(consumer)
            .filter(|(_, exp)| now.as_f64() < *exp)
            .map(|(assertion, _)| assertion);
        match (here, &self.shared) {
            (Some(assertion), _) => Ok(Some(assertion)),
            (None, None) => Ok(None),
            (None, Some(shared)) => shared.get(consumer).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A shared store in memory, as another instance sees the fleet's.
    #[derive(Default)]
    struct Fleet(Mutex<Vec<(String, String)>>);

    #[async_trait]
    impl SharedAssertions for Fleet {
        async fn put(&self, consumer: &str, assertion: &str, _: Duration) -> Result<(), String> {
            let mut kept = self.0.lock().unwrap();
            kept.retain(|(c, _)| c != consumer);
            kept.push((consumer.into(), assertion.into()));
            Ok(())
        }
        async fn get(&self, consumer: &str) -> Result<Option<String>, String> {
            let kept = self.0.lock().unwrap();
            Ok(kept
                .iter()
                .find(|(c, _)| c == consumer)
                .map(|(_, a)| a.clone()))
        }
    }

    #[tokio::test]
    async fn an_assertion_taken_at_one_instance_is_forwarded_by_another() {
        let fleet: Arc<dyn SharedAssertions> = Arc::new(Fleet::default());
        let (taker, other) = (
            ForwardedAssertions::new(Some(fleet.clone())),
            ForwardedAssertions::new(Some(fleet)),
        );
        let now = Timestamp::from_secs(1_000);
        taker.keep("c", "jwt-1", 1_030.0, now).await.unwrap();
        assert_eq!(other.of("c", now).await, Ok(Some("jwt-1".into())));
        assert_eq!(other.of("d", now).await, Ok(None));
        // Here, an expired assertion is not forwarded.
        let alone = ForwardedAssertions::new(None);
        alone.keep("c", "jwt-1", 1_030.0, now).await.unwrap();
        assert_eq!(alone.of("c", now).await, Ok(Some("jwt-1".into())));
        assert_eq!(alone.of("c", Timestamp::from_secs(1_030)).await, Ok(None));
    }
}
