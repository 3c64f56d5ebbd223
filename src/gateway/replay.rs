//! The jti replay store: every accepted client assertion's jti (at the token endpoint, and of
//! consumer assertions a broker forwards), so that none is accepted twice. Kept in memory, bounded
//! (a full store refuses rather than forgetting a jti early), keyed by a hash so that a long jti
//! costs no more than a short one.

use crate::scheme::Timestamp;
use std::collections::HashMap;
use std::sync::Mutex;

const SHARDS: usize = 16;

/// Why the store cannot tell whether a jti was used: the assertion is refused (fail closed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplayError {
    #[error("the replay store is full")]
    Full,
}

/// (issuer, jti) as a fixed-size key.
type Key = [u8; 32];

fn key(issuer: &str, jti: &str) -> Key {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    ctx.update(&(issuer.len() as u64).to_be_bytes());
    ctx.update(issuer.as_bytes());
    ctx.update(jti.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(ctx.finish().as_ref());
    out
}

/// The jtis seen, each with the time (seconds since the epoch) until which it is kept.
pub struct ReplayStore {
    shards: Vec<Mutex<HashMap<Key, f64>>>,
    per_shard: usize,
}

impl ReplayStore {
    /// A store holding at most `capacity` jtis at once.
    pub fn new(capacity: usize) -> Self {
        ReplayStore {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            per_shard: capacity.div_ceil(SHARDS).max(1),
        }
    }

    /// Remember `jti` of `issuer` until `until`; false when it was seen before (a replay).
    pub async fn first_use(
        &self,
        issuer: &str,
        jti: &str,
        until: f64,
        now: Timestamp,
    ) -> Result<bool, ReplayError> {
        let key = key(issuer, jti);
        let shard = &self.shards[key[0] as usize % SHARDS];
        let mut seen = shard.lock().unwrap_or_else(|e| e.into_inner());
        let now = now.as_f64();
        if seen.get(&key).is_some_and(|kept| *kept > now) {
            return Ok(false);
        }
        if seen.len() >= self.per_shard {
            seen.retain(|_, kept| *kept > now);
            if seen.len() >= self.per_shard {
                return Err(ReplayError::Full);
            }
        }
        seen.insert(key, until);
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_secs(secs)
    }

    #[tokio::test]
    async fn a_jti_is_accepted_once_until_it_is_forgotten() {
        let store = ReplayStore::new(100);
        assert_eq!(store.first_use("a", "j", 1035.0, at(1000)).await, Ok(true));
        assert_eq!(store.first_use("a", "j", 1035.0, at(1034)).await, Ok(false));
        assert_eq!(store.first_use("b", "j", 1035.0, at(1001)).await, Ok(true));
        assert_eq!(store.first_use("a", "j", 1100.0, at(1036)).await, Ok(true));
    }

    #[tokio::test]
    async fn a_full_store_refuses_and_makes_room_as_jtis_expire() {
        let store = ReplayStore::new(SHARDS);
        let mut refused = 0;
        for i in 0..200 {
            match store
                .first_use("a", &format!("j{i}"), 1030.0, at(1000))
                .await
            {
                Ok(true) => {}
                Err(ReplayError::Full) => refused += 1,
                other => panic!("{other:?}"),
            }
        }
        assert!(refused >= 200 - SHARDS, "{refused}");
        assert_eq!(
            store.first_use("a", "later", 1100.0, at(1031)).await,
            Ok(true)
        );
    }

    #[tokio::test]
    async fn a_long_jti_is_kept_by_its_hash() {
        let store = ReplayStore::new(100);
        let long = "x".repeat(100_000);
        assert_eq!(
            store.first_use("a", &long, 1100.0, at(1031)).await,
            Ok(true)
        );
        assert_eq!(
            store.first_use("a", &long, 1100.0, at(1032)).await,
            Ok(false)
        );
    }
}
