//! The consumer's side: the same binary in front of a legacy client's outgoing calls
//! (`ishare-gateway run --config egress.toml`). A local client calls a plain path; the call is
//! made to the provider its outgoing route names as our party, with our token, the evidence the
//! route brings and, for a broker, the consumer's assertion. SIGHUP reloads the configuration
//! (a new one that does not load leaves the running one); SIGTERM and Ctrl-C stop after the
//! calls in progress. The admin listener serves `/metrics`, `/health` and `/ready`.

pub mod log_line;
pub mod metrics;
pub mod outgoing;
pub mod refusal;
pub mod route;
pub mod serve;

use crate::config::egress::{self, EgressConfig};
use crate::gateway::decision::log::DecisionLog;
use crate::telemetry::Metrics;
use arc_swap::ArcSwap;
use axum::body::Body;
use metrics::EgressMetrics;
use outgoing::Outgoing;
use serve::{serve, Answer, Bounds};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;

/// The most a line of the decision log waits to be written at the end.
const LOG_FLUSH: Duration = Duration::from_secs(2);

/// What lives across reloads: the metrics and the decision log.
struct Shared {
    scheme: Metrics,
    egress: EgressMetrics,
    log: Option<(crate::config::model::DecisionLogSettings, Arc<DecisionLog>)>,
}

impl Shared {
    /// The consumer's side of `config`, its decision log kept where its settings are.
    fn outgoing(&mut self, config: EgressConfig) -> Result<Outgoing, String> {
        let log = match (&config.decision_log, &self.log) {
            (None, _) => None,
            (Some(settings), Some((open, log))) if settings == open => Some(log.clone()),
            (Some(settings), _) => {
                let log = Arc::new(DecisionLog::open(settings, self.scheme.clone())?);
                self.log = Some((settings.clone(), log.clone()));
                Some(log)
            }
        };
        Outgoing::new(Arc::new(config), &self.scheme, self.egress.clone(), log)
    }
}

/// Run the consumer's side of `config` (loaded from `path`) until SIGTERM or Ctrl-C.
pub async fn run(path: PathBuf, config: EgressConfig) -> Result<(), String> {
    let scheme = Metrics::new();
    let mut shared = Shared {
        egress: EgressMetrics::register(&scheme),
        scheme,
        log: None,
    };
    let address = config.consumer.address;
    let bounds = Bounds {
        max_connections: config.consumer.max_connections,
        header_timeout: config.consumer.header_timeout,
        graceful_shutdown_timeout: config.consumer.graceful_shutdown_timeout,
    };
    let admin = config.admin;
    let listener = TcpListener::bind(address)
        .await
        .map_err(|e| format!("cannot listen on {address}: {e}"))?;
    let admin_listener = match admin {
        Some(a) => Some(
            TcpListener::bind(a)
                .await
                .map_err(|e| format!("cannot listen on {a} (admin): {e}"))?,
        ),
        None => None,
    };
    tracing::info!(
        party = %config.identity.party_id,
        address = %address,
        providers = config.providers.len(),
        routes = config.routes.len(),
        "consumer's side started"
    );
    let current = Arc::new(ArcSwap::from_pointee(shared.outgoing(config)?));
    let (stop, stopped) = watch::channel(false);
    let calls = {
        let current = current.clone();
        let answer: Answer = Arc::new(move |req| {
            let outgoing = current.load_full();
            Box::pin(async move { outgoing.answer(req).await })
        });
        tokio::spawn(serve(listener, answer, bounds, stopped.clone()))
    };
    let admin_task = admin_listener.map(|l| {
        let answer = admin_answer(current.clone(), shared.scheme.clone());
        tokio::spawn(serve(l, answer, bounds, stopped.clone()))
    });
    let refresher = tokio::spawn(refresh_trust(current.clone()));
    wait_and_reload(&path, &current, &mut shared, address).await?;
    let _ = stop.send(true);
    refresher.abort();
    let _ = calls.await;
    if let Some(task) = admin_task {
        let _ = task.await;
    }
    if let Some((_, log)) = &shared.log {
        log.flush(LOG_FLUSH);
    }
    tracing::info!("consumer's side stopped");
    Ok(())
}

/// Serve signals: SIGHUP reloads, SIGTERM and Ctrl-C return.
async fn wait_and_reload(
    path: &Path,
    current: &ArcSwap<Outgoing>,
    shared: &mut Shared,
    address: std::net::SocketAddr,
) -> Result<(), String> {
    let mut hup = signal(SignalKind::hangup()).map_err(|e| e.to_string())?;
    let mut term = signal(SignalKind::terminate()).map_err(|e| e.to_string())?;
    loop {
        tokio::select! {
            _ = hup.recv() => reload(path, current, shared, address),
            _ = term.recv() => return Ok(()),
            _ = tokio::signal::ctrl_c() => return Ok(()),
        }
    }
}

/// Load the configuration anew and take it, or keep the running one and say why.
fn reload(
    path: &Path,
    current: &ArcSwap<Outgoing>,
    shared: &mut Shared,
    address: std::net::SocketAddr,
) {
    let loaded = egress::load(path)
        .map_err(|e| e.to_string())
        .and_then(|config| {
            if config.consumer.address != address || config.admin != current.load().config().admin {
                tracing::warn!(
                    "the listeners' addresses change only with a restart: they stay as they were"
                );
            }
            shared.outgoing(config)
        });
    match loaded {
        Ok(outgoing) => {
            current.store(Arc::new(outgoing));
            shared.scheme.reloads.with_label_values(&["ok"]).inc();
            tracing::info!("configuration reloaded");
        }
        Err(e) => {
            shared.scheme.reloads.with_label_values(&["refused"]).inc();
            tracing::error!("reload refused, the running configuration stays: {e}");
        }
    }
}

/// Keep the trusted list fresh (it is also fetched when found stale).
async fn refresh_trust(current: Arc<ArcSwap<Outgoing>>) {
    loop {
        let outgoing = current.load_full();
        let every = outgoing.config().scheme_owner.refresh;
        if let Err(e) = outgoing.trust().refresh().await {
            tracing::warn!("the trusted list could not be refreshed: {e}");
        }
        drop(outgoing);
        tokio::time::sleep(every).await;
    }
}

/// The admin listener: `/metrics`, `/health` (the process answers) and `/ready` (the trusted
/// list is held: evidence can be verified).
fn admin_answer(current: Arc<ArcSwap<Outgoing>>, metrics: Metrics) -> Answer {
    Arc::new(move |req| {
        let current = current.clone();
        let metrics = metrics.clone();
        Box::pin(async move {
            let (status, content_type, body) = match (req.method(), req.uri().path()) {
                (&http::Method::GET, "/metrics") => {
                    (200, "text/plain; version=0.0.4", metrics.render())
                }
                (&http::Method::GET, "/health") => {
                    (200, "application/json", br#"{"status":"ok"}"#.to_vec())
                }
                (&http::Method::GET, "/ready") => match current.load().trust().readiness() {
                    Ok(()) => (200, "application/json", br#"{"status":"ready"}"#.to_vec()),
                    Err(problems) => (
                        503,
                        "application/json",
                        serde_json::json!({"status": "not_ready", "problems": problems})
                            .to_string()
                            .into_bytes(),
                    ),
                },
                _ => (
                    404,
                    "application/json",
                    br#"{"error":"not_found","error_description":"the admin listener serves /metrics, /health and /ready"}"#.to_vec(),
                ),
            };
            http::Response::builder()
                .status(status)
                .header(http::header::CONTENT_TYPE, content_type)
                .body(Body::from(body))
                .unwrap_or_default()
        })
    })
}
