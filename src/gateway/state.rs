//! What the gateway runs on. A `Snapshot` is built from one validated configuration and is
//! immutable; a reload builds a new one and swaps it in, so requests in flight finish under the one
//! they started with. `Shared` lives across reloads: metrics, the jti replay store, certificates.

use super::authz::Authorizer;
use super::capabilities::Capabilities;
use super::listener::CertResolver;
use super::route::RouteTable;
use crate::access_token::AccessTokens;
use crate::config::model::{Config, HealthCheckKind, Upstream};
use crate::peers::scheme_owner::TrustStore;
use crate::peers::PeerClient;
use crate::scheme::assertion::JtiStore;
use crate::scheme::jwt::AlgorithmPolicy;
use crate::scheme::Timestamp;
use crate::telemetry::Metrics;
use arc_swap::ArcSwap;
use pingora::lb::health_check::{HttpHealthCheck, TcpHealthCheck};
use pingora::lb::selection::RoundRobin;
use pingora::lb::{Backend, LoadBalancer};
use pingora::protocols::tls::CaType;
use pingora::upstreams::peer::HttpPeer;
use pingora::utils::tls::{parse_x509, WrappedX509};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
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
    fn new(config: Upstream) -> Result<Self, String> {
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

/// The jti replay store of the token endpoint: every accepted assertion's jti, each kept until
/// the time the assertion rules give it (past the longest time it can be accepted).
pub struct ReplayStore {
    seen: moka::sync::Cache<(String, String), Duration>,
}

struct KeepFor;

impl moka::Expiry<(String, String), Duration> for KeepFor {
    fn expire_after_create(
        &self,
        _k: &(String, String),
        keep: &Duration,
        _at: Instant,
    ) -> Option<Duration> {
        Some(*keep)
    }
}

impl Default for ReplayStore {
    fn default() -> Self {
        ReplayStore {
            seen: moka::sync::Cache::builder()
                .max_capacity(10_000_000)
                .expire_after(KeepFor)
                .build(),
        }
    }
}

impl JtiStore for ReplayStore {
    fn remember(&self, issuer: &str, jti: &str, until: f64, now: Timestamp) -> bool {
        let keep = Duration::from_secs_f64((until - now.as_f64()).max(1.0));
        self.seen
            .entry((issuer.to_string(), jti.to_string()))
            .or_insert(keep)
            .is_fresh()
    }
}

/// What lives across reloads.
pub struct Shared {
    pub metrics: Metrics,
    pub replay: ReplayStore,
    /// The certificates of the TLS listeners, by listener index; swapped on reload.
    pub certificates: BTreeMap<usize, Arc<CertResolver>>,
    generation: AtomicU64,
}

impl Shared {
    pub fn new(certificates: BTreeMap<usize, Arc<CertResolver>>) -> Self {
        Shared {
            metrics: Metrics::new(),
            replay: ReplayStore::default(),
            certificates,
            generation: AtomicU64::new(0),
        }
    }
}

/// One configuration, ready to serve.
pub struct Snapshot {
    pub config: Arc<Config>,
    pub generation: u64,
    pub routes: RouteTable,
    pub upstreams: BTreeMap<String, Arc<UpstreamPool>>,
    pub tokens: AccessTokens,
    pub algorithms: AlgorithmPolicy,
    pub capabilities: Capabilities,
    pub trust: Arc<TrustStore>,
    pub peer: PeerClient,
    pub authz: Authorizer,
}

impl Snapshot {
    /// Build a snapshot; parts whose configuration did not change are taken over from `previous`
    /// (upstream health, the scheme owner's caches, our tokens at other participants).
    pub fn build(
        config: Config,
        previous: Option<&Snapshot>,
        shared: &Shared,
    ) -> Result<Snapshot, String> {
        let config = Arc::new(config);
        let algorithms = AlgorithmPolicy {
            allow_rs384_rs512: config.tokens.allow_rs384_rs512,
        };
        let mut upstreams = BTreeMap::new();
        for (name, up) in &config.upstreams {
            let pool = match previous.and_then(|p| p.upstreams.get(name)) {
                Some(old) if old.config == *up => old.clone(),
                _ => Arc::new(UpstreamPool::new(up.clone())?),
            };
            upstreams.insert(name.clone(), pool);
        }
        let same_peers = previous.is_some_and(|p| {
            p.config.identity.party_id == config.identity.party_id
                && p.config.identity.chain_file == config.identity.chain_file
                && p.config.identity.key_pem == config.identity.key_pem
                && p.config.outbound.ca_pem == config.outbound.ca_pem
                && p.config.outbound.system_roots == config.outbound.system_roots
                && p.config.scheme == config.scheme
        });
        let peer = match previous {
            Some(p) if same_peers => p.peer.clone(),
            _ => {
                let http = crate::tls::outbound_client(
                    &config.outbound,
                    config
                        .scheme_owner
                        .timeout
                        .max(config.delegation.registry_timeout),
                )
                .map_err(|e| format!("outbound TLS: {e}"))?;
                PeerClient::new(http, config.identity.signing.clone(), config.scheme.clone())
            }
        };
        let trust = match previous {
            Some(p)
                if same_peers
                    && p.config.scheme_owner == config.scheme_owner
                    && p.config.tokens == config.tokens =>
            {
                p.trust.clone()
            }
            _ => Arc::new(TrustStore::new(
                peer.clone(),
                config.scheme_owner.clone(),
                algorithms,
                config.tokens.leeway,
                shared.metrics.clone(),
            )),
        };
        let authz = match previous {
            Some(p)
                if same_peers
                    && p.config.registries == config.registries
                    && p.config.delegation == config.delegation
                    && p.config.tokens == config.tokens =>
            {
                p.authz.clone()
            }
            _ => Authorizer::new(&config, peer.clone(), shared.metrics.clone()),
        };
        let tokens = AccessTokens::new(
            &config.identity.party_id,
            config.identity.key_pem.as_bytes(),
            config.tokens.lifetime.as_secs(),
            config.tokens.leeway.as_secs(),
        );
        let routes = RouteTable::new(config.routes.clone());
        let capabilities = Capabilities::new(&config, &routes);
        Ok(Snapshot {
            generation: shared.generation.fetch_add(1, Ordering::Relaxed) + 1,
            routes,
            upstreams,
            tokens,
            algorithms,
            capabilities,
            trust,
            peer,
            authz,
            config,
        })
    }
}

/// The current snapshot and what outlives it.
pub struct GatewayState {
    pub current: ArcSwap<Snapshot>,
    pub shared: Shared,
}
