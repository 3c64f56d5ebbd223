//! What an attacker tries against people's sign-in, refused without harm to the people: one client
//! starting sign-ins as fast as it can; another site's link or form signing a person out; guessing
//! passwords at the identity provider and at the registry's `/admin`; another party redeeming a
//! person's code. Clients are told apart by their loopback address (127.0.0.1, 127.0.0.2,
//! 127.0.0.3).

use crate::support;

use ishare_gateway::html::form_of;
use ishare_gateway::scheme::openid;
use ishare_gateway::testbed::person::{Browser, Page};
use serde_json::Value;
use std::net::IpAddr;
use support::people::*;
use support::*;

const BIN: &str = "sign_in_attacks";
/// A third loopback address.
const THIRD_CLIENT: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 3));
/// Wrong passwords taken before a user name or an address waits.
const TAKEN: usize = 4;
const JOHN_PASSWORD: &str = "john-testbed-password";
const ADMIN_PASSWORD: &str = "admin-testbed-password";

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_trusted_balancer_sign_in_starts_are_counted_per_forwarded_client() {
    let more =
        "starts_per_address_per_minute = 2\n\n[forwarding]\ntrusted_proxies = [\"127.0.0.2\"]\n";
    let env = start_people(BIN, more).await;
    let url = format!("{}/people/containers/C1", env.url);
    let start = |client: &reqwest::Client, forwarded_for: &str| {
        client
            .get(&url)
            .header("X-Forwarded-For", forwarded_for)
            .send()
    };
    // The balancer (127.0.0.2) forwards two clients: one spends its starts, the other has its own.
    let balancer = client_on(&env, OTHER_CLIENT);
    for expected in [200, 200, 429] {
        let resp = start(&balancer, "198.51.100.7").await.unwrap();
        assert_eq!(resp.status(), expected);
    }
    let resp = start(&balancer, "198.51.100.8").await.unwrap();
    assert_eq!(resp.status(), 200);
    // A client that is no trusted proxy cannot name another address to get more.
    let direct = client_on(&env, THIRD_CLIENT);
    let statuses: Vec<u16> = futures::future::join_all(
        ["203.0.113.1", "203.0.113.2", "203.0.113.3"].map(|a| start(&direct, a)),
    )
    .await
    .into_iter()
    .map(|r| r.unwrap().status().as_u16())
    .collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == 429).count(),
        1,
        "{statuses:?}"
    );
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

/// What a sign-in form answered.
struct Answered {
    status: u16,
    retry_after: Option<String>,
    page: String,
}

/// Submit the sign-in form of the page at `url` (whose text is `page`) from `client`, as
/// `username` with `password` (consenting to the profile scope, where a scope is asked).
async fn try_password(
    client: &reqwest::Client,
    (url, page): (&str, &str),
    username: &str,
    password: &str,
) -> Answered {
    let (action, mut fields) = form_of(page).expect("a sign-in form");
    for (name, value) in [
        ("username", username),
        ("password", password),
        ("decision", "allow"),
        ("scope", "profile"),
    ] {
        fields.push((name.into(), value.into()));
    }
    let action = url::Url::parse(url).unwrap().join(&action).unwrap();
    let answer = client.post(action).form(&fields).send().await.unwrap();
    Answered {
        status: answer.status().as_u16(),
        retry_after: answer
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap().to_string()),
        page: answer.text().await.unwrap(),
    }
}

/// A refusal of a sign-in form while the user name or the address waits: 429, `Retry-After`, and
/// the form again, saying when to try again.
fn assert_waits(answered: &Answered) {
    let page = &answered.page;
    assert_eq!(answered.status, 429, "{page}");
    let seconds: u64 = answered.retry_after.as_deref().unwrap().parse().unwrap();
    assert!((1..=30).contains(&seconds), "{seconds}");
    assert!(
        page.contains("Too many wrong passwords") && page.contains("try again in"),
        "{page}"
    );
    assert!(page.contains(r#"id="password""#), "the form again: {page}");
}

/// The identity provider's login page, reached from the gateway's page for people.
async fn login_page(person: &mut Browser, url: &str) -> Page {
    let start = person.get(url).await.unwrap();
    let page = person.submit(&start, &[]).await.unwrap();
    assert_eq!(page.status, 200, "{}", page.body);
    page
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guessing_passwords_at_the_identity_provider_makes_the_user_name_and_the_address_wait() {
    let env = start_people(BIN, "").await;
    let url = format!("{}/people/containers/C1", env.url);
    let attacker = client_on(&env, OTHER_CLIENT);
    let page = login_page(&mut browser_on(&env, OTHER_CLIENT), &url).await;
    let form = (page.url.as_str(), page.body.as_str());
    for guess in 0..TAKEN {
        let answered = try_password(&attacker, form, "jane", &format!("guess-{guess}")).await;
        assert_eq!(answered.status, 401, "{}", answered.page);
    }
    // Jane's user name waits, even with her password, from every address.
    assert_waits(&try_password(&attacker, form, "jane", PASSWORD).await);
    let hers = login_page(&mut browser(&env), &url).await;
    let her_form = (hers.url.as_str(), hers.body.as_str());
    assert_waits(&try_password(&env.bed.http, her_form, "jane", PASSWORD).await);
    // The guessing address waits, for every user name.
    assert_waits(&try_password(&attacker, form, "john", JOHN_PASSWORD).await);
    // Everyone else signs in.
    let signed = browser(&env)
        .sign_in(&url, "john", JOHN_PASSWORD)
        .await
        .unwrap();
    assert_eq!(signed.returned.status, 303, "{}", signed.returned.body);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guessing_the_registry_admin_password_makes_the_user_name_and_the_address_wait() {
    let bed = Bed::start(BIN).await;
    let admin = format!("{}/admin", bed.url(AR));
    let page = bed
        .http
        .get(&admin)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let form = (admin.as_str(), page.as_str());
    let from = |address| client_trusting_from(&bed.keys.ca_file, Some(address));

    // One address guessing user names waits, for every user name; the others do not.
    let guesser = from(THIRD_CLIENT);
    for guess in 0..TAKEN {
        let answered = try_password(&guesser, form, &format!("root-{guess}"), "root").await;
        assert_eq!(answered.status, 401, "{}", answered.page);
    }
    assert_waits(&try_password(&guesser, form, "admin", ADMIN_PASSWORD).await);
    let signed = try_password(&bed.http, form, "admin", ADMIN_PASSWORD).await;
    assert_eq!(signed.status, 303, "{}", signed.page);

    // Guessing one user name's password: it waits, from every address.
    let guesser = from(OTHER_CLIENT);
    for guess in 0..TAKEN {
        let answered = try_password(&guesser, form, "admin", &format!("guess-{guess}")).await;
        assert_eq!(answered.status, 401, "{}", answered.page);
    }
    assert_waits(&try_password(&bed.http, form, "admin", ADMIN_PASSWORD).await);
    bed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_code_another_party_redeems_is_refused_and_stays_the_persons() {
    let env = start_people(BIN, "").await;
    let url = format!("{}/people/containers/C1", env.url);
    let mut person = browser(&env);
    let back = consented(&env, &mut person, &url).await;

    let (status, body) = status_json(exchange(&env, SP2, &param(&back, "code")).await).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant"))
    );
    assert_eq!(
        body["error_description"],
        "the code was issued to another client"
    );

    // The person's own sign-in goes on with it.
    let returned = person.get(&back).await.unwrap();
    assert_eq!(returned.status, 303, "{}", returned.body);
    assert_eq!(signed_in_as(&mut person, &url).await.as_deref(), Some(JANE));
    env.stop().await;
}
