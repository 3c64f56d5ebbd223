//! The cases of an authorisation registry (or entitled party): delegation requests with the Permit
//! and the Deny mask, as the access subject and as a service provider with the subject's assertion
//! in previous_steps (3.0: `previousSteps` inside `delegationRequest`), and the endpoint's
//! refusals.

use super::cases::{signed_member, Run, Verdict, VERIFIED};
use super::defects::defective_assertions;
use super::options::{Masks, Options};
use super::probe::Answer;
use crate::scheme::evidence::{DelegationEvidence, Effect, PolicyEnvironment};
use crate::scheme::mask::DelegationBody;
use crate::scheme::vocabulary::{member, DELEGATION_EVIDENCE_CLAIM, DELEGATION_PATH};
use crate::scheme::Timestamp;

/// The group of the delegation endpoint's cases.
const G: &str = "delegation";
/// The case of the service provider asking with the access subject's assertion.
const AS_SERVICE_PROVIDER: &str = "AS SERVICE PROVIDER WITH PREVIOUS STEPS";
/// What that case expects.
const PERMITTED: &str = "200, Permit";

impl Run<'_> {
    /// POST /delegation with the Permit and Deny masks (in the body of the version checked), as the
    /// access subject and as a service provider with the subject's assertion in previous_steps;
    /// the endpoint's refusals.
    pub async fn delegation(&mut self) {
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
        self.case(
            G,
            "PERMIT MASK",
            "200, Permit",
            self.delegation_post(&token, &masks.permit),
            |a| check_evidence(o, a, &masks.permit, &client, Effect::Permit),
        )
        .await;
        self.case(
            G,
            "DENY MASK",
            "200 Deny or 404",
            self.delegation_post(&token, &masks.deny),
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
        self.token_defects(G, &token, 400, || http.post(&url).json(&masks.permit))
            .await;
        let mut stranger_issuer = masks.permit.clone();
        stranger_issuer.request.policy_issuer = self.o.stranger().into();
        self.status_case(
            G,
            "UNKNOWN MASK ID",
            400,
            self.delegation_post(&token, &stranger_issuer),
        )
        .await;
        match &self.o.inactive {
            Some(inactive) => {
                let mut body = masks.permit.clone();
                body.request.policy_issuer = inactive.party_id().to_string();
                self.status_case(
                    G,
                    "MASK ID NOT ACTIVE",
                    400,
                    self.delegation_post(&token, &body),
                )
                .await;
            }
            None => self.skip(
                G,
                "MASK ID NOT ACTIVE",
                "400",
                "give an inactive party (--inactive-as), or --testbed",
            ),
        }
        self.delegation_as_service_provider(&masks, &token).await;
    }

    /// POST /delegation as a service provider named in the Permit mask, with the access subject's
    /// assertion in previous_steps: a Permit, and refusals of every defect of that step and of a
    /// caller the mask does not name (`token` is the client's).
    async fn delegation_as_service_provider(&mut self, masks: &Masks, token: &str) {
        let Some(sp) = self.service_provider_token().await else {
            return;
        };
        self.permit_with_previous_step(&masks.permit, &sp).await;
        let missing = with_previous_step(&masks.permit, String::new());
        let request = self.delegation_post(&sp.token, &missing);
        self.status_case(G, "MISSING CLIENT ASSERTION", 400, request)
            .await;
        self.caller_not_named(&masks.permit, token, &sp).await;
        self.defective_previous_steps(&masks.permit, &sp).await;
    }

    /// A POST /delegation of `body` with `token`.
    fn delegation_post(&self, token: &str, body: &DelegationBody) -> reqwest::RequestBuilder {
        self.o
            .http
            .post(self.url(DELEGATION_PATH))
            .bearer_auth(token)
            .json(body)
    }

    /// The service provider of the masks, with an access token; None where none is given (the
    /// case is skipped) or it gets no token (the case fails).
    async fn service_provider_token(&mut self) -> Option<ServiceProvider> {
        let Some(sp) = &self.o.service_provider else {
            self.skip(
                G,
                AS_SERVICE_PROVIDER,
                PERMITTED,
                "give the service provider of the masks (--sp-as), or --testbed",
            );
            return None;
        };
        let id = sp.party_id().to_string();
        match self.access_token(sp).await {
            Ok(token) => Some(ServiceProvider { id, token }),
            Err(e) => {
                self.record(G, AS_SERVICE_PROVIDER, PERMITTED, "-".into(), Err(e));
                None
            }
        }
    }

    /// The Permit mask from the service provider, with the access subject's assertion for it in
    /// previous_steps: a Permit for the service provider.
    async fn permit_with_previous_step(&mut self, permit: &DelegationBody, sp: &ServiceProvider) {
        let o = self.o;
        match self.o.client.client_assertion(&sp.id, Timestamp::now()) {
            Ok(step) => {
                let body = with_previous_step(permit, step);
                let request = self.delegation_post(&sp.token, &body);
                self.case(G, AS_SERVICE_PROVIDER, PERMITTED, request, |a| {
                    check_evidence(o, a, &body, &sp.id, Effect::Permit)
                })
                .await;
            }
            Err(e) => self.record(
                G,
                AS_SERVICE_PROVIDER,
                PERMITTED,
                "-".into(),
                Err(e.to_string()),
            ),
        }
    }

    /// A caller the mask does not name, without a previous step, is refused. Before 3.0 the
    /// service provider, with a mask that names another; 3.0 masks name no service provider (and a
    /// registry may serve one the policy issuer designated it for): the client (`token`), about the
    /// service provider's delegation.
    async fn caller_not_named(
        &mut self,
        permit: &DelegationBody,
        token: &str,
        sp: &ServiceProvider,
    ) {
        let mut not_named = permit.clone();
        let caller = match self.o.version.camel_case() {
            true => {
                not_named.request.target.access_subject = sp.id.clone();
                token
            }
            false => {
                let policies = not_named.request.policy_sets.iter_mut();
                for policy in policies.flat_map(|s| s.policies.iter_mut()) {
                    policy.target.environment = Some(PolicyEnvironment {
                        service_providers: Some(vec![self.o.stranger().into()]),
                        ..PolicyEnvironment::default()
                    });
                }
                &sp.token
            }
        };
        let request = self.delegation_post(caller, &not_named);
        self.status_case(G, "CLIENT ID NOT ALLOWED", 400, request)
            .await;
    }

    /// The Permit mask from the service provider with each defective assertion in previous_steps:
    /// each refused.
    async fn defective_previous_steps(&mut self, permit: &DelegationBody, sp: &ServiceProvider) {
        match defective_assertions(
            &self.o.client,
            &self.o.foreign,
            &sp.id,
            self.o.stranger(),
            Timestamp::now(),
        ) {
            Ok(defects) => {
                for (name, step) in defects {
                    let name = format!("PREVIOUS STEPS: {name}");
                    let request =
                        self.delegation_post(&sp.token, &with_previous_step(permit, step));
                    self.status_case(G, &name, 400, request).await;
                }
            }
            Err(e) => self.record(G, "PREVIOUS STEPS", "400", "-".into(), Err(e.to_string())),
        }
    }
}

/// The service provider of the masks as a caller of the delegation endpoint.
struct ServiceProvider {
    id: String,
    /// Its access token at the target.
    token: String,
}

/// The Permit mask with `step` as its only previous step.
fn with_previous_step(permit: &DelegationBody, step: String) -> DelegationBody {
    let mut body = permit.clone();
    body.previous_steps = vec![step];
    body
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
    let name = o.member(member::DELEGATION);
    let claims = signed_member(o, a, name, Some(audience))?;
    // From 2.1 an evidence token's sub is its issuer (3.0: "equal to value of iss").
    let sub = claims.get("sub").and_then(serde_json::Value::as_str);
    if o.version.evidence_sub_is_issuer() && sub != Some(o.target_id.as_str()) {
        return Err(format!(
            "{name}: sub is {sub:?}, not its issuer {}",
            o.target_id
        ));
    }
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
    let first_rules: Vec<_> = evidence
        .policy_sets
        .iter()
        .flat_map(|s| &s.policies)
        .filter_map(|p| p.rules.first())
        .collect();
    let effects: Vec<Effect> = first_rules.iter().map(|r| r.effect).collect();
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
    let conditioned = match first_rules.iter().any(|r| r.conditions.is_some()) {
        true => ", with conditions for the service provider",
        false => "",
    };
    Ok(format!(
        "{name}: {VERIFIED}; the mask's parties, {expected:?}{conditioned}"
    ))
}
