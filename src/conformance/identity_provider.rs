//! The cases of an identity provider: authorize with a good request object (its login page) and
//! with each defect of a request object (refused: a 400, or an error redirect that carries the
//! state, never a code); the openid token endpoint and userinfo without a valid code or token; and,
//! given a person to sign in as, the whole flow: the code, the token answer with its id_token, the
//! code refused the second time, and userinfo. The endpoints are those of the version checked:
//! 1.9's under `/openid_connect1.0`, from 2.0 `/connect/authorize`, the participant's own
//! `/connect/token` and `/connect/userinfo` asked by GET (3.0: its answer `userinfoToken`).

use super::cases::{signed_member, status_is, wrong_status, Run, Verdict};
use super::names::missing;
use super::options::Person;
use super::probe::{send, Answer};
use crate::scheme::assertion::ASSERTION_TYPE;
use crate::scheme::jwe::{encrypt_to_certificate, random_value};
use crate::scheme::jwt::{decode, AlgorithmPolicy, SigningIdentity};
use crate::scheme::openid::AUTHORIZATION_CODE;
use crate::scheme::vocabulary::{member, CAPABILITIES_PATH, TOKEN_PATH};
use crate::scheme::Timestamp;
use serde_json::{json, Value};

/// A request object's claims and the plain parameters beside it.
struct Authorize {
    claims: Value,
    response_type: String,
    client_id: String,
    scope: String,
    /// Sign with this identity instead of the client's.
    signer: Option<SigningIdentity>,
    encrypt: bool,
}

/// Where the answer sends the browser, and its query.
fn redirect_of(a: &Answer) -> Option<(String, Vec<(String, String)>)> {
    if !(300..400).contains(&a.status) {
        return None;
    }
    let location = a.headers.get("location")?.to_str().ok()?;
    let url = url::Url::parse(location).ok()?;
    let query = url
        .query_pairs()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Some((location.to_string(), query))
}

fn param<'a>(query: &'a [(String, String)], name: &str) -> Option<&'a str> {
    query
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// A defective authorize request must be refused: a 400, or an error redirect with the state.
fn refused(a: &Answer, state: &str) -> Verdict {
    if a.status == 400 {
        return Ok("refused with 400".into());
    }
    match redirect_of(a) {
        Some((_, q)) if param(&q, "code").is_some() => Err("a code was issued".into()),
        Some((_, q)) => match (param(&q, "error"), param(&q, "state")) {
            (Some(e), Some(s)) if s == state => Ok(format!("error redirect: {e}, with the state")),
            (Some(_), _) => Err("an error redirect without our state".into()),
            _ => Err("a redirect without an error".into()),
        },
        None => Err(wrong_status(a.status, false).into()),
    }
}

fn login_page(a: &Answer) -> Verdict {
    status_is(a, 200)?;
    if a.body.contains("<form") {
        Ok("a page with a form".into())
    } else {
        Err("200 without a login form".into())
    }
}

/// The attributes a form's hidden inputs carry, and its action.
fn form_of(page: &str) -> Option<(String, Vec<(String, String)>)> {
    crate::html::form_of(page)
}

impl Run<'_> {
    fn authorize_defaults(&self, state: &str, nonce: &str) -> Authorize {
        let now = Timestamp::now().secs();
        let client = self.client_id().to_string();
        let scope = "openid profile".to_string();
        Authorize {
            claims: json!({
                "iss": client, "sub": client, "aud": self.o.target_id,
                "jti": random_value(), "iat": now, "exp": now + 30,
                "response_type": "code", "client_id": client, "scope": scope,
                "redirect_uri": self.o.redirect_uri, "state": state, "nonce": nonce,
            }),
            response_type: "code".into(),
            client_id: client,
            scope,
            signer: None,
            encrypt: true,
        }
    }

    fn authorize_request(
        &self,
        a: &Authorize,
        certificate: &[u8],
    ) -> Result<reqwest::RequestBuilder, String> {
        let signer = a.signer.as_ref().unwrap_or(&self.o.client);
        let header = json!({"alg": "RS256", "typ": "JWT", "x5c": signer.x5c()});
        let signed = signer
            .sign_parts(&header, &a.claims)
            .map_err(|e| e.to_string())?;
        let request = if a.encrypt {
            encrypt_to_certificate(certificate, &signed).map_err(|e| e.to_string())?
        } else {
            signed
        };
        Ok(self.o.http.post(self.url(self.o.flow().authorize)).form(&[
            ("response_type", a.response_type.as_str()),
            ("client_id", a.client_id.as_str()),
            ("scope", a.scope.as_str()),
            ("request", request.as_str()),
        ]))
    }

    /// The target's certificate, from the x5c of its capabilities token.
    async fn target_certificate(&self) -> Result<Vec<u8>, String> {
        let answer = send(self.o.http.get(self.url(CAPABILITIES_PATH))).await?;
        let name = self.o.member(member::CAPABILITIES);
        let token = answer.member(name).ok_or_else(|| {
            let why = missing(name, "answer", self.o.version, |n| answer.holds(n));
            format!("{why}: no certificate of the identity provider to encrypt to")
        })?;
        let jwt = decode(token, AlgorithmPolicy::default()).map_err(|e| e.to_string())?;
        jwt.x5c
            .first()
            .cloned()
            .ok_or_else(|| "the capabilities token has no certificate".to_string())
    }

    fn openid_token_form(&self, code: &str) -> Result<Vec<(&'static str, String)>, String> {
        let assertion = self
            .o
            .client
            .client_assertion(&self.o.target_id, Timestamp::now())
            .map_err(|e| e.to_string())?;
        Ok(vec![
            ("grant_type", AUTHORIZATION_CODE.into()),
            ("client_id", self.client_id().to_string()),
            ("client_assertion_type", ASSERTION_TYPE.into()),
            ("client_assertion", assertion),
            ("code", code.to_string()),
            ("redirect_uri", self.o.redirect_uri.clone()),
        ])
    }

    /// The identity provider's cases: the authorize request and its defects, the token and
    /// userinfo endpoints refusing what no sign-in gave, and the signed-in flow.
    pub async fn identity_provider(&mut self) {
        let certificate = match self.target_certificate().await {
            Ok(c) => c,
            Err(e) => {
                self.record(
                    "authorize",
                    "AUTHORIZE",
                    "200, a login page",
                    "-".into(),
                    Err(e),
                );
                return;
            }
        };
        self.authorize_cases(&certificate).await;
        self.refusals_without_sign_in().await;
        self.signed_in_flow(&certificate).await;
    }

    /// A good authorize request shows a login page; each defective one is refused.
    async fn authorize_cases(&mut self, certificate: &[u8]) {
        const G: &str = "authorize";
        let (state, nonce) = (random_value(), random_value());
        let good = self.authorize_defaults(&state, &nonce);
        match self.authorize_request(&good, certificate) {
            Ok(request) => {
                self.case(G, "AUTHORIZE", "200, a login page", request, login_page)
                    .await;
            }
            Err(e) => self.record(G, "AUTHORIZE", "200, a login page", "-".into(), Err(e)),
        }
        for (name, defect) in self.authorize_defects(&state, &nonce) {
            match self.authorize_request(&defect, certificate) {
                Ok(request) => {
                    let state = state.clone();
                    self.case(
                        G,
                        name,
                        "400 or an error redirect with the state",
                        request,
                        |a| refused(a, &state),
                    )
                    .await;
                }
                Err(e) => self.record(G, name, "refused", "-".into(), Err(e)),
            }
        }
    }

    /// Authorize requests that each break one rule, by the case's name.
    fn authorize_defects(&self, state: &str, nonce: &str) -> Vec<(&'static str, Authorize)> {
        let mut defects: Vec<(&str, Authorize)> = Vec::new();
        let mut signed_only = self.authorize_defaults(state, nonce);
        signed_only.encrypt = false;
        defects.push(("REQUEST OBJECT NOT ENCRYPTED", signed_only));
        let mut untrusted = self.authorize_defaults(state, nonce);
        untrusted.signer = Some(self.o.foreign.clone());
        defects.push(("REQUEST OBJECT UNTRUSTED SIGNER", untrusted));
        let mut mismatch = self.authorize_defaults(state, nonce);
        mismatch.scope = "openid profile email".into();
        defects.push(("PLAIN SCOPE DIFFERS FROM THE REQUEST OBJECT", mismatch));
        let mut no_openid = self.authorize_defaults(state, nonce);
        no_openid.scope = "profile".into();
        no_openid.claims["scope"] = json!("profile");
        defects.push(("SCOPE WITHOUT OPENID", no_openid));
        let mut response_type = self.authorize_defaults(state, nonce);
        response_type.response_type = "token".into();
        response_type.claims["response_type"] = json!("token");
        defects.push(("RESPONSE TYPE NOT CODE", response_type));
        let mut expired = self.authorize_defaults(state, nonce);
        let past = Timestamp::now().secs() - 600;
        expired.claims["iat"] = json!(past);
        expired.claims["exp"] = json!(past + 30);
        defects.push(("REQUEST OBJECT EXPIRED", expired));
        let mut stranger = self.authorize_defaults(state, nonce);
        stranger.client_id = self.o.stranger().into();
        defects.push(("UNKNOWN CLIENT", stranger));
        defects
    }

    /// Userinfo asked as the version asks it: by GET from 2.0, by POST before.
    fn userinfo_request(&self) -> reqwest::RequestBuilder {
        let flow = self.o.flow();
        let url = self.url(flow.userinfo);
        match flow.userinfo_by_get {
            true => self.o.http.get(url),
            false => self.o.http.post(url),
        }
    }

    /// Without a sign-in: a code nobody issued and a wrong grant type get no token, and userinfo
    /// answers no request without a valid token (from 2.0, nor one by POST).
    async fn refusals_without_sign_in(&mut self) {
        let flow = self.o.flow();
        let token_url = self.url(flow.token);
        let http = self.o.http.clone();
        match self.openid_token_form(&random_value()) {
            Ok(form) => {
                self.status_case(
                    "openid token",
                    "CODE NOT ISSUED",
                    400,
                    http.post(&token_url).form(&form),
                )
                .await;
                // From 2.0 codes are redeemed at the participant's own /connect/token, where
                // client credentials is a grant too: a grant neither flow has is the wrong one.
                let mut wrong = form.clone();
                wrong[0].1 = match flow.token == TOKEN_PATH {
                    true => "password",
                    false => "client_credentials",
                }
                .into();
                wrong.retain(|(k, _)| *k != "code");
                let wrong_grant = http.post(&token_url).form(&wrong);
                self.status_case("openid token", "WRONG GRANT TYPE", 400, wrong_grant)
                    .await;
            }
            Err(e) => self.record("openid token", "CODE NOT ISSUED", "400", "-".into(), Err(e)),
        }
        self.status_case(
            "userinfo",
            "USERINFO WITHOUT A TOKEN",
            401,
            self.userinfo_request(),
        )
        .await;
        self.status_case(
            "userinfo",
            "USERINFO INVALID TOKEN",
            401,
            self.userinfo_request().bearer_auth(random_value()),
        )
        .await;
        if flow.userinfo_by_get {
            let by_post = http
                .post(self.url(flow.userinfo))
                .bearer_auth(random_value());
            self.status_case("userinfo", "HTTP WRONG METHOD", 405, by_post)
                .await;
        }
    }

    /// With a person to sign in as: the code, the token answer, the code again, userinfo.
    async fn signed_in_flow(&mut self, certificate: &[u8]) {
        const G: &str = "sign-in";
        let Some(person) = self.o.person.clone() else {
            self.skip(
                G,
                "SIGN IN",
                "a code and the state",
                "give --person USER:PASSWORD of a person of the identity provider",
            );
            return;
        };
        let (state, nonce) = (random_value(), random_value());
        let code = match self.sign_in(&person, &state, &nonce, certificate).await {
            Ok(code) => {
                self.record(
                    G,
                    "SIGN IN",
                    "a code and the state",
                    "303".into(),
                    Ok("a code, with our state".into()),
                );
                code
            }
            Err(e) => {
                self.record(G, "SIGN IN", "a code and the state", "-".into(), Err(e));
                return;
            }
        };
        let form = match self.openid_token_form(&code) {
            Ok(f) => f,
            Err(e) => return self.record(G, "TOKEN WITH THE CODE", "200", "-".into(), Err(e)),
        };
        let http = self.o.http.clone();
        let token_url = self.url(self.o.flow().token);
        let answer = match send(http.post(&token_url).form(&form)).await {
            Ok(a) => a,
            Err(e) => return self.record(G, "TOKEN WITH THE CODE", "200", "-".into(), Err(e)),
        };
        let verdict = self.check_openid_tokens(&answer, &nonce);
        let summary = answer.summary();
        let access = verdict
            .as_ref()
            .ok()
            .map(|(_, access, sub)| (access.clone(), sub.clone()));
        self.record(
            G,
            "TOKEN WITH THE CODE",
            "200, no-store, a signed id_token for us with our nonce",
            summary,
            verdict.map(|(reason, _, _)| reason),
        );
        if let Ok(form) = self.openid_token_form(&code) {
            self.status_case(
                G,
                "THE SAME CODE AGAIN",
                400,
                http.post(&token_url).form(&form),
            )
            .await;
        }
        let Some((access, sub)) = access else {
            return;
        };
        let o = self.o;
        let client = self.client_id().to_string();
        let name = self.o.flow().userinfo_member;
        self.case(
            G,
            "USERINFO",
            &format!("200, a signed {name} for us about the person"),
            self.userinfo_request().bearer_auth(access),
            |a| {
                let claims = signed_member(o, a, name, Some(&client))?;
                match claims.get("sub").and_then(Value::as_str) {
                    Some(s) if s == sub => {
                        Ok(format!("{name} verified, about the id_token's person"))
                    }
                    other => Err(format!("sub {other:?} is not the id_token's {sub}")),
                }
            },
        )
        .await;
    }

    /// The token answer: no-store, and an id_token of the target for us with our nonce; the
    /// access token and the person.
    fn check_openid_tokens(
        &self,
        a: &Answer,
        nonce: &str,
    ) -> Result<(String, String, String), String> {
        status_is(a, 200)?;
        for (header, value) in [("cache-control", "no-store"), ("pragma", "no-cache")] {
            if a.headers.get(header).and_then(|v| v.to_str().ok()) != Some(value) {
                return Err(format!("{header} is not {value}"));
            }
        }
        let claims = signed_member(self.o, a, "id_token", Some(self.client_id()))?;
        if claims.get("nonce").and_then(Value::as_str) != Some(nonce) {
            return Err("the id_token does not carry our nonce".into());
        }
        let sub = claims
            .get("sub")
            .and_then(Value::as_str)
            .ok_or("the id_token has no sub")?;
        let access = a.member("access_token").ok_or("no access_token")?;
        if a.member("token_type")
            .is_none_or(|t| !t.eq_ignore_ascii_case("bearer"))
        {
            return Err("token_type is not Bearer".into());
        }
        Ok((
            "id_token verified (signature, chain, iss, aud, exp = iat + 30, nonce); no-store"
                .into(),
            access.to_string(),
            sub.to_string(),
        ))
    }

    /// Authorize, then post the login form as `person` consenting to everything: the code.
    async fn sign_in(
        &self,
        person: &Person,
        state: &str,
        nonce: &str,
        certificate: &[u8],
    ) -> Result<String, String> {
        let request =
            self.authorize_request(&self.authorize_defaults(state, nonce), certificate)?;
        let page = send(request).await?;
        login_page(&page)?;
        let (action, mut fields) = form_of(&page.body).ok_or("the login page has no form")?;
        let action = url::Url::parse(&self.url(self.o.flow().authorize))
            .and_then(|base| base.join(&action))
            .map_err(|e| e.to_string())?;
        fields.extend([
            ("username".to_string(), person.username.clone()),
            ("password".to_string(), person.password.clone()),
            ("decision".to_string(), "allow".to_string()),
            ("scope".to_string(), "profile".to_string()),
        ]);
        let answer = send(self.o.http.post(action).form(&fields)).await?;
        let (_, query) = redirect_of(&answer)
            .ok_or_else(|| format!("the login answered {}, not a redirect", answer.status))?;
        if param(&query, "state") != Some(state) {
            return Err("the redirect does not carry our state".into());
        }
        param(&query, "code")
            .map(str::to_string)
            .ok_or_else(|| format!("no code: {:?}", param(&query, "error")))
    }
}
