//! Configuration: `gateway.toml` and the route rules in `policies/*.toml`. The external types
//! (`file.rs`) are kept apart from the validated model (`model.rs`); loading (`gateway.rs`, a
//! function per section, those of the scheme and its peers in `scheme_sections.rs`, and
//! `rules.rs`) checks everything and reports every problem at once, each with its file and key.
//! Defaults live in `defaults.rs`, every key's meaning in `reference/`; `openapi/` makes a
//! starting rules file from an OpenAPI document.

pub mod decision_api;
pub mod decision_log;
pub mod defaults;
pub mod egress;
pub mod file;
mod forwarding;
mod gateway;
mod issues;
mod login;
pub mod model;
pub mod openapi;
mod pem;
mod reader;
mod redis;
pub mod reference;
mod rules;
mod scheme_sections;
mod tracing;
mod values;

use issues::{parse_toml, read};
pub use issues::{ConfigErrors, ConfigIssue, Place};
use model::Config;
use std::path::Path;

/// Load and validate `gateway.toml` and the rules it names.
pub fn load(path: &Path) -> Result<Config, ConfigErrors> {
    let mut all = Vec::new();
    match read(path, &mut all) {
        Some(text) => load_text(path, &text),
        None => Err(ConfigErrors(all)),
    }
}

/// Validate the text of a `gateway.toml` that lives at `path` (its relative paths and rules are
/// found from there).
pub fn load_text(path: &Path, text: &str) -> Result<Config, ConfigErrors> {
    let mut all = Vec::new();
    let config = parse_toml::<file::GatewayFile>(path, text, &mut all)
        .and_then(|file| gateway::build(path, file, &mut all));
    let (warnings, errors): (Vec<_>, Vec<_>) = all.into_iter().partition(|i| i.warning);
    match config {
        Some(mut c) if errors.is_empty() => {
            c.warnings = warnings;
            Ok(c)
        }
        _ => Err(ConfigErrors(errors)),
    }
}

#[cfg(test)]
mod egress_tests;
#[cfg(test)]
pub(crate) mod tests;
