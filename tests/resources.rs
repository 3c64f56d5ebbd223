//! Everything a stranger can make the gateway hold has a bound: connections per listener, idle
//! keep-alive connections, drip-fed headers, look-ups of parties nobody knows, x5c chains, and the
//! size of what is logged.

use crate::support;

use serde_json::Value;
use std::time::{Duration, Instant};
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const BIN: &str = "resources";

const RULES: &str = r#"
[[route]]
name = "status"
path = "/status"
upstream = "echo"
auth = "public"

[[route]]
name = "mine"
path = "/api/mine/{*rest}"
upstream = "echo"

[[route]]
name = "dead"
path = "/dead"
upstream = "dead"
auth = "public"

[[route]]
name = "by-owner"
methods = ["GET"]
path = "/api/owned/{id}"
upstream = "echo"
[route.delegation]
policy_issuer = "{header.X-Data-Owner}"
caller_names_owner = true
resource_type = "CONTAINER"
identifiers = ["{path.id}"]

[[route]]
name = "containers"
methods = ["GET"]
path = "/api/containers/{id}"
upstream = "echo"
[route.delegation]
policy_issuer = "EU.EORI.NL000000005"
resource_type = "CONTAINER"
identifiers = ["{path.id}"]
"#;

const LIMITS: &str = r#"
[[upstream]]
name = "dead"
addresses = ["127.0.0.1:1"]
"#;

/// Start a gateway whose `[server]` and listeners are edited by `edit`.
async fn env_with(edit: impl FnOnce(String) -> String) -> Env {
    let bed = Bed::start(BIN).await;
    let (dir, ports) = gateway_dir(&bed, BIN, RULES, LIMITS, edit);
    let env = Env {
        url: format!("https://127.0.0.1:{}", ports.tls),
        plain: format!("http://127.0.0.1:{}", ports.plain),
        admin: format!("http://127.0.0.1:{}", ports.admin),
        gateway: Some(launch(&dir)),
        bed,
        dir,
    };
    env.wait_ready().await;
    env
}

/// Whether the peer closes `stream` within `within` (reading and discarding what it sends).
async fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => continue,
            Err(_) => return false,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_drip_fed_connections_are_closed_on_time() {
    let env = env_with(|t| {
        t.replace(
            "[server]",
            "[server]\nkeepalive_timeout = \"1s\"\nheader_timeout = \"1s\"",
        )
    })
    .await;
    let addr = env.plain.trim_start_matches("http://").to_string();
    // Connected and silent.
    let mut silent = TcpStream::connect(&addr).await.unwrap();
    assert!(closed_within(&mut silent, Duration::from_secs(4)).await);
    // Idle after a first request on a kept-alive connection.
    let mut kept = TcpStream::connect(&addr).await.unwrap();
    kept.write_all(format!("GET /status HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut first = [0u8; 1024];
    let n = kept.read(&mut first).await.unwrap();
    assert!(String::from_utf8_lossy(&first[..n]).starts_with("HTTP/1.1 200"));
    assert!(closed_within(&mut kept, Duration::from_secs(4)).await);
    // A header drip-fed a byte every 200 ms (it would take 16 s) is cut after the header timeout.
    let mut drip = TcpStream::connect(&addr).await.unwrap();
    let started = Instant::now();
    let request = format!(
        "GET /status HTTP/1.1\r\nHost: {addr}\r\nX-Slow: {}\r\n\r\n",
        "a".repeat(40)
    );
    let mut cut = false;
    for byte in request.as_bytes() {
        if drip.write_all(&[*byte]).await.is_err() {
            cut = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        if started.elapsed() > Duration::from_secs(6) {
            break;
        }
    }
    assert!(
        cut || closed_within(&mut drip, Duration::from_millis(100)).await,
        "the drip-fed header was still open after {:?}",
        started.elapsed()
    );
    assert!(started.elapsed() < Duration::from_secs(6));
    let m = env.metrics().await;
    assert!(
        metric(
            &m,
            "ishare_gateway_connections_closed_total",
            &[("reason", "idle_timeout")]
        ) >= 2.0
    );
    assert!(
        metric(
            &m,
            "ishare_gateway_connections_closed_total",
            &[("reason", "header_timeout")]
        ) >= 1.0
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_holds_no_more_connections_than_its_limit() {
    let env = env_with(|t| {
        t.replacen(
            "[[listener]]\naddress = \"127.0.0.1:",
            "[[listener]]\nmax_connections = 3\naddress = \"127.0.0.1:",
            2,
        )
    })
    .await;
    let addr = env.plain.trim_start_matches("http://").to_string();
    // The readiness probes' connections are gone first.
    for _ in 0..100 {
        let m = env.metrics().await;
        if metric(&m, "ishare_gateway_connections", &[("listener", &addr)]) == 0.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut held = Vec::new();
    for _ in 0..3 {
        let mut s = TcpStream::connect(&addr).await.unwrap();
        s.write_all(format!("GET /status HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut buf = [0u8; 1024];
        assert!(s.read(&mut buf).await.unwrap() > 0);
        held.push(s);
    }
    // The fourth is closed at once; the admin listener still answers.
    let mut fourth = TcpStream::connect(&addr).await.unwrap();
    assert!(closed_within(&mut fourth, Duration::from_secs(2)).await);
    let ready = reqwest::get(format!("{}/ready", env.admin)).await.unwrap();
    assert_eq!(ready.status(), 200);
    let m = env.metrics().await;
    assert_eq!(
        metric(
            &m,
            "ishare_gateway_connections_closed_total",
            &[("reason", "limit")]
        ),
        1.0
    );
    assert_eq!(
        metric(&m, "ishare_gateway_connections", &[("listener", &addr)]),
        3.0
    );
    // As connections end, room is made.
    drop(held.pop());
    let mut again = None;
    for _ in 0..50 {
        let mut s = TcpStream::connect(&addr).await.unwrap();
        s.write_all(
            format!("GET /status HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .unwrap();
        let mut answer = String::new();
        let _ = tokio::time::timeout(Duration::from_secs(2), s.read_to_string(&mut answer)).await;
        if answer.starts_with("HTTP/1.1 200") {
            again = Some(answer);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(again.is_some(), "a connection was accepted again");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strangers_cannot_make_the_gateway_look_up_parties_or_chains_without_bound() {
    let env = env_with(|t| t).await;
    let token = env.token(CONSUMER).await;
    let mut statuses = Vec::new();
    for i in 0..40 {
        let resp = env
            .bed
            .http
            .get(format!("{}/api/owned/C1", env.url))
            .bearer_auth(&token)
            .header("X-Data-Owner", format!("EU.EORI.NL9{i:08}"))
            .send()
            .await
            .unwrap();
        let (status, body) = status_json(resp).await;
        statuses.push((
            status,
            body["reason"].as_str().unwrap_or_default().to_string(),
        ));
    }
    assert!(
        statuses[..30]
            .iter()
            .all(|(s, r)| *s == 403 && r == "data_owner_unknown"),
        "{statuses:?}"
    );
    assert!(
        statuses[30..]
            .iter()
            .all(|(s, r)| *s == 429 && r == "too_many_new_owners"),
        "{statuses:?}"
    );
    let m = env.metrics().await;
    let calls = metric(
        &m,
        "ishare_gateway_scheme_owner_calls_total",
        &[("endpoint", "parties")],
    );
    assert!(calls <= 31.0, "{calls} party searches");
    // An unknown owner named again is answered from the cache of unknown parties.
    let resp = env
        .bed
        .http
        .get(format!("{}/api/owned/C1", env.url))
        .bearer_auth(&token)
        .header("X-Data-Owner", "EU.EORI.NL900000000")
        .send()
        .await
        .unwrap();
    assert_eq!(status_json(resp).await.1["reason"], "data_owner_unknown");
    // A long chain is refused before any signature is checked.
    let creds = env.bed.creds(CONSUMER).clone();
    let (mut header, claims) = assertion_parts(&creds, SP);
    let x5c = header["x5c"].as_array().unwrap().clone();
    let mut long = vec![x5c[0].clone()];
    long.extend(std::iter::repeat_n(x5c[1].clone(), 12));
    long.push(x5c[2].clone());
    header["x5c"] = Value::Array(long);
    let assertion = forge(&header, &claims, &creds.key_pem);
    let (status, body) = status_json(
        env.token_response(&env.bed.identity(CONSUMER), Some(assertion))
            .await,
    )
    .await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (400, Some("certificate_chain_too_long"))
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_causes_no_more_registry_calls_than_its_budget() {
    let env = env_with(|t| format!("{t}\n[delegation]\nregistry_calls_per_minute = 5\n")).await;
    let token = env.token(CONSUMER).await;
    let get = |id: String| {
        env.bed
            .http
            .get(format!("{}/api/containers/{id}", env.url))
            .bearer_auth(&token)
            .send()
    };
    for i in 0..5 {
        let (status, body) = status_json(get(format!("C{i}")).await.unwrap()).await;
        assert_eq!(status, 200, "C{i}: {body}");
    }
    let resp = get("C5".into()).await.unwrap();
    let retry_after: u64 = resp.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=12).contains(&retry_after), "{retry_after}");
    let (status, body) = status_json(resp).await;
    assert_refused(status, &body, (429, "too_many_registry_calls"));
    // What is decided already costs nothing.
    let (status, _) = status_json(get("C0".into()).await.unwrap()).await;
    assert_eq!(status, 200);
    let m = env.metrics().await;
    assert_eq!(
        metric(
            &m,
            "ishare_gateway_budget_exhausted_total",
            &[("budget", "registry_calls")]
        ),
        1.0
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_lines_are_bounded_and_never_hold_a_query() {
    let env = env_with(|t| t).await;
    let (dir, ports) = gateway_dir(
        &env.bed,
        BIN,
        RULES,
        &format!("{LIMITS}[log]\nformat = \"json\"\n"),
        |t| t,
    );
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_ishare-gateway"))
        .args([
            "run",
            "--config",
            dir.join("gateway.toml").to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let plain = format!("http://127.0.0.1:{}", ports.plain);
    let mut up = false;
    for _ in 0..200 {
        if reqwest::get(format!("http://127.0.0.1:{}/ready", ports.admin))
            .await
            .is_ok_and(|r| r.status() == 200)
        {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(up, "the gateway process became ready");
    let http = reqwest::Client::new();
    let long = format!(
        "{plain}/api/mine/{}?access_token=SECRETQUERY1",
        "p".repeat(60_000)
    );
    let status = http.get(long).send().await.unwrap().status();
    assert_eq!(status, 401);
    let status = http
        .get(format!("{plain}/dead?access_token=SECRETQUERY2"))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 502);
    let status = http
        .get(format!("{plain}/bad%zzpath?access_token=SECRETQUERY3"))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 400);
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let output = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        !log.contains("SECRETQUERY"),
        "a query reached the log:\n{log}"
    );
    let longest = log.lines().map(str::len).max().unwrap_or(0);
    assert!(longest < 2048, "a log line of {longest} bytes");
    let access: Vec<Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["target"] == "access")
        .collect();
    assert_eq!(access.len(), 3, "{log}");
    assert!(access[0]["path"].as_str().unwrap().ends_with('…'));
    let _ = std::fs::remove_dir_all(dir);
    env.stop().await;
}

/// `[server]` with a short body deadline.
fn short_body_deadline(toml: String) -> String {
    toml.replace(
        "[server]",
        "[server]\nbody_deadline = \"2s\"\nbody_min_rate = 1000",
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dripped_bodies_are_cut_off_at_their_deadline_and_steady_ones_are_not() {
    let env = env_with(short_body_deadline).await;
    let addr = env.plain.trim_start_matches("http://").to_string();
    // The token endpoint reads its body itself; /status forwards it to the backend.
    for path in ["/connect/token", "/status"] {
        let mut drip = TcpStream::connect(&addr).await.unwrap();
        let started = Instant::now();
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\n"
        );
        drip.write_all(head.as_bytes()).await.unwrap();
        // A byte every 300 ms: the whole body would take 30 s.
        let mut cut = false;
        while !cut && started.elapsed() < Duration::from_secs(10) {
            cut = drip.write_all(b"a").await.is_err()
                || closed_within(&mut drip, Duration::from_millis(300)).await;
        }
        let took = started.elapsed();
        assert!(
            cut,
            "{path}: the dripped body was still read after {took:?}"
        );
        assert!(
            (Duration::from_millis(1800)..Duration::from_secs(5)).contains(&took),
            "{path}: cut after {took:?}, the deadline being 2 s"
        );
    }
    // A body that arrives at the minimum rate earns its time, past the deadline.
    let mut steady = TcpStream::connect(&addr).await.unwrap();
    let body = vec![b'a'; 4000];
    steady
        .write_all(
            format!(
                "POST /status HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    for part in body.chunks(1000) {
        steady.write_all(part).await.unwrap();
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(5), steady.read_to_string(&mut answer))
        .await
        .unwrap()
        .unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(raw_body(&answer)["body_length"], 4000);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_streams_count_against_their_listener_and_dripped_ones_end() {
    let env = env_with(|t| {
        short_body_deadline(t).replacen(
            "[[listener]]\naddress = \"127.0.0.1:",
            "[[listener]]\nmax_connections = 4\naddress = \"127.0.0.1:",
            2,
        )
    })
    .await;
    let client = h2_client(&env.bed.keys.ca_file);
    // One connection first, so that every stream below shares it.
    let resp = client
        .get(format!("{}/status", env.url))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.version(), reqwest::Version::HTTP_2);
    let started = Instant::now();
    let mut streams = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let drip = futures::stream::unfold(0, |sent| async move {
            if sent == 100 {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
            Some((
                Ok::<_, std::io::Error>(bytes::Bytes::from_static(b"a")),
                sent + 1,
            ))
        });
        let request = client
            .post(format!("{}/status", env.url))
            .body(reqwest::Body::wrap_stream(drip));
        streams.spawn(async move {
            match request.send().await {
                Ok(resp) => {
                    let (status, body) = status_json(resp).await;
                    format!("{status} {}", body["reason"].as_str().unwrap_or("-"))
                }
                Err(_) => "reset".to_string(),
            }
        });
    }
    let ended = tokio::time::timeout(Duration::from_secs(10), streams.join_all())
        .await
        .expect("every stream ends: refused, or cut off at the body deadline");
    let full = ended.iter().filter(|e| *e == "503 listener_full").count();
    // The connection holds one permit of four: three streams at most are served at once.
    assert!(full >= 5, "{ended:?}");
    assert!(
        ended
            .iter()
            .all(|e| e == "503 listener_full" || !e.starts_with("200")),
        "a dripped body was read to its end: {ended:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(8));
    let m = env.metrics().await;
    assert!(
        metric(
            &m,
            "ishare_gateway_connections_closed_total",
            &[("reason", "stream_limit")]
        ) >= 5.0
    );
    // A stream that sends no body at all is not held beyond the deadline either (HTTP/2 reads
    // have no timeout of their own): its connection is closed.
    let silent = h2_client(&env.bed.keys.ca_file);
    let started = Instant::now();
    let never = futures::stream::pending::<Result<bytes::Bytes, std::io::Error>>();
    let outcome = tokio::time::timeout(
        Duration::from_secs(8),
        silent
            .post(format!("{}/status", env.url))
            .body(reqwest::Body::wrap_stream(never))
            .send(),
    )
    .await
    .expect("the silent stream ends");
    assert!(outcome.is_err(), "{outcome:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let m = env.metrics().await;
    assert!(
        metric(
            &m,
            "ishare_gateway_connections_closed_total",
            &[("reason", "body_timeout")]
        ) >= 1.0
    );
    // The permits are back: the listener serves again.
    let (status, _) = status_json(
        client
            .get(format!("{}/status", env.url))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_body_refused_before_it_is_read_still_gets_its_answer() {
    let env = env_with(|t| t).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("body");
    std::fs::write(&file, vec![b'a'; 1 << 20]).unwrap();
    let data = format!("@{}", file.display());
    let ca = env.bed.keys.ca_file.display().to_string();
    let token_url = |base: &str| format!("{base}/connect/token");
    let plain = token_url(&env.plain);
    let tls = token_url(&env.url);
    for (version, url) in [("--http1.1", &plain), ("--http2", &tls)] {
        for round in 0..20 {
            let out = std::process::Command::new("curl")
                .args(["-sS", version, "--cacert", &ca, "--max-time", "10"])
                .args(["-H", "Content-Type: application/x-www-form-urlencoded"])
                .args(["--data-binary", &data, "-w", "\n%{http_code}", url])
                .output()
                .expect("curl (make test installs it)");
            let text = String::from_utf8_lossy(&out.stdout);
            let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
            assert_eq!(
                code,
                "413",
                "{version} round {round}: {text} {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let body: Value = serde_json::from_str(body).unwrap_or(Value::Null);
            assert_eq!(body["reason"], "body_too_large", "{version} round {round}");
        }
    }
    env.stop().await;
}
