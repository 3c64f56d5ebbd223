//! The testbed: dummy participants of the scheme on loopback — a scheme owner, an authorisation
//! registry, an entitled party, service providers, an identity provider and an echo backend — that follow the
//! specification, for the demo, the tests, and integrators.

pub mod config;
pub mod echo;
pub mod identity_provider;
pub mod keys;
pub mod lockout;
pub mod participant;
pub mod party_register;
pub mod person;
pub mod pki;
pub mod policy_admin;
pub mod policy_store;
pub mod registry;
pub mod scheme_owner;
pub mod server;
pub mod service_provider;

use crate::access_token::AccessTokens;
use crate::scheme::evidence::DelegationEvidence;
use crate::scheme::jwt::{AlgorithmPolicy, SigningIdentity};
use crate::scheme::models::{
    Adherence, AuthRegistryRef, Certification, PartyCertificate, PartyInfo, SchemeTime,
};
use crate::scheme::party::PartyId;
use crate::scheme::trust::fingerprint;
use crate::testbed::pki::PartyCredentials;
use axum::routing::any;
use axum::Router;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use config::{PartyConfig, Serve, TestbedConfig};
use keys::TestbedKeys;
use participant::{Participant, Shared};
use policy_store::PolicyStore;
use serde_json::Map;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

pub use config::ConfigError;

#[derive(Debug, thiserror::Error)]
pub enum TestbedError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("key material: {0}")]
    Keys(#[from] keys::KeysError),
    #[error("cannot listen on {addr}: {detail}")]
    Bind { addr: SocketAddr, detail: String },
    #[error("policies file {path}: {detail}")]
    Policies { path: String, detail: String },
    #[error("TLS: {0}")]
    Tls(#[from] crate::tls::TlsError),
    #[error("party {0}: {1}")]
    Party(String, String),
}

/// The routes every participant serves.
fn common_routes() -> Router<Arc<Participant>> {
    Router::new()
        .route("/capabilities", any(participant::capabilities))
        .route("/connect/token", any(participant::token))
        .route("/oauth2.0/token", any(participant::token))
        .route("/token", any(participant::token))
        .route("/me", any(participant::me))
        .route("/testing/stats", axum::routing::get(participant::stats))
        .fallback(participant::not_found)
}

/// A participant that is up, and where.
#[derive(Clone, Debug)]
pub struct RunningParticipant {
    pub party_id: String,
    pub name: String,
    pub serve: Serve,
    pub url: String,
}

/// The running testbed. Stop it with [`Testbed::stop`]; dropping it stops it too.
pub struct Testbed {
    pub scheme: String,
    pub participants: Vec<RunningParticipant>,
    pub echo_url: String,
    pub keys: TestbedKeys,
    shutdown: watch::Sender<bool>,
    tasks: JoinSet<()>,
}

fn url_of(addr: SocketAddr, tls: bool) -> String {
    let scheme = if tls { "https" } else { "http" };
    match addr.ip() {
        IpAddr::V6(ip) => format!("{scheme}://[{ip}]:{}", addr.port()),
        IpAddr::V4(ip) => format!("{scheme}://{ip}:{}", addr.port()),
    }
}

async fn bind(ip: IpAddr, port: u16) -> Result<TcpListener, TestbedError> {
    let addr = SocketAddr::new(ip, port);
    TcpListener::bind(addr)
        .await
        .map_err(|e| TestbedError::Bind {
            addr,
            detail: e.to_string(),
        })
}

pub fn load_policies(path: Option<&PathBuf>) -> Result<Vec<DelegationEvidence>, TestbedError> {
    let Some(path) = path else {
        return Ok(Vec::new());
    };
    let err = |detail: String| TestbedError::Policies {
        path: path.display().to_string(),
        detail,
    };
    let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
    let policies: Vec<DelegationEvidence> =
        serde_json::from_str(&text).map_err(|e| err(e.to_string()))?;
    for (i, p) in policies.iter().enumerate() {
        registry::check_policy_shape(&p.policy_issuer, &p.target.access_subject, &p.policy_sets)
            .map_err(|e| err(format!("policy {i}: {e}")))?;
    }
    Ok(policies)
}

fn date(value: &Option<String>, default: &str) -> Option<SchemeTime> {
    SchemeTime::parse(value.as_deref().unwrap_or(default))
}

fn party_record(
    party: &PartyConfig,
    credentials: &PartyCredentials,
    urls: &BTreeMap<String, String>,
    names: &BTreeMap<String, String>,
) -> PartyInfo {
    let start = date(&party.start_date, "2020-01-01T00:00:00Z");
    let end = date(&party.end_date, "2099-12-31T00:00:00Z");
    let leaf = credentials.leaf_der();
    PartyInfo {
        party_id: party.id.clone(),
        party_name: party.name.clone(),
        adherence: Adherence {
            status: party.status.clone(),
            start_date: start.clone(),
            end_date: end.clone(),
            extra: Map::new(),
        },
        certifications: party
            .roles
            .iter()
            .map(|role| Certification {
                role: role.clone(),
                start_date: start.clone(),
                end_date: end.clone(),
                extra: Map::from_iter([("loa".to_string(), 3.into())]),
            })
            .collect(),
        capability_url: urls.get(&party.id).map(|u| format!("{u}/capabilities")),
        certificates: vec![PartyCertificate {
            subject_name: Some(party_register::subject_name(leaf)),
            certificate_type: Some("eSEAL".into()),
            enabled_from: start.clone(),
            x5c: Some(STANDARD.encode(leaf)),
            x5t_s256: Some(fingerprint(leaf)),
            extra: Map::new(),
        }],
        auth_registries: party
            .registries
            .iter()
            .map(|id| AuthRegistryRef {
                id: id.clone(),
                name: names.get(id).cloned().unwrap_or_default(),
                url: urls.get(id).cloned().unwrap_or_default(),
                dataspace_id: None,
                dataspace_name: None,
            })
            .collect(),
        authregistery: Vec::new(),
        extra: Map::new(),
    }
}

/// The TLS names of the testbed's server certificate.
fn tls_names(config: &TestbedConfig) -> Vec<String> {
    vec![
        "localhost".into(),
        "127.0.0.1".into(),
        "::1".into(),
        config.listen.to_string(),
    ]
}

/// Generate the key material of a testbed that is missing, and load the rest.
pub fn prepare(config: &TestbedConfig) -> Result<TestbedKeys, TestbedError> {
    let parties: Vec<(String, String)> = config
        .parties
        .iter()
        .map(|p| (p.id.clone(), p.name.clone()))
        .collect();
    let names = tls_names(config);
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    Ok(keys::load_or_generate(&config.data_dir, &parties, &names)?)
}

impl Testbed {
    /// Generate or load the key material, bind every participant's port, and start serving.
    pub async fn start(config: &TestbedConfig) -> Result<Testbed, TestbedError> {
        crate::tls::ensure_crypto_provider();
        let keys = prepare(config)?;
        let parties: Vec<(String, String)> = config
            .parties
            .iter()
            .map(|p| (p.id.clone(), p.name.clone()))
            .collect();
        let tls = Arc::new(crate::tls::server_config(
            keys.tls.chain_pem.as_bytes(),
            keys.tls.key_pem.as_bytes(),
        )?);

        let mut listeners = Vec::new();
        let mut urls = BTreeMap::new();
        for party in config.parties.iter().filter(|p| p.serve.is_some()) {
            let listener = bind(config.listen, party.port).await?;
            let addr = listener.local_addr().map_err(|e| TestbedError::Bind {
                addr: SocketAddr::new(config.listen, party.port),
                detail: e.to_string(),
            })?;
            urls.insert(party.id.clone(), url_of(addr, true));
            listeners.push((party, listener));
        }
        let echo_listener = bind(config.listen, config.echo.port).await?;
        let echo_addr = echo_listener.local_addr().map_err(|e| TestbedError::Bind {
            addr: SocketAddr::new(config.listen, config.echo.port),
            detail: e.to_string(),
        })?;

        let names: BTreeMap<String, String> = parties.iter().cloned().collect();
        let records = config
            .parties
            .iter()
            .map(|p| party_record(p, &keys.parties[&p.id], &urls, &names))
            .collect();
        let mut trusted = vec![keys.pki.trusted_list_entry()];
        trusted.extend(config.trusted_cas.iter().cloned());
        let identities = keys
            .parties
            .iter()
            .map(|(id, creds)| {
                creds
                    .credentials
                    .identity_for(id)
                    .map(|identity| (id.clone(), identity))
                    .map_err(|e| TestbedError::Party(id.clone(), e.to_string()))
            })
            .collect::<Result<BTreeMap<String, SigningIdentity>, _>>()?;
        let shared = Arc::new(Shared {
            scheme: config.scheme.clone(),
            register: party_register::Register::new(records, trusted),
            identities,
            policies: PolicyStore::new(load_policies(config.policies.as_ref())?),
            leeway_secs: 5.0,
            algorithms: AlgorithmPolicy::default(),
        });

        let (shutdown, watch) = watch::channel(false);
        let mut tasks = JoinSet::new();
        let mut running = Vec::new();
        for (party, listener) in listeners {
            let serve = party.serve.expect("only serving parties are bound");
            let party_id = PartyId::parse(&party.id)
                .map_err(|e| TestbedError::Party(party.id.clone(), e.to_string()))?;
            let credentials = &keys.parties[&party.id];
            let participant = Arc::new(Participant {
                tokens: AccessTokens::new(
                    &party_id,
                    credentials.key_pem.as_bytes(),
                    participant::ACCESS_TOKEN_LIFETIME,
                    5,
                ),
                identity: shared.identities[&party.id].clone(),
                party_id,
                name: party.name.clone(),
                serve,
                base_url: urls[&party.id].clone(),
                jti: Default::default(),
                shared: shared.clone(),
                stats: Default::default(),
            });
            let router = match serve {
                Serve::SchemeOwner => scheme_owner::router(participant),
                Serve::AuthorisationRegistry | Serve::EntitledParty => {
                    let router = registry::router(participant.clone());
                    match &config.admin {
                        Some(admin) => {
                            router.merge(policy_admin::routes(participant, admin.clone()))
                        }
                        None => router,
                    }
                }
                Serve::ServiceProvider => service_provider::router(participant),
                Serve::IdentityProvider => identity_provider::router(
                    participant,
                    &credentials.key_pem,
                    config.users.clone(),
                    config.identity_provider.code_lifetime,
                )
                .map_err(|e| TestbedError::Party(party.id.clone(), e))?,
            };
            tasks.spawn(server::serve(
                listener,
                Some(tls.clone()),
                router,
                watch.clone(),
            ));
            running.push(RunningParticipant {
                party_id: party.id.clone(),
                name: party.name.clone(),
                serve,
                url: urls[&party.id].clone(),
            });
        }
        tasks.spawn(server::serve(echo_listener, None, echo::router(), watch));
        Ok(Testbed {
            scheme: config.scheme.clone(),
            participants: running,
            echo_url: url_of(echo_addr, false),
            keys,
            shutdown,
            tasks,
        })
    }

    pub fn url(&self, party_id: &str) -> Option<&str> {
        self.participants
            .iter()
            .find(|p| p.party_id == party_id)
            .map(|p| p.url.as_str())
    }

    /// The first participant serving as `serve`.
    pub fn serving(&self, serve: Serve) -> Option<&RunningParticipant> {
        self.participants.iter().find(|p| p.serve == serve)
    }

    pub fn credentials(&self, party_id: &str) -> Option<&PartyCredentials> {
        self.keys.parties.get(party_id)
    }

    pub fn identity(&self, party_id: &str) -> Option<SigningIdentity> {
        self.keys
            .parties
            .get(party_id)
            .map(PartyCredentials::signing_identity)
    }

    /// What runs where, for the terminal.
    pub fn summary(&self) -> String {
        let mut out = String::new();
        for p in &self.participants {
            out.push_str(&format!(
                "  {:<24} {:<22} {:<24} {}\n",
                format!("{:?}", p.serve),
                p.party_id,
                p.name,
                p.url
            ));
        }
        for (id, _) in self
            .keys
            .parties
            .iter()
            .filter(|(id, _)| self.url(id).is_none())
        {
            out.push_str(&format!("  {:<24} {:<22}\n", "(no server)", id));
        }
        out.push_str(&format!(
            "  {:<24} {:<22} {:<24} {}\n",
            "echo backend", "", "", self.echo_url
        ));
        out.push_str(&format!(
            "  trust: CA {} (root fingerprint {})\n",
            self.keys.ca_file.display(),
            self.keys.pki.root_fingerprint()
        ));
        out
    }

    /// Stop serving and wait for the servers to end.
    pub async fn stop(mut self) {
        let _ = self.shutdown.send(true);
        while self.tasks.join_next().await.is_some() {}
    }
}
