//! What the gateway runs on. A `Snapshot` is built from one validated configuration and is
//! immutable; a reload builds a new one and swaps it in, so requests in flight finish under the one
//! they started with. `Shared` lives across reloads: metrics, certificates, tracing. The stores (jtis,
//! sessions) are kept across reloads that leave `[replay]` as it was, and made anew when it changes
//! (new Redis credentials, another server).

use crate::access_token::AccessTokens;
use crate::config::model::PreviousSteps;
use crate::config::model::{Config, Route, SessionSecret};
use crate::gateway::as_it_came::AsItCame;
use crate::gateway::backend::forward::Withheld;
use crate::gateway::backend::upstream::UpstreamPool;
use crate::gateway::capabilities::Capabilities;
use crate::gateway::connections::listener::CertResolver;
use crate::gateway::decision::decide::Policy;
use crate::gateway::decision::log::DecisionLog;
use crate::gateway::decision::route::RouteTable;
use crate::gateway::evidence::live::Authorizer;
use crate::gateway::fleet::redis::RedisStore;
use crate::gateway::fleet::replay::ReplayStore;
use crate::gateway::people::login::{Context as LoginContext, Login};
use crate::gateway::people::sessions::SessionStore;
use crate::peers::forwarded::{ForwardedAssertions, SharedAssertions};
use crate::peers::scheme_owner::TrustStore;
use crate::peers::PeerClient;
use crate::scheme::jwt::AlgorithmPolicy;
use crate::telemetry::metrics::{FoundOnce, Outcome};
use crate::telemetry::throttle::Throttle;
use crate::telemetry::trace::Tracing;
use crate::telemetry::Metrics;
use arc_swap::ArcSwap;
use prometheus::{Histogram, IntCounter};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// What lives across reloads.
pub struct Shared {
    pub metrics: Metrics,
    /// The key sessions are sealed with when the configuration names none.
    pub session_secret: SessionSecret,
    /// The certificates of the TLS listeners, by listener index; swapped on reload.
    pub certificates: BTreeMap<usize, Arc<CertResolver>>,
    /// Tracing, as configured at the start (a reload does not change it).
    pub tracing: Option<Tracing>,
    /// The log lines of failing dependencies, at most one per reason every 10 s.
    pub dependency_lines: Throttle,
    generation: AtomicU64,
}

impl Shared {
    pub fn new(certificates: BTreeMap<usize, Arc<CertResolver>>) -> Self {
        let mut secret = [0u8; 32];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut secret)
            .expect("the system's random source");
        Shared {
            metrics: Metrics::new(),
            session_secret: SessionSecret(secret),
            certificates,
            tracing: None,
            dependency_lines: Throttle::new(std::time::Duration::from_secs(10)),
            generation: AtomicU64::new(0),
        }
    }
}

/// Whether some registry wants consumers' assertions forwarded: only then are they kept (no
/// credential is held for nothing).
pub fn forwards(config: &Config) -> bool {
    config
        .registries
        .values()
        .any(|r| r.previous_steps == PreviousSteps::ConsumerAssertion)
}

/// Where jtis, sign-ins in progress and sessions are kept: in memory, or on the fleet's Redis.
pub struct Stores {
    pub replay: Arc<ReplayStore>,
    pub sessions: SessionStore,
    /// Consumers' assertions for registries' `previous_steps`.
    pub forwarded: Arc<ForwardedAssertions>,
}

impl Stores {
    /// Whether a reload from `old` to `new` keeps the stores: in memory always (what they hold
    /// must outlive a reload, or a jti accepted before it would be accepted again), on Redis while
    /// its settings stay. A switch between memory and Redis takes effect at a restart.
    pub fn kept(old: &Config, new: &Config) -> bool {
        old.identity.party_id == new.identity.party_id
            && match (&old.replay.redis, &new.replay.redis) {
                (Some(a), Some(b)) => a == b && old.replay.timeout == new.replay.timeout,
                _ => true,
            }
    }

    /// In memory, or on one connection to the fleet's Redis for both.
    pub fn new(config: &Config, metrics: &Metrics) -> Result<Stores, String> {
        let redis = match &config.replay.redis {
            None => None,
            Some(settings) => Some(Arc::new(RedisStore::new(
                settings,
                config.identity.party_id.as_str(),
                config.replay.timeout,
                metrics.clone(),
            )?)),
        };
        Ok(Stores {
            replay: Arc::new(ReplayStore::new(config.replay.capacity, redis.clone())),
            sessions: SessionStore::new(redis.clone()),
            forwarded: Arc::new(ForwardedAssertions::new(
                redis.map(|r| r as Arc<dyn SharedAssertions>),
            )),
        })
    }
}

/// A route's key among the snapshot's routes: its address, stable while the snapshot holds it.
fn route_key(route: &Arc<Route>) -> usize {
    Arc::as_ptr(route) as usize
}

/// What a snapshot works out once for each of its routes.
struct PerRoute {
    /// What the route's backend never receives.
    withheld: Withheld,
    /// The route's series of each `Latency`, found at their first use.
    latency: [OnceLock<Histogram>; 2],
    /// Its requests' counters, by status and outcome.
    requests: FoundOnce<(u16, Outcome), 8>,
    /// Its decisions' counters, by verdict (a permit or not) and reason.
    decisions: FoundOnce<(bool, &'static str), 8>,
}

/// A latency measured per route.
#[derive(Clone, Copy)]
pub enum Latency {
    /// From a request's arrival to its end.
    Request,
    /// From a request's arrival to the gateway's decision on it.
    Decision,
}

/// A request's series: its route's, found once per snapshot (a lookup by label hashes the
/// labels' values), or, for a request with no route of the snapshot, those of the name it was
/// counted under, found at each call.
pub struct Series<'a> {
    route: Option<(&'a PerRoute, &'a Route)>,
    name: &'a str,
    metrics: &'a Metrics,
}

/// The series of a request on `route` of `snap`, or counted under `name` where it has none.
pub fn series<'a>(
    snap: Option<&'a Snapshot>,
    route: Option<&'a Arc<Route>>,
    name: &'a str,
    metrics: &'a Metrics,
) -> Series<'a> {
    let route = (snap.zip(route)).and_then(|(s, r)| Some((s.per_route.get(&route_key(r))?, &**r)));
    Series {
        route,
        name,
        metrics,
    }
}

impl<'a> Series<'a> {
    /// The series of `which` latency.
    pub fn latency(&self, which: Latency) -> Cow<'a, Histogram> {
        let series = match which {
            Latency::Request => &self.metrics.latency,
            Latency::Decision => &self.metrics.decision_latency,
        };
        match self.route {
            Some((per, route)) => Cow::Borrowed(
                per.latency[which as usize]
                    .get_or_init(|| series.with_label_values(&[&route.name])),
            ),
            None => Cow::Owned(series.with_label_values(&[self.name])),
        }
    }

    /// The counter of requests answered with `status` (none: no answer was written).
    pub fn requests(
        &self,
        status: Option<http::StatusCode>,
        outcome: Outcome,
    ) -> Cow<'a, IntCounter> {
        let find = |name: &str| {
            self.metrics.requests.with_label_values(&[
                name,
                status.as_ref().map_or("0", |s| s.as_str()),
                outcome.as_str(),
            ])
        };
        match self.route {
            Some((per, route)) => {
                let key = (status.map_or(0, |s| s.as_u16()), outcome);
                per.requests.get(key, || find(&route.name))
            }
            None => Cow::Owned(find(self.name)),
        }
    }

    /// The counter of delegation decisions that came to a permit (or not) for `reason`.
    pub fn decisions(&self, permit: bool, reason: &'static str) -> Cow<'a, IntCounter> {
        let find = |name: &str| {
            let verdict = if permit { "permit" } else { "deny" };
            self.metrics
                .decisions
                .with_label_values(&[name, verdict, reason])
        };
        match self.route {
            Some((per, route)) => per.decisions.get((permit, reason), || find(&route.name)),
            None => Cow::Owned(find(self.name)),
        }
    }
}

/// One configuration, ready to serve.
pub struct Snapshot {
    pub config: Arc<Config>,
    pub generation: u64,
    pub routes: RouteTable,
    /// What is worked out once for each route, by the address of the route this snapshot holds
    /// (foldhash: a fraction of SipHash's instructions on a number).
    per_route: HashMap<usize, PerRoute, crate::keyed::KeyedHash>,
    pub upstreams: BTreeMap<String, Arc<UpstreamPool>>,
    pub tokens: AccessTokens,
    pub algorithms: AlgorithmPolicy,
    pub capabilities: Capabilities,
    pub trust: Arc<TrustStore>,
    pub peer: PeerClient,
    pub authz: Authorizer,
    /// People's sign-in, when configured.
    pub login: Option<Arc<Login>>,
    pub stores: Arc<Stores>,
    /// Where decisions are logged, when configured.
    pub decision_log: Option<Arc<DecisionLog>>,
    /// Decisions kept by the request as it came.
    pub as_it_came: AsItCame,
}

impl Snapshot {
    /// Whether this snapshot can serve (what /ready says): its trusted list fresh and its replay
    /// store answering (on Redis, its epoch established by the asking); otherwise the problems.
    pub async fn readiness(&self) -> Result<(), Vec<String>> {
        let mut problems = self.trust.readiness().err().unwrap_or_default();
        if let Err(e) = self.stores.replay.check().await {
            problems.push(e.to_string());
        }
        match problems.is_empty() {
            true => Ok(()),
            false => Err(problems),
        }
    }

    /// Seconds until each certificate of this configuration expires, as of now; certificates of
    /// an earlier configuration are no longer reported.
    pub fn report_certificate_expiry(&self, metrics: &crate::telemetry::metrics::Metrics) {
        let now = crate::scheme::Timestamp::now().secs();
        metrics.certificate_expiry.reset();
        for c in &self.config.certificates {
            metrics
                .certificate_expiry
                .with_label_values(&[c.certificate.as_str()])
                .set(c.not_after.saturating_sub(now));
        }
    }

    /// What decisions are made under.
    pub fn policy(&self) -> Policy<'_> {
        Policy {
            config: &self.config,
            routes: &self.routes,
            sign_in: self.login.as_ref().map(|l| &l.settings),
        }
    }

    /// What a route's backend never receives: worked out when the snapshot was built for its own
    /// routes, otherwise now.
    pub fn withheld<'a>(&'a self, route: &Arc<Route>) -> Cow<'a, Withheld> {
        match self.per_route.get(&route_key(route)) {
            Some(per) => Cow::Borrowed(&per.withheld),
            None => Cow::Owned(Withheld::new(route, &self.config)),
        }
    }

    /// What a sign-in needs of this snapshot.
    pub fn login_context(&self) -> LoginContext<'_> {
        LoginContext {
            store: &self.stores.sessions,
            trust: &self.trust,
        }
    }
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
        let upstreams = Self::upstreams(&config, previous)?;
        let same_peers = previous.filter(|p| Self::same_peers(&p.config, &config));
        let peer = Self::peer(&config, same_peers)?;
        let trust = Self::trust(&config, same_peers, &peer, algorithms, shared);
        let stores = match previous {
            Some(p) if Stores::kept(&p.config, &config) => p.stores.clone(),
            _ => Arc::new(Stores::new(&config, &shared.metrics)?),
        };
        let authz = Self::authz(&config, same_peers, &peer, &stores, shared);
        let tokens = AccessTokens::new(
            &config.identity.party_id,
            config.identity.key_pem.as_bytes(),
            config.tokens.lifetime.as_secs(),
            config.tokens.leeway.as_secs(),
        );
        let login = Self::login(&config, same_peers, &peer, algorithms, shared)?;
        let routes = RouteTable::new(config.routes.clone());
        let mut per_route = HashMap::with_hasher(crate::keyed::keyed());
        per_route.extend(routes.routes().iter().map(|r| {
            let per = PerRoute {
                withheld: Withheld::new(r, &config),
                latency: Default::default(),
                requests: Default::default(),
                decisions: Default::default(),
            };
            (route_key(r), per)
        }));
        let capabilities = Capabilities::new(&config, &routes);
        let as_it_came = AsItCame::new(
            config.delegation.cache_size / 4,
            crate::gateway::as_it_came::LONGEST,
            routes.routes(),
            trust.resolves_aliases(),
            authz.decision_entries(),
            &shared.metrics,
        );
        // Opened anew at every reload: a log moved away (rotated) is written to again.
        let decision_log = match &config.decision_log {
            Some(settings) => Some(Arc::new(DecisionLog::open(
                settings,
                shared.metrics.clone(),
            )?)),
            None => None,
        };
        Ok(Snapshot {
            generation: shared.generation.fetch_add(1, Ordering::Relaxed) + 1,
            routes,
            per_route,
            upstreams,
            tokens,
            algorithms,
            capabilities,
            trust,
            peer,
            authz,
            login,
            stores,
            decision_log,
            as_it_came,
            config,
        })
    }

    /// The upstream pools: an upstream whose settings stay keeps its pool (and the health known
    /// of it), any other gets a new one.
    fn upstreams(
        config: &Config,
        previous: Option<&Snapshot>,
    ) -> Result<BTreeMap<String, Arc<UpstreamPool>>, String> {
        let mut upstreams = BTreeMap::new();
        for (name, up) in &config.upstreams {
            let pool = match previous.and_then(|p| p.upstreams.get(name)) {
                Some(old) if old.config == *up => old.clone(),
                _ => Arc::new(UpstreamPool::new(up.clone())?),
            };
            upstreams.insert(name.clone(), pool);
        }
        Ok(upstreams)
    }

    /// Whether `old` and `new` talk to the same peers as the same party: our identity, the
    /// outbound TLS roots and the scheme stay.
    fn same_peers(old: &Config, new: &Config) -> bool {
        old.identity.party_id == new.identity.party_id
            && old.identity.chain_file == new.identity.chain_file
            && old.identity.key_pem == new.identity.key_pem
            && old.outbound.ca_pem == new.outbound.ca_pem
            && old.outbound.system_roots == new.outbound.system_roots
            && old.scheme == new.scheme
    }

    /// The client for other participants: the one of `same_peers` (the previous snapshot when it
    /// talks to the same peers), or a new one on a new outbound TLS client.
    fn peer(config: &Config, same_peers: Option<&Snapshot>) -> Result<PeerClient, String> {
        if let Some(p) = same_peers {
            return Ok(p.peer.clone());
        }
        let http = crate::tls::outbound_client(
            &config.outbound,
            config
                .scheme_owner
                .timeout
                .max(config.delegation.registry_timeout),
        )
        .map_err(|e| format!("outbound TLS: {e}"))?;
        Ok(
            PeerClient::new(http, config.identity.signing.clone(), config.scheme.clone())
                .in_dataspaces(config.dataspaces.clone()),
        )
    }

    /// The scheme owner's trust store (and its caches): kept while the peers, the scheme owner
    /// and the token settings stay.
    fn trust(
        config: &Config,
        same_peers: Option<&Snapshot>,
        peer: &PeerClient,
        algorithms: AlgorithmPolicy,
        shared: &Shared,
    ) -> Arc<TrustStore> {
        match same_peers {
            Some(p)
                if p.config.scheme_owner == config.scheme_owner
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
        }
    }

    /// The authorizer (and our tokens at other participants): kept while the peers, the stores,
    /// the registries, the delegation and the token settings stay.
    fn authz(
        config: &Config,
        same_peers: Option<&Snapshot>,
        peer: &PeerClient,
        stores: &Arc<Stores>,
        shared: &Shared,
    ) -> Authorizer {
        match same_peers {
            Some(p)
                if Arc::ptr_eq(&p.stores, stores)
                    && p.config.scheme_owner.scheme_version
                        == config.scheme_owner.scheme_version
                    && p.config.registries == config.registries
                    && p.config.delegation == config.delegation
                    && p.config.tokens == config.tokens =>
            {
                p.authz.clone()
            }
            _ => Authorizer::new(
                config,
                peer.clone(),
                stores.replay.clone(),
                stores.forwarded.clone(),
                shared.metrics.clone(),
            ),
        }
    }

    /// People's sign-in, when `[login]` is configured: kept while the peers, the login settings,
    /// the public URL, the token settings and the scheme owner's timeout stay.
    fn login(
        config: &Config,
        same_peers: Option<&Snapshot>,
        peer: &PeerClient,
        algorithms: AlgorithmPolicy,
        shared: &Shared,
    ) -> Result<Option<Arc<Login>>, String> {
        Ok(match (&config.login, same_peers) {
            (None, _) => None,
            (Some(settings), Some(p))
                if p.config.login.as_ref() == Some(settings)
                    && p.config.public_url == config.public_url
                    && p.config.tokens == config.tokens
                    && p.config.scheme_owner.timeout == config.scheme_owner.timeout =>
            {
                p.login.clone()
            }
            (Some(settings), _) => Some(Arc::new(Login::new(
                config,
                settings.clone(),
                peer.clone(),
                algorithms,
                &shared.session_secret,
            )?)),
        })
    }
}

/// The current snapshot and what outlives it.
pub struct GatewayState {
    pub current: ArcSwap<Snapshot>,
    pub shared: Shared,
}
