//! Starting the testbed: its key material, a port for each serving participant and the echo
//! backend, what the participants share, and a server each; the running testbed, and stopping it.

use super::config::{ConfigError, PartyConfig, Serve, TestbedConfig};
use super::echo;
use super::identity_provider;
use super::keys::{self, KeysError, TestbedKeys};
use super::participant::{self, Participant, Shared};
use super::party_register::{party_record, Register, Scheme, Standing};
use super::pki::PartyCredentials;
use super::policy_admin;
use super::policy_store::{load_policies, PolicyFileError, PolicyStore};
use super::registry;
use super::scheme_owner;
use super::server;
use super::service_provider;
use super::{keyrock, keyrock_ways};
use crate::access_token::AccessTokens;
use crate::scheme::evidence_token::Readers;
use crate::scheme::jwt::{AlgorithmPolicy, SigningIdentity};
use crate::scheme::party::PartyId;
use crate::scheme::version::SchemeVersion;
use axum::Router;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

#[derive(Debug, thiserror::Error)]
pub enum TestbedError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("key material: {0}")]
    Keys(#[from] KeysError),
    #[error("cannot listen on {addr}: {detail}")]
    Bind { addr: SocketAddr, detail: String },
    #[error(transparent)]
    Policies(#[from] PolicyFileError),
    #[error("TLS: {0}")]
    Tls(#[from] crate::tls::TlsError),
    #[error("party {0}: {1}")]
    Party(String, String),
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
    /// The version of the scheme its participants speak.
    pub scheme_version: SchemeVersion,
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

/// A listener on `ip` and `port`, and the address it got (`port` 0 picks one).
async fn bind(ip: IpAddr, port: u16) -> Result<(TcpListener, SocketAddr), TestbedError> {
    let addr = SocketAddr::new(ip, port);
    let failed = |e: std::io::Error| cannot_listen(addr, &e);
    let listener = TcpListener::bind(addr).await.map_err(failed)?;
    let local = listener.local_addr().map_err(failed)?;
    Ok((listener, local))
}

/// Why `addr` cannot be listened on; when another process holds it, what to do.
pub fn cannot_listen(addr: SocketAddr, e: &std::io::Error) -> TestbedError {
    let detail = match e.kind() {
        std::io::ErrorKind::AddrInUse => format!(
            "{e}: is a demo, a testbed or a gateway running already? Stop it (Ctrl-C where it \
             runs), or give this one other ports in its configuration"
        ),
        _ => e.to_string(),
    };
    TestbedError::Bind { addr, detail }
}

/// Whether every address the testbed of `config` listens on is free: checked before anything
/// starts, so that one in use is said at once.
pub fn ports_free(config: &TestbedConfig) -> Result<(), TestbedError> {
    let ports = config
        .parties
        .iter()
        .filter(|p| p.serve.is_some())
        .map(|p| p.port)
        .chain([config.echo.port]);
    free(ports.map(|port| SocketAddr::new(config.listen, port)))
}

/// Whether each of `addresses` can be listened on now (port 0 always can).
pub fn free(addresses: impl IntoIterator<Item = SocketAddr>) -> Result<(), TestbedError> {
    for addr in addresses.into_iter().filter(|a| a.port() != 0) {
        std::net::TcpListener::bind(addr).map_err(|e| cannot_listen(addr, &e))?;
    }
    Ok(())
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

/// What all participants share: the scheme owner's register of every configured party, every
/// party's signing identity, and the policies of the policies file.
fn shared(
    config: &TestbedConfig,
    keys: &TestbedKeys,
    urls: &BTreeMap<String, String>,
) -> Result<Shared, TestbedError> {
    let names: BTreeMap<String, String> = config
        .parties
        .iter()
        .map(|p| (p.id.clone(), p.name.clone()))
        .collect();
    let records = config
        .parties
        .iter()
        .map(|p| party_record(p, &keys.parties[&p.id], urls, &names))
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
    Ok(Shared {
        scheme: config.scheme.clone(),
        dataspaces: config.dataspaces.clone(),
        register: Register::new(
            records,
            (
                config
                    .parties
                    .iter()
                    .map(|p| (p.id.clone(), p.also_known_as.clone()))
                    .collect(),
                config.careless_aliases,
            ),
            config
                .parties
                .iter()
                .map(|p| {
                    let standing = Standing {
                        dataspaces: p.dataspaces.clone(),
                        roles: p.dataspace_roles.clone(),
                    };
                    (p.id.clone(), standing)
                })
                .collect(),
            Scheme {
                version: config.scheme_version,
                framework: config.scheme.clone(),
                registrar: config.scheme_owner().id.clone(),
            },
            trusted,
        ),
        identities,
        policies: PolicyStore::new(load_policies(
            config.policies.as_ref(),
            config.scheme_version,
        )?),
        leeway_secs: 5.0,
        algorithms: AlgorithmPolicy::default(),
        signers: Arc::new(Readers {
            scheme_version: config.scheme_version,
            ..Readers::default()
        }),
    })
}

/// A serving party as a participant: its identity, the access tokens it issues, and its address.
fn participant(
    party: &PartyConfig,
    serve: Serve,
    credentials: &PartyCredentials,
    url: &str,
    shared: &Arc<Shared>,
) -> Result<Participant, TestbedError> {
    let party_id = PartyId::parse(&party.id)
        .map_err(|e| TestbedError::Party(party.id.clone(), e.to_string()))?;
    Ok(Participant {
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
        strict: party.strict || party.keyrock,
        keyrock: party.keyrock.then(|| {
            keyrock_ways::Known::new(Duration::from_secs(participant::ACCESS_TOKEN_LIFETIME))
        }),
        base_url: url.to_string(),
        jti: Default::default(),
        shared: shared.clone(),
        stats: Default::default(),
    })
}

/// The routes of the dummy server a participant runs; registries and entitled parties get the
/// policy admin page too where the configuration has one.
fn router(
    config: &TestbedConfig,
    party: &PartyConfig,
    participant: Arc<Participant>,
    credentials: &PartyCredentials,
) -> Result<Router, TestbedError> {
    Ok(match participant.serve {
        Serve::SchemeOwner => scheme_owner::router(participant),
        Serve::AuthorisationRegistry if party.keyrock => keyrock::router(participant),
        Serve::AuthorisationRegistry | Serve::EntitledParty => {
            let router = registry::router(participant.clone());
            match &config.admin {
                Some(admin) => router.merge(policy_admin::routes(participant, admin.clone())),
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
    })
}

impl Testbed {
    /// Generate or load the key material, bind every participant's port, and start serving.
    pub async fn start(config: &TestbedConfig) -> Result<Testbed, TestbedError> {
        crate::tls::ensure_crypto_provider();
        let keys = prepare(config)?;
        let tls = Arc::new(crate::tls::server_config(
            keys.tls.chain_pem.as_bytes(),
            keys.tls.key_pem.as_bytes(),
        )?);

        let mut listeners = Vec::new();
        let mut urls = BTreeMap::new();
        for party in config.parties.iter().filter(|p| p.serve.is_some()) {
            let (listener, addr) = bind(config.listen, party.port).await?;
            urls.insert(party.id.clone(), url_of(addr, true));
            listeners.push((party, listener));
        }
        let (echo_listener, echo_addr) = bind(config.listen, config.echo.port).await?;
        let shared = Arc::new(shared(config, &keys, &urls)?);

        let (shutdown, watch) = watch::channel(false);
        let mut tasks = JoinSet::new();
        let mut running = Vec::new();
        for (party, listener) in listeners {
            let serve = party.serve.expect("only serving parties are bound");
            let credentials = &keys.parties[&party.id];
            let url = &urls[&party.id];
            let participant = participant(party, serve, credentials, url, &shared)?;
            let router = router(config, party, Arc::new(participant), credentials)?;
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
                url: url.clone(),
            });
        }
        tasks.spawn(server::serve(echo_listener, None, echo::router(), watch));
        Ok(Testbed {
            scheme: config.scheme.clone(),
            scheme_version: config.scheme_version,
            participants: running,
            echo_url: url_of(echo_addr, false),
            keys,
            shutdown,
            tasks,
        })
    }

    pub fn version(&self) -> SchemeVersion {
        self.scheme_version
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
