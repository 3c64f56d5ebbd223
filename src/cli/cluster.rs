//! `ishare-gateway cluster`: several instances on one machine, deployed as a fleet is — Redis, the
//! testbed, two gateway processes sharing Redis, and HAProxy in front (TLS, round robin, health
//! checks on /ready, retries of idempotent requests) — and a walk through what the fleet shares: a
//! token from one instance good at the other, an assertion replayed at the other refused, a person
//! signed in at one known at the other and signed out at both, traffic that flows while one
//! instance reloads and another stops, and clients told apart behind the balancer (their address
//! and scheme reach the backend; one client's sign-ins are bounded alone).

use super::balancer::{haproxy_config, Backend};
use super::child::{free_port, write_secret, Child};
use super::walk::{consumer, heading, shown, step, CONSUMER, PERSON, PERSON_PAGE, PERSON_PASSWORD};
use crate::peers::PeerClient;
use crate::scheme::vocabulary::TOKEN_PATH;
use crate::scheme::Timestamp;
use crate::testbed::config::TestbedConfig;
use crate::testbed::person::Browser;
use crate::testbed::Testbed;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A route of the shipped rules decided with the registry.
const CONTAINER: &str = "/api/containers/C1";

#[derive(clap::Args, Debug)]
pub struct ClusterArgs {
    #[arg(long, default_value = "conf/testbed.toml")]
    pub testbed_config: PathBuf,
    /// The configuration every instance starts from (its listeners, admin address, public URL and
    /// [replay] are the cluster's).
    #[arg(long, default_value = "conf/gateway.toml")]
    pub config: PathBuf,
    /// Stop everything after the walk-through instead of serving until Ctrl-C.
    #[arg(long)]
    pub exit: bool,
}

/// One gateway instance: its configuration, listeners and process.
struct Instance {
    name: &'static str,
    config: PathBuf,
    /// https://127.0.0.1:PORT, for the walk to reach it directly
    tls: String,
    /// 127.0.0.1:PORT, where the balancer sends to
    plain: String,
    /// http://127.0.0.1:PORT
    admin: String,
    process: Option<Child>,
}

impl Instance {
    fn start(&mut self, logs: &Path) -> Result<(), String> {
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
    async fn ready(&self, http: &reqwest::Client) -> Option<u64> {
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
    async fn wait_ready(&mut self, http: &reqwest::Client, after: u64) -> Result<u64, String> {
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
struct Cluster {
    dir: PathBuf,
    testbed: Testbed,
    _redis: Child,
    balancer: Child,
    /// https://127.0.0.1:PORT
    url: String,
    instances: Vec<Instance>,
    http: reqwest::Client,
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

async fn start(args: &ClusterArgs) -> Result<Cluster, String> {
    let mut testbed_conf = TestbedConfig::load(&args.testbed_config).map_err(|e| e.to_string())?;
    let keys = crate::testbed::prepare(&testbed_conf).map_err(|e| e.to_string())?;
    let (base, party) = operator_config(&args.config)?;
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

/// The status of a GET with a bearer token, and who the backend was told the caller is.
async fn call(http: &reqwest::Client, url: &str, token: &str) -> Result<(u16, String), String> {
    let r = http
        .get(url)
        .bearer_auth(token)
        .send()
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    let status = r.status().as_u16();
    let body: serde_json::Value = r.json().await.unwrap_or_default();
    let said = body["headers"]["x-consumer-party-id"]
        .as_str()
        .map(|p| format!("the backend got X-Consumer-Party-Id: {p}"))
        .or_else(|| body["reason"].as_str().map(|r| format!("reason: {r}")))
        .unwrap_or_default();
    Ok((status, said))
}

/// The person the backend was told of, if the page is the backend's answer.
fn person_on(page: &crate::testbed::person::Page) -> Option<String> {
    let seen: serde_json::Value = serde_json::from_str(&page.body).ok()?;
    seen["headers"]["x-person-id"].as_str().map(str::to_string)
}

async fn walk(cluster: &mut Cluster, sp: &str) -> Result<(), String> {
    let data_dir = cluster.testbed.keys.data_dir.clone();
    let (_, consumer) = consumer(&data_dir, &cluster.testbed.scheme)?;
    let http = cluster.http.clone();
    let (a, b) = (
        cluster.instances[0].tls.clone(),
        cluster.instances[1].tls.clone(),
    );
    let token = tokens_are_shared(&http, &consumer, (&a, &b), sp).await?;
    replays_are_refused(&http, &consumer, (&a, &b), sp, &cluster.testbed.scheme).await?;
    sessions_are_shared(&data_dir, (&a, &b), &cluster.url).await?;
    traffic_flows(cluster, &http, &token).await?;
    clients_are_told_apart(&data_dir, &cluster.url, &token).await
}

/// Step 1: a token of one instance is good at the other; the token.
async fn tokens_are_shared(
    http: &reqwest::Client,
    consumer: &PeerClient,
    (a, b): (&str, &str),
    sp: &str,
) -> Result<String, String> {
    step(1, "A token from gateway a, used at gateway b: instances with one identity accept each other's tokens");
    let token = consumer
        .token(&format!("{a}{TOKEN_PATH}"), sp)
        .await
        .map_err(|e| e.to_string())?
        .access_token;
    println!("   → POST {a}{TOKEN_PATH}   ← 200 OK: a token for {CONSUMER}");
    let (status, said) = call(http, &format!("{b}{CONTAINER}"), &token).await?;
    println!("   → GET {b}{CONTAINER}   ← {status}: {said}");
    if status != 200 {
        return Err(format!("gateway b answered {status} to a's token"));
    }
    Ok(token)
}

/// Step 2: an assertion accepted at one instance is refused at the other.
async fn replays_are_refused(
    http: &reqwest::Client,
    consumer: &PeerClient,
    (a, b): (&str, &str),
    sp: &str,
    scheme: &str,
) -> Result<(), String> {
    step(
        2,
        "A client assertion used at gateway a, replayed at gateway b: the jti is on Redis, refused",
    );
    let assertion = consumer
        .identity()
        .client_assertion(sp, Timestamp::now())
        .map_err(|e| e.to_string())?;
    let form = [
        ("grant_type", "client_credentials"),
        ("scope", scheme),
        ("client_id", CONSUMER),
        (
            "client_assertion_type",
            "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
        ),
        ("client_assertion", assertion.as_str()),
    ];
    for (name, base) in [("a", a), ("b", b)] {
        let r = http
            .post(format!("{base}{TOKEN_PATH}"))
            .form(&form)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let status = r.status().as_u16();
        let body: serde_json::Value = r.json().await.unwrap_or_default();
        let reason = body["reason"].as_str().unwrap_or("a token");
        println!("   → POST {base}{TOKEN_PATH} (the same assertion)   ← {status}: {reason}");
        let expected = if name == "a" { 200 } else { 400 };
        if status != expected {
            return Err(format!("gateway {name} answered {status}, not {expected}"));
        }
    }
    Ok(())
}

/// Steps 3 and 4: a person signed in at one instance is known at the other, and signed out at both
/// (on the logout page of the gateways' public URL, the origin a sign-out must come from).
async fn sessions_are_shared(
    data_dir: &Path,
    (a, b): (&str, &str),
    public_url: &str,
) -> Result<(), String> {
    step(
        3,
        "Jane Doe signs in at gateway a: gateway b knows her session",
    );
    let ca = std::fs::read(data_dir.join("ca.pem")).map_err(|e| e.to_string())?;
    let mut browser = Browser::new(&ca)?;
    let signed = browser
        .sign_in(&format!("{a}{PERSON_PAGE}"), PERSON, PERSON_PASSWORD)
        .await?;
    let landing = signed.landing.ok_or("the sign-in opened no session")?;
    println!(
        "   → GET {a}{PERSON_PAGE}, the identity provider's login page, back at {}   ← {}: signed in",
        public_url, landing.status
    );
    let at_b = browser.get(&format!("{b}{PERSON_PAGE}")).await?;
    let known = person_on(&at_b).ok_or("gateway b does not know the session")?;
    println!(
        "   → GET {b}{PERSON_PAGE} (the same cookie)   ← {}: the backend got X-Person-Id: {known}",
        at_b.status
    );

    step(
        4,
        "She signs out through the balancer: neither gateway knows her session any more",
    );
    let page = browser.get(&format!("{public_url}/logout")).await?;
    let out = browser.submit(&page, &[]).await?;
    println!(
        "   → GET {public_url}/logout, its Sign out button (POST)   ← {}: signed out",
        out.status
    );
    for (name, gateway) in [("a", a), ("b", b)] {
        let again = browser.get(&format!("{gateway}{PERSON_PAGE}")).await?;
        if person_on(&again).is_some() {
            return Err(format!("gateway {name} still knows the session"));
        }
        println!(
            "   → GET {gateway}{PERSON_PAGE}   ← {}: the way to sign in again",
            again.status
        );
    }
    Ok(())
}

/// Step 5: requests through the balancer while one instance reloads and the other stops.
async fn traffic_flows(
    cluster: &mut Cluster,
    http: &reqwest::Client,
    token: &str,
) -> Result<(), String> {
    step(
        5,
        "Traffic through the balancer while gateway a reloads and gateway b stops",
    );
    let stop = Arc::new(AtomicBool::new(false));
    let (ok, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let target = format!("{}{CONTAINER}", cluster.url);
    let workers: Vec<_> = (0..8)
        .map(|_| {
            let (stop, ok, failed, target, token, http) = (
                stop.clone(),
                ok.clone(),
                failed.clone(),
                target.clone(),
                token.to_string(),
                http.clone(),
            );
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    match http.get(&target).bearer_auth(&token).send().await {
                        Ok(r) if r.status() == 200 => ok.fetch_add(1, Ordering::Relaxed),
                        _ => failed.fetch_add(1, Ordering::Relaxed),
                    };
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let generation = cluster.instances[0].ready(&cluster.http).await.unwrap_or(0);
    if let Some(p) = &cluster.instances[0].process {
        p.signal(libc::SIGHUP);
    }
    let reloaded = cluster.instances[0]
        .wait_ready(&cluster.http, generation)
        .await?;
    println!("   gateway a reloaded (SIGHUP): configuration generation {generation} → {reloaded}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let stopped = match cluster.instances[1].process.as_mut() {
        Some(p) => p.stop(Duration::from_secs(10)).await,
        None => false,
    };
    println!(
        "   gateway b stopped (SIGTERM){}",
        if stopped { "" } else { ": not within 10 s" }
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        let _ = w.await;
    }
    let (ok, failed) = (ok.load(Ordering::Relaxed), failed.load(Ordering::Relaxed));
    println!("   → GET {target}, 8 clients for 4 s   ← {ok} × 200, {failed} failed");
    if failed > 0 {
        return Err(format!(
            "{failed} requests failed while a reloaded and b stopped"
        ));
    }
    let logs = cluster.dir.join("logs");
    cluster.instances[1].start(&logs)?;
    cluster.instances[1].wait_ready(&cluster.http, 0).await?;
    println!("   gateway b started again");
    Ok(())
}

/// Step 6: through the balancer, a trusted proxy of the instances, the backend learns the client's
/// address and scheme, and one client starting sign-ins again and again is refused alone.
async fn clients_are_told_apart(
    data_dir: &Path,
    public_url: &str,
    token: &str,
) -> Result<(), String> {
    step(
        6,
        "Clients through the balancer: the backend learns each one's address and scheme, and a greedy one is bounded alone",
    );
    let ca = std::fs::read(data_dir.join("ca.pem")).map_err(|e| e.to_string())?;
    let (greedy, other): (std::net::IpAddr, std::net::IpAddr) =
        ([127, 0, 0, 2].into(), [127, 0, 0, 3].into());
    let http = crate::tls::outbound_builder(
        &crate::tls::OutboundTrust {
            ca_pem: Some(ca.clone()),
            system_roots: false,
        },
        Duration::from_secs(10),
    )
    .map_err(|e| e.to_string())?
    .local_address(Some(greedy))
    .build()
    .map_err(|e| e.to_string())?;
    let echoed: serde_json::Value = http
        .get(format!("{public_url}{CONTAINER}"))
        .bearer_auth(token)
        .header("X-Forwarded-Proto", "http")
        .header("X-Forwarded-For", "6.6.6.6")
        .send()
        .await
        .map_err(|e| e.to_string())?
        .json()
        .await
        .map_err(|e| e.to_string())?;
    let told = |name: &str| {
        echoed["headers"][name]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let (proto, forwarded_for) = (told("x-forwarded-proto"), told("x-forwarded-for"));
    println!(
        "   → GET {public_url}{CONTAINER} from {greedy} (saying X-Forwarded-Proto: http, X-Forwarded-For: 6.6.6.6)   ← the backend got X-Forwarded-Proto: {proto}, X-Forwarded-For: {forwarded_for}"
    );
    if proto != "https" || !forwarded_for.starts_with(&greedy.to_string()) {
        return Err("the backend was not told the client's address and scheme".into());
    }
    let mut browser = Browser::on(&ca, Some(greedy))?;
    let mut started = 0;
    let refused = loop {
        let page = browser.get(&format!("{public_url}{PERSON_PAGE}")).await?;
        if page.status == 429 || started >= 500 {
            break page;
        }
        started += 1;
    };
    // A person's refused sign-in is a page naming its reason.
    let reason = refused
        .body
        .split_once("data-reason=\"")
        .and_then(|(_, rest)| rest.split_once('"'))
        .map(|(reason, _)| reason)
        .unwrap_or_default();
    println!(
        "   → GET {public_url}{PERSON_PAGE} from {greedy}, again and again   ← {started} sign-ins started, then {}: {reason}",
        refused.status
    );
    let mut polite = Browser::on(&ca, Some(other))?;
    let page = polite.get(&format!("{public_url}{PERSON_PAGE}")).await?;
    println!(
        "   → GET {public_url}{PERSON_PAGE} from {other}   ← {}: the identity provider's sign-in",
        page.status
    );
    if refused.status != 429 || page.status == 429 {
        return Err("the balancer's clients were not bounded one by one".into());
    }
    Ok(())
}

/// Run the cluster and its walk-through; serve until Ctrl-C unless `exit`.
pub fn run(args: ClusterArgs) -> Result<(), String> {
    let _log = crate::telemetry::init_logging(false, "warn,pingora_core::connectors=off", true);
    crate::tls::ensure_crypto_provider();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let mut cluster = start(&args).await?;
        let sp = crate::config::load(&cluster.instances[0].config)
            .map_err(|e| e.to_string())?
            .identity
            .party_id
            .to_string();
        let walked = walk(&mut cluster, &sp).await;
        match &walked {
            Ok(()) => {
                heading("Several instances are running:");
                println!("  {}   the balancer (HAProxy), TLS", cluster.url);
                for i in &cluster.instances {
                    println!("  {}   gateway {} (admin {})", i.tls, i.name, i.admin);
                }
                println!("  logs and configurations in {}", shown(&cluster.dir));
                if !args.exit {
                    println!("Ctrl-C stops everything.");
                    super::wait_for_stop().await;
                }
            }
            Err(e) => eprintln!("the walk-through failed: {e}"),
        }
        println!("\nStopping...");
        for i in &mut cluster.instances {
            if let Some(p) = i.process.as_mut() {
                p.stop(Duration::from_secs(10)).await;
            }
        }
        let Cluster { testbed, .. } = cluster;
        testbed.stop().await;
        walked
    })
}
