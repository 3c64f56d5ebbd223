//! Every reason the gateway answers a request itself: `Reject`, and the kinds of refusal it
//! holds (the body's, a header's, the evidence's, a sign-in's, the decision service's, a
//! dependency that failed), each with its reason codes.

use crate::access_token::AccessTokenError;
use crate::gateway::fleet::replay::ReplayError;
use crate::peers::identity_provider::{
    CodeRefusal, IdentityProviderError, ProviderFailure, TokenRefusal, UserinfoRefusal,
};
use crate::peers::registry_errors::{NoRegistry, RegistryError, RegistryFailure, RegistryRefusal};
use crate::peers::trust::TrustError;
use crate::peers::PeerError;
use crate::request::body::BodyRefusal;
use crate::request::path::PathError;
use crate::request::query::QueryError;
use crate::request::template::RenderError;
use crate::request::Ambiguity;
use crate::scheme::assertion::{AssertionError, TokenBodyError};
use crate::scheme::evidence_token::EvidenceTokenError;
use crate::scheme::jwt::SigningError;
use crate::scheme::party::{PartyId, PartyIdError};
use crate::scheme::party_record::AmbiguousName;
use crate::scheme::reason_codes;
use crate::scheme::trust::{PartyError, SignerError};
use crate::scheme::verdict::DenyReason;
use crate::telemetry::metrics::Outcome;
use http::Method;
use std::fmt;
use std::time::Duration;

/// Why a request is answered by the gateway instead of the backend.
#[derive(Debug, Clone)]
pub enum Reject {
    BadPath(PathError),
    BadQuery(QueryError),
    /// A form backends read differently, which the route does not accept.
    Ambiguous(Ambiguity),
    /// A request header the gateway cannot pass on as it is.
    BadHeader(HeaderRefusal),
    NotFound,
    MethodNotAllowed(Vec<Method>),
    BodyTooLarge,
    UnreadableBody(BodyError),
    /// A JSON body the route's rule reads cannot be read one way only, or lacks a value it takes.
    Body(BodyRefusal),
    /// One element of the body's array (a `*` of the rule) is refused: the whole request is.
    BodyElement {
        index: usize,
        refusal: Box<Reject>,
    },
    Unauthenticated(AccessTokenError),
    /// A token request that fails; 400 with an OAuth 2.0 error.
    TokenRequest(AssertionError),
    /// Delegation evidence does not grant the request.
    Denied(DenyReason),
    /// The registry asked holds no policy for the request, or its evidence denies it.
    RegistryDenied {
        registry: String,
        reason: DenyReason,
    },
    /// The presented evidence or broker assertion is not acceptable, or no registry can be asked.
    Evidence(EvidenceRefusal),
    /// A value the rule needs is missing from the request or unusable.
    MissingRequestValue(MissingValue),
    /// A value the rule takes from the request is longer than decisions are made on.
    ValueTooLong {
        value: RuleValue,
        limit: usize,
    },
    /// A value the rule takes from the request holds a control character.
    ControlInValue(RuleValue),
    /// The caller named more data owners the gateway does not know than it may per minute.
    TooManyNewOwners {
        per_minute: u32,
    },
    /// The caller caused more registry calls than it may per minute.
    TooManyRegistryCalls {
        per_minute: u32,
        retry_after: Duration,
    },
    /// A dependency failed: fail closed.
    Unavailable(Unavailable),
    /// The registry wants previous steps, and the gateway holds no client assertion of `party`
    /// within its lifetime: the consumer's, or (`broker`) that of the broker calling for it.
    PreviousStepsUnavailable {
        registry: String,
        party: String,
        broker: bool,
    },
    /// An authorisation registry refused the gateway for good: asking again will not help until
    /// the gateway's settings for it change.
    RegistryRefused(RegistryRefusal),
    NoHealthyBackend(String),
    BackendUnreachable,
    BackendTimeout,
    /// A person could not be signed in (or must sign in first).
    Login(LoginFailure),
    /// A refusal of the decision service or the admin listener: what they are asked cannot be
    /// decided or done.
    Service(ServiceRefusal),
    /// A fault of the gateway itself.
    Internal,
}

/// Why a request body could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    #[error("the body could not be read: {0}")]
    Unreadable(&'static str),
    #[error(transparent)]
    TokenRequest(#[from] TokenBodyError),
}

/// Why a request header cannot be passed on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderRefusal {
    #[error("the Connection header is not text")]
    Connection,
    #[error("the Connection header names {0}, which the route's rule reads: it would not reach the backend the decision was made for")]
    ConnectionNamesRuleHeader(String),
    #[error("the route does not allow protocol upgrades (WebSocket)")]
    Upgrade,
    #[error("a request header is malformed or names a header that cannot be removed")]
    Invalid,
    #[error("the serviceConsumerAssertion (service_consumer_assertion) header is for a machine acting for another; a signed-in person acts for themselves")]
    BrokerWithPerson,
    #[error("the Host header {0}")]
    Host(&'static str),
    #[error("the request carries both {0} and {1}, two names of one header: send one")]
    BothSpellings(&'static str, &'static str),
}

reason_codes! {
    HeaderRefusal {
        HeaderRefusal::Connection | HeaderRefusal::Invalid => "invalid_header",
        HeaderRefusal::ConnectionNamesRuleHeader(_) => "connection_names_rule_header",
        HeaderRefusal::Upgrade => "upgrade_not_allowed",
        HeaderRefusal::BrokerWithPerson => "broker_with_person",
        HeaderRefusal::Host(_) => "invalid_host",
        HeaderRefusal::BothSpellings(..) => "both_header_spellings",
    }
}

pub use crate::request::HeaderProblem;

/// Why presented evidence (or a broker's consumer assertion) is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvidenceRefusal {
    #[error("the {header} header {}", match .problem {
        HeaderProblem::NotText => "is not text",
        HeaderProblem::Repeated => "is given more than once",
        HeaderProblem::Empty => "is empty",
    })]
    Header {
        header: &'static str,
        problem: HeaderProblem,
    },
    #[error(transparent)]
    Token(#[from] EvidenceTokenError),
    #[error("evidence {0}")]
    Signer(SignerError),
    #[error("{0} is neither the data owner nor an authorisation registry")]
    IssuerNotARegistry(PartyId),
    #[error(
        "{issuer} is not a registry the data owner {owner} designated for this service provider"
    )]
    IssuerNotTheOwnersRegistry { issuer: PartyId, owner: String },
    #[error("the consumer assertion: {0}")]
    ConsumerAssertion(AssertionError),
    #[error("the consumer assertion carries the claim {0:?}; a client assertion has no other claims than iss, sub, aud, jti, iat, exp and nbf")]
    ConsumerAssertionClaim(String),
    #[error(transparent)]
    NoRegistry(#[from] NoRegistry),
    #[error("the request names {0}, the caller itself, as the data owner")]
    OwnerIsCaller(String),
    #[error("the {header} header holds more than {max} delegation tokens: no chain of evidence is that long")]
    ChainTooLong { header: &'static str, max: usize },
    #[error(transparent)]
    AmbiguousParty(#[from] AmbiguousName),
    #[error("evidence signed as {written}, an alias of {id}, which is configured to be read otherwise: it signs as {id}")]
    SignerAlias { written: PartyId, id: String },
}

reason_codes! {
    EvidenceRefusal {
        EvidenceRefusal::Header { problem: HeaderProblem::Empty, .. }
        | EvidenceRefusal::ChainTooLong { .. } => "malformed_evidence",
        EvidenceRefusal::Header { .. } => "malformed_header",
        EvidenceRefusal::Signer(SignerError::Signature(_)) => "evidence_signature_invalid",
        EvidenceRefusal::Signer(SignerError::Chain(_)) => "evidence_untrusted",
        EvidenceRefusal::Signer(SignerError::Party(PartyError::Contested(_))) => "party_name_ambiguous",
        EvidenceRefusal::Signer(SignerError::Party(_)) => "evidence_issuer_unknown",
        EvidenceRefusal::IssuerNotARegistry(_) => "evidence_issuer_not_a_registry",
        EvidenceRefusal::IssuerNotTheOwnersRegistry { .. } =>
            "evidence_issuer_not_the_owners_registry",
        EvidenceRefusal::ConsumerAssertion(_)
        | EvidenceRefusal::ConsumerAssertionClaim(_) => "invalid_consumer_assertion",
        EvidenceRefusal::OwnerIsCaller(_) => "owner_is_caller",
        EvidenceRefusal::AmbiguousParty(_) => "party_name_ambiguous",
        EvidenceRefusal::SignerAlias { .. } => "evidence_issuer_alias",
    } nested {
        EvidenceRefusal::Token(e) => e: EvidenceTokenError,
        EvidenceRefusal::NoRegistry(e) => e: NoRegistry,
    }
}

/// Why a person is not signed in (or out). Each is a page with its status; none opens a session.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoginFailure {
    #[error("this route needs a signed-in person; sign in with a GET of a page first")]
    Required,
    #[error("more sign-ins are starting than the gateway allows per second; try again in {retry_after} s")]
    TooManyStarts { retry_after: u64 },
    #[error("more than {per_minute} sign-ins a minute started from this address; try again in {retry_after} s")]
    TooManyStartsFromAddress { per_minute: u32, retry_after: u64 },
    #[error("the sign-in cannot be matched to this browser: {0}")]
    StateMismatch(&'static str),
    #[error("the answer of the identity provider is not usable: {0}")]
    InvalidReturn(String),
    #[error("the identity provider refused the sign-in: {error}: {description}")]
    RefusedByProvider { error: String, description: String },
    #[error("the identity provider refused the code: {0}")]
    CodeRefused(CodeRefusal),
    #[error("the id_token is not acceptable: {0}")]
    IdToken(TokenRefusal),
    #[error("the userinfo answer is not acceptable: {0}")]
    Userinfo(UserinfoRefusal),
    #[error("the identity provider gave no usable answer: {0}")]
    ProviderUnavailable(ProviderFailure),
    #[error("the session store did not answer: {0}")]
    Store(ReplayError),
    #[error("a request that changes something must come from the gateway's own pages (it came with {0})")]
    CrossSite(String),
}

reason_codes! {
    LoginFailure {
        LoginFailure::Required => "login_required",
        LoginFailure::TooManyStarts { .. } => "too_many_logins",
        LoginFailure::TooManyStartsFromAddress { .. } => "too_many_logins_from_address",
        LoginFailure::StateMismatch(_) => "state_mismatch",
        LoginFailure::InvalidReturn(_) => "invalid_return",
        LoginFailure::RefusedByProvider { .. } => "login_refused",
        LoginFailure::CodeRefused(_) => "code_refused",
        LoginFailure::IdToken(_) => "invalid_id_token",
        LoginFailure::Userinfo(_) => "invalid_userinfo",
        LoginFailure::ProviderUnavailable(_) => "identity_provider_unavailable",
        LoginFailure::Store(_) => "session_store_unavailable",
        LoginFailure::CrossSite(_) => "cross_site_request",
    }
}

impl LoginFailure {
    pub fn status(&self) -> u16 {
        match self {
            LoginFailure::Required => 401,
            LoginFailure::TooManyStarts { .. } | LoginFailure::TooManyStartsFromAddress { .. } => {
                429
            }
            LoginFailure::StateMismatch(_) | LoginFailure::InvalidReturn(_) => 400,
            LoginFailure::RefusedByProvider { .. }
            | LoginFailure::CodeRefused(_)
            | LoginFailure::IdToken(_)
            | LoginFailure::Userinfo(_) => 401,
            LoginFailure::ProviderUnavailable(_) => 502,
            LoginFailure::Store(_) => 503,
            LoginFailure::CrossSite(_) => 403,
        }
    }

    /// What a person is told; what failed at the identity provider or the store is logged.
    pub fn description(&self) -> String {
        match self {
            LoginFailure::ProviderUnavailable(_) => {
                "the identity provider gave no usable answer; try again later".into()
            }
            LoginFailure::Store(_) => {
                "the gateway cannot keep sessions right now; try again later".into()
            }
            other => other.to_string(),
        }
    }
}

impl From<LoginFailure> for Reject {
    fn from(e: LoginFailure) -> Self {
        Reject::Login(e)
    }
}

impl From<IdentityProviderError> for Reject {
    fn from(e: IdentityProviderError) -> Self {
        match e {
            IdentityProviderError::Unavailable(e) => LoginFailure::ProviderUnavailable(e).into(),
            IdentityProviderError::CodeRefused(e) => LoginFailure::CodeRefused(e).into(),
            IdentityProviderError::IdToken(e) => LoginFailure::IdToken(e).into(),
            IdentityProviderError::Userinfo(e) => LoginFailure::Userinfo(e).into(),
            IdentityProviderError::Signing(e) => Reject::Unavailable(Unavailable::Signing(e)),
            IdentityProviderError::SchemeOwner(e) => e.into(),
        }
    }
}

/// What the decision service (nginx, Envoy, AuthZEN) and the admin listener refuse before or
/// beside a decision.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServiceRefusal {
    #[error("{0} is the gateway's own endpoint: clients call the gateway for it, it is not decided for another proxy")]
    OwnEndpoint(String),
    #[error("the route is for people signed in at the gateway (login = true): the decision service decides for parties with an access token only")]
    RouteForPeople,
    #[error("{0}")]
    InvalidOriginalRequest(String),
    #[error("the request is decided on as {0}, and the proxy in front passes it to the backend as written: send the path and query in that form (routes with upstream_path or identifier_case cannot be served through another proxy)")]
    NotAsDecided(String),
    #[error("the request's body, of a form or JSON type, may hold a _method field, which some frameworks run as the method, and the decision service does not see the body: send such requests through the gateway itself, or let the route accept method_override if its backend reads no _method")]
    BodyUnseen,
    #[error("the request carries {0}, which the gateway never passes to a backend, and the proxy in front would")]
    HeaderNotPassable(String),
    #[error("{0}")]
    NotServed(&'static str),
    #[error("[decision_api] policy_decision_point is not configured: no discovery document is published; the evaluation endpoints are at their default paths")]
    NoDiscovery,
    #[error("{0}")]
    PepUnauthenticated(&'static str),
    #[error("the body is sent as Content-Type: application/json")]
    NotJson,
    #[error("X-Request-ID is echoed on the answer: send one of 1 to {0} visible ASCII characters (no spaces or controls), or none")]
    InvalidRequestId(usize),
    #[error("{0}")]
    InvalidEvaluation(String),
    #[error("{0}")]
    RepeatedMember(String),
    #[error("no decision within {0:?}; try again later")]
    DecisionTimeout(Duration),
    #[error("purging is off: set [admin] purge_secret_file")]
    PurgeNotConfigured,
    #[error("send Authorization: Bearer with the secret of [admin] purge_secret_file")]
    PurgeUnauthenticated,
    #[error("a purge request is JSON of at most {bytes} bytes, sent within {within:?}")]
    PurgeTooLarge { bytes: usize, within: Duration },
    #[error("{0}")]
    InvalidPurge(String),
    #[error("purged here; the fleet's Redis could not be reached, other instances keep what they cached: {0}")]
    FleetNotTold(String),
}

reason_codes! {
    ServiceRefusal {
        ServiceRefusal::OwnEndpoint(_) => "own_endpoint",
        ServiceRefusal::RouteForPeople => "route_for_people",
        ServiceRefusal::InvalidOriginalRequest(_) => "invalid_original_request",
        ServiceRefusal::NotAsDecided(_) => "not_as_decided",
        ServiceRefusal::BodyUnseen => "ambiguous_request",
        ServiceRefusal::HeaderNotPassable(_) => "header_not_passable",
        ServiceRefusal::NotServed(_) => "no_route",
        ServiceRefusal::NoDiscovery => "no_policy_decision_point",
        ServiceRefusal::PepUnauthenticated(_) => "pep_unauthenticated",
        ServiceRefusal::NotJson => "unsupported_content_type",
        ServiceRefusal::InvalidRequestId(_) => "invalid_request_id",
        ServiceRefusal::InvalidEvaluation(_) => "invalid_evaluation",
        ServiceRefusal::RepeatedMember(_) => "duplicate_member",
        ServiceRefusal::DecisionTimeout(_) => "decision_timeout",
        ServiceRefusal::PurgeNotConfigured => "purge_not_configured",
        ServiceRefusal::PurgeUnauthenticated => "unauthenticated",
        ServiceRefusal::PurgeTooLarge { .. } => "body_too_large",
        ServiceRefusal::InvalidPurge(_) => "invalid_purge",
        ServiceRefusal::FleetNotTold(_) => "fleet_not_told",
    }
}

impl ServiceRefusal {
    /// Its status, `error` code and outcome.
    pub(super) fn answered(&self) -> (u16, &'static str, Outcome) {
        use ServiceRefusal as S;
        match self {
            S::OwnEndpoint(_) | S::NotServed(_) | S::NoDiscovery | S::PurgeNotConfigured => {
                (404, "not_found", Outcome::NotFound)
            }
            S::RouteForPeople => (403, "access_denied", Outcome::Denied),
            S::InvalidOriginalRequest(_)
            | S::NotAsDecided(_)
            | S::BodyUnseen
            | S::HeaderNotPassable(_)
            | S::NotJson
            | S::InvalidRequestId(_)
            | S::InvalidEvaluation(_)
            | S::RepeatedMember(_)
            | S::InvalidPurge(_) => (400, "invalid_request", Outcome::BadRequest),
            S::PepUnauthenticated(_) => (401, "invalid_token", Outcome::Unauthenticated),
            S::PurgeUnauthenticated => (401, "invalid_client", Outcome::Unauthenticated),
            S::PurgeTooLarge { .. } => (413, "request_too_large", Outcome::BadRequest),
            S::DecisionTimeout(_) | S::FleetNotTold(_) => {
                (503, "temporarily_unavailable", Outcome::Unavailable)
            }
        }
    }
}

impl From<ServiceRefusal> for Reject {
    fn from(e: ServiceRefusal) -> Self {
        Reject::Service(e)
    }
}

/// A value of a rule, named for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleValue {
    DataOwner,
    ResourceType,
    Identifier,
    Attribute,
    DelegationPathParty,
    ConditionOperand,
}

impl RuleValue {
    /// The member of the delegation mask the value fills.
    pub fn mask_name(self) -> &'static str {
        match self {
            RuleValue::DataOwner => "policy_issuer",
            RuleValue::ResourceType => "resource_type",
            RuleValue::Identifier => "identifiers",
            RuleValue::Attribute => "attributes",
            RuleValue::DelegationPathParty => "delegation_path",
            RuleValue::ConditionOperand => "conditions",
        }
    }
}

impl fmt::Display for RuleValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RuleValue::DataOwner => "the data owner",
            RuleValue::ResourceType => "the resource type",
            RuleValue::Identifier => "an identifier",
            RuleValue::Attribute => "an attribute",
            RuleValue::DelegationPathParty => "a delegation path party",
            RuleValue::ConditionOperand => "a condition's operand",
        })
    }
}

/// A value the rule needs that the request lacks (or gives twice), or gives unusably.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MissingValue {
    #[error("the request lacks {value} ({template}), which the route's rule needs")]
    Absent { value: RuleValue, template: String },
    #[error("the data owner the request names is not a party identifier: {0}")]
    InvalidDataOwner(PartyIdError),
    #[error("the method has no default action; the route's rule must name one")]
    NoAction,
    #[error(transparent)]
    UpstreamPath(#[from] RenderError),
}

/// A dependency that failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unavailable {
    #[error(transparent)]
    SchemeOwner(#[from] TrustError),
    #[error(transparent)]
    Registry(#[from] RegistryFailure),
    #[error("the registry did not answer within {0:?}")]
    RegistryTimeout(Duration),
    #[error("signing failed: {0}")]
    Signing(SigningError),
    #[error(transparent)]
    Replay(#[from] ReplayError),
    /// The fleet's store (the replay store's Redis) did not give the consumer's assertion a
    /// registry wants.
    #[error("the fleet's store of consumers' assertions did not answer: {0}")]
    HeldAssertions(String),
    #[error("the listener's connections and HTTP/2 streams are at its max_connections")]
    ListenerFull,
}

impl Unavailable {
    /// What the client is told: what failed upstream is logged, not told (it names internal
    /// addresses and answers).
    pub(super) fn description(&self) -> &'static str {
        match self {
            Unavailable::SchemeOwner(TrustError::Unavailable(e)) if e.untrusted_certificate() => {
                "the gateway does not trust the scheme owner's TLS certificate; its operator sets \
                 [outbound] ca_file to the CA that issued it"
            }
            Unavailable::SchemeOwner(_) => {
                "the scheme owner gave no usable answer; try again later"
            }
            Unavailable::Registry(RegistryFailure::Answer { .. }) => {
                "the authorisation registry's answer is not usable evidence; the gateway's log \
                 and decision log say why"
            }
            Unavailable::Registry(RegistryFailure::Call(PeerError::Busy { .. })) => {
                "the authorisation registry asks to be called less often (429); try again after \
                 the time Retry-After gives"
            }
            Unavailable::Registry(RegistryFailure::Call(PeerError::Timeout { .. }))
            | Unavailable::RegistryTimeout(_) => {
                "the authorisation registry did not answer in time; try again later"
            }
            Unavailable::Registry(RegistryFailure::Call(PeerError::Unreachable { .. })) => {
                "the authorisation registry cannot be reached; try again later"
            }
            Unavailable::Registry(RegistryFailure::Call(
                PeerError::Status { .. } | PeerError::Redirected { .. },
            )) => "the authorisation registry failed to answer (a server error); try again later",
            Unavailable::Registry(RegistryFailure::Call(PeerError::Garbled { .. })) => {
                "the authorisation registry's answer is unreadable; the gateway's log and \
                 decision log say why"
            }
            Unavailable::Signing(_) => "the gateway could not sign its answer; try again later",
            Unavailable::Replay(_) => {
                "the gateway cannot tell whether the assertion was used before; try again later"
            }
            Unavailable::HeldAssertions(_) => {
                "the gateway cannot reach the store that holds your client assertion for the \
                 authorisation registry; try again later"
            }
            Unavailable::ListenerFull => {
                "the gateway serves as many requests on this listener as it may; try again shortly"
            }
        }
    }
}

reason_codes! {
    Unavailable {
        Unavailable::RegistryTimeout(_) => "registry_timeout",
        Unavailable::Signing(_) => "signing_failed",
        Unavailable::Replay(ReplayError::Full) => "replay_store_full",
        Unavailable::Replay(ReplayError::Unavailable(_)) => "replay_store_unavailable",
        Unavailable::HeldAssertions(_) => "replay_store_unavailable",
        Unavailable::ListenerFull => "listener_full",
    } nested {
        Unavailable::SchemeOwner(e) => e: TrustError,
        Unavailable::Registry(e) => e: RegistryFailure,
    }
}

impl From<TrustError> for Reject {
    fn from(e: TrustError) -> Self {
        match e {
            TrustError::Contested(name) => AmbiguousName(name).into(),
            other => Reject::Unavailable(other.into()),
        }
    }
}

impl From<RegistryError> for Reject {
    fn from(e: RegistryError) -> Self {
        match e {
            RegistryError::NoRegistry(e) => EvidenceRefusal::NoRegistry(e).into(),
            RegistryError::Refused(e) => Reject::RegistryRefused(e),
            RegistryError::Failed(e) => Reject::Unavailable(e.into()),
            RegistryError::SchemeOwner(e) => e.into(),
            RegistryError::NoPreviousStep {
                registry,
                party,
                broker,
            } => Reject::PreviousStepsUnavailable {
                registry,
                party,
                broker,
            },
            RegistryError::HeldAssertionsUnavailable(e) => {
                Reject::Unavailable(Unavailable::HeldAssertions(e))
            }
        }
    }
}

impl From<AmbiguousName> for Reject {
    fn from(e: AmbiguousName) -> Self {
        Reject::Evidence(e.into())
    }
}

impl From<EvidenceRefusal> for Reject {
    fn from(e: EvidenceRefusal) -> Self {
        Reject::Evidence(e)
    }
}

impl From<MissingValue> for Reject {
    fn from(e: MissingValue) -> Self {
        Reject::MissingRequestValue(e)
    }
}
