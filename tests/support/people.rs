//! People signing in: the gateway's `[login]` at the testbed identity provider, a route for them,
//! scripted browsers (also from other loopback addresses), and the identity provider's steps taken
//! by hand.

use super::{client_trusting_from, Env, SP};
use ishare_gateway::scheme::jwe::encrypt_to_certificate;
use ishare_gateway::scheme::openid;
use ishare_gateway::scheme::Timestamp;
use ishare_gateway::testbed::person::{html_text, Browser, Page};
use serde_json::{json, Value};
use std::net::IpAddr;

pub const IDP: &str = "EU.EORI.NL000000007";
pub const JANE: &str = "did:ishare:person.jane-doe";
pub const PASSWORD: &str = "jane-testbed-password";
/// Another loopback address: another client to whoever counts clients by address.
pub const OTHER_CLIENT: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 2));

pub const RULES: &str = r#"
[[route]]
name = "people-containers"
methods = ["GET", "POST"]
path = "/people/containers/{id}"
upstream = "echo"
login = true
[route.delegation]
policy_issuer = "EU.EORI.NL000000005"
resource_type = "CONTAINER"
identifiers = ["{path.id}"]
attributes = ["*"]

[[route]]
name = "machines"
methods = ["GET"]
path = "/api/things/{id}"
upstream = "echo"
"#;

/// `[login]` at the testbed identity provider, at `idp_url`.
pub fn login_section(idp_url: &str) -> String {
    format!(
        r#"
[login]
identity_provider = "{IDP}"
url = "{idp_url}"
scope = "openid profile company"
"#
    )
}

/// The testbed and a gateway with `RULES` and `[login]` (`more` keys added to it).
pub async fn start_people(binary: &str, more: &str) -> Env {
    Env::start(binary, RULES, |bed| {
        format!("{}{more}", login_section(&bed.url(IDP)))
    })
    .await
}

pub fn browser(env: &Env) -> Browser {
    Browser::new(&std::fs::read(&env.bed.keys.ca_file).unwrap()).unwrap()
}

/// A browser whose connections leave from `address`.
pub fn browser_on(env: &Env, address: IpAddr) -> Browser {
    Browser::on(
        &std::fs::read(&env.bed.keys.ca_file).unwrap(),
        Some(address),
    )
    .unwrap()
}

/// An HTTP client of the testbed whose connections leave from `address`.
pub fn client_on(env: &Env, address: IpAddr) -> reqwest::Client {
    client_trusting_from(&env.bed.keys.ca_file, Some(address))
}

/// The reason a gateway's sign-in page names.
pub fn reason(page: &str) -> String {
    page.split("data-reason=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap_or_default()
        .to_string()
}

/// A browser brought up to the identity provider's consent, stopped before it goes back.
pub async fn consented(env: &Env, person: &mut Browser, url: &str) -> String {
    let start = person.get(url).await.unwrap();
    let login = person.submit(&start, &[]).await.unwrap();
    assert_eq!(login.status, 200, "{}", html_text(&login.body));
    let back = person
        .submit(
            &login,
            &[
                ("username", "jane"),
                ("password", PASSWORD),
                ("decision", "allow"),
                ("scope", "profile"),
            ],
        )
        .await
        .unwrap();
    assert_eq!(back.status, 303, "{}", html_text(&back.body));
    let location = back.location.unwrap();
    assert!(
        location.starts_with(&format!("{}{}", env.url, openid::RETURN_PATH)),
        "{location}"
    );
    location
}

pub fn param(url: &str, name: &str) -> String {
    url::Url::parse(url)
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.to_string())
        .unwrap_or_default()
}

pub fn no_session(page: &Page) {
    assert!(
        !page
            .set_cookies
            .iter()
            .any(|c| c.starts_with("__Host-ishare-session=") && !c.contains("Max-Age=0")),
        "no session: {:?}",
        page.set_cookies
    );
}

/// Exchange a code at the identity provider as `client` (with its own assertion), for the
/// gateway's return URL.
pub async fn exchange(env: &Env, client: &str, code: &str) -> reqwest::Response {
    let assertion = env
        .bed
        .identity(client)
        .client_assertion(IDP, Timestamp::now())
        .unwrap();
    env.bed
        .http
        .post(format!("{}{}", env.bed.url(IDP), openid::TOKEN_PATH))
        .form(&[
            ("grant_type", "authorization_code"),
            ("client_id", client),
            (
                "client_assertion_type",
                "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
            ),
            ("client_assertion", &assertion),
            ("code", code),
            (
                "redirect_uri",
                &format!("{}{}", env.url, openid::RETURN_PATH),
            ),
        ])
        .send()
        .await
        .unwrap()
}

/// An authorize request object of the gateway's party with these claims, encrypted to the
/// identity provider or only signed.
pub fn request_object(env: &Env, claims: Value, encrypt: bool) -> String {
    let signed = env.bed.identity(SP).sign_raw(&claims).unwrap();
    if encrypt {
        encrypt_to_certificate(&env.bed.creds(IDP).chain_der[0], &signed).unwrap()
    } else {
        signed
    }
}

/// The claims of a good authorize request of the gateway's party (state `state-1`).
pub fn authorize_claims(env: &Env) -> Value {
    let now = Timestamp::now().secs();
    json!({
        "iss": SP, "sub": SP, "aud": IDP, "jti": uuid::Uuid::new_v4().to_string(),
        "iat": now, "exp": now + 30,
        "response_type": "code", "client_id": SP, "scope": "openid profile email",
        "redirect_uri": format!("{}{}", env.url, openid::RETURN_PATH),
        "state": "state-1", "nonce": "nonce-1",
    })
}
