//! The cases, endpoint by endpoint: what is sent, what the scheme expects back, and the checks of
//! what came.

use super::defects::{defective_assertions, good_parts};
use super::probe::{send, Answer};
use super::signed;
use super::{CaseResult, Options, Outcome};
use crate::peers::join;
use crate::scheme::assertion::ASSERTION_TYPE;
use crate::scheme::capabilities::CapabilitiesInfo;
use crate::scheme::evidence::{DelegationBody, DelegationEvidence, Effect, PolicyEnvironment};
use crate::scheme::jwt::SigningIdentity;
use crate::scheme::models::{PartiesPayload, TrustedListPayload};
use crate::scheme::vocabulary::{
    member, BROKER_HEADER, CAPABILITIES_PATH, DELEGATION_EVIDENCE_CLAIM, DELEGATION_PATH,
    PARTIES_PATH, TOKEN_PATH, TRUSTED_LIST_PATH,
};
use crate::scheme::Timestamp;
use serde_json::Value;

/// A party id that no scheme owner registers, for masks and claims that must name a stranger.
const STRANGER: &str = "EU.EORI.NL999999998";

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

    pub(super) fn skip(&mut self, group: &'static str, name: &str, expected: &str, why: &str) {
        self.results.push(CaseResult {
            group,
            name: name.to_string(),
            expected: expected.to_string(),
            got: "-".into(),
            outcome: Outcome::Skipped,
            reason: why.to_string(),
        });
    }

    /// Send a request and judge the answer with `judge`.
    pub(super) async fn case(
        &mut self,
        group: &'static str,
        name: &str,
        expected: &str,
        request: reqwest::RequestBuilder,
        judge: impl FnOnce(&Answer) -> Verdict,
    ) {
        match send(request).await {
            Ok(answer) => {
                let verdict = judge(&answer);
                self.record(group, name, expected, answer.summary(), verdict);
            }
            Err(e) => self.record(group, name, expected, "-".into(), Err(e)),
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
    async fn access_token(&self, identity: &SigningIdentity) -> Result<String, String> {
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
    pub async fn capabilities(&mut self) {
        const G: &str = "capabilities";
        let url = self.url(CAPABILITIES_PATH);
        let http = self.o.http.clone();
        let (o, client) = (self.o, self.client_id().to_string());
        self.case(
            G,
            "PUBLIC CAPABILITIES",
            "200, signed capabilities",
            http.get(&url),
            |a| check_capabilities(o, a, None),
        )
        .await;
        self.status_case(G, "HTTP WRONG METHOD", 405, http.post(&url))
            .await;
        let token = match self.access_token(&self.o.client).await {
            Ok(token) => token,
            Err(e) => {
                self.record(
                    G,
                    "CAPABILITIES WITH A TOKEN",
                    "200, signed capabilities",
                    "-".into(),
                    Err(e),
                );
                return;
            }
        };
        self.case(
            G,
            "CAPABILITIES WITH A TOKEN",
            "200, signed capabilities for us",
            http.get(&url).bearer_auth(&token),
            |a| check_capabilities(o, a, Some(&client)),
        )
        .await;
        self.status_case(
            G,
            "HTTP WRONG METHOD WITH A TOKEN",
            405,
            http.post(&url).bearer_auth(&token),
        )
        .await;
        let (head, signature) = token.rsplit_once('.').unwrap_or((&token, ""));
        let flipped: String = signature
            .chars()
            .rev()
            .chain(std::iter::once('A'))
            .collect();
        self.status_case(
            G,
            "ACCESS TOKEN INVALID SIGNATURE",
            401,
            http.get(&url).bearer_auth(format!("{head}.{flipped}")),
        )
        .await;
        self.status_case(
            G,
            "ACCESS TOKEN MISSING SIGNATURE",
            401,
            http.get(&url).bearer_auth(format!("{head}.")),
        )
        .await;
        self.status_case(
            G,
            "AUTHORIZATION NOT BEARER",
            401,
            http.get(&url)
                .header("Authorization", format!("Token {token}")),
        )
        .await;
    }

    /// POST /connect/token: a good request, replay, wrong method, form defects and every
    /// assertion defect.
    pub async fn token(&mut self) {
        const G: &str = "token";
        let url = self.url(TOKEN_PATH);
        let http = self.o.http.clone();
        let now = Timestamp::now();
        let client = self.client_id().to_string();
        let assertion = match self.o.client.client_assertion(&self.o.target_id, now) {
            Ok(a) => a,
            Err(e) => {
                self.record(G, "VALID ASSERTION", "200", "-".into(), Err(e.to_string()));
                return;
            }
        };
        let form = self.token_form(&client, &assertion);
        self.case(
            G,
            "VALID ASSERTION",
            "200, a bearer token, not cacheable",
            http.post(&url).form(&form),
            check_token_answer,
        )
        .await;
        let first_use_accepted = self
            .results
            .last()
            .is_some_and(|r| r.outcome == Outcome::Pass);
        if first_use_accepted {
            self.status_case(G, "ASSERTION REPLAYED", 400, http.post(&url).form(&form))
                .await;
        } else {
            self.record(
                G,
                "ASSERTION REPLAYED",
                "400",
                "-".into(),
                Err("not tried: the assertion's first use was refused".into()),
            );
        }
        self.status_case(G, "HTTP WRONG METHOD", 405, http.get(&url))
            .await;
        let fresh = |o: &Options| o.client.client_assertion(&o.target_id, Timestamp::now());
        let form_defects: [(&str, &'static str, Option<&str>); 5] = [
            ("INVALID GRANT TYPE", "grant_type", Some("password")),
            ("INVALID SCOPE", "scope", Some("openid")),
            ("INVALID CLIENT ID", "client_id", Some(STRANGER)),
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
            STRANGER,
            now,
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
                    self.status_case(G, name, 400, http.post(&url).form(&form))
                        .await;
                }
                Err(e) => self.record(G, name, "400", "-".into(), Err(e.to_string())),
            }
        }
    }

    /// POST /delegation with the Permit and Deny masks, as the access subject and as a service
    /// provider with the subject's assertion in previous_steps; the endpoint's refusals.
    pub async fn delegation(&mut self) {
        const G: &str = "delegation";
        let Some(masks) = self.o.masks.clone() else {
            self.skip(G, "DELEGATION", "200", "give --permit-mask and --deny-mask");
            return;
        };
        let url = self.url(DELEGATION_PATH);
        let http = self.o.http.clone();
        let o = self.o;
        let client = self.client_id().to_string();
        let token = match self.access_token(&self.o.client).await {
            Ok(t) => t,
            Err(e) => {
                self.record(G, "PERMIT MASK", "200, Permit", "-".into(), Err(e));
                return;
            }
        };
        let post =
            |token: &str, body: &DelegationBody| http.post(&url).bearer_auth(token).json(body);
        self.case(
            G,
            "PERMIT MASK",
            "200, Permit",
            post(&token, &masks.permit),
            |a| check_evidence(o, a, &masks.permit, &client, Effect::Permit),
        )
        .await;
        self.case(
            G,
            "DENY MASK",
            "200 Deny or 404",
            post(&token, &masks.deny),
            |a| check_evidence(o, a, &masks.deny, &client, Effect::Deny),
        )
        .await;
        self.status_case(
            G,
            "HTTP WRONG METHOD",
            405,
            http.get(&url).bearer_auth(&token),
        )
        .await;
        self.status_case(
            G,
            "MISSING AUTHORIZATION HEADER",
            400,
            http.post(&url).json(&masks.permit),
        )
        .await;
        self.status_case(
            G,
            "AUTHORIZATION NOT BEARER",
            400,
            http.post(&url)
                .header("Authorization", format!("Token {token}"))
                .json(&masks.permit),
        )
        .await;
        self.status_case(
            G,
            "ACCESS TOKEN INVALID",
            401,
            post(&format!("{token}x"), &masks.permit),
        )
        .await;
        let mut stranger_issuer = masks.permit.clone();
        stranger_issuer.request.policy_issuer = STRANGER.into();
        self.status_case(G, "UNKNOWN MASK ID", 400, post(&token, &stranger_issuer))
            .await;
        match &self.o.inactive {
            Some(inactive) => {
                let mut body = masks.permit.clone();
                body.request.policy_issuer = inactive.party_id().to_string();
                self.status_case(G, "MASK ID NOT ACTIVE", 400, post(&token, &body))
                    .await;
            }
            None => self.skip(
                G,
                "MASK ID NOT ACTIVE",
                "400",
                "give an inactive party (--inactive-as), or --testbed",
            ),
        }
        let Some(sp) = &self.o.service_provider else {
            self.skip(
                G,
                "AS SERVICE PROVIDER WITH PREVIOUS STEPS",
                "200, Permit",
                "give the service provider of the masks (--sp-as), or --testbed",
            );
            return;
        };
        let sp_id = sp.party_id().to_string();
        let sp_token = match self.access_token(sp).await {
            Ok(t) => t,
            Err(e) => {
                self.record(
                    G,
                    "AS SERVICE PROVIDER WITH PREVIOUS STEPS",
                    "200, Permit",
                    "-".into(),
                    Err(e),
                );
                return;
            }
        };
        let with_step = |step: String| {
            let mut body = masks.permit.clone();
            body.previous_steps = vec![step];
            body
        };
        match self.o.client.client_assertion(&sp_id, Timestamp::now()) {
            Ok(step) => {
                let body = with_step(step);
                self.case(
                    G,
                    "AS SERVICE PROVIDER WITH PREVIOUS STEPS",
                    "200, Permit",
                    post(&sp_token, &body),
                    |a| check_evidence(o, a, &body, &sp_id, Effect::Permit),
                )
                .await;
            }
            Err(e) => self.record(
                G,
                "AS SERVICE PROVIDER WITH PREVIOUS STEPS",
                "200, Permit",
                "-".into(),
                Err(e.to_string()),
            ),
        }
        self.status_case(
            G,
            "MISSING CLIENT ASSERTION",
            400,
            post(&sp_token, &with_step(String::new())),
        )
        .await;
        let mut not_named = masks.permit.clone();
        for policy in not_named
            .request
            .policy_sets
            .iter_mut()
            .flat_map(|s| s.policies.iter_mut())
        {
            policy.target.environment = Some(PolicyEnvironment {
                service_providers: Some(vec![STRANGER.into()]),
            });
        }
        self.status_case(G, "CLIENT ID NOT ALLOWED", 400, post(&sp_token, &not_named))
            .await;
        match defective_assertions(
            &self.o.client,
            &self.o.foreign,
            &sp_id,
            STRANGER,
            Timestamp::now(),
        ) {
            Ok(defects) => {
                for (name, step) in defects {
                    let name = format!("PREVIOUS STEPS: {name}");
                    self.status_case(G, &name, 400, post(&sp_token, &with_step(step)))
                        .await;
                }
            }
            Err(e) => self.record(G, "PREVIOUS STEPS", "400", "-".into(), Err(e.to_string())),
        }
    }

    /// The broker pattern at a service provider: the client calls a resource for another
    /// consumer with that consumer's client assertion (addressed to the client) in the
    /// `service_consumer_assertion` header. Accepted once; refused when replayed, addressed to
    /// someone else, expired, signed with a key not of its x5c, or chained to an untrusted root.
    pub async fn broker(&mut self) {
        const G: &str = "broker";
        const REFUSED: &str = "401 or 403";
        let Some(broker) = &self.o.broker else {
            self.skip(
                G,
                "BROKER WITH A CONSUMER ASSERTION",
                "200",
                "give a resource the consumer may reach (--broker-resource) and the consumer (--consumer-as)",
            );
            return;
        };
        let http = self.o.http.clone();
        let client = self.client_id().to_string();
        let token = match self.access_token(&self.o.client).await {
            Ok(t) => t,
            Err(e) => {
                self.record(
                    G,
                    "BROKER WITH A CONSUMER ASSERTION",
                    "200",
                    "-".into(),
                    Err(e),
                );
                return;
            }
        };
        let call = |assertion: &str| {
            http.get(&broker.resource)
                .bearer_auth(&token)
                .header(BROKER_HEADER, assertion)
        };
        let now = Timestamp::now();
        let signed = |identity: &SigningIdentity, edit: fn(&mut Value)| {
            let (header, mut claims) = good_parts(&broker.consumer, &client, now);
            edit(&mut claims);
            identity.sign_parts(&header, &claims)
        };
        let assertion = match signed(&broker.consumer, |_| {}) {
            Ok(a) => a,
            Err(e) => {
                self.record(
                    G,
                    "BROKER WITH A CONSUMER ASSERTION",
                    "200",
                    "-".into(),
                    Err(e.to_string()),
                );
                return;
            }
        };
        self.case(
            G,
            "BROKER WITH A CONSUMER ASSERTION",
            "2xx",
            call(&assertion),
            |a| {
                if (200..300).contains(&a.status) {
                    Ok("the call for the consumer is served".into())
                } else {
                    Err(format!("expected 2xx, got {}", a.status))
                }
            },
        )
        .await;
        let refused = |a: &Answer| {
            if [401, 403].contains(&a.status) {
                Ok("refused".into())
            } else {
                Err(format!("expected 401 or 403, got {}", a.status))
            }
        };
        self.case(
            G,
            "BROKER ASSERTION REPLAYED",
            REFUSED,
            call(&assertion),
            refused,
        )
        .await;
        let defects = [
            (
                "BROKER ASSERTION FOR ANOTHER CALLER",
                signed(&broker.consumer, |c| c["aud"] = Value::from(STRANGER)),
            ),
            (
                "BROKER ASSERTION EXPIRED",
                signed(&broker.consumer, |c| {
                    let past = c["iat"].as_i64().unwrap_or_default() - 300;
                    c["iat"] = Value::from(past);
                    c["exp"] = Value::from(past + 30);
                }),
            ),
            (
                "BROKER ASSERTION INVALID SIGNATURE",
                signed(&broker.foreign_consumer, |_| {}),
            ),
            (
                "BROKER ASSERTION UNTRUSTED CERTIFICATE",
                broker.foreign_consumer.client_assertion(&client, now),
            ),
        ];
        for (name, assertion) in defects {
            match assertion {
                Ok(a) => self.case(G, name, REFUSED, call(&a), refused).await,
                Err(e) => self.record(G, name, REFUSED, "-".into(), Err(e.to_string())),
            }
        }
    }

    /// The scheme owner's data endpoints: parties and the trusted list.
    pub async fn scheme_owner(&mut self) {
        const G: &str = "parties";
        let http = self.o.http.clone();
        let parties = self.url(PARTIES_PATH);
        let o = self.o;
        let client = self.client_id().to_string();
        self.status_case(G, "PARTIES WITHOUT A TOKEN", 401, http.get(&parties))
            .await;
        let token = match self.access_token(&self.o.client).await {
            Ok(t) => t,
            Err(e) => {
                self.record(G, "PARTIES", "200, signed parties", "-".into(), Err(e));
                return;
            }
        };
        self.status_case(
            G,
            "PARTIES WITHOUT A QUERY",
            400,
            http.get(&parties).bearer_auth(&token),
        )
        .await;
        self.case(
            G,
            "PARTIES BY ID",
            "200, signed parties naming us",
            http.get(&parties)
                .query(&[("eori", client.as_str())])
                .bearer_auth(&token),
            |a| check_parties(o, a, &client),
        )
        .await;
        self.case(
            "trusted_list",
            "TRUSTED LIST",
            "200, signed trusted list with our root",
            http.get(self.url(TRUSTED_LIST_PATH)).bearer_auth(&token),
            |a| check_trusted_list(o, a, &client),
        )
        .await;
    }
}

pub(super) fn status_is(a: &Answer, expected: u16) -> Verdict {
    if a.status == expected {
        Ok("the status the scheme expects".into())
    } else {
        Err(format!("expected {expected}, got {}", a.status))
    }
}

/// The JWT in `member` of a 200 answer, verified as a response of the target to `audience`.
pub(super) fn signed_member(
    o: &Options,
    a: &Answer,
    member: &str,
    audience: Option<&str>,
) -> Result<serde_json::Map<String, Value>, String> {
    status_is(a, 200)?;
    let token = a
        .member(member)
        .ok_or_else(|| format!("the answer has no {member}"))?;
    signed::check(token, &o.trusted, &o.target_id, audience, Timestamp::now())
        .map(|jwt| jwt.claims)
        .map_err(|e| format!("{member}: {e}"))
}

const VERIFIED: &str = "signature, chain, iss, aud, exp = iat + 30 verified";

fn check_capabilities(o: &Options, a: &Answer, audience: Option<&str>) -> Verdict {
    let claims = signed_member(o, a, member::CAPABILITIES, audience)?;
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
    let no_store = a
        .headers
        .get_all(reqwest::header::CACHE_CONTROL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.to_ascii_lowercase().contains("no-store"));
    if !no_store {
        return Err("the token answer lacks Cache-Control: no-store (RFC 6749 §5.1)".into());
    }
    Ok("access_token, token_type Bearer, expires_in, Cache-Control: no-store".into())
}

fn check_evidence(
    o: &Options,
    a: &Answer,
    mask: &DelegationBody,
    audience: &str,
    expected: Effect,
) -> Verdict {
    if expected == Effect::Deny && a.status == 404 {
        return Ok("404: no policy, which the scheme reads as Deny".into());
    }
    let claims = signed_member(o, a, member::DELEGATION, Some(audience))?;
    let evidence: DelegationEvidence = claims
        .get(DELEGATION_EVIDENCE_CLAIM)
        .cloned()
        .ok_or("the delegation token has no delegationEvidence")
        .and_then(|v| {
            serde_json::from_value(v)
                .map_err(|_| "delegationEvidence does not have the scheme's shape")
        })
        .map_err(str::to_string)?;
    let request = &mask.request;
    if evidence.policy_issuer != request.policy_issuer
        || evidence.target.access_subject != request.target.access_subject
    {
        return Err(format!(
            "the evidence is from {} for {}, the mask asked {} for {}",
            evidence.policy_issuer,
            evidence.target.access_subject,
            request.policy_issuer,
            request.target.access_subject
        ));
    }
    let effects: Vec<Effect> = evidence
        .policy_sets
        .iter()
        .flat_map(|s| &s.policies)
        .filter_map(|p| p.rules.first().map(|r| r.effect))
        .collect();
    let now = Timestamp::now().secs();
    let holds = match expected {
        Effect::Permit => {
            !effects.is_empty()
                && effects.iter().all(|e| *e == Effect::Permit)
                && evidence.not_before <= now
                && now < evidence.not_on_or_after
        }
        Effect::Deny => effects.contains(&Effect::Deny),
    };
    if !holds {
        return Err(format!(
            "the evidence does not say {expected:?} now (first rules: {effects:?})"
        ));
    }
    Ok(format!(
        "delegation_token: {VERIFIED}; the mask's parties, {expected:?}"
    ))
}

fn check_parties(o: &Options, a: &Answer, us: &str) -> Verdict {
    let claims = signed_member(o, a, member::PARTIES, Some(us))?;
    let PartiesPayload(found) = serde_json::from_value(Value::Object(claims))
        .map_err(|e| format!("parties payload: {e}"))?;
    if !found.data.iter().any(|p| p.party_id == us) {
        return Err(format!("the parties found do not include {us}"));
    }
    Ok(format!("parties_token: {VERIFIED}; parties_info names us"))
}

fn check_trusted_list(o: &Options, a: &Answer, us: &str) -> Verdict {
    let claims = signed_member(o, a, member::TRUSTED_LIST, Some(us))?;
    let payload: TrustedListPayload = serde_json::from_value(Value::Object(claims))
        .map_err(|e| format!("trusted list payload: {e}"))?;
    let ours: Vec<String> = o
        .trusted
        .entries()
        .map(|e| e.certificate_fingerprint.clone())
        .collect();
    let listed = payload.trusted_list.iter().any(|e| {
        ours.iter()
            .any(|f| f.eq_ignore_ascii_case(&e.certificate_fingerprint))
    });
    if !listed {
        return Err("the trusted list does not hold the root given with --ca".into());
    }
    Ok(format!("trusted_list_token: {VERIFIED}; our root listed"))
}
