//! The hash of the caches whose keys strangers choose (request heads, tokens, party ids):
//! foldhash, about half of ahash's instructions over a kilobyte and a fraction of SipHash's,
//! keyed from the operating system's random source rather than from foldhash's own seed (made of
//! addresses and the start-up time). No hash nor the order of a cache's entries is ever shown.

use foldhash::quality::SeedableRandomState;
use foldhash::SharedSeed;
use std::sync::OnceLock;

/// The hasher of a cache keyed by what strangers send.
pub type KeyedHash = SeedableRandomState;

/// 64 bits from the operating system's random source.
pub fn random_u64() -> u64 {
    let mut bytes = [0u8; 8];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
        .expect("the system's random source");
    u64::from_le_bytes(bytes)
}

/// A hasher keyed at random: by a seed the process draws once and one of its own.
pub fn keyed() -> KeyedHash {
    static SHARED: OnceLock<SharedSeed> = OnceLock::new();
    let shared = SHARED.get_or_init(|| SharedSeed::from_u64(random_u64()));
    SeedableRandomState::with_seed(random_u64(), shared)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn each_hasher_is_keyed_on_its_own() {
        let (a, b) = (keyed(), keyed());
        let key = b"Bearer eyJ...";
        assert_eq!(a.hash_one(key), a.hash_one(key));
        assert_ne!(a.hash_one(key), b.hash_one(key));
    }
}
