//! A table of `gateway.toml` as the reference writes it: its keys, what leaving each out means, and
//! what it does.

/// A table of `gateway.toml`.
pub struct Table {
    /// As written: `identity`, `listener` …; empty for the keys at the top level.
    pub name: &'static str,
    /// Written `[[name]]`: each one a table of its own.
    pub array: bool,
    /// What the table is for, and what leaving it out means.
    pub about: &'static str,
    pub keys: &'static [Key],
}

/// One row of a table: keys that go together, what leaving them out means, and what they do.
pub struct Key {
    /// As written in the table; `tls.certificate` for a key of a table inside it.
    pub names: &'static [&'static str],
    pub unset: Unset,
    pub meaning: &'static str,
}

/// What a key left out means.
pub enum Unset {
    /// The value `defaults.rs` holds for it.
    Defaults,
    /// As said here: `required`, `none`, or what the value is then.
    Means(&'static str),
}

impl Table {
    /// `[name]` or `[[name]]`.
    pub fn heading(&self) -> String {
        match (self.name, self.array) {
            ("", _) => "Top level".to_string(),
            (name, true) => format!("`[[{name}]]`"),
            (name, false) => format!("`[{name}]`"),
        }
    }

    /// A key's whole name, as `defaults::documented` writes it: `scheme_owner.refresh`.
    pub fn path(&self, key: &str) -> String {
        match self.name {
            "" => key.to_string(),
            table => format!("{table}.{key}"),
        }
    }
}
