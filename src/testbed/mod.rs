//! The testbed: dummy participants of the scheme on loopback — a scheme owner, an authorisation
//! registry, an entitled party, service providers, an identity provider and an echo backend — that follow the
//! specification, for the demo, the tests, and integrators.

pub mod config;
pub mod echo;
pub mod identity_provider;
pub mod keyrock;
pub mod keyrock_ways;
pub mod keys;
pub mod launch;
pub mod lockout;
pub mod participant;
pub mod party_register;
pub mod person;
pub mod pki;
pub mod policy_admin;
pub mod policy_store;
pub mod registry;
pub mod scheme_owner;
pub mod server;
pub mod service_provider;
pub mod strict;

pub use config::ConfigError;
pub use launch::{prepare, RunningParticipant, Testbed, TestbedError};
