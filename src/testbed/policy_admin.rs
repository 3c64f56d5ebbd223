//! The policy administration page of the testbed's registry and entitled party (`/admin`, test
//! only): behind a sign-in, it lists the stored delegation policies, adds one (with the checks of
//! POST /policy) and deletes one.

use super::config::AdminConfig;
use super::lockout::Lockout;
use super::participant::Participant;
use super::registry::new_policy;
use crate::html::{escape, page};
use crate::scheme::evidence::DelegationEvidence;
use crate::scheme::jwe::random_value;
use axum::extract::{ConnectInfo, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::any;
use axum::Router;
use moka::sync::Cache;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const ADMIN_PATH: &str = "/admin";
const COOKIE: &str = "testbed-admin";
const SESSION_TIME: Duration = Duration::from_secs(3600);

pub struct PolicyAdmin {
    p: Arc<Participant>,
    admin: AdminConfig,
    /// Session id → the token its forms must carry.
    sessions: Cache<String, String>,
    lockout: Lockout,
}

pub fn routes(p: Arc<Participant>, admin: AdminConfig) -> Router {
    let state = Arc::new(PolicyAdmin {
        p,
        admin,
        sessions: Cache::builder()
            .max_capacity(1000)
            .time_to_live(SESSION_TIME)
            .build(),
        lockout: Lockout::default(),
    });
    Router::new()
        .route(ADMIN_PATH, any(show))
        .route("/admin/login", any(login))
        .route("/admin/policies", any(add))
        .route("/admin/policies/delete", any(delete))
        .route("/admin/logout", any(logout))
        .with_state(state)
}

type Form = std::collections::BTreeMap<String, String>;

fn form(body: &[u8]) -> Form {
    url::form_urlencoded::parse(body)
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn answer(status: StatusCode, title: &str, body: &str, cookie: Option<String>) -> Response {
    let mut resp = (status, Html(page(title, body))).into_response();
    let h = resp.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    if let Some(Ok(c)) = cookie.map(|c| HeaderValue::from_str(&c)) {
        h.insert(header::SET_COOKIE, c);
    }
    resp
}

fn see_admin(cookie: Option<String>) -> Response {
    let mut resp = (StatusCode::SEE_OTHER, [(header::LOCATION, ADMIN_PATH)]).into_response();
    if let Some(Ok(c)) = cookie.map(|c| HeaderValue::from_str(&c)) {
        resp.headers_mut().insert(header::SET_COOKIE, c);
    }
    resp
}

fn login_form(problem: Option<&str>) -> String {
    format!(
        r#"{problem}<form method="post" action="/admin/login">
<label for="username">User name</label><input type="text" id="username" name="username" required>
<label for="password">Password</label><input type="password" id="password" name="password" required>
<button type="submit" id="sign-in">Sign in</button></form>"#,
        problem = problem
            .map(|p| format!(r#"<p class="error" id="error">{}</p>"#, escape(p)))
            .unwrap_or_default(),
    )
}

impl PolicyAdmin {
    /// The session of the request and its form token.
    fn session(&self, headers: &HeaderMap) -> Option<(String, String)> {
        crate::request::cookie_values(headers, COOKIE)
            .next()
            .and_then(|sid| self.sessions.get(sid).map(|token| (sid.to_string(), token)))
    }

    fn title(&self) -> String {
        format!("Policies of {} ({})", self.p.name, self.p.party_id)
    }

    fn listing(&self, token: &str, notice: Option<(&str, &str)>) -> String {
        let rows: String = self
            .p
            .shared
            .policies
            .all()
            .iter()
            .enumerate()
            .map(|(i, e)| policy_row(i, e, token))
            .collect();
        let notice = notice
            .map(|(class, text)| format!(r#"<p class="{class}" id="notice">{}</p>"#, escape(text)))
            .unwrap_or_default();
        format!(
            r#"{notice}<table id="policies"><tr><th>Issuer</th><th>Subject</th><th>Policies</th><th></th></tr>{rows}</table>
<form method="post" action="/admin/policies"><input type="hidden" name="token" value="{token}">
<label for="policy">Add a policy (a delegationEvidence object)</label><textarea id="policy" name="policy" rows="12" required></textarea>
<button type="submit" id="add">Add policy</button></form>
<form method="post" action="/admin/logout"><input type="hidden" name="token" value="{token}"><button type="submit" class="secondary">Sign out</button></form>"#,
            token = escape(token),
        )
    }
}

fn policy_row(i: usize, e: &DelegationEvidence, token: &str) -> String {
    let policies: Vec<String> = e
        .policy_sets
        .iter()
        .flat_map(|s| &s.policies)
        .map(|p| {
            format!(
                "{} {} {}",
                p.target.resource.resource_type,
                p.target
                    .resource
                    .identifiers
                    .as_ref()
                    .map_or("*".to_string(), |ids| ids.join(",")),
                p.target.actions.join(",")
            )
        })
        .collect();
    format!(
        r#"<tr><td>{issuer}</td><td>{subject}</td><td>{policies}</td><td><form method="post" action="/admin/policies/delete"><input type="hidden" name="token" value="{token}"><input type="hidden" name="index" value="{i}"><input type="hidden" name="policy" value="{json}"><button type="submit" class="secondary">Delete</button></form></td></tr>"#,
        issuer = escape(&e.policy_issuer),
        subject = escape(&e.target.access_subject),
        policies = escape(&policies.join("; ")),
        token = escape(token),
        json = escape(&serde_json::to_string(e).unwrap_or_default()),
    )
}

/// GET /admin: the policies, or the sign-in form.
async fn show(State(a): State<Arc<PolicyAdmin>>, method: Method, headers: HeaderMap) -> Response {
    if method != Method::GET {
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    }
    match a.session(&headers) {
        Some((_, token)) => answer(StatusCode::OK, &a.title(), &a.listing(&token, None), None),
        None => answer(
            StatusCode::OK,
            "Sign in to manage policies",
            &login_form(None),
            None,
        ),
    }
}

async fn login(
    State(a): State<Arc<PolicyAdmin>>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    method: Method,
    body: bytes::Bytes,
) -> Response {
    if method != Method::POST {
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    }
    let f = form(&body);
    let digest = |s: &str| ring::digest::digest(&ring::digest::SHA256, s.as_bytes());
    let given = |k: &str| f.get(k).map(String::as_str).unwrap_or_default();
    let user = given("username");
    let checked = a.lockout.attempt(user, client.ip(), Instant::now(), || {
        (user == a.admin.username
            && digest(given("password")).as_ref() == digest(&a.admin.password).as_ref())
        .then_some(())
    });
    let (status, problem, retry_after) = match checked {
        Ok(Some(())) => {
            let sid = random_value();
            a.sessions.insert(sid.clone(), random_value());
            return see_admin(Some(format!(
                "{COOKIE}={sid}; Path=/admin; Max-Age={}; Secure; HttpOnly; SameSite=Strict",
                SESSION_TIME.as_secs()
            )));
        }
        Ok(None) => (
            StatusCode::UNAUTHORIZED,
            "Wrong user name or password.".to_string(),
            None,
        ),
        Err(locked) => (
            StatusCode::TOO_MANY_REQUESTS,
            locked.message(),
            Some(locked.retry_after()),
        ),
    };
    let page = answer(
        status,
        "Sign in to manage policies",
        &login_form(Some(&problem)),
        None,
    );
    (retry_after, page).into_response()
}

/// Why a form post is not taken.
enum Refusal {
    Method,
    /// The form's token is not the session's (another site's form).
    ForeignForm,
    NotSignedIn,
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        match self {
            Refusal::Method => StatusCode::METHOD_NOT_ALLOWED.into_response(),
            Refusal::ForeignForm => answer(
                StatusCode::FORBIDDEN,
                "Refused",
                r#"<p class="error">The form is not from this session.</p>"#,
                None,
            ),
            Refusal::NotSignedIn => answer(
                StatusCode::UNAUTHORIZED,
                "Sign in to manage policies",
                &login_form(Some("Sign in first.")),
                None,
            ),
        }
    }
}

/// A form posted in a session, with the session's token: the form, the session id and the token.
fn posted(
    a: &PolicyAdmin,
    method: &Method,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(Form, String, String), Refusal> {
    if method != Method::POST {
        return Err(Refusal::Method);
    }
    let f = form(body);
    match a.session(headers) {
        Some((sid, token)) if f.get("token") == Some(&token) => Ok((f, sid, token)),
        Some(_) => Err(Refusal::ForeignForm),
        None => Err(Refusal::NotSignedIn),
    }
}

async fn add(
    State(a): State<Arc<PolicyAdmin>>,
    method: Method,
    headers: HeaderMap,
    body: bytes::Bytes,
) -> Response {
    let (f, _, token) = match posted(&a, &method, &headers, &body) {
        Ok(posted) => posted,
        Err(refusal) => return refusal.into_response(),
    };
    let text = f.get("policy").cloned().unwrap_or_default();
    match new_policy(&a.p, text.as_bytes()) {
        Ok(evidence) => {
            a.p.shared.policies.add(evidence);
            answer(
                StatusCode::CREATED,
                &a.title(),
                &a.listing(&token, Some(("note", "The policy is added."))),
                None,
            )
        }
        Err(e) => answer(
            StatusCode::BAD_REQUEST,
            &a.title(),
            &a.listing(
                &token,
                Some(("error", &format!("Not added: {}", e.description))),
            ),
            None,
        ),
    }
}

async fn delete(
    State(a): State<Arc<PolicyAdmin>>,
    method: Method,
    headers: HeaderMap,
    body: bytes::Bytes,
) -> Response {
    let (f, _, token) = match posted(&a, &method, &headers, &body) {
        Ok(posted) => posted,
        Err(refusal) => return refusal.into_response(),
    };
    let index = f.get("index").and_then(|i| i.parse().ok());
    let shown: Option<DelegationEvidence> =
        f.get("policy").and_then(|p| serde_json::from_str(p).ok());
    let removed = match (index, shown) {
        (Some(i), Some(p)) => a.p.shared.policies.remove(i, &p),
        _ => false,
    };
    let (status, notice) = if removed {
        (StatusCode::OK, ("note", "The policy is deleted."))
    } else {
        (
            StatusCode::CONFLICT,
            ("error", "The list changed meanwhile; nothing is deleted."),
        )
    };
    answer(status, &a.title(), &a.listing(&token, Some(notice)), None)
}

async fn logout(
    State(a): State<Arc<PolicyAdmin>>,
    method: Method,
    headers: HeaderMap,
    body: bytes::Bytes,
) -> Response {
    match posted(&a, &method, &headers, &body) {
        Ok((_, sid, _)) => a.sessions.invalidate(&sid),
        Err(Refusal::Method) => return StatusCode::METHOD_NOT_ALLOWED.into_response(),
        Err(_) => {}
    }
    see_admin(Some(format!(
        "{COOKIE}=; Path=/admin; Max-Age=0; Secure; HttpOnly; SameSite=Strict"
    )))
}
