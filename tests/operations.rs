//! Operations with the real binary: reloads on SIGHUP under load lose no request, a broken
//! configuration is refused and the running one kept, and TLS certificates rotate on reload.

use crate::support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::process::{self, GatewayProcess};
use support::*;

const BIN: &str = "operations";

const RULES: &str = r#"
[[route]]
name = "mine"
path = "/api/mine/{*rest}"
upstream = "echo"
"#;

const EXTRA_ROUTE: &str = r#"
[[route]]
name = "extra"
path = "/api/extra"
upstream = "echo"
auth = "public"
"#;

/// Send SIGHUP to a configuration that is refused: wait (bounded) until the log says so.
async fn refused_reload(gateway: &GatewayProcess) {
    let before = gateway.process.output().matches("reload refused").count();
    gateway.process.signal(libc::SIGHUP);
    let refused = process::eventually(Duration::from_secs(10), || async {
        gateway.process.output().matches("reload refused").count() > before
    })
    .await;
    assert!(refused, "no refusal logged\n{}", gateway.process.tail());
}

/// The testbed in-process and a gateway configuration for the binary in a scratch directory.
async fn setup(extra: &str) -> (Bed, std::path::PathBuf, Ports) {
    let bed = Bed::start(BIN).await;
    let (dir, ports) = gateway_dir(&bed, BIN, RULES, extra, |t| t);
    (bed, dir, ports)
}

async fn token(bed: &Bed, plain: &str) -> String {
    access_token(&reqwest::Client::new(), plain, &bed.identity(CONSUMER)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_reloads_under_load_lose_no_request_and_a_broken_config_is_refused() {
    let (bed, dir, ports) = setup("").await;
    let mut gateway = GatewayProcess::start(BIN, &dir.join("gateway.toml"), ports.admin);
    let mut generation = gateway.wait_ready().await;
    let plain = format!("http://127.0.0.1:{}", ports.plain);
    let token = token(&bed, &plain).await;

    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (ok, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let mut load = Vec::new();
    for _ in 0..4 {
        let (stop, ok, failed, token, plain) = (
            stop.clone(),
            ok.clone(),
            failed.clone(),
            token.clone(),
            plain.clone(),
        );
        // Each worker keeps its connection alive across the reloads.
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(1)
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap();
        load.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                match client
                    .get(format!("{plain}/api/mine/x"))
                    .bearer_auth(&token)
                    .send()
                    .await
                {
                    Ok(r) if r.status() == 200 => ok.fetch_add(1, Ordering::Relaxed),
                    _ => failed.fetch_add(1, Ordering::Relaxed),
                };
            }
        }));
    }
    for i in 0..10 {
        // Alternate the rules: the new ones take effect with the reload.
        let rules = if i % 2 == 0 {
            format!("{RULES}{EXTRA_ROUTE}")
        } else {
            RULES.to_string()
        };
        std::fs::write(dir.join("policies/rules.toml"), rules).unwrap();
        generation = gateway.reload(generation).await;
        let extra = reqwest::get(format!("{plain}/api/extra"))
            .await
            .unwrap()
            .status();
        assert_eq!(
            extra,
            if i % 2 == 0 { 200 } else { 404 },
            "reload {i} applied the rules"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A broken configuration: refused, the running one stays.
    let good = std::fs::read_to_string(dir.join("gateway.toml")).unwrap();
    std::fs::write(
        dir.join("gateway.toml"),
        good.replace("[admin]", "[admin]\nbogus = 1"),
    )
    .unwrap();
    refused_reload(&gateway).await;
    assert_eq!(
        gateway.generation().await,
        Some(generation),
        "the broken configuration was not taken"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, Ordering::Relaxed);
    for l in load {
        l.await.unwrap();
    }
    let (ok, failed) = (ok.load(Ordering::Relaxed), failed.load(Ordering::Relaxed));
    assert_eq!(
        failed,
        0,
        "{failed} of {} requests failed across the reloads",
        ok + failed
    );
    assert!(ok > 50, "the load ran: {ok} requests");
    let (_, log) = gateway.terminate().await;
    assert_eq!(log.matches("configuration reloaded").count(), 10, "{log}");
    assert!(
        log.contains("reload refused") && log.contains("admin.bogus"),
        "{log}"
    );
    let _ = std::fs::remove_dir_all(dir);
    bed.stop().await;
}

/// The certificate the server presents to a new client (no pooled connection, no resumed session).
async fn peer_certificate(ca: &std::path::Path, url: &str) -> Vec<u8> {
    let resp = client_trusting_tls_info(ca).get(url).send().await.unwrap();
    resp.extensions()
        .get::<reqwest::tls::TlsInfo>()
        .and_then(|i| i.peer_certificate())
        .expect("the TLS peer certificate")
        .to_vec()
}

fn client_trusting_tls_info(ca: &std::path::Path) -> reqwest::Client {
    reqwest::Client::builder()
        .tls_certs_only(reqwest::Certificate::from_pem_bundle(&std::fs::read(ca).unwrap()).unwrap())
        .tls_info(true)
        .pool_max_idle_per_host(0)
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_certificates_rotate_on_reload_without_a_restart() {
    let (bed, dir, ports) = setup("").await;
    // The listener's certificate and key live in the scratch directory, to be replaced.
    let first = bed
        .keys
        .pki
        .issue_tls_server(&["127.0.0.1", "localhost"])
        .unwrap();
    std::fs::write(dir.join("tls.pem"), &first.chain_pem).unwrap();
    std::fs::write(dir.join("tls.key"), &first.key_pem).unwrap();
    let data = bed.keys.data_dir.display().to_string();
    let config = std::fs::read_to_string(dir.join("gateway.toml"))
        .unwrap()
        .replace(
            &format!("{data}/tls/server.chain.pem"),
            dir.join("tls.pem").to_str().unwrap(),
        )
        .replace(
            &format!("{data}/tls/server.key.pem"),
            dir.join("tls.key").to_str().unwrap(),
        );
    std::fs::write(dir.join("gateway.toml"), config).unwrap();
    let mut gateway = GatewayProcess::start(BIN, &dir.join("gateway.toml"), ports.admin);
    let generation = gateway.wait_ready().await;
    let url = format!("https://127.0.0.1:{}/capabilities", ports.tls);
    let ca = bed.keys.ca_file.clone();
    assert_eq!(peer_certificate(&ca, &url).await, first.chain_der[0]);

    // The new pair is ECDSA P-256 (the Operations guide: ECDSA certificates): served as the RSA one was.
    let second = bed
        .keys
        .pki
        .issue_tls_server_ecdsa(&["127.0.0.1", "localhost"])
        .unwrap();
    std::fs::write(dir.join("tls.pem"), &second.chain_pem).unwrap();
    std::fs::write(dir.join("tls.key"), &second.key_pem).unwrap();
    let after = gateway.reload(generation).await;
    assert!(after > generation);
    assert_eq!(
        peer_certificate(&ca, &url).await,
        second.chain_der[0],
        "new connections get the new certificate"
    );

    // A key that does not match its certificate is refused; the rotated certificate stays.
    std::fs::write(dir.join("tls.key"), &first.key_pem).unwrap();
    refused_reload(&gateway).await;
    assert_eq!(gateway.generation().await, Some(after));
    assert_eq!(peer_certificate(&ca, &url).await, second.chain_der[0]);
    let (_, log) = gateway.terminate().await;
    assert!(log.contains("reload refused"), "{log}");
    let _ = std::fs::remove_dir_all(dir);
    bed.stop().await;
}
