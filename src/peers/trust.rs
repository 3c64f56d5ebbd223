//! Verifying who signed a scheme token, in one sequence for every caller in the gateway and the
//! testbed: the x5c chain against the trusted list, the signature with the leaf's key, the signer's
//! party record, and the binding of the certificate to that party. What the token says is each
//! caller's business (the pure checks in `scheme`); who signed it is decided here.

use super::PeerError;
use crate::scheme::jwt::{DecodedJwt, RsaKey};
use crate::scheme::party::PartyId;
use crate::scheme::party_record::Party;
use crate::scheme::reason_codes;
use crate::scheme::trust::{check_party, ChainError, PartyError, SignerError, ValidatedChain};
use crate::scheme::Timestamp;
use async_trait::async_trait;
use std::sync::Arc;

/// Why the scheme owner could not tell us what we need: the caller should fail closed (503).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TrustError {
    #[error("the scheme owner is unavailable: {0}")]
    Unavailable(#[from] PeerError),
    #[error("the scheme owner's answer is not trustworthy: {0}")]
    Untrustworthy(String),
    #[error("more party records are asked for than the scheme owner is asked in a second")]
    Busy,
    /// The participant registry's records disagree on whom the name names (3.0): it is no one's.
    #[error("the participant registry's records disagree on whom {0} names")]
    Contested(String),
}

reason_codes! {
    TrustError {
        TrustError::Unavailable(_) => "scheme_owner_unavailable",
        TrustError::Untrustworthy(_) => "scheme_owner_untrustworthy",
        TrustError::Busy => "scheme_owner_busy",
        // A register that names no one by a name it lists is untrustworthy; a decision on the
        // name is refused as ambiguous (`Reject`'s conversion).
        TrustError::Contested(_) => "scheme_owner_untrustworthy",
    }
}

/// A chain that validated against the trusted list, with its leaf's public key.
pub struct TrustedChain {
    pub chain: ValidatedChain,
    pub key: RsaKey,
}

impl TrustedChain {
    pub fn new(chain: ValidatedChain) -> Result<Self, ChainError> {
        let key = RsaKey::of_certificate(&chain.leaf_der).map_err(|_| ChainError::NotRsa)?;
        Ok(TrustedChain { chain, key })
    }
}

/// Why a token could not be verified.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// The signer is not trusted: the caller refuses the token.
    #[error(transparent)]
    Refused(#[from] SignerError),
    /// The scheme owner could not tell whom to trust: the caller fails closed.
    #[error(transparent)]
    SchemeOwner(#[from] TrustError),
}

/// The trusted signer of a token: its validated chain and its party record.
pub struct Signer {
    pub chain: Arc<TrustedChain>,
    pub record: Arc<Party>,
}

/// What the scheme owner makes known: the trusted list (as chain validations) and party records.
#[async_trait]
pub trait Trust: Send + Sync {
    /// Validate an x5c chain (DER, leaf first) against the trusted list at `now`.
    async fn chain(
        &self,
        x5c: &[Vec<u8>],
        now: Timestamp,
    ) -> Result<Result<Arc<TrustedChain>, ChainError>, TrustError>;

    /// The party record of `id`; None when the scheme owner does not know it.
    async fn party(&self, id: &PartyId) -> Result<Option<Arc<Party>>, TrustError>;

    /// Whether a token under the certificate whose fingerprint is `leaf` may have the record of
    /// `signer` looked up. A certificate is one party's: one whose tokens name ever other parties
    /// not looked up yet is refused before it spends the lookups every caller shares.
    fn admit_lookup(&self, _leaf: &str, _signer: &PartyId) -> Result<(), TrustError> {
        Ok(())
    }

    /// Verify that `jwt` was signed by `signer`: its chain reaches a root on the trusted list (the
    /// cheap root lookup comes before any signature), the token's signature verifies with the leaf
    /// key, and the leaf is bound to `signer`, an active party.
    async fn verify_signer(
        &self,
        jwt: &DecodedJwt,
        signer: &PartyId,
        now: Timestamp,
    ) -> Result<Signer, VerifyError> {
        let chain = self
            .chain(&jwt.x5c, now)
            .await?
            .map_err(SignerError::Chain)?;
        // The signature first: a chain anyone can copy from a token never costs a lookup of the
        // party a forger names.
        jwt.verify_signature_with(&chain.key)
            .map_err(SignerError::Signature)?;
        self.admit_lookup(&chain.chain.leaf_fingerprint, signer)?;
        let record = match self.party(signer).await {
            Err(TrustError::Contested(name)) => {
                return Err(SignerError::Party(PartyError::Contested(name)).into())
            }
            found => found?,
        };
        check_party(&chain.chain, signer, record.as_deref(), now).map_err(SignerError::Party)?;
        let record = record
            .ok_or_else(|| SignerError::Party(PartyError::UnknownParty(signer.to_string())))?;
        Ok(Signer { chain, record })
    }
}
