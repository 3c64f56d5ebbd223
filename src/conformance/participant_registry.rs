//! The cases of a 3.0 participant registry (the scheme owner's role in 3.0): the party search and
//! its paging, one party by its id and by an alias with the claims that bind our certificate, a
//! party nobody registered and one that is not active, and `/trustedList` (its other lists in
//! `participant_lists.rs`). No case sends a query parameter 3.0 does not have (`eori`,
//! `certificate_subject_name`, …): a registry that ignored one would answer an unfiltered page.

use super::cases::{signed_member, Run, Verdict, TOKEN_DEFECTS, VERIFIED};
use super::names::{claim_of, missing};
use super::options::Options;
use super::participant_lists::{listed, our_standing};
use super::probe::Answer;
use crate::peers::{join, party_path};
use crate::scheme::party_record::{read_3_0, Party};
use crate::scheme::vocabulary::{member, PARTIES_PATH, TRUSTED_LIST_PATH_3};
use crate::scheme::Timestamp;
use serde_json::Value;

const SEARCH: &str = "parties";
const ONE: &str = "party";
const TL: &str = "trustedList";
const BY_ID: &str = "PARTIES BY ID";
const NAMING_US: &str = "200, signed parties naming us";
const PAGE_SIZE: &str = "PARTIES PAGE SIZE";
const ONE_OF_ALL: &str = "200, one party of totalCount";
const SECOND_PAGE: &str = "PARTIES SECOND PAGE";
const ANOTHER: &str = "200, page 2: another party";
const BY_PARTY_ID: &str = "PARTY BY ID";
const OUR_RECORD: &str = "200, our record: active, our certificate";
const BY_ALIAS: &str = "PARTY BY ALIAS";
const ALIAS_RECORD: &str = "200, the record the alias names";
const UNKNOWN: &str = "UNKNOWN PARTY";
const NOT_ACTIVE: &str = "PARTY NOT ACTIVE";
const INACTIVE_RECORD: &str = "200, its record, not active";
const TRUSTED_LIST: &str = "TRUSTED LIST";
const WITH_OUR_ROOT: &str = "200, signed trusted list with our root";
const NO_TOKEN: &str = "no access token (PARTIES BY ID)";

/// A page of the search: its paging and its parties.
struct Page {
    current: u64,
    size: u64,
    total_count: u64,
    parties: Vec<Party>,
}

/// The signed page of a search answer, its paging consistent (`participant_lists::listed`).
fn page(o: &Options, a: &Answer) -> Result<Page, String> {
    let claims = signed_member(o, a, o.member(member::PARTIES), Some(client(o)))?;
    let info = claim_of(&claims, "parties_info", o.version)?;
    let listed = listed(info, "partiesInfo")?;
    let parties = listed
        .data
        .iter()
        .map(|record| read_3_0(record, &o.scheme).map_err(|e| e.to_string()))
        .collect::<Result<Vec<Party>, String>>()?;
    Ok(Page {
        current: listed.current,
        size: listed.size,
        total_count: listed.total_count,
        parties,
    })
}

/// The signed record of a party answer (`partyInfo`, claims-based).
fn record(o: &Options, a: &Answer) -> Result<Party, String> {
    let claims = signed_member(o, a, o.member(member::PARTY), Some(client(o)))?;
    read_3_0(claim_of(&claims, "party_info", o.version)?, &o.scheme).map_err(|e| e.to_string())
}

fn client(o: &Options) -> &str {
    o.client.party_id().as_str()
}

/// Our record: it names us, is active now, and binds our certificate by an active
/// `x509Certificate` claim.
fn our_record(o: &Options, a: &Answer) -> Result<Party, String> {
    let party = record(o, a)?;
    let us = client(o);
    if !party.names(us) {
        return Err(format!("asked for {us}, got the record of {}", party.id));
    }
    our_standing(o, &party)?;
    Ok(party)
}

fn check_trusted_list(o: &Options, a: &Answer) -> Verdict {
    let name = o.member(member::TRUSTED_LIST);
    let claims = signed_member(o, a, name, Some(client(o)))?;
    let entries = claim_of(&claims, "trusted_list", o.version)?
        .as_array()
        .ok_or("trustedList is not a list")?;
    let ours: Vec<&str> = o
        .trusted
        .entries()
        .map(|e| e.certificate_fingerprint.as_str())
        .collect();
    let mut listed = false;
    for (i, entry) in entries.iter().enumerate() {
        let text = |k: &str| entry.get(k).and_then(Value::as_str);
        let Some(print) = text("certificateFingerprint") else {
            let holder = format!("entry trustedList[{i}]");
            return Err(missing("certificateFingerprint", &holder, o.version, |k| {
                entry.get(k).is_some()
            }));
        };
        if ours.iter().any(|f| f.eq_ignore_ascii_case(print)) {
            if text("validity") != Some("valid") || text("status") != Some("granted") {
                return Err(format!(
                    "our root is listed with validity {:?} and status {:?}, not valid and granted",
                    text("validity"),
                    text("status")
                ));
            }
            listed = true;
        }
    }
    if !listed {
        return Err("the trusted list does not hold the root given with --ca".into());
    }
    Ok(format!(
        "{name}: {VERIFIED}; entries by certificateFingerprint, our root valid and granted"
    ))
}

impl Run<'_> {
    /// A 3.0 participant registry's endpoints, each asked without a token first, then with one.
    pub async fn participant_registry(&mut self) {
        let token = self.access_token(&self.o.client).await;
        let token = token.as_deref().map_err(String::as_str);
        self.party_search(token).await;
        let token = token.map_err(|_| NO_TOKEN);
        self.party_records(token).await;
        self.trusted_list_3(token).await;
        self.participant_lists(token).await;
    }

    /// GET /parties: by our id (without a token, with one, and with access tokens not the
    /// target's), and every party one a page.
    async fn party_search(&mut self, token: Result<&str, &str>) {
        let http = self.o.http.clone();
        let url = self.url(PARTIES_PATH);
        let o = self.o;
        let client = client(o).to_string();
        let by_id = || http.get(&url).query(&[("id", client.as_str())]);
        self.status_case(SEARCH, "PARTIES WITHOUT A TOKEN", 401, by_id())
            .await;
        self.skip(
            SEARCH,
            "PARTIES WITHOUT A QUERY",
            "400",
            "3.0's query parameters are all optional: a search without one lists every party",
        );
        let token = match token {
            Ok(token) => token,
            Err(e) => {
                self.record(SEARCH, BY_ID, NAMING_US, "-".into(), Err(e.to_string()));
                for (name, expected) in [(PAGE_SIZE, ONE_OF_ALL), (SECOND_PAGE, ANOTHER)]
                    .into_iter()
                    .chain(TOKEN_DEFECTS.map(|name| (name, "401")))
                {
                    self.not_tried(SEARCH, name, expected, NO_TOKEN);
                }
                return;
            }
        };
        let judge = |a: &Answer| {
            let found = page(o, a)?;
            if !found.parties.iter().any(|p| p.id == client) {
                return Err(format!("the parties found do not include {client}"));
            }
            Ok(format!(
                "{}: {VERIFIED}; partiesInfo names us, its paging consistent",
                o.member(member::PARTIES)
            ))
        };
        self.case(SEARCH, BY_ID, NAMING_US, by_id().bearer_auth(token), judge)
            .await;
        self.pages(token).await;
        self.token_defects(SEARCH, token, 401, by_id).await;
    }

    /// Every party (`name=*`) one a page: the first page, then the second, another party.
    async fn pages(&mut self, token: &str) {
        let url = self.url(PARTIES_PATH);
        let o = self.o;
        let one_a_page = |page: &str| {
            o.http
                .get(&url)
                .query(&[("name", "*"), ("pageSize", "1"), ("page", page)])
                .bearer_auth(token)
        };
        let first = |a: &Answer| -> Result<(Page, String), String> {
            let p = page(o, a)?;
            let held = p.parties.first().map(|party| party.id.clone());
            match (p.current, p.size, held) {
                (1, 1, Some(id)) => Ok((p, id)),
                (current, size, _) => Err(format!(
                    "currentPage {current}, pageSize {size}, {} parties of totalCount {}",
                    p.parties.len(),
                    p.total_count
                )),
            }
        };
        let answer = self
            .case(SEARCH, PAGE_SIZE, ONE_OF_ALL, one_a_page("1"), |a| {
                first(a).map(|(p, _)| format!("one party a page, of {}", p.total_count))
            })
            .await;
        let (total, first_id) = match answer.as_ref().map(first) {
            Some(Ok((p, id))) => (p.total_count, id),
            _ => {
                let why = "no first page of one party (PARTIES PAGE SIZE)";
                return self.not_tried(SEARCH, SECOND_PAGE, ANOTHER, why);
            }
        };
        if total < 2 {
            let why = "the registry lists one party: there is no second page";
            return self.skip(SEARCH, SECOND_PAGE, ANOTHER, why);
        }
        self.case(SEARCH, SECOND_PAGE, ANOTHER, one_a_page("2"), |a| {
            let p = page(o, a)?;
            match (p.current, p.parties.first()) {
                (2, Some(party)) if party.id != first_id && p.parties.len() == 1 => {
                    Ok(format!("page 2 holds {}, page 1 {first_id}", party.id))
                }
                (current, party) => Err(format!(
                    "currentPage {current} holds {:?} after {first_id} on page 1",
                    party.map(|p| &p.id)
                )),
            }
        })
        .await;
    }

    /// GET /parties/{partyId}: ours by our id (without a token, then with one) and by an alias our
    /// record lists, a party nobody registered, and one not active.
    async fn party_records(&mut self, token: Result<&str, &str>) {
        let o = self.o;
        let at = |id: &str| o.http.get(join(&o.target, &party_path(id)));
        self.status_case(ONE, "PARTY WITHOUT A TOKEN", 401, at(client(o)))
            .await;
        let token = match token {
            Ok(token) => token,
            Err(why) => {
                for (name, expected) in [
                    (BY_PARTY_ID, OUR_RECORD),
                    (BY_ALIAS, ALIAS_RECORD),
                    (UNKNOWN, "404"),
                    (NOT_ACTIVE, INACTIVE_RECORD),
                ] {
                    self.not_tried(ONE, name, expected, why);
                }
                return;
            }
        };
        let request = at(client(o)).bearer_auth(token);
        let ours = self
            .case(ONE, BY_PARTY_ID, OUR_RECORD, request, |a| {
                our_record(o, a).map(|_| {
                    let name = o.member(member::PARTY);
                    format!("{name}: {VERIFIED}; partyInfo names us, active, with our certificate")
                })
            })
            .await
            .and_then(|a| our_record(o, &a).ok());
        match ours {
            None => {
                let why = "our record was not read (PARTY BY ID)";
                self.not_tried(ONE, BY_ALIAS, ALIAS_RECORD, why);
            }
            Some(party) => match party.also_known_as.iter().find(|a| **a != party.id) {
                None => self.skip(
                    ONE,
                    BY_ALIAS,
                    ALIAS_RECORD,
                    "our record lists no alsoKnownAs to ask by",
                ),
                Some(alias) => {
                    let request = at(alias).bearer_auth(token);
                    self.case(ONE, BY_ALIAS, ALIAS_RECORD, request, |a| {
                        let found = record(o, a)?;
                        match found.id == party.id {
                            true => Ok(format!("{alias} names our record, {}", party.id)),
                            false => Err(format!("{alias} names {}, not {}", found.id, party.id)),
                        }
                    })
                    .await;
                }
            },
        }
        self.status_case(ONE, UNKNOWN, 404, at(o.stranger()).bearer_auth(token))
            .await;
        let Some(inactive) = &o.inactive else {
            let why = "give an inactive party (--inactive-as), or --testbed";
            return self.skip(ONE, NOT_ACTIVE, INACTIVE_RECORD, why);
        };
        let id = inactive.party_id().as_str();
        self.case(
            ONE,
            NOT_ACTIVE,
            INACTIVE_RECORD,
            at(id).bearer_auth(token),
            |a| {
                let party = record(o, a)?;
                match (party.names(id), party.is_active_at(Timestamp::now().secs())) {
                    (false, _) => Err(format!("asked for {id}, got the record of {}", party.id)),
                    (true, true) => Err(format!("the record says {id} is active")),
                    (true, false) => Ok("its record has no active frameworkCompliance now".into()),
                }
            },
        )
        .await;
    }

    /// GET /trustedList without a token, and with one: signed, holding the root of `--ca`.
    async fn trusted_list_3(&mut self, token: Result<&str, &str>) {
        let url = self.url(TRUSTED_LIST_PATH_3);
        let http = self.o.http.clone();
        let o = self.o;
        self.status_case(TL, "TRUSTED LIST WITHOUT A TOKEN", 401, http.get(&url))
            .await;
        match token {
            Ok(token) => {
                let request = http.get(&url).bearer_auth(token);
                self.case(TL, TRUSTED_LIST, WITH_OUR_ROOT, request, |a| {
                    check_trusted_list(o, a)
                })
                .await;
            }
            Err(why) => self.not_tried(TL, TRUSTED_LIST, WITH_OUR_ROOT, why),
        }
    }
}
