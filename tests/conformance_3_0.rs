//! The conformance checker held to iSHARE 3.0 (`--scheme-version 3.0`), run as the real binary:
//! every participant of the testbed run as a scheme of 3.0 (conf/testbed-3.0.toml) passes in its
//! role, the gateway passes as a 3.0 service provider with the broker pattern, and the same
//! testbed held to 1.9 fails, each case saying the participant speaks another version.

use crate::support;

use support::checker::{run_checker, Checked};
use support::*;

const BIN: &str = "conformance_3_0";

async fn bed() -> Bed {
    Bed::start_of(testbed_config_of(BIN, "conf/testbed-3.0.toml")).await
}

/// `ishare-gateway conformance --scheme-version VERSION --role ROLE` against `target` (party
/// `target_id`) with the testbed's identities, the masks for registries, and `extra`.
async fn check_at(
    bed: &Bed,
    version: &str,
    role: &str,
    (target, target_id): (&str, &str),
    extra: &[&str],
) -> Checked {
    let data_dir = bed.keys.data_dir.display().to_string();
    let mut args = vec![
        "--scheme-version",
        version,
        "--role",
        role,
        "--target",
        target,
        "--target-id",
        target_id,
        "--testbed",
        &data_dir,
    ];
    // The shipped 3.0 masks (conf/conformance), as CI runs them.
    let masks = ["permit", "deny"].map(|kind| {
        let file = format!("conf/conformance/{kind}-mask-3.0.json");
        repo().join(file).display().to_string()
    });
    if role == "authorisation-registry" {
        args.extend(["--permit-mask", &masks[0], "--deny-mask", &masks[1]]);
    }
    args.extend(extra);
    run_checker(&args).await
}

/// `check_at` the testbed's `party`.
async fn check(bed: &Bed, version: &str, role: &str, party: &str, extra: &[&str]) -> Checked {
    check_at(bed, version, role, (&bed.url(party), party), extra).await
}

/// No case failed, exactly `skipped` were skipped (each with its reason), none was left untried,
/// and the run held the target to 3.0.
fn assert_passes(checked: &Checked, skipped: &[(&str, &str)], at_least: usize) {
    assert!(checked.success, "{}", checked.output);
    assert!(checked.ended("FAIL").is_empty(), "{}", checked.output);
    assert!(checked.ended("not tried").is_empty(), "{}", checked.output);
    let names: Vec<&str> = skipped.iter().map(|(name, _)| *name).collect();
    assert_eq!(checked.ended("skipped"), names, "{}", checked.output);
    for (name, reason) in skipped {
        checked.assert_case(name, "skipped", reason);
    }
    assert!(checked.rows.len() >= at_least, "{}", checked.output);
    assert!(
        checked.title.ends_with(", scheme version 3.0"),
        "{}",
        checked.title
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_3_0_testbed_participant_passes_in_its_role() {
    let bed = bed().await;
    // The participant registry (3.0's name of the scheme owner's role).
    let checked = check(&bed, "3.0", "participant-registry", SO3, &[]).await;
    assert_passes(
        &checked,
        &[(
            "parties: PARTIES WITHOUT A QUERY",
            "3.0's query parameters are all optional",
        )],
        53,
    );
    for (name, reason) in [
        ("capabilities: PUBLIC CAPABILITIES", "capabilitiesToken: signature"),
        ("capabilities: PUBLIC CAPABILITIES", "2 public and 0 restricted services as 3.0's schema has them, request-oauth-token among them"),
        ("capabilities: CAPABILITIES WITH A TOKEN", "2 public and 5 restricted services"),
        ("parties: PARTIES BY ID", "partiesToken: signature"),
        // The 3.0 testbed's nine parties and the tests' eight extra consumers.
        ("parties: PARTIES PAGE SIZE", "one party a page, of 17"),
        ("parties: PARTIES SECOND PAGE", "page 2 holds"),
        ("parties: ACCESS TOKEN INVALID SIGNATURE", "the status the scheme expects"),
        ("party: PARTY BY ID", "partyInfo names us, active, with our certificate"),
        ("party: PARTY BY ALIAS", &format!("EU.EORI.NL000000001 names our record, {CONSUMER3}")),
        ("party: UNKNOWN PARTY", "the status the scheme expects"),
        ("party: PARTY NOT ACTIVE", "no active frameworkCompliance"),
        ("trustedList: TRUSTED LIST", "trustedListToken: signature"),
        ("trustedList: TRUSTED LIST", "entries by certificateFingerprint, our root valid and granted"),
        ("claims: CLAIMS WITHOUT A TOKEN", "the status the scheme expects"),
        ("claims: OUR CLAIMS", "claimsInfo: active, with our certificate"),
        ("claims: CLAIMS OF AN UNKNOWN PARTY", "the status the scheme expects"),
        ("dataspaces: DATA SPACES WITHOUT A TOKEN", "the status the scheme expects"),
        ("dataspaces: DATA SPACES", "dataspacesToken: signature"),
        ("dataspaces: DATA SPACES", "2 data spaces of 2, paging consistent"),
        ("dataspaces: DATA SPACES PAGE SIZE OVER 100", "the status the scheme expects"),
        ("frameworks: FRAMEWORKS WITHOUT A TOKEN", "the status the scheme expects"),
        ("frameworks: FRAMEWORKS", "iSHARE listed, paging consistent"),
        ("token: UNKNOWN CLIENT ID", "the status the scheme expects"),
        ("token: CLIENT ID NOT ACTIVE", "the status the scheme expects"),
    ] {
        checked.assert_case(name, "pass", reason);
    }
    assert!(checked.row("party: UNKNOWN PARTY").got.starts_with("404"));
    assert!(checked
        .row("claims: CLAIMS OF AN UNKNOWN PARTY")
        .got
        .starts_with("404"));

    // Service providers: the testbed's offer no broker pattern.
    for sp in [SP3, STELLAR3] {
        let checked = check(&bed, "3.0", "service-provider", sp, &[]).await;
        assert_passes(
            &checked,
            &[(
                "broker: BROKER WITH A CONSUMER ASSERTION",
                "give a resource the consumer may reach",
            )],
            38,
        );
    }

    // The authorisation registry, and the entitled party answering for its own delegations.
    for registry in [AR3, OWNER3] {
        let checked = check(&bed, "3.0", "authorisation-registry", registry, &[]).await;
        assert_passes(&checked, &[], 70);
        for (name, reason) in [
            ("delegation: PERMIT MASK", "delegationToken: signature"),
            (
                "delegation: PERMIT MASK",
                "Permit, with conditions for the service provider",
            ),
            ("delegation: DENY MASK", "Deny"),
            (
                "delegation: AS SERVICE PROVIDER WITH PREVIOUS STEPS",
                "Permit",
            ),
            (
                "delegation: CLIENT ID NOT ALLOWED",
                "the status the scheme expects",
            ),
            (
                "delegation: MASK ID NOT ACTIVE",
                "the status the scheme expects",
            ),
            (
                "delegation: PREVIOUS STEPS: ASSERTION INVALID SIGNATURE",
                "the status the scheme expects",
            ),
        ] {
            checked.assert_case(name, "pass", reason);
        }
    }

    // The identity provider, with a person to sign in as.
    let person = ["--person", "jane:jane-testbed-password"];
    let checked = check(&bed, "3.0", "identity-provider", IDP3, &person).await;
    assert_passes(&checked, &[], 55);
    for (name, reason) in [
        ("authorize: AUTHORIZE", "a page with a form"),
        (
            "authorize: REQUEST OBJECT NOT ENCRYPTED",
            "refused with 400",
        ),
        (
            "openid token: WRONG GRANT TYPE",
            "the status the scheme expects",
        ),
        (
            "openid token: CODE NOT ISSUED",
            "the status the scheme expects",
        ),
        (
            "userinfo: HTTP WRONG METHOD",
            "the status the scheme expects",
        ),
        ("sign-in: SIGN IN", "a code, with our state"),
        ("sign-in: TOKEN WITH THE CODE", "id_token verified"),
        (
            "sign-in: THE SAME CODE AGAIN",
            "the status the scheme expects",
        ),
        (
            "sign-in: USERINFO",
            "userinfoToken verified, about the id_token's person",
        ),
    ] {
        checked.assert_case(name, "pass", reason);
    }

    // A mask that names a service provider has no meaning in 3.0: the run does not start.
    let old_mask = repo().join("conf/conformance/permit-mask.json");
    let old_mask = old_mask.display().to_string();
    let data_dir = bed.keys.data_dir.display().to_string();
    let registry = bed.url(AR3);
    let refused = run_checker(&[
        "--scheme-version",
        "3.0",
        "--role",
        "authorisation-registry",
        "--target",
        &registry,
        "--target-id",
        AR3,
        "--testbed",
        &data_dir,
        "--permit-mask",
        &old_mask,
        "--deny-mask",
        &old_mask,
    ])
    .await;
    assert!(!refused.success, "{}", refused.output);
    assert!(
        refused.output.contains(
            "a 3.0 mask names no service provider (environment.serviceProviders is not 3.0's)"
        ),
        "{}",
        refused.output
    );
    assert!(refused.rows.is_empty(), "{}", refused.output);
    bed.stop().await;
}

/// The gateway as Warehouse 13 of the 3.0 testbed, serving a container to a broker for the
/// consumer whose `serviceConsumerAssertion` it forwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_passes_as_a_3_0_service_provider_with_the_broker_pattern() {
    let bed = bed().await;
    let rules = format!(
        r#"
[[route]]
name = "containers"
methods = ["GET"]
path = "/api/containers/{{id}}"
upstream = "echo"
[route.delegation]
policy_issuer = "{OWNER3}"
resource_type = "CONTAINER"
identifiers = ["{{path.id}}"]
"#
    );
    let (dir, ports) = gateway_dir(&bed, BIN, &rules, "", |t| {
        t.replace(SO, SO3).replace(SP, SP3).replace(
            "[scheme_owner]\n",
            "[scheme_owner]\nscheme_version = \"3.0\"\n",
        )
    });
    let env = Env::launch(bed, dir, &ports).await;
    let checked = check_at(
        &env.bed,
        "3.0",
        "service-provider",
        (&env.url, SP3),
        &["--broker-resource", "/api/containers/C1"],
    )
    .await;
    assert_passes(&checked, &[], 44);
    for (name, reason) in [
        (
            "capabilities: CAPABILITIES WITH A TOKEN",
            "capabilitiesToken: signature",
        ),
        ("token: VALID ASSERTION", "access_token, token_type Bearer"),
        (
            "broker: BROKER WITH A CONSUMER ASSERTION",
            "the call for the consumer is served",
        ),
        ("broker: BROKER ASSERTION REPLAYED", "refused"),
        ("broker: BROKER ASSERTION FOR ANOTHER CALLER", "refused"),
        ("broker: BROKER ASSERTION UNTRUSTED CERTIFICATE", "refused"),
    ] {
        checked.assert_case(name, "pass", reason);
    }
    env.stop().await;
}

/// Held to 1.9, the 3.0 testbed's participant registry fails: its answers hold 3.0's members
/// where 1.9's were asked, and it refuses 1.9's query and has no 1.9 trusted list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_to_1_9_a_3_0_participant_registry_fails_as_one_of_another_version() {
    let bed = bed().await;
    let checked = check(
        &bed,
        "1.9",
        "scheme-owner",
        SO3,
        &[
            "--as",
            CONSUMER3,
            "--sp-as",
            SP3,
            "--inactive-as",
            FORMER3,
            "--unknown-as",
            "did:ishare:EU.NL.NTRNL-99999999",
        ],
    )
    .await;
    assert!(!checked.success, "{}", checked.output);
    const OTHER: &str = "the answer holds capabilitiesToken where capabilities_token was asked: the participant speaks another version of the scheme than 1.9";
    checked.assert_case("capabilities: PUBLIC CAPABILITIES", "FAIL", OTHER);
    checked.assert_case("capabilities: CAPABILITIES WITH A TOKEN", "FAIL", OTHER);
    checked.assert_case("parties: PARTIES BY EORI", "FAIL", "refused");
    assert!(checked
        .row("parties: PARTIES BY EORI")
        .got
        .starts_with("400"));
    checked.assert_case("trusted_list: TRUSTED LIST", "FAIL", "not found here");
    assert!(
        checked.title.ends_with(", scheme version 1.9"),
        "{}",
        checked.title
    );
    bed.stop().await;
}
