//! Several instances behind one balancer: a client assertion accepted by one is accepted by no
//! other, tokens of one are accepted by the others, and when the shared replay store (a real
//! redis-server) goes away, assertions are refused — never a replay accepted.

use crate::support;

use ishare_gateway::gateway::server::RunningGateway;
use ishare_gateway::scheme::Timestamp;
use serde_json::Value;
use std::path::PathBuf;
use support::*;

const BIN: &str = "instances";

const RULES: &str = r#"
[[route]]
name = "mine"
path = "/api/mine"
upstream = "echo"
"#;

struct Instance {
    url: String,
    admin: String,
    dir: PathBuf,
    gateway: Option<RunningGateway>,
}

/// An instance on `redis`, once its admin listener answers 200 on `/{probe}` (`ready` touches the
/// store).
async fn instance(bed: &Bed, redis: &str, probe: &str) -> Instance {
    let extra = format!("[replay]\nstore = \"redis\"\nurl = \"{redis}\"\ntimeout = \"300ms\"\n");
    let (dir, ports) = gateway_dir(bed, BIN, RULES, &extra, |t| t);
    let instance = Instance {
        url: format!("https://127.0.0.1:{}", ports.tls),
        admin: format!("http://127.0.0.1:{}", ports.admin),
        gateway: Some(launch(&dir)),
        dir,
    };
    for _ in 0..100 {
        if reqwest::get(format!("{}/{probe}", instance.admin))
            .await
            .is_ok_and(|r| r.status() == 200)
        {
            return instance;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("an instance did not become ready");
}

impl Instance {
    async fn stop(mut self) {
        if let Some(g) = self.gateway.take() {
            tokio::task::spawn_blocking(move || g.stop()).await.unwrap();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn token_with(bed: &Bed, base: &str, assertion: &str) -> (u16, Value) {
    let form = token_form(&bed.identity(CONSUMER), SP, Some(assertion.to_string()));
    status_json(request_token(&bed.http, base, form).await).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_share_replays_and_tokens_and_refuse_when_the_store_is_gone() {
    let redis = RedisServer::start().await;
    let bed = Bed::start(BIN).await;
    let a = instance(&bed, &redis.url(), "live").await;
    let fresh = || {
        bed.identity(CONSUMER)
            .client_assertion(SP, Timestamp::now())
            .unwrap()
    };
    // A store new to every instance remembers from its first use, here a token request: an
    // assertion made before it may have been accepted by a store that lost everything while
    // every instance restarted, and is refused.
    let now = Timestamp::now().as_f64().floor() as i64;
    let earlier = bed
        .identity(CONSUMER)
        .client_assertion(SP, Timestamp::from_secs(now - 1))
        .unwrap();
    // (Asked again while the instance has not fetched the trusted list, which it checks first.)
    let mut answer = token_with(&bed, &a.url, &earlier).await;
    for _ in 0..100 {
        if answer.0 != 503 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        answer = token_with(&bed, &a.url, &earlier).await;
    }
    let (status, body) = answer;
    assert_refused(status, &body, (400, "issued_before_replay_store"));
    // One assertion, one token, whichever instance sees it first.
    let assertion = fresh();
    let (status, body) = token_with(&bed, &a.url, &assertion).await;
    assert_eq!(status, 200, "{body}");
    let token = body["access_token"].as_str().unwrap().to_string();
    let b = instance(&bed, &redis.url(), "ready").await;
    for base in [&b.url, &a.url, &b.url] {
        let (status, body) = token_with(&bed, base, &assertion).await;
        assert_eq!(
            (status, body["reason"].as_str()),
            (400, Some("replayed_jti"))
        );
    }
    // A token of one instance is good at the other.
    let resp = bed
        .http
        .get(format!("{}/api/mine", b.url))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    // Redis goes away: assertions are refused and /ready says why.
    let port = redis.kill();
    let (status, body) = token_with(&bed, &a.url, &fresh()).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (503, Some("replay_store_unavailable"))
    );
    let ready = reqwest::get(format!("{}/ready", b.admin)).await.unwrap();
    assert_eq!(ready.status(), 503);
    // Back again, empty: business as usual once the assertions that may have been accepted
    // before are past (issued before the new epoch, or within the leeway after it), and what was
    // refused was not remembered.
    let _redis = RedisServer::start_on(port).await;
    // The assertion accepted before, at the instance that did not accept it, within the same
    // second maybe: refused, not accepted a second time.
    let (status, body) = token_with(&bed, &b.url, &assertion).await;
    assert_refused(status, &body, (400, "issued_before_replay_store"));
    let mut status = 0;
    for _ in 0..100 {
        let (answered, body) = token_with(&bed, &b.url, &fresh()).await;
        status = answered;
        match (status, body["reason"].as_str()) {
            (200, _) => break,
            (503, Some("replay_store_unavailable")) | (400, Some("issued_before_replay_store")) => {
            }
            other => panic!("{other:?}: {body}"),
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(status, 200);
    a.stop().await;
    b.stop().await;
    bed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_keeps_the_jtis_of_the_memory_store() {
    let env = Env::start(BIN, RULES, |_| String::new()).await;
    let identity = env.bed.identity(CONSUMER);
    let assertion = identity.client_assertion(SP, Timestamp::now()).unwrap();
    let first = env.token_response(&identity, Some(assertion.clone())).await;
    assert_eq!(first.status(), 200);
    // Another capacity and timeout: the store in memory, and what it holds, stay.
    let config = env.config_path();
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        format!("{text}\n[replay]\ncapacity = 5000\ntimeout = \"1s\"\n"),
    )
    .unwrap();
    let before = env.state().current.load().generation;
    let after = ishare_gateway::gateway::background::reload(env.state(), &config).unwrap();
    assert!(after > before);
    let (status, body) = status_json(env.token_response(&identity, Some(assertion)).await).await;
    assert_refused(status, &body, (400, "replayed_jti"));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_wanting_the_consumers_assertion_gets_it_from_whichever_instance_is_asked() {
    let redis = RedisServer::start().await;
    let mut config = testbed_config(BIN);
    for party in &mut config.parties {
        party.strict |= party.id == AR;
    }
    let bed = Bed::start_of(config).await;
    let rules = format!("[[route]]\nname = \"containers\"\nmethods = [\"GET\"]\npath = \"/api/containers/{{id}}\"\nupstream = \"echo\"\n[route.delegation]\npolicy_issuer = \"{OWNER}\"\nresource_type = \"CONTAINER\"\nidentifiers = [\"{{path.id}}\"]\nregistry = \"strict\"\nevidence = [\"registry\"]\n");
    let extra = format!(
        "[replay]\nstore = \"redis\"\nurl = \"{}\"\n\n[[registry]]\nname = \"strict\"\nparty_id = \"{AR}\"\nurl = \"{}\"\nmask_licences = false\nprevious_steps = \"consumer_assertion\"\n",
        redis.url(),
        bed.url(AR)
    );
    let mut instances = Vec::new();
    for name in ["taker", "other"] {
        let (dir, ports) = gateway_dir(&bed, BIN, &rules, &extra, |t| t);
        let mut gateway =
            support::process::GatewayProcess::start(name, &dir.join("gateway.toml"), ports.admin);
        gateway.wait_ready().await;
        instances.push((gateway, format!("https://127.0.0.1:{}", ports.tls)));
    }
    // The token at one instance; the requests at the other, which asks the registry with the
    // assertion the first took.
    let token = access_token(&bed.http, &instances[0].1, &bed.identity(CONSUMER)).await;
    let get = |path: &str| {
        let req = bed
            .http
            .get(format!("{}{path}", instances[1].1))
            .bearer_auth(&token);
        async move { status_json(req.send().await.unwrap()).await }
    };
    let (status, body) = get("/api/containers/C1").await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = get("/api/containers/SECRET-1").await;
    assert_refused(status, &body, (403, "denied_by_rule"));
    // Without the fleet's store, the registry cannot be asked: never asked without the step.
    let _port = redis.kill();
    let (status, body) = get("/api/containers/C2").await;
    assert_refused(status, &body, (503, "replay_store_unavailable"));
    for (gateway, _) in instances {
        let (status, _) = gateway.terminate().await;
        assert!(status.success());
    }
    bed.stop().await;
}
