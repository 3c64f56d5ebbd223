//! Deploying the cluster as a fleet is deployed: the testbed, Redis, gateway instances sharing it
//! (each from the operator's configuration with the cluster's listeners) and HAProxy in front.

use super::balancer::{haproxy_config, Backend};
use super::child::{free_port, write_secret, Child};
use super::walk::{consumer, shown};
use crate::testbed::config::TestbedConfig;
use crate::testbed::Testbed;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// One gateway instance: its configuration, listeners and process.
pub(super) struct Instance {
    pub(super) name: &'static str,
    pub(super) config: PathBuf,
    /// https://127.0.0.1:PORT, for the walk to reach it directly
    pub(super) tls: String,
    /// 127.0.0.1:PORT, where the balancer sends to
    pub(super) plain: String,
    /// http://127.0.0.1:PORT
    pub(super) admin: String,
    pub(super) process: Option<Child>,
}

impl Instance {
    pub(super) fn start(&mut self, logs: &Path) -> Result<(), String> {
        let mut command = Command::new(std::env::current_exe().map_err(|e| e.to_string())?);
        command.args(["run", "--config", &self.config.display().to_string()]);
        self.process = Some(Child::spawn(
            &format!("gateway-{}", self.name),
            command,
            logs,
        )?);
        Ok(())
    }

    /// The configuration generation when /ready answers 200.
    pub(super) async fn ready(&self, http: &reqwest::Client) -> Option<u64> {
        let r = http
            .get(format!("{}/ready", self.admin))
            .send()
            .await
            .ok()?;
        if r.status() != 200 {
            return None;
        }
        r.json::<serde_json::Value>().await.ok()?["config_generation"].as_u64()
    }

    /// Wait (at most 30 s) until /ready answers 200 and past `after`; the generation.
    pub(super) async fn wait_ready(
        &mut self,
        http: &reqwest::Client,
        after: u64,
    ) -> Result<u64, String> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(ended) = self.process.as_mut().and_then(Child::ended) {
                return Err(ended);
            }
            if let Some(g) = self.ready(http).await.filter(|g| *g > after) {
                return Ok(g);
            }
            if Instant::now() > deadline {
                return Err(format!("gateway {} was not ready within 30 s", self.name));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Keys of a gateway configuration that hold paths, relative to the file that names them.
const PATH_KEYS: &[&str] = &[
    "key",
    "certificate_chain",
    "certificate",
    "client_ca",
    "root_certificate",
    "trusted_list_file",
    "ca_file",
    "directory",
    "session_secret_file",
    "credentials_file",
];

/// Make every relative path of `table` absolute against `base`.
fn absolute_paths(table: &mut toml::Table, base: &Path) {
    for (key, value) in table.iter_mut() {
        match value {
            toml::Value::String(s)
                if PATH_KEYS.contains(&key.as_str()) && Path::new(s.as_str()).is_relative() =>
            {
                *s = base.join(s.as_str()).display().to_string();
            }
            toml::Value::Table(t) => absolute_paths(t, base),
            toml::Value::Array(items) => {
                for item in items {
                    if let toml::Value::Table(t) = item {
                        absolute_paths(t, base);
                    }
                }
            }
            _ => {}
        }
    }
}

/// The configuration of one instance: the operator's, with the instance's listeners and admin
/// address, the balancer's public URL, the stores on Redis, and the balancer as a trusted proxy.
fn instance_config(
    base: &toml::Table,
    tls: (&str, &str),
    ports: (u16, u16, u16),
    public_url: &str,
    redis_url: &str,
    secret: &Path,
) -> toml::Table {
    let (tls_port, plain_port, admin_port) = ports;
    let mut table = base.clone();
    table.insert("public_url".into(), public_url.into());
    let listeners: toml::Value = toml::Value::Array(vec![
        toml::toml! { address = (format!("127.0.0.1:{tls_port}")) tls = { certificate = (tls.0), key = (tls.1) } }.into(),
        toml::toml! { address = (format!("127.0.0.1:{plain_port}")) }.into(),
    ]);
    table.insert("listener".into(), listeners);
    table.insert(
        "admin".into(),
        toml::toml! { address = (format!("127.0.0.1:{admin_port}")) }.into(),
    );
    table.insert(
        "replay".into(),
        toml::toml! { store = "redis" url = (redis_url) }.into(),
    );
    // The balancer, which connects from loopback, tells the client's address and scheme.
    let forwarding = table
        .entry("forwarding")
        .or_insert_with(|| toml::Table::new().into());
    if let toml::Value::Table(forwarding) = forwarding {
        forwarding.insert("trusted_proxies".into(), vec!["127.0.0.1"].into());
    }
    if let Some(toml::Value::Table(login)) = table.get_mut("login") {
        login.insert(
            "session_secret_file".into(),
            secret.display().to_string().into(),
        );
    }
    let server = table
        .entry("server")
        .or_insert_with(|| toml::Table::new().into());
    if let toml::Value::Table(server) = server {
        server.insert("grace_period".into(), "1s".into());
        server.insert("graceful_shutdown_timeout".into(), "2s".into());
    }
    table
}

/// Everything the cluster runs; dropped, it stops.
pub(super) struct Cluster {
    pub(super) dir: PathBuf,
    pub(super) testbed: Testbed,
    pub(super) _redis: Child,
    pub(super) balancer: Child,
    /// https://127.0.0.1:PORT
    pub(super) url: String,
    pub(super) instances: Vec<Instance>,
    pub(super) http: reqwest::Client,
}

/// The operator's configuration with every path in it absolute, and the party it names: the
/// service provider the instances play.
fn operator_config(path: &Path) -> Result<(toml::Table, String), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut base: toml::Table = text
        .parse()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let config_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    absolute_paths(
        &mut base,
        &std::path::absolute(&config_dir).map_err(|e| e.to_string())?,
    );
    let party = base
        .get("identity")
        .and_then(|i| i.get("party_id"))
        .and_then(|p| p.as_str())
        .ok_or("the configuration names no identity.party_id")?
        .to_string();
    Ok((base, party))
}

/// Redis for the stores the instances share, on a free port; the port. It keeps what it holds
/// across a restart (an append-only file in `data`, written to disk every second), as a fleet's
/// Redis should: one that comes back empty makes the instances refuse every assertion issued
/// before it did.
fn start_redis(data: &Path, logs: &Path) -> Result<(Child, u16), String> {
    std::fs::create_dir_all(data).map_err(|e| format!("{}: {e}", data.display()))?;
    let redis_port = free_port()?;
    let mut command = Command::new("redis-server");
    command.args([
        "--port",
        &redis_port.to_string(),
        "--bind",
        "127.0.0.1",
        "--dir",
        &data.to_string_lossy(),
        "--save",
        "",
        "--appendonly",
        "yes",
        "--appendfsync",
        "everysec",
    ]);
    let redis = Child::spawn("redis", command, logs)
        .map_err(|e| format!("{e} (`make cluster` installs redis-server)"))?;
    println!("Redis on 127.0.0.1:{redis_port}");
    Ok((redis, redis_port))
}

/// A fresh random session secret that every instance reads, in the cluster's directory.
fn session_secret(dir: &Path) -> Result<PathBuf, String> {
    let secret = dir.join("session.key");
    let mut bytes = [0u8; 32];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
        .map_err(|_| "the system's random source failed")?;
    write_secret(&secret, hex::encode(bytes).as_bytes())?;
    Ok(secret)
}

/// Instances a and b on free ports, their configurations written into the cluster's directory.
fn instances(
    base: &toml::Table,
    tls: (&str, &str),
    public_url: &str,
    redis_port: u16,
    secret: &Path,
    dir: &Path,
) -> Result<Vec<Instance>, String> {
    let mut instances = Vec::new();
    for name in ["a", "b"] {
        let ports = (free_port()?, free_port()?, free_port()?);
        let table = instance_config(
            base,
            tls,
            ports,
            public_url,
            &format!("redis://127.0.0.1:{redis_port}/0"),
            secret,
        );
        let config = dir.join(format!("gateway-{name}.toml"));
        std::fs::write(&config, toml::to_string(&table).map_err(|e| e.to_string())?)
            .map_err(|e| format!("{}: {e}", config.display()))?;
        instances.push(Instance {
            name,
            config,
            tls: format!("https://127.0.0.1:{}", ports.0),
            plain: format!("127.0.0.1:{}", ports.1),
            admin: format!("http://127.0.0.1:{}", ports.2),
            process: None,
        });
    }
    Ok(instances)
}

/// HAProxy on the public port, ending TLS and sending to the instances' plain listeners; its
/// configuration file.
fn start_balancer(
    dir: &Path,
    logs: &Path,
    public_port: u16,
    tls: (&str, &str),
    instances: &[Instance],
) -> Result<(Child, PathBuf), String> {
    // HAProxy takes the certificate and its key in one file.
    let pem = dir.join("balancer.pem");
    let both = [tls.0, tls.1]
        .iter()
        .map(std::fs::read_to_string)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?
        .concat();
    write_secret(&pem, both.as_bytes())?;
    let haproxy = dir.join("haproxy.cfg");
    let backends: Vec<Backend> = instances
        .iter()
        .map(|i| Backend {
            name: i.name.to_string(),
            address: i.plain.clone(),
            admin_port: i
                .admin
                .rsplit(':')
                .next()
                .and_then(|p| p.parse().ok())
                .unwrap_or_default(),
        })
        .collect();
    std::fs::write(&haproxy, haproxy_config(public_port, Some(&pem), &backends))
        .map_err(|e| e.to_string())?;
    let mut command = Command::new("haproxy");
    command.args(["-db", "-f", &haproxy.display().to_string()]);
    let balancer = Child::spawn("haproxy", command, logs)
        .map_err(|e| format!("{e} (`make cluster` installs haproxy)"))?;
    Ok((balancer, haproxy))
}

pub(super) async fn start(testbed_config: &Path, config: &Path) -> Result<Cluster, String> {
    let mut testbed_conf = TestbedConfig::load(testbed_config).map_err(|e| e.to_string())?;
    let keys = crate::testbed::prepare(&testbed_conf).map_err(|e| e.to_string())?;
    let (base, party) = operator_config(config)?;
    // The instances play this service provider; the testbed does not run a dummy for it.
    for p in testbed_conf.parties.iter_mut().filter(|p| p.id == party) {
        p.serve = None;
    }
    let data_dir = std::path::absolute(&keys.data_dir).map_err(|e| e.to_string())?;
    let dir = data_dir.join("cluster");
    // Each run's logs afresh; within a run, a process started again appends to its log.
    let logs = dir.join("logs");
    match std::fs::remove_dir_all(&logs) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(format!("{}: {e}", logs.display()))
        }
        _ => {}
    }
    std::fs::create_dir_all(&logs).map_err(|e| format!("{}: {e}", logs.display()))?;

    println!("Starting the testbed...");
    let testbed = Testbed::start(&testbed_conf)
        .await
        .map_err(|e| e.to_string())?;
    let (redis, redis_port) = start_redis(&dir.join("redis"), &logs)?;
    let secret = session_secret(&dir)?;
    let tls_dir = data_dir.join("tls");
    let (cert, key) = (
        tls_dir.join("server.chain.pem").display().to_string(),
        tls_dir.join("server.key.pem").display().to_string(),
    );
    let public_port = free_port()?;
    let url = format!("https://127.0.0.1:{public_port}");
    let mut instances = instances(&base, (&cert, &key), &url, redis_port, &secret, &dir)?;
    let (http, _) = consumer(&data_dir, &testbed.scheme)?;
    for instance in &mut instances {
        instance.start(&logs)?;
        instance.wait_ready(&http, 0).await?;
        println!(
            "Gateway {} ({}): {} (TLS), {} (for the balancer), admin {}",
            instance.name,
            shown(&instance.config),
            instance.tls,
            instance.plain,
            instance.admin
        );
    }

    let (balancer, haproxy) = start_balancer(&dir, &logs, public_port, (&cert, &key), &instances)?;
    let mut cluster = Cluster {
        dir,
        testbed,
        _redis: redis,
        balancer,
        url,
        instances,
        http,
    };
    cluster.wait_balanced().await?;
    println!(
        "HAProxy ({}): {} → gateways a and b",
        shown(&haproxy),
        cluster.url
    );
    Ok(cluster)
}

impl Cluster {
    /// Wait (at most 20 s) until the balancer has sent to every instance.
    async fn wait_balanced(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut seen = std::collections::BTreeSet::new();
        while seen.len() < self.instances.len() {
            if let Some(ended) = self.balancer.ended() {
                return Err(ended);
            }
            if Instant::now() > deadline {
                return Err(format!("the balancer reached only {seen:?} within 20 s"));
            }
            if let Ok(r) = self
                .http
                .get(format!("{}/capabilities", self.url))
                .send()
                .await
            {
                if let Some(i) = r.headers().get("x-instance").and_then(|v| v.to_str().ok()) {
                    seen.insert(i.to_string());
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }
}
