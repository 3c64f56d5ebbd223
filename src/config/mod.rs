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
    read_then(path, load_text)
}

/// Validate the text of a `gateway.toml` that lives at `path` (its relative paths and rules are
/// found from there).
pub fn load_text(path: &Path, text: &str) -> Result<Config, ConfigErrors> {
    validated(path, text, gateway::build, |c, warnings| {
        c.warnings = warnings
    })
}

/// The file at `path` read, then loaded by `load`.
fn read_then<C>(
    path: &Path,
    load: impl FnOnce(&Path, &str) -> Result<C, ConfigErrors>,
) -> Result<C, ConfigErrors> {
    let mut all = Vec::new();
    match read(path, &mut all) {
        Some(text) => load(path, &text),
        None => Err(ConfigErrors(all)),
    }
}

/// `text` (the file at `path`) read as `F` and built by `build`: every error found refuses it;
/// the warnings go with it (`keep`).
fn validated<F: serde::de::DeserializeOwned, C>(
    path: &Path,
    text: &str,
    build: impl FnOnce(&Path, F, &mut Vec<ConfigIssue>) -> Option<C>,
    keep: impl FnOnce(&mut C, Vec<ConfigIssue>),
) -> Result<C, ConfigErrors> {
    let mut all = Vec::new();
    let config = parse_toml::<F>(path, text, &mut all).and_then(|file| build(path, file, &mut all));
    let (warnings, errors): (Vec<_>, Vec<_>) = all.into_iter().partition(|i| i.warning);
    match config {
        Some(mut c) if errors.is_empty() => {
            keep(&mut c, warnings);
            Ok(c)
        }
        _ => Err(ConfigErrors(errors)),
    }
}

#[cfg(test)]
mod egress_tests;
#[cfg(test)]
pub(crate) mod tests;
