//! The reference of `gateway.toml`: every key, what leaving it out means, and what it does, in the
//! order of the sample `conf/gateway.toml`. `markdown` writes the book's page from it
//! (docs/src/reference/configuration.md); the configuration's tests hold the committed page to it,
//! its defaults to `defaults.rs`, and its keys to those the reader accepts.

mod observing;
mod peers;
mod serving;
mod table;

use super::defaults;
use std::fmt::Write;
pub use table::{Key, Table, Unset};

/// The reference page, in Markdown.
pub fn markdown() -> String {
    let documented = defaults::documented();
    let mut page = String::from(INTRO);
    for table in TABLES {
        let _ = write!(page, "\n## {}\n\n", table.heading());
        if !table.about.is_empty() {
            let _ = writeln!(page, "{}\n", table.about);
        }
        page.push_str("| key | default | meaning |\n|---|---|---|\n");
        for key in table.keys {
            let names: Vec<String> = key.names.iter().map(|n| format!("`{n}`")).collect();
            let unset = match key.unset {
                Unset::Means(text) => text.to_string(),
                Unset::Defaults => key
                    .names
                    .iter()
                    .map(|n| {
                        let path = table.path(n);
                        let value = documented.iter().find(|(k, _)| *k == path);
                        value.map_or_else(
                            || format!("no default for {path}"),
                            |(_, v)| format!("`{v}`"),
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(", "),
            };
            let _ = writeln!(page, "| {} | {unset} | {} |", names.join(", "), key.meaning);
        }
    }
    page
}

const INTRO: &str = "# gateway.toml

<!-- Written by src/config/reference.rs: `UPDATE_DOCS=1 cargo test --lib configuration_reference` writes it anew. -->

Relative paths are relative to the file; durations are written `\"5s\"`, `\"10m\"`, `\"1h\"`; sizes
`\"64MiB\"`, `\"100MB\"` or a number of bytes. Unknown keys are errors, named with their line and the
known key they resemble (`adresses`: did you mean `addresses`?). `ishare-gateway check --config
gateway.toml` reports every problem at once, with its file and key. `conf/gateway.toml` is a
commented sample; the rules' keys (`policies/*.toml`) are in
[Writing rules](../guides/rules.md#a-route-with-every-key).
";

/// Every table and key of `gateway.toml`, in the order of the sample.
pub const TABLES: &[Table] = &[
    serving::TOP,
    serving::IDENTITY,
    serving::LISTENER,
    peers::SCHEME_OWNER,
    peers::TOKENS,
    peers::OUTBOUND,
    serving::UPSTREAM,
    peers::REGISTRY,
    peers::DELEGATION,
    peers::REPLAY,
    serving::ADMIN,
    serving::RULES,
    serving::FORWARDING,
    serving::SERVER,
    observing::LOG,
    observing::DECISION_LOG,
    observing::DECISION_API,
    peers::LOGIN,
    observing::TRACING,
];
