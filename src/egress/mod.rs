//! The consumer's side: the same binary in front of a legacy client's outgoing calls
//! (`ishare-gateway run --config egress.toml`). A local client calls a plain path; the call is
//! made to the provider its outgoing route names as our party, with our token, the evidence the
//! route brings and, for a broker, the consumer's assertion. SIGHUP reloads the configuration
//! (a new one that does not load leaves the running one); SIGTERM and Ctrl-C stop after the
//! calls in progress. The admin listener serves `/metrics`, `/health` and `/ready`.

pub mod exchange;
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
use refusal::Refusal;
use serve::{serve, Answer, Bounds};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;

/// The most a line of the decision log waits to be written at the end.
const LOG_FLUSH: Duration = Duration::from_secs(2);

/// What lives across reloads: the metrics.
struct Shared {
    scheme: Metrics,
    egress: EgressMetrics,
}

impl Shared {
    /// The consumer's side of `config`, its decision log opened anew (a rotated file is written
    /// anew after a reload; the previous writer writes out what it holds and ends).
    fn outgoing(
        &self,
        config: EgressConfig,
        previous: Option<&Outgoing>,
    ) -> Result<Outgoing, String> {
        let log = match &config.decision_log {
            Some(settings) => Some(Arc::new(DecisionLog::open(settings, self.scheme.clone())?)),
            None => None,
        };
        Outgoing::new(
            Arc::new(config),
            &self.scheme,
            self.egress.clone(),
            log,
            previous,
        )
    }
}

/// The consumer's side serving: its listeners, and what a reload keeps.
pub struct RunningEgress {
    current: Arc<ArcSwap<Outgoing>>,
    shared: Shared,
    stop: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    refresher: tokio::task::JoinHandle<()>,
    listening: (std::net::SocketAddr, Option<std::net::SocketAddr>),
}

impl RunningEgress {
    /// Bind the listeners of `config` and serve.
    pub async fn start(config: EgressConfig) -> Result<RunningEgress, String> {
        let scheme = Metrics::new();
        let shared = Shared {
            egress: EgressMetrics::register(&scheme),
            scheme,
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
        let outgoing = shared.outgoing(config, None)?;
        // The trusted list before the first call, so that the first evidence is verified rather
        // than refused while the list is on its way (bounded by the scheme owner's timeout; if it
        // fails, `/ready` says why and calls that need it are refused with the reason).
        fetch_trusted_list(&outgoing).await;
        let current = Arc::new(ArcSwap::from_pointee(outgoing));
        let (stop, stopped) = watch::channel(false);
        let calls: Answer = {
            let current = current.clone();
            Arc::new(move |req| {
                let outgoing = current.load_full();
                // A call goes on (and is counted and logged) when its client goes away.
                let call = tokio::spawn(async move { outgoing.answer(req).await });
                Box::pin(async move {
                    call.await.unwrap_or_else(|e| {
                        tracing::error!("a call failed inside the consumer's side: {e}");
                        Refusal::Internal.answer(&uuid::Uuid::new_v4().to_string())
                    })
                })
            })
        };
        let mut tasks = vec![tokio::spawn(serve(
            listener,
            calls,
            bounds,
            stopped.clone(),
        ))];
        if let Some(l) = admin_listener {
            let answer = admin_answer(current.clone(), shared.scheme.clone());
            tasks.push(tokio::spawn(serve(l, answer, bounds, stopped)));
        }
        Ok(RunningEgress {
            refresher: tokio::spawn(refresh_trust(current.clone())),
            current,
            shared,
            stop,
            tasks,
            listening: (address, admin),
        })
    }

    /// Load the configuration at `path` anew and take it, or keep the running one and say why.
    pub async fn reload(&self, path: &Path) {
        let loaded = egress::load(path)
            .map_err(|e| e.to_string())
            .and_then(|config| {
                if (config.consumer.address, config.admin) != self.listening {
                    tracing::warn!("the listeners' addresses change only with a restart: they stay as they were");
                }
                self.shared.outgoing(config, Some(&self.current.load()))
            });
        let reloads = &self.shared.scheme.reloads;
        match loaded {
            Ok(outgoing) => {
                // A new scheme owner's (or party's) trusted list before it is used.
                if !Arc::ptr_eq(outgoing.trust(), self.current.load().trust()) {
                    fetch_trusted_list(&outgoing).await;
                }
                let outgoing = Arc::new(outgoing);
                self.current.store(outgoing);
                reloads.with_label_values(&["ok"]).inc();
                tracing::info!("configuration reloaded");
            }
            Err(e) => {
                reloads.with_label_values(&["refused"]).inc();
                tracing::error!("reload refused, the running configuration stays: {e}");
            }
        }
    }

    /// Take no new connection, let the calls in progress finish (within the graceful shutdown
    /// timeout), and write out the decision log.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        self.refresher.abort();
        for task in self.tasks {
            let _ = task.await;
        }
        if let Some(log) = self.current.load().log() {
            log.flush(LOG_FLUSH);
        }
        tracing::info!("consumer's side stopped");
    }
}

/// Run the consumer's side of `config` (loaded from `path`): SIGHUP reloads, SIGTERM and Ctrl-C
/// stop.
pub async fn run(path: PathBuf, config: EgressConfig) -> Result<(), String> {
    let running = RunningEgress::start(config).await?;
    let mut hup = signal(SignalKind::hangup()).map_err(|e| e.to_string())?;
    let mut term = signal(SignalKind::terminate()).map_err(|e| e.to_string())?;
    loop {
        tokio::select! {
            _ = hup.recv() => running.reload(&path).await,
            _ = term.recv() => break,
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    running.stop().await;
    Ok(())
}

/// Fetch the trusted list of `outgoing`'s scheme owner now.
async fn fetch_trusted_list(outgoing: &Outgoing) {
    if let Err(e) = outgoing.trust().refresh().await {
        tracing::warn!("the trusted list could not be fetched: {e}");
    }
}

/// Keep the trusted list fresh (it is also fetched when found stale).
async fn refresh_trust(current: Arc<ArcSwap<Outgoing>>) {
    loop {
        let every = current.load().config().scheme_owner.refresh;
        tokio::time::sleep(every).await;
        fetch_trusted_list(&current.load_full()).await;
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
