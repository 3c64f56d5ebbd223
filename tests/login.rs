//! People: the testbed identity provider (authorize with a signed and encrypted request object,
//! the login page, token, userinfo) and the gateway as the service provider that signs people in,
//! decides their delegation with them as the access subject, and tells the backend who they are.
//! Every failure of a sign-in is a page with its status, never a session.

use crate::support;

use ishare_gateway::html::form_of;
use ishare_gateway::scheme::jwe::encrypt_to_certificate;
use ishare_gateway::scheme::openid;
use ishare_gateway::scheme::Timestamp;
use ishare_gateway::testbed::person::Page;
use ishare_gateway::testbed::pki::TestPki;
use serde_json::{json, Value};
use std::time::Duration;
use support::people::*;
use support::*;

const BIN: &str = "login";
async fn start() -> Env {
    start_people(BIN, "").await
}

fn echoed(page: &Page) -> Value {
    serde_json::from_str(&page.body).unwrap_or_else(|_| panic!("not the echo: {}", page.body))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_signs_in_and_the_backend_learns_who_they_are() {
    let env = start().await;
    let mut person = browser(&env);
    let url = format!("{}/people/containers/C1", env.url);
    let signed = person.sign_in(&url, "jane", PASSWORD).await.unwrap();
    assert!(
        signed.login_page.body.contains("Warehouse 13"),
        "the client is named"
    );
    assert_eq!(signed.returned.status, 303, "{}", signed.returned.body);
    let cookie = signed
        .returned
        .set_cookies
        .iter()
        .find(|c| c.starts_with("__Host-ishare-session="))
        .expect("a session cookie");
    for attribute in [
        "Secure",
        "HttpOnly",
        "SameSite=Lax",
        "Path=/",
        "Max-Age=28800",
    ] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    let landing = signed.landing.expect("back at the page");
    assert_eq!(landing.status, 200, "{}", landing.body);
    let seen = echoed(&landing);
    assert_eq!(seen["path"], "/people/containers/C1");
    let headers = &seen["headers"];
    assert_eq!(headers["x-person-id"], JANE);
    assert_eq!(headers["x-person-first-name"], "Jane");
    assert_eq!(headers["x-person-company-name"], "ABC Trucking");
    assert!(
        headers.get("x-person-email").is_none(),
        "email was not asked for"
    );
    assert!(headers.get("x-consumer-party-id").is_none(), "{headers}");
    assert!(
        headers.get("cookie").is_none(),
        "our cookies stay here: {headers}"
    );

    // A client's own copy of a person header never reaches the backend, nor our cookies; other
    // cookies do.
    let session = person.cookies["__Host-ishare-session"].clone();
    let answer = env
        .bed
        .http
        .get(format!("{}/people/containers/C2", env.url))
        .header(
            "cookie",
            format!("theme=dark; __Host-ishare-session={session}"),
        )
        .header("x-person-id", "did:ishare:person.someone-else")
        .header("x_person_company_id", "EU.EORI.NL000000005")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let seen: Value = answer.json().await.unwrap();
    assert_eq!(seen["headers"]["x-person-id"], JANE);
    assert_eq!(seen["headers"]["cookie"], "theme=dark");
    assert!(seen["headers"].get("x_person_company_id").is_none());
    // The same header on a machine route is removed too.
    let token = env.token(CONSUMER).await;
    let seen: Value = env
        .bed
        .http
        .get(format!("{}/api/things/T1", env.url))
        .bearer_auth(&token)
        .header("x-person-id", JANE)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(seen["headers"].get("x-person-id").is_none(), "{seen}");

    // The person is the access subject: the owner's Deny on SECRET-1 holds for them.
    let secret = person
        .get(&format!("{}/people/containers/SECRET-1", env.url))
        .await
        .unwrap();
    assert_eq!(secret.status, 403, "{}", secret.body);
    assert!(secret.body.contains("\"reason\""), "{}", secret.body);

    // A request that changes something must come from the gateway's own pages: another site's
    // form would carry the session cookie too.
    let post = |origin: Option<&str>| {
        let mut request = env
            .bed
            .http
            .post(&url)
            .header("cookie", format!("__Host-ishare-session={session}"))
            .body("{}");
        if let Some(o) = origin {
            request = request.header("origin", o);
        }
        request.send()
    };
    for origin in [None, Some("https://elsewhere.example")] {
        let answer = post(origin).await.unwrap();
        assert_eq!(answer.status(), 403, "{origin:?}");
        assert!(answer.text().await.unwrap().contains("cross_site_request"));
    }
    // From our own origin it goes on to the decision: the registry denies the person creating.
    let (status, body) = status_json(post(Some(&env.url)).await.unwrap()).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (403, Some("denied_by_rule"))
    );

    // A bearer token is not a person.
    let answer = env
        .bed
        .http
        .get(&url)
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(
        answer.status(),
        200,
        "a GET without a session is sent to sign in"
    );
    assert!(answer
        .text()
        .await
        .unwrap()
        .contains(openid::AUTHORIZE_PATH));
    let post = env.bed.http.post(&url).body("{}").send().await.unwrap();
    assert_eq!(post.status(), 401);
    assert!(post.text().await.unwrap().contains("login_required"));

    // The logout page's button ends the session: the next request is sent to sign in again.
    let page = person.get(&format!("{}/logout", env.url)).await.unwrap();
    assert_eq!(page.status, 200);
    let out = person.submit(&page, &[]).await.unwrap();
    assert_eq!(out.status, 200);
    assert!(out.body.contains("signed-out"), "{}", out.body);
    assert!(!person.cookies.contains_key("__Host-ishare-session"));
    let again = env
        .bed
        .http
        .get(&url)
        .header("cookie", format!("__Host-ishare-session={session}"))
        .send()
        .await
        .unwrap();
    let text = again.text().await.unwrap();
    assert!(
        text.contains(openid::AUTHORIZE_PATH),
        "the old cookie opens nothing: {text}"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_failure_of_a_return_is_a_page_and_never_a_session() {
    let env = start().await;
    let url = format!("{}/people/containers/C1", env.url);

    // Another state than the one this browser started with.
    let mut person = browser(&env);
    let back = consented(&env, &mut person, &url).await;
    let forged = back.replace(&param(&back, "state"), "another-state");
    let page = person.get(&forged).await.unwrap();
    assert_eq!(
        (page.status, reason(&page.body).as_str()),
        (400, "state_mismatch")
    );
    no_session(&page);
    // The right return, in a browser that did not start the sign-in.
    let mut stranger = browser(&env);
    let page = stranger.get(&back).await.unwrap();
    assert_eq!(
        (page.status, reason(&page.body).as_str()),
        (400, "state_mismatch")
    );
    no_session(&page);
    // The right one works once; its replay is refused.
    let page = person.get(&back).await.unwrap();
    assert_eq!(page.status, 303, "{}", page.body);
    let replay = person.get(&back).await.unwrap();
    assert_eq!(
        (replay.status, reason(&replay.body).as_str()),
        (400, "state_mismatch")
    );

    // A code used already (by someone who intercepted it) is refused by the identity provider.
    let mut person = browser(&env);
    let back = consented(&env, &mut person, &url).await;
    let stolen = exchange(&env, SP, &param(&back, "code")).await;
    assert_eq!(stolen.status(), 200);
    let page = person.get(&back).await.unwrap();
    assert_eq!(
        (page.status, reason(&page.body).as_str()),
        (401, "code_refused"),
        "{}",
        page.body
    );
    no_session(&page);

    // The person cancels at the identity provider.
    let mut person = browser(&env);
    let start = person.get(&url).await.unwrap();
    let login = person.submit(&start, &[]).await.unwrap();
    let cancelled = person
        .submit(&login, &[("decision", "deny")])
        .await
        .unwrap();
    let page = person
        .get(cancelled.location.as_deref().unwrap())
        .await
        .unwrap();
    assert_eq!(
        (page.status, reason(&page.body).as_str()),
        (401, "login_refused")
    );
    assert!(page.body.contains("access_denied"), "{}", page.body);

    // A return without a code.
    let mut person = browser(&env);
    let back = consented(&env, &mut person, &url).await;
    let codeless = back.replace(&format!("code={}", param(&back, "code")), "code=");
    let page = person.get(&codeless).await.unwrap();
    assert_eq!(
        (page.status, reason(&page.body).as_str()),
        (400, "invalid_return")
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_token_for_someone_else_and_a_provider_that_is_down_open_no_session() {
    for (tamper, expected) in [
        (Tamper::Audience, "aud does not name us"),
        (Tamper::Nonce, "nonce"),
        (Tamper::Subject, "is a party of the scheme, not a person"),
    ] {
        let bed = Bed::start(BIN).await;
        let (proxy, task) = tampering_provider(&bed, tamper).await;
        let (dir, ports) = gateway_dir(&bed, BIN, RULES, &login_section(&proxy), |t| t);
        let env = Env::launch(bed, dir, &ports).await;
        let url = format!("{}/people/containers/C1", env.url);
        let mut person = browser(&env);
        let back = consented(&env, &mut person, &url).await;
        let page = person.get(&back).await.unwrap();
        assert_eq!(
            (page.status, reason(&page.body).as_str()),
            (401, "invalid_id_token")
        );
        assert!(page.body.contains(expected), "{}", page.body);
        no_session(&page);

        // The provider goes down between the consent and the return.
        let mut person = browser(&env);
        let back = consented(&env, &mut person, &url).await;
        task.abort();
        let _ = task.await;
        let page = person.get(&back).await.unwrap();
        assert_eq!(
            (page.status, reason(&page.body).as_str()),
            (502, "identity_provider_unavailable"),
            "{}",
            page.body
        );
        no_session(&page);
        env.stop().await;
    }
}

async fn authorize(env: &Env, form: &[(&str, &str)]) -> reqwest::Response {
    env.bed
        .http
        .post(format!("{}{}", env.bed.url(IDP), openid::AUTHORIZE_PATH))
        .form(form)
        .send()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_identity_provider_refuses_each_bad_authorize_request_clearly() {
    let env = start().await;
    let plain = |scope: &'static str| {
        [
            ("response_type", "code"),
            ("client_id", SP),
            ("scope", scope),
        ]
    };
    let good = request_object(&env, authorize_claims(&env), true);

    // In order: the login page, naming the client and the scopes to consent to.
    let mut form = plain("openid profile email").to_vec();
    form.push(("request", &good));
    let answer = authorize(&env, &form).await;
    assert_eq!(answer.status(), 200);
    let page = answer.text().await.unwrap();
    assert!(
        page.contains("Warehouse 13") && page.contains("value=\"email\""),
        "{page}"
    );
    assert!(form_of(&page).is_some_and(|(action, _)| action == "/openid_connect1.0/login"));

    // Refusals shown as a page (the redirect_uri cannot be trusted yet).
    let signed_only = request_object(&env, authorize_claims(&env), false);
    let mut untrusted_claims = authorize_claims(&env);
    untrusted_claims["jti"] = json!("other-ca");
    let other = TestPki::generate("Other", time::OffsetDateTime::now_utc())
        .unwrap()
        .issue_party(SP, "Warehouse 13")
        .unwrap()
        .signing_identity();
    let untrusted = encrypt_to_certificate(
        &env.bed.creds(IDP).chain_der[0],
        &other.sign_raw(&untrusted_claims).unwrap(),
    )
    .unwrap();
    for (client, request, error, words) in [
        (
            "EU.EORI.NL000000098",
            good.as_str(),
            "invalid_client",
            "not a party of the scheme",
        ),
        (
            SP,
            signed_only.as_str(),
            "invalid_request_object",
            "not encrypted",
        ),
        (
            SP,
            untrusted.as_str(),
            "invalid_request_object",
            "not signed by a trusted",
        ),
    ] {
        let answer = authorize(
            &env,
            &[
                ("response_type", "code"),
                ("client_id", client),
                ("scope", "openid profile email"),
                ("request", request),
            ],
        )
        .await;
        assert_eq!(answer.status(), 400, "{error}");
        let page = answer.text().await.unwrap();
        assert!(
            page.contains(&format!("data-error=\"{error}\"")) && page.contains(words),
            "{page}"
        );
    }

    // Refusals sent back to the client's redirect_uri, with the state.
    let mismatch = request_object(&env, authorize_claims(&env), true);
    let mut no_openid_claims = authorize_claims(&env);
    no_openid_claims["scope"] = json!("profile");
    let no_openid = request_object(&env, no_openid_claims, true);
    for (scope, request, error) in [
        ("openid profile", mismatch.as_str(), "invalid_request"),
        ("profile", no_openid.as_str(), "invalid_scope"),
    ] {
        let answer = authorize(
            &env,
            &[
                ("response_type", "code"),
                ("client_id", SP),
                ("scope", scope),
                ("request", request),
            ],
        )
        .await;
        assert_eq!(answer.status(), 303, "{error}");
        let location = answer.headers()["location"].to_str().unwrap().to_string();
        assert!(
            location.starts_with(&format!("{}{}", env.url, openid::RETURN_PATH)),
            "{location}"
        );
        assert_eq!(
            (
                param(&location, "error").as_str(),
                param(&location, "state").as_str()
            ),
            (error, "state-1")
        );
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_identity_provider_gives_a_code_once_and_attributes_as_consented() {
    let env = start().await;
    let mut person = browser(&env);
    // Sign in as the testbed's page asks, with a wrong password first.
    let request = request_object(&env, authorize_claims(&env), true);
    let page = person
        .post(
            &format!("{}{}", env.bed.url(IDP), openid::AUTHORIZE_PATH),
            &[
                ("response_type".into(), "code".into()),
                ("client_id".into(), SP.into()),
                ("scope".into(), "openid profile email".into()),
                ("request".into(), request),
            ],
        )
        .await
        .unwrap();
    let wrong = person
        .submit(
            &page,
            &[
                ("username", "jane"),
                ("password", "wrong"),
                ("decision", "allow"),
                ("scope", "email"),
            ],
        )
        .await
        .unwrap();
    assert_eq!(wrong.status, 401);
    assert!(
        wrong.body.contains("Wrong user name or password"),
        "{}",
        wrong.body
    );
    let back = person
        .submit(
            &wrong,
            &[
                ("username", "jane"),
                ("password", PASSWORD),
                ("decision", "allow"),
                ("scope", "email"),
            ],
        )
        .await
        .unwrap();
    assert_eq!(back.status, 303, "{}", back.body);
    let location = back.location.unwrap();
    assert_eq!(param(&location, "state"), "state-1");
    let code = param(&location, "code");

    let answer = exchange(&env, SP, &code).await;
    assert_eq!(answer.status(), 200);
    assert_eq!(answer.headers()["cache-control"], "no-store");
    assert_eq!(answer.headers()["pragma"], "no-cache");
    let tokens: Value = answer.json().await.unwrap();
    assert_eq!(tokens["token_type"], "Bearer");
    assert!(tokens["expires_in"].as_u64().unwrap() > 0);
    let id = claims(tokens["id_token"].as_str().unwrap());
    assert_eq!(
        (id["iss"].as_str(), id["aud"].as_str(), id["sub"].as_str()),
        (Some(IDP), Some(SP), Some(JANE))
    );
    assert_eq!(id["nonce"], "nonce-1");
    assert_eq!(
        id["exp"].as_i64().unwrap() - id["iat"].as_i64().unwrap(),
        30
    );

    let again = exchange(&env, SP, &code).await;
    assert_eq!(again.status(), 400);
    assert_eq!(
        again.json::<Value>().await.unwrap()["error"],
        "invalid_grant"
    );

    // Userinfo: only what was consented (email, not profile), and evidence about the person on request.
    let access = tokens["access_token"].as_str().unwrap();
    let userinfo = |body: Vec<(&'static str, String)>| {
        env.bed
            .http
            .post(format!("{}{}", env.bed.url(IDP), openid::USERINFO_PATH))
            .bearer_auth(access)
            .form(&body)
            .send()
    };
    let (status, body) = status_json(userinfo(Vec::new()).await.unwrap()).await;
    assert_eq!(status, 200, "{body}");
    let info = claims(body[openid::USERINFO_TOKEN].as_str().unwrap());
    assert_eq!(info["sub"], JANE);
    assert_eq!(info["email"], "jane.doe@abc-trucking.test");
    assert!(info.get("first_name").is_none(), "{info}");
    let now = Timestamp::now().secs();
    let ask = env
        .bed
        .identity(SP)
        .sign_raw(&json!({
            "iss": SP, "sub": SP, "aud": IDP, "jti": uuid::Uuid::new_v4().to_string(), "iat": now, "exp": now + 30,
            "delegationRequest": {
                "policyIssuer": OWNER,
                "target": {"accessSubject": JANE},
                "policySets": [{"policies": [{
                    "target": {"resource": {"type": "CONTAINER", "identifiers": ["C1"], "attributes": ["*"]},
                               "actions": ["iSHARE.READ"], "environment": {"serviceProviders": [SP]}},
                    "rules": [{"effect": "Permit"}]}]}]
            }
        }))
        .unwrap();
    let (status, body) = status_json(userinfo(vec![("request", ask)]).await.unwrap()).await;
    assert_eq!(status, 200, "{body}");
    let info = claims(body[openid::USERINFO_TOKEN].as_str().unwrap());
    let evidence = claims(info[openid::DELEGATION_TOKEN].as_str().unwrap());
    assert_eq!(
        evidence["delegationEvidence"]["policySets"][0]["policies"][0]["rules"][0]["effect"],
        "Permit"
    );
    let bad = env
        .bed
        .http
        .post(format!("{}{}", env.bed.url(IDP), openid::USERINFO_PATH))
        .bearer_auth("not-a-token")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 401);

    // The capabilities list the endpoints of the human flow.
    let caps = env
        .bed
        .http
        .get(format!("{}/capabilities", env.bed.url(IDP)))
        .send()
        .await
        .unwrap();
    let (_, body) = status_json(caps).await;
    let text = claims(body["capabilities_token"].as_str().unwrap()).to_string();
    for path in [
        openid::AUTHORIZE_PATH,
        openid::TOKEN_PATH,
        openid::USERINFO_PATH,
    ] {
        assert!(text.contains(path), "{path}: {text}");
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_code_is_refused() {
    let mut config = testbed_config(BIN);
    config.identity_provider.code_lifetime = Duration::from_millis(500);
    let keys = prepare_keys(&config);
    let testbed = ishare_gateway::testbed::Testbed::start(&config)
        .await
        .unwrap();
    let bed = Bed {
        http: client_trusting(&keys.ca_file),
        testbed,
        keys,
    };
    let (dir, ports) = gateway_dir(&bed, BIN, RULES, &login_section(&bed.url(IDP)), |t| t);
    let env = Env::launch(bed, dir, &ports).await;
    let mut person = browser(&env);
    let back = consented(
        &env,
        &mut person,
        &format!("{}/people/containers/C1", env.url),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let page = person.get(&back).await.unwrap();
    assert_eq!(
        (page.status, reason(&page.body).as_str()),
        (401, "code_refused"),
        "{}",
        page.body
    );
    assert!(page.body.contains("expired"), "{}", page.body);
    no_session(&page);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_on_redis_share_sessions_and_nobody_is_signed_in_when_it_is_gone() {
    let redis = RedisServer::start().await;
    let bed = Bed::start(BIN).await;
    let secret = scratch_dir(BIN).join("session.key");
    std::fs::write(&secret, "0123456789abcdef0123456789abcdef-test-only").unwrap();
    let extra = format!(
        "{}session_secret_file = \"{}\"\n[replay]\nstore = \"redis\"\nurl = \"{}\"\ntimeout = \"300ms\"\n",
        login_section(&bed.url(IDP)),
        secret.display(),
        redis.url()
    );
    let (dir_a, ports_a) = gateway_dir(&bed, BIN, RULES, &extra, |t| t);
    let (dir_b, ports_b) = gateway_dir(&bed, BIN, RULES, &extra, |t| t);
    let a = Env::launch(bed, dir_a, &ports_a).await;
    let b_gateway = launch(&dir_b);
    let b_url = format!("https://127.0.0.1:{}", ports_b.tls);
    wait_ready(
        &format!("http://127.0.0.1:{}", ports_b.admin),
        &format!("http://127.0.0.1:{}", ports_b.plain),
    )
    .await;

    // Signed in at one instance, known at the other.
    let mut person = browser(&a);
    let signed = person
        .sign_in(&format!("{}/people/containers/C1", a.url), "jane", PASSWORD)
        .await
        .unwrap();
    assert_eq!(signed.landing.map(|l| l.status), Some(200));
    let at_b = person
        .get(&format!("{b_url}/people/containers/C3"))
        .await
        .unwrap();
    assert_eq!(at_b.status, 200, "{}", at_b.body);
    assert_eq!(echoed(&at_b)["headers"]["x-person-id"], JANE);

    // Signed out at one instance, out at every one.
    let session = person.cookies["__Host-ishare-session"].clone();
    let page = person.get(&format!("{b_url}/logout")).await.unwrap();
    assert_eq!(person.submit(&page, &[]).await.unwrap().status, 200);
    person
        .cookies
        .insert("__Host-ishare-session".into(), session.clone());
    let at_a = person
        .get(&format!("{}/people/containers/C1", a.url))
        .await
        .unwrap();
    assert!(at_a.body.contains(openid::AUTHORIZE_PATH), "{}", at_a.body);

    // Without the store, a session cannot be checked: refused, never assumed.
    let mut person = browser(&a);
    person
        .sign_in(&format!("{}/people/containers/C1", a.url), "jane", PASSWORD)
        .await
        .unwrap();
    redis.kill();
    let page = person
        .get(&format!("{}/people/containers/C1", a.url))
        .await
        .unwrap();
    assert_eq!(
        (page.status, reason(&page.body).as_str()),
        (503, "session_store_unavailable")
    );
    tokio::task::spawn_blocking(move || b_gateway.stop())
        .await
        .unwrap();
    a.stop().await;
}
