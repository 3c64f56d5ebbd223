//! A person in a real browser: headless Chromium (Debian's `chromium` and `chromium-driver`),
//! driven over WebDriver. It opens a page of the gateway that asks for a sign-in, signs in on the
//! testbed identity provider's page, lands on the backend's answer and signs out with the logout
//! page's button; and an administrator adds a policy on the registry's page, after which the
//! registry answers Permit. Screenshots of the pages are written to target/screenshots for a
//! person to look at.

use crate::support;

use fantoccini::{ClientBuilder, Locator};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;
use support::people::*;
use support::*;

const BIN: &str = "browser";
/// A consumer of the test configuration that holds no policy at first.
const NEWCOMER: &str = "EU.EORI.NL000000105";

/// chromedriver on a free port, and the Chromium it starts with a profile of its own: both killed
/// when dropped (Chromium by its profile directory, since it may leave chromedriver's group).
struct Driver {
    process: process::ChildProcess,
    url: String,
    profile: PathBuf,
}

impl Drop for Driver {
    fn drop(&mut self) {
        self.process.kill();
        process::kill_processes_naming(&self.profile.display().to_string());
    }
}

async fn driver() -> Driver {
    let port = free_port();
    let mut command = Command::new("chromedriver");
    command.arg(format!("--port={port}"));
    let mut driver = Driver {
        process: process::ChildProcess::spawn("chromedriver", command),
        url: format!("http://127.0.0.1:{port}"),
        profile: scratch_dir(BIN).join("chromium-profile"),
    };
    let up = process::eventually(Duration::from_secs(10), || async {
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
    })
    .await;
    if !up || driver.process.exited().is_some() {
        panic!(
            "chromedriver did not listen on {port} (Debian's chromium-driver; `make test` installs it)\n{}",
            driver.process.tail()
        );
    }
    driver
}

/// base64(SHA-256(SPKI)) of the testbed's TLS certificate: the one certificate the browser accepts
/// from the testbed's own CA.
fn tls_spki_hash(bed: &Bed) -> String {
    use base64::Engine;
    let (_, cert) = x509_parser::parse_x509_certificate(&bed.keys.tls.chain_der[0]).unwrap();
    let digest = ring::digest::digest(&ring::digest::SHA256, cert.tbs_certificate.subject_pki.raw);
    base64::engine::general_purpose::STANDARD.encode(digest.as_ref())
}

fn screenshots() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn browser(bed: &Bed, driver: &Driver) -> fantoccini::Client {
    ishare_gateway::tls::ensure_crypto_provider();
    let profile = &driver.profile;
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": "/usr/bin/chromium",
            "args": [
                "--headless=new",
                "--no-sandbox",
                "--disable-dev-shm-usage",
                "--window-size=1000,900",
                format!("--user-data-dir={}", profile.display()),
                format!("--ignore-certificate-errors-spki-list={}", tls_spki_hash(bed)),
            ],
        }),
    );
    ClientBuilder::rustls()
        .unwrap()
        .capabilities(caps)
        .connect(&driver.url)
        .await
        .expect("a Chromium session")
}

/// Type `text` into the field with this id.
async fn type_into(client: &fantoccini::Client, id: &str, text: &str) {
    client
        .find(Locator::Id(id))
        .await
        .unwrap_or_else(|e| panic!("#{id}: {e}"))
        .send_keys(text)
        .await
        .unwrap();
}

/// Click the button with this id, which submits its form, and wait (bounded) until the page it
/// was on is gone: an element read afterwards is of the answer, never of the page before it. The
/// old page is marked with a script variable; a new document has none (while the browser is
/// between the two, WebDriver may answer with an error: it is waited out).
async fn submit(client: &fantoccini::Client, id: &str) {
    client
        .execute("window.submittedFrom = true; return null;", vec![])
        .await
        .unwrap();
    client
        .find(Locator::Id(id))
        .await
        .unwrap_or_else(|e| panic!("#{id}: {e}"))
        .click()
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let old = client
            .execute("return window.submittedFrom === true;", vec![])
            .await;
        if matches!(old, Ok(Value::Bool(false))) {
            return;
        }
        if std::time::Instant::now() > deadline {
            panic!("#{id} did not lead to a new page within 15 s (last: {old:?})");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Wait (bounded) until the page shows the element with this id.
async fn wait_for(client: &fantoccini::Client, id: &str) {
    client
        .wait()
        .at_most(Duration::from_secs(15))
        .for_element(Locator::Id(id))
        .await
        .unwrap_or_else(|e| panic!("#{id}: {e}"));
}

async fn text_of(client: &fantoccini::Client, css: &str) -> String {
    client
        .wait()
        .at_most(Duration::from_secs(15))
        .for_element(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"))
        .text()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_signs_in_in_a_browser_and_lands_on_the_backend() {
    let env = start_people(BIN, "").await;
    let driver = driver().await;
    let client = browser(&env.bed, &driver).await;
    let shots = screenshots();

    let protected = format!("{}/people/containers/C1", env.url);
    client.goto(&protected).await.unwrap();
    wait_for(&client, "username").await;
    let page = client.source().await.unwrap();
    assert!(
        page.contains("Warehouse 13") && page.contains("company"),
        "{page}"
    );
    std::fs::write(
        shots.join("login-page.png"),
        client.screenshot().await.unwrap(),
    )
    .unwrap();

    // A wrong password first: the page says so and keeps the form.
    type_into(&client, "username", "jane").await;
    type_into(&client, "password", "not-her-password").await;
    submit(&client, "allow").await;
    assert_eq!(
        text_of(&client, "#error").await,
        "Wrong user name or password."
    );
    std::fs::write(
        shots.join("login-wrong-password.png"),
        client.screenshot().await.unwrap(),
    )
    .unwrap();

    type_into(&client, "username", "jane").await;
    type_into(&client, "password", "jane-testbed-password").await;
    submit(&client, "allow").await;

    let landed = url::Url::parse(&protected).unwrap();
    client
        .wait()
        .at_most(Duration::from_secs(15))
        .for_url(&landed)
        .await
        .expect("back at the page asked for");
    let body = text_of(&client, "body").await;
    std::fs::write(
        shots.join("landing-page.png"),
        client.screenshot().await.unwrap(),
    )
    .unwrap();
    let start = body
        .find('{')
        .unwrap_or_else(|| panic!("the backend's answer: {body}"));
    let seen: Value = serde_json::from_str(&body[start..]).unwrap_or_else(|_| panic!("{body}"));
    assert_eq!(seen["path"], "/people/containers/C1");
    assert_eq!(seen["headers"]["x-person-id"], "did:ishare:person.jane-doe");
    assert_eq!(seen["headers"]["x-person-last-name"], "Doe");
    assert!(seen["headers"].get("cookie").is_none(), "{seen}");

    // Signed in, the Deny of the owner's policy is the person's too.
    client
        .goto(&format!("{}/people/containers/SECRET-1", env.url))
        .await
        .unwrap();
    assert!(text_of(&client, "body").await.contains("access_denied"));

    // The logout page's button signs her out (Chromium's POST from the gateway's own page); the
    // page asked for then sends her to sign in again.
    client.goto(&format!("{}/logout", env.url)).await.unwrap();
    submit(&client, "logout").await;
    assert_eq!(text_of(&client, "#signed-out").await, "You are signed out.");
    client.goto(&protected).await.unwrap();
    wait_for(&client, "username").await;

    client.close().await.unwrap();
    env.stop().await;
}

/// Ask the registry for the newcomer's evidence about container C9: the status and the effect.
async fn ask(bed: &Bed) -> (u16, Option<String>) {
    let token = bed.token(AR, NEWCOMER).await;
    let (status, body) = status_json(
        bed.http
            .post(format!("{}/delegation", bed.url(AR)))
            .bearer_auth(token)
            .json(&json!({"delegationRequest": mask(), "previous_steps": []}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let effect = body["delegation_token"].as_str().map(|t| {
        claims(t)["delegationEvidence"]["policySets"][0]["policies"][0]["rules"][0]["effect"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    });
    (status, effect)
}

fn mask() -> Value {
    json!({
        "policyIssuer": OWNER,
        "target": {"accessSubject": NEWCOMER},
        "policySets": [{"policies": [{
            "target": {"resource": {"type": "CONTAINER", "identifiers": ["C9"], "attributes": ["*"]},
                       "actions": ["iSHARE.READ"], "environment": {"serviceProviders": [SP]}},
            "rules": [{"effect": "Permit"}]}]}]
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_administrator_adds_a_policy_on_the_registry_page() {
    let bed = Bed::start(BIN).await;
    assert_eq!(ask(&bed).await.0, 404, "no policy yet");
    let driver = driver().await;
    let client = browser(&bed, &driver).await;
    let shots = screenshots();

    client
        .goto(&format!("{}/admin", bed.url(AR)))
        .await
        .unwrap();
    wait_for(&client, "username").await;
    type_into(&client, "username", "admin").await;
    type_into(&client, "password", "admin-testbed-password").await;
    submit(&client, "sign-in").await;
    let listed = text_of(&client, "#policies").await;
    assert!(
        listed.contains(OWNER) && !listed.contains(NEWCOMER),
        "{listed}"
    );

    // A policy with a defect is refused with the reason POST /policy gives.
    let mut policy = json!({
        "notBefore": 1_577_836_800, "notOnOrAfter": 4_102_444_800_i64,
        "policyIssuer": OWNER,
        "target": {"accessSubject": NEWCOMER},
        "policySets": [{"maxDelegationDepth": 0, "policies": [{
            "target": {"resource": {"type": "CONTAINER", "identifiers": ["C9"], "attributes": ["*"]},
                       "actions": ["iSHARE.READ"], "environment": {"serviceProviders": [SP]}},
            "rules": [{"effect": "Deny"}]}]}]
    });
    type_into(&client, "policy", &policy.to_string()).await;
    submit(&client, "add").await;
    let notice = text_of(&client, "#notice").await;
    assert!(
        notice.contains("does not contain a rule with the Effect 'Permit'"),
        "{notice}"
    );

    policy["policySets"][0]["policies"][0]["rules"][0]["effect"] = json!("Permit");
    type_into(&client, "policy", &policy.to_string()).await;
    submit(&client, "add").await;
    assert_eq!(text_of(&client, "#notice").await, "The policy is added.");
    assert!(text_of(&client, "#policies").await.contains(NEWCOMER));
    std::fs::write(
        shots.join("admin-page.png"),
        client.screenshot().await.unwrap(),
    )
    .unwrap();
    client.close().await.unwrap();

    assert_eq!(ask(&bed).await, (200, Some("Permit".to_string())));
    bed.stop().await;
}
