//! Purging cached decisions after a data owner withdraws a policy: by policy issuer, by access
//! subject or all, here and (on the fleet's Redis) at every instance through a pub/sub channel of
//! the party; a purge heard on the channel applies here and is not published again.

use crate::gateway::evidence::cache::PurgeScope;
use crate::gateway::snapshot::GatewayState;
use async_trait::async_trait;
use futures::StreamExt;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// The largest purge request body.
pub const MAX_BODY_BYTES: usize = 4096;
/// How long a lost subscription waits before it is made again.
const RESUBSCRIBE_AFTER: Duration = Duration::from_secs(1);
/// How often the subscription's connection is asked for a PING: a connection that went half-open
/// would otherwise stay quiet, never failing.
const PING_EVERY: Duration = Duration::from_secs(5);

/// What a purge published on the channel carries: the scope and the instance it came from (which
/// has purged already).
#[derive(Serialize, Deserialize)]
struct Published {
    from: String,
    scope: PurgeScope,
}

/// This process among the instances, on the channel.
fn instance() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(crate::scheme::jwe::random_value)
}

fn channel(namespace: &str) -> String {
    format!("{namespace}:purge")
}

/// What a purge did: the entries dropped here, and for a fleet on Redis whether the other
/// instances were told (None: no fleet store; Err: Redis could not be reached).
pub struct Purged {
    pub dropped: u64,
    pub fleet: Option<Result<(), String>>,
}

/// Purge here, then publish it to the fleet when the store is Redis.
pub async fn purge(state: &GatewayState, scope: &PurgeScope) -> Purged {
    let snap = state.current.load_full();
    let dropped = snap.authz.purge(scope).await;
    let fleet = match snap.stores.replay.redis() {
        None => None,
        Some(redis) => {
            let message = serde_json::to_string(&Published {
                from: instance().to_string(),
                scope: scope.clone(),
            })
            .unwrap_or_default();
            let mut publish = redis::cmd("PUBLISH");
            publish.arg(channel(&redis.namespace)).arg(message);
            Some(redis.run(publish).await.map(|_| ()))
        }
    };
    let outcome = match &fleet {
        Some(Err(_)) => "fleet_not_told",
        _ => "ok",
    };
    state
        .shared
        .metrics
        .purges
        .with_label_values(&[scope.label(), "admin", outcome])
        .inc();
    match &fleet {
        Some(Err(e)) => {
            tracing::warn!(scope = scope.label(), dropped, error = %e, "cached decisions purged here; the other instances were not told")
        }
        _ => tracing::info!(
            scope = scope.label(),
            dropped,
            fleet = fleet.is_some(),
            "cached decisions purged"
        ),
    }
    Purged { dropped, fleet }
}

/// Listens on the fleet's purge channel (when the store is Redis) and purges what other instances
/// publish; a lost subscription is made again. A purge published while the channel is not heard is
/// never heard later: every cached decision is dropped when it is lost, at each attempt to
/// subscribe again, and when it is heard again.
pub struct FleetPurges {
    state: Arc<GatewayState>,
    /// The channel was not heard for a while: purges may have been missed.
    missed: AtomicBool,
}

impl FleetPurges {
    pub fn new(state: Arc<GatewayState>) -> Self {
        FleetPurges {
            state,
            missed: AtomicBool::new(false),
        }
    }

    /// Purge `scope` here, counted under `origin`: the entries dropped.
    async fn purge_here(&self, scope: &PurgeScope, origin: &str) -> u64 {
        let dropped = self.state.current.load_full().authz.purge(scope).await;
        self.state
            .shared
            .metrics
            .purges
            .with_label_values(&[scope.label(), origin, "ok"])
            .inc();
        dropped
    }

    /// Drop every cached decision: purges published while the channel is not heard are lost.
    async fn purge_unheard(&self) -> u64 {
        self.purge_here(&PurgeScope::All, "channel_lost").await
    }

    async fn apply(&self, payload: &[u8]) {
        let Ok(published) = serde_json::from_slice::<Published>(payload) else {
            let shared = &self.state.shared;
            shared
                .metrics
                .purges
                .with_label_values(&["none", "fleet", "unreadable"])
                .inc();
            if let Some(left_out) = shared
                .dependency_lines
                .admit("purge_unreadable", Instant::now())
            {
                tracing::warn!(
                    left_out,
                    "a purge on the fleet's channel could not be read; ignored"
                );
            }
            return;
        };
        if published.from == instance() {
            return;
        }
        let scope = published.scope;
        let dropped = self.purge_here(&scope, "fleet").await;
        tracing::info!(
            scope = scope.label(),
            dropped,
            "cached decisions purged as another instance asked"
        );
    }

    /// Subscribe and apply until the subscription is lost.
    async fn listen(&self) -> Result<(), String> {
        let Some(redis) = self
            .state
            .current
            .load_full()
            .stores
            .replay
            .redis()
            .cloned()
        else {
            return Ok(());
        };
        let pubsub = redis.subscribe(&channel(&redis.namespace)).await?;
        if self.missed.swap(false, Ordering::Relaxed) {
            let dropped = self.purge_unheard().await;
            tracing::info!(
                dropped,
                "the fleet's purge channel is heard again; what was cached meanwhile is dropped"
            );
        }
        let (mut sink, mut messages) = pubsub.split();
        let mut pings = tokio::time::interval(PING_EVERY);
        pings.tick().await;
        loop {
            tokio::select! {
                message = messages.next() => match message {
                    Some(message) => self.apply(message.get_payload_bytes()).await,
                    None => return Err("the subscription ended".into()),
                },
                _ = pings.tick() => {
                    let pong = tokio::time::timeout(redis.within(), sink.ping::<redis::Value>());
                    if !matches!(pong.await, Ok(Ok(_))) {
                        return Err("the subscription does not answer a PING".into());
                    }
                }
            }
        }
    }
}

#[async_trait]
impl BackgroundService for FleetPurges {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        if self.state.current.load().stores.replay.redis().is_none() {
            return;
        }
        loop {
            tokio::select! {
                _ = shutdown.changed() => return,
                ended = self.listen() => {
                    if let Err(e) = ended {
                        // Until it is heard again, nothing cached outlives a retry.
                        let first = !self.missed.swap(true, Ordering::Relaxed);
                        let dropped = self.purge_unheard().await;
                        if first {
                            tracing::warn!(error = %e, dropped, "the fleet's purge channel is not heard: every cached decision is dropped, and again at each attempt to subscribe, until it is heard again");
                        }
                    }
                }
            }
            tokio::select! {
                _ = shutdown.changed() => return,
                _ = tokio::time::sleep(RESUBSCRIBE_AFTER) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_purge_request_names_exactly_one_scope() {
        let scope = |body: &str| PurgeScope::from_request(body.as_bytes());
        assert_eq!(
            scope(r#"{"policy_issuer": "EU.EORI.NL000000005"}"#),
            Ok(PurgeScope::PolicyIssuer("EU.EORI.NL000000005".into()))
        );
        assert_eq!(
            scope(r#"{"access_subject": "EU.EORI.NL000000001"}"#),
            Ok(PurgeScope::AccessSubject("EU.EORI.NL000000001".into()))
        );
        assert_eq!(scope(r#"{"all": true}"#), Ok(PurgeScope::All));
        for (body, reason) in [
            (r#"{}"#, "exactly one"),
            (r#"{"all": true, "policy_issuer": "x"}"#, "exactly one"),
            (r#"{"all": false}"#, "all must be true"),
            (r#"{"policy_issuer": " "}"#, "policy_issuer is empty"),
            (r#"{"everything": true}"#, "not a purge request"),
            ("all", "not a purge request"),
        ] {
            let e = scope(body).unwrap_err();
            assert!(e.contains(reason), "{body}: {e}");
        }
        assert!(PurgeScope::All.covers("a", "b"));
        assert!(!PurgeScope::PolicyIssuer("a".into()).covers("b", "a"));
        assert!(PurgeScope::AccessSubject("b".into()).covers("a", "b"));
    }
}
