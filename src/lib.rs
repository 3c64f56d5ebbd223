//! ishare-gateway: a policy enforcement gateway for iSHARE-style data-sharing trust schemes.

pub mod access_token;
pub mod cli;
pub mod config;
pub mod conformance;
pub mod egress;
pub mod gateway;
pub mod html;
pub mod keyed;
pub mod peers;
pub mod rate;
pub mod reading;
pub mod request;
pub mod scheme;
pub mod telemetry;
pub mod testbed;
pub mod tls;
