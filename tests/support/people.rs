//! People signing in: the gateway's `[login]` at the testbed identity provider, a route for them,
//! scripted browsers (also from other loopback addresses), the identity provider's steps taken by
//! hand, and a stand-in for it that tampers with its answers.

use super::{claims, client_trusting_from, Bed, Env, CONSUMER, SP, SP2};
use ishare_gateway::scheme::jwe::encrypt_to_certificate;
use ishare_gateway::scheme::openid;
use ishare_gateway::scheme::Timestamp;
use ishare_gateway::testbed::person::{html_text, Browser, Page};
use serde_json::{json, Value};
use std::net::IpAddr;
use std::sync::Arc;

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

/// What a stand-in for the identity provider does with the token answer it passes on.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Tamper {
    /// The id_token is re-signed for another audience.
    Audience,
    /// The id_token carries another nonce.
    Nonce,
    /// The id_token's person is a party of the scheme.
    Subject,
}

/// A stand-in for the identity provider at another address: everything goes to the real one, and
/// the id_token of a token answer is changed as `tamper` says, signed with the provider's key.
pub async fn tampering_provider(
    bed: &Bed,
    tamper: Tamper,
) -> (String, tokio::task::JoinHandle<()>) {
    use axum::extract::Request;
    use axum::response::IntoResponse;
    let real = bed.url(IDP);
    let http = bed.http.clone();
    let identity = Arc::new(bed.identity(IDP));
    let app = axum::Router::new().fallback(move |req: Request| {
        let (real, http, identity) = (real.clone(), http.clone(), identity.clone());
        async move {
            let url = format!("{real}{}", req.uri());
            let mut forward = http.request(req.method().clone(), url);
            for name in ["authorization", "content-type"] {
                if let Some(v) = req.headers().get(name) {
                    forward = forward.header(name, v.as_bytes());
                }
            }
            let path = req.uri().path().to_string();
            let body = axum::body::to_bytes(req.into_body(), 1 << 20)
                .await
                .unwrap();
            let answer = forward.body(body).send().await.unwrap();
            let status = axum::http::StatusCode::from_u16(answer.status().as_u16()).unwrap();
            let location = answer.headers().get("location").cloned();
            let content_type = answer.headers().get("content-type").cloned();
            let mut bytes = answer.bytes().await.unwrap().to_vec();
            if path == openid::TOKEN_PATH && status == 200 {
                let mut body: Value = serde_json::from_slice(&bytes).unwrap();
                let mut claims = claims(body["id_token"].as_str().unwrap());
                match tamper {
                    Tamper::Audience => claims["aud"] = json!(SP2),
                    Tamper::Nonce => claims["nonce"] = json!("another-nonce"),
                    Tamper::Subject => claims["sub"] = json!(CONSUMER),
                }
                body["id_token"] = json!(identity.sign_raw(&claims).unwrap());
                bytes = serde_json::to_vec(&body).unwrap();
            }
            let mut out = (status, bytes).into_response();
            for (name, value) in [("location", location), ("content-type", content_type)] {
                if let Some(v) = value {
                    out.headers_mut().insert(name, v);
                }
            }
            out
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, task)
}
