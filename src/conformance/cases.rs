//! Running cases (what is sent, what the scheme expects back, the checks of what came) and the
//! cases every role answers: capabilities and the token endpoint. The cases of each role are in its
//! own file.

use super::defects::defective_assertions;
use super::names::missing;
use super::options::Options;
use super::probe::{send, Answer};
use super::report::{CaseResult, Outcome};
use super::{services, signed};
use crate::peers::join;
use crate::scheme::assertion::ASSERTION_TYPE;
use crate::scheme::capabilities::CapabilitiesInfo;
use crate::scheme::jwt::SigningIdentity;
use crate::scheme::vocabulary::{member, CAPABILITIES_PATH, TOKEN_PATH};
use crate::scheme::Timestamp;
use serde_json::Value;

/// The cases of access tokens that are not the target's, in the order `Run::token_defects` sends
/// them.
pub(super) const TOKEN_DEFECTS: [&str; 3] = [
    "ACCESS TOKEN INVALID SIGNATURE",
    "ACCESS TOKEN MISSING SIGNATURE",
    "AUTHORIZATION NOT BEARER",
];

/// What a check concluded: `Ok` with what was verified, `Err` with what is wrong.
pub(super) type Verdict = Result<String, String>;

pub struct Run<'a> {
    pub(super) o: &'a Options,
    results: Vec<CaseResult>,
}

impl<'a> Run<'a> {
    pub fn new(o: &'a Options) -> Self {
        Run {
            o,
            results: Vec::new(),
        }
    }

    pub fn finish(self) -> Vec<CaseResult> {
        self.results
    }

    pub(super) fn url(&self, path: &str) -> String {
        join(&self.o.target, path)
    }

    pub(super) fn record(
        &mut self,
        group: &'static str,
        name: &str,
        expected: &str,
        got: String,
        verdict: Verdict,
    ) {
        let (outcome, reason) = match verdict {
            Ok(reason) => (Outcome::Pass, reason),
            Err(reason) => (Outcome::Fail, reason),
        };
        self.results.push(CaseResult {
            group,
            name: name.to_string(),
            expected: expected.to_string(),
            got,
            outcome,
            reason,
        });
    }

    fn not_run(
        &mut self,
        group: &'static str,
        name: &str,
        expected: &str,
        outcome: Outcome,
        why: &str,
    ) {
        self.results.push(CaseResult {
            group,
            name: name.to_string(),
            expected: expected.to_string(),
            got: "-".into(),
            outcome,
            reason: why.to_string(),
        });
    }

    /// A case not run because what it needs was not given.
    pub(super) fn skip(&mut self, group: &'static str, name: &str, expected: &str, why: &str) {
        self.not_run(group, name, expected, Outcome::Skipped, why);
    }

    /// A case not tried because a case it depends on failed; `why` names that case.
    pub(super) fn not_tried(&mut self, group: &'static str, name: &str, expected: &str, why: &str) {
        self.not_run(group, name, expected, Outcome::NotTried, why);
    }

    /// Send a request and judge the answer with `judge`; the answer, if any.
    pub(super) async fn case(
        &mut self,
        group: &'static str,
        name: &str,
        expected: &str,
        request: reqwest::RequestBuilder,
        judge: impl FnOnce(&Answer) -> Verdict,
    ) -> Option<Answer> {
        match send(request).await {
            Ok(answer) => {
                let verdict = judge(&answer);
                self.record(group, name, expected, answer.summary(), verdict);
                Some(answer)
            }
            Err(e) => {
                self.record(group, name, expected, "-".into(), Err(e));
                None
            }
        }
    }

    /// A case whose whole expectation is a status.
    pub(super) async fn status_case(
        &mut self,
        group: &'static str,
        name: &str,
        expected: u16,
        request: reqwest::RequestBuilder,
    ) {
        self.case(group, name, &expected.to_string(), request, |a| {
            status_is(a, expected)
        })
        .await;
    }

    fn token_form(&self, client: &str, assertion: &str) -> Vec<(&'static str, String)> {
        vec![
            ("grant_type", "client_credentials".into()),
            ("scope", self.o.scheme.clone()),
            ("client_id", client.to_string()),
            ("client_assertion_type", ASSERTION_TYPE.into()),
            ("client_assertion", assertion.to_string()),
        ]
    }

    /// An access token of the target for `identity`.
    pub(super) async fn access_token(&self, identity: &SigningIdentity) -> Result<String, String> {
        let assertion = identity
            .client_assertion(&self.o.target_id, Timestamp::now())
            .map_err(|e| e.to_string())?;
        let form = self.token_form(identity.party_id().as_str(), &assertion);
        let answer = send(self.o.http.post(self.url(TOKEN_PATH)).form(&form)).await?;
        match answer.member("access_token") {
            Some(token) if answer.status == 200 => Ok(token.to_string()),
            _ => Err(format!(
                "no access token for {}: {}",
                identity.party_id(),
                answer.summary()
            )),
        }
    }

    pub(super) fn client_id(&self) -> &str {
        self.o.client.party_id().as_str()
    }

    /// GET /capabilities, anonymous and with a token; wrong methods; access tokens that are not ours.
    /// Where the endpoint is missing (or does not answer), only its first case fails.
    pub async fn capabilities(&mut self) {
        const G: &str = "capabilities";
        const WITH_A_TOKEN: &str = "CAPABILITIES WITH A TOKEN";
        const SIGNED_FOR_US: &str = "200, signed capabilities for us";
        const WRONG_METHOD_WITH_A_TOKEN: &str = "HTTP WRONG METHOD WITH A TOKEN";
        let url = self.url(CAPABILITIES_PATH);
        let http = self.o.http.clone();
        let (o, client) = (self.o, self.client_id().to_string());
        let public = self
            .case(
                G,
                "PUBLIC CAPABILITIES",
                "200, signed capabilities",
                http.get(&url),
                |a| check_capabilities(o, a, None),
            )
            .await;
        let absent = match public {
            None => Some("/capabilities did not answer (PUBLIC CAPABILITIES)"),
            Some(a) if a.status == 404 => Some("/capabilities is missing (PUBLIC CAPABILITIES)"),
            Some(_) => None,
        };
        if let Some(why) = absent {
            let dependents = [
                ("HTTP WRONG METHOD", "405"),
                (WITH_A_TOKEN, SIGNED_FOR_US),
                (WRONG_METHOD_WITH_A_TOKEN, "405"),
            ]
            .into_iter()
            .chain(TOKEN_DEFECTS.map(|name| (name, "401")));
            for (name, expected) in dependents {
                self.not_tried(G, name, expected, why);
            }
            return;
        }
        self.status_case(G, "HTTP WRONG METHOD", 405, http.post(&url))
            .await;
        let token = match self.access_token(&self.o.client).await {
            Ok(token) => token,
            Err(e) => {
                self.record(G, WITH_A_TOKEN, SIGNED_FOR_US, "-".into(), Err(e));
                let why = "no access token (CAPABILITIES WITH A TOKEN)";
                self.not_tried(G, WRONG_METHOD_WITH_A_TOKEN, "405", why);
                for name in TOKEN_DEFECTS {
                    self.not_tried(G, name, "401", why);
                }
                return;
            }
        };
        self.case(
            G,
            WITH_A_TOKEN,
            SIGNED_FOR_US,
            http.get(&url).bearer_auth(&token),
            |a| check_capabilities(o, a, Some(&client)),
        )
        .await;
        self.status_case(
            G,
            WRONG_METHOD_WITH_A_TOKEN,
            405,
            http.post(&url).bearer_auth(&token),
        )
        .await;
        self.token_defects(G, &token, 401, || http.get(&url)).await;
    }

    /// Access tokens that are not the target's (its own with the signature changed or cut off, or
    /// not sent as Bearer), each sent with `request`: 401 each, but `not_bearer` for the last.
    pub(super) async fn token_defects(
        &mut self,
        group: &'static str,
        token: &str,
        not_bearer: u16,
        request: impl Fn() -> reqwest::RequestBuilder,
    ) {
        let (head, signature) = token.rsplit_once('.').unwrap_or((token, ""));
        let flipped: String = signature
            .chars()
            .rev()
            .chain(std::iter::once('A'))
            .collect();
        let [invalid_signature, missing_signature, not_bearer_name] = TOKEN_DEFECTS;
        for (name, authorization, expected) in [
            (invalid_signature, format!("Bearer {head}.{flipped}"), 401),
            (missing_signature, format!("Bearer {head}."), 401),
            (not_bearer_name, format!("Token {token}"), not_bearer),
        ] {
            let request = request().header(reqwest::header::AUTHORIZATION, authorization);
            self.status_case(group, name, expected, request).await;
        }
    }

    /// POST /connect/token: a good request (its answer not cacheable, the assertion not accepted a
    /// second time), wrong method, form defects and every assertion defect.
    pub async fn token(&mut self) {
        const G: &str = "token";
        let url = self.url(TOKEN_PATH);
        let http = self.o.http.clone();
        let client = self.client_id().to_string();
        self.first_use(&url).await;
        self.status_case(G, "HTTP WRONG METHOD", 405, http.get(&url))
            .await;
        let fresh = |o: &Options| o.client.client_assertion(&o.target_id, Timestamp::now());
        let form_defects: [(&str, &'static str, Option<&str>); 5] = [
            ("INVALID GRANT TYPE", "grant_type", Some("password")),
            ("INVALID SCOPE", "scope", Some("openid")),
            ("INVALID CLIENT ID", "client_id", Some(self.o.stranger())),
            (
                "INVALID CLIENT ASSERTION TYPE",
                "client_assertion_type",
                Some("urn:ietf:params:oauth:client-assertion-type:saml2-bearer"),
            ),
            ("MISSING CLIENT ASSERTION", "client_assertion", None),
        ];
        for (name, field, value) in form_defects {
            let Ok(assertion) = fresh(self.o) else {
                continue;
            };
            let mut form = self.token_form(&client, &assertion);
            form.retain(|(k, _)| *k != field);
            if let Some(v) = value {
                form.push((field, v.to_string()));
            }
            self.status_case(G, name, 400, http.post(&url).form(&form))
                .await;
        }
        match defective_assertions(
            &self.o.client,
            &self.o.foreign,
            &self.o.target_id,
            self.o.stranger(),
            Timestamp::now(),
        ) {
            Ok(defects) => {
                for (name, assertion) in defects {
                    let form = self.token_form(&client, &assertion);
                    self.status_case(G, name, 400, http.post(&url).form(&form))
                        .await;
                }
            }
            Err(e) => self.record(
                G,
                "ASSERTION DEFECTS",
                "400",
                "-".into(),
                Err(e.to_string()),
            ),
        }
        self.clients_not_admitted(&url).await;
    }

    /// A good assertion: a bearer token, an answer not to be stored (RFC 6749 §5.1), and the same
    /// assertion refused the second time, tried whenever the first use was granted.
    async fn first_use(&mut self, url: &str) {
        const G: &str = "token";
        const NO_STORE: &str = "CACHE-CONTROL NO-STORE";
        let client = self.client_id().to_string();
        let assertion = match self
            .o
            .client
            .client_assertion(&self.o.target_id, Timestamp::now())
        {
            Ok(a) => a,
            Err(e) => {
                self.record(G, "VALID ASSERTION", "200", "-".into(), Err(e.to_string()));
                return;
            }
        };
        let form = self.token_form(&client, &assertion);
        let request = || self.o.http.post(url).form(&form);
        let first = self
            .case(
                G,
                "VALID ASSERTION",
                "200, a bearer token",
                request(),
                check_token_answer,
            )
            .await
            .filter(token_granted);
        let Some(first) = first else {
            let why = "the assertion's first use was refused (VALID ASSERTION)";
            self.not_tried(G, NO_STORE, "no-store", why);
            self.not_tried(G, "ASSERTION REPLAYED", "400", why);
            return;
        };
        let cache_control: Vec<&str> = first
            .headers
            .get_all(reqwest::header::CACHE_CONTROL)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        let verdict = if cache_control
            .iter()
            .any(|v| v.to_ascii_lowercase().contains("no-store"))
        {
            Ok("the token answer is not to be stored".into())
        } else {
            Err("a token answer must not be stored (RFC 6749 §5.1)".into())
        };
        let got = match cache_control.join(", ") {
            none if none.is_empty() => "no Cache-Control".to_string(),
            some => some,
        };
        self.record(G, NO_STORE, "no-store", got, verdict);
        self.status_case(G, "ASSERTION REPLAYED", 400, request())
            .await;
    }

    /// Clients the target must not admit: one unknown to the scheme owner, one not active.
    async fn clients_not_admitted(&mut self, url: &str) {
        const G: &str = "token";
        for (name, identity, missing) in [
            (
                "UNKNOWN CLIENT ID",
                self.o.unknown.as_ref(),
                "give a party unknown at the scheme owner (--unknown-as), or --testbed",
            ),
            (
                "CLIENT ID NOT ACTIVE",
                self.o.inactive.as_ref(),
                "give an inactive party (--inactive-as), or --testbed",
            ),
        ] {
            let Some(identity) = identity else {
                self.skip(G, name, "400", missing);
                continue;
            };
            match identity.client_assertion(&self.o.target_id, Timestamp::now()) {
                Ok(assertion) => {
                    let form = self.token_form(identity.party_id().as_str(), &assertion);
                    self.status_case(G, name, 400, self.o.http.post(url).form(&form))
                        .await;
                }
                Err(e) => self.record(G, name, "400", "-".into(), Err(e.to_string())),
            }
        }
    }
}

pub(super) fn status_is(a: &Answer, expected: u16) -> Verdict {
    if a.status == expected {
        Ok("the status the scheme expects".into())
    } else {
        Err(wrong_status(a.status, (200..300).contains(&expected)).into())
    }
}

/// What a status the scheme does not expect means, in words that leave the status itself to the
/// report's `expected` and `got`.
pub(super) fn wrong_status(got: u16, success_expected: bool) -> &'static str {
    match got {
        200..=299 if success_expected => "another success than the scheme's",
        200..=299 => "served, where the scheme refuses",
        404 => "not found here",
        500..=599 => "a server error",
        _ if success_expected => "refused",
        _ => "refused, but not as the scheme says",
    }
}

/// The JWT in `member` of a 200 answer, verified as a response of the target to `audience`. An
/// answer with the other version's member instead is a participant of another version.
pub(super) fn signed_member(
    o: &Options,
    a: &Answer,
    member: &str,
    audience: Option<&str>,
) -> Result<serde_json::Map<String, Value>, String> {
    status_is(a, 200)?;
    let token = a
        .member(member)
        .ok_or_else(|| missing(member, "answer", o.version, |n| a.holds(n)))?;
    signed::check(token, &o.trusted, &o.target_id, audience, Timestamp::now())
        .map(|jwt| jwt.claims)
        .map_err(|e| format!("{member}: {e}"))
}

pub(super) const VERIFIED: &str = "signature, chain, iss, aud, exp = iat + 30 verified";

/// Signed capabilities of the target: 1.9's party, versions and features, or 3.0's services.
fn check_capabilities(o: &Options, a: &Answer, audience: Option<&str>) -> Verdict {
    let name = o.member(member::CAPABILITIES);
    let claims = signed_member(o, a, name, audience)?;
    if o.version.capabilities_as_services() {
        let services = services::check(&claims, o.version, audience.is_some())?;
        return Ok(format!("{name}: {VERIFIED}; {services}"));
    }
    let info: CapabilitiesInfo = serde_json::from_value(Value::Object(claims))
        .map_err(|e| format!("capabilities payload: {e}"))?;
    if info.party_id != o.target_id {
        return Err(format!(
            "capabilities name {}, not {}",
            info.party_id, o.target_id
        ));
    }
    if info.supported_versions.is_empty() || info.features().next().is_none() {
        return Err("capabilities list no version with features".into());
    }
    Ok(format!(
        "capabilities_token: {VERIFIED}; party_id, versions, features"
    ))
}

/// Whether a token request was granted: a 200 with an access token, whatever else it lacks.
fn token_granted(a: &Answer) -> bool {
    a.status == 200 && a.member("access_token").is_some_and(|t| !t.is_empty())
}

fn check_token_answer(a: &Answer) -> Verdict {
    status_is(a, 200)?;
    let json = a.json.as_ref().ok_or("the answer is not JSON")?;
    if a.member("access_token").is_none_or(str::is_empty) {
        return Err("no access_token".into());
    }
    if !a
        .member("token_type")
        .is_some_and(|t| t.eq_ignore_ascii_case("Bearer"))
    {
        return Err("token_type is not Bearer".into());
    }
    let expires_in = json.get("expires_in").and_then(|v| {
        v.as_u64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
    });
    if expires_in.is_none_or(|s| s == 0) {
        return Err("no positive expires_in".into());
    }
    Ok("access_token, token_type Bearer, expires_in".into())
}
