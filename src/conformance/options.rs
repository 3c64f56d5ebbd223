//! What a run is told: the role the target is tested in, the version of the scheme it speaks,
//! the target, who we are, and whom we may also act as.

use crate::scheme::jwt::SigningIdentity;
use crate::scheme::mask::DelegationBody;
use crate::scheme::trust::TrustedList;
use crate::scheme::version::SchemeVersion;

/// The role the target is tested in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Role {
    ServiceProvider,
    AuthorisationRegistry,
    /// The scheme owner (3.0: participant registry, also accepted as `participant-registry`).
    #[value(alias = "participant-registry")]
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

/// The Permit and the Deny mask a registry is tested with, each in the body of the version checked.
#[derive(Clone, Debug)]
pub struct Masks {
    pub permit: DelegationBody,
    pub deny: DelegationBody,
}

/// The broker pattern at a service provider: the client calls `resource` for `consumer`, whose
/// client assertion it forwards in the `service_consumer_assertion` header (3.0:
/// `serviceConsumerAssertion`).
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
    /// The version of the scheme the target is held to: its paths, the members and claims of its
    /// answers, the bodies and headers it reads.
    pub version: SchemeVersion,
    /// The target's base URL.
    pub target: String,
    pub target_id: String,
    /// The client the target is tested by; for registries the access subject of the masks.
    pub client: SigningIdentity,
    /// A service provider named in the masks (3.0: one the registry may serve), which asks with
    /// the subject's assertion in previous_steps (registries only).
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
