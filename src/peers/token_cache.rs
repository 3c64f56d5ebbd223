//! Our own access tokens at other participants, cached for 90% of their `expires_in`; concurrent
//! misses for one participant make one token request, and failures are not cached.

use super::{PeerClient, PeerError};
use moka::future::Cache;
use moka::Expiry;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Clone)]
struct Cached {
    token: Arc<str>,
    ttl: Duration,
}

struct ByLifetime;

impl Expiry<String, Cached> for ByLifetime {
    fn expire_after_create(
        &self,
        _key: &String,
        value: &Cached,
        _created_at: Instant,
    ) -> Option<Duration> {
        Some(value.ttl)
    }
}

#[derive(Clone)]
pub struct TokenCache {
    cache: Cache<String, Cached>,
}

impl Default for TokenCache {
    fn default() -> Self {
        TokenCache {
            cache: Cache::builder()
                .max_capacity(1024)
                .expire_after(ByLifetime)
                .build(),
        }
    }
}

impl TokenCache {
    /// A token for calling `audience` whose token endpoint is `token_url`.
    pub async fn get(
        &self,
        peer: &PeerClient,
        token_url: &str,
        audience: &str,
    ) -> Result<Arc<str>, PeerError> {
        self.get_fresh(peer, token_url, audience)
            .await
            .map(|(token, _)| token)
    }

    /// A token as `get` gives it, and whether it was asked for by this call (a fresh token:
    /// a refusal of it is not the cache's doing).
    pub async fn get_fresh(
        &self,
        peer: &PeerClient,
        token_url: &str,
        audience: &str,
    ) -> Result<(Arc<str>, bool), PeerError> {
        let key = format!("{audience} {token_url}");
        let asked = std::sync::atomic::AtomicBool::new(false);
        self.cache
            .try_get_with(key, async {
                asked.store(true, std::sync::atomic::Ordering::Relaxed);
                let t = peer.token(token_url, audience).await?;
                Ok::<_, PeerError>(Cached {
                    token: Arc::from(t.access_token.as_str()),
                    ttl: Duration::from_secs(t.expires_in.saturating_mul(9) / 10),
                })
            })
            .await
            .map(|c| (c.token, asked.load(std::sync::atomic::Ordering::Relaxed)))
            .map_err(|e| (*e).clone())
    }

    /// Forget the token for `audience` if it is still `refused`: one another call fetched since
    /// stays.
    pub async fn forget_refused(&self, token_url: &str, audience: &str, refused: &str) {
        let key = format!("{audience} {token_url}");
        if let Some(held) = self.cache.get(&key).await {
            if *held.token == *refused {
                self.cache.invalidate(&key).await;
            }
        }
    }

    /// Forget the token for `audience` (after the participant refused it).
    pub async fn forget(&self, token_url: &str, audience: &str) {
        self.cache
            .invalidate(&format!("{audience} {token_url}"))
            .await;
    }
}
