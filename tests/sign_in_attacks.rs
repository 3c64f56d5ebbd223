//! What an attacker tries against people's sign-in, refused without harm to the people: one client
//! starting sign-ins as fast as it can; another site's link or form signing a person out. Clients
//! are told apart by their loopback address (127.0.0.1 and 127.0.0.2).

mod support;

use ishare_gateway::scheme::openid;
use ishare_gateway::testbed::person::Browser;
use serde_json::Value;
use support::people::*;

const BIN: &str = "sign_in_attacks";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_client_starting_sign_ins_as_fast_as_it_can_leaves_the_others_theirs() {
    let env = start_people(BIN, "starts_per_address_per_minute = 3\n").await;
    let url = format!("{}/people/containers/C1", env.url);
    let greedy = client_on(&env, OTHER_CLIENT);
    for _ in 0..3 {
        let started = greedy.get(&url).send().await.unwrap();
        assert_eq!(started.status(), 200);
    }
    for _ in 0..20 {
        let refused = greedy.get(&url).send().await.unwrap();
        assert_eq!(refused.status(), 429);
        let retry_after: u64 = refused.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((1..=20).contains(&retry_after), "{retry_after}");
        let page = refused.text().await.unwrap();
        assert_eq!(reason(&page), "too_many_logins_from_address", "{page}");
        assert!(page.contains("try again in"), "{page}");
    }

    // Everyone else still starts a sign-in.
    let other = env.bed.http.get(&url).send().await.unwrap();
    assert_eq!(other.status(), 200);
    assert!(other.text().await.unwrap().contains(openid::AUTHORIZE_PATH));
    env.stop().await;
}

/// The person the backend was told of when `person` opens `url`, if it was.
async fn signed_in_as(person: &mut Browser, url: &str) -> Option<String> {
    let page = person.get(url).await.unwrap();
    let seen: Value = serde_json::from_str(&page.body).ok()?;
    seen["headers"]["x-person-id"].as_str().map(str::to_string)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_site_cannot_sign_a_person_out() {
    let env = start_people(BIN, "").await;
    let url = format!("{}/people/containers/C1", env.url);
    let logout = format!("{}/logout", env.url);
    let mut person = browser(&env);
    person.sign_in(&url, "jane", PASSWORD).await.unwrap();
    let session = format!(
        "__Host-ishare-session={}",
        person.cookies["__Host-ishare-session"]
    );

    // A GET (another site's link or image) shows the page with the button, and signs nobody out.
    let page = person.get(&logout).await.unwrap();
    assert_eq!(page.status, 200);
    assert!(
        page.body
            .contains(r#"<form method="post" action="/logout">"#),
        "{}",
        page.body
    );
    assert!(person.cookies.contains_key("__Host-ishare-session"));
    assert_eq!(signed_in_as(&mut person, &url).await.as_deref(), Some(JANE));

    // Another site's form: refused, whatever the browser says of where it comes from.
    let elsewhere = [
        vec![("origin", "https://elsewhere.example")],
        vec![("origin", "null")],
        vec![("sec-fetch-site", "cross-site")],
        vec![("sec-fetch-site", "same-site"), ("referer", &logout)],
        vec![("referer", "https://elsewhere.example/page")],
        vec![],
    ];
    for headers in elsewhere {
        let mut request = env.bed.http.post(&logout).header("cookie", &session);
        for (name, value) in &headers {
            request = request.header(*name, *value);
        }
        let answer = request.send().await.unwrap();
        assert_eq!(answer.status(), 403, "{headers:?}");
        assert!(answer.headers().get("set-cookie").is_none(), "{headers:?}");
        let page = answer.text().await.unwrap();
        assert_eq!(reason(&page), "cross_site_request", "{headers:?}: {page}");
    }
    assert_eq!(signed_in_as(&mut person, &url).await.as_deref(), Some(JANE));

    // From our own page (a browser that sends no Origin but the page it was on): signed out.
    let answer = env
        .bed
        .http
        .post(&logout)
        .header("cookie", &session)
        .header("referer", &logout)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    assert!(answer.text().await.unwrap().contains("signed-out"));
    assert_eq!(signed_in_as(&mut person, &url).await, None);
    env.stop().await;
}
