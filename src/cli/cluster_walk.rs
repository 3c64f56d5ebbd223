//! The cluster's walk-through: what the fleet shares (tokens, replays refused, sign-ins), traffic
//! that flows while instances reload and stop, and clients told apart behind the balancer.

use super::cluster_start::Cluster;
use super::walk::{consumer, step, CONSUMER, PERSON, PERSON_PAGE, PERSON_PASSWORD};
use crate::peers::PeerClient;
use crate::scheme::vocabulary::TOKEN_PATH;
use crate::scheme::Timestamp;
use crate::testbed::person::Browser;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A route of the shipped rules decided with the registry.
const CONTAINER: &str = "/api/containers/C1";

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

pub(super) async fn walk(cluster: &mut Cluster, sp: &str) -> Result<(), String> {
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
