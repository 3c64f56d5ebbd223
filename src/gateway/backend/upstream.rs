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
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A pool of backends for one upstream: round robin over the healthy ones.
pub struct UpstreamPool {
    pub config: Upstream,
    /// The backends and their health checks.
    lb: LoadBalancer<RoundRobin>,
    /// Each backend with its peer, in the order of `lb`'s: chosen from at each request by an
    /// index and a flag, where pingora's selection hashes each backend it considers.
    members: Box<[Member]>,
    /// The round robin's next turn.
    turn: AtomicUsize,
    last_check: std::sync::Mutex<Option<Instant>>,
}

/// A backend of a pool, the peer that connects to it, and what its health check last found.
struct Member {
    backend: Backend,
    peer: HttpPeer,
    /// Set after each health check from its verdict; a backend is healthy until a check says
    /// otherwise, as pingora takes it, and always where the upstream has no health check.
    healthy: AtomicBool,
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
                HealthCheckKind::Tcp => {
                    let mut check = match &config.tls {
                        Some(tls) => TcpHealthCheck::new_tls(&tls.sni),
                        None => TcpHealthCheck::new(),
                    };
                    // Verified against the upstream's own roots, as its requests are.
                    check.peer_template.options.ca = ca.clone();
                    check.peer_template.options.connection_timeout = Some(config.connect_timeout);
                    check.peer_template.options.total_connection_timeout =
                        Some(config.connect_timeout * 2);
                    lb.set_health_check(check)
                }
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
                    check.peer_template.options.total_connection_timeout =
                        Some(config.connect_timeout * 2);
                    lb.set_health_check(Box::new(check));
                }
            }
            lb.health_check_frequency = Some(hc.interval);
            lb.parallel_health_check = true;
        }
        // The backends are static (`try_from_iter` discovered them all, and discovery never runs
        // again), so their list is made once.
        let members = lb
            .backends()
            .get_backend()
            .iter()
            .map(|backend| Member {
                peer: peer(&config, ca.as_ref(), backend),
                backend: backend.clone(),
                healthy: AtomicBool::new(true),
            })
            .collect();
        Ok(UpstreamPool {
            config,
            lb,
            members,
            turn: AtomicUsize::new(0),
            last_check: std::sync::Mutex::new(None),
        })
    }

    /// The peer of the next healthy backend, round robin; none when no backend is healthy. The
    /// backends passed over take their turns too, so the healthy ones share the requests evenly.
    pub fn next_peer(&self) -> Option<&HttpPeer> {
        let n = self.members.len();
        let turn = self.turn.fetch_add(1, Ordering::Relaxed);
        let skipped = (0..n).find(|k| {
            let m = &self.members[turn.wrapping_add(*k) % n];
            m.healthy.load(Ordering::Relaxed)
        })?;
        if skipped > 0 {
            self.turn.fetch_add(skipped, Ordering::Relaxed);
        }
        Some(&self.members[turn.wrapping_add(skipped) % n].peer)
    }

    pub fn backend_count(&self) -> usize {
        self.members.len()
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
        // A round may take the connection's whole time and one read; a check not answered by
        // then is dropped, and its backend keeps its last verdict.
        let round = self.config.connect_timeout * 2 + self.config.read_timeout;
        let checks = self.lb.backends().run_health_check(true);
        if tokio::time::timeout(round, checks).await.is_err() {
            tracing::warn!(upstream = %self.config.name, "a health check did not answer in time");
        }
        for m in self.members.iter() {
            let healthy = self.lb.backends().ready(&m.backend);
            m.healthy.store(healthy, Ordering::Relaxed);
            metrics
                .backend_health
                .with_label_values(&[&self.config.name, &m.backend.addr.to_string()])
                .set(healthy as i64);
        }
    }
}

/// The peer to connect to `backend` with `config`'s timeouts and TLS. Certificates are always
/// verified; the SNI is never empty (an empty one would skip verification).
fn peer(config: &Upstream, ca: Option<&Arc<CaType>>, backend: &Backend) -> HttpPeer {
    let (tls, sni) = match &config.tls {
        Some(t) => (true, t.sni.clone()),
        None => (false, String::new()),
    };
    let mut peer = HttpPeer::new(backend, tls, sni);
    // Keeps pooled connections of this upstream apart from those of any other upstream, so a
    // connection verified against one CA is never reused where another is required.
    peer.group_key = {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        config.name.hash(&mut h);
        config.tls.hash(&mut h);
        h.finish()
    };
    let o = &mut peer.options;
    o.connection_timeout = Some(config.connect_timeout);
    o.total_connection_timeout = Some(config.connect_timeout * 2);
    o.read_timeout = Some(config.read_timeout);
    o.write_timeout = Some(config.write_timeout);
    o.idle_timeout = Some(Duration::from_secs(60));
    if tls {
        o.verify_cert = true;
        o.verify_hostname = true;
        o.ca = ca.cloned();
    }
    peer
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::model::{HealthCheck, UpstreamTls};
    use pingora::upstreams::peer::Peer;

    fn pool(addresses: &[&str], health_check: bool, tls: Option<UpstreamTls>) -> UpstreamPool {
        UpstreamPool::new(Upstream {
            name: "pool".into(),
            addresses: addresses.iter().map(|a| a.to_string()).collect(),
            tls,
            host_header: None,
            connect_timeout: Duration::from_millis(300),
            read_timeout: Duration::from_secs(2),
            write_timeout: Duration::from_secs(3),
            health_check: health_check.then(|| HealthCheck {
                kind: HealthCheckKind::Tcp,
                interval: Duration::from_millis(1),
            }),
        })
        .unwrap()
    }

    fn turns(pool: &UpstreamPool, n: usize) -> Vec<String> {
        (0..n)
            .map(|_| match pool.next_peer() {
                Some(p) => p._address.to_string(),
                None => "none".into(),
            })
            .collect()
    }

    #[tokio::test]
    async fn each_healthy_backend_takes_its_turn_and_a_checked_out_one_none() {
        let alive = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let alive = alive.local_addr().unwrap().to_string();
        let dead = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().to_string()
        };
        let metrics = Metrics::new();
        // Every backend takes its turn, in order, until a health check says otherwise.
        let checked = pool(&[&alive, &dead], true, None);
        let both = turns(&checked, 4);
        assert_eq!(both[0], both[2]);
        assert_eq!(both[1], both[3]);
        assert_ne!(both[0], both[1]);
        assert!(both.contains(&alive) && both.contains(&dead), "{both:?}");
        checked.check_health(&metrics).await;
        assert_eq!(turns(&checked, 3), vec![alive.clone(); 3]);
        // Without a health check, a backend is never taken out.
        let unchecked = pool(&[&alive, &dead], false, None);
        unchecked.check_health(&metrics).await;
        assert!(turns(&unchecked, 2).contains(&dead));
        // The backends passed over take their turns: the healthy ones share the requests evenly.
        let other = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let other = other.local_addr().unwrap().to_string();
        let third = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let third = third.local_addr().unwrap().to_string();
        let gap = pool(&[&alive, &dead, &other, &third], true, None);
        gap.check_health(&metrics).await;
        let mut shares = std::collections::BTreeMap::new();
        for to in turns(&gap, 30) {
            *shares.entry(to).or_insert(0) += 1;
        }
        assert_eq!(shares.len(), 3, "{shares:?}");
        assert!(shares.values().all(|n| *n == 10), "{shares:?}");
        // No backend healthy: none is given.
        let only_dead = pool(&[&dead], true, None);
        only_dead.check_health(&metrics).await;
        assert_eq!(turns(&only_dead, 2), vec!["none", "none"]);
    }

    #[test]
    fn every_peer_carries_the_upstreams_timeouts_and_verified_tls() {
        let tls = UpstreamTls {
            sni: "backend.example".into(),
            ca: None,
        };
        let plain = pool(&["127.0.0.1:1"], false, None);
        let secured = pool(&["127.0.0.1:1"], false, Some(tls));
        let (p, s) = (plain.next_peer().unwrap(), secured.next_peer().unwrap());
        assert_eq!(
            p.options.connection_timeout,
            Some(Duration::from_millis(300))
        );
        assert_eq!(
            p.options.total_connection_timeout,
            Some(Duration::from_millis(600))
        );
        assert_eq!(p.options.read_timeout, Some(Duration::from_secs(2)));
        assert_eq!(p.options.write_timeout, Some(Duration::from_secs(3)));
        assert_eq!(p.options.idle_timeout, Some(Duration::from_secs(60)));
        assert!(!p.is_tls());
        assert!(s.is_tls() && s.options.verify_cert && s.options.verify_hostname);
        assert_eq!(s.sni(), "backend.example");
        // Connections to the two are never pooled together.
        assert_ne!(p.group_key, s.group_key);
    }
}
