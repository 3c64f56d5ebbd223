//! The jti replay store: every accepted client assertion's jti (at the token endpoint, and of
//! consumer assertions a broker forwards), so that none is accepted twice, keyed by a hash so that
//! a long jti costs no more than a short one. In memory (one instance; bounded, and a full store
//! refuses rather than forgetting a jti early), or on Redis, shared by every instance behind a
//! balancer. When the store cannot answer, the assertion is refused: never a replay accepted.

use super::redis::RedisStore;
use crate::scheme::Timestamp;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

const SHARDS: usize = 16;

/// Why the store cannot tell whether a jti was used: the assertion is refused (fail closed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplayError {
    #[error("the replay store is full")]
    Full,
    #[error("the replay store on Redis did not answer: {0}")]
    Unavailable(String),
}

/// Where jtis are kept.
pub enum ReplayStore {
    Memory(MemoryStore),
    Redis(Arc<RedisStore>),
}

impl ReplayStore {
    /// The store the settings name; Redis is connected lazily (start-up never waits for it).
    /// On the fleet's Redis, or (without it) in memory for at most `capacity` jtis.
    pub fn new(capacity: usize, redis: Option<Arc<RedisStore>>) -> Self {
        match redis {
            None => ReplayStore::Memory(MemoryStore::new(capacity)),
            Some(redis) => ReplayStore::Redis(redis),
        }
    }

    /// Remember `jti` of `issuer` until `until` (seconds since the epoch); false when it was seen
    /// before (a replay).
    pub async fn first_use(
        &self,
        issuer: &str,
        jti: &str,
        until: f64,
        now: Timestamp,
    ) -> Result<bool, ReplayError> {
        match self {
            ReplayStore::Memory(m) => m.first_use(issuer, jti, until, now),
            ReplayStore::Redis(r) => r.first_use(issuer, jti, until, now).await,
        }
    }

    /// Whether the store can answer (for /ready).
    pub async fn check(&self) -> Result<(), ReplayError> {
        match self {
            ReplayStore::Memory(_) => Ok(()),
            ReplayStore::Redis(r) => r.ping().await,
        }
    }
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
pub struct MemoryStore {
    shards: Vec<Mutex<HashMap<Key, f64>>>,
    per_shard: usize,
}

impl MemoryStore {
    /// A store holding at most `capacity` jtis at once.
    pub fn new(capacity: usize) -> Self {
        MemoryStore {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            per_shard: capacity.div_ceil(SHARDS).max(1),
        }
    }

    fn first_use(
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

/// jtis on Redis: `SET key 1 NX PX ms`. A call that times out may still have stored the jti; the
/// assertion is refused all the same.
impl RedisStore {
    async fn first_use(
        &self,
        issuer: &str,
        jti: &str,
        until: f64,
        now: Timestamp,
    ) -> Result<bool, ReplayError> {
        let millis = ((until - now.as_f64()) * 1000.0).ceil().max(1.0) as u64;
        let mut command = redis::cmd("SET");
        command
            .arg(format!(
                "{}:jti:{}",
                self.namespace,
                hex::encode(key(issuer, jti))
            ))
            .arg(1u8)
            .arg("NX")
            .arg("PX")
            .arg(millis);
        match self.run(command).await.map_err(ReplayError::Unavailable)? {
            redis::Value::Okay => Ok(true),
            redis::Value::Nil => Ok(false),
            other => Err(ReplayError::Unavailable(format!(
                "unexpected answer {other:?}"
            ))),
        }
    }

    async fn ping(&self) -> Result<(), ReplayError> {
        match self
            .run(redis::cmd("PING"))
            .await
            .map_err(ReplayError::Unavailable)?
        {
            redis::Value::SimpleString(s) if s == "PONG" => Ok(()),
            other => Err(ReplayError::Unavailable(format!(
                "unexpected answer {other:?}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_secs(secs)
    }

    #[test]
    fn a_jti_is_accepted_once_until_it_is_forgotten() {
        let store = MemoryStore::new(100);
        assert_eq!(store.first_use("a", "j", 1035.0, at(1000)), Ok(true));
        assert_eq!(store.first_use("a", "j", 1035.0, at(1034)), Ok(false));
        assert_eq!(store.first_use("b", "j", 1035.0, at(1001)), Ok(true));
        assert_eq!(store.first_use("a", "j", 1100.0, at(1036)), Ok(true));
    }

    #[test]
    fn a_full_store_refuses_and_makes_room_as_jtis_expire() {
        let store = MemoryStore::new(SHARDS);
        let mut refused = 0;
        for i in 0..200 {
            match store.first_use("a", &format!("j{i}"), 1030.0, at(1000)) {
                Ok(true) => {}
                Err(ReplayError::Full) => refused += 1,
                other => panic!("{other:?}"),
            }
        }
        assert!(refused >= 200 - SHARDS, "{refused}");
        assert_eq!(store.first_use("a", "later", 1100.0, at(1031)), Ok(true));
    }

    #[test]
    fn a_long_jti_is_kept_by_its_hash() {
        let store = MemoryStore::new(100);
        let long = "x".repeat(100_000);
        assert_eq!(store.first_use("a", &long, 1100.0, at(1031)), Ok(true));
        assert_eq!(store.first_use("a", &long, 1100.0, at(1032)), Ok(false));
    }
}
