//! The Redis a fleet shares (replays, sign-ins, sessions, consumers' assertions for registries):
//! one server, the master that Redis Sentinels name, or a Redis Cluster, on one connection for
//! all of them (to a cluster: one that routes each command to the node holding its slot, and
//! follows slots and failovers as the nodes announce them). Every
//! command runs on a runtime of its own, bounded in time and aborted when its caller stops
//! waiting; a call that fails is an error for the caller to fail closed on. A connection that
//! fails (or lands on a master demoted to replica) is dropped, and the next call makes a new one,
//! with Sentinels to the master they name then: during a failover, calls fail until the new
//! master is named, then go there without a restart.

use crate::config::model::{RedisSettings, RedisTarget};
use crate::peers::forwarded::SharedAssertions;
use crate::telemetry::metrics::Metrics;
use async_trait::async_trait;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;
use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{ConnectionAddr, IntoConnectionInfo, TlsCertificates, TlsMode};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The runtime every Redis connection lives on, one for the process: the connections' I/O and
/// reconnections run there, whichever runtime a caller is on (pingora's runtimes per thread, the
/// admin service, a reload). It starts with the first call, so that nothing runs before pingora
/// daemonizes (a fork keeps no thread).
fn redis_runtime() -> Result<&'static tokio::runtime::Runtime, String> {
    static RUNTIME: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("redis")
                .enable_all()
                .build()
                .map_err(|e| format!("a runtime for Redis: {e}"))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Where connections go.
enum Target {
    Server(redis::Client),
    Sentinel(tokio::sync::Mutex<SentinelClient>),
    /// The cluster, and a client of each node given, for the purge channel's subscription (a
    /// message published to a cluster reaches every node).
    Cluster(ClusterClient, Vec<redis::Client>),
}

/// A connection: to one server (or master), or to a cluster.
#[derive(Clone)]
enum Connection {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

struct Inner {
    target: Target,
    timeout: Duration,
    /// The connection in use and its generation; None: made (with Sentinels: the master found;
    /// with a cluster: its slots learnt) on the next call.
    connection: tokio::sync::Mutex<Option<(u64, Connection)>>,
    generations: std::sync::atomic::AtomicU64,
}

/// A call on the Redis runtime, aborted if its caller stops waiting for it (a timeout, a request
/// that ends): calls in flight are never more than the requests waiting for them.
struct Call(tokio::task::JoinHandle<Result<redis::Value, String>>);

impl Drop for Call {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A handle on the shared Redis, with the key prefix of this gateway's party.
pub struct RedisStore {
    inner: Arc<Inner>,
    pub(in crate::gateway) namespace: String,
    /// The replay store's epoch this instance last saw (0: none yet).
    pub(in crate::gateway) epoch_seen: std::sync::atomic::AtomicI64,
    /// The epoch of the last reset this instance saw (the epoch changed under it; -1: none).
    pub(in crate::gateway) reset_seen: std::sync::atomic::AtomicI64,
    /// The latest acceptance (second) this instance wrote to the store: a store that holds an
    /// older one lost writes.
    pub(in crate::gateway) written: std::sync::atomic::AtomicI64,
    metrics: Metrics,
}

impl RedisStore {
    /// Check the settings and prepare the client; no connection is made (nor thread started).
    pub fn new(
        settings: &RedisSettings,
        namespace: &str,
        timeout: Duration,
        metrics: Metrics,
    ) -> Result<Self, String> {
        let certificates = || TlsCertificates {
            client_tls: None,
            root_cert: settings.ca_pem.clone(),
        };
        let target = match &settings.target {
            RedisTarget::Server(url) => Target::Server(client_of(settings, url.as_str())?),
            RedisTarget::Sentinel {
                nodes,
                master,
                db,
                tls,
            } => {
                let addresses = nodes.iter().map(|(host, port)| address(host, *port, *tls));
                let mut builder =
                    SentinelClientBuilder::new(addresses, master, SentinelServerType::Master)
                        .map_err(|e| format!("replay store: {e}"))?
                        .set_client_to_redis_db(*db);
                if *tls {
                    builder = builder
                        .set_client_to_redis_tls_mode(TlsMode::Secure)
                        .set_client_to_sentinel_tls_mode(TlsMode::Secure);
                    if settings.ca_pem.is_some() {
                        builder = builder
                            .set_client_to_redis_certificates(certificates())
                            .set_client_to_sentinel_certificates(certificates());
                    }
                }
                if let Some(c) = &settings.credentials {
                    builder = builder
                        .set_client_to_redis_password(&c.password)
                        .set_client_to_sentinel_password(&c.password);
                    if let Some(user) = &c.username {
                        builder = builder
                            .set_client_to_redis_username(user)
                            .set_client_to_sentinel_username(user);
                    }
                }
                let client = builder.build().map_err(|e| format!("replay store: {e}"))?;
                Target::Sentinel(tokio::sync::Mutex::new(client))
            }
            RedisTarget::Cluster { nodes, tls } => {
                let infos = nodes
                    .iter()
                    .map(|(host, port)| address(host, *port, *tls))
                    .collect::<Vec<_>>();
                let mut builder = ClusterClientBuilder::new(infos.clone())
                    .connection_timeout(timeout)
                    .response_timeout(timeout)
                    .retries(1)
                    .min_retry_wait(50)
                    .max_retry_wait(500);
                if *tls {
                    builder = builder.tls(TlsMode::Secure);
                    if settings.ca_pem.is_some() {
                        builder = builder.certs(certificates());
                    }
                }
                if let Some(c) = &settings.credentials {
                    builder = builder.password(&c.password);
                    if let Some(user) = &c.username {
                        builder = builder.username(user);
                    }
                }
                let cluster = builder.build().map_err(|e| format!("replay store: {e}"))?;
                let node_clients = infos
                    .into_iter()
                    .map(|addr| client_of(settings, addr))
                    .collect::<Result<Vec<_>, _>>()?;
                Target::Cluster(cluster, node_clients)
            }
        };
        // On a cluster every key of this party carries one hash tag, so that a script's keys (the
        // replay store's epoch, latest acceptance and jti) are on one slot.
        let namespace = match settings.target {
            RedisTarget::Cluster { .. } => format!("{{{namespace}}}"),
            _ => namespace.to_string(),
        };
        Ok(RedisStore {
            inner: Arc::new(Inner {
                target,
                timeout,
                connection: tokio::sync::Mutex::new(None),
                generations: std::sync::atomic::AtomicU64::new(0),
            }),
            namespace,
            epoch_seen: std::sync::atomic::AtomicI64::new(0),
            reset_seen: std::sync::atomic::AtomicI64::new(-1),
            written: std::sync::atomic::AtomicI64::new(0),
            metrics,
        })
    }

    /// One command, run on the Redis runtime and bounded in time (twice the configured timeout:
    /// finding the master, then the command); counted and timed by command.
    pub(in crate::gateway) async fn run(
        &self,
        command: redis::Cmd,
    ) -> Result<redis::Value, String> {
        let name = command_name(&command);
        let started = std::time::Instant::now();
        let runtime = redis_runtime()?;
        let inner = self.inner.clone();
        let within = self.within();
        let mut call = Call(runtime.spawn(async move { inner.query(command).await }));
        let (outcome, answer) = match tokio::time::timeout(within, &mut call.0).await {
            Ok(Ok(Ok(value))) => ("ok", Ok(value)),
            Ok(Ok(Err(e))) => ("error", Err(e)),
            Ok(Err(e)) => ("error", Err(format!("the call ended: {e}"))),
            Err(_) => ("timeout", Err(format!("no answer within {within:?}"))),
        };
        self.metrics
            .redis_latency
            .with_label_values(&[name])
            .observe(started.elapsed().as_secs_f64());
        self.metrics
            .redis_calls
            .with_label_values(&[name, outcome])
            .inc();
        answer
    }
}

impl Inner {
    async fn query(&self, command: redis::Cmd) -> Result<redis::Value, String> {
        let (generation, connection) = self.connection().await?;
        let answer = match connection {
            Connection::Single(mut c) => command.query_async(&mut c).await,
            Connection::Cluster(mut c) => command.query_async(&mut c).await,
        };
        match answer {
            Ok(value) => Ok(value),
            Err(e) => {
                if fails_over(&e) {
                    // Only the connection this call used: another call may have made a new one.
                    let mut current = self.connection.lock().await;
                    if current.as_ref().is_some_and(|(g, _)| *g == generation) {
                        *current = None;
                    }
                }
                Err(e.to_string())
            }
        }
    }

    /// The connection in use, or a new one: to the server, to the master the Sentinels name
    /// (asked within the timeout), or to the cluster (its slots learnt from the nodes given).
    async fn connection(&self) -> Result<(u64, Connection), String> {
        let mut current = self.connection.lock().await;
        if let Some(c) = current.as_ref() {
            return Ok(c.clone());
        }
        let connection = match &self.target {
            Target::Cluster(cluster, _) => Connection::Cluster(
                tokio::time::timeout(self.timeout, cluster.get_async_connection())
                    .await
                    .map_err(|_| format!("no cluster's slots within {:?}", self.timeout))?
                    .map_err(|e| format!("no cluster's slots: {e}"))?,
            ),
            _ => Connection::Single(self.manager().await?),
        };
        let generation = self
            .generations
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        *current = Some((generation, connection.clone()));
        Ok((generation, connection))
    }

    /// A connection to the server, or to the master the Sentinels name now, kept up by a manager.
    async fn manager(&self) -> Result<ConnectionManager, String> {
        let client = self.client().await?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout))
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_millis(500));
        ConnectionManager::new_lazy_with_config(client, config).map_err(|e| e.to_string())
    }
}

impl Inner {
    /// A client of the server, or of the master the Sentinels name now (asked within the timeout).
    /// Of a cluster: of the first node given that answers (to subscribe on: a message published
    /// to the cluster reaches every node).
    async fn client(&self) -> Result<redis::Client, String> {
        match &self.target {
            Target::Server(client) => Ok(client.clone()),
            Target::Cluster(_, nodes) => {
                let mut failed = Vec::new();
                for node in nodes {
                    let ping = async {
                        let mut c = node.get_multiplexed_async_connection().await?;
                        redis::cmd("PING").query_async::<()>(&mut c).await
                    };
                    match tokio::time::timeout(self.timeout, ping).await {
                        Ok(Ok(())) => return Ok(node.clone()),
                        Ok(Err(e)) => failed.push(e.to_string()),
                        Err(_) => failed.push(format!("no answer within {:?}", self.timeout)),
                    }
                }
                Err(format!(
                    "no node of the cluster answers: {}",
                    failed.join("; ")
                ))
            }
            Target::Sentinel(sentinel) => {
                let mut sentinel = sentinel.lock().await;
                tokio::time::timeout(self.timeout, sentinel.async_get_client())
                    .await
                    .map_err(|_| format!("no master from the Sentinels within {:?}", self.timeout))?
                    .map_err(|e| format!("no master from the Sentinels: {e}"))
            }
        }
    }
}

impl RedisStore {
    /// How long a call may take: twice the configured timeout (finding the master, then the
    /// command).
    pub(in crate::gateway) fn within(&self) -> Duration {
        self.inner.timeout * 2
    }

    /// A connection of its own subscribed to `channel` (pub/sub needs one: a subscribed connection
    /// runs no other command), made within the timeout.
    pub(in crate::gateway) async fn subscribe(
        &self,
        channel: &str,
    ) -> Result<redis::aio::PubSub, String> {
        let within = self.within();
        let subscribe = async {
            let client = self.inner.client().await?;
            let mut pubsub = client.get_async_pubsub().await.map_err(|e| e.to_string())?;
            pubsub.subscribe(channel).await.map_err(|e| e.to_string())?;
            Ok(pubsub)
        };
        tokio::time::timeout(within, subscribe)
            .await
            .map_err(|_| format!("no subscription within {within:?}"))?
    }
}

impl RedisStore {
    /// `SET key value PX ttl`: kept for `ttl`.
    pub(in crate::gateway) async fn set_for(
        &self,
        key: String,
        value: &[u8],
        ttl: Duration,
    ) -> Result<(), String> {
        let mut command = redis::cmd("SET");
        command
            .arg(key)
            .arg(value)
            .arg("PX")
            .arg(ttl.as_millis().max(1) as u64);
        match self.run(command).await? {
            redis::Value::Okay => Ok(()),
            other => Err(format!("unexpected answer {other:?}")),
        }
    }

    /// The value of `key` by `GET`, or by `GETDEL` (`read` names which).
    pub(in crate::gateway) async fn value(
        &self,
        read: &str,
        key: String,
    ) -> Result<Option<Vec<u8>>, String> {
        let mut command = redis::cmd(read);
        command.arg(key);
        match self.run(command).await? {
            redis::Value::Nil => Ok(None),
            redis::Value::BulkString(bytes) => Ok(Some(bytes)),
            other => Err(format!("unexpected answer {other:?}")),
        }
    }
}

/// Consumers' client assertions for registries' `previous_steps`, shared by the fleet: the latest
/// of each consumer, until its `exp`.
#[async_trait]
impl SharedAssertions for RedisStore {
    async fn put(&self, consumer: &str, assertion: &str, ttl: Duration) -> Result<(), String> {
        let key = format!("{}:consumer-assertion:{consumer}", self.namespace);
        self.set_for(key, assertion.as_bytes(), ttl).await
    }

    async fn get(&self, consumer: &str) -> Result<Option<String>, String> {
        let key = format!("{}:consumer-assertion:{consumer}", self.namespace);
        match self.value("GET", key).await? {
            None => Ok(None),
            Some(bytes) => String::from_utf8(bytes)
                .map(Some)
                .map_err(|_| "a kept assertion is not text".into()),
        }
    }
}

/// The address of a node (a Sentinel, a node of a cluster), over TLS or not.
fn address(host: &str, port: u16, tls: bool) -> ConnectionAddr {
    match tls {
        false => ConnectionAddr::Tcp(host.to_string(), port),
        true => ConnectionAddr::TcpTls {
            host: host.to_string(),
            port,
            insecure: false,
            tls_params: None,
        },
    }
}

/// A client of one server (by URL or address) with the settings' credentials, and their CA over
/// TLS.
fn client_of(
    settings: &RedisSettings,
    at: impl IntoConnectionInfo,
) -> Result<redis::Client, String> {
    let mut info = at
        .into_connection_info()
        .map_err(|e| format!("replay store: {e}"))?;
    if let Some(c) = &settings.credentials {
        let mut redis = info.redis_settings().clone().set_password(&c.password);
        if let Some(user) = &c.username {
            redis = redis.set_username(user);
        }
        info = info.set_redis_settings(redis);
    }
    let client = match &settings.ca_pem {
        Some(ca) => redis::Client::build_with_tls(
            info,
            TlsCertificates {
                client_tls: None,
                root_cert: Some(ca.clone()),
            },
        ),
        None => redis::Client::open(info),
    };
    client.map_err(|e| format!("replay store: {e}"))
}

/// The command's name, for metric labels (a closed set: the commands the stores send).
fn command_name(command: &redis::Cmd) -> &'static str {
    match command.args_iter().next() {
        Some(redis::Arg::Simple(name)) => ["EVAL", "SET", "GET", "GETDEL", "DEL", "PUBLISH"]
            .into_iter()
            .find(|known| name.eq_ignore_ascii_case(known.as_bytes()))
            .unwrap_or("other"),
        _ => "other",
    }
}

/// An error after which the connection is made anew (with Sentinels: to the master they name now;
/// to a cluster: with its slots asked again of the nodes that answer): it failed, or its server is
/// a replica now (a failover, also one a managed service makes behind one name), or a cluster's
/// slot has no node it can reach. A slow answer is not one.
fn fails_over(e: &redis::RedisError) -> bool {
    e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || matches!(
            e.kind(),
            redis::ErrorKind::Server(redis::ServerErrorKind::ReadOnly)
                | redis::ErrorKind::ClusterConnectionNotFound
        )
}
