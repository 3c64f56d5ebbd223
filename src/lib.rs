//! ishare-gateway: a policy enforcement gateway for iSHARE-style data-sharing trust schemes.

pub mod scheme;
