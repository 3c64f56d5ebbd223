//! The backends of an upstream: round robin over the healthy ones, health checks, and the peer
//! (timeouts, verified TLS) to connect to.

use crate::config::model::{HealthCheckKind, Upstream};
use crate::telemetry::Metrics;
use pingora::lb::health_check::{HttpHealthCheck, TcpHealthCheck};
use pingora::lb::selection::RoundRobin;
use pingora::lb::{Backend, LoadBalancer};
use pingora::protocols::tls::CaType;
use pingora::upstreams::peer::HttpPeer;
use pingora::utils::tls::{parse_x509, WrappedX509};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A pool of backends for one upstream: round robin over the healthy ones.
pub struct UpstreamPool {
    pub config: Upstream,
    pub lb: LoadBalancer<RoundRobin>,
    ca: Option<Arc<CaType>>,
    /// Keeps pooled connections of this upstream apart from those of any other upstream, so a
    /// connection verified against one CA is never reused where another is required.
    group_key: u64,
    last_check: std::sync::Mutex<Option<Instant>>,
}

impl UpstreamPool {
    pub fn new(config: Upstream) -> Result<Self, String> {
        let mut lb =
            LoadBalancer::<RoundRobin>::try_from_iter(config.addresses.iter().map(String::as_str))
                .map_err(|e| format!("upstream {}: {e}", config.name))?;
        let ca: Option<Arc<CaType>> = config.tls.as_ref().and_then(|t| t.ca.as_ref()).map(|ders| {
            ders.iter()
                .map(|d| WrappedX509::new(d.clone(), parse_x509))
                .collect::<Vec<_>>()
                .into()
        });
        if let Some(hc) = &config.health_check {
            match &hc.kind {
                HealthCheckKind::Tcp => lb.set_health_check(match &config.tls {
                    Some(tls) => TcpHealthCheck::new_tls(&tls.sni),
                    None => TcpHealthCheck::new(),
                }),
                HealthCheckKind::Http { path } => {
                    let host = config
                        .host_header
                        .clone()
                        .or_else(|| config.tls.as_ref().map(|t| t.sni.clone()))
                        .unwrap_or_else(|| config.addresses[0].clone());
                    let mut check = HttpHealthCheck::new(&host, config.tls.is_some());
                    check.req = pingora::http::RequestHeader::build("GET", path.as_bytes(), None)
                        .map_err(|e| {
                        format!("upstream {}: health check path: {e}", config.name)
                    })?;
                    check
                        .req
                        .insert_header("host", host.as_str())
                        .map_err(|e| format!("upstream {}: {e}", config.name))?;
                    check.peer_template.options.ca = ca.clone();
                    check.peer_template.options.connection_timeout = Some(config.connect_timeout);
                    lb.set_health_check(Box::new(check));
                }
            }
            lb.health_check_frequency = Some(hc.interval);
            lb.parallel_health_check = true;
        }
        let group_key = {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            config.name.hash(&mut h);
            config.tls.hash(&mut h);
            h.finish()
        };
        Ok(UpstreamPool {
            config,
            lb,
            ca,
            group_key,
            last_check: std::sync::Mutex::new(None),
        })
    }

    /// The peer to connect to for a backend, with this upstream's timeouts and TLS. Certificates
    /// are always verified; the SNI is never empty (an empty one would skip verification).
    pub fn peer(&self, backend: &Backend) -> HttpPeer {
        let (tls, sni) = match &self.config.tls {
            Some(t) => (true, t.sni.clone()),
            None => (false, String::new()),
        };
        let mut peer = HttpPeer::new(backend, tls, sni);
        peer.group_key = self.group_key;
        let o = &mut peer.options;
        o.connection_timeout = Some(self.config.connect_timeout);
        o.total_connection_timeout = Some(self.config.connect_timeout * 2);
        o.read_timeout = Some(self.config.read_timeout);
        o.write_timeout = Some(self.config.write_timeout);
        o.idle_timeout = Some(Duration::from_secs(60));
        if tls {
            o.verify_cert = true;
            o.verify_hostname = true;
            o.ca = self.ca.clone();
        }
        peer
    }

    pub fn backend_count(&self) -> usize {
        self.lb.backends().get_backend().len()
    }

    /// Run the health check when its interval has passed, and report every backend's health.
    pub async fn check_health(&self, metrics: &Metrics) {
        let Some(hc) = &self.config.health_check else {
            return;
        };
        let due = {
            let mut last = self.last_check.lock().unwrap_or_else(|e| e.into_inner());
            let due = last.is_none_or(|t| t.elapsed() >= hc.interval);
            if due {
                *last = Some(Instant::now());
            }
            due
        };
        if !due {
            return;
        }
        self.lb.backends().run_health_check(true).await;
        for backend in self.lb.backends().get_backend().iter() {
            let healthy = self.lb.backends().ready(backend);
            metrics
                .backend_health
                .with_label_values(&[&self.config.name, &backend.addr.to_string()])
                .set(healthy as i64);
        }
    }
}
