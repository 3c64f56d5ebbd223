//! The cases of the lists a 3.0 participant registry must serve beside its party search: a party's
//! claims (`/parties/{partyId}/claims`), the scheme's data spaces (`/dataspaces`) and its
//! frameworks (`/frameworks`), each without a token (401) and with one; and what every 3.0 list
//! shares (its paging) and every record of ours must say.

use super::cases::{signed_member, Run, Verdict, VERIFIED};
use super::options::Options;
use super::probe::Answer;
use crate::peers::{join, party_path};
use crate::scheme::party_record::{dataspace_id_problem, read_3_0, Party};
use crate::scheme::trust::fingerprint;
use crate::scheme::vocabulary::{member, DATASPACES_PATH, FRAMEWORKS_PATH};
use crate::scheme::Timestamp;
use serde_json::{json, Map, Value};

const CLAIMS: &str = "claims";
const DATASPACES: &str = "dataspaces";
const FRAMEWORKS: &str = "frameworks";
const OUR_CLAIMS: &str = "OUR CLAIMS";
const OUR_CLAIMS_HELD: &str = "200, our claims: active, our certificate";
const UNKNOWN_CLAIMS: &str = "CLAIMS OF AN UNKNOWN PARTY";
const SPACES: &str = "DATA SPACES";
const SPACES_LISTED: &str = "200, signed data spaces, each an id of 3.0's form and a title";
const SPACES_TOO_LARGE: &str = "DATA SPACES PAGE SIZE OVER 100";
const FRAMEWORKS_LISTED: &str = "200, signed frameworks (100 a page), ours among them";

/// A page of a 3.0 list: its paging and its entries.
pub(super) struct Listed<'v> {
    pub current: u64,
    pub size: u64,
    pub total_count: u64,
    pub data: &'v [Value],
}

/// The page `info` holds (`partiesInfo`, `dataspacesInfo`, …, named `name`), its paging
/// consistent: `count` the entries of this page, no more than `pageSize`, and `totalPages` what
/// `totalCount` makes of pages of `pageSize`.
pub(super) fn listed<'v>(info: &'v Value, name: &str) -> Result<Listed<'v>, String> {
    let info = info.as_object().ok_or(format!("{name} is not an object"))?;
    let number = |k: &str| {
        info.get(k)
            .and_then(Value::as_u64)
            .ok_or(format!("{name} has no {k} (a whole number)"))
    };
    let data = info
        .get("data")
        .and_then(Value::as_array)
        .ok_or(format!("{name} has no data (a list)"))?;
    let page = Listed {
        current: number("currentPage")?,
        size: number("pageSize")?,
        total_count: number("totalCount")?,
        data,
    };
    let (count, total_pages) = (number("count")?, number("totalPages")?);
    let held = data.len() as u64;
    if count != held || held > page.size {
        return Err(format!(
            "count is {count} and pageSize {}, where data holds {held}",
            page.size
        ));
    }
    let pages = page.total_count.div_ceil(page.size.max(1));
    if total_pages != pages && !(page.total_count == 0 && total_pages == 1) {
        return Err(format!(
            "totalPages is {total_pages}, where {} entries make {pages} pages of {}",
            page.total_count, page.size
        ));
    }
    Ok(page)
}

/// What our record's claims must say: we are active now, and an active `x509Certificate` claim
/// binds our certificate.
pub(super) fn our_standing(o: &Options, party: &Party) -> Result<(), String> {
    let now = Timestamp::now().secs();
    if !party.is_active_at(now) {
        return Err(format!(
            "our record is not active now: no active frameworkCompliance claim of {} in its dates",
            o.scheme
        ));
    }
    let ours = o.client.chain_der().first().map(|leaf| fingerprint(leaf));
    let bound = party.certificates_at(now).any(|c| {
        c.x5t_s256
            .as_deref()
            .zip(ours.as_deref())
            .is_some_and(|(registered, ours)| registered.eq_ignore_ascii_case(ours))
    });
    if !bound {
        return Err("no active x509Certificate claim holds our certificate's x5t#s256".into());
    }
    Ok(())
}

/// Our claims, from a signed `claimsToken`: `claimsInfo.claims`, read as our record, active and
/// binding our certificate.
fn our_claims(o: &Options, a: &Answer) -> Verdict {
    let us = o.client.party_id().as_str();
    let claims = signed_member(o, a, member::CLAIMS_3, Some(us))?;
    let listed = claims
        .get("claimsInfo")
        .and_then(|info| info.get("claims"))
        .filter(|c| c.is_array())
        .ok_or("the token has no claimsInfo with claims (a list)")?;
    let record = json!({"id": us, "name": "", "claims": listed});
    let party = read_3_0(&record, &o.scheme).map_err(|e| e.to_string())?;
    our_standing(o, &party)?;
    Ok(format!(
        "{}: {VERIFIED}; claimsInfo: active, with our certificate",
        member::CLAIMS_3
    ))
}

/// The page of a signed list answer in `member_name`, under `info`.
fn signed_list(
    o: &Options,
    a: &Answer,
    member_name: &str,
    info: &str,
) -> Result<Map<String, Value>, String> {
    signed_member(o, a, member_name, Some(o.client.party_id().as_str()))?
        .remove(info)
        .and_then(|v| match v {
            Value::Object(m) => Some(m),
            _ => None,
        })
        .ok_or(format!("the token has no {info} (an object)"))
}

fn check_dataspaces(o: &Options, a: &Answer) -> Verdict {
    let info = Value::Object(signed_list(o, a, member::DATASPACES_3, "dataspacesInfo")?);
    let page = listed(&info, "dataspacesInfo")?;
    for (i, space) in page.data.iter().enumerate() {
        let text = |k: &str| space.get(k).and_then(Value::as_str);
        let (Some(id), Some(_)) = (text("id"), text("title")) else {
            return Err(format!("dataspacesInfo.data[{i}] has no id and title"));
        };
        if let Some(problem) = dataspace_id_problem(id) {
            return Err(format!("dataspacesInfo.data[{i}]: {problem}"));
        }
    }
    Ok(format!(
        "{}: {VERIFIED}; {} data spaces of {}, paging consistent",
        member::DATASPACES_3,
        page.data.len(),
        page.total_count
    ))
}

fn check_frameworks(o: &Options, a: &Answer) -> Verdict {
    let info = Value::Object(signed_list(o, a, member::FRAMEWORKS_3, "frameworksInfo")?);
    let page = listed(&info, "frameworksInfo")?;
    let ours = page
        .data
        .iter()
        .any(|f| f.get("id").and_then(Value::as_str) == Some(o.scheme.as_str()));
    if !ours {
        return Err(format!("{} is not among the frameworks listed", o.scheme));
    }
    Ok(format!(
        "{}: {VERIFIED}; {} listed, paging consistent",
        member::FRAMEWORKS_3,
        o.scheme
    ))
}

impl Run<'_> {
    /// 3.0's required lists beside the party search, with the access token `token` (or why
    /// there is none).
    pub(super) async fn participant_lists(&mut self, token: Result<&str, &str>) {
        let o = self.o;
        let claims_of = |id: &str| {
            o.http
                .get(join(&o.target, &format!("{}/claims", party_path(id))))
        };
        let us = o.client.party_id().as_str();
        let spaces = self.url(DATASPACES_PATH);
        let frameworks = self.url(FRAMEWORKS_PATH);
        let unsigned = [
            (CLAIMS, "CLAIMS WITHOUT A TOKEN", claims_of(us)),
            (
                DATASPACES,
                "DATA SPACES WITHOUT A TOKEN",
                o.http.get(&spaces),
            ),
            (
                FRAMEWORKS,
                "FRAMEWORKS WITHOUT A TOKEN",
                o.http.get(&frameworks),
            ),
        ];
        for (group, name, request) in unsigned {
            self.status_case(group, name, 401, request).await;
        }
        let token = match token {
            Ok(token) => token,
            Err(why) => {
                for (group, name, expected) in [
                    (CLAIMS, OUR_CLAIMS, OUR_CLAIMS_HELD),
                    (CLAIMS, UNKNOWN_CLAIMS, "404"),
                    (DATASPACES, SPACES, SPACES_LISTED),
                    (DATASPACES, SPACES_TOO_LARGE, "400"),
                    (FRAMEWORKS, "FRAMEWORKS", FRAMEWORKS_LISTED),
                ] {
                    self.not_tried(group, name, expected, why);
                }
                return;
            }
        };
        let request = claims_of(us).bearer_auth(token);
        self.case(CLAIMS, OUR_CLAIMS, OUR_CLAIMS_HELD, request, |a| {
            our_claims(o, a)
        })
        .await;
        let request = claims_of(o.stranger()).bearer_auth(token);
        self.status_case(CLAIMS, UNKNOWN_CLAIMS, 404, request).await;
        let request = o.http.get(&spaces).bearer_auth(token);
        self.case(DATASPACES, SPACES, SPACES_LISTED, request, |a| {
            check_dataspaces(o, a)
        })
        .await;
        let request = o
            .http
            .get(&spaces)
            .query(&[("pageSize", "101")])
            .bearer_auth(token);
        self.status_case(DATASPACES, SPACES_TOO_LARGE, 400, request)
            .await;
        let request = o
            .http
            .get(&frameworks)
            .query(&[("pageSize", "100")])
            .bearer_auth(token);
        self.case(FRAMEWORKS, "FRAMEWORKS", FRAMEWORKS_LISTED, request, |a| {
            check_frameworks(o, a)
        })
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_whose_counts_disagree_is_named() {
        let page = |count: u64, total_pages: u64| {
            json!({"currentPage": 1, "pageSize": 2, "totalCount": 3, "count": count,
                "totalPages": total_pages, "data": [{"id": "a"}, {"id": "b"}]})
        };
        let consistent = page(2, 2);
        let read = listed(&consistent, "dataspacesInfo").unwrap();
        assert_eq!((read.current, read.size, read.total_count), (1, 2, 3));
        assert_eq!(read.data.len(), 2);
        assert_eq!(
            listed(&page(1, 2), "dataspacesInfo").err().unwrap(),
            "count is 1 and pageSize 2, where data holds 2"
        );
        assert_eq!(
            listed(&page(2, 1), "dataspacesInfo").err().unwrap(),
            "totalPages is 1, where 3 entries make 2 pages of 2"
        );
        assert_eq!(
            listed(&json!({"data": []}), "frameworksInfo")
                .err()
                .unwrap(),
            "frameworksInfo has no currentPage (a whole number)"
        );
    }
}
