//! The integration tests: one test crate whose modules are the files beside this one, each
//! through the binary or the testbed as operators and participants use them. One crate is one
//! test binary to build and link (a crate per file linked 33, each with `support` compiled in),
//! and the testbed's key material is made once for all of them. Run one file's tests alone with
//! `cargo test --test suite body::`.

mod support;

mod aliases;
mod binaries;
mod body;
mod book;
mod browser;
mod check;
mod conformance;
mod conformance_3_0;
mod container;
mod decision_api;
mod decisions;
mod delegation;
mod egress;
mod faults;
mod fleet;
mod gateway;
mod hardening;
mod instances;
mod interop;
mod login;
mod monitoring;
mod official_schemas;
mod openapi;
mod operations;
mod readers;
mod readme;
mod registry_answers;
mod resources;
mod scheme_3_0;
mod scheme_versions;
mod sign_in_attacks;
mod strict_registry;
mod testbed;
mod tracing;
