//! How a Keyrock-like registry differs, as the participant and the registry of the testbed need
//! to know it: its paths, the tokens it still knows, and the id it keeps for a client.

use std::time::Duration;

/// Keyrock's token endpoint.
pub const TOKEN_PATH: &str = "/oauth2/token";
/// Keyrock's delegation endpoint.
pub const DELEGATION_PATH: &str = "/ar/delegation";
/// Keyrock's endpoint for new policies.
pub const POLICY_PATH: &str = "/ar/policy";

/// The tokens a Keyrock-like registry issued and still knows (its database's).
pub struct Known {
    tokens: moka::sync::Cache<Box<str>, ()>,
}

impl Known {
    /// Tokens known for `lifetime`, at most as many as a test can ask for.
    pub fn new(lifetime: Duration) -> Self {
        Known {
            tokens: moka::sync::Cache::builder()
                .max_capacity(100_000)
                .time_to_live(lifetime)
                .build(),
        }
    }

    /// Remember a token it issued.
    pub fn issued(&self, token: &str) {
        self.tokens.insert(token.into(), ());
    }

    /// Whether it still knows a token.
    pub fn knows(&self, token: &str) -> bool {
        self.tokens.contains_key(token)
    }

    /// Its database loses every token it issued.
    pub fn forget_all(&self) {
        self.tokens.invalidate_all();
    }
}

/// The id a Keyrock-like registry keeps for the client `party`, which it writes in `aud` of the
/// evidence it gives that client: `user-` and the first 16 hex digits of the SHA-256 of the
/// party id.
pub fn user_id(party: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, party.as_bytes());
    format!("user-{}", hex::encode(&digest.as_ref()[..8]))
}
