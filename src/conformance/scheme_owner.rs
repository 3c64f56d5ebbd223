//! The cases of a scheme owner: the parties search and the trusted list.

use super::cases::{signed_member, Run, Verdict, VERIFIED};
use super::probe::Answer;
use super::Options;
use crate::scheme::models::{PartiesPayload, TrustedListPayload};
use crate::scheme::vocabulary::{member, PARTIES_PATH, TRUSTED_LIST_PATH};
use serde_json::Value;

impl Run<'_> {
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
