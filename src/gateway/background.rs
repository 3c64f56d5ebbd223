//! Work beside the requests: reloading on SIGHUP, health checks of the upstreams, keeping the
//! trusted list fresh, and starting the span exporter.

use crate::config::{self, ConfigErrors};
use crate::gateway::snapshot::{GatewayState, Snapshot};
use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Re-read the configuration and the rules, and swap them in. A configuration with any error is
/// refused and the running one kept. Certificates of TLS listeners are rotated with it; a change
/// of listeners needs a graceful upgrade and is reported.
pub fn reload(state: &GatewayState, path: &std::path::Path) -> Result<u64, ConfigErrors> {
    let config = config::load(path)?;
    for warning in &config.warnings {
        tracing::warn!("{warning}");
    }
    let current = state.current.load_full();
    let issue = |message: String| {
        ConfigErrors(vec![config::ConfigIssue {
            file: path.to_path_buf(),
            message,
            ..config::ConfigIssue::default()
        }])
    };
    if config.listeners != current.config.listeners {
        tracing::warn!("the listeners changed: they take effect with a graceful upgrade (SIGQUIT and a new process with --upgrade); the current ones stay");
    }
    if config.tracing.as_ref() != state.shared.tracing.as_ref().map(|t| t.settings()) {
        tracing::warn!(
            "[tracing] changed: it takes effect at a restart; the current tracing stays"
        );
    }
    let bound = |c: &config::model::Config| {
        c.decision_api
            .as_ref()
            .map(|d| (d.address, d.grpc_address, d.tls.clone()))
    };
    if bound(&config) != bound(&current.config) {
        tracing::warn!("[decision_api] address, grpc_address or tls changed: they take effect at a restart; its secret and bounds are reloaded");
    }
    if config.replay.redis.is_some() != current.config.replay.redis.is_some() {
        tracing::warn!("[replay] store changed between memory and redis: it takes effect at a restart; the current store stays");
    }
    let mut certificates = Vec::new();
    for (i, listener) in config.listeners.iter().enumerate() {
        if let (Some(tls), Some(resolver)) = (&listener.tls, state.shared.certificates.get(&i)) {
            let key = resolver
                .prepare(&tls.certificate, &tls.key)
                .map_err(issue)?;
            certificates.push((resolver.clone(), key));
        }
    }
    let snapshot = Snapshot::build(config, Some(&current), &state.shared).map_err(issue)?;
    let generation = snapshot.generation;
    for (resolver, key) in certificates {
        resolver.install(key);
    }
    state.current.store(Arc::new(snapshot));
    Ok(generation)
}

/// Reload and report the outcome in the log and the metrics.
pub fn reload_and_report(state: &GatewayState, path: &std::path::Path) {
    match reload(state, path) {
        Ok(generation) => {
            state
                .shared
                .metrics
                .reloads
                .with_label_values(&["ok"])
                .inc();
            tracing::info!(generation, "configuration reloaded");
        }
        Err(errors) => {
            state
                .shared
                .metrics
                .reloads
                .with_label_values(&["refused"])
                .inc();
            for e in &errors.0 {
                tracing::error!(file = %e.file.display(), key = %e.key, "reload refused: {}", e.message);
            }
        }
    }
}

/// How soon the scheme owner is asked again after a failed call: the first wait, doubled after
/// each failure up to the longest.
const RETRY_FIRST: Duration = Duration::from_secs(1);
const RETRY_LONGEST: Duration = Duration::from_secs(30);

/// How often the decisions kept by the request as it came are rid of those past their longest
/// (60 s), which no request would drop: none outlasts its longest by more than this.
const SWEEP_EVERY: Duration = Duration::from_secs(15);

pub struct Maintenance {
    state: Arc<GatewayState>,
    config_path: PathBuf,
    handle_sighup: bool,
}

impl Maintenance {
    /// `handle_sighup`: reload on SIGHUP (the process's own gateway; not for gateways in tests).
    pub fn new(state: Arc<GatewayState>, config_path: PathBuf, handle_sighup: bool) -> Self {
        Maintenance {
            state,
            config_path,
            handle_sighup,
        }
    }
}

#[async_trait]
impl BackgroundService for Maintenance {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        // The exporter's thread starts now, in the process that serves (after a daemon's fork).
        if let Some(tracing) = &self.state.shared.tracing {
            tracing.base();
        }
        let mut hangup = if self.handle_sighup {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
                Ok(s) => Some(s),
                Err(e) => {
                    tracing::error!(error = %e, "cannot listen for SIGHUP; reload is unavailable");
                    None
                }
            }
        } else {
            None
        };
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        // The first refresh happens right away, so that /ready turns true early. A failed one,
        // or any failed call to the scheme owner, is followed by a refresh soon, with backoff, so
        // that the gateway learns on its own when the scheme owner is back.
        let mut next_refresh = tokio::time::Instant::now();
        let mut retry = RETRY_FIRST;
        let mut next_sweep = next_refresh + SWEEP_EVERY;
        loop {
            tokio::select! {
                _ = shutdown.changed() => return,
                Some(()) = async { match hangup.as_mut() { Some(h) => h.recv().await, None => std::future::pending().await } } => {
                    let state = self.state.clone();
                    let path = self.config_path.clone();
                    // Reading files and building the snapshot block; keep them off the runtime.
                    let _ = tokio::task::spawn_blocking(move || reload_and_report(&state, &path)).await;
                }
                _ = tick.tick() => {
                    let snap = self.state.current.load_full();
                    for pool in snap.upstreams.values() {
                        pool.check_health(&self.state.shared.metrics).await;
                    }
                    let now = tokio::time::Instant::now();
                    if snap.trust.last_call_failed() {
                        next_refresh = next_refresh.min(now + retry);
                    }
                    if now >= next_refresh {
                        let interval = snap.config.scheme_owner.refresh;
                        next_refresh = tokio::time::Instant::now() + match snap.trust.refresh().await {
                            Ok(_) => {
                                retry = RETRY_FIRST;
                                interval
                            }
                            Err(e) => {
                                tracing::warn!(error = %e, retry_in = ?retry, "trusted list refresh failed");
                                let wait = interval.min(retry);
                                retry = (retry * 2).min(RETRY_LONGEST);
                                wait
                            }
                        };
                    }
                    snap.trust.report_age();
                    if now >= next_sweep {
                        next_sweep = now + SWEEP_EVERY;
                        let dropped = snap.as_it_came.sweep();
                        if dropped > 0 {
                            tracing::debug!(dropped, "kept decisions past their longest dropped");
                        }
                    }
                }
            }
        }
    }
}
