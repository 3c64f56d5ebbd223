//! Assembling the pingora server from a configuration: the proxy service on every listener, the
//! admin service, the maintenance work and tracing; running it in this process, or in a thread
//! with a shutdown handle (tests, the demo), and writing out the decision log's lines and the spans
//! still queued when it ends.

use crate::config::model::Config;
use crate::gateway::admin::Admin;
use crate::gateway::background::Maintenance;
use crate::gateway::connections::listener::{tls_acceptor, CertResolver};
use crate::gateway::connections::{Connections, Deadlines, Entry, Guard};
use crate::gateway::decision_api::server::DecisionService;
use crate::gateway::proxy::Gateway;
use crate::gateway::snapshot::{GatewayState, Shared, Snapshot};
use crate::telemetry::otlp;
use crate::telemetry::trace::Tracing;
use crate::telemetry::Metrics;
use arc_swap::ArcSwap;
use async_trait::async_trait;
use pingora::apps::HttpServerOptions;
use pingora::protocols::http::v2::server::default_h2_options;
use pingora::server::configuration::{Opt, ServerConf};
use pingora::server::{RunArgs, Server, ShutdownSignal, ShutdownSignalWatch};
use pingora::services::background::background_service;
use pingora::services::listening::Service;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// A server ready to run, and the state it serves from.
pub struct Built {
    pub server: Server,
    pub state: Arc<GatewayState>,
}

/// Build the server. `opt` carries pingora's process options (--upgrade, --daemon);
/// `handle_sighup` makes SIGHUP reload the configuration from `config_path`.
pub fn build(
    config: Config,
    config_path: PathBuf,
    opt: Option<Opt>,
    handle_sighup: bool,
) -> Result<Built, String> {
    crate::tls::ensure_crypto_provider();
    let mut conf = ServerConf {
        threads: config.server.threads,
        work_stealing: config.server.work_stealing,
        grace_period_seconds: Some(config.server.grace_period.as_secs()),
        graceful_shutdown_timeout_seconds: Some(config.server.graceful_shutdown_timeout.as_secs()),
        ..ServerConf::default()
    };
    if let Some(p) = &config.server.pid_file {
        conf.pid_file = p.display().to_string();
    }
    if let Some(p) = &config.server.upgrade_sock {
        conf.upgrade_sock = p.display().to_string();
    }
    let mut server = Server::new_with_opt_and_conf(opt, conf);
    server.bootstrap();

    let mut certificates = BTreeMap::new();
    for (i, listener) in config.listeners.iter().enumerate() {
        if let Some(tls) = &listener.tls {
            certificates.insert(i, Arc::new(CertResolver::load(&tls.certificate, &tls.key)?));
        }
    }
    let mut shared = Shared::new(certificates);
    shared.tracing = tracing(&config, &shared.metrics)?;
    let snapshot = Snapshot::build(config.clone(), None, &shared)?;
    let state = Arc::new(GatewayState {
        current: ArcSwap::from_pointee(snapshot),
        shared,
    });

    let mut entries = Vec::new();
    for (i, listener) in config.listeners.iter().enumerate() {
        let tls = match &listener.tls {
            None => None,
            Some(_) => Some(tls_acceptor(
                listener,
                state.shared.certificates[&i].clone(),
            )?),
        };
        entries.push(Entry::new(listener, tls, &state.shared.metrics));
    }
    let streams = entries.iter().map(Entry::stream_limit).collect();
    let connections = Connections::default();
    let mut proxy = pingora::proxy::http_proxy(
        &server.configuration,
        Gateway::new(state.clone(), streams, connections.clone()),
    );
    let mut options = HttpServerOptions::default();
    options.h2c = config.server.h2c;
    options.h2_idle_timeout = Some(config.server.keepalive_timeout);
    proxy.server_options = Some(options);
    let mut h2 = default_h2_options();
    h2.max_concurrent_streams(config.server.h2_max_streams);
    proxy.h2_options = Some(h2);
    let guard = Guard::new(proxy, entries, Deadlines::of(&config.server), connections);
    let mut service = Service::new("gateway".to_string(), guard);
    for listener in &config.listeners {
        service.add_tcp(&listener.address.to_string());
    }
    server.add_service(service);
    if let Some(admin) = config.admin {
        let mut service = Service::new("admin".to_string(), Admin::new(state.clone()));
        service.add_tcp(&admin.to_string());
        server.add_service(service);
    }
    if let Some(settings) = config.decision_api.clone() {
        let decisions = DecisionService::bind(state.clone(), settings)?;
        server.add_service(background_service("decision service", decisions));
    }
    server.add_service(background_service(
        "fleet purges",
        crate::gateway::purge::FleetPurges::new(state.clone()),
    ));
    server.add_service(background_service(
        "maintenance",
        Maintenance::new(state.clone(), config_path, handle_sighup),
    ));
    Ok(Built { server, state })
}

/// Tracing when `[tracing]` is configured: its exporter sends through an outbound client (the
/// `[outbound]` roots for an https collector).
fn tracing(config: &Config, metrics: &Metrics) -> Result<Option<Tracing>, String> {
    let Some(settings) = &config.tracing else {
        return Ok(None);
    };
    let http = crate::tls::outbound_client(&config.outbound, otlp::EXPORT_TIMEOUT)
        .map_err(|e| format!("the OTLP exporter's client: {e}"))?;
    Tracing::new(settings.clone(), http, metrics).map(Some)
}

impl Built {
    /// Serve in this process until a shutdown signal, then write out what is still queued.
    pub fn run(self, args: RunArgs) {
        let Built { server, state } = self;
        server.run(args);
        write_out(&state);
    }
}

/// After the last request: the decision log's queued lines written, the spans still queued sent.
fn write_out(state: &GatewayState) {
    if let Some(log) = &state.current.load().decision_log {
        log.flush(std::time::Duration::from_secs(5));
    }
    if let Some(tracing) = &state.shared.tracing {
        tracing.shutdown();
    }
}

/// Shuts the server down when told through a channel.
struct ChannelShutdown(Mutex<Option<tokio::sync::oneshot::Receiver<ShutdownSignal>>>);

#[async_trait]
impl ShutdownSignalWatch for ChannelShutdown {
    async fn recv(&self) -> ShutdownSignal {
        let receiver = self.0.lock().unwrap_or_else(|e| e.into_inner()).take();
        match receiver {
            Some(r) => r.await.unwrap_or(ShutdownSignal::FastShutdown),
            None => std::future::pending().await,
        }
    }
}

/// A gateway running on a thread of this process.
pub struct RunningGateway {
    pub state: Arc<GatewayState>,
    stop: Option<tokio::sync::oneshot::Sender<ShutdownSignal>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RunningGateway {
    /// Start `built` on a thread; it serves until [`RunningGateway::stop`].
    pub fn start(built: Built) -> RunningGateway {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let Built { server, state } = built;
        let thread = std::thread::Builder::new()
            .name("gateway".into())
            .spawn(move || {
                server.run(RunArgs {
                    shutdown_signal: Box::new(ChannelShutdown(Mutex::new(Some(rx)))),
                })
            })
            .expect("a thread for the gateway");
        RunningGateway {
            state,
            stop: Some(tx),
            thread: Some(thread),
        }
    }

    /// Stop gracefully and wait for the server to end.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(ShutdownSignal::GracefulTerminate);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
            write_out(&self.state);
        }
    }
}

impl Drop for RunningGateway {
    fn drop(&mut self) {
        self.shutdown();
    }
}
