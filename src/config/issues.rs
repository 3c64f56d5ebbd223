//! The problems found in configuration files, each with its file and key (and its line, for a
//! problem of the text), all reported at once; reading a file and parsing its TOML (unknown keys
//! and unknown words of a closed set reported, not ignored).

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
    /// Where in the file, for a problem of its text.
    pub place: Option<Place>,
    pub key: String,
    pub message: String,
    pub warning: bool,
}

/// A line and column of a file, from 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    pub line: usize,
    pub column: usize,
}

impl Place {
    /// The place of a byte offset of `text`.
    fn of(text: &str, offset: usize) -> Place {
        let before = text.get(..offset).unwrap_or(text);
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        Place {
            line: before.matches('\n').count() + 1,
            column: before[line_start..].chars().count() + 1,
        }
    }
}

impl fmt::Display for ConfigIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.file.display())?;
        if let Some(p) = self.place {
            write!(f, "line {}, column {}: ", p.line, p.column)?;
        }
        if !self.key.is_empty() {
            write!(f, "{}: ", self.key)?;
        }
        f.write_str(&self.message)
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
            ..ConfigIssue::default()
        });
    }

    /// Something allowed but risky: reported by `check` and logged at start-up.
    pub(crate) fn warn(&mut self, key: impl Into<String>, message: impl Into<String>) {
        self.all.push(ConfigIssue {
            file: self.file.clone(),
            key: key.into(),
            message: message.into(),
            warning: true,
            ..ConfigIssue::default()
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

/// Parse TOML into `T`, recording every problem of the text (see `reader`).
pub(crate) fn parse_toml<T: DeserializeOwned>(
    path: &Path,
    text: &str,
    all: &mut Vec<ConfigIssue>,
) -> Option<T> {
    let (value, found) = super::reader::read::<T>(text);
    for f in found {
        all.push(ConfigIssue {
            file: path.to_path_buf(),
            place: Some(Place::of(text, f.span.start)),
            key: f.key,
            message: f.message,
            warning: false,
        });
    }
    value
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
