//! The shipped configuration as the binaries' tests run it: conf/gateway.toml pointed at a
//! testbed's key material and addresses, on free ports.

use super::{repo, Bed, Ports, AR, SO};
use std::path::{Path, PathBuf};

/// Where the testbed's participants serve: party id (or "echo") → base URL.
pub struct Urls(pub Vec<(String, String)>);

impl Urls {
    pub fn of(&self, party: &str) -> &str {
        self.0
            .iter()
            .find(|(p, _)| p == party)
            .map(|(_, u)| u.as_str())
            .unwrap_or_else(|| panic!("no URL for {party}"))
    }

    pub fn of_bed(bed: &Bed) -> Urls {
        let mut urls: Vec<(String, String)> = [SO, AR, "EU.EORI.NL000000007"]
            .iter()
            .map(|p| (p.to_string(), bed.url(p)))
            .collect();
        urls.push(("echo".into(), bed.testbed.echo_url.clone()));
        Urls(urls)
    }
}

/// conf/gateway.toml as shipped, for a testbed with its key material in `data` serving at `urls`,
/// on the ports given, with a grace period of one second.
pub fn shipped_gateway(data: &Path, urls: &Urls, ports: &Ports) -> String {
    let data = data.display().to_string();
    std::fs::read_to_string(repo().join("conf/gateway.toml"))
        .unwrap()
        .replace("../data/testbed", &data)
        .replace(
            "../policies",
            &repo().join("policies").display().to_string(),
        )
        .replace("127.0.0.1:8443", &format!("127.0.0.1:{}", ports.tls))
        .replace("127.0.0.1:8080", &format!("127.0.0.1:{}", ports.plain))
        .replace("127.0.0.1:9901", &format!("127.0.0.1:{}", ports.admin))
        .replace("https://127.0.0.1:9100", urls.of(SO))
        .replace("https://127.0.0.1:9104", urls.of(AR))
        .replace("https://127.0.0.1:9107", urls.of("EU.EORI.NL000000007"))
        .replace(
            "127.0.0.1:9180",
            urls.of("echo").trim_start_matches("http://"),
        )
        .replace("grace_period = \"5s\"", "grace_period = \"1s\"")
}

/// The shipped configuration with the key material of the testbed of test binary `binary`, for
/// commands that ask no one (the participants' addresses lead nowhere): its text, and the
/// directory of the key material.
pub fn shipped_offline(binary: &str) -> (String, PathBuf) {
    let keys = super::prepare_keys(&super::testbed_config(binary));
    let nowhere = "https://127.0.0.1:1".to_string();
    let urls = Urls(
        [SO, AR, "EU.EORI.NL000000007"]
            .iter()
            .map(|p| (p.to_string(), nowhere.clone()))
            .chain([("echo".to_string(), "http://127.0.0.1:1".to_string())])
            .collect(),
    );
    let text = shipped_gateway(&keys.data_dir, &urls, &Ports::free());
    (text, keys.data_dir.clone())
}

/// A route in shadow mode beside the shipped ones: the registry's Deny of SECRET-1 is forwarded.
pub const SHADOW_ROUTE: &str = r#"
[[route]]
name = "containers-shadow"
methods = ["GET"]
path = "/shadow/containers/{id}"
upstream = "legacy"
mode = "shadow"
[route.delegation]
policy_issuer = "EU.EORI.NL000000005"
resource_type = "CONTAINER"
identifiers = ["{path.id}"]
"#;

/// The shipped rules and a route in shadow mode, in a directory of their own.
pub fn rules_with_a_shadow_route(dir: &Path) -> PathBuf {
    let rules = dir.join("policies");
    std::fs::create_dir_all(&rules).unwrap();
    for entry in std::fs::read_dir(repo().join("policies")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|x| x == "toml") {
            std::fs::copy(&path, rules.join(path.file_name().unwrap())).unwrap();
        }
    }
    std::fs::write(rules.join("shadow.toml"), SHADOW_ROUTE).unwrap();
    rules
}
