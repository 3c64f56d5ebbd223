//! Configuration: `gateway.toml` and the route rules in `policies/*.toml`. The external types
//! (`file.rs`) are kept apart from the validated model (`model.rs`); loading (`gateway.rs`, a
//! function per section, and `rules.rs`) checks everything and reports every problem at once, each
//! with its file and key. Defaults live in `defaults.rs`.

pub mod defaults;
pub mod file;
mod forwarding;
mod gateway;
pub mod model;
mod redis;
mod rules;

use crate::scheme::party::PartyId;
use file::Choice;
use model::Config;
use serde::de::DeserializeOwned;
use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One problem in a configuration file: an error, or a warning about something allowed but risky.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConfigIssue {
    pub file: PathBuf,
    pub key: String,
    pub message: String,
    pub warning: bool,
}

impl fmt::Display for ConfigIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            write!(f, "{}: {}", self.file.display(), self.message)
        } else {
            write!(f, "{}: {}: {}", self.file.display(), self.key, self.message)
        }
    }
}

/// Every problem found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigIssue>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, issue) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{issue}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// Collects problems for one file.
pub(crate) struct Issues<'a> {
    file: PathBuf,
    all: &'a mut Vec<ConfigIssue>,
}

impl Issues<'_> {
    pub(crate) fn add(&mut self, key: impl Into<String>, message: impl Into<String>) {
        self.all.push(ConfigIssue {
            file: self.file.clone(),
            key: key.into(),
            message: message.into(),
            warning: false,
        });
    }

    /// Something allowed but risky: reported by `check` and logged at start-up.
    pub(crate) fn warn(&mut self, key: impl Into<String>, message: impl Into<String>) {
        self.all.push(ConfigIssue {
            file: self.file.clone(),
            key: key.into(),
            message: message.into(),
            warning: true,
        });
    }

    /// The word of a closed set, recording an unknown one.
    pub(crate) fn choice<T>(&mut self, key: &str, c: Choice<T>) -> Option<T> {
        match c {
            Choice::Known(v) => Some(v),
            Choice::Unknown(message) => {
                self.add(key, message);
                None
            }
        }
    }

    /// The value of a check, recording its error.
    pub(crate) fn check<T>(&mut self, key: &str, r: Result<T, String>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(e) => {
                self.add(key, e);
                None
            }
        }
    }
}

/// A key path as written in these files: `upstream[0].speed`.
fn key_of(path: &serde_ignored::Path) -> String {
    use serde_ignored::Path;
    match path {
        Path::Root => String::new(),
        Path::Seq { parent, index } => format!("{}[{index}]", key_of(parent)),
        Path::Map { parent, key } => {
            let p = key_of(parent);
            if p.is_empty() {
                key.clone()
            } else {
                format!("{p}.{key}")
            }
        }
        Path::Some { parent }
        | Path::NewtypeStruct { parent }
        | Path::NewtypeVariant { parent } => key_of(parent),
    }
}

/// Parse TOML into `T`; unknown keys are all reported, not only the first.
pub(crate) fn parse_toml<T: DeserializeOwned>(
    path: &Path,
    text: &str,
    all: &mut Vec<ConfigIssue>,
) -> Option<T> {
    let mut issues = Issues {
        file: path.to_path_buf(),
        all,
    };
    let mut unknown = Vec::new();
    let parsed = toml::Deserializer::parse(text)
        .and_then(|de| serde_ignored::deserialize(de, |p| unknown.push(key_of(&p))));
    match parsed {
        Ok(v) => {
            for key in unknown {
                issues.add(key, "unknown key");
            }
            Some(v)
        }
        Err(e) => {
            issues.add("", toml_error(text, &e));
            None
        }
    }
}

/// A TOML error as `line L, column C: message`.
fn toml_error(text: &str, e: &toml::de::Error) -> String {
    let message = e.message().trim();
    match e.span() {
        Some(span) => {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
            format!("line {line}, column {column}: {message}")
        }
        None => message.to_string(),
    }
}

pub(crate) fn read(path: &Path, all: &mut Vec<ConfigIssue>) -> Option<String> {
    match std::fs::read_to_string(path) {
        Ok(t) => Some(t),
        Err(e) => {
            all.push(ConfigIssue {
                file: path.to_path_buf(),
                message: format!("cannot read: {e}"),
                ..ConfigIssue::default()
            });
            None
        }
    }
}

pub(crate) fn resolve(base: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

pub(crate) fn socket_addr(text: &str) -> Result<SocketAddr, String> {
    text.parse::<SocketAddr>().or_else(|_| {
        text.to_socket_addrs()
            .map_err(|e| format!("{text:?} is not an address: {e}"))?
            .next()
            .ok_or_else(|| format!("{text:?} resolves to no address"))
    })
}

pub(crate) fn url_of(text: &str) -> Result<String, String> {
    let url = url::Url::parse(text).map_err(|e| format!("{text:?} is not a URL: {e}"))?;
    match url.scheme() {
        "https" | "http" => Ok(text.trim_end_matches('/').to_string()),
        other => Err(format!(
            "{text:?}: the scheme must be https (or http), not {other}"
        )),
    }
}

pub(crate) fn party(text: &str) -> Result<PartyId, String> {
    PartyId::parse(text).map_err(|e| e.to_string())
}

pub(crate) fn header_name(text: &str) -> Result<http::HeaderName, String> {
    http::HeaderName::from_bytes(text.as_bytes())
        .map_err(|_| format!("{text:?} is not a header name"))
}

pub(crate) fn nonzero(d: Duration, what: &str) -> Result<Duration, String> {
    if d.is_zero() {
        Err(format!("{what} must be more than zero"))
    } else {
        Ok(d)
    }
}

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
mod tests;
