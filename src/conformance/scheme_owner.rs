//! The cases of a scheme owner of 1.9 to 2.2: the parties search and the trusted list (3.0's
//! participant registry has its own, in `participant_registry`).

use super::cases::{signed_member, Run, Verdict, TOKEN_DEFECTS, VERIFIED};
use super::options::Options;
use super::probe::Answer;
use crate::scheme::models::{PartiesPayload, TrustedListPayload};
use crate::scheme::vocabulary::{member, PARTIES_PATH, TRUSTED_LIST_PATH};
use serde_json::Value;

impl Run<'_> {
    /// The scheme owner's data endpoints: the parties search (by our own id, so that each case has
    /// one defect: no token, no query, a token not the target's) and the trusted list.
    pub async fn scheme_owner(&mut self) {
        const G: &str = "parties";
        const TL: &str = "trusted_list";
        const BY_EORI: &str = "PARTIES BY EORI";
        const NAMING_US: &str = "200, signed parties naming us";
        const TRUSTED_LIST: &str = "TRUSTED LIST";
        const WITH_OUR_ROOT: &str = "200, signed trusted list with our root";
        const NO_TOKEN: &str = "no access token (PARTIES BY EORI)";
        let http = self.o.http.clone();
        let parties = self.url(PARTIES_PATH);
        let trusted_list = self.url(TRUSTED_LIST_PATH);
        let o = self.o;
        let client = self.client_id().to_string();
        let by_eori = || http.get(&parties).query(&[("eori", client.as_str())]);
        self.status_case(G, "PARTIES WITHOUT A TOKEN", 401, by_eori())
            .await;
        let token = match self.access_token(&self.o.client).await {
            Ok(token) => {
                self.case(G, BY_EORI, NAMING_US, by_eori().bearer_auth(&token), |a| {
                    check_parties(o, a, &client)
                })
                .await;
                self.status_case(
                    G,
                    "PARTIES WITHOUT A QUERY",
                    400,
                    http.get(&parties).bearer_auth(&token),
                )
                .await;
                self.token_defects(G, &token, 401, by_eori).await;
                Some(token)
            }
            Err(e) => {
                self.record(G, BY_EORI, NAMING_US, "-".into(), Err(e));
                self.not_tried(G, "PARTIES WITHOUT A QUERY", "400", NO_TOKEN);
                for name in TOKEN_DEFECTS {
                    self.not_tried(G, name, "401", NO_TOKEN);
                }
                None
            }
        };
        self.status_case(
            TL,
            "TRUSTED LIST WITHOUT A TOKEN",
            401,
            http.get(&trusted_list),
        )
        .await;
        match token {
            Some(token) => {
                self.case(
                    TL,
                    TRUSTED_LIST,
                    WITH_OUR_ROOT,
                    http.get(&trusted_list).bearer_auth(&token),
                    |a| check_trusted_list(o, a, &client),
                )
                .await;
            }
            None => self.not_tried(TL, TRUSTED_LIST, WITH_OUR_ROOT, NO_TOKEN),
        }
    }
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
