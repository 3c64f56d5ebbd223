//! The alert rules (deploy/prometheus/alerts.yml) and the dashboard
//! (deploy/grafana/ishare-gateway.json) against a real Prometheus scraping a running gateway every
//! second: while the registry answers, its alert stays quiet; once the registry is down (its port
//! refuses connections), requests that need it are refused 503 `registry_unreachable` and
//! IshareGatewayRegistryErrors fires. Every query of the dashboard is evaluated by that Prometheus,
//! and none is an error.

use crate::support;

use serde_json::Value;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::process::ChildProcess;
use support::*;
use tokio::task::JoinHandle;

const BIN: &str = "monitoring";

/// Reads of containers decided with the evidence of the registry named `watched`.
fn rules() -> String {
    format!(
        "[[route]]\nname = \"watched\"\nmethods = [\"GET\"]\npath = \"/api/watched/{{id}}\"\nupstream = \"echo\"\n[route.delegation]\npolicy_issuer = \"{OWNER}\"\nresource_type = \"CONTAINER\"\nidentifiers = [\"{{path.id}}\"]\nattributes = [\"*\"]\nlicences = [\"ISHARE.0001\"]\nregistry = \"watched\"\n"
    )
}

/// A TCP relay on loopback to the testbed's registry, which can be cut: then its port refuses
/// connections, as a registry that is down does.
struct Relay {
    port: u16,
    accept: JoinHandle<()>,
    connections: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl Relay {
    async fn start(to: u16) -> Relay {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections = Arc::new(Mutex::new(Vec::new()));
        let held = connections.clone();
        let accept = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let relayed = tokio::spawn(async move {
                    if let Ok(mut registry) =
                        tokio::net::TcpStream::connect(("127.0.0.1", to)).await
                    {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut registry).await;
                    }
                });
                held.lock().unwrap().push(relayed);
            }
        });
        Relay {
            port,
            accept,
            connections,
        }
    }

    /// Close the port and every connection through it.
    fn cut(&self) {
        self.accept.abort();
        for connection in self.connections.lock().unwrap().drain(..) {
            connection.abort();
        }
    }
}

/// Prometheus on a free loopback port, scraping the admin listener at `admin_port` every second
/// and evaluating the shipped rules every second, their `for` shortened to 5 s.
struct Prometheus {
    process: ChildProcess,
    url: String,
}

impl Prometheus {
    async fn start(dir: &Path, admin_port: u16) -> Prometheus {
        let shipped = page("deploy/prometheus/alerts.yml");
        let rules: Vec<String> = shipped
            .lines()
            .map(|l| match l.trim_start().strip_prefix("for: ") {
                Some(_) => format!("{}for: 5s", &l[..l.len() - l.trim_start().len()]),
                None => l.to_string(),
            })
            .collect();
        assert_ne!(
            rules.join("\n"),
            shipped.trim_end(),
            "the rules have a `for`"
        );
        std::fs::write(dir.join("alerts.yml"), rules.join("\n")).unwrap();
        std::fs::write(
            dir.join("prometheus.yml"),
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - alerts.yml\nscrape_configs:\n  - job_name: ishare-gateway\n    static_configs:\n      - targets: [\"127.0.0.1:{admin_port}\"]\n"
            ),
        )
        .unwrap();
        let port = free_port();
        let mut command = std::process::Command::new("prometheus");
        command
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"));
        let mut prometheus = Prometheus {
            process: ChildProcess::spawn("prometheus", command),
            url: format!("http://127.0.0.1:{port}"),
        };
        let ready = format!("{}/-/ready", prometheus.url);
        let up = support::process::eventually(Duration::from_secs(30), || async {
            reqwest::get(&ready)
                .await
                .is_ok_and(|r| r.status().is_success())
        })
        .await;
        if !up || prometheus.process.exited().is_some() {
            panic!(
                "Prometheus did not start (the README's test command installs it)\n{}",
                prometheus.process.tail()
            );
        }
        prometheus
    }

    /// The answer of /api/v1/query to `expr`.
    async fn query(&self, expr: &str) -> Value {
        reqwest::Client::new()
            .get(format!("{}/api/v1/query", self.url))
            .query(&[("query", expr)])
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// The state of the alert `name` with the label `label` (pending, firing), if it is active.
    async fn alert(&self, name: &str, (label, value): (&str, &str)) -> Option<String> {
        let body: Value = reqwest::get(format!("{}/api/v1/alerts", self.url))
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        body["data"]["alerts"]
            .as_array()?
            .iter()
            .find(|a| a["labels"]["alertname"] == name && a["labels"][label] == value)
            .and_then(|a| a["state"].as_str().map(str::to_string))
    }
}

/// Every query of the dashboard, with its template variables given their "All" values.
fn dashboard_queries() -> Vec<(String, String)> {
    let dashboard: Value = serde_json::from_str(&page("deploy/grafana/ishare-gateway.json"))
        .expect("the dashboard is JSON");
    let mut queries = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"]
                .as_str()
                .unwrap()
                .replace("$job", ".*")
                .replace("$instance", ".*")
                .replace("$__rate_interval", "1m")
                .replace("$__range", "5m");
            queries.push((panel["title"].as_str().unwrap().to_string(), expr));
        }
    }
    queries
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_down_fires_its_alert_and_every_dashboard_query_evaluates() {
    let bed = Bed::start(BIN).await;
    let registry_port: u16 = bed.url(AR).rsplit(':').next().unwrap().parse().unwrap();
    let relay = Relay::start(registry_port).await;
    let extra = format!(
        "[[registry]]\nname = \"watched\"\nparty_id = \"{AR}\"\nurl = \"https://127.0.0.1:{}\"\n",
        relay.port
    );
    let (dir, ports) = gateway_dir(&bed, BIN, &rules(), &extra, |t| t);
    let env = Env::launch(bed, dir, &ports).await;
    let prometheus_dir = scratch_dir(BIN);
    let mut prometheus = Prometheus::start(&prometheus_dir, ports.admin).await;
    let token = env.token(CONSUMER).await;

    // While the registry answers: a Permit, a Deny, a cached Permit, and a token refused.
    let (status, body) = env.get("/api/watched/C1", &token, &[]).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = env.get("/api/watched/SECRET-1", &token, &[]).await;
    assert_eq!(status, 403, "{body}");
    let (status, _) = env.get("/api/watched/C1", &token, &[]).await;
    assert_eq!(status, 200);
    let refused = env
        .token_response(&env.bed.identity(CONSUMER), Some("not.an.assertion".into()))
        .await;
    assert_eq!(refused.status(), 400);
    let scraped = support::process::eventually(Duration::from_secs(30), || async {
        prometheus
            .query("ishare_gateway_registry_calls_total{outcome=\"evidence\"}")
            .await["data"]["result"]
            .as_array()
            .is_some_and(|r| !r.is_empty())
    })
    .await;
    assert!(
        scraped,
        "Prometheus scraped no registry call\n{}",
        prometheus.process.tail()
    );
    let quiet = "IshareGatewayRegistryErrors";
    assert_eq!(prometheus.alert(quiet, ("registry", "watched")).await, None);

    // The registry goes down: each request that needs it is refused, until the alert fires.
    relay.cut();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut n = 0;
    let state = loop {
        n += 1;
        let (status, body) = env
            .get(&format!("/api/watched/FAULT-{n}"), &token, &[])
            .await;
        assert_refused(status, &body, (503, "registry_unreachable"));
        let state = prometheus.alert(quiet, ("registry", "watched")).await;
        if state.as_deref() == Some("firing") || Instant::now() > deadline {
            break state;
        }
        if let Some(status) = prometheus.process.exited() {
            panic!("Prometheus ended ({status})\n{}", prometheus.process.tail());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_eq!(
        state.as_deref(),
        Some("firing"),
        "after {n} requests refused\n{}",
        prometheus.process.tail()
    );

    // Every query of the dashboard evaluates; those of what happened above have data.
    let queries = dashboard_queries();
    assert!(queries.len() >= 15, "{queries:?}");
    for (title, expr) in &queries {
        let answer = prometheus.query(expr).await;
        assert_eq!(answer["status"], "success", "{title}: {expr}\n{answer}");
    }
    for with_data in [
        "Requests by outcome",
        "p99 added by the gateway",
        "Refusals by reason",
        "Registry errors",
        "Registry latency",
        "Decision cache hit ratio",
        "Alerts firing",
    ] {
        let (_, expr) = queries
            .iter()
            .find(|(title, _)| title == with_data)
            .unwrap_or_else(|| panic!("no panel {with_data:?}"));
        let answer = prometheus.query(expr).await;
        assert!(
            answer["data"]["result"]
                .as_array()
                .is_some_and(|r| !r.is_empty()),
            "{with_data}: {expr} has no data\n{answer}"
        );
    }

    prometheus.process.kill();
    let _ = std::fs::remove_dir_all(&prometheus_dir);
    env.stop().await;
}
