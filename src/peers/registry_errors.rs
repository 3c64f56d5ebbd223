//! How asking a registry fails: no registry can be asked (the request is refused), a failure for
//! now (asking again later may help), or a refusal for good (until the gateway's settings for it
//! change); each with its reason codes, and a peer's error sorted into them.

use super::trust::TrustError;
use super::PeerError;
use crate::scheme::reason_codes;

/// Why no registry can be asked about a data owner's delegations: the request is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoRegistry {
    #[error("the data owner {0} is unknown at the scheme owner")]
    DataOwnerUnknown(String),
    #[error("the data owner {0} designates no authorisation registry for this service provider")]
    NoneNamed(String),
    #[error("{0} is not an active authorisation registry")]
    NotAnActiveRegistry(String),
    #[error("the address of {registry} in the record of {owner} is not the registry's own https address")]
    NotItsOwnAddress { registry: String, owner: String },
}

reason_codes! {
    NoRegistry {
        NoRegistry::DataOwnerUnknown(_) => "data_owner_unknown",
        _ => "no_registry",
    }
}

/// Why a registry gave no usable answer this time: the gateway fails closed, and asking again
/// later may help (503).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryFailure {
    /// It did not answer in time, could not be reached, answered 429 or a 5xx (with a fresh
    /// token too), or answered something unreadable.
    #[error(transparent)]
    Call(PeerError),
    #[error("the answer of {registry} is not usable evidence: {problem}")]
    Answer { registry: String, problem: String },
}

reason_codes! {
    RegistryFailure {
        RegistryFailure::Call(PeerError::Timeout { .. }) => "registry_timeout",
        RegistryFailure::Call(PeerError::Unreachable { .. }) => "registry_unreachable",
        RegistryFailure::Call(PeerError::Busy { .. }) => "registry_busy",
        RegistryFailure::Call(PeerError::Status { .. } | PeerError::Redirected { .. }) => "registry_error",
        RegistryFailure::Call(PeerError::Garbled { .. })
        | RegistryFailure::Answer { .. } => "registry_garbled",
    }
}

/// Why a registry refuses the gateway for good: asking again will not help until the gateway's
/// settings for that registry suit it (502).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryRefusal {
    /// A 4xx (not 401, not 404 "no policy", not 429) from its token or delegation endpoint.
    #[error("{url} refused the gateway's request with {status}: {text}")]
    Request {
        url: String,
        status: u16,
        text: String,
    },
    /// Its token endpoint refused our client assertion, or its delegation endpoint a token it
    /// had just given.
    #[error("{url} refused the gateway's credentials with {status}, a fresh token's too: {text}")]
    Credentials {
        url: String,
        status: u16,
        text: String,
    },
    /// A 404 web page: no endpoint at that path (a `token_path` or `delegation_path` that is not
    /// the registry's), not a registry's "no policy".
    #[error("{url} is no endpoint of the registry: it answered 404 with a web page ({text}); set token_path and delegation_path of its [[registry]] to its own paths")]
    NoEndpoint { url: String, text: String },
    #[error(transparent)]
    Redirected(PeerError),
    /// Its evidence is addressed to another party than the gateway.
    #[error("the evidence of {registry} is addressed to {addressed} (aud), not to the gateway ({ours}){hint}")]
    NotForUs {
        registry: String,
        addressed: String,
        ours: String,
        hint: &'static str,
    },
}

/// What a refusal of evidence addressed to another name says: which setting accepts it.
pub const ADDRESSED_HINT: &str = "; if the registry addresses the gateway by an id of its own (as FIWARE Keyrock does with the user id it keeps for the gateway's client), name that id in its [[registry]] addresses_us_as";

reason_codes! {
    RegistryRefusal {
        RegistryRefusal::Request { .. } => "registry_refused_request",
        RegistryRefusal::Credentials { .. } => "registry_refused_credentials",
        RegistryRefusal::NoEndpoint { .. } => "registry_endpoint_missing",
        RegistryRefusal::Redirected(_) => "registry_redirected",
        RegistryRefusal::NotForUs { .. } => "registry_evidence_not_for_us",
    }
}

impl RegistryRefusal {
    /// The registry's own words for the consumer: the HTTP status's reason phrase, or a short
    /// printable `error_description`/`error`/`message` of a JSON answer; never its page or its
    /// schema's error list (the log has those).
    pub fn short_reason(&self) -> String {
        let (status, text) = match self {
            RegistryRefusal::Request { status, text, .. }
            | RegistryRefusal::Credentials { status, text, .. } => (*status, text.as_str()),
            _ => return String::new(),
        };
        let phrase = reqwest::StatusCode::from_u16(status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("refused");
        let said = serde_json::from_str::<serde_json::Value>(text)
            .ok()
            .and_then(|v| {
                ["error_description", "error", "message"]
                    .iter()
                    .find_map(|m| v.get(m).and_then(|s| s.as_str()).map(str::to_string))
            })
            .map(|s| {
                s.chars()
                    .filter(|c| c.is_ascii_alphanumeric() || " .,:;()'-_/[]".contains(*c))
                    .take(SHORT_REASON)
                    .collect::<String>()
            })
            .filter(|s| !s.trim().is_empty());
        match said {
            Some(said) => format!("{phrase}: {said}"),
            None => phrase.to_string(),
        }
    }
}

/// The longest reason of a registry's own that a consumer is shown.
const SHORT_REASON: usize = 160;

/// How a failed call is taken: for now (503) or for good (502).
pub(super) fn classify(e: PeerError) -> RegistryError {
    let refused = |r| RegistryError::Refused(r);
    match e {
        PeerError::Redirected { .. } => refused(RegistryRefusal::Redirected(e)),
        PeerError::Status {
            url,
            status: 404,
            body,
        } => refused(RegistryRefusal::NoEndpoint { url, text: body }),
        PeerError::Status {
            url,
            status: status @ 401,
            body,
        } => refused(RegistryRefusal::Credentials {
            url,
            status,
            text: body,
        }),
        PeerError::Status {
            url,
            status: status @ (400 | 402..=499),
            body,
        } => refused(RegistryRefusal::Request {
            url,
            status,
            text: body,
        }),
        other => RegistryError::Failed(RegistryFailure::Call(other)),
    }
}

/// Whether a delegation call's failure may be the token's: a registry that forgot it (a reset
/// database) answers 401, 403 or even 500 (FIWARE Keyrock); a fresh token is tried once (and at
/// most once per `RENEWAL_INTERVAL`).
pub(super) fn may_be_the_token(e: &PeerError) -> bool {
    matches!(e, PeerError::Status { status, .. } if matches!(status, 401 | 403 | 500..=599))
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    #[error(transparent)]
    NoRegistry(#[from] NoRegistry),
    #[error(transparent)]
    Failed(#[from] RegistryFailure),
    #[error(transparent)]
    Refused(#[from] RegistryRefusal),
    #[error(transparent)]
    SchemeOwner(#[from] TrustError),
    /// The registry wants a client assertion of the mask's parties in `previous_steps`, and none
    /// is held within its lifetime: the consumer's, or where a broker called, the broker's own.
    #[error("{registry} wants previous steps; no client assertion of {party} is held within its lifetime")]
    NoPreviousStep {
        registry: String,
        party: String,
        broker: bool,
    },
    /// The fleet's store of consumers' assertions did not answer.
    #[error("the fleet's store of consumers' assertions did not answer: {0}")]
    HeldAssertionsUnavailable(String),
}

reason_codes! {
    RegistryError {
        RegistryError::NoPreviousStep { .. } => "previous_steps_unavailable",
        RegistryError::HeldAssertionsUnavailable(_) => "replay_store_unavailable",
    } nested {
        RegistryError::NoRegistry(e) => e: NoRegistry,
        RegistryError::Failed(e) => e: RegistryFailure,
        RegistryError::Refused(e) => e: RegistryRefusal,
        RegistryError::SchemeOwner(e) => e: TrustError,
    }
}
