//! People at the gateway. A route may ask for a sign-in (`login = true`): without a session the
//! browser is sent to the identity provider with a request object we sign and encrypt to it (fresh
//! state and nonce); `GET /openid_connect1.0/return` checks the state against the browser's login
//! cookie and the store, has the code redeemed and the id_token and the userinfo token verified
//! (`peers::identity_provider` calls the provider), and opens a session: a sealed cookie naming a
//! session kept in the store.
//! The person is then the caller of the route: its delegation rule is decided with them as the
//! access subject, and the backend receives their attributes in the configured headers.

use crate::config::model::{Config, LoginSettings, SessionSecret};
use crate::gateway::people::sessions::{Kind, SessionStore};
use crate::gateway::people::start_budget::StartBudget;
use crate::gateway::reject::{Answer, LoginFailure, Reject};
use crate::html::{escape, page};
use crate::peers::identity_provider::IdentityProviderClient;
use crate::peers::scheme_owner::TrustStore;
use crate::peers::PeerClient;
use crate::request::cookie_values;
use crate::scheme::jwe::{random_value, SealedBox};
use crate::scheme::jwt::{AlgorithmPolicy, DecodedJwt};
use crate::scheme::openid;
use crate::scheme::party::PartyId;
use crate::scheme::Timestamp;
use http::{HeaderMap, Method};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// How long a person has to sign in at the identity provider.
pub const LOGIN_TIME: Duration = Duration::from_secs(600);
/// The cookie that binds a sign-in to the browser that started it.
fn login_cookie(settings: &LoginSettings) -> String {
    format!("{}-login", settings.cookie_name)
}

/// A signed-in person, as the session keeps them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Person {
    pub sub: String,
    pub attributes: BTreeMap<String, String>,
}

/// What the session cookie carries, sealed.
#[derive(Serialize, Deserialize)]
struct SessionCookie {
    sid: String,
    exp: i64,
}

/// What the login cookie carries, sealed.
#[derive(Serialize, Deserialize)]
struct LoginCookie {
    state: String,
    exp: i64,
}

/// A sign-in in progress, kept by its state.
#[derive(Serialize, Deserialize)]
struct Pending {
    nonce: String,
    return_to: String,
}

/// What a sign-in needs from the snapshot.
pub struct Context<'a> {
    pub store: &'a SessionStore,
    pub trust: &'a TrustStore,
}

pub struct Login {
    pub settings: LoginSettings,
    sealed: SealedBox,
    our_id: PartyId,
    provider: IdentityProviderClient,
    /// The origin of `public_url`: where requests of the gateway's own pages come from.
    origin: String,
    starts: StartBudget,
    own_cookies: [String; 2],
}

impl Login {
    /// Sign-ins of `config` at `settings`' identity provider, which we call through `peer`.
    pub fn new(
        config: &Config,
        settings: LoginSettings,
        peer: PeerClient,
        algorithms: AlgorithmPolicy,
        fallback: &SessionSecret,
    ) -> Result<Login, String> {
        let secret = settings.secret.as_ref().unwrap_or(fallback);
        let public_url = config.public_url.as_str();
        Ok(Login {
            sealed: SealedBox::new(&secret.0).map_err(|e| e.to_string())?,
            our_id: config.identity.party_id.clone(),
            provider: IdentityProviderClient::new(
                peer,
                &settings,
                format!(
                    "{}{}",
                    public_url.trim_end_matches('/'),
                    settings.return_path
                ),
                algorithms,
                config.tokens.leeway,
                config.scheme_owner.timeout,
            ),
            origin: url::Url::parse(public_url)
                .map(|u| u.origin().ascii_serialization())
                .map_err(|e| format!("public_url: {e}"))?,
            starts: StartBudget::new(
                settings.starts_per_second,
                settings.starts_per_address_per_minute,
            ),
            own_cookies: [settings.cookie_name.clone(), login_cookie(&settings)],
            settings,
        })
    }

    fn cookie(&self, name: &str, value: &str, max_age: u64) -> String {
        format!("{name}={value}; Path=/; Max-Age={max_age}; Secure; HttpOnly; SameSite=Lax")
    }

    fn open<T: for<'de> Deserialize<'de>>(&self, sealed: &str) -> Option<T> {
        serde_json::from_slice(&self.sealed.open(sealed)?).ok()
    }

    fn seal<T: Serialize>(&self, value: &T) -> Result<String, Reject> {
        let json = serde_json::to_vec(value).map_err(|_| Reject::Internal)?;
        self.sealed.seal(&json).map_err(|_| Reject::Internal)
    }

    /// A request with a session that would change something must come from a page of the
    /// gateway's own origin, as the browser says: its `Origin`; without one, `Sec-Fetch-Site:
    /// same-origin`; without either, a `Referer` of our origin. A session cookie is sent by
    /// browsers on other sites' requests too.
    pub fn check_same_origin(&self, method: &Method, headers: &HeaderMap) -> Result<(), Reject> {
        if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
            return Ok(());
        }
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let ours = |url: &str| {
            url::Url::parse(url).is_ok_and(|u| u.origin().ascii_serialization() == self.origin)
        };
        let seen = match (
            header("origin"),
            header("sec-fetch-site"),
            header("referer"),
        ) {
            (Some(origin), _, _) if origin == self.origin => return Ok(()),
            (Some(origin), _, _) => format!("Origin {origin:?}"),
            (None, Some("same-origin"), _) => return Ok(()),
            (None, Some(site), _) => format!("Sec-Fetch-Site {site:?}"),
            (None, None, Some(referer)) if ours(referer) => return Ok(()),
            (None, None, Some(_)) => "a Referer of another origin".into(),
            (None, None, None) => "no Origin, Sec-Fetch-Site or Referer".into(),
        };
        Err(LoginFailure::CrossSite(seen.chars().take(100).collect()).into())
    }

    /// The person of the request's session, if it has a valid one.
    pub async fn person(
        &self,
        headers: &HeaderMap,
        store: &SessionStore,
        now: Timestamp,
    ) -> Result<Option<Person>, Reject> {
        let values: Vec<&str> = cookie_values(headers, &self.settings.cookie_name).collect();
        let [value] = values.as_slice() else {
            return Ok(None);
        };
        let Some(cookie) = self.open::<SessionCookie>(value) else {
            return Ok(None);
        };
        if cookie.exp <= now.secs() {
            return Ok(None);
        }
        let kept = store
            .get(Kind::Session, &cookie.sid)
            .await
            .map_err(LoginFailure::Store)?;
        Ok(kept.and_then(|bytes| serde_json::from_slice(&bytes).ok()))
    }

    /// No session: a GET (or HEAD) from `client` is sent to the identity provider; anything else
    /// is refused.
    pub async fn start(
        &self,
        method: &Method,
        return_to: &str,
        client: Option<IpAddr>,
        cx: &Context<'_>,
        now: Timestamp,
    ) -> Result<Answer, Reject> {
        if method != Method::GET && method != Method::HEAD {
            return Err(LoginFailure::Required.into());
        }
        self.starts.take(client, Instant::now())?;
        let (state, nonce) = (random_value(), random_value());
        let request = self
            .provider
            .request_object(&self.settings.scope, &state, &nonce, cx.trust, now)
            .await?;
        let pending = Pending {
            nonce,
            return_to: return_to.to_string(),
        };
        cx.store
            .put(
                Kind::State,
                &state,
                serde_json::to_vec(&pending).map_err(|_| Reject::Internal)?,
                LOGIN_TIME,
            )
            .await
            .map_err(LoginFailure::Store)?;
        let binding = self.seal(&LoginCookie {
            state,
            exp: now.secs() + LOGIN_TIME.as_secs() as i64,
        })?;
        let field = |name: &str, value: &str| {
            format!(
                r#"<input type="hidden" name="{}" value="{}">"#,
                escape(name),
                escape(value)
            )
        };
        let body = format!(
            r#"<p>Sign in at the identity provider to continue.</p>
<form id="authorize" method="post" action="{action}">{fields}<button type="submit">Continue to sign in</button></form>
<script>document.getElementById("authorize").submit();</script>"#,
            action = escape(self.provider.authorize_url()),
            fields = [
                field("response_type", openid::CODE_RESPONSE),
                field("client_id", self.our_id.as_str()),
                field("scope", &self.settings.scope),
                field("request", &request),
            ]
            .concat(),
        );
        Ok(Answer::html(
            200,
            page("Signing in", &body),
            vec![(
                "set-cookie",
                self.cookie(
                    &login_cookie(&self.settings),
                    &binding,
                    LOGIN_TIME.as_secs(),
                ),
            )],
        ))
    }

    /// GET the return path (`/openid_connect1.0/return`, `/return` from 2.0): the code for a
    /// session, or a refusal.
    pub async fn finish(
        &self,
        query: Option<&str>,
        headers: &HeaderMap,
        cx: &Context<'_>,
        now: Timestamp,
    ) -> Result<(Answer, Person), Reject> {
        let (pending, code) = self.returned(query, headers, cx, now).await?;
        let redeemed = self
            .provider
            .redeem(&code, &pending.nonce, cx.trust, now)
            .await?;
        let userinfo = self
            .provider
            .userinfo(&redeemed.access_token, &redeemed.sub, cx.trust, now)
            .await?;
        let person = Person {
            attributes: self.attributes(&userinfo),
            sub: redeemed.sub,
        };
        let answer = self
            .open_session(&person, pending.return_to, headers, cx, now)
            .await?;
        Ok((answer, person))
    }

    /// The sign-in a return belongs to, and its code: the return's state is the one this browser
    /// started, still pending in the store (and no longer, once taken); a refusal of the identity
    /// provider is the person's answer.
    async fn returned(
        &self,
        query: Option<&str>,
        headers: &HeaderMap,
        cx: &Context<'_>,
        now: Timestamp,
    ) -> Result<(Pending, String), Reject> {
        let params = openid::single_params(query.unwrap_or_default().as_bytes())
            .map_err(LoginFailure::InvalidReturn)?;
        let state = params
            .get("state")
            .filter(|s| !s.is_empty())
            .ok_or(LoginFailure::StateMismatch("the answer has no state"))?;
        let bound_name = login_cookie(&self.settings);
        let bound: Vec<&str> = cookie_values(headers, &bound_name).collect();
        let bound: Option<LoginCookie> = match bound.as_slice() {
            [value] => self.open(value),
            _ => None,
        };
        match bound {
            Some(b) if b.exp > now.secs() && b.state == *state => {}
            Some(b) if b.state == *state => {
                return Err(LoginFailure::StateMismatch("the sign-in took too long").into())
            }
            _ => {
                return Err(LoginFailure::StateMismatch(
                    "this browser did not start a sign-in with this state",
                )
                .into())
            }
        }
        let pending: Pending = cx
            .store
            .take(Kind::State, state)
            .await
            .map_err(LoginFailure::Store)?
            .and_then(|b| serde_json::from_slice(&b).ok())
            .ok_or(LoginFailure::StateMismatch(
                "the state is unknown, expired or used already",
            ))?;
        if let Some(error) = params.get("error") {
            return Err(LoginFailure::RefusedByProvider {
                error: error.chars().take(64).collect(),
                description: params
                    .get("error_description")
                    .map(|d| d.chars().take(200).collect())
                    .unwrap_or_default(),
            }
            .into());
        }
        let code = params
            .get("code")
            .filter(|c| !c.is_empty())
            .ok_or_else(|| LoginFailure::InvalidReturn("the answer has no code".into()))?;
        Ok((pending, code.clone()))
    }

    /// The person's attributes the configured headers carry, from their verified userinfo token.
    fn attributes(&self, userinfo: &DecodedJwt) -> BTreeMap<String, String> {
        self.settings
            .headers
            .iter()
            .filter(|(attribute, _)| attribute != "sub")
            .filter_map(|(attribute, _)| {
                userinfo
                    .str_claim(attribute)
                    .map(|v| (attribute.clone(), v.to_string()))
            })
            .collect()
    }

    /// A session for `person` in place of the browser's earlier ones, and the way on to
    /// `return_to`.
    async fn open_session(
        &self,
        person: &Person,
        return_to: String,
        headers: &HeaderMap,
        cx: &Context<'_>,
        now: Timestamp,
    ) -> Result<Answer, Reject> {
        for value in cookie_values(headers, &self.settings.cookie_name) {
            if let Some(earlier) = self.open::<SessionCookie>(value) {
                cx.store
                    .remove(Kind::Session, &earlier.sid)
                    .await
                    .map_err(LoginFailure::Store)?;
            }
        }
        let sid = random_value();
        let lifetime = self.settings.session_lifetime;
        cx.store
            .put(
                Kind::Session,
                &sid,
                serde_json::to_vec(person).map_err(|_| Reject::Internal)?,
                lifetime,
            )
            .await
            .map_err(LoginFailure::Store)?;
        let session = self.seal(&SessionCookie {
            sid,
            exp: now.secs() + lifetime.as_secs() as i64,
        })?;
        Ok(Answer::html(
            303,
            page(
                "Signed in",
                r#"<p>Signed in; on to the page you asked for.</p>"#,
            ),
            vec![
                ("location", return_to),
                (
                    "set-cookie",
                    self.cookie(&self.settings.cookie_name, &session, lifetime.as_secs()),
                ),
                (
                    "set-cookie",
                    self.cookie(&login_cookie(&self.settings), "", 0),
                ),
            ],
        ))
    }

    /// GET on the logout path: a page whose button signs out. Only a POST does, and only from
    /// our own pages: another site's link or form must not end a person's session.
    pub fn logout_page(&self) -> Answer {
        let body = format!(
            r#"<form method="post" action="{path}"><p>Sign out of this site?</p><button type="submit" id="logout">Sign out</button></form>"#,
            path = escape(&self.settings.logout_path),
        );
        Answer::html(200, page("Sign out", &body), Vec::new())
    }

    /// POST on the logout path, from our own pages: the session is gone from the store and the
    /// cookie cleared.
    pub async fn logout(
        &self,
        headers: &HeaderMap,
        store: &SessionStore,
    ) -> Result<Answer, Reject> {
        self.check_same_origin(&Method::POST, headers)?;
        for value in cookie_values(headers, &self.settings.cookie_name) {
            if let Some(cookie) = self.open::<SessionCookie>(value) {
                store
                    .remove(Kind::Session, &cookie.sid)
                    .await
                    .map_err(LoginFailure::Store)?;
            }
        }
        Ok(Answer::html(
            200,
            page(
                "Signed out",
                r#"<p id="signed-out">You are signed out.</p>"#,
            ),
            vec![("set-cookie", self.cookie(&self.settings.cookie_name, "", 0))],
        ))
    }

    /// The headers the backend receives about `person`: (header, value).
    pub fn headers_for(&self, person: &Person) -> Vec<(http::HeaderName, String)> {
        self.settings
            .headers
            .iter()
            .filter_map(|(attribute, header)| {
                let value = if attribute == "sub" {
                    Some(&person.sub)
                } else {
                    person.attributes.get(attribute)
                };
                value.map(|v| (header.clone(), v.clone()))
            })
            .collect()
    }

    /// The names of our cookies, which the backend never receives.
    pub fn cookie_names(&self) -> &[String] {
        &self.own_cookies
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_cookie_is_found_only_once() {
        let mut headers = HeaderMap::new();
        headers.insert(http::header::COOKIE, "a=1; s=xyz; b=2".parse().unwrap());
        assert_eq!(cookie_values(&headers, "s").collect::<Vec<_>>(), ["xyz"]);
        headers.append(http::header::COOKIE, "s=other".parse().unwrap());
        assert_eq!(cookie_values(&headers, "s").count(), 2);
    }
}
