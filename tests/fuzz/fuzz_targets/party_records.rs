//! Party records of every version on arbitrary JSON: a 3.0 `partyInfo` (claims) and a 1.9/2.x
//! `party_info`. Properties, besides never panicking: a record read names the party by the id it
//! is kept under and by nothing its own `alsoKnownAs` does not list; a party active at a time has
//! an adherence span holding it; the registries it designates for us are among those it lists; a
//! role held in a data space counts only for a member of that data space, and only while the
//! party is its member.
#![no_main]

use ishare_gateway::scheme::models::PartyInfo;
use ishare_gateway::scheme::party_record::{from_1_9, read_3_0, Membership, Party};
use ishare_gateway::scheme::version::SchemeVersion;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

const NOW: i64 = 1_800_000_000;

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    if let Ok(party) = read_3_0(&value, "iSHARE") {
        assert_eq!(Some(party.id.as_str()), value["id"].as_str());
        holds(&party);
    }
    if let Ok(info) = serde_json::from_value::<PartyInfo>(value) {
        for version in [
            SchemeVersion::V1_9,
            SchemeVersion::V2_0,
            SchemeVersion::V2_1,
        ] {
            holds(&from_1_9(&info, version));
        }
    }
});

fn holds(party: &Party) {
    assert!(party.names(&party.id));
    assert!(party.also_known_as.iter().all(|a| party.names(a)));
    for probe in ["did:ishare:EU.NL.NTRNL-99999999", "EU.EORI.NL999999999"] {
        let written = std::iter::once(&party.id).chain(&party.also_known_as);
        if party.names(probe) {
            assert!(
                written.into_iter().any(|n| n.eq_ignore_ascii_case(probe)),
                "{probe} named by a record that does not list it"
            );
        }
    }
    if party.is_active_at(NOW) {
        assert!(party.adherence.iter().any(|s| s.contains(NOW)));
    }
    let ours = |spaces: Vec<String>| Membership {
        framework: "iSHARE".into(),
        dataspaces: spaces,
    };
    for (space, role, _) in &party.dataspace_roles {
        let in_framework = party.has_role(role, NOW);
        assert_eq!(party.holds_role(role, &ours(vec![]), NOW), in_framework);
        if party.holds_role(role, &ours(vec![space.clone()]), NOW) && !in_framework {
            assert!(
                party.is_member_of(space, NOW),
                "{role} in {space} without membership"
            );
        }
    }
    let listed = party.registries_at(NOW).count();
    assert!(party.registries.len() >= listed);
    let _ = party.weight();
}
