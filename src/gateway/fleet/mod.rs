//! What the instances of a fleet share: Redis (`redis`), and the replay store of client
//! assertions' `jti`s, in memory or on Redis (`replay`).

pub mod redis;
pub mod replay;
