//! The live gateway's evidence: the `delegation_evidence` header verified (`header`), a broker's
//! consumer read off its assertion (`broker`), registries asked through the cache of decisions
//! (`cache`), behind the decision's `Evidence` seam (`live`).

pub mod broker;
pub mod cache;
pub mod header;
pub mod live;
