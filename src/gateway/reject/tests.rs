use super::*;
use crate::access_token::AccessTokenError;
use crate::gateway::fleet::replay::ReplayError;
use crate::peers::identity_provider::{
    CodeRefusal, IdentityProviderError, ProviderFailure, TokenRefusal, UserinfoRefusal,
};
use crate::peers::registry_errors::{RegistryFailure, RegistryRefusal};
use crate::peers::trust::TrustError;
use crate::peers::PeerError;
use crate::reading::json::JsonProblem;
use crate::request::body::BodyRefusal;
use crate::request::body::{BodyValueError, JsonRefusal};
use crate::request::path::PathError;
use crate::request::query::QueryError;
use crate::request::Ambiguity;
use crate::scheme::assertion::AssertionError;
use crate::scheme::jwt::SigningError;
use crate::scheme::openid::IssuedTokenError;
use crate::scheme::party::PartyId;
use crate::scheme::trust::SignerError;
use crate::scheme::verdict::DenyReason;
use http::Method;
use std::collections::BTreeSet;
use std::time::Duration;

/// One refusal of each kind. The match in `table_rows` below names every variant, so a new one
/// cannot be added without being looked at here.
fn one_of_each() -> Vec<Reject> {
    let all = vec![
        Reject::BadPath(PathError::AboveRoot),
        Reject::BadQuery(QueryError::BadEncoding),
        Reject::Ambiguous(Ambiguity::Comma),
        Reject::BadHeader(HeaderRefusal::Upgrade),
        Reject::NotFound,
        Reject::MethodNotAllowed(vec![Method::GET]),
        Reject::BodyTooLarge,
        Reject::UnreadableBody(BodyError::Unreadable("read")),
        Reject::Body(BodyRefusal::Missing),
        Reject::Body(BodyRefusal::Unseen),
        Reject::Body(BodyRefusal::Partial),
        Reject::Body(BodyRefusal::NotJsonType("text/plain".into())),
        Reject::Body(BodyRefusal::Encoded("gzip".into())),
        Reject::Body(BodyRefusal::LengthMismatch {
            declared: "4".into(),
            received: 3,
        }),
        Reject::Body(BodyRefusal::NotUtf8),
        Reject::Body(BodyRefusal::ByteOrderMark),
        Reject::Body(BodyRefusal::Json(JsonRefusal(JsonProblem::NotJson(
            "x".into(),
        )))),
        Reject::Body(BodyRefusal::Json(JsonRefusal(JsonProblem::RepeatedMember(
            "id".into(),
        )))),
        Reject::Body(BodyRefusal::Json(JsonRefusal(JsonProblem::Trailing))),
        Reject::Body(BodyRefusal::Json(JsonRefusal(JsonProblem::TooDeep(64)))),
        Reject::Body(BodyRefusal::Value(BodyValueError::Unresolved("/id".into()))),
        Reject::Body(BodyRefusal::Value(BodyValueError::UnsafeInteger(
            "/id".into(),
        ))),
        Reject::Body(BodyRefusal::NoElements("/entities".into())),
        Reject::Body(BodyRefusal::TooManyElements {
            array: "/entities".into(),
            limit: 100,
        }),
        Reject::Body(BodyRefusal::JsonLdKeyword("@id".into())),
        Reject::BodyElement {
            index: 1,
            refusal: Box::new(Reject::Denied(DenyReason::NoPolicy)),
        },
        Reject::Unauthenticated(AccessTokenError::Missing),
        Reject::TokenRequest(AssertionError::MissingJti),
        Reject::Denied(DenyReason::NoPolicy),
        Reject::Evidence(EvidenceRefusal::Header {
            header: "x",
            problem: HeaderProblem::Repeated,
        }),
        Reject::MissingRequestValue(MissingValue::NoAction),
        Reject::ValueTooLong {
            value: RuleValue::Identifier,
            limit: 256,
        },
        Reject::ControlInValue(RuleValue::Identifier),
        Reject::TooManyNewOwners { per_minute: 30 },
        Reject::TooManyRegistryCalls {
            per_minute: 600,
            retry_after: Duration::from_millis(100),
        },
        Reject::Unavailable(Unavailable::RegistryTimeout(Duration::from_secs(1))),
        Reject::Unavailable(Unavailable::ListenerFull),
        Reject::RegistryDenied {
            registry: "EU.EORI.NL000000004".into(),
            reason: DenyReason::DeniedByRule,
        },
        Reject::PreviousStepsUnavailable {
            registry: "EU.EORI.NL000000004".into(),
            party: "EU.EORI.NL000000001".into(),
            broker: false,
        },
        Reject::PreviousStepsUnavailable {
            registry: "EU.EORI.NL000000004".into(),
            party: "EU.EORI.NL000000002".into(),
            broker: true,
        },
        Reject::RegistryRefused(RegistryRefusal::Request {
            url: "https://ar.example/delegation".into(),
            status: 400,
            text: "Invalid client credentials".into(),
        }),
        Reject::Unavailable(Unavailable::Registry(RegistryFailure::Call(
            PeerError::Busy {
                url: "https://ar.example/delegation".into(),
                retry_after: 7,
            },
        ))),
        Reject::NoHealthyBackend("legacy".into()),
        Reject::BackendUnreachable,
        Reject::BackendTimeout,
        Reject::Login(LoginFailure::Required),
        Reject::Login(LoginFailure::TooManyStarts { retry_after: 1 }),
        Reject::Login(LoginFailure::TooManyStartsFromAddress {
            per_minute: 30,
            retry_after: 2,
        }),
        Reject::Login(LoginFailure::StateMismatch("x")),
        Reject::Login(LoginFailure::InvalidReturn("x".into())),
        Reject::Login(LoginFailure::RefusedByProvider {
            error: "access_denied".into(),
            description: String::new(),
        }),
        Reject::Login(LoginFailure::CodeRefused(CodeRefusal::Missing("id_token"))),
        Reject::Login(LoginFailure::IdToken(TokenRefusal::NotForUs(
            IssuedTokenError::Nonce,
        ))),
        Reject::Login(LoginFailure::Userinfo(UserinfoRefusal::NoToken(
            "userinfoToken",
        ))),
        Reject::Login(LoginFailure::Userinfo(UserinfoRefusal::OtherVersion {
            found: "userinfo_token",
            expected: "userinfoToken",
        })),
        Reject::Login(LoginFailure::ProviderUnavailable(
            ProviderFailure::NotRegistered(PartyId::parse("EU.EORI.NL000000009").unwrap()),
        )),
        Reject::Login(LoginFailure::Store(ReplayError::Full)),
        Reject::Login(LoginFailure::CrossSite("https://elsewhere.example".into())),
        Reject::Internal,
    ];
    let all = all
        .into_iter()
        .chain(every_service_refusal().map(Reject::Service));
    let all: Vec<Reject> = all.collect();
    for r in &all {
        match r {
            Reject::BadPath(_)
            | Reject::BadQuery(_)
            | Reject::Ambiguous(_)
            | Reject::BadHeader(_)
            | Reject::NotFound
            | Reject::MethodNotAllowed(_)
            | Reject::BodyTooLarge
            | Reject::UnreadableBody(_)
            | Reject::Body(_)
            | Reject::BodyElement { .. }
            | Reject::Unauthenticated(_)
            | Reject::TokenRequest(_)
            | Reject::Denied(_)
            | Reject::Evidence(_)
            | Reject::MissingRequestValue(_)
            | Reject::ValueTooLong { .. }
            | Reject::ControlInValue(_)
            | Reject::TooManyNewOwners { .. }
            | Reject::TooManyRegistryCalls { .. }
            | Reject::Unavailable(_)
            | Reject::RegistryRefused(_)
            | Reject::RegistryDenied { .. }
            | Reject::PreviousStepsUnavailable { .. }
            | Reject::NoHealthyBackend(_)
            | Reject::BackendUnreachable
            | Reject::BackendTimeout
            | Reject::Login(_)
            | Reject::Service(_)
            | Reject::Internal => {}
        }
    }
    all
}

/// Every refusal of the decision service and the admin listener; the match names every variant.
fn every_service_refusal() -> impl Iterator<Item = ServiceRefusal> {
    let all = [
        ServiceRefusal::OwnEndpoint("/connect/token".into()),
        ServiceRefusal::RouteForPeople,
        ServiceRefusal::InvalidOriginalRequest("X-Original-URI is missing".into()),
        ServiceRefusal::NotAsDecided("/api/a".into()),
        ServiceRefusal::BodyUnseen,
        ServiceRefusal::HeaderNotPassable("x-http-method-override".into()),
        ServiceRefusal::NotServed("no [decision_api]"),
        ServiceRefusal::NoDiscovery,
        ServiceRefusal::PepUnauthenticated("no secret"),
        ServiceRefusal::NotJson,
        ServiceRefusal::InvalidRequestId(128),
        ServiceRefusal::InvalidEvaluation("subject is missing".into()),
        ServiceRefusal::RepeatedMember("subject".into()),
        ServiceRefusal::DecisionTimeout(Duration::from_secs(2)),
        ServiceRefusal::PurgeNotConfigured,
        ServiceRefusal::PurgeUnauthenticated,
        ServiceRefusal::PurgeTooLarge {
            bytes: 4096,
            within: Duration::from_secs(5),
        },
        ServiceRefusal::InvalidPurge("not JSON".into()),
        ServiceRefusal::FleetNotTold("connection refused".into()),
    ];
    for r in &all {
        match r {
            ServiceRefusal::OwnEndpoint(_)
            | ServiceRefusal::RouteForPeople
            | ServiceRefusal::InvalidOriginalRequest(_)
            | ServiceRefusal::NotAsDecided(_)
            | ServiceRefusal::BodyUnseen
            | ServiceRefusal::HeaderNotPassable(_)
            | ServiceRefusal::NotServed(_)
            | ServiceRefusal::NoDiscovery
            | ServiceRefusal::PepUnauthenticated(_)
            | ServiceRefusal::NotJson
            | ServiceRefusal::InvalidRequestId(_)
            | ServiceRefusal::InvalidEvaluation(_)
            | ServiceRefusal::RepeatedMember(_)
            | ServiceRefusal::DecisionTimeout(_)
            | ServiceRefusal::PurgeNotConfigured
            | ServiceRefusal::PurgeUnauthenticated
            | ServiceRefusal::PurgeTooLarge { .. }
            | ServiceRefusal::InvalidPurge(_)
            | ServiceRefusal::FleetNotTold(_) => {}
        }
    }
    all.into_iter()
}

/// The status table's page in the book.
const STATUS_PAGE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/docs/src/reference/status-codes.md"
);

/// A row of the book's status table.
struct TableRow {
    status: u16,
    grpc: String,
    errors: BTreeSet<String>,
    reasons: BTreeSet<String>,
}

/// The rows of the book's status table: status, gRPC code, `error` codes, reason codes.
fn status_table() -> Vec<TableRow> {
    let section = std::fs::read_to_string(STATUS_PAGE).expect("the status codes page");
    let codes = |cell: &str| -> BTreeSet<String> {
        cell.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect()
    };
    section
        .lines()
        .skip_while(|l| !l.starts_with("| status"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            TableRow {
                status: cells[1].parse().expect("a status"),
                grpc: cells[2].trim_matches('`').to_string(),
                errors: codes(cells[3]),
                reasons: codes(cells[4]),
            }
        })
        .collect()
}

#[test]
fn every_reason_is_in_the_status_table_with_its_status() {
    let table = status_table();
    let listed = |status: u16, error: Option<&str>, reason: &str| {
        table.iter().any(|row| {
            row.status == status
                && row.grpc == GrpcCode::for_status(status).1
                && row.reasons.contains(reason)
                && error.is_none_or(|e| row.errors.contains(e))
        })
    };
    let mut documented = BTreeSet::new();
    let mut missing = Vec::new();
    for reject in one_of_each() {
        let row = reject.row();
        if !listed(row.status, Some(row.error), row.reason) {
            missing.push(format!(
                "{} {} {} {}",
                row.status, row.grpc.1, row.error, row.reason
            ));
        }
        documented.insert(row.reason.to_string());
    }
    let nested = [
        (400, HeaderRefusal::codes()),
        (401, AccessTokenError::codes()),
        (400, AssertionError::codes()),
        (403, DenyReason::codes()),
        (403, EvidenceRefusal::codes()),
        (503, Unavailable::codes()),
        (502, RegistryRefusal::codes()),
    ];
    for (status, codes) in nested {
        for code in codes {
            if !listed(status, None, code) {
                missing.push(format!("{status} {code}"));
            }
            documented.insert(code.to_string());
        }
    }
    assert!(
        missing.is_empty(),
        "not in the status table of {STATUS_PAGE}: {missing:?}"
    );
    let in_table: BTreeSet<String> = table.into_iter().flat_map(|row| row.reasons).collect();
    let stale: Vec<_> = in_table.difference(&documented).collect();
    assert!(
        stale.is_empty(),
        "reasons of {STATUS_PAGE} the code never gives: {stale:?}"
    );
}

#[test]
fn a_failed_sign_in_at_the_identity_provider_keeps_its_status_and_reason() {
    let provider = PartyId::parse("EU.EORI.NL000000009").unwrap();
    let cases = [
        (
            IdentityProviderError::Unavailable(ProviderFailure::Call(PeerError::Timeout {
                url: "https://idp.example/token".into(),
            })),
            502,
            "identity_provider_unavailable",
        ),
        (
            CodeRefusal::Refused {
                error: "invalid_grant".into(),
                description: "the code expired".into(),
            }
            .into(),
            401,
            "code_refused",
        ),
        (
            IdentityProviderError::IdToken(TokenRefusal::PartyAsPerson(provider.to_string())),
            401,
            "invalid_id_token",
        ),
        (
            UserinfoRefusal::Token(TokenRefusal::Untrusted {
                provider,
                error: SignerError::Party(crate::scheme::trust::PartyError::UnknownParty(
                    "x".into(),
                )),
            })
            .into(),
            401,
            "invalid_userinfo",
        ),
        (SigningError::EmptyChain.into(), 503, "signing_failed"),
        (TrustError::Busy.into(), 503, "scheme_owner_busy"),
    ];
    for (error, status, reason) in cases {
        let row = Reject::from(error).row();
        assert_eq!((row.status, row.reason), (status, reason));
    }
}
