//! Table-style tests of the loader: a configuration in, the exact `file: key: message` lines out.

use super::*;
use crate::testbed::pki::TestPki;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

pub(crate) const BASE: &str = r#"
[identity]
party_id = "EU.EORI.NL000000003"
key = "id.key.pem"
certificate_chain = "id.chain.pem"

[[listener]]
address = "127.0.0.1:8443"
[listener.tls]
certificate = "tls.pem"
key = "tls.key.pem"

[scheme_owner]
url = "https://127.0.0.1:9100"
party_id = "EU.EORI.NL000000000"
root_certificate = "root.pem"

[outbound]
ca_file = "root.pem"

[[upstream]]
name = "legacy"
addresses = ["127.0.0.1:9180"]

[[registry]]
name = "ar"
party_id = "EU.EORI.NL000000004"
url = "https://127.0.0.1:9104"
"#;

const ROUTE: &str = r#"
[[route]]
name = "r"
path = "/api/{id}"
upstream = "legacy"
"#;

/// A directory with the key material BASE names, `gateway.toml` and `policies/rules.toml`.
pub(crate) fn write(gateway: &str, rules: &str) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "ishare-gateway-config-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("policies")).unwrap();
    let pki = TestPki::shared();
    let party = pki.party("EU.EORI.NL000000003");
    let tls = pki.issue_tls_server(&["localhost"]).unwrap();
    let other = pki.party("EU.EORI.NL000000002");
    for (name, text) in [
        ("id.key.pem", party.key_pem.as_str()),
        ("id.chain.pem", party.chain_pem.as_str()),
        ("other.key.pem", other.key_pem.as_str()),
        ("tls.pem", tls.chain_pem.as_str()),
        ("tls.key.pem", tls.key_pem.as_str()),
        ("root.pem", pki.root_pem()),
        ("gateway.toml", gateway),
        ("policies/rules.toml", rules),
    ] {
        std::fs::write(dir.join(name), text).unwrap();
    }
    dir
}

/// The problems reported for a configuration, with the directory left out of file names.
fn issues(gateway: &str, rules: &str) -> Vec<String> {
    let dir = write(gateway, rules);
    let result = load(&dir.join("gateway.toml"));
    let _ = std::fs::remove_dir_all(&dir);
    match result {
        Ok(_) => Vec::new(),
        Err(e) => e
            .to_string()
            .replace(&format!("{}/", dir.display()), "")
            .lines()
            .map(str::to_string)
            .collect(),
    }
}

/// BASE with `find` replaced by `replace` (which must be found), and `extra` added: tables at the
/// end, top-level keys at the start.
fn gateway(find: &str, replace: &str, extra: &str) -> String {
    assert!(BASE.contains(find), "{find:?} is not in the base config");
    let base = BASE.replacen(find, replace, 1);
    if extra.starts_with('[') {
        format!("{base}{extra}")
    } else {
        format!("{extra}{base}")
    }
}

#[test]
fn the_base_configuration_loads() {
    assert_eq!(issues(BASE, ROUTE), Vec::<String>::new());
    let dir = write(BASE, ROUTE);
    let config = load(&dir.join("gateway.toml")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(config.scheme, defaults::SCHEME);
    assert_eq!(config.scheme_owner.refresh, defaults::SCHEME_OWNER_REFRESH);
    assert_eq!(config.tokens.paths, defaults::TOKEN_PATHS.map(String::from));
    assert_eq!(config.delegation.cache_size, defaults::DECISION_CACHE_SIZE);
    assert_eq!(config.party_header.as_str(), "x-consumer-party-id");
    assert_eq!(config.public_url, "https://127.0.0.1:8443");
    assert_eq!(config.routes.len(), 1);
}

#[test]
fn gateway_toml_errors_name_their_key() {
    let cases: Vec<(String, &str)> = vec![
        (format!("colour = 1\n{BASE}[admin]\naddress = \"x\"\nsize = 2\n"), "gateway.toml: line 1, column 1: colour: unknown key|gateway.toml: line 32, column 1: admin.size: unknown key|gateway.toml: admin.address: \"x\" is not an address: invalid socket address"),
        (gateway("", "", "scheme = \"i SHARE\"\n"), "gateway.toml: scheme: must be a single word, e.g. iSHARE"),
        (gateway("party_id = \"EU.EORI.NL000000003\"", "party_id = \"nobody\"", ""), "gateway.toml: identity.party_id: party identifier \"nobody\" is neither of the form <scope>.EORI.<number> (e.g. EU.EORI.NL000000001) nor <method>:<value> (did:ishare:EU.NL.NTRNL-10000001, did:web:example.com, CoC:123456789)"),
        (gateway("key = \"id.key.pem\"", "key = \"missing.pem\"", ""), "gateway.toml: identity.key: missing.pem: No such file or directory (os error 2)"),
        (gateway("key = \"id.key.pem\"", "key = \"other.key.pem\"", ""), "gateway.toml: identity: the private key does not belong to the first certificate of the chain"),
        (gateway("address = \"127.0.0.1:8443\"", "address = \"nowhere\"", ""), "gateway.toml: listener[0].address: \"nowhere\" is not an address: invalid socket address"),
        (gateway("", "", "[admin]\naddress = \"127.0.0.1:8443\"\n"), "gateway.toml: admin.address: 127.0.0.1:8443 overlaps listener[0].address (127.0.0.1:8443): each listener needs an address of its own"),
        (gateway("", "", "[[listener]]\naddress = \"0.0.0.0:8443\"\n"), "gateway.toml: listener[1].address: 0.0.0.0:8443 overlaps listener[0].address (127.0.0.1:8443): each listener needs an address of its own"),
        (gateway("key = \"tls.key.pem\"", "key = \"tls.key.pem\"\nclient_auth = \"sometimes\"", ""), "gateway.toml: listener[0].tls.client_auth: unknown variant `sometimes`, expected `optional` or `required`"),
        (gateway("key = \"tls.key.pem\"", "key = \"tls.key.pem\"\nclient_auth = \"required\"", ""), "gateway.toml: listener[0].tls.client_auth: needs tls.client_ca"),
        (gateway("key = \"tls.key.pem\"", "key = \"root.pem\"", ""), "gateway.toml: listener[0].tls.key: root.pem: no private key found"),
        (gateway("url = \"https://127.0.0.1:9100\"", "url = \"ftp://127.0.0.1:9100\"", ""), "gateway.toml: scheme_owner.url: \"ftp://127.0.0.1:9100\": the scheme must be https (or http), not ftp"),
        (gateway("root_certificate = \"root.pem\"", "root_certificate = \"id.chain.pem\"", ""), "gateway.toml: scheme_owner.root_certificate: must hold exactly one certificate|gateway.toml: scheme_owner: give root_fingerprint or root_certificate (the root the scheme owner signs with), or trusted_list_file"),
        (gateway("root_certificate = \"root.pem\"", "root_certificate = \"root.pem\"\nroot_fingerprint = \"AB\"", ""), "gateway.toml: scheme_owner: give root_fingerprint or root_certificate, not both|gateway.toml: scheme_owner: give root_fingerprint or root_certificate (the root the scheme owner signs with), or trusted_list_file"),
        (gateway("root_certificate = \"root.pem\"", "root_fingerprint = \"AB\"", ""), "gateway.toml: scheme_owner.root_fingerprint: must be the SHA-256 of a certificate: 64 hex digits|gateway.toml: scheme_owner: give root_fingerprint or root_certificate (the root the scheme owner signs with), or trusted_list_file"),
        (gateway("root_certificate = \"root.pem\"", "trusted_list_file = \"root.pem\"", ""), "gateway.toml: scheme_owner.trusted_list_file: root.pem: not a JSON array of trusted-list entries: invalid number at line 1 column 2|gateway.toml: scheme_owner: give root_fingerprint or root_certificate (the root the scheme owner signs with), or trusted_list_file"),
        (gateway("root_certificate = \"root.pem\"", "root_certificate = \"root.pem\"\nrefresh = \"0s\"", ""), "gateway.toml: scheme_owner.refresh: refresh must be more than zero"),
        (gateway("", "", "[tokens]\npaths = [\"/a/../token\"]\nclock_leeway = \"31s\"\nlifetime = \"0s\"\n"), "gateway.toml: tokens.paths[0]: \"/a/../token\" must be a normal absolute path|gateway.toml: tokens.clock_leeway: more than 30 s defeats the 30 s lifetime of client assertions|gateway.toml: tokens.lifetime: lifetime must be more than zero"),
        (gateway("ca_file = \"root.pem\"", "ca_file = \"none.pem\"", ""), "gateway.toml: outbound.ca_file: none.pem: No such file or directory (os error 2)"),
        (gateway("addresses = [\"127.0.0.1:9180\"]", "addresses = []\nsni = \"x\"", "[[upstream]]\nname = \"legacy\"\naddresses = [\"nowhere\"]\n"), "gateway.toml: upstream[0].addresses: at least one address is needed|gateway.toml: upstream[0].tls: sni and ca_file need tls = true|gateway.toml: upstream[1].name: \"legacy\" is defined twice|gateway.toml: upstream[1].addresses[0]: \"nowhere\" is not an address: invalid socket address"),
        (gateway("addresses = [\"127.0.0.1:9180\"]", "addresses = [\"127.0.0.1:9180\"]\ntls = true\nsni = \"\"", ""), "gateway.toml: upstream[0].sni: the name to verify the backend's certificate against is needed"),
        (gateway("addresses = [\"127.0.0.1:9180\"]", "addresses = [\"127.0.0.1:9180\"]\n[upstream.health_check]\nkind = \"ping\"", ""), "gateway.toml: upstream[0].health_check.kind: unknown variant `ping`, expected `tcp` or `http`"),
        (gateway("addresses = [\"127.0.0.1:9180\"]", "addresses = [\"127.0.0.1:9180\"]\n[upstream.health_check]\nkind = \"http\"", ""), "gateway.toml: upstream[0].health_check.path: an http health check needs a path"),
        (gateway("addresses = [\"127.0.0.1:9180\"]", "addresses = [\"127.0.0.1:9180\"]\n[upstream.health_check]\nkind = \"tcp\"\npath = \"/h\"", ""), "gateway.toml: upstream[0].health_check.path: a tcp health check has no path"),
        (gateway("party_id = \"EU.EORI.NL000000004\"\nurl = \"https://127.0.0.1:9104\"", "party_id = \"EU.EORI.NL000000004\"\nurl = \"nowhere\"", "[[registry]]\nname = \"ar\"\nparty_id = \"AR\"\nurl = \"https://ar\"\n"), "gateway.toml: registry[0].url: \"nowhere\" is not a URL: relative URL without a base|gateway.toml: registry[1].party_id: party identifier \"AR\" is neither of the form <scope>.EORI.<number> (e.g. EU.EORI.NL000000001) nor <method>:<value> (did:ishare:EU.NL.NTRNL-10000001, did:web:example.com, CoC:123456789)|gateway.toml: registry[1].name: \"ar\" is defined twice"),
        (gateway("", "", "[[registry]]\nname = \"owner\"\nparty_id = \"EU.EORI.NL000000004\"\nurl = \"https://ar\"\n"), "gateway.toml: registry[1].name: \"owner\" is how a route names the registry the data owner designated: give this registry another name"),
        (gateway("", "", "[forwarding]\nparty_header = \"Authorization\"\n"), "gateway.toml: forwarding.party_header: authorization cannot carry a party id"),
        (gateway("", "", "[forwarding]\nparty_header = \"X Party\"\n"), "gateway.toml: forwarding.party_header: \"X Party\" is not a header name"),
        (gateway("", "", "[forwarding]\nparty_header = \"Delegation-Evidence\"\n"), "gateway.toml: forwarding.party_header: delegation-evidence cannot carry a party id"),
        (gateway("", "", "[forwarding]\nparty_header = \"X_B3_Sampled\"\noriginal_consumer_header = \"Trace-Parent\"\n"), "gateway.toml: forwarding.party_header: x_b3_sampled cannot carry a party id|gateway.toml: forwarding.original_consumer_header: trace-parent cannot carry a party id"),
        (gateway("root_certificate = \"root.pem\"", "root_certificate = \"root.pem\"\nscheme_version = \"3\"", ""), "gateway.toml: scheme_owner.scheme_version: \"3\" is not a scheme version: use one of \"1.9\", \"2.0\", \"2.1\", \"2.2\", \"3.0\""),
        (gateway("party_id = \"EU.EORI.NL000000004\"\nurl = \"https://127.0.0.1:9104\"", "party_id = \"EU.EORI.NL000000004\"\nurl = \"https://127.0.0.1:9104\"\nscheme_version = \"3.0\"", "[[registry]]\nname = \"ar2\"\nparty_id = \"EU.EORI.NL000000004\"\nurl = \"https://ar\"\n"), "gateway.toml: registry[1].scheme_version: EU.EORI.NL000000004 is configured as another registry with another scheme_version: a party's evidence is read in one version"),
        (gateway("", "", "[delegation.ignored_members]\n\"EU.EORI.NL000000004\" = [\"policySets[].policies[].rules[].Conditions\", \"policySets.comment\", \"comment\"]\n\"nobody\" = [\"comment\"]\n"), "gateway.toml: delegation.ignored_members.\"EU.EORI.NL000000004\"[0]: Conditions is (a spelling of) conditions, a member of the scheme's evidence: it is evaluated, never dropped|gateway.toml: delegation.ignored_members.\"EU.EORI.NL000000004\"[1]: \"policySets.comment\" is not a member of an object of the evidence; write paths as policySets[].policies[].rules[].comment|gateway.toml: delegation.ignored_members.\"nobody\": party identifier \"nobody\" is neither of the form <scope>.EORI.<number> (e.g. EU.EORI.NL000000001) nor <method>:<value> (did:ishare:EU.NL.NTRNL-10000001, did:web:example.com, CoC:123456789)"),
        (gateway("", "", "[login]\nurl = \"https://idp\"\nscope = \"openid\"\ncookie_name = \"session\"\nlogout_path = \"logout\"\n[login.headers]\nshoe_size = \"X-Shoe\"\nsub = \"Cookie\"\nemail = \"B3\"\n"), "gateway.toml: login.identity_provider: missing: the identity provider's party id|gateway.toml: login.scope: must hold openid and an attribute scope (profile, company or email)|gateway.toml: login.cookie_name: must start with __Host- (a cookie only this host sets: no other subdomain can plant one)|gateway.toml: login.logout_path: a path starting with / other than /openid_connect1.0/return|gateway.toml: login.headers.email: b3 cannot carry an attribute|gateway.toml: login.headers.shoe_size: not sub nor an attribute of a scope|gateway.toml: login.headers.sub: cookie cannot carry an attribute"),
        (gateway("", "", "[replay]\nstore = \"redis\"\nurl = \"redis://127.0.0.1:6379\"\n[login]\nidentity_provider = \"EU.EORI.NL000000007\"\nurl = \"https://idp\"\n"), "gateway.toml: login.session_secret_file: needed with [replay] store = \"redis\": every instance must open the others' cookies"),
        (gateway("", "", "scheme_version = \"3.0\"\n[login]\nidentity_provider = \"EU.EORI.NL000000007\"\nurl = \"https://idp\"\nscheme_version = \"2.5\"\nlogout_path = \"/return\"\n"), "gateway.toml: login.scheme_version: \"2.5\" is not a scheme version: use one of \"1.9\", \"2.0\", \"2.1\", \"2.2\", \"3.0\"|gateway.toml: login.logout_path: a path starting with / other than /return"),
        (gateway("", "", "[log]\nformat = \"xml\"\n"), "gateway.toml: log.format: unknown variant `xml`, expected `text` or `json`"),
        (gateway("", "", "[tracing]\notlp_endpoint = \"ftp://127.0.0.1:4318\"\nservice_name = \" \"\nsample_ratio = 1.5\nspeed = 1\n"), "gateway.toml: line 33, column 1: tracing.speed: unknown key|gateway.toml: tracing.otlp_endpoint: \"ftp://127.0.0.1:4318\": an OTLP/HTTP endpoint is http:// or https://, not ftp:|gateway.toml: tracing.service_name: must not be empty|gateway.toml: tracing.sample_ratio: 1.5 is not a share from 0 (none) to 1 (every new trace)"),
        (gateway("", "", "[tracing]\notlp_endpoint = \"http://user:secret@127.0.0.1:4318/v1/traces\"\nsample_ratio = -0.1\n"), "gateway.toml: tracing.otlp_endpoint: \"http://user:secret@127.0.0.1:4318/v1/traces\" holds credentials: the endpoint takes none|gateway.toml: tracing.sample_ratio: -0.1 is not a share from 0 (none) to 1 (every new trace)"),
        (gateway("", "", "[tracing]\notlp_endpoint = \"collector:4318\"\n"), "gateway.toml: tracing.otlp_endpoint: \"collector:4318\": an OTLP/HTTP endpoint is http:// or https://, not collector:"),
        (gateway("", "", "[tracing]\notlp_endpoint = \"/v1/traces\"\n"), "gateway.toml: tracing.otlp_endpoint: \"/v1/traces\" is not a URL: relative URL without a base"),
        (gateway("", "", "[replay]\nstore = \"redis\"\n"), "gateway.toml: replay.url: the Redis server to keep jtis on is needed (or sentinels, or cluster)"),
        (gateway("", "", "[replay]\nurl = \"redis://127.0.0.1/0\"\n"), "gateway.toml: replay.url: needs store = \"redis\""),
        (gateway("", "", "[replay]\nstore = \"redis\"\nurl = \"http://x\"\n"), "gateway.toml: replay.url: a Redis URL: redis://host:port/db (or rediss:// for TLS)"),
        (gateway("", "", "[replay]\nstore = \"redis\"\nurl = \"redis://:hunter2@127.0.0.1/0\"\n"), "gateway.toml: replay.url: holds credentials: put them in replay.credentials_file (USER:PASSWORD), not in the config"),
        (gateway("", "", "[replay]\nstore = \"redis\"\nurl = \"redis://127.0.0.1/0\"\nsentinels = [\"127.0.0.1:26379\"]\n"), "gateway.toml: replay: give one of url (one server), sentinels or cluster, not several"),
        (gateway("", "", "[replay]\nstore = \"redis\"\ncluster = [\"127.0.0.1:7000\"]\nsentinels = [\"127.0.0.1:26379\"]\n"), "gateway.toml: replay: give one of url (one server), sentinels or cluster, not several"),
        (gateway("", "", "[replay]\nstore = \"redis\"\ncluster = [\"127.0.0.1:7000\", \"127.0.0.1\"]\ndb = 1\nmaster_name = \"m\"\n"), "gateway.toml: replay.master_name: a cluster names no master: its nodes say which holds each slot|gateway.toml: replay.db: a cluster has database 0 only|gateway.toml: replay.cluster[1]: \"127.0.0.1\" is not host:port"),
        (gateway("", "", "[replay]\nstore = \"redis\"\ncluster = []\n"), "gateway.toml: replay.cluster: name at least one node of the cluster (host:port)"),
        (gateway("", "", "[replay]\nstore = \"redis\"\ncluster = [\"127.0.0.1:7000\"]\nca_file = \"root.pem\"\n"), "gateway.toml: replay.ca_file: only with TLS to Redis (rediss://, or tls = true with sentinels or cluster)"),
        (gateway("", "", "[replay]\nstore = \"redis\"\nurl = \"redis://127.0.0.1/0\"\nmaster_name = \"m\"\n"), "gateway.toml: replay.master_name: only with sentinels (the url says it for one server)"),
        (gateway("", "", "[replay]\nstore = \"redis\"\nsentinels = [\"127.0.0.1\", \"[::1]:26379\"]\n"), "gateway.toml: replay.sentinels[0]: \"127.0.0.1\" is not host:port|gateway.toml: replay.master_name: needed with sentinels: the name the Sentinels know the master by"),
        (gateway("", "", "[replay]\nstore = \"redis\"\nurl = \"redis://127.0.0.1/0\"\ncredentials_file = \"missing\"\n"), "gateway.toml: replay.credentials_file: missing: No such file or directory (os error 2)"),
        (gateway("", "", "[replay]\nstore = \"redis\"\nurl = \"rediss://127.0.0.1/0#insecure\"\n"), "gateway.toml: replay.url: no options after the database (`#insecure` would skip the certificate check)"),
        (gateway("", "", "[replay]\nstore = \"redis\"\nurl = \"redis://127.0.0.1/0\"\nca_file = \"root.pem\"\n"), "gateway.toml: replay.ca_file: only with TLS to Redis (rediss://, or tls = true with sentinels or cluster)"),
        (gateway("", "", "[replay]\nstore = \"redis\"\nmaster_name = \"m\"\nsentinels = [\"user:pw@127.0.0.1:26379\"]\n"), "gateway.toml: replay.sentinels[0]: holds credentials: put them in replay.credentials_file, not in the config"),
        (gateway("", "", "[replay]\nsentinels = [\"127.0.0.1:26379\"]\ncredentials_file = \"x\"\n"), "gateway.toml: replay.sentinels: needs store = \"redis\"|gateway.toml: replay.credentials_file: needs store = \"redis\""),
        (gateway("", "", "[replay]\nstore = \"disk\"\n"), "gateway.toml: replay.store: unknown variant `disk`, expected `memory` or `redis`"),
        (gateway("", "", "public_url = \"gateway\"\n"), "gateway.toml: public_url: \"gateway\" is not a URL: relative URL without a base"),
        (gateway("", "", "[rules]\ndirectory = \"none\"\n"), "none: cannot read the rules directory: No such file or directory (os error 2)"),
    ];
    let mut wrong = Vec::new();
    for (toml, expected) in cases {
        let expected: Vec<&str> = expected.split('|').collect();
        let got = issues(&toml, ROUTE);
        if got != expected {
            wrong.push(format!(
                "{toml}\n  got:      {got:?}\n  expected: {expected:?}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert_eq!(
        issues("[[listener]]\naddress =", ROUTE),
        ["gateway.toml: line 2, column 10: string values must be quoted, expected literal string"]
    );
    assert_eq!(
        issues(&format!("{BASE}[server]\nthreads = \"many\"\n"), ROUTE),
        ["gateway.toml: line 30, column 11: server.threads: invalid type: string \"many\", expected usize"]
    );
    assert_eq!(
        issues("", ROUTE),
        [
            "gateway.toml: identity: missing: the gateway's party_id, key and certificate_chain",
            "gateway.toml: listener: at least one [[listener]] is needed",
            "gateway.toml: scheme_owner: missing: url, party_id and root_fingerprint (or trusted_list_file)",
            "policies/rules.toml: route[0] (r).upstream: no [[upstream]] named \"legacy\"",
        ]
    );
}

#[test]
fn tracing_is_off_without_its_table_and_takes_defaults_with_it() {
    let load_with = |extra: &str| {
        let dir = write(&format!("{BASE}{extra}"), ROUTE);
        let config = load(&dir.join("gateway.toml"));
        let _ = std::fs::remove_dir_all(&dir);
        config.unwrap().tracing
    };
    assert_eq!(load_with(""), None);
    let settings = load_with("[tracing]\n").unwrap();
    assert_eq!(settings.otlp_endpoint, defaults::OTLP_ENDPOINT);
    assert_eq!(settings.service_name, defaults::SERVICE_NAME);
    assert_eq!(settings.sample_ratio, defaults::SAMPLE_RATIO);
    assert_eq!(
        settings.accept_client_context,
        defaults::ACCEPT_CLIENT_CONTEXT
    );
    let settings = load_with(
        "[tracing]\notlp_endpoint = \"https://collector.example/v1/traces\"\nservice_name = \"edge\"\nsample_ratio = 0.25\naccept_client_context = false\n",
    )
    .unwrap();
    assert_eq!(
        (
            settings.otlp_endpoint.as_str(),
            settings.service_name.as_str(),
            settings.sample_ratio,
            settings.accept_client_context
        ),
        ("https://collector.example/v1/traces", "edge", 0.25, false)
    );
}

#[test]
fn an_identity_chain_must_reach_its_root() {
    let pki = TestPki::shared();
    let party = pki.party("EU.EORI.NL000000003");
    let without_root: String = party
        .chain_pem
        .split_inclusive("-----END CERTIFICATE-----\n")
        .take(2)
        .collect();
    let dir = write(BASE, ROUTE);
    std::fs::write(dir.join("id.chain.pem"), without_root).unwrap();
    let err = load(&dir.join("gateway.toml")).unwrap_err().to_string();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        err.contains("identity.certificate_chain: the chain ends at ")
            && err.contains("add the certificates up to the root"),
        "{err}"
    );
}

/// The warnings (`key: message`) of a configuration that loads.
fn warnings(gateway: &str, rules: &str) -> Vec<String> {
    let dir = write(gateway, rules);
    let config = load(&dir.join("gateway.toml")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    config
        .warnings
        .iter()
        .map(|w| format!("{}: {}", w.key, w.message))
        .collect()
}

#[test]
fn risky_but_allowed_settings_are_warnings() {
    let toml = BASE
        .replace("https://127.0.0.1:9100", "http://127.0.0.1:9100")
        .replace("https://127.0.0.1:9104", "http://127.0.0.1:9104")
        .replace(
            "root_certificate = \"root.pem\"",
            &format!("root_fingerprint = \"{}\"", "AB".repeat(32)),
        );
    let warnings = warnings(&toml, ROUTE);
    let root = crate::scheme::trust::fingerprint(TestPki::shared().root_der());
    assert_eq!(
        warnings,
        [
            "scheme_owner.url: http://127.0.0.1:9100 is plain HTTP: tokens and answers travel unencrypted (for tests only)".to_string(),
            format!("identity.certificate_chain: the chain's root ({root}) is not the scheme owner's pinned root nor on a configured trusted list: it must be on the scheme owner's trusted list, which start-up checks"),
            "registry[0].url: http://127.0.0.1:9104 is plain HTTP: tokens and answers travel unencrypted (for tests only)".to_string(),
        ]
    );
}

#[test]
fn a_body_pointer_to_one_element_of_an_array_is_warned_of() {
    let rules = r#"
[[route]]
name = "r"
methods = ["POST"]
path = "/api/orders"
upstream = "legacy"
[route.delegation]
policy_issuer = "EU.EORI.NL000000005"
resource_type = "ORDER"
identifiers = ["{body.json./items/0/id}", "{body.json./order/id}"]
"#;
    assert_eq!(
        warnings(BASE, rules),
        ["route[0] (r).delegation: the body pointer /items/0/id decides on one element of an array: a request whose array has more reaches the backend with the others undecided; * decides on each"]
    );
}

#[test]
fn a_misspelled_key_is_named_with_its_line_and_the_key_it_resembles_and_the_rest_still_checked() {
    let toml = gateway(
        "addresses = [\"127.0.0.1:9180\"]",
        "adresses = [\"127.0.0.1:9180\"]\nconect_timeout = \"1s\"",
        "scheme = \"i SHARE\"\n",
    );
    assert_eq!(
        issues(&toml, ROUTE),
        [
            "gateway.toml: line 24, column 1: upstream[0].adresses: unknown key; did you mean `addresses`?",
            "gateway.toml: line 25, column 1: upstream[0].conect_timeout: unknown key; did you mean `connect_timeout`?",
            "gateway.toml: scheme: must be a single word, e.g. iSHARE",
        ]
    );
    // Without a twin the key is missing: its table is left out, the rest of the file still read.
    let toml = gateway(
        "addresses = [\"127.0.0.1:9180\"]",
        "hosts = [\"127.0.0.1:9180\"]",
        "[server]\nthreads = \"many\"\n",
    );
    assert_eq!(
        issues(&toml, ROUTE),
        [
            "gateway.toml: line 21, column 1: upstream[0]: missing field `addresses`",
            "gateway.toml: line 23, column 1: upstream[0].hosts: unknown key",
            "gateway.toml: line 30, column 11: server.threads: invalid type: string \"many\", expected usize",
        ]
    );
    assert_eq!(
        issues(&format!("{BASE}[admin]\naddress = \"a\"\n[admin]\n"), ROUTE),
        ["gateway.toml: line 31, column 2: duplicate key `admin`",]
    );
}

#[test]
fn participants_on_https_verified_against_the_platform_roots_alone_are_warned_of() {
    let toml = BASE.replace("[outbound]\nca_file = \"root.pem\"\n", "")
        + "[login]\nidentity_provider = \"EU.EORI.NL000000006\"\nurl = \"https://127.0.0.1:9107\"\n";
    let dir = write(&toml, ROUTE);
    let config = load(&dir.join("gateway.toml")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let warnings: Vec<String> = config.warnings.iter().map(ToString::to_string).collect();
    let advice = "is verified against the platform's root certificates only: if its certificate is not from a public CA, set [outbound] ca_file to the CA that issued it (else every call to it fails with UnknownIssuer)";
    assert_eq!(
        warnings,
        [
            format!(
                "{}/gateway.toml: scheme_owner.url: https://127.0.0.1:9100 {advice}",
                dir.display()
            ),
            format!(
                "{}/gateway.toml: registry[0].url: https://127.0.0.1:9104 {advice}",
                dir.display()
            ),
            format!(
                "{}/gateway.toml: login.url: https://127.0.0.1:9107 {advice}",
                dir.display()
            ),
        ]
    );
}

#[test]
fn rule_errors_name_their_file_route_and_key() {
    let route = |extra: &str| format!("{ROUTE}{extra}");
    let r = "policies/rules.toml: route[0] (r)";
    let cases: Vec<(String, String)> = vec![
        (route("[[route]]\nname = \"r\"\npath = \"/b\"\nupstream = \"legacy\"\n"), "policies/rules.toml: route[1].name: \"r\" is used by another route".into()),
        (ROUTE.replace("name = \"r\"", "name = \"r s\""), "policies/rules.toml: route[0] (r s).name: use letters, digits, '-', '_' and '.' (it is a metrics label)".into()),
        (ROUTE.replace("name = \"r\"", "name = \"token\""), "policies/rules.toml: route[0] (token).name: \"token\" is reserved: the gateway counts its own answers under unmatched, token, capabilities, login_return, logout, authzen (it is a metrics label)".into()),
        (ROUTE.replace("/api/{id}", "/api//{id}"), format!("{r}.path: the path is not in normal form; write /api/{{id}}")),
        (ROUTE.replace("/api/{id}", "/api/x{id}"), format!("{r}.path: segment x{{id}} mixes text and a capture; a capture is a whole segment")),
        (ROUTE.replace("/api/{id}", "/connect/token"), format!("{r}.path: /connect/token is served by the gateway itself")),
        (ROUTE.replace("upstream = \"legacy\"", "upstream = \"nothing\""), format!("{r}.upstream: no [[upstream]] named \"nothing\"")),
        (route("methods = [\"GET\", \"G T\"]\n"), format!("{r}.methods: \"G T\" is not a method")),
        (route("upstream_path = \"v2/{id}\"\n"), format!("{r}.upstream_path: must start with /")),
        (route("upstream_path = \"/v2/{rest}\"\n"), format!("{r}.upstream_path: {{path.rest}}: the path /api/{{id}} has no capture rest")),
        (route("upstream_path = \"/v2/{cookie.x}\"\n"), format!("{r}.upstream_path: \"/v2/{{cookie.x}}\": {{cookie.x}} must be {{path.NAME}}, {{query.NAME}}, {{header.NAME}} or {{body.json./POINTER}}, not cookie")),
        (route("auth = \"nobody\"\n"), format!("{r}.auth: unknown variant `nobody`, expected one of `public`, `token`, `delegation`")),
        (route("auth = \"delegation\"\n"), format!("{r}.delegation: auth = \"delegation\" needs [route.delegation]")),
        (route("auth = \"public\"\n[route.delegation]\npolicy_issuer = \"EU.EORI.NL000000005\"\nresource_type = \"T\"\naction = \"iSHARE.READ\"\n"), format!("{r}.auth: a route with [route.delegation] is auth = \"delegation\"")),
        (route("methods = [\"GET\"]\n[route.delegation]\npolicy_issuer = \"EU.EORI.NL000000005\"\nresource_type = \"T\"\nevidence = [\"mail\"]\n"), format!("{r}.delegation.evidence: unknown variant `mail`, expected `header` or `registry`|{r}.delegation.evidence: name at least one source: header, registry")),
        (route("methods = [\"GET\"]\n[route.delegation]\npolicy_issuer = \"EU.EORI.NL000000005\"\nresource_type = \"T\"\nregistry = \"other\"\n"), format!("{r}.delegation.registry: no [[registry]] named \"other\"")),
        (route("methods = [\"GET\"]\n[route.delegation]\npolicy_issuer = \"EU.EORI.NL000000005\"\nresource_type = \"T\"\nregistry = \"owner\"\nevidence = [\"mail\"]\n"), format!("{r}.delegation.evidence: unknown variant `mail`, expected `header` or `registry`|{r}.delegation.evidence: name at least one source: header, registry")),
        (route("methods = [\"GET\", \"OPTIONS\"]\n[route.delegation]\npolicy_issuer = \"EU.EORI.NL000000005\"\nresource_type = \"T\"\n"), format!("{r}.delegation.action: give an action, or list only methods that map to one (GET, HEAD, POST, PUT, PATCH, DELETE)")),
        (route("[route.delegation]\npolicy_issuer = \"{header.Owner\"\nresource_type = \"{path.kind}\"\nidentifiers = [\"{query.}\"]\naction = \"iSHARE.READ\"\n"), format!("{r}.delegation.identifiers[0]: \"{{query.}}\": empty name in {{query.}}|{r}.delegation.policy_issuer: \"{{header.Owner\": {{ without }}|{r}.delegation.resource_type: {{path.kind}}: the path /api/{{id}} has no capture kind")),
        (route("methods = [\"POST\"]\n[route.delegation]\npolicy_issuer = \"EU.EORI.NL000000005\"\nresource_type = \"T\"\nidentifiers = [\"{body.keys./}\"]\n"), format!("{r}.delegation: {{body.keys./POINTER}} names several attributes: it is a whole entry of attributes, and in no other value")),
        (route("upstream_path = \"/v2/{body.json./id}\"\n"), format!("{r}.upstream_path: cannot take values from the body: the path is made before the body is read")),
        (route("max_body_bytes = 1024\n"), format!("{r}.max_body_bytes: the route's rule reads no {{body.json./POINTER}} value")),
        (route("methods = [\"POST\"]\nmax_body_bytes = \"1MiB\"\n[route.delegation]\npolicy_issuer = \"EU.EORI.NL000000005\"\nresource_type = \"T\"\nidentifiers = [\"{body.json./id}\"]\n"), format!("{r}.max_body_bytes: 1 to 65536 bytes: a body decided on is held whole")),
        (route("methods = [\"POST\"]\nmax_body_elements = 5\n[route.delegation]\npolicy_issuer = \"EU.EORI.NL000000005\"\nresource_type = \"T\"\nidentifiers = [\"{body.json./id}\"]\n"), format!("{r}.max_body_elements: the rule's pointers have no *: there are no elements to bound")),
        (route("methods = [\"POST\"]\n[route.delegation]\npolicy_issuer = \"EU.EORI.NL000000005\"\nresource_type = \"T\"\nidentifiers = [\"{body.json./a/*/id}\", \"{body.json./b/*/id}\"]\n"), format!("{r}.delegation: every * stands for the elements of one array; the rule names /a and /b")),
        (route("methods = [\"POST\"]\n[route.delegation]\npolicy_issuer = \"EU.EORI.NL000000005\"\nresource_type = \"T\"\nidentifiers = [\"{body.json.id}\"]\n"), format!("{r}.delegation.identifiers[0]: \"{{body.json.id}}\": \"id\": a JSON pointer starts with /")),
        (route("methods = [\"GET\"]\nidentifier_case = \"upper\"\n[route.delegation]\npolicy_issuer = \"EU.EORI.NL000000005\"\nresource_type = \"T\"\nidentifiers = [\"{header.X-Id}\"]\n"), format!("{r}.identifier_case: covers the path and the query: a rule that takes identifiers from headers or the body (passed on as sent) cannot use it")),
        (route("identifier_case = \"title\"\n"), format!("{r}.identifier_case: unknown variant `title`, expected `upper` or `lower`")),
        (route("methods = [\"GET\"]\n[route.delegation]\npolicy_issuer = \"EU.EORI.NL000000005\"\nresource_type = \"T\"\n[route.delegation.conditions]\nconditions = \"x\"\nregion = \"{header.Region\"\nzone = \"{path.zone}\"\n"), format!("{r}.delegation.conditions.conditions: not a left operand a condition can name|{r}.delegation.conditions.region: \"{{header.Region\": {{ without }}|{r}.delegation.conditions.zone: {{path.zone}}: the path /api/{{id}} has no capture zone")),
        (route("accept = [\"comma\", \"everything\"]\n"), format!("{r}.accept: unknown variant `everything`, expected one of `path_parameters`, `encoded_percent`, `trailing_dot`, `edge_whitespace`, `comma`, `repeated_query_key`, `bracketed_query_key`, `query_semicolon`, `invisible`, `non_ascii`, `method_override`, `encoded_delimiter`, `dot_segment`, `body_on_read`")),
        (route("methods = [\"GET\"]\n[route.delegation]\npolicy_issuer = \"{path.id}\"\nresource_type = \"T\"\n"), format!("{r}.delegation.policy_issuer: the data owner comes from the request, so the caller can name any owner and present evidence it signed as that owner: set caller_names_owner = true to accept this")),
        (route("methods = [\"GET\"]\n[route.delegation]\npolicy_issuer = \"Happy Pets\"\nresource_type = \"T\"\ndelegation_path = [\"\", \"did:ishare:EU.NL.NTRNL-10000001\"]\n"), format!("{r}.delegation.policy_issuer: \"Happy Pets\" is not a party identifier: party identifier \"Happy Pets\" contains white space or control characters|{r}.delegation.delegation_path: \"\" is not a party identifier: party identifier is empty")),
        (route("methods = [\"GET\"]\n[route.delegation]\npolicy_issuer = \"EU.EORI.NL000000005\"\nresource_type = \"T\"\nmax_decision_age = \"500ms\"\n"), format!("{r}.delegation.max_decision_age: at least 1s: each request of the route would ask the registry, which its budget of registry_calls_per_minute does not allow for")),
        (route("[route.response_headers]\n\"Bad Name\" = \"x\"\nLicensePurpose = \"evidence\"\nX-Ok = \"a\\u0001b\"\n"), format!("{r}.response_headers: \"Bad Name\" is not a header name|{r}.response_headers.LicensePurpose: \"evidence\" needs a delegation route|{r}.response_headers.X-Ok: not a valid header value")),
    ];
    let mut wrong = Vec::new();
    for (rules, expected) in cases {
        let expected: Vec<&str> = expected.split('|').collect();
        let got = issues(BASE, &rules);
        if got != expected {
            wrong.push(format!(
                "{rules}\n  got:      {got:?}\n  expected: {expected:?}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The book's page of every `gateway.toml` key, as committed.
const REFERENCE_PAGE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/docs/src/reference/configuration.md"
);

#[test]
fn the_configuration_reference_page_is_what_the_code_generates() {
    let generated = super::reference::markdown();
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(REFERENCE_PAGE, &generated).expect("the reference page is written");
    }
    let committed = std::fs::read_to_string(REFERENCE_PAGE).unwrap_or_default();
    assert!(
        committed == generated,
        "{REFERENCE_PAGE} is not what src/config/reference/ writes: \
         `UPDATE_DOCS=1 cargo test --lib configuration_reference` writes it anew"
    );
}

/// The rows of the reference page: each key by its whole name (`scheme_owner.refresh`), with the
/// text of its default.
fn reference_rows(page: &str) -> Vec<(String, String)> {
    let mut table = String::new();
    let mut rows = Vec::new();
    for line in page.lines() {
        if let Some(heading) = line.strip_prefix("## ") {
            table = heading.trim_matches(|c| "`[]".contains(c)).to_string();
            if heading == "Top level" {
                table.clear();
            }
        } else if line.starts_with("| `") {
            let cells: Vec<&str> = line.split(" | ").collect();
            for key in cells[0].split('`').skip(1).step_by(2) {
                let full = match table.as_str() {
                    "" => key.to_string(),
                    t => format!("{t}.{key}"),
                };
                rows.push((full, cells[1].to_string()));
            }
        }
    }
    rows
}

#[test]
fn the_configuration_reference_shows_every_default() {
    let page = std::fs::read_to_string(REFERENCE_PAGE).expect("the reference page");
    let rows = reference_rows(&page);
    for (key, value) in defaults::documented() {
        let row = rows.iter().find(|(k, _)| *k == key);
        assert!(
            row.is_some_and(|(_, d)| d.contains(&format!("`{value}`"))),
            "{REFERENCE_PAGE}: {key} should default to `{value}`, found {row:?}"
        );
    }
}

#[test]
fn the_configuration_reference_names_every_key_the_reader_accepts_and_no_other() {
    // Every table the reference has, and the tables inside them its keys name, given once: the
    // reader knows the keys of each.
    let mut text = String::new();
    for table in super::reference::TABLES
        .iter()
        .filter(|t| !t.name.is_empty())
    {
        let inner: std::collections::BTreeSet<&str> = table
            .keys
            .iter()
            .flat_map(|k| k.names.iter())
            .filter_map(|n| n.rsplit_once('.').map(|(t, _)| t))
            .collect();
        let brackets = if table.array {
            ("[[", "]]")
        } else {
            ("[", "]")
        };
        text.push_str(&format!("{}{}{}\n", brackets.0, table.name, brackets.1));
        for t in inner {
            text.push_str(&format!("[{}.{t}]\n", table.name));
        }
    }
    let known = super::reader::known_keys::<super::file::GatewayFile>(&text);
    // A key whose value is a table of keys is named by those keys.
    let leaves: std::collections::BTreeSet<&String> = known
        .iter()
        .filter(|k| {
            !known
                .iter()
                .any(|other| other.starts_with(&format!("{k}.")))
        })
        .collect();
    let documented: std::collections::BTreeSet<String> = super::reference::TABLES
        .iter()
        .flat_map(|t| {
            t.keys
                .iter()
                .flat_map(move |k| k.names.iter().map(move |n| t.path(n)))
        })
        .collect();
    let undocumented: Vec<_> = leaves
        .iter()
        .filter(|k| !documented.contains(**k))
        .collect();
    assert!(
        undocumented.is_empty(),
        "not in the reference: {undocumented:?}"
    );
    let unknown: Vec<_> = documented.iter().filter(|k| !leaves.contains(k)).collect();
    assert!(
        unknown.is_empty(),
        "in the reference, not read: {unknown:?}"
    );
}

#[test]
fn listen_addresses_overlap_when_both_cannot_be_bound() {
    let a = |s: &str| s.parse::<std::net::SocketAddr>().unwrap();
    let overlap = |x: &str, y: &str| super::gateway::overlaps(a(x), a(y));
    assert!(overlap("127.0.0.1:80", "127.0.0.1:80"));
    assert!(overlap("0.0.0.0:80", "127.0.0.1:80"));
    assert!(overlap("[::]:80", "127.0.0.1:80"));
    assert!(overlap("[::]:80", "[::1]:80"));
    assert!(!overlap("0.0.0.0:80", "[::1]:80"));
    assert!(!overlap("127.0.0.1:80", "127.0.0.2:80"));
    assert!(!overlap("127.0.0.1:80", "127.0.0.1:81"));
    assert!(!overlap("127.0.0.1:0", "127.0.0.1:0"));
}

#[test]
fn shadow_mode_is_for_routes_with_a_decision_and_is_said_loudly() {
    let shadow = |extra: &str| format!("{ROUTE}mode = \"shadow\"\n{extra}");
    assert_eq!(
        issues(BASE, &shadow("auth = \"public\"\n")),
        ["policies/rules.toml: route[0] (r).mode: a public route has no decision to shadow"]
    );
    assert_eq!(
        issues(BASE, &format!("{ROUTE}mode = \"dry\"\n")),
        ["policies/rules.toml: route[0] (r).mode: unknown variant `dry`, expected `enforce` or `shadow`"]
    );
    let dir = write(BASE, &shadow(""));
    let config = load(&dir.join("gateway.toml")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(config.routes[0].mode, model::Mode::Shadow);
    let warnings: Vec<String> = config.warnings.iter().map(|w| w.message.clone()).collect();
    assert_eq!(
        warnings,
        ["shadow mode: this route's decisions are logged and counted, NOT enforced; every request is forwarded"]
    );
}

#[test]
fn the_decision_log_needs_a_path_and_masks_only_known_fields() {
    let log = |table: &str| gateway("", "", &format!("[decision_log]\n{table}"));
    assert_eq!(
        issues(&log("mask = [\"caller.id\", \"secret\"]\n"), ROUTE),
        ["gateway.toml: decision_log.path: missing: a file, or \"-\" for stdout",]
    );
    assert_eq!(
        issues(&log("path = \"-\"\nmask = [\"secret\"]\nmax_line_bytes = 100\nqueue = 0\n"), ROUTE),
        [
            "gateway.toml: decision_log.mask: \"secret\" is not a field that can be masked (path, caller, caller.id, caller.acting_for, values, mask, mask.access_subject, mask.identifiers, evidence.issuers, description)",
            "gateway.toml: decision_log.max_line_bytes: at least 1024",
            "gateway.toml: decision_log.queue: at least 1",
        ]
    );
    let dir = write(
        &log("path = \"decisions.log\"\nmask = [\"caller.id\"]\n"),
        ROUTE,
    );
    let config = load(&dir.join("gateway.toml")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let settings = config.decision_log.expect("a decision log");
    assert_eq!(
        settings.target,
        model::DecisionLogTarget::File(dir.join("decisions.log"))
    );
    assert_eq!(settings.mask, ["caller.id"]);
    assert_eq!(settings.max_line_bytes, defaults::DECISION_LOG_MAX_LINE);
    assert_eq!(settings.queue, defaults::DECISION_LOG_QUEUE);
}

#[test]
fn purges_on_the_admin_listener_need_a_real_secret() {
    let admin = |file: &str| {
        gateway(
            "",
            "",
            &format!("[admin]\naddress = \"127.0.0.1:9901\"\npurge_secret_file = \"{file}\"\n"),
        )
    };
    let short = write(&admin("short"), ROUTE);
    std::fs::write(short.join("short"), "too short\n").unwrap();
    let refused = load(&short.join("gateway.toml")).unwrap_err().to_string();
    let _ = std::fs::remove_dir_all(&short);
    assert!(
        refused.contains("admin.purge_secret_file") && refused.contains("at least 32 bytes"),
        "{refused}"
    );
    let dir = write(&admin("secret"), ROUTE);
    std::fs::write(dir.join("secret"), format!("{}\n", "p".repeat(40))).unwrap();
    let config = load(&dir.join("gateway.toml")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        config.purge_secret.map(|s| s.0),
        Some(super::model::digest("p".repeat(40).as_bytes()))
    );
}

#[test]
fn the_decision_api_needs_an_address_of_its_own_and_a_real_secret() {
    let api = |table: &str| gateway("", "", &format!("[decision_api]\n{table}"));
    assert_eq!(
        issues(&api("max_batch = 0\ncolour = 1\n"), ROUTE),
        [
            "gateway.toml: line 31, column 1: decision_api.colour: unknown key",
            "gateway.toml: decision_api.address: missing: an address such as \"127.0.0.1:9902\"",
            "gateway.toml: decision_api.max_batch: at least 1",
        ]
    );
    assert_eq!(
        issues(
            &api("address = \"127.0.0.1:8443\"\ngrpc_address = \"nowhere\"\nbearer_secret_file = \"id.chain.pem\"\ntimeout = \"0s\"\nmax_body_bytes = 10\ntls.certificate = \"tls.pem\"\ntls.key = \"tls.key.pem\"\ntls.client_auth = \"required\"\npolicy_decision_point = \"http://pdp.example\"\n"),
            ROUTE
        ),
        [
            "gateway.toml: decision_api.grpc_address: \"nowhere\" is not an address: invalid socket address",
            "gateway.toml: decision_api.tls.client_auth: needs tls.client_ca",
            "gateway.toml: decision_api.bearer_secret_file: id.chain.pem: the secret is sent in a header: printable text only",
            "gateway.toml: decision_api.max_body_bytes: at least 1024 bytes",
            "gateway.toml: decision_api.timeout: longer than 0 s",
            "gateway.toml: decision_api.policy_decision_point: \"http://pdp.example\": an https URL of a host (and port) only, such as \"https://pdp.example.com\"",
            "gateway.toml: decision_api.address: 127.0.0.1:8443 overlaps listener[0].address (127.0.0.1:8443): each listener needs an address of its own",
        ]
    );
    let short = write(
        &api("address = \"127.0.0.1:9902\"\nbearer_secret_file = \"short\"\n"),
        ROUTE,
    );
    std::fs::write(short.join("short"), "too short\n").unwrap();
    let refused = load(&short.join("gateway.toml")).unwrap_err().to_string();
    let _ = std::fs::remove_dir_all(&short);
    assert!(
        refused.contains("decision_api.bearer_secret_file")
            && refused.contains("at least 32 bytes"),
        "{refused}"
    );
    let dir = write(
        &api("address = \"127.0.0.1:9902\"\nbearer_secret_file = \"secret\"\n"),
        ROUTE,
    );
    std::fs::write(dir.join("secret"), format!("{}\n", "s".repeat(40))).unwrap();
    let config = load(&dir.join("gateway.toml")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let settings = config.decision_api.expect("a decision service");
    assert!(format!("{settings:?}").contains("bearer_secret: Some(BearerSecret(..))"));
    assert_eq!(settings.address.to_string(), "127.0.0.1:9902");
    assert_eq!(
        settings.bearer_secret.map(|s| s.0),
        Some(super::model::digest("s".repeat(40).as_bytes()))
    );
    assert_eq!(settings.max_batch, defaults::DECISION_API_MAX_BATCH);
    assert_eq!(settings.policy_decision_point, None);
    // The discovery document's identifier: an https origin, as written without its slash; a
    // path, query or fragment is no part of one.
    for (written, read) in [
        ("https://PDP.example:8443/", Ok("https://pdp.example:8443")),
        ("https://pdp.example/tenant", Err(())),
        ("https://pdp.example/?a=1", Err(())),
        ("https://pdp.example/#f", Err(())),
        ("https://user@pdp.example", Err(())),
    ] {
        let table =
            format!("address = \"127.0.0.1:9902\"\npolicy_decision_point = \"{written}\"\n");
        let dir = write(&api(&table), ROUTE);
        let loaded = load(&dir.join("gateway.toml"));
        let _ = std::fs::remove_dir_all(&dir);
        match (loaded, read) {
            (Ok(config), Ok(read)) => assert_eq!(
                config
                    .decision_api
                    .unwrap()
                    .policy_decision_point
                    .as_deref(),
                Some(read)
            ),
            (Err(e), Err(())) => assert!(
                e.to_string().contains("decision_api.policy_decision_point"),
                "{written}: {e}"
            ),
            (loaded, read) => panic!("{written}: loaded: {}, expected {read:?}", loaded.is_ok()),
        }
    }
    // Without a secret or required client certificates, AuthZEN callers cannot authenticate.
    let dir = write(&api("address = \"127.0.0.1:9902\"\n"), ROUTE);
    let config = load(&dir.join("gateway.toml")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let warnings: Vec<String> = config.warnings.iter().map(|w| w.message.clone()).collect();
    assert_eq!(
        warnings,
        ["no bearer_secret_file and no required client certificates: AuthZEN callers cannot authenticate and are refused (nginx and Envoy are decided on their callers' tokens)"]
    );
}
