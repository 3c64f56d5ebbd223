//! The jti replay store: every accepted client assertion's jti (at the token endpoint, and of
//! consumer assertions a broker forwards), so that none is accepted twice, keyed by a hash so that
//! a long jti costs no more than a short one. In memory (one instance; bounded, and a full store
//! refuses rather than forgetting a jti early), or on Redis, shared by every instance behind a
//! balancer. When the store cannot answer, the assertion is refused: never a replay accepted.
//!
//! A store that lost its memory (a process restarted, a Redis back empty) cannot tell which jtis it
//! saw. Each store therefore has an epoch, the second from which it remembers: the process's start
//! in memory, and on Redis a key written by the first instance that finds it missing. An assertion
//! issued before the epoch may have been accepted by the store that was lost, and is refused; 30
//! seconds later every such assertion has expired anyway.

use crate::gateway::fleet::redis::RedisStore;
use crate::scheme::assertion::AssertionError;
use crate::scheme::Timestamp;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
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

/// What the store knows of an assertion's jti.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// Not seen before; now remembered.
    First,
    /// Seen before: a replay.
    Replayed,
    /// Issued before the store's epoch (seconds since the Unix epoch): it may have been seen by
    /// the store that was lost.
    BeforeEpoch(i64),
}

impl Use {
    /// Accepted on its first use; otherwise why it is refused.
    pub fn accepted(self) -> Result<(), AssertionError> {
        match self {
            Use::First => Ok(()),
            Use::Replayed => Err(AssertionError::Replayed),
            Use::BeforeEpoch(epoch) => Err(AssertionError::IssuedBeforeReplayStore { epoch }),
        }
    }
}

/// Where jtis are kept.
pub enum ReplayStore {
    Memory(MemoryStore),
    Redis(Arc<RedisStore>),
}

impl ReplayStore {
    /// The store the settings name; Redis is connected lazily (start-up never waits for it).
    /// On the fleet's Redis, or (without it) in memory for at most `capacity` jtis, remembering
    /// from now.
    pub fn new(capacity: usize, redis: Option<Arc<RedisStore>>) -> Self {
        match redis {
            None => ReplayStore::Memory(MemoryStore::new(capacity, Timestamp::now())),
            Some(redis) => ReplayStore::Redis(redis),
        }
    }

    /// The fleet's Redis, when the store is there.
    pub fn redis(&self) -> Option<&Arc<RedisStore>> {
        match self {
            ReplayStore::Memory(_) => None,
            ReplayStore::Redis(redis) => Some(redis),
        }
    }

    /// Remember `jti` of `issuer`, an assertion issued at `issued`, until `until` (seconds since
    /// the epoch). `leeway`: how far in the future an `iat` is accepted, and so how long before
    /// its `iat` an assertion may have been accepted by a store that was lost.
    pub async fn first_use(
        &self,
        issuer: &str,
        jti: &str,
        (issued, leeway): (f64, f64),
        until: f64,
        now: Timestamp,
    ) -> Result<Use, ReplayError> {
        match self {
            ReplayStore::Memory(m) => m.first_use(issuer, jti, issued, until, now),
            ReplayStore::Redis(r) => r.first_use(issuer, jti, (issued, leeway), until, now).await,
        }
    }

    /// Whether the store can answer (for /ready); on Redis, its epoch is established (written if
    /// missing), so that a store back empty has one before the balancer sends traffic.
    pub async fn check(&self) -> Result<(), ReplayError> {
        match self {
            ReplayStore::Memory(_) => Ok(()),
            ReplayStore::Redis(r) => r.establish_epoch(Timestamp::now()).await.map(|_| ()),
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
    epoch: i64,
}

impl MemoryStore {
    /// A store holding at most `capacity` jtis at once, remembering from `epoch`.
    pub fn new(capacity: usize, epoch: Timestamp) -> Self {
        MemoryStore {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            per_shard: capacity.div_ceil(SHARDS).max(1),
            epoch: epoch.as_f64().floor() as i64,
        }
    }

    fn first_use(
        &self,
        issuer: &str,
        jti: &str,
        issued: f64,
        until: f64,
        now: Timestamp,
    ) -> Result<Use, ReplayError> {
        if issued < self.epoch as f64 {
            return Ok(Use::BeforeEpoch(self.epoch));
        }
        let key = key(issuer, jti);
        let shard = &self.shards[key[0] as usize % SHARDS];
        let mut seen = shard.lock().unwrap_or_else(|e| e.into_inner());
        let now = now.as_f64();
        if seen.get(&key).is_some_and(|kept| *kept > now) {
            return Ok(Use::Replayed);
        }
        if seen.len() >= self.per_shard {
            seen.retain(|_, kept| *kept > now);
            if seen.len() >= self.per_shard {
                return Err(ReplayError::Full);
            }
        }
        seen.insert(key, until);
        Ok(Use::First)
    }
}

/// The epoch established (KEYS[1]: the epoch, KEYS[2]: the latest acceptance; ARGV[1]: now,
/// ARGV[2]: the latest acceptance this instance wrote, ARGV[3]: the epoch it saw last, 0: none):
/// when the store has no epoch though this instance saw one, or holds an older latest acceptance
/// than this instance wrote, it lost writes (came back empty, a failover to a replica
/// behind, a restored snapshot, the last second of an append-only file), and the epoch is the next
/// second (an assertion of this second may have been accepted in what was lost), the latest
/// acceptance now; written if missing (a store new to this instance); then `epoch` and `latest`
/// read. A store new to every instance cannot be told from one that lost everything while they
/// all restarted: assertions issued before its first use are refused (`/ready` uses it first).
const ESTABLISH: &str = "local latest = tonumber(redis.call('GET', KEYS[2])) or 0 \
    local gone = tonumber(ARGV[3]) ~= 0 and redis.call('EXISTS', KEYS[1]) == 0 \
    if gone or latest < tonumber(ARGV[2]) then \
        redis.call('SET', KEYS[1], tonumber(ARGV[1]) + 1) \
        redis.call('SET', KEYS[2], ARGV[1]) \
        latest = tonumber(ARGV[1]) \
    end \
    redis.call('SET', KEYS[1], ARGV[1], 'NX') \
    local epoch = tonumber(redis.call('GET', KEYS[1])) \
    if epoch == nil then return redis.error_reply('the epoch is not a number') end";

/// The epoch, as of `/ready`: `[epoch]`.
const EPOCH: &str = "return {epoch}";

/// The epoch established, then the jti (KEYS[3]) kept with `SET key 1 NX PX ms` (ARGV[5]) unless
/// the assertion was issued (ARGV[4]) before the epoch, and the latest acceptance moved on:
/// `[1 first | 0 replayed | -1 before, epoch]`.
const FIRST_USE: &str = "if tonumber(ARGV[4]) < epoch then return {-1, epoch} end \
    if redis.call('SET', KEYS[3], '1', 'NX', 'PX', ARGV[5]) then \
        if latest < tonumber(ARGV[1]) then redis.call('SET', KEYS[2], ARGV[1]) end \
        return {1, epoch} \
    end \
    return {0, epoch}";

/// jtis on Redis, with the store's epoch in the same script (one round trip, atomic). A call that
/// times out may still have stored the jti; the assertion is refused all the same.
impl RedisStore {
    /// A script that establishes the epoch, then runs `then`: the keys and arguments [`ESTABLISH`]
    /// takes, and `jti` as the third key.
    fn script(&self, then: &str, jti: Option<String>, now: Timestamp) -> redis::Cmd {
        let mut command = redis::cmd("EVAL");
        command
            .arg(format!("{ESTABLISH} {then}"))
            .arg(2 + usize::from(jti.is_some()))
            .arg(format!("{}:epoch", self.namespace))
            .arg(format!("{}:latest", self.namespace));
        if let Some(jti) = jti {
            command.arg(jti);
        }
        command
            .arg(now.as_f64().floor() as i64)
            .arg(self.written.load(Ordering::Relaxed))
            .arg(self.epoch_seen.load(Ordering::Relaxed));
        command
    }

    async fn first_use(
        &self,
        issuer: &str,
        jti: &str,
        (issued, leeway): (f64, f64),
        until: f64,
        now: Timestamp,
    ) -> Result<Use, ReplayError> {
        let millis = ((until - now.as_f64()) * 1000.0).ceil().max(1.0) as u64;
        let jti = format!("{}:jti:{}", self.namespace, hex::encode(key(issuer, jti)));
        let mut command = self.script(FIRST_USE, Some(jti), now);
        command.arg(issued).arg(millis);
        let answer = self.run(command).await.map_err(ReplayError::Unavailable)?;
        match integers(&answer).as_deref() {
            // After a reset this instance saw, an assertion issued up to `leeway` after the new
            // epoch may have been accepted before it, with an iat in the future then.
            Some(&[1, epoch])
                if self.saw_epoch(epoch)? == self.reset_seen.load(Ordering::Relaxed)
                    && issued < epoch as f64 + leeway =>
            {
                Ok(Use::BeforeEpoch(epoch))
            }
            Some(&[1, _]) => {
                self.written
                    .fetch_max(now.as_f64().floor() as i64, Ordering::Relaxed);
                Ok(Use::First)
            }
            Some(&[0, epoch]) => self.saw_epoch(epoch).map(|_| Use::Replayed),
            Some(&[-1, epoch]) => self.saw_epoch(epoch).map(|_| Use::BeforeEpoch(epoch)),
            _ => Err(ReplayError::Unavailable(format!(
                "unexpected answer {answer:?}"
            ))),
        }
    }

    /// The store's epoch, written if it is missing or the store lost writes.
    async fn establish_epoch(&self, now: Timestamp) -> Result<i64, ReplayError> {
        let command = self.script(EPOCH, None, now);
        let answer = self.run(command).await.map_err(ReplayError::Unavailable)?;
        match integers(&answer).as_deref() {
            Some(&[epoch]) => self.saw_epoch(epoch),
            _ => Err(ReplayError::Unavailable(format!(
                "unexpected answer {answer:?}"
            ))),
        }
    }

    /// Note the epoch an answer carried; a new one means the store lost what it held, which the
    /// log says once per instance and epoch.
    fn saw_epoch(&self, epoch: i64) -> Result<i64, ReplayError> {
        let before = self.epoch_seen.swap(epoch, Ordering::Relaxed);
        if before != 0 && before != epoch {
            self.reset_seen.store(epoch, Ordering::Relaxed);
            tracing::warn!(
                previous_epoch = before,
                epoch,
                "the replay store on Redis came back without what it held: client assertions \
                 issued before its new epoch are refused until they expire (configure Redis \
                 with appendonly to keep its memory across restarts)"
            );
        }
        Ok(epoch)
    }
}

/// An array of integers, as the scripts answer.
fn integers(value: &redis::Value) -> Option<Vec<i64>> {
    match value {
        redis::Value::Array(items) => items
            .iter()
            .map(|v| match v {
                redis::Value::Int(n) => Some(*n),
                _ => None,
            })
            .collect(),
        _ => None,
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
        let store = MemoryStore::new(100, at(900));
        let first = |issuer, until, now| store.first_use(issuer, "j", 1000.0, until, at(now));
        assert_eq!(first("a", 1035.0, 1000), Ok(Use::First));
        assert_eq!(first("a", 1035.0, 1034), Ok(Use::Replayed));
        assert_eq!(first("b", 1035.0, 1001), Ok(Use::First));
        assert_eq!(first("a", 1100.0, 1036), Ok(Use::First));
    }

    #[test]
    fn an_assertion_issued_before_the_store_remembers_is_refused() {
        let store = MemoryStore::new(100, Timestamp::from_secs_f64(1000.7));
        let issued = |iat| store.first_use("a", "j", iat, 1040.0, at(1001));
        assert_eq!(issued(999.9), Ok(Use::BeforeEpoch(1000)));
        // Issued in the epoch's second: iat has whole seconds, and a store that started 0.7 s
        // into it does not refuse the clients that made their assertions after it.
        assert_eq!(issued(1000.0), Ok(Use::First));
        assert_eq!(issued(1000.0), Ok(Use::Replayed));
    }

    #[test]
    fn a_full_store_refuses_and_makes_room_as_jtis_expire() {
        let store = MemoryStore::new(SHARDS, at(900));
        let mut refused = 0;
        for i in 0..200 {
            match store.first_use("a", &format!("j{i}"), 1000.0, 1030.0, at(1000)) {
                Ok(Use::First) => {}
                Err(ReplayError::Full) => refused += 1,
                other => panic!("{other:?}"),
            }
        }
        assert!(refused >= 200 - SHARDS, "{refused}");
        assert_eq!(
            store.first_use("a", "later", 1030.0, 1100.0, at(1031)),
            Ok(Use::First)
        );
    }

    #[test]
    fn a_long_jti_is_kept_by_its_hash() {
        let store = MemoryStore::new(100, at(900));
        let long = "x".repeat(100_000);
        let first = |now| store.first_use("a", &long, 1030.0, 1100.0, at(now));
        assert_eq!(first(1031), Ok(Use::First));
        assert_eq!(first(1032), Ok(Use::Replayed));
    }
}
