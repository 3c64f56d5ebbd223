//! Several gateway binaries on one Redis behind HAProxy, and the faults a fleet meets: Redis killed
//! and back under load (and back empty), an instance killed under load, reloads of every instance
//! in turn under load, and one client assertion presented to both instances at once; a policy
//! withdrawn at the registry, and the purge at one instance that makes every instance ask again
//! (also with Redis down), and a route's bound on how long a decision is cached; the consumer's
//! consent a registry wants, kept on Redis by one instance and forwarded by the other; and the
//! fleet on a Redis Cluster, through the death of the master that holds its keys.

use crate::support;

use std::time::{Duration, Instant};
use support::fleet::{Fleet, Load};
use support::process::eventually;
use support::*;

const BIN: &str = "fleet";

const RULES: &str = r#"
[[route]]
name = "mine"
path = "/api/mine/{*rest}"
upstream = "echo"
"#;

/// A token of the consumer from the instance at `base`.
async fn token(bed: &Bed, base: &str) -> String {
    access_token(&reqwest::Client::new(), base, &bed.identity(CONSUMER)).await
}

/// A load of GETs through the balancer with a bearer token.
fn gets(fleet: &Fleet, token: &str, workers: usize) -> Load {
    let (url, token) = (format!("{}/api/mine/x", fleet.url), token.to_string());
    Load::start(workers, move |c| c.get(&url).bearer_auth(&token))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_and_replays_are_shared_and_one_assertion_is_accepted_once_across_instances() {
    let bed = Bed::start(BIN).await;
    let fleet = Fleet::start(&bed, BIN, RULES, 2).await;
    let (a, b) = (fleet.instances[0].plain(), fleet.instances[1].plain());

    // A token from A is good at B.
    let from_a = token(&bed, &a).await;
    let resp = reqwest::Client::new()
        .get(format!("{b}/api/mine/x"))
        .bearer_auth(&from_a)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);

    // One assertion, 200 times at once, half at each instance: exactly one token.
    let assertion = bed
        .identity(CONSUMER)
        .client_assertion(SP, ishare_gateway::scheme::Timestamp::now())
        .unwrap();
    let http = reqwest::Client::new();
    let tries: Vec<_> = (0..200)
        .map(|i| {
            let base = if i % 2 == 0 { a.clone() } else { b.clone() };
            let form = token_form(&bed.identity(CONSUMER), SP, Some(assertion.clone()));
            let http = http.clone();
            tokio::spawn(async move { status_json(request_token(&http, &base, form).await).await })
        })
        .collect();
    let mut granted = 0;
    for t in tries {
        let (status, body) = t.await.unwrap();
        match status {
            200 => granted += 1,
            400 => assert_eq!(body["reason"], "replayed_jti", "{body}"),
            other => panic!("{other}: {body}"),
        }
    }
    assert_eq!(granted, 1, "one assertion, one token across the fleet");
    bed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_killed_under_load_fails_closed_and_service_resumes_when_it_is_back() {
    let bed = Bed::start(BIN).await;
    let mut fleet = Fleet::start(&bed, BIN, RULES, 2).await;
    let a = fleet.instances[0].plain();
    let token_before = token(&bed, &a).await;

    // Token requests with fresh assertions (each needs the store) from both instances, while
    // Redis is killed: every answer is a token or the store's 503, nothing else.
    let token_load = |fleet: &Fleet| {
        let urls: Vec<String> = fleet
            .instances
            .iter()
            .map(|i| format!("{}/connect/token", i.plain()))
            .collect();
        let identity = bed.identity(CONSUMER);
        let n = std::sync::atomic::AtomicUsize::new(0);
        Load::start(4, move |c| {
            let i = n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            c.post(&urls[i % urls.len()])
                .form(&token_form(&identity, SP, None))
        })
    };
    let load = token_load(&fleet);
    tokio::time::sleep(Duration::from_millis(500)).await;
    fleet.redis.take().unwrap().kill();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let across = load.stop().await;
    println!(
        "token requests while Redis is killed: {:?}",
        across.by_status
    );
    assert!(across.of(200) > 0, "{across:?}");
    assert_eq!(across.not(200), across.of(503), "{across:?}");

    // Once it is gone, nothing that needs it is accepted: every token request fails closed,
    // within the configured timeout (500 ms; the store's bound is twice that).
    let after = token_load(&fleet);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let after = after.stop().await;
    println!("token requests after Redis is gone: {:?}", after.by_status);
    assert!(
        after.total() > 0 && after.of(503) == after.total(),
        "{after:?}"
    );
    assert!(
        after
            .samples
            .iter()
            .all(|s| s.contains("replay_store_unavailable")),
        "{after:?}"
    );
    let http = reqwest::Client::new();
    let mut slowest = Duration::ZERO;
    for _ in 0..10 {
        let started = Instant::now();
        let (status, body) = status_json(
            request_token(&http, &a, token_form(&bed.identity(CONSUMER), SP, None)).await,
        )
        .await;
        slowest = slowest.max(started.elapsed());
        assert_refused(status, &body, (503, "replay_store_unavailable"));
    }
    assert!(
        slowest < Duration::from_secs(3),
        "fail closed in time: {slowest:?}"
    );
    println!("slowest refusal while Redis is gone: {slowest:?}");
    // Every refusal has its decision-log line; the store's failure is said once in 10 s.
    let log = fleet.instances[0].gateway.process.output();
    let said = log
        .matches("the replay store on Redis did not answer")
        .count();
    let refused = log.matches("reason=\"replay_store_unavailable\"").count();
    assert!(said <= 2 && refused >= 10, "{said} of {refused}:\n{log}");
    // The metrics count the store's calls: answered before, failed since.
    let metrics = http
        .get(format!("{}/metrics", fleet.instances[0].gateway.admin))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let calls = |outcome| {
        metric(
            &metrics,
            "ishare_gateway_redis_calls_total",
            &[("command", "EVAL"), ("outcome", outcome)],
        )
    };
    assert!(
        calls("ok") > 0.0 && calls("error") + calls("timeout") > 0.0,
        "{metrics}"
    );
    for instance in &mut fleet.instances {
        let (status, body) = instance.gateway.wait_ready_saying("replay store").await;
        assert_eq!(status, 503, "{body}");
    }
    // What needs no store still passes, through the balancer (no instance is ready: the live
    // ones serve).
    let bearer = token_before;
    let resp = http
        .get(format!("{}/api/mine/x", fleet.url))
        .bearer_auth(&bearer)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);

    // Redis back on its port, empty: service resumes without restarting any gateway, once the
    // assertions that could have been accepted before it came back (the 5 s leeway) are past.
    fleet.restart_redis().await;
    for instance in &mut fleet.instances {
        instance.gateway.wait_ready().await;
    }
    let answers = std::sync::Mutex::new(Vec::new());
    let resumed = eventually(Duration::from_secs(15), || async {
        let form = token_form(&bed.identity(CONSUMER), SP, None);
        let (status, body) = status_json(request_token(&http, &a, form).await).await;
        let reason = body["reason"].as_str().map(str::to_string);
        answers.lock().unwrap().push((status, reason));
        status == 200
    })
    .await;
    let answers = answers.into_inner().unwrap();
    assert!(resumed, "{answers:?}");
    assert!(
        answers[..answers.len() - 1]
            .iter()
            .all(|(s, r)| *s == 400 && r.as_deref() == Some("issued_before_replay_store")),
        "{answers:?}"
    );
    bed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_back_empty_refuses_every_assertion_issued_before_it_came_back() {
    let bed = Bed::start(BIN).await;
    let mut fleet = Fleet::start(&bed, BIN, RULES, 2).await;
    let (a, b) = (fleet.instances[0].plain(), fleet.instances[1].plain());
    let http = reqwest::Client::new();
    let identity = bed.identity(CONSUMER);
    let issued = ishare_gateway::scheme::Timestamp::now();
    let assertion = identity.client_assertion(SP, issued).unwrap();
    let present = |base: &str| {
        let form = token_form(&identity, SP, Some(assertion.clone()));
        let (http, base) = (http.clone(), base.to_string());
        async move { status_json(request_token(&http, &base, form).await).await }
    };
    let (status, body) = present(&a).await;
    assert_eq!(status, 200, "{body}");

    // Redis killed and started again without what it held (no persistence in the tests), in a
    // later second than the assertion's iat.
    let next_second = 1.0 - issued.as_f64().fract();
    tokio::time::sleep(Duration::from_secs_f64(next_second)).await;
    fleet.redis.take().unwrap().kill();
    fleet.restart_redis().await;
    for instance in &mut fleet.instances {
        instance.gateway.wait_ready().await;
    }
    // The jti is forgotten, yet the assertion is refused at either instance, and stays so.
    for base in [&b, &a, &b] {
        let (status, body) = present(base).await;
        assert_refused(status, &body, (400, "issued_before_replay_store"));
        assert!(
            body["error_description"]
                .as_str()
                .is_some_and(|d| d.contains("make a new assertion")),
            "{body}"
        );
    }
    // An assertion issued just after the store came back may have been accepted before, with an
    // iat then in the future (up to the 5 s leeway): refused by the instances that saw the reset.
    let back = Instant::now();
    let early = identity
        .client_assertion(SP, ishare_gateway::scheme::Timestamp::now())
        .unwrap();
    let (status, body) =
        status_json(request_token(&http, &b, token_form(&identity, SP, Some(early))).await).await;
    assert_refused(status, &body, (400, "issued_before_replay_store"));
    // Past the leeway, a new assertion is accepted, once.
    tokio::time::sleep(Duration::from_secs(7).saturating_sub(back.elapsed())).await;
    let fresh = identity
        .client_assertion(SP, ishare_gateway::scheme::Timestamp::now())
        .unwrap();
    let form = || token_form(&identity, SP, Some(fresh.clone()));
    let (status, body) = status_json(request_token(&http, &b, form()).await).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = status_json(request_token(&http, &a, form()).await).await;
    assert_refused(status, &body, (400, "replayed_jti"));
    // Each instance says in its log that the store came back empty.
    for instance in &fleet.instances {
        let said = eventually(Duration::from_secs(5), || async {
            instance
                .gateway
                .process
                .output()
                .contains("came back without what it held")
        })
        .await;
        assert!(said, "{}", instance.gateway.process.tail());
    }
    bed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_lost_its_last_writes_but_kept_its_epoch_refuses_what_it_forgot() {
    let bed = Bed::start(BIN).await;
    let fleet = Fleet::start(&bed, BIN, RULES, 2).await;
    let (a, b) = (fleet.instances[0].plain(), fleet.instances[1].plain());
    let http = reqwest::Client::new();
    let identity = bed.identity(CONSUMER);
    let assertion = identity
        .client_assertion(SP, ishare_gateway::scheme::Timestamp::now())
        .unwrap();
    let form = || token_form(&identity, SP, Some(assertion.clone()));
    let (status, body) = status_json(request_token(&http, &a, form()).await).await;
    assert_eq!(status, 200, "{body}");

    // The store goes back to before that acceptance, as a replica that had not received it would
    // be after a failover, or a restored snapshot: the epoch stays, the jti and the latest
    // acceptance are gone.
    let client = redis::Client::open(format!("redis://127.0.0.1:{}/0", fleet.redis_port)).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut c)
        .await
        .unwrap();
    for key in keys.iter().filter(|k| !k.ends_with(":epoch")) {
        let _: i64 = redis::cmd("DEL")
            .arg(key)
            .query_async(&mut c)
            .await
            .unwrap();
    }
    // The instance that wrote it finds out at its next call (the balancer's /ready, every 500 ms),
    // and the other instance follows: the assertion is refused at both.
    let noticed = eventually(Duration::from_secs(5), || async {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("*:latest")
            .query_async(&mut c.clone())
            .await
            .unwrap_or_default();
        !keys.is_empty()
    })
    .await;
    assert!(noticed, "{keys:?}");
    for base in [&b, &a] {
        let (status, body) = status_json(request_token(&http, base, form()).await).await;
        assert_refused(status, &body, (400, "issued_before_replay_store"));
    }
    bed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_killed_under_load_is_taken_out_and_costs_at_most_what_was_in_flight() {
    let bed = Bed::start(BIN).await;
    let mut fleet = Fleet::start(&bed, BIN, RULES, 2).await;
    let bearer = token(&bed, &fleet.instances[0].plain()).await;
    const WORKERS: usize = 8;
    let load = gets(&fleet, &bearer, WORKERS);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut killed = fleet.instances.remove(0);
    killed.gateway.process.kill();
    // The balancer's checks take it out: every answer then comes from the other one.
    let survivor = format!("g{}", 1);
    let http = reqwest::Client::new();
    let url = format!("{}/api/mine/x", fleet.url);
    let only_survivor = eventually(Duration::from_secs(10), || async {
        let mut from = Vec::new();
        for _ in 0..4 {
            if let Ok(r) = http.get(&url).bearer_auth(&bearer).send().await {
                from.push(
                    r.headers()
                        .get("x-instance")
                        .map(|v| v.to_str().unwrap_or_default().to_string()),
                );
            }
        }
        from.len() == 4 && from.iter().all(|f| f.as_deref() == Some(survivor.as_str()))
    })
    .await;
    assert!(only_survivor, "{}", fleet.balancer.tail());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let counts = load.stop().await;
    println!("one instance killed under load: {counts:?}");
    assert!(counts.of(200) > 0, "{counts:?}");
    assert!(
        counts.not(200) <= WORKERS as u64,
        "no more failures than requests in flight ({WORKERS}): {counts:?}"
    );
    bed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_instance_reloaded_in_turn_under_load_loses_no_request() {
    let bed = Bed::start(BIN).await;
    let fleet = Fleet::start(&bed, BIN, RULES, 2).await;
    let bearer = token(&bed, &fleet.instances[0].plain()).await;
    let load = gets(&fleet, &bearer, 8);
    for round in 0..2 {
        for instance in &fleet.instances {
            let generation = instance.gateway.generation().await.unwrap();
            let after = instance.gateway.reload(generation).await;
            assert!(after > generation, "round {round}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let counts = load.stop().await;
    println!("reloads in turn under load: {counts:?}");
    assert!(counts.of(200) > 50, "{counts:?}");
    assert_eq!(counts.not(200), 0, "{counts:?}");
    bed.stop().await;
}

/// The answer of a Redis command at `port` (with the password), for the test to watch the servers.
async fn redis_info(port: u16, password: &str, section: &str) -> String {
    let url = format!("redis://:{password}@127.0.0.1:{port}/0");
    let Ok(client) = redis::Client::open(url) else {
        return String::new();
    };
    let Ok(mut c) = client.get_multiplexed_async_connection().await else {
        return String::new();
    };
    redis::cmd("INFO")
        .arg(section)
        .query_async::<String>(&mut c)
        .await
        .unwrap_or_default()
}

/// Token requests at `url` from the moment Redis's master was lost until one is served: each
/// refused 503 `replay_store_unavailable` meanwhile (never anything else). How many were refused
/// and how long it took; None after 60 s.
async fn refused_until_served(bed: &Bed, url: &str) -> Option<(usize, Duration)> {
    let http = reqwest::Client::new();
    let lost = Instant::now();
    let mut refused = 0;
    loop {
        let form = token_form(&bed.identity(CONSUMER), SP, None);
        let (status, body) = status_json(request_token(&http, url, form).await).await;
        match status {
            200 => return Some((refused, lost.elapsed())),
            503 => {
                assert_eq!(body["reason"], "replay_store_unavailable", "{body}");
                refused += 1;
            }
            other => panic!("{other}: {body}"),
        }
        if lost.elapsed() > Duration::from_secs(60) {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// redis-server as a Sentinel on `port`, watching the master `fleet` at `master`.
fn sentinel(port: u16, master: u16, password: &str) -> support::process::ChildProcess {
    let config = scratch_dir(BIN).join("sentinel.conf");
    std::fs::write(
        &config,
        format!(
            "port {port}\nbind 127.0.0.1\nrequirepass {password}\n\
             sentinel monitor fleet 127.0.0.1 {master} 2\n\
             sentinel auth-pass fleet {password}\nsentinel sentinel-pass {password}\n\
             sentinel down-after-milliseconds fleet 1000\nsentinel failover-timeout fleet 10000\n"
        ),
    )
    .unwrap();
    let mut command = std::process::Command::new("redis-server");
    command.arg(&config).arg("--sentinel");
    support::process::ChildProcess::spawn("redis-sentinel", command)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_sentinels_a_gateway_follows_a_failover_without_restart_failing_closed_meanwhile() {
    const PASSWORD: &str = "fleet-test-password";
    let bed = Bed::start(BIN).await;
    let master_port = free_port();
    let auth = ["--requirepass", PASSWORD, "--masterauth", PASSWORD];
    let master_arg = master_port.to_string();
    let mut master = Some(
        RedisServer::start_with(master_port, &[&["--port", &master_arg][..], &auth].concat()).await,
    );
    let replica_port = free_port();
    let replica_arg = replica_port.to_string();
    let _replica = RedisServer::start_with(
        replica_port,
        &[
            &[
                "--port",
                &replica_arg,
                "--replicaof",
                "127.0.0.1",
                &master_arg,
            ][..],
            &auth,
        ]
        .concat(),
    )
    .await;
    let sentinel_ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let _sentinels: Vec<_> = sentinel_ports
        .iter()
        .map(|p| sentinel(*p, master_port, PASSWORD))
        .collect();
    // The Sentinels know the replica and each other before the master is killed.
    let watching = eventually(Duration::from_secs(30), || async {
        let mut all = true;
        for p in &sentinel_ports {
            all &= redis_info(*p, PASSWORD, "sentinel")
                .await
                .contains("status=ok,address=127.0.0.1");
            all &= redis_info(*p, PASSWORD, "sentinel")
                .await
                .contains("slaves=1,sentinels=3");
        }
        all
    })
    .await;
    assert!(
        watching,
        "{}",
        redis_info(sentinel_ports[0], PASSWORD, "sentinel").await
    );

    let dir = scratch_dir(BIN);
    let credentials = dir.join("redis.credentials");
    std::fs::write(&credentials, format!("{PASSWORD}\n")).unwrap();
    let nodes: Vec<String> = sentinel_ports
        .iter()
        .map(|p| format!("\"127.0.0.1:{p}\""))
        .collect();
    let extra = format!(
        "[replay]\nstore = \"redis\"\nsentinels = [{}]\nmaster_name = \"fleet\"\ncredentials_file = \"{}\"\ntimeout = \"500ms\"\n",
        nodes.join(", "),
        credentials.display()
    );
    let (dir, ports) = gateway_dir(&bed, BIN, RULES, &extra, |t| t);
    let mut gateway = support::process::GatewayProcess::start(
        "sentinel-gateway",
        &dir.join("gateway.toml"),
        ports.admin,
    );
    gateway.wait_ready().await;
    let plain = format!("http://127.0.0.1:{}", ports.plain);
    let http = reqwest::Client::new();
    let once = |bed: &Bed| {
        token_form(
            &bed.identity(CONSUMER),
            SP,
            Some(
                bed.identity(CONSUMER)
                    .client_assertion(SP, ishare_gateway::scheme::Timestamp::now())
                    .unwrap(),
            ),
        )
    };
    let form = once(&bed);
    assert_eq!(
        request_token(&http, &plain, form.clone()).await.status(),
        200
    );
    assert_eq!(request_token(&http, &plain, form).await.status(), 400);

    // The replica has what the master holds (its first sync may take seconds): the epoch, the
    // latest acceptance and the jti go over with a failover.
    let keys = |info: String| {
        info.split("keys=")
            .nth(1)
            .and_then(|rest| rest.split(',').next())
            .map(str::to_string)
    };
    let synced = eventually(Duration::from_secs(30), || async {
        let held = keys(redis_info(master_port, PASSWORD, "keyspace").await);
        redis_info(replica_port, PASSWORD, "replication")
            .await
            .contains("master_link_status:up")
            && held.as_deref() == Some("3")
            && keys(redis_info(replica_port, PASSWORD, "keyspace").await) == held
    })
    .await;
    assert!(
        synced,
        "{}",
        redis_info(replica_port, PASSWORD, "replication").await
    );
    // The master dies: until the Sentinels promote the replica, token requests fail closed; then
    // they pass again, on the new master, with no restart.
    master.take().unwrap().kill();
    let (refused, recovered) = refused_until_served(&bed, &plain).await.unwrap_or_else(|| {
        panic!(
            "no token within 60 s of the failover\n{}",
            gateway.process.tail()
        )
    });
    println!("failover: {refused} token requests refused, service back after {recovered:?}");
    assert!(refused > 0, "the switch was not noticed");
    assert!(redis_info(replica_port, PASSWORD, "replication")
        .await
        .contains("role:master"));
    let form = once(&bed);
    assert_eq!(
        request_token(&http, &plain, form.clone()).await.status(),
        200
    );
    let (status, body) = status_json(request_token(&http, &plain, form).await).await;
    assert_refused(status, &body, (400, "replayed_jti"));
    gateway.wait_ready().await;
    bed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_command_walks_a_fleet_through_what_it_shares() {
    let dir = scratch_dir(BIN);
    shipped_on_free_ports(&dir);
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_ishare-gateway"));
    command.args([
        "cluster",
        "--testbed-config",
        dir.join("testbed.toml").to_str().unwrap(),
        "--config",
        dir.join("gateway.toml").to_str().unwrap(),
        "--exit",
    ]);
    let mut cluster = support::process::ChildProcess::spawn("cluster", command);
    let status = cluster.wait_exit(Duration::from_secs(240)).await;
    let out = cluster.output();
    assert!(status.success(), "{}", cluster.tail());
    for said in [
        "← 200: the backend got X-Consumer-Party-Id: EU.EORI.NL000000001",
        "(the same assertion)   ← 400: replayed_jti",
        "(the same cookie)   ← 200: the backend got X-Person-Id: did:ishare:person.jane-doe",
        "← 200: the way to sign in again",
        "gateway a reloaded (SIGHUP)",
        "gateway b stopped (SIGTERM)\n",
        " × 200, 0 failed",
        "gateway b started again",
        "the backend got X-Forwarded-Proto: https, X-Forwarded-For: 127.0.0.2, 127.0.0.1",
        "then 429: too_many_logins_from_address",
        "from 127.0.0.3   ← 200: the identity provider's sign-in",
    ] {
        assert!(out.contains(said), "{said:?} missing from:\n{out}");
    }
    // Gateway b, started twice, has both runs in its log.
    let cluster_dir = dir.join("data/cluster");
    let log = std::fs::read_to_string(cluster_dir.join("logs/gateway-b.log")).unwrap();
    assert_eq!(log.matches(" starting party=").count(), 2, "{log}");
    // Redis keeps what it holds in an append-only file.
    assert!(
        cluster_dir.join("redis/appendonlydir").is_dir(),
        "no append-only file in {}",
        cluster_dir.display()
    );
    // Nothing of the cluster is left running.
    let marker = dir.join("data").display().to_string();
    let left: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(&marker))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// A data owner's consumer of its own in the testbed: no policy but the one the purge test adds.
const REVOKED: &str = "EU.EORI.NL000000107";
const PURGE_SECRET: &str = "purge-secret-0123456789abcdef0123456789abcdef";

/// A route the data owner's registry decides.
const DELEGATED: &str = r#"
[[route]]
name = "read"
methods = ["GET"]
path = "/api/containers/{id}"
upstream = "echo"
[route.delegation]
resource_type = "CONTAINER"
identifiers = ["{path.id}"]
policy_issuer = "EU.EORI.NL000000005"
registry = "ar"
"#;

/// The data owner's policy for `REVOKED`, stored at the testbed's registry.
fn revoked_policy() -> serde_json::Value {
    serde_json::json!({
        "notBefore": 0, "notOnOrAfter": 4102444800i64,
        "policyIssuer": OWNER, "target": {"accessSubject": REVOKED},
        "policySets": [{"maxDelegationDepth": 0, "policies": [{
            "target": {"resource": {"type": "CONTAINER", "identifiers": ["*"], "attributes": ["*"]}, "actions": ["iSHARE.READ"], "environment": {"serviceProviders": [SP]}},
            "rules": [{"effect": "Permit"}]
        }]}]
    })
}

/// gateway.toml with the testbed's registry as [[registry]] "ar".
fn with_registry(toml: String, bed: &Bed) -> String {
    let registry = format!(
        "\n[[registry]]\nname = \"ar\"\nparty_id = \"{AR}\"\nurl = \"{}\"\n\n[rules]\n",
        bed.url(AR)
    );
    toml.replacen("\n[rules]\n", &registry, 1)
}

/// Store the data owner's policy for `REVOKED` at the testbed's registry.
async fn add_revoked_policy(bed: &Bed) {
    let token = bed.token(AR, OWNER).await;
    let added = bed
        .http
        .post(format!("{}/policy", bed.url(AR)))
        .bearer_auth(token)
        .json(&revoked_policy())
        .send()
        .await
        .unwrap();
    assert_eq!(added.status(), 201);
}

/// Withdraw `REVOKED`'s policy as a data owner's administrator does: signed in to the registry's
/// policy page, deleting its row.
async fn withdraw_at_registry(bed: &Bed) {
    let ar = bed.url(AR);
    let signed_in = bed
        .http
        .post(format!("{ar}/admin/login"))
        .form(&[
            ("username", "admin"),
            ("password", "admin-testbed-password"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(signed_in.status(), 303);
    let cookie = signed_in.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let page = bed
        .http
        .get(format!("{ar}/admin"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let value = |text: &str, name: &str| -> String {
        let marker = format!("name=\"{name}\" value=\"");
        let at = text.find(&marker).unwrap() + marker.len();
        let v = &text[at..at + text[at..].find('"').unwrap()];
        v.replace("&quot;", "\"")
            .replace("&#39;", "'")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&amp;", "&")
    };
    let row = page
        .split("<tr>")
        .find(|r| r.contains(&format!("<td>{REVOKED}</td>")))
        .expect("the policy is listed");
    let form = [
        ("token", value(row, "token")),
        ("index", value(row, "index")),
        ("policy", value(row, "policy")),
    ];
    let deleted = bed
        .http
        .post(format!("{ar}/admin/policies/delete"))
        .header("cookie", &cookie)
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 200);
}

/// `ishare-gateway purge` with `args`: whether it succeeded, and what it wrote.
fn purge_command(args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ishare-gateway"))
        .arg("purge")
        .args(args)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// `ishare-gateway purge --all` at the admin listener `admin` with the secret in `secret`.
fn purge_all(admin: &str, secret: &std::path::Path) -> (bool, String) {
    purge_command(&[
        "--admin",
        admin,
        "--secret-file",
        secret.to_str().unwrap(),
        "--all",
    ])
}

/// `REVOKED` reading C1 at one instance, with a token of that instance.
struct Reader {
    base: String,
    token: String,
}

impl Reader {
    async fn at(bed: &Bed, instance: &support::fleet::Instance) -> Reader {
        let base = instance.plain();
        let token = access_token(&reqwest::Client::new(), &base, &bed.identity(REVOKED)).await;
        Reader { base, token }
    }

    async fn read(&self) -> (u16, serde_json::Value) {
        let req = reqwest::Client::new()
            .get(format!("{}/api/containers/C1", self.base))
            .bearer_auth(&self.token);
        status_json(req.send().await.unwrap()).await
    }
}

/// The metrics of the admin listener at `admin` (http://127.0.0.1:PORT).
async fn admin_metrics(admin: &str) -> String {
    let resp = reqwest::get(format!("{admin}/metrics")).await.unwrap();
    resp.text().await.unwrap()
}

/// Two instances deciding `DELEGATED` at the testbed's registry, purging with `PURGE_SECRET`
/// (the file's path returned).
async fn purging_fleet(bed: &Bed) -> (Fleet, std::path::PathBuf) {
    let secret_file = scratch_dir(BIN).join("purge.secret");
    std::fs::write(&secret_file, PURGE_SECRET).unwrap();
    let edit = |t: String| {
        let admin = format!(
            "\n[admin]\npurge_secret_file = {:?}\n",
            secret_file.to_str().unwrap()
        );
        with_registry(t.replacen("\n[admin]\n", &admin, 1), bed)
    };
    let fleet = Fleet::start_edited(bed, BIN, DELEGATED, 2, edit).await;
    (fleet, secret_file)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_at_one_instance_makes_every_instance_ask_the_registry_again() {
    let bed = Bed::start(BIN).await;
    let (fleet, secret_file) = purging_fleet(&bed).await;
    let http = reqwest::Client::new();
    let (a, b) = (
        Reader::at(&bed, &fleet.instances[0]).await,
        Reader::at(&bed, &fleet.instances[1]).await,
    );

    // The data owner's policy: each instance asks the registry once and caches the Permit.
    add_revoked_policy(&bed).await;
    for r in [&a, &b] {
        let (status, body) = r.read().await;
        assert_eq!(status, 200, "{body}");
    }

    // Withdrawn at the registry: the cached Permits still serve at both.
    withdraw_at_registry(&bed).await;
    for r in [&a, &b] {
        let (status, body) = r.read().await;
        assert_eq!(status, 200, "cached: {body}");
    }

    // The purge endpoint refuses whoever lacks the secret, and a body that names no one scope.
    let admin_a = format!("http://127.0.0.1:{}", fleet.instances[0].ports.admin);
    let purge = |secret: Option<&str>, body: &str| {
        let mut req = http
            .post(format!("{admin_a}/purge"))
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(s) = secret {
            req = req.bearer_auth(s);
        }
        async move { status_json(req.send().await.unwrap()).await }
    };
    let issuer = format!(r#"{{"policy_issuer": "{OWNER}"}}"#);
    for (secret, body, status, reason) in [
        (None, issuer.as_str(), 401, "unauthenticated"),
        (Some("wrong"), issuer.as_str(), 401, "unauthenticated"),
        (Some(PURGE_SECRET), "{}", 400, "invalid_purge"),
        (
            Some(PURGE_SECRET),
            r#"{"all": true, "access_subject": "x"}"#,
            400,
            "invalid_purge",
        ),
    ] {
        let (got, answer) = purge(secret, body).await;
        assert_eq!(
            (got, answer["reason"].as_str()),
            (status, Some(reason)),
            "{body}: {answer}"
        );
    }
    let big = format!(r#"{{"policy_issuer": "{}"}}"#, "x".repeat(5000));
    let (got, answer) = purge(Some(PURGE_SECRET), &big).await;
    assert_eq!(
        (got, answer["reason"].as_str()),
        (413, Some("body_too_large"))
    );
    let wrong = fleet.instances[0].dir.join("wrong.secret");
    std::fs::write(&wrong, "not-the-secret").unwrap();
    let (ok, said) = purge_all(&admin_a, &wrong);
    assert!(!ok && said.contains("401 unauthenticated"), "{said}");
    // Refusals are logged at most once every 10 s each, however many come.
    for _ in 0..20 {
        assert_eq!(purge(Some("wrong"), &issuer).await.0, 401);
    }
    let logged = fleet.instances[0].gateway.process.output();
    assert_eq!(logged.matches("a purge was refused").count(), 1, "{logged}");
    // The scheme's name in any case: `bearer` (here naming a consumer nobody cached).
    let lower = http
        .post(format!("{admin_a}/purge"))
        .header("authorization", format!("bearer {PURGE_SECRET}"))
        .header("content-type", "application/json")
        .body(r#"{"access_subject": "EU.EORI.NL000000199"}"#)
        .send()
        .await
        .unwrap();
    let (status, answer) = status_json(lower).await;
    assert_eq!(
        (status, &answer["purged"]),
        (200, &serde_json::json!(0)),
        "{answer}"
    );
    // Both instances still hold their Permit.
    for r in [&a, &b] {
        assert_eq!(r.read().await.0, 200);
    }

    // Junk on the fleet's purge channel: ignored, counted, and logged once however much comes.
    let client = redis::Client::open(format!("redis://127.0.0.1:{}/0", fleet.redis_port)).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    let channels: Vec<String> = redis::cmd("PUBSUB")
        .arg("CHANNELS")
        .arg("*purge")
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(channels.len(), 1, "{channels:?}");
    for i in 0..303 {
        let _: i64 = redis::cmd("PUBLISH")
            .arg(&channels[0])
            .arg(format!("junk {i}"))
            .query_async(&mut c)
            .await
            .unwrap();
    }
    let admin_b = fleet.instances[1].gateway.admin.clone();
    let unreadable = [("origin", "fleet"), ("outcome", "unreadable")];
    let counted = eventually(Duration::from_secs(10), || async {
        metric(
            &admin_metrics(&admin_b).await,
            "ishare_gateway_decision_purges_total",
            &unreadable,
        ) == 303.0
    })
    .await;
    assert!(counted, "{}", admin_metrics(&admin_b).await);
    let logged = fleet.instances[1].gateway.process.output();
    assert_eq!(logged.matches("could not be read").count(), 1, "{logged}");
    for r in [&a, &b] {
        assert_eq!(r.read().await.0, 200);
    }

    // One purge at A, by the data owner (named in lower case, as EORIs may be written): A and
    // B ask the registry again, which refuses.
    let owner = OWNER.to_ascii_lowercase();
    let (ok, said) = purge_command(&[
        "--admin",
        &admin_a,
        "--secret-file",
        secret_file.to_str().unwrap(),
        "--policy-issuer",
        &owner,
    ]);
    assert!(ok, "{said}");
    assert!(
        said.contains("purged 1 cached decision(s)") && said.contains("published to the fleet"),
        "{said}"
    );
    let (status, body) = a.read().await;
    assert_refused(status, &body, (403, "no_policy"));
    // B hears the purge on the fleet's channel (at once, but not within A's answer).
    let refused_at_b =
        eventually(Duration::from_secs(5), || async { b.read().await.0 == 403 }).await;
    assert!(refused_at_b, "B still serves its cached Permit");
    let (status, body) = b.read().await;
    assert_refused(status, &body, (403, "no_policy"));

    // Counted: A's purge from the admin listener and its refusals, B's from the fleet.
    let (at_a, at_b) = (
        admin_metrics(&fleet.instances[0].gateway.admin).await,
        admin_metrics(&fleet.instances[1].gateway.admin).await,
    );
    let purges = "ishare_gateway_decision_purges_total";
    let scope = ("scope", "policy_issuer");
    assert_eq!(
        metric(
            &at_a,
            purges,
            &[scope, ("origin", "admin"), ("outcome", "ok")]
        ),
        1.0,
        "{at_a}"
    );
    assert_eq!(metric(&at_a, purges, &[("outcome", "refused")]), 26.0);
    assert_eq!(metric(&at_b, purges, &[scope, ("origin", "fleet")]), 1.0);
    // A does not apply its own purge again when it hears it.
    let heard = [("origin", "fleet"), ("outcome", "ok")];
    assert_eq!(metric(&at_a, purges, &heard), 0.0);
    bed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_routes_max_decision_age_bounds_how_long_a_withdrawn_policy_is_served() {
    let bed = Bed::start(BIN).await;
    // "read" serves a decision for 1 s at most; "held" for as long as the cache keeps it.
    let held = DELEGATED
        .replace("name = \"read\"", "name = \"held\"")
        .replace("/api/containers/", "/api/held/");
    let rules = format!("{DELEGATED}max_decision_age = \"1s\"\n{held}");
    let (dir, ports) = gateway_dir(&bed, BIN, &rules, "", |t| with_registry(t, &bed));
    let mut gateway = support::process::GatewayProcess::start(
        &format!("{BIN}-max-age"),
        &dir.join("gateway.toml"),
        ports.admin,
    );
    gateway.wait_ready().await;
    let base = format!("http://127.0.0.1:{}", ports.plain);
    let http = reqwest::Client::new();
    let token = access_token(&http, &base, &bed.identity(REVOKED)).await;
    let get = |path: &str| {
        let req = http.get(format!("{base}{path}")).bearer_auth(&token);
        async move { status_json(req.send().await.unwrap()).await }
    };
    add_revoked_policy(&bed).await;
    for path in ["/api/containers/C1", "/api/held/C1"] {
        let (status, body) = get(path).await;
        assert_eq!(status, 200, "{path}: {body}");
    }
    withdraw_at_registry(&bed).await;
    let withdrawn = Instant::now();
    // Within its age the Permit still serves; past it the registry is asked again, and refuses.
    let refused = eventually(Duration::from_secs(5), || async {
        get("/api/containers/C1").await.0 == 403
    })
    .await;
    assert!(
        refused,
        "the cached Permit outlived the route's max_decision_age"
    );
    assert!(withdrawn.elapsed() < Duration::from_secs(3));
    let (status, body) = get("/api/containers/C1").await;
    assert_refused(status, &body, (403, "no_policy"));
    // The other route's Permit is cached still.
    let (status, body) = get("/api/held/C1").await;
    assert_eq!(status, 200, "{body}");
    bed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_down_a_purge_applies_here_and_says_the_fleet_was_not_told() {
    let bed = Bed::start(BIN).await;
    let (mut fleet, secret_file) = purging_fleet(&bed).await;
    let (a, b) = (
        Reader::at(&bed, &fleet.instances[0]).await,
        Reader::at(&bed, &fleet.instances[1]).await,
    );
    add_revoked_policy(&bed).await;
    assert_eq!(a.read().await.0, 200);
    assert_eq!(b.read().await.0, 200);
    withdraw_at_registry(&bed).await;

    // Redis down: A purges its own cache, and the command fails saying the others were not told.
    fleet.redis.take().unwrap().kill();
    let admin_a = fleet.instances[0].gateway.admin.clone();
    let purge = || {
        purge_command(&[
            "--admin",
            &admin_a,
            "--secret-file",
            secret_file.to_str().unwrap(),
            "--access-subject",
            REVOKED,
        ])
    };
    // (A may have dropped its decisions already, on losing the purge channel.)
    let (ok, said) = purge();
    assert!(!ok, "{said}");
    assert!(
        said.contains("cached decision(s)") && said.contains("only"),
        "{said}"
    );
    assert_eq!(a.read().await.0, 403);
    let metrics = admin_metrics(&admin_a).await;
    let outcome = [("scope", "access_subject"), ("outcome", "fleet_not_told")];
    assert_eq!(
        metric(&metrics, "ishare_gateway_decision_purges_total", &outcome),
        1.0
    );
    // B was not told, but it no longer hears the purge channel: it drops what it cached, so it
    // asks the registry again, which refuses.
    let dropped = eventually(Duration::from_secs(10), || async {
        b.read().await.0 == 403
    })
    .await;
    assert!(
        dropped,
        "B served a decision while it could not hear purges"
    );
    let admin_b = &fleet.instances[1].gateway.admin;
    let unheard = [("scope", "all"), ("origin", "channel_lost")];
    let metrics = admin_metrics(admin_b).await;
    assert!(
        metric(&metrics, "ishare_gateway_decision_purges_total", &unheard) >= 1.0,
        "{metrics}"
    );

    // Redis back: a purge reaches the fleet again.
    fleet.restart_redis().await;
    assert!(eventually(Duration::from_secs(10), || async { purge().0 }).await);
    bed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_consumers_consent_kept_on_redis_is_forwarded_by_the_other_instance() {
    let mut config = testbed_config(BIN);
    for party in &mut config.parties {
        party.strict |= party.id == AR;
    }
    let bed = Bed::start_of(config).await;
    let registry = format!(
        "\n[[registry]]\nname = \"strict\"\nparty_id = \"{AR}\"\nurl = \"{}\"\nmask_licences = false\nprevious_steps = \"consumer_assertion\"\n\n[rules]\n",
        bed.url(AR)
    );
    // The delegated route, asked of the strict registry with the consumer's consent.
    let consented = DELEGATED.replace("registry = \"ar\"", "registry = \"strict\"");
    let mut fleet = Fleet::start_edited(&bed, BIN, &consented, 2, |toml| {
        toml.replacen("\n[rules]\n", &registry, 1)
    })
    .await;
    let (a, b) = (fleet.instances[0].plain(), fleet.instances[1].plain());
    let get = |base: &str, id: &str, token: &str| {
        let request = bed
            .http
            .get(format!("{base}/api/containers/{id}"))
            .bearer_auth(token.to_string());
        async move { status_json(request.send().await.unwrap()).await }
    };
    // The consumer asks A for its token; B, which never saw that request, forwards the
    // assertion A kept on Redis: the strict registry takes it, and answers.
    let token = token(&bed, &a).await;
    let (status, body) = get(&b, "C1", &token).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = get(&b, "SECRET-1", &token).await;
    assert_refused(status, &body, (403, "denied_by_rule"));
    // Redis down: B cannot read the consent it needs, and says so (fails closed), also for
    // what it decided before (deaf to purges, it dropped its decisions).
    fleet.redis.take().unwrap().kill();
    for id in ["C2", "C1"] {
        let (status, body) = get(&b, id, &token).await;
        assert_refused(status, &body, (503, "replay_store_unavailable"));
    }
    // Back (and A reconnected): a new token's consent, kept on Redis, is forwarded again.
    fleet.restart_redis().await;
    let fresh = std::sync::Mutex::new(None);
    let answered = eventually(Duration::from_secs(10), || async {
        let form = token_form(&bed.identity(CONSUMER), SP, None);
        let (status, body) = status_json(request_token(&bed.http, &a, form).await).await;
        let Some(token) = body["access_token"].as_str().filter(|_| status == 200) else {
            return false;
        };
        *fresh.lock().unwrap() = Some(token.to_string());
        get(&b, "C2", token).await.0 == 200
    })
    .await;
    let fresh = fresh.lock().unwrap().clone();
    assert!(answered, "{fresh:?}");
}

/// Two instances on a Redis Cluster (three masters, a replica each) as an ACL user: replays and
/// purges shared across the cluster's shards, and the master that holds the gateways' keys killed
/// under load: assertions fail closed until its replica takes over, then pass on it, and what was
/// accepted before is still refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_redis_cluster_the_fleet_shares_replays_and_purges_and_follows_a_failover() {
    const PASSWORD: &str = "cluster-test-password";
    let bed = Bed::start(BIN).await;
    let mut cluster = support::RedisCluster::start(PASSWORD, SP).await;
    let dir = scratch_dir(BIN);
    let credentials = dir.join("redis.credentials");
    std::fs::write(&credentials, format!("gateway:{PASSWORD}\n")).unwrap();
    let secret_file = dir.join("purge.secret");
    std::fs::write(&secret_file, PURGE_SECRET).unwrap();
    let replay = format!(
        "cluster = {}\ncredentials_file = {:?}",
        cluster.toml_nodes(),
        credentials.to_str().unwrap()
    );
    let admin = format!(
        "\n[admin]\npurge_secret_file = {:?}\n",
        secret_file.to_str().unwrap()
    );
    let fleet = Fleet::start_edited(&bed, BIN, RULES, 2, |t| {
        let t = t.replacen("\n[admin]\n", &admin, 1);
        let lines: Vec<String> = t
            .lines()
            .map(|l| match l.starts_with("url = \"redis://") {
                true => replay.clone(),
                false => l.to_string(),
            })
            .collect();
        lines.join("\n") + "\n"
    })
    .await;
    let (a, b) = (fleet.instances[0].plain(), fleet.instances[1].plain());
    let http = reqwest::Client::new();
    let assertion = || {
        let identity = bed.identity(CONSUMER);
        let assertion = identity
            .client_assertion(SP, ishare_gateway::scheme::Timestamp::now())
            .unwrap();
        token_form(&identity, SP, Some(assertion))
    };

    // One assertion at both instances at once, ten times: exactly one token each time.
    for _ in 0..10 {
        let form = assertion();
        let (at_a, at_b) = tokio::join!(
            request_token(&http, &a, form.clone()),
            request_token(&http, &b, form)
        );
        let mut statuses = [at_a.status().as_u16(), at_b.status().as_u16()];
        statuses.sort();
        assert_eq!(statuses, [200, 400]);
    }
    // The gateways' keys are on one slot, of one master: the party's hash tag.
    let tag = format!("{{{SP}}}");
    let master = cluster.master_of(&tag).await;
    let held = cluster
        .command(
            master,
            &[
                "CLUSTER",
                "COUNTKEYSINSLOT",
                &cluster
                    .command(master, &["CLUSTER", "KEYSLOT", &tag])
                    .await
                    .unwrap(),
            ],
        )
        .await
        .unwrap();
    assert!(
        held.parse::<u32>().unwrap() >= 12,
        "keys on the slot: {held}"
    );

    // A purge at A is heard at B, through whichever node B subscribed at.
    let admin_a = format!("http://127.0.0.1:{}", fleet.instances[0].ports.admin);
    let admin_b = format!("http://127.0.0.1:{}", fleet.instances[1].ports.admin);
    let (ok, said) = purge_all(&admin_a, &secret_file);
    assert!(ok && said.contains("published to the fleet"), "{said}");
    let heard = support::process::eventually(Duration::from_secs(10), || async {
        let m = admin_metrics(&admin_b).await;
        metric(
            &m,
            "ishare_gateway_decision_purges_total",
            &[("scope", "all"), ("origin", "fleet"), ("outcome", "ok")],
        ) >= 1.0
    })
    .await;
    assert!(heard, "{}", admin_metrics(&admin_b).await);

    // An assertion accepted before the failover, to present again after it.
    let before = assertion();
    assert_eq!(request_token(&http, &a, before.clone()).await.status(), 200);
    // The replica has it before its master dies (replication is asynchronous: a write in the
    // last instant before a crash may be lost, which the store's epoch check answers for).
    tokio::time::sleep(Duration::from_millis(500)).await;
    cluster.kill(master);
    let (refused, recovered) = refused_until_served(&bed, &fleet.url)
        .await
        .unwrap_or_else(|| {
            panic!(
                "no token within 60 s of the master's death\n{}",
                fleet.instances[0].gateway.process.tail()
            )
        });
    println!(
        "cluster failover: {refused} token requests refused, service back after {recovered:?}"
    );
    assert!(refused > 0, "the master's death was not noticed");
    // Every node learns of the new master through the cluster's gossip, soon after it serves.
    let took_over = support::process::eventually(Duration::from_secs(10), || async {
        cluster
            .master_now(&tag)
            .await
            .is_ok_and(|now| now != master)
    })
    .await;
    assert!(
        took_over,
        "no replica took over: {:?}",
        cluster.master_now(&tag).await
    );
    // On the new master: what was accepted before is refused, at either instance, and a new
    // assertion is accepted once.
    for base in [&a, &b] {
        let (status, body) = status_json(request_token(&http, base, before.clone()).await).await;
        assert_refused(status, &body, (400, "replayed_jti"));
    }
    let form = assertion();
    assert_eq!(request_token(&http, &b, form.clone()).await.status(), 200);
    let (status, body) = status_json(request_token(&http, &a, form).await).await;
    assert_refused(status, &body, (400, "replayed_jti"));
    // The purge channel too: B hears A's next purge, subscribed again where it was lost.
    let heard_again = support::process::eventually(Duration::from_secs(20), || async {
        let (ok, said) = purge_all(&admin_a, &secret_file);
        assert!(ok, "{said}");
        tokio::time::sleep(Duration::from_millis(500)).await;
        let m = admin_metrics(&admin_b).await;
        let labels = [("scope", "all"), ("origin", "fleet"), ("outcome", "ok")];
        metric(&m, "ishare_gateway_decision_purges_total", &labels) >= 2.0
    })
    .await;
    assert!(heard_again, "{}", admin_metrics(&admin_b).await);
    bed.stop().await;
}
