//! A party's record at the scheme owner, as the trust store fetches it: by its id, or where the
//! scheme owner lacks that endpoint by the search (1.9, 2.x); in 3.0 by any of its identifiers,
//! a name that is an alias standing for the record only where a search by it finds that record
//! alone.

use super::scheme_owner::TrustStore;
use super::trust::TrustError;
use super::{party_path, PeerError};
use crate::scheme::models::{PartiesPayload, PartyPayload};
use crate::scheme::party::PartyId;
use crate::scheme::party_record::{from_1_9, read_3_0, Named, Party};
use crate::scheme::vocabulary::PARTIES_PATH;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

impl TrustStore {
    /// The record of `id` (1.9, 2.x): `GET /parties/{id}`, or where that answers 404 the search
    /// `/parties?eori={id}`. A 404 for a party the search finds means the scheme owner has no such
    /// endpoint (some satellites): it is asked by the search alone from then on.
    pub(super) async fn fetch_party(&self, id: &PartyId) -> Result<Option<Party>, TrustError> {
        let version = self.config.scheme_version;
        let by_id = !self.no_party_endpoint.load(Ordering::Relaxed);
        if by_id {
            match self
                .fetch::<PartyPayload>(
                    "party",
                    &party_path(id.as_str()),
                    &[],
                    crate::scheme::vocabulary::member::PARTY,
                )
                .await
            {
                Ok(PartyPayload(p)) if p.party_id.eq_ignore_ascii_case(id.as_str()) => {
                    return Ok(Some(from_1_9(&p, version)))
                }
                Ok(_) => {
                    return Err(TrustError::Untrustworthy(format!(
                        "asked for {id}, got another party"
                    )))
                }
                // No such party, or no such endpoint at this satellite: ask the search.
                Err(TrustError::Unavailable(PeerError::Status { status: 404, .. })) => {}
                Err(e) => return Err(e),
            }
        }
        let PartiesPayload(found) = self
            .fetch(
                "parties",
                PARTIES_PATH,
                &[("eori", id.as_str())],
                crate::scheme::vocabulary::member::PARTIES,
            )
            .await?;
        let record = found
            .data
            .iter()
            .find(|p| p.party_id.eq_ignore_ascii_case(id.as_str()))
            .map(|p| from_1_9(p, version));
        if by_id && record.is_some() && !self.no_party_endpoint.swap(true, Ordering::Relaxed) {
            tracing::info!(
                scheme_owner = %self.config.url,
                "the scheme owner has no /parties/{{party_id}}: parties are looked up by /parties?eori= alone"
            );
        }
        Ok(record)
    }

    /// Whom `id` stands for (3.0, `Named`): the record its own lookup found where that is the
    /// record's own id; where it is an alias, the record only if a search by it, as an id and as
    /// an alias, finds that record alone.
    pub(super) async fn fetch_named_3(&self, id: &PartyId) -> Result<Named, TrustError> {
        let record = self.fetch_party_3(id).await?.map(Arc::new);
        if let Some(decided) = Named::by_lookup(id.as_str(), record.as_ref()) {
            return Ok(decided);
        }
        let Some(record) = record else {
            return Ok(Named::Nobody);
        };
        let mut found = Vec::new();
        let mut complete = true;
        for parameter in ["id", "alsoKnownAs"] {
            // Each search is a lookup of its own, within `party_lookups_per_second`.
            if self.party_lookups.take(Instant::now()).is_err() {
                return Err(TrustError::Busy);
            }
            let (records, whole) = self.search_3(parameter, id.as_str()).await?;
            found.extend(records);
            complete &= whole;
        }
        Ok(Named::by_search(id.as_str(), &record, &found, complete))
    }

    /// The records a 3.0 search `/parties?{parameter}={name}` finds (its first page), and whether
    /// that page holds them all (by its `totalCount`: a page without one proves nothing).
    async fn search_3(
        &self,
        parameter: &str,
        name: &str,
    ) -> Result<(Vec<Party>, bool), TrustError> {
        let member = crate::scheme::vocabulary::member::PARTIES_3;
        let claims: serde_json::Value = self
            .fetch("parties", PARTIES_PATH, &[(parameter, name)], member)
            .await?;
        let untrustworthy = |why: String| TrustError::Untrustworthy(why);
        let info = claims
            .get("partiesInfo")
            .ok_or_else(|| untrustworthy("the partiesToken holds no partiesInfo".into()))?;
        let data = info
            .get("data")
            .and_then(serde_json::Value::as_array)
            .ok_or_else(|| untrustworthy("the partiesInfo holds no data".into()))?;
        let records = data
            .iter()
            .map(|r| read_3_0(r, self.peer.scheme()).map_err(|e| untrustworthy(e.to_string())))
            .collect::<Result<Vec<Party>, _>>()?;
        let total = info.get("totalCount").and_then(serde_json::Value::as_u64);
        let whole = total.is_some_and(|t| t <= records.len() as u64);
        Ok((records, whole))
    }

    /// The 3.0 record of `id` (any of its identifiers): `GET /parties/{id}` with `partyToken`,
    /// whose `partyInfo` must name `id`. A 404 is a party the register does not know.
    async fn fetch_party_3(&self, id: &PartyId) -> Result<Option<Party>, TrustError> {
        let path = party_path(id.as_str());
        let member = crate::scheme::vocabulary::member::PARTY_3;
        let claims: serde_json::Value = match self.fetch("party", &path, &[], member).await {
            Ok(claims) => claims,
            Err(TrustError::Unavailable(PeerError::Status { status: 404, .. })) => return Ok(None),
            Err(e) => return Err(e),
        };
        let untrustworthy = |why: String| TrustError::Untrustworthy(why);
        let info = claims
            .get("partyInfo")
            .ok_or_else(|| untrustworthy("the partyToken holds no partyInfo".into()))?;
        let party = read_3_0(info, self.peer.scheme()).map_err(|e| untrustworthy(e.to_string()))?;
        if !party.names(id.as_str()) {
            return Err(untrustworthy(format!("asked for {id}, got another party")));
        }
        Ok(Some(party))
    }
}
