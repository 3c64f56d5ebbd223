//! Test support: the testbed in-process on ephemeral loopback ports, with key material generated
//! once per test binary, and HTTP clients that trust its CA.

#![allow(dead_code)]

use ishare_gateway::scheme::jwt::SigningIdentity;
use ishare_gateway::scheme::pki::PartyCredentials;
use ishare_gateway::testbed::config::{PartyConfig, TestbedConfig};
use ishare_gateway::testbed::keys::{self, TestbedKeys};
use ishare_gateway::testbed::Testbed;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

pub const SO: &str = "EU.EORI.NL000000000";
pub const CONSUMER: &str = "EU.EORI.NL000000001";
pub const SP2: &str = "EU.EORI.NL000000002";
pub const SP: &str = "EU.EORI.NL000000003";
pub const AR: &str = "EU.EORI.NL000000004";
pub const OWNER: &str = "EU.EORI.NL000000005";
pub const INACTIVE: &str = "EU.EORI.NL000000006";
/// A party whose certificate the test PKI issues but that the scheme owner does not know.
pub const UNKNOWN: &str = "EU.EORI.NL000000099";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The shipped testbed config with every port ephemeral, extra consumer parties (for paging), and
/// key material in a directory of this test binary.
pub fn testbed_config(binary: &str) -> TestbedConfig {
    let mut config =
        TestbedConfig::load(&repo().join("conf/testbed.toml")).expect("conf/testbed.toml loads");
    config.data_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("testbed-{binary}"));
    for p in &mut config.parties {
        p.port = 0;
    }
    config.echo.port = 0;
    for i in 0..8 {
        config.parties.push(PartyConfig {
            id: format!("EU.EORI.NL00000010{i}"),
            name: format!("Extra Consumer {i}"),
            serve: None,
            port: 0,
            roles: vec!["ServiceConsumer".into()],
            status: "Active".into(),
            start_date: None,
            end_date: None,
            registries: vec![],
        });
    }
    config
}

/// Key material is generated once per binary before any testbed starts, so that parallel tests
/// never generate it twice.
pub fn prepare_keys(config: &TestbedConfig) -> &'static TestbedKeys {
    static KEYS: OnceLock<TestbedKeys> = OnceLock::new();
    static GUARD: Mutex<()> = Mutex::new(());
    let _guard = GUARD.lock().unwrap_or_else(|e| e.into_inner());
    KEYS.get_or_init(|| {
        let parties: Vec<(String, String)> = config
            .parties
            .iter()
            .map(|p| (p.id.clone(), p.name.clone()))
            .collect();
        keys::load_or_generate(
            &config.data_dir,
            &parties,
            &["localhost", "127.0.0.1", "::1"],
        )
        .expect("testbed keys")
    })
}

/// A testbed for one test; stop it at the end.
pub struct Bed {
    pub testbed: Testbed,
    pub keys: &'static TestbedKeys,
    pub http: reqwest::Client,
}

impl Bed {
    pub async fn start(binary: &str) -> Bed {
        let config = testbed_config(binary);
        let keys = prepare_keys(&config);
        let testbed = Testbed::start(&config).await.expect("testbed starts");
        Bed {
            http: client_trusting(&keys.ca_file),
            testbed,
            keys,
        }
    }

    pub fn url(&self, party: &str) -> String {
        self.testbed
            .url(party)
            .expect("a serving party")
            .to_string()
    }

    pub fn creds(&self, party: &str) -> &PartyCredentials {
        &self.keys.parties[party]
    }

    pub fn identity(&self, party: &str) -> SigningIdentity {
        self.creds(party).signing_identity()
    }

    /// Credentials for a party the scheme owner does not know, from the testbed's own CA.
    pub fn unknown_party(&self) -> SigningIdentity {
        self.keys
            .pki
            .issue_party(UNKNOWN, "Unknown Ltd")
            .unwrap()
            .signing_identity()
    }

    pub async fn stop(self) {
        self.testbed.stop().await;
    }

    /// A token from `server` for `client` (panics unless 200).
    pub async fn token(&self, server: &str, client: &str) -> String {
        let resp = self
            .token_response(server, &self.identity(client), None)
            .await;
        assert_eq!(resp.status(), 200, "token for {client} at {server}");
        let body: serde_json::Value = resp.json().await.unwrap();
        body["access_token"].as_str().unwrap().to_string()
    }

    /// POST a token request with an assertion (made by `identity` unless given) to `server`.
    pub async fn token_response(
        &self,
        server: &str,
        identity: &SigningIdentity,
        assertion: Option<String>,
    ) -> reqwest::Response {
        let assertion = assertion.unwrap_or_else(|| {
            identity
                .client_assertion(server, ishare_gateway::scheme::Timestamp::now())
                .unwrap()
        });
        let form = [
            ("grant_type", "client_credentials"),
            ("scope", "iSHARE"),
            ("client_id", identity.party_id().as_str()),
            (
                "client_assertion_type",
                "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
            ),
            ("client_assertion", assertion.as_str()),
        ];
        self.http
            .post(format!("{}/connect/token", self.url(server)))
            .form(&form)
            .send()
            .await
            .unwrap()
    }
}

pub fn client_trusting(ca_file: &Path) -> reqwest::Client {
    let pem = std::fs::read(ca_file).unwrap();
    ishare_gateway::tls::outbound_client(
        &ishare_gateway::tls::OutboundTrust {
            ca_pem: Some(pem),
            system_roots: false,
        },
        Duration::from_secs(10),
    )
    .unwrap()
}

/// The claims of a JWT, unverified (tests check signatures separately where it matters).
pub fn claims(jwt: &str) -> serde_json::Value {
    use base64::Engine;
    let payload = jwt.split('.').nth(1).expect("a JWT");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

/// The status and JSON body of a response.
pub async fn status_json(resp: reqwest::Response) -> (u16, serde_json::Value) {
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text));
    (status, body)
}
