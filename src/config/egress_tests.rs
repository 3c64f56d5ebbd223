//! The loader of `egress.toml`: a configuration in, its model or the exact `file: key: message`
//! lines out.

use super::egress::load;
use super::tests::write;
use std::time::Duration;

const PEERS: &str = r#"
[identity]
party_id = "EU.EORI.NL000000003"
key = "id.key.pem"
certificate_chain = "id.chain.pem"

[scheme_owner]
url = "https://127.0.0.1:9100"
party_id = "EU.EORI.NL000000000"
root_certificate = "root.pem"

[outbound]
ca_file = "root.pem"

[[registry]]
name = "ar"
party_id = "EU.EORI.NL000000004"
url = "https://127.0.0.1:9104"

[consumer]
address = "127.0.0.1:8181"

[[provider]]
name = "wh"
party_id = "EU.EORI.NL000000002"
url = "https://127.0.0.1:8443"
"#;

const ROUTES: &str = r#"
[[egress]]
name = "documents"
path = "/api/containers/{id}/documents"
methods = ["GET"]
provider = "wh"
[egress.evidence]
registry = "ar"
policy_issuer = "EU.EORI.NL000000005"
resource_type = "CONTAINER"
identifiers = ["{path.id}"]

[[egress]]
name = "all"
path = "/{*rest}"
provider = "wh"
"#;

/// The problems of a configuration, the directory left out; none when it loads.
fn problems(text: &str) -> Vec<String> {
    let dir = write(text, "");
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

#[test]
fn a_consumer_side_loads_with_its_defaults() {
    let dir = write(&format!("{PEERS}{ROUTES}"), "");
    let config = load(&dir.join("gateway.toml")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let wh = &config.providers["wh"];
    assert_eq!(wh.token_path, "/connect/token");
    assert_eq!(wh.timeout, Duration::from_secs(30));
    assert_eq!(wh.max_concurrent, 64);
    assert_eq!(wh.scheme_version.as_str(), "1.9", "the scheme owner's");
    assert_eq!(config.consumer.max_body_bytes, 1 << 20);
    assert_eq!(config.routes.len(), 2);
    let ask = config.routes[0].evidence.as_ref().unwrap();
    assert_eq!(ask.attributes, ["*"]);
    assert_eq!(ask.actions, None, "the method's");
    assert!(config.warnings.is_empty(), "{:?}", config.warnings);
}

#[test]
fn every_problem_of_the_outgoing_routes_is_named_with_its_key() {
    let text = format!(
        r#"{PEERS}
[[egress]]
name = "a"
path = "/x/{{id}}"
provider = "nobody"
broker = true
[egress.evidence]
registry = "none"
policy_issuer = "EU.EORI.NL000000005"
resource_type = "CONTAINER"
identifiers = ["{{path.other}}", "{{body.json./id}}"]

[[egress]]
name = "b"
path = "/x/{{id}}"
provider = "wh"
"#
    );
    assert_eq!(
        problems(&text),
        [
            "gateway.toml: egress[0].provider: no [[provider]] named \"nobody\"",
            "gateway.toml: egress[0].evidence.registry: no [[registry]] named \"none\"",
            "gateway.toml: egress[0].evidence.identifiers[0]: the path has no {other}",
            "gateway.toml: egress[0].evidence.identifiers[1]: the evidence is asked before the call: take values from the path, the query or the headers, not the body",
            "gateway.toml: egress[0].evidence.actions: give the actions, or limit the route's methods to those with one (iSHARE.READ for GET and HEAD, CREATE for POST, UPDATE for PUT and PATCH, DELETE for DELETE)",
            "gateway.toml: egress[0].evidence: a broker's call is decided for the consumer it acts for, whose evidence we cannot ask for: the provider asks the data owner's registry itself",
            "gateway.toml: egress[1].path: /x/{id} is the path of egress route \"a\" too, for the same methods",
        ]
    );
}

#[test]
fn the_listener_and_the_providers_are_checked() {
    let text = PEERS
        .replace("[consumer]\naddress = \"127.0.0.1:8181\"\n", "")
        .replace(
            "name = \"wh\"",
            "name = \"w h\"\ntimeout = \"0s\"\nmax_concurrent = 0",
        );
    assert_eq!(
        problems(&text),
        [
            "gateway.toml: consumer: missing: the address local clients call (e.g. address = \"127.0.0.1:8181\")",
            "gateway.toml: provider[0].name: use letters, digits, '-', '_' and '.' (it is a metrics label)",
            "gateway.toml: provider[0].timeout: timeout must be more than zero",
            "gateway.toml: provider[0].max_concurrent: at least 1",
            "gateway.toml: egress: no outgoing route: add an [[egress]] with a path and a provider",
        ]
    );
}

#[test]
fn a_listener_beyond_loopback_is_warned_of() {
    let text = format!("{PEERS}{ROUTES}").replace("127.0.0.1:8181", "0.0.0.0:8181");
    let dir = write(&text, "");
    let config = load(&dir.join("gateway.toml")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let warnings: Vec<String> = config.warnings.iter().map(|w| w.message.clone()).collect();
    assert_eq!(
        warnings,
        ["0.0.0.0:8181 is not a loopback address: every call that reaches it is made as EU.EORI.NL000000003, with our token and evidence; let only our own clients reach it"]
    );
}

#[test]
fn a_providers_base_url_holds_no_query_fragment_or_credentials() {
    for (url, problem) in [
        (
            "https://127.0.0.1:8443/?x=1",
            "a base URL has no query or fragment",
        ),
        (
            "https://127.0.0.1:8443/#top",
            "a base URL has no query or fragment",
        ),
        (
            "https://me:pw@127.0.0.1:8443",
            "a base URL holds no credentials (we authenticate with our token)",
        ),
    ] {
        let text = format!("{PEERS}{ROUTES}").replace("https://127.0.0.1:8443", url);
        assert_eq!(
            problems(&text),
            [format!("gateway.toml: provider[0].url: {url:?}: {problem}")]
        );
    }
}
