//! What operators run: `ishare-gateway run --config …` and `ishare-gateway testbed …` as child
//! processes, with the shipped configuration and the configuration examples of the README and the
//! book. `check` and `run` agree on
//! every one of them (what `check` refuses, `run` refuses with the same message; what `check`
//! accepts, `run` serves), and every mode the book documents starts through the binary: memory
//! and Redis stores, sign-in on and off, TLS and mTLS listeners, several listeners, reload on
//! SIGHUP, SIGTERM and SIGKILL, and a registry as strict as Keyrock asked with the consumer's
//! assertion.

use crate::support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use support::process::{self, ChildProcess, GatewayProcess};
use support::shipped::{shipped_gateway, Urls};
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const BIN: &str = "binaries";

fn binary() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ishare-gateway"))
}

/// `ishare-gateway check --config FILE`: whether it passed, and what it printed.
fn check(config: &Path) -> (bool, String) {
    let out = binary()
        .args(["check", "--config", config.to_str().unwrap()])
        .output()
        .unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// Write `text` as `name` in a scratch directory; its path.
fn config_file(name: &str, text: &str) -> PathBuf {
    let path = scratch_dir(BIN).join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// 32 bytes of secret for the session cookies, in a file (the same for every instance).
fn session_secret() -> PathBuf {
    let path = scratch_dir(BIN).join("session.key");
    std::fs::write(
        &path,
        hex::encode(
            ring::rand::generate::<[u8; 32]>(&ring::rand::SystemRandom::new())
                .unwrap()
                .expose(),
        ),
    )
    .unwrap();
    path
}

/// The shipped configuration with the replay store (and so sessions) on Redis at `url`.
fn on_redis(text: &str, url: &str, secret: &Path) -> String {
    text.replace(
        "# session_secret_file = \"/etc/ishare-gateway/session.key\"",
        &format!("session_secret_file = \"{}\"", secret.display()),
    ) + &format!("\n[replay]\nstore = \"redis\"\nurl = \"{url}\"\n")
}

/// A configuration `check` accepts: `run` serves it until SIGTERM, then ends cleanly.
async fn accepted_and_served(name: &str, config: &Path, admin: u16) -> GatewayProcess {
    let (ok, report) = check(config);
    assert!(ok, "{name}: check refuses\n{report}");
    let mut gateway = GatewayProcess::start(name, config, admin);
    gateway.wait_ready().await;
    gateway
}

/// A fresh assertion of the consumer at `plain`: a token, then the same assertion refused as a
/// replay.
async fn accepted_once(bed: &Bed, plain: &str) {
    let once = bed
        .identity(CONSUMER)
        .client_assertion(SP, ishare_gateway::scheme::Timestamp::now())
        .unwrap();
    assert_eq!(token_with(plain, &once).await.0, 200);
    let (status, body) = token_with(plain, &once).await;
    assert_refused(status, &body, (400, "replayed_jti"));
}

/// A configuration `check` refuses: `run` exits non-zero, and every problem `check` names is in
/// what `run` says.
async fn refused_alike(name: &str, config: &Path) {
    let (ok, report) = check(config);
    assert!(!ok, "{name}: check accepts\n{report}");
    let mut command = binary();
    command.args(["run", "--config", config.to_str().unwrap()]);
    let mut run = ChildProcess::spawn(name, command);
    let status = run.wait_exit(Duration::from_secs(30)).await;
    assert!(!status.success(), "{name}: run accepts\n{}", run.tail());
    let said = run.output();
    let problems: Vec<&str> = report
        .lines()
        .filter(|l| l.contains(": ") && !l.starts_with("error: "))
        .collect();
    assert!(!problems.is_empty(), "{report}");
    for problem in problems {
        assert!(
            said.contains(problem),
            "{name}: run does not say {problem:?}\n{}",
            run.tail()
        );
    }
}

/// A fresh client assertion of the testbed consumer for the gateway, from the client command.
fn assertion(data: &Path) -> String {
    let out = binary()
        .args([
            "client",
            "--testbed",
            data.to_str().unwrap(),
            "--as",
            CONSUMER,
            "--raw",
            "assertion",
            "--audience",
            SP,
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// POST a token request with `assertion` to a gateway's plain listener: status and body.
async fn token_with(plain: &str, assertion: &str) -> (u16, Value) {
    let form: Vec<(String, String)> = [
        ("grant_type", "client_credentials"),
        ("scope", "iSHARE"),
        ("client_id", CONSUMER),
        (
            "client_assertion_type",
            "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
        ),
        ("client_assertion", assertion),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    status_json(request_token(&reqwest::Client::new(), plain, form).await).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_config_and_the_documented_examples_run_as_check_says() {
    let bed = Bed::start(BIN).await;
    let urls = Urls::of_bed(&bed);
    let data = bed.keys.data_dir.clone();

    // The shipped configuration: TLS and plain listeners, sign-in on, memory stores.
    let ports = Ports::free();
    let shipped = config_file("shipped.toml", &shipped_gateway(&data, &urls, &ports));
    let gateway = accepted_and_served("shipped", &shipped, ports.admin).await;
    let plain = format!("http://127.0.0.1:{}", ports.plain);
    let (status, body) = token_with(&plain, &assertion(&data)).await;
    assert_eq!(status, 200, "{body}");
    let (status, log) = gateway.terminate().await;
    assert!(status.success(), "SIGTERM ends it cleanly: {status}\n{log}");

    // The same on Redis, sessions and replays shared.
    let redis = RedisServer::start().await;
    let ports = Ports::free();
    let text = on_redis(
        &shipped_gateway(&data, &urls, &ports),
        &redis.url(),
        &session_secret(),
    );
    let config = config_file("redis.toml", &text);
    let mut gateway = accepted_and_served("redis", &config, ports.admin).await;
    let plain = format!("http://127.0.0.1:{}", ports.plain);
    let once = assertion(&data);
    assert_eq!(token_with(&plain, &once).await.0, 200);
    let (status, body) = token_with(&plain, &once).await;
    assert_eq!(status, 400, "a replay is refused: {body}");
    let generation = gateway.generation().await.unwrap();
    gateway.reload(generation).await;
    assert_eq!(token_with(&plain, &assertion(&data)).await.0, 200);
    gateway.process.signal(libc::SIGKILL);
    gateway.process.wait_exit(Duration::from_secs(10)).await;

    // Redis not there at start: the gateway runs, /ready says why, token requests fail closed.
    let port = redis.kill();
    let ports = Ports::free();
    let text = on_redis(
        &shipped_gateway(&data, &urls, &ports),
        &format!("redis://127.0.0.1:{port}/0"),
        &session_secret(),
    );
    let config = config_file("redis-down.toml", &text);
    let (ok, report) = check(&config);
    assert!(ok, "{report}");
    let mut gateway = GatewayProcess::start("redis-down", &config, ports.admin);
    let (status, body) = gateway.wait_ready_saying("replay store").await;
    assert_eq!(status, 503, "{body}");
    assert!(
        gateway.process.exited().is_none(),
        "{}",
        gateway.process.tail()
    );
    let plain = format!("http://127.0.0.1:{}", ports.plain);
    let (status, body) = token_with(&plain, &assertion(&data)).await;
    assert_refused(status, &body, (503, "replay_store_unavailable"));
    let (status, log) = gateway.terminate().await;
    assert!(status.success(), "{status}\n{log}");

    // The README's first example as written: its files are not here, and both say so alike.
    let readme = page("README.md");
    let example = page_block(&readme, "`gateway.toml`:\n\n", "```toml\n", "```");
    let dir = scratch_dir(BIN);
    std::fs::write(
        dir.join("policies/api.toml"),
        page_block(
            &readme,
            "and `policies/api.toml` next to it:\n\n",
            "```toml\n",
            "```",
        ),
    )
    .unwrap();
    let verbatim = dir.join("gateway.toml");
    std::fs::write(&verbatim, example).unwrap();
    refused_alike("readme-verbatim", &verbatim).await;

    // With its files given (and free ports), it runs; its scheme owner is not reachable here, so
    // /ready says 503, and the process keeps serving.
    let ports = Ports::free();
    let d = data.display();
    let given = example
        .replace(
            "/etc/ishare-gateway/key.pem",
            &format!("{d}/parties/{SP}.key.pem"),
        )
        .replace(
            "/etc/ishare-gateway/chain.pem",
            &format!("{d}/parties/{SP}.chain.pem"),
        )
        .replace(
            "/etc/ishare-gateway/tls.pem",
            &format!("{d}/tls/server.chain.pem"),
        )
        .replace(
            "/etc/ishare-gateway/tls.key",
            &format!("{d}/tls/server.key.pem"),
        )
        .replace("0.0.0.0:443", &format!("127.0.0.1:{}", ports.tls))
        + &format!("[admin]\naddress = \"127.0.0.1:{}\"\n", ports.admin);
    std::fs::write(&verbatim, given).unwrap();
    let (ok, report) = check(&verbatim);
    assert!(ok, "{report}");
    let mut gateway = GatewayProcess::start("readme-given", &verbatim, ports.admin);
    let answered = process::eventually(Duration::from_secs(30), || async {
        gateway.ready().await.is_some()
    })
    .await;
    assert!(answered, "{}", gateway.process.tail());
    assert!(
        gateway.process.exited().is_none(),
        "{}",
        gateway.process.tail()
    );
    let (status, log) = gateway.terminate().await;
    assert!(status.success(), "{status}\n{log}");

    // The sign-in example of the people guide on the shipped configuration with Redis.
    let people = page("docs/src/guides/people.md");
    let login = page_block(
        &people,
        "# People signing in",
        "```toml\n",
        "# policies/people.toml",
    );
    let redis = RedisServer::start().await;
    let ports = Ports::free();
    let shipped = shipped_gateway(&data, &urls, &ports);
    let without_login = shipped.split("\n[login]").next().unwrap();
    let secret = session_secret();
    let text = format!(
        "{without_login}\n{}\n[replay]\nstore = \"redis\"\nurl = \"{}\"\n",
        login
            .replace("https://idp.example", urls.of("EU.EORI.NL000000007"))
            .replace("/etc/ishare-gateway/session.key", secret.to_str().unwrap()),
        redis.url()
    );
    let config = config_file("people-login.toml", &text);
    let gateway = accepted_and_served("people-login", &config, ports.admin).await;
    let (status, log) = gateway.terminate().await;
    assert!(status.success(), "{status}\n{log}");

    // The fleet example of the guide to several instances: as written, its credentials file is not
    // here, and both say so; with the file and a Redis of ours, it serves.
    let instances = page("docs/src/guides/instances.md");
    let fleet = page_block(
        &instances,
        "**Deploying several instances.**",
        "```toml\n",
        "```",
    );
    let ports = Ports::free();
    let shipped = shipped_gateway(&data, &urls, &ports).replace(
        "# session_secret_file = \"/etc/ishare-gateway/session.key\"",
        &format!("session_secret_file = \"{}\"", secret.display()),
    );
    let config = config_file("instances-fleet.toml", &format!("{shipped}\n{fleet}"));
    refused_alike("instances-fleet-verbatim", &config).await;
    let credentials = scratch_dir(BIN).join("redis.credentials");
    std::fs::write(&credentials, "").unwrap();
    let given = fleet
        .replace("redis://10.0.0.7:6379/0", &redis.url())
        .replace(
            "/etc/ishare-gateway/redis.credentials",
            credentials.to_str().unwrap(),
        );
    std::fs::write(&config, format!("{shipped}\n{given}")).unwrap();
    refused_alike("instances-fleet-empty-credentials", &config).await;
    let port = free_port();
    let guarded = RedisServer::start_with(
        port,
        &[
            "--port",
            &port.to_string(),
            "--requirepass",
            "fleet-example-password",
        ],
    )
    .await;
    std::fs::write(&credentials, "fleet-example-password\n").unwrap();
    let given = fleet
        .replace("redis://10.0.0.7:6379/0", &guarded.url())
        .replace(
            "/etc/ishare-gateway/redis.credentials",
            credentials.to_str().unwrap(),
        );
    std::fs::write(&config, format!("{shipped}\n{given}")).unwrap();
    let gateway = accepted_and_served("instances-fleet", &config, ports.admin).await;
    let (status, log) = gateway.terminate().await;
    assert!(status.success(), "{status}\n{log}");
    bed.stop().await;
}

/// A TLS ClientHello with an IP address as its server name, which RFC 6066 does not allow and
/// rustls's client never sends: its hello for `localhost` with the name rewritten in place.
fn client_hello_with_ip_sni() -> Vec<u8> {
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(rustls::RootCertStore::empty())
    .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut client = rustls::ClientConnection::new(std::sync::Arc::new(config), name).unwrap();
    let mut hello = Vec::new();
    client.write_tls(&mut hello).unwrap();
    let at = hello
        .windows(9)
        .position(|w| w == b"localhost")
        .expect("the server name in the hello");
    hello[at..at + 9].copy_from_slice(b"127.0.0.1");
    hello
}

/// `ishare-gateway testbed` on conf/testbed.toml with every port free and its key material in a
/// directory of its own: the process and where each participant serves.
async fn testbed_binary() -> (ChildProcess, PathBuf, Urls) {
    testbed_binary_of(|text| text).await
}

/// `testbed_binary` with the text of its configuration changed by `edit`.
async fn testbed_binary_of(edit: impl FnOnce(String) -> String) -> (ChildProcess, PathBuf, Urls) {
    let dir = scratch_dir(BIN);
    shipped_on_free_ports(&dir);
    let data = dir.join("data");
    let config = dir.join("testbed.toml");
    std::fs::write(&config, edit(std::fs::read_to_string(&config).unwrap())).unwrap();
    let testbed = support::process::testbed_process(&config).await;
    // Its summary: one line per participant with its party id and URL, and the echo backend.
    let urls = testbed
        .output()
        .lines()
        .filter_map(|l| {
            let url = l.split_whitespace().find(|w| w.starts_with("http"))?;
            let who = if l.trim_start().starts_with("echo backend") {
                "echo"
            } else {
                l.split_whitespace().find(|w| w.contains(".EORI."))?
            };
            Some((who.to_string(), url.to_string()))
        })
        .collect();
    (testbed, data, Urls(urls))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binaries_run_the_scheme_on_tls_mtls_and_plain_listeners() {
    let (testbed, data, urls) = testbed_binary().await;
    let ports = Ports::free();
    let mtls = free_port();
    let d = data.display();
    // The shipped configuration (TLS and plain listeners), with the bounds and forwarding options
    // set, and a third listener that requires a client certificate from the testbed's CA.
    let text = shipped_gateway(&data, &urls, &ports)
        .replace(
            "[forwarding]\n",
            "[forwarding]\ntrusted_proxies = [\"127.0.0.2\"]\n",
        )
        .replace(
            "[server]\n",
            "[server]\nbody_deadline = \"20s\"\nbody_min_rate = 2048\nh2_max_streams = 50\n",
        )
        .replace(
            "[delegation]\n",
            "[delegation]\nregistry_calls_per_minute = 100\n",
        )
        + &format!(
            "\n[[listener]]\naddress = \"127.0.0.1:{mtls}\"\n[listener.tls]\ncertificate = \"{d}/tls/server.chain.pem\"\nkey = \"{d}/tls/server.key.pem\"\nclient_ca = \"{d}/ca.pem\"\nclient_auth = \"required\"\n"
        );
    let config = config_file("scheme.toml", &text);
    let gateway = accepted_and_served("scheme", &config, ports.admin).await;

    // A token from the TLS listener, by the client command as a consumer would get it.
    let tls = format!("https://127.0.0.1:{}", ports.tls);
    let out = binary()
        .args([
            "client",
            "--testbed",
            data.to_str().unwrap(),
            "--as",
            CONSUMER,
            "--raw",
            "token",
            "--url",
            &tls,
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let token = String::from_utf8(out.stdout).unwrap().trim().to_string();

    // Decided with the registry's evidence: the backend answers, told who the consumer is.
    let ca = reqwest::Certificate::from_pem_bundle(&std::fs::read(data.join("ca.pem")).unwrap())
        .unwrap();
    let http = reqwest::Client::builder()
        .tls_certs_only(ca.clone())
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let (status, body) = status_json(
        http.get(format!("{tls}/api/containers/C1"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["headers"]["x-consumer-party-id"], CONSUMER, "{body}");
    // X-Forwarded-For: what the gateway saw, appended to only for the trusted proxy (127.0.0.2).
    for (from, expected) in [
        ("127.0.0.1", "127.0.0.1"),
        ("127.0.0.2", "198.51.100.7, 127.0.0.2"),
    ] {
        let client = reqwest::Client::builder()
            .tls_certs_only(ca.clone())
            .local_address(from.parse::<std::net::IpAddr>().ok())
            .build()
            .unwrap();
        let (status, body) = status_json(
            client
                .get(format!("{tls}/api/containers/C1"))
                .bearer_auth(&token)
                .header("X-Forwarded-For", "198.51.100.7")
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(
            (status, body["headers"]["x-forwarded-for"].as_str()),
            (200, Some(expected)),
            "from {from}: {body}"
        );
    }

    // The mTLS listener: no client certificate, no handshake; with one, the same answer.
    let mutual = format!("https://127.0.0.1:{mtls}/api/containers/C1");
    let refused = http.get(&mutual).bearer_auth(&token).send().await;
    assert!(refused.is_err(), "{refused:?}");
    let key = std::fs::read_to_string(data.join(format!("parties/{CONSUMER}.key.pem"))).unwrap();
    let chain =
        std::fs::read_to_string(data.join(format!("parties/{CONSUMER}.chain.pem"))).unwrap();
    let with_cert = reqwest::Client::builder()
        .tls_certs_only(ca)
        .identity(reqwest::Identity::from_pem(format!("{key}{chain}").as_bytes()).unwrap())
        .build()
        .unwrap();
    let resp = with_cert
        .get(&mutual)
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);

    // A client naming the server by its IP address in SNI (as wrk and OpenSSL-based clients do)
    // is served, and writes nothing to the log: any client could write a line per connection.
    let mut raw = tokio::net::TcpStream::connect(("127.0.0.1", ports.tls))
        .await
        .unwrap();
    raw.write_all(&client_hello_with_ip_sni()).await.unwrap();
    let mut record_type = [0u8; 1];
    tokio::time::timeout(Duration::from_secs(10), raw.read_exact(&mut record_type))
        .await
        .expect("a server hello within 10 s")
        .unwrap();
    assert_eq!(record_type, [0x16], "a handshake record answers the hello");
    drop(raw);
    // Clients that go away in the middle of a request's head, or of its body, are not errors of
    // the gateway's to log either.
    let plain = format!("127.0.0.1:{}", ports.plain);
    for unfinished in [
        &b"GET /api/containers/C1 HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: "[..],
        b"GET /status HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\nab",
    ] {
        let mut raw = tokio::net::TcpStream::connect(&plain).await.unwrap();
        raw.write_all(unfinished).await.unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // A reload's line comes after anything those connections logged.
    let generation = gateway
        .generation()
        .await
        .expect("/ready names a generation");
    gateway.reload(generation).await;
    assert!(
        process::eventually(Duration::from_secs(10), || async {
            gateway.process.output().contains("configuration reloaded")
        })
        .await,
        "{}",
        gateway.process.tail()
    );
    let log = gateway.process.output();
    assert!(!log.contains("SNI"), "{log}");
    assert!(!log.contains("Downstream"), "{log}");

    // SIGKILL: gone at once, nothing left listening.
    let GatewayProcess { mut process, .. } = gateway;
    process.signal(libc::SIGKILL);
    let status = process.wait_exit(Duration::from_secs(10)).await;
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGKILL)
    );
    assert!(std::net::TcpStream::connect(("127.0.0.1", ports.plain)).is_err());
    drop(testbed);
}

/// A token of the testbed consumer from a gateway's plain listener, asked with a fresh assertion.
async fn consumer_token(plain: &str, data: &Path) -> String {
    let (status, body) = token_with(plain, &assertion(data)).await;
    assert_eq!(status, 200, "{body}");
    body["access_token"].as_str().unwrap().to_string()
}

/// `method` `path` at `base` with `token`: the status and the JSON body.
async fn with_token(method: reqwest::Method, base: &str, path: &str, token: &str) -> (u16, Value) {
    let request = reqwest::Client::new().request(method, format!("{base}{path}"));
    status_json(request.bearer_auth(token).send().await.unwrap()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binaries_get_permit_and_deny_from_a_strict_registry_with_the_consumers_assertion() {
    use reqwest::Method;
    // The testbed's registry as strict as Keyrock: no licences in a mask, a client assertion of
    // the consumer in previous_steps from a service provider.
    let registry = "serve = \"authorisation_registry\"\n";
    let (_testbed, data, urls) = testbed_binary_of(|text| {
        assert!(text.contains(registry), "{text}");
        text.replace(registry, &format!("{registry}strict = true\n"))
    })
    .await;
    let ports = Ports::free();
    let settings =
        "name = \"testbed-ar\"\nmask_licences = false\nprevious_steps = \"consumer_assertion\"";
    let text = shipped_gateway(&data, &urls, &ports).replace("name = \"testbed-ar\"", settings);
    assert!(text.contains(settings), "{text}");
    let config = config_file("strict.toml", &text);
    let gateway = accepted_and_served("strict", &config, ports.admin).await;
    let plain = format!("http://127.0.0.1:{}", ports.plain);
    let denied = |(status, body): (u16, Value)| {
        let said = format!(
            "the authorisation registry {AR} denies this request: the rule of its evidence is Deny"
        );
        assert_eq!(
            (
                status,
                body["reason"].as_str(),
                body["error_description"].as_str()
            ),
            (403, Some("denied_by_rule"), Some(said.as_str())),
            "{body}"
        );
    };

    // The consumer's token request leaves its assertion with the gateway, which brings it to the
    // registry: Permit, through to the backend, and Deny, said to be the registry's.
    let token = consumer_token(&plain, &data).await;
    let (status, body) = with_token(Method::GET, &plain, "/api/containers/C1", &token).await;
    assert_eq!(
        (status, body["headers"]["x-consumer-party-id"].as_str()),
        (200, Some(CONSUMER)),
        "{body}"
    );
    denied(with_token(Method::GET, &plain, "/api/containers/SECRET-1", &token).await);

    // Reloaded on SIGHUP, it asks the strict registry as before with a new token's assertion: a
    // container not asked yet, and an update, which the consumer's policy does not grant.
    let generation = gateway.generation().await.unwrap();
    gateway.reload(generation).await;
    let token = consumer_token(&plain, &data).await;
    let (status, body) = with_token(Method::GET, &plain, "/api/containers/C2", &token).await;
    assert_eq!(status, 200, "{body}");
    denied(with_token(Method::PUT, &plain, "/api/containers/C1", &token).await);

    let (status, log) = gateway.terminate().await;
    assert_eq!(status.code(), Some(0), "SIGTERM ends it cleanly\n{log}");
}

/// The binary on a Redis Cluster that speaks TLS only (to clients, between replicas and on its
/// bus), as an ACL user allowed the party's keys alone: started as `check` accepts it, one
/// assertion accepted once, its keys under the party's hash tag on one slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_cluster_over_tls_as_an_acl_user() {
    const PASSWORD: &str = "cluster-tls-test-password";
    let bed = Bed::start(BIN).await;
    // Each node's certificate is also its client certificate on the bus: one without an extended
    // key usage serves both.
    let pki = ishare_gateway::testbed::pki::TestPki::shared();
    let mut spec = ishare_gateway::testbed::pki::LeafSpec::tls_server(
        &["127.0.0.1"],
        time::OffsetDateTime::now_utc(),
    );
    spec.server_auth = false;
    let node = pki.issue(&spec).unwrap();
    let files = scratch_dir(BIN);
    let file = |name: &str, text: &str| {
        let path = files.join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let tls = TlsFiles {
        certificate: file("node.chain.pem", &node.chain_pem),
        key: file("node.key.pem", &node.key_pem),
        ca: file("ca.pem", pki.root_pem()),
    };
    let cluster = RedisCluster::start_with_tls(PASSWORD, SP, Some(&tls)).await;
    let dir = scratch_dir(BIN);
    let credentials = dir.join("redis.credentials");
    std::fs::write(&credentials, format!("gateway:{PASSWORD}\n")).unwrap();
    let extra = format!(
        "[replay]\nstore = \"redis\"\ncluster = {}\ntls = true\ncredentials_file = \"{}\"\nca_file = \"{}\"\n",
        cluster.toml_nodes(),
        credentials.display(),
        tls.ca
    );
    let (dir, ports) = gateway_dir(&bed, BIN, "", &extra, |t| t);
    let gateway =
        accepted_and_served("rediss-cluster", &dir.join("gateway.toml"), ports.admin).await;
    let plain = format!("http://127.0.0.1:{}", ports.plain);
    accepted_once(&bed, &plain).await;
    // The epoch, the latest acceptance and the jti: on the slot of the party's hash tag.
    let tag = format!("{{{SP}}}");
    let master = cluster.master_of(&tag).await;
    let slot = cluster
        .command(master, &["CLUSTER", "KEYSLOT", &tag])
        .await
        .unwrap();
    let held = cluster
        .command(master, &["CLUSTER", "COUNTKEYSINSLOT", &slot])
        .await
        .unwrap();
    assert_eq!(held, "3", "keys on slot {slot}");
    let (status, log) = gateway.terminate().await;
    assert_eq!(status.code(), Some(0), "{log}");
    assert!(!log.contains(PASSWORD), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_over_tls_with_an_acl_user_whose_password_is_in_a_file() {
    let bed = Bed::start(BIN).await;
    let d = bed.keys.data_dir.display().to_string();
    let port = free_port();
    let (tls_port, cert, key, ca) = (
        port.to_string(),
        format!("{d}/tls/server.chain.pem"),
        format!("{d}/tls/server.key.pem"),
        format!("{d}/ca.pem"),
    );
    let redis = RedisServer::start_with(
        port,
        &[
            "--port",
            "0",
            "--tls-port",
            &tls_port,
            "--tls-cert-file",
            &cert,
            "--tls-key-file",
            &key,
            "--tls-ca-cert-file",
            &ca,
            "--tls-auth-clients",
            "no",
            "--user",
            "default",
            "off",
            "--user",
            "gateway",
            "on",
            ">gateway-test-password",
            "~*",
            "&*",
            "+@all",
        ],
    )
    .await;
    let dir = scratch_dir(BIN);
    let credentials = dir.join("redis.credentials");
    std::fs::write(&credentials, "gateway:gateway-test-password\n").unwrap();
    let extra = format!(
        "[replay]\nstore = \"redis\"\nurl = \"rediss://127.0.0.1:{port}/0\"\ncredentials_file = \"{}\"\nca_file = \"{ca}\"\n",
        credentials.display()
    );
    let (dir, ports) = gateway_dir(&bed, BIN, "", &extra, |t| t);
    let config = dir.join("gateway.toml");
    let mut gateway = accepted_and_served("rediss", &config, ports.admin).await;
    let plain = format!("http://127.0.0.1:{}", ports.plain);
    accepted_once(&bed, &plain).await;

    // A wrong password: the store cannot answer, /ready says so, tokens fail closed; the password
    // never reaches the log.
    std::fs::write(&credentials, "gateway:not-the-password\n").unwrap();
    let generation = gateway.generation().await.unwrap();
    gateway.reload(generation).await;
    let (status, body) = gateway.wait_ready_saying("replay store").await;
    assert_eq!(status, 503, "{body}");
    let fresh = bed
        .identity(CONSUMER)
        .client_assertion(SP, ishare_gateway::scheme::Timestamp::now())
        .unwrap();
    let (status, body) = token_with(&plain, &fresh).await;
    assert_refused(status, &body, (503, "replay_store_unavailable"));
    let (_, log) = gateway.terminate().await;
    assert!(
        !log.contains("not-the-password") && !log.contains("gateway-test-password"),
        "{log}"
    );
    drop(redis);
    bed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_walks_through_the_scheme_with_its_stores_on_redis() {
    let dir = scratch_dir(BIN);
    shipped_on_free_ports(&dir);
    shipped_3_0_on_free_ports(&dir);
    let redis = RedisServer::start().await;
    let config = dir.join("gateway.toml");
    let text = on_redis(
        &std::fs::read_to_string(&config).unwrap(),
        &redis.url(),
        &session_secret(),
    );
    std::fs::write(&config, text).unwrap();
    let mut command = binary();
    command.args([
        "demo",
        "--testbed-config",
        dir.join("testbed.toml").to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
        "--testbed-3-0-config",
        dir.join("testbed-3.0.toml").to_str().unwrap(),
        "--config-3-0",
        dir.join("gateway-3.0.toml").to_str().unwrap(),
        "--egress-config",
        dir.join("egress.toml").to_str().unwrap(),
        "--exit",
    ]);
    let mut demo = ChildProcess::spawn("demo", command);
    let status = demo.wait_exit(Duration::from_secs(240)).await;
    assert!(status.success(), "{}", demo.tail());
    let out = demo.output();
    for said in [
        "← 200 OK: a Bearer token",
        "← 403 Forbidden",
        "the backend got GET /api/containers/C1 with X-Consumer-Party-Id: EU.EORI.NL000000001",
        "x-person-id: did:ishare:person.jane-doe",
        // The scheme of 3.0: a did consumer, the condition decided both ways, 3.0's header.
        "the backend got GET /api/containers/C1 with X-Consumer-Party-Id: did:ishare:EU.NL.NTRNL-10000001",
        "reason: condition_not_met",
        "in the delegationEvidence header",
        "the backend got GET /api/containers/C1/documents with X-Consumer-Party-Id: did:ishare:EU.NL.NTRNL-10000001",
        "/return",
        // The consumer's side: a plain client reaches the gateway as ABC Trucking.
        "The consumer's side: ABC Trucking's legacy client calls",
        "the backend got GET /api/containers/C1/documents with X-Consumer-Party-Id: EU.EORI.NL000000001",
    ] {
        assert!(out.contains(said), "{said:?} missing from:\n{out}");
    }
    assert_eq!(
        out.matches("x-person-id: did:ishare:person.jane-doe")
            .count(),
        2,
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_demo_whose_ports_are_taken_says_what_holds_them_before_it_starts_anything() {
    let dir = scratch_dir(BIN);
    shipped_on_free_ports(&dir);
    let testbed: toml::Table = std::fs::read_to_string(dir.join("testbed.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let gateway: toml::Table = std::fs::read_to_string(dir.join("gateway.toml"))
        .unwrap()
        .parse()
        .unwrap();
    // One of the testbed's ports held, then one of the gateway's: each run stops at once, naming
    // the address and what to do.
    let testbed_port = testbed["party"].as_array().unwrap()[0]["port"]
        .as_integer()
        .unwrap();
    let gateway_address = gateway["listener"].as_array().unwrap()[0]["address"]
        .as_str()
        .unwrap()
        .to_string();
    for held in [format!("127.0.0.1:{testbed_port}"), gateway_address] {
        let _holder = std::net::TcpListener::bind(&held).unwrap();
        let mut command = binary();
        command.args([
            "demo",
            "--testbed-config",
            dir.join("testbed.toml").to_str().unwrap(),
            "--config",
            dir.join("gateway.toml").to_str().unwrap(),
            "--exit",
        ]);
        let mut demo = ChildProcess::spawn("demo", command);
        let status = demo.wait_exit(Duration::from_secs(60)).await;
        let out = demo.output();
        assert!(!status.success(), "{out}");
        assert!(
            out.contains(&format!("cannot listen on {held}"))
                && out.contains("is a demo, a testbed or a gateway running already?"),
            "{out}"
        );
        assert!(!out.contains("Starting the testbed"), "{out}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheme_owner_whose_certificate_is_not_trusted_is_named_with_the_setting_that_fixes_it() {
    let bed = Bed::start(BIN).await;
    // The testbed's CA left out of [outbound]: only the platform's roots are trusted.
    let (dir, ports) = gateway_dir(&bed, BIN, "", "", |toml| {
        let outbound = format!(
            "[outbound]\nca_file = \"{}/ca.pem\"\n",
            bed.keys.data_dir.display()
        );
        assert!(toml.contains(&outbound));
        toml.replace(&outbound, "")
    });
    let mut gateway = GatewayProcess::start("untrusted", &dir.join("gateway.toml"), ports.admin);
    let (status, body) = gateway.wait_ready_saying("scheme owner").await;
    assert_eq!(status, 503, "{body}");
    let base = format!("http://127.0.0.1:{}", ports.plain);
    let (status, body) = status_json(
        request_token(
            &reqwest::Client::new(),
            &base,
            token_form(&bed.identity(CONSUMER), SP, None),
        )
        .await,
    )
    .await;
    assert_refused(status, &body, (503, "scheme_owner_unavailable"));
    let description = body["error_description"].as_str().unwrap_or_default();
    assert!(
        description.contains("does not trust the scheme owner's TLS certificate")
            && description.contains("[outbound] ca_file"),
        "{body}"
    );
    let log = gateway.process.output();
    assert!(
        log.contains("UnknownIssuer") && log.contains("set [outbound] ca_file to that CA"),
        "{log}"
    );
    bed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_refuses_a_method_field_in_a_body_with_a_decision_log_line() {
    let bed = Bed::start(BIN).await;
    let rules = "[[route]]\nname = \"forms\"\npath = \"/forms/{*rest}\"\nupstream = \"echo\"\nauth = \"public\"\n";
    let (dir, ports) = gateway_dir(&bed, BIN, rules, "", |t| t);
    let mut gateway = GatewayProcess::start("method-field", &dir.join("gateway.toml"), ports.admin);
    gateway.wait_ready().await;
    let url = format!("http://127.0.0.1:{}/forms/x", ports.plain);
    let post = |body: &'static str| {
        reqwest::Client::new()
            .post(&url)
            .header(
                "content-type",
                "application/x-www-form-urlencoded; charset=utf-8",
            )
            .body(body)
            .send()
    };
    let (status, body) = status_json(post("a=1&_METHOD=DELETE").await.unwrap()).await;
    assert_refused(status, &body, (400, "ambiguous_request"));
    let (status, echo) = status_json(post("a=1&method=DELETE").await.unwrap()).await;
    assert_eq!(
        (status, echo["method"].as_str(), echo["body"].as_str()),
        (200, Some("POST"), Some("a=1&method=DELETE")),
        "{echo}"
    );
    let logged = process::eventually(Duration::from_secs(5), || async {
        gateway.process.output().contains(
            "route=forms method=POST path=/forms/x client=\"-\" status=400 outcome=\"bad_request\" reason=\"ambiguous_request\"",
        )
    })
    .await;
    assert!(logged, "{}", gateway.process.output());
    bed.stop().await;
}
