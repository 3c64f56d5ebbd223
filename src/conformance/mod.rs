//! The conformance checker: the scheme's admission tests, run against any participant from the
//! command line. Each case sends what the scheme's conformance tool sends and checks what comes
//! back: the status, and for answers that carry signed tokens their signature, chain, claims and
//! payload shape.

mod cases;
mod defects;
mod identity_provider;
mod probe;
mod registry;
pub mod report;
mod scheme_owner;
mod service_provider;
mod signed;

use crate::scheme::evidence::DelegationBody;
use crate::scheme::jwt::SigningIdentity;
use crate::scheme::trust::TrustedList;

/// The role the target is tested in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Role {
    ServiceProvider,
    AuthorisationRegistry,
    SchemeOwner,
    IdentityProvider,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::ServiceProvider => "service-provider",
            Role::AuthorisationRegistry => "authorisation-registry",
            Role::SchemeOwner => "scheme-owner",
            Role::IdentityProvider => "identity-provider",
        }
    }
}

/// The Permit and the Deny mask a registry is tested with.
#[derive(Clone, Debug)]
pub struct Masks {
    pub permit: DelegationBody,
    pub deny: DelegationBody,
}

/// The broker pattern at a service provider: the client calls `resource` for `consumer`, whose
/// client assertion it forwards in the `service_consumer_assertion` header.
pub struct Broker {
    /// A URL at the target that `consumer` may reach.
    pub resource: String,
    pub consumer: SigningIdentity,
    /// A party with the consumer's id whose certificate is issued under a root nobody trusts.
    pub foreign_consumer: SigningIdentity,
}

/// A person of an identity provider (test credentials).
#[derive(Clone, Debug)]
pub struct Person {
    pub username: String,
    pub password: String,
}

/// What a run needs: the target, who we are, and whom we may also act as.
pub struct Options {
    pub role: Role,
    /// The target's base URL.
    pub target: String,
    pub target_id: String,
    /// The client the target is tested by; for registries the access subject of the masks.
    pub client: SigningIdentity,
    /// A service provider named in the masks, which asks with the subject's assertion in
    /// previous_steps (registries only).
    pub service_provider: Option<SigningIdentity>,
    /// A party whose certificate chains to a trusted root but which the scheme owner does not know.
    pub unknown: Option<SigningIdentity>,
    /// A party the scheme owner knows but which is not active.
    pub inactive: Option<SigningIdentity>,
    /// A party with the client's id whose certificate is issued under a root nobody trusts; its key
    /// also makes the signatures that do not match an x5c.
    pub foreign: SigningIdentity,
    /// The roots the target's signed answers must chain to.
    pub trusted: TrustedList,
    pub masks: Option<Masks>,
    pub broker: Option<Broker>,
    /// An identity provider: a person to sign in as.
    pub person: Option<Person>,
    /// An identity provider: the redirect_uri of the request objects.
    pub redirect_uri: String,
    /// The scheme's name: the token scope.
    pub scheme: String,
    pub http: reqwest::Client,
}

/// How a case ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Pass,
    Fail,
    /// Not run: what it needs was not given.
    Skipped,
    /// Not run: a case it depends on failed, and that case counts the failure.
    NotTried,
}

/// One case: what the scheme expects, what the target answered, and why that passes or not.
#[derive(Clone, Debug)]
pub struct CaseResult {
    /// The endpoint: capabilities, token, delegation, parties …
    pub group: &'static str,
    pub name: String,
    pub expected: String,
    pub got: String,
    pub outcome: Outcome,
    pub reason: String,
}

/// A whole run.
#[derive(Clone, Debug)]
pub struct Report {
    pub role: Role,
    pub target: String,
    pub target_id: String,
    pub warnings: Vec<String>,
    pub cases: Vec<CaseResult>,
}

impl Report {
    pub fn failures(&self) -> usize {
        self.count(Outcome::Fail)
    }

    pub fn count(&self, outcome: Outcome) -> usize {
        self.cases.iter().filter(|c| c.outcome == outcome).count()
    }
}

/// Run every case of the role against the target.
pub async fn run(options: &Options) -> Report {
    let mut warnings = Vec::new();
    if options.target.starts_with("http://") {
        warnings.push(format!(
            "{} is plain HTTP: fine for local testing, never for a participant in the scheme",
            options.target
        ));
    }
    let mut cases = cases::Run::new(options);
    cases.capabilities().await;
    cases.token().await;
    match options.role {
        Role::ServiceProvider => cases.broker().await,
        Role::AuthorisationRegistry => cases.delegation().await,
        Role::SchemeOwner => cases.scheme_owner().await,
        Role::IdentityProvider => cases.identity_provider().await,
    }
    Report {
        role: options.role,
        target: options.target.clone(),
        target_id: options.target_id.clone(),
        warnings,
        cases: cases.finish(),
    }
}
