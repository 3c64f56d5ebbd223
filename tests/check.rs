//! `ishare-gateway check` as operators run it, on a small configuration like the README's first
//! one (in ten lines): every problem of a run listed together, a misspelled key named at its line with the key it
//! resembles, route names the gateway counts its own answers under refused, and participants whose
//! certificates only the platform's roots can verify warned of, as are an admin listener on every
//! interface and secret files others may read; and the configuration of the
//! Kubernetes manifests accepted.

use ishare_gateway::testbed::pki::TestPki;
use std::path::Path;
use std::process::Command;

/// The README's configuration in ten lines, with the test PKI's key material.
const GATEWAY: &str = r#"[identity]
party_id = "EU.EORI.NL000000003"
key = "id.key.pem"
certificate_chain = "id.chain.pem"
[[listener]]
address = "127.0.0.1:8443"
[scheme_owner]
url = "https://satellite.example"
party_id = "EU.EORI.NL000000000"
root_certificate = "root.pem"
[[upstream]]
name = "legacy"
addresses = ["127.0.0.1:9180"]
"#;

const ROUTE: &str = r#"[[route]]
name = "orders"
path = "/orders/{id}"
upstream = "legacy"
"#;

/// A directory with the key material, `gateway.toml` and `policies/api.toml`.
fn config_dir(gateway: &str, rules: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("policies")).unwrap();
    let pki = TestPki::shared();
    let party = pki.party("EU.EORI.NL000000003");
    for (name, text) in [
        ("id.key.pem", party.key_pem.as_str()),
        ("id.chain.pem", party.chain_pem.as_str()),
        ("root.pem", pki.root_pem()),
        ("gateway.toml", gateway),
        ("policies/api.toml", rules),
    ] {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    dir
}

/// `ishare-gateway check --config DIR/gateway.toml`: whether it passed, and its lines with the
/// directory left out of file names.
fn check(dir: &Path) -> (bool, Vec<String>) {
    let out = Command::new(env!("CARGO_BIN_EXE_ishare-gateway"))
        .args(["check", "--config"])
        .arg(dir.join("gateway.toml"))
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&out.stdout).replace(&format!("{}/", dir.display()), "");
    (
        out.status.success(),
        printed.lines().map(str::to_string).collect(),
    )
}

/// The lines of a `check` that refuses the configuration.
fn refused(gateway: &str, rules: &str) -> Vec<String> {
    let dir = config_dir(gateway, rules);
    let (ok, lines) = check(dir.path());
    assert!(!ok, "{lines:#?}");
    lines
}

#[test]
fn a_misspelled_key_is_named_at_its_line_with_the_key_it_resembles_beside_every_other_error() {
    let gateway = format!("scheme = \"i SHARE\"\n{GATEWAY}").replace("addresses = ", "adresses = ");
    assert_eq!(
        refused(&gateway, &ROUTE.replace("/orders/{id}", "/orders//{id}")),
        [
            "gateway.toml: line 14, column 1: upstream[0].adresses: unknown key; did you mean `addresses`?",
            "gateway.toml: scheme: must be a single word, e.g. iSHARE",
            "policies/api.toml: route[0] (orders).path: the path is not in normal form; write /orders/{id}",
        ]
    );

    // A required key with no twin: missing, and the other tables still read for their problems.
    let gateway = GATEWAY.replace("addresses = ", "hosts = ").replace(
        "address = \"127.0.0.1:8443\"",
        "address = \"127.0.0.1:8443\"\nmax_conections = 10",
    );
    assert_eq!(
        refused(&gateway, ROUTE),
        [
            "gateway.toml: line 7, column 1: listener[0].max_conections: unknown key; did you mean `max_connections`?",
            "gateway.toml: line 12, column 1: upstream[0]: missing field `addresses`",
            "gateway.toml: line 14, column 1: upstream[0].hosts: unknown key",
        ]
    );
}

#[test]
fn every_duplicate_key_is_named_at_its_line() {
    let gateway = format!("{GATEWAY}[identity]\nname = \"x\"\n").replace(
        "party_id = \"EU.EORI.NL000000000\"",
        "party_id = \"EU.EORI.NL000000000\"\nparty_id = \"EU.EORI.NL000000001\"",
    );
    assert_eq!(
        refused(&gateway, ROUTE),
        [
            "gateway.toml: line 10, column 1: duplicate key `party_id`",
            "gateway.toml: line 15, column 2: duplicate key `identity`",
        ]
    );
}

#[test]
fn routes_cannot_take_the_names_the_gateway_counts_its_own_answers_under() {
    let rules = format!(
        "{}{}",
        ROUTE.replace("\"orders\"", "\"token\""),
        ROUTE
            .replace("\"orders\"", "\"unmatched\"")
            .replace("/orders/", "/other/")
    );
    let reserved = "is reserved: the gateway counts its own answers under unmatched, token, capabilities, login_return, logout, authzen (it is a metrics label)";
    assert_eq!(
        refused(GATEWAY, &rules),
        [
            format!("policies/api.toml: route[0] (token).name: \"token\" {reserved}"),
            format!("policies/api.toml: route[1] (unmatched).name: \"unmatched\" {reserved}"),
        ]
    );
}

#[test]
fn participants_on_https_verified_only_against_the_platform_roots_are_warned_of() {
    let gateway = format!(
        "{GATEWAY}[[registry]]\nname = \"ar\"\nparty_id = \"EU.EORI.NL000000004\"\nurl = \"https://registry.example\"\n"
    );
    let dir = config_dir(&gateway, ROUTE);
    let (ok, lines) = check(dir.path());
    assert!(ok, "{lines:#?}");
    let advice = "is verified against the platform's root certificates only: if its certificate is not from a public CA, set [outbound] ca_file to the CA that issued it (else every call to it fails with UnknownIssuer)";
    assert_eq!(
        lines[..2],
        [
            format!("warning: gateway.toml: scheme_owner.url: https://satellite.example {advice}"),
            format!("warning: gateway.toml: registry[0].url: https://registry.example {advice}"),
        ]
    );
    assert!(
        lines[2].ends_with(": ok (1 listeners, 1 upstreams, 1 routes from policies)"),
        "{lines:#?}"
    );

    let dir = config_dir(
        &format!("{gateway}[outbound]\nca_file = \"root.pem\"\n"),
        ROUTE,
    );
    let (ok, lines) = check(dir.path());
    assert!(ok, "{lines:#?}");
    assert!(
        !lines.iter().any(|l| l.contains("platform's root")),
        "{lines:#?}"
    );
}

#[test]
fn an_open_admin_listener_and_secret_files_others_may_read_are_warned_of() {
    use std::os::unix::fs::PermissionsExt;
    let gateway = format!(
        "{GATEWAY}[admin]\naddress = \"0.0.0.0:9901\"\npurge_secret_file = \"purge.secret\"\n"
    );
    let dir = config_dir(&gateway, ROUTE);
    let secret = dir.path().join("purge.secret");
    std::fs::write(&secret, "0123456789abcdef0123456789abcdef-purge").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (ok, lines) = check(dir.path());
    assert!(ok, "{lines:#?}");
    let warned = |needle: &str| {
        lines
            .iter()
            .any(|l| l.starts_with("warning: ") && l.contains(needle))
    };
    assert!(
        warned("admin.address: 0.0.0.0:9901 listens on every interface")
            && warned("/purge")
            && warned("admin.purge_secret_file: purge.secret is open to every user (mode 644)"),
        "{lines:#?}"
    );
    // Kept by its owner and its group (the gateway's, as under systemd or with Kubernetes'
    // fsGroup), on a private address: nothing to say.
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o640)).unwrap();
    let private = gateway.replace("0.0.0.0:9901", "127.0.0.1:9901");
    std::fs::write(dir.path().join("gateway.toml"), private).unwrap();
    let (ok, lines) = check(dir.path());
    assert!(ok, "{lines:#?}");
    assert!(!lines.iter().any(|l| l.contains("admin.")), "{lines:#?}");
}

#[test]
fn certificates_near_or_past_their_expiry_are_warned_of() {
    use ishare_gateway::testbed::pki::LeafSpec;
    use time::{Duration, OffsetDateTime};
    let pki = TestPki::shared();
    let now = OffsetDateTime::now_utc();
    let mut identity = LeafSpec::party("EU.EORI.NL000000003", "Gateway", now);
    identity.not_after = now + Duration::days(20);
    let identity = pki.issue(&identity).unwrap();
    let mut tls = LeafSpec::tls_server(&["localhost"], now);
    tls.not_before = now - Duration::days(400);
    tls.not_after = now - Duration::days(2);
    let tls = pki.issue(&tls).unwrap();
    let gateway = GATEWAY.replace(
        "address = \"127.0.0.1:8443\"\n",
        "address = \"127.0.0.1:8443\"\n[listener.tls]\ncertificate = \"tls.crt\"\nkey = \"tls.key\"\n",
    );
    let dir = config_dir(&gateway, ROUTE);
    for (name, text) in [
        ("id.key.pem", &identity.key_pem),
        ("id.chain.pem", &identity.chain_pem),
        ("tls.key", &tls.key_pem),
        ("tls.crt", &tls.chain_pem),
    ] {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let (ok, lines) = check(dir.path());
    assert!(ok, "warnings only: {lines:#?}");
    let date = |at: OffsetDateTime| at.date().to_string();
    let expiring = format!(
        "warning: gateway.toml: identity.certificate_chain: the identity certificate expires on {}, in ",
        date(now + Duration::days(20))
    );
    let expired = format!(
        "warning: gateway.toml: listener[0].tls.certificate: the listener 127.0.0.1:8443 certificate expired on {}: renew it",
        date(now - Duration::days(2))
    );
    for needle in [&expiring, &expired] {
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with(needle.as_str()) && l.contains(" renew it")),
            "{needle}\n{lines:#?}"
        );
    }
    // The CAs live ten years: nothing to say of them.
    assert!(
        !lines
            .iter()
            .any(|l| l.contains("identity_issuer") || l.contains("scheme_root")),
        "{lines:#?}"
    );
}

#[test]
fn party_ids_the_configured_version_does_not_have_are_warned_of() {
    // A did:ishare scheme owner spoken to as 1.9 (no scheme_version): a 3.0 scheme, most likely.
    let did = "did:ishare:EU.NL.NTRNL-10000000";
    let gateway = GATEWAY.replace("\"EU.EORI.NL000000000\"", &format!("\"{did}\""));
    let dir = config_dir(&gateway, ROUTE);
    let (ok, lines) = check(dir.path());
    assert!(ok, "{lines:#?}");
    let warned = |lines: &[String], needle: &str| {
        lines
            .iter()
            .any(|l| l.starts_with("warning: ") && l.contains(needle))
    };
    let expected = format!("scheme_owner.party_id: {did} is a did:ishare, which the scheme has from 2.1, but it is spoken to in 1.9: if the scheme speaks 3.0, set [scheme_owner] scheme_version = \"3.0\"");
    assert!(warned(&lines, &expected), "{lines:#?}");
    assert!(!warned(&lines, "identity.party_id"), "{lines:#?}");
    // EORI ids spoken to as 3.0: 3.0 names its parties by did:ishare.
    let gateway = GATEWAY.replace(
        "root_certificate = \"root.pem\"",
        "root_certificate = \"root.pem\"\nscheme_version = \"3.0\"",
    );
    let dir = config_dir(&gateway, ROUTE);
    let (ok, lines) = check(dir.path());
    assert!(ok, "{lines:#?}");
    for key in [
        "scheme_owner.party_id: EU.EORI.NL000000000",
        "identity.party_id: EU.EORI.NL000000003",
    ] {
        assert!(
            warned(&lines, &format!("{key} is no did:ishare")),
            "{key}\n{lines:#?}"
        );
    }
    // As configured: nothing to say of ids.
    let dir = config_dir(GATEWAY, ROUTE);
    let (_, lines) = check(dir.path());
    assert!(!warned(&lines, "did:ishare"), "{lines:#?}");
}

/// The Kubernetes base's configuration and rules (deploy/kubernetes/base) pass `check` as the
/// Deployment mounts them, with keys of the test PKI where the Secret puts them.
#[test]
fn the_kubernetes_configuration_and_rules_pass_check() {
    use std::os::unix::fs::PermissionsExt;
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes/base");
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys");
    std::fs::create_dir(&keys).unwrap();
    let party = TestPki::shared().party("EU.EORI.NL000000003");
    for (name, text) in [
        ("key.pem", &party.key_pem),
        ("chain.pem", &party.chain_pem),
        ("tls.crt", &party.chain_pem),
        ("tls.key", &party.key_pem),
    ] {
        std::fs::write(keys.join(name), text).unwrap();
    }
    // The Redis Secret's password, mounted as the Secret mounts it (0440).
    let password = keys.join("password");
    std::fs::write(&password, "a-redis-password-for-the-check").unwrap();
    std::fs::set_permissions(&password, std::fs::Permissions::from_mode(0o440)).unwrap();
    let gateway = std::fs::read_to_string(base.join("gateway.toml"))
        .unwrap()
        .replace("/etc/ishare-gateway/keys", keys.to_str().unwrap())
        .replace("/etc/ishare-gateway/redis", keys.to_str().unwrap())
        .replace(
            "/etc/ishare-gateway/policies",
            base.join("policies").to_str().unwrap(),
        );
    std::fs::write(dir.path().join("gateway.toml"), gateway).unwrap();
    let (ok, lines) = check(dir.path());
    assert!(ok, "{lines:#?}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains(": ok (1 listeners, 1 upstreams, 1 routes")),
        "{lines:#?}"
    );
}

#[test]
fn data_spaces_are_named_by_their_3_0_ids_each_once() {
    let gateway = format!(
        "dataspaces = [\"EU.DS.MOB.NL.LOGISTICS\", \"LOGISTICS\", \"EU.DS.MOB.NL.LOGISTICS\"]\n{GATEWAY}"
    );
    let lines = refused(&gateway, ROUTE);
    for expected in [
        "dataspaces[1]: \"LOGISTICS\" is not <continent>.DS.<sector>.<country>.<name>",
        "dataspaces[2]: EU.DS.MOB.NL.LOGISTICS is listed twice",
    ] {
        assert!(
            lines.iter().any(|l| l.contains(expected)),
            "{expected}\n{lines:#?}"
        );
    }
    let gateway = format!("dataspaces = [\"EU.DS.MOB.NL.LOGISTICS\"]\n{GATEWAY}");
    let dir = config_dir(&gateway, ROUTE);
    let (ok, lines) = check(dir.path());
    assert!(ok, "{lines:#?}");
}
