//! A fleet as operators run it: a real redis-server, gateway binaries sharing it, and HAProxy from
//! Debian in front (round robin, health checks on /ready, retries of idempotent requests); and a
//! load of concurrent clients that counts every answer.

use super::process::{eventually, ChildProcess, GatewayProcess};
use super::*;
use ishare_gateway::cli::balancer::{haproxy_config, Backend};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// One gateway instance of the fleet.
pub struct Instance {
    pub gateway: GatewayProcess,
    pub dir: PathBuf,
    pub ports: Ports,
}

impl Instance {
    /// http://127.0.0.1:PORT of its plain listener
    pub fn plain(&self) -> String {
        format!("http://127.0.0.1:{}", self.ports.plain)
    }
}

/// Gateway binaries on one Redis behind HAProxy.
pub struct Fleet {
    pub redis: Option<RedisServer>,
    pub redis_port: u16,
    pub instances: Vec<Instance>,
    pub balancer: ChildProcess,
    /// http://127.0.0.1:PORT of the balancer
    pub url: String,
}

impl Fleet {
    /// `count` instances of the gateway with `rules`, on one Redis, behind HAProxy.
    pub async fn start(bed: &Bed, binary: &str, rules: &str, count: usize) -> Fleet {
        Fleet::start_edited(bed, binary, rules, count, |t| t).await
    }

    /// `start`, each instance's gateway.toml changed by `edit`.
    pub async fn start_edited(
        bed: &Bed,
        binary: &str,
        rules: &str,
        count: usize,
        edit: impl Fn(String) -> String,
    ) -> Fleet {
        let redis = RedisServer::start().await;
        let secret = scratch_dir(binary).join("session.key");
        std::fs::write(&secret, "f".repeat(64)).unwrap();
        let mut instances = Vec::new();
        for i in 0..count {
            let extra = format!(
                "[replay]\nstore = \"redis\"\nurl = \"{}\"\ntimeout = \"500ms\"\n",
                redis.url()
            );
            let (dir, ports) = gateway_dir(bed, binary, rules, &extra, &edit);
            let mut gateway = GatewayProcess::start(
                &format!("{binary}-gateway-{i}"),
                &dir.join("gateway.toml"),
                ports.admin,
            );
            gateway.wait_ready().await;
            instances.push(Instance {
                gateway,
                dir,
                ports,
            });
        }
        let port = free_port();
        let config = scratch_dir(binary).join("haproxy.cfg");
        let backends: Vec<Backend> = instances
            .iter()
            .enumerate()
            .map(|(i, inst)| Backend {
                name: format!("g{i}"),
                address: format!("127.0.0.1:{}", inst.ports.plain),
                admin_port: inst.ports.admin,
            })
            .collect();
        // The balancer's configuration as the cluster command writes it, in plain HTTP.
        std::fs::write(&config, haproxy_config(port, None, &backends)).unwrap();
        let mut command = std::process::Command::new("haproxy");
        command.args(["-db", "-f", config.to_str().unwrap()]);
        let mut fleet = Fleet {
            redis_port: redis.port,
            redis: Some(redis),
            instances,
            balancer: ChildProcess::spawn(&format!("{binary}-haproxy"), command),
            url: format!("http://127.0.0.1:{port}"),
        };
        fleet.wait_all_up().await;
        fleet
    }

    /// Wait (bounded) until the balancer forwards to every instance: each one's /capabilities
    /// reached through it.
    pub async fn wait_all_up(&mut self) {
        let url = format!("{}/capabilities", self.url);
        let count = self.instances.len();
        let http = reqwest::Client::new();
        let up = eventually(Duration::from_secs(20), || async {
            let mut seen = std::collections::HashSet::new();
            for _ in 0..count * 2 {
                if let Ok(r) = http.get(&url).send().await {
                    if r.status() == 200 {
                        if let Some(id) = r.headers().get("x-instance") {
                            seen.insert(id.to_str().unwrap_or_default().to_string());
                        }
                    }
                }
            }
            seen.len() == count
        })
        .await;
        if !up || self.balancer.exited().is_some() {
            panic!(
                "the balancer does not reach every instance\n{}",
                self.balancer.tail()
            );
        }
    }

    /// Start Redis again on its port.
    pub async fn restart_redis(&mut self) {
        self.redis = Some(RedisServer::start_on(self.redis_port).await);
    }
}

/// Answers counted by status, and the first few unexpected ones.
#[derive(Default, Debug)]
pub struct Counts {
    pub by_status: std::collections::BTreeMap<u16, u64>,
    pub transport_errors: u64,
    pub samples: Vec<String>,
}

impl Counts {
    pub fn total(&self) -> u64 {
        self.by_status.values().sum::<u64>() + self.transport_errors
    }

    pub fn of(&self, status: u16) -> u64 {
        self.by_status.get(&status).copied().unwrap_or_default()
    }

    pub fn not(&self, status: u16) -> u64 {
        self.total() - self.of(status)
    }
}

/// `workers` clients sending requests until stopped, each over a connection of its own.
pub struct Load {
    stop: Arc<AtomicBool>,
    workers: Vec<tokio::task::JoinHandle<Counts>>,
}

impl Load {
    /// Start: each worker sends `request(client)` again and again.
    pub fn start<F>(workers: usize, request: F) -> Load
    where
        F: Fn(&reqwest::Client) -> reqwest::RequestBuilder + Send + Sync + 'static,
    {
        let stop = Arc::new(AtomicBool::new(false));
        let request = Arc::new(request);
        let workers = (0..workers)
            .map(|_| {
                let (stop, request) = (stop.clone(), request.clone());
                let client = reqwest::Client::builder()
                    .pool_max_idle_per_host(1)
                    .timeout(Duration::from_secs(10))
                    .build()
                    .unwrap();
                tokio::spawn(async move {
                    let mut counts = Counts::default();
                    while !stop.load(Ordering::Relaxed) {
                        match request(&client).send().await {
                            Ok(r) => {
                                let status = r.status().as_u16();
                                *counts.by_status.entry(status).or_default() += 1;
                                if status != 200 && counts.samples.len() < 3 {
                                    let text = r.text().await.unwrap_or_default();
                                    counts.samples.push(format!("{status} {text}"));
                                }
                            }
                            Err(e) => {
                                counts.transport_errors += 1;
                                if counts.samples.len() < 3 {
                                    counts.samples.push(format!("{e:?}"));
                                }
                            }
                        }
                    }
                    counts
                })
            })
            .collect();
        Load { stop, workers }
    }

    /// Stop and add up what every worker saw.
    pub async fn stop(self) -> Counts {
        self.stop.store(true, Ordering::Relaxed);
        let mut all = Counts::default();
        for w in self.workers {
            let c = w.await.unwrap();
            for (s, n) in c.by_status {
                *all.by_status.entry(s).or_default() += n;
            }
            all.transport_errors += c.transport_errors;
            all.samples.extend(c.samples);
        }
        all
    }
}
