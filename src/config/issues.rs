//! The problems found in configuration files, each with its file and key, all reported at once;
//! reading a file and parsing its TOML (unknown keys and unknown words of a closed set reported,
//! not ignored).

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use std::fmt;
use std::path::{Path, PathBuf};

/// A word from a closed set, as written. An unknown word is kept with serde's message, so that it is
/// reported with its key beside every other problem instead of ending the parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice<T> {
    Known(T),
    Unknown(String),
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Choice<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let word = String::deserialize(d)?;
        let de = serde::de::value::StringDeserializer::<serde::de::value::Error>::new(word);
        Ok(T::deserialize(de).map_or_else(|e| Choice::Unknown(e.to_string()), Choice::Known))
    }
}

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
    pub(super) file: PathBuf,
    pub(super) all: &'a mut Vec<ConfigIssue>,
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
