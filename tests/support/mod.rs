//! Test support: the testbed in-process on ephemeral loopback ports, with key material generated
//! once per data directory (each module its own), and HTTP clients that trust its CA.

#![allow(dead_code)]

pub mod checker;
pub mod container;
pub mod fleet;
pub mod people;
pub mod process;
pub mod satellite;
pub mod served;
pub mod shipped;

use ishare_gateway::peers::PeerClient;
use ishare_gateway::scheme::jwt::SigningIdentity;
use ishare_gateway::scheme::mask::AccessRequest;
use ishare_gateway::testbed::config::{PartyConfig, TestbedConfig};
use ishare_gateway::testbed::keys::{self, TestbedKeys};
use ishare_gateway::testbed::pki::PartyCredentials;
use ishare_gateway::testbed::Testbed;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
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

/// The parties of the 3.0 testbed (conf/testbed-3.0.toml), by their did:ishare.
pub const SO3: &str = "did:ishare:EU.NL.NTRNL-10000000";
pub const CONSUMER3: &str = "did:ishare:EU.NL.NTRNL-10000001";
pub const STELLAR3: &str = "did:ishare:EU.NL.NTRNL-10000002";
pub const SP3: &str = "did:ishare:EU.NL.NTRNL-10000003";
pub const AR3: &str = "did:ishare:EU.NL.NTRNL-10000004";
pub const OWNER3: &str = "did:ishare:EU.NL.NTRNL-10000005";
pub const FORMER3: &str = "did:ishare:EU.NL.NTRNL-10000006";
pub const IDP3: &str = "did:ishare:EU.NL.NTRNL-10000007";
pub const PETCARE_AR3: &str = "did:ishare:EU.NL.NTRNL-10000008";

/// A read of Happy Pets' container `id` by `subject` from the Netherlands, as the 3.0 testbed's
/// policies grant it.
pub fn container_read_3(subject: &str, id: &str) -> AccessRequest {
    let mut request = AccessRequest {
        policy_issuer: OWNER3.into(),
        access_subject: subject.into(),
        resource_type: "CONTAINER".into(),
        identifiers: vec![id.into()],
        attributes: vec!["*".into()],
        actions: vec!["iSHARE.READ".into()],
        ..AccessRequest::default()
    };
    request
        .operands
        .insert("requesterLocation".into(), Some("NL".into()));
    request
}

/// The python of the virtual environment `make test-setup` prepares (or ISHARE_INTEROP_PYTHON),
/// with python-ishare and the validator of the scheme's OpenAPI schemas.
pub fn interop_python() -> PathBuf {
    let python = std::env::var_os("ISHARE_INTEROP_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target/interop-venv/bin/python"));
    assert!(
        python.exists(),
        "{} is missing: `make test-setup` installs python-ishare into it",
        python.display()
    );
    python
}

/// Validate `documents` against the schema at `pointer` of the scheme's official OpenAPI
/// document (tests/fixtures/ishare-openapi): the validator's complaints, empty when they hold.
pub fn schema_errors(pointer: &str, documents: &[serde_json::Value]) -> String {
    schema_errors_in("ishare_openapi_spec.yaml", pointer, documents, false)
}

/// Validate `documents` against the schema at `pointer` of the document `spec` (its path under
/// tests/fixtures/ishare-openapi: `v2.1/ishare_openapi_spec.yaml` for 2.1's); `closed`: members
/// the schema does not list are errors (`validate_oas.py`).
pub fn schema_errors_in(
    spec: &str,
    pointer: &str,
    documents: &[serde_json::Value],
    closed: bool,
) -> String {
    validate_oas(spec, pointer, closed, &serde_json::json!(documents))
}

/// Validate each `(what, pointer, document)` against the schema at its own pointer of the
/// document `spec`, in one run of the validator: the complaints, each after what it is.
pub fn schema_errors_each(
    spec: &str,
    items: &[(String, String, serde_json::Value)],
    closed: bool,
) -> String {
    let items: Vec<serde_json::Value> = items
        .iter()
        .map(|(what, pointer, document)| {
            serde_json::json!({"what": what, "pointer": pointer, "document": document})
        })
        .collect();
    validate_oas(spec, "--each", closed, &serde_json::json!(items))
}

fn validate_oas(spec: &str, pointer: &str, closed: bool, input: &serde_json::Value) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new(interop_python())
        .arg(repo().join("tests/interop/validate_oas.py"))
        .arg(repo().join("tests/fixtures/ishare-openapi").join(spec))
        .arg(pointer)
        .args(closed.then_some("closed"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the validator starts");
    let input = serde_json::to_vec(input).unwrap();
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    match (out.status.success(), said.is_empty()) {
        (true, _) => String::new(),
        (false, false) => said,
        (false, true) => format!("the validator failed: {}", out.status),
    }
}

/// The repository's root.
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `ishare-gateway ARGS`, run to its end.
pub fn binary_output(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_ishare-gateway"))
        .args(args)
        .output()
        .unwrap()
}

/// What a command printed: its standard output, then its standard error.
pub fn printed(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A page of the book (`docs/src/…`), or the README, by its path from the repository's root.
pub fn page(path: &str) -> String {
    std::fs::read_to_string(repo().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The text of a page between `start` and `end`, first after `section`.
pub fn page_block<'a>(page: &'a str, section: &str, start: &str, end: &str) -> &'a str {
    page.split(section)
        .nth(1)
        .and_then(|rest| rest.split(start).nth(1))
        .and_then(|rest| rest.split(end).next())
        .unwrap_or_else(|| panic!("the example after {section:?}"))
}

/// The shipped testbed config with every port ephemeral, extra consumer parties (for paging), and
/// key material in a directory of this test binary.
pub fn testbed_config(binary: &str) -> TestbedConfig {
    testbed_config_of(binary, "conf/testbed.toml")
}

/// `testbed_config` of another shipped testbed config (`conf/testbed-3.0.toml`). One test binary
/// runs testbeds of one config: its key material is made once.
pub fn testbed_config_of(binary: &str, file: &str) -> TestbedConfig {
    let mut config = TestbedConfig::load(&repo().join(file)).expect("the testbed config loads");
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
            also_known_as: vec![],
            registries_for: Default::default(),
            registries_in: Default::default(),
            dataspaces: Vec::new(),
            dataspace_roles: Default::default(),
            strict: false,
            keyrock: false,
        });
    }
    config
}

/// Key material is generated once per data directory before any testbed on it starts, so that
/// parallel tests never generate it twice.
pub fn prepare_keys(config: &TestbedConfig) -> &'static TestbedKeys {
    static KEYS: Mutex<BTreeMap<PathBuf, &'static TestbedKeys>> = Mutex::new(BTreeMap::new());
    let mut prepared = KEYS.lock().unwrap_or_else(|e| e.into_inner());
    prepared.entry(config.data_dir.clone()).or_insert_with(|| {
        let parties: Vec<(String, String)> = config
            .parties
            .iter()
            .map(|p| (p.id.clone(), p.name.clone()))
            .collect();
        let keys = keys::load_or_generate(
            &config.data_dir,
            &parties,
            &["localhost", "127.0.0.1", "::1"],
        )
        .expect("testbed keys");
        Box::leak(Box::new(keys))
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
        Bed::start_of(testbed_config(binary)).await
    }

    /// A testbed of `config` (`testbed_config_of`).
    pub async fn start_of(config: TestbedConfig) -> Bed {
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

    /// Where the testbed's scheme owner serves.
    pub fn scheme_owner_url(&self) -> String {
        let serving = self.testbed.participants.iter();
        serving
            .filter(|p| p.serve == ishare_gateway::testbed::config::Serve::SchemeOwner)
            .map(|p| p.url.clone())
            .next()
            .expect("a scheme owner")
    }

    pub fn creds(&self, party: &str) -> &PartyCredentials {
        &self.keys.parties[party]
    }

    pub fn identity(&self, party: &str) -> SigningIdentity {
        self.creds(party).signing_identity()
    }

    /// Evidence from the registry for `request`, asked by `requester` (as a consumer does).
    pub async fn registry_evidence(&self, requester: &str, request: &AccessRequest) -> String {
        self.evidence_of(requester, AR, request).await
    }

    /// Evidence from `registry` for `request`, asked by `requester` in the testbed's version.
    pub async fn evidence_of(
        &self,
        requester: &str,
        registry: &str,
        request: &AccessRequest,
    ) -> String {
        let peer = PeerClient::new(self.http.clone(), self.identity(requester), "iSHARE");
        let version = self.testbed.version();
        peer.ask_evidence(&self.url(registry), registry, request, version)
            .await
            .unwrap()
            .expect("the registry has a policy")
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

    /// A token for `client` from the gateway whose listener is at `base` (panics unless 200).
    pub async fn token_at(&self, base: &str, client: &str) -> String {
        let form = token_form(&self.identity(client), SP, None);
        let (status, body) = status_json(request_token(&self.http, base, form).await).await;
        assert_eq!(status, 200, "token for {client} at {base}: {body}");
        body["access_token"].as_str().unwrap().to_string()
    }

    /// What a participant counted (`GET /testing/stats`).
    pub async fn stats(&self, party: &str) -> serde_json::Value {
        self.http
            .get(format!("{}/testing/stats", self.url(party)))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// POST a token request with an assertion (made by `identity` unless given) to `server`.
    pub async fn token_response(
        &self,
        server: &str,
        identity: &SigningIdentity,
        assertion: Option<String>,
    ) -> reqwest::Response {
        request_token(
            &self.http,
            &self.url(server),
            token_form(identity, server, assertion),
        )
        .await
    }
}

/// The form of a token request: the given client assertion, or a fresh one of `identity` for
/// `audience`.
pub fn token_form(
    identity: &SigningIdentity,
    audience: &str,
    assertion: Option<String>,
) -> Vec<(String, String)> {
    let assertion = assertion.unwrap_or_else(|| {
        identity
            .client_assertion(audience, ishare_gateway::scheme::Timestamp::now())
            .unwrap()
    });
    [
        ("grant_type", "client_credentials"),
        ("scope", "iSHARE"),
        ("client_id", identity.party_id().as_str()),
        (
            "client_assertion_type",
            "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
        ),
        ("client_assertion", assertion.as_str()),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// POST a token request form to `{base}/connect/token`.
pub async fn request_token(
    http: &reqwest::Client,
    base: &str,
    form: Vec<(String, String)>,
) -> reqwest::Response {
    http.post(format!("{base}/connect/token"))
        .form(&form)
        .send()
        .await
        .unwrap()
}

/// An access token of the gateway (audience EU.EORI.NL000000003) at `base` for `identity`.
pub async fn access_token(
    http: &reqwest::Client,
    base: &str,
    identity: &SigningIdentity,
) -> String {
    let resp = request_token(http, base, token_form(identity, SP, None)).await;
    assert_eq!(resp.status(), 200, "a token at {base}");
    resp.json::<serde_json::Value>().await.unwrap()["access_token"]
        .as_str()
        .unwrap()
        .to_string()
}

pub fn client_trusting(ca_file: &Path) -> reqwest::Client {
    client_trusting_from(ca_file, None)
}

/// The same, its connections leaving from `address` (another loopback address: another client).
pub fn client_trusting_from(ca_file: &Path, address: Option<std::net::IpAddr>) -> reqwest::Client {
    let pem = std::fs::read(ca_file).unwrap();
    ishare_gateway::tls::outbound_builder(
        &ishare_gateway::tls::OutboundTrust {
            ca_pem: Some(pem),
            system_roots: false,
        },
        Duration::from_secs(10),
    )
    .unwrap()
    .local_address(address)
    .build()
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

/// A free loopback port for a server to bind a moment later: never one this test process handed
/// out before (two listeners given one port would share one socket), and outside the range the
/// system hands out to other sockets meanwhile.
pub fn free_port() -> u16 {
    ishare_gateway::cli::child::free_port().unwrap()
}

/// Wait (bounded) for the admin listener at `admin` to answer /ready: its status and body.
pub async fn readiness(admin: &str) -> (u16, serde_json::Value) {
    for _ in 0..100 {
        if let Ok(r) = reqwest::get(format!("{admin}/ready")).await {
            return (r.status().as_u16(), r.json().await.unwrap());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the admin listener at {admin} did not answer");
}

/// A fresh directory under the target's temporary directory.
pub fn scratch_dir(binary: &str) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "{binary}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("policies")).unwrap();
    dir
}

/// The testbed and a gateway (as EU.EORI.NL000000003) in front of its echo backend.
pub struct Env {
    pub bed: Bed,
    pub gateway: Option<ishare_gateway::gateway::server::RunningGateway>,
    /// https://127.0.0.1:PORT
    pub url: String,
    /// http://127.0.0.1:PORT
    pub plain: String,
    pub admin: String,
    pub dir: PathBuf,
}

pub struct Ports {
    pub tls: u16,
    pub plain: u16,
    pub admin: u16,
}

impl Ports {
    pub fn free() -> Ports {
        Ports {
            tls: free_port(),
            plain: free_port(),
            admin: free_port(),
        }
    }
}

/// A scratch directory with `rules` as policies/rules.toml and a gateway.toml for `bed` on free
/// ports (`extra` appended, then changed by `edit`).
pub fn gateway_dir(
    bed: &Bed,
    binary: &str,
    rules: &str,
    extra: &str,
    edit: impl FnOnce(String) -> String,
) -> (PathBuf, Ports) {
    let dir = scratch_dir(binary);
    let ports = Ports::free();
    std::fs::write(dir.join("policies/rules.toml"), rules).unwrap();
    std::fs::write(
        dir.join("gateway.toml"),
        edit(gateway_toml(bed, &ports, extra)),
    )
    .unwrap();
    (dir, ports)
}

/// The binary with `rules` and `extra` (as `gateway_dir` makes its directory) in front of `bed`,
/// ready: the process and its plain listener's address.
pub async fn binary_in_front(
    bed: &Bed,
    binary: &str,
    rules: &str,
    extra: &str,
) -> (process::GatewayProcess, String) {
    let (dir, ports) = gateway_dir(bed, binary, rules, extra, |t| t);
    let mut gateway =
        process::GatewayProcess::start(binary, &dir.join("gateway.toml"), ports.admin);
    gateway.wait_ready().await;
    (gateway, format!("http://127.0.0.1:{}", ports.plain))
}

/// Build the gateway of `dir` and start it in this process (without waiting for it to be ready).
pub fn launch(dir: &Path) -> ishare_gateway::gateway::server::RunningGateway {
    let path = dir.join("gateway.toml");
    let mut config =
        ishare_gateway::config::load(&path).unwrap_or_else(|e| panic!("gateway config: {e}"));
    // Many gateways run one after another in this process: pingora's no-steal runtime finds its
    // handles by thread ids that are recycled, so a later one would take over a stopped one's
    // (cloudflare/pingora#981) and its connections would be reset. The binary runs its own
    // configuration's runtime.
    config.server.work_stealing = true;
    let built =
        ishare_gateway::gateway::server::build(config, path, None, false).expect("gateway builds");
    ishare_gateway::gateway::server::RunningGateway::start(built)
}

/// Wait (bounded) until a gateway's admin listener says ready and its plain listener answers.
pub async fn wait_ready(admin: &str, plain: &str) {
    let probe = reqwest::Client::new();
    let mut said = String::new();
    for _ in 0..100 {
        if let Ok(r) = probe.get(format!("{admin}/ready")).send().await {
            if r.status() == 200
                && probe
                    .get(format!("{plain}/capabilities"))
                    .send()
                    .await
                    .is_ok()
            {
                return;
            }
            said = r.text().await.unwrap_or_default();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the gateway did not become ready: {said}");
}

/// A gateway.toml for the testbed; `extra` is appended (more upstreams, registries, settings).
pub fn gateway_toml(bed: &Bed, ports: &Ports, extra: &str) -> String {
    let data = bed.keys.data_dir.display().to_string();
    let echo = bed
        .testbed
        .echo_url
        .trim_start_matches("http://")
        .to_string();
    format!(
        r#"
scheme = "iSHARE"
public_url = "https://127.0.0.1:{tls}"

[identity]
party_id = "{SP}"
key = "{data}/parties/{SP}.key.pem"
certificate_chain = "{data}/parties/{SP}.chain.pem"

[[listener]]
address = "127.0.0.1:{tls}"
[listener.tls]
certificate = "{data}/tls/server.chain.pem"
key = "{data}/tls/server.key.pem"

[[listener]]
address = "127.0.0.1:{plain}"

[scheme_owner]
url = "{so}"
party_id = "{SO}"
root_certificate = "{data}/ca.pem"

[outbound]
ca_file = "{data}/ca.pem"

[[upstream]]
name = "echo"
addresses = ["{echo}"]

[admin]
address = "127.0.0.1:{admin}"

[rules]
directory = "policies"

[server]
threads = 1
grace_period = "0s"
graceful_shutdown_timeout = "1s"
{extra}
"#,
        tls = ports.tls,
        plain = ports.plain,
        admin = ports.admin,
        so = bed.scheme_owner_url(),
    )
}

impl Env {
    /// Start the testbed and a gateway with these rules (policies/rules.toml) and extra config
    /// (made knowing where the testbed runs).
    pub async fn start(binary: &str, rules: &str, extra: impl FnOnce(&Bed) -> String) -> Env {
        let bed = Bed::start(binary).await;
        let (dir, ports) = gateway_dir(&bed, binary, rules, &extra(&bed), |t| t);
        Env::launch(bed, dir, &ports).await
    }

    /// The gateway of `dir` (as `gateway_dir` makes it) in front of `bed`, ready.
    pub async fn launch(bed: Bed, dir: PathBuf, ports: &Ports) -> Env {
        let env = Env {
            url: format!("https://127.0.0.1:{}", ports.tls),
            plain: format!("http://127.0.0.1:{}", ports.plain),
            admin: format!("http://127.0.0.1:{}", ports.admin),
            gateway: Some(launch(&dir)),
            bed,
            dir,
        };
        env.wait_ready().await;
        env
    }

    pub fn config_path(&self) -> PathBuf {
        self.dir.join("gateway.toml")
    }

    /// Wait (bounded) until the gateway accepts connections and /ready says so.
    pub async fn wait_ready(&self) {
        wait_ready(&self.admin, &self.plain).await
    }

    pub fn state(&self) -> &std::sync::Arc<ishare_gateway::gateway::snapshot::GatewayState> {
        &self.gateway.as_ref().unwrap().state
    }

    /// GET `path` of the gateway with a bearer token and `headers`: the status and the JSON.
    pub async fn get(
        &self,
        path: &str,
        token: &str,
        headers: &[(&str, &str)],
    ) -> (u16, serde_json::Value) {
        let mut req = self
            .bed
            .http
            .get(format!("{}{path}", self.url))
            .bearer_auth(token);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        status_json(req.send().await.unwrap()).await
    }

    /// An access token of the gateway for `client`.
    pub async fn token(&self, client: &str) -> String {
        let resp = self.token_response(&self.bed.identity(client), None).await;
        assert_eq!(resp.status(), 200, "token for {client} at the gateway");
        resp.json::<serde_json::Value>().await.unwrap()["access_token"]
            .as_str()
            .unwrap()
            .to_string()
    }

    pub async fn token_response(
        &self,
        identity: &SigningIdentity,
        assertion: Option<String>,
    ) -> reqwest::Response {
        let us = self
            .state()
            .current
            .load()
            .config
            .identity
            .party_id
            .to_string();
        request_token(
            &self.bed.http,
            &self.url,
            token_form(identity, &us, assertion),
        )
        .await
    }

    /// The metrics text of the admin listener.
    pub async fn metrics(&self) -> String {
        reqwest::get(format!("{}/metrics", self.admin))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    pub async fn stop(mut self) {
        if let Some(g) = self.gateway.take() {
            tokio::task::spawn_blocking(move || g.stop()).await.unwrap();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
        self.bed.stop().await;
    }
}

/// The value of a counter line `name{labels} value` in metrics text (0 when absent).
pub fn metric(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with('{'))
        .filter(|l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Sign any header and claims with a key, so that each defect of an assertion can be made: with
/// the header's `alg` when it is RS384 or RS512, else RS256.
pub fn forge(header: &serde_json::Value, claims: &serde_json::Value, key_pem: &str) -> String {
    use base64::Engine;
    use jsonwebtoken::Algorithm;
    let b64 = |v: &serde_json::Value| {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(serde_json::to_vec(v).unwrap())
    };
    let input = format!("{}.{}", b64(header), b64(claims));
    let key = jsonwebtoken::EncodingKey::from_rsa_pem(key_pem.as_bytes()).unwrap();
    let alg = match header["alg"].as_str() {
        Some("RS384") => Algorithm::RS384,
        Some("RS512") => Algorithm::RS512,
        _ => Algorithm::RS256,
    };
    let sig = jsonwebtoken::crypto::sign(input.as_bytes(), &key, alg).unwrap();
    format!("{input}.{sig}")
}

/// A token of `creds` over this exact payload text (a member named twice, a number as written),
/// with the header of a scheme JWT (RS256, its x5c).
pub fn sign_text(creds: &PartyCredentials, payload: &str) -> String {
    use base64::Engine;
    let (header, _) = assertion_parts(creds, "");
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let input = format!(
        "{}.{}",
        b64.encode(serde_json::to_vec(&header).unwrap()),
        b64.encode(payload)
    );
    let key = jsonwebtoken::EncodingKey::from_rsa_pem(creds.key_pem.as_bytes()).unwrap();
    let sig =
        jsonwebtoken::crypto::sign(input.as_bytes(), &key, jsonwebtoken::Algorithm::RS256).unwrap();
    format!("{input}.{sig}")
}

/// The header and claims of a good client assertion of `creds` for `audience`.
pub fn assertion_parts(
    creds: &PartyCredentials,
    audience: &str,
) -> (serde_json::Value, serde_json::Value) {
    use base64::Engine;
    let x5c: Vec<String> = creds
        .chain_der
        .iter()
        .map(|d| base64::engine::general_purpose::STANDARD.encode(d))
        .collect();
    let now = ishare_gateway::scheme::Timestamp::now().secs();
    (
        serde_json::json!({"alg": "RS256", "typ": "JWT", "x5c": x5c}),
        serde_json::json!({
            "iss": creds.party_id, "sub": creds.party_id, "aud": audience,
            "jti": uuid::Uuid::new_v4().to_string(), "iat": now, "exp": now + 30
        }),
    )
}

/// Send `request` as it is (bytes, over plain TCP) to `base` (`http://host:port`); the whole answer.
pub async fn raw_request(base: &str, request: &[u8]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(request).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer)).await;
    String::from_utf8_lossy(&answer).to_string()
}

/// The JSON body of a raw HTTP/1.1 answer.
pub fn raw_body(answer: &str) -> serde_json::Value {
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    serde_json::from_str(body).unwrap_or(serde_json::Value::Null)
}

/// An HTTP/2 client (by ALPN) trusting the testbed's CA.
pub fn h2_client(ca_file: &Path) -> reqwest::Client {
    let pem = std::fs::read(ca_file).unwrap();
    reqwest::Client::builder()
        .tls_certs_only(reqwest::Certificate::from_pem_bundle(&pem).unwrap())
        .http2_prior_knowledge()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

/// conf/testbed.toml with every port free and its key material in `dir`/data, as
/// `dir`/testbed.toml, and conf/gateway.toml and conf/egress.toml pointed at it as
/// `dir`/gateway.toml and `dir`/egress.toml: what `make demo` and `make cluster` run, elsewhere.
pub fn shipped_on_free_ports(dir: &Path) {
    shipped_scheme_on_free_ports(dir, &SHIPPED_1_9, &["8443", "8080", "9901"]);
}

/// The shipped 3.0 testbed and gateway (conf/testbed-3.0.toml, conf/gateway-3.0.toml) as
/// `testbed-3.0.toml` and `gateway-3.0.toml` in `dir`, as `shipped_on_free_ports` does.
pub fn shipped_3_0_on_free_ports(dir: &Path) {
    shipped_scheme_on_free_ports(dir, &SHIPPED_3_0, &["8444", "9902"]);
}

/// The shipped files of a scheme: its testbed and gateway configs, its data directory (and where
/// in `dir` it goes), rules directory and the testbed's policies.
struct Shipped {
    testbed: &'static str,
    gateway: &'static str,
    data: &'static str,
    data_at: &'static str,
    rules: &'static str,
    policies: &'static str,
    /// The consumer's side in front of the gateway, if the scheme ships one.
    egress: Option<&'static str>,
}

const SHIPPED_1_9: Shipped = Shipped {
    testbed: "testbed.toml",
    gateway: "gateway.toml",
    data: "testbed",
    data_at: "data",
    rules: "policies",
    policies: "testbed-policies.json",
    egress: Some("egress.toml"),
};

const SHIPPED_3_0: Shipped = Shipped {
    testbed: "testbed-3.0.toml",
    gateway: "gateway-3.0.toml",
    data: "testbed-3.0",
    data_at: "data-3.0",
    rules: "policies-3.0",
    policies: "testbed-policies-3.0.json",
    egress: None,
};

fn shipped_scheme_on_free_ports(dir: &Path, shipped: &Shipped, own_ports: &[&str]) {
    let data = dir.join(shipped.data_at).display().to_string();
    let data_dir = format!("../data/{}", shipped.data);
    let rules_dir = format!("../{}", shipped.rules);
    // Each address of the shipped files, and the free one it moves to.
    let mut moved: Vec<(String, String)> = Vec::new();
    let mut testbed = Vec::new();
    for line in std::fs::read_to_string(repo().join("conf").join(shipped.testbed))
        .unwrap()
        .lines()
    {
        match line.strip_prefix("port = ") {
            Some(port) => {
                let free = free_port();
                moved.push((format!("127.0.0.1:{port}"), format!("127.0.0.1:{free}")));
                testbed.push(format!("port = {free}"));
            }
            None => testbed.push(line.to_string()),
        }
    }
    // The gateway's own listeners and admin address, and the consumer's side's.
    for port in own_ports
        .iter()
        .chain(shipped.egress.iter().flat_map(|_| &["8181", "9911"]))
    {
        moved.push((
            format!("127.0.0.1:{port}"),
            format!("127.0.0.1:{}", free_port()),
        ));
    }
    let moved_to_free = |text: String| {
        moved
            .iter()
            .fold(text, |text, (from, to)| text.replace(from, to))
            .replace(&format!("{data_dir}/"), &format!("{data}/"))
    };
    let gateway =
        moved_to_free(std::fs::read_to_string(repo().join("conf").join(shipped.gateway)).unwrap())
            .replace(
                &format!("\"{rules_dir}\""),
                &format!("{:?}", repo().join(shipped.rules).display().to_string()),
            );
    let testbed = testbed
        .join("\n")
        .replace(&format!("{data_dir:?}"), &format!("{data:?}"))
        .replace(
            &format!("{:?}", shipped.policies),
            &format!(
                "{:?}",
                repo()
                    .join("conf")
                    .join(shipped.policies)
                    .display()
                    .to_string()
            ),
        );
    std::fs::write(dir.join(shipped.testbed), testbed).unwrap();
    std::fs::write(dir.join(shipped.gateway), gateway).unwrap();
    if let Some(egress) = shipped.egress {
        let text = std::fs::read_to_string(repo().join("conf").join(egress)).unwrap();
        std::fs::write(dir.join(egress), moved_to_free(text)).unwrap();
    }
}

/// A real redis-server on a free loopback port, for as long as the value lives.
pub struct RedisServer {
    pub port: u16,
    pub process: process::ChildProcess,
}

impl RedisServer {
    pub async fn start() -> RedisServer {
        Self::start_on(free_port()).await
    }

    pub async fn start_on(port: u16) -> RedisServer {
        Self::start_with(port, &["--port", &port.to_string()]).await
    }

    /// redis-server with these arguments (its `--port` or `--tls-port` being `port`).
    pub async fn start_with(port: u16, args: &[&str]) -> RedisServer {
        // A directory of its own: a replica's first sync writes dump.rdb there, and a server
        // started where one lies would load it.
        let dir = scratch_dir("redis");
        let mut command = std::process::Command::new("redis-server");
        command
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--dir", dir.to_str().unwrap()])
            .args(args);
        let mut server = RedisServer {
            port,
            process: process::ChildProcess::spawn("redis-server", command),
        };
        let up = process::eventually(Duration::from_secs(10), || async {
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
        })
        .await;
        if !up || server.process.exited().is_some() {
            panic!(
                "redis-server did not start on port {port} (the README's test command installs it)\n{}",
                server.process.tail()
            );
        }
        server
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// Kill the server at once (as a crash would).
    pub fn kill(mut self) -> u16 {
        self.process.kill();
        self.port
    }
}

/// A real Redis Cluster on loopback, for as long as the value lives: three masters and a replica
/// of each, a failover a second after a master stops answering, the default user's password and
/// an ACL user `gateway` with the same password on every node (ACLs are per node), allowed the
/// keys and channels of `party` and the commands the book lists, no more.
pub struct RedisCluster {
    /// Each node, by its port; None once killed.
    pub nodes: Vec<Option<RedisServer>>,
    pub password: String,
    /// The CA of the nodes' certificates, when they speak TLS only (to clients, to replicas and on
    /// the cluster's bus, where each node's certificate is its client certificate too).
    pub ca: Option<String>,
}

/// A TLS server certificate, its key and the CA that issued it: files.
pub struct TlsFiles {
    pub certificate: String,
    pub key: String,
    pub ca: String,
}

impl RedisCluster {
    pub async fn start(password: &str, party: &str) -> RedisCluster {
        Self::start_with_tls(password, party, None).await
    }

    /// `start`, every node speaking TLS only with `tls`'s certificate when given.
    pub async fn start_with_tls(
        password: &str,
        party: &str,
        tls: Option<&TlsFiles>,
    ) -> RedisCluster {
        let mut nodes = Vec::new();
        for _ in 0..6 {
            let (port, bus) = (free_port(), free_port());
            let (p, b) = (port.to_string(), bus.to_string());
            let mut args = match tls {
                None => vec!["--port", &p],
                Some(t) => vec![
                    "--port",
                    "0",
                    "--tls-port",
                    &p,
                    "--tls-cluster",
                    "yes",
                    "--tls-replication",
                    "yes",
                    "--tls-cert-file",
                    &t.certificate,
                    "--tls-key-file",
                    &t.key,
                    "--tls-ca-cert-file",
                    &t.ca,
                    "--tls-auth-clients",
                    "no",
                ],
            };
            args.extend([
                "--cluster-enabled",
                "yes",
                "--cluster-port",
                &b,
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                "1000",
                "--requirepass",
                password,
                "--masterauth",
                password,
                "--repl-diskless-sync-delay",
                "0",
            ]);
            nodes.push(Some(RedisServer::start_with(port, &args).await));
        }
        let addresses: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.as_ref().unwrap().port))
            .collect();
        let tls_args = match tls {
            None => vec![],
            Some(t) => vec!["--tls", "--cacert", t.ca.as_str()],
        };
        let created = std::process::Command::new("redis-cli")
            .args(&tls_args)
            .args(["-a", password, "--no-auth-warning", "--cluster", "create"])
            .args(&addresses)
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .output()
            .unwrap();
        assert!(
            created.status.success(),
            "redis-cli --cluster create: {}",
            printed(&created)
        );
        let cluster = RedisCluster {
            nodes,
            password: password.to_string(),
            ca: tls.map(|t| t.ca.clone()),
        };
        for port in cluster.ports() {
            let acl = [
                "ACL",
                "SETUSER",
                "gateway",
                "on",
                &format!(">{password}"),
                &format!("~{{{party}}}:*"),
                &format!("&{{{party}}}:*"),
                "+set",
                "+get",
                "+getdel",
                "+del",
                "+exists",
                "+eval",
                "+publish",
                "+subscribe",
                "+ping",
                "+cluster|slots",
            ];
            cluster.command(port, &acl).await.unwrap();
        }
        // Up, and every replica in sync with its master (a replica that never was cannot take over).
        let ok = process::eventually(Duration::from_secs(30), || async {
            let mut all = true;
            for port in cluster.ports() {
                all &= cluster
                    .command(port, &["CLUSTER", "INFO"])
                    .await
                    .is_ok_and(|info| info.contains("cluster_state:ok"));
                all &= cluster
                    .command(port, &["INFO", "replication"])
                    .await
                    .is_ok_and(|info| {
                        info.contains("role:master") || info.contains("master_link_status:up")
                    });
            }
            all
        })
        .await;
        assert!(ok, "the cluster did not come up");
        cluster
    }

    /// The ports of the nodes still running.
    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().flatten().map(|n| n.port).collect()
    }

    /// `["127.0.0.1:PORT", …]` of the nodes still running, for `[replay] cluster`.
    pub fn toml_nodes(&self) -> String {
        let nodes: Vec<String> = self
            .ports()
            .iter()
            .map(|p| format!("\"127.0.0.1:{p}\""))
            .collect();
        format!("[{}]", nodes.join(", "))
    }

    /// A command at one node, its answer as text.
    pub async fn command(&self, port: u16, args: &[&str]) -> Result<String, String> {
        let client = match &self.ca {
            None => redis::Client::open(format!("redis://:{}@127.0.0.1:{port}/0", self.password)),
            Some(ca) => redis::Client::build_with_tls(
                format!("rediss://:{}@127.0.0.1:{port}/0", self.password),
                redis::TlsCertificates {
                    client_tls: None,
                    root_cert: Some(std::fs::read(ca).map_err(|e| e.to_string())?),
                },
            ),
        }
        .map_err(|e| e.to_string())?;
        let mut c = client
            .get_multiplexed_async_connection()
            .await
            .map_err(|e| e.to_string())?;
        let mut command = redis::cmd(args[0]);
        for a in &args[1..] {
            command.arg(*a);
        }
        let value: redis::Value = command
            .query_async(&mut c)
            .await
            .map_err(|e| e.to_string())?;
        Ok(match value {
            redis::Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
            redis::Value::VerbatimString { text, .. } => text,
            redis::Value::Int(i) => i.to_string(),
            other => format!("{other:?}"),
        })
    }

    /// The port of the master that holds `key`'s slot now.
    pub async fn master_of(&self, key: &str) -> u16 {
        match self.master_now(key).await {
            Ok(port) => port,
            Err(nodes) => panic!("no master holds the slot of {key}:\n{nodes}"),
        }
    }

    /// The port of the master that holds `key`'s slot, as a running node sees the cluster now
    /// (after a failover, once the news has reached it); else what it sees.
    pub async fn master_now(&self, key: &str) -> Result<u16, String> {
        let port = self.ports()[0];
        let slot: u16 = self
            .command(port, &["CLUSTER", "KEYSLOT", key])
            .await?
            .parse()
            .map_err(|e| format!("{e}"))?;
        let nodes = self.command(port, &["CLUSTER", "NODES"]).await?;
        nodes
            .lines()
            .filter(|l| l.contains("master") && !l.contains("fail"))
            .find_map(|l| {
                let fields: Vec<&str> = l.split(' ').collect();
                let holds = fields[8..].iter().any(|range| {
                    let (from, to) = range.split_once('-').unwrap_or((range, range));
                    matches!((from.parse::<u16>(), to.parse::<u16>()), (Ok(f), Ok(t)) if (f..=t).contains(&slot))
                });
                let port = fields[1].split(['@', ':']).nth(1)?.parse().ok()?;
                holds.then_some(port)
            })
            .ok_or(nodes)
    }

    /// Kill the node on `port` at once (as a crash would).
    pub fn kill(&mut self, port: u16) {
        let node = self
            .nodes
            .iter_mut()
            .find(|n| n.as_ref().is_some_and(|n| n.port == port));
        node.and_then(Option::take).expect("a running node").kill();
    }
}

/// The mask of `subject` reading container `id` (every attribute) of the data owner, for `sps`.
pub fn read_request(subject: &str, id: &str, sps: &[&str]) -> AccessRequest {
    AccessRequest {
        policy_issuer: OWNER.into(),
        access_subject: subject.into(),
        service_providers: sps.iter().map(|s| s.to_string()).collect(),
        resource_type: "CONTAINER".into(),
        identifiers: vec![id.into()],
        attributes: vec!["*".into()],
        actions: vec!["iSHARE.READ".into()],
        ..AccessRequest::default()
    }
}

/// GET `url` with a bearer `token`: the status, headers and JSON body of the answer.
pub async fn get_bearing(
    http: &reqwest::Client,
    url: &str,
    token: &str,
) -> (u16, reqwest::header::HeaderMap, serde_json::Value) {
    let resp = http.get(url).bearer_auth(token).send().await.unwrap();
    let headers = resp.headers().clone();
    let (status, body) = status_json(resp).await;
    (status, headers, body)
}

/// Assert that an answer is the refusal `(status, reason)`, showing its body when it is not.
#[track_caller]
pub fn assert_refused(status: u16, body: &serde_json::Value, (expected, reason): (u16, &str)) {
    assert_eq!(
        (status, body["reason"].as_str()),
        (expected, Some(reason)),
        "{body}"
    );
}

/// The line of the decision log at `log` of decision `id`, once it is written (bounded wait).
pub async fn decision_log_line(log: &Path, id: &str) -> serde_json::Value {
    let read = || -> Option<serde_json::Value> {
        std::fs::read_to_string(log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|l| l["decision_id"] == id)
    };
    let found = process::eventually(Duration::from_secs(5), || async { read().is_some() }).await;
    assert!(found, "no line for {id} in {}", log.display());
    read().unwrap()
}
