//! Where sign-ins in progress (their state and nonce) and people's sessions are kept: in memory for
//! one instance (bounded; the oldest go first), or on the Redis server of `[replay]`, shared by
//! every instance behind a balancer. Each entry expires with its own lifetime; a state is taken
//! once. When Redis does not answer, nobody is signed in: never a session on a guess.

use crate::gateway::fleet::redis::RedisStore;
use crate::gateway::fleet::replay::ReplayError;
use moka::sync::Cache;
use moka::Expiry;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Entries held at once in memory, of each kind: a flood of sign-ins started never pushes out
/// sessions.
pub const MEMORY_CAPACITY: u64 = 100_000;

/// What is kept: sign-ins in progress, or sessions.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    State,
    Session,
}

impl Kind {
    fn prefix(self) -> &'static str {
        match self {
            Kind::State => "login-state",
            Kind::Session => "session",
        }
    }
}

/// A value and how long it is kept.
#[derive(Clone)]
pub struct Entry {
    value: Arc<Vec<u8>>,
    ttl: Duration,
    created: Instant,
}

impl Entry {
    /// The value while it lives (the cache may hand out an entry it has not evicted yet).
    fn live(self) -> Option<Vec<u8>> {
        (self.created.elapsed() < self.ttl).then(|| self.value.as_ref().clone())
    }
}

struct OwnLifetime;

impl Expiry<String, Entry> for OwnLifetime {
    fn expire_after_create(&self, _: &String, entry: &Entry, _: Instant) -> Option<Duration> {
        Some(entry.ttl)
    }
}

pub enum SessionStore {
    Memory {
        states: Cache<String, Entry>,
        sessions: Cache<String, Entry>,
    },
    Redis(Arc<RedisStore>),
}

impl SessionStore {
    /// The store `[replay]` names (Redis is connected lazily).
    pub fn new(redis: Option<Arc<RedisStore>>) -> Self {
        match redis {
            None => {
                let cache = || {
                    Cache::builder()
                        .max_capacity(MEMORY_CAPACITY)
                        .expire_after(OwnLifetime)
                        .build()
                };
                SessionStore::Memory {
                    states: cache(),
                    sessions: cache(),
                }
            }
            Some(redis) => SessionStore::Redis(redis),
        }
    }

    fn key(kind: Kind, id: &str) -> String {
        format!("{}:{id}", kind.prefix())
    }

    /// The memory cache of `kind`.
    fn cache<'a>(
        kind: Kind,
        states: &'a Cache<String, Entry>,
        sessions: &'a Cache<String, Entry>,
    ) -> &'a Cache<String, Entry> {
        match kind {
            Kind::State => states,
            Kind::Session => sessions,
        }
    }

    fn redis_key(store: &RedisStore, kind: Kind, id: &str) -> String {
        format!("{}:{}", store.namespace, Self::key(kind, id))
    }

    pub async fn put(
        &self,
        kind: Kind,
        id: &str,
        value: Vec<u8>,
        ttl: Duration,
    ) -> Result<(), ReplayError> {
        match self {
            SessionStore::Memory { states, sessions } => {
                Self::cache(kind, states, sessions).insert(
                    Self::key(kind, id),
                    Entry {
                        value: Arc::new(value),
                        ttl,
                        created: Instant::now(),
                    },
                );
                Ok(())
            }
            SessionStore::Redis(r) => r
                .set_for(Self::redis_key(r, kind, id), &value, ttl)
                .await
                .map_err(ReplayError::Unavailable),
        }
    }

    /// The value, which is gone from the store afterwards (a state is used once).
    pub async fn take(&self, kind: Kind, id: &str) -> Result<Option<Vec<u8>>, ReplayError> {
        match self {
            SessionStore::Memory { states, sessions } => Ok(Self::cache(kind, states, sessions)
                .remove(&Self::key(kind, id))
                .and_then(Entry::live)),
            SessionStore::Redis(r) => r
                .value("GETDEL", Self::redis_key(r, kind, id))
                .await
                .map_err(ReplayError::Unavailable),
        }
    }

    pub async fn get(&self, kind: Kind, id: &str) -> Result<Option<Vec<u8>>, ReplayError> {
        match self {
            SessionStore::Memory { states, sessions } => Ok(Self::cache(kind, states, sessions)
                .get(&Self::key(kind, id))
                .and_then(Entry::live)),
            SessionStore::Redis(r) => r
                .value("GET", Self::redis_key(r, kind, id))
                .await
                .map_err(ReplayError::Unavailable),
        }
    }

    pub async fn remove(&self, kind: Kind, id: &str) -> Result<(), ReplayError> {
        match self {
            SessionStore::Memory { states, sessions } => {
                Self::cache(kind, states, sessions).invalidate(&Self::key(kind, id));
                Ok(())
            }
            SessionStore::Redis(r) => {
                let mut command = redis::cmd("DEL");
                command.arg(Self::redis_key(r, kind, id));
                r.run(command)
                    .await
                    .map_err(ReplayError::Unavailable)
                    .map(|_| ())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memory() -> SessionStore {
        SessionStore::new(None)
    }

    #[tokio::test]
    async fn a_state_is_taken_once_and_a_session_read_until_removed() {
        let store = memory();
        let hour = Duration::from_secs(3600);
        store
            .put(Kind::State, "s", b"1".to_vec(), hour)
            .await
            .unwrap();
        assert_eq!(
            store.get(Kind::Session, "s").await.unwrap(),
            None,
            "kinds are apart"
        );
        assert_eq!(
            store.take(Kind::State, "s").await.unwrap(),
            Some(b"1".to_vec())
        );
        assert_eq!(store.take(Kind::State, "s").await.unwrap(), None);
        store
            .put(Kind::Session, "x", b"2".to_vec(), hour)
            .await
            .unwrap();
        assert_eq!(
            store.get(Kind::Session, "x").await.unwrap(),
            Some(b"2".to_vec())
        );
        assert_eq!(
            store.get(Kind::Session, "x").await.unwrap(),
            Some(b"2".to_vec())
        );
        store.remove(Kind::Session, "x").await.unwrap();
        assert_eq!(store.get(Kind::Session, "x").await.unwrap(), None);
    }

    #[tokio::test]
    async fn an_entry_expires_with_its_own_lifetime() {
        let store = memory();
        store
            .put(
                Kind::Session,
                "short",
                b"1".to_vec(),
                Duration::from_millis(50),
            )
            .await
            .unwrap();
        store
            .put(
                Kind::Session,
                "long",
                b"2".to_vec(),
                Duration::from_secs(60),
            )
            .await
            .unwrap();
        store
            .put(
                Kind::State,
                "short",
                b"3".to_vec(),
                Duration::from_millis(50),
            )
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(120)).await;
        assert_eq!(store.get(Kind::Session, "short").await.unwrap(), None);
        assert_eq!(store.take(Kind::State, "short").await.unwrap(), None);
        assert_eq!(
            store.get(Kind::Session, "long").await.unwrap(),
            Some(b"2".to_vec())
        );
    }
}
