//! The gateway's container image (the Containerfile) around the binary under test, under podman on
//! the host's network: the testbed in one container, generating its key material at start; the
//! gateway in another, as uid 10001 on a read-only root, its configuration and rules mounted
//! read-only. The demo's walk through against them — a token, a refusal without evidence, the
//! backend's answer with the registry's evidence — then the image's health check, a reload on
//! SIGHUP that serves new rules, and a stop (SIGTERM) that lets a request in flight finish.

use crate::support;

use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use support::container::{build_image, podman_output, Container};
use support::shipped::Urls;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const BIN: &str = "container";
const IMAGE: &str = "localhost/ishare-gateway:test";
/// The image's user.
const UID: u32 = 10001;
/// Where the containers see the configuration, the rules and the testbed's key material.
const ETC: &str = "/etc/ishare-gateway";
const DATA: &str = "/var/lib/ishare-gateway/testbed";

/// A route added by the reload, and one to a backend that answers after two seconds.
const ADDED: &str = "[[route]]\nname = \"added\"\npath = \"/api/added\"\nupstream = \"legacy\"\nauth = \"public\"\n";
const SLOW: &str =
    "[[route]]\nname = \"slow\"\npath = \"/slow\"\nupstream = \"slow\"\nauth = \"public\"\n";

/// `ishare-gateway client --testbed DATA --as CONSUMER --raw ARGS…` on the host: what it printed.
fn client(data: &Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_ishare-gateway"))
        .args(["client", "--testbed", data.to_str().unwrap()])
        .args(["--as", CONSUMER, "--raw"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "client {args:?}\n{}", printed(&out));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A backend that answers each request two seconds after its head arrived.
async fn slow_backend() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                tokio::time::sleep(Duration::from_secs(2)).await;
                let _ = stream
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 13\r\nconnection: close\r\n\r\n{\"slow\":true}")
                    .await;
            });
        }
    });
    port
}

/// Wait (bounded) until the container's output says `needle`; panics with its tail otherwise.
async fn wait_saying(container: &mut Container, needle: &str, within: Duration) {
    let deadline = Instant::now() + within;
    while !container.process.output().contains(needle) {
        if let Some(status) = container.process.exited() {
            panic!(
                "{} ended ({status})\n{}",
                container.name,
                container.process.tail()
            );
        }
        assert!(
            Instant::now() < deadline,
            "{} did not say {needle:?}\n{}",
            container.name,
            container.process.tail()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Wait (bounded) until /ready answers 200 with a generation after `after`: that generation.
async fn ready_after(gateway: &mut Container, admin: &str, after: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = gateway.process.exited() {
            panic!("the gateway ended ({status})\n{}", gateway.process.tail());
        }
        if let Ok(r) = reqwest::get(format!("{admin}/ready")).await {
            let status = r.status();
            let body: Value = r.json().await.unwrap_or_default();
            match body["config_generation"].as_u64() {
                Some(g) if status == 200 && g > after => return g,
                _ => {}
            }
        }
        assert!(
            Instant::now() < deadline,
            "not ready after generation {after}\n{}",
            gateway.process.tail()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `path` of the gateway with the token and headers: the status and the JSON body.
async fn get(plain: &str, path: &str, token: &str, headers: &[(&str, &str)]) -> (u16, Value) {
    let mut request = reqwest::Client::new()
        .get(format!("{plain}{path}"))
        .bearer_auth(token)
        .timeout(Duration::from_secs(20));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    status_json(request.send().await.unwrap()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_image_runs_the_testbed_and_the_gateway_through_the_demos_walk() {
    build_image(IMAGE);

    // The shipped testbed and gateway on free ports, their paths as the containers see them.
    let dir = scratch_dir(BIN);
    shipped_on_free_ports(&dir);
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::os::unix::fs::chown(&data, Some(UID), Some(UID)).unwrap();
    let host_data = data.display().to_string();
    let policies_json = repo().join("conf/testbed-policies.json");
    let testbed_toml = std::fs::read_to_string(dir.join("testbed.toml"))
        .unwrap()
        .replace(&host_data, DATA)
        .replace(
            &policies_json.display().to_string(),
            &format!("{ETC}/testbed-policies.json"),
        );
    std::fs::write(dir.join("testbed.toml"), testbed_toml).unwrap();

    let mut testbed = Container::run(
        "testbed",
        &[
            "-v",
            &format!("{host_data}:{DATA}"),
            "-v",
            &format!(
                "{}:{ETC}/testbed.toml:ro",
                dir.join("testbed.toml").display()
            ),
            "-v",
            &format!("{}:{ETC}/testbed-policies.json:ro", policies_json.display()),
        ],
        IMAGE,
        &["testbed", "--config", &format!("{ETC}/testbed.toml")],
    );
    // Key material is generated at the first start: bounded, generously for a debug build.
    wait_saying(&mut testbed, "Ctrl-C stops it.", Duration::from_secs(120)).await;
    let urls = Urls(
        testbed
            .process
            .output()
            .lines()
            .filter_map(|l| {
                let url = l.split_whitespace().find(|w| w.starts_with("http"))?;
                let who = l.split_whitespace().find(|w| w.contains(".EORI."))?;
                Some((who.to_string(), url.to_string()))
            })
            .collect(),
    );

    // The gateway's configuration and rules in one directory, mounted read-only.
    let etc = dir.join("etc");
    std::fs::create_dir_all(etc.join("policies")).unwrap();
    for entry in std::fs::read_dir(repo().join("policies")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|x| x == "toml") {
            std::fs::copy(&path, etc.join("policies").join(path.file_name().unwrap())).unwrap();
        }
    }
    std::fs::write(etc.join("policies/slow.toml"), SLOW).unwrap();
    let slow = slow_backend().await;
    let gateway_toml = std::fs::read_to_string(dir.join("gateway.toml")).unwrap();
    // Its `address` lines: the TLS listener, the plain one, the admin listener.
    let ports: Vec<u16> = gateway_toml
        .lines()
        .filter_map(|l| l.strip_prefix("address = \"127.0.0.1:"))
        .map(|p| p.trim_end_matches('"').parse().unwrap())
        .collect();
    let [_, plain_port, admin_port] = ports[..] else {
        panic!("three addresses in {gateway_toml}");
    };
    let rewritten =
        gateway_toml.replace(&host_data, DATA).replace(
            &format!("{:?}", repo().join("policies").display().to_string()),
            &format!("\"{ETC}/policies\""),
        ) + &format!("\n[[upstream]]\nname = \"slow\"\naddresses = [\"127.0.0.1:{slow}\"]\n");
    std::fs::write(etc.join("gateway.toml"), rewritten).unwrap();
    let admin = format!("http://127.0.0.1:{admin_port}");
    let plain = format!("http://127.0.0.1:{plain_port}");

    // The image's default command: `run --config /etc/ishare-gateway/gateway.toml`.
    let mut gateway = Container::run(
        "gateway",
        &[
            "--read-only",
            "-v",
            &format!("{}:{ETC}:ro", etc.display()),
            "-v",
            &format!("{host_data}:{DATA}:ro"),
            "--env",
            &format!("ISHARE_GATEWAY_ADMIN={admin}"),
        ],
        IMAGE,
        &[],
    );
    let generation = ready_after(&mut gateway, &admin, 0).await;
    let live = reqwest::get(format!("{admin}/live")).await.unwrap();
    assert_eq!(live.status(), 200);
    let (healthy, said) = podman_output(&["healthcheck", "run", &gateway.name]);
    assert!(healthy, "the image's health check: {said}");
    // The binary checks its own health: no HTTP tool in the image.
    for tool in ["curl", "wget"] {
        let (found, _) = podman_output(&[
            "exec",
            &gateway.name,
            "sh",
            "-c",
            &format!("command -v {tool}"),
        ]);
        assert!(!found, "the image carries {tool}");
    }
    let (_, uid) = podman_output(&["exec", &gateway.name, "id", "-u"]);
    assert_eq!(uid.trim(), UID.to_string());
    let (written, said) = podman_output(&["exec", &gateway.name, "touch", &format!("{ETC}/x")]);
    assert!(!written, "the configuration is writable: {said}");

    // The walk: ABC Trucking's token, a refusal without evidence, the backend with evidence.
    let token = client(&data, &["token", "--url", &plain]);
    let documents = "/api/containers/C1/documents";
    let (status, body) = get(&plain, documents, &token, &[]).await;
    assert_refused(status, &body, (403, "no_evidence"));
    let mask = format!(
        "evidence --registry {} --issuer {OWNER} --type CONTAINER --id C1 --attribute DOCUMENTS \
         --action iSHARE.READ --service-provider {SP}",
        urls.of(AR)
    );
    let evidence = client(&data, &mask.split_whitespace().collect::<Vec<_>>());
    let (status, body) = get(
        &plain,
        documents,
        &token,
        &[("delegation_evidence", &evidence)],
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["headers"]["x-consumer-party-id"], CONSUMER, "{body}");

    // SIGHUP to the container: the rules written meanwhile are served.
    let (status, _) = get(&plain, "/api/added", &token, &[]).await;
    assert_eq!(status, 404);
    std::fs::write(etc.join("policies/added.toml"), ADDED).unwrap();
    gateway.signal("HUP");
    ready_after(&mut gateway, &admin, generation).await;
    let (status, body) = get(&plain, "/api/added", &token, &[]).await;
    assert_eq!(status, 200, "{body}");

    // `podman stop`: SIGTERM; the request in flight is answered within the grace period (5 s, as
    // shipped), then the container ends cleanly.
    let in_flight = {
        let plain = plain.clone();
        tokio::spawn(async move { get(&plain, "/slow", "-", &[]).await })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let name = gateway.name.clone();
    let stop = tokio::task::spawn_blocking(move || podman_output(&["stop", "--time", "30", &name]));
    let (status, body) = in_flight.await.unwrap();
    assert_eq!(
        (status, body["slow"].as_bool()),
        (200, Some(true)),
        "{body}"
    );
    let (stopped, said) = stop.await.unwrap();
    assert!(stopped, "podman stop: {said}");
    let exit = gateway.process.wait_exit(Duration::from_secs(30)).await;
    assert_eq!(exit.code(), Some(0), "{}", gateway.process.tail());
    assert!(std::net::TcpStream::connect(("127.0.0.1", plain_port)).is_err());

    drop(testbed);
    let _ = std::fs::remove_dir_all(&dir);
}
